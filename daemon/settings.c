/* SPDX-License-Identifier: MIT */
/* jitcached's configuration: defaults, flags, files, SIGHUP. See settings.h. */
#include "daemon/settings.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <ini.h>
#include <inttypes.h>
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
#include "core/tier.h"
#include "jitcache/jitcache.h"

/* The settings a configuration file or a flag may give, by name. */
struct settings {
	struct jc_config *cfg;
	char *config_file;
	int log_level;
	char err[256];
	FILE *file;	   /* the configuration file being read, */
	const char *path;  /* its name */
	int line;	   /* and the line inih has just read */
	int source;	   /* counts the sources read: each file, then the flags */
	int remote_source; /* the source of the remote URLs kept */
};

/* How a setting's value is read. */
enum kind {
	K_TEXT,	   /* char *, copied; "" gives NULL unless NONEMPTY */
	K_SIZE,	   /* bytes: N[K|M|G|T] (powers of 1024) */
	K_SECONDS, /* a duration: N[s|m|h|d] */
	K_COUNT,   /* a decimal count */
	K_BOOL,	   /* yes/true/on/1 or no/false/off/0; a bare flag is yes */
	K_CUSTOM,  /* its own reader (struct setting.read) */
};

/* What SIGHUP does with a setting (daemon/main.c reads the files again). */
enum {
	RELOAD = 1,   /* taken by the running daemon, the change logged */
	RESTART = 2,  /* kept; a change is named in a warning */
	OPT_ARG = 4,  /* the flag's value is optional (--remote-read-only) */
	NONEMPTY = 8, /* K_TEXT: "" is refused */
};

/*
 * One setting: its name (the long flag without "--" and the key in a
 * configuration file), how it is read, the field of struct jc_config it
 * sets (offset and size: 4 or 8 bytes for numbers), the range of numbers,
 * its default as a value read like any other (NULL: zero, none), what
 * --help says (the argument's name, the text, and the default shown where
 * it is not def itself) and what SIGHUP does with it.
 */
struct setting {
	const char *name;
	enum kind kind;
	size_t off, size;
	int64_t min, max;
	const char *def;
	int (*read)(struct settings *s,
		    const char *value); /* K_CUSTOM: 0 or JC_EINVAL (s->err set) */
	unsigned flags;
	const char *arg, *help, *shown;
};

/* The longest duration setting accepted, in seconds (10 years): longer ones
 * are an error rather than an overflow in the arithmetic that uses them. */
#define DURATION_MAX_S (10ll * 365 * 86400)
#define SIZE_MAX_B     ((int64_t)1 << 62)

#define FIELD(f) offsetof(struct jc_config, f), sizeof(((struct jc_config *)0)->f)
#define NOFIELD	 0, 0

static int read_log_level(struct settings *s, const char *value);
static int read_admin_group(struct settings *s, const char *value);
static int read_group(struct settings *s, const char *value);
static int read_user(struct settings *s, const char *value);
static int read_allow_uids(struct settings *s, const char *value);
static int read_confinement(struct settings *s, const char *value);
static int read_remote_url(struct settings *s, const char *value);

