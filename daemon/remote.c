/* SPDX-License-Identifier: MIT */
/*
 * The remote tier on Redis / Redis Cluster: lookups with the fleet lock,
 * publishes, health and back-off. See remote.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "daemon/redis.h"
#include "daemon/remote.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

#define FAILS_DOWN 3              /* transport failures in a row: down */
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000
#define TICK_MS 250
#define HEALTH_EVERY_NS 10000000000ull
#define LOCK_MS 10000             /* fleet lock lifetime ... */
#define LOCK_RENEW_NS 3000000000ull /* ... renewed this often while held */
#define POLL_MIN_MS 25
#define POLL_MAX_MS 200
#define REJECT_LOG_KEYS 1024      /* keys whose rejection was logged (then forgotten) */
#define SECRET_MIN 16
#define SECRET_MAX 4096

/* Scripts that touch the lock only while it is still ours. */
static const char release_lua[] =
	"if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) end return 0";
static const char renew_lua[] =
	"if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('pexpire',KEYS[1],ARGV[2]) end "
	"return 0";

/* --- settings ------------------------------------------------------------- */

static int str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

int jc__remote_config_equal(const struct jc_remote_config *a, const struct jc_remote_config *b)
{
	return str_eq(a->url, b->url) && str_eq(a->secret_file, b->secret_file) &&
	       str_eq(a->password_file, b->password_file) && a->read_only == b->read_only &&
	       a->ttl_s == b->ttl_s && a->timeout_ms == b->timeout_ms && a->max_object == b->max_object &&
	       a->lock_wait_s == b->lock_wait_s && a->unsigned_ok == b->unsigned_ok;
}

void jc__remote_config_clear(struct jc_remote_config *c)
{
	free(c->url);
	free(c->secret_file);
	free(c->password_file);
	memset(c, 0, sizeof(*c));
}

/* --- the tier ---------------------------------------------------------------- */

struct lookup;

struct jc_remote {
	uv_loop_t *loop;
	struct jc_redis *redis;
	char url[1024];
	int read_only;
	int64_t ttl_ms;
	uint64_t max_object;
	int64_t lock_wait_ns;     /* --remote-lock-wait */
	uint8_t *secret;          /* NULL: values are not signed */
	size_t secret_len;
	char lock_id[128];        /* host:pid:random, the value of our locks */
	struct jc_counters *ctr;   /* the daemon's (borrowed) */

	int fails;                /* transport failures in a row */
	int backoff_ms;
	uint64_t next_probe_ns;   /* while down */
	uint64_t last_health_ns;
	int probing;
	int64_t probe_rtt_us;
	int write_ok;
	char last_error[256];
	struct jc_latency latency;

	uint8_t (*held)[16];      /* keys whose fleet lock we hold */
	size_t n_held, cap_held;
	uint64_t renew_ns;
	uint8_t rejected[REJECT_LOG_KEYS][16];
	size_t n_rejected;

	struct lookup *lookups;   /* not finished */
	uv_timer_t tick;
	int refs;                 /* tick handle + lookups + thread-pool jobs + probes */
	int closing;
};

static void count(struct jc_remote *r, enum jc_counter c, uint64_t n)
{
	jc__count(r->ctr, c, n);
}

/* Wipes and frees a secret (or password) of len bytes (NULL-safe). */
static void secret_free(uint8_t *secret, size_t len)
{
	if (secret)
		sodium_memzero(secret, len);
	free(secret);
}

static void remote_unref(struct jc_remote *r)
{
	if (--r->refs > 0)
		return;
	secret_free(r->secret, r->secret_len);
	free(r->held);
	free(r);
}

static uint64_t now_ns(void)
{
	return uv_hrtime();
}

static const char *state_name(const struct jc_remote *r)
{
	return r->fails == 0 ? "up" : r->fails < FAILS_DOWN ? "degraded" : "down";
}

static int is_down(const struct jc_remote *r)
{
	return r->fails >= FAILS_DOWN;
}

