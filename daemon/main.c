/* SPDX-License-Identifier: MIT */
/*
 * jitcached: wires options, configuration, the cache directory, the worker
 * pool, the socket server and signals together, then runs the libuv loop.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <ini.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "evict.h"
#include "config.h"
#include "confine.h"
#include "daemon.h"
#include "jitcache/jitcache.h"
#include "log.h"
#include "pool.h"
#include "util.h"
#if JC_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#define TICK_MS 1000

static void usage(FILE *f)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	fprintf(f,
		"usage: jitcached [OPTION]...\n"
		"Runs in the foreground; ready once the socket accepts. Defaults in brackets.\n"
		"  --cache-dir DIR          [$JITCACHE_DIR, else $XDG_CACHE_HOME/jitcache, else\n"
		"                            ~/.cache/jitcache]\n"
		"  --socket PATH            [$JITCACHE_SOCKET, else $XDG_RUNTIME_DIR/jitcached.sock,\n"
		"                            else DIR/jitcached.sock]\n"
		"  --max-size SIZE          byte budget of cached artifacts [10G]\n"
		"  --user-max-size SIZE     byte share of each uid (its entries, a shared one in\n"
		"                            full); its least recently used go first, 0 none [0]\n"
		"  --negative-ttl DURATION  lifetime of a cached compile failure [300s]\n"
		"  --workers N              compile worker processes [%ld, the CPUs online]\n"
		"  --compile-timeout DUR    per compile, 0 none [120s]\n"
		"  --worker-memory SIZE     address space a worker may add, 0 none [16G]\n"
		"  --idle-timeout DURATION  close a connection silent this long, 0 never [300s]\n"
		"  --idle-exit DURATION     exit this long after the last connection closed,\n"
		"                            0 never [0; a daemon the client library starts: 600s]\n"
		"  --max-connections N      clients at once [1024]\n"
		"  --max-connections-per-uid N  of one uid (not root's, not ours) at once [128]\n"
		"  --handshake-timeout DUR  close a connection without HELLO this long [5s]\n"
		"  --write-timeout DURATION drop an answer not read this long, and its\n"
		"                            connection [10s]\n"
		"  --buffer-budget SIZE     request and reply buffers of all connections; a\n"
		"                            request or large reply past it gets EBUSY [256M]\n"
		"  --max-include-watches N  inotify watches over all -I trees; 0: stat every\n"
		"                            header on each request [32768]\n"
		"  --gc-interval DURATION   orphan collection, 0 never [3600s]\n"
		"  --group-shared yes|no    socket 0660 for the group; the cache directory\n"
		"                            stays the daemon's alone (0700) [no]\n"
		"  --admin-group GROUP      may run ls/show/purge/gc/verify/stop for all [none]\n"
		"  --allow-uids UID,...     other uids allowed to connect [all the socket admits]\n"
		"  --confinement KIND       the workers': auto, landlock, userns, none [auto]\n"
		"  --allow-unconfined       serve other uids without confinement [no]\n"
		"  --remote URL             fleet tier on Redis: redis://HOST:PORT[/DB],\n"
		"                            redis+unix:///PATH, redis-cluster://HOST:PORT[,...] [none]\n"
		"  --remote-secret-file FILE    HMAC key of the fleet's values [none: unsigned]\n"
		"  --remote-password-file FILE  Redis AUTH password, first line [none]\n"
		"  --remote-read-only[=yes|no]  read Redis, never write it [no]\n"
		"  --remote-ttl DURATION    lifetime of a value in Redis [30d]\n"
		"  --remote-timeout-ms N    each Redis command at most, ms [1000]\n"
		"  --remote-max-object SIZE largest value written or accepted [64M]\n"
		"  --config FILE            read only FILE\n"
		"  --log-level LEVEL        err, warning, notice, info, debug [notice]\n"
		"  --help, --version\n"
		"Durations: N[s|m|h|d], at most 10 years. Settings: " JC_SYSCONFDIR "/jitcache/jitcached.conf, then\n"
		"$XDG_CONFIG_HOME/jitcache/jitcached.conf (~/.config/...) over it, or --config FILE\n"
		"instead of both; flags win over files. SIGHUP re-reads them. Durations: N[s|m|h|d],\n"
		"at most 10 years. SIGTERM, SIGINT or\n"
		"`jitcachectl stop`: stop cleanly.\n", cpus > 0 ? cpus : 2);
}

/* The settings a configuration file or a flag may give, by name. */
struct settings {
	struct jc_config *cfg;
	char *config_file;
	int log_level;
	char err[256];
	FILE *file;        /* the configuration file being read, */
	const char *path;  /* its name */
	int line;          /* and the line inih has just read */
};

