/* SPDX-License-Identifier: MIT */
/*
 * Scale: hit latency and restart time with 1k to 1M entries in the index.
 *
 * Compiling a million kernels is out of reach, so the entries come through a
 * documented bulk path. Entry i is the tiny kernel with the comment line
 * "// entry i" added: a distinct source, hence a distinct key, computed by
 * the daemon's own key derivation (jc__key_compute over the very request the
 * client library sends, with the toolchain identity probed the same way).
 * Entries 1 and 2 are compiled for real through the daemon first; the run
 * checks that they produced the same object bytes (a comment does not change
 * the cubin) and that the key computed here equals the daemon's. Every other
 * entry is then a copy of entry 1's row under its own key, written with
 * the local tier's put_rows (tier.h) while the daemon is stopped and the cache lock held;
 * all of them name entry 1's object, as the content-addressed store would
 * after compiling them one by one (identical outputs are stored once). So
 * the index holds N real rows, and any of them is a real hit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "client/client_internal.h"
#include "core/key.h"
#include "core/tier.h"
#include "core/toolchain.h"

#define WORKING_SET 1000
#define BATCH	    20000

static const char tiny_src[] =
    "extern \"C\" __global__ void bench_scale(float *x, float a, unsigned n)\n"
    "{\n"
    "\tunsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "\tif (i < n)\n"
    "\t\tx[i] = a * x[i];\n"
    "}\n";

jc_request *bench_tiny_request(uint64_t variant)
{
	char src[sizeof(tiny_src) + 64];
	int n = variant ? snprintf(src, sizeof(src), "%s// entry %llu\n", tiny_src,
				   (unsigned long long)variant)
			: snprintf(src, sizeof(src), "%s", tiny_src);
	jc_request *r = NULL;
	if (jc_request_new(&r) != 0 ||
	    jc_request_set_source(r, "bench_tiny.cu", src, (size_t)n) != 0 ||
	    jc_request_set_arch(r, "sm_90") != 0)
		bench_die("out of memory");
	return r;
}

/* splitmix64: a fixed sequence, so runs pick the same keys. */
static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void key_of(const struct jc_toolchain *tc, uint64_t variant, uint8_t key[16])
{
	char err[256];
	jc_request *r = bench_tiny_request(variant);
	if (jc__key_compute(&r->req, tc, key, err, sizeof(err)) != 0)
		bench_die("key: %s", err);
	jc_request_free(r);
}

static int cmp_key(const void *a, const void *b)
{
	return memcmp(((const struct jc_entry *)a)->key, ((const struct jc_entry *)b)->key, 16);
}

/* Adds entries first..last (variants) as copies of entry 1's row. */
static void bulk_insert(const struct bench_daemon *d, const struct jc_toolchain *tc, uint64_t first,
			uint64_t last)
{
	char err[512];
	struct jc_cachedir *cd = NULL;
	if (jc__cachedir_open(d->core.cache, 0, 5000, &cd, err, sizeof(err)) != 0)
		bench_die("open %s: %s", d->core.cache, err);
	struct jc_entry tmpl = {0};
	uint8_t key1[16];
	key_of(tc, 1, key1);
	if (cd->ops->lookup(cd, key1, &tmpl) != 0)
		bench_die("entry 1 is not in the index: %s", jc__cachedir_errmsg(cd));
	struct jc_entry *batch = malloc(BATCH * sizeof(*batch));
	if (!batch)
		bench_die("out of memory");
	int64_t now = (int64_t)time(NULL);
	for (uint64_t v = first; v <= last;) {
		size_t n = 0;
		/* In key order, each batch touches the key index's pages once. */
		for (; n < BATCH && v <= last; n++, v++) {
			batch[n] = tmpl;
			key_of(tc, v, batch[n].key);
			batch[n].created = batch[n].last_access = now;
			batch[n].hits = 0;
		}
		qsort(batch, n, sizeof(*batch), cmp_key);
		if (cd->ops->put_rows(cd, batch, n, -1) != 0)
			bench_die("bulk insert: %s", jc__cachedir_errmsg(cd));
	}
	free(batch);
	jc__entry_clear(&tmpl);
	jc__cachedir_close(cd);
}

