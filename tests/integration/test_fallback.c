/* SPDX-License-Identifier: MIT */
/*
 * The client never fails the application, with real daemons, real
 * processes and real NVRTC compiles: a held handle survives a daemon
 * restart, --idle-timeout and a daemon killed in the middle of a request;
 * with no daemon, the library starts one (two processes racing start one),
 * which the next process finds and which exits when idle; with auto-start
 * off, it compiles in-process (JC_UNCACHED, the daemon's bytes and lowered
 * names, one warning); JITCACHE_FALLBACK=error gives the error; a handle in
 * fallback mode uses a daemon as soon as there is one; --cache-dir means
 * that directory; a second daemon on a live socket names the first; the
 * README's program works both ways.
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
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "tests/lib/test.h"

static const char *const saxpy_exprs[] = {"&saxpy<float>", "&saxpy<double>", NULL};

/* The environment every test here starts from: nothing to find but what
 * the test sets up (jct_daemon_init's socket for JITCACHE_SOCKET). */
static void isolate(const struct jtl_daemon *d)
{
	setenv("JITCACHE_SOCKET", d->sock, 1);
	setenv("JITCACHE_DIR", d->cache, 1);
	setenv("JITCACHE_SYSTEM_SOCKET", "", 1);
	setenv("JITCACHE_AUTOSTART", "0", 1);
	unsetenv("JITCACHE_FALLBACK");
	unsetenv("XDG_RUNTIME_DIR");
	unsetenv("JITCACHE_AUTOSTART_IDLE_EXIT");
}

static int setup(void **state)
{
	struct jtl_daemon *d = calloc(1, sizeof(*d));
	jct_daemon_init(d);
	isolate(d);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	jct_daemon_cleanup(*state);
	free(*state);
	return 0;
}

/* Compiles r on c, asserting rc and the cache status. */
static jc_result *compile_on(jc_client *c, const jc_request *r, int want_rc, jc_cache_status st)
{
	jc_result *res = NULL;
	int rc = jc_compile(c, r, &res);
	if (rc != want_rc)
		fail_msg("jc_compile: %d (%s), want %d", rc, jc_client_errmsg(c), want_rc);
	assert_non_null(res);
	if (jc_result_cache_status(res) != st)
		fail_msg("cache status %d, want %d", jc_result_cache_status(res), st);
	return res;
}

static void test_reconnect_after_restart(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	jc_client *c = jct_connect(d);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result_free(compile_on(c, r, 0, JC_MISS));
	assert_int_equal(jtl_daemon_stop(d), 0);
	jct_daemon_start(d, NULL);
	jc_result_free(compile_on(c, r, 0, JC_HIT));
	jc_request_free(r);
	jc_client_close(c);
}

/* The daemon closes a connection idle for --idle-timeout; the next call of
 * the same long-lived process reconnects. */
static void test_reconnect_after_idle_timeout(void **state)
{
	struct jtl_daemon *d = *state;
	const char *flags[] = {"--idle-timeout", "1", NULL};
	jct_daemon_start(d, flags);
	jc_client *c = jct_connect(d);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result_free(compile_on(c, r, 0, JC_MISS));
	for (int i = 0; i < 100 && jct_log_count(d, "within --idle-timeout") < 1; i++)
		usleep(50000);
	assert_true(jct_log_count(d, "within --idle-timeout") >= 1);
	jc_result_free(compile_on(c, r, 0, JC_HIT));
	jc_request_free(r);
	jc_client_close(c);
}

static void count_resends(void *ctx, int level, const char *message)
{
	(void)level;
	if (strstr(message, "resending"))
		++*(int *)ctx;
}

/*
 * SIGKILL to the daemon while it compiles for us (a CUB sort, about a
 * second): the connection breaks, the client waits for the restarted daemon
 * (9 tries: up to ~10 s) on the stale socket file it replaced, and resends.
 */
