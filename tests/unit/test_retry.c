/* SPDX-License-Identifier: MIT */
/*
 * The bound on load-failure recompiles (daemon/retry.c), with the clock given
 * by the test: at most JC_LOAD_RETRY_MAX per key in any window, keys apart,
 * budgets coming back as the window slides, and a full table refusing new
 * keys until its entries age out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/retry.h"

static void key_of(unsigned n, uint8_t key[16])
{
	memset(key, 0xa5, 16);
	memcpy(key, &n, sizeof(n));
}

static void test_bound_per_key(void **state)
{
	(void)state;
	struct jc_retry *t;
	uint8_t a[16], b[16];
	key_of(1, a);
	key_of(2, b);
	assert_int_equal(jc__retry_new(&t), 0);
	const int64_t t0 = 100000;
	for (int i = 0; i < JC_LOAD_RETRY_MAX; i++)
		assert_int_equal(jc__retry_take(t, a, t0 + i), 1);
	assert_int_equal(jc__retry_take(t, a, t0 + 10), 0);
	assert_int_equal(jc__retry_take(t, a, t0 + JC_LOAD_RETRY_WINDOW_S - 1), 0);
	/* Another key has its own budget. */
	assert_int_equal(jc__retry_take(t, b, t0 + 10), 1);
	/* The window slides: the first stamp leaves it at t0 + W, one comes back. */
	assert_int_equal(jc__retry_take(t, a, t0 + JC_LOAD_RETRY_WINDOW_S), 1);
	assert_int_equal(jc__retry_take(t, a, t0 + JC_LOAD_RETRY_WINDOW_S), 0);
	assert_int_equal(jc__retry_take(t, a, t0 + JC_LOAD_RETRY_WINDOW_S + 1), 1);
	assert_int_equal(jc__retry_take(t, a, t0 + JC_LOAD_RETRY_WINDOW_S + 2), 1);
	assert_int_equal(jc__retry_take(t, a, t0 + JC_LOAD_RETRY_WINDOW_S + 3), 0);
	/* Long after, the whole budget is back. */
	for (int i = 0; i < JC_LOAD_RETRY_MAX; i++)
		assert_int_equal(jc__retry_take(t, a, t0 + 10 * JC_LOAD_RETRY_WINDOW_S), 1);
	assert_int_equal(jc__retry_take(t, a, t0 + 10 * JC_LOAD_RETRY_WINDOW_S), 0);
	jc__retry_free(t);
}

static void test_full_table(void **state)
{
	(void)state;
	struct jc_retry *t;
	uint8_t k[16];
	assert_int_equal(jc__retry_new(&t), 0);
	const int64_t t0 = 5000;
	for (unsigned i = 0; i < JC_LOAD_RETRY_KEYS; i++) {
		key_of(i, k);
		assert_int_equal(jc__retry_take(t, k, t0), 1);
	}
	/* Full of keys inside their window: a new key gets nothing ... */
	key_of(JC_LOAD_RETRY_KEYS, k);
	assert_int_equal(jc__retry_take(t, k, t0 + 1), 0);
	/* ... while a tracked key still has the rest of its budget ... */
	key_of(7, k);
	assert_int_equal(jc__retry_take(t, k, t0 + 1), 1);
	/* ... and once the window has passed, the new key gets a slot. */
	key_of(JC_LOAD_RETRY_KEYS, k);
	assert_int_equal(jc__retry_take(t, k, t0 + JC_LOAD_RETRY_WINDOW_S), 1);
	jc__retry_free(t);
	jc__retry_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bound_per_key),
	    cmocka_unit_test(test_full_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
