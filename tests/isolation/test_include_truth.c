/* SPDX-License-Identifier: MIT */
/*
 * Dependency truth and confinement against a real daemon with real NVRTC
 * (issue 10, finding 1). The five include forms the old literal scan missed:
 * a computed include, a line splice inside the directive, the digraph
 * %:include, a relative climb out of the worker's directory, and an absolute
 * program name with a quoted include beside it.
 *  - Own uid, the header's directory declared (-I): a miss with the header's
 *    bytes, a hit, then after a change a miss with the new bytes (never a
 *    stale hit).
 *  - Own uid, not declared: NVRTC is refused the file (no content in the
 *    reply or the log, a "refused" line instead), and the entry is keyed by
 *    what the request declares.
 *  - Another uid (a user made by the test: requests through the library in a
 *    child that drops to it, and jitcachectl run with setpriv): refused
 *    before any compile; neither a 0600 file of the daemon's user nor the
 *    daemon's /proc/self/environ shows up in any reply or in the log.
 *  - A FIFO as a header: a fast, clear error; the worker is free at once.
 *  - Include directories that lead into /proc, /sys or /dev (issue 27):
 *    /proc/self/root/DIR (which realpath turns into DIR), a link to it, a
 *    ".." climb into /proc, /sys: refused with a clear error for the
 *    daemon's own uid (root here) and by the client that reads for a
 *    daemon (JITCACHE_SEND_HEADERS=1); with -I / an absolute #include
 *    through /proc/self/root is refused to NVRTC. A 0600 header there never
 *    shows in a reply or the log.
 * Every case runs with the confinement the daemon picks here, and again
 * with --confinement userns where the kernel allows it.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
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

#define SECRET	   "jct-secret-7f3a91"
#define ENV_SECRET "jct-env-secret-52c0de"

static const char *confinement; /* --confinement for this group, or NULL */
static char user[64];		/* the unprivileged user made for the run ("" = none) */
static uid_t user_uid;
static gid_t user_gid;

static const char *ctl(void)
{
	return getenv("JITCACHECTL");
}

/* The daemon's environment holds ENV_SECRET (for the /proc/self/environ attack). */
static int env_setup(void *ctx)
{
	(void)ctx;
	return setenv("JCT_TRUTH_SECRET", ENV_SECRET, 1) != 0;
}

static void start(struct jtl_daemon *d, int shared)
{
	const char *flags[12] = {"--log-level", "debug", "--compile-timeout", "60"};
	size_t n = 4;
	if (shared) {
		flags[n++] = "--group-shared";
		flags[n++] = "yes";
	}
	if (confinement) {
		flags[n++] = "--confinement";
		flags[n++] = confinement;
	}
	flags[n] = NULL;
	jct_daemon_spawn_with(d, flags, env_setup, NULL);
	jct_daemon_wait_ready(d);
}

static int setup(void **state)
{
	jct_setup(state);
	struct jtl_daemon *d = *state;
	/* Other users reach the socket; the cache stays the daemon's. */
	assert_int_equal(chmod(d->dir, 0711), 0);
	return 0;
}

/* The five forms. Each reads the header HDIR/v.h (HDIR = d->dir/inc); the
 * kernel stores VALUE, which the header defines. */
enum form { COMPUTED, SPLICE, DIGRAPH, CLIMB, ABS_NAME, N_FORMS };
static const char *const form_names[N_FORMS] = {"computed include", "line splice",
						"digraph %:include", "relative climb",
						"absolute program name"};

static const char kernel[] = "extern \"C\" __global__ void k(int *x) { x[0] = VALUE; }\n";

