/* SPDX-License-Identifier: MIT */
/*
 * The request path: key → memory cache → index → object; misses join or
 * start a single flight, which the worker pool compiles and the thread pool
 * publishes (object first, then the index row). A request that reads headers
 * from disk is keyed in the thread pool first: its direct key names an
 * include manifest whose variants are re-checked, else the headers are
 * scanned (includes.h, manifest.h); every other request is keyed on the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "daemon.h"
#include "jitcache/jitcache.h"
#include "admin.h"
#include "key.h"
#include "log.h"
#include "pool.h"
#include "remote.h"
#include "retry.h"
#include "util.h"
#include "watch.h"

/* Limits of one include scan: entries recorded, bytes of one header. */
#define INC_MAX_ENTRIES 200000
#define INC_MAX_FILE_SIZE (64u << 20)
/* Files whose hashes the daemon remembers (all are dropped when full). */
#define INC_MEMO_ENTRIES 65536

static void count(struct jc_daemon *d, enum jc_counter c, uint64_t n)
{
	jc__count(&d->cache->counters, c, n);
}

/* --- memory cache ------------------------------------------------------- */

static struct jc_slot *slot_of(struct jc_daemon *d, const uint8_t key[16])
{
	uint32_t h;
	memcpy(&h, key + 12, sizeof(h)); /* the key is a hash: any bits will do */
	return &d->memcache[h % JC_MEMCACHE_SLOTS];
}

static void slot_drop(struct jc_slot *s)
{
	if (s->used)
		jc__entry_clear(&s->e);
	s->used = 0;
	s->touch = 0;
}

void jc__cache_memcache_drop_all(struct jc_daemon *d)
{
	for (size_t i = 0; i < JC_MEMCACHE_SLOTS; i++)
		slot_drop(&d->memcache[i]);
}

static void memcache_forget(struct jc_daemon *d, const uint8_t key[16])
{
	struct jc_slot *s = slot_of(d, key);
	if (s->used && memcmp(s->e.key, key, 16) == 0)
		slot_drop(s);
}

/* Finds the index row for key: memory cache first, then SQLite. */
static const struct jc_entry *lookup(struct jc_daemon *d, const uint8_t key[16])
{
	struct jc_slot *s = slot_of(d, key);
	if (s->used && memcmp(s->e.key, key, 16) == 0)
		return &s->e;
	struct jc_entry e = {0};
	int rc = d->cache->ops->lookup(d->cache, key, &e);
	if (rc != 0) {
		if (rc != JC_ENOTFOUND)
			jc_log_err(INDEX, "index lookup failed: %s", jc__index_errmsg(d->cache->rix));
		return NULL;
	}
	slot_drop(s);
	s->e = e;
	s->used = 1;
	return &s->e;
}

/* --- replies -------------------------------------------------------------- */

/* Answers conn's request with res (objfd >= 0 passed with it, always closed). */
static void answer(struct jc_daemon *d, struct jc_conn *conn, const struct jc_res *res, int objfd)
{
	d->conn_ops->send_result(conn, res, objfd);
	d->conn_ops->done(conn);
}

/* Answers conn's request with an error (message borrowed). */
static void refuse(struct jc_daemon *d, struct jc_conn *conn, int code, const char *message)
{
	d->conn_ops->send_error(conn, code, message);
	d->conn_ops->done(conn);
}

/* Builds a result view of an index row (borrows its strings). */
static void result_of_entry(const struct jc_entry *e, struct jc_res *res, uint32_t cache)
{
	jc__res_init(res);
	res->status = e->status ? (e->error ? e->error : JC_ECOMPILE) : 0;
	res->cache = cache;
	memcpy(res->key, e->key, 16);
	memcpy(res->object, e->object, 16);
	res->output = e->output;
	res->size = e->status ? 0 : e->size;
	res->log = e->log;
	res->lowered = e->lowered;
	res->n_lowered = e->n_lowered;
	res->compile_ns = e->compile_ns;
	if (e->status)
		res->message = (char *)"compile failed (cached negative entry): see the log";
}

static int lowered_cmp(const void *a, const void *b)
{
	return strcmp(((const struct jc_lowered *)a)->expr, ((const struct jc_lowered *)b)->expr);
}

/*
 * Points res->lowered at a copy (malloc'd: the caller frees *tmp after the
 * reply is encoded; the strings stay borrowed) of its lowered names in the
 * order of names, the name expressions of the request being answered, as
 * PROTOCOL.md promises: a row or flight result has them in the order of
 * whoever compiled it. Left as it is when that order is already right or
 * memory is short (the client finds names by expression either way).
 */
static void lowered_in_order(struct jc_res *res, const struct jc_strv *names,
			     struct jc_lowered **tmp)
{
	size_t n = res->n_lowered;
	*tmp = NULL;
	if (n < 2 || names->n != n)
		return;
	size_t i = 0;
	while (i < n && strcmp(res->lowered[i].expr, names->v[i]) == 0)
		i++;
	if (i == n)
		return;
	struct jc_lowered *sorted = malloc(2 * n * sizeof(*sorted));
	if (!sorted)
		return;
	memcpy(sorted, res->lowered, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), lowered_cmp);
	struct jc_lowered *out = sorted + n;
	for (i = 0; i < n; i++) {
		struct jc_lowered want = {.expr = names->v[i]};
		struct jc_lowered *hit = bsearch(&want, sorted, n, sizeof(*sorted), lowered_cmp);
		if (!hit) {
			free(sorted);
			return;
		}
		out[i] = *hit;
	}
	res->lowered = out;
	*tmp = sorted;
}

/* Records a hit of key for the next flush: one pending row per key, whose
 * hit count grows (its place in the list is kept in the key's slot). */
static void touch(struct jc_daemon *d, const uint8_t key[16])
{
	struct jc_slot *s = slot_of(d, key);
	size_t i = s->used && memcmp(s->e.key, key, 16) == 0 ? s->touch : 0;
	if (i && i <= d->n_touch && memcmp(d->touch_keys[i - 1], key, 16) == 0) {
		d->touch_hits[i - 1]++;
		return;
	}
	if (d->n_touch == d->cap_touch) {
		size_t cap = d->cap_touch ? d->cap_touch * 2 : 256;
		void *k = realloc(d->touch_keys, cap * sizeof(*d->touch_keys));
		if (k)
			d->touch_keys = k;
		void *h = k ? realloc(d->touch_hits, cap * sizeof(*d->touch_hits)) : NULL;
		if (!h)
			return; /* access time is advisory: losing one is harmless */
		d->touch_hits = h;
		d->cap_touch = cap;
	}
	memcpy(d->touch_keys[d->n_touch], key, 16);
	d->touch_hits[d->n_touch++] = 1;
	if (s->used && memcmp(s->e.key, key, 16) == 0)
		s->touch = d->n_touch;
}

/* Serves a hit from an ok row; returns 0, or an error when the object is
 * missing or fails its checks (it is then quarantined and the row dropped).
 *
 * Every hit opens the object afresh (jc__store_open_object: openat without
 * following links, then owner, type, mode and size checked with fstat on the
 * very descriptor that is sent, so the file served is the file checked).
 * Each client thus gets its own read-only open file description: what one
 * does to it (fcntl O_DIRECT or O_APPEND, lseek) cannot change what the
 * daemon or another client reads. The client hashes every byte it is
 * served, so content changed in place is caught there (and rejected: see
 * handle_reject). jitcache-bench measures the reopen against a dup. */
