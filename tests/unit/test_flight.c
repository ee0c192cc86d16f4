/* SPDX-License-Identifier: MIT */
/*
 * The request path and single flight without a server or NVRTC: the
 * daemon's own cache.c, flight.c and memcache.c over a real cache directory
 * (jc__cachedir_open: store and SQLite index in a mkdtemp directory) and a
 * real libuv loop (publishing runs in its thread pool), with two fakes in
 * place of what needs processes: the worker pool (jc__pool_*, defined here:
 * jobs are held until the test ends them) and the connections (a
 * jc_conn_ops table that records every answer).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/daemon.h"
#include "daemon/pool.h"
#include "jitcache/jitcache.h"
#include "tests/lib/test.h"

/* --- the fake worker pool ------------------------------------------------- */

#define MAX_JOBS 16

struct jc_pool {
	struct jc_pool_job *queue[MAX_JOBS]; /* submitted, not yet taken */
	size_t n;
	size_t submitted;
	int stopping;
};

static struct jc_pool fake_pool;
/* The daemon's toolchain (setup), and the compiler fake workers report:
 * its own unless a test names another. */
static struct jc_toolchain fake_tc;
static const char *worker_compiler;
/* d->request.hooks.toolchain_recheck calls (main.c's in the daemon). */
static int rechecks;

static void toolchain_recheck(struct jc_daemon *d, const char *why)
{
	(void)d;
	(void)why;
	rechecks++;
}

void jc__pool_submit(struct jc_pool *p, struct jc_pool_job *job)
{
	if (p->stopping) {
		job->done(job, JC_EBUSY);
		return;
	}
	assert_true(p->n < MAX_JOBS);
	p->queue[p->n++] = job;
	p->submitted++;
}

int jc__pool_promote(struct jc_pool *p, struct jc_pool_job *job)
{
	(void)p;
	job->idle = 0; /* one queue here: promoted where it stands */
	return 1;
}

int jc__pool_busy(const struct jc_pool *p)
{
	return p->n > 0;
}

const char *jc__pool_cwd(const struct jc_pool *p)
{
	(void)p;
	return "/";
}

/* What a worker would do with the oldest job: ask whether it is still
 * wanted, then end it with res (moved into the job's result; status and
 * log as given). Returns 0 when the job was dropped instead. */
static int run_job(int status, const char *data, const char *log)
{
	assert_true(fake_pool.n > 0);
	struct jc_pool_job *job = fake_pool.queue[0];
	memmove(fake_pool.queue, fake_pool.queue + 1, --fake_pool.n * sizeof(fake_pool.queue[0]));
	if (job->wanted && !job->wanted(job))
		return 0;
	jc__res_clear(job->res);
	job->res->status = status;
	job->res->output = job->req->output;
	if (data) {
		job->res->size = strlen(data);
		job->res->data = (uint8_t *)strdup(data);
	}
	if (log)
		job->res->log = strdup(log);
	job->res->compile_ns = 1000;
	char own[512];
	assert_int_equal(jc__toolchain_compiler(&fake_tc, own, sizeof(own)), 0);
	job->res->compiler = strdup(worker_compiler ? worker_compiler : own);
	job->done(job, 0);
	return 1;
}

/* What jc__pool_stop does with queued jobs. */
static void cancel_jobs(void)
{
	while (fake_pool.n) {
		struct jc_pool_job *job = fake_pool.queue[--fake_pool.n];
		job->done(job, JC_EBUSY);
	}
}

/* --- fake connections -------------------------------------------------- */

struct jc_conn {
	int refs;	/* 1: the test's own */
	int answers;	/* results and errors sent */
	int done;	/* jc_conn_ops.done calls */
	int gone;	/* the client hung up */
	int status;	/* of the last answer: a result's status or an error's code */
	uint32_t cache; /* of the last result */
	char log[256];	/* of the last result */
	char message[512];
	size_t size; /* of the last result's artifact (data, or the descriptor's file) */
};