static void test_daemon_killed_mid_request(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	char out[160];
	snprintf(out, sizeof(out), "%s/child.out", d->dir);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		jc_options *o;
		jc_client *c;
		jc_result *res = NULL;
		jc_options_new(&o);
		jc_options_set_socket(o, d->sock);
		jc_options_set_fallback(o, JC_FALLBACK_ERROR);
		jc_options_set_retries(o, 9);
		int resends = 0;
		jc_options_set_log(o, count_resends, &resends);
		if (jc_client_open(o, &c) != 0)
			_exit(10);
		jc_request *r = jct_request_src(
		    "cub_sort.cu", (char *)jtl_read_file(jct_example("cub_sort.cu"), &(size_t){0}),
		    "sm_90");
		jc_request_add_option(r, "-std=c++17");
		jc_request_add_option(r, "-I/usr/local/cuda/include/cccl");
		int rc = jc_compile(c, r, &res);
		FILE *f = fopen(out, "w");
		fprintf(f, "%d %d %d %s\n", rc, res ? (int)jc_result_cache_status(res) : -1,
			resends, jc_client_errmsg(c));
		fclose(f);
		_exit(0);
	}
	for (int i = 0; i < 400 && jct_stat(d, "misses") < 1; i++)
		usleep(5000);
	usleep(200000);
	jtl_daemon_kill(d);
	struct stat st;
	assert_int_equal(lstat(d->sock, &st), 0); /* left behind: stale */
	assert_true(S_ISSOCK(st.st_mode));
	jct_daemon_start(d, NULL);
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	size_t n;
	char *text = (char *)jtl_read_file(out, &n);
	int rc = -99, cache = -99, resends = 0;
	assert_int_equal(sscanf(text, "%d %d %d", &rc, &cache, &resends), 3);
	if (rc != 0)
		fprintf(stderr, "child: %s", text);
	assert_int_equal(rc, 0);
	assert_true(cache == JC_MISS || cache == JC_JOINED || cache == JC_HIT);
	assert_true(resends >= 1); /* the answer came from the second daemon */
	free(text);
	assert_int_equal(jct_stat(d, "entries"), 1);
}

/* Runs r in a fresh process with jc_client_open(NULL); "STATUS PID" (the
 * cache status, the daemon's pid or 0) written to path. Returns the pid. */
static pid_t compile_in_child(const jc_request *r, const char *path)
{
	pid_t child = fork();
	assert_true(child >= 0);
	if (child != 0)
		return child;
	jc_client *c = NULL;
	jc_result *res = NULL;
	int rc = jc_client_open(NULL, &c);
	rc = rc ?: jc_compile(c, r, &res);
	FILE *f = fopen(path, "w");
	fprintf(f, "%d %u %d %s\n", res ? (int)jc_result_cache_status(res) : -1,
		c ? jc__client_daemon_pid(c) : 0, rc,
		c ? jc_client_errmsg(c) : jc_client_errmsg(NULL));
	fclose(f);
	_exit(0);
}

static void child_result(pid_t child, const char *path, int *cache, unsigned *pid)
{
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	size_t n;
	char *text = (char *)jtl_read_file(path, &n);
	assert_non_null(text);
	int rc;
	assert_int_equal(sscanf(text, "%d %u %d", cache, pid, &rc), 3);
	if (rc != 0)
		fprintf(stderr, "child: %s", text);
	assert_int_equal(rc, 0);
	free(text);
}

/* 1 once process pid is gone (or a zombie nobody reaps: it is not ours)
 * within seconds. */
static int gone_within(pid_t pid, int seconds)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < seconds * 20; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		if (f)
			fclose(f);
		buf[n] = '\0';
		const char *paren = strrchr(buf, ')');
		if (!f || !paren || paren[1] != ' ' || paren[2] == 'Z' || paren[2] == 'X')
			return 1;
		usleep(50000);
	}
	return 0;
}

struct warnings {
	int n;
	char last[2048];
};

static void count_warnings(void *ctx, int level, const char *message)
{
	struct warnings *w = ctx;
	if (level == JC_LOG_WARNING) {
		w->n++;
		snprintf(w->last, sizeof(w->last), "%s", message);
	}
}

/* Runs r in fresh processes (compile_in_child) until one is served by a
 * daemon, at most 60 tries (an auto-start gives up after 1 s, while the
 * daemon it started goes on starting); that daemon's pid, the cache status
 * in *cache. */
static unsigned served_by_daemon(const jc_request *r, const char *path, int *cache)
{
	unsigned pid = 0;
	for (int i = 0; i < 60 && !pid; i++)
		child_result(compile_in_child(r, path), path, cache, &pid);
	if (!pid)
		fail_msg("no daemon served a request within 60 tries");
	return pid;
}

