/* SPDX-License-Identifier: MIT */
/*
 * Exact toolchain identity with a real daemon: `jitcachectl version` and
 * `doctor` print every part of it, and a change of identity (the documented
 * test-only overrides JITCACHE_TEST_NVRTC_ID and JITCACHE_TEST_DRIVER_VERSION
 * in the daemon's environment, across restarts) gives a new key and a miss;
 * back to the real identity, the first entry hits again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/lib/test.h"

static const char *const exprs[] = {"&saxpy<float>", NULL};

/* Restarts the daemon of d with env=value set (value NULL: unset). */
static void restart_with(struct jtl_daemon *d, const char *env, const char *value)
{
	if (d->pid > 0)
		assert_int_equal(jtl_daemon_stop(d), 0);
	if (value)
		assert_int_equal(setenv(env, value, 1), 0);
	else
		assert_int_equal(unsetenv(env), 0);
	/* No kept requests: a daemon re-warms them when its identity changes
	 * (test_rewarm.c), which would compile these keys before the test asks. */
	jct_daemon_start(d, (const char *const[]){"--keep-requests", "no", NULL});
}

static char *version(const struct jtl_daemon *d)
{
	char *out = NULL;
	const char *args[] = {"version", "--json", NULL};
	assert_int_equal(jct_ctl(d, &out, NULL, args), 0);
	return out;
}

static void test_identity_changes_key(void **state)
{
	struct jtl_daemon *d = *state; /* killed and removed by jct_teardown, also on failure */
	jc_request *r = jct_request("saxpy.cu", "sm_90", exprs);
	static const struct {
		const char *env, *value, *field;
	} rows[] = {
	    {"JITCACHE_TEST_NVRTC_ID", "build-id:00000000000000000000000000000000000000aa",
	     "\"nvrtc_id\": \"build-id:00000000000000000000000000000000000000aa\""},
	    {"JITCACHE_TEST_DRIVER_VERSION", "99.9", "\"driver_version\": \"99.9\""},
	};
	char keys[3][33];

	restart_with(d, rows[0].env, NULL);
	jc_result *res = jct_compile(d, r, 0);
	assert_int_equal(jc_result_cache_status(res), JC_MISS);
	snprintf(keys[0], 33, "%s", jc_result_key(res));
	jc_result_free(res);
	char *v = version(d);
	static const char *const fields[] = {
	    "nvrtc_version", "nvrtc_id",       "nvrtc_builtins_id", "nvjitlink_version",
	    "nvjitlink_id",  "driver_version", "driver_build",	    "toolkit_include_id"};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		char pat[64];
		snprintf(pat, sizeof(pat), "\"%s\": \"", fields[i]);
		if (!strstr(v, pat))
			fail_msg("version lacks %s: %s", fields[i], v);
	}
	free(v);

	for (size_t i = 0; i < 2; i++) {
		restart_with(d, rows[i].env, rows[i].value);
		v = version(d);
		assert_non_null(strstr(v, rows[i].field));
		free(v);
		res = jct_compile(d, r, 0);
		assert_int_equal(jc_result_cache_status(res), JC_MISS);
		snprintf(keys[i + 1], 33, "%s", jc_result_key(res));
		jc_result_free(res);
		for (size_t j = 0; j <= i; j++)
			assert_string_not_equal(keys[i + 1], keys[j]);
		assert_int_equal(unsetenv(rows[i].env), 0);
	}

	restart_with(d, rows[0].env, NULL);
	res = jct_compile(d, r, 0);
	assert_int_equal(jc_result_cache_status(res), JC_HIT);
	assert_string_equal(jc_result_key(res), keys[0]);
	jc_result_free(res);
	assert_int_equal(jct_stat(d, "compiles"), 3);

	/* doctor names each part of the identity. */
	char *out = NULL;
	const char *args[] = {"doctor", NULL};
	jct_ctl(d, &out, NULL, args);
	static const char *const lines[] = {"NVRTC 13", ", builtins ", "nvJitLink 13", "driver ",
					    "toolkit headers "};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		if (!strstr(out, lines[i]))
			fail_msg("doctor lacks \"%s\":\n%s", lines[i], out);
	free(out);
	jc_request_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_identity_changes_key, jct_setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
