/* SPDX-License-Identifier: MIT */
/*
 * The remote tier: an ordered list of backends (remote_backend.h) behind the
 * local store, and everything they share: lookups with the fleet lock,
 * publishes, health and back-off, counters and stats. See remote.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "daemon/remote.h"
#include "daemon/remote_backend.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

#define FAILS_DOWN	3 /* transport failures in a row: down */
#define BACKOFF_MIN_MS	250
#define BACKOFF_MAX_MS	5000
#define TICK_MS		250
#define HEALTH_EVERY_NS 10000000000ull
#define LOCK_RENEW_NS	3000000000ull /* held fleet locks are renewed this often */
#define POLL_MIN_MS	25
#define POLL_MAX_MS	200
#define REJECT_LOG_KEYS 1024 /* keys whose rejection was logged (then forgotten) */
#define SECRET_MIN	16
#define SECRET_MAX	4096

/* Every backend, asked in this order which one claims a URL. */
extern const struct jc_remote_backend jc__remote_redis; /* remote_redis.c */
extern const struct jc_remote_backend jc__remote_file;	/* remote_file.c */
static const struct jc_remote_backend *const backends[] = {
    &jc__remote_redis,
    &jc__remote_file,
};
#define N_BACKENDS (sizeof(backends) / sizeof(backends[0]))

static const struct jc_remote_backend *backend_of(const char *url)
{
	for (size_t i = 0; i < N_BACKENDS; i++)
		if (backends[i]->claims(url))
			return backends[i];
	return NULL;
}

/* --- settings ------------------------------------------------------------- */

int jc__remote_url_check(const char *url, char *err, size_t errlen)
{
	const struct jc_remote_backend *be = backend_of(url);
	if (!be) {
		snprintf(err, errlen,
			 "unknown scheme (redis://, redis+unix://, redis-cluster://, "
			 "file://)");
		return JC_EINVAL;
	}
	return be->check(url, err, errlen);
}

int jc__remote_config_add_url(struct jc_remote_config *c, const char *url)
{
	char *copy = strdup(url);
	char **urls = copy ? realloc(c->urls, (c->n_urls + 1) * sizeof(*urls)) : NULL;
	if (!urls) {
		free(copy);
		return JC_ENOMEM;
	}
	urls[c->n_urls++] = copy;
	c->urls = urls;
	return 0;
}

void jc__remote_config_clear_urls(struct jc_remote_config *c)
{
	for (size_t i = 0; i < c->n_urls; i++)
		free(c->urls[i]);
	free(c->urls);
	c->urls = NULL;
	c->n_urls = 0;
}

void jc__remote_config_clear(struct jc_remote_config *c)
{
	jc__remote_config_clear_urls(c);
	free(c->secret_file);
	free(c->password_file);
	memset(c, 0, sizeof(*c));
}

/* --- the tier ---------------------------------------------------------------- */

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
	char urls[4096]; /* the URLs, for stats (jc__remote_health) */
	uint8_t rejected[REJECT_LOG_KEYS][16];
	size_t n_rejected;

	struct lookup *lookups; /* not finished */
	uv_timer_t tick;
	int refs; /* tick handle + lookups + thread-pool jobs + backend operations */
	int closing;
};

static void count(struct jc_remote *r, enum jc_counter c, uint64_t n)
{
	jc__count(r->ctr, c, n);
}

static void remote_unref(struct jc_remote *r)
{
	if (--r->refs > 0)
		return;
	for (size_t i = 0; i < r->n_tiers; i++)
		free(r->tiers[i].held);
	free(r->tiers);
	jc__remote_secret_free(r->secret, r->secret_len);
	free(r);
}

static uint64_t now_ns(void)
{
	return uv_hrtime();
}

static const char *state_name(const struct tier *t)
{
	return t->fails == 0 ? "up" : t->fails < FAILS_DOWN ? "degraded" : "down";
}

