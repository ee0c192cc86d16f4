/* SPDX-License-Identifier: MIT */
/*
 * jitcached: wires options, configuration, the cache directory, the worker
 * pool, the socket server and signals together, then runs the libuv loop.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <ini.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin.h"
#include "config.h"
#include "daemon.h"
#include "jitcache/jitcache.h"
#include "log.h"
#include "pool.h"
#include "util.h"
#if JC_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#define TICK_MS 1000
#define EVICT_EVERY_TICKS 5

static void usage(FILE *f)
{
	fprintf(f,
		"usage: jitcached [--cache-dir DIR] [--socket PATH] [--max-size SIZE]\n"
		"                 [--negative-ttl SECONDS] [--workers N] [--compile-timeout SECONDS]\n"
		"                 [--worker-memory SIZE] [--idle-timeout SECONDS] [--config FILE]\n"
		"                 [--log-level LEVEL] [--version]\n"
		"Runs in the foreground. Configuration: " JC_SYSCONFDIR "/jitcache/jitcached.conf,\n"
		"then ~/.config/jitcache/jitcached.conf (or --config FILE), then the flags.\n");
}

/* The settings a configuration file or a flag may give, by name. */
struct settings {
	struct jc_config *cfg;
	char *config_file;
	int log_level;
	char err[256];
};

static int set_option(struct settings *s, const char *name, const char *value)
{
	struct jc_config *c = s->cfg;
	int64_t secs;
	uint64_t size;
	if (strcmp(name, "cache-dir") == 0) {
		free(c->cache_dir);
		c->cache_dir = strdup(value);
	} else if (strcmp(name, "socket") == 0) {
		free(c->socket_path);
		c->socket_path = strdup(value);
	} else if (strcmp(name, "max-size") == 0 && jc__parse_size(value, &size) == 0) {
		c->max_size = size;
	} else if (strcmp(name, "negative-ttl") == 0 && jc__parse_duration(value, &secs) == 0) {
		c->negative_ttl_s = secs;
	} else if (strcmp(name, "compile-timeout") == 0 && jc__parse_duration(value, &secs) == 0 &&
		   secs <= INT_MAX) {
		c->compile_timeout_s = (int)secs;
	} else if (strcmp(name, "idle-timeout") == 0 && jc__parse_duration(value, &secs) == 0 &&
		   secs <= INT_MAX) {
		c->idle_timeout_s = (int)secs;
	} else if (strcmp(name, "worker-memory") == 0 && jc__parse_size(value, &size) == 0) {
		c->worker_memory = size;
	} else if (strcmp(name, "workers") == 0) {
		char *end;
		long n = strtol(value, &end, 10);
		if (*end || n < 1 || n > 256)
			goto bad;
		c->workers = (int)n;
	} else if (strcmp(name, "log-level") == 0) {
		if ((s->log_level = jc__log_parse_level(value)) < 0)
			goto bad;
	} else if (strcmp(name, "group-shared") == 0) {
		c->group_shared = strcmp(value, "yes") == 0 || strcmp(value, "true") == 0 ||
				  strcmp(value, "1") == 0;
	} else if (strcmp(name, "admin-group") == 0) {
		struct group *g = getgrnam(value);
		if (!g)
			goto bad;
		c->admin_gid = g->gr_gid;
	} else if (strcmp(name, "allow-uids") == 0) {
		free(c->allow_uids);
		c->allow_uids = NULL;
		c->n_allow_uids = 0;
		char *copy = strdup(value), *save = NULL;
		for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
			char *end;
			long uid = strtol(t, &end, 10);
			uid_t *p = realloc(c->allow_uids, (c->n_allow_uids + 1) * sizeof(*p));
			if (*end || uid < 0 || !p) {
				free(p ? p : c->allow_uids);
				c->allow_uids = NULL;
				c->n_allow_uids = 0;
				free(copy);
				goto bad;
			}
			c->allow_uids = p;
			c->allow_uids[c->n_allow_uids++] = (uid_t)uid;
		}
		free(copy);
	} else {
		snprintf(s->err, sizeof(s->err), "unknown setting '%s'", name);
		return JC_EINVAL;
	}
	return 0;
