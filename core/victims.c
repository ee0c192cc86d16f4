/* SPDX-License-Identifier: MIT */
/* Removal of entries: see victims.h. */
#include "core/victims.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "jitcache/jitcache.h"

int jc__victims_collect_cb(const struct jc_entry *e, void *ctx)
{
	struct jc_victims *vs = ctx;
	if (vs->to_size && vs->total_bytes <= vs->target)
		return 1; /* LRU walk: the rest stays */
	if (vs->n == vs->cap) {
		size_t cap = vs->cap ? vs->cap * 2 : 64;
		struct jc_entry *p = realloc(vs->v, cap * sizeof(*p));
		if (!p)
			return JC_ENOMEM;
		vs->v = p;
		vs->cap = cap;
	}
	/* Keep what removal and the reply need; strings are not copied. */
	struct jc_entry *c = &vs->v[vs->n++];
	memset(c, 0, sizeof(*c));
	memcpy(c->key, e->key, 16);
	memcpy(c->object, e->object, 16);
	c->status = e->status;
	c->size = e->size;
	c->charge = e->charge;
	c->last_access = e->last_access;
	if (!e->status)
		vs->bytes += e->size;
	vs->total_bytes -= e->charge < vs->total_bytes ? e->charge : vs->total_bytes;
	return 0;
}

void jc__victims_free(struct jc_victims *vs)
{
	free(vs->v);
	vs->v = NULL;
	vs->n = vs->cap = 0;
}

/* Removes one victim: for a uid, its use of the entry, and the entry when no
 * user is left; *gone: 1 when the entry left the cache. */
static int remove_victim(struct jc_admin_env *env, const struct jc_victims *vs,
			 const struct jc_entry *e, int *gone)
{
	if (vs->by_uid)
		return env->cd->ops->remove_use(env->cd, e, vs->uid, gone);
	*gone = 1;
	return env->cd->ops->remove(env->cd, e);
}

/* unlink_ahead for victims from..n; 1 when any object went. */
static int unlink_ahead(struct jc_admin_env *env, const struct jc_victims *vs, size_t from)
{
	int any = 0;
	for (size_t j = from; j < vs->n; j++)
		any |= env->cd->ops->unlink_ahead(env->cd, &vs->v[j]);
	if (any)
		jc_log_warn(STORE,
			    "disk full and no reserve left: removed the objects of the entries "
			    "being removed ahead of their rows");
	return any;
}

int jc__victims_remove(struct jc_admin_env *env, struct jc_victims *vs, int dry_run,
		       struct jc_admin_reply *out)
{
	int rc = 0, gone = 0;
	for (size_t i = 0; rc == 0 && i < vs->n; i++) {
		if (!dry_run)
			rc = remove_victim(env, vs, &vs->v[i], &gone);
		/* A full disk: deleting a row (or a use of it) needs room in the
		 * write-ahead log. The reserve gives it (the tier's remove and
		 * remove_use take it themselves); it is made again at the end.
		 * No reserve left: the objects of the entries that go free the
		 * room, ahead of their rows (tier.h, unlink_ahead). */
		if (rc == JC_ENOSPC && !vs->by_uid && unlink_ahead(env, vs, i))
			rc = remove_victim(env, vs, &vs->v[i], &gone);
		vs->gone += !dry_run && rc == 0 && gone;
		if (out && rc == 0 && i < JC_ADMIN_LIST_MAX) {
			struct jc_record *r;
			char hex[33];
			jc__hex16(vs->v[i].key, hex);
			rc = jc__reply_add_record(out, &r);
			rc = rc ?: jc__record_add_str(r, "key", hex);
			rc = rc
				 ?: jc__record_add_str(r, "status",
						       vs->v[i].status ? "failed" : "ok");
			rc = rc ?: jc__record_add_int(r, "size", (int64_t)vs->v[i].size);
		}
	}
	if (!dry_run && vs->n) {
		env->removed = 1;
		/* The pages the rows held go back to the file system, and a
		 * reserve taken comes back. */
		env->cd->ops->reclaim(env->cd, rc == 0);
	}
	return rc;
}
