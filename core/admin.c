/* SPDX-License-Identifier: MIT */
#include "core/admin.h"
#include "core/evict.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "config.h"
#include "core/victims.h"
#include "jitcache/jitcache.h"

const char *jc__admin_arg(const struct jc_admin_req *req, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < req->args.n; i++) {
		const char *a = req->args.v[i];
		if (strncmp(a, name, n) == 0 && (a[n] == '\0' || a[n] == '='))
			return a[n] ? a + n + 1 : "";
	}
	return NULL;
}

#define arg jc__admin_arg

static int fail(struct jc_admin_reply *out, int code, const char *fmt, const char *what)
{
	char msg[512];
	snprintf(msg, sizeof(msg), fmt, what);
	out->status = code;
	free(out->message);
	out->message = strdup(msg);
	return code;
}

static int parse_i64(const char *s, int64_t *v)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return JC_EINVAL;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (*end || errno == ERANGE)
		return JC_EINVAL;
	*v = x;
	return 0;
}

int jc__admin_arg_count(const struct jc_admin_req *req, const char *name, int64_t *v)
{
	const char *s = jc__admin_arg(req, name);
	return s ? parse_i64(s, v) : 0;
}

/* What a caller who is not an admin sees for a shared entry's source name
 * and options when another uid made the entry. */
#define OTHERS_TEXT "(another user's)"

/* Whether e's source name and options are another uid's to this caller: a
 * name-free key (the NVRTC shim's) and client-read -I trees leave the
 * program name and the -I directories out of the key, so a shared entry
 * holds its maker's (its kept request's uid; with none kept, any entry
 * another uid uses too). Sets *hide; 0 or index errors. */
static int made_by_other(struct jc_admin_env *env, const uint8_t key[16], int *hide)
{
	struct jc_kept k;
	uint64_t n = 0;
	*hide = 0;
	if (env->all_users)
		return 0;
	int rc = env->cd->ops->request_of(env->cd, key, &k);
	if (rc == 0)
		*hide = k.uid != env->uid;
	else if (rc == JC_ENOTFOUND && (rc = env->cd->ops->users_of(env->cd, key, NULL, &n)) == 0)
		*hide = n > 1;
	return rc;
}

/* Adds the fields common to ls and show (hide: made_by_other's). */
static int entry_fields(struct jc_record *r, const struct jc_entry *e, int hide)
{
	char hex[33], ohex[33];
	jc__hex16(e->key, hex);
	jc__hex16(e->object, ohex);
	int rc = jc__record_add_str(r, "key", hex);
	rc = rc ?: jc__record_add_str(r, "status", e->status ? "failed" : "ok");
	rc = rc
		 ?: jc__record_add_str(r, "kind",
				       e->status ? "negative" : jc__output_name(e->output));
	rc = rc ?: jc__record_add_str(r, "arch", e->arch);
	rc = rc ?: jc__record_add_int(r, "size", (int64_t)e->size);
	rc = rc ?: jc__record_add_int(r, "hits", (int64_t)e->hits);
	rc = rc ?: jc__record_add_int(r, "created", e->created);
	rc = rc ?: jc__record_add_int(r, "last_access", e->last_access);
	rc = rc ?: jc__record_add_str(r, "source_name", hide ? OTHERS_TEXT : e->source_name);
	return rc;
}

static int ls_cb(const struct jc_entry *e, void *ctx)
{
	struct jc_admin_env *env = ((void **)ctx)[0];
	struct jc_admin_reply *out = ((void **)ctx)[1];
	struct jc_record *r;
	int hide;
	if (out->n_rec == JC_ADMIN_LIST_MAX)
		return 1;
	int rc = made_by_other(env, e->key, &hide);
	rc = rc ?: jc__reply_add_record(out, &r);
	return rc ?: entry_fields(r, e, hide);
}

/* Which entries a caller sees: all for an admin, else those it uses. */
static struct jc_filter scope(const struct jc_admin_env *env, int status)
{
	return (struct jc_filter){.status = status, .by_uid = !env->all_users, .uid = env->uid};
}

/* The entries, failed entries and bytes the caller sees. */
static int scope_totals(struct jc_admin_env *env, struct jc_user_totals *t)
{
	if (!env->all_users)
		return env->cd->ops->user_usage(env->cd, env->uid, t);
	struct jc_tier_health h;
	int rc = env->cd->ops->health(env->cd, &h);
	*t = (struct jc_user_totals){.entries = h.entries,
				     .negative = h.negative_entries,
				     .bytes = h.bytes,
				     .stored = h.stored};
	return rc;
}