static void fake_send_result(struct jc_conn *c, const struct jc_res *res, int objfd)
{
	c->answers++;
	c->status = res->status;
	c->cache = res->cache;
	snprintf(c->log, sizeof(c->log), "%s", res->log ? res->log : "");
	snprintf(c->message, sizeof(c->message), "%s", res->message ? res->message : "");
	c->size = res->data ? res->size : 0;
	if (objfd >= 0) {
		off_t end = lseek(objfd, 0, SEEK_END);
		assert_true(end >= 0);
		c->size = (size_t)end;
		close(objfd);
	}
}

static void fake_send_error(struct jc_conn *c, int code, const char *message)
{
	c->answers++;
	c->status = code;
	snprintf(c->message, sizeof(c->message), "%s", message);
}

static void fake_done(struct jc_conn *c)
{
	c->done++;
}

static void fake_ref(struct jc_conn *c)
{
	c->refs++;
}

static void fake_unref(struct jc_conn *c)
{
	assert_true(c->refs > 1); /* the test's own reference is never dropped here */
	c->refs--;
}

static int fake_gone(struct jc_conn *c)
{
	return c->gone;
}

static uid_t fake_uid(const struct jc_conn *c)
{
	(void)c;
	return geteuid();
}

static pid_t fake_pid(const struct jc_conn *c)
{
	(void)c;
	return getpid();
}

static struct jc_conn *fake_internal(struct jc_daemon *d, const struct jc_conn *like, uid_t uid,
				     jc_conn_sink_fn sink, void *ctx)
{
	(void)d, (void)like, (void)uid, (void)sink, (void)ctx;
	return NULL; /* no fatbin requests here */
}

static const struct jc_conn_ops fake_ops = {
    .send_result = fake_send_result,
    .send_error = fake_send_error,
    .done = fake_done,
    .ref = fake_ref,
    .unref = fake_unref,
    .gone = fake_gone,
    .uid = fake_uid,
    .pid = fake_pid,
    .internal = fake_internal,
};

/* --- fixture -------------------------------------------------------------- */

struct fx {
	char dir[JTL_ROOT_MAX];
	struct jc_daemon d;
	uv_loop_t loop;
	int evict_reports;
};

static void evict_report(struct jc_daemon *d, const struct jc_evict_report *r)
{
	struct fx *f = (struct fx *)((char *)d - offsetof(struct fx, d));
	(void)r;
	f->evict_reports++;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	jct_tmpdir(f->dir, NULL, "flight");
	struct jc_daemon *d = &f->d;
	char err[512];
	assert_int_equal(uv_loop_init(&f->loop), 0);
	d->loop = &f->loop;
	d->cfg.cache_dir = f->dir;
	d->cfg.negative_ttl_s = 300;
	d->cfg.max_size = 1ull << 30;
	d->cfg.max_log_size = 1u << 20;
	d->request.buffers.max = 1u << 20;
	d->request.conn_ops = &fake_ops;
	d->request.hooks.toolchain_recheck = toolchain_recheck;
	memset(&fake_pool, 0, sizeof(fake_pool));
	d->pool = &fake_pool;
	memset(&fake_tc, 0, sizeof(fake_tc));
	worker_compiler = NULL;
	rechecks = 0;
	snprintf(fake_tc.nvrtc_version, sizeof(fake_tc.nvrtc_version), "13.0");
	snprintf(fake_tc.nvrtc_id, sizeof(fake_tc.nvrtc_id), "build-id:test");
	snprintf(fake_tc.driver_version, sizeof(fake_tc.driver_version), "none");
	snprintf(fake_tc.supported_archs, sizeof(fake_tc.supported_archs), "sm_80 sm_90");
	snprintf(fake_tc.summary, sizeof(fake_tc.summary), "nvrtc=13.0/test");
	d->tc = &fake_tc;
	assert_int_equal(
	    jc__cachedir_open(f->dir, JC_CACHEDIR_READER, 0, &d->cache, err, sizeof(err)), 0);
	assert_int_equal(jc__cache_init(d), 0);
	jc__evict_start(d, evict_report);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	f->d.run.stopping = 1;
	cancel_jobs();
	assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
	jc__cache_flush_sync(&f->d);
	jc__cache_free(&f->d);
	jc__cachedir_close(f->d.cache);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	jct_tmpdir_remove(f->dir);
	free(f);
	return 0;
}

