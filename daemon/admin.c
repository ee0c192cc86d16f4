/* SPDX-License-Identifier: MIT */
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "jitcache/jitcache.h"
#include "log.h"

/* Most records one reply lists (a reply is one frame of at most
 * JC_FRAME_MAX bytes); the message says how many more there were. */
#define LIST_MAX 100000

uint64_t jc__admin_budget_mark(uint64_t max_size, unsigned pct)
{
	return max_size / 100 * pct + max_size % 100 * pct / 100;
}

/* The value of argument name ("name" alone gives ""), or NULL. */
static const char *arg(const struct jc_admin_req *req, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < req->args.n; i++) {
		const char *a = req->args.v[i];
		if (strncmp(a, name, n) == 0 && (a[n] == '\0' || a[n] == '='))
			return a[n] ? a + n + 1 : "";
	}
	return NULL;
}

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
	if (!s || !*s)
		return JC_EINVAL;
	long long x = strtoll(s, &end, 10);
	if (*end || x < 0)
		return JC_EINVAL;
	*v = x;
	return 0;
}

/* Adds the fields common to ls and show. */
static int entry_fields(struct jc_record *r, const struct jc_entry *e)
{
	char hex[33], ohex[33];
	jc__hex16(e->key, hex);
	jc__hex16(e->object, ohex);
	int rc = jc__record_add_str(r, "key", hex);
	rc = rc ?: jc__record_add_str(r, "status", e->status ? "failed" : "ok");
	rc = rc ?: jc__record_add_str(r, "kind", e->status ? "negative" : jc__output_name(e->output));
	rc = rc ?: jc__record_add_str(r, "arch", e->arch);
	rc = rc ?: jc__record_add_int(r, "size", (int64_t)e->size);
	rc = rc ?: jc__record_add_int(r, "hits", (int64_t)e->hits);
	rc = rc ?: jc__record_add_int(r, "created", e->created);
	rc = rc ?: jc__record_add_int(r, "last_access", e->last_access);
	rc = rc ?: jc__record_add_str(r, "source_name", e->source_name);
	return rc;
}

static int ls_cb(const struct jc_entry *e, void *ctx)
{
	struct jc_admin_reply *out = ctx;
	struct jc_record *r;
	if (out->n_rec == LIST_MAX)
		return 1;
	int rc = jc__reply_add_record(out, &r);
	return rc ?: entry_fields(r, e);
}

static int cmd_ls(struct jc_admin_env *env, struct jc_admin_reply *out)
{
	struct jc_filter f = {.status = JC_FILTER_ANY};
	int rc = env->cd->ops->foreach(env->cd, &f, ls_cb, out);
	uint64_t entries = 0;
	if (rc == 1 && (rc = jc__index_totals(env->cd->wix, &entries, NULL, NULL)) == 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "listed the %d least recently used of %llu entries", LIST_MAX,
			 (unsigned long long)entries);
		out->message = strdup(msg);
	}
	return rc;
}

static int cmd_show(struct jc_admin_env *env, const struct jc_admin_req *req,
		    struct jc_admin_reply *out)
{
	uint8_t key[16];
	const char *k = arg(req, "key");
	if (!k || jc__unhex16(k, key) != 0)
		return fail(out, JC_EINVAL, "a 32-hex-digit key is needed, got '%s'", k ? k : "");
	struct jc_entry e = {0};
	int rc = jc__index_get(env->cd->wix, key, &e);
	if (rc == JC_ENOTFOUND)
		return fail(out, rc, "no entry with key %s", k);
	struct jc_record *r;
	char ohex[33];
	jc__hex16(e.object, ohex);
	rc = rc ?: jc__reply_add_record(out, &r);
	rc = rc ?: entry_fields(r, &e);
	rc = rc ?: jc__record_add_str(r, "object", e.status ? "" : ohex);
	rc = rc ?: jc__record_add_str(r, "options", e.options);
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
	jc__entry_clear(&e);
	return rc;
}