/* Every setting, in --help's order. */
static const struct setting table[] = {
    {"cache-dir", K_TEXT, FIELD(cache_dir), 0, 0, NULL, NULL, RESTART | NONEMPTY, "DIR",
     "the cache", "$JITCACHE_DIR, else $XDG_CACHE_HOME/jitcache, else ~/.cache/jitcache"},
    {"socket", K_TEXT, FIELD(socket_path), 0, 0, NULL, NULL, RESTART | NONEMPTY, "PATH",
     "where clients connect",
     "$JITCACHE_SOCKET, else $XDG_RUNTIME_DIR/jitcached.sock, else DIR/jitcached.sock"},
    {"max-size", K_SIZE, FIELD(max_size), 1, SIZE_MAX_B, JC_DEFAULT_MAX_SIZE, NULL, RELOAD, "SIZE",
     "byte budget of the cache directory: entries (objects, logs, rows; failed ones too) and "
     "its other files",
     NULL},
    {"user-max-size", K_SIZE, FIELD(user_max_size), 0, SIZE_MAX_B, "0", NULL, RELOAD, "SIZE",
     "byte share of each uid (what its entries store, a shared one in full); its least "
     "recently used go first, 0 none",
     NULL},
    {"negative-ttl", K_SECONDS, FIELD(negative_ttl_s), 0, DURATION_MAX_S, "300s", NULL, RELOAD,
     "DURATION", "lifetime of a cached compile failure", NULL},
    {"max-log-size", K_SIZE, FIELD(max_log_size), 0, SIZE_MAX_B, "1M", NULL, RELOAD, "SIZE",
     "a compile log kept and answered: its first and last parts, at most this and a sixteenth "
     "of --max-size",
     NULL},
    {"workers", K_COUNT, FIELD(workers), 1, 256, NULL, NULL, RESTART, "N",
     "compile worker processes", "the CPUs online"},
    {"user-max-workers", K_COUNT, FIELD(user_max_workers), 1, 256, NULL, NULL, RESTART, "N",
     "workers one uid's compiles may hold at once; the uids take turns",
     "half of --workers, at least 1, on a daemon serving other uids; else all"},
    {"compile-timeout", K_SECONDS, FIELD(compile_timeout_s), 0, DURATION_MAX_S, "120s", NULL,
     RELOAD, "DURATION", "per compile, 0 none", NULL},
    {"worker-memory", K_SIZE, FIELD(worker_memory), 0, SIZE_MAX_B, "16G", NULL, RESTART, "SIZE",
     "address space a worker may add, 0 none", NULL},
    {"idle-timeout", K_SECONDS, FIELD(idle_timeout_s), 0, DURATION_MAX_S, "300s", NULL, RELOAD,
     "DURATION", "close a connection silent this long, 0 never", NULL},
    {"idle-exit", K_SECONDS, FIELD(idle_exit_s), 0, DURATION_MAX_S, "0", NULL, RELOAD, "DURATION",
     "exit this long after the last connection closed, 0 never",
     "0; a daemon the client library starts: 600s"},
    {"serve-threads", K_COUNT, FIELD(serve_threads), 1, 64, NULL, NULL, RESTART, "N",
     "threads serving clients, each with its own loop; hits are answered there",
     "the CPUs online, at most 64"},
    {"max-connections", K_COUNT, FIELD(max_connections), 1, 1000000, "1024", NULL, RELOAD, "N",
     "clients at once", NULL},
    {"max-connections-per-uid", K_COUNT, FIELD(max_connections_per_uid), 1, 1000000, "128", NULL,
     RELOAD, "N", "of one uid (not root's, not ours) at once", NULL},
    {"handshake-timeout", K_SECONDS, FIELD(handshake_timeout_s), 0, DURATION_MAX_S, "5s", NULL,
     RELOAD, "DURATION", "close a connection without HELLO this long", NULL},
    {"write-timeout", K_SECONDS, FIELD(write_timeout_s), 0, DURATION_MAX_S, "10s", NULL, RELOAD,
     "DURATION", "drop an answer not read this long, and its connection", NULL},
    {"buffer-budget", K_SIZE, FIELD(buffer_budget), 1 << 20, SIZE_MAX_B, "256M", NULL, RELOAD,
     "SIZE",
     "request and reply buffers of all connections; a request or large reply past it gets "
     "EBUSY",
     NULL},
    {"hot-copy-budget", K_SIZE, FIELD(hot_copy_budget), 0, SIZE_MAX_B, "256M", NULL, RESTART,
     "SIZE",
     "memory for checked copies of hot objects, which hits are served from (inline under 64 KiB, "
     "a sealed memfd from 64 KiB); 0: every hit gets a descriptor of the object file",
     NULL},
    {"max-include-watches", K_COUNT, FIELD(max_include_watches), 0, 1 << 24, "32768", NULL, RESTART,
     "N", "inotify watches over all -I trees; 0: stat every header on each request", NULL},
    {"gc-interval", K_SECONDS, FIELD(gc_interval_s), 0, DURATION_MAX_S, "3600s", NULL, RELOAD,
     "DURATION", "orphan collection, 0 never", NULL},
    {"keep-requests", K_BOOL, FIELD(keep_requests), 0, 1, "yes", NULL, RELOAD, "yes|no",
     "keep each entry's request, for re-warm and export", NULL},
    {"rewarm-workers", K_COUNT, FIELD(rewarm_workers), 1, 256, "1", NULL, RESTART, "N",
     "idle-priority workers re-compiling kept requests for a new toolchain (jitcachectl warm)",
     NULL},
    {"rewarm-budget", K_SECONDS, FIELD(rewarm_budget_s), 0, DURATION_MAX_S, "0", NULL, RELOAD,
     "DURATION", "CPU time one re-warm may spend, 0 no limit", NULL},
    {"group-shared", K_BOOL, FIELD(group_shared), 0, 1, "no", NULL, RESTART, "yes|no",
     "socket 0660 for the group; the cache directory stays the daemon's alone (0700)", NULL},
    {"admin-group", K_CUSTOM, FIELD(admin_gid), 0, 0, NULL, read_admin_group, RELOAD, "GROUP",
     "may run ls/show/purge/gc/verify/stop for all", "none"},
    {"allow-uids", K_CUSTOM, NOFIELD, 0, 0, NULL, read_allow_uids, RELOAD, "UID,...",
     "other uids allowed to connect", "all the socket admits"},
    {"confinement", K_CUSTOM, FIELD(confinement), 0, 0, NULL, read_confinement, RESTART, "KIND",
     "the workers': auto, landlock, userns, none", "auto"},
    {"allow-unconfined", K_BOOL, FIELD(allow_unconfined), 0, 1, "no", NULL, RESTART | OPT_ARG,
     "[=yes|no]", "serve other uids without confinement", NULL},
    {"remote", K_CUSTOM, NOFIELD, 0, 0, NULL, read_remote_url, 0, "URL",
     "a fleet tier after the local one; several are asked in the order given: "
     "redis://HOST:PORT[/DB], redis+unix:///PATH, redis-cluster://HOST:PORT[,...], "
     "file:///DIR[?read-only&max-size=SIZE&lock-stale=DURATION] (a shared directory)",
     "none"},
    {"remote-secret-file", K_TEXT, FIELD(remote.secret_file), 0, 0, NULL, NULL, 0, "FILE",
     "HMAC key of the fleet's values", "none"},
    {"remote-unsigned", K_BOOL, FIELD(remote.unsigned_ok), 0, 1, "no", NULL, OPT_ARG, "[=yes|no]",
     "no secret file: accept unsigned values, which anyone who can write to Redis can forge", NULL},
    {"remote-password-file", K_TEXT, FIELD(remote.password_file), 0, 0, NULL, NULL, 0, "FILE",
     "Redis AUTH password, first line", "none"},
    {"remote-read-only", K_BOOL, FIELD(remote.read_only), 0, 1, "no", NULL, OPT_ARG, "[=yes|no]",
     "read the remote tiers, never write them", NULL},
    {"remote-ttl", K_SECONDS, FIELD(remote.ttl_s), 1, DURATION_MAX_S, "30d", NULL, 0, "DURATION",
     "lifetime of a value: Redis expires it; a shared directory (file://) serves it no longer "
     "and trims it",
     NULL},
    {"remote-timeout-ms", K_COUNT, FIELD(remote.timeout_ms), 1, 600000, "1000", NULL, 0, "N",
     "each Redis command at most, ms; not a shared directory's reads (a stalled mount cannot "
     "be cut off in-process: bound them with its mount options, NFS soft,timeo=,retrans=)",
     NULL},
    {"remote-max-object", K_SIZE, FIELD(remote.max_object), 1, SIZE_MAX_B, "64M", NULL, 0, "SIZE",
     "largest value written or accepted", NULL},
    {"remote-lock-wait", K_SECONDS, FIELD(remote.lock_wait_s), 0, 86400, "10s", NULL, 0, "DURATION",
     "wait for a peer compiling the same key at most this long, then compile", NULL},
    {"user", K_CUSTOM, FIELD(run_uid), 0, 0, NULL, read_user, RESTART, "USER",
     "bind the socket, then run as USER for good (as root; USER's groups)", "none: as started"},
    {"group", K_CUSTOM, FIELD(run_gid), 0, 0, NULL, read_group, RESTART, "GROUP",
     "with --user: the group, also the socket's", "USER's"},
    {"log-level", K_CUSTOM, NOFIELD, 0, 0, "notice", read_log_level, 0, "LEVEL",
     "err, warning, notice, info, debug", NULL},
};
#define N_SETTINGS (sizeof(table) / sizeof(table[0]))

