/* SPDX-License-Identifier: MIT */
/*
 * Re-warm (daemon.h, "rewarm.c"): the kept requests (core/kept.h) of the
 * entries made under another toolchain identity are compiled again for this
 * daemon's, most valuable first, in the background, so that the requests
 * clients will make find entries. Each goes through the request path
 * (jc__cache_request) on an internal connection with the uid that first
 * asked for it, so it is keyed, admitted and single-flighted exactly as
 * that client's own request would be: a client asking for the same key
 * joins the re-warm's flight (and promotes its queued compile ahead of
 * every re-warm one), and a re-warm request for a key a client is
 * compiling joins the client's. Flights a re-warm starts are idle jobs of
 * the pool (pool.h): only its idle workers (SCHED_IDLE, idle I/O class) run
 * them, never a client worker. At most cfg.rewarm_workers requests are in
 * progress; once the CPU time of the compiles reaches cfg.rewarm_budget_s
 * the rest are dropped (the report says so). A compile error is published
 * by the flight as for any client, a negative entry of this identity with
 * its log; the report lists the failures. Loop thread, but for the reads
 * from the index and the store, which run in the thread pool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "core/kept.h"
#include "daemon/daemon.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

/* Failures listed by the report (the log keeps every one). */
#define MAX_FAILURES 100
/* Bytes of a failure's log kept for the report. */
#define FAILURE_LOG_MAX 4096

struct item {
	struct jc_kept k; /* versions, source_name: NULL (not kept) */
	char source_name[256];
	struct item *next;
};

/* One request in progress: read in the thread pool, then asked. */
struct slot {
	struct jc_rewarm *rw;
	struct item *it;
	struct jc_req req;
	int load_rc;
	uv_work_t work;
	struct jc_conn *conn; /* internal; ours until released */
	struct slot *next;    /* rw->slots */
	int answered;
};

struct failure {
	char key[33];
	char source_name[256];
	char *message;
	char *log;
};

struct start_job {
	struct jc_rewarm *rw;
	uv_work_t work;
	struct jc_kept_filter f;
	char versions[sizeof(((struct jc_toolchain *)0)->summary)];
	struct item *head, *tail;
	uint64_t n;
	int rc;
	char why[128];
	void (*done)(void *ctx, int64_t queued);
	void *ctx;
};

struct jc_rewarm {
	struct jc_daemon *d;
	struct item *head, *tail; /* queued */
	struct slot *slots;	  /* in progress */
	int in_progress;
	int loading;	    /* a start_job runs */
	uv_timer_t release; /* releases answered slots off the request path */
	int closed;
	/* This run's figures (the counters hold every run's). */
	uint64_t total, queued, done, failed, dropped, cpu_ns;
	uint64_t cpu_ms_counted, cpu_s_counted; /* of cpu_ns, in the counters */
	int budget_spent;
	uint64_t started_ns, ended_ns;
	char why[128];
	int again; /* the toolchain changed during this run: another after it */
	struct failure failures[MAX_FAILURES];
	size_t n_failures;
};

static void pump(struct jc_rewarm *rw);

/* 1 when conn asks for the re-warm: one of its internal connections, or a
 * part's of a fatbin flight it started that no client waits for. Its
 * flights are background (idle) work. The request path's
 * d->request.hooks.background. */
static int owns(const struct jc_daemon *d, const struct jc_conn *conn)
{
	if (!d->rewarm)
		return 0;
	for (const struct slot *s = d->rewarm->slots; s; s = s->next)
		if (s->conn == conn)
			return 1;
	for (const struct jc_flight *f = d->request.flights; f; f = f->next)
		if (f->background && f->fatbin && jc__fatbin_part_conn(f->fatbin, conn))
			return 1;
	return 0;
}

static void failure_add(struct jc_rewarm *rw, const struct item *it, const char *message,
			const char *log)
{
	char hex[33];
	jc__hex16(it->k.key, hex);
	jc_log_warn(MAIN, "re-warm: request %s (%s) of uid %u failed: %s", hex, it->source_name,
		    it->k.uid, message);
	if (rw->n_failures == MAX_FAILURES)
		return;
	struct failure *f = &rw->failures[rw->n_failures++];
	memcpy(f->key, hex, sizeof(hex));
	snprintf(f->source_name, sizeof(f->source_name), "%s", it->source_name);
	f->message = strdup(message);
	f->log = log ? strndup(log, FAILURE_LOG_MAX) : NULL;
}

