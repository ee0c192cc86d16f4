/* SPDX-License-Identifier: MIT */
/*
 * The remote tier: second-level caches shared by many machines' daemons
 * (--remote URL, given once per backend). Local first, then each remote
 * backend in the order given: a local miss asks them in turn before
 * compiling; a value found is verified completely and published locally (a
 * remote hit), and written to the backends before the one that had it
 * which write (promotion); a compile's result is published to every
 * backend that writes afterwards, off the hit path. Negative entries stay
 * local.
 *
 * This header is what the daemon calls: one handle for the whole list.
 * Each backend (Redis: remote_redis.c; a shared directory: remote_file.c)
 * implements the operations table of remote_backend.h behind it; what they
 * share (format, checks, single flight, health, counters) is the stack:
 * remote.c and the files remote_internal.h lists.
 * Each stores, for a cache key K, the value of K, the fleet lock of K, and
 * the dependency record of lookup key K, as opaque bytes (the format below).
 *
 * Value (all integers little-endian; remote_value.c):
 *   "JCRV", u32 format version (1), key[16], u32 flags (bit 0: signed),
 *   u32 meta_len, u64 raw_len, u64 zlen, meta (text: arch, source name,
 *   toolchain, writer host, unix time), zstd frame of zlen bytes holding
 *   raw_len bytes (with its XXH64 content checksum): a RESULT frame of the
 *   wire protocol (artifact, object
 *   hash, output kind, lowered names, compile log, compile time), then,
 *   when signed, HMAC-SHA256 (libsodium) of everything before it under the
 *   --remote-secret-file key.
 *
 * Dependency records: a daemon that stored a result under a key learnt from
 * what NVRTC read (docs/ARCHITECTURE.md, "Dependency truth") publishes that
 * include set too, as the record of the request's lookup key L
 * (key.h: the direct key and the include directories), so that a fresh
 * daemon whose scan misses the same probe finds the learnt key at once, as
 * ccache's remote storage keeps manifests beside results. Its layout is a
 * value's with flag bit 1 set, L in place of the key, the meta
 * "key=<32 hex>" naming the learnt key (a hint, read before any check:
 * a fresh daemon fetches that value while it checks the record, verifies
 * it as that key's value, and serves it only when the request's key, from
 * the checked record or the scan, is that key), and the zstd frame holding
 * one manifest variant (manifest.h). A record is a hint, never
 * served: the daemon confines its paths to the request's declared
 * directories (jc__inc_record_admit) and re-checks every entry against its
 * own files (jc__inc_check) before it keys the request with it.
 *
 * Trust: nothing fetched is served before its checks: the value's length,
 * magic, version and every length in it; its key equals the key asked for;
 * the zstd frame decodes to exactly raw_len bytes; the RESULT frame decodes
 * under the protocol's limits, succeeded, names the same key and holds an
 * artifact whose XXH3-128 is its object hash; with a secret, the MAC is
 * present and correct (constant-time compare). A value failing any check is
 * counted (remote_rejected), logged once per key, and the request compiles.
 *
 * Fail open, per backend: (Redis: connect timeout 100 ms, every command at
 * most --remote-timeout-ms). Transport failures (timeouts, lost connections,
 * protocol garbage, an unreadable share) move the backend up -> degraded
 * (1-2 failures in a row) -> down (3); while down, lookups and publishes
 * skip it at once until a probe (Redis: PING, and for a cluster the slot
 * map) succeeds; probes back off from 250 ms to 5 s. Refusals (Redis error
 * replies: OOM under noeviction, NOAUTH, READONLY; a share refusing a write)
 * are counted as remote_errors but do not change the state.
 *
 * Fleet single flight, per backend: a lookup that misses takes the lock of
 * K (Redis: SET NX PX, 10 s), renewed every 3 s while its compile runs; the lookups of
 * other daemons that find it held poll the value (every 25 ms, growing to
 * 200 ms) for as long as the lock is held, at most --remote-lock-wait
 * (10 s; a peer that holds it forever, or compiles longer, costs no more),
 * then compile themselves; they take the lock when it goes without a value
 * (the holder failed or died). Read-only daemons never take locks, but wait
 * the same way while a writer holds one. A lock taken (or found free) is
 * followed by one more get before the backend reports a miss: the holder
 * may have published and released between the first get and the lock (a
 * value found then is served, and the lock released). A miss in one backend
 * asks the next; the request compiles when none has the value.
 *
 * Unsigned values (no --remote-secret-file) can be forged by anyone who can
 * write to the storage: the tier starts without a secret only with
 * --remote-unsigned, and says so in its start-up line, stats
 * (remote_unsigned) and doctor.
 *
 * Loop thread only (decoding and encoding run in the libuv thread pool).
 */