/* --help: each setting's line(s), its text wrapped at 80 columns with the
 * default in brackets, then what is not a setting. */
static void usage(FILE *f)
{
	fputs("usage: jitcached [OPTION]...\n"
	      "Runs in the foreground; ready once the socket accepts. Defaults in brackets.\n",
	      f);
	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *t = &table[i];
		char head[64], text[512];
		int n = snprintf(head, sizeof(head), "  --%s%s%s", t->name,
				 t->arg[0] && t->arg[0] != '[' ? " " : "", t->arg);
		snprintf(text, sizeof(text), "%s [%s]", t->help,
			 t->shown ? t->shown
			 : t->def ? t->def
				  : "none");
		fprintf(f, "%s%*s", head, n < 26 ? 27 - n : 2, "");
		int col = n < 26 ? 27 : n + 2, first = 1;
		for (const char *w = text; *w; first = 0) {
			int len = (int)strcspn(w, " ");
			if (!first && col + 1 + len > 84) {
				fprintf(f, "\n%28s", "");
				col = 28;
			} else if (!first) {
				fputc(' ', f);
				col++;
			}
			fprintf(f, "%.*s", len, w);
			col += len;
			w += len + strspn(w + len, " ");
		}
		fputc('\n', f);
	}
	fputs("  --config FILE            read only FILE\n"
	      "  --help, --version\n"
	      "Durations: N[s|m|h|d], at most 10 years; sizes: N[K|M|G|T], powers of 1024.\n"
	      "Settings: " JC_SYSCONFDIR "/jitcache/jitcached.conf, then\n"
	      "$XDG_CONFIG_HOME/jitcache/jitcached.conf (~/.config/...) over it, or --config FILE\n"
	      "instead of both; flags win over files. SIGHUP re-reads them. SIGTERM, SIGINT or\n"
	      "`jitcachectl stop`: stop cleanly.\n",
	      f);
}

