/* SPDX-License-Identifier: MIT */
/*
 * Removal of entries, shared by purge, verify, gc (admin.c) and eviction
 * (evict_policy.c): collect the victims in a walk of the index, then remove
 * each row before its object, through the cache directory's tier. The
 * caller holds the writer index (tier.h).
 */
#ifndef JC_VICTIMS_H
#define JC_VICTIMS_H

#include "core/admin.h"

/* Entries chosen for removal, in the order collected. With by_uid the
 * removal is uid's: it leaves the entries' users (tier.h, remove_use), and an
 * entry goes only when no user is left. */
struct jc_victims {
	struct jc_entry *v; /* key, object, status, size, charge, last_access of each */
	size_t n, cap;
	uint64_t bytes;	      /* of ok victims' artifacts */
	uint64_t total_bytes; /* for to_size: charges (entry.h) still counted */
	uint64_t target;      /* to_size: stop once total_bytes <= target */
	int to_size;
	int by_uid;
	uint32_t uid;
	uint64_t gone; /* out: entries that left the cache */
};

/* A foreach callback (tier.h; ctx: struct jc_victims) that collects;
 * with to_size it returns 1 (stop) once total_bytes is down to target.
 * Returns 0, 1 or JC_ENOMEM. */
int jc__victims_collect_cb(const struct jc_entry *e, void *ctx);

/* Removes the victims (dry_run: none), each row before its object, the
 * object only when no row names it; out (may be NULL) gets a record per
 * victim (key, status, size), up to the list limit. Sets env->removed.
 * Returns 0 or an index/store error. Frees nothing: jc__victims_free. */
int jc__victims_remove(struct jc_admin_env *env, struct jc_victims *vs, int dry_run,
		       struct jc_admin_reply *out);
void jc__victims_free(struct jc_victims *vs);

#endif