/* The longest duration setting accepted, in seconds (10 years): longer ones
 * are an error rather than an overflow in the arithmetic that uses them. */
#define DURATION_MAX_S (10ll * 365 * 86400)

/* A decimal count from 1 to max into *out (unchanged on error); 0 or JC_EINVAL. */
static int parse_count(const char *value, long max, int *out)
{
	char *end;
	long n = strtol(value, &end, 10);
	if (end == value || *end || n < 1 || n > max)
		return JC_EINVAL;
	*out = (int)n;
	return 0;
}

/* yes/true/on/1 or no/false/off/0 into *out; JC_EINVAL otherwise. */
static int parse_bool(const char *v, int *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"}, *const no[] = {"no", "false", "off", "0"};
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
			*out = strcasecmp(v, yes[i]) == 0;
			return 0;
		}
	}
	return JC_EINVAL;
}

static int parse_uids(struct jc_config *c, const char *value)
{
	uid_t *uids = NULL;
	size_t n = 0;
	char *copy = strdup(value), *save = NULL;
	int rc = copy ? 0 : JC_ENOMEM;
	for (char *t = copy ? strtok_r(copy, ", ", &save) : NULL; rc == 0 && t;
	     t = strtok_r(NULL, ", ", &save)) {
		char *end;
		long uid = strtol(t, &end, 10);
		uid_t *p = realloc(uids, (n + 1) * sizeof(*p));
		if (!p) {
			rc = JC_ENOMEM;
		} else {
			uids = p;
			uids[n++] = (uid_t)uid;
			if (*end || uid < 0)
				rc = JC_EINVAL;
		}
	}
	free(copy);
	if (rc != 0) {
		free(uids);
		return rc;
	}
	free(c->allow_uids);
	c->allow_uids = uids;
	c->n_allow_uids = n;
	return 0;
}

