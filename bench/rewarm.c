/* SPDX-License-Identifier: MIT */
/*
 * Re-warm figures (bench.h, bench_rewarm_run): how long a daemon takes to
 * make its most used SAXPY-sized entries again for a new toolchain with
 * one re-warm worker, what a client's miss costs meanwhile, and how many
 * store bytes keeping the requests adds per entry.
 *
 * The store bytes are counted over STORE_ENTRIES entries: the index grows
 * by 4 KiB pages, one of which is 100 bytes per entry over 40 (--quick), a
 * quarter of a SAXPY request. With fewer compiled entries, copies of the
 * two caches are filled up to that many through the bulk path (as scale.c
 * does): each further entry is a copy of a compiled entry's row under a
 * key of its own, and in the copy that keeps requests its request (the
 * SAXPY request with its own ABI string, as the compiled ones have) is kept
 * by the daemon's own code (jc__kept_store).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "bench.h"
#include "client/client_internal.h"
#include "core/kept.h"
#include "core/tier.h"

#define STORE_ENTRIES 1000

/* Apparent bytes of the store: every object file and the index files. */
static double store_bytes(const char *cache)
{
	char path[PATH_MAX + 300];
	double total = 0;
	static const char *const index_files[] = {"index.sqlite", "index.sqlite-wal"};
	struct stat st;
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", cache, index_files[i]);
		if (stat(path, &st) == 0)
			total += (double)st.st_size;
	}
	snprintf(path, sizeof(path), "%s/objects", cache);
	DIR *top = opendir(path);
	struct dirent *de, *fe;
	while (top && (de = readdir(top))) {
		char sub[PATH_MAX + 600];
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		DIR *dir = de->d_name[0] != '.' ? opendir(sub) : NULL;
		while (dir && (fe = readdir(dir))) {
			char file[PATH_MAX + 900];
			snprintf(file, sizeof(file), "%s/%s", sub, fe->d_name);
			if (fe->d_name[0] != '.' && stat(file, &st) == 0)
				total += (double)st.st_size;
		}
		if (dir)
			closedir(dir);
	}
	if (top)
		closedir(top);
	return total;
}

/* Copies the cache directory from to to (cp -a); dies on failure. */
static void copy_cache(const char *from, const char *to)
{
	char cmd[3 * PATH_MAX];
	if (snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", from, to) >= (int)sizeof(cmd) ||
	    system(cmd) != 0)
		bench_die("cannot copy %s to %s", from, to);
}

/*
 * Fills the cache at dir (no daemon on it) from entries up to
 * STORE_ENTRIES: copies of the row of key (hex) under keys of their own,
 * and with keep, each with the request saxpy freshened for it kept. Adds
 * the zstd bytes of those requests to *zsum.
 */
static void fill_entries(const char *dir, const char *hexkey, size_t entries, int keep,
			 jc_request *saxpy, double *zsum)
{
	char err[512];
	struct jc_cachedir *cd = NULL;
	struct jc_entry tmpl = {0};
	uint8_t key[16];
	for (int i = 0; i < 16; i++)
		if (sscanf(hexkey + 2 * i, "%2hhx", &key[i]) != 1)
			bench_die("bad key %s", hexkey);
	if (jc__cachedir_open(dir, 0, 5000, &cd, err, sizeof(err)) != 0)
		bench_die("open %s: %s", dir, err);
	if (cd->ops->lookup(cd, key, &tmpl) != 0)
		bench_die("entry %s is not in the index: %s", hexkey, jc__cachedir_errmsg(cd));
	for (size_t i = entries; i < STORE_ENTRIES; i++) {
		struct jc_entry e = tmpl;
		char label[64];
		snprintf(label, sizeof(label), "jitcache-bench/rewarm/bulk/%zu", i);
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits(label, strlen(label)));
		memcpy(e.key, c.digest, 16);
		if (cd->ops->put_rows(cd, &e, 1, (int64_t)getuid()) != 0)
			bench_die("bulk insert: %s", jc__cachedir_errmsg(cd));
		if (!keep)
			continue;
		bench_freshen(saxpy, "rewarm-bulk", (int)i);
		uint8_t *z;
		size_t zlen;
		if (jc__kept_encode(&saxpy->req, &z, &zlen) != 0 ||
		    jc__kept_store(cd, e.key, (uint32_t)getuid(), &saxpy->req, err, sizeof(err)) !=
			0)
			bench_die("cannot keep a request: %s", err);
		*zsum += (double)zlen;
		free(z);
	}
	jc__entry_clear(&tmpl);
	jc__cachedir_close(cd);
}

/* Extra store bytes per entry of keep over none (their caches, stopped)
 * over STORE_ENTRIES entries, entries of them compiled (key: one of those);
 * *zsum gets the zstd bytes of the bulk entries' requests. */
static double extra_store_bytes(const struct bench_daemon *keep, const struct bench_daemon *none,
				size_t entries, const char *key, jc_request *saxpy, double *zsum)
{
	if (entries >= STORE_ENTRIES)
		return (store_bytes(keep->core.cache) - store_bytes(none->core.cache)) /
		       (double)entries;
	char k[PATH_MAX + 16], n[PATH_MAX + 16];
	snprintf(k, sizeof(k), "%s.bulk", keep->core.cache);
	snprintf(n, sizeof(n), "%s.bulk", none->core.cache);
	copy_cache(keep->core.cache, k);
	copy_cache(none->core.cache, n);
	fill_entries(k, key, entries, 1, saxpy, zsum);
	fill_entries(n, key, entries, 0, saxpy, zsum);
	double extra = (store_bytes(k) - store_bytes(n)) / STORE_ENTRIES;
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", k, n);
	if (system(cmd) != 0)
		bench_die("cannot remove %s and %s", k, n);
	return extra;
}

