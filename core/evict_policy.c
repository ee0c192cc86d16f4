/* SPDX-License-Identifier: MIT */
/* The eviction policy: see evict.h. */
#include "core/evict.h"

#include <stdlib.h>

#include "core/victims.h"
#include "jitcache/jitcache.h"

uint64_t jc__evict_mark(uint64_t max_size, unsigned pct)
{
	return max_size / 100 * pct + max_size % 100 * pct / 100;
}

/* Collects in f's LRU order down to target bytes (of total), then removes;
 * adds the entries that left the cache to env->evicted, and, for a uid's
 * share, the entries it dropped to env->user_evicted. */
static int evict(struct jc_admin_env *env, struct jc_victims *vs, const struct jc_filter *f)
{
	int rc = env->cd->ops->foreach (env->cd, f, jc__victims_collect_cb, vs);
	if (rc == 1)
		rc = 0;
	rc = rc ?: jc__victims_remove(env, vs, 0, NULL);
	env->evicted += vs->gone;
	if (vs->by_uid && rc == 0)
		env->user_evicted += vs->n;
	jc__victims_free(vs);
	return rc;
}

int jc__evict_to(struct jc_admin_env *env, uint64_t target)
{
	struct jc_tier_health h;
	int rc = env->cd->ops->health(env->cd, &h);
	if (rc != 0 || h.stored <= target)
		return rc;
	struct jc_victims vs = {.to_size = 1, .target = target, .total_bytes = h.stored};
	return evict(env, &vs, NULL);
}

int jc__evict_user_to(struct jc_admin_env *env, uint32_t uid, uint64_t target)
{
	struct jc_user_totals t;
	int rc = env->cd->ops->user_usage(env->cd, uid, &t);
	if (rc != 0 || t.stored <= target)
		return rc;
	struct jc_victims vs = {
	    .to_size = 1, .target = target, .total_bytes = t.stored, .by_uid = 1, .uid = uid};
	struct jc_filter f = {.by_uid = 1, .uid = uid};
	return evict(env, &vs, &f);
}

struct over {
	uint32_t *uids;
	size_t n, cap;
	uint64_t high;
};

static int over_cb(const struct jc_user_totals *t, void *ctx)
{
	struct over *o = ctx;
	if (t->stored <= o->high)
		return 0;
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 16;
		uint32_t *p = realloc(o->uids, cap * sizeof(*p));
		if (!p)
			return JC_ENOMEM;
		o->uids = p;
		o->cap = cap;
	}
	o->uids[o->n++] = t->uid;
	return 0;
}

int jc__evict_run(struct jc_admin_env *env, uint64_t max_size, uint64_t share)
{
	int rc = 0;
	if (share) {
		/* Users over their share first, each by its own access order. */
		struct over o = {.high = jc__evict_mark(share, JC_EVICT_HIGH_PCT)};
		uint64_t low = jc__evict_mark(share, JC_EVICT_LOW_PCT);
		rc = env->cd->ops->foreach_user(env->cd, over_cb, &o);
		for (size_t i = 0; rc == 0 && i < o.n; i++)
			rc = jc__evict_user_to(env, o.uids[i], low);
		free(o.uids);
	}
	/* The budget: the entries' charges and what the directory holds besides
	 * them (index, WAL, reserve, manifests, directories). */
	struct jc_tier_health h = {0};
	uint64_t overhead = 0;
	rc = rc ?: env->cd->ops->health(env->cd, &h);
	rc = rc ?: env->cd->ops->overhead(env->cd, &overhead);
	uint64_t low = jc__evict_mark(max_size, JC_EVICT_LOW_PCT);
	if (rc == 0 && h.stored + overhead > jc__evict_mark(max_size, JC_EVICT_HIGH_PCT))
		rc = jc__evict_to(env, low > overhead ? low - overhead : 0);
	return rc;
}