/* A transport failure: the server did not answer in time or at all. The
 * third in a row takes the tier down until a probe answers; a failed probe
 * doubles the wait before the next. */
static void failed(struct jc_remote *r, const char *what, const char *why)
{
	uint64_t now = now_ns();
	count(r, JC_CTR_remote_errors, 1);
	snprintf(r->last_error, sizeof(r->last_error), "%s: %s", what, why ? why : "?");
	if (++r->fails < FAILS_DOWN) {
		jc_log_info(REMOTE, "%s: %s (%d in a row)", r->url, r->last_error, r->fails);
	} else if (r->fails == FAILS_DOWN) {
		r->next_probe_ns = now + (uint64_t)r->backoff_ms * 1000000u;
		jc_log_warn(REMOTE, "%s is down (%s); skipping it, next try in %d ms", r->url,
			    r->last_error, r->backoff_ms);
	}
}

/* A probe failed while down: wait twice as long before the next. */
static void probe_failed(struct jc_remote *r)
{
	if (r->fails < FAILS_DOWN)
		return;
	r->backoff_ms = r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
	r->next_probe_ns = now_ns() + (uint64_t)r->backoff_ms * 1000000u;
}

static void answered(struct jc_remote *r)
{
	if (r->fails >= FAILS_DOWN)
		jc_log_notice(REMOTE, "%s is up again", r->url);
	r->fails = 0;
	r->backoff_ms = BACKOFF_MIN_MS;
}

/* An error reply: counted, the state unchanged (the server answers). */
static void error_reply(struct jc_remote *r, const char *what, const redisReply *reply)
{
	count(r, JC_CTR_remote_errors, 1);
	snprintf(r->last_error, sizeof(r->last_error), "%s: %.200s", what, reply->str);
	jc_log_info(REMOTE, "%s: %s", r->url, r->last_error);
	answered(r);
}

static void vkey_of(const uint8_t key[16], char out[40])
{
	char hex[33];
	jc__hex16(key, hex);
	snprintf(out, 40, "jc:{%s}", hex);
}

/* The dependency record of a lookup key (remote.h). */
static void rkey_of(const uint8_t lookup[16], char out[48])
{
	char hex[33];
	jc__hex16(lookup, hex);
	snprintf(out, 48, "jc:{%s}:deps", hex);
}

static void lkey_of(const uint8_t key[16], char out[48])
{
	char hex[33];
	jc__hex16(key, hex);
	snprintf(out, 48, "jc:{%s}:lock", hex);
}

/* Sends a command routed by its first key argument (argv[ki]). */
static int send_cmd(struct jc_remote *r, int ki, int argc, const char *const *argv,
		    const size_t *lens, jc_redis_cb cb, void *arg)
{
	return jc__redis_command(r->redis, argv[ki], lens ? lens[ki] : strlen(argv[ki]), argc, argv,
				 lens, cb, arg);
}

/* --- fleet locks --------------------------------------------------------------- */

static void ignore_cb(void *arg, redisReply *reply, const char *why)
{
	struct jc_remote *r = arg;
	if (!r->closing && !reply)
		failed(r, "lock", why);
	remote_unref(r);
}

static void lock_script(struct jc_remote *r, const uint8_t key[16], const char *script,
			const char *extra)
{
	char lkey[48];
	lkey_of(key, lkey);
	const char *argv[] = {"EVAL", script, "1", lkey, r->lock_id, extra};
	r->refs++;
	if (send_cmd(r, 3, extra ? 6 : 5, argv, NULL, ignore_cb, r) != 0)
		r->refs--;
}

static int held_index(struct jc_remote *r, const uint8_t key[16])
{
	for (size_t i = 0; i < r->n_held; i++)
		if (memcmp(r->held[i], key, 16) == 0)
			return (int)i;
	return -1;
}

