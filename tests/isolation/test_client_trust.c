/* SPDX-License-Identifier: MIT */
/*
 * Whose daemon a client uses, tried with a real jitcached run by a real
 * unprivileged user made for the run (useradd; removed at the end): a socket
 * that user made as $XDG_RUNTIME_DIR/jitcached.sock in a directory anyone may
 * write (a careless XDG_RUNTIME_DIR=/tmp) is refused, saying whose it is,
 * instead of being sent the client's sources and trusted for its objects;
 * the same daemon with its socket in a directory of its own is used (a
 * shared daemon's). jitcachectl -o onto a symbolic link another user
 * planted in a sticky world-writable directory (with fs.protected_symlinks
 * off, as the test sets it) leaves the file it points at alone: root
 * replaces the link, the victim user is refused; a link of one's own in a
 * safe directory leading to a planted one is followed no further than the
 * planted link. A starter lock (SOCKET.lock) another user holds in a shared
 * runtime directory, or a lock file of another user's in the caller's own
 * directory, costs the caller's first compile no wait (before: 30 s): no
 * auto-start there, the in-process fallback at once. Exits 77 when not root.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

static char other[32], victim[32];
static uid_t other_uid, victim_uid;
static gid_t other_gid, victim_gid;

static int drop_to_other(void *ctx)
{
	(void)ctx;
	setenv("HOME", "/nonexistent", 1); /* its own (no) configuration, not root's */
	unsetenv("XDG_CONFIG_HOME");
	if (setgroups(0, NULL) != 0 || setgid(other_gid) != 0 || setuid(other_uid) != 0)
		return 99;
	return 0;
}

/* Starts jitcached as the other user, its socket at DIR/jitcached.sock, and
 * waits until something accepts connections there (the library would not
 * say more: that is what is tried). */
static void start_as_other(struct jtl_daemon *d)
{
	snprintf(d->sock, sizeof(d->sock), "%s/jitcached.sock", d->dir);
	jct_daemon_spawn_with(d, (const char *const[]){"--log-level", "info", NULL}, drop_to_other,
			      NULL);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->sock);
	for (int i = 0; i < 2000; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			return;
		usleep(10000);
	}
	fprintf(stderr, "jitcached as %s did not listen in 20 s; log %s\n", other, d->log);
	fail();
}

/* jc_client_open by the search alone ($XDG_RUNTIME_DIR the test's root);
 * its status, the message in msg. */
static int open_by_search(const struct jtl_daemon *d, char *msg, size_t len)
{
	jc_options *o;
	jc_client *c = NULL;
	assert_int_equal(jc_options_new(&o), 0);
	jc_options_set_autostart(o, 0);
	jc_options_set_fallback(o, JC_FALLBACK_ERROR);
	jc_options_set_system_socket(o, "");
	setenv("XDG_RUNTIME_DIR", d->dir, 1);
	unsetenv("JITCACHE_SOCKET");
	int rc = jc_client_open(o, &c);
	snprintf(msg, len, "%s", jc_client_errmsg(rc ? NULL : c));
	if (rc == 0) {
		/* What the planted daemon gets to see and answer. */
		jc_request *r = jct_request("saxpy.cu", "sm_90", NULL);
		jc_result *res = NULL;
		int crc = jc_compile(c, r, &res);
		fprintf(stderr, "connected to the other user's daemon; its compile: %d\n", crc);
		jc_result_free(res);
		jc_request_free(r);
		jc_client_close(c);
	}
	jc_options_free(o);
	unsetenv("XDG_RUNTIME_DIR");
	return rc;
}

/* Another user's socket in a world-writable directory: not ours. */
static void test_planted_socket_refused(void **state)
{
	struct jtl_daemon *d = *state;
	/* root's, sticky and writable by all, as /tmp is */
	assert_int_equal(chmod(d->dir, 01777), 0);
	start_as_other(d);
	char msg[1024], want[200];
	int rc = open_by_search(d, msg, sizeof(msg));
	fprintf(stderr, "open: %d %s\n", rc, msg);
	assert_int_equal(rc, JC_EDENIED);
	snprintf(want, sizeof(want), "runs as uid %u, which is neither this user nor root",
		 (unsigned)other_uid);
	assert_non_null(strstr(msg, want));
	/* Named (jitcachectl --socket, through the same library): refused too,
	 * the directory being nobody's in particular. */
	char *err = NULL;
	int ctl = jct_ctl(d, NULL, &err, (const char *const[]){"ping", NULL});
	snprintf(want, sizeof(want),
		 "runs as uid %u, which is neither this user, root, nor the owner of %s",
		 (unsigned)other_uid, d->dir);
	assert_int_not_equal(ctl, 0);
	assert_non_null(strstr(err, want));
	free(err);
}