static int serve_hit(struct jc_daemon *d, struct jc_conn *conn, const struct jc_entry *e,
		     const struct jc_strv *names, uint64_t t0)
{
	int fd = -1;
	int rc = d->cache->ops->open_object(d->cache, e, &fd);
	if (rc != 0)
		return rc;
	struct jc_res res;
	struct jc_lowered *tmp;
	result_of_entry(e, &res, JC_CACHE_HIT);
	lowered_in_order(&res, names, &tmp);
	res.server_ns = jc__now_ns() - t0;
	jc__latency_add(&d->hit_latency, res.server_ns);
	count(d, JC_CTR_hits, 1);
	touch(d, e->key);
	answer(d, conn, &res, fd);
	free(tmp);
	return 0;
}

/* Quarantines a bad object and forgets the cached row. The index row is
 * left to the flight that follows (publish_work_cb): it replaces the row, or
 * deletes it if it still names object, in the thread pool. */
static void drop_bad_entry(struct jc_daemon *d, const uint8_t key[16], const uint8_t object[16],
			   const char *why)
{
	char hex[33], ohex[33];
	jc__hex16(key, hex);
	jc__hex16(object, ohex);
	jc_log_warn(STORE, "key %s: object %s %s; quarantined, recompiling (driver %s)", hex, ohex,
		    why, d->tc.driver_version);
	d->cache->ops->quarantine(d->cache, object);
	memcache_forget(d, key);
}

/* --- flights -------------------------------------------------------------- */

static struct jc_flight *flight_find(struct jc_daemon *d, const uint8_t key[16])
{
	for (struct jc_flight *f = d->flights; f; f = f->next)
		if (memcmp(f->key, key, 16) == 0)
			return f;
	return NULL;
}

/* Adds conn as a waiter; names (NULL for the flight's own request, whose
 * order the result has) is moved into the waiter. */
static int flight_join(struct jc_flight *f, struct jc_conn *conn, uint32_t cache, uint64_t t0,
		       struct jc_strv *names)
{
	struct jc_waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return JC_ENOMEM;
	if (names) {
		w->names = *names;
		memset(names, 0, sizeof(*names));
	}
	w->conn = conn;
	w->cache = cache;
	w->t0 = t0;
	f->d->conn_ops->ref(conn);
	w->next = f->waiters;
	f->waiters = w;
	return 0;
}

static void waiter_free(struct jc_daemon *d, struct jc_waiter *w)
{
	d->conn_ops->unref(w->conn);
	jc__strv_clear(&w->names);
	free(w);
}

static void flight_free(struct jc_flight *f)
{
	struct jc_daemon *d = f->d;
	for (struct jc_flight **p = &d->flights; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			break;
		}
	if (d->remote)
		jc__remote_done(d->remote, f->key); /* a fleet lock not handed to a publish */
	while (f->waiters) {
		struct jc_waiter *w = f->waiters;
		f->waiters = w->next;
		waiter_free(d, w);
	}
	d->buffers.used -= f->charged;
	jc__req_clear(&f->req);
	jc__res_clear(&f->res);
	jc__inc_set_clear(f->inc);
	free(f->inc);
	jc__fatbin_free(f->fatbin);
	free(f);
}

static void keymemo_forget(struct jc_daemon *d, const struct jc_flight *f);

/* Sends the flight's outcome to the waiters it has now (and forgets them). */
static void flight_answer(struct jc_flight *f)
{
	struct jc_res *res = &f->res;
	memcpy(res->key, f->learned ? f->store_key : f->key, 16);
	/* What NVRTC read is the daemon's business (PROTOCOL.md): never sent on. */
	for (size_t i = 0; i < res->n_deps; i++)
		free(res->deps[i].path);
	free(res->deps);
	res->deps = NULL;
	res->n_deps = 0;
	struct jc_lowered *own = res->lowered;
	while (f->waiters) {
		struct jc_waiter *w = f->waiters;
		struct jc_lowered *tmp;
		f->waiters = w->next;
		res->cache = w->cache;
		res->server_ns = jc__now_ns() - w->t0;
		lowered_in_order(res, &w->names, &tmp);
		answer(f->d, w->conn, res, -1);
		res->lowered = own;
		free(tmp);
		waiter_free(f->d, w);
	}
}

/* Sends the flight's outcome to every waiter and ends the flight. */
static void flight_finish(struct jc_flight *f)
{
	flight_answer(f);
	flight_free(f);
}

/* Results that become index rows: artifacts and deterministic compile errors. */
static int publishable(const struct jc_res *res)
{
	return res->status == 0 || res->status == JC_ECOMPILE;
}

/* The index row of a flight's result; strings borrowed from f, options
 * summarised into the caller's buffer. */
static void entry_of_flight(struct jc_flight *f, struct jc_entry *e, char *options, size_t cap)
{
	struct jc_daemon *d = f->d;
	struct jc_res *res = &f->res;
	memset(e, 0, sizeof(*e));
	memcpy(e->key, f->store_key, 16);
	if (res->status != 0) {
		e->status = 1;
		e->error = res->status;
		e->expires = jc__wall_s() + d->cfg.negative_ttl_s;
	}
	memcpy(e->object, res->object, 16);
	e->size = res->size;
	e->output = res->output;
	e->arch = f->req.arch;
	e->versions = d->tc.summary;
	e->source_name = f->req.source_name ? f->req.source_name : (char *)"";
	e->app_abi = f->req.app_abi ? f->req.app_abi : (char *)"";
	options[0] = '\0';
	for (size_t i = 0, n = 0; i < f->req.options.n && n < cap; i++)
		n += (size_t)snprintf(options + n, cap - n, "%s%s", i ? " " : "", f->req.options.v[i]);
	e->options = options;
	e->created = e->last_access = jc__wall_s();
	e->compile_ns = res->compile_ns;
	e->log = res->log ? res->log : (char *)"";
	e->lowered = res->lowered;
	e->n_lowered = res->n_lowered;
}

/* What the include scan, checks and learning need (borrowed from d). */
static struct jc_inc_ctx inc_ctx(struct jc_daemon *d)
{
	return (struct jc_inc_ctx){
		.memo = d->inc_memo,
		.toolkit_root = d->tc.toolkit_include,
		.max_entries = INC_MAX_ENTRIES,
		.max_file_size = INC_MAX_FILE_SIZE,
	};
}

/*
 * Thread pool, after the compile: an include set with a header changed
 * within the settle margin (a generated header) is stored only when reading
 * it again shows the bytes that were hashed (jc__inc_rehash); the settle
 * margin decides only whether the stat memo may be trusted.
 */
