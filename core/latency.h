/* SPDX-License-Identifier: MIT */
/*
 * A fixed-bucket latency histogram: constant memory, O(1) record, quantiles
 * within 12.5 % of the true value. Used by the daemon for the server-side
 * time of cache hits (`stats`: hit_p50_us, hit_p99_us).
 *
 * Buckets are log-linear: each power of two [2^k, 2^(k+1)) nanoseconds is cut
 * into 4 equal buckets (values 0..3 ns get one bucket each), so 256 buckets
 * cover every uint64_t. A quantile is answered with the midpoint of the
 * bucket that holds it: the relative error is at most 1/8 of the value.
 *
 * Not thread-safe: one writer, and readers on the same thread (the daemon's
 * loop thread), or copy the struct first.
 */
#ifndef JC_LATENCY_H
#define JC_LATENCY_H

#include <stdint.h>

#define JC_LATENCY_BUCKETS 256

struct jc_latency {
	uint64_t count;	 /* samples recorded */
	uint64_t sum_ns; /* their sum (wraps after 584 years) */
	uint64_t bucket[JC_LATENCY_BUCKETS];
};

/* Records one duration of ns nanoseconds. h borrowed; a zeroed struct is empty. */
void jc__latency_add(struct jc_latency *h, uint64_t ns);

/*
 * The q-quantile (0 < q <= 1; e.g. 0.5, 0.99) in nanoseconds: the midpoint of
 * the bucket holding the ceil(q * count)-th smallest sample (the "nearest
 * rank" definition). 0 when h holds no sample or q is out of range.
 */
uint64_t jc__latency_quantile_ns(const struct jc_latency *h, double q);

#endif