static int is_down(const struct tier *t)
{
	return t->fails >= FAILS_DOWN;
}

/* A transport failure: the storage did not answer in time or at all. The
 * third in a row takes the tier down until a probe answers; a failed probe
 * doubles the wait before the next. */
static void failed(struct tier *t, const char *what, const char *why)
{
	uint64_t now = now_ns();
	count(t->r, JC_CTR_remote_errors, 1);
	snprintf(t->last_error, sizeof(t->last_error), "%s: %s", what, why ? why : "?");
	if (++t->fails < FAILS_DOWN) {
		jc_log_info(REMOTE, "%s: %s (%d in a row)", t->url, t->last_error, t->fails);
	} else if (t->fails == FAILS_DOWN) {
		t->next_probe_ns = now + (uint64_t)t->backoff_ms * 1000000u;
		jc_log_warn(REMOTE, "%s is down (%s); skipping it, next try in %d ms", t->url,
			    t->last_error, t->backoff_ms);
	}
}

/* The backends' report of a failure without a callback (remote_backend.h). */
static void backend_failed(void *arg, const char *what, const char *why)
{
	struct tier *t = arg;
	if (!t->r->closing)
		failed(t, what, why);
}

/* A probe failed while down: wait twice as long before the next. */
static void probe_failed(struct tier *t)
{
	if (t->fails < FAILS_DOWN)
		return;
	t->backoff_ms = t->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : t->backoff_ms * 2;
	t->next_probe_ns = now_ns() + (uint64_t)t->backoff_ms * 1000000u;
}

static void answered(struct tier *t)
{
	if (t->fails >= FAILS_DOWN)
		jc_log_notice(REMOTE, "%s is up again", t->url);
	t->fails = 0;
	t->backoff_ms = BACKOFF_MIN_MS;
}

/* A refusal (JC_EDENIED: an error reply): counted, the state unchanged
 * (the storage answers). */
static void error_reply(struct tier *t, const char *what, const char *why)
{
	count(t->r, JC_CTR_remote_errors, 1);
	snprintf(t->last_error, sizeof(t->last_error), "%s: %.200s", what, why);
	jc_log_info(REMOTE, "%s: %s", t->url, t->last_error);
	answered(t);
}

/* What an operation's rc says about the tier: answered (0, ENOTFOUND,
 * EBUSY), refused, or a transport failure. */
static void outcome(struct tier *t, const char *what, int rc, const char *why)
{
	if (rc == JC_EDENIED)
		error_reply(t, what, why);
	else if (rc == JC_EIO)
		failed(t, what, why);
	else
		answered(t);
}

/* --- fleet locks --------------------------------------------------------------- */

static int held_index(struct tier *t, const uint8_t key[16])
{
	for (size_t i = 0; i < t->n_held; i++)
		if (memcmp(t->held[i], key, 16) == 0)
			return (int)i;
	return -1;
}

static void hold(struct tier *t, const uint8_t key[16])
{
	if (held_index(t, key) >= 0)
		return;
	if (t->n_held == t->cap_held) {
		size_t cap = t->cap_held ? t->cap_held * 2 : 16;
		void *p = realloc(t->held, cap * sizeof(*t->held));
		if (!p)
			return; /* not renewed: it expires by itself */
		t->held = p;
		t->cap_held = cap;
	}
	memcpy(t->held[t->n_held++], key, 16);
}

/* Forgets key's lock; 1 when it was held. */
static int unhold(struct tier *t, const uint8_t key[16])
{
	int i = held_index(t, key);
	if (i < 0)
		return 0;
	memmove(t->held[i], t->held[i + 1], (t->n_held - (size_t)i - 1) * sizeof(*t->held));
	t->n_held--;
	return 1;
}

static void tier_done(struct tier *t, const uint8_t key[16])
{
	if (unhold(t, key) && !t->r->closing && !is_down(t))
		t->be->unlock(t->b, key);
}