#ifndef JC_REMOTE_H
#define JC_REMOTE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/inc_set.h"
#include "common/req.h"
#include "core/counters.h"
#include "core/latency.h"

/* Settings (flags and config keys of the same names); each applies to
 * every backend of the list. */
struct jc_remote_config {
	char **urls; /* --remote, in order (several allowed); none: no remote tier */
	size_t n_urls;
	char *secret_file;   /* --remote-secret-file: HMAC key (file bytes, >= 16) */
	char *password_file; /* --remote-password-file: AUTH password (first line) */
	int read_only;	     /* --remote-read-only: never writes */
	int64_t ttl_s;	     /* --remote-ttl: value lifetime, every backend (default 30 d) */
	int timeout_ms;	     /* --remote-timeout-ms: per Redis command (1000); not file:// */
	uint64_t max_object; /* --remote-max-object: largest value (default 64 MiB) */
	int64_t lock_wait_s; /* --remote-lock-wait: longest wait on a peer's fleet lock (10 s) */
	int unsigned_ok;     /* --remote-unsigned: no secret file is wanted */
};

#define JC_REMOTE_CONNECT_MS 100
/* Backends in one list at most. */
#define JC_REMOTE_MAX_TIERS 16

/* Checks a --remote URL completely (its backend's parser): 0, or JC_EINVAL
 * with the reason in err (an unknown scheme, a bad URL). */
int jc__remote_url_check(const char *url, char *err, size_t errlen);
/* Appends a copy of url to c's list: 0 or JC_ENOMEM. */
int jc__remote_config_add_url(struct jc_remote_config *c, const char *url);
/* Empties c's list of URLs. */
void jc__remote_config_clear_urls(struct jc_remote_config *c);
/* Frees what c owns and zeroes it. */
void jc__remote_config_clear(struct jc_remote_config *c);

struct jc_remote;

/*
 * Starts the tier for cfg (borrowed; what it needs is copied; the secret
 * and password files are read here and never logged): one backend per URL,
 * in order. Connects lazily: start-up does not need Redis or the share. ctr: the daemon's
 * persistent counters (counters.h), borrowed until the tier is closed; the tier adds to its
 * remote_* counters on the loop thread. *out owned by the caller
 * (jc__remote_close). Returns 0, JC_EINVAL (bad URL, unreadable or short
 * secret/password file: err says which, without their content; no secret
 * file without cfg->unsigned_ok), JC_ENOMEM.
 */
int jc__remote_new(uv_loop_t *loop, const struct jc_remote_config *cfg, struct jc_counters *ctr,
		   struct jc_remote **out, char *err, size_t errlen);

/*
 * Lookup result, on the loop thread: rc 0 with *res a verified result
 * (status 0, artifact in res->data; moved to the callee, which clears it);
 * else rc JC_ENOTFOUND (a miss: compile; this daemon may now hold the fleet
 * lock, which jc__remote_publish or jc__remote_done releases) or another
 * JC_E code (tier unavailable, value rejected, closing: compile), res empty.
 */
typedef void (*jc_remote_lookup_cb)(void *arg, int rc, struct jc_res *res);

/*
 * Looks key (16 bytes, copied) up. Returns 0 when started: cb is called
 * exactly once, later (before this returns only when the first command
 * cannot be queued for lack of memory); or JC_ECONNECT (the tier is down:
 * skipped at once), JC_EBUSY (closing), JC_ENOMEM, without calling cb.
 */
int jc__remote_lookup(struct jc_remote *r, const uint8_t key[16], jc_remote_lookup_cb cb,
		      void *arg);

/* As jc__remote_lookup, but a miss (JC_ENOTFOUND) takes no fleet lock and
 * is not counted: a name-free request's key without its name, asked before
 * its named key (flight.c). */
int jc__remote_peek(struct jc_remote *r, const uint8_t key[16], jc_remote_lookup_cb cb, void *arg);

