/* SPDX-License-Identifier: MIT */
/*
 * The remote tier stack's own parts (remote.h is what the daemon calls):
 * the list of tiers and its handle, shared by the files that make it up.
 *
 *   remote_tier.c     the backends and the URLs they claim (settings), a
 *                     tier's health (up / degraded / down) and the fleet
 *                     locks it holds;
 *   remote_publish.c  publishes: encoding once, a put to every tier that
 *                     writes, and promotions (a value found in a later tier
 *                     written to the earlier ones);
 *   remote_lookup.c   lookups: the tiers asked in order, the fleet single
 *                     flight, decoding and checking what was fetched;
 *   remote.c          the handle: start, probes and the tick, health and
 *                     stats, close.
 *
 * Each file uses only those listed above it (no cycles). Loop thread only,
 * like remote.h.
 */
#ifndef JC_REMOTE_INTERNAL_H
#define JC_REMOTE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/counters.h"
#include "core/latency.h"
#include "daemon/remote.h"
#include "daemon/remote_backend.h"

#define FAILS_DOWN	3 /* transport failures in a row: down */
#define BACKOFF_MIN_MS	250
#define REJECT_LOG_KEYS 1024 /* keys whose rejection was logged (then forgotten) */

struct lookup;

/* One backend of the list, with its health. */
struct tier {
	struct jc_remote *r;
	const struct jc_remote_backend *be;
	void *b; /* the backend's handle */
	char url[1024];
	int read_only;

	int fails; /* transport failures in a row */
	int backoff_ms;
	uint64_t next_probe_ns; /* while down */
	uint64_t last_health_ns;
	int probing;
	int64_t probe_rtt_us;
	int write_ok;
	char last_error[256];

	uint8_t (*held)[16]; /* keys whose fleet lock we hold here */
	size_t n_held, cap_held;
	uint64_t renew_ns;
};

struct jc_remote {
	uv_loop_t *loop;
	struct tier *tiers; /* in the order of the URLs */
	size_t n_tiers;
	uint64_t max_object;
	int64_t lock_wait_ns; /* --remote-lock-wait */
	uint8_t *secret;      /* NULL: values are not signed */
	size_t secret_len;
	char lock_id[128];	 /* host:pid:random, the value of our locks */
	struct jc_counters *ctr; /* the daemon's (borrowed) */
	struct jc_latency latency;
	char urls[4096];		      /* the URLs, for stats (jc__remote_health) */
	char states[JC_REMOTE_MAX_TIERS * 9]; /* each tier's state, likewise */
	char last_error[1400];		      /* the worst tier's, with its URL */
	uint8_t rejected[REJECT_LOG_KEYS][16];
	size_t n_rejected;

	struct lookup *lookups; /* not finished */
	uv_timer_t tick;
	int refs; /* tick handle + lookups + thread-pool jobs + backend operations */
	int closing;
};

static inline void count(struct jc_remote *r, enum jc_counter c, uint64_t n)
{
	jc__count(r->ctr, c, n);
}

static inline uint64_t now_ns(void)
{
	return uv_hrtime();
}

static inline int is_down(const struct tier *t)
{
	return t->fails >= FAILS_DOWN;
}

/* --- remote_tier.c ----------------------------------------------------------- */

/* The backend whose scheme url has, or NULL. */
const struct jc_remote_backend *jc__remote_backend_of(const char *url);

/* Drops a reference to r (struct jc_remote, refs); the last frees it. */
void jc__remote_unref(struct jc_remote *r);

/* A transport failure of t (what failed, and why): counted; the third in a
 * row takes t down until a probe answers. */
void jc__rtier_failed(struct tier *t, const char *what, const char *why);
/* t answered: up again. */
void jc__rtier_answered(struct tier *t);
/* What an operation's rc (remote_backend.h) says about t: answered (0,
 * JC_ENOTFOUND, JC_EBUSY), refused (JC_EDENIED: counted, t stays up), or a
 * transport failure (JC_EIO). */
void jc__rtier_outcome(struct tier *t, const char *what, int rc, const char *why);

/* Remembers that this daemon holds t's fleet lock of key (renewed by the
 * tick until released). */
void jc__rtier_hold(struct tier *t, const uint8_t key[16]);
/* Forgets key's lock; 1 when it was held (the caller releases it). */
int jc__rtier_unhold(struct tier *t, const uint8_t key[16]);
/* Releases t's lock of key when this daemon holds it. */
void jc__rtier_done(struct tier *t, const uint8_t key[16]);

/* --- remote_publish.c -------------------------------------------------------- */

/* Promotion: val (len bytes, taken), a value of key fetched from tier from
 * and verified, is written to every tier before it that writes and is not down,
 * releasing this daemon's fleet lock of key there after the value. */
void jc__remote_promote(struct jc_remote *r, const struct tier *from, const uint8_t key[16],
			uint8_t *val, size_t len);

/* --- remote_lookup.c --------------------------------------------------------- */

/* Ends every lookup not finished (closing): their callbacks run now with
 * JC_EBUSY. */
void jc__remote_lookups_cancel(struct jc_remote *r);

#endif