static int cmd_ls(struct jc_admin_env *env, const struct jc_admin_req *req,
		  struct jc_admin_reply *out)
{
	struct jc_filter f = scope(env, JC_FILTER_ANY);
	struct jc_user_totals t;
	void *ctx[2] = {env, out};
	(void)req;
	int rc = env->cd->ops->foreach (env->cd, &f, ls_cb, ctx);
	if (rc == 1 && (rc = scope_totals(env, &t)) == 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "listed the %d least recently used of %llu entries",
			 JC_ADMIN_LIST_MAX, (unsigned long long)t.entries);
		out->message = strdup(msg);
	}
	return rc;
}

/* For admins: "users", the uids an entry has (comma-separated). */
static int add_users(struct jc_admin_env *env, struct jc_record *r, const uint8_t key[16])
{
	uint32_t uids[64];
	uint64_t n = 64;
	char text[64 * 11 + 16] = "";
	size_t len = 0;
	int rc = env->cd->ops->users_of(env->cd, key, uids, &n);
	for (uint64_t i = 0; rc == 0 && i < n && i < 64; i++)
		len +=
		    (size_t)snprintf(text + len, sizeof(text) - len, "%s%u", i ? "," : "", uids[i]);
	if (rc == 0 && n > 64)
		snprintf(text + len, sizeof(text) - len, ",...");
	return rc ?: jc__record_add_str(r, "users", text);
}

/* Fewest hex digits of a key prefix: one (an ambiguous one lists at most 10 keys). */
#define KEY_PREFIX_MIN 1

/*
 * A key argument (JC_ARG_KEY): 32 hex digits as they are, or a unique prefix
 * of the keys the caller may see (all for an admin, else the caller's own: a
 * prefix of another user's key finds nothing, as the full key would). Fills
 * key and returns 0; else fills out: JC_ENOTFOUND (no key begins so),
 * JC_EINVAL (not 1-32 hex digits, or ambiguous: the matching keys listed).
 * With absent_ok a prefix that nothing begins with gives 0 and the prefix
 * padded with zeros: a key the caller has none of (it begins so), which
 * selects nothing, as a full key nobody has.
 */
static int resolve_key(struct jc_admin_env *env, const char *what, const char *text, int absent_ok,
		       uint8_t key[16], struct jc_admin_reply *out)
{
	uint8_t keys[11][16];
	size_t n = sizeof(keys) / sizeof(*keys), len = text ? strlen(text) : 0;
	char msg[512], hex[33];
	if (len == 32 && jc__unhex16(text, key) == 0)
		return 0;
	if (len < KEY_PREFIX_MIN || len > 32 || strspn(text, "0123456789abcdefABCDEF") != len) {
		snprintf(msg, sizeof(msg),
			 "bad %s '%s': a key (32 hex digits) or a unique prefix of one "
			 "(at least %d)",
			 what, text ? text : "", KEY_PREFIX_MIN);
		return fail(out, JC_EINVAL, "%s", msg);
	}
	int rc = env->cd->ops->find_keys(env->cd, text, env->all_users ? -1 : (int64_t)env->uid,
					 keys, &n);
	if (rc != 0)
		return fail(out, rc, "index: %s", jc__cachedir_errmsg(env->cd));
	if (n == 0 && absent_ok) {
		snprintf(hex, sizeof(hex), "%s%.*s", text, (int)(32 - len),
			 "00000000000000000000000000000000");
		return jc__unhex16(hex, key);
	}
	if (n == 0)
		return fail(out, JC_ENOTFOUND, "no entry with key %s", text);
	if (n == 1) {
		memcpy(key, keys[0], 16);
		return 0;
	}
	int at = snprintf(msg, sizeof(msg), "%s %s is ambiguous: it begins %s%zu keys:", what, text,
			  n > 10 ? "more than " : "", n > 10 ? (size_t)10 : n);
	for (size_t i = 0; i < n && i < 10 && at > 0 && (size_t)at < sizeof(msg); i++) {
		jc__hex16(keys[i], hex);
		at += snprintf(msg + at, sizeof(msg) - (size_t)at, "\n  %s", hex);
	}
	return fail(out, JC_EINVAL, "%s", msg);
}

