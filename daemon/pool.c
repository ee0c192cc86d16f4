/* SPDX-License-Identifier: MIT */
#include "daemon/pool.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "core/confine.h"
#include "daemon/framer.h"
#include "daemon/worker.h"
#include "jitcache/jitcache.h"

/* One uid's jobs: those queued, in order, and how many run. A queue exists
 * while it has either; served_at orders the round robin (0: never served). */
struct uid_queue {
	uint32_t uid;
	int running;
	uint64_t served_at;
	struct jc_pool_job *head, *tail;
	struct uid_queue *next;
};

struct jc_pool {
	uv_loop_t *loop;
	struct jc_pool_config cfg;
	char *worker_path;
	char *worker_cwd;	 /* DIR/worker-cwd */
	char *worker_tmp;	 /* DIR/tmp: where a worker writes a client's headers */
	struct jc_counters *ctr; /* borrowed */
	/* Slots [0, cfg.workers) run client jobs, the cfg.idle_workers after
	 * them (started when their queue first has a job) run idle jobs at idle
	 * CPU and I/O priority (worker.h, --idle). */
	struct jc_worker **workers;
	int n_workers;
	int stopping;
	int raise_warned; /* the log said once why a worker could not be raised */
	struct jc_pool_job *idle_head, *idle_tail; /* the idle jobs' queue (no uid turns) */
	int user_max_workers;			   /* the cap in force (cfg's, or its default) */
	struct uid_queue *queues;		   /* one per uid with jobs queued or running */
	uint64_t serves; /* jobs handed to workers so far: served_at's clock */
};

struct jc_worker {
	struct jc_pool *d;
	uv_process_t proc;
	uv_pipe_t pipe;
	uv_timer_t timer;
	struct jc_framer in;
	struct jc_pool_job *job;
	struct uid_queue *q; /* the queue of job's uid, while job runs */
	int slot;	     /* index in d->workers, -1 once detached */
	int exited;
	int timed_out;
	int killed; /* by shutdown */
	int raised; /* an idle worker at normal priority for this job (a client joined) */
	int retire; /* replaced once its job ends (jc__pool_recycle) */
	int open_handles;
};

static void worker_start_job(struct jc_worker *w, struct jc_pool_job *f);

/* The queue of uid, made when missing (NULL: out of memory). */
static struct uid_queue *queue_of(struct jc_pool *p, uint32_t uid)
{
	struct uid_queue **at = &p->queues;
	for (; *at; at = &(*at)->next)
		if ((*at)->uid == uid)
			return *at;
	struct uid_queue *q = calloc(1, sizeof(*q));
	if (q) {
		q->uid = uid;
		*at = q;
	}
	return q;
}

/* Frees q when it has nothing queued and nothing running. */
static void queue_release(struct jc_pool *p, struct uid_queue *q)
{
	if (q->head || q->running)
		return;
	for (struct uid_queue **at = &p->queues; *at; at = &(*at)->next)
		if (*at == q) {
			*at = q->next;
			break;
		}
	free(q);
}

/* Takes w's job off it (it ended): its uid runs one fewer. Returns the job. */
static struct jc_pool_job *worker_take_job(struct jc_worker *w)
{
	struct jc_pool_job *f = w->job;
	w->job = NULL;
	if (w->q) {
		w->q->running--;
		queue_release(w->d, w->q);
		w->q = NULL;
	}
	return f;
}

static void worker_handle_closed(uv_handle_t *h)
{
	struct jc_worker *w = h->data;
	if (--w->open_handles == 0) {
		jc__framer_free(&w->in);
		free(w);
	}
}