/* Source text and program name of form f reading header (absolute path). */
static void form_source(const struct jtl_daemon *d, enum form f, const char *header, char *src,
			size_t srclen, char *name, size_t namelen)
{
	snprintf(name, namelen, "k.cu");
	switch (f) {
	case COMPUTED:
		snprintf(src, srclen, "#define P \"%s\"\n#include P\n%s", header, kernel);
		break;
	case SPLICE:
		snprintf(src, srclen, "#inc\\\nlude \"%s\"\n%s", header, kernel);
		break;
	case DIGRAPH:
		snprintf(src, srclen, "%%:include \"%s\"\n%s", header, kernel);
		break;
	case CLIMB: {
		/* From DIR/cache/worker-cwd, where NVRTC looks first, up to d->dir. */
		const char *rel = header + strlen(d->dir) + 1;
		snprintf(src, srclen, "#include \"../../%s\"\n%s", rel, kernel);
		break;
	}
	case ABS_NAME: {
		const char *slash = strrchr(header, '/');
		snprintf(name, namelen, "%.*s/k.cu", (int)(slash - header), header);
		snprintf(src, srclen, "#include \"%s\"\n%s", slash + 1, kernel);
		break;
	}
	default:
		fail();
	}
}

static jc_request *form_request(const struct jtl_daemon *d, enum form f, const char *header,
				const char *declared)
{
	char src[2048], name[512];
	form_source(d, f, header, src, sizeof(src), name, sizeof(name));
	jc_request *r = jct_request_src(name, src, "compute_90");
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	if (declared)
		jct_request_include(r, declared);
	return r;
}

/* The PTX of res holds want (a decimal literal of VALUE). */
static void holds(jc_result *res, const char *want)
{
	size_t n;
	const char *ptx = jc_result_data(res, &n);
	if (!ptx || !memmem(ptx, n, want, strlen(want)))
		fail_msg("PTX does not hold %s:\n%.*s", want, ptx ? (int)n : 0, ptx ? ptx : "");
}

static jc_result *expect(const struct jtl_daemon *d, const jc_request *r, jc_cache_status st,
			 const char *want, const char *what)
{
	jc_result *res = jct_compile(d, r, 0);
	if (jc_result_cache_status(res) != st)
		fail_msg("%s: cache status %d, want %d (log: %s)", what,
			 jc_result_cache_status(res), st, jc_result_log(res));
	holds(res, want);
	return res;
}

/* Own uid, the header's directory declared: never a stale hit. */
static void test_own_uid_declared(void **state)
{
	struct jtl_daemon *d = *state;
	start(d, 0);
	char hdir[300], header[400], value[32];
	snprintf(hdir, sizeof(hdir), "%s/inc", d->dir);
	snprintf(header, sizeof(header), "%s/v.h", hdir);
	int64_t stored_before = 0;
	for (int f = 0; f < N_FORMS; f++) {
		int v = 5100 + 100 * f;
		snprintf(value, sizeof(value), "#define VALUE %d\n", v);
		jct_put(d->dir, "inc/v.h", value);
		jct_settle();
		jc_request *r = form_request(d, f, header, hdir);
		char want[16];
		snprintf(want, sizeof(want), "%d", v);
		jc_result *first = expect(d, r, JC_MISS, want, form_names[f]);
		jc_result_free(expect(d, r, JC_HIT, want, form_names[f]));

		/* The header changes: a miss and the new bytes, then a hit of those. */
		snprintf(value, sizeof(value), "#define VALUE %d\n", v + 1);
		jct_put(d->dir, "inc/v.h", value);
		jct_settle();
		snprintf(want, sizeof(want), "%d", v + 1);
		jc_result *second = expect(d, r, JC_MISS, want, form_names[f]);
		assert_string_not_equal(jc_result_key(first), jc_result_key(second));
		jc_result_free(expect(d, r, JC_HIT, want, form_names[f]));
		jc_result_free(first);
		jc_result_free(second);
		jc_request_free(r);
	}
	/* The climb is the one the scan cannot follow (it looks in the -I
	 * directory, NVRTC in its working directory first): learnt from what
	 * NVRTC read, twice (before and after the change). */
	assert_true(jct_stat(d, "deps_learned") >= 2 + stored_before);
	assert_int_equal(jct_stat(d, "deps_mismatch"), 0);
}