/*
 * Publishes a successful result for key (res borrowed: the artifact, object
 * hash, output, lowered names, log and compile time are copied; meta a
 * borrowed text for humans), encoded in the thread pool and written with the
 * TTL; releases this daemon's fleet lock on key. Read-only, down, or over
 * --remote-max-object: nothing is written (the lock is still released).
 */
void jc__remote_publish(struct jc_remote *r, const uint8_t key[16], const struct jc_res *res,
			const char *meta);

/*
 * A fetched dependency record, not yet decoded: its bytes and what decoding
 * them needs (a copy of the secret, the size limit), so that it can be
 * opened in the thread pool whatever becomes of the tier meanwhile (SIGHUP).
 * Owned by whoever holds it: jc__remote_blob_free (NULL-safe; wipes the
 * secret).
 */
struct jc_remote_blob;
void jc__remote_blob_free(struct jc_remote_blob *b);

/*
 * Dependency record fetch (see the top), on the loop thread: rc 0 with *blob
 * (moved to the callee) holding the record's bytes as Redis returned them;
 * JC_ENOTFOUND (none), or another JC_E code (tier unavailable, closing),
 * blob NULL. No fleet lock is taken.
 */
typedef void (*jc_remote_record_cb)(void *arg, int rc, struct jc_remote_blob *blob);

/* Fetches the record of lookup key lookup (16 bytes, copied). Returns as
 * jc__remote_lookup. */
int jc__remote_record_fetch(struct jc_remote *r, const uint8_t lookup[16], jc_remote_record_cb cb,
			    void *arg);

/*
 * Opens a fetched record of lookup (jc__remote_record_decode with the
 * blob's secret and limit) into *set (owned by the caller; empty on
 * failure), its paths not yet admitted nor checked. Returns 0, JC_ECORRUPT
 * (why says what; report it with jc__remote_record_rejected), JC_ENOMEM.
 * Any thread; b borrowed.
 */
int jc__remote_record_open(const struct jc_remote_blob *b, const uint8_t lookup[16],
			   uint64_t max_entries, struct jc_inc_set *set, char *why, size_t whylen);

/*
 * A value fetched early: the key a record's hint names (jc__remote_blob_hint),
 * looked up while the record is checked. As jc__remote_lookup, but a miss
 * takes no fleet lock and nothing is counted as a hit or miss until the
 * request uses it (jc__remote_prefetch_used). Loop thread.
 */
int jc__remote_prefetch(struct jc_remote *r, const uint8_t key[16], jc_remote_lookup_cb cb,
			void *arg);
/* A prefetched value served: counted as a remote hit that took fetch_ns. */
void jc__remote_prefetch_used(struct jc_remote *r, uint64_t fetch_ns);
/* The hint of a fetched record (jc__remote_record_hint), or 0. */
int jc__remote_blob_hint(const struct jc_remote_blob *b, uint8_t key[16]);

/* A record of lookup refused (it does not open, or names what the request
 * does not declare): counted as remote_rejected, logged once per lookup
 * key. Loop thread. */
void jc__remote_record_rejected(struct jc_remote *r, const uint8_t lookup[16], const char *why);

/* Publishes the record of lookup, which leads to the learnt key key (16
 * bytes, named in its meta): variant (len bytes, a manifest variant,
 * jc__manifest_variant_encode) is taken (freed by the tier in every case).
 * Encoded (zstd, MAC) in the thread pool and written with the TTL; nothing
 * is written when read-only or down. */
void jc__remote_record_publish(struct jc_remote *r, const uint8_t lookup[16], const uint8_t key[16],
			       uint8_t *variant, size_t len);

/* The flight of key ended without a publish: releases the fleet lock on
 * key if this daemon holds it. */
void jc__remote_done(struct jc_remote *r, const uint8_t key[16]);

/* Health for stats and doctor, of the whole list: the worst backend's
 * state, round trip, write permission and last error (with several
 * backends, prefixed by its URL), and each backend's state. Strings
 * borrowed from r, valid until the next call on r. */
struct jc_remote_health {
	const char *state;    /* "up", "degraded", "down" */
	const char *url;      /* the URLs, space-separated (they carry no password) */
	const char *states;   /* each backend's state, in the same order, space-separated */
	int tiers;	      /* backends in the list */
	int read_only;	      /* every backend is */
	int masters;	      /* servers holding data: Redis Cluster masters, 1 per other backend */
	int64_t probe_rtt_us; /* round trip of the last good probe; -1 none yet */
	int write_ok;	      /* the last probe could write (1), could not (0), -1 unknown */
	const char *last_error;			  /* "" when none */
	uint64_t p50_ns, p99_ns, samples, sum_ns; /* remote hits: fetch + verify */
};
void jc__remote_health(struct jc_remote *r, struct jc_remote_health *h);

