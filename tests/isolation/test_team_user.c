/* SPDX-License-Identifier: MIT */
/*
 * A team daemon without systemd (docs/team-daemon.md, "Without systemd"):
 * started by root with --user DAEMON --group TEAM, it binds its socket, then
 * runs as DAEMON for good (every uid and gid its, no capability, root not
 * to be regained), its cache directory DAEMON's, its socket DAEMON's and
 * 0660 for TEAM; two other users made by the test (useradd) reach it with
 * setpriv and share one compile. Started as DAEMON from a shell whose $HOME
 * holds another user's unreadable jitcached.conf, the daemon skips that file
 * with a warning, but refuses it when named with --config. Exits 77 when not
 * root or without setpriv/useradd.
 */
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

static char team[32], daemon_user[32], user_a[32], user_b[32];
static gid_t team_gid;
static uid_t daemon_uid;

/* The daemon of the running test, stopped by teardown whatever happened. */
static pid_t running = -1;
static char running_sock[200];
static struct jtl_daemon *running_root;

/* The daemon, started by fork + exec with argv (NULL-terminated) and its
 * stderr in dir/daemon.log; a cleared environment as a service would get. */
static pid_t start(const char *dir, const char *const *argv)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char log[400];
		snprintf(log, sizeof(log), "%s/daemon.log", dir);
		if (!freopen(log, "w", stderr))
			_exit(126);
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("XDG_CONFIG_HOME");
		unsetenv("XDG_RUNTIME_DIR");
		unsetenv("XDG_CACHE_HOME");
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	running = pid;
	return pid;
}

/* 1 once sock answers a ping by root; 0 when pid exited first. */
static int ready(pid_t pid, const char *sock)
{
	for (int i = 0; i < 600; i++) {
		if (jct_sh("%s --socket %s ping >/dev/null 2>&1", getenv("JITCACHECTL"), sock) == 0)
			return 1;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return 0;
		usleep(50000);
	}
	return 0;
}

static void stop(pid_t pid, const char *sock)
{
	int st;
	running = -1;
	jct_sh("%s --socket %s stop >/dev/null 2>&1", getenv("JITCACHECTL"), sock);
	for (int i = 0; i < 200 && waitpid(pid, &st, WNOHANG) == 0; i++)
		usleep(50000);
	if (kill(pid, 0) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
}

/* The value of "Key:" in /proc/PID/status (static buffer). */
static const char *proc_status(pid_t pid, const char *key)
{
	static char value[256];
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	value[0] = '\0';
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':') {
			snprintf(value, sizeof(value), "%s",
				 line + strlen(key) + 1 + strspn(line + strlen(key) + 1, " \t"));
			value[strcspn(value, "\n")] = '\0';
		}
	fclose(f);
	return value;
}

static int teardown(void **state)
{
	(void)state;
	if (running > 0)
		stop(running, running_sock);
	if (running_root)
		jct_daemon_cleanup(running_root);
	running_root = NULL;
	return 0;
}

/* A test's temporary root (*state), 0711: the users made for the run reach
 * the directories in it that are theirs, and list nothing. */
static int setup(void **state)
{
	static struct jtl_daemon root;
	jct_daemon_init(&root);
	assert_int_equal(chmod(root.dir, 0711), 0);
	running_root = &root;
	*state = &root;
	return 0;
}