/* A daemon whose socket lies in its own directory (a shared daemon's) is
 * used when named, whoever runs it; at the per-user path ($XDG_RUNTIME_DIR
 * a directory another user made there first) it is not. */
static void test_socket_in_daemon_dir_used(void **state)
{
	struct jtl_daemon *d = *state;
	assert_int_equal(chmod(d->dir, 0755), 0);
	assert_int_equal(chown(d->dir, other_uid, other_gid), 0);
	start_as_other(d);
	char msg[1024];
	assert_int_equal(open_by_search(d, msg, sizeof(msg)), JC_EDENIED);
	jc_client *c = NULL;
	assert_int_equal(jc_client_connect(d->sock, &c), 0);
	jc_client_close(c);
}

/* A set-user-ID program linked with the library takes nothing from its
 * environment that names code to load or a daemon to trust (secure_getenv):
 * here a root-owned set-user-ID copy of jitcachectl, run by the other user
 * with JITCACHE_REAL_NVRTC naming another library, compiles in-process with
 * the real NVRTC instead of loading that library as root. */
static void test_setuid_ignores_environment(void **state)
{
	struct jtl_daemon *d = *state;
	const char *ctl = getenv("JITCACHECTL");
	assert_non_null(ctl);
	assert_int_equal(chmod(d->dir, 0755), 0);
	assert_int_equal(jct_sh("cp %s %s/ctl-suid && chmod 04755 %s/ctl-suid && cp %s %s/k.cu && "
				"chmod 0644 %s/k.cu",
				ctl, d->dir, d->dir, jct_example("saxpy.cu"), d->dir, d->dir),
			 0);
	int rc = jct_sh("cd %s && setpriv --reuid %u --regid %u --clear-groups -- env -i "
			"PATH=/usr/bin:/bin JITCACHE_REAL_NVRTC=/lib/x86_64-linux-gnu/libz.so.1 "
			"JITCACHE_AUTOSTART=0 JITCACHE_SYSTEM_SOCKET= JITCACHE_SOCKET=%s/none "
			"./ctl-suid compile k.cu --arch sm_90 -o /dev/null > out 2>&1",
			d->dir, (unsigned)other_uid, (unsigned)other_gid, d->dir);
	char path[200];
	size_t n;
	snprintf(path, sizeof(path), "%s/out", d->dir);
	char *out = (char *)jtl_read_file(path, &n);
	fprintf(stderr, "set-user-ID jitcachectl compile: exit %d: %s\n", rc, out ? out : "");
	assert_null(strstr(out ? out : "", "libz"));
	assert_int_equal(rc, 0);
	free(out);
}

/* Root writing an artifact (jitcachectl -o) over a set-user-ID file another
 * user owns makes a file of root's without the set-ID bits (before, a
 * set-user-ID root file with the artifact in it). */