static int cmd_stats(struct jc_admin_env *env, const struct jc_admin_req *req,
		     struct jc_admin_reply *out)
{
	struct jc_tier_health h;
	struct jc_record *r;
	int rc = env->cd->ops->health(env->cd, &h);
	rc = rc ?: jc__reply_add_record(out, &r);
	for (int i = 0; rc == 0 && i < JC_CTR__COUNT; i++)
		rc = jc__record_add_u64(r, jc__counter_names[i], env->counters[i]);
	rc = rc ?: jc__record_add_u64(r, "entries", h.entries - h.negative_entries); /* artifacts */
	rc = rc ?: jc__record_add_u64(r, "negative_entries", h.negative_entries);
	rc = rc ?: jc__record_add_u64(r, "bytes", h.bytes);
	rc = rc ?: jc__record_add_u64(r, "max_size", env->max_size);
	rc = rc ?: jc__record_add_u64(r, "evict_high_water",
				      jc__admin_budget_mark(env->max_size, JC_EVICT_HIGH_PCT));
	rc = rc ?: jc__record_add_u64(r, "evict_low_water",
				      jc__admin_budget_mark(env->max_size, JC_EVICT_LOW_PCT));
	rc = rc ?: jc__record_add_int(r, "hit_p50_us", (int64_t)((env->hit_p50_ns + 500) / 1000));
	rc = rc ?: jc__record_add_int(r, "hit_p99_us", (int64_t)((env->hit_p99_ns + 500) / 1000));
	rc = rc ?: jc__record_add_u64(r, "hit_latency_samples", env->hit_samples);
	rc = rc ?: jc__record_add_u64(r, "hit_latency_sum_ns", env->hit_sum_ns);
	rc = rc ?: jc__record_add_int(r, "hit_latency_since", env->hit_latency_since);
	rc = rc ?: jc__record_add_int(r, "include_watch_trees", (int64_t)env->watch_trees);
	rc = rc ?: jc__record_add_int(r, "include_watches", (int64_t)env->watch_count);
	rc = rc ?: jc__record_add_int(r, "include_watch_bytes", (int64_t)env->watch_bytes);
	rc = rc ?: jc__record_add_int(r, "uptime_s", env->uptime_s);
	rc = rc ?: jc__record_add_int(r, "daemon_pid", env->daemon_pid);
	rc = rc ?: jc__record_add_str(r, "version", JC_VERSION);
	rc = rc ?: jc__record_add_str(r, "nvrtc_version", env->tc->nvrtc_version);
	rc = rc ?: jc__record_add_str(r, "nvjitlink_version", env->tc->nvjitlink_version);
	rc = rc ?: jc__record_add_str(r, "driver_version", env->tc->driver_version);
	rc = rc ?: jc__record_add_str(r, "cache_dir", jc__store_dir(env->cd->store));
	rc = rc ?: jc__record_add_str(r, "confinement", env->confinement ? env->confinement : "offline");
	if (rc == 0 && arg(req, "zero")) {
		env->zero_counters = 1;
		if (env->daemon_pid == 0) {
			uint64_t zeros[JC_CTR__COUNT] = {0};
			rc = jc__cachedir_save_counters(env->cd, zeros);
		}
	}
	return rc;
}

static int cmd_version(struct jc_admin_env *env, struct jc_admin_reply *out)
{
	const struct jc_toolchain *tc = env->tc;
	struct jc_record *r;
	int rc = jc__reply_add_record(out, &r);
	rc = rc ?: jc__record_add_str(r, "jitcache", JC_VERSION);
	rc = rc ?: jc__record_add_int(r, "protocol", JC_PROTO_VERSION);
	rc = rc ?: jc__record_add_str(r, "nvrtc_version", tc->nvrtc_version);
	rc = rc ?: jc__record_add_str(r, "nvrtc_id", tc->nvrtc_id);
	rc = rc ?: jc__record_add_str(r, "nvrtc_builtins_id", tc->nvrtc_builtins_id);
	rc = rc ?: jc__record_add_str(r, "nvjitlink_version", tc->nvjitlink_version);
	rc = rc ?: jc__record_add_str(r, "nvjitlink_id", tc->nvjitlink_id);
	rc = rc ?: jc__record_add_str(r, "driver_version", tc->driver_version);
	rc = rc ?: jc__record_add_str(r, "driver_build", tc->driver_build);
	rc = rc ?: jc__record_add_str(r, "toolkit_include", tc->toolkit_include);
	rc = rc ?: jc__record_add_str(r, "toolkit_include_id", tc->toolkit_include_id);
	rc = rc ?: jc__record_add_str(r, "supported_archs", tc->supported_archs);
	rc = rc ?: jc__record_add_str(r, "fatbin_tool", tc->fatbin_path[0] ? tc->fatbin_path : "none");
	rc = rc ?: jc__record_add_str(r, "fatbin_id", tc->fatbin_id);
	rc = rc ?: jc__record_add_int(r, "daemon_pid", env->daemon_pid);
	return rc;
}

