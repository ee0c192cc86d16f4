/* SPDX-License-Identifier: MIT */
#include "core/latency.h"

#include <math.h>

/* Bucket of v: 4 * msb + the two bits below the most significant one. */
static unsigned bucket_of(uint64_t v)
{
	if (v < 4)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	return 4u * (msb - 1u) + (unsigned)((v >> (msb - 2u)) & 3u);
}

/* Lower bound of bucket b (the inverse of bucket_of on bucket starts). */
static uint64_t bucket_lo(unsigned b)
{
	if (b < 4)
		return b;
	unsigned msb = b / 4u + 1u;
	return (uint64_t)(4u + b % 4u) << (msb - 2u);
}

void jc__latency_add(struct jc_latency *h, uint64_t ns)
{
	h->count++;
	h->sum_ns += ns;
	h->bucket[bucket_of(ns)]++;
}

uint64_t jc__latency_quantile_ns(const struct jc_latency *h, double q)
{
	if (!h->count || !(q > 0.0) || q > 1.0)
		return 0;
	uint64_t rank = (uint64_t)ceil(q * (double)h->count), seen = 0;
	if (rank < 1)
		rank = 1;
	for (unsigned b = 0; b < JC_LATENCY_BUCKETS; b++) {
		seen += h->bucket[b];
		if (seen < rank)
			continue;
		uint64_t lo = bucket_lo(b);
		if (b < 4)
			return lo;
		uint64_t width = lo / (4u + b % 4u); /* 2^(msb - 2) */
		return lo + width / 2;
	}
	return 0; /* not reached: the buckets sum to count */
}
