/* SPDX-License-Identifier: MIT */
/*
 * The admin commands that remove (admin.h; the table is in admin.c): purge,
 * verify (a bad object's entry) and gc (expired negative entries, orphaned
 * objects), through victims.h.
 */
#include "core/admin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "core/admin_cmds.h"
#include "core/victims.h"
#include "jitcache/jitcache.h"

#define arg jc__admin_arg

/* purge: an admin removes entries; any other uid its use of them (an entry
 * goes when no uid uses it any more). */
int jc__admin_cmd_purge(struct jc_admin_env *env, const struct jc_admin_req *req,
			struct jc_admin_reply *out)
{
	struct jc_filter f = jc__admin_scope(env, JC_FILTER_ANY);
	struct jc_victims vs = {.by_uid = f.by_uid, .uid = f.uid};
	int64_t now = (int64_t)time(NULL), secs;
	uint8_t key[16];
	const char *v;
	int conditions = 0;
	if (arg(req, "all"))
		conditions++;
	if (arg(req, "negative"))
		f.status = JC_FILTER_FAILED, conditions++;
	if ((v = arg(req, "older_than"))) {
		if (jc__admin_parse_i64(v, &secs) != 0)
			return jc__admin_fail(out, JC_EINVAL, "bad --older-than '%s' (seconds)", v);
		f.created_before = now - secs, conditions++;
	}
	if ((v = arg(req, "unused_for"))) {
		if (jc__admin_parse_i64(v, &secs) != 0)
			return jc__admin_fail(out, JC_EINVAL, "bad --unused-for '%s' (seconds)", v);
		f.accessed_before = now - secs, conditions++;
	}
	if ((v = arg(req, "key"))) {
		if (jc__admin_resolve_key(env, "--key", v, 1, key, out) != 0)
			return out->status;
		f.key = key, conditions++;
	}
	if ((v = arg(req, "arch")))
		f.arch = v, conditions++;
	if (arg(req, "stale_versions"))
		f.versions_not = env->tc->summary, conditions++;
	if ((v = arg(req, "to_size"))) {
		int64_t target;
		struct jc_user_totals t;
		if (jc__admin_parse_i64(v, &target) != 0)
			return jc__admin_fail(out, JC_EINVAL, "bad --to-size '%s' (bytes)", v);
		vs.to_size = 1;
		vs.target = (uint64_t)target;
		int rc = jc__admin_scope_totals(env, &t);
		vs.total_bytes = t.stored;
		if (rc != 0)
			return jc__admin_fail(out, rc, "index: %s", jc__cachedir_errmsg(env->cd));
		conditions++;
	}
	if (!conditions)
		return jc__admin_fail(out, JC_EINVAL, "%s",
				      "purge needs a selection: --all, --negative, --older-than, "
				      "--unused-for, --key, --arch, --stale-versions or --to-size");
	int rc = env->cd->ops->foreach (env->cd, &f, jc__victims_collect_cb, &vs);
	if (rc == 1)
		rc = 0;
	int dry_run = arg(req, "dry_run") != NULL;
	rc = rc ?: jc__victims_remove(env, &vs, dry_run, out);
	if (rc == 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "%s %zu entries, %llu bytes%s",
			 dry_run ? "would remove" : "removed", vs.n, (unsigned long long)vs.bytes,
			 vs.n > JC_ADMIN_LIST_MAX ? " (the first ones listed)" : "");
		free(out->message);
		out->message = strdup(msg);
	}
	jc__victims_free(&vs);
	return rc;
}

/* --- verify and gc -------------------------------------------------------------- */

struct verify_ctx {
	struct jc_admin_env *env;
	struct jc_admin_reply *out;
	struct jc_victims bad;
	uint64_t checked;
};

static int verify_cb(const struct jc_entry *e, void *ctx)
{
	struct verify_ctx *v = ctx;
	v->checked++;
	int rc = v->env->cd->ops->verify(v->env->cd, e);
	if (rc == 0)
		return 0;
	struct jc_record *r;
	char hex[33], ohex[33];
	jc__hex16(e->key, hex);
	jc__hex16(e->object, ohex);
	int err = jc__reply_add_record(v->out, &r);
	err = err ?: jc__record_add_str(r, "key", hex);
	err = err ?: jc__record_add_str(r, "object", ohex);
	err = err ?: jc__record_add_str(r, "problem", rc == JC_ENOTFOUND ? "missing" : "corrupt");
	return err ?: jc__victims_collect_cb(e, &v->bad);
}

int jc__admin_cmd_verify(struct jc_admin_env *env, const struct jc_admin_req *req,
			 struct jc_admin_reply *out)
{
	(void)req;
	struct verify_ctx v = {.env = env, .out = out};
	struct jc_filter f = {.status = JC_FILTER_OK};
	int rc = env->cd->ops->foreach (env->cd, &f, verify_cb, &v);
	/* Repair: drop the rows and quarantine their objects, so the next
	 * request compiles afresh. */
	for (size_t i = 0; rc == 0 && i < v.bad.n; i++) {
		rc = env->cd->ops->remove_bad(env->cd, &v.bad.v[i]);
		env->removed = 1;
		env->corrupt++;
	}
	if (rc == 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "checked %llu objects, %zu bad (quarantined)",
			 (unsigned long long)v.checked, v.bad.n);
		free(out->message);
		out->message = strdup(msg);
		if (v.bad.n)
			out->status = JC_ECORRUPT;
	}
	jc__victims_free(&v.bad);
	return rc;
}

struct gc_ctx {
	struct jc_admin_reply *out;
	uint64_t removed, bytes;
};

static int gc_removed_cb(const char *path, uint64_t size, void *ctx)
{
	struct gc_ctx *g = ctx;
	g->removed++;
	g->bytes += size;
	struct jc_record *r;
	int rc = jc__reply_add_record(g->out, &r);
	rc = rc ?: jc__record_add_str(r, "removed", path);
	return rc ?: jc__record_add_int(r, "size", (int64_t)size);
}

int jc__admin_cmd_gc(struct jc_admin_env *env, const struct jc_admin_req *req,
		     struct jc_admin_reply *out)
{
	/* Expired negative entries first, then objects no row names. */
	struct jc_victims vs = {0};
	struct jc_filter f = {.status = JC_FILTER_FAILED, .expired_at = (int64_t)time(NULL)};
	(void)req;
	int rc = env->cd->ops->foreach (env->cd, &f, jc__victims_collect_cb, &vs);
	rc = rc ?: jc__victims_remove(env, &vs, 0, NULL);
	struct gc_ctx g = {.out = out};
	rc = rc ?: env->cd->ops->collect(env->cd, (int64_t)time(NULL), gc_removed_cb, &g);
	if (rc == 0) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "removed %zu expired negative entries, %llu orphaned objects (%llu bytes)",
			 vs.n, (unsigned long long)g.removed, (unsigned long long)g.bytes);
		free(out->message);
		out->message = strdup(msg);
	}
	free(vs.v);
	return rc;
}