/* A compile request for sm_90 of a source made from tag (owned strings, as
 * a decoded request has). */
static struct jc_req request(const char *tag, const char *arch)
{
	struct jc_req r = {.job = JC_JOB_COMPILE, .output = JC_OUTPUT_CUBIN};
	char src[128];
	snprintf(src, sizeof(src), "extern \"C\" __global__ void k_%s(float *x) { x[0] = 1; }\n",
		 tag);
	r.arch = strdup(arch);
	r.source_name = strdup("k.cu");
	r.source = (uint8_t *)strdup(src);
	r.source_size = strlen(src);
	r.app_abi = strdup("");
	return r;
}

static void ask(struct fx *f, struct jc_conn *c, const char *tag)
{
	struct jc_req r = request(tag, "sm_90");
	jc__cache_request(&f->d, c, &r);
}

static uint64_t counter(struct fx *f, enum jc_counter c)
{
	return f->d.cache->counters.v[c];
}

/* Runs the loop until the publish jobs in the thread pool have ended. */
static void settle(struct fx *f)
{
	uv_run(&f->loop, UV_RUN_DEFAULT);
}

/* --- tests ------------------------------------------------------------------- */

/* N requests for one key: one compile; every one gets the result, the first
 * as a miss, the others as joined; the next request is a hit from the store. */
static void test_joins_share_one_compile(void **state)
{
	struct fx *f = *state;
	enum { N = 8 };
	struct jc_conn c[N + 1];
	memset(c, 0, sizeof(c));
	for (int i = 0; i <= N; i++)
		c[i].refs = 1;
	for (int i = 0; i < N; i++)
		ask(f, &c[i], "shared");
	assert_int_equal(fake_pool.submitted, 1);
	assert_int_equal(counter(f, JC_CTR_misses), 1);
	assert_int_equal(counter(f, JC_CTR_single_flight_joins), N - 1);
	for (int i = 0; i < N; i++) {
		assert_int_equal(c[i].answers, 0); /* waiting */
		assert_int_equal(c[i].refs, 2);	   /* held by the flight */
	}
	assert_int_equal(run_job(0, "CUBIN-BYTES", "ok"), 1);
	settle(f); /* published in the thread pool, then answered */
	for (int i = 0; i < N; i++) {
		assert_int_equal(c[i].answers, 1);
		assert_int_equal(c[i].done, 1);
		assert_int_equal(c[i].refs, 1);
		assert_int_equal(c[i].status, 0);
		assert_int_equal(c[i].size, strlen("CUBIN-BYTES"));
		assert_int_equal(c[i].cache, i == 0 ? JC_CACHE_MISS : JC_CACHE_JOINED);
	}
	assert_int_equal(counter(f, JC_CTR_compiles), 1);
	assert_int_equal(f->evict_reports, 1); /* a stored result checks the budget (evict hook) */
	/* The next one is served from the store, with no compile. */
	ask(f, &c[N], "shared");
	assert_int_equal(fake_pool.submitted, 1);
	assert_int_equal(c[N].answers, 1);
	assert_int_equal(c[N].cache, JC_CACHE_HIT);
	assert_int_equal(c[N].size, strlen("CUBIN-BYTES"));
	assert_int_equal(counter(f, JC_CTR_hits), 1);
	settle(f);
}

/* A worker that loaded another compiler than the key's (the toolkit was
 * replaced on disk after the daemon started): its result, good bytes or a
 * compile error, is not stored; every waiter gets JC_EVERSION saying so,
 * and the daemon re-checks the toolchain on disk. */