/*
 * No daemon: the first process starts one (idle exit 3 s) and compiles
 * through it, or, when the daemon takes longer than the auto-start's 1 s to
 * answer (a loaded machine), in process; the next process finds the same
 * daemon; only one was started; once nobody is connected the daemon exits
 * by itself.
 */
static void test_autostart_then_found_then_idle_exit(void **state)
{
	struct jtl_daemon *d = *state;
	char path[160];
	int cache, cache2;
	unsigned pid1, pid2;
	snprintf(path, sizeof(path), "%s/child.out", d->dir);
	setenv("JITCACHE_AUTOSTART", "1", 1);
	setenv("JITCACHE_AUTOSTART_IDLE_EXIT", "3", 1);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	child_result(compile_in_child(r, path), path, &cache, &pid1);
	assert_true((cache == JC_MISS && pid1 > 0) || (cache == JC_UNCACHED && pid1 == 0));
	pid2 = served_by_daemon(r, path, &cache2);
	if (pid1)
		assert_int_equal(pid2, pid1);
	assert_int_equal(cache2, pid1 ? JC_HIT : JC_MISS);
	char log[160];
	snprintf(log, sizeof(log), "%s/jitcached.log", d->cache);
	size_t n;
	char *text = (char *)jtl_read_file(log, &n);
	assert_non_null(text);
	assert_int_equal(jtl_file_count(log, " ready: "), 1);
	free(text);
	if (!gone_within((pid_t)pid2, 20)) {
		kill((pid_t)pid2, SIGTERM);
		fail_msg("auto-started daemon %u still runs 20 s after its last client", pid2);
	}
	text = (char *)jtl_read_file(log, &n);
	assert_non_null(strstr(text, "--idle-exit"));
	free(text);
	jc_request_free(r);
}

/* Two processes with no daemon at once: one daemon (the starter's lock,
 * which the daemon holds while it starts, keeps the other from starting
 * a second), which serves both, or the next process. */
static void test_autostart_race_starts_one(void **state)
{
	struct jtl_daemon *d = *state;
	char p1[160], p2[160], log[160];
	int c1, c2, c3;
	unsigned pid1, pid2;
	snprintf(p1, sizeof(p1), "%s/a.out", d->dir);
	snprintf(p2, sizeof(p2), "%s/b.out", d->dir);
	setenv("JITCACHE_AUTOSTART", "1", 1);
	setenv("JITCACHE_AUTOSTART_IDLE_EXIT", "2", 1);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	pid_t a = compile_in_child(r, p1), b = compile_in_child(r, p2);
	child_result(a, p1, &c1, &pid1);
	child_result(b, p2, &c2, &pid2);
	fprintf(stderr, "racing starters: status %d (daemon %u), %d (daemon %u)\n", c1, pid1, c2,
		pid2);
	assert_true(!pid1 || !pid2 || pid1 == pid2);
	unsigned pid = served_by_daemon(r, p1, &c3);
	assert_true((!pid1 || pid1 == pid) && (!pid2 || pid2 == pid));
	snprintf(log, sizeof(log), "%s/jitcached.log", d->cache);
	assert_int_equal(jtl_file_count(log, " ready: "), 1);
	kill((pid_t)pid, SIGTERM);
	assert_true(gone_within((pid_t)pid, 20));
	jc_request_free(r);
}

/*
 * A starter lock of this user held by a process that never starts a daemon
 * (a starter stopped in a debugger, say): the auto-start gives up after its
 * 1 s and the request compiles in process (before: a 30 s wait). 10 s is a
 * bound for a loaded machine.
 */
