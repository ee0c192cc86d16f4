/* SPDX-License-Identifier: MIT */
/*
 * The remote tier stack, lookups: the tiers asked in order until one has
 * the value, the fleet single flight in each (get; on a miss take the lock
 * or wait for its holder; get again), decoding and checking in the thread
 * pool, dependency records. See remote.h and remote_internal.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "daemon/remote_internal.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

#define POLL_MIN_MS 25
#define POLL_MAX_MS 200

struct jc_remote_blob {
	uint8_t *val;
	size_t len;
	uint8_t *secret; /* a copy, or NULL */
	size_t secret_len;
	uint64_t max_object;
};

void jc__remote_blob_free(struct jc_remote_blob *b)
{
	if (!b)
		return;
	jc__remote_secret_free(b->secret, b->secret_len);
	free(b->val);
	free(b);
}

/* A blob of r's holding val (len bytes, taken), or NULL when memory is
 * short (val freed). */
static struct jc_remote_blob *blob_of(const struct jc_remote *r, uint8_t *val, size_t len)
{
	struct jc_remote_blob *b = calloc(1, sizeof(*b));
	if (b && r->secret && !(b->secret = malloc(r->secret_len))) {
		free(b);
		b = NULL;
	}
	if (!b) {
		free(val);
		return NULL;
	}
	b->val = val;
	b->len = len;
	if (r->secret)
		memcpy(b->secret, r->secret, r->secret_len);
	b->secret_len = r->secret_len;
	b->max_object = r->max_object;
	return b;
}

/* --- lookups ------------------------------------------------------------------- */

/* How a lookup treats a value that is not there, and what it counts. */
enum lookup_mode {
	LOOKUP_LOCKED,	 /* a miss takes the fleet lock (or waits for its holder); counted */
	LOOKUP_PEEK,	 /* a miss is only a miss, not counted (jc__remote_peek) */
	LOOKUP_PREFETCH, /* as a peek, and a hit counts only when used (jc__remote_prefetch) */
};

/* A lookup asks the tiers in order until one has the value; each tier's
 * part is: get; on a miss (LOCKED) take its lock or wait for its holder,
 * then get once more. */
struct lookup {
	struct jc_remote *r;
	struct tier *t;		 /* the tier asked now */
	uint8_t key[16];	 /* a cache key, or a lookup key for a record */
	jc_remote_lookup_cb cb;	 /* a value's, or ... */
	jc_remote_record_cb rcb; /* ... a dependency record's (then no lock, no decode) */
	void *arg;
	uv_timer_t timer; /* poll while another daemon compiles */
	uint64_t t0, deadline_ns;
	uint64_t t_got, t_decode, t_decoded; /* value got, decode began, ended (for the log) */
	int poll_ms;
	int refs; /* timer handle + operations + decode job */
	int done;
	int recheck; /* this get follows a lock taken (or nobody holding it) */
	int missed;  /* a tier said the key is not there */
	int mode;    /* enum lookup_mode */
	struct lookup *prev, *next;
	/* decode job */
	uv_work_t work;
	uint8_t *val;
	size_t len;
	struct jc_res res;
	int rc;
	char why[160];
};

static void lookup_unref(struct lookup *l)
{
	if (--l->refs == 0) {
		jc__res_clear(&l->res);
		free(l->val);
		struct jc_remote *r = l->r;
		free(l);
		jc__remote_unref(r);
	}
}

static void lookup_timer_closed_cb(uv_handle_t *h)
{
	lookup_unref(h->data);
}

/* The phases of a lookup that found a value or record (at info; read by
 * jitcache-bench). */
static void log_phases(const struct lookup *l)
{
	char hex[33];
	jc__hex16(l->key, hex);
	if (l->rcb)
		jc_log_info(REMOTE, "lookup key %s: record fetched in %.3f ms", hex,
			    (double)(now_ns() - l->t0) / 1e6);
	else
		jc_log_info(REMOTE,
			    "key %s: value fetched in %.3f ms: GET %.3f, pool wait %.3f, "
			    "decode and checks %.3f",
			    hex, (double)(now_ns() - l->t0) / 1e6, (double)(l->t_got - l->t0) / 1e6,
			    (double)(l->t_decode - l->t_got) / 1e6,
			    (double)(l->t_decoded - l->t_decode) / 1e6);
}

