/* SPDX-License-Identifier: MIT */
/*
 * Admin commands (stats, ls, show, purge, verify, gc, ping, version) over a
 * store and an index. The daemon runs them in its thread pool; jitcachectl
 * runs the same code on the directory when no daemon runs (holding
 * DIR/lock), so both paths give the same answers.
 *
 * Requests are a command word plus "name" or "name=value" arguments (see
 * proto/PROTOCOL.md); replies are records of named int/string fields.
 * Not thread-safe: one call at a time per env (the daemon holds its writer
 * lock around it).
 */
#ifndef JC_ADMIN_H
#define JC_ADMIN_H

#include <stdint.h>

#include "counters.h"
#include "index.h"
#include "proto.h"
#include "store.h"
#include "tier.h"
#include "toolchain.h"

/*
 * The daemon's byte budget (daemon/evict.c): once the bytes of ok entries
 * pass the high-water mark, least-recently-used entries (by the access times
 * in the index) are evicted in the background until they are at most the
 * low-water mark. Percentages of --max-size.
 */
#define JC_EVICT_HIGH_PCT 100
#define JC_EVICT_LOW_PCT 90

struct jc_admin_env {
	/* in (borrowed) */
	struct jc_cachedir *cd;            /* the cache directory: its local tier (tier.h) */
	const struct jc_toolchain *tc;
	uint64_t counters[JC_CTR__COUNT]; /* the daemon's, or the stored ones offline */
	int64_t uptime_s;                 /* -1 offline */
	uint64_t max_size;                /* byte budget */
	int64_t daemon_pid;               /* 0 offline */
	const char *socket_path;
	const char *confinement;          /* the workers' (worker_fs.h names); NULL offline */
	/* Server-side hit latency since the start or `stats --zero` (0 offline). */
	uint64_t hit_samples, hit_sum_ns, hit_p50_ns, hit_p99_ns;
	int64_t hit_latency_since;        /* unix time those count from (0 offline) */
	/* Include tree watches now (watch.h; 0 offline): trees, inotify
	 * watches, and the bytes the daemon holds for them. */
	uint64_t watch_trees, watch_count, watch_bytes;
	/* out: what the caller must apply to its own state */
	int removed;        /* entries were removed: drop in-memory copies */
	uint64_t evicted;   /* entries removed by budget eviction */
	uint64_t corrupt;   /* objects found corrupt and quarantined */
	int zero_counters;  /* `stats zero`: reset counters */
};

/*
 * Runs one command. Always fills out (status 0, or a JC_E code and message
 * for unknown commands/arguments and failures). Returns out->status.
 */
int jc__admin_run(struct jc_admin_env *env, const struct jc_admin_req *req,
		  struct jc_admin_reply *out);

/* 1 if the command reveals or changes other users' entries (ls, show, purge,
 * gc, verify, stats zero): limited to root, the daemon's uid and the admin group. */
int jc__admin_is_privileged(const struct jc_admin_req *req);

/* Removes least-recently-used ok entries until the bytes of ok entries are
 * at most target; adds the count to *evicted. Used by the daemon's budget. */
int jc__admin_evict_to(struct jc_admin_env *env, uint64_t target, uint64_t *evicted);

/* The mark at pct percent of max_size bytes, without overflow. */
uint64_t jc__admin_budget_mark(uint64_t max_size, unsigned pct);

#endif
