/* SPDX-License-Identifier: MIT */
/*
 * jitcached: wires the configuration (settings.h), the cache directory, the
 * worker pool, the socket server and signals together, then runs the libuv
 * loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "config.h"
#include "core/admin.h"
#include "core/confine.h"
#include "core/evict.h"
#include "daemon/daemon.h"
#include "daemon/pool.h"
#include "daemon/privs.h"
#include "daemon/server.h"
#include "daemon/settings.h"
#include "daemon/toolchains.h"
#include "jitcache/jitcache.h"
#if JC_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#define TICK_MS 1000

/* The worker lives next to jitcached in the build tree, else in libexecdir. */
static char *find_worker(void)
{
	const char *env = getenv("JITCACHE_WORKER");
	if (env && *env)
		return strdup(env);
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			char path[PATH_MAX + 32];
			snprintf(path, sizeof(path), "%.*s/jitcache-worker", (int)(slash - self),
				 self);
			if (access(path, X_OK) == 0)
				return strdup(path);
		}
	}
	return strdup(JC_LIBEXECDIR "/jitcache-worker");
}

/* Thread pool threads whose malloc arenas are faulted in at start-up. */
#define JC_POOL_WARM_MAX 64

/* The main loop's own state: main.c's alone, loop thread, for the life of
 * the process (static; nothing to free but pointer_path, pointer_remove's). */
static struct jc_main {
	struct jc_daemon d;	 /* the daemon it runs */
	char *pointer_path;	 /* DIR/JC_SOCKET_POINTER, written once listening */
	char pointer_sock[4096]; /* the socket path it holds */
	uv_timer_t tick;	 /* flush, respawn, eviction */
	uv_signal_t sigterm, sigint, sighup;
	uv_work_t trim; /* malloc_trim after a large request */
	int trimming;
	uv_work_t pool_warm[JC_POOL_WARM_MAX]; /* start the thread pool, fault its arenas in */
	struct jc_loop_spin spin;	       /* d.request.spin: the loop's busy polling */
} main_state;
static char **saved_argv;
static int saved_argc;

/* Sends a state line to systemd (sd_notify) where NOTIFY_SOCKET is set. */
static void daemon_notify(const char *state)
{
#if JC_HAVE_SYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

/*
 * DIR/lock removed or replaced under us would let a second daemon in: take
 * a fresh lock file if nobody else has, else stop (two daemons must never
 * share a directory).
 */
static void lock_check(struct jc_daemon *d)
{
	char err[600];
	if (d->run.stopping || jc__cachedir_lock_check(d->cache, err, sizeof(err)) == 0)
		return;
	jc_log(LOG_CRIT, MAIN, "%s: stopping", err);
	uv_kill(getpid(), SIGTERM);
}

/* --idle-exit: stop as SIGTERM does once nobody has been connected that long
 * (a compile always has its requester connected). */
static void idle_exit_check(struct jc_daemon *d)
{
	uint64_t since;
	int n = jc__server_clients(d, &since);
	if (d->cfg.idle_exit_s <= 0 || n > 0 || d->run.stopping)
		return;
	if (jc__now_ns() - since >= (uint64_t)d->cfg.idle_exit_s * 1000000000u) {
		jc_log_notice(MAIN, "no client for %d s (--idle-exit): stopping",
			      d->cfg.idle_exit_s);
		uv_kill(getpid(), SIGTERM);
	}
}

/* Buffers that held this much at once make the next quiet tick trim. */
#define TRIM_AFTER (16u << 20)

static void trim_work_cb(uv_work_t *w)
{
	(void)w;
	malloc_trim(0);
}

static void trim_after_cb(uv_work_t *w, int status)
{
	(void)status;
	(void)w;
	main_state.trimming = 0;
}

/*
 * Once a large request or reply (the buffers held TRIM_AFTER at once) has
 * gone and they hold little again, what malloc keeps of it in its arenas
 * goes back to the kernel (a request of 60 MB in small headers left 59 MB
 * resident for good). In the thread pool: malloc_trim walks every arena.
 */
static void trim_check(struct jc_daemon *d)
{
	struct jc_budget *b = &d->request.buffers;
	size_t used = jc__budget_used(b);
	if (__atomic_load_n(&b->peak, __ATOMIC_RELAXED) < TRIM_AFTER || used >= TRIM_AFTER / 4 ||
	    main_state.trimming || d->run.stopping)
		return;
	__atomic_store_n(&b->peak, used, __ATOMIC_RELAXED);
	main_state.trimming = 1;
	if (uv_queue_work(d->loop, &main_state.trim, trim_work_cb, trim_after_cb) != 0)
		main_state.trimming = 0;
}

/*
 * What a pool thread's first requests allocate (a fetched value, its
 * decompressed frame and decoded result; a dependency record's include set
 * and its sort: about 1 MiB for the CUB example's) comes from that thread's
 * own malloc arena, whose pages are touched for the first time then: on a
 * VM a page fault costs several microseconds, and a fresh daemon's first
 * such request took some 250 of them. So at start-up each pool thread (as
 * many jobs as libuv starts threads, meeting before they end, so that each
 * runs on a thread of its own) touches POOL_WARM_BYTES of its arena, which
 * malloc keeps (M_TOP_PAD in main: each arena keeps that much at its top
 * when it trims).
 */
#define POOL_WARM_BYTES (1u << 20)

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int started, jobs;
} pool_warm_state = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