static void slot_free(struct slot *s)
{
	jc__req_clear(&s->req);
	free(s->it);
	free(s);
}

/* The request path is done with answered slots' connections: release them. */
static void release_cb(uv_timer_t *t)
{
	struct jc_rewarm *rw = t->data;
	struct jc_daemon *d = rw->d;
	for (struct slot **p = &rw->slots; *p;) {
		struct slot *s = *p;
		if (!s->answered) {
			p = &s->next;
			continue;
		}
		*p = s->next;
		d->request.conn_ops->unref(s->conn);
		slot_free(s);
		rw->in_progress--;
	}
	pump(rw);
}

static void sink(void *ctx, const struct jc_res *res, int objfd, int code, const char *message)
{
	struct slot *s = ctx;
	struct jc_rewarm *rw = s->rw;
	struct jc_daemon *d = rw->d;
	if (objfd >= 0)
		close(objfd);
	s->answered = 1;
	if (res && res->status == 0) {
		rw->done++;
		jc__daemon_count(d, JC_CTR_rewarm_done, 1);
	} else {
		rw->failed++;
		jc__daemon_count(d, JC_CTR_rewarm_failed, 1);
		const char *why =
		    res ? (res->message && *res->message ? res->message : jc_strerror(res->status))
		    : message ? message
			      : jc_strerror(code);
		failure_add(rw, s->it, why, res ? res->log : NULL);
	}
	if (res && res->cache == JC_CACHE_MISS) {
		rw->cpu_ns += res->cpu_ns;
		uint64_t ms = rw->cpu_ns / 1000000u, secs = ms / 1000u;
		jc__daemon_count(d, JC_CTR_rewarm_cpu_ms, ms - rw->cpu_ms_counted);
		jc__daemon_count(d, JC_CTR_rewarm_cpu_s, secs - rw->cpu_s_counted);
		rw->cpu_ms_counted = ms;
		rw->cpu_s_counted = secs;
	}
	if (!rw->closed)
		uv_timer_start(&rw->release, release_cb, 0, 0);
}

static void load_work_cb(uv_work_t *w)
{
	struct slot *s = w->data;
	struct jc_cachedir *c = s->rw->d->cache;
	pthread_mutex_lock(&c->wlock);
	s->load_rc = jc__kept_load(c, &s->it->k, &s->req);
	pthread_mutex_unlock(&c->wlock);
}

static void load_after_cb(uv_work_t *w, int status)
{
	struct slot *s = w->data;
	struct jc_rewarm *rw = s->rw;
	struct jc_daemon *d = rw->d;
	(void)status;
	if (s->load_rc == 0 && !d->run.stopping &&
	    (s->conn = d->request.conn_ops->internal(d, NULL, (uid_t)s->it->k.uid, sink, s)) !=
		NULL) {
		s->next = rw->slots;
		rw->slots = s;
		jc__cache_request(d, s->conn, &s->req);
		return;
	}
	rw->failed++;
	jc__daemon_count(d, JC_CTR_rewarm_failed, 1);
	failure_add(rw, s->it,
		    s->load_rc ? jc_strerror(s->load_rc) : "daemon stopping or out of memory",
		    NULL);
	rw->in_progress--;
	slot_free(s);
	pump(rw);
}

static int budget_left(struct jc_rewarm *rw)
{
	int64_t b = rw->d->cfg.rewarm_budget_s;
	if (b > 0 && rw->cpu_ns >= (uint64_t)b * 1000000000u && !rw->budget_spent) {
		rw->budget_spent = 1;
		jc_log_notice(MAIN,
			      "re-warm: budget of %lld CPU seconds spent; %llu requests dropped",
			      (long long)b, (unsigned long long)rw->queued);
	}
	return !rw->budget_spent;
}