static int rehashed(struct jc_flight *f, const struct jc_inc_set *set, char *what, size_t len)
{
	const struct jc_inc_ctx ctx = inc_ctx(f->d);
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
static void check_deps(struct jc_flight *f)
{
	struct jc_daemon *d = f->d;
	char what[512] = "";
	int rc = jc__inc_covers(f->inc, f->res.deps, f->res.n_deps, what, sizeof(what));
	if (rc == 1)
		return;
	if (rc == 0 && f->req.tree_round) {
		/* Nothing to learn from: the client's files are not ours to read. */
		snprintf(f->errmsg, sizeof(f->errmsg), "the compile read %s, which the client did not "
			 "send (its include scan missed it); not served", what);
		f->tree_missing = 1;
		return;
	}
	if (rc == 0 && f->inc) {
		const struct jc_inc_ctx ctx = inc_ctx(d);
		struct jc_inc_set learned;
		char err[256];
		char seen[512];
		snprintf(seen, sizeof(seen), "%s", what);
		rc = jc__inc_learn(f->inc, f->res.deps, f->res.n_deps, &ctx, &learned, what, sizeof(what));
		if (rc == 1 && learned.unsettled && (rc = rehashed(f, &learned, what, sizeof(what))) == 0)
			snprintf(what + strlen(what), sizeof(what) - strlen(what),
				 " (changed just before the compile)");
		uint8_t tree[16];
		uint8_t lookup[16];
		if (rc == 1 && jc__inc_key_digest(&learned, &f->req.include_dirs, tree) == 0 &&
		    jc__key_with_tree(f->direct, tree, f->store_key) == 0 &&
		    jc__key_lookup(f->direct, &f->req.include_dirs, lookup) == 0) {
			if (jc__manifest_add(d->manifests, lookup, &learned, err, sizeof(err)) != 0)
				jc_log_warn(KEY, "learnt include manifest not stored: %s", err);
			f->learned = 1;
			jc__inc_set_clear(&learned);
			snprintf(f->learned_from, sizeof(f->learned_from), "%s", seen);
			return;
		}
		jc__inc_set_clear(&learned);
		if (rc == 0 && what[0])
			snprintf(f->errmsg, sizeof(f->errmsg), "NVRTC read %s, which changed since", what);
	}
	if (!f->errmsg[0])
		snprintf(f->errmsg, sizeof(f->errmsg), "NVRTC read %s, which the key does not cover",
			 rc == JC_ENOMEM ? "files (out of memory checking them)" : what);
	f->deps_mismatch = 1;
}

/* Thread pool: publishes the result through the tier (tier.h: the object,
 * then the row). A flight started to replace a bad object that ends without
 * a new row drops the old one. */
static void publish_work_cb(uv_work_t *work)
{
	struct jc_flight *f = work->data;
	struct jc_daemon *d = f->d;
	struct jc_res *res = &f->res;
	int publish = publishable(res);
	char what[256];
	f->publish_rc = 0;
	if (publish && f->inc && f->inc->unsettled && rehashed(f, f->inc, what, sizeof(what)) != 1)
		snprintf(f->errmsg, sizeof(f->errmsg), "include file %s changed just before the compile "
			 "and again since", what);
	else if (publish && f->inc && !f->req.tree_round && !jc__inc_unchanged(f->inc, what, sizeof(what)))
		snprintf(f->errmsg, sizeof(f->errmsg), "include file %s changed during the compile", what);
	else if (publish)
		check_deps(f);
	if (f->errmsg[0]) {
		/* What NVRTC read may not be what the key says: serve, do not store. */
		f->uncached = 1;
		publish = 0;
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits(res->data, res->size));
		memcpy(res->object, c.digest, 16);
	}
	if (publish) {
		struct jc_entry e;
		char options[1024];
		entry_of_flight(f, &e, options, sizeof(options));
		f->publish_rc = d->cache->ops->publish(d->cache, &e, res->data, res->size, f->errmsg,
						       sizeof(f->errmsg));
		memcpy(res->object, e.object, 16);
	}
	/* The row of the bad object goes unless a new row replaced it (a learnt
	 * key is another row). */
	if ((!publish || f->publish_rc != 0 || f->learned) && f->has_bad_object)
		d->cache->ops->drop_row(d->cache, f->key, f->bad_object);
}

/* Write-back: a result compiled here goes to the remote tier, off the
 * request path (remote.h). */
static void publish_remote(struct jc_flight *f)
{
	struct jc_daemon *d = f->d;
	char meta[1024];
	snprintf(meta, sizeof(meta), "arch=%s source=%s app_abi=%s toolchain=%s",
		 f->req.arch ? f->req.arch : "", f->req.source_name ? f->req.source_name : "",
		 f->req.app_abi ? f->req.app_abi : "", d->tc.summary);
	/* Under the key it was stored under: a learnt key, not the scan's, covers
	 * what NVRTC read. */
	jc__remote_publish(d->remote, f->store_key, &f->res, meta);
}

static void publish_after_cb(uv_work_t *work, int status)
{
	struct jc_flight *f = work->data;
	struct jc_daemon *d = f->d;
	int stored = f->publish_rc == 0 && f->res.status == 0;
	(void)status;
	if (f->learned && f->publish_rc == 0) {
		char hex[33], shex[33];
		jc__hex16(f->key, hex);
		jc__hex16(f->store_key, shex);
		jc_log_info(KEY, "key %s: NVRTC read %s, which the scan missed; stored under the key of "
			    "what it read, %s", hex, f->learned_from, shex);
		count(d, JC_CTR_deps_learned, 1);
		keymemo_forget(d, f);
	}
	if (stored && !f->uncached && !f->remote_hit && d->remote &&
	    f->req.output != JC_OUTPUT_FATBIN) /* parts are published, not their assembly */
		publish_remote(f);
	memcache_forget(d, f->key);
	memcache_forget(d, f->store_key);
	if (f->rehashed && !f->uncached && stored)
		count(d, JC_CTR_include_rehashed, 1);
	if (f->tree_missing) {
		char hex[33];
		jc__hex16(f->key, hex);
		jc_log_notice(KEY, "key %s: %s", hex, f->errmsg);
		count(d, JC_CTR_deps_mismatch, 1);
		jc__res_clear(&f->res);
		jc__res_init(&f->res);
		f->res.status = JC_EINVAL;
		f->res.message = strdup(f->errmsg);
	} else if (f->uncached) {
		char hex[33];
		jc__hex16(f->key, hex);
		jc_log_info(KEY, "key %s: served, not stored: %s", hex, f->errmsg);
		count(d, f->deps_mismatch ? JC_CTR_deps_mismatch : JC_CTR_include_uncached, 1);
	} else if (f->publish_rc != 0) {
		char hex[33];
		jc__hex16(f->key, hex);
		jc_log_err(STORE, "key %s: not stored: %s", hex, f->errmsg);
		if (f->res.status == 0 && !f->remote_hit) {
			/* The bytes are good but uncached: say so rather than serve them
			 * as if stored, so a full disk is visible to the client. */
			free(f->res.data);
			f->res.data = NULL;
			f->res.status = f->publish_rc == JC_ENOSPC ? JC_ENOSPC : JC_EIO;
			free(f->res.message);
			f->res.message = strdup(f->errmsg);
		}
	}
	flight_finish(f);
	/* A new object may have passed the budget's high-water mark. */
	if (stored)
		jc__evict_check(d);
}

