/* SPDX-License-Identifier: MIT */
/*
 * Busy polling of the main loop while a client waits on work that ends in
 * well under a millisecond or two: a request keyed in the thread pool (its
 * include scan, a dependency record and its check) or a value fetched from a
 * remote tier. Each step of such a request hands off between the loop, the
 * thread pool and a backend's socket; on a virtual machine, waking a loop
 * asleep on an idle vCPU costs tens of microseconds each time (on the H200
 * machine a fresh daemon's first remote hit of the CUB example took 2.0 ms,
 * of which about a tenth was such wake-ups). For a window after each such
 * hand-off the loop does not sleep (an active idle handle makes libuv poll
 * with a zero timeout), yielding the CPU each turn to any other runnable
 * task, as the serving threads do after a read (server.c). Compiles are not
 * waited on this way: they take milliseconds to seconds.
 *
 * Loop thread only.
 */
#ifndef JC_LOOP_SPIN_H
#define JC_LOOP_SPIN_H

#include <stdint.h>
#include <uv.h>

struct jc_loop_spin {
	uv_idle_t idle;
	uint64_t until_ns; /* jc__now_ns() the loop may sleep again from */
};

/* Initialises s on loop (not polling yet). 0 or a libuv error. */
int jc__loop_spin_init(struct jc_loop_spin *s, uv_loop_t *loop);
/* Keeps the loop from sleeping for the next JC_LOOP_SPIN_NS (extends a
 * window already open). s may be NULL (a unit test's daemon), or closed
 * (the daemon stops): nothing. */
void jc__loop_spin(struct jc_loop_spin *s);
/* Stops polling and closes the handle (uv_close; the loop then frees
 * nothing: s is the caller's). */
void jc__loop_spin_close(struct jc_loop_spin *s);

/* The window each hand-off opens: a remote round trip plus a pool wake on a
 * loaded machine, well under a compile. */
#define JC_LOOP_SPIN_NS 1000000

#endif