/* --- removal (purge, eviction, gc) ------------------------------------------ */

struct victims {
	struct jc_entry *v;
	size_t n, cap;
	uint64_t bytes;       /* of ok victims */
	uint64_t total_bytes; /* for to_size: bytes still counted */
	uint64_t target;      /* to_size: stop once total_bytes <= target */
	int to_size;
};

static int collect_cb(const struct jc_entry *e, void *ctx)
{
	struct victims *vs = ctx;
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
	c->last_access = e->last_access;
	if (!e->status) {
		vs->bytes += e->size;
		vs->total_bytes -= e->size < vs->total_bytes ? e->size : vs->total_bytes;
	}
	return 0;
}

static int remove_victims(struct jc_admin_env *env, struct victims *vs, int dry_run,
			  struct jc_admin_reply *out)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < vs->n; i++) {
		if (!dry_run)
			rc = env->cd->ops->remove(env->cd, &vs->v[i]);
		if (out && rc == 0 && i < LIST_MAX) {
			struct jc_record *r;
			char hex[33];
			jc__hex16(vs->v[i].key, hex);
			rc = jc__reply_add_record(out, &r);
			rc = rc ?: jc__record_add_str(r, "key", hex);
			rc = rc ?: jc__record_add_str(r, "status", vs->v[i].status ? "failed" : "ok");
			rc = rc ?: jc__record_add_int(r, "size", (int64_t)vs->v[i].size);
		}
	}
	if (!dry_run && vs->n) {
		env->removed = 1;
		jc__store_reserve_make(env->cd->store); /* released by a removal on a full disk */
	}
	return rc;
}

int jc__admin_evict_to(struct jc_admin_env *env, uint64_t target, uint64_t *evicted)
{
	uint64_t entries, negative, bytes;
	int rc = jc__index_totals(env->cd->wix, &entries, &negative, &bytes);
	if (rc != 0 || bytes <= target)
		return rc;
	struct victims vs = {.to_size = 1, .target = target, .total_bytes = bytes};
	struct jc_filter f = {.status = JC_FILTER_OK};
	rc = env->cd->ops->foreach(env->cd, &f, collect_cb, &vs);
	if (rc == 1)
		rc = 0;
	rc = rc ?: remove_victims(env, &vs, 0, NULL);
	*evicted += vs.n;
	env->evicted += vs.n;
	free(vs.v);
	return rc;
}

static int cmd_purge(struct jc_admin_env *env, const struct jc_admin_req *req,
		     struct jc_admin_reply *out)
{
	struct jc_filter f = {.status = JC_FILTER_ANY};
	struct victims vs = {0};
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
		if (jc__unhex16(v, key) != 0)
			return fail(out, JC_EINVAL, "bad --key '%s': 32 hex digits expected", v);
		f.key = key, conditions++;
	}
	if ((v = arg(req, "arch")))
		f.arch = v, conditions++;
	if (arg(req, "stale_versions"))
		f.versions_not = env->tc->summary, conditions++;
	if ((v = arg(req, "to_size"))) {
		int64_t target;
		uint64_t entries, negative;
		if (parse_i64(v, &target) != 0)
			return fail(out, JC_EINVAL, "bad --to-size '%s' (bytes)", v);
		vs.to_size = 1;
		vs.target = (uint64_t)target;
		f.status = JC_FILTER_OK;
		int rc = jc__index_totals(env->cd->wix, &entries, &negative, &vs.total_bytes);
		if (rc != 0)
			return fail(out, rc, "index: %s", jc__index_errmsg(env->cd->wix));
		conditions++;
	}
	if (!conditions)
		return fail(out, JC_EINVAL, "%s", "purge needs a selection: --all, --negative, --older-than, "
					 "--unused-for, --key, --arch, --stale-versions or --to-size");
	int rc = env->cd->ops->foreach(env->cd, &f, collect_cb, &vs);
	if (rc == 1)
		rc = 0;
	int dry_run = arg(req, "dry_run") != NULL;
	rc = rc ?: remove_victims(env, &vs, dry_run, out);
	if (rc == 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "%s %zu entries, %llu bytes%s", dry_run ? "would remove" : "removed",
			 vs.n, (unsigned long long)vs.bytes, vs.n > LIST_MAX ? " (the first ones listed)" : "");
		free(out->message);
		out->message = strdup(msg);
	}
	free(vs.v);
	return rc;
}