void jc__flight_done(struct jc_daemon *d, struct jc_flight *f)
{
	char hex[33];
	if (f->fatbin) {
		jc__fatbin_finish(d, f); /* its parts count as compiles */
	} else {
		count(d, JC_CTR_compiles, 1);
		count(d, JC_CTR_compile_ns, f->res.compile_ns);
		if (f->res.status != 0)
			count(d, JC_CTR_compile_failures, 1);
	}
	jc__hex16(f->key, hex);
	jc_log_info(WORKER, "key %s: %s of %s for %s %s in %.1f ms", hex,
		    f->fatbin ? "fatbin" : f->req.n_link_inputs ? "link" : "compile",
		    f->req.source_name ? f->req.source_name : "(link inputs)", f->req.arch ? f->req.arch : "?",
		    f->res.status == 0 ? "done" : jc_strerror(f->res.status), f->res.compile_ns / 1e6);
	/* Only deterministic failures (a compile error) become negative entries;
	 * a flight that replaces a bad object drops its row when it fails. */
	if (publishable(&f->res) || f->has_bad_object) {
		f->work.data = f;
		if (uv_queue_work(d->loop, &f->work, publish_work_cb, publish_after_cb) == 0)
			return;
	}
	flight_finish(f);
}

void jc__flight_fail(struct jc_daemon *d, struct jc_flight *f, int status, const char *message)
{
	jc__res_clear(&f->res);
	f->res.status = status;
	f->res.output = f->req.output;
	f->res.message = strdup(message);
	jc__flight_done(d, f);
}

/* Drops f's waiters whose clients have hung up; returns how many are left. */
static int drop_gone_waiters(struct jc_flight *f)
{
	int left = 0;
	for (struct jc_waiter **p = &f->waiters; *p;) {
		struct jc_waiter *w = *p;
		if (!f->d->conn_ops->gone(w->conn)) {
			left++;
			p = &w->next;
			continue;
		}
		*p = w->next;
		waiter_free(f->d, w);
	}
	return left;
}

/* Pool callback, when a worker would take f: one whose clients all hung up
 * is dropped (not compiled for nobody, which would let a client that sends
 * requests and hangs up queue work and request bytes without bound). A
 * fatbin's own job, and a flight that replaces a bad object, always run. */
static int flight_wanted(struct jc_pool_job *job)
{
	struct jc_flight *f = JC_CONTAINER_OF(job, struct jc_flight, job);
	if (drop_gone_waiters(f) > 0 || f->fatbin || f->has_bad_object)
		return 1;
	char hex[33];
	jc__hex16(f->key, hex);
	jc_log_info(KEY, "key %s: compile dropped before it ran: every client that "
		    "asked for it has gone", hex);
	flight_free(f);
	return 0;
}

/* Pool callback: the compile ended, or was cancelled at shutdown. */
static void flight_job_done(struct jc_pool_job *job, int status)
{
	struct jc_flight *f = JC_CONTAINER_OF(job, struct jc_flight, job);
	if (status == 0) {
		jc__flight_done(f->d, f);
		return;
	}
	jc__res_clear(&f->res);
	f->res.status = JC_EBUSY;
	f->res.message = strdup("daemon is shutting down");
	flight_finish(f);
}

/* The bytes a request holds that a client chose the size of. */
static size_t req_bytes(const struct jc_req *r)
{
	size_t n = r->source_size;
	for (size_t i = 0; i < r->n_headers; i++)
		n += r->headers[i].size;
	for (size_t i = 0; i < r->n_link_inputs; i++)
		n += r->link_inputs[i].size;
	return n;
}

/* Read-through: the remote tier's answer for a flight's key. A verified
 * value is served at once, then published locally as a compile's result
 * would be (its fsyncs are off the answer's path; requests that come
 * meanwhile join the flight and get the same bytes); anything else
 * compiles. */
static void remote_lookup_cb(void *arg, int rc, struct jc_res *res)
{
	struct jc_flight *f = arg;
	struct jc_daemon *d = f->d;
	if (d->stopping) {
		f->res.status = JC_EBUSY;
		f->res.message = strdup("daemon is shutting down");
		flight_finish(f);
		return;
	}
	if (rc != 0) {
		jc__cache_enqueue(d, f);
		return;
	}
	jc__res_clear(&f->res);
	f->res = *res;
	jc__res_init(res);
	f->remote_hit = 1;
	flight_answer(f);
	f->work.data = f;
	if (uv_queue_work(d->loop, &f->work, publish_work_cb, publish_after_cb) != 0)
		flight_finish(f); /* served, not stored */
}

/* Starts a compile for key; takes *req and *inc (set to NULL) on success.
 * bad_object (or NULL) names the object of the row it replaces, which failed
 * its checks; direct is the direct key of *inc (NULL without one). The
 * request's bytes count against --buffer-budget until the flight ends:
 * JC_EBUSY (nothing taken) when they would pass it while other compiles are
 * queued, so that queued requests cannot grow without bound. */
static int start_flight(struct jc_daemon *d, struct jc_conn *conn, const uint8_t key[16],
			const uint8_t *direct, struct jc_req *req, struct jc_inc_set **inc,
			uint64_t t0, const uint8_t *bad_object)
{
	size_t bytes = req_bytes(req);
	if (jc__pool_busy(d->pool) && d->buffers.used + bytes > d->buffers.max)
		return JC_EBUSY;
	struct jc_flight *f = calloc(1, sizeof(*f));
	if (!f)
		return JC_ENOMEM;
	f->charged = bytes;
	d->buffers.used += bytes;
	f->d = d;
	memcpy(f->key, key, 16);
	memcpy(f->store_key, key, 16);
	if (direct)
		memcpy(f->direct, direct, 16);
	if (bad_object) {
		f->has_bad_object = 1;
		memcpy(f->bad_object, bad_object, 16);
	}
	f->req = *req;
	memset(req, 0, sizeof(*req));
	f->inc = *inc;
	*inc = NULL;
	jc__res_init(&f->res);
	f->next = d->flights;
	d->flights = f;
	if (flight_join(f, conn, JC_CACHE_MISS, t0, NULL) != 0) {
		flight_free(f);
		return JC_ENOMEM;
	}
	count(d, JC_CTR_misses, 1);
	if (f->req.output == JC_OUTPUT_FATBIN) {
		/* Assembled here from its parts, each a request of its own (which
		 * goes through the remote tier as any other). */
		if (jc__fatbin_start(d, f, conn) != 0) {
			flight_free(f);
			return JC_ENOMEM;
		}
		return 0;
	}
	/* Local miss: the remote tier first, unless the local object was bad. */
	if (!d->remote || bad_object || jc__remote_lookup(d->remote, key, remote_lookup_cb, f) != 0)
		jc__cache_enqueue(d, f);
	return 0;
}

void jc__cache_enqueue(struct jc_daemon *d, struct jc_flight *f)
{
	f->job.req = f->wreq ? f->wreq : &f->req;
	f->job.res = &f->res;
	memcpy(f->job.key, f->key, 16);
	f->job.wanted = flight_wanted;
	f->job.done = flight_job_done;
	jc__pool_submit(d->pool, &f->job);
}

/* A client could not use the object it was served: quarantine it (if the
 * row still names it) so that this request compiles afresh. Returns 1 and
 * copies the object to bad when it did. A load failure does so at most
 * JC_LOAD_RETRY_MAX times per key and window (retry.h); past that it
 * returns 0 and the existing entry is served. */
