/* SPDX-License-Identifier: MIT */
/*
 * The store belongs to the daemon's uid alone, group-shared or not, tried
 * with real unprivileged users made for the run (useradd; a group of their
 * own, dropped to with setpriv; removed at the end): a member of the
 * daemon's group reaches the socket, and nothing else (the index, its compile
 * logs, the objects, worker-cwd); a cache left in the earlier group-shared
 * layout (02770 directories, a 0644 index) is closed at start; an index a
 * member replaced in that layout, or a worker-cwd she planted, makes the
 * daemon and offline jitcachectl refuse the directory, saying what and how
 * to fix it. Exits 77 when not root.
 */
#include <errno.h>
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

/* The run's users and group: names with our pid, made once, removed at exit. */
static char group[32], member[32], victim[32];
static gid_t gid;
static uid_t member_uid, victim_uid;

static int make_users(void)
{
	if (jct_group_add("jcg", group, &gid) != 0 ||
	    jct_user_add("jcm", group, member, &member_uid, NULL) != 0 ||
	    jct_user_add("jcv", group, victim, &victim_uid, NULL) != 0)
		return -1;
	return 0;
}

/* Runs a shell command as user (primary and only group: the run's group);
 * returns its exit status, its output in *out (malloc'd) when out. */
static int as_user(const struct jtl_daemon *d, const char *user, char **out, const char *fmt, ...)
{
	char cmd[4096], script[3000], outpath[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(script, sizeof(script), fmt, ap);
	va_end(ap);
	snprintf(outpath, sizeof(outpath), "%s/as-user.out", d->dir);
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid %s --regid %s --groups %u -- sh -c '%s' > %s 2>&1", user, group,
		 (unsigned)gid, script, outpath);
	int rc = jct_sh("%s", cmd);
	if (out) {
		size_t n;
		*out = (char *)jtl_read_file(outpath, &n);
	}
	return rc;
}

static int setup(void **state)
{
	jct_setup(state);
	struct jtl_daemon *d = *state;
	/* The socket lies in the test's directory: let the users through to it. */
	assert_int_equal(chmod(d->dir, 0711), 0);
	return 0;
}

/* Starts a group-shared daemon whose group is the run's, as a system
 * daemon of that group would have it (socket and cache directory). */
static void start_shared(struct jtl_daemon *d)
{
	const char *const flags[] = {"--group-shared", "yes", NULL};
	jct_daemon_start(d, flags);
	assert_int_equal(jct_sh("chgrp -R %s %s %s", group, d->sock, d->cache), 0);
}