static void pump(struct jc_rewarm *rw)
{
	struct jc_daemon *d = rw->d;
	while (!rw->closed && !d->run.stopping && rw->head &&
	       rw->in_progress < d->cfg.rewarm_workers && budget_left(rw)) {
		struct item *it = rw->head;
		rw->head = it->next;
		if (!rw->head)
			rw->tail = NULL;
		rw->queued--;
		struct slot *s = calloc(1, sizeof(*s));
		if (!s) {
			free(it);
			rw->failed++;
			continue;
		}
		s->rw = rw;
		s->it = it;
		s->work.data = s;
		rw->in_progress++;
		if (uv_queue_work(d->loop, &s->work, load_work_cb, load_after_cb) != 0) {
			rw->in_progress--;
			slot_free(s);
			rw->failed++;
		}
	}
	/* Out of budget: the rest are dropped. */
	while (rw->budget_spent && rw->head) {
		struct item *it = rw->head;
		rw->head = it->next;
		free(it);
		rw->queued--;
		rw->dropped++;
	}
	if (!rw->head)
		rw->tail = NULL;
	if (!rw->head && !rw->in_progress && !rw->loading && rw->started_ns && !rw->ended_ns) {
		rw->ended_ns = jc__now_ns();
		jc_log_notice(MAIN,
			      "re-warm (%s): %llu done, %llu failed, %llu dropped, %.1f CPU s",
			      rw->why, (unsigned long long)rw->done, (unsigned long long)rw->failed,
			      (unsigned long long)rw->dropped, (double)rw->cpu_ns / 1e9);
		if (rw->again && !rw->closed && !d->run.stopping) {
			rw->again = 0;
			jc__rewarm_start(d, 0, 0, "the toolchain changed during the last re-warm",
					 NULL, NULL);
		}
	}
}

static int collect_cb(const struct jc_kept *k, void *ctx)
{
	struct start_job *j = ctx;
	struct item *it = calloc(1, sizeof(*it));
	if (!it)
		return JC_ENOMEM;
	memcpy(it->k.key, k->key, 16);
	it->k.id = k->id;
	it->k.size = k->size;
	it->k.uid = k->uid;
	snprintf(it->source_name, sizeof(it->source_name), "%s", k->source_name);
	if (j->tail)
		j->tail->next = it;
	else
		j->head = it;
	j->tail = it;
	j->n++;
	return 0;
}

static void start_work_cb(uv_work_t *w)
{
	struct start_job *j = w->data;
	struct jc_cachedir *c = j->rw->d->cache;
	pthread_mutex_lock(&c->wlock);
	j->rc = c->ops->foreach_request(c, &j->f, collect_cb, j);
	pthread_mutex_unlock(&c->wlock);
}

static void start_after_cb(uv_work_t *w, int status)
{
	struct start_job *j = w->data;
	struct jc_rewarm *rw = j->rw;
	struct jc_daemon *d = rw->d;
	(void)status;
	rw->loading = 0;
	int64_t result = j->rc ? j->rc : (int64_t)j->n;
	if (j->rc != 0) {
		jc_log_err(MAIN, "re-warm (%s): cannot read the kept requests: %s", j->why,
			   jc__cachedir_errmsg(d->cache));
		while (j->head) {
			struct item *it = j->head;
			j->head = it->next;
			free(it);
		}
	} else {
		rw->head = j->head;
		rw->tail = j->tail;
		rw->total = rw->queued = j->n;
		jc__daemon_count(d, JC_CTR_rewarm_queued, j->n);
		jc_log_notice(MAIN,
			      "re-warm (%s): %llu kept requests of another toolchain identity "
			      "queued, %d at a time at idle priority",
			      j->why, (unsigned long long)j->n, d->cfg.rewarm_workers);
	}
	if (j->done)
		j->done(j->ctx, result);
	free(j);
	pump(rw);
}

static void run_reset(struct jc_rewarm *rw)
{
	for (size_t i = 0; i < rw->n_failures; i++) {
		free(rw->failures[i].message);
		free(rw->failures[i].log);
	}
	rw->n_failures = 0;
	rw->total = rw->queued = rw->done = rw->failed = rw->dropped = rw->cpu_ns = 0;
	rw->cpu_ms_counted = rw->cpu_s_counted = 0;
	rw->budget_spent = 0;
	rw->ended_ns = 0;
}