void jc__remote_done(struct jc_remote *r, const uint8_t key[16])
{
	for (size_t i = 0; r && i < r->n_tiers; i++)
		tier_done(&r->tiers[i], key);
}

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
		remote_unref(r);
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
		answered(t);
		if (!t->read_only)
			hold(t, l->key);
		l->recheck = 1;
		step_get(l);
	} else if (rc == JC_EBUSY && now_ns() < l->deadline_ns) {
		/* Another daemon compiles it: wait for its value. */
		answered(t);
		uv_timer_start(&l->timer, poll_cb, (uint64_t)l->poll_ms, 0);
		l->poll_ms = l->poll_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : l->poll_ms * 2;
	} else if (rc == JC_EIO) {
		failed(t, "lock", why);
		tier_failed(l, JC_EIO);
	} else {
		/* Waited long enough, or the lock cannot be taken (OOM): compile. */
		outcome(t, "lock", rc, why);
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
		answered(t);
		count(r, JC_CTR_remote_bytes_in, len);
		struct jc_remote_blob *blob = blob_of(r, val, len);
		lookup_finish(l, blob ? 0 : JC_ENOMEM, blob);
	} else if (rc == 0) {
		answered(t);
		if (l->recheck)
			tier_done(t, l->key); /* published meanwhile: the lock goes */
		count(r, JC_CTR_remote_bytes_in, len);
		l->t_got = now_ns();
		l->val = val;
		l->len = len;
		l->work.data = l;
		l->refs++;
		if (uv_queue_work(r->loop, &l->work, decode_work_cb, decode_after_cb) != 0) {
			l->refs--;
			lookup_finish(l, JC_ENOMEM, NULL);
		}
	} else if (rc == JC_ECORRUPT) {
		answered(t);
		count(r, JC_CTR_remote_rejected, 1);
		log_rejected(r, t->url, l->key, l->rcb != NULL, why);
		tier_failed(l, rc);
	} else if (rc == JC_ENOTFOUND && (l->rcb || l->recheck || l->mode != LOOKUP_LOCKED)) {
		answered(t);
		tier_failed(l, JC_ENOTFOUND);
	} else if (rc == JC_ENOTFOUND) {
		answered(t);
		/* Take the fleet lock; read-only, only see whether someone holds it. */
		l->refs++;
		if (t->be->lock(t->b, l->key, lock_cb, l) != 0) {
			l->refs--;
			tier_failed(l, JC_ENOTFOUND);
		}
	} else {
		if (rc != JC_ENOMEM)
			outcome(t, "GET", rc == JC_EDENIED ? rc : JC_EIO, why);
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

/* --- publishes ------------------------------------------------------------------- */

/* A value or record encoded once in the thread pool, then put to every
 * tier that writes. */
struct publish {
	uv_work_t work;
	struct jc_remote *r;
	uint8_t key[16]; /* a cache key, or a record's lookup key */
	int record;	 /* frame holds a dependency record's variant */
	struct jc_buf frame;
	char *meta;
	uint8_t *val;
	size_t len;
	int rc;
	uint64_t holds; /* bit i: tier i's fleet lock of key, released after its put */
};

/* One tier's put. */
struct put {
	struct tier *t;
	int record;
	size_t len;
};

static void publish_work_cb(uv_work_t *w)
{
	struct publish *p = w->data;
	struct jc_remote *r = p->r;
	if (p->record)
		p->rc = jc__remote_record_encode(p->key, p->frame.data, p->frame.len, p->meta,
						 r->secret, r->secret_len, r->max_object, &p->val,
						 &p->len);
	else
		p->rc =
		    jc__remote_value_encode(p->key, p->frame.data, p->frame.len, p->meta, r->secret,
					    r->secret_len, r->max_object, &p->val, &p->len);
}

static void put_cb(void *arg, int rc, uint8_t *val, size_t len, const char *why)
{
	struct put *u = arg;
	struct jc_remote *r = u->t->r;
	(void)val;
	(void)len;
	if (!r->closing) {
		outcome(u->t, "SET", rc, why);
		if (rc == 0) {
			count(r, u->record ? JC_CTR_remote_deps_published : JC_CTR_remote_publishes,
			      1);
			count(r, JC_CTR_remote_bytes_out, u->len);
		}
	}
	free(u);
	remote_unref(r);
}

/* Puts p's value to tier t (a copy unless last), releasing its lock of the
 * key after it when held. */
static void put_one(struct publish *p, struct tier *t, int last)
{
	struct jc_remote *r = p->r;
	int holds = (p->holds >> (t - r->tiers)) & 1;
	if (t->read_only || is_down(t) || p->rc != 0) {
		if (holds && !is_down(t))
			t->be->unlock(t->b, p->key);
		return;
	}
	struct put *u = malloc(sizeof(*u));
	uint8_t *val = last ? p->val : malloc(p->len ? p->len : 1);
	if (!u || !val) {
		free(u);
		if (!last)
			free(val);
		if (holds)
			t->be->unlock(t->b, p->key);
		return;
	}
	if (last)
		p->val = NULL;
	else
		memcpy(val, p->val, p->len);
	*u = (struct put){t, p->record, p->len};
	r->refs++;
	if (t->be->put(t->b, p->record ? JC_RB_RECORD : JC_RB_VALUE, p->key, val, p->len, holds,
		       put_cb, u) != 0) {
		r->refs--;
		free(u);
		if (holds)
			t->be->unlock(t->b, p->key);
	}
}

static void publish_after_cb(uv_work_t *w, int status)
{
	struct publish *p = w->data;
	struct jc_remote *r = p->r;
	(void)status;
	jc__buf_free(&p->frame);
	free(p->meta);
	p->meta = NULL;
	if (p->rc == JC_ETOOBIG) {
		char hex[33];
		jc__hex16(p->key, hex);
		jc_log_info(REMOTE,
			    "key %s: not published, value over remote-max-object (%llu bytes)", hex,
			    (unsigned long long)r->max_object);
	}
	for (size_t i = 0; !r->closing && i < r->n_tiers; i++)
		put_one(p, &r->tiers[i], i + 1 == r->n_tiers);
	free(p->val);
	free(p);
	remote_unref(r);
}

/* 1 when some tier would take a write now. */
static int any_writer(const struct jc_remote *r)
{
	for (size_t i = 0; i < r->n_tiers; i++)
		if (!r->tiers[i].read_only && !is_down(&r->tiers[i]))
			return 1;
	return 0;
}

/* Queues p's encoding; 0, or JC_ENOMEM (p not taken). */
static int publish_queue(struct jc_remote *r, struct publish *p)
{
	p->r = r;
	p->work.data = p;
	r->refs++;
	if (uv_queue_work(r->loop, &p->work, publish_work_cb, publish_after_cb) != 0) {
		r->refs--;
		return JC_ENOMEM;
	}
	return 0;
}

void jc__remote_publish(struct jc_remote *r, const uint8_t key[16], const struct jc_res *res,
			const char *meta)
{
	if (r->closing)
		return;
	if (!any_writer(r) || res->status != 0 || !res->data) {
		jc__remote_done(r, key);
		return;
	}
	struct publish *p = calloc(1, sizeof(*p));
	struct jc_res copy = *res;
	copy.fd = -1;
	copy.cache = 0;
	copy.server_ns = 0;
	copy.message = NULL;
	memcpy(copy.key, key, 16);
	if (p)
		memcpy(p->key, key, 16);
	if (!p || jc__encode_res(&p->frame, &copy) != 0 || (meta && !(p->meta = strdup(meta))) ||
	    publish_queue(r, p) != 0) {
		if (p) {
			jc__buf_free(&p->frame);
			free(p->meta);
		}
		free(p);
		jc__remote_done(r, key);
		return;
	}
	/* The flight's end leaves the locks of key to the puts: each goes after
	 * its tier's value. */
	for (size_t i = 0; i < r->n_tiers; i++)
		if (unhold(&r->tiers[i], key))
			p->holds |= (uint64_t)1 << i;
}

void jc__remote_record_publish(struct jc_remote *r, const uint8_t lookup[16], const uint8_t key[16],
			       uint8_t *variant, size_t len)
{
	struct publish *p = NULL;
	char hex[33], meta[40];
	if (!r->closing && any_writer(r))
		p = calloc(1, sizeof(*p));
	jc__hex16(key, hex);
	snprintf(meta, sizeof(meta), "key=%s", hex);
	if (!p || !(p->meta = strdup(meta))) {
		free(p);
		free(variant);
		return;
	}
	p->record = 1;
	memcpy(p->key, lookup, 16);
	p->frame.data = variant;
	p->frame.len = p->frame.cap = len;
	if (publish_queue(r, p) != 0) {
		jc__buf_free(&p->frame);
		free(p->meta);
		free(p);
	}
}

/* --- probes and the tick ------------------------------------------------------------ */

struct probe {
	struct tier *t;
	uint64_t t0;
};

static void probe_write_cb(void *arg, int rc, uint8_t *val, size_t len, const char *why)
{
	struct tier *t = arg;
	struct jc_remote *r = t->r;
	(void)val;
	(void)len;
	if (!r->closing) {
		t->write_ok = rc == 0;
		if (rc != 0)
			outcome(t, "probe write", rc, why);
	}
	remote_unref(r);
}

static void probe_cb(void *arg, int rc, uint8_t *val, size_t len, const char *why)
{
	struct probe *p = arg;
	struct tier *t = p->t;
	struct jc_remote *r = t->r;
	(void)val;
	(void)len;
	t->probing = 0;
	if (!r->closing) {
		if (rc != 0) {
			outcome(t, "PING", rc == JC_EDENIED ? rc : JC_EIO, why);
			probe_failed(t);
		} else {
			t->probe_rtt_us = (int64_t)((now_ns() - p->t0) / 1000);
			answered(t);
			if (!t->read_only) {
				r->refs++;
				if (t->be->probe(t->b, 1, probe_write_cb, t) != 0)
					r->refs--;
			}
		}
	}
	free(p);
	remote_unref(r);
}

static void probe(struct tier *t)
{
	struct probe *p = calloc(1, sizeof(*p));
	if (!p)
		return;
	p->t = t;
	p->t0 = now_ns();
	t->probing = 1;
	t->last_health_ns = p->t0;
	t->r->refs++;
	if (t->be->probe(t->b, 0, probe_cb, p) != 0) {
		t->r->refs--;
		t->probing = 0;
		free(p);
	}
}

static void tick_cb(uv_timer_t *timer)
{
	struct jc_remote *r = timer->data;
	uint64_t now = now_ns();
	for (size_t i = 0; !r->closing && i < r->n_tiers; i++) {
		struct tier *t = &r->tiers[i];
		if (t->probing)
			continue;
		if (is_down(t) ? now >= t->next_probe_ns
			       : now - t->last_health_ns >= HEALTH_EVERY_NS)
			probe(t);
		if (t->n_held && now - t->renew_ns >= LOCK_RENEW_NS && !is_down(t)) {
			t->renew_ns = now;
			for (size_t k = 0; k < t->n_held; k++)
				t->be->renew(t->b, t->held[k]);
		}
	}
}

static void tick_closed_cb(uv_handle_t *h)
{
	remote_unref(h->data);
}

/* Opens every URL's backend into r->tiers; 0 or the first failure (err). */
static int tiers_open(struct jc_remote *r, uv_loop_t *loop, const struct jc_remote_config *cfg,
		      char *err, size_t errlen)
{
	r->tiers = calloc(cfg->n_urls, sizeof(*r->tiers));
	if (!r->tiers)
		return JC_ENOMEM;
	for (size_t i = 0; i < cfg->n_urls; i++) {
		struct tier *t = &r->tiers[i];
		const struct jc_remote_backend *be = backend_of(cfg->urls[i]);
		struct jc_rb_open o = {loop, cfg->urls[i], cfg, r->lock_id, backend_failed, t};
		int rc = be ? be->open(&o, &t->b, err, errlen) : JC_EINVAL;
		if (!be)
			snprintf(err, errlen, "%s: unknown scheme", cfg->urls[i]);
		if (rc != 0)
			return rc;
		struct jc_rb_info info;
		be->info(t->b, &info);
		t->r = r;
		t->be = be;
		snprintf(t->url, sizeof(t->url), "%s", cfg->urls[i]);
		t->read_only = info.read_only;
		t->backoff_ms = BACKOFF_MIN_MS;
		t->probe_rtt_us = -1;
		t->write_ok = -1;
		r->n_tiers++;
	}
	return 0;
}

int jc__remote_new(uv_loop_t *loop, const struct jc_remote_config *cfg, struct jc_counters *ctr,
		   struct jc_remote **out, char *err, size_t errlen)
{
	int rc;
	if (cfg->n_urls == 0 || cfg->n_urls > JC_REMOTE_MAX_TIERS) {
		snprintf(err, errlen, "%zu remote URLs: 1 to %d", cfg->n_urls, JC_REMOTE_MAX_TIERS);
		return JC_EINVAL;
	}
	for (size_t i = 0; i < cfg->n_urls; i++)
		if ((rc = jc__remote_url_check(cfg->urls[i], err, errlen)) != 0)
			return rc;
	if (!cfg->secret_file && !cfg->unsigned_ok) {
		snprintf(
		    err, errlen,
		    "--remote %s without --remote-secret-file: its values would be "
		    "unsigned, and anyone who can write to it could forge them (an artifact "
		    "this daemon then serves); give --remote-secret-file FILE (the same key on "
		    "every daemon of the fleet), or --remote-unsigned to accept that",
		    cfg->urls[0]);
		return JC_EINVAL;
	}
	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium does not start");
		return JC_EINTERNAL;
	}
	struct jc_remote *r = calloc(1, sizeof(*r));
	if (!r)
		return JC_ENOMEM;
	if (cfg->secret_file) {
		rc = jc__remote_read_small(cfg->secret_file, SECRET_MAX, &r->secret, &r->secret_len,
					   err, errlen, "remote-secret-file");
		if (rc == 0 && r->secret_len < SECRET_MIN) {
			snprintf(err, errlen, "remote-secret-file %s: shorter than %d bytes",
				 cfg->secret_file, SECRET_MIN);
			rc = JC_EINVAL;
		}
		if (rc != 0)
			goto err_out;
	}
	char host[64] = "?";
	gethostname(host, sizeof(host) - 1);
	snprintf(r->lock_id, sizeof(r->lock_id), "%s:%d:%08x", host, (int)getpid(),
		 randombytes_random());
	rc = tiers_open(r, loop, cfg, err, errlen);
	if (rc != 0)
		goto err_out;
	r->loop = loop;
	r->max_object = cfg->max_object;
	r->lock_wait_ns = cfg->lock_wait_s * 1000000000;
	r->ctr = ctr;
	uv_timer_init(loop, &r->tick);
	r->tick.data = r;
	r->refs = 1; /* the tick handle */
	uv_timer_start(&r->tick, tick_cb, 0, TICK_MS);
	*out = r;
	return 0;
err_out:
	for (size_t i = 0; i < r->n_tiers; i++)
		r->tiers[i].be->close(r->tiers[i].b);
	free(r->tiers);
	jc__remote_secret_free(r->secret, r->secret_len);
	free(r);
	return rc;
}