static const struct setting *find(const char *name)
{
	for (size_t i = 0; i < N_SETTINGS; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

static void *field_of(struct jc_config *c, const struct setting *t)
{
	return (char *)c + t->off;
}

/* A number field's value (4 bytes signed, or 8). */
static int64_t number_of(const struct jc_config *c, const struct setting *t)
{
	const void *at = (const char *)c + t->off;
	int32_t v4;
	int64_t v8;
	if (t->size == 4)
		return memcpy(&v4, at, 4), v4;
	return memcpy(&v8, at, 8), v8;
}

static void set_number(struct jc_config *c, const struct setting *t, int64_t v)
{
	int32_t v4 = (int32_t)v;
	memcpy(field_of(c, t), t->size == 4 ? (void *)&v4 : (void *)&v, t->size);
}

/* yes/true/on/1 or no/false/off/0 into *out; JC_EINVAL otherwise. */
static int parse_bool(const char *v, int *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"}, *const no[] = {"no", "false",
										    "off", "0"};
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
			*out = strcasecmp(v, yes[i]) == 0;
			return 0;
		}
	}
	return JC_EINVAL;
}

/* A number of the kind of t from value into *out: 0, JC_EINVAL (not one),
 * or 1 (out of range). */
static int parse_number(const struct setting *t, const char *value, int64_t *out)
{
	uint64_t size;
	char *end;
	int b;
	switch (t->kind) {
	case K_SIZE:
		if (jc__parse_size(value, &size) != 0)
			return JC_EINVAL;
		*out = size > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)size;
		break;
	case K_SECONDS:
		if (jc__parse_duration(value, out) != 0)
			return JC_EINVAL;
		break;
	case K_COUNT:
		*out = strtoll(value, &end, 10);
		if (end == value || *end || *out < 0)
			return JC_EINVAL;
		break;
	default: /* K_BOOL */
		if (parse_bool(value, &b) != 0)
			return JC_EINVAL;
		*out = b;
	}
	return *out < t->min || *out > t->max ? 1 : 0;
}

/* *field = a copy of value ("" gives NULL), the old one freed; 0, or
 * JC_ENOMEM (s->err set, *field unchanged). */
static int set_text(struct settings *s, char **field, const char *value)
{
	char *copy = *value ? strdup(value) : NULL;
	if (*value && !copy) {
		snprintf(s->err, sizeof(s->err), "out of memory");
		return JC_ENOMEM;
	}
	free(*field);
	*field = copy;
	return 0;
}

/* Sets the setting called name from value (borrowed); 0, or JC_EINVAL /
 * JC_ENOMEM with s->err saying why. */