static void hold(struct jc_remote *r, const uint8_t key[16])
{
	if (held_index(r, key) >= 0)
		return;
	if (r->n_held == r->cap_held) {
		size_t cap = r->cap_held ? r->cap_held * 2 : 16;
		void *p = realloc(r->held, cap * sizeof(*r->held));
		if (!p)
			return; /* not renewed: it expires by itself */
		r->held = p;
		r->cap_held = cap;
	}
	memcpy(r->held[r->n_held++], key, 16);
}

/* Forgets key's lock; 1 when it was held. */
static int unhold(struct jc_remote *r, const uint8_t key[16])
{
	int i = held_index(r, key);
	if (i < 0)
		return 0;
	memmove(r->held[i], r->held[i + 1], (r->n_held - (size_t)i - 1) * sizeof(*r->held));
	r->n_held--;
	return 1;
}

void jc__remote_done(struct jc_remote *r, const uint8_t key[16])
{
	if (r && unhold(r, key) && !r->closing && !is_down(r))
		lock_script(r, key, release_lua, NULL);
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
	secret_free(b->secret, b->secret_len);
	free(b->val);
	free(b);
}

/* A blob of a reply of r's (its bytes copied), or NULL when memory is short. */
static struct jc_remote_blob *blob_of(const struct jc_remote *r, const redisReply *reply)
{
	struct jc_remote_blob *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->val = malloc(reply->len ? reply->len : 1);
	b->secret = r->secret ? malloc(r->secret_len) : NULL;
	if (!b->val || (r->secret && !b->secret)) {
		jc__remote_blob_free(b);
		return NULL;
	}
	memcpy(b->val, reply->str, reply->len);
	b->len = reply->len;
	if (r->secret)
		memcpy(b->secret, r->secret, r->secret_len);
	b->secret_len = r->secret_len;
	b->max_object = r->max_object;
	return b;
}

/* --- lookups ------------------------------------------------------------------- */

/* How a lookup treats a value that is not there, and what it counts. */
enum lookup_mode {
	LOOKUP_LOCKED,   /* a miss takes the fleet lock (or waits for its holder); counted */
	LOOKUP_PEEK,     /* a miss is only a miss, not counted (jc__remote_peek) */
	LOOKUP_PREFETCH, /* as a peek, and a hit counts only when used (jc__remote_prefetch) */
};

struct lookup {
	struct jc_remote *r;
	uint8_t key[16];          /* a cache key, or a lookup key for a record */
	char vkey[48], lkey[48];
	jc_remote_lookup_cb cb;   /* a value's, or ... */
	jc_remote_record_cb rcb;  /* ... a dependency record's (then no lock, no decode) */
	void *arg;
	uv_timer_t timer;         /* poll while another daemon compiles */
	uint64_t t0, deadline_ns;
	uint64_t t_got, t_decode, t_decoded; /* GET answered, decode began, ended (for the log) */
	int poll_ms;
	int refs;                 /* timer handle + commands + decode job */
	int done;
	int recheck;              /* this GET follows a lock taken (or EXISTS 0) */
	int mode;                 /* enum lookup_mode */
	struct lookup *prev, *next;
	/* decode job */
	uv_work_t work;
	uint8_t *val;
	size_t len;
	struct jc_res res;
	struct jc_remote_blob *blob; /* a record's */
	int rc;
	char why[160];
};

