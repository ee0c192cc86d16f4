/* SPDX-License-Identifier: MIT */
/*
 * The hit path's shortcuts keep the cache's promises, against a real daemon:
 * hits of one key share one pending access-time row, yet every hit is
 * counted (across periodic flushes and the flush at exit); and the object
 * descriptor a memory-cache slot keeps open (--hot-copy-budget 0) never
 * serves an object that was removed, replaced or truncated behind the
 * daemon's back: each of those is noticed, quarantined and compiled afresh,
 * and the client gets the right bytes. A request whose only -I directory is in the toolkit tree is
 * keyed from the daemon's key memo, and a directory that leaves the tree (its symbolic link moved
 * elsewhere) is noticed once the memo's second is over. The remembered architecture does not let
 * another one skip its check. A hit, the first after its compile too, is answered without an open
 * or an index read: its row and what it is sent were made ready after an earlier answer; a hot
 * object is served from the daemon's checked copy (inline under 64 KiB, a sealed memfd from 64 KiB
 * on).
 */
#include <errno.h>
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

static const char src[] = "extern \"C\" __global__ void hp(float *x) { x[threadIdx.x] += 1.0f; }\n";

/* One request through c; returns its cache status, copies the bytes to out
 * (malloc'd) when out is not NULL. */
static int request(jc_client *c, const jc_request *r, uint8_t **out, size_t *size)
{
	jc_result *res = NULL;
	int rc = jc_compile(c, r, &res);
	if (rc != 0)
		fail_msg("jc_compile: %s", jc_client_errmsg(c));
	int st = (int)jc_result_cache_status(res);
	size_t n;
	const void *data = jc_result_data(res, &n);
	if (out) {
		*out = malloc(n);
		assert_non_null(*out);
		memcpy(*out, data, n);
		*size = n;
	}
	jc_result_free(res);
	return st;
}

/* The hit count `jitcachectl ls --json` shows for the only entry. */
static long listed_hits(const struct jtl_daemon *d)
{
	const char *args[] = {"ls", "--json", NULL};
	char *out = jct_ctl_expect(d, 0, NULL, args);
	long n = (long)jct_json_int(out, "hits");
	free(out);
	return n;
}

static void test_hits_all_counted(void **state)
{
	struct jtl_daemon *d = *state;
	jc_request *r = jct_request_src("hp.cu", src, "sm_90");
	jc_client *c = jct_connect(d);
	assert_int_equal(request(c, r, NULL, NULL), JC_MISS);
	for (int i = 0; i < 4; i++)
		assert_int_equal(request(c, r, NULL, NULL), JC_HIT);
	/* The daemon flushes access times every second. */
	long n = 0;
	for (int i = 0; i < 50 && (n = listed_hits(d)) != 4; i++)
		usleep(100000);
	assert_int_equal(n, 4);
	for (int i = 0; i < 3; i++)
		assert_int_equal(request(c, r, NULL, NULL), JC_HIT);
	jc_client_close(c);
	/* The rest are written at exit; read them offline. */
	assert_int_equal(jtl_daemon_stop(d), 0);
	assert_int_equal(listed_hits(d), 7);
	jc_request_free(r);
}

/* The daemon remembers the last architecture it accepted; another one is
 * still checked against NVRTC's list. */
static void test_arch_checked_after_hits(void **state)
{
	struct jtl_daemon *d = *state;
	jc_request *r = jct_request_src("hp.cu", src, "sm_90");
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	assert_int_equal(request(c, r, NULL, NULL), JC_MISS);
	assert_int_equal(request(c, r, NULL, NULL), JC_HIT);
	assert_int_equal(jc_request_set_arch(r, "sm_99"), 0);
	assert_int_equal(jc_compile(c, r, &res), JC_EINVAL);
	assert_non_null(strstr(jc_client_errmsg(c), "does not support sm_99"));
	assert_int_equal(jc_request_set_arch(r, "sm_90"), 0);
	assert_int_equal(request(c, r, NULL, NULL), JC_HIT);
	jc_client_close(c);
	jc_request_free(r);
}

enum damage { REMOVE, REPLACE, TRUNCATE };

/* Miss, hit (the slot keeps the descriptor: no copies), damage the object
 * file, then the next request must compile afresh and serve the original
 * bytes. */