static void worker_fail_job(struct jc_worker *w, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void worker_fail_job(struct jc_worker *w, int status, const char *fmt, ...)
{
	if (!w->job)
		return;
	struct jc_pool_job *f = worker_take_job(w);
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	jc__res_clear(f->res);
	f->res->status = status;
	f->res->output = f->req->output;
	f->res->message = strdup(msg);
	f->done(f, 0);
}

/* Removes the worker from the pool and closes its handles (once). */
static void worker_detach(struct jc_worker *w)
{
	struct jc_pool *d = w->d;
	if (w->slot < 0)
		return;
	d->workers[w->slot] = NULL;
	w->slot = -1;
	uv_timer_stop(&w->timer);
	uv_close((uv_handle_t *)&w->timer, worker_handle_closed);
	uv_close((uv_handle_t *)&w->pipe, worker_handle_closed);
	if (w->exited)
		uv_close((uv_handle_t *)&w->proc, worker_handle_closed);
	else
		uv_process_kill(&w->proc, SIGKILL); /* proc closes in exit_cb */
}

/*
 * Every thread of pid and of the processes below it (the worker's helper,
 * a job's child; /proc/PID/task/TID/children) to idle or normal priority
 * (jc__set_idle_priority). A thread or process that starts meanwhile from
 * one not yet changed keeps the old priority. Returns 0, or the errno of
 * the first failure (a thread that exited meanwhile is none).
 */
static int tree_priority(pid_t pid, int idle, int depth)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? 0 : errno;
	int first = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		int tid = atoi(de->d_name);
		if (tid <= 0)
			continue;
		if (jc__set_idle_priority(tid, idle) != 0 && errno != ESRCH && !first)
			first = errno;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, tid);
		FILE *f = depth < 8 ? fopen(path, "re") : NULL;
		int child, rc;
		while (f && fscanf(f, "%d", &child) == 1)
			if ((rc = tree_priority((pid_t)child, idle, depth + 1)) && !first)
				first = rc;
		if (f)
			fclose(f);
	}
	closedir(dir);
	return first;
}

/* A client waits on w's idle job: w runs it at normal priority. */
static void worker_raise(struct jc_worker *w)
{
	int rc = tree_priority(w->proc.pid, 0, 0);
	w->raised = 1;
	if (rc == 0 || w->d->raise_warned)
		return;
	w->d->raise_warned = 1;
	jc_log_warn(
	    WORKER,
	    "a client waits on a re-warm compile, but its worker %d stays at idle "
	    "priority: %s (leaving SCHED_IDLE needs RLIMIT_NICE 20, e.g. LimitNICE=20 in the "
	    "service, or CAP_SYS_NICE); said once",
	    w->proc.pid, strerror(rc));
}

/* w's job is done: back to idle priority for the next re-warm job. */
static void worker_lower(struct jc_worker *w)
{
	if (!w->raised)
		return;
	w->raised = 0;
	int rc = tree_priority(w->proc.pid, 1, 0);
	if (rc != 0) {
		jc_log_err(WORKER, "cannot put worker %d back to idle priority (%s); replacing it",
			   w->proc.pid, strerror(rc));
		worker_detach(w);
	}
}

/* Fails the job of a worker that died under it, naming the cause. */
static void worker_fail_dead(struct jc_worker *w, int64_t status, int signal)
{
	struct jc_pool *d = w->d;
	char hex[33];
	jc__hex16(w->job->key, hex);
	if (w->timed_out) {
		jc__count(d->ctr, JC_CTR_compile_timeouts, 1);
		worker_fail_job(w, JC_ETIMEOUT,
				"compile ran past --compile-timeout (%d s); worker "
				"killed and replaced, nothing cached",
				d->cfg.compile_timeout_s);
	} else if (signal == 0 && status == JC_WORKER_EXIT_NOMEM) {
		jc_log_err(WORKER, "key %s: worker %d ran out of memory (limit %llu bytes)", hex,
			   w->proc.pid, (unsigned long long)d->cfg.worker_memory);
		worker_fail_job(w, JC_ENOMEM,
				"compile worker ran out of memory under its limit "
				"(--worker-memory %llu MiB); worker replaced, nothing cached",
				(unsigned long long)(d->cfg.worker_memory >> 20));
	} else {
		jc_log_err(WORKER,
			   "key %s: worker %d died during a compile: status %lld, signal %d", hex,
			   w->proc.pid, (long long)status, signal);
		if (signal == SIGKILL)
			worker_fail_job(
			    w, JC_ECRASH,
			    "compile worker was killed (signal 9, perhaps by "
			    "the kernel's OOM killer); worker replaced, nothing cached");
		else if (signal)
			worker_fail_job(w, JC_ECRASH,
					"compile worker crashed (signal %d, %s); worker "
					"replaced, nothing cached",
					signal, strsignal(signal));
		else
			worker_fail_job(w, JC_ECRASH,
					"compile worker exited with status %lld during "
					"the compile; worker replaced, nothing cached",
					(long long)status);
	}
}