/* The health of the list, for stats and doctor: the worst state, the URLs,
 * and the round trip, write permission and last error of the worst tier. */
void jc__remote_health(struct jc_remote *r, struct jc_remote_health *h)
{
	char *urls = r->urls;
	const struct tier *worst = &r->tiers[0];
	size_t n = 0;
	urls[0] = '\0';
	h->read_only = 1;
	h->masters = 0;
	for (size_t i = 0; i < r->n_tiers; i++) {
		const struct tier *t = &r->tiers[i];
		struct jc_rb_info info;
		t->be->info(t->b, &info);
		if (t->fails > worst->fails ||
		    (t->last_error[0] && !worst->last_error[0] && t->fails == worst->fails))
			worst = t;
		h->read_only &= t->read_only;
		h->masters += info.masters;
		n += (size_t)snprintf(urls + n, sizeof(r->urls) - n, "%s%s", i ? " " : "", t->url);
		if (n >= sizeof(r->urls))
			n = sizeof(r->urls) - 1;
	}
	h->state = state_name(worst);
	h->url = urls;
	h->probe_rtt_us = worst->probe_rtt_us;
	h->write_ok = h->read_only ? -1 : worst->read_only ? -1 : worst->write_ok;
	h->last_error = worst->last_error;
	h->tiers = (int)r->n_tiers;
	h->p50_ns = jc__latency_quantile_ns(&r->latency, 0.5);
	h->p99_ns = jc__latency_quantile_ns(&r->latency, 0.99);
	h->samples = r->latency.count;
	h->sum_ns = r->latency.sum_ns;
}

