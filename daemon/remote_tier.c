/* SPDX-License-Identifier: MIT */
/*
 * The remote tier stack, one tier: the backends and the URLs they claim
 * (the --remote settings), a tier's health (up / degraded / down) and the
 * fleet locks it holds. See remote_internal.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/remote_internal.h"
#include "jitcache/jitcache.h"

/* Every backend, asked in this order which one claims a URL. */
extern const struct jc_remote_backend jc__remote_redis; /* remote_redis.c */
extern const struct jc_remote_backend jc__remote_file;	/* remote_file.c */
static const struct jc_remote_backend *const backends[] = {
    &jc__remote_redis,
    &jc__remote_file,
};
#define N_BACKENDS (sizeof(backends) / sizeof(backends[0]))

const struct jc_remote_backend *jc__remote_backend_of(const char *url)
{
	for (size_t i = 0; i < N_BACKENDS; i++)
		if (backends[i]->claims(url))
			return backends[i];
	return NULL;
}

/* --- settings ------------------------------------------------------------- */

int jc__remote_url_check(const char *url, char *err, size_t errlen)
{
	const struct jc_remote_backend *be = jc__remote_backend_of(url);
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

/* --- health ---------------------------------------------------------------- */

void jc__remote_unref(struct jc_remote *r)
{
	if (--r->refs > 0)
		return;
	for (size_t i = 0; i < r->n_tiers; i++)
		free(r->tiers[i].held);
	free(r->tiers);
	jc__remote_secret_free(r->secret, r->secret_len);
	free(r);
}

/* A transport failure: the storage did not answer in time or at all. The
 * third in a row takes the tier down until a probe answers; a failed probe
 * doubles the wait before the next. */
void jc__rtier_failed(struct tier *t, const char *what, const char *why)
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

void jc__rtier_answered(struct tier *t)
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
	jc__rtier_answered(t);
}

/* What an operation's rc says about the tier: answered (0, ENOTFOUND,
 * EBUSY), refused, or a transport failure. */
void jc__rtier_outcome(struct tier *t, const char *what, int rc, const char *why)
{
	if (rc == JC_EDENIED)
		error_reply(t, what, why);
	else if (rc == JC_EIO)
		jc__rtier_failed(t, what, why);
	else
		jc__rtier_answered(t);
}

/* --- fleet locks --------------------------------------------------------------- */

static int held_index(struct tier *t, const uint8_t key[16])
{
	for (size_t i = 0; i < t->n_held; i++)
		if (memcmp(t->held[i], key, 16) == 0)
			return (int)i;
	return -1;
}

void jc__rtier_hold(struct tier *t, const uint8_t key[16])
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
int jc__rtier_unhold(struct tier *t, const uint8_t key[16])
{
	int i = held_index(t, key);
	if (i < 0)
		return 0;
	memmove(t->held[i], t->held[i + 1], (t->n_held - (size_t)i - 1) * sizeof(*t->held));
	t->n_held--;
	return 1;
}

void jc__rtier_done(struct tier *t, const uint8_t key[16])
{
	if (jc__rtier_unhold(t, key) && !t->r->closing && !is_down(t))
		t->be->unlock(t->b, key);
}

void jc__remote_done(struct jc_remote *r, const uint8_t key[16])
{
	for (size_t i = 0; r && i < r->n_tiers; i++)
		jc__rtier_done(&r->tiers[i], key);
}
