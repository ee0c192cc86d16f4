/* SPDX-License-Identifier: MIT */
/*
 * Eviction: the byte budget (--max-size) and the per-uid shares
 * (--user-max-size), in one module (the model: redis src/evict.c).
 *
 * - Policy (evict_policy.c, in the core library so that jitcachectl's
 *   offline `purge --to-size` runs the same code): least recently used
 *   entries go first, ok or failed, each counted by its charge (index.h:
 *   its object in whole blocks, its log and row). A uid whose charges pass
 *   its share's high-water mark loses its least recently used entries (by
 *   its own access times) down to the share's low-water mark, before the
 *   global budget is looked at; an entry it drops stays while another uid
 *   still uses it (charged to them), and goes with its object when it was
 *   the last user. Then, when the charges of all entries and what the
 *   directory holds besides them (the tier's overhead: index, WAL, reserve,
 *   manifests, directories) pass the budget's high-water mark, entries are
 *   evicted in global LRU order until the sum is down to the low-water
 *   mark. A shared entry is charged in full to each of its users (tier.h):
 *   ARCHITECTURE.md says why.
 * - Scheduling (evict.c, the daemon): one budget job at a time in the libuv
 *   thread pool, under the writer lock, after the pending access times are
 *   written; a request while one runs is run after it. Triggers: an object
 *   stored, every EVICT_EVERY_TICKS ticks, a smaller budget on SIGHUP. The
 *   collector (gc) runs every --gc-interval. What a job did goes to the hook
 *   the daemon gave (counters, the systemd status line), never to main.c.
 */
#ifndef JC_EVICT_H
#define JC_EVICT_H

#include <stdint.h>

#include "core/admin.h"

/* The marks, in percent of a budget or share. */
#define JC_EVICT_HIGH_PCT 100
#define JC_EVICT_LOW_PCT  90

/* JC_DEFAULT_MAX_SIZE and the names the budget and share are recorded
 * under (JC_STORED_MAX_SIZE, JC_STORED_USER_MAX_SIZE): tier.h. */

/* The mark at pct percent of max_size bytes, without overflow. */
uint64_t jc__evict_mark(uint64_t max_size, unsigned pct);

/* --- policy (any thread: the caller holds the writer index) --------------- */

/* Removes least-recently-used entries until their charges are at most
 * target; adds the count to env->evicted. 0 or an index error. */
int jc__evict_to(struct jc_admin_env *env, uint64_t target);

/* Removes uid's least-recently-used entries (its own access order) from
 * its share until its charges are at most target; adds what it dropped to
 * env->user_evicted and the entries that left the cache to env->evicted.
 * 0 or an index error. */
int jc__evict_user_to(struct jc_admin_env *env, uint32_t uid, uint64_t target);

/* The whole policy: every uid over share's high-water mark down to its low
 * one (share 0: none), then the budget max_size likewise. 0 or an error. */
int jc__evict_run(struct jc_admin_env *env, uint64_t max_size, uint64_t share);

/* --- scheduling (daemon, loop thread) -------------------------------------- */

struct jc_daemon;

/* What one budget job did. */
struct jc_evict_report {
	uint64_t evicted;      /* entries that left the cache */
	uint64_t user_evicted; /* entries dropped from a uid's share */
	uint64_t bytes_before, bytes_after, entries_after;
	uint64_t max_size, low_water;
};
typedef void (*jc_evict_hook_fn)(struct jc_daemon *d, const struct jc_evict_report *r);

/* Records the budget and share in the index and sets the hook that hears of
 * every budget job (NULL: none). At start-up, before the loop runs. */
void jc__evict_start(struct jc_daemon *d, jc_evict_hook_fn hook);
/* A new object was stored: checks the budget. */
void jc__evict_stored(struct jc_daemon *d);
/* The loop's periodic tick (once a second): a budget check every few ticks,
 * the collector when --gc-interval has passed. */
void jc__evict_tick(struct jc_daemon *d);
/* SIGHUP changed cfg.max_size or cfg.user_max_size (from the old values):
 * records them, and checks at once when one became smaller. */
void jc__evict_budget_changed(struct jc_daemon *d, uint64_t old_max, uint64_t old_share);

#endif