static int set_option(struct settings *s, const char *name, const char *value)
{
	struct jc_config *c = s->cfg;
	int64_t secs;
	uint64_t size;
	int ok = 1, remote_rc;
	if (strcmp(name, "cache-dir") == 0 || strcmp(name, "socket") == 0) {
		char **field = name[0] == 'c' ? &c->cache_dir : &c->socket_path;
		free(*field);
		*field = strdup(value);
		ok = *value && *field;
	} else if (strcmp(name, "user-max-size") == 0) {
		/* 0: no per-uid share */
		if (jc__parse_size(value, &size) != 0)
			ok = 0;
		else
			c->user_max_size = size;
	} else if (strcmp(name, "max-size") == 0 || strcmp(name, "worker-memory") == 0 ||
		   strcmp(name, "buffer-budget") == 0) {
		/* worker-memory 0: no limit; the budget must hold one small reply */
		uint64_t min = name[0] == 'm' ? 1 : name[0] == 'b' ? (1u << 20) : 0;
		uint64_t *field = name[0] == 'm' ? &c->max_size : name[0] == 'b' ? &c->buffer_budget
										 : &c->worker_memory;
		if (jc__parse_size(value, &size) != 0)
			ok = 0;
		else if (size < min || size > ((uint64_t)1 << 62)) {
			snprintf(s->err, sizeof(s->err), "%s %s is out of range (%llu bytes to 4 EiB)", name,
				 value, (unsigned long long)min);
			return JC_EINVAL;
		} else
			*field = size;
	} else if (strcmp(name, "negative-ttl") == 0 || strcmp(name, "gc-interval") == 0 ||
		   strcmp(name, "compile-timeout") == 0 || strcmp(name, "idle-timeout") == 0 ||
		   strcmp(name, "handshake-timeout") == 0 || strcmp(name, "write-timeout") == 0 ||
		   strcmp(name, "idle-exit") == 0) {
		if (jc__parse_duration(value, &secs) != 0)
			ok = 0;
		else if (secs > DURATION_MAX_S) {
			snprintf(s->err, sizeof(s->err), "%s %s is out of range (at most 10 years, %lld s)",
				 name, value, DURATION_MAX_S);
			return JC_EINVAL;
		} else if (name[0] == 'n')
			c->negative_ttl_s = secs;
		else if (name[0] == 'g')
			c->gc_interval_s = secs;
		else
			*(name[0] == 'c' ? &c->compile_timeout_s
			  : strcmp(name, "idle-exit") == 0 ? &c->idle_exit_s
			  : name[0] == 'i' ? &c->idle_timeout_s
			  : name[0] == 'h' ? &c->handshake_timeout_s : &c->write_timeout_s) = (int)secs;
	} else if (strcmp(name, "workers") == 0) {
		ok = parse_count(value, 256, &c->workers) == 0;
	} else if (strcmp(name, "max-connections") == 0) {
		ok = parse_count(value, 1000000, &c->max_connections) == 0;
	} else if (strcmp(name, "max-connections-per-uid") == 0) {
		ok = parse_count(value, 1000000, &c->max_connections_per_uid) == 0;
	} else if (strcmp(name, "max-include-watches") == 0) {
		int n;
		ok = strcmp(value, "0") == 0 ? (n = 0, 1) : parse_count(value, 1 << 24, &n) == 0;
		c->max_include_watches = ok ? (uint32_t)n : c->max_include_watches;
	} else if (strcmp(name, "log-level") == 0) {
		int level = jc__log_parse_level(value);
		ok = level >= 0;
		s->log_level = ok ? level : s->log_level;
	} else if (strcmp(name, "group-shared") == 0) {
		ok = parse_bool(value, &c->group_shared) == 0;
	} else if (strcmp(name, "admin-group") == 0) {
		struct group *g = getgrnam(value);
		ok = g != NULL;
		c->admin_gid = ok ? g->gr_gid : c->admin_gid;
	} else if (strcmp(name, "allow-uids") == 0) {
		ok = parse_uids(c, value) == 0;
	} else if (strcmp(name, "confinement") == 0) {
		c->confinement = strcmp(value, "auto") == 0 ? -1 : jc__confine_parse(value);
		ok = strcmp(value, "auto") == 0 || c->confinement >= 0;
	} else if (strcmp(name, "allow-unconfined") == 0) {
		ok = parse_bool(value ? value : "yes", &c->allow_unconfined) == 0;
	} else if (strncmp(name, "remote", 6) == 0 &&
		   (remote_rc = jc__remote_config_set(&c->remote, name, value)) != 1) {
		ok = remote_rc == 0;
	} else {
		snprintf(s->err, sizeof(s->err), "unknown setting '%s'", name);
		return JC_EINVAL;
	}
	if (ok)
		return 0;
	snprintf(s->err, sizeof(s->err), "bad value '%s' for %s", value, name);
	return JC_EINVAL;
}

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
	struct settings *s = user;
	if (section[0] && strcmp(section, "jitcached") != 0) {
		/* Not ours (another tool's section), but never silently. */
		jc_log_warn(MAIN, "%s:%d: '%s' under [%s] is ignored: jitcached reads the settings "
			    "before any section and under [jitcached]", s->path, s->line, name, section);
		return 1;
	}
	return set_option(s, name, value) == 0;
}

/* inih's reader: fgets, counting lines for the messages above. */
static char *ini_read_line(char *str, int num, void *stream)
{
	struct settings *s = stream;
	char *r = fgets(str, num, s->file);
	s->line += r != NULL;
	return r;
}

