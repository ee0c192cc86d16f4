/* SPDX-License-Identifier: MIT */
/*
 * Storage tiers and the one way to open a cache directory.
 *
 * jc__cachedir_open() is the only code that opens DIR: it takes the lock,
 * opens the store and the index, loads the counters and the budget the last
 * daemon recorded. jitcached, jitcachectl's offline commands, jitcache-bench
 * and jitcachectl doctor all go through it (docs/ARCHITECTURE.md, "Tiers").
 *
 * struct jc_tier_ops is the table of operations on stored entries: lookup,
 * open and verify an object, publish, remove, iterate, collect, health. The
 * local store + index is its implementation (jc__local_tier, tier.c), and
 * the rules between an index row and its object live there and nowhere else:
 *
 *   - publish: the object is written (fsync, rename, fsync) before its row is
 *     committed; an object that a removal took between the two is written
 *     again, so a row never names a missing object;
 *   - remove: the row goes first, then its object, and only when no other
 *     row names it (CAS objects are shared);
 *   - a bad object is quarantined and its row dropped only while the row
 *     still names it (a newer row is never touched);
 *   - collect: an object no row names is unlinked only once it is older than
 *     JC_GC_GRACE_S (a publish may be between its rename and its commit).
 *
 * The remote tiers have another shape: asynchronous on the loop thread,
 * fetch-and-verify lookups, write-back publishes, a fleet lock, no removal
 * (values expire or are trimmed by the storage) and no iteration. They are
 * the rest of the tier stack, after this one: an ordered list (one per
 * --remote URL) behind one handle (daemon/remote.h), each a backend of
 * their own operations table (struct jc_remote_backend,
 * daemon/remote_backend.h: Redis, a shared directory), asked by the flight
 * module only on a local miss (flight.c); their health is reported beside
 * the local tier's in stats.
 */
#ifndef JC_TIER_H
#define JC_TIER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/counters.h"
#include "core/index.h"
#include "core/store.h"

/* The default byte budget of the cache directory (--max-size, evict.h),
 * for the daemon and for offline commands on a directory no daemon
 * recorded a budget in: a --max-size value (jc__parse_size). */
#define JC_DEFAULT_MAX_SIZE "10G"

/* The daemon records its --max-size and --user-max-size in the index's
 * counters table under these names (at start-up and on SIGHUP), so that
 * offline commands know them (jc__cachedir_open loads them). */
#define JC_STORED_MAX_SIZE "max_size"
#define JC_STORED_USER_MAX_SIZE "user_max_size"

/* Orphaned objects younger than this are left alone by collect: a publish
 * may be between its rename and its index commit. */
#define JC_GC_GRACE_S 600

/* jc__cachedir_open() flags. */
enum {
	/* A second, read-only index connection for the daemon's loop thread
	 * (rix): its lookups never wait for the writer (SQLite WAL). */
	JC_CACHEDIR_READER = 1 << 0,
	/* Look without changing anything (doctor): no lock, no store opened
	 * (no directory made, tmp/ left alone), the index opened read-only;
	 * JC_ENOTFOUND when there is no index. Only lookup, foreach and
	 * health may be used. */
	JC_CACHEDIR_INSPECT = 1 << 1,
};

struct jc_tier_ops;

/*
 * An open cache directory: everything in it is owned and freed by
 * jc__cachedir_close(). Fields are read-only for users.
 *
 * Threads: store functions are thread-safe; wix is the writer, used by one
 * thread at a time under wlock (in the daemon: the thread pool); rix is the
 * loop thread's; counters are changed on the loop thread only.
 */
struct jc_cachedir {
	const struct jc_tier_ops *ops; /* &jc__local_tier */
	char *dir;                     /* as given */
	int lock_fd;                   /* DIR/lock, held; -1 with INSPECT */
	struct jc_store *store;        /* NULL with INSPECT */
	struct jc_index *wix;          /* the writer (read-only with INSPECT) */
	struct jc_index *rix;          /* the loop's reader; NULL without READER */
	pthread_mutex_t wlock;         /* held around every use of wix from threads */
	struct jc_counters counters;   /* as stored; written back by jc__cachedir_close when dirty */
	uint64_t max_size;             /* the budget the last daemon recorded, else JC_DEFAULT_MAX_SIZE */
	uint64_t user_max_size;        /* the per-uid share it recorded, else 0 (none) */
	uint64_t dev, ino;             /* the identity of dir (st_dev, st_ino) */
};

