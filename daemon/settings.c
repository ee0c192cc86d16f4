/* SPDX-License-Identifier: MIT */
/* jitcached's configuration: defaults, flags, files, SIGHUP. See settings.h. */
#include "daemon/settings.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <ini.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "config.h"
#include "core/confine.h"
#include "core/evict.h"
#include "jitcache/jitcache.h"

static void usage(FILE *f)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	fprintf(f,
		"usage: jitcached [OPTION]...\n"
		"Runs in the foreground; ready once the socket accepts. Defaults in brackets.\n"
		"  --cache-dir DIR          the cache [$JITCACHE_DIR, else $XDG_CACHE_HOME/jitcache,\n"
		"                            else ~/.cache/jitcache]\n"
		"  --socket PATH            where clients connect [$JITCACHE_SOCKET, else\n"
		"                            $XDG_RUNTIME_DIR/jitcached.sock, else DIR/jitcached.sock]\n"
		"  --max-size SIZE          byte budget of the cache directory: entries (objects,\n"
		"                            logs, rows; failed ones too) and its other files [10G]\n"
		"  --user-max-size SIZE     byte share of each uid (what its entries store, a\n"
		"                            shared one in full); its least recently used go\n"
		"                            first, 0 none [0]\n"
		"  --negative-ttl DURATION  lifetime of a cached compile failure [300s]\n"
		"  --max-log-size SIZE      a compile log kept and answered: its first and last\n"
		"                            parts, at most this and a sixteenth of --max-size [1M]\n"
		"  --workers N              compile worker processes [%ld, the CPUs online]\n"
		"  --user-max-workers N     workers one uid's compiles may hold at once; the\n"
		"                            uids take turns [half of --workers, at least 1, on a\n"
		"                            daemon serving other uids; else all]\n"
		"  --compile-timeout DUR    per compile, 0 none [120s]\n"
		"  --worker-memory SIZE     address space a worker may add, 0 none [16G]\n"
		"  --idle-timeout DURATION  close a connection silent this long, 0 never [300s]\n"
		"  --idle-exit DURATION     exit this long after the last connection closed,\n"
		"                            0 never [0; a daemon the client library starts: 600s]\n"
		"  --serve-threads N        threads serving clients, each with its own loop;\n"
		"                            hits are answered there [%ld, the CPUs online, at\n"
		"                            most 64]\n"
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
		"  --keep-requests yes|no   keep each entry's request, for re-warm and export [yes]\n"
		"  --rewarm-workers N       idle-priority workers re-compiling kept requests for a\n"
		"                            new toolchain (jitcachectl warm) [1]\n"
		"  --rewarm-budget DURATION CPU time one re-warm may spend, 0 no limit [0]\n"
		"  --group-shared yes|no    socket 0660 for the group; the cache directory\n"
		"                            stays the daemon's alone (0700) [no]\n"
		"  --admin-group GROUP      may run ls/show/purge/gc/verify/stop for all [none]\n"
		"  --allow-uids UID,...     other uids allowed to connect [all the socket admits]\n"
		"  --confinement KIND       the workers': auto, landlock, userns, none [auto]\n"
		"  --allow-unconfined       serve other uids without confinement [no]\n"
		"  --remote URL             fleet tier on Redis: redis://HOST:PORT[/DB],\n"
		"                            redis+unix:///PATH, redis-cluster://HOST:PORT[,...] [none]\n"
		"  --remote-secret-file FILE    HMAC key of the fleet's values [none]\n"
		"  --remote-unsigned[=yes|no]   no secret file: accept unsigned values, which\n"
		"                            anyone who can write to Redis can forge [no]\n"
		"  --remote-password-file FILE  Redis AUTH password, first line [none]\n"
		"  --remote-read-only[=yes|no]  read Redis, never write it [no]\n"
		"  --remote-ttl DURATION    lifetime of a value in Redis [30d]\n"
		"  --remote-timeout-ms N    each Redis command at most, ms [1000]\n"
		"  --remote-max-object SIZE largest value written or accepted [64M]\n"
		"  --remote-lock-wait DURATION  wait for a peer compiling the same key at most\n"
		"                            this long, then compile [10s]\n"
		"  --user USER              bind the socket, then run as USER for good (as\n"
		"                            root; USER's groups) [none: as started]\n"
		"  --group GROUP            with --user: the group, also the socket's [USER's]\n"
		"  --config FILE            read only FILE\n"
		"  --log-level LEVEL        err, warning, notice, info, debug [notice]\n"
		"  --help, --version\n"
		"Durations: N[s|m|h|d], at most 10 years. Settings: " JC_SYSCONFDIR "/jitcache/jitcached.conf, then\n"
		"$XDG_CONFIG_HOME/jitcache/jitcached.conf (~/.config/...) over it, or --config FILE\n"
		"instead of both; flags win over files. SIGHUP re-reads them. Durations: N[s|m|h|d],\n"
		"at most 10 years. SIGTERM, SIGINT or\n"
		"`jitcachectl stop`: stop cleanly.\n", cpus > 0 ? cpus : 2,
		cpus > 64 ? 64 : cpus > 0 ? cpus : 2);
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
	} else if (strcmp(name, "user-max-size") == 0 || strcmp(name, "max-log-size") == 0) {
		/* user-max-size 0: no per-uid share; max-log-size 0: logs dropped */
		if (jc__parse_size(value, &size) != 0)
			ok = 0;
		else
			*(name[0] == 'u' ? &c->user_max_size : &c->max_log_size) = size;
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
		   strcmp(name, "idle-exit") == 0 || strcmp(name, "rewarm-budget") == 0) {
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
		else if (name[0] == 'r')
			c->rewarm_budget_s = secs;
		else
			*(name[0] == 'c' ? &c->compile_timeout_s
			  : strcmp(name, "idle-exit") == 0 ? &c->idle_exit_s
			  : name[0] == 'i' ? &c->idle_timeout_s
			  : name[0] == 'h' ? &c->handshake_timeout_s : &c->write_timeout_s) = (int)secs;
	} else if (strcmp(name, "workers") == 0 || strcmp(name, "user-max-workers") == 0) {
		ok = parse_count(value, 256, name[0] == 'w' ? &c->workers : &c->user_max_workers) == 0;
	} else if (strcmp(name, "serve-threads") == 0) {
		ok = parse_count(value, 64, &c->serve_threads) == 0;
	} else if (strcmp(name, "rewarm-workers") == 0) {
		ok = parse_count(value, 256, &c->rewarm_workers) == 0;
	} else if (strcmp(name, "keep-requests") == 0) {
		ok = parse_bool(value, &c->keep_requests) == 0;
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
	} else if (strcmp(name, "admin-group") == 0 || strcmp(name, "group") == 0) {
		struct group *g = *value ? getgrnam(value) : NULL;
		if (!g) {
			snprintf(s->err, sizeof(s->err), "no such group '%s' for %s", value, name);
			return JC_EINVAL;
		}
		if (name[0] == 'a')
			c->admin_gid = g->gr_gid;
		else
			c->run_gid = g->gr_gid, c->run_group_set = 1;
	} else if (strcmp(name, "user") == 0) {
		struct passwd *pw = *value ? getpwnam(value) : NULL;
		if (!pw) {
			snprintf(s->err, sizeof(s->err), "no such user '%s' for user", value);
			return JC_EINVAL;
		}
		free(c->run_user);
		c->run_user = strdup(pw->pw_name);
		c->run_uid = pw->pw_uid;
		if (!c->run_group_set)
			c->run_gid = pw->pw_gid;
		ok = c->run_user != NULL;
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

/* How read_config treats a file it cannot open. */
enum conf_need {
	CONF_REQUIRED,   /* --config FILE: must be there and readable */
	CONF_OPTIONAL,   /* the system file: may be missing, must be readable when there */
	CONF_IF_READABLE /* the per-user file: skipped with a warning when unreadable (a daemon
			    started by root, or with --user, from another user's shell) */
};

/* Reads one configuration file. */
static int read_config(struct settings *s, const char *path, enum conf_need need)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		if (need != CONF_REQUIRED && errno == ENOENT)
			return 0;
		if (need == CONF_IF_READABLE && (errno == EACCES || errno == EPERM)) {
			jc_log_warn(MAIN, "%s is not readable (%s): skipped", path, strerror(errno));
			return 0;
		}
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
		return read_config(s, s->config_file, CONF_REQUIRED);
	const char *sysconf = getenv("JITCACHE_TEST_SYSCONFDIR");
	char path[4096];
	if (sysconf && *sysconf)
		jc_log_warn(MAIN, "test override JITCACHE_TEST_SYSCONFDIR=%s", sysconf);
	else
		sysconf = JC_SYSCONFDIR;
	snprintf(path, sizeof(path), "%s/jitcache/jitcached.conf", sysconf);
	int rc = read_config(s, path, CONF_OPTIONAL);
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	if (rc == 0 && ((xdg && *xdg) || home)) {
		if (xdg && *xdg)
			snprintf(path, sizeof(path), "%s/jitcache/jitcached.conf", xdg);
		else
			snprintf(path, sizeof(path), "%s/.config/jitcache/jitcached.conf", home);
		rc = read_config(s, path, CONF_IF_READABLE);
	}
	return rc;
}