/* Own uid, nothing declared: NVRTC is refused the file; no content shows. */
static void test_own_uid_undeclared(void **state)
{
	struct jtl_daemon *d = *state;
	start(d, 0);
	char header[400];
	snprintf(header, sizeof(header), "%s/private/v.h", d->dir);
	jct_put(d->dir, "private/v.h", "#define VALUE 4242 /* " SECRET " */\n#error " SECRET "\n");
	jct_settle();
	for (int f = 0; f < N_FORMS; f++) {
		jc_request *r = form_request(d, f, header, NULL);
		jc_result *res = jct_compile(d, r, JC_ECOMPILE);
		const char *log = jc_result_log(res);
		if (strstr(log, SECRET) || strstr(log, "4242"))
			fail_msg("%s: the log shows the file:\n%s", form_names[f], log);
		if (!strstr(log, "cannot open source file"))
			fail_msg("%s: unexpected log:\n%s", form_names[f], log);
		jc_result_free(res);
		jc_request_free(r);
	}
	assert_int_equal(jct_log_count(d, SECRET), 0);
}

/* Runs jitcachectl as the test user (setpriv) compiling src (written to a
 * file it can read) with extra arguments; returns its exit code, stdout and
 * stderr in *out. */
static int ctl_as_user(const struct jtl_daemon *d, const char *name, const char *src,
		       const char *extra, char **out)
{
	char dir[300], file[1024], cmd[4096], outp[400];
	snprintf(dir, sizeof(dir), "%s/user", d->dir);
	assert_int_equal(
	    jct_sh("mkdir -p '%s' && chmod 01777 '%s' && rm -f '%s/out.ptx'", dir, dir, dir), 0);
	snprintf(file, sizeof(file), "%s/%s", dir, name[0] == '/' ? strrchr(name, '/') + 1 : name);
	jct_write_file(file, src, strlen(src));
	assert_int_equal(chmod(file, 0644), 0);
	snprintf(outp, sizeof(outp), "%s/user-out.txt", d->dir);
	snprintf(
	    cmd, sizeof(cmd),
	    "cd '%s' && setpriv --reuid=%u --regid=%u --groups=%u '%s' --socket '%s' compile '%s' "
	    "--arch compute_90 --output ptx -o out.ptx %s > '%s' 2>&1; rc=$?; cat out.ptx >> '%s' "
	    "2>/dev/null; "
	    "exit $rc",
	    dir, (unsigned)user_uid, (unsigned)user_gid, (unsigned)getegid(), ctl(), d->sock, file,
	    extra ? extra : "", outp, outp);
	int rc = jct_sh("%s", cmd);
	size_t n;
	*out = (char *)jtl_read_file(outp, &n);
	return rc;
}

static void need_user(void)
{
	if (geteuid() != 0 || !user[0]) {
		fprintf(stderr, "skipped: needs root and useradd to run a client as another uid\n");
		skip();
	}
}

/* What a request sent by the test user got: jc_compile's code, then the
 * connection's message and the result's log and data (no NUL inside). */
struct answer {
	int rc;
	char text[8192];
};

/* Sends r as the test user (a child that drops to it), through the library
 * (as an application would: no -I of its own). */