static int cmd_show(struct jc_admin_env *env, const struct jc_admin_req *req,
		    struct jc_admin_reply *out)
{
	uint8_t key[16];
	const char *k = arg(req, "key");
	if (!k)
		return fail(out, JC_EINVAL, "%s", "a key (or a unique prefix of one) is needed");
	if (resolve_key(env, "key", k, 0, key, out) != 0)
		return out->status;
	struct jc_entry e = {0};
	/* Another uid's key answers as a key nobody has (tier.h, lookup_for). */
	int rc =
	    env->cd->ops->lookup_for(env->cd, key, env->all_users ? -1 : (int64_t)env->uid, &e);
	if (rc == JC_ENOTFOUND)
		return fail(out, rc, "no entry with key %s", k);
	struct jc_record *r;
	char ohex[33];
	int hide = 0;
	jc__hex16(e.object, ohex);
	rc = rc ?: made_by_other(env, key, &hide);
	rc = rc ?: jc__reply_add_record(out, &r);
	rc = rc ?: entry_fields(r, &e, hide);
	rc = rc ?: jc__record_add_str(r, "object", e.status ? "" : ohex);
	rc = rc ?: jc__record_add_str(r, "options", hide ? OTHERS_TEXT : e.options);
	rc = rc ?: jc__record_add_str(r, "versions", e.versions);
	rc = rc ?: jc__record_add_str(r, "app_abi", e.app_abi);
	rc = rc ?: jc__record_add_int(r, "compile_us", (int64_t)(e.compile_ns / 1000u));
	rc = rc ?: jc__record_add_str(r, "error", e.error ? jc_strerror(e.error) : "");
	rc = rc ?: jc__record_add_int(r, "expires", e.expires);
	for (size_t i = 0; rc == 0 && i < e.n_lowered; i++) {
		char name[32];
		snprintf(name, sizeof(name), "lowered.%zu", i);
		size_t n = strlen(e.lowered[i].expr) + strlen(e.lowered[i].lowered) + 2;
		char *v = malloc(n);
		if (!v) {
			rc = JC_ENOMEM;
			break;
		}
		snprintf(v, n, "%s\t%s", e.lowered[i].expr, e.lowered[i].lowered);
		rc = jc__record_add_str(r, name, v);
		free(v);
	}
	rc = rc ?: jc__record_add_str(r, "log", e.log);
	if (rc == 0 && env->all_users)
		rc = add_users(env, r, key);
	jc__entry_clear(&e);
	return rc;
}

static int by_user_cb(const struct jc_user_totals *t, void *ctx)
{
	struct jc_admin_env *env = ((void **)ctx)[0];
	struct jc_admin_reply *out = ((void **)ctx)[1];
	struct jc_record *r;
	if (out->n_rec == JC_ADMIN_LIST_MAX)
		return 1;
	int rc = jc__reply_add_record(out, &r);
	rc = rc ?: jc__record_add_u64(r, "uid", t->uid);
	rc = rc ?: jc__record_add_u64(r, "entries", t->entries - t->negative);
	rc = rc ?: jc__record_add_u64(r, "negative_entries", t->negative);
	rc = rc ?: jc__record_add_u64(r, "bytes", t->bytes);
	rc = rc ?: jc__record_add_u64(r, "stored_bytes", t->stored);
	rc = rc ?: jc__record_add_u64(r, "hits", t->hits);
	rc = rc ?: jc__record_add_u64(r, "user_max_size", env->user_max_size);
	return rc
		   ?: jc__record_add_int(r, "over_share",
					 env->user_max_size && t->stored > env->user_max_size);
}

/* stats --by-user (admins): one record per uid that uses an entry. */
static int stats_by_user(struct jc_admin_env *env, struct jc_admin_reply *out)
{
	void *ctx[2] = {env, out};
	int rc = env->cd->ops->foreach_user(env->cd, by_user_cb, ctx);
	return rc == 1 ? 0 : rc;
}

/* The fields every caller sees: the store as the caller sees it, the budget,
 * versions, the daemon. */