static void test_other_compiler_not_stored(void **state)
{
	struct fx *f = *state;
	struct jc_conn c[3];
	memset(c, 0, sizeof(c));
	for (int i = 0; i < 3; i++)
		c[i].refs = 1;
	worker_compiler = "nvrtc=13.0/build-id:other;builtins=none;nvjitlink=13.0/x";
	ask(f, &c[0], "other");
	ask(f, &c[1], "other");
	assert_int_equal(run_job(0, "CUBIN-OF-ANOTHER-NVRTC", "ok"), 1);
	settle(f);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(c[i].answers, 1);
		assert_int_equal(c[i].status, JC_EVERSION);
	}
	assert_int_equal(rechecks, 1);
	assert_int_equal(counter(f, JC_CTR_compiler_mismatches), 1);
	/* a compile error is not kept as a negative entry either */
	ask(f, &c[2], "other-fails");
	assert_int_equal(run_job(JC_ECOMPILE, NULL, "error: no"), 1);
	settle(f);
	assert_int_equal(c[2].status, JC_EVERSION);
	assert_int_equal(rechecks, 2);
	/* the next request compiles again: nothing was stored */
	worker_compiler = NULL;
	memset(&c[0], 0, sizeof(c[0]));
	c[0].refs = 1;
	ask(f, &c[0], "other");
	assert_int_equal(fake_pool.submitted, 3);
	assert_int_equal(run_job(0, "CUBIN", "ok"), 1);
	settle(f);
	assert_int_equal(c[0].status, 0);
}

/* A compile error goes to every joiner with its log, and is cached: the
 * next request is a negative hit. */
static void test_failure_reaches_every_joiner(void **state)
{
	struct fx *f = *state;
	enum { N = 4 };
	struct jc_conn c[N + 1];
	memset(c, 0, sizeof(c));
	for (int i = 0; i <= N; i++)
		c[i].refs = 1;
	for (int i = 0; i < N; i++)
		ask(f, &c[i], "broken");
	assert_int_equal(fake_pool.submitted, 1);
	assert_int_equal(run_job(JC_ECOMPILE, NULL, "k.cu(1): error: expected a ;"), 1);
	settle(f);
	for (int i = 0; i < N; i++) {
		assert_int_equal(c[i].answers, 1);
		assert_int_equal(c[i].status, JC_ECOMPILE);
		assert_string_equal(c[i].log, "k.cu(1): error: expected a ;");
		assert_int_equal(c[i].refs, 1);
	}
	assert_int_equal(counter(f, JC_CTR_compile_failures), 1);
	ask(f, &c[N], "broken");
	assert_int_equal(fake_pool.submitted, 1);
	assert_int_equal(c[N].cache, JC_CACHE_NEGATIVE_HIT);
	assert_int_equal(c[N].status, JC_ECOMPILE);
	assert_string_equal(c[N].log, "k.cu(1): error: expected a ;");
}

/* A crash is not cached: every joiner gets it, the next request compiles. */
static void test_crash_reaches_every_joiner_uncached(void **state)
{
	struct fx *f = *state;
	struct jc_conn c[3];
	memset(c, 0, sizeof(c));
	for (int i = 0; i < 3; i++)
		c[i].refs = 1;
	ask(f, &c[0], "crashy");
	ask(f, &c[1], "crashy");
	assert_int_equal(run_job(JC_ECRASH, NULL, NULL), 1);
	settle(f);
	assert_int_equal(c[0].status, JC_ECRASH);
	assert_int_equal(c[1].status, JC_ECRASH);
	assert_int_equal(c[1].cache, JC_CACHE_JOINED);
	ask(f, &c[2], "crashy");
	assert_int_equal(fake_pool.submitted, 2); /* compiled again */
	assert_int_equal(c[2].answers, 0);
	assert_int_equal(run_job(0, "FIXED", NULL), 1);
	settle(f);
	assert_int_equal(c[2].status, 0);
	assert_int_equal(c[2].cache, JC_CACHE_MISS);
}

