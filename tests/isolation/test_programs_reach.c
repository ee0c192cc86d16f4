/* SPDX-License-Identifier: MIT */
/*
 * The users a test makes reach the programs they run, wherever the build is
 * (issue 27 item 7): a clone made under `mktemp -d` has its build in a 0700
 * directory, where a daemon started as another uid, its compile worker and
 * that uid's jitcachectl could not be executed. Here the programs are copied
 * into such a directory and $JITCACHED, $JITCACHECTL and $JITCACHE_WORKER
 * name the copies; once the test makes its users (jct_user_add), a team
 * daemon run as one user compiles for another, both through the copies
 * tests/lib made where they can reach them. Exits 77 when not root or
 * without setpriv/useradd.
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

static void test_team_daemon_from_a_private_build(void **state)
{
	(void)state;
	static const char *const vars[] = {"JITCACHED", "JITCACHECTL", "JITCACHE_WORKER"};
	char root[JTL_ROOT_MAX], priv[JTL_ROOT_MAX + 16], copy[3][JTL_ROOT_MAX + 64];
	jct_tmpdir(root, NULL, "reach");
	snprintf(priv, sizeof(priv), "%s/private", root);
	assert_int_equal(mkdir(priv, 0700), 0);
	for (int i = 0; i < 3; i++) {
		const char *from = getenv(vars[i]);
		assert_non_null(from);
		snprintf(copy[i], sizeof(copy[i]), "%s/%s", priv, strrchr(from, '/') + 1);
		assert_int_equal(jct_sh("cp '%s' '%s'", from, copy[i]), 0);
		assert_int_equal(setenv(vars[i], copy[i], 1), 0);
	}

	char group[32], user_d[32], user_u[32];
	gid_t gid;
	if (jct_group_add("jcrg", group, &gid) != 0 ||
	    jct_user_add("jcrd", group, user_d, NULL, NULL) != 0 ||
	    jct_user_add("jcru", group, user_u, NULL, NULL) != 0) {
		fprintf(stderr, "skipped: useradd/groupadd failed\n");
		skip();
	}
	for (int i = 0; i < 3; i++)
		if (!strcmp(getenv(vars[i]), copy[i]))
			fail_msg("$%s still names %s, which no other uid can run", vars[i],
				 copy[i]);

	struct jtl_daemon d;
	jct_daemon_init(&d);
	jct_daemon_start_as(&d, user_d, group, gid, 1, user_u, NULL);
	char src[300], *out = NULL;
	snprintf(src, sizeof(src), "%s/reach.cu", d.dir);
	jct_write_text(src, jct_tiny_src(27));
	assert_int_equal(chmod(src, 0644), 0);
	int rc = jct_as_user(d.dir, user_u, group, gid, &out,
			     "%s --socket %s compile %s --arch sm_90 -o /dev/null",
			     getenv("JITCACHECTL"), d.sock, src);
	if (rc != 0)
		fail_msg("the compile as %s: exit %d\n%s", user_u, rc, out);
	jct_assert_has(out, "miss");
	free(out);
	assert_int_equal(jct_stat(&d, "compiles"), 1);
	jct_daemon_stop_as(&d);
	jct_daemon_cleanup(&d);
	jct_tmpdir_remove(root);
}

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root to create users and run a daemon as one\n");
		return 77;
	}
	if (jct_sh("command -v setpriv >/dev/null && command -v useradd >/dev/null") != 0) {
		fprintf(stderr, "skipped: needs setpriv and useradd\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_team_daemon_from_a_private_build),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
