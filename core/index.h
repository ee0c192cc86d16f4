/* SPDX-License-Identifier: MIT */
/*
 * The SQLite index: cache key -> entry (object hash and metadata, or a cached
 * compile failure), plus named counters. DIR/index.sqlite, WAL mode,
 * synchronous=NORMAL (objects are fsynced by the store before their row is
 * committed), busy_timeout 5000 ms, schema versioned by PRAGMA user_version
 * and marked with PRAGMA application_id. Writable handles keep up to 64 MiB
 * of pages in memory (SQLite's default is 2 MiB): the key and LRU indexes of
 * a 1M-entry index fit, so puts and touches stay off the disk.
 *
 * A database this code cannot read as its own (a user_version from the
 * future or unknown, another application's file, or a file SQLite reports as
 * corrupt or not a database) is never misread: a writable open renames it
 * (with its -wal file) to index.sqlite.old-<n>, logs a warning and starts a
 * fresh, empty index; the objects it named become orphans for the collector.
 * A read-only open reports JC_EVERSION or JC_ECORRUPT instead. Corruption
 * found later, by a statement, is returned as JC_ECORRUPT.
 *
 * Thread-safety: a struct jc_index is one SQLite connection; use it from one
 * thread at a time (it may move between threads). Distinct handles on the
 * same file may be used at once, from threads or processes (WAL: readers do
 * not block the writer; writers wait up to busy_timeout, then JC_EBUSY).
 *
 * Errors: functions return 0 or a negative JC_E* code. SQLite results are
 * mapped: SQLITE_FULL (or an I/O error with ENOSPC/EDQUOT) -> JC_ENOSPC,
 * SQLITE_BUSY/LOCKED -> JC_EBUSY, SQLITE_CORRUPT/NOTADB -> JC_ECORRUPT,
 * SQLITE_NOMEM -> JC_ENOMEM, anything else -> JC_EIO; the SQLite message is
 * kept for jc__index_errmsg(). "SQLite errors" below means that list.
 */
#ifndef JC_INDEX_H
#define JC_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/entry.h"

struct jc_index;

/*
 * Opens the index at path (borrowed), creating it and its schema when
 * missing (writable opens only). readonly: SQLITE_OPEN_READONLY, no schema
 * change, no move aside. The caller of a writable open must hold the cache
 * directory lock (jc__store_lock), since it may move the file aside.
 * *out: set on success, owned by the caller, freed by jc__index_close().
 * err: a message on failure (may be NULL when errlen is 0).
 * Returns 0, JC_ENOTFOUND (readonly and no file), JC_EVERSION (readonly and
 * not our current schema), SQLite errors (JC_ECORRUPT: readonly and corrupt,
 * or still unreadable after moving aside), JC_ENOMEM, JC_EINVAL.
 */
int jc__index_open(const char *path, int readonly, struct jc_index **out, char *err, size_t errlen);

/* Finalises the statements and closes the connection. NULL-safe. */
void jc__index_close(struct jc_index *ix);

/*
 * The write-ahead log's size for a cache budget of max_size bytes: pages
 * (4 KiB) written before a checkpoint, and the size the WAL is cut back to
 * after one: a sixteenth of the budget, 16 to 1000 pages (SQLite's default).
 */
int jc__index_wal_pages(uint64_t max_size);
/* Applies jc__index_wal_pages(max_size) to ix (writable), and keeps that
 * much room allocated for the WAL when ix is closed (index.c: a full disk);
 * a WAL longer than that now is checkpointed and emptied at once, its room
 * kept (best effort: a reader of an older snapshot is waited for up to the
 * busy timeout). 0 or SQLite errors. */
int jc__index_set_budget(struct jc_index *ix, uint64_t max_size);

/* The message of the last failure on ix ("" if none); owned by ix, valid
 * until the next call on it. */
const char *jc__index_errmsg(struct jc_index *ix);

/*
 * Point lookup by key (one prepared statement). *out is overwritten (not
 * cleared first: pass a zeroed or cleared entry) and owned by the caller, to
 * be freed by jc__entry_clear(). Does not update access time or hits
 * (jc__index_touch does, batched). Returns 0, JC_ENOTFOUND, JC_ECORRUPT (also
 * for an undecodable lowered-name blob), SQLite errors, JC_ENOMEM.
 */
int jc__index_get(struct jc_index *ix, const uint8_t key[16], struct jc_entry *out);

