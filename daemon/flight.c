/* SPDX-License-Identifier: MIT */
/*
 * Single flight and publishing: concurrent requests for one key wait on one
 * flight; a local miss asks the remote tier, else queues a compile in the
 * worker pool (pool.h); the result goes to every waiter and is published
 * through the tier (tier.h: object first, then the row) in the thread pool.
 * Loop thread, but for the publish job. docs/ARCHITECTURE.md, "Tiers".
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/log.h"
#include "common/util.h"
#include "core/kept.h"
#include "core/key.h"
#include "core/progname.h"
#include "daemon/daemon.h"
#include "daemon/pool.h"
#include "daemon/remote.h"
#include "jitcache/jitcache.h"

struct jc_flight *jc__flight_find(struct jc_daemon *d, const uint8_t key[16])
{
	for (struct jc_flight *f = d->request.flights; f; f = f->next)
		if (memcmp(f->key, key, 16) == 0)
			return f;
	return NULL;
}

/* Adds conn as a waiter; names (NULL for the flight's own request, whose
 * order the result has) is moved into the waiter. */
int jc__flight_join(struct jc_flight *f, struct jc_conn *conn, uint32_t cache, uint64_t t0,
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
	f->d->request.conn_ops->ref(conn);
	w->next = f->waiters;
	f->waiters = w;
	return 0;
}

static void waiter_free(struct jc_daemon *d, struct jc_waiter *w)
{
	d->request.conn_ops->unref(w->conn);
	jc__strv_clear(&w->names);
	free(w);
}

/* "NAME (COMM)": a display name with the process name of pid (its
 * /proc/PID/comm; "?" when gone), malloc'd, or NULL without memory. */
static char *listed_name(const char *name, pid_t pid)
{
	char path[64], comm[64] = "?", *out = NULL;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = pid > 0 ? fopen(path, "re") : NULL;
	if (f && fgets(comm, sizeof(comm), f))
		comm[strcspn(comm, "\n")] = '\0';
	if (f)
		fclose(f);
	return asprintf(&out, "%s (%s)", name, comm) < 0 ? NULL : out;
}

void jc__flight_free(struct jc_flight *f)
{
	struct jc_daemon *d = f->d;
	for (struct jc_flight **p = &d->request.flights; *p; p = &(*p)->next)
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
	jc__budget_release(&d->request.buffers, f->charged);
	jc__req_clear(&f->req);
	jc__res_clear(&f->res);
	free(f->listed_name);
	jc__inc_set_free(f->inc);
	if (f->fatbin)
		f->fatbin_ops->free(f->fatbin);
	free(f->record);
	free(f);
}

/* Results that become index rows: artifacts and deterministic compile errors. */
static int publishable(const struct jc_res *res)
{
	return res->status == 0 || res->status == JC_ECOMPILE;
}

/* Sends the flight's outcome to the waiters it has now (and forgets them). */
static void flight_answer(struct jc_flight *f)
{
	struct jc_res *res = &f->res;
	memcpy(res->key, f->learned || f->name_free ? f->store_key : f->key, 16);
	/* What NVRTC read, and the worker's compiler, are the daemon's business
	 * (PROTOCOL.md): never sent on. */
	for (size_t i = 0; i < res->n_deps; i++)
		free(res->deps[i].path);
	free(res->deps);
	res->deps = NULL;
	res->n_deps = 0;
	free(res->compiler);
	res->compiler = NULL;
	struct jc_lowered *own = res->lowered;
	/* Every uid that waited on a stored result is one of its users. */
	int stored = f->publish_rc == 0 && publishable(res) && !f->uncached && !f->tree_missing;
	while (f->waiters) {
		struct jc_waiter *w = f->waiters;
		struct jc_lowered *tmp;
		f->waiters = w->next;
		uid_t uid = f->d->request.conn_ops->uid(w->conn);
		if (stored && uid != f->uid)
			jc__memcache_touch(f->d->request.mc, f->store_key, uid, 0);
		/* Served, not stored: the request that ran the compile says so. */
		res->cache = w->cache == JC_CACHE_MISS && f->uncached && res->status == 0
				 ? JC_CACHE_UNCACHED
				 : w->cache;
		res->server_ns = jc__now_ns() - w->t0;
		jc__res_lowered_in_order(res, &w->names, &tmp);
		jc__answer(f->d, w->conn, res, -1);
		res->lowered = own;
		free(tmp);
		waiter_free(f->d, w);
	}
}

