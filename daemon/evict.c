/* SPDX-License-Identifier: MIT */
/*
 * Eviction's scheduling in the daemon (evict.h; the policy is in
 * evict_policy.c), and the periodic collector. Neither blocks a hit: hits
 * are answered on the loop thread from the reader index (SQLite WAL:
 * readers never wait for the writer) and an open descriptor of the object,
 * which stays readable after an unlink, so an entry evicted while it is
 * being served is not broken under its client. These jobs use the writer
 * index under wlock, one of each kind at a time.
 *
 * Pending access times are written before a job walks entries, so the LRU
 * order includes the hits of the last second.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "core/admin.h"
#include "core/evict.h"
#include "daemon/daemon.h"
#include "jitcache/jitcache.h"

/* A budget check every 5 ticks (seconds), besides one after each publish. */
#define EVICT_EVERY_TICKS 5

struct hk_job {
	uv_work_t work;
	struct jc_daemon *d;
	struct jc_flush_job *flush;
	struct jc_admin_env env;
	uint64_t max_size, share; /* the budget and share as they were when queued */
	struct jc_evict_report report;
	struct jc_admin_reply reply; /* of gc */
	int gc;			     /* 1: the collector, 0: the budget */
	int rc;
};

/* One daemon per process: its housekeeping state. Loop thread only. */
static int evict_busy, evict_again, gc_busy;
static uint64_t last_gc_ns;
static unsigned ticks;
static jc_evict_hook_fn report_hook;

static void evict_check(struct jc_daemon *d);

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
	j->env.tc = d->tc;
	j->env.daemon_pid = (int64_t)getpid();
	j->env.all_users = 1;
	/* The budget as it is now (SIGHUP may change it later). */
	j->max_size = d->cfg.max_size;
	j->share = d->cfg.user_max_size;
	return j;
}

static void job_work_cb(uv_work_t *w)
{
	struct hk_job *j = w->data;
	struct jc_daemon *d = j->d;
	struct jc_evict_report *r = &j->report;
	jc__cache_flush_write(d, j->flush);
	j->flush = NULL;
	pthread_mutex_lock(&d->cache->wlock);
	if (j->gc) {
		static const struct jc_admin_req gc = {.command = (char *)"gc"};
		j->rc = jc__admin_run(&j->env, &gc, &j->reply);
	} else {
		struct jc_tier_health h;
		j->rc = d->cache->ops->health(d->cache, &h);
		r->bytes_before = h.stored;
		j->rc = j->rc ?: jc__evict_run(&j->env, j->max_size, j->share);
		j->rc = j->rc ?: d->cache->ops->health(d->cache, &h);
		r->entries_after = h.entries;
		r->bytes_after = h.stored;
		r->evicted = j->env.evicted;
		r->user_evicted = j->env.user_evicted;
		r->max_size = j->max_size;
		r->low_water = jc__evict_mark(j->max_size, JC_EVICT_LOW_PCT);
		/* A reserve released on a full disk comes back once there is room. */
		d->cache->ops->reclaim(d->cache, 0);
	}
	if (j->rc != 0 && !j->reply.message) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", jc__cachedir_errmsg(d->cache));
		j->reply.message = strdup(msg);
	}
	pthread_mutex_unlock(&d->cache->wlock);
}

static void budget_done(struct hk_job *j)
{
	struct jc_daemon *d = j->d;
	const struct jc_evict_report *r = &j->report;
	if (j->rc != 0) {
		jc_log_warn(EVICT, "budget check failed: %s",
			    j->reply.message ? j->reply.message : jc_strerror(j->rc));
		return;
	}
	if (r->user_evicted)
		jc_log_info(EVICT,
			    "dropped %" PRIu64 " entries of uids over their share (%" PRIu64
			    " bytes, --user-max-size)",
			    r->user_evicted, j->share);
	if (r->evicted)
		jc_log_info(EVICT,
			    "evicted %" PRIu64 " least recently used entries: %" PRIu64
			    " -> %" PRIu64 " bytes stored (budget %" PRIu64
			    ", low-water mark %" PRIu64 ")",
			    r->evicted, r->bytes_before, r->bytes_after, r->max_size, r->low_water);
	if (r->evicted || r->user_evicted) {
		jc__daemon_count(d, JC_CTR_evictions, r->evicted);
		jc__daemon_count(d, JC_CTR_user_evictions, r->user_evicted);
	}
	if (report_hook)
		report_hook(d, r);
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
		evict_check(d);
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

/* Checks the budget and shares (at most one job at a time; a request while
 * one runs is run after it). */
static void evict_check(struct jc_daemon *d)
{
	if (d->run.stopping)
		return;
	if (evict_busy) {
		evict_again = 1;
		return;
	}
	struct hk_job *j = job_new(d, 0);
	if (j)
		job_queue(d, j, &evict_busy);
}

/* Runs the collector (jitcachectl gc) when cfg.gc_interval_s has passed since
 * the last run (counted from the start). */
static void gc_maybe(struct jc_daemon *d)
{
	uint64_t now = jc__now_ns();
	if (!last_gc_ns)
		last_gc_ns = now;
	if (d->run.stopping || gc_busy || d->cfg.gc_interval_s <= 0 ||
	    now - last_gc_ns < (uint64_t)d->cfg.gc_interval_s * 1000000000u)
		return;
	last_gc_ns = now;
	struct hk_job *j = job_new(d, 1);
	if (j)
		job_queue(d, j, &gc_busy);
}

/* Records the budget and share in the index, for offline commands, and
 * sizes the reserve and the write-ahead log to the budget. */
static void save_budget(struct jc_daemon *d)
{
	pthread_mutex_lock(&d->cache->wlock);
	jc__cachedir_record_budget(d->cache, d->cfg.max_size, d->cfg.user_max_size);
	pthread_mutex_unlock(&d->cache->wlock);
}

void jc__evict_start(struct jc_daemon *d, jc_evict_hook_fn hook)
{
	report_hook = hook;
	save_budget(d);
}

void jc__evict_stored(struct jc_daemon *d)
{
	evict_check(d);
}

void jc__evict_tick(struct jc_daemon *d)
{
	if (++ticks % EVICT_EVERY_TICKS == 0)
		evict_check(d);
	gc_maybe(d);
}

void jc__evict_budget_changed(struct jc_daemon *d, uint64_t old_max, uint64_t old_share)
{
	uint64_t share = d->cfg.user_max_size;
	if (d->cfg.max_size != old_max || share != old_share)
		save_budget(d);
	if (d->cfg.max_size < old_max || (share && (!old_share || share < old_share)))
		evict_check(d);
}