static void test_autostart_bounded(void **state)
{
	struct jtl_daemon *d = *state;
	char lock[200];
	int p[2];
	snprintf(lock, sizeof(lock), "%s.lock", d->sock);
	setenv("JITCACHE_AUTOSTART", "1", 1);
	assert_int_equal(pipe(p), 0);
	pid_t holder = fork();
	assert_true(holder >= 0);
	if (holder == 0) {
		int fd = open(lock, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 || flock(fd, LOCK_EX) != 0)
			_exit(1);
		(void)!write(p[1], "x", 1);
		for (;;)
			pause();
	}
	char ch;
	close(p[1]);
	assert_int_equal(read(p[0], &ch, 1), 1);
	close(p[0]);
	struct warnings w = {0};
	jc_options *o;
	jc_client *c;
	assert_int_equal(jc_options_new(&o), 0);
	assert_int_equal(jc_options_set_log(o, count_warnings, &w), 0);
	double t0 = jtl_now_s();
	assert_int_equal(jc_client_open(o, &c), 0);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result *res = compile_on(c, r, 0, JC_UNCACHED);
	double s = jtl_now_s() - t0;
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	fprintf(stderr, "open + first compile with the lock held: %.2f s: %s\n", s, w.last);
	assert_true(s < 10);
	assert_non_null(strstr(w.last, "held by another starter"));
	jc_result_free(res);
	jc_request_free(r);
	jc_client_close(c);
	jc_options_free(o);
}

/*
 * Auto-start off and no daemon: jc_compile runs NVRTC here. A valid cubin
 * (EM_CUDA, sm_90), the lowered names, JC_UNCACHED, one warning for two
 * compiles; a compile error with its log; a link job through nvJitLink.
 * Then a daemon compiles the same request: the same bytes and names.
 */
static void test_in_process_fallback(void **state)
{
	struct jtl_daemon *d = *state;
	struct warnings w = {0};
	jc_options *o;
	jc_client *c;
	assert_int_equal(jc_options_new(&o), 0);
	assert_int_equal(jc_options_set_log(o, count_warnings, &w), 0);
	assert_int_equal(jc_client_open(o, &c), 0);
	jc_options_free(o);
	assert_null(jc_client_socket(c));
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result *a = compile_on(c, r, 0, JC_UNCACHED);
	jc_result *b = compile_on(c, r, 0, JC_UNCACHED);
	assert_int_equal(w.n, 1);
	assert_non_null(strstr(w.last, "not cached"));
	assert_non_null(strstr(w.last, d->sock)); /* says where it looked */
	size_t na;
	const uint8_t *da = jc_result_data(a, &na);
	assert_int_equal(jct_cubin_sm(da, na), 90);
	assert_string_equal(jc_result_key(a), "");
	assert_int_equal(jc_result_lowered_count(a), 2);
	assert_non_null(jc_result_lowered_name(a, "&saxpy<float>"));
	assert_true(jc_result_time_ns(a, JC_TIME_COMPILE) > 0);

	jc_request *bad =
	    jct_request_src("bad.cu", "__global__ void k() { undefined_thing(); }\n", "sm_90");
	jc_result *e = compile_on(c, bad, JC_ECOMPILE, JC_UNCACHED);
	assert_non_null(strstr(jc_result_log(e), "undefined_thing"));
	assert_null(jc_result_data(e, NULL));

	/* Link only: the cubin above linked as a cubin input. */
	jc_request *link = NULL;
	assert_int_equal(jc_request_new(&link), 0);
	assert_int_equal(jc_request_set_arch(link, "sm_90"), 0);
	assert_int_equal(jc_request_add_link_input(link, JC_LINK_CUBIN, "saxpy.cubin", da, na), 0);
	jc_result *l = compile_on(c, link, 0, JC_UNCACHED);
	size_t nl;
	const uint8_t *dl = jc_result_data(l, &nl);
	assert_int_equal(jct_cubin_sm(dl, nl), 90);

	jct_daemon_start(d, NULL);
	jc_result *ref = jct_compile(d, r, 0);
	size_t nr;
	const uint8_t *dr = jc_result_data(ref, &nr);
	assert_int_equal(nr, na);
	assert_memory_equal(dr, da, na);
	for (size_t i = 0; saxpy_exprs[i]; i++)
		assert_string_equal(jc_result_lowered_name(ref, saxpy_exprs[i]),
				    jc_result_lowered_name(a, saxpy_exprs[i]));
	/* The same handle now finds the daemon. */
	jc_result *h = compile_on(c, r, 0, JC_HIT);
	assert_non_null(jc_client_socket(c));
	assert_int_equal(w.n, 1);
	jc_result_free(a);
	jc_result_free(b);
	jc_result_free(e);
	jc_result_free(l);
	jc_result_free(ref);
	jc_result_free(h);
	jc_request_free(r);
	jc_request_free(bad);
	jc_request_free(link);
	jc_client_close(c);
}