static void worker_exit_cb(uv_process_t *proc, int64_t status, int signal)
{
	struct jc_worker *w = proc->data;
	struct jc_pool *d = w->d;
	w->exited = 1;
	int had_job = w->job != NULL;
	if (had_job)
		worker_fail_dead(w, status, signal);
	if (!w->killed && !d->stopping) {
		jc__count(d->ctr, JC_CTR_worker_crashes, 1);
		if (!had_job)
			jc_log_warn(WORKER, "worker %d exited (status %lld, signal %d)", proc->pid,
				    (long long)status, signal);
	}
	int was_attached = w->slot >= 0;
	worker_detach(w);
	if (!was_attached)
		uv_close((uv_handle_t *)&w->proc, worker_handle_closed);
	jc__pool_dispatch(d); /* replaces the worker and resumes the queue */
}

static int worker_frame_cb(void *ctx, uint16_t type, const uint8_t *payload, size_t len)
{
	struct jc_worker *w = ctx;
	struct jc_pool_job *f = w->job;
	if (!f || type != JC_MSG_RESULT) {
		jc_log_err(WORKER, "worker %d sent an unexpected frame; replacing it", w->proc.pid);
		worker_fail_job(w, JC_EINTERNAL, "compile worker misbehaved (frame type %u)", type);
		worker_detach(w);
		return JC_EPROTO;
	}
	jc__res_clear(f->res);
	int rc = jc__decode_res(payload, len, f->res);
	worker_take_job(w);
	uv_timer_stop(&w->timer);
	if (rc != 0) {
		jc__res_clear(f->res);
		f->res->status = JC_EINTERNAL;
		f->res->message = strdup("compile worker sent an undecodable result");
	}
	worker_lower(w);
	f->done(f, 0);
	if (w->retire && w->slot >= 0) {
		w->killed = 1;
		worker_detach(w);
	}
	jc__pool_dispatch(w->d);
	return 0;
}

static void worker_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct jc_worker *w = h->data;
	jc__framer_alloc(&w->in, hint, buf);
}

static void worker_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct jc_worker *w = s->data;
	(void)buf;
	if (nread < 0) {
		/* EOF: the process is gone or going; exit_cb does the rest. */
		uv_read_stop(s);
		return;
	}
	int rc = jc__framer_feed(&w->in, (size_t)nread, worker_frame_cb, w);
	if (rc != 0 && w->slot >= 0) {
		worker_fail_job(w, JC_EINTERNAL, "compile worker sent a bad frame (%s)",
				jc_strerror(rc));
		worker_detach(w);
	}
}

static void worker_timeout_cb(uv_timer_t *t)
{
	struct jc_worker *w = t->data;
	char hex[33];
	jc__hex16(w->job->key, hex);
	jc_log_warn(WORKER, "key %s: compile past %ds, killing worker %d", hex,
		    w->d->cfg.compile_timeout_s, w->proc.pid);
	w->timed_out = 1;
	uv_process_kill(&w->proc, SIGKILL);
}

static void write_done_cb(uv_write_t *req, int status)
{
	struct jc_buf *b = req->data;
	(void)status; /* a dead worker is noticed by exit_cb */
	jc__buf_free(b);
	free(b);
	free(req);
}