/* libuv's pool size (UV_THREADPOOL_SIZE, else 4; its rule), at most JC_POOL_WARM_MAX. */
static int pool_threads(void)
{
	const char *v = getenv("UV_THREADPOOL_SIZE");
	int n = v && *v ? atoi(v) : 4;
	return n < 1 ? 1 : n > JC_POOL_WARM_MAX ? JC_POOL_WARM_MAX : n;
}

/* Touches POOL_WARM_BYTES of the calling thread's arena, in pieces below
 * M_MMAP_THRESHOLD (from the arena, not mapped apart). */
static void arena_warm(void)
{
	char *p[4];
	for (int i = 0; i < 4; i++)
		if ((p[i] = malloc(POOL_WARM_BYTES / 4)))
			memset(p[i], 0, POOL_WARM_BYTES / 4);
	for (int i = 0; i < 4; i++)
		free(p[i]);
}

static void pool_warm_work(uv_work_t *w)
{
	(void)w;
	arena_warm();
	/* Wait (20 ms at most) until every job has started: no two on one thread. */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 20 * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&pool_warm_state.lock);
	if (++pool_warm_state.started == pool_warm_state.jobs)
		pthread_cond_broadcast(&pool_warm_state.cond);
	while (pool_warm_state.started < pool_warm_state.jobs &&
	       pthread_cond_timedwait(&pool_warm_state.cond, &pool_warm_state.lock, &until) == 0)
		;
	pthread_mutex_unlock(&pool_warm_state.lock);
}

static void tick_cb(uv_timer_t *t)
{
	struct jc_daemon *d = t->data;
	lock_check(d);
	trim_check(d);
	idle_exit_check(d);
	jc__server_tick(d);
	jc__cache_tick(d);
	jc__pool_dispatch(d->pool);
	jc__evict_tick(d);
}

/* --- signals -------------------------------------------------------------------- */

static void stop_cb(uv_signal_t *sig, int signum)
{
	struct jc_daemon *d = sig->data;
	if (d->run.stopping)
		return;
	jc_log_notice(MAIN, "signal %d: stopping", signum);
	daemon_notify("STOPPING=1");
	d->run.stopping = 1;
	jc__rewarm_close(d); /* before the pool answers its flights */
	jc__cache_watch_stop(d);
	jc__remote_close(d->remote); /* flights waiting on it: likewise */
	d->remote = NULL;
	jc__pool_stop(d->pool); /* queued and running compiles: answered "shutting down" */
	jc__server_shutdown(d);
	uv_timer_stop(&main_state.tick);
	uv_close((uv_handle_t *)&main_state.tick, NULL);
	if (d->request.spin)
		jc__loop_spin_close(d->request.spin);
	uv_close((uv_handle_t *)&main_state.sigterm, NULL);
	uv_close((uv_handle_t *)&main_state.sigint, NULL);
	uv_close((uv_handle_t *)&main_state.sighup, NULL);
}

/* The eviction module's report of each budget job: systemd's status line. */
static void evict_report(struct jc_daemon *d, const struct jc_evict_report *r)
{
	char status[256];
	snprintf(status, sizeof(status),
		 "STATUS=serving: %" PRIu64 " entries, %" PRIu64 " of %" PRIu64 " bytes; %" PRIu64
		 " hits, %" PRIu64 " misses",
		 r->entries_after, r->bytes_after, r->max_size, d->cache->counters.v[JC_CTR_hits],
		 d->cache->counters.v[JC_CTR_misses]);
	daemon_notify(status);
}

