/* SPDX-License-Identifier: MIT */
/*
 * Clocks, one definition for the daemon, the worker, the client library and
 * jitcachectl. Thread-safe; inline because the hit path reads them.
 */
#ifndef JC_CLOCK_H
#define JC_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic time in nanoseconds (CLOCK_MONOTONIC): for intervals and deadlines. */
static inline uint64_t jc__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Monotonic time in milliseconds. */
static inline uint64_t jc__now_ms(void)
{
	return jc__now_ns() / 1000000u;
}

/* Wall-clock time in seconds since the epoch: for times stored in the index. */
static inline int64_t jc__wall_s(void)
{
	return (int64_t)time(NULL);
}

#endif