static int stats_common(struct jc_admin_env *env, struct jc_record *r,
			const struct jc_user_totals *t)
{
	int rc = jc__record_add_u64(r, "entries", t->entries - t->negative); /* artifacts */
	rc = rc ?: jc__record_add_u64(r, "negative_entries", t->negative);
	rc = rc ?: jc__record_add_u64(r, "bytes", t->bytes);
	rc = rc ?: jc__record_add_u64(r, "stored_bytes", t->stored);
	rc = rc ?: jc__record_add_u64(r, "max_size", env->max_size);
	rc = rc ?: jc__record_add_u64(r, "user_max_size", env->user_max_size);
	/* A full disk: hits are served, nothing is stored until space returns. */
	uint64_t free_bytes;
	int full = env->cd->ops->disk_full(env->cd, &free_bytes);
	rc = rc ?: jc__record_add_int(r, "disk_full", full);
	rc = rc
		 ?: jc__record_add_int(r, "disk_free_bytes",
				       free_bytes > INT64_MAX ? -1 : (int64_t)free_bytes);
	rc = rc ?: jc__record_add_int(r, "uptime_s", env->uptime_s);
	rc = rc ?: jc__record_add_int(r, "daemon_pid", env->daemon_pid);
	rc = rc ?: jc__record_add_str(r, "version", JC_VERSION);
	rc = rc ?: jc__record_add_str(r, "nvrtc_version", env->tc->nvrtc_version);
	rc = rc ?: jc__record_add_str(r, "nvjitlink_version", env->tc->nvjitlink_version);
	rc = rc ?: jc__record_add_str(r, "driver_version", env->tc->driver_version);
	return rc
		   ?: jc__record_add_str(r, "confinement",
					 env->confinement ? env->confinement : "offline");
}

/* Kept requests and the toolchain identities: this process's and the one
 * the cache recorded before the daemon started (tier.h,
 * jc__cachedir_identity). */
static int stats_identity(struct jc_admin_env *env, struct jc_record *r)
{
	struct jc_tier_health h;
	char recorded[sizeof(env->tc->summary)] = "";
	const char *cache_identity = env->cache_identity;
	int rc = env->cd->ops->health(env->cd, &h);
	if (rc == 0 && !cache_identity) {
		/* offline: what the last daemon recorded */
		rc = jc__cachedir_identity(env->cd, recorded, sizeof(recorded));
		rc = rc == JC_ENOTFOUND ? 0 : rc;
		cache_identity = recorded;
	}
	rc = rc ?: jc__record_add_u64(r, "requests_kept", h.requests);
	rc = rc ?: jc__record_add_u64(r, "request_bytes", h.request_bytes);
	rc = rc ?: jc__record_add_int(r, "keep_requests", env->keep_requests);
	rc = rc ?: jc__record_add_str(r, "identity", env->tc->summary);
	return rc ?: jc__record_add_str(r, "cache_identity", cache_identity);
}

/*
 * stats. An admin gets the daemon's counters and figures; any other uid its
 * own entries, failed entries, bytes and hits (scope "uid N"), the budget and
 * the versions, and nothing counted over all users (ARCHITECTURE.md,
 * "Per-user visibility").
 */
static int cmd_stats(struct jc_admin_env *env, const struct jc_admin_req *req,
		     struct jc_admin_reply *out)
{
	if (arg(req, "by_user"))
		return stats_by_user(env, out);
	struct jc_user_totals t;
	struct jc_record *r;
	int rc = scope_totals(env, &t);
	rc = rc ?: jc__reply_add_record(out, &r);
	if (rc == 0 && !env->all_users) {
		char scope_name[32];
		snprintf(scope_name, sizeof(scope_name), "uid %u", env->uid);
		rc = jc__record_add_str(r, "scope", scope_name);
		rc = rc ?: jc__record_add_u64(r, "hits", t.hits);
		return rc ?: stats_common(env, r, &t);
	}
	rc = rc ?: jc__record_add_str(r, "scope", "all");
	uint64_t overhead = 0;
	rc = rc ?: env->cd->ops->overhead(env->cd, &overhead);
	rc = rc ?: jc__record_add_u64(r, "overhead_bytes", overhead);
	for (int i = 0; rc == 0 && i < JC_CTR__COUNT; i++)
		rc = jc__record_add_u64(r, jc__counter_names[i], env->counters[i]);
	rc = rc ?: stats_common(env, r, &t);
	rc = rc
		 ?: jc__record_add_u64(r, "evict_high_water",
				       jc__evict_mark(env->max_size, JC_EVICT_HIGH_PCT));
	rc = rc
		 ?: jc__record_add_u64(r, "evict_low_water",
				       jc__evict_mark(env->max_size, JC_EVICT_LOW_PCT));
	rc = rc ?: jc__record_add_int(r, "hit_p50_us", (int64_t)((env->hit_p50_ns + 500) / 1000));
	rc = rc ?: jc__record_add_int(r, "hit_p99_us", (int64_t)((env->hit_p99_ns + 500) / 1000));
	rc = rc ?: jc__record_add_u64(r, "hit_latency_samples", env->hit_samples);
	rc = rc ?: jc__record_add_u64(r, "hit_latency_sum_ns", env->hit_sum_ns);
	rc = rc ?: jc__record_add_int(r, "hit_latency_since", env->hit_latency_since);
	rc = rc ?: jc__record_add_int(r, "include_watch_trees", (int64_t)env->watch_trees);
	rc = rc ?: jc__record_add_int(r, "include_watches", (int64_t)env->watch_count);
	rc = rc ?: jc__record_add_int(r, "include_watch_bytes", (int64_t)env->watch_bytes);
	rc = rc ?: jc__record_add_str(r, "cache_dir", env->cd->dir);
	rc = rc ?: stats_identity(env, r);
	if (rc == 0 && arg(req, "zero")) {
		env->zero_counters = 1;
		if (env->daemon_pid == 0) {
			uint64_t zeros[JC_CTR__COUNT] = {0};
			rc = jc__cachedir_save_counters(env->cd, zeros);
		}
	}
	return rc;
}