static int handle_reject(struct jc_daemon *d, struct jc_conn *conn, const uint8_t key[16],
			 const struct jc_req *req, uint8_t bad[16])
{
	const struct jc_entry *e = lookup(d, key);
	if (!e || e->status != 0 || memcmp(e->object, req->reject_object, 16) != 0)
		return 0; /* already replaced: the next lookup serves the new object */
	int corrupt = req->reject_reason == JC_REJECT_CORRUPT;
	if (corrupt && d->cache->ops->verify(d->cache, e) == 0) {
		/* A client's word alone never quarantines a good object. */
		char hex[33];
		jc__hex16(key, hex);
		jc_log_warn(STORE, "key %s: pid %d reported a bad object, but it passes the full hash "
			    "check; kept", hex, (int)d->conn_ops->pid(conn));
		return 0;
	}
	count(d, corrupt ? JC_CTR_corrupt_objects : JC_CTR_load_failures, 1);
	const char *why = corrupt ? "failed the client's hash check"
				  : (req->reject_message ? req->reject_message : "did not load");
	if (!corrupt && !jc__retry_take(d->load_retries, key,
					(int64_t)(jc__now_ns() / 1000000000u))) {
		char hex[33];
		jc__hex16(key, hex);
		jc_log_warn(STORE, "key %s: a client could not load it again (%s); %d recompiles in "
			    "%d s already, serving the existing entry (driver %s)", hex, why,
			    JC_LOAD_RETRY_MAX, JC_LOAD_RETRY_WINDOW_S, d->tc.driver_version);
		return 0;
	}
	memcpy(bad, e->object, 16);
	drop_bad_entry(d, key, bad, why);
	return 1;
}

/*
 * Answers from the index row of key, if there is one that serves: returns 1
 * when answered, 0 when the request must compile. A row from the memory
 * cache may be stale (purged or evicted meanwhile, its object with it), so
 * an object that cannot be opened is checked against SQLite's row before it
 * is called corrupt. A corrupt object is counted and quarantined, *bad set
 * to 1 and its hash copied to bad_object.
 */
static int serve_cached(struct jc_daemon *d, struct jc_conn *conn, const uint8_t key[16],
			const struct jc_strv *names, uint64_t t0, int *bad, uint8_t bad_object[16])
{
	struct jc_slot *s = slot_of(d, key);
	int in_memory = s->used && memcmp(s->e.key, key, 16) == 0;
	const struct jc_entry *e = lookup(d, key);
	if (!e)
		return 0;
	if (e->status) {
		if (e->expires <= jc__wall_s())
			return 0;
		struct jc_res res;
		result_of_entry(e, &res, JC_CACHE_NEGATIVE_HIT);
		res.server_ns = jc__now_ns() - t0;
		count(d, JC_CTR_negative_hits, 1);
		answer(d, conn, &res, -1);
		return 1;
	}
	uint8_t object[16];
	memcpy(object, e->object, 16);
	int rc = serve_hit(d, conn, e, names, t0);
	if (rc == 0)
		return 1;
	if (rc != JC_ECORRUPT && rc != JC_ENOTFOUND)
		return 0;
	if (in_memory) {
		memcache_forget(d, key);
		return serve_cached(d, conn, key, names, t0, bad, bad_object);
	}
	if (rc == JC_ENOTFOUND && !d->cache->ops->row_names(d->cache, key, object)) {
		/* Purged or evicted between our read of the row and the open (rows
		 * go before their objects): a plain miss, nothing is corrupt. */
		memcache_forget(d, key);
		return 0;
	}
	count(d, JC_CTR_corrupt_objects, 1);
	drop_bad_entry(d, key, object, rc == JC_ECORRUPT ? "failed its checks" : "is missing");
	*bad = 1;
	memcpy(bad_object, object, 16);
	return 0;
}

static void inc_free(struct jc_inc_set *inc)
{
	jc__inc_set_clear(inc);
	free(inc);
}

/* The request path once the key is known (loop thread). Takes *req and inc
 * (whose direct key is direct; both NULL when nothing is read from disk). */
static void request_with_key(struct jc_daemon *d, struct jc_conn *conn, struct jc_req *req,
			     const uint8_t key[16], const uint8_t *direct, struct jc_inc_set *inc,
			     uint64_t t0)
{
	uint8_t bad_object[16];
	int bad = 0, rc;
	/* A flight for the key replaces whatever object a client rejects. */
	struct jc_flight *f = flight_find(d, key);
	if (f) {
		if (flight_join(f, conn, JC_CACHE_JOINED, t0, &req->name_exprs) == 0) {
			count(d, JC_CTR_single_flight_joins, 1);
			goto out;
		}
		refuse(d, conn, JC_ENOMEM, "out of memory");
		goto out;
	}
	if (req->reject_reason != JC_REJECT_NONE)
		bad = handle_reject(d, conn, key, req, bad_object);
	if (!bad && serve_cached(d, conn, key, &req->name_exprs, t0, &bad, bad_object))
		goto out;
	if (d->stopping) {
		refuse(d, conn, JC_EBUSY, "daemon is shutting down");
	} else if (req->tree_round == JC_TREE_LOOKUP) {
		/* A client-read tree by hashes found nothing: the client sends the
		 * bytes on this connection (a RESULT: an ERROR would close it). */
		struct jc_res miss;
		jc__res_init(&miss);
		miss.status = JC_ENOTFOUND;
		miss.cache = JC_CACHE_MISS;
		miss.message = "no entry for these headers: send their bytes";
		memcpy(miss.key, key, 16);
		answer(d, conn, &miss, -1);
	} else if ((rc = start_flight(d, conn, key, inc ? direct : NULL, req, &inc, t0,
				      bad ? bad_object : NULL)) != 0) {
		char msg[200] = "out of memory";
		if (rc == JC_EBUSY) {
			snprintf(msg, sizeof(msg), "the daemon's request buffers are full (%zu of %zu "
				 "bytes, --buffer-budget, held by queued compiles); try again later",
				 d->buffers.used, d->buffers.max);
			jc_log_warn(NET, "uid %d pid %d: compile refused: buffer budget full",
				    (int)d->conn_ops->uid(conn), (int)d->conn_ops->pid(conn));
			count(d, JC_CTR_busy_refusals, 1);
		}
		refuse(d, conn, rc, msg);
	}
out:
	jc__req_clear(req);
	inc_free(inc);
}

/*
 * Key memo. A request that reads headers from disk is keyed in the thread
 * pool (below), which re-checks its include set each time. When that set
 * holds nothing but -I directories inside the toolkit tree (or nothing at
 * all), the check only asks that those directories still resolve into the
 * toolkit tree, whose headers the toolkit identity covers; the full key is
 * then remembered by direct key and used on the loop thread for a second
 * after each check, sparing a CUB-style request two thread hand-offs and a
 * manifest read per hit. A toolkit directory that stops resolving into the
 * tree (a symbolic link moved) is seen at most a second late.
 */
#define KEYMEMO_TTL_NS 1000000000ull

static struct jc_keymemo *keymemo_slot(struct jc_daemon *d, const uint8_t direct[16])
{
	uint32_t h;
	memcpy(&h, direct + 12, sizeof(h));
	return &d->keymemo[h % JC_KEYMEMO_SLOTS];
}

static void keymemo_drop(struct jc_daemon *d, struct jc_keymemo *m)
{
	jc__watch_forget(d->watch, m->watch_stamp);
	memset(m, 0, sizeof(*m));
}

/*
 * The remembered full key of direct: checked within the last second, or
 * (*watched set) its include tree is watched and unchanged since the check
 * (watch.h; the event queue is drained first).
 */
