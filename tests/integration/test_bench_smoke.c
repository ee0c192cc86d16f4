/* SPDX-License-Identifier: MIT */
/*
 * jitcache-bench works: its --tiny mode (every measurement, tiny sizes, its
 * own daemon) exits 0 and prints the JSON figures docs/ARCHITECTURE.md
 * ("Interfaces") names. Speed is not judged here (the benchmark's targets are
 * not a test); what must hold whatever the machine's speed is: the figures
 * are there and sane, and 64 cold clients on one key cost exactly one
 * compile.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

static void test_tiny_json(void **state)
{
	(void)state;
	const char *bench = getenv("JITCACHE_BENCH");
	if (!bench || !*bench)
		fail_msg("JITCACHE_BENCH is not set (run through meson test)");
	char root[JTL_ROOT_MAX];
	jct_tmpdir(root, NULL, "bench-smoke");
	const char *const argv[] = {bench, "--tiny", "--json", NULL};
	char *json = NULL, *err = NULL;
	int rc = jtl_run(argv, NULL, root, &json, &err);
	jct_tmpdir_remove(root);
	if (rc != 0)
		fprintf(stderr, "jitcache-bench --tiny --json: exit %d\n%s", rc, err);
	free(err);
	assert_int_equal(rc, 0);

	double p50 = jct_json_num(json, "hit_p50_us"), p99 = jct_json_num(json, "hit_p99_us");
	assert_true(p50 > 0);
	assert_true(p99 >= p50);
	assert_true(jct_json_num(json, "raw_read_p50_us") > 0);
	assert_true(jct_json_num(json, "hits_per_s") > 0);
	assert_true(jct_json_num(json, "single_flight_compiles") == 1);
	assert_true(jct_json_num(json, "scale_1000_ready_ms") > 0);
	assert_non_null(strstr(json, "\"targets\": {"));
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tiny_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