struct jc_record;
/* Adds the health to a stats record: remote_state ("off" when r is NULL),
 * remote_url, remote_tiers, remote_tier_states, remote_read_only, remote_masters, remote_p50_us,
 * remote_p99_us, remote_latency_samples, remote_latency_sum_ns, remote_probe_rtt_us,
 * remote_write_ok, remote_last_error. Returns 0 or JC_ENOMEM. */
int jc__remote_stats_add(struct jc_remote *r, struct jc_record *rec);
/* `stats --zero`: forgets the latency samples. NULL-safe. */
void jc__remote_stats_zero(struct jc_remote *r);

/* Fails the lookups still waiting (their callbacks run now with an error),
 * drops what was not yet published, closes connections and timers, and
 * frees r once its handles are closed on the loop. NULL-safe. */
void jc__remote_close(struct jc_remote *r);

/* --- values (remote_value.c): pure functions, any thread --------------- */

/* Limits of a value's parts. */
#define JC_REMOTE_VERSION  1
#define JC_REMOTE_META_MAX 4096

/*
 * Makes the value of key from frame (frame_len bytes, borrowed): a complete
 * RESULT frame (jc__encode_res) of a successful result for key. meta (text,
 * borrowed, cut at JC_REMOTE_META_MAX; NULL = none) is stored as it is.
 * secret (secret_len bytes, NULL = unsigned) signs it. *out: malloc'd,
 * *outlen bytes, owned by the caller. Returns 0, JC_ETOOBIG (over max
 * bytes), JC_ENOMEM.
 */
int jc__remote_value_encode(const uint8_t key[16], const uint8_t *frame, size_t frame_len,
			    const char *meta, const uint8_t *secret, size_t secret_len,
			    uint64_t max, uint8_t **out, size_t *outlen);

/*
 * Checks and decodes a fetched value (borrowed) for key into *res (initialised
 * here; owned by the caller on success, empty on failure). secret NULL: no
 * MAC is asked for (a signed value's MAC is then not checked). Returns 0 or
 * JC_ECORRUPT with the reason in why (whylen bytes).
 */
int jc__remote_value_decode(const uint8_t key[16], const uint8_t *val, size_t len,
			    const uint8_t *secret, size_t secret_len, uint64_t max,
			    struct jc_res *res, char *why, size_t whylen);

/* Whether decoding val (len bytes, borrowed, unchecked) costs at most a
 * few microseconds: it and the object its header declares are under
 * JC_REMOTE_DECODE_INLINE bytes (decoding never makes more than it
 * declares). Such a value is checked on the loop, not in the thread pool,
 * whose hand-off costs more than the check. No allocation; any thread. */
#define JC_REMOTE_DECODE_INLINE (16u << 10)
int jc__remote_value_small(const uint8_t *val, size_t len);

/* A dependency record of lookup from variant (len bytes, borrowed) and meta
 * ("key=<32 hex>": the learnt key it leads to; NULL: none), as
 * jc__remote_value_encode. */
int jc__remote_record_encode(const uint8_t lookup[16], const uint8_t *variant, size_t len,
			     const char *meta, const uint8_t *secret, size_t secret_len,
			     uint64_t max, uint8_t **out, size_t *outlen);

/* The learnt key a fetched record's meta names ("key=<32 hex>"), read from
 * its header without any check: a hint for fetching that value early,
 * never trusted (the record's own check gives the key a request uses).
 * 1 with key set, or 0. No allocation; any thread. */
int jc__remote_record_hint(const uint8_t *val, size_t len, uint8_t key[16]);

/* Checks a fetched record of lookup (the envelope as a value's, then one
 * manifest variant of at most max_entries entries) into *set (owned by the
 * caller; empty on failure). Returns 0, JC_ECORRUPT (why says what), or
 * JC_ENOMEM. */
int jc__remote_record_decode(const uint8_t lookup[16], const uint8_t *val, size_t len,
			     const uint8_t *secret, size_t secret_len, uint64_t max,
			     uint64_t max_entries, struct jc_inc_set *set, char *why,
			     size_t whylen);

#endif
