/* SPDX-License-Identifier: MIT */
/*
 * Housekeeping in the libuv thread pool: the byte budget and the periodic
 * collector. Neither blocks a hit: hits are answered on the loop thread from
 * the reader index (SQLite WAL: readers never wait for the writer) and an
 * open descriptor of the object, which stays readable after an unlink, so an
 * entry evicted while it is being served is not broken under its client.
 * These jobs use the writer index under wlock, one of each kind at a time.
 *
 * Pending access times are written before a job walks entries, so the LRU
 * order includes the hits of the last second.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "daemon.h"
#include "jitcache/jitcache.h"
#include "log.h"

struct hk_job {
	uv_work_t work;
	struct jc_daemon *d;
	struct jc_flush_job *flush;
	struct jc_admin_env env;
	uint64_t high, low;           /* budget marks in bytes */
	uint64_t bytes_before, bytes_after, entries_after;
	struct jc_admin_reply reply;  /* of gc */
	int gc;                       /* 1: the collector, 0: the budget */
	int rc;
};

/* One daemon per process: its housekeeping state. Loop thread only. */
static int evict_busy, evict_again, gc_busy;
static uint64_t last_gc_ns;

static struct hk_job *job_new(struct jc_daemon *d, int gc)
{
	struct hk_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->d = d;
	j->gc = gc;
	j->work.data = j;
	j->flush = jc__cache_flush_take(d);
	j->env.cd = d->cache;
	j->env.tc = &d->tc;
	j->env.daemon_pid = (int64_t)getpid();
	/* Marks from the budget as it is now (SIGHUP may change it later). */
	j->high = jc__admin_budget_mark(d->cfg.max_size, JC_EVICT_HIGH_PCT);
	j->low = jc__admin_budget_mark(d->cfg.max_size, JC_EVICT_LOW_PCT);
	return j;
}

static void job_work_cb(uv_work_t *w)
{
	struct hk_job *j = w->data;
	struct jc_daemon *d = j->d;
	jc__cache_flush_write(d, j->flush);
	j->flush = NULL;
	pthread_mutex_lock(&d->cache->wlock);
	if (j->gc) {
		static const struct jc_admin_req gc = {.command = (char *)"gc"};
		j->rc = jc__admin_run(&j->env, &gc, &j->reply);
	} else {
		j->rc = jc__index_totals(d->cache->wix, NULL, NULL, &j->bytes_before);
		uint64_t evicted = 0; /* also added to env.evicted */
		if (j->rc == 0 && j->bytes_before > j->high)
			j->rc = jc__admin_evict_to(&j->env, j->low, &evicted);
		j->rc = j->rc ?: jc__index_totals(d->cache->wix, &j->entries_after, NULL, &j->bytes_after);
		/* A reserve released on a full disk comes back once there is room. */
		jc__store_reserve_make(d->cache->store);
	}
	if (j->rc != 0 && !j->reply.message) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", jc__index_errmsg(d->cache->wix));
		j->reply.message = strdup(msg);
	}
	pthread_mutex_unlock(&d->cache->wlock);
}

static void budget_done(struct hk_job *j)
{
	struct jc_daemon *d = j->d;
	if (j->rc != 0) {
		jc_log_warn(EVICT, "budget check failed: %s",
			    j->reply.message ? j->reply.message : jc_strerror(j->rc));
		return;
	}
	if (j->env.evicted) {
		jc_log_info(EVICT,
			    "evicted %" PRIu64 " least recently used entries: %" PRIu64 " -> %" PRIu64
			    " bytes (budget %" PRIu64 ", low-water mark %" PRIu64 ")",
			    j->env.evicted, j->bytes_before, j->bytes_after, d->cfg.max_size, j->low);
	}
	const struct jc_evict_report r = {
		.entries = j->entries_after, .bytes = j->bytes_after, .evicted = j->env.evicted};
	d->evict_report(d, &r);
}

static void gc_done(struct hk_job *j)
{
	if (j->rc != 0)
		jc_log_warn(EVICT, "collector failed: %s",
			    j->reply.message ? j->reply.message : jc_strerror(j->rc));
	else if (j->env.removed || j->reply.n_rec)
		jc_log_info(EVICT, "collector: %s", j->reply.message ? j->reply.message : "done");
	else
		jc_log_debug(EVICT, "collector: nothing to remove");
}

static void job_after_cb(uv_work_t *w, int status)
{
	struct hk_job *j = w->data;
	struct jc_daemon *d = j->d;
	(void)status;
	if (j->env.removed || j->env.evicted)
		jc__cache_memcache_drop_all(d);
	if (j->gc) {
		gc_done(j);
		gc_busy = 0;
	} else {
		budget_done(j);
		evict_busy = 0;
	}
	jc__admin_reply_clear(&j->reply);
	int again = !j->gc && evict_again;
	free(j);
	if (again) {
		evict_again = 0;
		jc__evict_check(d);
	}
}

static void job_queue(struct jc_daemon *d, struct hk_job *j, int *busy)
{
	*busy = 1;
	if (uv_queue_work(d->loop, &j->work, job_work_cb, job_after_cb) != 0) {
		*busy = 0;
		jc__cache_flush_write(d, j->flush);
		free(j);
	}
}

void jc__evict_check(struct jc_daemon *d)
{
	if (d->stopping)
		return;
	if (evict_busy) {
		evict_again = 1;
		return;
	}
	struct hk_job *j = job_new(d, 0);
	if (j)
		job_queue(d, j, &evict_busy);
}

void jc__gc_maybe(struct jc_daemon *d)
{
	uint64_t now = jc__now_ns();
	if (!last_gc_ns)
		last_gc_ns = now;
	if (d->stopping || gc_busy || d->cfg.gc_interval_s <= 0 ||
	    now - last_gc_ns < (uint64_t)d->cfg.gc_interval_s * 1000000000u)
		return;
	last_gc_ns = now;
	struct hk_job *j = job_new(d, 1);
	if (j)
		job_queue(d, j, &gc_busy);
}