static void lib_as_user(const struct jtl_daemon *d, const jc_request *r, struct answer *a)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct answer out = {.rc = -999};
		gid_t groups[1] = {getegid()}; /* the socket's group (--group-shared) */
		close(p[0]);
		if (setgroups(1, groups) != 0 || setgid(user_gid) != 0 || setuid(user_uid) != 0)
			_exit(99);
		jc_client *c = NULL;
		jc_result *res = NULL;
		if (jc_client_connect(d->sock, &c) != 0)
			_exit(98);
		out.rc = jc_compile(c, r, &res);
		size_t n = 0;
		const char *data = res ? jc_result_data(res, &n) : NULL;
		const char *msg = jc_client_errmsg(c);
		snprintf(out.text, sizeof(out.text), "%s\n%s\n%.*s", msg ? msg : "",
			 res ? jc_result_log(res) : "", data ? (int)n : 0, data ? data : "");
		_exit(write(p[1], &out, sizeof(out)) == (ssize_t)sizeof(out) ? 0 : 97);
	}
	close(p[1]);
	size_t got = 0;
	ssize_t k;
	while (got < sizeof(*a) && (k = read(p[0], (char *)a + got, sizeof(*a) - got)) > 0)
		got += (size_t)k;
	close(p[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(got, sizeof(*a));
}

static int leaks(const char *text)
{
	return strstr(text, SECRET) || strstr(text, "31337") || strstr(text, ENV_SECRET);
}

/* Refused by the daemon, or by the client that reads for it (with the
 * user's own rights: the secret is not theirs), or, for a computed include
 * the client sends whole directories for, by the confined worker. */
static int refused(const char *text)
{
	return strstr(text, "only for its own uid") || strstr(text, "a daemon of another uid") ||
	       strstr(text, "Permission denied") ||
	       strstr(text, "outside the toolkit tree and the request's include directories") ||
	       /* /proc and /sys: refused to the worker without a log line of its
		* own (daemon/worker_fs.c), so NVRTC's message is the answer. */
	       strstr(text, "cannot open source file \"/proc/");
}

/* Another uid: every form is refused before NVRTC runs (by the daemon, or by the
 * client, which reads its include directories for a daemon of another uid); nothing leaks. */
static void test_other_uid_refused(void **state)
{
	struct jtl_daemon *d = *state;
	need_user();
	start(d, 1);
	char secret[400];
	snprintf(secret, sizeof(secret), "%s/private/s.h", d->dir);
	jct_put(d->dir, "private/s.h", "#define VALUE 31337 /* " SECRET " */\n#error " SECRET "\n");
	assert_int_equal(chmod(secret, 0600), 0);
	struct answer a;
	/* A request that reads nothing from disk is served to this uid. */
	jc_request *plain = jct_request_src("plain.cu", kernel, "compute_90");
	assert_int_equal(jc_request_set_output(plain, JC_PTX), 0);
	assert_int_equal(jc_request_add_option(plain, "-DVALUE=77"), 0);
	lib_as_user(d, plain, &a);
	if (a.rc != 0 || !strstr(a.text, "77"))
		fail_msg("a plain request of another uid: %d\n%s", a.rc, a.text);
	jc_request_free(plain);
	const char *targets[] = {secret, "/proc/self/environ"};
	for (size_t t = 0; t < 2; t++) {
		for (int f = 0; f < N_FORMS; f++) {
			if (t == 1 && (f == CLIMB || f == ABS_NAME))
				continue; /* those two name files beside DIR */
			jc_request *r = form_request(d, (enum form)f, targets[t], NULL);
			lib_as_user(d, r, &a);
			if (a.rc == 0 || leaks(a.text) || (f != ABS_NAME && !refused(a.text)))
				fail_msg("%s of %s: %d, answer:\n%s", form_names[f], targets[t],
					 a.rc, a.text);
			jc_request_free(r);
			/* jitcachectl as that user (setpriv), too: refused, nothing shown. */
			char src[2048], name[512], *out;
			form_source(d, (enum form)f, targets[t], src, sizeof(src), name,
				    sizeof(name));
			if (f == ABS_NAME) /* jitcachectl names the program by its file */
				snprintf(src, sizeof(src), "#include \"%s\"\n%s",
					 strrchr(targets[t], '/') + 1, kernel);
			int rc = ctl_as_user(d, name, src, NULL, &out);
			if (rc == 0 || leaks(out) || (f != ABS_NAME && !refused(out)))
				fail_msg("jitcachectl, %s of %s: exit %d, output:\n%s",
					 form_names[f], targets[t], rc, out);
			free(out);
		}
	}
	assert_int_equal(jct_log_count(d, SECRET), 0);
	assert_int_equal(jct_log_count(d, ENV_SECRET), 0);
	assert_int_equal(jct_log_count(d, "31337"), 0);
}

/* A FIFO as a header: a fast, clear error, and the worker is free at once. */
static void test_fifo_header(void **state)
{
	struct jtl_daemon *d = *state;
	start(d, 0);
	char hdir[300], fifo[400];
	snprintf(hdir, sizeof(hdir), "%s/inc", d->dir);
	snprintf(fifo, sizeof(fifo), "%s/f.h", hdir);
	assert_int_equal(jct_sh("mkdir -p '%s' && mkfifo '%s'", hdir, fifo), 0);
	jc_request *r = jct_request_src("k.cu",
					"#include \"f.h\"\n"
					"extern \"C\" __global__ void k(int *x) { x[0] = 1; }\n",
					"compute_90");
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	jct_request_include(r, hdir);
	double t0 = jtl_now_s();
	jc_result *res = jct_compile(d, r, JC_ECOMPILE);
	double took = jtl_now_s() - t0;
	assert_true(took < 10);
	assert_non_null(strstr(jc_result_log(res), "a FIFO"));
	jc_result_free(res);
	/* A computed include of it, too. */
	jc_request *r2 = form_request(d, COMPUTED, fifo, hdir);
	res = jct_compile(d, r2, JC_ECOMPILE);
	assert_non_null(strstr(jc_result_log(res), "a FIFO"));
	jc_result_free(res);
	/* Both workers are free: two fresh compiles go through at once. */
	jc_request *ok = jct_request_src("ok.cu", kernel, "compute_90");
	assert_int_equal(jc_request_set_output(ok, JC_PTX), 0);
	assert_int_equal(jc_request_add_option(ok, "-DVALUE=9"), 0);
	t0 = jtl_now_s();
	jc_result_free(jct_compile(d, ok, 0));
	assert_true(jtl_now_s() - t0 < 10);
	assert_int_equal(jct_stat(d, "compile_timeouts"), 0);
	jc_request_free(ok);
	jc_request_free(r2);
	jc_request_free(r);
}

/* jct_compile_msg of r, asserting it fails with want_rc, no SECRET in the
 * message, the log or the daemon's log; the message into msg. */
static void refused_clean(const struct jtl_daemon *d, const jc_request *r, int want_rc, char *msg,
			  size_t len, const char *what)
{
	jc_result *res = jct_compile_msg(d, r, want_rc, msg, len);
	const char *log = res ? jc_result_log(res) : "";
	fprintf(stderr, "%s: %s%s%s\n", what, msg, log && *log ? " / log: " : "", log ? log : "");
	if (leaks(msg) || (log && leaks(log)))
		fail_msg("%s: the header's content is shown", what);
	jc_result_free(res);
	assert_int_equal(jct_log_count(d, SECRET), 0);
}

/*
 * A root-run daemon read a 0600 file through -I /proc/self/root/DIR for its
 * own uid and showed it in the compile log (issue 27, 6), while files
 * under /proc are never headers: every spelling that leads there is
 * refused before anything is read, by the daemon and by a client that
 * reads its directories itself.
 */
static void test_kernel_include_dirs(void **state)
{
	struct jtl_daemon *d = *state;
	if (confinement)
		skip(); /* the daemon refuses before any worker: one run is enough */
	start(d, 0);
	char priv[300], proc[400], link[300], climb[600], msg[2048];
	snprintf(priv, sizeof(priv), "%s/private", d->dir);
	jct_put(d->dir, "private/s.h", "#error " SECRET "\n");
	assert_int_equal(chmod(priv, 0700), 0);
	snprintf(proc, sizeof(proc), "/proc/self/root%s", priv);
	snprintf(link, sizeof(link), "%s/link", d->dir);
	assert_int_equal(symlink(proc, link), 0);
	snprintf(climb, sizeof(climb), "%s/no-such/../../../../../../../../proc/self/root%s",
		 d->dir, priv);
	const char *dirs[] = {proc, link, climb, "/sys/kernel"};
	const char *src =
	    "#include \"s.h\"\nextern \"C\" __global__ void k(int *x) { x[0] = 1; }\n";
	for (int tree = 0; tree < 2; tree++) {
		if (tree)
			setenv("JITCACHE_SEND_HEADERS", "1", 1); /* the client reads them */
		for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
			jc_request *r = jct_request_src("k.cu", src, "compute_90");
			assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
			jct_request_include(r, dirs[i]);
			refused_clean(d, r, JC_EINVAL, msg, sizeof(msg), dirs[i]);
			assert_non_null(strstr(msg, "never headers"));
			jc_request_free(r);
		}
	}
	unsetenv("JITCACHE_SEND_HEADERS");
	/* -I / declares /proc too: an absolute #include through it is refused
	 * to NVRTC (a compile error without the header's content). */
	char abs_src[1024];
	snprintf(abs_src, sizeof(abs_src),
		 "#include \"%s/s.h\"\nextern \"C\" __global__ void "
		 "k(int *x) { x[0] = 1; }\n",
		 proc);
	jc_request *r = jct_request_src("k.cu", abs_src, "compute_90");
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	jct_request_include(r, "/");
	refused_clean(d, r, JC_ECOMPILE, msg, sizeof(msg),
		      "-I / and #include \"/proc/self/root...\"");
	jc_request_free(r);
}

