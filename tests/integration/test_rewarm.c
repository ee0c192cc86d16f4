/* SPDX-License-Identifier: MIT */
/*
 * Re-warm and kept requests with a real daemon and real NVRTC (issue 26):
 * the cache's entries are made again for another NVRTC build (the same
 * library with its build-id changed, loaded through LD_LIBRARY_PATH:
 * jtl_nvrtc_toolkit_copy), in the background, at idle priority,
 * clients first and single-flighted with the re-warm; requests are kept in
 * the byte budget and go with their entries; bundles move them between
 * caches, signed.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"
#include "tests/lib/variants.h"

/* The NVRTC copy with another build-id, made once for the file. */
static char nvroot[JTL_ROOT_MAX];
static char nvlib[JTL_ROOT_MAX + 8];

/* LD_LIBRARY_PATH=ctx, or the NVRTC copy's directory when ctx is NULL; the
 * path the test itself was given follows (a machine whose other libraries
 * come from LD_LIBRARY_PATH, as the GPU machine's packed build). */
static int set_nvrtc_copy(void *ctx)
{
	const char *first = ctx ? (const char *)ctx : nvlib, *rest = getenv("LD_LIBRARY_PATH");
	char *v;
	if (asprintf(&v, "%s%s%s", first, rest && *rest ? ":" : "", rest && *rest ? rest : "") < 0)
		return 1;
	int rc = setenv("LD_LIBRARY_PATH", v, 1) != 0;
	free(v);
	return rc;
}

/* Starts d with the NVRTC copy (flags NULL-terminated, after --log-level info). */
static void start_with_copy(struct jtl_daemon *d, const char *const *extra)
{
	const char *flags[16] = {"--log-level", "info"};
	size_t n = 2;
	for (size_t i = 0; extra && extra[i] && n < 15; i++)
		flags[n++] = extra[i];
	flags[n] = NULL;
	jct_daemon_spawn_with(d, flags, set_nvrtc_copy, NULL);
	jct_daemon_wait_ready(d);
}

static char *ctl(const struct jtl_daemon *d, int want, const char *const *args)
{
	return jct_ctl_expect(d, want, NULL, args);
}

/* A request for tiny kernel n (tests/lib), for sm_90 cubin. */
static jc_request *tiny(int n)
{
	char name[32];
	snprintf(name, sizeof(name), "tiny%d.cu", n);
	return jct_request_src(name, jct_tiny_src(n), "sm_90");
}

static jc_cache_status compile_status(const struct jtl_daemon *d, jc_request *r, uint8_t **bytes,
				      size_t *size)
{
	jc_result *res = jct_compile(d, r, 0);
	jc_cache_status st = jc_result_cache_status(res);
	if (bytes) {
		const void *data = jc_result_data(res, size);
		*bytes = malloc(*size);
		assert_non_null(*bytes);
		memcpy(*bytes, data, *size);
	}
	jc_result_free(res);
	return st;
}

/* Each test's daemons, made by setup and killed and removed by teardown
 * (also when an assertion fails). */
struct fx {
	struct jtl_daemon d[3];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	for (int i = 0; i < 3; i++)
		jct_daemon_init(&f->d[i]);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 3; i++)
		jct_daemon_cleanup(&f->d[i]);
	free(f);
	return 0;
}

#define N_KERNELS 20

/* 20 kernels with hits; restarted with another NVRTC build; warm --wait;
 * then each request is a hit with no compile, its bytes those a fresh
 * daemon with that library makes. */
static void test_rewarm_after_nvrtc_change(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d[0], *fresh = &f->d[1];
	jct_daemon_start(d, NULL);
	for (int n = 0; n < N_KERNELS; n++) {
		jc_request *r = tiny(n);
		assert_int_equal(compile_status(d, r, NULL, NULL), JC_MISS);
		assert_int_equal(compile_status(d, r, NULL, NULL), JC_HIT);
		jc_request_free(r);
	}
	assert_int_equal(jct_stat(d, "requests_kept"), N_KERNELS);
	int64_t compiles = jct_stat(d, "compiles"); /* counters persist across restarts */
	assert_int_equal(jtl_daemon_stop(d), 0);

	start_with_copy(d, NULL);
	char *stats = ctl(d, 0, (const char *const[]){"stats", "--json", NULL});
	char *ident = strstr(stats, "\"identity\": \""),
	     *cache_ident = strstr(stats, "\"cache_identity\": \"");
	assert_non_null(ident);
	assert_non_null(cache_ident);
	assert_int_not_equal(strncmp(ident + 13, cache_ident + 19, 60), 0);
	free(stats);
	char *out = ctl(d, 0, (const char *const[]){"warm", "--wait", NULL});
	fprintf(stderr, "warm --wait: %s", out);
	free(out);
	assert_int_equal(jct_stat(d, "rewarm_done"), N_KERNELS);
	assert_int_equal(jct_stat(d, "rewarm_failed"), 0);
	/* the CPU time in milliseconds, and in whole seconds beside it */
	int64_t cpu_ms = jct_stat(d, "rewarm_cpu_ms"), cpu_s = jct_stat(d, "rewarm_cpu_s");
	assert_true(cpu_ms > 0);
	assert_true(cpu_ms / 1000 == cpu_s);
	/* the new entries share the old ones' requests */
	assert_int_equal(jct_stat(d, "requests_kept"), N_KERNELS);
	assert_int_equal(jct_stat(d, "compiles") - compiles, N_KERNELS);
	compiles = jct_stat(d, "compiles");

	start_with_copy(fresh, NULL);
	for (int n = 0; n < N_KERNELS; n++) {
		jc_request *r = tiny(n);
		uint8_t *warm, *ref;
		size_t warm_size, ref_size;
		assert_int_equal(compile_status(d, r, &warm, &warm_size), JC_HIT);
		assert_int_equal(compile_status(fresh, r, &ref, &ref_size), JC_MISS);
		assert_int_equal(warm_size, ref_size);
		assert_memory_equal(warm, ref, ref_size);
		free(warm);
		free(ref);
		jc_request_free(r);
	}
	assert_int_equal(jct_stat(d, "compiles"), compiles); /* 0 at request time */
	/* a second warm finds nothing left for this identity */
	out = ctl(d, 0, (const char *const[]){"warm", "--wait", NULL});
	jct_assert_has(out, "nothing to re-warm");
	free(out);
}

