/* SPDX-License-Identifier: MIT */
/*
 * The admin commands that read (admin.h; the table is in admin.c): the
 * argument helpers, which entries a caller sees and key prefixes (shared
 * with admin_remove.c through admin_cmds.h); ls, show, stats, ping,
 * version and export.
 */
#include "core/admin.h"
#include "core/evict.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "config.h"
#include "core/admin_cmds.h"
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

int jc__admin_fail(struct jc_admin_reply *out, int code, const char *fmt, const char *what)
{
	char msg[512];
	snprintf(msg, sizeof(msg), fmt, what);
	out->status = code;
	free(out->message);
	out->message = strdup(msg);
	return code;
}

int jc__admin_parse_i64(const char *s, int64_t *v)
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
	return s ? jc__admin_parse_i64(s, v) : 0;
}

struct jc_filter jc__admin_scope(const struct jc_admin_env *env, int status)
{
	return (struct jc_filter){.status = status, .by_uid = !env->all_users, .uid = env->uid};
}

int jc__admin_scope_totals(struct jc_admin_env *env, struct jc_user_totals *t)
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

/* Fewest hex digits of a key prefix: one (an ambiguous one lists at most 10 keys). */
#define KEY_PREFIX_MIN 1

int jc__admin_resolve_key(struct jc_admin_env *env, const char *what, const char *text,
			  int absent_ok, uint8_t key[16], struct jc_admin_reply *out)
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
		return jc__admin_fail(out, JC_EINVAL, "%s", msg);
	}
	int rc = env->cd->ops->find_keys(env->cd, text, env->all_users ? -1 : (int64_t)env->uid,
					 keys, &n);
	if (rc != 0)
		return jc__admin_fail(out, rc, "index: %s", jc__cachedir_errmsg(env->cd));
	if (n == 0 && absent_ok) {
		snprintf(hex, sizeof(hex), "%s%.*s", text, (int)(32 - len),
			 "00000000000000000000000000000000");
		return jc__unhex16(hex, key);
	}
	if (n == 0)
		return jc__admin_fail(out, JC_ENOTFOUND, "no entry with key %s", text);
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
	return jc__admin_fail(out, JC_EINVAL, "%s", msg);
}

#define arg jc__admin_arg

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

int jc__admin_cmd_ls(struct jc_admin_env *env, const struct jc_admin_req *req,
		     struct jc_admin_reply *out)
{
	struct jc_filter f = jc__admin_scope(env, JC_FILTER_ANY);
	struct jc_user_totals t;
	void *ctx[2] = {env, out};
	(void)req;
	int rc = env->cd->ops->foreach (env->cd, &f, ls_cb, ctx);
	if (rc == 1 && (rc = jc__admin_scope_totals(env, &t)) == 0) {
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

int jc__admin_cmd_show(struct jc_admin_env *env, const struct jc_admin_req *req,
		       struct jc_admin_reply *out)
{
	uint8_t key[16];
	const char *k = arg(req, "key");
	if (!k)
		return jc__admin_fail(out, JC_EINVAL, "%s",
				      "a key (or a unique prefix of one) is needed");
	if (jc__admin_resolve_key(env, "key", k, 0, key, out) != 0)
		return out->status;
	struct jc_entry e = {0};
	/* Another uid's key answers as a key nobody has (tier.h, lookup_for). */
	int rc =
	    env->cd->ops->lookup_for(env->cd, key, env->all_users ? -1 : (int64_t)env->uid, &e);
	if (rc == JC_ENOTFOUND)
		return jc__admin_fail(out, rc, "no entry with key %s", k);
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
int jc__admin_cmd_stats(struct jc_admin_env *env, const struct jc_admin_req *req,
			struct jc_admin_reply *out)
{
	if (arg(req, "by_user"))
		return stats_by_user(env, out);
	struct jc_user_totals t;
	struct jc_record *r;
	int rc = jc__admin_scope_totals(env, &t);
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

int jc__admin_cmd_ping(struct jc_admin_env *env, const struct jc_admin_req *req,
		       struct jc_admin_reply *out)
{
	struct jc_record *r;
	(void)req;
	int rc = jc__reply_add_record(out, &r);
	return rc ?: jc__record_add_int(r, "pid", env->daemon_pid);
}

int jc__admin_cmd_version(struct jc_admin_env *env, const struct jc_admin_req *req,
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
int jc__admin_cmd_export(struct jc_admin_env *env, const struct jc_admin_req *req,
			 struct jc_admin_reply *out)
{
	int64_t top = 0, uid = -1;
	if (arg(req, "top") && jc__admin_parse_i64(arg(req, "top"), &top) != 0)
		return jc__admin_fail(out, JC_EINVAL, "bad --top '%.32s': a count",
				      arg(req, "top"));
	if (arg(req, "uid") &&
	    (jc__admin_parse_i64(arg(req, "uid"), &uid) != 0 || uid > UINT32_MAX))
		return jc__admin_fail(out, JC_EINVAL, "bad --uid '%.32s': a uid", arg(req, "uid"));
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