static int cmd_ping(struct jc_admin_env *env, const struct jc_admin_req *req,
		    struct jc_admin_reply *out)
{
	struct jc_record *r;
	(void)req;
	int rc = jc__reply_add_record(out, &r);
	return rc ?: jc__record_add_int(r, "pid", env->daemon_pid);
}

static int cmd_version(struct jc_admin_env *env, const struct jc_admin_req *req,
		       struct jc_admin_reply *out)
{
	(void)req;
	const struct jc_toolchain *tc = env->tc;
	struct jc_record *r;
	int rc = jc__reply_add_record(out, &r);
	rc = rc ?: jc__record_add_str(r, "jitcache", JC_VERSION);
	rc = rc ?: jc__record_add_int(r, "protocol", JC_PROTO_VERSION);
	rc = rc ?: jc__record_add_str(r, "nvrtc_version", tc->nvrtc_version);
	rc = rc ?: jc__record_add_str(r, "nvrtc_id", tc->nvrtc_id);
	rc = rc ?: jc__record_add_str(r, "nvrtc_builtins_id", tc->nvrtc_builtins_id);
	if (env->policy) { /* the daemon: which NVRTC builds applications asked it for */
		char builds[JC_OTHER_BUILDS * 120];
		jc__req_builds(env->policy, builds, sizeof(builds));
		rc = rc ?: jc__record_add_str(r, "nvrtc_builds", builds);
	}
	rc = rc ?: jc__record_add_str(r, "nvjitlink_version", tc->nvjitlink_version);
	rc = rc ?: jc__record_add_str(r, "nvjitlink_id", tc->nvjitlink_id);
	rc = rc ?: jc__record_add_str(r, "driver_version", tc->driver_version);
	rc = rc ?: jc__record_add_str(r, "driver_build", tc->driver_build);
	rc = rc ?: jc__record_add_str(r, "toolkit_include", tc->toolkit_include);
	rc = rc ?: jc__record_add_str(r, "toolkit_include_id", tc->toolkit_include_id);
	rc = rc ?: jc__record_add_str(r, "supported_archs", tc->supported_archs);
	rc = rc
		 ?: jc__record_add_str(r, "fatbin_tool",
				       tc->fatbin_path[0] ? tc->fatbin_path : "none");
	rc = rc ?: jc__record_add_str(r, "fatbin_id", tc->fatbin_id);
	rc = rc ?: jc__record_add_int(r, "daemon_pid", env->daemon_pid);
	return rc;
}

/* purge: an admin removes entries; any other uid its use of them (an entry
 * goes when no uid uses it any more). */