static int set_option(struct settings *s, const char *name, const char *value)
{
	const struct setting *t = find(name);
	if (!t) {
		snprintf(s->err, sizeof(s->err), "unknown setting '%s'", name);
		return JC_EINVAL;
	}
	if (t->kind == K_CUSTOM)
		return t->read(s, value);
	if (t->kind == K_TEXT) {
		if (!*value && (t->flags & NONEMPTY)) {
			snprintf(s->err, sizeof(s->err), "%s must not be empty", name);
			return JC_EINVAL;
		}
		return set_text(s, field_of(s->cfg, t), value);
	}
	int64_t v;
	int rc = parse_number(t, value, &v);
	if (rc == JC_EINVAL)
		snprintf(s->err, sizeof(s->err), "bad value '%s' for %s", value, name);
	else if (rc == 1 && t->kind == K_SECONDS && t->max == DURATION_MAX_S)
		snprintf(s->err, sizeof(s->err),
			 "%s %s is out of range (at most 10 years, %" PRId64 " s)", name, value,
			 t->max);
	else if (rc == 1 && t->kind == K_SIZE)
		snprintf(s->err, sizeof(s->err),
			 "%s %s is out of range (%" PRId64 " bytes to 4 EiB)", name, value, t->min);
	else if (rc == 1)
		snprintf(s->err, sizeof(s->err),
			 "%s %s is out of range (%" PRId64 " to %" PRId64 "%s)", name, value,
			 t->min, t->max, t->kind == K_SECONDS ? " s" : "");
	else
		set_number(s->cfg, t, v);
	return rc == 0 ? 0 : JC_EINVAL;
}

static int bad_value(struct settings *s, const char *name, const char *value)
{
	snprintf(s->err, sizeof(s->err), "bad value '%s' for %s", value, name);
	return JC_EINVAL;
}

static int read_log_level(struct settings *s, const char *value)
{
	int level = jc__log_parse_level(value);
	if (level < 0)
		return bad_value(s, "log-level", value);
	s->log_level = level;
	return 0;
}

static int read_gid(struct settings *s, const char *name, const char *value, gid_t *gid)
{
	struct group *g = *value ? getgrnam(value) : NULL;
	if (!g) {
		snprintf(s->err, sizeof(s->err), "no such group '%s' for %s", value, name);
		return JC_EINVAL;
	}
	*gid = g->gr_gid;
	return 0;
}

static int read_admin_group(struct settings *s, const char *value)
{
	return read_gid(s, "admin-group", value, &s->cfg->admin_gid);
}

static int read_group(struct settings *s, const char *value)
{
	int rc = read_gid(s, "group", value, &s->cfg->run_gid);
	s->cfg->run_group_set |= rc == 0;
	return rc;
}

static int read_user(struct settings *s, const char *value)
{
	struct jc_config *c = s->cfg;
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
	return c->run_user ? 0 : JC_ENOMEM;
}

static int read_allow_uids(struct settings *s, const char *value)
{
	struct jc_config *c = s->cfg;
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
		return rc == JC_EINVAL ? bad_value(s, "allow-uids", value) : rc;
	}
	free(c->allow_uids);
	c->allow_uids = uids;
	c->n_allow_uids = n;
	return 0;
}

static int read_confinement(struct settings *s, const char *value)
{
	int kind = strcmp(value, "auto") == 0 ? -1 : jc__confine_parse(value);
	if (kind < 0 && strcmp(value, "auto") != 0)
		return bad_value(s, "confinement", value);
	s->cfg->confinement = kind;
	return 0;
}

/* A URL is checked here, so a bad one is refused at start-up and by
 * SIGHUP. The URLs of one source (a file, or the flags) make the list, in
 * their order, and replace those of an earlier source; "" empties it (no
 * remote tier). */