static const uint8_t *keymemo_get(struct jc_daemon *d, const uint8_t direct[16], int *watched)
{
	struct jc_keymemo *m = keymemo_slot(d, direct);
	*watched = 0;
	if (!m->checked_ns || memcmp(m->direct, direct, 16) != 0)
		return NULL;
	if (m->watch_stamp) {
		if (jc__watch_valid(d->watch, m->watch_stamp)) {
			*watched = 1;
			return m->key;
		}
		keymemo_drop(d, m);
		return NULL;
	}
	return jc__now_ns() - m->checked_ns < KEYMEMO_TTL_NS ? m->key : NULL;
}

/* Remembers key for direct when set has nothing on disk to re-check, or
 * its tree is watched (stamp; then owned by the memo). */
static void keymemo_put(struct jc_daemon *d, const uint8_t direct[16], const uint8_t key[16],
			const struct jc_inc_set *set, uint64_t stamp)
{
	for (size_t i = 0; !stamp && i < set->n; i++)
		if (set->v[i].kind != JC_INC_TOOLKIT)
			return;
	struct jc_keymemo *m = keymemo_slot(d, direct);
	keymemo_drop(d, m);
	memcpy(m->direct, direct, 16);
	memcpy(m->key, key, 16);
	m->checked_ns = jc__now_ns();
	m->watch_stamp = stamp;
}

/* 1 when key has a usable entry or a flight: a key from a watched tree is
 * then served without its include set (none is needed). */
static int key_known(struct jc_daemon *d, const uint8_t key[16])
{
	if (flight_find(d, key))
		return 1;
	const struct jc_entry *e = lookup(d, key);
	return e && (!e->status || e->expires > jc__wall_s());
}

/* A flight that learnt its key: the scan's key, remembered for its lookup
 * key, is not where the result went (the next request consults the manifest). */
static void keymemo_forget(struct jc_daemon *d, const struct jc_flight *f)
{
	uint8_t lookup[16];
	if (jc__key_lookup(f->direct, &f->req.include_dirs, lookup) != 0)
		return;
	struct jc_keymemo *m = keymemo_slot(d, lookup);
	if (memcmp(m->direct, lookup, 16) == 0)
		keymemo_drop(d, m);
}

/* A request keyed in the thread pool because it reads headers from disk. */
struct key_job {
	uv_work_t work;
	struct jc_daemon *d;
	struct jc_conn *conn;     /* referenced */
	struct jc_req req;        /* owned */
	uint64_t t0;
	uint8_t direct[16];       /* computed on the loop */
	uint8_t lookup[16];       /* its manifests' and memo's key (key.h) */
	uint8_t key[16];
	struct jc_inc_set *inc;   /* owned; NULL after a failure */
	int rc;
	int from_manifest;
	uint64_t stamp;           /* watch stamp of the include tree (watch.h); 0 = none */
	int watch_refused;        /* enum jc_watch_refusal other than OK and OFF */
	uint64_t n_stat, ns;
	char err[512];
};

static const char *watch_refusal_name(int why);

/*
 * Thread pool, once a set is known to match: watch its tree, then check it
 * again (the watches come first, so a change after this check is an event).
 * A set changed within the settle margin is not watched: its stat identity
 * (which the check trusts through the memo) may hide a second change.
 */
static void key_watch(struct key_job *j, const struct jc_inc_ctx *ctx)
{
	int why, disk = 0;
	for (size_t i = 0; i < j->inc->n; i++)
		disk |= j->inc->v[i].kind != JC_INC_TOOLKIT;
	if (!disk || j->inc->unsettled || !j->d->watch)
		return;
	j->stamp = jc__watch_tree(j->d->watch, j->inc, &why);
	if (!j->stamp) {
		j->watch_refused = why != JC_WATCH_OFF ? why : 0;
		return;
	}
	uint64_t before = j->inc->n_stat;
	int rc = jc__inc_check(j->inc, ctx);
	j->n_stat += j->inc->n_stat - before;
	if (rc != 1 || j->inc->unsettled) {
		jc__watch_forget(j->d->watch, j->stamp);
		j->stamp = 0;
	}
}

/* Thread pool: a manifest variant of the direct key that matches, or a scan. */
static void key_work_cb(uv_work_t *w)
{
	struct key_job *j = w->data;
	struct jc_daemon *d = j->d;
	uint64_t t = jc__now_ns();
	const uint8_t *direct = j->direct;
	const struct jc_inc_ctx ctx = inc_ctx(d);
	int rc = 0;
	if (!(j->inc = calloc(1, sizeof(*j->inc))))
		rc = JC_ENOMEM;
	if (rc == 0)
		rc = jc__manifest_lookup(d->manifests, j->lookup, &ctx, j->inc, &j->n_stat);
	if (rc == 1) {
		j->from_manifest = 1;
		rc = 0;
	} else if (rc == 0) {
		rc = jc__inc_scan(&j->req, &ctx, j->inc, j->err, sizeof(j->err));
		j->n_stat += j->inc->n_stat;
		char err[256];
		if (rc == 0 && jc__manifest_add(d->manifests, j->lookup, j->inc, err, sizeof(err)) != 0)
			jc_log_warn(KEY, "include manifest not stored (the next request scans again): %s",
				    err);
	}
	if (rc == 0)
		key_watch(j, &ctx);
	uint8_t tree[16];
	j->rc = rc ?: jc__inc_key_digest(j->inc, &j->req.include_dirs, tree);
	j->rc = j->rc ?: jc__key_with_tree(direct, tree, j->key);
	if (j->rc == JC_ENOMEM && !j->err[0])
		snprintf(j->err, sizeof(j->err), "out of memory keying a request with include files");
	j->ns = jc__now_ns() - t;
}

static void key_after_cb(uv_work_t *w, int status)
{
	struct key_job *j = w->data;
	struct jc_daemon *d = j->d;
	(void)status;
	count(d, JC_CTR_include_stats, j->n_stat);
	if (j->rc == 0) {
		char hex[33];
		jc__hex16(j->key, hex);
		count(d, j->from_manifest ? JC_CTR_include_manifest_hits : JC_CTR_include_scans, 1);
		if (j->from_manifest)
			count(d, JC_CTR_include_tree_stat_walks, 1);
		if (j->watch_refused) {
			count(d, JC_CTR_include_watch_fallbacks, 1);
			jc_log_info(KEY, "include tree of %zu entries not watched (%s): stat walk per request",
				    j->inc->n, watch_refusal_name(j->watch_refused));
		}
		jc_log_info(KEY, "key %s: %zu include entries %s%s: %llu stat calls, %llu files read, "
			    "%.3f ms", hex, j->inc->n, j->from_manifest ? "from the manifest" : "scanned",
			    j->inc->fallback ? " (computed include: whole directories)" : "",
			    (unsigned long long)j->n_stat, (unsigned long long)j->inc->n_read,
			    (double)j->ns / 1e6);
		keymemo_put(d, j->lookup, j->key, j->inc, j->stamp);
		j->stamp = 0;
		request_with_key(d, j->conn, &j->req, j->key, j->direct, j->inc, j->t0);
		j->inc = NULL;
	} else {
		if (j->rc == JC_EINVAL)
			count(d, JC_CTR_bad_requests, 1);
		refuse(d, j->conn, j->rc, j->err[0] ? j->err : jc_strerror(j->rc));
		jc__req_clear(&j->req);
		inc_free(j->inc);
	}
	jc__watch_forget(d->watch, j->stamp);
	d->conn_ops->unref(j->conn);
	free(j);
}