bad:
	snprintf(s->err, sizeof(s->err), "bad value '%s' for %s", value, name);
	return JC_EINVAL;
}

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
	struct settings *s = user;
	if (section[0] && strcmp(section, "jitcached") != 0)
		return 1; /* other sections belong to other tools */
	return set_option(s, name, value) == 0;
}

/* Reads one configuration file; a missing optional file is fine. */
static int read_config(struct settings *s, const char *path, int required)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		if (!required && errno == ENOENT)
			return 0;
		fprintf(stderr, "jitcached: cannot read %s: %s\n", path, strerror(errno));
		return JC_EIO;
	}
	int line = ini_parse_file(f, ini_cb, s);
	fclose(f);
	if (line != 0) {
		fprintf(stderr, "jitcached: %s:%d: %s\n", path, line, s->err[0] ? s->err : "syntax error");
		return JC_EINVAL;
	}
	return 0;
}

static int read_configs(struct settings *s)
{
	if (s->config_file)
		return read_config(s, s->config_file, 1);
	int rc = read_config(s, JC_SYSCONFDIR "/jitcache/jitcached.conf", 0);
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	char path[4096];
	if (rc == 0 && ((xdg && *xdg) || home)) {
		if (xdg && *xdg)
			snprintf(path, sizeof(path), "%s/jitcache/jitcached.conf", xdg);
		else
			snprintf(path, sizeof(path), "%s/.config/jitcache/jitcached.conf", home);
		rc = read_config(s, path, 0);
	}
	return rc;
}

static const struct option long_opts[] = {
	{"cache-dir", required_argument, NULL, 0},
	{"socket", required_argument, NULL, 0},
	{"max-size", required_argument, NULL, 0},
	{"negative-ttl", required_argument, NULL, 0},
	{"workers", required_argument, NULL, 0},
	{"compile-timeout", required_argument, NULL, 0},
	{"worker-memory", required_argument, NULL, 0},
	{"idle-timeout", required_argument, NULL, 0},
	{"log-level", required_argument, NULL, 0},
	{"config", required_argument, NULL, 'c'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* Flags win over files: files are read first, then the flags again. */
static int parse_args(struct settings *s, int argc, char **argv, int apply)
{
	int c, idx;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:hV", long_opts, &idx)) != -1) {
		switch (c) {
		case 0:
			if (apply && set_option(s, long_opts[idx].name, optarg) != 0) {
				fprintf(stderr, "jitcached: %s\n", s->err);
				return 2;
			}
			break;
		case 'c':
			s->config_file = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("jitcached %s\n", JC_VERSION);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "jitcached: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return 0;
}

static void defaults(struct jc_config *c)
{
	memset(c, 0, sizeof(*c));
	c->max_size = 10ull << 30;
	c->negative_ttl_s = 300;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	c->workers = n > 0 ? (int)n : 2;
	c->compile_timeout_s = 120;
	c->worker_memory = 16ull << 30;
	c->idle_timeout_s = 300;
	c->admin_gid = (gid_t)-1;
	const char *f = getenv("JITCACHE_TEST_FAULTS");
	c->test_faults = f && strcmp(f, "1") == 0;
}

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
			snprintf(path, sizeof(path), "%.*s/jitcache-worker", (int)(slash - self), self);
			if (access(path, X_OK) == 0)
				return strdup(path);
		}
	}
	return strdup(JC_LIBEXECDIR "/jitcache-worker");
}

static struct jc_daemon daemon_state;
static char **saved_argv;
static int saved_argc;

static void notify(const char *msg)
{
#if JC_HAVE_SYSTEMD
	sd_notify(0, msg);
#else
	(void)msg;
#endif
}

/* --- budget eviction in the thread pool --------------------------------------- */

struct evict_job {
	uv_work_t work;
	struct jc_admin_env env;
	uint64_t evicted;
	int rc;
};

static int evict_busy;

static void evict_work_cb(uv_work_t *w)
{
	struct evict_job *j = w->data;
	struct jc_daemon *d = &daemon_state;
	/* Evict down to the low-water mark (90% of the budget). */
	pthread_mutex_lock(&d->wlock);
	j->rc = jc__admin_evict_to(&j->env, d->cfg.max_size / 10 * 9, &j->evicted);
	pthread_mutex_unlock(&d->wlock);
}