/* A kernel whose compile takes about a second of CPU per 3,000 statements
 * here (NVRTC and ptxas over dependent statements; a loop, even unrolled,
 * is capped). */
#define SLOW_STATEMENTS 3000
static char *slow_src(int statements)
{
	size_t cap = 128 + (size_t)statements * 48, n = 0;
	char *src = malloc(cap);
	assert_non_null(src);
	n += (size_t)snprintf(src + n, cap - n,
			      "extern \"C\" __global__ void slow(float *x) {\n"
			      "  float a = x[threadIdx.x];\n");
	for (int i = 0; i < statements; i++)
		n += (size_t)snprintf(src + n, cap - n, "  a = a * 1.0001f + __sinf(a + %d.0f);\n",
				      i);
	snprintf(src + n, cap - n, "  x[threadIdx.x] = a;\n}\n");
	return src;
}

/* The re-warm workers (children of pid with --idle), or the client workers
 * (without it) when idle is 0, to out[max]; how many. */
static int workers_of(pid_t daemon, int idle_wanted, pid_t *out, int max)
{
	DIR *dir = opendir("/proc");
	struct dirent *de;
	int n = 0;
	assert_non_null(dir);
	while ((de = readdir(dir)) && n < max) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		char path[300], cmd[512] = "";
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		int fd = open(path, O_RDONLY);
		ssize_t len = fd >= 0 ? read(fd, cmd, sizeof(cmd) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (len <= 0)
			continue;
		int idle = 0;
		for (ssize_t i = 0; i < len; i += (ssize_t)strlen(cmd + i) + 1)
			idle |= strcmp(cmd + i, "--idle") == 0;
		if (idle != idle_wanted || !strstr(cmd, "jitcache-worker"))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		size_t size;
		char *st = (char *)jtl_read_file(path, &size);
		if (!st)
			continue;
		int ppid = 0;
		sscanf(strrchr(st, ')') + 2, "%*c %d", &ppid);
		free(st);
		if (ppid == daemon)
			out[n++] = (pid_t)atoi(de->d_name);
	}
	closedir(dir);
	return n;
}

/* Every thread of pid and of the processes below it has CPU policy policy
 * and I/O class ioclass; returns how many threads were checked. */
static int tree_checked(pid_t pid, int policy, int ioclass)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *dir = opendir(path);
	struct dirent *de;
	int n = 0;
	while (dir && (de = readdir(dir))) {
		int tid = atoi(de->d_name), got = tid > 0 ? sched_getscheduler(tid) : -1;
		if (got < 0)
			continue; /* not a thread, or one that just exited */
		if (got != policy)
			fail_msg("thread %d of %d: policy %d, want %d", tid, (int)pid, got, policy);
		long prio = syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, tid);
		if (prio >= 0 && prio >> 13 != ioclass)
			fail_msg("thread %d of %d: I/O class %ld, want %d", tid, (int)pid,
				 prio >> 13, ioclass);
		n++;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, tid);
		FILE *f = fopen(path, "r");
		int child;
		while (f && fscanf(f, "%d", &child) == 1)
			n += tree_checked((pid_t)child, policy, ioclass);
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	return n;
}

/* The re-warm workers all run at idle CPU and I/O priority; returns how
 * many there are. */
static int idle_workers_checked(pid_t daemon)
{
	pid_t w[8];
	int n = workers_of(daemon, 1, w, 8);
	for (int i = 0; i < n; i++) {
		/* it sets them at its start (the policy, then the I/O class): it
		 * may have just been started */
		for (int t = 0; t < 500 && (sched_getscheduler(w[i]) != SCHED_IDLE ||
					    syscall(SYS_ioprio_get, 1, w[i]) >> 13 != 3);
		     t++)
			jtl_sleep_ms(10);
		assert_true(tree_checked(w[i], SCHED_IDLE, 3 /* IOPRIO_CLASS_IDLE */) > 0);
	}
	return n;
}

/* A client's request for the slow kernel, in a thread of its own. */
struct join {
	const struct jtl_daemon *d;
	jc_request *r;
	jc_cache_status status;
};