static void lookup_unref(struct lookup *l)
{
	if (--l->refs == 0) {
		jc__res_clear(&l->res);
		jc__remote_blob_free(l->blob);
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
		jc_log_info(REMOTE, "key %s: value fetched in %.3f ms: GET %.3f, pool wait %.3f, "
			    "decode and checks %.3f", hex, (double)(now_ns() - l->t0) / 1e6,
			    (double)(l->t_got - l->t0) / 1e6, (double)(l->t_decode - l->t_got) / 1e6,
			    (double)(l->t_decoded - l->t_decode) / 1e6);
}

/* Ends l once: the caller's callback, then l goes when nothing holds it. */
static void lookup_finish(struct lookup *l, int rc)
{
	struct jc_remote *r = l->r;
	if (l->done)
		return;
	l->done = 1;
	if (l->prev)
		l->prev->next = l->next;
	else
		r->lookups = l->next;
	if (l->next)
		l->next->prev = l->prev;
	if (l->rcb) {
		if (rc == 0)
			log_phases(l);
		struct jc_remote_blob *blob = l->blob;
		l->blob = NULL;
		l->rcb(l->arg, rc, blob);
		uv_timer_stop(&l->timer);
		uv_close((uv_handle_t *)&l->timer, lookup_timer_closed_cb);
		return;
	}
	if (rc == 0)
		log_phases(l);
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
	uv_timer_stop(&l->timer);
	uv_close((uv_handle_t *)&l->timer, lookup_timer_closed_cb);
}

static void step_get(struct lookup *l);

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
static void log_rejected(struct jc_remote *r, const uint8_t key[16], int record, const char *why)
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
		jc_log_warn(REMOTE, "lookup key %s: dependency record from %s rejected (%s); keyed "
			    "by the scan", hex, r->url, why);
	else
		jc_log_warn(REMOTE, "key %s: value from %s rejected (%s); compiling", hex, r->url, why);
}

static void decode_after_cb(uv_work_t *w, int status)
{
	struct lookup *l = w->data;
	struct jc_remote *r = l->r;
	(void)status;
	free(l->val);
	l->val = NULL;
	if (!l->done) {
		if (l->rc != 0) {
			count(r, JC_CTR_remote_rejected, 1);
			log_rejected(r, l->key, 0, l->why);
			jc__res_clear(&l->res);
		}
		lookup_finish(l, l->rc);
	}
	lookup_unref(l);
}

static void poll_cb(uv_timer_t *t)
{
	struct lookup *l = t->data;
	if (!l->done)
		step_get(l);
}

/* The start of every reply to a lookup: 1 when reply is there to be looked
 * at; 0 when l is done or closing, or when there is no reply (a transport
 * failure, which ends l). */
static int lookup_reply(struct lookup *l, const redisReply *reply, const char *what,
			const char *why)
{
	if (l->done || l->r->closing)
		return 0;
	if (reply)
		return 1;
	failed(l->r, what, why);
	lookup_finish(l, JC_EIO);
	return 0;
}

static void lock_cb(void *arg, redisReply *reply, const char *why)
{
	struct lookup *l = arg;
	struct jc_remote *r = l->r;
	if (!lookup_reply(l, reply, "lock", why)) {
		/* nothing more to do */
	} else if (reply->type == REDIS_REPLY_STATUS ||
		   (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0)) {
		/* Ours (or, read-only, nobody holds it): compile, then publish or
		 * release. A holder may have published and released it between
		 * our GET and now: look once more before compiling. */
		answered(r);
		if (reply->type == REDIS_REPLY_STATUS)
			hold(r, l->key);
		l->recheck = 1;
		step_get(l);
	} else if ((reply->type == REDIS_REPLY_NIL ||
		    (reply->type == REDIS_REPLY_INTEGER && reply->integer == 1)) &&
		   now_ns() < l->deadline_ns) {
		/* Another daemon compiles it (SET NX refused, or EXISTS said so):
		 * wait for its value. */
		answered(r);
		uv_timer_start(&l->timer, poll_cb, (uint64_t)l->poll_ms, 0);
		l->poll_ms = l->poll_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : l->poll_ms * 2;
	} else {
		/* Waited long enough, or the lock cannot be taken (OOM): compile. */
		if (reply->type == REDIS_REPLY_ERROR)
			error_reply(r, "lock", reply);
		lookup_finish(l, JC_ENOTFOUND);
	}
	lookup_unref(l);
}