/* Sends the flight's outcome to every waiter and ends the flight. */
static void flight_finish(struct jc_flight *f)
{
	flight_answer(f);
	jc__flight_free(f);
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
	e->versions = (char *)f->tc->summary;
	e->source_name = f->listed_name	      ? f->listed_name
			 : f->req.source_name ? f->req.source_name
					      : (char *)"";
	e->app_abi = f->req.app_abi ? f->req.app_abi : (char *)"";
	options[0] = '\0';
	for (size_t i = 0, n = 0; i < f->req.options.n && n < cap; i++)
		n += (size_t)snprintf(options + n, cap - n, "%s%s", i ? " " : "",
				      f->req.options.v[i]);
	e->options = options;
	e->created = e->last_access = jc__wall_s();
	e->compile_ns = res->compile_ns;
	e->log = res->log ? res->log : (char *)"";
	e->lowered = res->lowered;
	e->n_lowered = res->n_lowered;
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
	if (publish && f->inc && f->inc->unsettled &&
	    jc__flight_rehashed(f, f->inc, what, sizeof(what)) != 1)
		snprintf(f->errmsg, sizeof(f->errmsg),
			 "include file %s changed just before the compile "
			 "and again since",
			 what);
	else if (publish && f->inc && !f->req.tree_round &&
		 !jc__inc_unchanged(f->inc, what, sizeof(what)))
		snprintf(f->errmsg, sizeof(f->errmsg), "include file %s changed during the compile",
			 what);
	else if (publish)
		jc__flight_check_deps(f);
	if (publish && !f->errmsg[0] && !f->remote_hit) {
		/* A time macro's expansion is not in the key: never a stale stamp. */
		const struct jc_inc_ctx ctx = jc__daemon_inc_ctx(d);
		/* A client-read tree's files are in the request: the paths NVRTC
		 * read are the client's, not the daemon's to open. */
		size_t n_deps = f->req.tree_round ? 0 : res->n_deps;
		int rc = jc__inc_time_macro(&f->req, res->deps, n_deps, &ctx, what, sizeof(what));
		if (rc != 0) {
			f->time_macro = 1;
			snprintf(f->errmsg, sizeof(f->errmsg),
				 "%s: a time macro, whose expansion the key "
				 "does not hold",
				 rc == 1 ? what : "out of memory looking for time macros");
		}
	}
	if (publish && !f->errmsg[0] && !f->remote_hit && f->name_free)
		jc__flight_name_verdict(f);
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
		f->publish_rc = d->cache->ops->publish(d->cache, &e, (uint32_t)f->uid, res->data,
						       res->size, f->errmsg, sizeof(f->errmsg));
		memcpy(res->object, e.object, 16);
	}
	/* The row of the bad object goes unless a new row replaced it (a learnt
	 * key is another row). */
	if ((!publish || f->publish_rc != 0 || f->learned) && f->has_bad_object)
		d->cache->ops->drop_row(d->cache, f->key, f->bad_object);
}

/* A flight that learnt its key: the scan's key, remembered for its lookup
 * key, is not where the result went (the next request consults the manifest). */
static void forget_learnt_key(struct jc_daemon *d, const struct jc_flight *f)
{
	uint8_t lookup[16];
	if (jc__key_lookup(f->direct, &f->req.include_dirs, lookup) == 0)
		jc__keymemo_forget(d, lookup);
}