static int cmd_purge(struct jc_admin_env *env, const struct jc_admin_req *req,
		     struct jc_admin_reply *out)
{
	struct jc_filter f = scope(env, JC_FILTER_ANY);
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
		if (parse_i64(v, &secs) != 0)
			return fail(out, JC_EINVAL, "bad --older-than '%s' (seconds)", v);
		f.created_before = now - secs, conditions++;
	}
	if ((v = arg(req, "unused_for"))) {
		if (parse_i64(v, &secs) != 0)
			return fail(out, JC_EINVAL, "bad --unused-for '%s' (seconds)", v);
		f.accessed_before = now - secs, conditions++;
	}
	if ((v = arg(req, "key"))) {
		if (resolve_key(env, "--key", v, 1, key, out) != 0)
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
		if (parse_i64(v, &target) != 0)
			return fail(out, JC_EINVAL, "bad --to-size '%s' (bytes)", v);
		vs.to_size = 1;
		vs.target = (uint64_t)target;
		int rc = scope_totals(env, &t);
		vs.total_bytes = t.stored;
		if (rc != 0)
			return fail(out, rc, "index: %s", jc__cachedir_errmsg(env->cd));
		conditions++;
	}
	if (!conditions)
		return fail(out, JC_EINVAL, "%s",
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

static int cmd_verify(struct jc_admin_env *env, const struct jc_admin_req *req,
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

static int cmd_gc(struct jc_admin_env *env, const struct jc_admin_req *req,
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

/* --- export (jitcachectl export) ------------------------------------------- */

/* The bytes of kept requests one export reply carries at most (hex doubles
 * them; a frame holds 64 MiB). */
#define EXPORT_MAX_BYTES (24u << 20)

struct export_ctx {
	struct jc_admin_env *env;
	struct jc_admin_reply *out;
	int64_t *seen; /* requests exported (several entries may share one) */
	size_t n, cap;
	uint64_t bytes;
	int cut;
};

static int export_cb(const struct jc_kept *k, void *ctx)
{
	struct export_ctx *x = ctx;
	for (size_t i = 0; i < x->n; i++)
		if (x->seen[i] == k->id)
			return 0;
	if (x->bytes + k->size > EXPORT_MAX_BYTES) {
		x->cut = 1;
		return 1;
	}
	if (x->n == x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 64;
		void *p = realloc(x->seen, cap * sizeof(*x->seen));
		if (!p)
			return JC_ENOMEM;
		x->seen = p;
		x->cap = cap;
	}
	x->seen[x->n++] = k->id;
	uint8_t *data;
	size_t size;
	int rc = x->env->cd->ops->request_data(x->env->cd, k->id, &data, &size);
	if (rc != 0)
		return rc;
	char *hex = malloc(2 * size + 1), key[33];
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; hex && i < size; i++) {
		hex[2 * i] = digits[data[i] >> 4];
		hex[2 * i + 1] = digits[data[i] & 15];
	}
	free(data);
	if (!hex)
		return JC_ENOMEM;
	hex[2 * size] = '\0';
	jc__hex16(k->key, key);
	struct jc_record *r;
	rc = jc__reply_add_record(x->out, &r);
	rc = rc ?: jc__record_add_str(r, "key", key);
	rc = rc ?: jc__record_add_int(r, "uid", k->uid);
	rc = rc ?: jc__record_add_str(r, "source_name", k->source_name);
	rc = rc ?: jc__record_add_str(r, "versions", k->versions);
	rc = rc ?: jc__record_add_u64(r, "hits", k->hits);
	rc = rc ?: jc__record_add_str(r, "request", hex);
	free(hex);
	x->bytes += size;
	return rc;
}

/*
 * export: the kept requests (kept.h), most valuable first, each once: one
 * record per request with its compressed bytes in hex. An admin exports
 * every uid's, or uid's with --uid; any other uid the requests it made
 * (entry.h: a request names its maker's files). jitcachectl signs and
 * writes them.
 */
static int cmd_export(struct jc_admin_env *env, const struct jc_admin_req *req,
		      struct jc_admin_reply *out)
{
	int64_t top = 0, uid = -1;
	if (arg(req, "top") && parse_i64(arg(req, "top"), &top) != 0)
		return fail(out, JC_EINVAL, "bad --top '%.32s': a count", arg(req, "top"));
	if (arg(req, "uid") && (parse_i64(arg(req, "uid"), &uid) != 0 || uid > UINT32_MAX))
		return fail(out, JC_EINVAL, "bad --uid '%.32s': a uid", arg(req, "uid"));
	struct jc_kept_filter f = {.now = (int64_t)time(NULL), .top = (uint64_t)top};
	if (!env->all_users || uid >= 0) {
		f.by_uid = 1;
		f.uid = env->all_users ? (uint32_t)uid : env->uid;
	}
	struct export_ctx x = {.env = env, .out = out};
	int rc = env->cd->ops->foreach_request(env->cd, &f, export_cb, &x);
	free(x.seen);
	if (rc == 1)
		rc = 0;
	if (rc == 0 && x.cut) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "export cut at %zu requests (%u MiB per export): "
			 "use --top to choose",
			 out->n_rec, EXPORT_MAX_BYTES >> 20);
		free(out->message);
		out->message = strdup(msg);
	}
	return rc;
}

/* --- the command table ------------------------------------------------------ */