/*
 * Inserts e (borrowed) or replaces the entry with the same key, every field
 * as given (object is stored as NULL for failures), in one statement and so
 * one transaction. Returns 0, JC_EINVAL (status not 0/1), SQLite errors,
 * JC_ENOMEM.
 */
int jc__index_put(struct jc_index *ix, const struct jc_entry *e);

/*
 * Puts the n entries of e (borrowed array; may be NULL when n is 0) as
 * jc__index_put() does, all in one transaction: all or nothing. A bulk path
 * for tools that fill an index (jitcache-bench's scale runs); the daemon
 * puts one entry at a time.
 * Returns 0 (also for n == 0), JC_EINVAL (a status not 0/1: nothing is
 * stored), SQLite errors, JC_ENOMEM.
 */
int jc__index_put_many(struct jc_index *ix, const struct jc_entry *e, size_t n);

/* Deletes the entry of key. Returns 0, JC_ENOTFOUND, SQLite errors. */
int jc__index_delete(struct jc_index *ix, const uint8_t key[16]);

/*
 * One transaction over n keys (borrowed arrays of n): hits += hits[i] and
 * last_access = now (unix seconds). Keys no longer present are skipped (the
 * entry may have been evicted meanwhile). hits may be NULL for "0 each".
 * uids (NULL: none) records uids[i] as a user of keys[i] (jc__index_put_user),
 * with the same hits and access time on its own users row.
 * All or nothing: on error nothing is applied. Returns 0 or SQLite errors.
 */
int jc__index_touch(struct jc_index *ix, const uint8_t (*keys)[16], const uint32_t *hits,
		    const uint32_t *uids, size_t n, int64_t now);

/*
 * Who used an entry. Every entry has a users row for each uid that requested
 * it or was served it, holding that uid's own created (first use),
 * last_access and hits; a row of entries takes its users rows with it. A
 * uid's totals count each entry it uses in full (a shared entry in each of
 * its users' totals). An index of schema 1 is upgraded by a writable open,
 * its entries attributed to the owner of the index file.
 */

/* jc__index_put(e), and uid as a user of it (first use e->last_access), in
 * one transaction. Returns as jc__index_put. */
int jc__index_put_user(struct jc_index *ix, const struct jc_entry *e, uint32_t uid);

/*
 * jc__index_get for one uid: the entry only when uid is among its users,
 * with that uid's created, last_access and hits. A key uid never used and a
 * key nobody has take the same work (one failed lookup of the users row)
 * and give the same JC_ENOTFOUND. Otherwise as jc__index_get.
 */
int jc__index_get_user(struct jc_index *ix, const uint8_t key[16], uint32_t uid,
		       struct jc_entry *out);

/* Removes uid from key's users (nothing when it was not one); *left: how
 * many users the entry has now. The entry itself stays: the caller removes
 * it when none is left. Returns 0 or SQLite errors. */
int jc__index_unuse(struct jc_index *ix, const uint8_t key[16], uint32_t uid, uint64_t *left);

/* The users of key in uid order: up to *n into uids (NULL: count only);
 * *n becomes how many there are. Returns 0 or SQLite errors. */
int jc__index_users_of(struct jc_index *ix, const uint8_t key[16], uint32_t *uids, uint64_t *n);

/* The keys that begin with the hex digits of hex (1 to 32, either case), in
 * key order: up to *n into keys, *n becoming how many were written. uid >= 0:
 * only keys that uid uses (so another user's key is never found); -1: all.
 * Returns 0, JC_EINVAL (not 1-32 hex digits) or SQLite errors. */
int jc__index_keys_with_prefix(struct jc_index *ix, const char *hex, int64_t uid,
			       uint8_t (*keys)[16], size_t *n);

/* uid's totals into *t (zeros for a uid that uses nothing). O(1).
 * Returns 0 or SQLite errors. */
int jc__index_user_totals(struct jc_index *ix, uint32_t uid, struct jc_user_totals *t);

/* Calls cb for each uid that uses an entry, in uid order (t borrowed for
 * the call). cb must not change the index; a non-zero return stops the walk
 * and is returned. Otherwise 0 or SQLite errors. */
int jc__index_foreach_user_totals(struct jc_index *ix,
				  int (*cb)(const struct jc_user_totals *t, void *ctx), void *ctx);

/*
 * Calls cb for each entry matching f (NULL = all) in LRU order: last_access
 * ascending, then key (with f->by_uid: that uid's last_access). The entry passed to cb is borrowed
 * for the call (copy what you keep). cb may delete, put or touch through the same handle (rows
 * changed during the walk may or may not be visited). The SQL is prepared
 * per call (an admin and eviction path, not the hit path); it uses the LRU
 * index, or the key's. A non-zero return from cb stops the walk and is
 * returned. Otherwise returns 0, JC_EINVAL (bad status), JC_ECORRUPT, SQLite
 * errors, JC_ENOMEM.
 */