static void evict_after_cb(uv_work_t *w, int status)
{
	struct evict_job *j = w->data;
	struct jc_daemon *d = &daemon_state;
	(void)status;
	if (j->evicted) {
		jc_log_info(EVICT, "evicted %llu entries to stay under %llu bytes",
			    (unsigned long long)j->evicted, (unsigned long long)d->cfg.max_size);
		d->counters[JC_CTR_evictions] += j->evicted;
		d->counters_dirty = 1;
		jc__cache_memcache_drop_all(d);
	}
	if (j->rc != 0)
		jc_log_warn(EVICT, "eviction failed: %s", jc__index_errmsg(d->wix));
	evict_busy = 0;
	free(j);
}

static void maybe_evict(struct jc_daemon *d)
{
	if (evict_busy || d->stopping)
		return;
	struct evict_job *j = calloc(1, sizeof(*j));
	if (!j)
		return;
	j->env.store = d->store;
	j->env.ix = d->wix;
	j->env.tc = &d->tc;
	j->work.data = j;
	evict_busy = 1;
	if (uv_queue_work(d->loop, &j->work, evict_work_cb, evict_after_cb) != 0) {
		evict_busy = 0;
		free(j);
	}
}

static void tick_cb(uv_timer_t *t)
{
	static unsigned ticks;
	struct jc_daemon *d = t->data;
	jc__cache_tick(d);
	jc__pool_dispatch(d);
	if (++ticks % EVICT_EVERY_TICKS == 0)
		maybe_evict(d);
}

/* --- signals -------------------------------------------------------------------- */

static void stop_cb(uv_signal_t *sig, int signum)
{
	struct jc_daemon *d = sig->data;
	if (d->stopping)
		return;
	jc_log_notice(MAIN, "signal %d: stopping", signum);
	notify("STOPPING=1");
	d->stopping = 1;
	jc__server_shutdown(d);
	jc__cache_shutdown(d);
	jc__pool_stop(d);
	uv_timer_stop(&d->tick);
	uv_close((uv_handle_t *)&d->tick, NULL);
	uv_close((uv_handle_t *)&d->sigterm, NULL);
	uv_close((uv_handle_t *)&d->sigint, NULL);
	uv_close((uv_handle_t *)&d->sighup, NULL);
}