static void worker_start_job(struct jc_worker *w, struct jc_pool_job *f)
{
	struct jc_buf *b = calloc(1, sizeof(*b));
	uv_write_t *req = calloc(1, sizeof(*req));
	int rc = (!b || !req) ? JC_ENOMEM : jc__encode_req(b, f->req);
	w->job = f;
	if (rc == 0) {
		uv_buf_t ub = uv_buf_init((char *)b->data, (unsigned)b->len);
		req->data = b;
		rc = uv_write(req, (uv_stream_t *)&w->pipe, &ub, 1, write_done_cb) ? JC_EIO : 0;
	}
	if (rc != 0) {
		if (b)
			jc__buf_free(b);
		free(b);
		free(req);
		worker_fail_job(w, rc, "could not send the job to a worker (%s)", jc_strerror(rc));
		return;
	}
	if (w->d->cfg.compile_timeout_s > 0)
		uv_timer_start(&w->timer, worker_timeout_cb,
			       (uint64_t)w->d->cfg.compile_timeout_s * 1000, 0);
}

static int worker_spawn(struct jc_pool *d, int slot, char *err, size_t errlen)
{
	struct jc_worker *w = calloc(1, sizeof(*w));
	if (!w)
		return JC_ENOMEM;
	w->d = d;
	w->slot = slot;
	w->proc.data = w->pipe.data = w->timer.data = w;
	uv_pipe_init(d->loop, &w->pipe, 0);
	uv_timer_init(d->loop, &w->timer);
	w->open_handles = 3;

	char mem[32];
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)d->cfg.worker_memory);
	char *args[] = {d->worker_path,
			"--memory-limit",
			mem,
			"--confine",
			(char *)jc__confine_name(d->cfg.confinement),
			"--tmp",
			d->worker_tmp,
			slot >= d->cfg.workers ? "--idle" : NULL,
			NULL};
	uv_stdio_container_t stdio[3] = {
	    {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE,
	     .data.stream = (uv_stream_t *)&w->pipe},
	    {.flags = UV_IGNORE},
	    {.flags = UV_INHERIT_FD, .data.fd = 2},
	};
	uv_process_options_t opt = {
	    .file = d->worker_path,
	    .args = args,
	    .cwd = d->worker_cwd,
	    .exit_cb = worker_exit_cb,
	    .stdio = stdio,
	    .stdio_count = 3,
	};
	int rc = uv_spawn(d->loop, &w->proc, &opt);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start worker %s: %s", d->worker_path,
			 uv_strerror(rc));
		/* uv_spawn failed: proc must still be closed. */
		w->exited = 1;
		w->slot = -1;
		uv_close((uv_handle_t *)&w->timer, worker_handle_closed);
		uv_close((uv_handle_t *)&w->pipe, worker_handle_closed);
		uv_close((uv_handle_t *)&w->proc, worker_handle_closed);
		return JC_EIO;
	}
	uv_read_start((uv_stream_t *)&w->pipe, worker_alloc_cb, worker_read_cb);
	d->workers[slot] = w;
	jc_log_debug(WORKER, "worker %d started", w->proc.pid);
	return 0;
}

/*
 * NVRTC looks for quoted includes in the directory of the program name,
 * relative to the working directory (seen with NVRTC 13.0: a program named
 * "d/k.cu" reads d/x.h; --no-source-include turns it off). No key can cover
 * what a working directory holds, so workers run in DIR/worker-cwd: an empty
 * directory, mode 0500, made afresh at each start under the cache lock. It must exist: in a removed
 * directory getcwd() fails, and NVRTC 13.0 then reads its path buffer uninitialised and past its
 * end (AddressSanitizer reports a heap-buffer-overflow in nvrtcCompileProgram).
 */
static int make_worker_cwd(struct jc_pool *d, const char *cache_dir, char *err, size_t errlen)
{
	if (asprintf(&d->worker_cwd, "%s/worker-cwd", cache_dir) < 0) {
		d->worker_cwd = NULL;
		return JC_ENOMEM;
	}
	struct stat st;
	if ((rmdir(d->worker_cwd) == 0 || errno == ENOENT) && mkdir(d->worker_cwd, 0500) == 0) {
		/* Ours alone: made just now under the cache lock, checked again by
		 * each worker at its start (worker.h). */
		if (lstat(d->worker_cwd, &st) == 0 && S_ISDIR(st.st_mode) &&
		    st.st_uid == geteuid() && !(st.st_mode & 022))
			return 0;
		errno = EPERM;
	}
	snprintf(err, errlen, "cannot make the workers' private empty directory %s: %s",
		 d->worker_cwd, strerror(errno));
	free(d->worker_cwd);
	d->worker_cwd = NULL;
	return JC_EIO;
}