/* Reads one configuration file; a missing optional file is fine. */
static int read_config(struct settings *s, const char *path, int required)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		if (!required && errno == ENOENT)
			return 0;
		jc_log_err(MAIN, "cannot read %s: %s", path, strerror(errno));
		return JC_EIO;
	}
	s->file = f;
	s->path = path;
	s->line = 0;
	int line = ini_parse_stream(ini_read_line, s, ini_cb, s);
	fclose(f);
	if (line != 0) {
		jc_log_err(MAIN, "%s:%d: %s", path, line, s->err[0] ? s->err : "syntax error");
		return JC_EINVAL;
	}
	return 0;
}

/* The system file, then the user's over it; or only --config FILE. */
static int read_configs(struct settings *s)
{
	if (s->config_file)
		return read_config(s, s->config_file, 1);
	const char *sysconf = getenv("JITCACHE_TEST_SYSCONFDIR");
	char path[4096];
	if (sysconf && *sysconf)
		jc_log_warn(MAIN, "test override JITCACHE_TEST_SYSCONFDIR=%s", sysconf);
	else
		sysconf = JC_SYSCONFDIR;
	snprintf(path, sizeof(path), "%s/jitcache/jitcached.conf", sysconf);
	int rc = read_config(s, path, 0);
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
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
	{"user-max-size", required_argument, NULL, 0},
	{"negative-ttl", required_argument, NULL, 0},
	{"workers", required_argument, NULL, 0},
	{"compile-timeout", required_argument, NULL, 0},
	{"worker-memory", required_argument, NULL, 0},
	{"idle-timeout", required_argument, NULL, 0},
	{"idle-exit", required_argument, NULL, 0},
	{"max-connections", required_argument, NULL, 0},
	{"max-connections-per-uid", required_argument, NULL, 0},
	{"handshake-timeout", required_argument, NULL, 0},
	{"write-timeout", required_argument, NULL, 0},
	{"buffer-budget", required_argument, NULL, 0},
	{"max-include-watches", required_argument, NULL, 0},
	{"gc-interval", required_argument, NULL, 0},
	{"group-shared", required_argument, NULL, 0},
	{"admin-group", required_argument, NULL, 0},
	{"allow-uids", required_argument, NULL, 0},
	{"confinement", required_argument, NULL, 0},
	{"allow-unconfined", optional_argument, NULL, 0},
	{"log-level", required_argument, NULL, 0},
	{"remote", required_argument, NULL, 0},
	{"remote-secret-file", required_argument, NULL, 0},
	{"remote-password-file", required_argument, NULL, 0},
	{"remote-read-only", optional_argument, NULL, 0},
	{"remote-ttl", required_argument, NULL, 0},
	{"remote-timeout-ms", required_argument, NULL, 0},
	{"remote-max-object", required_argument, NULL, 0},
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
			if (apply && set_option(s, long_opts[idx].name, optarg ? optarg : "yes") != 0) {
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
	c->max_size = JC_DEFAULT_MAX_SIZE;
	c->negative_ttl_s = 300;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	c->workers = n > 0 ? (int)n : 2;
	c->compile_timeout_s = 120;
	c->worker_memory = 16ull << 30;
	c->idle_timeout_s = 300;
	c->gc_interval_s = 3600;
	c->max_connections = 1024;
	c->max_connections_per_uid = 128;
	c->handshake_timeout_s = 5;
	c->write_timeout_s = 10;
	c->buffer_budget = 256ull << 20;
	c->max_include_watches = 32768;
	c->admin_gid = (gid_t)-1;
	c->confinement = -1;
	jc__remote_config_defaults(&c->remote);
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
	if (d->stopping || jc__cachedir_lock_check(d->cache, err, sizeof(err)) == 0)
		return;
	jc_log(LOG_CRIT, MAIN, "%s: stopping", err);
	uv_kill(getpid(), SIGTERM);
}

/* --idle-exit: stop as SIGTERM does once nobody has been connected that long
 * (a compile always has its requester connected). */
static void idle_exit_check(struct jc_daemon *d)
{
	if (d->cfg.idle_exit_s <= 0 || d->n_conns > 0 || d->stopping)
		return;
	if (jc__now_ns() - d->idle_since_ns >= (uint64_t)d->cfg.idle_exit_s * 1000000000u) {
		jc_log_notice(MAIN, "no client for %d s (--idle-exit): stopping", d->cfg.idle_exit_s);
		uv_kill(getpid(), SIGTERM);
	}
}

static void tick_cb(uv_timer_t *t)
{
	struct jc_daemon *d = t->data;
	lock_check(d);
	idle_exit_check(d);
	jc__cache_tick(d);
	jc__pool_dispatch(d->pool);
	jc__evict_tick(d);
}

/* --- signals -------------------------------------------------------------------- */

static void stop_cb(uv_signal_t *sig, int signum)
{
	struct jc_daemon *d = sig->data;
	if (d->stopping)
		return;
	jc_log_notice(MAIN, "signal %d: stopping", signum);
	daemon_notify("STOPPING=1");
	d->stopping = 1;
	jc__cache_watch_stop(d);
	jc__remote_close(d->remote); /* flights waiting on it: likewise */
	d->remote = NULL;
	jc__pool_stop(d->pool); /* queued and running compiles: answered "shutting down" */
	jc__server_shutdown(d);
	uv_timer_stop(&d->tick);
	uv_close((uv_handle_t *)&d->tick, NULL);
	uv_close((uv_handle_t *)&d->sigterm, NULL);
	uv_close((uv_handle_t *)&d->sigint, NULL);
	uv_close((uv_handle_t *)&d->sighup, NULL);
}

/*
 * Room for max-connections descriptors: raise the soft RLIMIT_NOFILE towards
 * the hard one (systemd's default soft limit is 1024), or lower the cap so
 * that clients past it get a clear refusal rather than a failed accept.
 * Connections and a reserve must fit in three quarters of the limit (the
 * rest is for descriptors being served and the thread pool's files).
 */
static void fit_max_connections(struct jc_config *c)
{
	const rlim_t reserve = 64; /* index, store, workers, objects being served */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	rlim_t need = (rlim_t)c->max_connections + reserve, want = need + need / 3 + 1;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < want) {
		rlim_t usable = rl.rlim_cur - rl.rlim_cur / 4;
		int fit = usable > 2 * reserve ? (int)(usable - reserve) : (int)(usable / 2);
		jc_log_warn(MAIN, "max-connections %d lowered to %d: the descriptor limit is %llu",
			    c->max_connections, fit, (unsigned long long)rl.rlim_cur);
		c->max_connections = fit;
	}
}