/* jitcachectl compile without --socket/--cache-dir takes the same path:
 * no daemon, auto-start off: "uncached", the library's warning, the file. */
static void test_ctl_compile_uncached(void **state)
{
	struct jtl_daemon *d = *state;
	char out[160], *err = NULL;
	snprintf(out, sizeof(out), "%s/saxpy.cubin", d->dir);
	const char *argv[] = {getenv("JITCACHECTL"),
			      "compile",
			      jct_example("saxpy.cu"),
			      "--arch",
			      "sm_90",
			      "--name-expr",
			      "&saxpy<float>",
			      "-o",
			      out,
			      NULL};
	char *text = NULL;
	assert_int_equal(jct_run(d, argv, &text, &err), 0);
	assert_true(strncmp(err, "uncached", 8) == 0 || strstr(err, "\nuncached\t"));
	assert_non_null(strstr(err, "compiling in this process"));
	assert_non_null(strstr(text, "&saxpy<float>\t_Z5saxpyIf"));
	size_t n;
	uint8_t *cubin = jtl_read_file(out, &n);
	assert_int_equal(jct_cubin_sm(cubin, n), 90);
	free(cubin);
	free(text);
	free(err);
	/* With --socket it is that daemon or an error. */
	const char *strict[] = {getenv("JITCACHECTL"),
				"--socket",
				d->sock,
				"compile",
				jct_example("saxpy.cu"),
				"--arch",
				"sm_90",
				"-o",
				out,
				NULL};
	assert_int_equal(jct_run(d, strict, NULL, &err), 1);
	assert_non_null(strstr(err, d->sock));
	assert_null(strstr(err, "uncached"));
	free(err);
}

static void test_fallback_error(void **state)
{
	struct jtl_daemon *d = *state;
	jc_client *c = (jc_client *)&c; /* not NULL: open must clear it */
	setenv("JITCACHE_FALLBACK", "error", 1);
	assert_int_equal(jc_client_open(NULL, &c), JC_ECONNECT);
	assert_null(c);
	assert_non_null(strstr(jc_client_errmsg(NULL), d->sock));
	/* An explicit socket is that daemon or an error, whatever the fallback. */
	unsetenv("JITCACHE_FALLBACK");
	assert_int_equal(jc_client_connect(d->sock, &c), JC_ECONNECT);
}

/*
 * A JITCACHE_FALLBACK the library does not know ("complie", "ERROR") means
 * compile, the default, and says so once, through the log callback, naming
 * the variable, the value and the values it takes (before: silently
 * compile); jitcachectl prints it.
 */
static void test_fallback_typo_warns(void **state)
{
	struct jtl_daemon *d = *state;
	const char *const typos[] = {"complie", "ERROR"};
	jc_request *r = jct_request("saxpy.cu", "sm_90", NULL);
	for (size_t i = 0; i < 2; i++) {
		struct warnings w = {0};
		jc_options *o;
		jc_client *c;
		setenv("JITCACHE_FALLBACK", typos[i], 1);
		assert_int_equal(jc_options_new(&o), 0);
		assert_int_equal(jc_options_set_log(o, count_warnings, &w), 0);
		assert_int_equal(jc_client_open(o, &c), 0);
		jc_options_free(o);
		assert_int_equal(w.n, 1);
		fprintf(stderr, "JITCACHE_FALLBACK=%s: %s\n", typos[i], w.last);
		assert_non_null(strstr(w.last, "JITCACHE_FALLBACK"));
		assert_non_null(strstr(w.last, typos[i]));
		assert_non_null(strstr(w.last, "\"compile\""));
		assert_non_null(strstr(w.last, "\"error\""));
		jc_result_free(compile_on(c, r, 0, JC_UNCACHED));
		assert_int_equal(w.n, 2); /* and the in-process compile's own */
		jc_client_close(c);
	}
	char *err = NULL;
	const char *argv[] = {
	    getenv("JITCACHECTL"), "compile", jct_example("saxpy.cu"), "--arch", "sm_90", "-o",
	    "/dev/null",	   NULL};
	assert_int_equal(jct_run(d, argv, NULL, &err), 0);
	assert_non_null(strstr(err, "JITCACHE_FALLBACK=ERROR is neither"));
	free(err);
	unsetenv("JITCACHE_FALLBACK");
	jc_request_free(r);
}

