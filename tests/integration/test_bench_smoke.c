/* SPDX-License-Identifier: MIT */
/*
 * jitcache-bench works: its --tiny mode (every measurement, tiny sizes, its
 * own daemon) exits 0 and prints the JSON figures DESIGN.md names. Speed is
 * not judged here (the benchmark's targets are not a test); what must hold
 * whatever the machine's speed is: the figures are there and sane, and 64
 * cold clients on one key cost exactly one compile.
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
	char out_path[] = "/tmp/jc-bench-smoke-XXXXXX";
	int out = mkstemp(out_path);
	assert_true(out >= 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(out, 1);
		execl(bench, bench, "--tiny", "--json", (char *)NULL);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	close(out);
	size_t n;
	char *json = (char *)jtl_read_file(out_path, &n);
	unlink(out_path);
	assert_non_null(json);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

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