/*
 * Opens the cache directory dir (borrowed, copied). Without INSPECT: takes
 * DIR/lock (jc__store_lock: wait_ms as there; the directory is made when
 * missing), opens the store (its checks of owner and mode, tmp/ emptied)
 * and the index (made when missing; with READER also a reader connection),
 * loads the counters and the recorded budget. With INSPECT: see above.
 * *out owned by the caller (jc__cachedir_close). Returns 0, or the first
 * failure's code with its message in err: JC_ELOCKED (held: "held by pid
 * N"), JC_EDENIED (owner or mode, store.h), JC_EINVAL (a network file
 * system), JC_ENOTFOUND (INSPECT and no index), JC_EVERSION, JC_EIO,
 * JC_ENOMEM, SQLite errors. Nothing is left open on failure.
 */
int jc__cachedir_open(const char *dir, unsigned flags, int wait_ms, struct jc_cachedir **out,
		      char *err, size_t errlen);

/* Another read-only connection to c's index (for a thread of its own:
 * SQLite WAL readers never wait for the writer); *out owned by the caller
 * (jc__index_close). 0 or jc__index_open's errors, with the reason in err. */
int jc__cachedir_open_reader(struct jc_cachedir *c, struct jc_index **out, char *err, size_t errlen);

/* Writes the counters back when dirty (not with INSPECT), closes the index
 * connections and the store, releases the lock, frees c. NULL-safe. */
void jc__cachedir_close(struct jc_cachedir *c);

/*
 * Whether DIR/lock is still the file c holds locked: when it was removed or
 * replaced (which would let a second daemon in), a fresh one is locked if
 * nobody else has (logged as a warning). Returns 0 (ours, or relocked), or
 * the code of jc__store_lock with "DIR/lock was replaced and ..." in err:
 * the caller must stop. Not with INSPECT.
 */
int jc__cachedir_lock_check(struct jc_cachedir *c, char *err, size_t errlen);

/*
 * Sizes what the cache keeps besides its entries to a budget of max_size
 * bytes, all of which counts in it: DIR/reserve (a sixteenth of the budget,
 * JC_STORE_FULL_BYTES to JC_STORE_RESERVE_BYTES) and the write-ahead log
 * (jc__index_wal_pages). jc__cachedir_open applies the recorded budget;
 * the daemon its own at start and on SIGHUP. Caller holds wlock. Not with
 * INSPECT.
 */
void jc__cachedir_apply_budget(struct jc_cachedir *c, uint64_t max_size);

/* Writes the counters now (the daemon's flush does, in the thread pool);
 * caller holds wlock. Counters stay as they are. 0 or an index error. */
int jc__cachedir_save_counters(struct jc_cachedir *c, const uint64_t v[JC_CTR__COUNT]);

/* What health() reports. */
struct jc_tier_health {
	uint64_t entries, negative_entries; /* rows */
	uint64_t bytes;                     /* of ok entries' artifacts */
};

/*
 * The operations on one tier's entries. Every function returns 0 or a
 * negative JC_E* code; entries passed in are borrowed for the call.
 */