/* The record of `warm --status` through c (dies on failure); caller clears. */
static void warm_status(jc_client *c, struct jc_admin_reply *reply)
{
	char *args[] = {(char *)"status"};
	struct jc_admin_req req = {.command = (char *)"warm", .args = {.v = args, .n = 1}};
	memset(reply, 0, sizeof(*reply));
	if (jc__client_admin(c, &req, reply) != 0 || reply->status != 0 || !reply->n_rec)
		bench_die("warm --status: %s", jc_client_errmsg(c));
}

static const char *status_str(const struct jc_admin_reply *r, const char *name)
{
	const struct jc_kv *kv = jc__record_get(&r->rec[0], name);
	return kv && !kv->is_int ? kv->s : "";
}

static int64_t status_int(const struct jc_admin_reply *r, const char *name)
{
	const struct jc_kv *kv = jc__record_get(&r->rec[0], name);
	return kv && kv->is_int ? kv->i : -1;
}

/* One fresh tiny miss through c: client wall milliseconds. */
static double tiny_miss_ms(jc_client *c, uint64_t variant)
{
	jc_request *r = bench_tiny_request(variant);
	jc_result *res = NULL;
	uint64_t t0 = jc__now_ns();
	if (jc_compile(c, r, &res) != 0 || jc_result_cache_status(res) != JC_MISS)
		bench_die("a cold compile failed: %s", jc_client_errmsg(c));
	double ms = (double)(jc__now_ns() - t0) / 1e6;
	jc_result_free(res);
	jc_request_free(r);
	return ms;
}

void bench_rewarm_run(const struct bench_plan *plan, jc_request *saxpy, struct bench_rewarm *out)
{
	struct bench_daemon keep, none;
	size_t n = plan->rewarm_entries;
	memset(out, 0, sizeof(*out));
	out->entries = n;
	bench_daemon_init(&keep);
	bench_daemon_init(&none);
	keep.extra[0] = "--rewarm-workers";
	keep.extra[1] = "1";
	none.extra[0] = "--keep-requests";
	none.extra[1] = "no";
	bench_daemon_start(&keep);
	bench_daemon_start(&none);
	jc_client *ck = bench_connect(&keep), *cn = bench_connect(&none);
	struct bench_object o;
	double zsum = 0;
	for (size_t i = 0; i < n; i++) {
		bench_freshen(saxpy, "rewarm", (int)i);
		bench_fetch(ck, saxpy, keep.core.cache, &o);
		bench_fetch(cn, saxpy, none.core.cache, &o);
		uint8_t *z;
		size_t zlen;
		if (jc__kept_encode(&saxpy->req, &z, &zlen) != 0)
			bench_die("cannot encode a request");
		zsum += (double)zlen;
		free(z);
	}
	jc_client_close(ck);
	jc_client_close(cn);
	bench_daemon_stop(&keep); /* the index is checkpointed at a clean stop */
	bench_daemon_stop(&none);
	out->store_entries = n > STORE_ENTRIES ? n : STORE_ENTRIES;
	out->extra_bytes = extra_store_bytes(&keep, &none, n, o.key, saxpy, &zsum);
	out->zstd_bytes = zsum / (double)out->store_entries;
	bench_daemon_cleanup(&none, 0);

	/* Another NVRTC build, as far as the identity goes (the test-only
	 * override): the daemon starts the re-warm by itself. */
	setenv("JITCACHE_TEST_NVRTC_ID", "build-id:00000000000000000000000000000000000bench", 1);
	bench_daemon_start(&keep);
	unsetenv("JITCACHE_TEST_NVRTC_ID");
	ck = bench_connect(&keep);
	double during[16], idle[16];
	int nd = 0, ni = 0;
	struct jc_admin_reply st;
	for (;;) {
		warm_status(ck, &st);
		int running = strcmp(status_str(&st, "state"), "running") == 0;
		if (!running)
			break;
		jc__admin_reply_clear(&st);
		if (nd < 5)
			during[nd++] = tiny_miss_ms(ck, jc__now_ns() | 1);
		else
			usleep(50000);
	}
	out->total_s = (double)status_int(&st, "elapsed_ms") / 1e3;
	out->cpu_s = (double)status_int(&st, "cpu_ms") / 1e3;
	if (status_int(&st, "done") != (int64_t)n)
		bench_die("the re-warm made %lld of %zu entries (see %s)",
			  (long long)status_int(&st, "done"), n, keep.core.log);
	jc__admin_reply_clear(&st);
	out->per_entry_ms = out->total_s * 1e3 / (double)n;
	while (ni < (nd ? nd : 1))
		idle[ni++] = tiny_miss_ms(ck, jc__now_ns() | 1);
	out->miss_idle_ms = jtl_median(idle, (size_t)ni);
	out->miss_rewarm_ms = nd ? jtl_median(during, (size_t)nd) : out->miss_idle_ms;
	jc_client_close(ck);
	bench_daemon_stop(&keep);
	bench_daemon_cleanup(&keep, 0);
}