static const struct jc_admin_arg stats_args[] = {
    {"zero", "zero", JC_ARG_FLAG, JC_ADMIN_PRIVILEGED | JC_ADMIN_MUTATING},
    {"by_user", "by-user", JC_ARG_FLAG, JC_ADMIN_PRIVILEGED | JC_ADMIN_LISTS},
    {"prometheus", "prometheus", JC_ARG_FLAG, JC_ADMIN_LOCAL},
    {NULL, NULL, 0, 0},
};
static const struct jc_admin_arg show_args[] = {
    {"key", NULL, JC_ARG_KEY, 0},
    {NULL, NULL, 0, 0},
};
static const struct jc_admin_arg purge_args[] = {
    {"all", "all", JC_ARG_FLAG, 0},
    {"negative", "negative", JC_ARG_FLAG, 0},
    {"older_than", "older-than", JC_ARG_SECONDS, 0},
    {"unused_for", "unused-for", JC_ARG_SECONDS, 0},
    {"key", "key", JC_ARG_KEY, 0},
    {"arch", "arch", JC_ARG_TEXT, 0},
    {"stale_versions", "stale-versions", JC_ARG_FLAG, 0},
    {"to_size", "to-size", JC_ARG_BYTES, 0},
    {"dry_run", "dry-run", JC_ARG_FLAG, 0},
    {NULL, NULL, 0, 0},
};

static const struct jc_admin_arg warm_args[] = {
    {"top", "top", JC_ARG_TEXT, 0},
    {"since", "since", JC_ARG_SECONDS, 0},
    {"status", "status", JC_ARG_FLAG, 0},
    {"wait", "wait", JC_ARG_FLAG, JC_ADMIN_LOCAL},
    {NULL, NULL, 0, 0},
};
static const struct jc_admin_arg export_args[] = {
    {"top", "top", JC_ARG_TEXT, 0},
    {"uid", "uid", JC_ARG_TEXT, JC_ADMIN_PRIVILEGED},
    {NULL, NULL, 0, 0},
};

#define P JC_ADMIN_PRIVILEGED
#define M JC_ADMIN_MUTATING
#define O JC_ADMIN_OFFLINE
#define L JC_ADMIN_LISTS
const struct jc_admin_cmd jc__admin_cmds[] = {
    {"ping", 0, NULL, cmd_ping, "ping\n  Asks the daemon whether it answers.\n"},
    {"version", 0, NULL, cmd_version,
     "version [--json]\n  The daemon's and the toolchain's versions (--json: as one "
     "JSON object).\n"},
    {"stats", O, stats_args, cmd_stats,
     "stats [--json | --prometheus] [--zero] [--by-user]\n"
     "  Counters and figures (offline from the cache directory when no daemon runs).\n"
     "  Admins (root, the daemon's uid, --admin-group) see the daemon's; any other user\n"
     "  of a shared daemon their own entries, bytes and hits. --by-user (admins): one\n"
     "  line per uid and its user name: entries, bytes (a shared entry in full for\n"
     "  each), hits.\n"
     "  --zero (admins) resets the counters.\n"},
    {"ls", O | L, NULL, cmd_ls,
     "ls [--json]\n  Lists the entries (a user who is not an admin: their own, with their\n"
     "  own hits and access times).\n"},
    {"show", O, show_args, cmd_show,
     "show KEY\n  One entry, with its compile log (a user's own only: another's key\n"
     "  answers as one nobody has).\n"},
    {"purge", O | L | M, purge_args, cmd_purge,
     "purge --all | --negative | --older-than DUR | --unused-for DUR | --key KEY | --arch ARCH\n"
     "      | --stale-versions | --to-size SIZE  [--dry-run]\n"
     "  Removes entries (selections combine with AND). A user who is not an admin\n"
     "  purges their own: an entry another user also uses stays for them.\n"},
    {"verify", P | O | L | M, NULL, cmd_verify,
     "verify\n  Checks every object's size and hash; quarantines bad ones.\n"},
    {"gc", P | O | L | M, NULL, cmd_gc, "gc\n  Collects orphaned objects.\n"},
    {"stop", P | JC_ADMIN_LOOP, NULL, NULL, "stop\n  Stops the daemon cleanly, as SIGTERM does.\n"},
    {"warm", P | M | L | JC_ADMIN_LOOP, warm_args, NULL,
     "warm [--top N] [--since DURATION] [--wait] [--status]\n"
     "  Compiles the kept requests of entries made by another toolchain (NVRTC,\n"
     "  nvJitLink, driver) again for the daemon's, most used first, in the background\n"
     "  at idle priority (--rewarm-workers, --rewarm-budget); clients go first. --top:\n"
     "  the N most valuable; --since: used within DURATION. --wait: until done, with\n"
     "  progress. Lists the requests the new toolchain fails to compile (each kept as a\n"
     "  negative entry with its log). --status: the last re-warm's figures. Admins.\n"},
    {"export", O | L, export_args, cmd_export,
     "export [--top N] [--uid U] [--secret-file FILE] -o FILE\n"
     "  Writes the kept requests (the most valuable N) to a signed bundle (HMAC-SHA256\n"
     "  with the secret: ~/.config/jitcache/bundle.key, made when missing). A user\n"
     "  who is not an admin exports their own; --uid U (admins): U's.\n"},
};
#undef P
#undef M
#undef O
#undef L
const size_t jc__admin_n_cmds = sizeof(jc__admin_cmds) / sizeof(jc__admin_cmds[0]);