/* Starts the remote tier of cfg.remote; nothing without a URL. Its storage
 * need not answer: the tier connects when first used. 0 or a JC_E code
 * (err). */
static int remote_start(struct jc_daemon *d, char *err, size_t errlen)
{
	const struct jc_remote_config *rc = &d->cfg.remote;
	if (!rc->n_urls)
		return 0;
	int e = jc__remote_new(d->loop, rc, &d->cache->counters, &d->remote, err, errlen);
	for (size_t i = 0; e == 0 && i < rc->n_urls; i++)
		jc_log_notice(MAIN,
			      "remote tier %s%s, %s, ttl %" PRId64 " s, timeout %d ms, "
			      "lock wait %" PRId64 " s",
			      rc->urls[i], rc->read_only ? " (read-only)" : "",
			      rc->secret_file
				  ? "signed values"
				  : "UNSIGNED values (--remote-unsigned): anyone who can "
				    "write to it can forge them",
			      rc->ttl_s, rc->timeout_ms, rc->lock_wait_s);
	return e;
}

/* SIGHUP: a new remote tier from the fresh settings (the secret and password
 * files are read again); the old one's waiting lookups compile. */
static void remote_reload(struct jc_daemon *d, struct jc_config *fresh)
{
	struct jc_remote_config old = d->cfg.remote;
	char err[512] = "";
	if (!old.n_urls && !fresh->remote.n_urls)
		return;
	jc__remote_close(d->remote);
	d->remote = NULL;
	d->cfg.remote = fresh->remote;
	memset(&fresh->remote, 0, sizeof(fresh->remote));
	if (remote_start(d, err, sizeof(err)) != 0)
		jc_log_err(MAIN, "SIGHUP: remote tier not started: %s", err);
	else if (!d->cfg.remote.n_urls)
		jc_log_notice(MAIN, "SIGHUP: remote tier off");
	jc__remote_config_clear(&old);
}

/* SIGHUP: re-read the configuration; apply what can change while running and
 * say what cannot (settings.h), and probe the toolchain on disk. On any
 * configuration error nothing changes. */
static void reload_cb(uv_signal_t *sig, int signum)
{
	struct jc_daemon *d = sig->data;
	struct jc_config fresh;
	int log_level;
	(void)signum;
	if (jc__settings_read(&fresh, saved_argc, saved_argv, &log_level) != 0) {
		jc_log_err(
		    MAIN,
		    "SIGHUP: configuration not reloaded (see above); keeping the running one");
		goto out;
	}
	uint64_t old_max = d->cfg.max_size, old_share = d->cfg.user_max_size;
	jc__settings_apply(&d->cfg, &fresh, log_level);
	jc__pool_set_timeout(d->pool, d->cfg.compile_timeout_s);
	d->request.buffers.max = (size_t)d->cfg.buffer_budget;
	remote_reload(d, &fresh);
	jc__evict_budget_changed(d, old_max, old_share);
out:
	jc__settings_clear(&fresh);
	jc__toolchains_recheck(d, "SIGHUP");
}

/*
 * 1 when other uids may connect: --group-shared (socket 0660), --allow-uids,
 * or a socket passed by systemd whose file lets group or others in (the
 * system unit's 0660 jitcached.socket).
 */
static int serves_other_uids(const struct jc_daemon *d, int listen_fd)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	struct stat st;
	if (d->cfg.group_shared || d->cfg.n_allow_uids)
		return 1;
	if (listen_fd < 0)
		return 0;
	memset(&sa, 0, sizeof(sa));
	if (getsockname(listen_fd, (struct sockaddr *)&sa, &len) != 0 || sa.sun_family != AF_UNIX ||
	    !sa.sun_path[0])
		return 1; /* an abstract or unknown socket: anyone may reach it */
	return stat(sa.sun_path, &st) != 0 || (st.st_mode & 066) != 0;
}

/*
 * The confinement the workers apply (confine.h): --confinement, else the
 * best this kernel offers. A daemon that serves other uids refuses to run
 * unconfined unless --allow-unconfined.
 */