static void test_output_drops_setid_bits(void **state)
{
	struct jtl_daemon *d = *state;
	const char *ctl = getenv("JITCACHECTL");
	char out[200];
	struct stat st;
	snprintf(out, sizeof(out), "%s/k.cubin", d->dir);
	jct_write_file(out, "old", 3);
	assert_int_equal(chown(out, other_uid, other_gid), 0);
	assert_int_equal(chmod(out, 06755), 0);
	assert_int_equal(jct_sh("JITCACHE_AUTOSTART=0 JITCACHE_SOCKET=%s/none %s compile %s "
				"--arch sm_90 -o %s 2>/dev/null",
				d->dir, ctl, jct_example("saxpy.cu"), out),
			 0);
	assert_int_equal(stat(out, &st), 0);
	fprintf(stderr, "jitcachectl -o over a 06755 file of uid %u: now uid %u mode %04o\n",
		(unsigned)other_uid, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	assert_true(st.st_size > 3);
	assert_int_equal(st.st_mode & 07777, 0755);
}

/* fs.protected_symlinks as it was before the test set it (-1: untouched). */
static int saved_protected = -1;

/* Turns fs.protected_symlinks off (the host of the attack), so that the
 * kernel does not stop a write through a planted link and the test sees what
 * jitcachectl does. */
static void protected_symlinks_off(void)
{
	const char *path = "/proc/sys/fs/protected_symlinks";
	size_t n;
	char *v = (char *)jtl_read_file(path, &n);
	if (!v) {
		fprintf(stderr, "no %s: the kernel's protection stays as it is\n", path);
		return;
	}
	int was = atoi(v);
	free(v);
	char why[256];
	if (was != 0 && jtl_write_file(path, "0\n", 2, why, sizeof(why)) == 0)
		saved_protected = was;
	fprintf(stderr, "fs.protected_symlinks: was %d, now 0%s\n", was,
		saved_protected < 0 && was != 0 ? " (could not set it)" : "");
}

static int teardown_links(void **state)
{
	if (saved_protected >= 0) {
		char v[16], why[256];
		int n = snprintf(v, sizeof(v), "%d\n", saved_protected);
		if (jtl_write_file("/proc/sys/fs/protected_symlinks", v, (size_t)n, why,
				   sizeof(why)) != 0)
			fprintf(stderr, "could not restore fs.protected_symlinks to %d: %s\n",
				saved_protected, why);
		saved_protected = -1;
	}
	return jct_teardown(state);
}

/* Runs the shell command made from fmt as uid:gid (setpriv, no groups). */
static int sh_as(uid_t uid, gid_t gid, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh_as(uid_t uid, gid_t gid, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return jct_sh("setpriv --reuid %u --regid %u --clear-groups -- sh -c '%s'", (unsigned)uid,
		      (unsigned)gid, cmd);
}

/* jitcachectl compile of saxpy.cu in process (no daemon, auto-start off)
 * with -o out, run as uid:gid from dir (root: uid 0); its exit status, its
 * stderr in dir/ctl.err. */
static int compile_to(const char *dir, uid_t uid, gid_t gid, const char *out)
{
	return sh_as(uid, gid,
		     "cd %s && env -i PATH=/usr/bin:/bin JITCACHE_AUTOSTART=0 "
		     "JITCACHE_SYSTEM_SOCKET= JITCACHE_SOCKET=%s/none %s compile k.cu --arch sm_90 "
		     "-o %s 2>ctl.err",
		     dir, dir, getenv("JITCACHECTL"), out);
}

/* Asserts that path still holds exactly text, with its owner and mode. */
static void assert_untouched(const char *path, const char *text, uid_t uid, mode_t mode)
{
	size_t n;
	struct stat st;
	char *got = (char *)jtl_read_file(path, &n);
	assert_non_null(got);
	if (n != strlen(text) || memcmp(got, text, n) != 0)
		fail_msg("%s was written through the planted link: %zu bytes now", path, n);
	free(got);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_uid, uid);
	assert_int_equal(st.st_mode & 07777, mode);
}

/* The cubin at path: a regular file of uid, not a link. */
static void assert_cubin_file(const char *path, uid_t uid)
{
	struct stat st;
	size_t n;
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_uid, uid);
	uint8_t *data = jtl_read_file(path, &n);
	assert_int_equal(jct_cubin_sm(data, n), 90);
	free(data);
}

/*
 * The attack of issue 27 (3): another user plants OUT -> FILE in a sticky
 * world-writable directory; `jitcachectl compile -o OUT` must not write FILE.
 * Root (a root-owned 0600 file as the target) replaces the link with its
 * artifact; the victim user (its own file as the target) cannot replace a
 * link it does not own there and is refused with a message; a link of root's
 * own in a safe directory leading to a planted link replaces the planted one.
 */