/* The start-up log and stats say which confinement is in force. */
static void test_confinement_reported(void **state)
{
	struct jtl_daemon *d = *state;
	start(d, 0);
	char *out = NULL;
	const char *args[] = {"stats", "--json", NULL};
	assert_int_equal(jct_ctl(d, &out, NULL, args), 0);
	const char *want = confinement ? confinement : "landlock";
	char key[64];
	snprintf(key, sizeof(key), "\"confinement\": \"%s\"", want);
	if (!confinement && !strstr(out, key)) {
		/* Without Landlock the daemon picks what there is; it must still say. */
		assert_non_null(strstr(out, "\"confinement\": \""));
	} else {
		assert_non_null(strstr(out, key));
	}
	free(out);
	assert_true(jct_log_count(d, "confinement ") >= 1);
	/* doctor says it too. */
	const char *doctor[] = {"doctor", NULL};
	jct_ctl(d, &out, NULL, doctor);
	if (!strstr(out, "compile workers confined: ") ||
	    (confinement && !strstr(out, confinement)))
		fail_msg("doctor does not say which confinement:\n%s", out);
	free(out);
}

/* A daemon serving other uids refuses to start unconfined unless told. */
static void test_unconfined_shared_refused(void **state)
{
	struct jtl_daemon *d = *state;
	if (confinement)
		skip(); /* one run is enough */
	const char *flags[] = {"--group-shared", "yes", "--confinement", "none", NULL};
	jct_daemon_spawn(d, flags);
	assert_int_not_equal(jtl_daemon_wait(d), 0);
	assert_true(jct_log_count(d, "--allow-unconfined") >= 1);
	const char *flags2[] = {"--group-shared",     "yes", "--confinement", "none",
				"--allow-unconfined", NULL};
	jct_daemon_start(d, flags2);
	char *out = NULL;
	const char *args[] = {"stats", "--json", NULL};
	assert_int_equal(jct_ctl(d, &out, NULL, args), 0);
	assert_non_null(strstr(out, "\"confinement\": \"none\""));
	free(out);
}

/* The unprivileged user of test_other_uid_refused, where root may make one. */
static void make_user(void)
{
	if (geteuid() != 0 ||
	    jct_sh("command -v useradd >/dev/null && command -v setpriv >/dev/null"))
		return;
	if (jct_user_add("jctruth", "nogroup", user, &user_uid, &user_gid) != 0)
		user[0] = '\0';
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, jct_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_confinement_reported),
	    T(test_own_uid_declared),
	    T(test_own_uid_undeclared),
	    T(test_other_uid_refused),
	    T(test_fifo_header),
	    T(test_kernel_include_dirs),
	    T(test_unconfined_shared_refused),
	};
	make_user();
	/* Then the namespace kind, where this kernel lets us make one. */
	int rc = jct_run_confinement_groups(tests, sizeof(tests) / sizeof(tests[0]), &confinement);
	jct_users_remove();
	return rc;
}