/* Ends l once: the caller's callback (with blob for a record), then l goes
 * when nothing holds it. */
static void lookup_finish(struct lookup *l, int rc, struct jc_remote_blob *blob)
{
	struct jc_remote *r = l->r;
	if (l->done) {
		jc__remote_blob_free(blob);
		return;
	}
	l->done = 1;
	if (l->prev)
		l->prev->next = l->next;
	else
		r->lookups = l->next;
	if (l->next)
		l->next->prev = l->prev;
	if (rc == 0)
		log_phases(l);
	if (l->rcb) {
		l->rcb(l->arg, rc, blob);
	} else {
		if (rc == 0 && l->mode != LOOKUP_PREFETCH) {
			jc__latency_add(&r->latency, now_ns() - l->t0);
			count(r, JC_CTR_remote_hits, 1);
		} else if (rc == JC_ENOTFOUND && l->mode == LOOKUP_LOCKED) {
			count(r, JC_CTR_remote_misses, 1);
		}
		struct jc_res res = l->res;
		jc__res_init(&l->res);
		l->cb(l->arg, rc, &res);
		jc__res_clear(&res);
	}
	uv_timer_stop(&l->timer);
	uv_close((uv_handle_t *)&l->timer, lookup_timer_closed_cb);
}

static void step_get(struct lookup *l);

/* The first tier from t on that is not down, or NULL. */
static struct tier *next_up(struct jc_remote *r, struct tier *t)
{
	for (; t < r->tiers + r->n_tiers; t++)
		if (!is_down(t))
			return t;
	return NULL;
}

/* The current tier could not serve l (rc: a miss, a failure, a rejected
 * value): the next tier is asked, else l ends (a miss when any tier
 * missed: the request compiles, perhaps holding fleet locks). */
static void tier_failed(struct lookup *l, int rc)
{
	if (rc == JC_ENOTFOUND)
		l->missed = 1;
	struct tier *t = l->r->closing ? NULL : next_up(l->r, l->t + 1);
	if (!t) {
		lookup_finish(l, l->missed ? JC_ENOTFOUND : rc, NULL);
		return;
	}
	l->t = t;
	l->recheck = 0;
	l->poll_ms = POLL_MIN_MS;
	l->deadline_ns = now_ns() + (uint64_t)l->r->lock_wait_ns;
	step_get(l);
}

static void decode_work_cb(uv_work_t *w)
{
	struct lookup *l = w->data;
	struct jc_remote *r = l->r;
	l->t_decode = now_ns();
	l->rc = jc__remote_value_decode(l->key, l->val, l->len, r->secret, r->secret_len,
					r->max_object, &l->res, l->why, sizeof(l->why));
	l->t_decoded = now_ns();
}

/* Logs a rejected key once (until REJECT_LOG_KEYS keys have been logged). */
static void log_rejected(struct jc_remote *r, const char *url, const uint8_t key[16], int record,
			 const char *why)
{
	for (size_t i = 0; i < r->n_rejected; i++)
		if (memcmp(r->rejected[i], key, 16) == 0)
			return;
	if (r->n_rejected == REJECT_LOG_KEYS)
		r->n_rejected = 0;
	memcpy(r->rejected[r->n_rejected++], key, 16);
	char hex[33];
	jc__hex16(key, hex);
	if (record)
		jc_log_warn(REMOTE,
			    "lookup key %s: dependency record from %s rejected (%s); keyed "
			    "by the scan",
			    hex, url, why);
	else
		jc_log_warn(REMOTE, "key %s: value from %s rejected (%s); compiling", hex, url,
			    why);
}