static void get_cb(void *arg, redisReply *reply, const char *why)
{
	struct lookup *l = arg;
	struct jc_remote *r = l->r;
	if (!lookup_reply(l, reply, "GET", why)) {
		/* nothing more to do */
	} else if (reply->type == REDIS_REPLY_STRING && l->rcb) {
		answered(r);
		count(r, JC_CTR_remote_bytes_in, reply->len);
		l->blob = blob_of(r, reply);
		lookup_finish(l, l->blob ? 0 : JC_ENOMEM);
	} else if (reply->type == REDIS_REPLY_STRING) {
		answered(r);
		if (l->recheck)
			jc__remote_done(r, l->key); /* published meanwhile: the lock goes */
		count(r, JC_CTR_remote_bytes_in, reply->len);
		l->t_got = now_ns();
		l->val = malloc(reply->len ? reply->len : 1);
		l->len = reply->len;
		if (!l->val) {
			lookup_finish(l, JC_ENOMEM);
		} else {
			memcpy(l->val, reply->str, reply->len);
			l->work.data = l;
			l->refs++;
			if (uv_queue_work(r->loop, &l->work, decode_work_cb, decode_after_cb) != 0) {
				l->refs--;
				lookup_finish(l, JC_ENOMEM);
			}
		}
	} else if (reply->type == REDIS_REPLY_NIL && (l->rcb || l->recheck || l->mode != LOOKUP_LOCKED)) {
		answered(r);
		lookup_finish(l, JC_ENOTFOUND);
	} else if (reply->type == REDIS_REPLY_NIL) {
		answered(r);
		/* Take the fleet lock; read-only, only see whether someone holds it. */
		char px[24];
		snprintf(px, sizeof(px), "%d", LOCK_MS);
		const char *set[] = {"SET", l->lkey, r->lock_id, "NX", "PX", px};
		const char *exists[] = {"EXISTS", l->lkey};
		l->refs++;
		if (send_cmd(r, 1, r->read_only ? 2 : 6, r->read_only ? exists : set, NULL, lock_cb, l) !=
		    0) {
			l->refs--;
			lookup_finish(l, JC_ENOTFOUND);
		}
	} else {
		if (reply->type == REDIS_REPLY_ERROR)
			error_reply(r, "GET", reply);
		else
			failed(r, "GET", "unexpected reply type");
		lookup_finish(l, JC_EIO);
	}
	lookup_unref(l);
}

static void step_get(struct lookup *l)
{
	const char *argv[] = {"GET", l->vkey};
	l->refs++;
	if (send_cmd(l->r, 1, 2, argv, NULL, get_cb, l) != 0) {
		l->refs--;
		lookup_finish(l, JC_EBUSY);
	}
}

/* Starts a lookup of a value (cb) or a record (rcb), as mode says. */
static int lookup_start(struct jc_remote *r, const uint8_t key[16], jc_remote_lookup_cb cb,
			jc_remote_record_cb rcb, enum lookup_mode mode, void *arg)
{
	if (r->closing)
		return JC_EBUSY;
	if (is_down(r))
		return JC_ECONNECT;
	struct lookup *l = calloc(1, sizeof(*l));
	if (!l)
		return JC_ENOMEM;
	l->r = r;
	memcpy(l->key, key, 16);
	if (rcb)
		rkey_of(key, l->vkey);
	else
		vkey_of(key, l->vkey);
	lkey_of(key, l->lkey);
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

int jc__remote_lookup(struct jc_remote *r, const uint8_t key[16], jc_remote_lookup_cb cb,
		      void *arg)
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
	log_rejected(r, lookup, 1, why);
}

/* --- publishes ------------------------------------------------------------------- */

struct publish {
	uv_work_t work;
	struct jc_remote *r;
	uint8_t key[16];          /* a cache key, or a record's lookup key */
	int record;               /* frame holds a dependency record's variant */
	struct jc_buf frame;
	char *meta;
	uint8_t *val;
	size_t len;
	int rc;
	int holds_lock;           /* the fleet lock of key, released after the SET */
};

/* Releases the fleet lock a publish took over. */
static void publish_release(struct publish *p)
{
	if (p->holds_lock && !p->r->closing && !is_down(p->r))
		lock_script(p->r, p->key, release_lua, NULL);
	p->holds_lock = 0;
}

