/* SPDX-License-Identifier: MIT */
/*
 * Time macros (issue 22, item 2): a compile that uses __DATE__, __TIME__ or
 * __TIMESTAMP__ (in its source, an in-memory header, a header on disk or a
 * header of a client-read tree: a team daemon's path) is served `uncached`,
 * never stored and counted (time_macros), so a request a second later gets
 * a new stamp, never the first compile's. A source that
 * only mentions the names in a comment or a string is cached as any other.
 * Real daemon, real NVRTC compiles (PTX, where the stamp is a byte array).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

/* The bytes of the PTX array named stamp (a __device__ const char[]) as a
 * string into out (len bytes); fails the test when there is none. */
static void stamp_of(const jc_result *res, char *out, size_t len)
{
	size_t n;
	const char *ptx = jc_result_data(res, &n);
	char *text = strndup(ptx, n);
	assert_non_null(text);
	char *p = strstr(text, " stamp[");
	assert_non_null(p);
	p = strchr(p, '{');
	assert_non_null(p);
	size_t k = 0;
	for (char *e; k + 1 < len && *p != '}'; p = e) {
		long v = strtol(p + 1, &e, 10);
		if (e == p + 1)
			break;
		if (v)
			out[k++] = (char)v;
	}
	out[k] = '\0';
	free(text);
}

/* A PTX request of src (as k.cu), with header (name, text) in memory when
 * name is not NULL, and -I dir when dir is not NULL. */
static jc_request *request(const char *src, const char *name, const char *text, const char *dir)
{
	jc_request *r = jct_request_src("k.cu", src, "compute_90");
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	if (name)
		assert_int_equal(jc_request_add_header(r, name, text, strlen(text)), 0);
	if (dir)
		jct_request_include(r, dir);
	return r;
}

/* Compiles r twice, more than a second apart: both uncached, both counted,
 * and the second has the newer stamp. */
static void twice_uncached(const struct jtl_daemon *d, const jc_request *r)
{
	int64_t before = jct_stat(d, "time_macros");
	jc_result *a = jct_compile(d, r, 0);
	assert_int_equal(jc_result_cache_status(a), JC_UNCACHED);
	assert_int_equal(jct_stat(d, "time_macros"), before + 1);
	jtl_sleep_ms(1200);
	jc_result *b = jct_compile(d, r, 0);
	assert_int_equal(jc_result_cache_status(b), JC_UNCACHED);
	assert_int_equal(jct_stat(d, "time_macros"), before + 2);
	char sa[64], sb[64];
	stamp_of(a, sa, sizeof(sa));
	stamp_of(b, sb, sizeof(sb));
	assert_true(strlen(sa) >= 20); /* "Mmm dd yyyy hh:mm:ss" */
	assert_string_not_equal(sa, sb);
	print_message("stamps: %s, then %s\n", sa, sb);
	assert_int_equal(jct_stat(d, "entries"), 0);
	jc_result_free(a);
	jc_result_free(b);
}

#define USE "extern \"C\" __global__ void k(char *o) { o[0] = stamp[0]; }\n"

static void test_source(void **state)
{
	jc_request *r = request("__device__ const char stamp[] = __DATE__ \" \" __TIME__;\n" USE,
				NULL, NULL, NULL);
	twice_uncached(*state, r);
	jc_request_free(r);
}

static void test_memory_header(void **state)
{
	jc_request *r =
	    request("#include \"stamp.h\"\n__device__ const char stamp[] = STAMP;\n" USE, "stamp.h",
		    "#define STAMP __DATE__ \" \" __TIME__\n", NULL);
	twice_uncached(*state, r);
	jc_request_free(r);
}

static void test_disk_header(void **state)
{
	struct jtl_daemon *d = *state;
	char dir[400];
	snprintf(dir, sizeof(dir), "%s/inc", d->dir);
	jct_put(d->dir, "inc/stamp.h",
		"#pragma once\n#define STAMP __DATE__ \" \" \\\n  __TIME__\n");
	jct_settle();
	jc_request *r = request("#include <stamp.h>\n__device__ const char stamp[] = STAMP;\n" USE,
				NULL, NULL, dir);
	twice_uncached(d, r);
	jc_request_free(r);
}

/*
 * Through the client-read tree (a team daemon's path: JITCACHE_SEND_HEADERS=1
 * makes the client read its -I directories and send their bytes to this
 * daemon too): __TIME__ in a header that a header of the tree includes. One
 * client for both compiles, so the second goes by the tree's digest first.
 */
static void test_client_read_tree(void **state)
{
	struct jtl_daemon *d = *state;
	char dir[400];
	snprintf(dir, sizeof(dir), "%s/inc", d->dir);
	jct_put(d->dir, "inc/stamp.h",
		"#pragma once\n#include \"sub/when.h\"\n#define STAMP WHEN\n");
	jct_put(d->dir, "inc/sub/when.h", "#define WHEN __DATE__ \" \" __TIME__\n");
	jct_settle();
	assert_int_equal(setenv("JITCACHE_SEND_HEADERS", "1", 1), 0);
	jc_client *c = jct_connect(d);
	jc_request *r = request("#include <stamp.h>\n__device__ const char stamp[] = STAMP;\n" USE,
				NULL, NULL, dir);
	int64_t trees = jct_stat(d, "tree_requests");
	jc_result *res[2];
	char st[2][64];
	for (int i = 0; i < 2; i++) {
		if (i)
			jtl_sleep_ms(1200);
		int rc = jc_compile(c, r, &res[i]);
		if (rc != 0)
			fail_msg("compile %d: %s: %s", i, jc_strerror(rc), jc_client_errmsg(c));
		assert_int_equal(jc_result_cache_status(res[i]), JC_UNCACHED);
		stamp_of(res[i], st[i], sizeof(st[i]));
	}
	print_message("client-read tree: stamps %s, then %s\n", st[0], st[1]);
	assert_true(strlen(st[0]) >= 20);
	assert_string_not_equal(st[0], st[1]);
	assert_true(jct_stat(d, "tree_requests") >= trees + 2);
	assert_int_equal(jct_stat(d, "time_macros"), 2);
	assert_int_equal(jct_stat(d, "entries"), 0);
	for (int i = 0; i < 2; i++)
		jc_result_free(res[i]);
	jc_request_free(r);
	jc_client_close(c);
	unsetenv("JITCACHE_SEND_HEADERS");
}

/* Named only in a comment, a string and a character literal: cached. */
static void test_mentioned_only(void **state)
{
	struct jtl_daemon *d = *state;
	jc_request *r = request("// uses no __TIME__ or __DATE__ (nor /* __TIMESTAMP__ */)\n"
				"__device__ const char stamp[] = \"__DATE__ __TIME__\";\n" USE,
				NULL, NULL, NULL);
	jc_result *a = jct_expect_ptx(d, r, JC_MISS, "stamp");
	jc_result *b = jct_expect_ptx(d, r, JC_HIT, "stamp");
	char sa[64];
	stamp_of(b, sa, sizeof(sa));
	assert_string_equal(sa, "__DATE__ __TIME__");
	assert_int_equal(jct_stat(d, "time_macros"), 0);
	jc_result_free(a);
	jc_result_free(b);
	jc_request_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_source, jct_setup_started, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_memory_header, jct_setup_started, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_disk_header, jct_setup_started, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_client_read_tree, jct_setup_started, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_mentioned_only, jct_setup_started, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