int jc__index_foreach(struct jc_index *ix, const struct jc_filter *f,
		      int (*cb)(const struct jc_entry *e, void *ctx), void *ctx);

/*
 * Entries, failed entries and bytes of ok entries (sum of size) and of kept
 * requests (each once: the byte budget's count). O(1): kept
 * in a one-row table by triggers, so fit for every stats call at 1M entries.
 * Any out pointer may be NULL. Returns 0 or SQLite errors.
 */
int jc__index_totals(struct jc_index *ix, uint64_t *entries, uint64_t *negative_entries,
		     uint64_t *bytes);

/* The charges (jc_entry) of every entry, ok or failed, into *stored: what
 * the budget counts of the entries. O(1), as jc__index_totals. 0 or SQLite
 * errors. */
int jc__index_stored(struct jc_index *ix, uint64_t *stored);

/* Gives the pages removals freed back to the file system (auto_vacuum
 * incremental: schema 3 and later), and checkpoints the WAL so that the
 * file shrinks now (as far as no reader holds older pages). 0 or SQLite
 * errors. */
int jc__index_reclaim(struct jc_index *ix);

/* How many entries name object (index lookup) into *n. 0 or SQLite errors. */
int jc__index_object_refs(struct jc_index *ix, const uint8_t object[16], uint64_t *n);

/*
 * Calls cb(name, value, ctx) for each stored counter, in name order; name is
 * borrowed for the call. A non-zero return from cb stops and is returned.
 * Otherwise 0 or SQLite errors.
 */
int jc__index_counters_load(struct jc_index *ix,
			    int (*cb)(const char *name, uint64_t value, void *ctx), void *ctx);

/*
 * Stores n counters (names and values borrowed, n each), inserting or
 * replacing each, in one transaction. Returns 0 or SQLite errors.
 */
int jc__index_counters_save(struct jc_index *ix, const char *const *names, const uint64_t *values,
			    size_t n);

/*
 * Keeps data (len bytes, borrowed; hash: its content hash) as a request
 * made for uid, unless an equal one is kept (then shares it), and makes
 * the entry key name it unless it names one already (the first stays), in
 * one transaction; a request no entry names is not left behind (the entry
 * is gone). Returns 0, SQLite errors, JC_ENOMEM.
 */
int jc__index_keep_request(struct jc_index *ix, const uint8_t key[16], uint32_t hash, uint32_t uid,
			   const void *data, size_t len);
/* The request entry key names into *out (key, id, size, uid). 0,
 * JC_ENOTFOUND (no entry, or none kept), SQLite errors. */
int jc__index_get_request(struct jc_index *ix, const uint8_t key[16], struct jc_kept *out);
/* The bytes of request id: *data malloc'd (caller frees), *len. 0,
 * JC_ENOTFOUND, JC_ENOMEM, SQLite errors. */
int jc__index_request_data(struct jc_index *ix, int64_t id, uint8_t **data, size_t *len);
/* Distinct kept requests, and their bytes. O(1). 0 or SQLite errors. */
int jc__index_request_totals(struct jc_index *ix, uint64_t *requests, uint64_t *bytes);

/* Calls cb for the kept requests f selects, most valuable first: hits + 1
 * over 1 + days since the last use, then key. cb's non-zero return stops
 * the walk and is returned; cb must not change the index. Otherwise 0,
 * JC_ECORRUPT, SQLite errors. */
int jc__index_foreach_request(struct jc_index *ix, const struct jc_kept_filter *f,
			      int (*cb)(const struct jc_kept *k, void *ctx), void *ctx);

/* Named strings of the cache (meta table): the value of name into out
 * (cap bytes, cut), or JC_ENOTFOUND; set inserts or replaces. 0 or SQLite
 * errors. */
#define JC_META_IDENTITY "toolchain_identity"

/* How many entries were made with toolchain identity versions (a scan of
 * the entries: for doctor, not a hot path). 0 or SQLite errors. */
int jc__index_count_versions(struct jc_index *ix, const char *versions, uint64_t *n);
int jc__index_meta_get(struct jc_index *ix, const char *name, char *out, size_t cap);
int jc__index_meta_set(struct jc_index *ix, const char *name, const char *value);

#endif