/* Starts a daemon on d->dir/name with socket sock (log: d->dir/name.log). */
static void start_on(struct jtl_daemon *t, const struct jtl_daemon *d, const char *name,
		     const char *sock)
{
	*t = *d;
	snprintf(t->cache, sizeof(t->cache), "%s/%s", d->dir, name);
	snprintf(t->sock, sizeof(t->sock), "%s", sock);
	snprintf(t->log, sizeof(t->log), "%s/%s.log", d->dir, name);
	jct_daemon_start(t, NULL);
}

/*
 * Daemon A serves cache A on the per-user (XDG) socket; cache B has an
 * entry of its own, and no daemon. `jitcachectl --cache-dir B` sees B's
 * entry (offline), never A's; --socket XDG --cache-dir B is refused by A,
 * naming its directory; --socket to nothing fails; with --cache-dir too it
 * works offline; the library given B compiles in-process rather than use A.
 */
static void test_cache_dir_means_that_dir(void **state)
{
	struct jtl_daemon *d = *state, a, b;
	char xdg[128], asock[160], *out = NULL, *err = NULL, keya[40], keyb[40];
	snprintf(xdg, sizeof(xdg), "%s/run", d->dir);
	snprintf(asock, sizeof(asock), "%s/jitcached.sock", xdg);
	assert_int_equal(mkdir(xdg, 0700), 0);
	setenv("XDG_RUNTIME_DIR", xdg, 1);
	unsetenv("JITCACHE_SOCKET");
	start_on(&b, d, "B", d->sock);
	jc_request *rb = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result *res = jct_compile(&b, rb, 0);
	snprintf(keyb, sizeof(keyb), "%s", jc_result_key(res));
	jc_result_free(res);
	assert_int_equal(jtl_daemon_stop(&b), 0);
	start_on(&a, d, "A", asock);
	jc_request *ra = jct_request_src("other.cu", "__global__ void other() {}\n", "sm_90");
	res = jct_compile(&a, ra, 0);
	snprintf(keya, sizeof(keya), "%s", jc_result_key(res));
	jc_result_free(res);

	const char *ctl = getenv("JITCACHECTL");
	const char *purge[] = {ctl, "--cache-dir", b.cache, "purge", "--all", "--dry-run", NULL};
	assert_int_equal(jct_run(d, purge, &out, &err), 0);
	assert_non_null(strstr(out, keyb));
	assert_null(strstr(out, keya));
	free(out);
	free(err);
	const char *mismatch[] = {ctl, "--socket", asock, "--cache-dir", b.cache, "ls", NULL};
	assert_int_equal(jct_run(d, mismatch, &out, &err), 1);
	assert_non_null(strstr(err, a.cache));
	assert_non_null(strstr(err, b.cache));
	free(out);
	free(err);
	char nothing[160];
	snprintf(nothing, sizeof(nothing), "%s/nothing.sock", d->dir);
	const char *dead[] = {ctl, "--socket", nothing, "ls", NULL};
	assert_int_equal(jct_run(d, dead, &out, &err), 1);
	assert_non_null(strstr(err, nothing));
	free(out);
	free(err);
	const char *offline[] = {ctl, "--socket", nothing, "--cache-dir", b.cache, "ls", NULL};
	assert_int_equal(jct_run(d, offline, &out, &err), 0);
	assert_non_null(strstr(out, keyb));
	assert_null(strstr(out, keya));
	free(out);
	free(err);
	jc_options *o;
	jc_client *c;
	assert_int_equal(jc_options_new(&o), 0);
	assert_int_equal(jc_options_set_cache_dir(o, b.cache), 0);
	assert_int_equal(jc_client_open(o, &c), 0);
	jc_result_free(compile_on(c, rb, 0, JC_UNCACHED));
	jc_client_close(c);
	jc_options_free(o);
	assert_int_equal(jtl_daemon_stop(&a), 0);
	jc_request_free(ra);
	jc_request_free(rb);
}

/*
 * The search order: $JITCACHE_SOCKET (nothing there), the per-user socket
 * (nothing yet), the system socket (a daemon): the system one serves; once
 * a per-user daemon answers, it comes first.
 */
