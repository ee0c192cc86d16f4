/* SPDX-License-Identifier: MIT */
/*
 * Many client processes on one daemon: 64 processes released at once by a
 * barrier ask for one uncached key (exactly one NVRTC compile, 63 joins,
 * identical bytes and lowered names for all), then 64 processes run a mixed
 * load of hits, misses and failing sources and check every artifact against
 * NVRTC's own output, computed in this process.
 *
 * Helpers are this binary run again: `test_parallel --helper client SOCK
 * REFDIR BARRIER_FD READY_FD SEED REQUESTS POOL`, where POOL is
 * "kind:n,kind:n,..." (jct_variant numbers; REFDIR/<i>.* holds the reference
 * of the i-th). A helper connects, writes a byte to READY_FD, waits on the
 * barrier, runs its requests and prints one line: requests errors
 * wrong_bytes misses hits joins negative_hits.
 *
 * test_threads_under_churn: hits served by several serving threads at once
 * while entries are purged and objects replaced on disk.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"
#include "tests/lib/variants.h"

#define CLIENTS 64

static void run_clients(const struct jtl_daemon *d, const char *refdir, const char *spec, int nreq,
			unsigned seed, struct jct_tally *t)
{
	struct jct_clients cl;
	jct_clients_start(d, refdir, spec, CLIENTS, nreq, seed, &cl);
	jct_clients_finish(&cl, t);
}

static int setup(void **state)
{
	jct_fx_new(state, NULL);
	return 0;
}

static void test_single_flight(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jtl_now_s();
	struct jct_pool p;
	jct_pool_parse("2:1", &p);
	jct_pool_make_refs(&p, f->refdir);
	/* NVRTC's output is deterministic: a second compile gives the same bytes
	 * (the reference comparison below relies on it). */
	struct jct_ref again;
	jct_ref_compile(&p.v[0], &again);
	assert_int_equal(again.size, p.ref[0].size);
	assert_memory_equal(again.data, p.ref[0].data, again.size);
	assert_string_equal(again.lowered, p.ref[0].lowered);
	jct_ref_free(&again);

	jct_daemon_start(&f->d, NULL);
	int64_t compiles = jct_stat(&f->d, "compiles"),
		joins = jct_stat(&f->d, "single_flight_joins");
	struct jct_tally t;
	run_clients(&f->d, f->refdir, "2:1", 1, 1, &t);
	printf("single flight: %llu processes, %llu requests, %llu errors, %llu wrong bytes; "
	       "%llu miss, %llu joined, %llu hit; %.1f s\n",
	       (unsigned long long)t.lines, (unsigned long long)t.requests,
	       (unsigned long long)t.errors, (unsigned long long)t.wrong,
	       (unsigned long long)t.misses, (unsigned long long)t.joins,
	       (unsigned long long)t.hits, jtl_now_s() - t0);
	assert_int_equal(t.failed_exits, 0);
	assert_int_equal(t.lines, CLIENTS);
	assert_int_equal(t.requests, CLIENTS);
	assert_int_equal(t.errors, 0);
	assert_int_equal(t.wrong, 0);
	assert_int_equal(t.misses, 1);
	assert_int_equal(t.joins, CLIENTS - 1);
	assert_int_equal(jct_stat(&f->d, "compiles") - compiles, 1);
	assert_int_equal(jct_stat(&f->d, "single_flight_joins") - joins, CLIENTS - 1);
	jct_pool_free(&p);
}

/* 8 hits (compiled before the load), 16 misses and 4 failing sources. */
#define MIX_HITS     8
#define MIX_MISSES   16
#define MIX_FAILS    4
#define MIX_REQUESTS 24 /* per process */