const struct jc_admin_cmd *jc__admin_find(const char *name)
{
	for (size_t i = 0; name && i < jc__admin_n_cmds; i++)
		if (strcmp(jc__admin_cmds[i].name, name) == 0)
			return &jc__admin_cmds[i];
	return NULL;
}

/* The row of cmd's argument a ("name" or "name=value"), or NULL. */
static const struct jc_admin_arg *arg_spec(const struct jc_admin_cmd *cmd, const char *a)
{
	size_t n = strcspn(a, "=");
	for (const struct jc_admin_arg *s = cmd->args; s && s->name; s++)
		if (strlen(s->name) == n && strncmp(s->name, a, n) == 0)
			return s;
	return NULL;
}

unsigned jc__admin_flags(const struct jc_admin_req *req)
{
	const struct jc_admin_cmd *cmd = jc__admin_find(req->command);
	if (!cmd)
		return JC_ADMIN_PRIVILEGED | JC_ADMIN_MUTATING;
	unsigned flags = cmd->flags;
	for (size_t i = 0; i < req->args.n; i++) {
		const struct jc_admin_arg *s = arg_spec(cmd, req->args.v[i]);
		flags |= s ? s->flags : 0;
	}
	return flags;
}

const char *jc__admin_privileged_option(const struct jc_admin_req *req)
{
	const struct jc_admin_cmd *cmd = jc__admin_find(req->command);
	for (size_t i = 0; cmd && i < req->args.n; i++) {
		const struct jc_admin_arg *s = arg_spec(cmd, req->args.v[i]);
		if (s && s->option && (s->flags & JC_ADMIN_PRIVILEGED))
			return s->option;
	}
	return "";
}

/* Every argument of req is one cmd takes, with a value where it needs one. */
static int check_args(const struct jc_admin_cmd *cmd, const struct jc_admin_req *req,
		      struct jc_admin_reply *out)
{
	for (size_t i = 0; i < req->args.n; i++) {
		const char *a = req->args.v[i];
		const struct jc_admin_arg *s = arg_spec(cmd, a);
		int has_value = strchr(a, '=') != NULL;
		if (!s || (s->flags & JC_ADMIN_LOCAL))
			return fail(out, JC_EINVAL, "unknown argument '%.64s'", a);
		if (has_value != (s->kind != JC_ARG_FLAG))
			return fail(out, JC_EINVAL,
				    has_value ? "argument '%.64s' takes no value"
					      : "argument '%.64s' needs a value",
				    a);
	}
	return 0;
}

int jc__admin_check(const struct jc_admin_req *req, struct jc_admin_reply *out)
{
	const struct jc_admin_cmd *cmd = jc__admin_find(req->command);
	out->status = 0;
	if (!cmd)
		return fail(out, JC_EINVAL, "unknown admin command '%s'", req->command);
	return check_args(cmd, req, out);
}

int jc__admin_run(struct jc_admin_env *env, const struct jc_admin_req *req,
		  struct jc_admin_reply *out)
{
	const char *c = req->command;
	const struct jc_admin_cmd *cmd = jc__admin_find(c);
	out->status = 0;
	if (!cmd || !cmd->run)
		return fail(out, JC_EINVAL, "unknown admin command '%s'", c);
	if (check_args(cmd, req, out) != 0)
		return out->status;
	int rc = cmd->run(env, req, out);
	if (rc != 0 && out->status == 0) {
		out->status = rc;
		if (!out->message) {
			char msg[256];
			snprintf(msg, sizeof(msg), "%s failed: %s", c,
				 jc__cachedir_errmsg(env->cd));
			out->message = strdup(msg);
		}
	}
	return out->status;
}