static void damaged_while_kept(struct jtl_daemon *d, enum damage how)
{
	const char *const flags[] = {"--hot-copy-budget", "0", NULL};
	jct_daemon_start(d, flags);
	jc_request *r = jct_request_src("hp.cu", src, "sm_90");
	jc_client *c = jct_connect(d);
	uint8_t *good, *again;
	size_t n, m;
	char path[512];
	assert_int_equal(request(c, r, &good, &n), JC_MISS);
	assert_int_equal(request(c, r, NULL, NULL), JC_HIT);
	snprintf(path, sizeof(path), "%s", jct_object_path(d->cache, good, n));
	switch (how) {
	case REMOVE:
		assert_int_equal(unlink(path), 0);
		break;
	case REPLACE:
		assert_int_equal(jct_replace_object(path, n), 0);
		break;
	case TRUNCATE:
		assert_int_equal(chmod(path, 0644), 0);
		assert_int_equal(truncate(path, (off_t)n / 2), 0);
		assert_int_equal(chmod(path, 0444), 0);
		break;
	}
	assert_int_equal(request(c, r, &again, &m), JC_MISS);
	assert_int_equal(m, n);
	assert_memory_equal(again, good, n);
	assert_int_equal(jct_stat(d, "corrupt_objects"), 1);
	assert_int_equal(jct_stat(d, "compiles"), 2);
	/* And the fresh object is served again. */
	assert_int_equal(request(c, r, NULL, NULL), JC_HIT);
	jc_client_close(c);
	free(good);
	free(again);
	jc_request_free(r);
}

static void test_kept_object_removed(void **state)
{
	damaged_while_kept(*state, REMOVE);
}

static void test_kept_object_replaced(void **state)
{
	damaged_while_kept(*state, REPLACE);
}

static void test_kept_object_truncated(void **state)
{
	damaged_while_kept(*state, TRUNCATE);
}

/* Answers (sendmsg, write, writev) in the strace log of the daemon's
 * threads (strace -f: each line starts with its thread's id), and how many
 * of them an open or a file read (the index's or an object's pread64) came
 * before on the same thread, since their request was read. */
static int waits_before_answers(const char *log, int *answers)
{
	FILE *f = fopen(log, "r");
	assert_non_null(f);
	char line[2048];
	int tids[256] = {0}, waited[256] = {0}, late = 0, n = 0;
	*answers = 0;
	while (fgets(line, sizeof(line), f)) {
		int tid = 0, off = 0, t;
		if (sscanf(line, "%d %n", &tid, &off) != 1)
			off = 0;
		const char *call = line + off;
		for (t = 0; t < n && tids[t] != tid; t++)
			;
		if (t == n && n < 256)
			tids[n++] = tid;
		if (t == 256)
			t = 255;
		if (strncmp(call, "read(", 5) == 0 || strncmp(call, "readv(", 6) == 0)
			waited[t] = 0;
		else if (strncmp(call, "openat(", 7) == 0 || strncmp(call, "pread64(", 8) == 0)
			waited[t] = 1;
		else if (strncmp(call, "sendmsg(", 8) == 0 || strncmp(call, "write(", 6) == 0 ||
			 strncmp(call, "writev(", 7) == 0)
			late += waited[t], (*answers)++;
	}
	fclose(f);
	return late;
}

/* The first hit after a compile and every later one are answered without
 * an open or an index read between request and answer (traced from after
 * the compile's answer: the miss's own may follow reads). */
static void test_hit_waits_for_nothing(void **state)
{
	struct jtl_daemon *d = *state;
	if (jct_sh("command -v strace >/dev/null") != 0)
		skip(); /* strace is one of scripts/setup.sh's packages */
	jc_request *r = jct_request_src("hp.cu", src, "sm_90");
	jc_client *c = jct_connect(d);
	assert_int_equal(request(c, r, NULL, NULL), JC_MISS);
	char log[sizeof(d->dir) + 16], pid[16];
	snprintf(log, sizeof(log), "%s/strace.log", d->dir);
	snprintf(pid, sizeof(pid), "%d", (int)d->pid);
	pid_t sp = fork();
	assert_true(sp >= 0);
	if (sp == 0) {
		/* Every thread: the serving threads answer hits. */
		execlp("strace", "strace", "-f", "-qq", "-p", pid, "-e",
		       "trace=read,readv,openat,pread64,sendmsg,write,writev", "-o", log,
		       (char *)NULL);
		_exit(127);
	}
	/* Attached once an answer (to `version`) shows in the log. */
	int answers = 0, attached;
	const char *version[] = {"version", NULL};
	for (int i = 0; i < 1000 && answers == 0; i++) {
		free(jct_ctl_expect(d, 0, NULL, version));
		if (access(log, F_OK) == 0)
			waits_before_answers(log, &answers);
		if (!answers)
			jtl_sleep_ms(10);
	}
	assert_true(answers > 0);
	attached = answers;
	for (int i = 0; i < 50; i++)
		assert_int_equal(request(c, r, NULL, NULL), JC_HIT);
	kill(sp, SIGINT);
	assert_int_equal(waitpid(sp, NULL, 0), sp);
	int late = waits_before_answers(log, &answers);
	assert_true(answers >= attached + 50);
	assert_int_equal(late, 0);
	jc_client_close(c);
	jc_request_free(r);
}

/* A kernel whose cubin is over 64 KiB (its initialised array). */
static const char big_src[] = "__device__ unsigned char blob[90000] = {1, 2, 3};\n"
			      "extern \"C\" __global__ void big(unsigned char *o)\n"
			      "{ o[threadIdx.x] = blob[threadIdx.x * 997 % 90000]; }\n";

