/* SPDX-License-Identifier: MIT */
/* The hit-latency histogram: quantiles against exact ones on real samples. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/latency.h"
#include "tests/lib/core.h"

/* Exact nearest-rank quantile of sorted v[n]. */
static uint64_t exact(const uint64_t *v, size_t n, double q)
{
	size_t rank = (size_t)((double)n * q);
	if ((double)rank < (double)n * q)
		rank++;
	return v[rank ? rank - 1 : 0];
}

static void assert_within_eighth(uint64_t got, uint64_t want)
{
	uint64_t diff = got > want ? got - want : want - got;
	if (diff > want / 8) {
		print_error("quantile %llu, exact %llu: off by more than 1/8\n",
			    (unsigned long long)got, (unsigned long long)want);
		fail();
	}
}

static void test_empty_and_bad_q(void **state)
{
	(void)state;
	struct jc_latency h;
	memset(&h, 0, sizeof(h));
	assert_int_equal(jc__latency_quantile_ns(&h, 0.5), 0);
	jc__latency_add(&h, 1000);
	assert_int_equal(jc__latency_quantile_ns(&h, 0.0), 0);
	assert_int_equal(jc__latency_quantile_ns(&h, -1.0), 0);
	assert_int_equal(jc__latency_quantile_ns(&h, 1.5), 0);
	assert_int_equal(jc__latency_quantile_ns(&h, 0.0 / 0.0), 0);
	assert_int_equal(h.count, 1);
	assert_int_equal(h.sum_ns, 1000);
}

static void test_small_values_exact(void **state)
{
	(void)state;
	struct jc_latency h;
	memset(&h, 0, sizeof(h));
	for (uint64_t v = 0; v < 8; v++) {
		memset(&h, 0, sizeof(h));
		jc__latency_add(&h, v);
		assert_int_equal(jc__latency_quantile_ns(&h, 1.0), v);
	}
}

static void test_extremes(void **state)
{
	(void)state;
	struct jc_latency h;
	memset(&h, 0, sizeof(h));
	jc__latency_add(&h, UINT64_MAX);
	assert_within_eighth(jc__latency_quantile_ns(&h, 0.5), UINT64_MAX);
	jc__latency_add(&h, 1u << 20);
	/* Nearest rank of 0.5 over 2 samples is the smaller one. */
	assert_within_eighth(jc__latency_quantile_ns(&h, 0.5), 1u << 20);
	assert_within_eighth(jc__latency_quantile_ns(&h, 0.99), UINT64_MAX);
}

/* Log-uniform samples from 1 us to 100 ms: every quantile within 1/8. */
static void test_random_against_exact(void **state)
{
	(void)state;
	enum { N = 20000 };
	uint64_t *v = malloc(N * sizeof(*v));
	struct jc_latency h;
	memset(&h, 0, sizeof(h));
	srand(12345);
	uint64_t sum = 0;
	for (size_t i = 0; i < N; i++) {
		double e = 3.0 + 5.0 * rand() / (double)RAND_MAX; /* 10^3 .. 10^8 ns */
		uint64_t ns = 1;
		for (double p = 0; p < e; p += 0.01)
			ns = (uint64_t)(ns * 1.0232929922807541) + 1; /* 10^0.01 */
		v[i] = ns;
		sum += ns;
		jc__latency_add(&h, ns);
	}
	jtl_sort_u64(v, N);
	static const double qs[] = {0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0};
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
		assert_within_eighth(jc__latency_quantile_ns(&h, qs[i]), exact(v, N, qs[i]));
	assert_int_equal(h.count, N);
	assert_int_equal(h.sum_ns, sum);
	free(v);
}

/* A bimodal load: p50 in the fast mode, p99 in the slow one. */
static void test_bimodal(void **state)
{
	(void)state;
	struct jc_latency h;
	memset(&h, 0, sizeof(h));
	for (int i = 0; i < 980; i++)
		jc__latency_add(&h, 40000 + (uint64_t)i); /* ~40 us */
	for (int i = 0; i < 20; i++)
		jc__latency_add(&h, 5000000 + (uint64_t)i); /* ~5 ms */
	assert_within_eighth(jc__latency_quantile_ns(&h, 0.5), 40499);
	assert_within_eighth(jc__latency_quantile_ns(&h, 0.98), 40979);
	assert_within_eighth(jc__latency_quantile_ns(&h, 0.99), 5000009);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_empty_and_bad_q), cmocka_unit_test(test_small_values_exact),
	    cmocka_unit_test(test_extremes),	    cmocka_unit_test(test_random_against_exact),
	    cmocka_unit_test(test_bimodal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
