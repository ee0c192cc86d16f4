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
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "robust.h"

#define CLIENTS 64

/* The client helper: see the top of the file. */
static int helper_client(char **argv)
{
	const char *sock = argv[0], *refdir = argv[1];
	int barrier = atoi(argv[2]), ready = atoi(argv[3]), nreq = atoi(argv[5]);
	unsigned seed = (unsigned)strtoul(argv[4], NULL, 10);
	struct jct_pool p;
	jct_pool_parse(argv[6], &p);
	jct_pool_load_refs(&p, refdir);
	/* Connect first: the barrier then releases 64 ready requests at once. */
	jc_client *c = NULL;
	int rc = jc_client_connect(sock, &c);
	if (write(ready, "r", 1) != 1)
		rc = JC_EIO;
	close(ready);
	jct_barrier_wait(barrier);
	uint64_t wrong = 0, errors = 0, by_status[5] = {0};
	int done = 0;
	for (; rc == 0 && done < nreq; done++) {
		int i = (int)(rand_r(&seed) % (unsigned)p.n), got, status;
		errors += (uint64_t)jct_pool_fetch(&p, i, c, "client", &got, &status, &wrong);
		by_status[status]++;
	}
	if (rc != 0)
		fprintf(stderr, "client: %s\n", jc_client_errmsg(NULL));
	errors += (uint64_t)(nreq - done);
	printf("%d %llu %llu %llu %llu %llu %llu\n", done, (unsigned long long)errors,
	       (unsigned long long)wrong, (unsigned long long)by_status[JC_MISS],
	       (unsigned long long)by_status[JC_HIT], (unsigned long long)by_status[JC_JOINED],
	       (unsigned long long)by_status[JC_NEGATIVE_HIT]);
	jc_client_close(c);
	jct_pool_free(&p);
	return errors || wrong ? 1 : 0;
}

struct tally {
	uint64_t failed_exits, lines, requests, errors, wrong, misses, hits, joins, negative_hits;
};

struct clients {
	pid_t pids[CLIENTS];
	int n;
	int out; /* read end of their stdout */
};

/* Starts n helpers on pool spec and releases them at once once all have connected. */
static void start_clients(const struct jc_test_daemon *d, const char *refdir, const char *spec,
			  int n, int nreq, unsigned seed, struct clients *cl)
{
	char bfd[16], rfd[16], sseed[32], sreq[16];
	int release, out[2], ready[2];
	int barrier = jct_barrier(&release);
	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(ready), 0);
	snprintf(bfd, sizeof(bfd), "%d", barrier);
	snprintf(rfd, sizeof(rfd), "%d", ready[1]);
	snprintf(sreq, sizeof(sreq), "%d", nreq);
	cl->n = n;
	for (int i = 0; i < n; i++) {
		snprintf(sseed, sizeof(sseed), "%u", seed + (unsigned)i * 7919u);
		const char *args[] = {d->sock, refdir, bfd, rfd, sseed, sreq, spec, NULL};
		cl->pids[i] = jct_spawn_helper("client", args, out[1]);
	}
	close(out[1]);
	close(ready[1]);
	close(barrier);
	/* Every helper has connected (or died: EOF), then all go at once. */
	char buf[CLIENTS];
	ssize_t got;
	for (int k = 0; k < n; k += (int)got)
		if ((got = read(ready[0], buf, sizeof(buf))) <= 0)
			break;
	close(ready[0]);
	close(release);
	cl->out = out[0];
}

/* Waits for the helpers and sums their lines. */
static void finish_clients(struct clients *cl, struct tally *t)
{
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < cl->n; i++)
		t->failed_exits += jct_wait(cl->pids[i]) != 0;
	FILE *f = fdopen(cl->out, "r");
	unsigned long long v[7];
	while (fscanf(f, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
		      &v[5], &v[6]) == 7) {
		t->lines++;
		t->requests += v[0];
		t->errors += v[1];
		t->wrong += v[2];
		t->misses += v[3];
		t->hits += v[4];
		t->joins += v[5];
		t->negative_hits += v[6];
	}
	fclose(f);
}