/* Fills in the default cache directory and socket where none was set.
 * Returns 0, or 2 with a message on stderr. */
static int resolve_paths(struct jc_config *c)
{
	char buf[4096];
	if (!c->cache_dir) {
		if (jc__default_cache_dir(buf, sizeof(buf)) != 0) {
			jc_log_err(MAIN, "no cache directory: set --cache-dir, JITCACHE_DIR or HOME");
			return 2;
		}
		c->cache_dir = strdup(buf);
	}
	if (!c->socket_path) {
		if (jc__default_socket_path(c->cache_dir, buf, sizeof(buf)) != 0) {
			jc_log_err(MAIN, "socket path too long");
			return 2;
		}
		c->socket_path = strdup(buf);
	}
	return c->cache_dir && c->socket_path ? 0 : 2;
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

/* Logs a reloaded number that changed; returns it. */
static int64_t reloaded(const char *name, int64_t old, int64_t now)
{
	if (old != now)
		jc_log_notice(MAIN, "SIGHUP: %s %" PRId64 " -> %" PRId64, name, old, now);
	return now;
}

/* Warns about a setting that changed but needs a restart. */
static void needs_restart(const char *name, int changed)
{
	if (changed)
		jc_log_warn(MAIN, "SIGHUP: %s changed; it takes effect at the next start", name);
}

/* Starts the remote tier of cfg.remote; nothing without a URL. Redis need
 * not answer: the tier connects when first used. 0 or a JC_E code (err). */
static int remote_start(struct jc_daemon *d, char *err, size_t errlen)
{
	const struct jc_remote_config *rc = &d->cfg.remote;
	if (!rc->url)
		return 0;
	int e = jc__remote_new(d->loop, rc, d->cfg.compile_timeout_s, &d->cache->counters, &d->remote, err,
			       errlen);
	if (e == 0)
		jc_log_notice(MAIN, "remote tier %s%s%s, ttl %" PRId64 " s, timeout %d ms", rc->url,
			      rc->read_only ? " (read-only)" : "", rc->secret_file ? ", signed values" : "",
			      rc->ttl_s, rc->timeout_ms);
	return e;
}

/* SIGHUP: a new remote tier from the fresh settings (the secret and password
 * files are read again); the old one's waiting lookups compile. */
static void remote_reload(struct jc_daemon *d, struct jc_config *fresh)
{
	struct jc_remote_config old = d->cfg.remote;
	char err[512] = "";
	if (!old.url && !fresh->remote.url)
		return;
	jc__remote_close(d->remote);
	d->remote = NULL;
	d->cfg.remote = fresh->remote;
	memset(&fresh->remote, 0, sizeof(fresh->remote));
	if (remote_start(d, err, sizeof(err)) != 0)
		jc_log_err(MAIN, "SIGHUP: remote tier not started: %s", err);
	else if (!d->cfg.remote.url)
		jc_log_notice(MAIN, "SIGHUP: remote tier off");
	jc__remote_config_clear(&old);
}

/* SIGHUP: re-read the configuration; apply what can change while running and
 * say what cannot. On any error nothing changes. */
static void reload_cb(uv_signal_t *sig, int signum)
{
	struct jc_daemon *d = sig->data;
	struct jc_config fresh, *c = &d->cfg;
	struct settings s = {.cfg = &fresh, .log_level = LOG_NOTICE};
	(void)signum;
	defaults(&fresh);
	if (parse_args(&s, saved_argc, saved_argv, 0) != 0 || read_configs(&s) != 0 ||
	    parse_args(&s, saved_argc, saved_argv, 1) != 0 || resolve_paths(&fresh) != 0) {
		jc_log_err(MAIN, "SIGHUP: configuration not reloaded (see above); keeping the running one");
		goto out;
	}
	if (s.log_level != jc__log_level) {
		jc_log_notice(MAIN, "SIGHUP: log-level %d -> %d", jc__log_level, s.log_level);
		jc__log_level = s.log_level;
	}
	uint64_t old_max = c->max_size, old_share = c->user_max_size;
	c->max_size = (uint64_t)reloaded("max-size", (int64_t)c->max_size, (int64_t)fresh.max_size);
	c->user_max_size = (uint64_t)reloaded("user-max-size", (int64_t)c->user_max_size,
					      (int64_t)fresh.user_max_size);
	c->negative_ttl_s = reloaded("negative-ttl", c->negative_ttl_s, fresh.negative_ttl_s);
	c->compile_timeout_s = (int)reloaded("compile-timeout", c->compile_timeout_s,
					     fresh.compile_timeout_s);
	jc__pool_set_timeout(d->pool, c->compile_timeout_s);
	c->idle_timeout_s = (int)reloaded("idle-timeout", c->idle_timeout_s, fresh.idle_timeout_s);
	c->idle_exit_s = (int)reloaded("idle-exit", c->idle_exit_s, fresh.idle_exit_s);
	fit_max_connections(&fresh);
	c->max_connections = (int)reloaded("max-connections", c->max_connections,
					   fresh.max_connections);
	c->max_connections_per_uid = (int)reloaded("max-connections-per-uid",
						   c->max_connections_per_uid,
						   fresh.max_connections_per_uid);
	c->handshake_timeout_s = (int)reloaded("handshake-timeout", c->handshake_timeout_s,
					       fresh.handshake_timeout_s);
	c->write_timeout_s = (int)reloaded("write-timeout", c->write_timeout_s, fresh.write_timeout_s);
	c->buffer_budget = (uint64_t)reloaded("buffer-budget", (int64_t)c->buffer_budget,
					      (int64_t)fresh.buffer_budget);
	d->buffers.max = (size_t)c->buffer_budget;
	c->gc_interval_s = reloaded("gc-interval", c->gc_interval_s, fresh.gc_interval_s);
	c->admin_gid = (gid_t)reloaded("admin-group gid", (int32_t)c->admin_gid, (int32_t)fresh.admin_gid);
	free(c->allow_uids);
	c->allow_uids = fresh.allow_uids;
	c->n_allow_uids = fresh.n_allow_uids;
	fresh.allow_uids = NULL;
	needs_restart("cache-dir", strcmp(c->cache_dir, fresh.cache_dir) != 0);
	needs_restart("socket", strcmp(c->socket_path, fresh.socket_path) != 0);
	needs_restart("workers", c->workers != fresh.workers);
	needs_restart("worker-memory", c->worker_memory != fresh.worker_memory);
	needs_restart("group-shared", c->group_shared != fresh.group_shared);
	needs_restart("confinement", c->confinement != fresh.confinement);
	needs_restart("max-include-watches", c->max_include_watches != fresh.max_include_watches);
	jc_log_notice(MAIN, "SIGHUP: configuration reloaded (log-level, max-size, user-max-size, negative-ttl, "
			    "compile-timeout, idle-timeout, idle-exit, max-connections, "
			    "max-connections-per-uid, handshake-timeout, write-timeout, buffer-budget, "
			    "gc-interval, admin-group, "
			    "allow-uids, remote*)");
	remote_reload(d, &fresh);
	jc__evict_budget_changed(d, old_max, old_share);
out:
	free(fresh.cache_dir);
	free(fresh.socket_path);
	free(fresh.allow_uids);
	jc__remote_config_clear(&fresh.remote);
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
		snprintf(err, errlen, "this daemon serves other uids but its compile workers cannot be "
			 "confined (%s%s); pass --allow-unconfined to run anyway",
			 d->cfg.confinement < 0 ? "" : "--confinement none; ", why);
		return JC_EINVAL;
	}
	if (d->cfg.confinement >= 0 && want != best)
		snprintf(why + strlen(why), whylen - strlen(why), "; %s asked for",
			 jc__confine_name(want));
	d->confinement = want;
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
	size_t len = sizeof(sock);
	if (uv_pipe_getsockname(&d->listener, sock, &len) != 0 || len == 0) {
		jc_log_warn(MAIN, "cannot name the listening socket: clients given --cache-dir %s will "
				  "not find this daemon", d->cfg.cache_dir);
		return;
	}
	sock[len < sizeof(sock) ? len : sizeof(sock) - 1] = '\0';
	snprintf(path, sizeof(path), "%s/%s", d->cfg.cache_dir, JC_SOCKET_POINTER);
	snprintf(tmp, sizeof(tmp), "%s/tmp/%s.%d", d->cfg.cache_dir, JC_SOCKET_POINTER, (int)getpid());
	FILE *f = fopen(tmp, "wx");
	int ok = f && fprintf(f, "%s\n", sock) > 0;
	ok &= f && fclose(f) == 0;
	if (!ok || rename(tmp, path) != 0) {
		jc_log_warn(MAIN, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
		return;
	}
	d->pointer_path = strdup(path);
	snprintf(d->pointer_sock, sizeof(d->pointer_sock), "%s", sock);
}

static void pointer_remove(struct jc_daemon *d)
{
	char now[4096];
	if (!d->pointer_path)
		return;
	FILE *f = fopen(d->pointer_path, "re");
	int ours = f && fgets(now, sizeof(now), f) && strcspn(now, "\n") == strlen(d->pointer_sock) &&
		   strncmp(now, d->pointer_sock, strlen(d->pointer_sock)) == 0;
	if (f)
		fclose(f);
	if (ours)
		unlink(d->pointer_path);
	free(d->pointer_path);
	d->pointer_path = NULL;
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
	char err[512] = "", conf_why[128] = "";
	int rc = 0, exit_code = 1;

	saved_argc = argc;
	saved_argv = argv;
	/* The cache directory, the index SQLite creates and everything else we
	 * write belong to our uid alone (the socket's mode is set on its own). */
	umask(077);
	defaults(&d->cfg);
	if (parse_args(&s, argc, argv, 0) != 0 || read_configs(&s) != 0 ||
	    parse_args(&s, argc, argv, 1) != 0)
		return 2;
	jc__log_level = s.log_level;
	if (resolve_paths(&d->cfg) != 0)
		return 2;
	d->cfg.worker_path = find_worker();
	fit_max_connections(&d->cfg);
	signal(SIGPIPE, SIG_IGN);
	d->conn_ops = &jc__server_conn_ops;
	d->start_ns = d->idle_since_ns = jc__now_ns();
	d->hit_latency_since = (uint64_t)time(NULL);
	d->buffers.max = (size_t)d->cfg.buffer_budget;

	rc = jc__cachedir_open(d->cfg.cache_dir, JC_CACHEDIR_READER, 2000, &d->cache, err, sizeof(err));
	if (rc != 0)
		goto err_out;
	rc = jc__toolchain_probe(&d->tc, err, sizeof(err));
	if (rc != 0)
		goto err_after_cache;
	rc = jc__cache_init(d);
	if (rc != 0) {
		snprintf(err, sizeof(err), "cannot start the cache: %s", jc_strerror(rc));
		goto err_after_init;
	}
	jc__evict_start(d, evict_report);

	int listen_fd = inherited_listener();
	rc = choose_confinement(d, serves_other_uids(d, listen_fd), conf_why, sizeof(conf_why), err,
				sizeof(err));
	if (rc != 0)
		goto err_after_init;
	d->loop = uv_default_loop();
	rc = remote_start(d, err, sizeof(err));
	if (rc != 0)
		goto err_after_loop;
	const struct jc_pool_config pool_cfg = {
		.worker_path = d->cfg.worker_path,
		.cache_dir = d->cfg.cache_dir,
		.workers = d->cfg.workers,
		.compile_timeout_s = d->cfg.compile_timeout_s,
		.worker_memory = d->cfg.worker_memory,
		.confinement = d->confinement,
	};
	rc = jc__pool_start(d->loop, &pool_cfg, &d->cache->counters, &d->pool, err, sizeof(err));
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

	jc_log_notice(MAIN,
		      "jitcached %s ready: cache %s, socket %s, %d workers, budget %" PRIu64
		      " bytes (evicts above %d %%, down to %d %%), gc every %" PRId64 " s, "
		      "confinement %s (%s), %s",
		      JC_VERSION, d->cfg.cache_dir, listen_fd >= 0 ? "passed by systemd" : d->cfg.socket_path,
		      d->cfg.workers, d->cfg.max_size, JC_EVICT_HIGH_PCT,
		      JC_EVICT_LOW_PCT, d->cfg.gc_interval_s, jc__confine_name(d->confinement), conf_why,
		      d->tc.summary);
	daemon_notify("READY=1\nSTATUS=serving");
	jc__cache_watch_start(d);
	uv_run(d->loop, UV_RUN_DEFAULT);
	jc__cache_flush_sync(d);
	pointer_remove(d);
	exit_code = 0;
	jc_log_notice(MAIN, "stopped");

err_after_loop:
	uv_run(d->loop, UV_RUN_DEFAULT); /* until every handle has closed */
	if (uv_loop_close(d->loop) != 0)
		jc_log_warn(MAIN, "loop closed with handles still open");
	jc__pool_free(d->pool);
err_after_init:
	jc__cache_free(d);
err_after_cache:
	jc__cachedir_close(d->cache);
err_out:
	if (exit_code != 0)
		fprintf(stderr, "jitcached: %s\n", err[0] ? err : jc_strerror(rc));
	free(d->cfg.cache_dir);
	free(d->cfg.socket_path);
	free(d->cfg.worker_path);
	free(d->cfg.allow_uids);
	jc__remote_config_clear(&d->cfg.remote);
	return exit_code;
}