static int read_remote_url(struct settings *s, const char *value)
{
	char err[256];
	if (*value && jc__remote_url_check(value, err, sizeof(err)) != 0) {
		snprintf(s->err, sizeof(s->err), "bad value '%.80s' for remote: %.150s", value,
			 err);
		return JC_EINVAL;
	}
	if (s->remote_source != s->source || !*value)
		jc__remote_config_clear_urls(&s->cfg->remote);
	s->remote_source = s->source;
	if (*value && jc__remote_config_add_url(&s->cfg->remote, value) != 0) {
		snprintf(s->err, sizeof(s->err), "out of memory");
		return JC_ENOMEM;
	}
	return 0;
}

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
	struct settings *s = user;
	if (section[0] && strcmp(section, "jitcached") != 0) {
		/* Not ours (another tool's section), but never silently. */
		jc_log_warn(MAIN,
			    "%s:%d: '%s' under [%s] is ignored: jitcached reads the settings "
			    "before any section and under [jitcached]",
			    s->path, s->line, name, section);
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
	CONF_REQUIRED,	 /* --config FILE: must be there and readable */
	CONF_OPTIONAL,	 /* the system file: may be missing, must be readable when there */
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
			jc_log_warn(MAIN, "%s is not readable (%s): skipped", path,
				    strerror(errno));
			return 0;
		}
		jc_log_err(MAIN, "cannot read %s: %s", path, strerror(errno));
		return JC_EIO;
	}
	s->file = f;
	s->path = path;
	s->line = 0;
	s->source++;
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

/* Flags win over files: files are read first, then the flags again. The
 * long options are the table's, then --config, --help, --version. */
static int parse_args(struct settings *s, int argc, char **argv, int apply)
{
	struct option opts[N_SETTINGS + 4];
	for (size_t i = 0; i < N_SETTINGS; i++)
		opts[i] = (struct option){
		    table[i].name, table[i].flags & OPT_ARG ? optional_argument : required_argument,
		    NULL, 0};
	opts[N_SETTINGS] = (struct option){"config", required_argument, NULL, 'c'};
	opts[N_SETTINGS + 1] = (struct option){"help", no_argument, NULL, 'h'};
	opts[N_SETTINGS + 2] = (struct option){"version", no_argument, NULL, 'V'};
	opts[N_SETTINGS + 3] = (struct option){NULL, 0, NULL, 0};
	int c, idx;
	optind = 1;
	s->source++;
	while ((c = getopt_long(argc, argv, "c:hV", opts, &idx)) != -1) {
		switch (c) {
		case 0:
			if (apply && set_option(s, opts[idx].name, optarg ? optarg : "yes") != 0) {
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

/* The table's defaults (each read like a value), then those it cannot say. */
static void defaults(struct settings *s)
{
	struct jc_config *c = s->cfg;
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < N_SETTINGS; i++)
		if (table[i].def && set_option(s, table[i].name, table[i].def) != 0)
			abort(); /* a default the table cannot read: a bug caught by every test */
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	c->workers = n > 0 ? (int)n : 2;
	c->serve_threads = c->workers > 64 ? 64 : c->workers;
	c->admin_gid = (gid_t)-1;
	c->confinement = -1;
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
			jc_log_err(MAIN,
				   "no cache directory: set --cache-dir, JITCACHE_DIR or HOME");
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
		rl.rlim_cur =
		    rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
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

int jc__settings_read(struct jc_config *c, int argc, char **argv, int *log_level)
{
	struct settings s = {.cfg = c};
	defaults(&s);
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
	char taken[1024] = "log-level";
	if (log_level != jc__log_level) {
		jc_log_notice(MAIN, "SIGHUP: log-level %d -> %d", jc__log_level, log_level);
		jc__log_level = log_level;
	}
	jc__settings_fit_connections(fresh);
	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *t = &table[i];
		if ((t->flags & RELOAD) && t->size) {
			int64_t was = number_of(c, t), now = number_of(fresh, t);
			if (was != now)
				jc_log_notice(MAIN, "SIGHUP: %s %" PRId64 " -> %" PRId64, t->name,
					      was, now);
			set_number(c, t, now);
		} else if ((t->flags & RESTART) && t->size) {
			int changed = t->kind == K_TEXT ? strcmp(*(char **)field_of(c, t),
								 *(char **)field_of(fresh, t))
							: number_of(c, t) != number_of(fresh, t);
			if (changed)
				jc_log_warn(MAIN,
					    "SIGHUP: %s changed; it takes effect at the next start",
					    t->name);
		}
		if (t->flags & RELOAD)
			snprintf(taken + strlen(taken), sizeof(taken) - strlen(taken), ", %s",
				 t->name);
	}
	free(c->allow_uids);
	c->allow_uids = fresh->allow_uids;
	c->n_allow_uids = fresh->n_allow_uids;
	fresh->allow_uids = NULL;
	fresh->n_allow_uids = 0;
	jc_log_notice(MAIN, "SIGHUP: configuration reloaded (%s, remote*)", taken);
}