static void publish_work_cb(uv_work_t *w)
{
	struct publish *p = w->data;
	struct jc_remote *r = p->r;
	if (p->record)
		p->rc = jc__remote_record_encode(p->key, p->frame.data, p->frame.len, p->meta,
						 r->secret, r->secret_len, r->max_object, &p->val,
						 &p->len);
	else
		p->rc = jc__remote_value_encode(p->key, p->frame.data, p->frame.len, p->meta,
						r->secret, r->secret_len, r->max_object, &p->val,
						&p->len);
}

static void set_cb(void *arg, redisReply *reply, const char *why)
{
	struct publish *p = arg;
	struct jc_remote *r = p->r;
	if (!r->closing) {
		if (!reply) {
			failed(r, "SET", why);
		} else if (reply->type == REDIS_REPLY_STATUS) {
			answered(r);
			count(r, p->record ? JC_CTR_remote_deps_published : JC_CTR_remote_publishes, 1);
			count(r, JC_CTR_remote_bytes_out, p->len);
		} else if (reply->type == REDIS_REPLY_ERROR) {
			error_reply(r, "SET", reply);
		}
	}
	free(p->val);
	free(p);
	remote_unref(r);
}

static void publish_after_cb(uv_work_t *w, int status)
{
	struct publish *p = w->data;
	struct jc_remote *r = p->r;
	(void)status;
	jc__buf_free(&p->frame);
	free(p->meta);
	p->meta = NULL;
	if (!r->closing && !is_down(r) && p->rc == 0) {
		char vkey[48], px[24];
		if (p->record)
			rkey_of(p->key, vkey);
		else
			vkey_of(p->key, vkey);
		snprintf(px, sizeof(px), "%lld", (long long)r->ttl_ms);
		const char *argv[] = {"SET", vkey, (const char *)p->val, "PX", px};
		const size_t lens[] = {3, strlen(vkey), p->len, 2, strlen(px)};
		if (send_cmd(r, 1, 5, argv, lens, set_cb, p) == 0) {
			/* The lock goes after the value, on the same connection (hash tag). */
			publish_release(p);
			return;
		}
	} else if (p->rc == JC_ETOOBIG) {
		char hex[33];
		jc__hex16(p->key, hex);
		jc_log_info(REMOTE, "key %s: not published, value over remote-max-object (%llu bytes)",
			    hex, (unsigned long long)r->max_object);
	}
	publish_release(p);
	free(p->val);
	free(p);
	remote_unref(r);
}