static const struct option long_opts[] = {
	{"cache-dir", required_argument, NULL, 0},
	{"socket", required_argument, NULL, 0},
	{"max-size", required_argument, NULL, 0},
	{"user-max-size", required_argument, NULL, 0},
	{"max-log-size", required_argument, NULL, 0},
	{"negative-ttl", required_argument, NULL, 0},
	{"workers", required_argument, NULL, 0},
	{"user-max-workers", required_argument, NULL, 0},
	{"keep-requests", required_argument, NULL, 0},
	{"rewarm-workers", required_argument, NULL, 0},
	{"serve-threads", required_argument, NULL, 0},
	{"rewarm-budget", required_argument, NULL, 0},
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
	{"user", required_argument, NULL, 0},
	{"group", required_argument, NULL, 0},
	{"remote", required_argument, NULL, 0},
	{"remote-secret-file", required_argument, NULL, 0},
	{"remote-password-file", required_argument, NULL, 0},
	{"remote-read-only", optional_argument, NULL, 0},
	{"remote-ttl", required_argument, NULL, 0},
	{"remote-timeout-ms", required_argument, NULL, 0},
	{"remote-max-object", required_argument, NULL, 0},
	{"remote-lock-wait", required_argument, NULL, 0},
	{"remote-unsigned", optional_argument, NULL, 0},
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
	c->max_log_size = 1u << 20;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	c->workers = n > 0 ? (int)n : 2;
	c->serve_threads = n > 64 ? 64 : c->workers;
	c->compile_timeout_s = 120;
	c->keep_requests = 1;
	c->rewarm_workers = 1;
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

/* Fills in the default cache directory and socket where none was set.
 * Returns 0, or 2 with a message logged. */
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

/*
 * Room for max-connections descriptors: raise the soft RLIMIT_NOFILE towards
 * the hard one (systemd's default soft limit is 1024), or lower the cap so
 * that clients past it get a clear refusal rather than a failed accept.
 * Connections and a reserve must fit in three quarters of the limit (the
 * rest is for descriptors being served and the thread pool's files).
 */
void jc__settings_fit_connections(struct jc_config *c)
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

int jc__settings_read(struct jc_config *c, int argc, char **argv, int *log_level)
{
	struct settings s = {.cfg = c, .log_level = LOG_NOTICE};
	defaults(c);
	if (parse_args(&s, argc, argv, 0) != 0 || read_configs(&s) != 0 ||
	    parse_args(&s, argc, argv, 1) != 0)
		return 2;
	*log_level = s.log_level;
	return resolve_paths(c);
}

void jc__settings_clear(struct jc_config *c)
{
	free(c->cache_dir);
	free(c->socket_path);
	free(c->worker_path);
	free(c->allow_uids);
	free(c->run_user);
	jc__remote_config_clear(&c->remote);
	memset(c, 0, sizeof(*c));
}

void jc__settings_apply(struct jc_config *c, struct jc_config *fresh, int log_level)
{
	if (log_level != jc__log_level) {
		jc_log_notice(MAIN, "SIGHUP: log-level %d -> %d", jc__log_level, log_level);
		jc__log_level = log_level;
	}
	c->max_size = (uint64_t)reloaded("max-size", (int64_t)c->max_size, (int64_t)fresh->max_size);
	c->user_max_size = (uint64_t)reloaded("user-max-size", (int64_t)c->user_max_size,
					      (int64_t)fresh->user_max_size);
	c->negative_ttl_s = reloaded("negative-ttl", c->negative_ttl_s, fresh->negative_ttl_s);
	c->max_log_size = (uint64_t)reloaded("max-log-size", (int64_t)c->max_log_size,
					     (int64_t)fresh->max_log_size);
	c->compile_timeout_s = (int)reloaded("compile-timeout", c->compile_timeout_s,
					     fresh->compile_timeout_s);
	c->idle_timeout_s = (int)reloaded("idle-timeout", c->idle_timeout_s, fresh->idle_timeout_s);
	c->idle_exit_s = (int)reloaded("idle-exit", c->idle_exit_s, fresh->idle_exit_s);
	jc__settings_fit_connections(fresh);
	c->max_connections = (int)reloaded("max-connections", c->max_connections,
					   fresh->max_connections);
	c->max_connections_per_uid = (int)reloaded("max-connections-per-uid",
						   c->max_connections_per_uid,
						   fresh->max_connections_per_uid);
	c->handshake_timeout_s = (int)reloaded("handshake-timeout", c->handshake_timeout_s,
					       fresh->handshake_timeout_s);
	c->write_timeout_s = (int)reloaded("write-timeout", c->write_timeout_s, fresh->write_timeout_s);
	c->buffer_budget = (uint64_t)reloaded("buffer-budget", (int64_t)c->buffer_budget,
					      (int64_t)fresh->buffer_budget);
	c->gc_interval_s = reloaded("gc-interval", c->gc_interval_s, fresh->gc_interval_s);
	c->keep_requests = (int)reloaded("keep-requests", c->keep_requests, fresh->keep_requests);
	c->rewarm_budget_s = reloaded("rewarm-budget", c->rewarm_budget_s, fresh->rewarm_budget_s);
	c->admin_gid = (gid_t)reloaded("admin-group gid", (int32_t)c->admin_gid,
				       (int32_t)fresh->admin_gid);
	free(c->allow_uids);
	c->allow_uids = fresh->allow_uids;
	c->n_allow_uids = fresh->n_allow_uids;
	fresh->allow_uids = NULL;
	fresh->n_allow_uids = 0;
	needs_restart("cache-dir", strcmp(c->cache_dir, fresh->cache_dir) != 0);
	needs_restart("socket", strcmp(c->socket_path, fresh->socket_path) != 0);
	needs_restart("workers", c->workers != fresh->workers);
	needs_restart("user-max-workers", c->user_max_workers != fresh->user_max_workers);
	needs_restart("rewarm-workers", c->rewarm_workers != fresh->rewarm_workers);
	needs_restart("serve-threads", c->serve_threads != fresh->serve_threads);
	needs_restart("worker-memory", c->worker_memory != fresh->worker_memory);
	needs_restart("group-shared", c->group_shared != fresh->group_shared);
	needs_restart("confinement", c->confinement != fresh->confinement);
	needs_restart("max-include-watches", c->max_include_watches != fresh->max_include_watches);
	needs_restart("user", c->run_uid != fresh->run_uid || !c->run_user != !fresh->run_user);
	needs_restart("group", c->run_gid != fresh->run_gid);
	jc_log_notice(MAIN, "SIGHUP: configuration reloaded (log-level, max-size, user-max-size, "
			    "max-log-size, "
			    "negative-ttl, compile-timeout, idle-timeout, idle-exit, max-connections, "
			    "max-connections-per-uid, handshake-timeout, write-timeout, buffer-budget, "
			    "gc-interval, admin-group, keep-requests, rewarm-budget, "
			    "allow-uids, remote*)");
}