static void test_mixed_load(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jtl_now_s();
	char spec[512];
	size_t n = 0;
	for (int i = 0; i < MIX_HITS + MIX_MISSES; i++)
		n += (size_t)snprintf(spec + n, sizeof(spec) - n, "0:%d,", i);
	for (int i = 0; i < MIX_FAILS; i++)
		n += (size_t)snprintf(spec + n, sizeof(spec) - n, "1:%d,", i);
	spec[n - 1] = '\0';
	struct jct_pool p;
	jct_pool_parse(spec, &p);
	jct_pool_make_refs(&p, f->refdir);
	jct_daemon_start(&f->d, NULL);
	/* The hits: compiled now, and equal to NVRTC's output from another process. */
	jc_client *c = jct_connect(&f->d);
	for (int i = 0; i < MIX_HITS; i++) {
		uint64_t wrong = 0;
		int rc, status;
		assert_int_equal(jct_pool_fetch(&p, i, c, "warm-up", &rc, &status, &wrong), 0);
		assert_int_equal(status, JC_MISS);
	}
	jc_client_close(c);
	int64_t compiles = jct_stat(&f->d, "compiles");

	struct jct_tally t;
	run_clients(&f->d, f->refdir, spec, MIX_REQUESTS, 1000, &t);
	printf("mixed load: %llu processes, %llu requests (%llu hits, %llu misses, %llu joined, "
	       "%llu negative hits), %llu errors, %llu wrong bytes; %.1f s\n",
	       (unsigned long long)t.lines, (unsigned long long)t.requests,
	       (unsigned long long)t.hits, (unsigned long long)t.misses,
	       (unsigned long long)t.joins, (unsigned long long)t.negative_hits,
	       (unsigned long long)t.errors, (unsigned long long)t.wrong, jtl_now_s() - t0);
	assert_int_equal(t.failed_exits, 0);
	assert_int_equal(t.lines, CLIENTS);
	assert_int_equal(t.requests, CLIENTS * MIX_REQUESTS);
	assert_int_equal(t.errors, 0);
	assert_int_equal(t.wrong, 0);
	/* Every uncached key (all are asked for) compiled once, whoever asked first. */
	assert_int_equal(jct_stat(&f->d, "compiles") - compiles, MIX_MISSES + MIX_FAILS);
	assert_int_equal(t.misses, MIX_MISSES + MIX_FAILS);
	assert_true(t.hits > 0 && t.negative_hits > 0);
	jct_pool_free(&p);
}

/* Hits from 8 processes while purge --all runs again and again: a purged
 * entry is a miss, never a corrupt object, and nobody gets wrong bytes. */
static void test_purge_under_load(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jtl_now_s();
	const char *spec = "0:0,0:1,0:2,0:3,0:4,0:5";
	struct jct_pool p;
	jct_pool_parse(spec, &p);
	jct_pool_make_refs(&p, f->refdir);
	jct_daemon_start(&f->d, NULL);
	struct jct_clients cl;
	jct_clients_start(&f->d, f->refdir, spec, 8, 200, 77, &cl);
	int purges = 0;
	const char *purge[] = {"purge", "--all", NULL};
	for (int alive = 1; alive; purges++) {
		assert_int_equal(jct_ctl(&f->d, NULL, NULL, purge), 0);
		usleep(20000);
		alive = jct_clients_running(&cl);
	}
	struct jct_tally t;
	jct_clients_finish(&cl, &t);
	int64_t corrupt = jct_stat(&f->d, "corrupt_objects");
	printf("purge under load: %d purges, %llu requests (%llu hits, %llu misses, %llu joined), "
	       "%llu errors, %llu wrong bytes, %lld corrupt objects counted; %.1f s\n",
	       purges, (unsigned long long)t.requests, (unsigned long long)t.hits,
	       (unsigned long long)t.misses, (unsigned long long)t.joins,
	       (unsigned long long)t.errors, (unsigned long long)t.wrong, (long long)corrupt,
	       jtl_now_s() - t0);
	assert_int_equal(t.failed_exits, 0);
	assert_int_equal(t.errors, 0);
	assert_int_equal(t.wrong, 0);
	assert_true(t.misses > (uint64_t)p.n && t.hits > 0);
	assert_int_equal(corrupt, 0);
	jct_pool_free(&p);
}

#define CHURN_CLIENTS 16

