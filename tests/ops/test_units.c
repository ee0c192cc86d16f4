/* SPDX-License-Identifier: MIT */
/*
 * The shipped systemd files, checked by systemd's own tools: the system and
 * user units verify clean (systemd-analyze verify, no output at all), the
 * system service's exposure stays at or under 2.0 (systemd-analyze security
 * --offline), and the sysusers.d entry creates user and group jitcache
 * (systemd-sysusers --root). ExecStart= points at the build's jitcached so
 * verify can check it. Skipped (77) where systemd-analyze is missing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

#include "config.h"

static char root[JTL_ROOT_MAX];
static char src_root[512];

static void sh(const char *cmd, int want, const char *out_path)
{
	char full[2048];
	snprintf(full, sizeof(full), "(%s) > %s 2>&1", cmd, out_path);
	int rc = system(full);
	size_t n;
	char *out = (char *)jtl_read_file(out_path, &n);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) != want) {
		fprintf(stderr, "%s: exit %d, wanted %d:\n%s\n", cmd, WEXITSTATUS(rc), want, out);
		fail();
	}
	free(out);
}

/* Copies unit src to dir/name with ExecStart's jitcached replaced by the
 * build's; returns the unit text (malloc'd). */
static char *stage_unit(const char *src, const char *dir, const char *name)
{
	size_t n;
	char *text = (char *)jtl_read_file(src, &n);
	assert_non_null(text);
	char path[700];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	const char *daemon = getenv("JITCACHED");
	for (char *line = text, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		*nl = '\0';
		if (strncmp(line, "ExecStart=", 10) == 0) {
			const char *args = strstr(line, "/jitcached ");
			assert_non_null(args);
			fprintf(f, "ExecStart=%s%s\n", daemon, args + 10);
		} else {
			fprintf(f, "%s\n", line);
		}
		*nl = '\n';
	}
	fclose(f);
	return text;
}

static void test_system_units_verify(void **state)
{
	(void)state;
	char dir[128], src[700], cmd[1024], out[256];
	snprintf(dir, sizeof(dir), "%s/system", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(src, sizeof(src), "%s/systemd/jitcached.socket", src_root);
	char *socket = stage_unit(src, dir, "jitcached.socket");
	snprintf(src, sizeof(src), "%s/systemd/jitcached.service", getenv("JC_BUILD_ROOT"));
	char *service = stage_unit(src, dir, "jitcached.service");
	/* The contract with clients and with systemd. */
	jct_assert_has(socket, "ListenStream=/run/jitcached/jitcached.sock\n");
	jct_assert_has(socket, "SocketMode=0660\n");
	jct_assert_has(socket, "SocketGroup=jitcache\n");
	jct_assert_has(service, "Type=notify\n");
	jct_assert_has(service, "NotifyAccess=main\n");
	jct_assert_has(service, "User=jitcache\n");
	jct_assert_has(service, "CacheDirectory=jitcache\n");
	jct_assert_has(service, "--cache-dir /var/cache/jitcache");
	free(socket);
	free(service);
	snprintf(out, sizeof(out), "%s/verify.out", root);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && systemd-analyze verify jitcached.socket jitcached.service", dir);
	sh(cmd, 0, out);
	size_t n;
	char *text = (char *)jtl_read_file(out, &n);
	if (n)
		fprintf(stderr, "systemd-analyze verify said:\n%s\n", text);
	assert_int_equal(n, 0); /* clean: not even a warning */
	free(text);
	/* Hardening: "2.0 OK" or better on systemd's own scale. */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && systemd-analyze security --offline=yes --threshold=20 jitcached.service",
		 dir);
	sh(cmd, 0, out);
	text = (char *)jtl_read_file(out, &n);
	jct_assert_has(text, "Overall exposure level for jitcached.service: ");
	free(text);
}

static void test_user_units_verify(void **state)
{
	(void)state;
	char dir[128], rt[128], src[700], cmd[1024], out[256];
	snprintf(dir, sizeof(dir), "%s/user", root);
	snprintf(rt, sizeof(rt), "%s/run", root);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(mkdir(rt, 0700), 0);
	snprintf(src, sizeof(src), "%s/systemd/user/jitcached.socket", src_root);
	char *socket = stage_unit(src, dir, "jitcached.socket");
	snprintf(src, sizeof(src), "%s/systemd/jitcached-user.service", getenv("JC_BUILD_ROOT"));
	char *service = stage_unit(src, dir, "jitcached.service");
	jct_assert_has(socket, "ListenStream=%t/jitcached.sock\n"); /* the clients' default */
	jct_assert_has(service, "Type=notify\n");
	free(socket);
	free(service);
	snprintf(out, sizeof(out), "%s/verify-user.out", root);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && XDG_RUNTIME_DIR=%s systemd-analyze --user verify jitcached.socket "
		 "jitcached.service",
		 dir, rt);
	sh(cmd, 0, out);
	size_t n;
	char *text = (char *)jtl_read_file(out, &n);
	if (n)
		fprintf(stderr, "systemd-analyze --user verify said:\n%s\n", text);
	assert_int_equal(n, 0);
	free(text);
}

static void test_sysusers(void **state)
{
	(void)state;
	char cmd[1024], path[256];
	snprintf(path, sizeof(path), "%s/sysroot/etc", root);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", path);
	assert_int_equal(system(cmd), 0);
	snprintf(
	    cmd, sizeof(cmd),
	    "command -v systemd-sysusers >/dev/null || exit 77; systemd-sysusers --root=%s/sysroot "
	    "%s/systemd/jitcache.sysusers",
	    root, src_root);
	int rc = system(cmd);
	if (WEXITSTATUS(rc) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(rc), 0);
	size_t n;
	snprintf(path, sizeof(path), "%s/sysroot/etc/passwd", root);
	char *passwd = (char *)jtl_read_file(path, &n);
	assert_non_null(passwd);
	assert_non_null(strstr(passwd, "jitcache:x:"));
	assert_non_null(strstr(passwd, ":/usr/sbin/nologin") ?: strstr(passwd, ":/sbin/nologin"));
	free(passwd);
	snprintf(path, sizeof(path), "%s/sysroot/etc/group", root);
	char *group = (char *)jtl_read_file(path, &n);
	assert_non_null(strstr(group, "jitcache:x:"));
	free(group);
}

static int make_root(void **state)
{
	(void)state;
	jct_tmpdir(root, NULL, "units");
	return 0;
}

static int remove_root(void **state)
{
	(void)state;
	jct_tmpdir_remove(root);
	return 0;
}

int main(void)
{
	if (system("command -v systemd-analyze >/dev/null 2>&1") != 0) {
		fprintf(stderr, "systemd-analyze not installed: skipped\n");
		return 77;
	}
#if !JC_HAVE_SYSTEMD
	fprintf(stderr, "built without libsystemd: the units are not installed: skipped\n");
	return 77;
#endif
	const char *examples = getenv("JC_EXAMPLES");
	assert_non_null(examples);
	snprintf(src_root, sizeof(src_root), "%s/..", examples);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_system_units_verify),
	    cmocka_unit_test(test_user_units_verify),
	    cmocka_unit_test(test_sysusers),
	};
	return cmocka_run_group_tests(tests, make_root, remove_root);
}