static void *join_main(void *arg)
{
	struct join *j = arg;
	j->status = compile_status(j->d, j->r, NULL, NULL);
	return NULL;
}

/* During a re-warm, a client's new request is served while the re-warm's
 * compile still runs (clients never wait behind it), and a request for the
 * key being re-warmed joins that compile: one compile per key in all.
 * Meanwhile doctor says most entries are another toolchain's. */
static void test_client_first_and_join(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d[0];
	jct_daemon_start(d, (const char *const[]){"--rewarm-workers", "1", NULL});
	char *src = slow_src(SLOW_STATEMENTS);
	jc_request *slow = jct_request_src("slow.cu", src, "sm_90");
	free(src);
	/* the slow kernel is the most used: the re-warm's first */
	for (int i = 0; i < 4; i++)
		compile_status(d, slow, NULL, NULL);
	for (int n = 0; n < 4; n++) {
		jc_request *r = tiny(n);
		compile_status(d, r, NULL, NULL);
		jc_request_free(r);
	}
	int64_t misses = jct_stat(d, "misses"), compiles = jct_stat(d, "compiles"),
		joins = jct_stat(d, "single_flight_joins"); /* they persist across restarts */
	assert_int_equal(jtl_daemon_stop(d), 0);

	/* the re-warm starts by itself: the identity changed */
	start_with_copy(d, (const char *const[]){"--rewarm-workers", "1", NULL});
	/* its first flight: the slow kernel */
	jct_wait_stat(d, "misses", jct_ge, misses + 1, 20000);
	assert_int_equal(idle_workers_checked(d->pid), 1);
	jc_request *fresh = tiny(1000);
	assert_int_equal(compile_status(d, fresh, NULL, NULL), JC_MISS);
	/* served while the re-warm had not finished its first compile */
	assert_int_equal(jct_stat(d, "rewarm_done"), 0);
	/* doctor: most entries are another toolchain's, and what to run */
	char *doc = NULL;
	jct_ctl(d, &doc, NULL, (const char *const[]){"doctor", NULL});
	jct_assert_has(doc, "entries were made by another toolchain than the daemon's");
	jct_assert_has(doc, "run `jitcachectl warm`");
	free(doc);
	/* the client joins the running re-warm compile: its worker, with its
	 * threads and children, runs at normal priority while the client waits */
	struct join j = {.d = d, .r = slow};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, join_main, &j), 0);
	jct_wait_stat(d, "single_flight_joins", jct_ge, joins + 1, 20000);
	pid_t w;
	assert_int_equal(workers_of(d->pid, 1, &w, 1), 1);
	assert_true(tree_checked(w, SCHED_OTHER, 0 /* IOPRIO_CLASS_NONE */) > 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(j.status, JC_JOINED);
	/* and back to idle priority for the rest of the re-warm */
	assert_true(tree_checked(w, SCHED_IDLE, 3) > 0);
	char *out = ctl(d, 0, (const char *const[]){"warm", "--wait", NULL});
	free(out);
	assert_int_equal(jct_stat(d, "rewarm_done"), 5);
	/* 5 re-warmed + the client's new one: the joined key compiled once */
	assert_int_equal(jct_stat(d, "compiles") - compiles, 6);
	assert_int_equal(jct_stat(d, "single_flight_joins") - joins, 1);
	jc_request_free(fresh);
	jc_request_free(slow);
}

/* A kept request the new toolchain's compile rejects (here: an -I header
 * changed on disk since into one that does not compile; a re-warm keys and
 * compiles from the directories on disk, as the client's next request
 * will) is a negative entry of the new toolchain with its log, and `warm`
 * lists it: key, program name, message and log. */
static void test_failure_listed(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d[0];
	char inc[300], hdr[320];
	jct_daemon_start(d, NULL);
	snprintf(inc, sizeof(inc), "%s/inc", d->dir);
	snprintf(hdr, sizeof(hdr), "%s/v.h", inc);
	assert_int_equal(mkdir(inc, 0700), 0);
	jct_write_text(hdr, "#define V 7\n");
	jc_request *r = jct_request_src("hv.cu",
					"#include \"v.h\"\nextern \"C\" __global__ void "
					"hv(int *p) { *p = V; }\n",
					"sm_90");
	assert_int_equal(jc_request_add_include_dir(r, inc), 0);
	assert_int_equal(compile_status(d, r, NULL, NULL), JC_MISS);
	jc_request *ok = tiny(0);
	assert_int_equal(compile_status(d, ok, NULL, NULL), JC_MISS);
	assert_int_equal(jtl_daemon_stop(d), 0);
	jct_write_text(hdr, "#error v.h is gone in this release\n");

	start_with_copy(d, NULL);
	char *out = ctl(d, 0, (const char *const[]){"warm", "--status", "--wait", NULL});
	fprintf(stderr, "warm --status --wait: %s", out);
	jct_assert_has(out, "1 done, 1 failed, 0 dropped (budget)");
	jct_assert_has(
	    out, "1 requests failed to compile with this toolchain (kept as negative entries");
	jct_assert_has(out, "hv.cu: ");
	jct_assert_has(out, "v.h is gone in this release");
	free(out);
	assert_int_equal(jct_stat(d, "rewarm_failed"), 1);
	assert_int_equal(jct_stat(d, "rewarm_done"), 1);
	assert_int_equal(jct_stat(d, "negative_entries"), 1);
	/* the client's next request is that negative entry: no compile */
	int64_t compiles = jct_stat(d, "compiles");
	jc_result *res = jct_compile(d, r, JC_ECOMPILE);
	assert_int_equal(jc_result_cache_status(res), JC_NEGATIVE_HIT);
	jc_result_free(res);
	assert_int_equal(jct_stat(d, "compiles"), compiles);
	jc_request_free(r);
	jc_request_free(ok);
}