int jc__pool_start(uv_loop_t *loop, const struct jc_pool_config *cfg, struct jc_counters *ctr,
		   struct jc_pool **out, char *err, size_t errlen)
{
	struct jc_pool *d = calloc(1, sizeof(*d));
	if (!d || !(d->worker_path = strdup(cfg->worker_path))) {
		free(d);
		return JC_ENOMEM;
	}
	d->loop = loop;
	d->cfg = *cfg;
	d->cfg.worker_path = d->worker_path;
	d->cfg.cache_dir = NULL; /* not kept: only the working directory below */
	d->ctr = ctr;
	int rc = make_worker_cwd(d, cfg->cache_dir, err, errlen);
	if (rc == 0 && asprintf(&d->worker_tmp, "%s/tmp", cfg->cache_dir) < 0) {
		d->worker_tmp = NULL;
		rc = JC_ENOMEM;
	}
	if (rc == 0 && !(d->workers = calloc((size_t)cfg->workers + (size_t)cfg->idle_workers,
					     sizeof(*d->workers))))
		rc = JC_ENOMEM;
	if (rc != 0) {
		jc__pool_stop(d);
		jc__pool_free(d);
		return rc;
	}
	d->n_workers = cfg->workers + cfg->idle_workers;
	d->user_max_workers = cfg->user_max_workers > 0 ? cfg->user_max_workers
			      : cfg->workers / 2 > 0	? cfg->workers / 2
							: 1;
	int started = 0;
	for (int i = 0; i < cfg->workers; i++)
		started += worker_spawn(d, i, err, errlen) == 0;
	if (started) {
		*out = d;
		return 0;
	}
	jc__pool_stop(d);
	jc__pool_free(d); /* no worker started: no handle of theirs is open */
	return JC_EIO;
}

static void queue_push(struct jc_pool_job **head, struct jc_pool_job **tail,
		       struct jc_pool_job *job)
{
	job->next = NULL;
	if (*tail)
		(*tail)->next = job;
	else
		*head = job;
	*tail = job;
}

void jc__pool_submit(struct jc_pool *p, struct jc_pool_job *job)
{
	struct uid_queue *q = NULL;
	if (p->stopping || (!job->idle && !(q = queue_of(p, job->uid)))) {
		job->done(job, JC_EBUSY);
		return;
	}
	if (job->idle)
		queue_push(&p->idle_head, &p->idle_tail, job);
	else
		queue_push(&q->head, &q->tail, job);
	jc__pool_dispatch(p);
}

int jc__pool_promote(struct jc_pool *p, struct jc_pool_job *job)
{
	struct jc_pool_job *prev = NULL;
	for (struct jc_pool_job *j = p->idle_head; j; prev = j, j = j->next) {
		if (j != job)
			continue;
		struct uid_queue *q = queue_of(p, job->uid);
		if (!q)
			return 0; /* out of memory: it stays an idle job */
		if (prev)
			prev->next = j->next;
		else
			p->idle_head = j->next;
		if (p->idle_tail == j)
			p->idle_tail = prev;
		job->idle = 0;
		queue_push(&q->head, &q->tail, job);
		jc__pool_dispatch(p);
		return 1;
	}
	for (int i = p->cfg.workers; i < p->n_workers; i++) {
		struct jc_worker *w = p->workers[i];
		if (w && w->job == job && !w->raised) {
			job->idle = 0;
			worker_raise(w);
			return 1;
		}
	}
	return 0;
}

void jc__pool_recycle(struct jc_pool *p)
{
	for (int i = 0; i < p->n_workers; i++) {
		struct jc_worker *w = p->workers[i];
		if (!w)
			continue;
		w->retire = 1;
		if (!w->job) {
			w->killed = 1;
			worker_detach(w);
		}
	}
	jc__pool_dispatch(p);
}

int jc__pool_busy(const struct jc_pool *p)
{
	for (const struct uid_queue *q = p->queues; q; q = q->next)
		if (q->head)
			return 1;
	return 0;
}