/* --- verify and gc -------------------------------------------------------------- */

struct verify_ctx {
	struct jc_admin_env *env;
	struct jc_admin_reply *out;
	struct victims bad;
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
	return err ?: collect_cb(e, &v->bad);
}

static int cmd_verify(struct jc_admin_env *env, struct jc_admin_reply *out)
{
	struct verify_ctx v = {.env = env, .out = out};
	struct jc_filter f = {.status = JC_FILTER_OK};
	int rc = env->cd->ops->foreach(env->cd, &f, verify_cb, &v);
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
	free(v.bad.v);
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

static int cmd_gc(struct jc_admin_env *env, struct jc_admin_reply *out)
{
	/* Expired negative entries first, then objects no row names. */
	struct victims vs = {0};
	struct jc_filter f = {.status = JC_FILTER_FAILED, .expired_at = (int64_t)time(NULL)};
	int rc = env->cd->ops->foreach(env->cd, &f, collect_cb, &vs);
	rc = rc ?: remove_victims(env, &vs, 0, NULL);
	struct gc_ctx g = {.out = out};
	rc = rc ?: env->cd->ops->collect(env->cd, (int64_t)time(NULL), gc_removed_cb, &g);
	if (rc == 0) {
		char msg[160];
		snprintf(msg, sizeof(msg), "removed %zu expired negative entries, %llu orphaned objects (%llu bytes)",
			 vs.n, (unsigned long long)g.removed, (unsigned long long)g.bytes);
		free(out->message);
		out->message = strdup(msg);
	}
	free(vs.v);
	return rc;
}

int jc__admin_is_privileged(const struct jc_admin_req *req)
{
	const char *c = req->command;
	return strcmp(c, "ping") != 0 && strcmp(c, "version") != 0 &&
	       (strcmp(c, "stats") != 0 || arg(req, "zero"));
}

int jc__admin_run(struct jc_admin_env *env, const struct jc_admin_req *req,
		  struct jc_admin_reply *out)
{
	const char *c = req->command;
	int rc;
	out->status = 0;
	if (strcmp(c, "ping") == 0) {
		struct jc_record *r;
		rc = jc__reply_add_record(out, &r);
		rc = rc ?: jc__record_add_int(r, "pid", env->daemon_pid);
	} else if (strcmp(c, "version") == 0)
		rc = cmd_version(env, out);
	else if (strcmp(c, "stats") == 0)
		rc = cmd_stats(env, req, out);
	else if (strcmp(c, "ls") == 0)
		rc = cmd_ls(env, out);
	else if (strcmp(c, "show") == 0)
		rc = cmd_show(env, req, out);
	else if (strcmp(c, "purge") == 0)
		rc = cmd_purge(env, req, out);
	else if (strcmp(c, "verify") == 0)
		rc = cmd_verify(env, out);
	else if (strcmp(c, "gc") == 0)
		rc = cmd_gc(env, out);
	else
		return fail(out, JC_EINVAL, "unknown admin command '%s'", c);
	if (rc != 0 && out->status == 0) {
		out->status = rc;
		if (!out->message) {
			char msg[256];
			snprintf(msg, sizeof(msg), "%s failed: %s", c, jc__index_errmsg(env->cd->wix));
			out->message = strdup(msg);
		}
	}
	return out->status;
}