/* Write-back: a result compiled here goes to the remote tier, off the
 * request path (remote.h). */
static void publish_remote(struct jc_flight *f)
{
	struct jc_daemon *d = f->d;
	char meta[1024];
	snprintf(meta, sizeof(meta), "arch=%s source=%s app_abi=%s toolchain=%s",
		 f->req.arch ? f->req.arch : "", f->req.source_name ? f->req.source_name : "",
		 f->req.app_abi ? f->req.app_abi : "", f->tc->summary);
	/* Under the key it was stored under: a learnt key, not the scan's, covers
	 * what NVRTC read; and then the record that leads a fresh daemon's scan
	 * there, under the request's lookup key. */
	jc__remote_publish(d->remote, f->store_key, &f->res, meta);
	uint8_t lookup[16];
	if (f->learned && f->record &&
	    jc__key_lookup(f->direct, &f->req.include_dirs, lookup) == 0) {
		jc__remote_record_publish(d->remote, lookup, f->store_key, f->record,
					  f->record_len);
		f->record = NULL;
	}
}

/* Keeping a stored entry's request (kept.h), after its waiters have their
 * answer: the request moves out of the flight into this job, its bytes
 * still counted against --buffer-budget until it is written. */
struct keep_job {
	uv_work_t work;
	struct jc_daemon *d;
	struct jc_req req;
	uint8_t key[16];
	uint32_t uid;
	size_t charged;
};

static void keep_work_cb(uv_work_t *work)
{
	struct keep_job *j = work->data;
	char why[256];
	if (jc__kept_store(j->d->cache, j->key, j->uid, &j->req, why, sizeof(why)) != 0)
		jc_log_warn(STORE, "request of an entry not kept: %s", why);
}

static void keep_after_cb(uv_work_t *work, int status)
{
	struct keep_job *j = work->data;
	(void)status;
	jc__budget_release(&j->d->request.buffers, j->charged);
	jc__req_clear(&j->req);
	free(j);
}

/* Starts keeping f's request (a failure costs only that); takes f->req. */
static void keep_request(struct jc_flight *f)
{
	struct jc_daemon *d = f->d;
	struct keep_job *j = calloc(1, sizeof(*j));
	if (!j)
		return;
	j->d = d;
	j->req = f->req;
	memcpy(j->key, f->store_key, 16);
	j->uid = (uint32_t)f->uid;
	j->charged = f->charged; /* moved with the request */
	j->work.data = j;
	if (uv_queue_work(d->loop, &j->work, keep_work_cb, keep_after_cb) != 0) {
		free(j);
		return;
	}
	memset(&f->req, 0, sizeof(f->req));
	f->charged = 0;
}