struct jc_tier_ops {
	const char *name;
	/* The row of key into *out (cleared first; owned by the caller:
	 * jc__entry_clear). Through rix when there is one (loop thread), else
	 * wix (caller holds wlock). 0, JC_ENOTFOUND, index errors. */
	int (*lookup)(struct jc_cachedir *c, const uint8_t key[16], struct jc_entry *out);
	/* A descriptor of e's object, checked cheaply (owner, type, mode, size:
	 * store.h), for serving; owned by the caller. 0, JC_ENOTFOUND,
	 * JC_ECORRUPT, JC_EIO. Any thread. */
	int (*open_object)(struct jc_cachedir *c, const struct jc_entry *e, int *fd);
	/* 1 when e's object is still the file st describes (a descriptor from
	 * open_object, earlier: same inode, not a link) and passes open_object's
	 * checks (owner, type, mode, size), else 0. Any thread. */
	int (*object_is)(struct jc_cachedir *c, const struct jc_entry *e, const struct stat *st);
	/* Reads every byte of e's object and checks its size and hash. 0,
	 * JC_ENOTFOUND, JC_ECORRUPT, JC_EIO, JC_ENOMEM. Any thread. */
	int (*verify)(struct jc_cachedir *c, const struct jc_entry *e);
	/* Whether the row of key, read afresh (rix, else wix), still names
	 * object: 1 or 0. Loop thread (or under wlock without rix). */
	int (*row_names)(struct jc_cachedir *c, const uint8_t key[16], const uint8_t object[16]);
	/* Stores e: for an ok entry its object first (size bytes at data;
	 * e->object set to their hash), then the row, with uid as a user of it
	 * (index.h, jc__index_put_user). Takes wlock itself. 0, JC_ENOSPC,
	 * JC_EIO (err says what failed), index errors. */
	int (*publish)(struct jc_cachedir *c, struct jc_entry *e, uint32_t uid, const void *data,
		       size_t size, char *err, size_t errlen);
	/* Quarantines object (moved to quarantine/) as having failed a check;
	 * its row, if any, is left (drop_row). Any thread. */
	int (*quarantine)(struct jc_cachedir *c, const uint8_t object[16]);
	/* Deletes the row of key if it still names the ok object object (a
	 * newer row is left alone). Takes wlock itself. */
	int (*drop_row)(struct jc_cachedir *c, const uint8_t key[16], const uint8_t object[16]);
	/* Removes e: its row, then its object when no row names it; on a full
	 * disk the reserve is released and the removal retried. A row already
	 * gone is 0. Caller holds wlock. */
	int (*remove)(struct jc_cachedir *c, const struct jc_entry *e);
	/* A full disk with no reserve left, where even deleting rows finds no
	 * room: unlinks e's (ok) object ahead of its row when no other row
	 * names it, the one exception to "row first" (the caller removes the
	 * row next; a row left naming a missing object, should that fail or
	 * crash, is a miss that drops it). 1 when an object went, else 0.
	 * Caller holds wlock. */
	int (*unlink_ahead)(struct jc_cachedir *c, const struct jc_entry *e);
	/* Removes e's row and quarantines its object (it failed verify). Caller
	 * holds wlock. */
	int (*remove_bad)(struct jc_cachedir *c, const struct jc_entry *e);
	/* Calls cb for each row matching f, in LRU order (index.h,
	 * jc__index_foreach); cb's non-zero return stops and is returned.
	 * Caller holds wlock. */
	int (*foreach)(struct jc_cachedir *c, const struct jc_filter *f,
		       int (*cb)(const struct jc_entry *e, void *ctx), void *ctx);
	/* Calls cb for each kept request f selects (index.h,
	 * jc__index_foreach_request). Caller holds wlock. */
	int (*foreach_request)(struct jc_cachedir *c, const struct jc_kept_filter *f,
			       int (*cb)(const struct jc_kept *k, void *ctx), void *ctx);
	/* Unlinks the objects no row names that are older than JC_GC_GRACE_S
	 * at now (unix seconds), and stray files in objects/ as old; calls cb
	 * for each (path and size borrowed; a non-zero return stops). Caller
	 * holds wlock. */
	int (*collect)(struct jc_cachedir *c, int64_t now,
		       int (*cb)(const char *path, uint64_t size, void *ctx), void *ctx);
	/* Totals of the tier into *out. Caller holds wlock (or INSPECT). */
	int (*health)(struct jc_cachedir *c, struct jc_tier_health *out);
};

/* The local store + index (tier.c). */
extern const struct jc_tier_ops jc__local_tier;

#endif