/* Joiners that hung up before a worker took the job: when every one has
 * gone, the compile is dropped (nobody is answered, references released);
 * when some remain, only those are answered. */
static void test_abandoned_joiners(void **state)
{
	struct fx *f = *state;
	struct jc_conn c[5];
	memset(c, 0, sizeof(c));
	for (int i = 0; i < 5; i++)
		c[i].refs = 1;
	ask(f, &c[0], "abandoned");
	ask(f, &c[1], "abandoned");
	c[0].gone = c[1].gone = 1;
	assert_int_equal(run_job(0, "UNUSED", NULL), 0); /* dropped */
	settle(f);
	assert_int_equal(c[0].answers + c[1].answers, 0);
	assert_int_equal(c[0].refs, 1);
	assert_int_equal(c[1].refs, 1);
	assert_int_equal(counter(f, JC_CTR_compiles), 0);
	assert_null(f->d.request.flights); /* the flight is gone with its job */

	ask(f, &c[2], "half");
	ask(f, &c[3], "half");
	ask(f, &c[4], "half");
	c[3].gone = 1;
	assert_int_equal(run_job(0, "HALF", NULL), 1);
	settle(f);
	assert_int_equal(c[2].answers, 1);
	assert_int_equal(c[3].answers, 0);
	assert_int_equal(c[3].refs, 1);
	assert_int_equal(c[4].answers, 1);
	assert_int_equal(c[4].cache, JC_CACHE_JOINED);
}

/* Compiles still queued at shutdown are answered "shutting down". */
static void test_cancelled_at_shutdown(void **state)
{
	struct fx *f = *state;
	struct jc_conn c[2];
	memset(c, 0, sizeof(c));
	c[0].refs = c[1].refs = 1;
	ask(f, &c[0], "late");
	ask(f, &c[1], "late");
	f->d.run.stopping = 1;
	cancel_jobs();
	for (int i = 0; i < 2; i++) {
		assert_int_equal(c[i].answers, 1);
		assert_int_equal(c[i].status, JC_EBUSY);
		assert_non_null(strstr(c[i].message, "shutting down"));
		assert_int_equal(c[i].refs, 1);
	}
}

/* Refusals on the request path: answered at once, counted, nothing queued. */
static void test_refusals(void **state)
{
	struct fx *f = *state;
	struct jc_conn c[3];
	memset(c, 0, sizeof(c));
	for (int i = 0; i < 3; i++)
		c[i].refs = 1;
	struct jc_req bad = request("x", "sm_9x");
	jc__cache_request(&f->d, &c[0], &bad);
	assert_int_equal(c[0].status, JC_EINVAL);
	assert_non_null(strstr(c[0].message, "sm_9x"));
	struct jc_req unsupported = request("x", "sm_100");
	jc__cache_request(&f->d, &c[1], &unsupported);
	assert_int_equal(c[1].status, JC_EINVAL);
	assert_non_null(strstr(c[1].message, "it supports sm_80 sm_90"));
	struct jc_req fault = request("x", "sm_90");
	fault.test_fault = JC_FAULT_CRASH;
	jc__cache_request(&f->d, &c[2], &fault);
	assert_int_equal(c[2].status, JC_EINVAL);
	assert_non_null(strstr(c[2].message, "JITCACHE_TEST_FAULTS"));
	for (int i = 0; i < 3; i++) {
		assert_int_equal(c[i].answers, 1);
		assert_int_equal(c[i].done, 1);
		assert_int_equal(c[i].refs, 1);
	}
	assert_int_equal(counter(f, JC_CTR_bad_requests), 3);
	assert_int_equal(fake_pool.submitted, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_joins_share_one_compile, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_failure_reaches_every_joiner, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_other_compiler_not_stored, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_crash_reaches_every_joiner_uncached, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_abandoned_joiners, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cancelled_at_shutdown, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
