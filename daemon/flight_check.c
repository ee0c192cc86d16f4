/* SPDX-License-Identifier: MIT */
/*
 * A flight's result checked before publishing (daemon.h, "flight_check.c";
 * flight.c's publish job): the include files re-read when one changed just
 * before the compile, what NVRTC read against what the key covers (learning
 * the set that says it: ccache's depend mode), and where a name-free
 * request's result is stored (progname.h). Thread pool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/includes.h"
#include "common/log.h"
#include "core/key.h"
#include "core/progname.h"
#include "daemon/daemon.h"
#include "jitcache/jitcache.h"

/*
 * Thread pool, after the compile: an include set with a header changed
 * within the settle margin (a generated header) is stored only when reading
 * it again shows the bytes that were hashed (jc__inc_rehash); the settle
 * margin decides only whether the stat memo may be trusted.
 */
int jc__flight_rehashed(struct jc_flight *f, const struct jc_inc_set *set, char *what, size_t len)
{
	const struct jc_inc_ctx ctx = jc__daemon_inc_ctx(f->d);
	int rc = jc__inc_rehash(set, &ctx, what, len);
	if (rc == JC_ENOMEM)
		snprintf(what, len, "(out of memory re-reading %s)", set->unsettled_path);
	f->rehashed |= rc == 1;
	return rc;
}

/*
 * Thread pool, before publishing: does the key cover what NVRTC read (the
 * worker's record)? If not, and the request has an include set, learn the
 * set that says exactly that, store under its key and add it to the
 * manifest (ccache's depend mode); else the result is served, not stored.
 */
void jc__flight_check_deps(struct jc_flight *f)
{
	struct jc_daemon *d = f->d;
	char what[512] = "";
	int rc = jc__inc_covers(f->inc, f->res.deps, f->res.n_deps, what, sizeof(what));
	if (rc == 1)
		return;
	if (rc == 0 && f->req.tree_round) {
		/* Nothing to learn from: the client's files are not ours to read. */
		snprintf(f->errmsg, sizeof(f->errmsg),
			 "the compile read %s, which the client did not "
			 "send (its include scan missed it); not served",
			 what);
		f->tree_missing = 1;
		return;
	}
	if (rc == 0 && f->inc) {
		const struct jc_inc_ctx ctx = jc__daemon_inc_ctx(d);
		struct jc_inc_set learned;
		char err[256];
		char seen[512];
		snprintf(seen, sizeof(seen), "%s", what);
		rc = jc__inc_learn(f->inc, f->res.deps, f->res.n_deps, &ctx, &learned, what,
				   sizeof(what));
		if (rc == 1 && learned.unsettled &&
		    (rc = jc__flight_rehashed(f, &learned, what, sizeof(what))) == 0)
			snprintf(what + strlen(what), sizeof(what) - strlen(what),
				 " (changed just before the compile)");
		uint8_t tree[16];
		uint8_t lookup[16];
		if (rc == 1 && jc__inc_key_digest(&learned, &f->req.include_dirs, tree) == 0 &&
		    jc__key_with_tree(f->direct, tree, f->store_key) == 0 &&
		    jc__key_lookup(f->direct, &f->req.include_dirs, lookup) == 0) {
			if (jc__manifest_add(d->request.manifests, lookup, &learned, err,
					     sizeof(err)) != 0)
				jc_log_warn(KEY, "learnt include manifest not stored: %s", err);
			/* The fleet's copy, published beside the value (remote.h). */
			if (d->remote &&
			    jc__manifest_variant_encode(&learned, &f->record, &f->record_len) != 0)
				f->record = NULL;
			f->learned = 1;
			jc__inc_set_clear(&learned);
			snprintf(f->learned_from, sizeof(f->learned_from), "%s", seen);
			return;
		}
		jc__inc_set_clear(&learned);
		if (rc == 0 && what[0])
			snprintf(f->errmsg, sizeof(f->errmsg), "NVRTC read %s, which changed since",
				 what);
	}
	if (!f->errmsg[0])
		snprintf(f->errmsg, sizeof(f->errmsg),
			 "NVRTC read %s, which the key does not cover",
			 rc == JC_ENOMEM ? "files (out of memory checking them)" : what);
	f->deps_mismatch = 1;
}

/*
 * Thread pool, before publishing a name-free request's result (req.h): it
 * goes under its key without the name (store_key: free_key, or learnt) with
 * the program's name in the log made JC_NAME_STANDIN, when the name is
 * nowhere in it (progname.h); under that key's named key of the name's last
 * component when only that is in it (every name with it gets the same
 * bytes); else, as a compile error always, under its named key of the whole
 * name. The next request of such a name finds it there.
 */
void jc__flight_name_verdict(struct jc_flight *f)
{
	struct jc_res *res = &f->res;
	char *log = NULL;
	uint8_t base[16], full[16];
	int rc = res->status != 0 ? 0
				  : jc__progname_free(f->req.source_name, res->data, res->size,
						      res->lowered, res->n_lowered, res->log, &log);
	if (rc == 1 || rc == 2) {
		/* the name folded into a number, say: the name's alone */
		const struct jc_inc_ctx ctx = jc__daemon_inc_ctx(f->d);
		char what[600];
		int m = jc__inc_name_reach(&f->req, res->deps, f->req.tree_round ? 0 : res->n_deps,
					   &ctx, what, sizeof(what));
		if (m == 1)
			jc_log_debug(KEY, "%s: the result is bound to its program name", what);
		if (m != 0) {
			free(log);
			log = NULL;
			rc = m < 0 ? m : 0;
		}
	}
	int keys = rc >= 0 ? jc__progname_keys(f->store_key, f->req.source_name, base, full) : rc;
	if (keys < 0) {
		free(log);
		snprintf(f->errmsg, sizeof(f->errmsg),
			 "out of memory looking for the program name");
		return;
	}
	if (rc == 1 || rc == 2) {
		free(res->log);
		res->log = log;
	}
	if (rc != 1)
		memcpy(f->store_key, rc == 2 ? base : full, 16);
	f->name_bound = rc != 1;
}