/* SIGHUP: re-read the configuration; apply what can change while running. */
static void reload_cb(uv_signal_t *sig, int signum)
{
	struct jc_daemon *d = sig->data;
	struct jc_config fresh;
	struct settings s = {.cfg = &fresh, .log_level = jc__log_level};
	(void)signum;
	defaults(&fresh);
	if (parse_args(&s, saved_argc, saved_argv, 0) != 0 || read_configs(&s) != 0 ||
	    parse_args(&s, saved_argc, saved_argv, 1) != 0) {
		jc_log_err(MAIN, "SIGHUP: configuration not reloaded (see above)");
		goto out;
	}
	jc__log_level = s.log_level;
	d->cfg.max_size = fresh.max_size;
	d->cfg.negative_ttl_s = fresh.negative_ttl_s;
	d->cfg.compile_timeout_s = fresh.compile_timeout_s;
	d->cfg.idle_timeout_s = fresh.idle_timeout_s;
	d->cfg.admin_gid = fresh.admin_gid;
	free(d->cfg.allow_uids);
	d->cfg.allow_uids = fresh.allow_uids;
	d->cfg.n_allow_uids = fresh.n_allow_uids;
	fresh.allow_uids = NULL;
	jc_log_notice(MAIN, "SIGHUP: reloaded log-level, max-size, negative-ttl, compile-timeout, "
			    "idle-timeout, admin-group, allow-uids; cache-dir, socket, workers and "
			    "worker-memory need a restart");
out:
	free(fresh.cache_dir);
	free(fresh.socket_path);
	free(fresh.allow_uids);
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

int main(int argc, char **argv)
{
	struct jc_daemon *d = &daemon_state;
	struct settings s = {.cfg = &d->cfg, .log_level = LOG_NOTICE};
	char err[512] = "", buf[4096];
	int rc = 0, exit_code = 1;

	saved_argc = argc;
	saved_argv = argv;
	defaults(&d->cfg);
	if (parse_args(&s, argc, argv, 0) != 0 || read_configs(&s) != 0 ||
	    parse_args(&s, argc, argv, 1) != 0)
		return 2;
	jc__log_level = s.log_level;
	if (!d->cfg.cache_dir) {
		if (jc__default_cache_dir(buf, sizeof(buf)) != 0) {
			fprintf(stderr, "jitcached: no cache directory: set --cache-dir, JITCACHE_DIR or HOME\n");
			return 2;
		}
		d->cfg.cache_dir = strdup(buf);
	}
	if (!d->cfg.socket_path) {
		if (jc__default_socket_path(d->cfg.cache_dir, buf, sizeof(buf)) != 0) {
			fprintf(stderr, "jitcached: socket path too long\n");
			return 2;
		}
		d->cfg.socket_path = strdup(buf);
	}
	d->cfg.worker_path = find_worker();
	signal(SIGPIPE, SIG_IGN);
	d->lock_fd = -1;
	d->start_ns = jc__now_ns();
	pthread_mutex_init(&d->wlock, NULL);

	/* Lock before opening (the lock creates the directory): opening the
	 * store empties its staging area. */
	d->lock_fd = jc__store_lock(d->cfg.cache_dir, 2000, err, sizeof(err));
	if (d->lock_fd < 0) {
		rc = d->lock_fd;
		goto err_out;
	}
	rc = jc__store_open(d->cfg.cache_dir, d->cfg.group_shared, &d->store, err, sizeof(err));
	if (rc != 0)
		goto err_after_lock;
	rc = jc__toolchain_probe(&d->tc, err, sizeof(err));
	if (rc != 0)
		goto err_after_store;
	snprintf(buf, sizeof(buf), "%s/index.sqlite", d->cfg.cache_dir);
	rc = jc__index_open(buf, 0, &d->wix, err, sizeof(err));
	if (rc != 0)
		goto err_after_store;
	rc = jc__index_open(buf, 1, &d->rix, err, sizeof(err));
	if (rc != 0)
		goto err_after_wix;
	rc = jc__cache_init(d);
	if (rc != 0) {
		snprintf(err, sizeof(err), "cannot start the cache: %s", jc_strerror(rc));
		goto err_after_rix;
	}

	d->loop = uv_default_loop();
	rc = jc__pool_start(d, err, sizeof(err));
	if (rc != 0)
		goto err_after_loop;
	rc = jc__server_listen(d, inherited_listener(), err, sizeof(err));
	if (rc != 0) {
		jc__pool_stop(d);
		goto err_after_loop;
	}
	uv_timer_init(d->loop, &d->tick);
	d->tick.data = d;
	uv_timer_start(&d->tick, tick_cb, TICK_MS, TICK_MS);
	uv_signal_init(d->loop, &d->sigterm);
	uv_signal_init(d->loop, &d->sigint);
	uv_signal_init(d->loop, &d->sighup);
	d->sigterm.data = d->sigint.data = d->sighup.data = d;
	uv_signal_start(&d->sigterm, stop_cb, SIGTERM);
	uv_signal_start(&d->sigint, stop_cb, SIGINT);
	uv_signal_start(&d->sighup, reload_cb, SIGHUP);

	jc_log_notice(MAIN, "jitcached %s ready: cache %s, socket %s, %d workers, %s", JC_VERSION,
		      d->cfg.cache_dir, d->cfg.socket_path, d->cfg.workers, d->tc.summary);
	notify("READY=1\nSTATUS=serving");
	uv_run(d->loop, UV_RUN_DEFAULT);
	jc__cache_flush_sync(d);
	exit_code = 0;
	jc_log_notice(MAIN, "stopped");

err_after_loop:
	uv_run(d->loop, UV_RUN_NOWAIT);
	if (uv_loop_close(d->loop) != 0)
		jc_log_warn(MAIN, "loop closed with handles still open");
err_after_rix:
	jc__cache_free(d);
	jc__index_close(d->rix);
err_after_wix:
	jc__index_close(d->wix);
err_after_store:
	jc__store_close(d->store);
err_after_lock:
	close(d->lock_fd);
err_out:
	if (exit_code != 0)
		fprintf(stderr, "jitcached: %s\n", err[0] ? err : jc_strerror(rc));
	free(d->touch_keys);
	free(d->cfg.cache_dir);
	free(d->cfg.socket_path);
	free(d->cfg.worker_path);
	free(d->cfg.allow_uids);
	return exit_code;
}