static int cmp_entry_path(const void *a, const void *b)
{
	return strcmp(((const struct jc_inc_entry *)a)->path, ((const struct jc_inc_entry *)b)->path);
}

/*
 * A client-read tree (req.h): the include set it describes, under the
 * client's directory strings (never opened), each file's hash computed here
 * from its bytes or, in the lookup round, as the client gives it (a wrong
 * one only misses: the bytes round hashes what it compiles). Into *out
 * (owned by the caller). 0, JC_EINVAL (a path sent twice) or JC_ENOMEM.
 */
static int tree_set(const struct jc_req *req, struct jc_inc_set *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < req->n_tree; i++) {
		const struct jc_blob *b = &req->tree[i];
		char *rel;
		unsigned long dir = strtoul(b->name, &rel, 10); /* validated: "I/REL" */
		const char *base = req->include_dirs.v[dir];
		size_t bl = strlen(base);
		bl -= bl > 1 && base[bl - 1] == '/';
		char *path;
		if (asprintf(&path, "%.*s%s", (int)bl, base, rel) < 0) /* rel: "/REL" or "" */
			return JC_ENOMEM;
		uint8_t hash[16];
		if (b->type == JC_TREE_FILE) {
			XXH128_canonical_t c;
			XXH128_canonicalFromHash(&c, XXH3_128bits(b->data, b->size));
			memcpy(hash, c.digest, 16);
		} else if (b->type == JC_TREE_HASH || b->type == JC_TREE_DIR) {
			memcpy(hash, b->data, 16);
		}
		uint8_t kind = b->type == JC_TREE_ABSENT ? JC_INC_ABSENT
			       : b->type == JC_TREE_DIR ? JC_INC_DIR : JC_INC_FILE;
		rc = jc__inc_set_add(out, path, strlen(path), kind, kind == JC_INC_ABSENT ? NULL : hash);
		free(path);
	}
	if (rc == 0 && out->n)
		qsort(out->v, out->n, sizeof(*out->v), cmp_entry_path);
	for (size_t i = 1; rc == 0 && i < out->n; i++)
		if (cmp_entry_path(&out->v[i - 1], &out->v[i]) == 0)
			rc = jc__fail(err, errlen, JC_EINVAL, "tree: %s sent twice", out->v[i].path);
	rc = rc ?: jc__inc_set_finish(out);
	if (rc == JC_ENOMEM)
		snprintf(err, errlen, "out of memory");
	return rc;
}

/* The request path of a client-read tree: keyed here, on the loop. */
static void tree_request(struct jc_daemon *d, struct jc_conn *conn, struct jc_req *req,
			 const uint8_t direct[16], uint64_t t0)
{
	char err[600] = "";
	uint8_t tree[16], key[16];
	struct jc_inc_set *inc = calloc(1, sizeof(*inc));
	int rc = inc ? tree_set(req, inc, err, sizeof(err)) : JC_ENOMEM;
	rc = rc ?: jc__inc_key_digest(inc, &req->include_dirs, tree);
	rc = rc ?: jc__key_with_tree(direct, tree, key);
	if (rc != 0) {
		count(d, JC_CTR_bad_requests, rc == JC_EINVAL);
		refuse(d, conn, rc, err[0] ? err : jc_strerror(rc));
		jc__req_clear(req);
		inc_free(inc);
		return;
	}
	count(d, JC_CTR_tree_requests, 1);
	request_with_key(d, conn, req, key, direct, inc, t0);
}

/*
 * jc__inc_needed(req), remembered by the request's direct key (which covers
 * everything it looks at: texts, names, options, include directories), so
 * that a hit of a source with directives does not lex it again.
 */
static int reads_disk(struct jc_daemon *d, const struct jc_req *req, const uint8_t direct[16])
{
	uint32_t h;
	memcpy(&h, direct + 8, sizeof(h));
	struct jc_needed_memo *m = &d->needed_memo[h % JC_NEEDED_MEMO_SLOTS];
	if (m->used && memcmp(m->direct, direct, 16) == 0)
		return m->needed;
	memcpy(m->direct, direct, 16);
	m->needed = jc__inc_needed(req);
	m->used = 1;
	return m->needed;
}

/* jc__toolchain_supports_arch, remembering the last architecture it
 * accepted: requests mostly name one, and the list is fixed at start-up. */
static int arch_supported(struct jc_daemon *d, const char *arch)
{
	if (strcmp(arch, d->arch_ok) == 0)
		return 1;
	if (!jc__toolchain_supports_arch(&d->tc, arch))
		return 0;
	snprintf(d->arch_ok, sizeof(d->arch_ok), "%s", arch);
	return 1;
}

void jc__cache_request(struct jc_daemon *d, struct jc_conn *conn, struct jc_req *req)
{
	uint64_t t0 = jc__now_ns();
	uint8_t key[16]; /* the key, or the direct key when headers are read from disk */
	char err[1536] = ""; /* room for the supported-architecture list */
	int rc = jc__key_compute(req, &d->tc, key, err, sizeof(err));
	int needed = rc == 0 && reads_disk(d, req, key);
	if (rc == 0 && req->test_fault && !d->cfg.test_faults) {
		rc = JC_EINVAL;
		snprintf(err, sizeof(err), "test faults are disabled (JITCACHE_TEST_FAULTS=1)");
	}
	if (rc == 0 && req->output == JC_OUTPUT_FATBIN)
		rc = jc__fatbin_check(d, req, err, sizeof(err));
	else if (rc == 0 && !arch_supported(d, req->arch)) {
		rc = JC_EINVAL;
		snprintf(err, sizeof(err), "NVRTC %s does not support %s; it supports %s",
			 d->tc.nvrtc_version, req->arch, d->tc.supported_archs);
	}
	/* Trust model (docs/ARCHITECTURE.md): the daemon opens paths a request
	 * names only for its own uid (and root); another uid's client reads its
	 * include directories itself and sends the files (a tree). */
	uid_t peer = d->conn_ops->uid(conn);
	if (rc == 0 && needed && !req->tree_round && peer != geteuid() && peer != 0) {
		rc = JC_EDENIED;
		snprintf(err, sizeof(err), "this daemon reads include directories and absolute "
			 "#include paths only for its own uid; send the headers in memory");
	}
	if (rc != 0) {
		count(d, JC_CTR_bad_requests, 1);
		refuse(d, conn, rc, err[0] ? err : jc_strerror(rc));
		jc__req_clear(req);
		return;
	}
	if (req->tree_round) {
		tree_request(d, conn, req, key, t0);
		return;
	}
	uint8_t lookup[16];
	if (needed && jc__key_lookup(key, &req->include_dirs, lookup) != 0) {
		refuse(d, conn, JC_ENOMEM, "out of memory");
		jc__req_clear(req);
		return;
	}
	int watched = 0;
	const uint8_t *known = needed ? keymemo_get(d, lookup, &watched) : key;
	if (known && watched && !key_known(d, known)) {
		/* Evicted or never stored: a compile needs the include set. */
		keymemo_drop(d, keymemo_slot(d, lookup));
		known = NULL;
	}
	if (known) {
		if (needed) {
			count(d, watched ? JC_CTR_include_tree_watch_hits : JC_CTR_include_manifest_hits, 1);
			memcpy(key, known, 16);
		}
		request_with_key(d, conn, req, key, NULL, NULL, t0);
		return;
	}
	struct key_job *j = calloc(1, sizeof(*j));
	if (j) {
		j->d = d;
		j->conn = conn;
		j->req = *req;
		j->t0 = t0;
		memcpy(j->direct, key, 16);
		memcpy(j->lookup, lookup, 16);
		j->work.data = j;
		d->conn_ops->ref(conn);
		memset(req, 0, sizeof(*req));
		if (uv_queue_work(d->loop, &j->work, key_work_cb, key_after_cb) == 0)
			return;
		*req = j->req;
		d->conn_ops->unref(conn);
		free(j);
	}
	refuse(d, conn, JC_ENOMEM, "out of memory");
	jc__req_clear(req);
}

