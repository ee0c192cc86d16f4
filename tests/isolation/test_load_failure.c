/* SPDX-License-Identifier: MIT */
/*
 * Load-failure feedback against a real daemon: a client reports that a served
 * artifact did not load (jc_report_load_failure); the daemon quarantines the
 * object, compiles afresh and serves the new artifact, at most
 * JC_LOAD_RETRY_MAX times per key in the window; past that it serves the
 * existing entry and logs the key and the driver version. load_failures
 * counts every report; a report about an object the entry no longer names
 * changes nothing.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/retry.h"
#include "tests/lib/test.h"

static const char *const saxpy_exprs[] = {"&saxpy<float>", NULL};

/* Files in the cache's quarantine/ directory. */
static int quarantined(const struct jtl_daemon *d)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/quarantine", d->cache);
	DIR *dir = opendir(path);
	if (!dir)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

static void assert_same_bytes(const jc_result *a, const jc_result *b)
{
	size_t na, nb;
	const void *da = jc_result_data(a, &na), *db = jc_result_data(b, &nb);
	assert_non_null(da);
	assert_int_equal(na, nb);
	assert_memory_equal(da, db, na);
	assert_string_equal(jc_result_lowered_name(a, "&saxpy<float>"),
			    jc_result_lowered_name(b, "&saxpy<float>"));
}

static void test_report_recompiles_bounded(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	jc_client *c = jct_connect(d);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result *first = NULL, *res = NULL, *next = NULL;
	assert_int_equal(jc_compile(c, r, &first), 0);
	assert_int_equal(jc_result_cache_status(first), JC_MISS);
	char keyhex[40];
	snprintf(keyhex, sizeof(keyhex), "key %s", jc_result_key(first));
	assert_int_equal(jc_compile(c, r, &res), 0);
	assert_int_equal(jc_result_cache_status(res), JC_HIT);

	/* Each report within the bound: the object is quarantined, a fresh
	 * compile runs and its artifact comes back (NVRTC is deterministic: the
	 * same bytes). */
	for (int i = 1; i <= JC_LOAD_RETRY_MAX; i++) {
		assert_int_equal(
		    jc_report_load_failure(c, r, res, "CUDA_ERROR_INVALID_IMAGE", &next), 0);
		assert_int_equal(jc_result_cache_status(next), JC_MISS);
		assert_same_bytes(first, next);
		assert_int_equal(jct_stat(d, "load_failures"), i);
		assert_int_equal(jct_stat(d, "compiles"), 1 + i);
		assert_int_equal(quarantined(d), i);
		jc_result_free(res);
		res = next;
	}
	assert_int_equal(
	    jct_log_count(d, "CUDA_ERROR_INVALID_IMAGE; quarantined, recompiling (driver "),
	    JC_LOAD_RETRY_MAX);
	/* Past the bound: the existing entry is served, nothing recompiles,
	 * the report still counts, and the log says so with key and driver. */
	for (int i = 1; i <= 2; i++) {
		assert_int_equal(
		    jc_report_load_failure(c, r, res, "CUDA_ERROR_INVALID_IMAGE", &next), 0);
		assert_int_equal(jc_result_cache_status(next), JC_HIT);
		assert_same_bytes(first, next);
		jc_result_free(next);
		assert_int_equal(jct_stat(d, "compiles"), 1 + JC_LOAD_RETRY_MAX);
		assert_int_equal(jct_stat(d, "load_failures"), JC_LOAD_RETRY_MAX + i);
		assert_int_equal(quarantined(d), JC_LOAD_RETRY_MAX);
	}
	assert_true(jct_log_count(d, keyhex) >= JC_LOAD_RETRY_MAX + 2);
	assert_int_equal(jct_log_count(d, "serving the existing entry (driver "), 2);

	/* A key of its own still gets its recompile. */
	jc_request *other = jct_request("saxpy.cu", "sm_80", saxpy_exprs);
	jc_result *o1 = NULL, *o2 = NULL;
	assert_int_equal(jc_compile(c, other, &o1), 0);
	assert_int_equal(jc_report_load_failure(c, other, o1, NULL, &o2), 0);
	assert_int_equal(jc_result_cache_status(o2), JC_MISS);
	assert_int_equal(jct_log_count(d, "did not load; quarantined, recompiling"), 1);

	/* A report naming an object the entry does not hold (here: sm_80's for
	 * the sm_90 key) is stale: no quarantine, no compile, not counted. */
	int64_t compiles = jct_stat(d, "compiles"), failures = jct_stat(d, "load_failures");
	assert_int_equal(jc_report_load_failure(c, r, o2, "stale", &next), 0);
	assert_int_equal(jc_result_cache_status(next), JC_HIT);
	assert_same_bytes(first, next);
	assert_int_equal(jct_stat(d, "compiles"), compiles);
	assert_int_equal(jct_stat(d, "load_failures"), failures);
	jc_result_free(next);

	/* Nothing but the good entries is left, and verify agrees. */
	assert_int_equal(jct_stat(d, "entries"), 2);
	const char *verify[] = {"verify", NULL};
	assert_int_equal(jct_ctl(d, NULL, NULL, verify), 0);
	jc_result_free(o1);
	jc_result_free(o2);
	jc_result_free(first);
	jc_result_free(res);
	jc_request_free(other);
	jc_request_free(r);
	jc_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_report_recompiles_bounded, jct_setup,
					    jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
