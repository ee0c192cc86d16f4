/* SPDX-License-Identifier: MIT */
/*
 * The remote tier: an ordered list of backends (remote_backend.h) behind the
 * local store, and everything they share: lookups with the fleet lock
 * (remote_lookup.c), publishes (remote_publish.c), health and back-off
 * (remote_tier.c), counters and stats. This file holds the handle: start,
 * probes and the tick, health and stats, close. See remote.h and
 * remote_internal.h.
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/remote_internal.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

#define BACKOFF_MAX_MS	5000
#define TICK_MS		250
#define HEALTH_EVERY_NS 10000000000ull
#define LOCK_RENEW_NS	3000000000ull /* held fleet locks are renewed this often */
#define SECRET_MIN	16
#define SECRET_MAX	4096

static const char *state_name(const struct tier *t)
{
	return t->fails == 0 ? "up" : t->fails < FAILS_DOWN ? "degraded" : "down";
}

/* The backends' report of a failure without a callback (remote_backend.h). */
static void backend_failed(void *arg, const char *what, const char *why)
{
	struct tier *t = arg;
	if (!t->r->closing)
		jc__rtier_failed(t, what, why);
}

/* A probe failed while down: wait twice as long before the next. */
static void probe_failed(struct tier *t)
{
	if (t->fails < FAILS_DOWN)
		return;
	t->backoff_ms = t->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : t->backoff_ms * 2;
	t->next_probe_ns = now_ns() + (uint64_t)t->backoff_ms * 1000000u;
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
			jc__rtier_outcome(t, "probe write", rc, why);
	}
	jc__remote_unref(r);
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
			jc__rtier_outcome(t, "PING", rc == JC_EDENIED ? rc : JC_EIO, why);
			probe_failed(t);
		} else {
			t->probe_rtt_us = (int64_t)((now_ns() - p->t0) / 1000);
			jc__rtier_answered(t);
			if (!t->read_only) {
				r->refs++;
				if (t->be->probe(t->b, 1, probe_write_cb, t) != 0)
					r->refs--;
			}
		}
	}
	free(p);
	jc__remote_unref(r);
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
	jc__remote_unref(h->data);
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
		const struct jc_remote_backend *be = jc__remote_backend_of(cfg->urls[i]);
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
 * each tier's state, and the round trip, write permission and last error of
 * the worst tier. */
void jc__remote_health(struct jc_remote *r, struct jc_remote_health *h)
{
	char *urls = r->urls;
	const struct tier *worst = &r->tiers[0];
	size_t n = 0, ns = 0;
	urls[0] = '\0';
	r->states[0] = '\0';
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
		ns += (size_t)snprintf(r->states + ns, sizeof(r->states) - ns, "%s%s", i ? " " : "",
				       state_name(t));
	}
	h->state = state_name(worst);
	h->url = urls;
	h->probe_rtt_us = worst->probe_rtt_us;
	h->write_ok = h->read_only ? -1 : worst->read_only ? -1 : worst->write_ok;
	h->states = r->states;
	h->last_error = worst->last_error;
	if (r->n_tiers > 1 && worst->last_error[0]) {
		snprintf(r->last_error, sizeof(r->last_error), "%s: %s", worst->url,
			 worst->last_error);
		h->last_error = r->last_error;
	}
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
	rc = rc ?: jc__record_add_str(rec, "remote_tier_states", h.states);
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
	jc__remote_lookups_cancel(r);
	for (size_t i = 0; i < r->n_tiers; i++)
		r->tiers[i].be->close(r->tiers[i].b);
	uv_close((uv_handle_t *)&r->tick, tick_closed_cb);
}