/* --- periodic flush of access times and counters ----------------------------- */

struct jc_flush_job {
	struct jc_daemon *d;
	uint8_t (*keys)[16];
	uint32_t *hits;
	size_t n;
	uint64_t counters[JC_CTR__COUNT];
	int save_counters;
};

static void flush_run(struct jc_daemon *d, struct jc_flush_job *j)
{
	pthread_mutex_lock(&d->cache->wlock);
	if (j->n && jc__index_touch(d->cache->wix, (const uint8_t(*)[16])j->keys, j->hits, j->n, jc__wall_s()) != 0)
		jc_log_warn(INDEX, "access times not recorded: %s", jc__index_errmsg(d->cache->wix));
	if (j->save_counters) {
		if (jc__cachedir_save_counters(d->cache, j->counters) != 0)
			jc_log_warn(INDEX, "counters not saved: %s", jc__index_errmsg(d->cache->wix));
	}
	pthread_mutex_unlock(&d->cache->wlock);
}

static void flush_work_cb(uv_work_t *w)
{
	struct jc_flush_job *j = w->data;
	flush_run(j->d, j);
}

static void flush_job_free(struct jc_flush_job *j)
{
	free(j->keys);
	free(j->hits);
	free(j);
}

static void flush_after_cb(uv_work_t *w, int status)
{
	struct jc_flush_job *j = w->data;
	(void)status;
	j->d->flush_busy = 0;
	flush_job_free(j);
}

struct jc_flush_job *jc__cache_flush_take(struct jc_daemon *d)
{
	if (!d->n_touch && !d->cache->counters.dirty)
		return NULL;
	struct jc_flush_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->d = d;
	j->keys = d->touch_keys;
	j->hits = d->touch_hits;
	j->n = d->n_touch;
	d->touch_keys = NULL;
	d->touch_hits = NULL;
	d->n_touch = d->cap_touch = 0;
	j->save_counters = jc__counters_take(&d->cache->counters, j->counters);
	return j;
}

void jc__cache_tick(struct jc_daemon *d)
{
	if (d->flush_busy)
		return;
	struct jc_flush_job *j = jc__cache_flush_take(d);
	if (!j)
		return;
	d->flush_busy = 1;
	d->flush_work.data = j;
	if (uv_queue_work(d->loop, &d->flush_work, flush_work_cb, flush_after_cb) != 0) {
		d->flush_busy = 0;
		flush_job_free(j);
	}
}

void jc__cache_flush_write(struct jc_daemon *d, struct jc_flush_job *j)
{
	if (j) {
		flush_run(d, j);
		flush_job_free(j);
	}
}

void jc__cache_flush_sync(struct jc_daemon *d)
{
	jc__cache_flush_write(d, jc__cache_flush_take(d));
}

/* --- include tree watches (watch.h) ---------------------------------------- */

static const char *watch_refusal_name(int why)
{
	switch (why) {
	case JC_WATCH_BUDGET:
		return "over --max-include-watches";
	case JC_WATCH_LIMIT:
		return "inotify_add_watch failed: see fs.inotify.max_user_watches";
	case JC_WATCH_REMOTE:
		return "a network or FUSE file system";
	default:
		return "out of memory";
	}
}

/* Moves the watcher's event counts into the daemon's counters (loop). */
void jc__cache_watch_counts(struct jc_daemon *d, struct jc_watch_stats *out)
{
	struct jc_watch_stats st;
	jc__watch_stats(d->watch, &st, 1);
	count(d, JC_CTR_include_watch_invalidations, st.invalidations);
	count(d, JC_CTR_include_watch_overflows, st.overflows);
	if (out)
		*out = st;
}

static void watch_poll_cb(uv_poll_t *h, int status, int events)
{
	struct jc_daemon *d = h->data;
	(void)events;
	if (status < 0) { /* cannot happen to an inotify descriptor; do not spin on it */
		jc_log_warn(KEY, "include watch descriptor: %s; drained at each request only",
			    uv_strerror(status));
		uv_poll_stop(h);
	}
	jc__watch_drain(d->watch);
	jc__cache_watch_counts(d, NULL);
}

/* The watcher; without inotify, every hit stat-walks. */
static void watch_new(struct jc_daemon *d)
{
	char err[256];
	if (d->cfg.max_include_watches &&
	    jc__watch_new(d->cfg.max_include_watches, &d->watch, err, sizeof(err)) != 0)
		jc_log_warn(KEY, "include trees are not watched (every hit re-checks them): %s", err);
}

void jc__cache_watch_start(struct jc_daemon *d)
{
	if (!d->watch)
		return;
	d->watch_poll.data = d;
	if (uv_poll_init(d->loop, &d->watch_poll, jc__watch_fd(d->watch)) == 0) {
		d->watch_polling = 1;
		uv_poll_start(&d->watch_poll, UV_READABLE, watch_poll_cb);
	}
}

void jc__cache_watch_stop(struct jc_daemon *d)
{
	if (d->watch_polling)
		uv_close((uv_handle_t *)&d->watch_poll, NULL);
	d->watch_polling = 0;
}

int jc__cache_init(struct jc_daemon *d)
{
	char err[512] = "";
	d->memcache = calloc(JC_MEMCACHE_SLOTS, sizeof(*d->memcache));
	if (!d->memcache)
		return JC_ENOMEM;
	if (jc__inc_memo_new(INC_MEMO_ENTRIES, &d->inc_memo) != 0 ||
	    jc__retry_new(&d->load_retries) != 0)
		return JC_ENOMEM;
	int rc = jc__manifests_open(d->cfg.cache_dir, 0700,
				    &d->manifests, err, sizeof(err));
	if (rc != 0) {
		jc_log_err(STORE, "%s", err);
		return rc;
	}
	watch_new(d);
	return 0;
}

void jc__cache_free(struct jc_daemon *d)
{
	if (d->memcache)
		jc__cache_memcache_drop_all(d);
	free(d->memcache);
	d->memcache = NULL;
	jc__inc_memo_free(d->inc_memo);
	d->inc_memo = NULL;
	jc__manifests_close(d->manifests);
	d->manifests = NULL;
	jc__watch_free(d->watch);
	d->watch = NULL;
	jc__retry_free(d->load_retries);
	d->load_retries = NULL;
}