static void run_clients(const struct jc_test_daemon *d, const char *refdir, const char *spec,
			int nreq, unsigned seed, struct tally *t)
{
	struct clients cl;
	start_clients(d, refdir, spec, CLIENTS, nreq, seed, &cl);
	finish_clients(&cl, t);
}

static int setup(void **state)
{
	jct_fx_new(state, NULL);
	return 0;
}

static void test_single_flight(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jct_now();
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
	int64_t compiles = jct_stat(&f->d, "compiles"), joins = jct_stat(&f->d, "single_flight_joins");
	struct tally t;
	run_clients(&f->d, f->refdir, "2:1", 1, 1, &t);
	printf("single flight: %llu processes, %llu requests, %llu errors, %llu wrong bytes; "
	       "%llu miss, %llu joined, %llu hit; %.1f s\n",
	       (unsigned long long)t.lines, (unsigned long long)t.requests,
	       (unsigned long long)t.errors, (unsigned long long)t.wrong,
	       (unsigned long long)t.misses, (unsigned long long)t.joins,
	       (unsigned long long)t.hits, jct_now() - t0);
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
#define MIX_HITS 8
#define MIX_MISSES 16
#define MIX_FAILS 4
#define MIX_REQUESTS 24 /* per process */

static void test_mixed_load(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jct_now();
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

	struct tally t;
	run_clients(&f->d, f->refdir, spec, MIX_REQUESTS, 1000, &t);
	printf("mixed load: %llu processes, %llu requests (%llu hits, %llu misses, %llu joined, "
	       "%llu negative hits), %llu errors, %llu wrong bytes; %.1f s\n",
	       (unsigned long long)t.lines, (unsigned long long)t.requests,
	       (unsigned long long)t.hits, (unsigned long long)t.misses,
	       (unsigned long long)t.joins, (unsigned long long)t.negative_hits,
	       (unsigned long long)t.errors, (unsigned long long)t.wrong, jct_now() - t0);
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
	double t0 = jct_now();
	const char *spec = "0:0,0:1,0:2,0:3,0:4,0:5";
	struct jct_pool p;
	jct_pool_parse(spec, &p);
	jct_pool_make_refs(&p, f->refdir);
	jct_daemon_start(&f->d, NULL);
	struct clients cl;
	start_clients(&f->d, f->refdir, spec, 8, 200, 77, &cl);
	int purges = 0;
	const char *purge[] = {"purge", "--all", NULL};
	for (int alive = 1; alive; purges++) {
		assert_int_equal(jct_ctl(&f->d, NULL, NULL, purge), 0);
		usleep(20000);
		alive = 0;
		for (int i = 0; i < cl.n; i++) {
			siginfo_t si = {0};
			waitid(P_PID, (id_t)cl.pids[i], &si, WEXITED | WNOHANG | WNOWAIT);
			alive |= si.si_pid == 0;
		}
	}
	struct tally t;
	finish_clients(&cl, &t);
	int64_t corrupt = jct_stat(&f->d, "corrupt_objects");
	printf("purge under load: %d purges, %llu requests (%llu hits, %llu misses, %llu joined), "
	       "%llu errors, %llu wrong bytes, %lld corrupt objects counted; %.1f s\n",
	       purges, (unsigned long long)t.requests, (unsigned long long)t.hits,
	       (unsigned long long)t.misses, (unsigned long long)t.joins,
	       (unsigned long long)t.errors, (unsigned long long)t.wrong, (long long)corrupt,
	       jct_now() - t0);
	assert_int_equal(t.failed_exits, 0);
	assert_int_equal(t.errors, 0);
	assert_int_equal(t.wrong, 0);
	assert_true(t.misses > (uint64_t)p.n && t.hits > 0);
	assert_int_equal(corrupt, 0);
	jct_pool_free(&p);
}

int main(int argc, char **argv)
{
	if (argc == 10 && strcmp(argv[1], "--helper") == 0 && strcmp(argv[2], "client") == 0)
		return helper_client(argv + 3);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_single_flight, setup, jct_fx_free),
		cmocka_unit_test_setup_teardown(test_mixed_load, setup, jct_fx_free),
		cmocka_unit_test_setup_teardown(test_purge_under_load, setup, jct_fx_free),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
