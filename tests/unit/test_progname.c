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

static void bound(const char *art, const char *low, const char *log)
{
	char *out = (char *)"unset";
	if (verdict(art, low, log, &out) != 0)
		fail_msg("free, wanted name-bound: artifact \"%s\", lowered \"%s\", log \"%s\"",
			 art, low ? low : "", log ? log : "");
	assert_null(out);
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

static void test_bound(void **state)
{
	(void)state;
	bound("assert msg " NAME " line", NULL, NULL); /* __FILE__ */
	bound("x 0123abcd_2.cubin.cu y", NULL, NULL);  /* __FILE_NAME__ */
	bound("_ZN40_INTERNAL_00000000_22_0123abcd_2_cubin_cu_k5twiceEf", NULL,
	      NULL); /* anonymous namespace */
	/* PTX: .b8 $str$1[..] = {48, 49, ...} ("0123abcd_2.cubin.cu") */
	bound(".global .align 1 .b8 $str$1[20] = {48, 49, 50, 51, 97, 98, 99, 100, 95, 50, 46, 99, "
	      "117, "
	      "98, 105, 110, 46, 99, 117};",
	      NULL, NULL);
	bound("code", "_ZN40_INTERNAL_00000000_22_0123abcd_2_cubin_cu_k5twiceEf",
	      NULL); /* lowered */
	/* in the log, but not as the whole name: could not be rewritten */
	bound("code", NULL, "note: in /x" NAME "(3)\n");
	bound("code", NULL, "note: 0123abcd_2.cubin.cu\n");
	bound("code", NULL, "note: " JC_NAME_STANDIN " already\n");
}

/* "" is NVRTC's default_program; a name with no last component is bound. */
static void test_special_names(void **state)
{
	(void)state;
	char *out = NULL;
	const uint8_t art[] = "_ZN39_INTERNAL_00000000_15_default_program_k5twiceEf";
	assert_int_equal(jc__progname_free("", art, sizeof(art) - 1, NULL, 0, NULL, &out), 0);
	assert_int_equal(jc__progname_free("", (const uint8_t *)"code", 4, NULL, 0, NULL, &out), 1);
	assert_int_equal(jc__progname_free("dir/", (const uint8_t *)"code", 4, NULL, 0, NULL, &out),
			 0);
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