/* Timed hit of variant v through c, in microseconds. */
static uint64_t hit_ns(jc_client *c, uint64_t v)
{
	jc_request *r = bench_tiny_request(v);
	jc_result *res = NULL;
	uint64_t t0 = jc__now_ns();
	int rc = jc_compile(c, r, &res);
	uint64_t t = jc__now_ns() - t0;
	if (rc != 0 || jc_result_cache_status(res) != JC_HIT)
		bench_die("entry %llu: expected a hit (%s)", (unsigned long long)v,
			  rc ? jc_client_errmsg(c) : "not a hit");
	jc_result_free(res);
	jc_request_free(r);
	return t;
}

static void measure(const struct bench_daemon *d, size_t entries, size_t iters, uint64_t *seed,
		    struct bench_scale *out)
{
	jc_client *c = bench_connect(d);
	uint64_t *ns = malloc(iters * sizeof(*ns));
	uint64_t ws[WORKING_SET];
	size_t w = entries < WORKING_SET ? entries : WORKING_SET;
	if (!ns)
		bench_die("out of memory");
	out->first_hit_us = (double)hit_ns(c, 1 + next_rand(seed) % entries) / 1e3;
	if ((size_t)bench_stat(c, "entries") < entries)
		bench_die("the daemon sees fewer than %zu entries", entries);
	for (size_t i = 0; i < w; i++)
		ws[i] = 1 + next_rand(seed) % entries;
	for (size_t i = 0; i < w; i++) /* warm the working set */
		hit_ns(c, ws[i]);
	for (size_t i = 0; i < iters; i++)
		ns[i] = hit_ns(c, ws[next_rand(seed) % w]);
	struct bench_lat lat;
	bench_lat_of(ns, iters, &lat);
	out->hit_p50_us = lat.p50;
	for (size_t i = 0; i < iters; i++)
		ns[i] = hit_ns(c, 1 + next_rand(seed) % entries);
	bench_lat_of(ns, iters, &lat);
	out->spread_p50_us = lat.p50;
	free(ns);
	jc_client_close(c);
}

void bench_scale_run(struct bench_daemon *d, const struct bench_plan *plan, struct bench_scale *out)
{
	struct jc_toolchain tc;
	char err[512];
	if (jc__toolchain_probe(&tc, err, sizeof(err)) != 0)
		bench_die("toolchain: %s", err);
	/* Entries 1 and 2 for real: same bytes, and our key is the daemon's. */
	jc_client *c = bench_connect(d);
	struct bench_object o1, o2;
	jc_request *r1 = bench_tiny_request(1), *r2 = bench_tiny_request(2);
	bench_fetch(c, r1, d->core.cache, &o1);
	bench_fetch(c, r2, d->core.cache, &o2);
	jc_request_free(r1);
	jc_request_free(r2);
	jc_client_close(c);
	if (strcmp(o1.path, o2.path) != 0)
		bench_die("entries 1 and 2 compiled to different bytes: the bulk path's shared "
			  "object would not be what a compile gives");
	uint8_t key[16];
	char hex[33];
	key_of(&tc, 1, key);
	jc__hex16(key, hex);
	if (strcmp(hex, o1.key) != 0)
		bench_die("key derivation here (%s) differs from the daemon's (%s)", hex, o1.key);

	uint64_t have = 2, seed = 0x6a63626e6368ull;
	for (size_t i = 0; i < plan->n_scale; i++) {
		struct bench_scale *s = &out[i];
		s->entries = plan->scale[i];
		bench_daemon_stop(d);
		uint64_t t0 = jc__now_ns();
		if (s->entries > have)
			bulk_insert(d, &tc, have + 1, s->entries);
		have = s->entries > have ? s->entries : have;
		s->insert_s = (double)(jc__now_ns() - t0) / 1e9;
		s->ready_ms = bench_daemon_start(d);
		measure(d, s->entries, plan->scale_iters, &seed, s);
	}
}