void jc__remote_publish(struct jc_remote *r, const uint8_t key[16], const struct jc_res *res,
			const char *meta)
{
	if (r->closing)
		return;
	if (r->read_only || is_down(r) || res->status != 0 || !res->data) {
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
	if (!p || jc__encode_res(&p->frame, &copy) != 0 || (meta && !(p->meta = strdup(meta)))) {
		if (p) {
			jc__buf_free(&p->frame);
			free(p->meta);
		}
		free(p);
		jc__remote_done(r, key);
		return;
	}
	p->r = r;
	memcpy(p->key, key, 16);
	p->work.data = p;
	r->refs++;
	if (uv_queue_work(r->loop, &p->work, publish_work_cb, publish_after_cb) != 0) {
		r->refs--;
		jc__buf_free(&p->frame);
		free(p->meta);
		free(p);
		jc__remote_done(r, key);
		return;
	}
	p->holds_lock = unhold(r, key); /* the flight's end leaves it to us */
}

void jc__remote_record_publish(struct jc_remote *r, const uint8_t lookup[16], const uint8_t key[16],
			       uint8_t *variant, size_t len)
{
	struct publish *p = NULL;
	char hex[33], meta[40];
	if (!r->closing && !r->read_only && !is_down(r))
		p = calloc(1, sizeof(*p));
	jc__hex16(key, hex);
	snprintf(meta, sizeof(meta), "key=%s", hex);
	if (!p || !(p->meta = strdup(meta))) {
		free(p);
		free(variant);
		return;
	}
	p->r = r;
	p->record = 1;
	memcpy(p->key, lookup, 16);
	p->frame.data = variant;
	p->frame.len = p->frame.cap = len;
	p->work.data = p;
	r->refs++;
	if (uv_queue_work(r->loop, &p->work, publish_work_cb, publish_after_cb) != 0) {
		r->refs--;
		jc__buf_free(&p->frame);
		free(p->meta);
		free(p);
	}
}

/* --- probes and the tick ------------------------------------------------------------ */

struct probe {
	struct jc_remote *r;
	uint64_t t0;
};

static void probe_write_cb(void *arg, redisReply *reply, const char *why)
{
	struct jc_remote *r = arg;
	if (!r->closing) {
		r->write_ok = reply && reply->type == REDIS_REPLY_STATUS;
		if (!reply)
			failed(r, "probe write", why);
		else if (reply->type == REDIS_REPLY_ERROR)
			error_reply(r, "probe write", reply);
	}
	remote_unref(r);
}

static void probe_cb(void *arg, redisReply *reply, const char *why)
{
	struct probe *p = arg;
	struct jc_remote *r = p->r;
	r->probing = 0;
	if (!r->closing) {
		if (!reply || reply->type == REDIS_REPLY_ERROR) {
			if (reply)
				error_reply(r, "PING", reply);
			else
				failed(r, "PING", why);
			probe_failed(r);
		} else {
			r->probe_rtt_us = (int64_t)((now_ns() - p->t0) / 1000);
			answered(r);
			if (!r->read_only) {
				char pkey[300], host[256] = "?";
				gethostname(host, sizeof(host) - 1);
				snprintf(pkey, sizeof(pkey), "jc:probe:%s:%d", host, (int)getpid());
				const char *argv[] = {"SET", pkey, "1", "PX", "60000"};
				r->refs++;
				if (send_cmd(r, 1, 5, argv, NULL, probe_write_cb, r) != 0)
					r->refs--;
			}
		}
	}
	free(p);
	remote_unref(r);
}

static void probe(struct jc_remote *r)
{
	struct probe *p = calloc(1, sizeof(*p));
	if (!p)
		return;
	p->r = r;
	p->t0 = now_ns();
	r->probing = 1;
	r->last_health_ns = p->t0;
	jc__redis_refresh(r->redis);
	const char *argv[] = {"PING"};
	r->refs++;
	/* Routed by a key of its own, so a cluster probe reaches a master. */
	if (jc__redis_command(r->redis, "jc:probe", 8, 1, argv, NULL, probe_cb, p) != 0) {
		r->refs--;
		r->probing = 0;
		free(p);
	}
}

static void tick_cb(uv_timer_t *t)
{
	struct jc_remote *r = t->data;
	uint64_t now = now_ns();
	if (r->closing || r->probing)
		return;
	if (is_down(r) ? now >= r->next_probe_ns : now - r->last_health_ns >= HEALTH_EVERY_NS)
		probe(r);
	if (r->n_held && now - r->renew_ns >= LOCK_RENEW_NS && !is_down(r)) {
		char ms[16];
		snprintf(ms, sizeof(ms), "%d", LOCK_MS);
		r->renew_ns = now;
		for (size_t i = 0; i < r->n_held; i++)
			lock_script(r, r->held[i], renew_lua, ms);
	}
}

static void tick_closed_cb(uv_handle_t *h)
{
	remote_unref(h->data);
}

/* Reads a whole small file (at most max bytes) into *out (malloc'd). */
static int read_small(const char *path, size_t max, uint8_t **out, size_t *len, char *err,
		      size_t errlen, const char *what)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return JC_EINVAL;
	}
	if (st.st_mode & 077)
		jc_log_warn(REMOTE, "%s %s is readable or writable by others (mode %04o)", what, path,
			    (unsigned)(st.st_mode & 07777));
	uint8_t *buf = malloc(max + 1);
	ssize_t n = buf ? read(fd, buf, max + 1) : -1;
	close(fd);
	if (n < 0 || (size_t)n > max) {
		snprintf(err, errlen, "%s %s: %s", what, path, n < 0 ? "cannot read it" : "too large");
		free(buf);
		return JC_EINVAL;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	*out = buf;
	*len = (size_t)n;
	return 0;
}