static void test_output_planted_link(void **state)
{
	struct jtl_daemon *d = *state;
	char shared[200], secret[200], mine[200], chained[300], out[300], vfile[200];
	protected_symlinks_off();
	assert_int_equal(chmod(d->dir, 0755), 0);
	assert_int_equal(
	    jct_sh("cp %s %s/k.cu && chmod 0644 %s/k.cu", jct_example("saxpy.cu"), d->dir, d->dir),
	    0);
	snprintf(shared, sizeof(shared), "%s/shared", d->dir);
	assert_int_equal(mkdir(shared, 0755), 0);
	assert_int_equal(chmod(shared, 01777), 0);

	/* Root, its own 0600 file as the target. */
	snprintf(secret, sizeof(secret), "%s/root-secret", d->dir);
	jct_write_text(secret, "root's secret\n");
	assert_int_equal(chmod(secret, 0600), 0);
	snprintf(out, sizeof(out), "%s/out.cubin", shared);
	assert_int_equal(sh_as(other_uid, other_gid, "ln -s %s %s", secret, out), 0);
	int rc = compile_to(d->dir, 0, 0, out);
	char err[200];
	snprintf(err, sizeof(err), "%s/ctl.err", d->dir);
	size_t n;
	char *text = (char *)jtl_read_file(err, &n);
	fprintf(stderr, "root, -o a planted link: exit %d: %s", rc, text ? text : "");
	free(text);
	assert_untouched(secret, "root's secret\n", 0, 0600);
	assert_int_equal(rc, 0);
	assert_cubin_file(out, 0); /* the link replaced */

	/* Root's own link in a safe directory, leading to a planted one. */
	snprintf(chained, sizeof(chained), "%s/chained.cubin", shared);
	snprintf(mine, sizeof(mine), "%s/mine.cubin", d->dir);
	assert_int_equal(sh_as(other_uid, other_gid, "ln -s %s %s", secret, chained), 0);
	assert_int_equal(symlink(chained, mine), 0);
	rc = compile_to(d->dir, 0, 0, mine);
	assert_untouched(secret, "root's secret\n", 0, 0600);
	assert_int_equal(rc, 0);
	struct stat st;
	assert_int_equal(lstat(mine, &st), 0);
	assert_true(S_ISLNK(st.st_mode)); /* ours: followed */
	assert_cubin_file(chained, 0);	  /* theirs: replaced */

	/* The victim user, its own file as the target. */
	snprintf(vfile, sizeof(vfile), "%s/victim-file", d->dir);
	jct_write_text(vfile, "the victim's work\n");
	assert_int_equal(chown(vfile, victim_uid, victim_gid), 0);
	assert_int_equal(chmod(vfile, 0644), 0);
	assert_int_equal(chown(d->dir, victim_uid, victim_gid), 0); /* its ctl.err */
	assert_int_equal(unlink(err), 0);
	snprintf(out, sizeof(out), "%s/victim.cubin", shared);
	assert_int_equal(sh_as(other_uid, other_gid, "ln -s %s %s", vfile, out), 0);
	rc = compile_to(d->dir, victim_uid, victim_gid, out);
	text = (char *)jtl_read_file(err, &n);
	fprintf(stderr, "victim, -o a planted link: exit %d: %s", rc, text ? text : "");
	assert_untouched(vfile, "the victim's work\n", victim_uid, 0644);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(text, "symbolic link"));
	assert_non_null(strstr(text, "not followed"));
	free(text);
	assert_int_equal(lstat(out, &st), 0);
	assert_true(S_ISLNK(st.st_mode)); /* left as it was */
	assert_int_equal(chown(d->dir, 0, 0), 0);
}

/* A process of uid:gid holding flock(path) (made 0666 if missing, as a
 * planted one would be, so that anyone may open it) until killed; returns
 * its pid once it holds it. */
static pid_t hold_lock(const char *path, uid_t uid, gid_t gid)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if ((gid && (setgroups(0, NULL) != 0 || setgid(gid) != 0)) ||
		    (uid && setuid(uid) != 0))
			_exit(99);
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0 || fchmod(fd, 0666) != 0 || flock(fd, LOCK_EX) != 0)
			_exit(98);
		(void)!write(p[1], "x", 1);
		for (;;)
			pause();
	}
	close(p[1]);
	char c;
	if (read(p[0], &c, 1) != 1)
		fail_msg("the lock holder did not take %s", path);
	close(p[0]);
	return pid;
}

