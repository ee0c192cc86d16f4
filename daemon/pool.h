/* SPDX-License-Identifier: MIT */
/*
 * The compile worker pool: jitcache-worker processes started with uv_spawn,
 * each talking frames over a socketpair on its fd 0. One job per worker at a
 * time; a job past --compile-timeout gets its worker SIGKILLed; a worker that
 * dies is replaced. Loop thread only.
 */
#ifndef JC_POOL_H
#define JC_POOL_H

#include "daemon.h"

/* Starts cfg.workers workers. Returns 0 or a JC_E code (no worker could start). */
int jc__pool_start(struct jc_daemon *d, char *err, size_t errlen);
/* Hands queued flights to idle workers; restarts missing workers. */
void jc__pool_dispatch(struct jc_daemon *d);
/* Kills all workers (running jobs end with JC_EBUSY). */
void jc__pool_stop(struct jc_daemon *d);

/* Provided by cache.c: the next queued flight (or NULL), and the end of a job
 * (f->res holds the result or the failure). */
struct jc_flight *jc__pool_next_flight(struct jc_daemon *d);
void jc__pool_flight_done(struct jc_daemon *d, struct jc_flight *f);
/* Ends f as failed: its result becomes status, the request's output and
 * message (borrowed), then jc__pool_flight_done. */
void jc__pool_flight_fail(struct jc_daemon *d, struct jc_flight *f, int status, const char *message);

#endif
