/* SPDX-License-Identifier: MIT */
/*
 * The remote tier's backends: the one interface every kind of shared
 * storage implements (docs/ARCHITECTURE.md, "Tiers").
 *
 * The remote tier (remote.h) is an ordered list of backends behind the
 * local store. What every backend shares lives in the stack (remote.c and
 * the files of remote_internal.h) and is written
 * once: the value format (self-describing, HMAC-signed: remote_value.c),
 * decoding and checking what was fetched in the thread pool, encoding a
 * publish, the fleet single flight's sequence (look, take the lock or wait
 * for its holder while polling, look again), the up / degraded / down state
 * with its probes and back-off, the renewal of held locks, the counters,
 * latency and stats keys (remote_*). A backend only moves bytes: it gets,
 * puts and locks by cache key, and probes.
 *
 * Values and dependency records are opaque bytes to a backend, and every
 * byte a backend returns is untrusted: the stack verifies it before use.
 *
 * Adding a backend: a file implementing struct jc_remote_backend, its entry
 * in remote_tier.c's table of backends (with its extern declaration there), its source in
 * daemon/meson.build, its URL form in the help text of the "remote" setting (settings.c) and its
 * tests.
 *
 * Threads: every operation is called on the loop thread and calls back on
 * it; a backend may do blocking work in the libuv thread pool.
 */
#ifndef JC_REMOTE_BACKEND_H
#define JC_REMOTE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/remote.h"

/* What is stored under a 16-byte key: a cache key's value, or a lookup
 * key's dependency record (remote.h). */
enum jc_rb_kind { JC_RB_VALUE = 0, JC_RB_RECORD = 1 };

/*
 * The end of an asynchronous operation, on the loop thread, exactly once.
 * rc:
 *   0            done (get: val holds len bytes, malloc'd, moved to the
 *                callee; lock: taken, or, read-only, nobody holds it);
 *   JC_ENOTFOUND get: nothing stored under the key;
 *   JC_EBUSY     lock: a peer holds it;
 *   JC_ECORRUPT  get: what is stored there cannot be a value (not a
 *                regular file, larger than --remote-max-object): counted
 *                and logged as a rejected value;
 *   JC_EIO       no answer (timeout, lost connection, protocol garbage, an
 *                unreadable share, closing): a transport failure, which
 *                moves the tier towards down;
 *   JC_EDENIED   the storage answered and refused (a Redis error reply:
 *                OOM, NOAUTH, READONLY; a share refusing a write: EACCES,
 *                EROFS, ENOSPC): counted, the tier stays up.
 * why: what failed (borrowed for the call), "" on success.
 */
typedef void (*jc_rb_cb)(void *arg, int rc, uint8_t *val, size_t len, const char *why);

/* How a backend reports a transport failure of an operation that has no
 * callback (unlock, renew): what (the operation) and why, borrowed. Never
 * called once the backend is closing. */
typedef void (*jc_rb_failed)(void *arg, const char *what, const char *why);

/* What open() gets: all borrowed for the call. */
struct jc_rb_open {
	uv_loop_t *loop;
	const char *url;		    /* this backend's URL (check() accepted it) */
	const struct jc_remote_config *cfg; /* the tier's settings */
	const char *lock_id;		    /* host:pid:random: this daemon's lock owner name */
	jc_rb_failed failed;
	void *failed_arg;
};

/* A backend's description for stats and doctor. */
struct jc_rb_info {
	int read_only; /* never writes: --remote-read-only, or the URL says so */
	int masters;   /* servers holding data (Redis Cluster masters); 1 otherwise */
};

/*
 * The operations of a backend. The functions that start an operation
 * return 0 when started (cb is then called exactly once, later), or a
 * JC_E code without calling cb (JC_ENOMEM, JC_EBUSY: closing).
 */
struct jc_remote_backend {
	const char *name; /* for logs: "redis", "file" */
	/* 1 when url has this backend's scheme, else 0. */
	int (*claims)(const char *url);
	/* Checks url (claimed) completely, so that a bad one is refused at
	 * start-up and by SIGHUP: 0 or JC_EINVAL with the reason in err. */
	int (*check)(const char *url, char *err, size_t errlen);
	/* Opens the backend of o->url; connects lazily (start-up needs no
	 * server). *out owned by the caller (close). 0, JC_EINVAL (err says
	 * why, never with a password or a secret), JC_ENOMEM. */
	int (*open)(const struct jc_rb_open *o, void **out, char *err, size_t errlen);
	/* Fetches what is stored under kind and key (16 bytes, copied). */
	int (*get)(void *b, enum jc_rb_kind kind, const uint8_t key[16], jc_rb_cb cb, void *arg);
	/* Takes the fleet lock of key for this daemon (lock_id) with a lifetime
	 * of its own (renew() extends it); read-only, only asks whether a peer
	 * holds it. */
	int (*lock)(void *b, const uint8_t key[16], jc_rb_cb cb, void *arg);
	/* Extends / releases this daemon's lock of key (only if still ours). */
	void (*renew)(void *b, const uint8_t key[16]);
	void (*unlock)(void *b, const uint8_t key[16]);
	/*
	 * Stores val (len bytes, malloc'd: taken in every case, also when this
	 * returns an error) under kind and key, replacing what was there; no
	 * reader ever sees part of it. unlock: release this daemon's lock of
	 * key once the value is visible. cb's val is NULL.
	 */
	int (*put)(void *b, enum jc_rb_kind kind, const uint8_t key[16], uint8_t *val, size_t len,
		   int unlock, jc_rb_cb cb, void *arg);
	/* Health probe: whether the storage answers (write 0), or accepts a
	 * write (write 1). cb's val is NULL. */
	int (*probe)(void *b, int write, jc_rb_cb cb, void *arg);
	void (*info)(void *b, struct jc_rb_info *out);
	/* Ends every operation still waiting (their callbacks run, now or
	 * later, with JC_EIO) and frees b once nothing refers to it. */
	void (*close)(void *b);
};

/* Helpers for backends (remote_value.c). */

/* Reads a whole small file (at most max bytes, its trailing newlines cut)
 * into *out (malloc'd with one byte to spare, owned by the caller: wipe it
 * with jc__remote_secret_free) and *len; warns when others may read it.
 * 0, or JC_EINVAL with "what path: why" in err. */
int jc__remote_read_small(const char *path, size_t max, uint8_t **out, size_t *len, char *err,
			  size_t errlen, const char *what);
/* Wipes and frees a secret (or password) of len bytes. NULL-safe. */
void jc__remote_secret_free(uint8_t *secret, size_t len);

#endif