static void stop_holder(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/*
 * jitcachectl compile (auto-start on, fallback compile) as the victim with
 * XDG_RUNTIME_DIR=run and its cache in cache, while holder holds the
 * starter lock there (stopped afterwards): served at once (10 s is a bound
 * for a loaded machine, far below the 30 s wait), in process, and stderr
 * says want.
 */
static void falls_back_at_once(const struct jtl_daemon *d, const char *run, const char *cache,
			       pid_t holder, const char *want)
{
	char path[300];
	size_t n;
	double t0 = jtl_now_s();
	int rc = sh_as(victim_uid, victim_gid,
		       "cd %s && env -i PATH=/usr/bin:/bin HOME=/nonexistent XDG_RUNTIME_DIR=%s "
		       "JITCACHE_DIR=%s JITCACHE_AUTOSTART=1 JITCACHE_SYSTEM_SOCKET= JITCACHED=%s "
		       "JITCACHE_WORKER=%s %s compile k.cu --arch sm_90 -o /dev/null 2>%s/ctl.err",
		       d->dir, run, cache, getenv("JITCACHED"), getenv("JITCACHE_WORKER"),
		       getenv("JITCACHECTL"), cache);
	double s = jtl_now_s() - t0;
	stop_holder(holder);
	snprintf(path, sizeof(path), "%s/ctl.err", cache);
	char *err = (char *)jtl_read_file(path, &n);
	assert_non_null(err);
	fprintf(stderr, "victim's first compile: %.2f s, exit %d: %s", s, rc, err);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(err, "uncached"));
	assert_non_null(strstr(err, want));
	assert_true(s < 10);
	free(err);
}

/*
 * The attack of issue 27 (4): another user holds SOCKET.lock beside the
 * per-user socket in a shared runtime directory (XDG_RUNTIME_DIR=/tmp, say);
 * the victim's first compile took 30.2 s. Now: no daemon is started in a
 * directory that is not the caller's, and no lock of another user's is
 * waited on, even in the caller's own directory; the compile falls back at
 * once (10 s here is a bound for a loaded machine, far below the 30 s wait).
 */
static void test_planted_starter_lock(void **state)
{
	struct jtl_daemon *d = *state;
	char run[200], lock[300], cache[200], own[200];
	assert_int_equal(chmod(d->dir, 0755), 0);
	assert_int_equal(
	    jct_sh("cp %s %s/k.cu && chmod 0644 %s/k.cu", jct_example("saxpy.cu"), d->dir, d->dir),
	    0);
	snprintf(cache, sizeof(cache), "%s/vcache", d->dir);
	assert_int_equal(mkdir(cache, 0700), 0);
	assert_int_equal(chown(cache, victim_uid, victim_gid), 0);

	/* A shared runtime directory, the lock held by the other user. */
	snprintf(run, sizeof(run), "%s/run", d->dir);
	assert_int_equal(mkdir(run, 0755), 0);
	assert_int_equal(chmod(run, 01777), 0);
	snprintf(lock, sizeof(lock), "%s/jitcached.sock.lock", run);
	falls_back_at_once(d, run, cache, hold_lock(lock, other_uid, other_gid),
			   "not starting a daemon in");

	/* The victim's own runtime directory, a lock file of another user's
	 * there (made while the directory was open to it), held. */
	snprintf(own, sizeof(own), "%s/own", d->dir);
	assert_int_equal(mkdir(own, 0700), 0);
	snprintf(lock, sizeof(lock), "%s/jitcached.sock.lock", own);
	pid_t holder = hold_lock(lock, 0, 0);
	assert_int_equal(chown(lock, other_uid, other_gid), 0);
	assert_int_equal(chown(own, victim_uid, victim_gid), 0);
	falls_back_at_once(d, own, cache, holder, "not a file of this user's");
}

int main(void)
{
	if (geteuid() != 0) {
		printf("skipped: needs root to create a user and run a daemon as it\n");
		return 77;
	}
	if (jct_user_add("jco", NULL, other, &other_uid, &other_gid) != 0 ||
	    jct_user_add("jcv", NULL, victim, &victim_uid, &victim_gid) != 0) {
		printf("skipped: cannot create a user with useradd\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_planted_socket_refused, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_socket_in_daemon_dir_used, jct_setup,
					    jct_teardown),
	    cmocka_unit_test_setup_teardown(test_setuid_ignores_environment, jct_setup,
					    jct_teardown),
	    cmocka_unit_test_setup_teardown(test_output_drops_setid_bits, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_output_planted_link, jct_setup, teardown_links),
	    cmocka_unit_test_setup_teardown(test_planted_starter_lock, jct_setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