int jc__remote_stats_add(struct jc_remote *r, struct jc_record *rec)
{
	if (!r)
		return jc__record_add_str(rec, "remote_state", "off");
	struct jc_remote_health h;
	jc__remote_health(r, &h);
	int rc = jc__record_add_str(rec, "remote_state", h.state);
	rc = rc ?: jc__record_add_str(rec, "remote_url", h.url);
	rc = rc ?: jc__record_add_int(rec, "remote_tiers", h.tiers);
	rc = rc ?: jc__record_add_int(rec, "remote_read_only", h.read_only);
	rc = rc ?: jc__record_add_int(rec, "remote_unsigned", !r->secret);
	rc = rc ?: jc__record_add_int(rec, "remote_masters", h.masters);
	rc = rc ?: jc__record_add_int(rec, "remote_p50_us", (int64_t)((h.p50_ns + 500) / 1000));
	rc = rc ?: jc__record_add_int(rec, "remote_p99_us", (int64_t)((h.p99_ns + 500) / 1000));
	rc = rc ?: jc__record_add_int(rec, "remote_latency_samples", (int64_t)h.samples);
	rc = rc ?: jc__record_add_int(rec, "remote_latency_sum_ns", (int64_t)h.sum_ns);
	rc = rc ?: jc__record_add_int(rec, "remote_probe_rtt_us", h.probe_rtt_us);
	rc = rc ?: jc__record_add_int(rec, "remote_write_ok", h.write_ok);
	rc = rc ?: jc__record_add_str(rec, "remote_last_error", h.last_error);
	return rc;
}

void jc__remote_stats_zero(struct jc_remote *r)
{
	if (r)
		memset(&r->latency, 0, sizeof(r->latency));
}

void jc__remote_close(struct jc_remote *r)
{
	if (!r || r->closing)
		return;
	r->closing = 1;
	while (r->lookups)
		lookup_finish(r->lookups, JC_EBUSY, NULL);
	for (size_t i = 0; i < r->n_tiers; i++)
		r->tiers[i].be->close(r->tiers[i].b);
	uv_close((uv_handle_t *)&r->tick, tick_closed_cb);
}
