/* SPDX-License-Identifier: MIT */
/*
 * Reassembles frames from a libuv stream without extra copies: libuv reads
 * straight into the framer's buffer (jc__framer_alloc), and complete frames
 * are handed to a callback in place. Loop thread only.
 */
#ifndef JC_FRAMER_H
#define JC_FRAMER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proto/proto.h"

/*
 * A byte budget shared by many framers (and whoever else charges it): the
 * bytes each framer's buffer holds past JC_FRAMER_BASE are charged to it.
 * used <= max, except for one buffer larger than max while it is all that is
 * charged; max is read at every charge, so it may change. Threads share
 * it: used and peak change through the functions below (atomic), and are
 * read with jc__budget_used. A charge that must not pass max goes through
 * jc__budget_try_charge, one atomic step, so threads charging at once (the
 * serving threads' framers) cannot pass it together.
 */
struct jc_budget {
	size_t used, max;
	size_t peak; /* the most used since main.c's trim check last looked */
};
/* Charges n bytes to b, keeping its peak. */
static inline void jc__budget_charge(struct jc_budget *b, size_t n)
{
	size_t now = __atomic_add_fetch(&b->used, n, __ATOMIC_RELAXED);
	if (now > __atomic_load_n(&b->peak, __ATOMIC_RELAXED))
		__atomic_store_n(&b->peak, now, __ATOMIC_RELAXED);
}
/* Charges n bytes to b unless the total then passes max while others hold
 * part of it (own: what the caller holds already; a frame larger than the
 * whole budget goes through alone). 0, or -1 with nothing charged. */
static inline int jc__budget_try_charge(struct jc_budget *b, size_t n, size_t own)
{
	size_t now = __atomic_add_fetch(&b->used, n, __ATOMIC_RELAXED);
	if (now > b->max && now - n != own) {
		__atomic_sub_fetch(&b->used, n, __ATOMIC_RELAXED);
		return -1;
	}
	if (now > __atomic_load_n(&b->peak, __ATOMIC_RELAXED))
		__atomic_store_n(&b->peak, now, __ATOMIC_RELAXED);
	return 0;
}
/* Returns n charged bytes. */
static inline void jc__budget_release(struct jc_budget *b, size_t n)
{
	__atomic_sub_fetch(&b->used, n, __ATOMIC_RELAXED);
}
static inline size_t jc__budget_used(const struct jc_budget *b)
{
	return __atomic_load_n(&b->used, __ATOMIC_RELAXED);
}
/* Buffer bytes per framer not charged to the budget (what a small request needs). */
#define JC_FRAMER_BASE 65536

struct jc_framer {
	struct jc_buf buf;	  /* received, not yet consumed bytes */
	size_t max;		  /* largest payload accepted (<= JC_FRAME_MAX; 0: JC_FRAME_MAX);
				   * the callback may change it for the frames after its own */
	struct jc_budget *budget; /* borrowed, or NULL: no limit */
};

/* Called for each complete frame; payload is borrowed until it returns.
 * A non-zero return stops the feed and is returned by jc__framer_feed. */
typedef int (*jc_frame_cb)(void *ctx, uint16_t type, const uint8_t *payload, size_t len);

/* libuv alloc_cb body: room for at least 64 KiB more, and for the rest of a
 * frame whose header has arrived (the buffer grows to the frame's size at
 * once). buf->len is 0 (libuv then reports UV_ENOBUFS) on ENOMEM or when
 * the growth would pass the budget. */
void jc__framer_alloc(struct jc_framer *f, size_t hint, uv_buf_t *buf);
/* Accounts nread bytes just read into the buffer and dispatches whole frames.
 * Returns 0, the callback's non-zero value, JC_EPROTO or JC_ETOOBIG. */
int jc__framer_feed(struct jc_framer *f, size_t nread, jc_frame_cb cb, void *ctx);
/* Frees the buffer and returns its charge to the budget. */
void jc__framer_free(struct jc_framer *f);

#endif
