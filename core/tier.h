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
 * open and verify an object, publish, remove, iterate, collect, health, and
 * the entries' users, kept requests and space. The local store + index is
 * its implementation (jc__local_tier, tier.c), private to it (index.h,
 * store.h: nothing else includes them), and the rules between an index row
 * and its object live there and nowhere else:
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
#include <sys/stat.h>

#include "core/counters.h"
#include "core/entry.h"

/* The default byte budget of the cache directory (--max-size, evict.h),
 * for the daemon and for offline commands on a directory no daemon
 * recorded a budget in: a --max-size value (jc__parse_size). */
#define JC_DEFAULT_MAX_SIZE "10G"

/* The daemon records its --max-size and --user-max-size in the index's
 * counters table under these names (at start-up and on SIGHUP), so that
 * offline commands know them (jc__cachedir_open loads them). */
#define JC_STORED_MAX_SIZE	"max_size"
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
	 * JC_ENOTFOUND when there is no index. Only operations that read
	 * the index may be used (lookup, foreach, health, count_versions). */
	JC_CACHEDIR_INSPECT = 1 << 1,
};

struct jc_tier_ops;
struct jc_local;
/* A connection to the local tier's index: opaque outside the local tier. */
struct jc_index;

/*
 * An open cache directory: everything in it is owned and freed by
 * jc__cachedir_close(). Fields are read-only for users.
 *
 * The store and the index are the local tier's own (local, defined in
 * tier.c): nothing else reaches them, only the operations declared here
 * (the layering test fails on a call into index.h or store.h from outside
 * the local tier's files: docs/ARCHITECTURE.md, "Tiers").
 *
 * Threads: the index writer is used by one thread at a time, under wlock
 * (in the daemon: the thread pool), by every operation documented "caller
 * holds wlock"; the loop thread's lookups go through a reader of their own
 * (JC_CACHEDIR_READER); object operations are thread-safe; counters are
 * changed on the loop thread only.
 */
struct jc_cachedir {
	const struct jc_tier_ops *ops; /* &jc__local_tier */
	char *dir;		       /* as given */
	int lock_fd;		       /* DIR/lock, held; -1 with INSPECT */
	struct jc_local *local;	       /* the store and index: the local tier's alone */
	pthread_mutex_t wlock;	       /* held around every use of the index writer from threads */
	struct jc_counters counters; /* as stored; written back by jc__cachedir_close when dirty */
	uint64_t max_size;	/* the budget the last daemon recorded, else JC_DEFAULT_MAX_SIZE */
	uint64_t user_max_size; /* the per-uid share it recorded, else 0 (none) */
	uint64_t dev, ino;	/* the identity of dir (st_dev, st_ino) */
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
 * (jc__reader_close). 0 or the index's open errors (index.h), with the
 * reason in err. */
int jc__cachedir_open_reader(struct jc_cachedir *c, struct jc_index **out, char *err,
			     size_t errlen);

/* The loop thread's reader (JC_CACHEDIR_READER), owned by c; NULL without
 * it. */
struct jc_index *jc__cachedir_reader(struct jc_cachedir *c);

/* The row of key through reader r (the thread of r's owner) into *out
 * (overwritten: pass a zeroed or cleared entry; owned by the caller:
 * jc__entry_clear; cleared on failure). Does not count as a use (touch
 * does). 0, JC_ENOTFOUND, index errors with the message in err (errlen may
 * be 0). */
int jc__reader_get(struct jc_index *r, const uint8_t key[16], struct jc_entry *out, char *err,
		   size_t errlen);

/* Closes a reader of jc__cachedir_open_reader. NULL-safe. */
void jc__reader_close(struct jc_index *r);

/* The message of the last failure of the index writer ("" if none): owned
 * by c, valid until the next call that uses the writer; caller holds wlock
 * (or is c's only thread). */
const char *jc__cachedir_errmsg(struct jc_cachedir *c);

/* The filesystem check of opening a cache directory alone, for diagnostics
 * (doctor): 0 when dir (borrowed) is on a local filesystem, JC_EINVAL with
 * the filesystem named in err when on a network one, JC_EIO when dir cannot
 * be opened (store.h, jc__store_check_local). Needs no open directory. */
int jc__cachedir_check_local(const char *dir, char *err, size_t errlen);

/* Checks that DIR/tmp is there and the store's (made again when a cleaner
 * removed it), for a tool given that path (fatbinary's TMPDIR), before it
 * starts. 0, or JC_EIO (logged). Any thread. Not with INSPECT. */
int jc__cachedir_tmp_check(struct jc_cachedir *c);

/* The toolchain identity the cache recorded (a toolchain summary,
 * toolchain.h) into out (cap bytes, cut): 0, JC_ENOTFOUND (none recorded),
 * index errors. set records identity (borrowed) in its place: 0 or index
 * errors. Caller holds wlock. */
int jc__cachedir_identity(struct jc_cachedir *c, char *out, size_t cap);
int jc__cachedir_set_identity(struct jc_cachedir *c, const char *identity);

/* Records the daemon's budget and share (JC_STORED_MAX_SIZE,
 * JC_STORED_USER_MAX_SIZE) for offline commands (a failure is logged), and
 * applies max_size (jc__cachedir_apply_budget) either way. Caller holds
 * wlock. */
void jc__cachedir_record_budget(struct jc_cachedir *c, uint64_t max_size, uint64_t user_max_size);

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
 * (index.h, jc__index_wal_pages). jc__cachedir_open applies the recorded budget;
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
	uint64_t bytes;			    /* of ok entries' artifacts */
	/* What the budget counts of them: the charges (entry.h) of every
	 * entry, ok or failed, and the bytes of the kept requests. */
	uint64_t stored;
	uint64_t requests, request_bytes; /* kept requests (each once) and their bytes */
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
	/* verify's read, kept: every byte of e's object into *data (malloc'd,
	 * e->size bytes, owned by the caller), its size and hash checked. 0 or
	 * verify's errors. Any thread. */
	int (*read_object)(struct jc_cachedir *c, const struct jc_entry *e, uint8_t **data);
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
	/* Totals of the tier into *out, each O(1). Caller holds wlock (or
	 * INSPECT). */
	int (*health)(struct jc_cachedir *c, struct jc_tier_health *out);

