/* SPDX-License-Identifier: MIT */
/*
 * The compile worker pool: jitcache-worker processes started with uv_spawn,
 * each talking frames over a socketpair on its fd 0. One job per worker at a
 * time; a job past the compile timeout gets its worker SIGKILLed; a worker
 * that dies is replaced. The pool owns its queues and calls back when a job
 * ends, in the shape of libuv's uv_queue_work: it knows nothing of flights,
 * connections or the cache. Loop thread only.
 *
 * Fairness between uids: each uid has its own queue (first in, first out),
 * and a free worker takes the head of the next queue in round-robin order
 * after the one served last, skipping a uid that already runs
 * user_max_workers jobs. So a uid's short compile waits for at most one
 * running compile (none while fewer than all workers are held), never for
 * another uid's queue, however long.
 */
#ifndef JC_POOL_H
#define JC_POOL_H

#include <stdint.h>
#include <uv.h>

#include "common/req.h"
#include "core/counters.h"

struct jc_pool;
struct jc_pool_job;

/*
 * Asked when a queued job reaches a worker: 1 runs it; 0 drops it (the pool
 * forgets it at once and never calls done: the callback may free it).
 */
typedef int (*jc_pool_wanted_cb)(struct jc_pool_job *job);
/*
 * The end of a job. status 0: it ran, *job->res holds the worker's result
 * or the failure that ended it (a crash, a timeout, out of memory: status
 * and message set, "nothing cached"). status JC_EBUSY: cancelled by
 * jc__pool_stop before it ran (*job->res untouched). The job is the
 * caller's again.
 */
typedef void (*jc_pool_done_cb)(struct jc_pool_job *job, int status);

/* One job, embedded in the object that owns it (container_of); set the
 * fields marked "in" before jc__pool_submit and leave it alone until done. */
struct jc_pool_job {
	const struct jc_req *req; /* in: what the worker runs; borrowed until done */
	struct jc_res *res;	  /* in: where the result goes; borrowed until done */
	uint8_t key[16];	  /* in: the key, for logs */
	uint32_t uid;		  /* in: whose queue and worker share it counts in */
	jc_pool_wanted_cb wanted; /* in: NULL = always run */
	jc_pool_done_cb done;	  /* in */
	int idle;		  /* in: background work (re-warm): runs only on the idle
				   * workers, after no client job (jc__pool_promote) */
	struct jc_pool_job *next; /* the pool's queue */
};

struct jc_pool_config {
	const char *worker_path; /* jitcache-worker; borrowed for the pool's life */
	const char *cache_dir;	 /* DIR: the workers run in DIR/worker-cwd; borrowed */
	int workers;		 /* processes for client jobs, started at once */
	int user_max_workers;	 /* client jobs of one uid running at once; 0: half of workers, at
				    least 1 */
	int idle_workers;	 /* processes for idle jobs, at idle CPU and I/O priority
				  * (SCHED_IDLE, the idle I/O class); started on demand */
	int compile_timeout_s;	 /* per job; 0 = none (jc__pool_set_timeout changes it) */
	uint64_t worker_memory;	 /* RLIMIT_AS of a worker in bytes; 0 = none */
	int confinement;	 /* enum jc_confine the workers apply (confine.h) */
};

/*
 * Makes DIR/worker-cwd (the workers' empty working directory, under the
 * cache lock) and starts cfg->workers workers on loop. ctr (borrowed for
 * the pool's life): compile_timeouts and worker_crashes are counted there.
 * *out owned by the caller: jc__pool_stop, then jc__pool_free once the loop
 * has closed every handle. Returns 0, JC_ENOMEM, JC_EIO (no worker could
 * start, or no working directory: err says why).
 */
int jc__pool_start(uv_loop_t *loop, const struct jc_pool_config *cfg, struct jc_counters *ctr,
		   struct jc_pool **out, char *err, size_t errlen);
/* Queues job (its "in" fields set) behind the others of its uid (an idle
 * job: behind the other idle jobs) and dispatches. A stopped pool cancels it at once (done with
 * JC_EBUSY). */
void jc__pool_submit(struct jc_pool *p, struct jc_pool_job *job);
/* A client asked for the key of an idle job. One that waits for a worker
 * becomes a client job, queued behind the others of its uid: 1. One running on
 * an idle worker goes on there at normal CPU and I/O priority, the
 * worker's threads and children raised (SCHED_OTHER, ioprio class none;
 * needs RLIMIT_NICE 20 or CAP_SYS_NICE, else the log says so once), and
 * back to idle priority once it is done: 1. Otherwise (not queued nor
 * running): 0. */
int jc__pool_promote(struct jc_pool *p, struct jc_pool_job *job);
/* Replaces every worker (the toolchain on disk changed: new ones load it):
 * an idle one now, a busy one once its job ends (that job's result comes
 * from the old one). */
void jc__pool_recycle(struct jc_pool *p);
/* 1 when client jobs wait for a worker. */
int jc__pool_busy(const struct jc_pool *p);
/* Hands queued jobs to idle workers; restarts missing workers (each tick). */
void jc__pool_dispatch(struct jc_pool *p);
/* A new compile timeout for jobs started from now on (SIGHUP). */
void jc__pool_set_timeout(struct jc_pool *p, int compile_timeout_s);
/* The workers' working directory (DIR/worker-cwd), owned by p: helper
 * processes the daemon starts run there too (fatbin.c). */
const char *jc__pool_cwd(const struct jc_pool *p);
/* Cancels the queued jobs (done with JC_EBUSY), then kills every worker:
 * running jobs end with a JC_EBUSY result. NULL-safe. */
void jc__pool_stop(struct jc_pool *p);
/* Frees p after jc__pool_stop, once the loop has closed the workers'
 * handles (uv_run returned). NULL-safe. */
void jc__pool_free(struct jc_pool *p);

#endif