int jc__remote_new(uv_loop_t *loop, const struct jc_remote_config *cfg, struct jc_counters *ctr,
		   struct jc_remote **out, char *err, size_t errlen)
{
	struct jc_redis_url url;
	uint8_t *pw = NULL;
	size_t pwlen = 0;
	int rc = jc__redis_url_parse(cfg->url, &url, err, errlen);
	if (rc != 0)
		return rc;
	if (!cfg->secret_file && !cfg->unsigned_ok) {
		snprintf(err, errlen, "--remote %s without --remote-secret-file: its values would be "
			 "unsigned, and anyone who can write to that Redis could forge them (an artifact "
			 "this daemon then serves); give --remote-secret-file FILE (the same key on "
			 "every daemon of the fleet), or --remote-unsigned to accept that", cfg->url);
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
		rc = read_small(cfg->secret_file, SECRET_MAX, &r->secret, &r->secret_len, err, errlen,
				"remote-secret-file");
		if (rc == 0 && r->secret_len < SECRET_MIN) {
			snprintf(err, errlen, "remote-secret-file %s: shorter than %d bytes",
				 cfg->secret_file, SECRET_MIN);
			rc = JC_EINVAL;
		}
		if (rc != 0)
			goto err_out;
	}
	if (cfg->password_file) {
		rc = read_small(cfg->password_file, 1024, &pw, &pwlen, err, errlen,
				"remote-password-file");
		if (rc != 0)
			goto err_out;
		pw[pwlen] = '\0';
		char *nl = strchr((char *)pw, '\n');
		if (nl)
			*nl = '\0';
	}
	rc = jc__redis_new(loop, &url, (char *)pw, JC_REMOTE_CONNECT_MS, cfg->timeout_ms, &r->redis);
	secret_free(pw, pwlen);
	if (rc != 0)
		goto err_out;
	r->loop = loop;
	snprintf(r->url, sizeof(r->url), "%s", cfg->url);
	r->read_only = cfg->read_only;
	r->ttl_ms = cfg->ttl_s * 1000;
	r->max_object = cfg->max_object;
	r->lock_wait_ns = cfg->lock_wait_s * 1000000000;
	r->ctr = ctr;
	r->backoff_ms = BACKOFF_MIN_MS;
	r->probe_rtt_us = -1;
	r->write_ok = -1;
	char host[64] = "?";
	gethostname(host, sizeof(host) - 1);
	snprintf(r->lock_id, sizeof(r->lock_id), "%s:%d:%08x", host, (int)getpid(),
		 randombytes_random());
	uv_timer_init(loop, &r->tick);
	r->tick.data = r;
	r->refs = 1; /* the tick handle */
	uv_timer_start(&r->tick, tick_cb, 0, TICK_MS);
	*out = r;
	return 0;
err_out:
	secret_free(r->secret, r->secret_len);
	free(r);
	return rc;
}

void jc__remote_health(struct jc_remote *r, struct jc_remote_health *h)
{
	h->state = state_name(r);
	h->url = r->url;
	h->read_only = r->read_only;
	h->masters = jc__redis_masters(r->redis);
	h->probe_rtt_us = r->probe_rtt_us;
	h->write_ok = r->read_only ? -1 : r->write_ok;
	h->last_error = r->last_error;
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
		lookup_finish(r->lookups, JC_EBUSY);
	jc__redis_close(r->redis);
	r->redis = NULL;
	uv_close((uv_handle_t *)&r->tick, tick_closed_cb);
}