/* A hot object is served from the daemon's copy, checked when it was made
 * (inline under 64 KiB, a sealed memfd from 64 KiB on): the file changed
 * behind the daemon's back no longer reaches a client (the right bytes are
 * served, nothing is quarantined), until the entry leaves the memory cache
 * (purge). */
static void hot_copy_serves_checked_bytes(struct jtl_daemon *d, const char *name,
					  const char *source, int large)
{
	jc_request *r = jct_request_src(name, source, "sm_90");
	jc_client *c = jct_connect(d);
	uint8_t *good, *again;
	size_t n, m;
	assert_int_equal(request(c, r, &good, &n), JC_MISS);
	assert_true(large ? n >= 64 * 1024 : n < 64 * 1024);
	assert_int_equal(request(c, r, NULL, NULL), JC_HIT); /* the copy is made after it */
	assert_int_equal(request(c, r, NULL, NULL), JC_HIT);
	char path[512];
	snprintf(path, sizeof(path), "%s", jct_object_path(d->cache, good, n));
	assert_int_equal(jct_replace_object(path, n), 0);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(request(c, r, &again, &m), JC_HIT);
		assert_int_equal(m, n);
		assert_memory_equal(again, good, n);
		free(again);
	}
	assert_int_equal(jct_stat(d, "corrupt_objects"), 0);
	const char *purge[] = {"purge", "--all", NULL};
	free(jct_ctl_expect(d, 0, NULL, purge));
	assert_int_equal(request(c, r, &again, &m), JC_MISS);
	assert_memory_equal(again, good, n);
	free(again);
	jc_client_close(c);
	free(good);
	jc_request_free(r);
}

static void test_large_hit_sealed_copy(void **state)
{
	hot_copy_serves_checked_bytes(*state, "big.cu", big_src, 1);
}

static void test_small_hit_inline_copy(void **state)
{
	hot_copy_serves_checked_bytes(*state, "hp.cu", src, 0);
}

static void test_toolkit_key_memo(void **state)
{
	struct jtl_daemon *d = *state;
	char *out = NULL, tk[4096], link[600], fake[600];
	const char *args[] = {"version", "--json", NULL};
	assert_int_equal(jct_ctl(d, &out, NULL, args), 0);
	const char *p = strstr(out, "\"toolkit_include\": \"");
	int found = p && sscanf(p, "\"toolkit_include\": \"%4095[^\"]\"", tk) == 1;
	free(out);
	if (!found)
		skip(); /* no toolkit include tree next to libnvrtc */
	snprintf(link, sizeof(link), "%s/tk", d->dir);
	snprintf(fake, sizeof(fake), "%s/fake", d->dir);
	assert_int_equal(jct_sh("mkdir -p '%s/cuda/std' && echo '#define INT8_MAX 99' > "
				"'%s/cuda/std/cstdint' && ln -s '%s/cccl' '%s'",
				fake, fake, tk, link),
			 0);
	jc_request *r =
	    jct_request_src("k.cu",
			    "#include <cuda/std/cstdint>\n"
			    "extern \"C\" __global__ void k(int *x) { x[0] = INT8_MAX; }\n",
			    "compute_90");
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	jct_request_include(r, link);
	assert_int_equal(jc_request_add_option(r, "-std=c++17"), 0);
	jc_result_free(jct_expect_ptx(d, r, JC_MISS, "127"));
	jc_result_free(jct_expect_ptx(d, r, JC_HIT, "127"));
	jc_result_free(jct_expect_ptx(d, r, JC_HIT, "127"));
	assert_int_equal(jct_stat(d, "include_manifest_hits"), 2);
	assert_int_equal(jct_stat(d, "include_stats"), 0);
	/* The directory now resolves outside the toolkit: its header is read. */
	assert_int_equal(
	    jct_sh("ln -s '%s' '%s.new' && mv -T '%s.new' '%s'", fake, link, link, link), 0);
	usleep(1100000);
	jc_result_free(jct_expect_ptx(d, r, JC_MISS, "99"));
	assert_int_equal(jct_stat(d, "include_scans"), 2);
	jc_request_free(r);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, jct_setup_started, jct_teardown)
	/* U: the test starts its own daemon. */
#define U(name) cmocka_unit_test_setup_teardown(name, jct_setup, jct_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_hits_all_counted),	     U(test_kept_object_removed),
	    U(test_kept_object_replaced),    U(test_kept_object_truncated),
	    T(test_hit_waits_for_nothing),   T(test_large_hit_sealed_copy),
	    T(test_small_hit_inline_copy),   T(test_toolkit_key_memo),
	    T(test_arch_checked_after_hits),
	};
#undef T
#undef U
	return cmocka_run_group_tests(tests, NULL, NULL);
}
