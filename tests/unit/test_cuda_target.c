/* SPDX-License-Identifier: MIT */
/* Target resolution (jc__cuda_pick_target): cubin where NVRTC knows the
 * device's architecture, else PTX of the highest one below it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client/client_internal.h"

static const char nvrtc13[] =
    "sm_75 sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_103 sm_110 sm_120 sm_121";

static void pick(int cc, const char *list, int want_rc, const char *want)
{
	char arch[16] = "untouched";
	assert_int_equal(jc__cuda_pick_target(cc, list, JC__FORCE_NONE, arch, sizeof(arch)),
			 want_rc);
	if (want)
		assert_string_equal(arch, want);
}

static void test_cubin_when_listed(void **state)
{
	(void)state;
	pick(90, nvrtc13, 0, "sm_90");
	pick(75, nvrtc13, 0, "sm_75");
	pick(121, nvrtc13, 0, "sm_121");
}

static void test_ptx_fallback(void **state)
{
	(void)state;
	pick(130, nvrtc13, 0, "compute_121"); /* newer than NVRTC knows */
	pick(90, "sm_75 sm_80 sm_86 sm_100", 0,
	     "compute_86"); /* a gap: highest below, never above */
	pick(91, nvrtc13, 0, "compute_90");
	pick(70, nvrtc13, JC_ENOTSUP, "untouched"); /* older than everything */
	pick(90, "", JC_ENOTSUP, "untouched");
}

static void test_bad_input(void **state)
{
	(void)state;
	const char *bad[] = {"sm_",    "sm_9x", "compute_90", "sm_90  sm_80",
			     "sm_90 ", "sm_-5", " sm_90"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		pick(90, bad[i], JC_EPROTO, NULL);
	char small[8];
	assert_int_equal(jc__cuda_pick_target(90, nvrtc13, 0, small, sizeof(small)), JC_EINVAL);
	assert_int_equal(jc__cuda_pick_target(90, NULL, 0, small, 16), JC_EINVAL);
}

static void pick_forced_target(int cc, const char *list, int force, int want_rc, const char *want)
{
	char arch[16] = "untouched";
	assert_int_equal(jc__cuda_pick_target(cc, list, force, arch, sizeof(arch)), want_rc);
	assert_string_equal(arch, want);
}

/* JITCACHE_FORCE_PTX / _CUBIN when the target is resolved from the device. */
static void test_forced_resolution(void **state)
{
	(void)state;
	pick_forced_target(90, nvrtc13, JC__FORCE_PTX, 0,
			   "compute_90"); /* PTX even where a cubin fits */
	pick_forced_target(130, nvrtc13, JC__FORCE_PTX, 0, "compute_121");
	pick_forced_target(70, nvrtc13, JC__FORCE_PTX, JC_ENOTSUP, "untouched");
	pick_forced_target(90, nvrtc13, JC__FORCE_CUBIN, 0, "sm_90");
	pick_forced_target(130, nvrtc13, JC__FORCE_CUBIN, JC_ENOTSUP,
			   "untouched"); /* no cubin fits */
	pick_forced_target(91, nvrtc13, JC__FORCE_CUBIN, JC_ENOTSUP, "untouched");
}

static void forced(int cc, const char *requested, int force, int want_rc, const char *want)
{
	char arch[16] = "untouched";
	assert_int_equal(jc__cuda_pick_forced(cc, requested, force, arch, sizeof(arch)), want_rc);
	assert_string_equal(arch, want);
}

/* ... and when the request names its targets (a fatbin's list). */
static void test_forced_from_targets(void **state)
{
	(void)state;
	forced(90, "sm_80,sm_90,compute_90", JC__FORCE_PTX, 0, "compute_90");
	forced(90, "sm_80,sm_90,compute_80", JC__FORCE_PTX, 0, "compute_90"); /* sm_90's own PTX */
	forced(86, "sm_80,sm_90,compute_90", JC__FORCE_PTX, 0, "compute_80");
	forced(75, "sm_80,compute_90", JC__FORCE_PTX, JC_ENOTSUP, "untouched");
	forced(90, "sm_90a", JC__FORCE_PTX, 0, "compute_90");
	forced(90, "sm_80,sm_90,compute_90", JC__FORCE_CUBIN, 0, "sm_90");
	forced(90, "sm_80,sm_90a", JC__FORCE_CUBIN, 0, "sm_90a");
	forced(90, "compute_90", JC__FORCE_CUBIN, 0, "sm_90");
	forced(100, "sm_80,sm_90,compute_90", JC__FORCE_CUBIN, JC_ENOTSUP, "untouched");
	forced(90, "sm_80,,sm_90", JC__FORCE_PTX, JC_EINVAL, "untouched");
	forced(90, "sm_9x", JC__FORCE_PTX, JC_EINVAL, "untouched");
	forced(90, "lto_90", JC__FORCE_PTX, JC_EINVAL, "untouched");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cubin_when_listed),	cmocka_unit_test(test_ptx_fallback),
	    cmocka_unit_test(test_bad_input),		cmocka_unit_test(test_forced_resolution),
	    cmocka_unit_test(test_forced_from_targets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