static void decode_after_cb(uv_work_t *w, int status)
{
	struct lookup *l = w->data;
	struct jc_remote *r = l->r;
	(void)status;
	if (!l->done && l->rc == 0 && !r->closing && l->t != r->tiers)
		jc__remote_promote(r, l->t, l->key, l->val, l->len); /* verified */
	else
		free(l->val);
	l->val = NULL;
	if (!l->done && l->rc == 0) {
		lookup_finish(l, 0, NULL);
	} else if (!l->done) {
		count(r, JC_CTR_remote_rejected, 1);
		log_rejected(r, l->t->url, l->key, 0, l->why);
		jc__res_clear(&l->res);
		tier_failed(l, l->rc);
	}
	lookup_unref(l);
}

static void poll_cb(uv_timer_t *timer)
{
	struct lookup *l = timer->data;
	if (!l->done)
		step_get(l);
}

static void lock_cb(void *arg, int rc, uint8_t *val, size_t len, const char *why)
{
	struct lookup *l = arg;
	struct tier *t = l->t;
	(void)val;
	(void)len;
	if (l->done || l->r->closing) {
		/* nothing more to do */
	} else if (rc == 0) {
		/* Ours (or, read-only, nobody holds it): compile, then publish or
		 * release. A holder may have published and released it between
		 * our get and now: look once more before compiling. */
		jc__rtier_answered(t);
		if (!t->read_only)
			jc__rtier_hold(t, l->key);
		l->recheck = 1;
		step_get(l);
	} else if (rc == JC_EBUSY && now_ns() < l->deadline_ns) {
		/* Another daemon compiles it: wait for its value. */
		jc__rtier_answered(t);
		uv_timer_start(&l->timer, poll_cb, (uint64_t)l->poll_ms, 0);
		l->poll_ms = l->poll_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : l->poll_ms * 2;
	} else if (rc == JC_EIO) {
		jc__rtier_failed(t, "lock", why);
		tier_failed(l, JC_EIO);
	} else {
		/* Waited long enough, or the lock cannot be taken (OOM): compile. */
		jc__rtier_outcome(t, "lock", rc, why);
		tier_failed(l, JC_ENOTFOUND);
	}
	lookup_unref(l);
}

static void get_cb(void *arg, int rc, uint8_t *val, size_t len, const char *why)
{
	struct lookup *l = arg;
	struct jc_remote *r = l->r;
	struct tier *t = l->t;
	if (l->done || r->closing) {
		free(val);
	} else if (rc == 0 && l->rcb) {
		jc__rtier_answered(t);
		count(r, JC_CTR_remote_bytes_in, len);
		struct jc_remote_blob *blob = blob_of(r, val, len);
		lookup_finish(l, blob ? 0 : JC_ENOMEM, blob);
	} else if (rc == 0) {
		jc__rtier_answered(t);
		if (l->recheck)
			jc__rtier_done(t, l->key); /* published meanwhile: the lock goes */
		count(r, JC_CTR_remote_bytes_in, len);
		l->t_got = now_ns();
		l->val = val;
		l->len = len;
		l->work.data = l;
		l->refs++;
		if (jc__remote_value_small(val, len)) {
			decode_work_cb(&l->work); /* a pool hand-off would cost more */
			decode_after_cb(&l->work, 0);
		} else if (uv_queue_work(r->loop, &l->work, decode_work_cb, decode_after_cb) != 0) {
			l->refs--;
			lookup_finish(l, JC_ENOMEM, NULL);
		}
	} else if (rc == JC_ECORRUPT) {
		jc__rtier_answered(t);
		count(r, JC_CTR_remote_rejected, 1);
		log_rejected(r, t->url, l->key, l->rcb != NULL, why);
		tier_failed(l, rc);
	} else if (rc == JC_ENOTFOUND && (l->rcb || l->recheck || l->mode != LOOKUP_LOCKED)) {
		jc__rtier_answered(t);
		tier_failed(l, JC_ENOTFOUND);
	} else if (rc == JC_ENOTFOUND) {
		jc__rtier_answered(t);
		/* Take the fleet lock; read-only, only see whether someone holds it. */
		l->refs++;
		if (t->be->lock(t->b, l->key, lock_cb, l) != 0) {
			l->refs--;
			tier_failed(l, JC_ENOTFOUND);
		}
	} else {
		if (rc != JC_ENOMEM)
			jc__rtier_outcome(t, "GET", rc == JC_EDENIED ? rc : JC_EIO, why);
		tier_failed(l, JC_EIO);
	}
	lookup_unref(l);
}