static void publish_after_cb(uv_work_t *work, int status)
{
	struct jc_flight *f = work->data;
	struct jc_daemon *d = f->d;
	int stored = f->publish_rc == 0 && f->res.status == 0;
	/* a row of this request's result now exists (an artifact or a compile error) */
	int keep = d->cfg.keep_requests && f->publish_rc == 0 && publishable(&f->res) &&
		   !f->uncached && !f->tree_missing;
	(void)status;
	if (f->learned && f->publish_rc == 0 && !f->uncached) {
		char hex[33], shex[33];
		jc__hex16(f->key, hex);
		jc__hex16(f->store_key, shex);
		jc_log_info(KEY,
			    "key %s: NVRTC read %s, which the scan missed; stored under the key of "
			    "what it read, %s",
			    hex, f->learned_from, shex);
		jc__daemon_count(d, JC_CTR_deps_learned, 1);
		forget_learnt_key(d, f);
	}
	if (f->name_free && !f->remote_hit && f->publish_rc == 0 && !f->uncached &&
	    publishable(&f->res))
		jc__daemon_count(d, f->name_bound ? JC_CTR_name_bound : JC_CTR_name_free, 1);
	if (stored && !f->uncached && !f->remote_hit && d->remote &&
	    f->req.output != JC_OUTPUT_FATBIN) /* parts are published, not their assembly */
		publish_remote(f);
	jc__memcache_forget(d->request.mc, f->key);
	jc__memcache_forget(d->request.mc, f->store_key);
	if (f->rehashed && !f->uncached && stored)
		jc__daemon_count(d, JC_CTR_include_rehashed, 1);
	if (f->tree_missing) {
		char hex[33];
		jc__hex16(f->key, hex);
		jc_log_notice(KEY, "key %s: %s", hex, f->errmsg);
		jc__daemon_count(d, JC_CTR_deps_mismatch, 1);
		jc__res_clear(&f->res);
		jc__res_init(&f->res);
		f->res.status = JC_EINVAL;
		f->res.message = strdup(f->errmsg);
	} else if (f->uncached) {
		char hex[33];
		jc__hex16(f->key, hex);
		jc_log_info(KEY, "key %s: served, not stored: %s", hex, f->errmsg);
		jc__daemon_count(d,
				 f->time_macro	    ? JC_CTR_time_macros
				 : f->deps_mismatch ? JC_CTR_deps_mismatch
						    : JC_CTR_include_uncached,
				 1);
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
	uint8_t key[16];
	int warm = stored && !f->uncached && !f->tree_missing;
	memcpy(key, f->store_key, 16);
	/* Whoever serves hits elsewhere (the serving threads) reads the row:
	 * the answers' MSG_DONE comes after on the same queue, so the client's
	 * next request on its connection finds the row there (another
	 * connection's may come first: the main loop serves it). */
	if (warm && d->request.conn_ops->warm)
		d->request.conn_ops->warm(d, key);
	flight_answer(f);
	if (keep)
		keep_request(f);
	jc__flight_free(f);
	/* Its row and descriptors ready for the first hit, now that the answers
	 * are out (memcache.c). */
	if (warm)
		jc__memcache_warm(d->request.mc, key);
	/* A new object may have passed the budget's high-water mark. */
	if (stored)
		jc__evict_stored(d);
}

void jc__flight_done(struct jc_daemon *d, struct jc_flight *f)
{
	char hex[33];
	if (f->fatbin) {
		f->fatbin_ops->finish(f); /* its parts count as compiles */
	} else {
		jc__daemon_count(d, JC_CTR_compiles, 1);
		jc__daemon_count(d, JC_CTR_compile_ns, f->res.compile_ns);
		if (f->res.status != 0)
			jc__daemon_count(d, JC_CTR_compile_failures, 1);
	}
	/* The log kept (and answered): its first and last parts, within
	 * --max-log-size and a sixteenth of the budget, which it counts in. */
	uint64_t cap =
	    d->cfg.max_size / 16 < d->cfg.max_log_size ? d->cfg.max_size / 16 : d->cfg.max_log_size;
	jc__text_cap(&f->res.log, (size_t)cap);
	jc__hex16(f->key, hex);
	jc_log_info(WORKER, "key %s: %s of %s for %s %s in %.1f ms%s", hex,
		    f->fatbin		   ? "fatbin"
		    : f->req.n_link_inputs ? "link"
					   : "compile",
		    f->req.source_name ? f->req.source_name : "(link inputs)",
		    f->req.arch ? f->req.arch : "?",
		    f->res.status == 0 ? "done" : jc_strerror(f->res.status),
		    f->res.compile_ns / 1e6, f->job.idle ? " at idle priority" : "");
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
		if (!f->d->request.conn_ops->gone(w->conn)) {
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
	jc_log_info(KEY,
		    "key %s: compile dropped before it ran: every client that "
		    "asked for it has gone",
		    hex);
	jc__flight_free(f);
	return 0;
}

/*
 * A worker's result is stored only under a key of the compiler that worker
 * loaded (its RESULT's compiler field): a worker started after the toolkit
 * was replaced on disk loads the new one while f's key names the old. Then
 * f fails (JC_EVERSION, nothing stored) and the daemon looks at the
 * toolchain on disk again, switching to it (d->request.hooks.toolchain_recheck).
 */
static void check_compiler(struct jc_flight *f)
{
	struct jc_daemon *d = f->d;
	struct jc_res *res = &f->res;
	char want[512], hex[33], msg[1400];
	if (!publishable(res))
		return; /* the pool's own failures: no worker result */
	if (jc__toolchain_compiler(f->tc, want, sizeof(want)) == 0 && res->compiler &&
	    strcmp(res->compiler, want) == 0)
		return;
	jc__hex16(f->key, hex);
	snprintf(msg, sizeof(msg),
		 "the compile worker loaded another compiler (%s) than this request "
		 "was keyed for (%s): the toolchain changed on disk; nothing cached; the daemon "
		 "switches to the new toolchain, ask again",
		 res->compiler ? res->compiler : "unnamed", want);
	jc_log_err(KEY, "key %s: %s", hex, msg);
	jc__daemon_count(d, JC_CTR_compiler_mismatches, 1);
	jc__res_clear(res);
	res->status = JC_EVERSION;
	res->output = f->req.output;
	res->message = strdup(msg);
	if (d->request.hooks.toolchain_recheck)
		d->request.hooks.toolchain_recheck(d, "a worker loaded another compiler");
}

/* Pool callback: the compile ended, or was cancelled at shutdown. */
static void flight_job_done(struct jc_pool_job *job, int status)
{
	struct jc_flight *f = JC_CONTAINER_OF(job, struct jc_flight, job);
	if (status == 0) {
		check_compiler(f);
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

/* Read-through: the remote tier's answer for a flight's key (for a
 * name-free request, stored_as is its free key or its named key). A
 * verified value is served at once, then published locally as a compile's
 * result would be (its fsyncs are off the answer's path; requests that come
 * meanwhile join the flight and get the same bytes); anything else
 * compiles. */
static void remote_answer(struct jc_flight *f, int rc, struct jc_res *res,
			  const uint8_t stored_as[16])
{
	struct jc_daemon *d = f->d;
	if (d->run.stopping) {
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
	memcpy(f->store_key, stored_as, 16);
	/* The request that started the flight (and any that joined before the
	 * lookup answered) get what was served: no compile ran. */
	for (struct jc_waiter *w = f->waiters; w; w = w->next)
		if (w->cache == JC_CACHE_MISS)
			w->cache = JC_CACHE_REMOTE_HIT;
	flight_answer(f);
	f->work.data = f;
	if (uv_queue_work(d->loop, &f->work, publish_work_cb, publish_after_cb) != 0)
		flight_finish(f); /* served, not stored */
}

static void remote_lookup_cb(void *arg, int rc, struct jc_res *res)
{
	struct jc_flight *f = arg;
	remote_answer(f, rc, res, f->key);
}

/* A name-free request's key without its name first (stored there by a
 * daemon that found no name in the result), then the named key of its
 * name's last component (progname.h), then its named key. */
static void remote_peek_cb(void *arg, int rc, struct jc_res *res)
{
	struct jc_flight *f = arg;
	const uint8_t *asked = f->peeked ? f->base_key : f->free_key;
	int next = rc != 0 && !f->d->run.stopping;
	if (next && !f->peeked++ && f->has_base_key &&
	    jc__remote_peek(f->d->remote, f->base_key, remote_peek_cb, f) == 0)
		return;
	if (next && jc__remote_lookup(f->d->remote, f->key, remote_lookup_cb, f) == 0) {
		jc__loop_spin(f->d->request.spin);
		return;
	}
	remote_answer(f, rc, res, asked);
}

/* Starts a compile for key; takes *req and *inc (set to NULL) on success.
 * bad_object (or NULL) names the object of the row it replaces, which failed
 * its checks; direct is the direct key of *inc (NULL without one). The
 * request's bytes count against --buffer-budget until the flight ends:
 * JC_EBUSY (nothing taken) when they would pass it while other compiles are
 * queued, so that queued requests cannot grow without bound. */
int jc__flight_start(struct jc_daemon *d, struct jc_conn *conn, const struct jc_toolchain *tc,
		     const uint8_t key[16], const uint8_t *direct, struct jc_req *req,
		     struct jc_inc_set **inc, uint64_t t0, const uint8_t *bad_object,
		     struct jc_fetched *fetched, const uint8_t *free_key, struct jc_flight **out)
{
	size_t bytes = req_bytes(req);
	if (jc__pool_busy(d->pool) &&
	    jc__budget_used(&d->request.buffers) + bytes > d->request.buffers.max)
		return JC_EBUSY;
	struct jc_flight *f = calloc(1, sizeof(*f));
	if (!f)
		return JC_ENOMEM;
	f->charged = bytes;
	jc__budget_charge(&d->request.buffers, bytes);
	f->d = d;
	f->tc = tc;
	f->uid = d->request.conn_ops->uid(conn);
	f->background = d->request.hooks.background && d->request.hooks.background(d, conn);
	if (req->display_name)
		f->listed_name = listed_name(req->display_name, d->request.conn_ops->pid(conn));
	memcpy(f->key, key, 16);
	memcpy(f->store_key, free_key ? free_key : key, 16);
	if (free_key) {
		uint8_t full[16];
		f->name_free = 1;
		memcpy(f->free_key, free_key, 16);
		f->has_base_key =
		    jc__progname_keys(free_key, req->source_name, f->base_key, full) == 2;
	}
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
	f->next = d->request.flights;
	d->request.flights = f;
	if (jc__flight_join(f, conn, JC_CACHE_MISS, t0, NULL) != 0) {
		jc__flight_free(f);
		return JC_ENOMEM;
	}
	jc__daemon_count(d, JC_CTR_misses, 1);
	*out = f;
	/* A fatbin is assembled from its parts, each a request of its own
	 * (which goes through the remote tier as any other): the caller's. */
	if (f->req.output == JC_OUTPUT_FATBIN)
		return 0;
	/* Local miss: the remote tier first, unless the local object was bad. */
	if (fetched && d->remote && !bad_object) {
		/* the value of the key the request was keyed with: for a
		 * name-free one, its key without the name */
		jc__remote_prefetch_used(d->remote, fetched->ns);
		remote_answer(f, 0, &fetched->res, f->name_free ? free_key : f->key);
	} else if (d->remote && !bad_object &&
		   (f->name_free ? jc__remote_peek(d->remote, free_key, remote_peek_cb, f)
				 : jc__remote_lookup(d->remote, key, remote_lookup_cb, f)) == 0) {
		jc__loop_spin(d->request.spin); /* its answer comes well within a compile's time */
	} else {
		jc__cache_enqueue(d, f);
	}
	return 0;
}

void jc__cache_enqueue(struct jc_daemon *d, struct jc_flight *f)
{
	/* The keyed symlinked headers: their workers' confinement allows the
	 * chains of targets (a retarget since is caught by jc__inc_unchanged). */
	jc__strv_clear(&f->req.follow);
	for (size_t i = 0; f->inc && i < f->inc->n; i++)
		if (f->inc->v[i].kind == JC_INC_LINK &&
		    jc__strv_push(&f->req.follow, f->inc->v[i].path) != 0)
			break; /* out of memory: a link left out is refused by the worker */
	f->job.req = f->wreq ? f->wreq : &f->req;
	f->job.res = &f->res;
	memcpy(f->job.key, f->key, 16);
	f->job.uid = (uint32_t)f->uid;
	f->job.wanted = flight_wanted;
	f->job.done = flight_job_done;
	f->job.idle = f->background;
	jc__pool_submit(d->pool, &f->job);
}