/* A member compiles through the socket, and reaches nothing in the store. */
static void test_member_reaches_socket_only(void **state)
{
	struct jtl_daemon *d = *state;
	start_shared(d);
	const char *ctl = getenv("JITCACHECTL");
	char *out = NULL;
	/* The victim compiles through the socket (her log and source name go
	 * into the index), as herself. */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		gid_t g = gid;
		if (setgroups(1, &g) != 0 || setgid(gid) != 0 || setuid(victim_uid) != 0)
			_exit(99);
		jc_request *r = jct_request_src(
		    "victim.cu", "__global__ void victim_k(int *p) { *p = 42; }", "sm_90");
		jc_client *c = NULL;
		jc_result *res = NULL;
		int rc = jc_client_connect(d->sock, &c) ?: jc_compile(c, r, &res);
		if (rc)
			fprintf(stderr, "victim's compile: %s\n", jc_client_errmsg(c));
		_exit(rc ? 1 : 0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The member: the socket works; every way into the store is closed. */
	int rc = as_user(d, member, &out,
			 "%s --socket %s ping >/dev/null || echo PING-FAILED; "
			 "for f in index.sqlite index.sqlite-wal objects tmp worker-cwd lock; do "
			 "  cat %s/$f >/dev/null 2>&1 && echo READ:$f; "
			 "  ls %s/$f >/dev/null 2>&1 && echo LIST:$f; "
			 "done; "
			 "(echo x >> %s/index.sqlite) 2>/dev/null && echo WROTE:index; "
			 "mv %s/worker-cwd %s/w2 2>/dev/null && echo MOVED:worker-cwd; "
			 "mkdir %s/worker-cwd2 2>/dev/null && echo MADE:dir; "
			 "find %s/objects -type f 2>/dev/null | grep -q . && echo FOUND:objects; "
			 "echo done",
			 ctl, d->sock, d->cache, d->cache, d->cache, d->cache, d->cache, d->cache,
			 d->cache);
	fprintf(stderr, "member %s: %s", member, out);
	assert_int_equal(rc, 0);
	assert_string_equal(out, "done\n");
	free(out);
	struct stat st;
	assert_int_equal(stat(d->cache, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(jtl_daemon_stop(d), 0);
}

/* Puts the cache back into the layout of the earlier --group-shared. */
static void old_layout(const struct jtl_daemon *d)
{
	assert_int_equal(jct_sh("chgrp %s %s %s/objects %s/tmp %s/quarantine && "
				"chmod 02770 %s %s/objects %s/tmp %s/quarantine && "
				"chmod 0644 %s/index.sqlite",
				group, d->cache, d->cache, d->cache, d->cache, d->cache, d->cache,
				d->cache, d->cache, d->cache),
			 0);
}

static void expect_refusal(struct jtl_daemon *d, const char *want)
{
	/* The daemon. */
	unlink(d->log);
	jct_daemon_spawn(d, NULL);
	int rc = jtl_daemon_wait(d);
	size_t n;
	char *log = (char *)jtl_read_file(d->log, &n);
	if (rc == 0 || !strstr(log, want))
		fprintf(stderr, "jitcached: exit %d, log:\n%s\n", rc, log);
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(log, want));
	fprintf(stderr, "refused: %s", strstr(log, "jitcached: "));
	free(log);
	/* jitcachectl on the directory, with no daemon. */
	char *err = NULL;
	const char *const stats[] = {"stats", NULL};
	assert_int_not_equal(jct_ctl(d, NULL, &err, stats), 0);
	if (!strstr(err, want))
		fprintf(stderr, "jitcachectl: %s\n", err);
	assert_non_null(strstr(err, want));
	free(err);
}

/*
 * The attacks the old layout allowed, now refused at start: an index the
 * member replaced with her copy (she could rewrite its rows), and a
 * worker-cwd of hers (a cfg.h in it was compiled into others' entries).
 */
static void test_tampered_store_refused(void **state)
{
	struct jtl_daemon *d = *state;
	start_shared(d);
	jc_request *r = jct_request_src("a.cu", "__global__ void a(int *p) { *p = 1; }", "sm_90");
	jc_result_free(jct_compile(d, r, 0));
	jc_request_free(r);
	assert_int_equal(jtl_daemon_stop(d), 0);

	/* The earlier layout, as that version left it: closed again at start. */
	old_layout(d);
	start_shared(d);
	assert_true(jct_log_count(d, "had mode 2770; set to 0700"));
	assert_true(jct_log_count(d, "index.sqlite had mode 0644; set to 0600"));
	assert_int_equal(jtl_daemon_stop(d), 0);

	/* In that layout, the member replaces the index with her own copy. */
	old_layout(d);
	char *out = NULL;
	int rc = as_user(d, member, &out, "cp %s/index.sqlite %s/i2 && mv -f %s/i2 %s/index.sqlite",
			 d->cache, d->cache, d->cache, d->cache);
	if (rc != 0)
		fprintf(stderr, "member's replacement: %s\n", out);
	assert_int_equal(rc, 0);
	free(out);
	char want[300];
	snprintf(want, sizeof(want),
		 "%s/index.sqlite is not owned by the daemon's uid (owner uid %u, "
		 "mode 0644); expected a file owned by uid 0 (the daemon's) with mode 0600",
		 d->cache, (unsigned)member_uid);
	expect_refusal(d, want);
	expect_refusal(d, "inspect it, then remove it (or the whole cache directory)");

	/* The admin removes it: the daemon starts (cold) and closes the store. */
	char path[300];
	snprintf(path, sizeof(path), "%s/index.sqlite", d->cache);
	assert_int_equal(unlink(path), 0);
	start_shared(d);
	assert_int_equal(jtl_daemon_stop(d), 0);

	/* A worker-cwd planted by the member, with a header in it. */
	old_layout(d);
	rc = as_user(d, member, &out,
		     "rm -rf %s/worker-cwd; mkdir %s/worker-cwd && "
		     "echo \"#define EVIL 1\" > %s/worker-cwd/cfg.h",
		     d->cache, d->cache, d->cache);
	free(out);
	assert_int_equal(rc, 0);
	snprintf(want, sizeof(want), "%s/worker-cwd is not owned by the daemon's uid (owner uid %u",
		 d->cache, (unsigned)member_uid);
	expect_refusal(d, want);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("skipped: needs root to create users and drop to them\n");
		return 77;
	}
	if (make_users() != 0) {
		printf("skipped: cannot create users with useradd\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_member_reaches_socket_only, setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_tampered_store_refused, setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