void jc__pool_set_timeout(struct jc_pool *p, int compile_timeout_s)
{
	p->cfg.compile_timeout_s = compile_timeout_s;
}

const char *jc__pool_cwd(const struct jc_pool *p)
{
	return p->worker_cwd;
}

/* The uid whose turn it is: of those with a job queued and fewer than
 * user_max_workers running, the one served least recently. */
static struct uid_queue *next_queue(struct jc_pool *p)
{
	struct uid_queue *best = NULL;
	for (struct uid_queue *q = p->queues; q; q = q->next)
		if (q->head && q->running < p->user_max_workers &&
		    (!best || q->served_at < best->served_at))
			best = q;
	return best;
}

/* The next job its owner still wants, of the uid whose turn it is (others
 * are dropped); *from: its queue. NULL when no uid may run one now. */
static struct jc_pool_job *next_job(struct jc_pool *p, struct uid_queue **from)
{
	struct uid_queue *q;
	while ((q = next_queue(p))) {
		struct jc_pool_job *job = q->head;
		q->head = job->next;
		if (!q->head)
			q->tail = NULL;
		job->next = NULL;
		if (!job->wanted || job->wanted(job)) {
			q->served_at = ++p->serves;
			*from = q;
			return job;
		}
		queue_release(p, q);
	}
	return NULL;
}

/* The next idle job its owner still wants (others are dropped). */
static struct jc_pool_job *next_idle_job(struct jc_pool *p)
{
	struct jc_pool_job *job;
	while ((job = p->idle_head)) {
		p->idle_head = job->next;
		if (!p->idle_head)
			p->idle_tail = NULL;
		job->next = NULL;
		if (!job->wanted || job->wanted(job))
			break;
	}
	return job;
}

void jc__pool_dispatch(struct jc_pool *d)
{
	if (d->stopping)
		return;
	for (int i = 0; i < d->n_workers; i++) {
		int idle = i >= d->cfg.workers;
		char err[256];
		if (idle && !d->idle_head)
			break; /* idle workers are started when there is idle work */
		if (!d->workers[i] && worker_spawn(d, i, err, sizeof(err)) != 0) {
			jc_log_err(WORKER, "%s", err); /* retried on the next tick */
			continue;
		}
		struct jc_worker *w = d->workers[i];
		if (w->job)
			continue;
		struct uid_queue *q = NULL;
		struct jc_pool_job *f = idle ? next_idle_job(d) : next_job(d, &q);
		if (!f && !idle) {
			i = d->cfg.workers -
			    1; /* no client job may run now: the idle workers' turn */
			continue;
		}
		if (!f)
			break;
		if (q) {
			q->running++;
			w->q = q;
		}
		worker_start_job(w, f);
	}
}

void jc__pool_stop(struct jc_pool *d)
{
	if (!d)
		return;
	d->stopping = 1;
	for (struct uid_queue *q = d->queues; q; q = q->next) {
		struct jc_pool_job *job;
		while ((job = q->head)) {
			q->head = job->next;
			job->done(job, JC_EBUSY);
		}
		q->tail = NULL;
	}
	struct jc_pool_job *job;
	while ((job = d->idle_head)) {
		d->idle_head = job->next;
		job->done(job, JC_EBUSY);
	}
	d->idle_tail = NULL;
	for (int i = 0; i < d->n_workers; i++) {
		struct jc_worker *w = d->workers[i];
		if (!w)
			continue;
		w->killed = 1;
		/* Answer its waiters now, while their connections are still open. */
		worker_fail_job(w, JC_EBUSY,
				"daemon is shutting down; compile cancelled (worker %d)",
				(int)w->proc.pid);
		worker_detach(w);
	}
	free(d->workers);
	d->workers = NULL;
	d->n_workers = 0;
	if (d->worker_cwd)
		rmdir(d->worker_cwd);
}

void jc__pool_free(struct jc_pool *p)
{
	if (!p)
		return;
	while (p->queues) {
		struct uid_queue *q = p->queues;
		p->queues = q->next;
		free(q);
	}
	free(p->worker_cwd);
	free(p->worker_tmp);
	free(p->worker_path);
	free(p);
}