static void step_get(struct lookup *l)
{
	struct tier *t = l->t;
	l->refs++;
	if (t->be->get(t->b, l->rcb ? JC_RB_RECORD : JC_RB_VALUE, l->key, get_cb, l) != 0) {
		l->refs--;
		lookup_finish(l, JC_EBUSY, NULL);
	}
}

/* Starts a lookup of a value (cb) or a record (rcb), as mode says. */
static int lookup_start(struct jc_remote *r, const uint8_t key[16], jc_remote_lookup_cb cb,
			jc_remote_record_cb rcb, enum lookup_mode mode, void *arg)
{
	if (r->closing)
		return JC_EBUSY;
	struct tier *t = next_up(r, r->tiers);
	if (!t)
		return JC_ECONNECT;
	struct lookup *l = calloc(1, sizeof(*l));
	if (!l)
		return JC_ENOMEM;
	l->r = r;
	l->t = t;
	memcpy(l->key, key, 16);
	l->cb = cb;
	l->rcb = rcb;
	l->mode = mode;
	l->arg = arg;
	l->t0 = now_ns();
	l->deadline_ns = l->t0 + (uint64_t)r->lock_wait_ns;
	l->poll_ms = POLL_MIN_MS;
	jc__res_init(&l->res);
	uv_timer_init(r->loop, &l->timer);
	l->timer.data = l;
	l->refs = 2; /* the timer handle, and this call until it returns */
	r->refs++;
	l->next = r->lookups;
	if (r->lookups)
		r->lookups->prev = l;
	r->lookups = l;
	step_get(l);
	lookup_unref(l);
	return 0;
}

void jc__remote_lookups_cancel(struct jc_remote *r)
{
	while (r->lookups)
		lookup_finish(r->lookups, JC_EBUSY, NULL);
}

int jc__remote_lookup(struct jc_remote *r, const uint8_t key[16], jc_remote_lookup_cb cb, void *arg)
{
	return lookup_start(r, key, cb, NULL, LOOKUP_LOCKED, arg);
}

int jc__remote_peek(struct jc_remote *r, const uint8_t key[16], jc_remote_lookup_cb cb, void *arg)
{
	return lookup_start(r, key, cb, NULL, LOOKUP_PEEK, arg);
}

int jc__remote_prefetch(struct jc_remote *r, const uint8_t key[16], jc_remote_lookup_cb cb,
			void *arg)
{
	return lookup_start(r, key, cb, NULL, LOOKUP_PREFETCH, arg);
}

void jc__remote_prefetch_used(struct jc_remote *r, uint64_t fetch_ns)
{
	jc__latency_add(&r->latency, fetch_ns);
	count(r, JC_CTR_remote_hits, 1);
}

int jc__remote_record_fetch(struct jc_remote *r, const uint8_t lookup[16], jc_remote_record_cb cb,
			    void *arg)
{
	return lookup_start(r, lookup, NULL, cb, LOOKUP_LOCKED, arg);
}

int jc__remote_record_open(const struct jc_remote_blob *b, const uint8_t lookup[16],
			   uint64_t max_entries, struct jc_inc_set *set, char *why, size_t whylen)
{
	return jc__remote_record_decode(lookup, b->val, b->len, b->secret, b->secret_len,
					b->max_object, max_entries, set, why, whylen);
}

int jc__remote_blob_hint(const struct jc_remote_blob *b, uint8_t key[16])
{
	return jc__remote_record_hint(b->val, b->len, key);
}

void jc__remote_record_rejected(struct jc_remote *r, const uint8_t lookup[16], const char *why)
{
	count(r, JC_CTR_remote_rejected, 1);
	log_rejected(r, "the remote tier", lookup, 1, why);
}