static void test_root_started_daemon_serves_two_users(void **state)
{
	struct jtl_daemon d = *(struct jtl_daemon *)*state;
	char run[200], var[200], src[200], out[300];
	const char *cache = d.cache, *sock = d.sock;
	snprintf(run, sizeof(run), "%s/run", d.dir);
	snprintf(var, sizeof(var), "%s/var", d.dir);
	snprintf(d.cache, sizeof(d.cache), "%s/var/cache", d.dir);
	snprintf(d.sock, sizeof(d.sock), "%s/run/sock", d.dir);
	snprintf(src, sizeof(src), "%s/src", d.dir);
	/* run/ and var/ the daemon user's, as a service's RuntimeDirectory and
	 * StateDirectory would be; the cache directory it makes itself */
	assert_int_equal(jct_sh("mkdir -m 0755 %s && mkdir -m 0700 %s && chown %s:%s %s %s && "
				"mkdir -m 0755 %s",
				run, var, daemon_user, team, run, var, src),
			 0);
	snprintf(out, sizeof(out), "%s/k.cu", src);
	const char *kernel = "__global__ void team_k(int *p) { *p = 31337; }\n";
	jct_write_file(out, kernel, strlen(kernel));
	assert_int_equal(chmod(out, 0644), 0);

	const char *argv[] = {getenv("JITCACHED"),
			      "--user",
			      daemon_user,
			      "--group",
			      team,
			      "--group-shared",
			      "yes",
			      "--cache-dir",
			      cache,
			      "--socket",
			      sock,
			      "--workers",
			      "1",
			      "--config",
			      "/dev/null",
			      NULL};
	pid_t pid = start(d.dir, argv);
	snprintf(running_sock, sizeof(running_sock), "%s", sock);
	if (!ready(pid, sock)) {
		jct_sh("cat %s/daemon.log >&2", d.dir);
		fail_msg("the daemon did not start");
	}
	/* every id the daemon user's, no capability left */
	char want[128];
	snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", (unsigned)daemon_uid, (unsigned)daemon_uid,
		 (unsigned)daemon_uid, (unsigned)daemon_uid);
	assert_string_equal(proc_status(pid, "Uid"), want);
	snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", (unsigned)team_gid, (unsigned)team_gid,
		 (unsigned)team_gid, (unsigned)team_gid);
	assert_string_equal(proc_status(pid, "Gid"), want);
	assert_string_equal(proc_status(pid, "CapEff"), "0000000000000000");
	assert_string_equal(proc_status(pid, "CapPrm"), "0000000000000000");
	const char *groups = proc_status(pid, "Groups");
	printf("daemon pid %d: Uid %u, Gid %u, Groups:%s\n", (int)pid, (unsigned)daemon_uid,
	       (unsigned)team_gid, groups);
	assert_null(strstr(groups, " 0 "));
	assert_int_not_equal(strncmp(groups, "0 ", 2), 0);
	/* the cache the daemon user's, the socket its and 0660 for the team */
	struct stat st;
	assert_int_equal(stat(cache, &st), 0);
	assert_int_equal(st.st_uid, daemon_uid);
	assert_int_equal(stat(sock, &st), 0);
	assert_int_equal(st.st_uid, daemon_uid);
	assert_int_equal(st.st_gid, team_gid);
	assert_int_equal(st.st_mode & 0777, 0660);
	assert_true(jct_log_count(&d, "running as user") >= 1);

	/* two users of the team: one compile, one hit */
	const char *users[] = {user_a, user_b}, *want_status[] = {"miss", "hit"};
	for (int i = 0; i < 2; i++) {
		char result[300];
		snprintf(result, sizeof(result), "%s/as-%s.out", d.dir, users[i]);
		int rc = jct_sh(
		    "cd %s && setpriv --reuid %s --regid %s --init-groups -- env -u "
		    "JITCACHE_SOCKET %s --socket %s compile k.cu --arch compute_90 --output ptx "
		    "-o - > /dev/null 2> %s",
		    src, users[i], team, getenv("JITCACHECTL"), sock, result);
		size_t n;
		char *text = (char *)jtl_read_file(result, &n);
		printf("%s: %s", users[i], text ? text : "(nothing)\n");
		if (rc != 0)
			fail_msg("%s's compile failed: %s", users[i], text ? text : "");
		assert_non_null(text);
		assert_int_equal(strncmp(text, want_status[i], strlen(want_status[i])), 0);
		free(text);
	}
	assert_int_equal(jct_stat(&d, "compiles"), 1);
	stop(pid, sock);
}

static void test_unreadable_default_config_is_skipped(void **state)
{
	const struct jtl_daemon d = *(struct jtl_daemon *)*state;
	char home[200], conf[260], cache[200], sock[200];
	/* user A's home with a 0600 configuration that sets nothing harmful */
	snprintf(home, sizeof(home), "%s/home-a", d.dir);
	snprintf(conf, sizeof(conf), "%s/.config/jitcache/jitcached.conf", home);
	snprintf(cache, sizeof(cache), "%s/cache", d.dir);
	snprintf(sock, sizeof(sock), "%s/run/sock", d.dir);
	assert_int_equal(jct_sh("mkdir -p %s/.config/jitcache && echo 'max-size = 1G' > %s && "
				"chown -R %s %s && chmod 0600 %s && mkdir -m 0700 %s %s/run && "
				"chown %s %s %s/run",
				home, conf, user_a, home, conf, cache, d.dir, daemon_user, cache,
				d.dir),
			 0);
	/* as the daemon user with A's $HOME (sudo -u, su without -): skipped */
	char script[2000];
	snprintf(script, sizeof(script),
		 "setpriv --reuid %s --regid %s --clear-groups -- env HOME=%s %s --cache-dir %s "
		 "--socket %s --workers 1",
		 daemon_user, team, home, getenv("JITCACHED"), cache, sock);
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	pid_t pid = start(d.dir, argv);
	snprintf(running_sock, sizeof(running_sock), "%s", sock);
	if (!ready(pid, sock)) {
		jct_sh("cat %s/daemon.log >&2", d.dir);
		fail_msg("the daemon did not start with an unreadable default configuration");
	}
	assert_true(jct_log_count(&d, "is not readable (Permission denied): skipped") >= 1);
	stop(pid, sock);
	/* named with --config, it must be readable */
	char log[300];
	snprintf(log, sizeof(log), "%s/explicit.log", d.dir);
	int rc = jct_sh("setpriv --reuid %s --regid %s --clear-groups -- %s --config %s "
			"--cache-dir %s --socket %s 2> %s",
			daemon_user, team, getenv("JITCACHED"), conf, cache, sock, log);
	size_t n;
	char *text = (char *)jtl_read_file(log, &n);
	printf("explicit --config: exit %d: %s", rc, text ? text : "");
	assert_int_not_equal(rc, 0);
	assert_non_null(text);
	assert_non_null(strstr(text, "cannot read"));
	free(text);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("SKIP: needs root to create users and start a daemon with --user\n");
		return 77;
	}
	if (jct_sh("command -v setpriv && command -v useradd") != 0) {
		printf("SKIP: needs setpriv and useradd\n");
		return 77;
	}
	if (jct_group_add("jctt", team, &team_gid) != 0 ||
	    jct_user_add("jctd", NULL, daemon_user, &daemon_uid, NULL) != 0 ||
	    jct_user_add("jcta", team, user_a, NULL, NULL) != 0 ||
	    jct_user_add("jctb", team, user_b, NULL, NULL) != 0) {
		printf("SKIP: useradd/groupadd failed\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_root_started_daemon_serves_two_users, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_unreadable_default_config_is_skipped, setup,
					    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