	/* Entries as uids use them. Every entry has a use for each uid that
	 * asked for it or was served it, with that uid's own created,
	 * last_access and hits; a uid's totals count each entry it uses in
	 * full. All caller holds wlock (or INSPECT for the reading ones). */

	/* The row of key as uid sees it (uid < 0: any uid; else only an entry
	 * uid uses, with its created, last_access and hits: another's key
	 * answers as a key nobody has), through the writer, into *out (as
	 * lookup). 0, JC_ENOTFOUND, index errors. */
	int (*lookup_for)(struct jc_cachedir *c, const uint8_t key[16], int64_t uid,
			  struct jc_entry *out);
	/* The keys that begin with the hex digits hex (1 to 32, either case)
	 * that uid uses (uid < 0: all), in key order: up to *n into keys, *n
	 * becoming how many were written. 0, JC_EINVAL (not 1-32 hex digits),
	 * index errors. */
	int (*find_keys)(struct jc_cachedir *c, const char *hex, int64_t uid, uint8_t (*keys)[16],
			 size_t *n);
	/* The uids that use key, in uid order: up to *n into uids (NULL: count
	 * only); *n becomes how many there are. 0 or index errors. */
	int (*users_of)(struct jc_cachedir *c, const uint8_t key[16], uint32_t *uids, uint64_t *n);
	/* uid's totals into *t (zeros for a uid that uses nothing). O(1). */
	int (*user_usage)(struct jc_cachedir *c, uint32_t uid, struct jc_user_totals *t);
	/* Calls cb for each uid that uses an entry, in uid order (t borrowed);
	 * cb must not change the tier; its non-zero return stops and is
	 * returned. */
	int (*foreach_user)(struct jc_cachedir *c,
			    int (*cb)(const struct jc_user_totals *t, void *ctx), void *ctx);
	/* Records a batch of hits (borrowed arrays of n, one transaction): for
	 * keys[i], hits += hits[i] (NULL: 0 each), last_access = now (unix
	 * seconds), and uids[i] (NULL: none) as a user, with the same on its
	 * use. Keys no longer present are skipped. All or nothing. */
	int (*touch)(struct jc_cachedir *c, const uint8_t (*keys)[16], const uint32_t *hits,
		     const uint32_t *uids, size_t n, int64_t now);
	/* Removes uid's use of e, and e (as remove) when no other uid uses it;
	 * *gone: 1 when e left the tier. On a full disk the reserve is
	 * released and the removal retried. */
	int (*remove_use)(struct jc_cachedir *c, const struct jc_entry *e, uint32_t uid, int *gone);
	/* After removals: with pages, gives the pages the index freed back to
	 * the file system (a failure is logged); and makes the reserve again
	 * when a full disk took it and there is room (store.h). */
	void (*reclaim)(struct jc_cachedir *c, int pages);
	/* Stores n rows as given (e: borrowed array) without objects, the
	 * objects they name being stored already: for tools that fill a cache
	 * with copies of an entry (jitcache-bench). uid < 0: in one
	 * transaction, nobody a user of them; else one transaction each, uid
	 * a user of each. 0, JC_EINVAL (a bad status: nothing stored), index
	 * errors. */
	int (*put_rows)(struct jc_cachedir *c, const struct jc_entry *e, size_t n, int64_t uid);
	/* How many entries were made by toolchain identity versions (a scan:
	 * for doctor, not a hot path). */
	int (*count_versions)(struct jc_cachedir *c, const char *versions, uint64_t *n);

	/* Kept requests (entry.h, kept.h encodes them). Caller holds wlock. */

	/* Keeps data (len bytes, borrowed; hash: kept.h, jc__kept_hash) as the
	 * request uid made of the entry key, shared with an equal one kept
	 * already; an entry that is gone or names a request already is left
	 * alone. 0, JC_ENOMEM, index errors. */
	int (*keep_request)(struct jc_cachedir *c, const uint8_t key[16], uint32_t hash,
			    uint32_t uid, const void *data, size_t len);
	/* The bytes of kept request id: *data malloc'd (caller frees), *len. 0,
	 * JC_ENOTFOUND, JC_ENOMEM, index errors. */
	int (*request_data)(struct jc_cachedir *c, int64_t id, uint8_t **data, size_t *len);
	/* The kept request of key's entry (its id, maker's uid, size; no
	 * bytes) into *out. 0, JC_ENOTFOUND (none kept), index errors. */
	int (*request_of)(struct jc_cachedir *c, const uint8_t key[16], struct jc_kept *out);

	/* Space. Any thread; not with INSPECT. */

	/* What the directory holds besides the entries' charges (store.h,
	 * jc__store_overhead: index, WAL, reserve, manifests, directories),
	 * counted in the budget beside them. Always 0 (a walk of manifests/,
	 * for the thread pool). */
	int (*overhead)(struct jc_cachedir *c, uint64_t *bytes);
	/* 1 when the file system has too little room to store anything (a full
	 * disk), else 0; *free_bytes (may be NULL): its free bytes, UINT64_MAX
	 * when unknown. */
	int (*disk_full)(struct jc_cachedir *c, uint64_t *free_bytes);
};

/* The local store + index (tier.c). */
extern const struct jc_tier_ops jc__local_tier;

#endif