/* 16 processes hit 4 keys on a daemon of 4 serving threads (more threads
 * than this machine has CPUs: they preempt each other mid-request) while
 * the entries are purged and their objects replaced on disk by other bytes
 * of the same size, again and again: every answer is NVRTC's bytes or a
 * recompile, never wrong bytes, never an error. Then, with no churn, the
 * hits the daemon counts (each serving thread counts its own; stats sums
 * them) are exactly the hits the clients saw. */
static void test_threads_under_churn(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jtl_now_s();
	const char *spec = "0:0,0:1,0:2,0:3";
	struct jct_pool p;
	jct_pool_parse(spec, &p);
	jct_pool_make_refs(&p, f->refdir);
	const char *extra[] = {"--serve-threads", "4", NULL};
	jct_daemon_start(&f->d, extra);
	struct jct_clients cl;
	jct_clients_start(&f->d, f->refdir, spec, CHURN_CLIENTS, 150, 4242, &cl);
	const char *purge[] = {"purge", "--all", NULL};
	int purges = 0, replaced = 0;
	for (int round = 0, alive = 1; alive; round++) {
		if (round % 3 == 0) {
			assert_int_equal(jct_ctl(&f->d, NULL, NULL, purge), 0);
			purges++;
		} else {
			const struct jct_ref *r = &p.ref[round % p.n];
			jct_replace_object(jct_object_path(f->d.cache, r->data, r->size),
					   r->size); /* -1: purged meanwhile */
			replaced++;
		}
		usleep(15000);
		alive = jct_clients_running(&cl);
	}
	struct jct_tally t;
	jct_clients_finish(&cl, &t);
	printf("threads under churn: %d purges, %d objects replaced, %llu requests (%llu hits, "
	       "%llu misses, %llu joined), %llu errors, %llu wrong bytes, %lld corrupt objects; "
	       "%.1f s\n",
	       purges, replaced, (unsigned long long)t.requests, (unsigned long long)t.hits,
	       (unsigned long long)t.misses, (unsigned long long)t.joins,
	       (unsigned long long)t.errors, (unsigned long long)t.wrong,
	       (long long)jct_stat(&f->d, "corrupt_objects"), jtl_now_s() - t0);
	assert_int_equal(t.failed_exits, 0);
	assert_int_equal(t.lines, CHURN_CLIENTS);
	assert_int_equal(t.errors, 0);
	assert_int_equal(t.wrong, 0);
	assert_true(t.hits > 0 && t.misses > (uint64_t)p.n);

	/* Calm: every key compiled again first, then only hits. */
	jc_client *c = jct_connect(&f->d);
	for (int i = 0; i < p.n; i++) {
		uint64_t wrong = 0;
		int rc, status;
		assert_int_equal(jct_pool_fetch(&p, i, c, "calm", &rc, &status, &wrong), 0);
		assert_int_equal(wrong, 0);
	}
	jc_client_close(c);
	int64_t hits = jct_stat(&f->d, "hits");
	jct_clients_start(&f->d, f->refdir, spec, CHURN_CLIENTS, 100, 5151, &cl);
	jct_clients_finish(&cl, &t);
	assert_int_equal(t.errors, 0);
	assert_int_equal(t.wrong, 0);
	assert_int_equal(t.hits, (uint64_t)CHURN_CLIENTS * 100);
	assert_int_equal(jct_stat(&f->d, "hits") - hits, (int64_t)t.hits);
	jct_pool_free(&p);
}

int main(int argc, char **argv)
{
	if (argc == 10 && strcmp(argv[1], "--helper") == 0 && strcmp(argv[2], "client") == 0)
		return jct_helper_client(argv + 3);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_single_flight, setup, jct_fx_free),
	    cmocka_unit_test_setup_teardown(test_mixed_load, setup, jct_fx_free),
	    cmocka_unit_test_setup_teardown(test_purge_under_load, setup, jct_fx_free),
	    cmocka_unit_test_setup_teardown(test_threads_under_churn, setup, jct_fx_free),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