static void test_search_order(void **state)
{
	struct jtl_daemon *d = *state, sys, user;
	char xdg[128], usock[160], ssock[160];
	snprintf(xdg, sizeof(xdg), "%s/run", d->dir);
	snprintf(usock, sizeof(usock), "%s/jitcached.sock", xdg);
	snprintf(ssock, sizeof(ssock), "%s/system.sock", d->dir);
	assert_int_equal(mkdir(xdg, 0700), 0);
	setenv("XDG_RUNTIME_DIR", xdg, 1);
	setenv("JITCACHE_SYSTEM_SOCKET", ssock, 1);
	start_on(&sys, d, "sys", ssock);
	jc_client *c;
	assert_int_equal(jc_client_open(NULL, &c), 0);
	assert_non_null(jc_client_socket(c));
	assert_string_equal(jc_client_socket(c), ssock);
	assert_int_equal(jc__client_daemon_pid(c), (uint32_t)sys.pid);
	jc_client_close(c);
	start_on(&user, d, "user", usock);
	assert_int_equal(jc_client_open(NULL, &c), 0);
	assert_string_equal(jc_client_socket(c), usock);
	jc_client_close(c);
	/* "" skips the system socket: nothing but the per-user one is tried. */
	assert_int_equal(jtl_daemon_stop(&user), 0);
	setenv("JITCACHE_SYSTEM_SOCKET", "", 1);
	setenv("JITCACHE_FALLBACK", "error", 1);
	assert_int_equal(jc_client_open(NULL, &c), JC_ECONNECT);
	assert_null(strstr(jc_client_errmsg(NULL), ssock));
	assert_non_null(strstr(jc_client_errmsg(NULL), usock));
	assert_int_equal(jtl_daemon_stop(&sys), 0);
}

/* A second jitcached (another directory) on a socket that answers: an
 * error naming the first one's pid, not an abort; the first keeps serving. */
static void test_second_daemon_on_live_socket(void **state)
{
	struct jtl_daemon *d = *state, other;
	jct_daemon_start(d, NULL);
	other = *d;
	snprintf(other.cache, sizeof(other.cache), "%s/other", d->dir);
	snprintf(other.log, sizeof(other.log), "%s/other.log", d->dir);
	jct_daemon_spawn(&other, NULL);
	assert_int_equal(jtl_daemon_wait(&other), 1);
	size_t n;
	char *log = (char *)jtl_read_file(other.log, &n), want[256];
	snprintf(want, sizeof(want), "pid %d serving %s", (int)d->pid, d->cache);
	if (!strstr(log, want))
		fprintf(stderr, "second daemon said: %s\n", log);
	assert_non_null(strstr(log, want));
	assert_null(strstr(log, "Assertion"));
	free(log);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result_free(jct_compile(d, r, 0));
	jc_request_free(r);
}

/* The README's program (examples/nvrtc_port.c): with no daemon and
 * auto-start off it compiles in-process and says so on stderr; with a
 * daemon, the same program is served by it. */
static void test_readme_program(void **state)
{
	struct jtl_daemon *d = *state;
	const char *argv[] = {getenv("JC_NVRTC_PORT"), NULL};
	char *out = NULL, *err = NULL;
	assert_int_equal(jct_run(d, argv, &out, &err), 0);
	assert_non_null(strstr(out, "_Z5saxpyIfEvT_PS0_S1_, uncached"));
	assert_non_null(strstr(err, "compiling in this process"));
	free(out);
	free(err);
	jct_daemon_start(d, NULL);
	assert_int_equal(jct_run(d, argv, &out, &err), 0);
	assert_non_null(strstr(out, "_Z5saxpyIfEvT_PS0_S1_, cached"));
	assert_string_equal(err, "");
	free(out);
	free(err);
	assert_int_equal(jct_stat(d, "misses"), 1);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_reconnect_after_restart),	  T(test_reconnect_after_idle_timeout),
	    T(test_daemon_killed_mid_request),	  T(test_autostart_then_found_then_idle_exit),
	    T(test_autostart_race_starts_one),	  T(test_autostart_bounded),
	    T(test_in_process_fallback),	  T(test_fallback_error),
	    T(test_fallback_typo_warns),	  T(test_ctl_compile_uncached),
	    T(test_cache_dir_means_that_dir),	  T(test_search_order),
	    T(test_second_daemon_on_live_socket), T(test_readme_program),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
