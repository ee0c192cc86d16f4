/* SPDX-License-Identifier: MIT */
/*
 * The toolchains jitcached keys and compiles with (toolchains.c). Loop
 * thread.
 */
#ifndef JC_DAEMON_TOOLCHAINS_H
#define JC_DAEMON_TOOLCHAINS_H

#include <stddef.h>

struct jc_daemon;
/* toolchains.c's own state (opaque), d->toolchains: every toolchain d->tc
 * was (kept until exit: requests, flights and jobs hold pointers to them),
 * the identity the cache recorded (d->cache_identity's first value), and
 * whether a probe of the toolchain on disk runs. Made by
 * jc__toolchains_probe, freed by jc__toolchains_free; loop thread. */
struct jc_toolchains;

/* Start-up: makes d->toolchains and probes the toolchain this daemon runs
 * with (core/toolchain.h) into d->tc, its first. 0 or a JC_E* code with the
 * reason in err; either way jc__toolchains_free follows. */
int jc__toolchains_probe(struct jc_daemon *d, char *err, size_t errlen);
/* Start-up, the cache open: reads the toolchain identity the cache recorded
 * (the last daemon's) into d->cache_identity and records d->tc's in its
 * place (a different one: the daemon starts a re-warm once it serves). */
void jc__toolchains_record_identity(struct jc_daemon *d);
/* Probes the toolchain on disk (a fresh `jitcache-worker --identity`, in the
 * thread pool) and, when it differs from d->tc, switches to it: new keys,
 * new workers, a re-warm. why (borrowed, for the log) says who asks; one
 * probe at a time (a second ask while one runs is answered by it). SIGHUP,
 * and the request path's d->request.hooks.toolchain_recheck. */
void jc__toolchains_recheck(struct jc_daemon *d, const char *why);
/* At exit: frees d->toolchains and every toolchain the daemon had (d->tc
 * among them; d->tc and d->cache_identity become NULL). NULL-safe. */
void jc__toolchains_free(struct jc_daemon *d);

#endif
