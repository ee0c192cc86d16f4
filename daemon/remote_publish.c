/* SPDX-License-Identifier: MIT */
/*
 * The remote tier stack, publishes: a result or dependency record encoded
 * once in the thread pool, then put to every tier that writes; promotions.
 * See remote.h and remote_internal.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "daemon/remote_internal.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

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
		jc__rtier_outcome(u->t, "SET", rc, why);
		if (rc == 0) {
			count(r, u->record ? JC_CTR_remote_deps_published : JC_CTR_remote_publishes,
			      1);
			count(r, JC_CTR_remote_bytes_out, u->len);
		}
	}
	free(u);
	jc__remote_unref(r);
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
	jc__remote_unref(r);
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
		if (jc__rtier_unhold(&r->tiers[i], key))
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

/* --- promotions ------------------------------------------------------------------ */

/*
 * A value found in a later tier goes to the earlier ones, as in any
 * multi-level cache: the next lookup of key on this machine or another that
 * shares an earlier tier stops there. The bytes are the verified value as
 * fetched (the format is the same in every tier; it is signed when the
 * fleet signs), so nothing is encoded again. Dependency records are not
 * promoted: they are checked by their user (cache.c), after the lookup.
 */
void jc__remote_promote(struct jc_remote *r, const struct tier *from, const uint8_t key[16],
			uint8_t *val, size_t len)
{
	struct publish p = {.r = r, .val = val, .len = len};
	size_t n = (size_t)(from - r->tiers), writers = 0;
	memcpy(p.key, key, 16);
	for (size_t i = 0; i < n; i++) {
		if (jc__rtier_unhold(&r->tiers[i], key))
			p.holds |= (uint64_t)1 << i;
		writers += !r->tiers[i].read_only && !is_down(&r->tiers[i]);
	}
	if (writers) {
		char hex[33];
		jc__hex16(key, hex);
		jc_log_info(REMOTE, "key %s: found in %s, written to %zu tier(s) before it", hex,
			    from->url, writers);
	}
	for (size_t i = 0; i < n; i++)
		put_one(&p, &r->tiers[i], i + 1 == n);
	free(p.val);
}