void jc__rewarm_start(struct jc_daemon *d, uint64_t top, int64_t since_s, const char *why,
		      void (*done)(void *ctx, int64_t queued), void *ctx)
{
	struct jc_rewarm *rw = d->rewarm;
	if (rw->loading || rw->head || rw->in_progress) {
		if (done)
			done(ctx, 0);
		else
			rw->again = 1;
		return;
	}
	struct start_job *j = calloc(1, sizeof(*j));
	if (!j) {
		if (done)
			done(ctx, JC_ENOMEM);
		return;
	}
	run_reset(rw);
	j->rw = rw;
	j->work.data = j;
	j->done = done;
	j->ctx = ctx;
	snprintf(j->why, sizeof(j->why), "%s", why);
	snprintf(rw->why, sizeof(rw->why), "%s", why);
	snprintf(j->versions, sizeof(j->versions), "%s", d->tc->summary);
	j->f = (struct jc_kept_filter){.now = jc__wall_s(),
				       .versions_not = j->versions,
				       .accessed_since = since_s,
				       .top = top};
	rw->loading = 1;
	rw->started_ns = jc__now_ns();
	if (uv_queue_work(d->loop, &j->work, start_work_cb, start_after_cb) != 0) {
		rw->loading = 0;
		free(j);
		if (done)
			done(ctx, JC_ENOMEM);
	}
}

int jc__rewarm_report(const struct jc_daemon *d, struct jc_admin_reply *out)
{
	const struct jc_rewarm *rw = d->rewarm;
	struct jc_record *r;
	int running = rw->loading || rw->head || rw->in_progress;
	uint64_t end = rw->ended_ns ? rw->ended_ns : jc__now_ns();
	int rc = jc__reply_add_record(out, &r);
	rc = rc
		 ?: jc__record_add_str(r, "state",
				       running		? "running"
				       : rw->started_ns ? "done"
							: "idle");
	rc = rc ?: jc__record_add_int(r, "keep_requests", d->cfg.keep_requests);
	rc = rc ?: jc__record_add_u64(r, "total", rw->total);
	rc = rc ?: jc__record_add_u64(r, "queued", rw->queued + (uint64_t)rw->in_progress);
	rc = rc ?: jc__record_add_u64(r, "done", rw->done);
	rc = rc ?: jc__record_add_u64(r, "failed", rw->failed);
	rc = rc ?: jc__record_add_u64(r, "dropped", rw->dropped);
	rc = rc ?: jc__record_add_u64(r, "cpu_ms", rw->cpu_ns / 1000000u);
	rc = rc ?: jc__record_add_int(r, "budget_s", d->cfg.rewarm_budget_s);
	rc = rc ?: jc__record_add_int(r, "budget_spent", rw->budget_spent);
	rc = rc ?: jc__record_add_int(r, "workers", d->cfg.rewarm_workers);
	rc = rc
		 ?: jc__record_add_u64(r, "elapsed_ms",
				       rw->started_ns ? (end - rw->started_ns) / 1000000u : 0);
	rc = rc ?: jc__record_add_str(r, "identity", d->tc->summary);
	rc = rc ?: jc__record_add_str(r, "cache_identity", d->cache_identity);
	for (size_t i = 0; rc == 0 && i < rw->n_failures; i++) {
		const struct failure *f = &rw->failures[i];
		rc = jc__reply_add_record(out, &r);
		rc = rc ?: jc__record_add_str(r, "key", f->key);
		rc = rc ?: jc__record_add_str(r, "source_name", f->source_name);
		rc = rc ?: jc__record_add_str(r, "message", f->message ? f->message : "");
		rc = rc ?: jc__record_add_str(r, "log", f->log ? f->log : "");
	}
	return rc;
}

int jc__rewarm_new(struct jc_daemon *d)
{
	struct jc_rewarm *rw = calloc(1, sizeof(*rw));
	if (!rw)
		return JC_ENOMEM;
	rw->d = d;
	d->request.hooks.background = owns;
	uv_timer_init(d->loop, &rw->release);
	rw->release.data = rw;
	d->rewarm = rw;
	return 0;
}

/* At shutdown (the loop runs once more to close handles). */
static void release_closed(uv_handle_t *h)
{
	(void)h;
}

void jc__rewarm_close(struct jc_daemon *d)
{
	struct jc_rewarm *rw = d->rewarm;
	if (!rw || rw->closed)
		return;
	rw->closed = 1;
	uv_close((uv_handle_t *)&rw->release, release_closed);
}

void jc__rewarm_free(struct jc_daemon *d)
{
	struct jc_rewarm *rw = d->rewarm;
	if (!rw)
		return;
	while (rw->head) {
		struct item *it = rw->head;
		rw->head = it->next;
		free(it);
	}
	while (rw->slots) {
		struct slot *s = rw->slots;
		rw->slots = s->next;
		d->request.conn_ops->unref(s->conn);
		slot_free(s);
	}
	run_reset(rw);
	free(rw);
	d->rewarm = NULL;
}