static int choose_confinement(struct jc_daemon *d, int serves_others, char *why, size_t whylen,
			      char *err, size_t errlen)
{
	int abi, best = jc__confine_detect(&abi, why, whylen);
	int want = d->cfg.confinement < 0 ? best : d->cfg.confinement;
	if (want != JC_CONFINE_NONE && want != best &&
	    !(want == JC_CONFINE_USERNS && best == JC_CONFINE_LANDLOCK)) {
		snprintf(err, errlen, "--confinement %s is not available here (%s)",
			 jc__confine_name(want), why);
		return JC_EINVAL;
	}
	if (want == JC_CONFINE_NONE && serves_others && !d->cfg.allow_unconfined) {
		snprintf(err, errlen,
			 "this daemon serves other uids but its compile workers cannot be "
			 "confined (%s%s); pass --allow-unconfined to run anyway",
			 d->cfg.confinement < 0 ? "" : "--confinement none; ", why);
		return JC_EINVAL;
	}
	if (d->cfg.confinement >= 0 && want != best)
		snprintf(why + strlen(why), whylen - strlen(why), "; %s asked for",
			 jc__confine_name(want));
	d->request.confinement = want;
	return 0;
}

/*
 * DIR/JC_SOCKET_POINTER names the socket this daemon listens on, so that a
 * client given only the directory finds its daemon (and no other). Written
 * atomically once listening; removed at the end if it still names us.
 */
