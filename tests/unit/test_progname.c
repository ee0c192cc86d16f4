/* SPDX-License-Identifier: MIT */
/*
 * Whether a program name reached a result (core/progname.h): every form of
 * the name NVRTC writes (as given, its last component, that component
 * mangled into internal-linkage names, PTX's decimal string bytes) in the
 * artifact, the lowered names or the log makes it name-bound; the log's
 * diagnostics naming the program are rewritten to the stand-in. The bytes
 * here are the forms NVRTC 13.0 was seen to write (docs/shim.md).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/progname.h"
#include "jitcache/jitcache.h"

#define NAME "/tmp/tmpab12/0123abcd_2.cubin.cu"

/* jc__progname_free over an artifact of text art, lowered names low (or
 * NULL) and log; the rewritten log in *out (freed by the caller). */
static int verdict(const char *art, const char *low, const char *log, char **out)
{
	struct jc_lowered l = {.expr = (char *)"&k", .lowered = (char *)low};
	return jc__progname_free(NAME, (const uint8_t *)art, strlen(art), &l, low ? 1 : 0, log,
				 out);
}

/* The verdict on (art, low, log) is want: 0 the whole name is there, 2 only
 * its last component. */
static void bound(int want, const char *art, const char *low, const char *log)
{
	char *out = NULL;
	int rc = verdict(art, low, log, &out);
	if (rc != want)
		fail_msg("verdict %d, wanted %d: artifact \"%s\", lowered \"%s\", log \"%s\"", rc,
			 want, art, low ? low : "", log ? log : "");
	if (want == 0)
		assert_null(out);
	free(out);
}

static void test_not_bound(void **state)
{
	(void)state;
	char *out = NULL;
	assert_int_equal(verdict("\177ELF code k", "_Z1kv", NULL, &out), 1);
	assert_null(out);
	/* a diagnostic names the program: rewritten, every occurrence */
	assert_int_equal(
	    verdict("code", NULL, NAME "(3): warning #177-D: x\n" NAME "(4): warning\n", &out), 1);
	assert_string_equal(out, JC_NAME_STANDIN "(3): warning #177-D: x\n" JC_NAME_STANDIN
						 "(4): warning\n");
	free(out);
	/* a log without the name comes back as it was */
	assert_int_equal(verdict("code", NULL, "note: nothing\n", &out), 1);
	assert_string_equal(out, "note: nothing\n");
	free(out);
}

#define INTERNAL "_ZN40_INTERNAL_00000000_22_0123abcd_2_cubin_cu_ea3a1b1b_24328cuda"
/* PTX: .b8 $str$1[..] = {48, 49, ...} (the last component, then the whole name) */
#define PTX_BASE "{48, 49, 50, 51, 97, 98, 99, 100, 95, 50, 46, 99, 117, 98, 105, 110, 46, 99, 117}"
#define PTX_DIR	 "{47, 116, 109, 112, 47, 116, 109, 112, 97, 98, 49, 50, 47}"

static void test_bound(void **state)
{
	(void)state;
	bound(0, "assert msg " NAME " line", NULL, NULL); /* __FILE__ */
	bound(0, "$str$1[34] = " PTX_DIR, NULL, NULL);
	bound(0, "dir /tmp/tmpab12 only", NULL, NULL);
	/* a directory cut from __FILE__ */ /* the directory too */
	/* in the log, but not as the whole name: could not be rewritten */
	bound(0, "code", NULL, "note: in /x" NAME "(3)\n");
	bound(0, "code", NULL, "note: " JC_NAME_STANDIN " already\n");
	/* its last component alone: the same for every directory */
	bound(2, "x 0123abcd_2.cubin.cu y", NULL, NULL);	/* __FILE_NAME__ */
	bound(2, INTERNAL "3std3__45__cpo5beginE", NULL, NULL); /* an internal-linkage name */
	bound(2, ".global .align 1 .b8 $str$1[20] = " PTX_BASE ";", NULL, NULL);
	bound(2, "code", INTERNAL "5twiceEf", NULL); /* a lowered name */
	bound(2, "code", NULL, "note: 0123abcd_2.cubin.cu\n");
	/* with the diagnostics rewritten */
	char *out = NULL;
	assert_int_equal(verdict(INTERNAL, NULL, NAME "(3): warning\n", &out), 2);
	assert_string_equal(out, JC_NAME_STANDIN "(3): warning\n");
	free(out);
}

/* "" is NVRTC's default_program; a name with no last component, or no
 * directory, is bound to itself (0, never 2). */
static void test_special_names(void **state)
{
	(void)state;
	char *out = NULL;
	const uint8_t art[] = "_ZN39_INTERNAL_00000000_15_default_program_k5twiceEf";
	assert_int_equal(jc__progname_free("", art, sizeof(art) - 1, NULL, 0, NULL, &out), 0);
	assert_int_equal(jc__progname_free("", (const uint8_t *)"code", 4, NULL, 0, NULL, &out), 1);
	assert_int_equal(jc__progname_free("dir/", (const uint8_t *)"code", 4, NULL, 0, NULL, &out),
			 0);
	const uint8_t mangled[] = "_ZN25_INTERNAL_00000000_5_x1_cu_k5twiceEf";
	assert_int_equal(
	    jc__progname_free("x1.cu", mangled, sizeof(mangled) - 1, NULL, 0, NULL, &out), 0);
	/* the keys: the last component's only with a directory */
	uint8_t key[16] = {7}, base[16], full[16], full2[16];
	assert_int_equal(jc__progname_keys(key, "/a/x1.cu", base, full), 2);
	assert_int_equal(jc__progname_keys(key, "/b/x1.cu", full2, full2), 2);
	assert_memory_equal(full2, base, 16); /* same last component */
	assert_int_equal(jc__progname_keys(key, "/b/x1.cu", base, full2), 2);
	assert_memory_not_equal(full2, full, 16);
	assert_int_equal(jc__progname_keys(key, "x1.cu", base, full2), 1);
	assert_memory_equal(full2, base, 16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_bound),
	    cmocka_unit_test(test_bound),
	    cmocka_unit_test(test_special_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