/* --rewarm-budget: once a re-warm's compiles have used that much CPU, the
 * rest is dropped, and the report says how many; `warm --since D` leaves
 * out entries not used within D, and `warm --top N` re-warms the N most
 * valuable of those left (the most hits), no more. */
static void test_budget_top_since(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d[0];
	jct_daemon_start(d, NULL);
	/* seconds of CPU where the budget counts whole seconds */
	char *src = slow_src(4 * SLOW_STATEMENTS);
	jc_request *slow = jct_request_src("slow.cu", src, "sm_90"), *r[3];
	free(src);
	for (int i = 0; i < 5; i++) /* the most valuable: the re-warm's first */
		compile_status(d, slow, NULL, NULL);
	for (int n = 0; n < 3; n++) {
		r[n] = tiny(n);
		for (int i = 0; i < 3 - n; i++) /* tiny0 3 uses, tiny1 2, tiny2 1 */
			compile_status(d, r[n], NULL, NULL);
	}
	double used = jtl_now_s();
	assert_int_equal(jtl_daemon_stop(d), 0);

	/* the slow kernel's compile alone is seconds of CPU: past the budget */
	start_with_copy(d, (const char *const[]){"--rewarm-budget", "1s", NULL});
	char *out = ctl(d, 0, (const char *const[]){"warm", "--status", "--wait", NULL});
	fprintf(stderr, "warm --status --wait: %s", out);
	jct_assert_has(out, "1 done, 0 failed, 3 dropped (budget)");
	free(out);
	char *log = jct_log(d);
	jct_assert_has(log, "re-warm: budget of 1 CPU seconds spent");
	free(log);
	/* used more than a second ago: --since 1s finds nothing */
	while (jtl_now_s() - used < 1.5)
		jtl_sleep_ms(100);
	out = ctl(d, 0, (const char *const[]){"warm", "--since", "1s", "--wait", NULL});
	jct_assert_has(out, "nothing to re-warm");
	free(out);
	out = ctl(d, 0, (const char *const[]){"warm", "--top", "1", "--wait", NULL});
	fprintf(stderr, "warm --top 1 --wait: %s", out);
	jct_assert_has(out, "1 done, 0 failed, 0 dropped (budget)");
	free(out);
	/* that one was tiny0, the most used of the three left */
	assert_int_equal(compile_status(d, r[0], NULL, NULL), JC_HIT);
	assert_int_equal(compile_status(d, r[1], NULL, NULL), JC_MISS);
	assert_int_equal(compile_status(d, r[2], NULL, NULL), JC_MISS);
	assert_int_equal(compile_status(d, slow, NULL, NULL), JC_HIT);
	for (int n = 0; n < 3; n++)
		jc_request_free(r[n]);
	jc_request_free(slow);
}

/* Objects in the cache directory, each hashing to its name. */
static size_t objects(const struct jtl_daemon *d)
{
	struct jct_store_scan scan;
	jct_scan_store(d->cache, &scan);
	assert_int_equal(scan.bad_objects, 0);
	return scan.objects;
}

/* Kept requests count in the budget's bytes and go with their entries;
 * --keep-requests no keeps none, and warm says so. */
static void test_keep_requests_budget(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d[0], *no = &f->d[1];
	jct_daemon_start(d, NULL);
	jct_daemon_start(no, (const char *const[]){"--keep-requests", "no", NULL});
	for (int n = 0; n < 3; n++) {
		jc_request *r = tiny(n);
		compile_status(d, r, NULL, NULL);
		compile_status(no, r, NULL, NULL);
		jc_request_free(r);
	}
	int64_t req_bytes = jct_stat(d, "request_bytes");
	assert_int_equal(jct_stat(d, "requests_kept"), 3);
	assert_true(req_bytes > 0);
	assert_int_equal(jct_stat(d, "stored_bytes"), jct_stat(no, "stored_bytes") + req_bytes);
	assert_int_equal(objects(d), 3); /* requests are kept in the index, not as files */
	assert_int_equal(objects(no), 3);
	assert_int_equal(jct_stat(no, "requests_kept"), 0);
	assert_int_equal(jct_stat(no, "request_bytes"), 0);
	char *out = ctl(no, 0, (const char *const[]){"warm", NULL});
	jct_assert_has(out, "requests are not kept");
	free(out);
	/* eviction to a size counts them (least recently used first), and they
	 * go with their entries */
	struct jtl_daemon *small = &f->d[2];
	jct_daemon_start(small, NULL);
	for (int n = 10; n < 18; n++) {
		jc_request *r = tiny(n);
		compile_status(small, r, NULL, NULL);
		jc_request_free(r);
	}
	assert_int_equal(jct_stat(small, "requests_kept"), 8);
	int64_t per_entry = jct_stat(small, "stored_bytes") / 8;
	char size[32];
	snprintf(size, sizeof(size), "%lldB", (long long)(per_entry * 11 / 2));
	free(ctl(small, 0, (const char *const[]){"purge", "--to-size", size, NULL}));
	assert_true(jct_stat(small, "stored_bytes") <= per_entry * 11 / 2);
	int64_t left = jct_stat(small, "entries");
	assert_int_equal(left, 5);
	assert_int_equal(jct_stat(small, "requests_kept"), left);
	free(ctl(d, 0, (const char *const[]){"purge", "--all", NULL}));
	assert_int_equal(objects(d), 0);
	assert_int_equal(jct_stat(d, "requests_kept"), 0);
	assert_int_equal(jct_stat(d, "request_bytes"), 0);
	assert_int_equal(jct_stat(d, "bytes"), 0);
}