static void pointer_write(struct jc_daemon *d)
{
	char path[4200], tmp[4300], sock[4096];
	struct sockaddr_un sa;
	socklen_t salen = sizeof(sa);
	size_t len = 0;
	if (getsockname(jc__server_fd(d), (struct sockaddr *)&sa, &salen) == 0 &&
	    salen > offsetof(struct sockaddr_un, sun_path))
		len = strnlen(sa.sun_path, salen - offsetof(struct sockaddr_un, sun_path));
	memcpy(sock, sa.sun_path, len);
	if (len == 0) {
		jc_log_warn(MAIN,
			    "cannot name the listening socket: clients given --cache-dir %s will "
			    "not find this daemon",
			    d->cfg.cache_dir);
		return;
	}
	sock[len < sizeof(sock) ? len : sizeof(sock) - 1] = '\0';
	snprintf(path, sizeof(path), "%s/%s", d->cfg.cache_dir, JC_SOCKET_POINTER);
	snprintf(tmp, sizeof(tmp), "%s/tmp/%s.%d", d->cfg.cache_dir, JC_SOCKET_POINTER,
		 (int)getpid());
	FILE *f = fopen(tmp, "wx");
	int ok = f && fprintf(f, "%s\n", sock) > 0;
	ok &= f && fclose(f) == 0;
	if (!ok || rename(tmp, path) != 0) {
		jc_log_warn(MAIN, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
		return;
	}
	main_state.pointer_path = strdup(path);
	snprintf(main_state.pointer_sock, sizeof(main_state.pointer_sock), "%s", sock);
}

static void pointer_remove(void)
{
	char now[4096];
	if (!main_state.pointer_path)
		return;
	FILE *f = fopen(main_state.pointer_path, "re");
	int ours = f && fgets(now, sizeof(now), f) &&
		   strcspn(now, "\n") == strlen(main_state.pointer_sock) &&
		   strncmp(now, main_state.pointer_sock, strlen(main_state.pointer_sock)) == 0;
	if (f)
		fclose(f);
	if (ours)
		unlink(main_state.pointer_path);
	free(main_state.pointer_path);
	main_state.pointer_path = NULL;
}

static int inherited_listener(void)
{
#if JC_HAVE_SYSTEMD
	int n = sd_listen_fds(1);
	if (n == 1)
		return SD_LISTEN_FDS_START;
	if (n > 1)
		jc_log_warn(MAIN, "systemd passed %d sockets; using the first", n);
	return n > 1 ? SD_LISTEN_FDS_START : -1;
#else
	return -1;
#endif
}

/* Start-up, first step: the process (malloc, inherited descriptors, umask,
 * SIGPIPE) and d's configuration from argv, files and defaults. 0, or -1
 * when the configuration is bad (said on stderr). */
static int process_setup(struct jc_daemon *d, int argc, char **argv)
{
	int log_level;

	saved_argc = argc;
	saved_argv = argv;
	/* Request and reply buffers of 1 MiB and more are mapped for their own
	 * and unmapped when freed: a fixed threshold (glibc raises its own up to
	 * 32 MiB after each such free, then keeps them in the arena of whichever
	 * serving thread read them: a 16-thread daemon held 300 MiB more after a
	 * burst of large requests it refused, test_queued_requests_budget). */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	/* Each arena keeps this much at its top when it trims (glibc's default
	 * is 128 KiB): the pages a pool thread touched at start-up stay
	 * (pool_warm_work), as do those of the last fetched value's decode. */
	mallopt(M_TOP_PAD, POOL_WARM_BYTES);
	/* What we inherited (the lock of the client that auto-started us, held
	 * while we live; a socket from systemd; an application's leak) stays
	 * ours: workers and tools we start never get it. */
	jc__cloexec_from(3);
	/* The cache directory, the index SQLite creates and everything else we
	 * write belong to our uid alone (the socket's mode is set on its own). */
	umask(077);
	if (jc__settings_read(&d->cfg, argc, argv, &log_level) != 0)
		return -1;
	jc__log_level = log_level;
	d->cfg.worker_path = find_worker();
	jc__settings_fit_connections(&d->cfg);
	signal(SIGPIPE, SIG_IGN);
	d->request.conn_ops = &jc__server_conn_ops;
	d->request.hooks.toolchain_recheck = jc__toolchains_recheck;
	d->run.start_ns = jc__now_ns();
	d->run.hit_latency_since = (uint64_t)time(NULL);
	d->request.buffers.max = (size_t)d->cfg.buffer_budget;
	return 0;
}

/* Start-up, --user: binds the socket as root (unless *listen_fd, one
 * systemd passed, is >= 0), gives it to the user, then drops root, before
 * the cache directory, the toolchain or any thread is touched. 0 or a JC_E*
 * code with the reason in err. */
static int become_user(struct jc_daemon *d, int *listen_fd, char *err, size_t errlen)
{
	int rc;
	if (*listen_fd < 0) {
		rc = jc__server_bind(&d->cfg, listen_fd, err, errlen);
		if (rc != 0)
			return rc;
		if (chown(d->cfg.socket_path, d->cfg.run_uid, d->cfg.run_gid) != 0 &&
		    geteuid() == 0) {
			snprintf(err, errlen, "cannot give %s to %s: %s", d->cfg.socket_path,
				 d->cfg.run_user, strerror(errno));
			return JC_EIO;
		}
	}
	rc = jc__privs_drop(d->cfg.run_user, d->cfg.run_uid, d->cfg.run_gid, err, errlen);
	if (rc != 0)
		return rc;
	jc_log_notice(MAIN, "running as user %s (uid %u, gid %u)", d->cfg.run_user,
		      (unsigned)d->cfg.run_uid, (unsigned)d->cfg.run_gid);
	return 0;
}

/* Start-up: the worker pool (pool.h: shared fairly where there are others
 * to share with, serves_others) and the re-warm. 0 or a JC_E* code with the
 * reason in err (nothing left started). */
static int pool_start(struct jc_daemon *d, int serves_others, char *err, size_t errlen)
{
	const struct jc_pool_config pool_cfg = {
	    .worker_path = d->cfg.worker_path,
	    .cache_dir = d->cfg.cache_dir,
	    .workers = d->cfg.workers,
	    .idle_workers = d->cfg.rewarm_workers,
	    .user_max_workers = d->cfg.user_max_workers ? d->cfg.user_max_workers
				: serves_others		? 0
							: d->cfg.workers,
	    .compile_timeout_s = d->cfg.compile_timeout_s,
	    .worker_memory = d->cfg.worker_memory,
	    .confinement = d->request.confinement,
	};
	int rc = jc__pool_start(d->loop, &pool_cfg, &d->cache->counters, &d->pool, err, errlen);
	if (rc == 0 && (rc = jc__rewarm_new(d)) != 0)
		jc__pool_stop(d->pool);
	return rc;
}

/* Start-up, once listening: the tick, the signals, and the thread pool's
 * threads. */
static void handles_start(struct jc_daemon *d)
{
	if (jc__loop_spin_init(&main_state.spin, d->loop) == 0)
		d->request.spin = &main_state.spin;
	uv_timer_init(d->loop, &main_state.tick);
	main_state.tick.data = d;
	uv_timer_start(&main_state.tick, tick_cb, TICK_MS, TICK_MS);
	uv_signal_init(d->loop, &main_state.sigterm);
	uv_signal_init(d->loop, &main_state.sigint);
	uv_signal_init(d->loop, &main_state.sighup);
	main_state.sigterm.data = main_state.sigint.data = main_state.sighup.data = d;
	uv_signal_start(&main_state.sigterm, stop_cb, SIGTERM);
	uv_signal_start(&main_state.sigint, stop_cb, SIGINT);
	uv_signal_start(&main_state.sighup, reload_cb, SIGHUP);
	/* libuv starts its thread pool's threads with the first job: here, so
	 * that a fresh daemon's first request does not wait for them
	 * (jitcache-bench: the pool hand-off before a fresh daemon's scan); the
	 * jobs fault the threads' arenas in (pool_warm_work). */
	pool_warm_state.jobs = pool_threads();
	for (int i = 0; i < pool_warm_state.jobs; i++)
		uv_queue_work(d->loop, &main_state.pool_warm[i], pool_warm_work, NULL);
}

int main(int argc, char **argv)
{
	struct jc_daemon *d = &main_state.d;
	char err[512] = "", conf_why[128] = "";
	int rc = 0, exit_code = 1;

	if (process_setup(d, argc, argv) != 0)
		return 2;

	/* --user: bind the socket as root, hand it to the user, then drop root
	 * before the cache directory, the toolchain or any thread is touched. */
	int listen_fd = inherited_listener(), from_systemd = listen_fd >= 0;
	if (d->cfg.run_user && (rc = become_user(d, &listen_fd, err, sizeof(err))) != 0)
		goto err_out;
	rc = jc__cachedir_open(d->cfg.cache_dir, JC_CACHEDIR_READER, 2000, &d->cache, err,
			       sizeof(err));
	if (rc != 0)
		goto err_out;
	rc = jc__toolchains_probe(d, err, sizeof(err));
	if (rc != 0)
		goto err_after_cache;
	rc = jc__cache_init(d);
	if (rc != 0) {
		snprintf(err, sizeof(err), "cannot start the cache: %s", jc_strerror(rc));
		goto err_after_init;
	}
	jc__toolchains_record_identity(d);
	jc__evict_start(d, evict_report);

	int serves_others = serves_other_uids(d, listen_fd);
	rc = choose_confinement(d, serves_others, conf_why, sizeof(conf_why), err, sizeof(err));
	if (rc != 0)
		goto err_after_init;
	d->loop = uv_default_loop();
	rc = remote_start(d, err, sizeof(err));
	if (rc != 0)
		goto err_after_loop;
	rc = pool_start(d, serves_others, err, sizeof(err));
	if (rc != 0) {
		jc__remote_close(d->remote);
		goto err_after_loop;
	}
	rc = jc__server_listen(d, listen_fd, err, sizeof(err));
	if (rc != 0) {
		jc__server_shutdown(d);
		jc__pool_stop(d->pool);
		jc__remote_close(d->remote);
		goto err_after_loop;
	}
	pointer_write(d);
	handles_start(d);
	jc__server_accept(d); /* clients are answered from now on */
	/* The loop's arena too (a miss's answer is encoded there): while the
	 * first connections' handshakes are answered on the serving threads. */
	arena_warm();

	jc_log_notice(MAIN,
		      "jitcached %s ready: cache %s, socket %s, %d workers, budget %" PRIu64
		      " bytes (evicts above %d %%, down to %d %%), gc every %" PRId64 " s, "
		      "confinement %s (%s), %s",
		      JC_VERSION, d->cfg.cache_dir,
		      from_systemd ? "passed by systemd" : d->cfg.socket_path, d->cfg.workers,
		      d->cfg.max_size, JC_EVICT_HIGH_PCT, JC_EVICT_LOW_PCT, d->cfg.gc_interval_s,
		      jc__confine_name(d->request.confinement), conf_why, d->tc->summary);
	daemon_notify("READY=1\nSTATUS=serving");
	if (d->cache_identity[0] && strcmp(d->cache_identity, d->tc->summary) != 0)
		jc__rewarm_start(d, 0, 0, "the toolchain identity changed", NULL, NULL);
	jc__cache_watch_start(d);
	uv_run(d->loop, UV_RUN_DEFAULT);
	jc__server_join(d); /* their connections ended */
	jc__cache_flush_sync(d);
	pointer_remove();
	exit_code = 0;
	jc_log_notice(MAIN, "stopped");

err_after_loop:
	uv_run(d->loop, UV_RUN_DEFAULT); /* until every handle has closed */
	jc__server_join(d);
	if (uv_loop_close(d->loop) != 0)
		jc_log_warn(MAIN, "loop closed with handles still open");
	jc__rewarm_free(d);
	jc__pool_free(d->pool);
err_after_init:
	jc__cache_free(d);
err_after_cache:
	jc__toolchains_free(d);
	jc__cachedir_close(d->cache);
err_out:
	if (exit_code != 0)
		fprintf(stderr, "jitcached: %s\n", err[0] ? err : jc_strerror(rc));
	jc__settings_clear(&d->cfg);
	return exit_code;
}