static void write_secret(const char *path, char fill)
{
	char key[32];
	memset(key, fill, sizeof(key));
	jct_write_file(path, key, sizeof(key));
	assert_int_equal(chmod(path, 0600), 0);
}

/* Export on one cache, import on an empty one: every exported request is a
 * hit there; a tampered bundle, one checked with another secret, or a FIFO
 * is refused and imports nothing. */
static void test_export_import(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *a = &f->d[0], *b = &f->d[1];
	char bundle[300], bad[300], key[300], key2[300];
	jct_daemon_start(a, NULL);
	jct_daemon_start(b, NULL);
	snprintf(bundle, sizeof(bundle), "%s/app.jcb", a->dir);
	snprintf(bad, sizeof(bad), "%s/bad.jcb", a->dir);
	snprintf(key, sizeof(key), "%s/key", a->dir);
	snprintf(key2, sizeof(key2), "%s/key2", a->dir);
	write_secret(key, 'k');
	write_secret(key2, 'x');
	jc_request *with_header = jct_request_src("h.cu",
						  "#include \"v.h\"\nextern \"C\" __global__ "
						  "void h(int *p) { *p = V; }\n",
						  "sm_90");
	assert_int_equal(jc_request_add_header(with_header, "v.h", "#define V 7\n", 12), 0);
	compile_status(a, with_header, NULL, NULL);
	for (int n = 0; n < 5; n++) {
		jc_request *r = tiny(n);
		compile_status(a, r, NULL, NULL);
		jc_request_free(r);
	}
	char *out =
	    ctl(a, 0, (const char *const[]){"export", "--secret-file", key, "-o", bundle, NULL});
	jct_assert_has(out, "exported 6 requests");
	free(out);

	/* tampered: one byte in the middle */
	size_t size;
	uint8_t *data = jtl_read_file(bundle, &size);
	assert_non_null(data);
	data[size / 2] ^= 1;
	jct_write_file(bad, data, size);
	free(data);
	char *err = NULL;
	out = jct_ctl_expect(
	    b, 1, &err, (const char *const[]){"import", bad, "--wait", "--secret-file", key, NULL});
	jct_assert_has(err, "signature does not match");
	free(out);
	free(err);
	out = jct_ctl_expect(
	    b, 1, &err,
	    (const char *const[]){"import", bundle, "--wait", "--secret-file", key2, NULL});
	jct_assert_has(err, "signature does not match");
	free(out);
	free(err);
	/* a FIFO: refused at once, not waited on for a writer */
	char fifo[300];
	snprintf(fifo, sizeof(fifo), "%s/bundle.fifo", a->dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(jct_sh("timeout 20 %s --socket %s import %s --wait --secret-file %s "
				"2>%s.err; test $? = 1 && grep -q 'not a regular file' %s.err",
				getenv("JITCACHECTL"), b->sock, fifo, key, fifo, fifo),
			 0);
	assert_int_equal(jct_stat(b, "compiles"), 0);

	out = ctl(b, 0,
		  (const char *const[]){"import", bundle, "--wait", "--secret-file", key, NULL});
	jct_assert_has(
	    out, "imported 6 requests: 0 were there, 0 from the fleet tier, 6 compiled, 0 failed");
	free(out);
	assert_int_equal(jct_stat(b, "compiles"), 6);
	assert_int_equal(compile_status(b, with_header, NULL, NULL), JC_HIT);
	for (int n = 0; n < 5; n++) {
		jc_request *r = tiny(n);
		assert_int_equal(compile_status(b, r, NULL, NULL), JC_HIT);
		jc_request_free(r);
	}
	assert_int_equal(jct_stat(b, "compiles"), 6);
	jc_request_free(with_header);
}

/* A user who is not an admin exports only the requests they made; naming
 * another uid is refused. Real users: needs root. */
static void test_export_own_only(void **state)
{
	struct fx *f = *state;
	char user[32];
	uid_t uid;
	gid_t gid;
	if (geteuid() != 0 || jct_user_add("jrw", NULL, user, &uid, &gid) != 0) {
		fprintf(stderr, "skipped: needs root and useradd\n");
		skip();
	}
	struct jtl_daemon *d = &f->d[0], *b = &f->d[1];
	jct_daemon_start(d, NULL);
	assert_int_equal(chmod(d->dir, 0755), 0);
	assert_int_equal(chmod(d->sock, 0666), 0);
	for (int n = 0; n < 3; n++) { /* root's */
		jc_request *r = tiny(n);
		compile_status(d, r, NULL, NULL);
		jc_request_free(r);
	}
	char key[200], src[200];
	snprintf(key, sizeof(key), "%s/ukey", d->dir);
	snprintf(src, sizeof(src), "%s/mine.cu", d->dir);
	write_secret(key, 'u');
	assert_int_equal(chown(key, uid, gid), 0);
	jct_write_text(src, "extern \"C\" __global__ void mine(int *p) { *p = 4711; }\n");
	assert_int_equal(chmod(src, 0644), 0);
	/* The user's environment is PATH alone, and the library path the test
	 * was given (a packed build's libraries, as on the GPU machine). */
	const char *ctlbin = getenv("JITCACHECTL"), *ldp = getenv("LD_LIBRARY_PATH");
	ldp = ldp ? ldp : "";
	assert_int_equal(jct_sh("cd %s && setpriv --reuid %u --regid %u --clear-groups -- env -i "
				"PATH=/usr/bin:/bin LD_LIBRARY_PATH='%s' JITCACHE_AUTOSTART=0 %s "
				"--socket %s compile "
				"mine.cu --arch sm_90 -o /dev/null 2>/dev/null",
				d->dir, (unsigned)uid, (unsigned)gid, ldp, ctlbin, d->sock),
			 0);
	char udir[220];
	snprintf(udir, sizeof(udir), "%s/u", d->dir);
	assert_int_equal(mkdir(udir, 0755), 0);
	assert_int_equal(chown(udir, uid, gid), 0);
	assert_int_equal(jct_sh("cd /tmp && setpriv --reuid %u --regid %u --clear-groups -- env -i "
				"PATH=/usr/bin:/bin LD_LIBRARY_PATH='%s' %s --socket %s export "
				"--secret-file %s -o %s/own.jcb",
				(unsigned)uid, (unsigned)gid, ldp, ctlbin, d->sock, key, udir),
			 0);
	assert_int_not_equal(jct_sh("cd /tmp && setpriv --reuid %u --regid %u --clear-groups -- "
				    "env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH='%s' %s --socket %s "
				    "export --uid 0 --secret-file %s -o /dev/null 2>/dev/null",
				    (unsigned)uid, (unsigned)gid, ldp, ctlbin, d->sock, key),
			     0);
	/* what was exported: the user's one request, compiled by an empty cache */
	char bundle[300];
	jct_daemon_start(b, NULL);
	snprintf(bundle, sizeof(bundle), "%s/own.jcb", udir);
	char *out = ctl(
	    b, 0, (const char *const[]){"import", bundle, "--wait", "--secret-file", key, NULL});
	jct_assert_has(out, "imported 1 requests");
	free(out);
	out = ctl(b, 0, (const char *const[]){"ls", NULL});
	jct_assert_has(out, "mine.cu");
	free(out);
}

/* A re-warmed fatbin request compiles its parts at idle priority too (the
 * log says which compiles ran so). */
static void test_fatbin_parts_idle(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d[0];
	jct_daemon_start(d, (const char *const[]){"--log-level", "info", NULL});
	jc_request *r = jct_request_src("rwfat.cu", jct_tiny_src(7), "sm_80,sm_90");
	assert_int_equal(compile_status(d, r, NULL, NULL), JC_MISS);
	/* its hits put it before its parts' own kept requests in the re-warm */
	for (int i = 0; i < 3; i++)
		assert_int_equal(compile_status(d, r, NULL, NULL), JC_HIT);
	jc_request_free(r);
	assert_int_equal(jtl_daemon_stop(d), 0);

	/* the fatbin tool is looked for from libnvrtc's directory (toolchain.h:
	 * its ../bin or ../../../bin, as in lib64/ or targets/ARCH/lib/): the
	 * toolkit's bin/ beside the copy's lib/ too */
	char lib[PATH_MAX], why[256], from[PATH_MAX + 32], to[JTL_ROOT_MAX + 64];
	assert_int_equal(jtl_nvrtc_file(lib, why, sizeof(why)), 0);
	*strrchr(lib, '/') = '\0';
	for (const char *const *rel = (const char *const[]){"/../bin", "/../../../bin", NULL}; *rel;
	     rel++) {
		char tool[PATH_MAX + 64];
		snprintf(from, sizeof(from), "%s%s", lib, *rel);
		snprintf(tool, sizeof(tool), "%s/fatbinary", from);
		if (access(tool, X_OK) == 0)
			break;
	}
	snprintf(to, sizeof(to), "%s/bin", nvroot);
	if (access(to, F_OK) != 0)
		assert_int_equal(symlink(from, to), 0);
	start_with_copy(d, NULL);
	char *out = ctl(d, 0, (const char *const[]){"warm", "--wait", NULL});
	fprintf(stderr, "warm --wait: %s", out);
	free(out);
	assert_true(jct_stat(d, "rewarm_done") >= 1);
	assert_int_equal(jct_stat(d, "rewarm_failed"), 0);
	char *log = jct_log(d);
	const char *since = strstr(log, "toolchain identity changed");
	assert_non_null(since);
	static const char *const parts[] = {"compile of rwfat.cu for sm_80 done",
					    "compile of rwfat.cu for sm_90 done"};
	for (size_t i = 0; i < 2; i++) {
		const char *line = strstr(since, parts[i]);
		if (!line)
			fail_msg("no \"%s\" after the restart:\n%s", parts[i], since);
		size_t len = strcspn(line, "\n");
		if (!memmem(line, len, "at idle priority", 16))
			fail_msg("a re-warmed fatbin's part ran at client priority: %.*s", (int)len,
				 line);
	}
	free(log);
}

/* (Re)points the symbolic link at to target. */
static void point(const char *link, const char *target)
{
	char tmp[JTL_ROOT_MAX + 64];
	snprintf(tmp, sizeof(tmp), "%s.new", link);
	unlink(tmp);
	assert_int_equal(symlink(target, tmp), 0);
	assert_int_equal(rename(tmp, link), 0);
}

/* The "identity" of d's stats (malloc'd). */
static char *identity_of(const struct jtl_daemon *d, const char *key)
{
	char *stats = ctl(d, 0, (const char *const[]){"stats", "--json", NULL}), pat[64];
	snprintf(pat, sizeof(pat), "\"%s\": \"", key);
	const char *at = strstr(stats, pat);
	assert_non_null(at);
	at += strlen(pat);
	char *id = strndup(at, strcspn(at, "\""));
	free(stats);
	return id;
}

/* The real NVRTC's directory into real[PATH_MAX]. */
static void real_dir(char *real)
{
	char why[256];
	assert_int_equal(jtl_nvrtc_file(real, why, sizeof(why)), 0);
	*strrchr(real, '/') = '\0';
}

/* Starts d with LD_LIBRARY_PATH at nvroot/cur (its path to cur[len]),
 * pointed at target, else the real NVRTC's directory. */
static void start_on_link(struct jtl_daemon *d, char *cur, size_t len, const char *target)
{
	char real[PATH_MAX];
	real_dir(real);
	snprintf(cur, len, "%s/cur", nvroot);
	point(cur, target ? target : real);
	const char *flags[] = {"--log-level", "info", NULL};
	jct_daemon_spawn_with(d, flags, set_nvrtc_copy, cur);
	jct_daemon_wait_ready(d);
}

/* SIGHUP re-checks the toolchain on disk: unchanged, it says so; changed
 * (here: LD_LIBRARY_PATH's directory pointed at another NVRTC build), the
 * daemon switches to it (its identity is the new build's, as a daemon
 * started with it has), re-warms the entries of the old one, and serves
 * them as hits made by the new one. */
static void test_sighup_toolchain_changed(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d[0], *fresh = &f->d[1];
	char cur[JTL_ROOT_MAX + 16];
	start_on_link(d, cur, sizeof(cur), NULL);
	for (int n = 0; n < 3; n++) {
		jc_request *r = tiny(n);
		assert_int_equal(compile_status(d, r, NULL, NULL), JC_MISS);
		jc_request_free(r);
	}
	char *before = identity_of(d, "identity");

	assert_int_equal(kill(d->pid, SIGHUP), 0);
	assert_true(jct_wait_log(d, "SIGHUP: toolchain on disk unchanged", 20000));
	assert_int_equal(jct_log_count(d, "toolchain changed on disk"), 0);

	point(cur, nvlib); /* another build where the daemon loaded its NVRTC from */
	assert_int_equal(kill(d->pid, SIGHUP), 0);
	assert_true(jct_wait_log(
	    d, "SIGHUP: toolchain changed on disk: now keying and compiling with", 20000));
	start_with_copy(fresh, NULL);
	char *after = identity_of(d, "identity"), *was = identity_of(d, "cache_identity"),
	     *want = identity_of(fresh, "identity");
	assert_string_equal(after, want);
	assert_string_equal(was, before);
	assert_string_not_equal(after, before);
	assert_int_equal(jct_stat(d, "toolchain_switches"), 1);
	char *out = ctl(d, 0, (const char *const[]){"warm", "--wait", NULL});
	fprintf(stderr, "warm --wait: %s", out);
	free(out);
	assert_int_equal(jct_stat(d, "rewarm_done"), 3);
	int64_t compiles = jct_stat(d, "compiles");
	for (int n = 0; n < 3; n++) {
		jc_request *r = tiny(n);
		uint8_t *warm, *ref;
		size_t warm_size, ref_size;
		assert_int_equal(compile_status(d, r, &warm, &warm_size), JC_HIT);
		assert_int_equal(compile_status(fresh, r, &ref, &ref_size), JC_MISS);
		assert_int_equal(warm_size, ref_size);
		assert_memory_equal(warm, ref, ref_size);
		free(warm);
		free(ref);
		jc_request_free(r);
	}
	assert_int_equal(jct_stat(d, "compiles"), compiles);
	assert_int_equal(jct_stat(d, "compiler_mismatches"), 0);
	free(before);
	free(after);
	free(was);
	free(want);
}

/* The toolchain changes while a re-warm runs (one for this toolchain,
 * chosen by the one before): once it ends another starts for the new one,
 * and re-warms what the first did not choose (here an entry a client made
 * meanwhile under the toolchain switched from). */
static void test_switch_during_rewarm(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d[0];
	char cur[JTL_ROOT_MAX + 16], real[PATH_MAX];
	real_dir(real);
	start_on_link(d, cur, sizeof(cur), NULL);
	char *src = slow_src(4 * SLOW_STATEMENTS);
	jc_request *slow = jct_request_src("slow.cu", src, "sm_90"), *late = tiny(10);
	free(src);
	compile_status(d, slow, NULL, NULL);
	int64_t misses = jct_stat(d, "misses");
	assert_int_equal(jtl_daemon_stop(d), 0);

	/* on the copy: the re-warm of the slow kernel starts by itself */
	start_on_link(d, cur, sizeof(cur), nvlib);
	jct_wait_stat(d, "misses", jct_ge, misses + 1, 20000);
	assert_int_equal(compile_status(d, late, NULL, NULL), JC_MISS); /* the copy's */
	point(cur, real);
	char *st = ctl(d, 0, (const char *const[]){"warm", "--status", NULL});
	jct_assert_has(st, "re-warm running"); /* still on the slow kernel */
	free(st);
	assert_int_equal(kill(d->pid, SIGHUP), 0);
	assert_true(jct_wait_log(
	    d, "SIGHUP: toolchain changed on disk: now keying and compiling with", 20000));
	char *out = ctl(d, 0, (const char *const[]){"warm", "--status", "--wait", NULL});
	fprintf(stderr, "warm --status --wait: %s", out);
	free(out);
	assert_true(
	    jct_wait_log(d, "re-warm (the toolchain changed during the last re-warm)", 20000));
	out = ctl(d, 0, (const char *const[]){"warm", "--status", "--wait", NULL});
	free(out);
	/* the client's entry of the copy was made again for the real library */
	int64_t compiles = jct_stat(d, "compiles");
	assert_int_equal(compile_status(d, late, NULL, NULL), JC_HIT);
	assert_int_equal(compile_status(d, slow, NULL, NULL), JC_HIT);
	assert_int_equal(jct_stat(d, "compiles"), compiles);
	jc_request_free(slow);
	jc_request_free(late);
}

/* A worker started after the toolkit changed on disk loads the new NVRTC
 * while the daemon still keys with the old one (no SIGHUP yet): its result
 * is not stored under the old key. The request fails saying so, the
 * daemon switches to the new toolchain by itself, and the same request
 * then compiles and is stored for the new one. */
static void test_worker_other_compiler(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d[0];
	char cur[JTL_ROOT_MAX + 16], msg[1024];
	start_on_link(d, cur, sizeof(cur), NULL);
	jc_request *r0 = tiny(0), *r1 = tiny(1);
	assert_int_equal(compile_status(d, r0, NULL, NULL), JC_MISS);
	char *before = identity_of(d, "identity");
	int64_t entries = jct_stat(d, "entries");

	point(cur, nvlib);
	/* the client workers die; their replacements load the other build */
	pid_t w[8];
	int n = workers_of(d->pid, 0, w, 8);
	assert_true(n > 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(kill(w[i], SIGKILL), 0);
	jct_wait_stat(d, "worker_crashes", jct_ge, n, 20000);
	jc_result *res = jct_compile_msg(d, r1, JC_EVERSION, msg, sizeof(msg));
	jc_result_free(res);
	jct_assert_has(msg, "loaded another compiler");
	assert_int_equal(jct_stat(d, "compiler_mismatches"), 1);
	assert_int_equal(jct_stat(d, "entries"), entries); /* nothing stored under the old key */
	assert_true(
	    jct_wait_log(d, "toolchain changed on disk: now keying and compiling with", 20000));
	char *after = identity_of(d, "identity");
	assert_string_not_equal(after, before);
	assert_int_equal(compile_status(d, r1, NULL, NULL), JC_MISS);
	assert_int_equal(compile_status(d, r1, NULL, NULL), JC_HIT);
	assert_int_equal(jct_stat(d, "compiler_mismatches"), 1);
	free(before);
	free(after);
	jc_request_free(r0);
	jc_request_free(r1);
}

static int group_setup(void **state)
{
	char why[512];
	(void)state;
	jct_tmpdir(nvroot, NULL, "nvrtc-copy");
	snprintf(nvlib, sizeof(nvlib), "%s/lib", nvroot);
	if (jtl_nvrtc_toolkit_copy(nvroot, why, sizeof(why)) != 0) {
		fprintf(stderr, "cannot make the NVRTC copy: %s\n", why);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	jct_tmpdir_remove(nvroot);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	    T(test_rewarm_after_nvrtc_change), T(test_client_first_and_join),
	    T(test_keep_requests_budget),      T(test_export_import),
	    T(test_export_own_only),	       T(test_fatbin_parts_idle),
	    T(test_sighup_toolchain_changed),  T(test_worker_other_compiler),
	    T(test_switch_during_rewarm),      T(test_failure_listed),
	    T(test_budget_top_since),
#undef T
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
