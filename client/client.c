/* SPDX-License-Identifier: MIT */
/*
 * libjitcache-client: blocking, one request at a time per handle. A hit
 * arrives as a read-only descriptor of the cached object (SCM_RIGHTS); the
 * bytes are read here and checked against their XXH3-128 content hash (or
 * come from a memfd the daemon checked and sealed: sealed()), so a corrupted
 * object is never handed to the application.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "client/client_internal.h"
#include "common/elf_id.h"
#include "common/util.h"
#include "config.h"
#include "proto/io.h"

/* A daemon that accepts but does not answer the handshake (stopped, wedged). */
#define CONNECT_TIMEOUT_MS 10000
#define RETRIES_DEFAULT 5
#define RETRY_FIRST_WAIT_MS 20
#define IDLE_EXIT_DEFAULT 600
#define AUTOSTART_AGAIN_NS (30ull * 1000000000u) /* after a failed auto-start */
/* An auto-start attempt at most: before the in-process fallback, and with
 * fallback "error" (nothing else to wait for). */
#define AUTOSTART_WAIT_MS 1000
#define AUTOSTART_WAIT_ERROR_MS 30000
#define SUN_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path))

struct jc_options {
	char *socket, *cache_dir, *system_socket, *daemon, *nvrtc;
	int system_socket_set; /* system_socket was given (NULL there: skip) */
	int autostart;         /* -1 unset, 0, 1 */
	int idle_exit_s;       /* 0 unset */
	int fallback;          /* 0 unset, else jc_fallback */
	int retries;           /* -1 unset */
	jc_log_cb log;
	void *log_ctx;
};

struct jc_client {
	int fd;                /* -1: no daemon (fallback mode) */
	unsigned forks;        /* fork_count when fd was connected */
	struct jc_buf in, out;
	uint64_t spin_ns;      /* poll for the answer this long; 0 never */
	int timeout_ms;        /* wait for an answer at most this long; -1 forever */
	int fast;              /* the last answer came within spin_ns */
	int broken;            /* the last round trip failed in transport: mend and resend */
	/* How to find a daemon (resolved at open; strings owned). */
	char *socket;          /* step 1: only this socket */
	char *cache_dir;       /* step 1: only the daemon of this directory (absolute) */
	uint64_t dir_dev, dir_ino; /* its identity, sent in HELLO (0: any directory) */
	char *system_socket;   /* step 4; NULL: skipped */
	int autostart, fallback, retries, idle_exit_s;
	char *daemon, *nvrtc;
	char *nvrtc_id;        /* identity of nvrtc (elf_id.h), sent with each compile; NULL until read */
	jc_log_cb log;
	void *log_ctx;
	uint64_t autostart_after_ns; /* no auto-start before (after one failed) */
	char autostart_err[1024]; /* why the last one failed */
	int warned;            /* the fallback warning was given */
	char fallback_warn[160]; /* why $JITCACHE_FALLBACK is not used as given ("": it is) */
	/* The daemon connected to. */
	char sock[SUN_PATH_MAX];
	uint32_t daemon_pid;
	uint32_t proto;        /* the protocol version its handshake agreed on */
	int daemon_other_uid;  /* it runs as another uid (SO_PEERCRED): send include trees */
	int send_trees;        /* JITCACHE_SEND_HEADERS=1: send them to any daemon */
	struct jc_tree_cache *trees; /* the trees' memo and manifest (tree.c); NULL until one is sent */
	char *daemon_dir;
	char *archs, *nvrtc_version; /* its NVRTC's, from HELLO_OK (v3); NULL from an older daemon */
	char *daemon_toolkit; /* HELLO_OK's toolkit_include (NULL: none) */
	char why_none[1024];   /* why no daemon could be had (fallback mode) */
	char errmsg[1024];
};

struct jc_result {
	struct jc_res res;
	char key[33];
	uint64_t total_ns;
	uint64_t includes_ns; /* JC_TIME_INCLUDES */
};

static __thread char connect_errmsg[1024];

/* Children of fork() this process descends from (pthread_atfork): a
 * connection made before a fork is the parent's, and answers on it would go
 * to whichever process reads first; the child leaves it (closes its copy)
 * and connects again. */
static unsigned fork_count;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void count_fork(void)
{
	fork_count++;
}

static void install_atfork(void)
{
	pthread_atfork(NULL, NULL, count_fork);
}

#define SPIN_NS_DEFAULT 50000 /* see jc_client_open */

/* $JITCACHE_CLIENT_SPIN_US in nanoseconds: 0 to 1 s, else the default. */
static uint64_t spin_setting(void)
{
	const char *s = secure_getenv("JITCACHE_CLIENT_SPIN_US");
	char *end;
	if (!s || !*s)
		return SPIN_NS_DEFAULT;
	errno = 0;
	unsigned long long us = strtoull(s, &end, 10);
	return errno || *end || us > 1000000 ? SPIN_NS_DEFAULT : us * 1000;
}

/*
 * Polls the socket for the answer until t0 + c->spin_ns, before the blocking
 * read (see jc_client_open for why), but only while the last answer came
 * within that time: a compile, or a daemon slowed by many clients (which
 * then needs the CPU this loop would burn), turns polling off until an
 * answer is fast again. Each turn yields the CPU to any other runnable task
 * (the daemon, on this CPU, polls for requests the same way: server.c).
 * Only peeks: nothing is consumed and no descriptor is received (no control
 * buffer is given).
 */
static void spin_for_answer(jc_client *c, uint64_t t0)
{
	char b;
	if (!c->fast)
		return;
	do {
		ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			return; /* data, EOF or an error: the read reports it */
		sched_yield(); /* the daemon may be waiting for this CPU */
	} while (jc__now_ns() - t0 < c->spin_ns);
}

static void say(const jc_client *c, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A message to the application's log callback, if it set one. */
static void say(const jc_client *c, int level, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	if (!c->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->log(c->log_ctx, level, msg);
}

JC_API const char *jc_client_errmsg(const jc_client *c)
{
	return c ? c->errmsg : connect_errmsg;
}

int jc__client_fd(const jc_client *c)
{
	return c->fd;
}

const char *jc__client_socket(const jc_client *c)
{
	return c->fd >= 0 ? c->sock : "";
}

const char *jc__client_system_socket(const jc_client *c)
{
	return c->system_socket;
}

uint32_t jc__client_daemon_pid(const jc_client *c)
{
	return c->fd >= 0 ? c->daemon_pid : 0;
}

const char *jc__client_daemon_dir(const jc_client *c)
{
	return c->fd >= 0 ? c->daemon_dir : NULL;
}

JC_API const char *jc_client_socket(const jc_client *c)
{
	return c->fd >= 0 ? c->sock : NULL;
}

static void drop_connection(jc_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->fast = 0;
	c->daemon_pid = 0;
	free(c->daemon_dir);
	c->daemon_dir = NULL;
	free(c->archs);
	free(c->nvrtc_version);
	c->archs = c->nvrtc_version = NULL;
	free(c->daemon_toolkit);
	c->daemon_toolkit = NULL;
}

/*
 * Is the daemon that accepted fd (on the socket at path) one to send sources
 * to and take objects from? When it runs as this user or as root; and,
 * unless own (a per-user socket: $XDG_RUNTIME_DIR's, the cache directory's),
 * when it runs as the owner of the directory holding the socket (the system
 * daemon's /run/jitcached, a shared daemon's own directory). A socket
 * another user made in a directory anyone may write ($XDG_RUNTIME_DIR=/tmp,
 * say), or in a directory of theirs at the per-user path, is not that
 * user's daemon. 0 (*other_uid: it runs as a uid other than ours), or
 * JC_EDENIED (message in c->errmsg).
 */
static int check_peer(jc_client *c, int fd, const char *path, int own, int *other_uid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	uid_t me = geteuid();
	char dir[4200];
	struct stat st;
	const char *slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
		 slash ? path : ".");
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_EDENIED,
				"cannot tell who runs the daemon at %s: %s", path, strerror(errno));
	*other_uid = cred.uid != me;
	if (cred.uid == me || cred.uid == 0 || (!own && stat(dir, &st) == 0 && st.st_uid == cred.uid))
		return 0;
	if (own)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_EDENIED,
				"not using the daemon at %s: it runs as uid %u, which is neither this "
				"user nor root, and that socket is this user's own (another user's "
				"socket there?)", path, (unsigned)cred.uid);
	return jc__fail(c->errmsg, sizeof(c->errmsg), JC_EDENIED,
			"not using the daemon at %s: it runs as uid %u, which is neither this "
			"user, root, nor the owner of %s (a socket another user put there?)",
			path, (unsigned)cred.uid, dir);
}

/*
 * Connects to path and does the handshake in protocol version (sending the
 * expected directory identity, if any). Returns 0 (c->fd, c->sock, daemon
 * pid and directory set, and from version 3 its NVRTC's architectures and
 * version), JC_ECONNECT (nothing listens there) or the refusal's code;
 * message in c->errmsg.
 */
static int hello_version(jc_client *c, const char *path, int own, uint32_t version)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	drop_connection(c);
	if (strlen(path) >= sizeof(sa.sun_path))
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_EINVAL, "socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		jc__fail(c->errmsg, sizeof(c->errmsg), JC_ECONNECT, "cannot connect to jitcached at %s: %s",
			 path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return JC_ECONNECT;
	}
	int other_uid;
	if (check_peer(c, fd, path, own, &other_uid) != 0) {
		close(fd);
		return JC_EDENIED;
	}
	uint16_t type;
	struct jc_hello h = {.version = version, .name = "libjitcache-client " JC_VERSION_STRING,
			     .dir_dev = c->dir_dev, .dir_ino = c->dir_ino};
	jc__buf_reset(&c->out);
	int rc = jc__encode_hello_ex(&c->out, JC_MSG_HELLO, &h);
	int wrc = rc ?: jc__io_write_all(fd, c->out.data, c->out.len);
	/* A daemon that refuses a connection says why and closes it, maybe
	 * before our HELLO arrives: read its answer even if the write failed.
	 * A daemon that answers does so within microseconds: poll first, as
	 * for hits (spin_for_answer). */
	c->fd = fd;
	c->fast = 1;
	spin_for_answer(c, jc__now_ns());
	c->fd = -1;
	rc = rc ?: jc__io_read_answer(fd, &c->in, &type, NULL, CONNECT_TIMEOUT_MS);
	if (rc == 0 && type == JC_MSG_ERROR) {
		char *msg = NULL;
		int code = JC_EPROTO;
		jc__decode_error(c->in.data, c->in.len, &code, &msg);
		jc__fail(c->errmsg, sizeof(c->errmsg), code, "jitcached at %s refused the handshake: %.600s%s%.300s",
			 path, msg ? msg : "", c->dir_ino && code == JC_EINVAL ? "; this client means " : "",
			 c->dir_ino && code == JC_EINVAL ? c->cache_dir : "");
		free(msg);
		close(fd);
		return code < 0 ? code : JC_EPROTO;
	}
	if (rc == 0 && wrc != 0)
		rc = wrc;
	if (rc == 0 && type != JC_MSG_HELLO_OK)
		rc = JC_EPROTO;
	memset(&h, 0, sizeof(h));
	rc = rc ?: jc__decode_hello_ex(c->in.data, c->in.len, &h);
	if (rc == 0 && h.version != version)
		rc = JC_EVERSION;
	if (rc != 0) {
		jc__hello_clear(&h);
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "handshake with jitcached at %s failed: %s", path,
			 rc == JC_ETIMEOUT ? "no answer in 10 s (daemon stopped or wedged?)"
					   : jc_strerror(rc));
		close(fd);
		/* A socket file whose daemon died mid-handshake is no daemon. */
		return rc == JC_EIO ? JC_ECONNECT : rc;
	}
	c->fd = fd;
	c->forks = fork_count;
	snprintf(c->sock, sizeof(c->sock), "%s", path);
	c->daemon_pid = h.pid;
	c->proto = version;
	c->daemon_other_uid = other_uid;
	c->daemon_dir = h.cache_dir;
	c->archs = h.archs;
	c->nvrtc_version = h.nvrtc_version;
	h.cache_dir = h.archs = h.nvrtc_version = NULL;
	c->daemon_toolkit = h.toolkit_include;
	h.toolkit_include = NULL;
	jc__hello_clear(&h);
	return 0;
}

/* hello_version() in this library's protocol version, else in each older one
 * down to 2 (a daemon refuses a version newer than its own): from one older
 * than 3 without the toolchain fields, older than 4 without name_free. */
static int hello(jc_client *c, const char *path, int own)
{
	int rc = JC_EVERSION;
	for (uint32_t v = JC_PROTO_VERSION; rc == JC_EVERSION && v >= 2; v--)
		rc = hello_version(c, path, own, v);
	return rc;
}

int jc__client_toolchain(const jc_client *c, const char **archs, const char **nvrtc_version)
{
	if (c->fd < 0 || !c->archs || !c->nvrtc_version)
		return JC_ENOTFOUND;
	*archs = c->archs;
	*nvrtc_version = c->nvrtc_version;
	return 0;
}

int jc__dir_socket(const char *dir, char *out, size_t len, char *err, size_t errlen)
{
	char path[4200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, JC_SOCKET_POINTER);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return jc__fail(err, errlen, JC_ECONNECT, "no daemon serves %s (no %s: %s)", dir, path,
				strerror(errno));
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_uid == geteuid() || st.st_uid == 0))
		n = read(fd, out, len - 1);
	close(fd);
	if (n <= 0)
		return jc__fail(err, errlen, JC_ECONNECT,
				"no daemon serves %s (%s is not a socket name its daemon wrote)", dir, path);
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

/*
 * Steps 1-4 of jitcache.h: connects c to the first daemon that answers.
 * Returns 0, JC_ECONNECT (none answers: c->errmsg lists where it looked) or
 * a refusal (a named daemon's, or the first one met in the search).
 */
static int search(jc_client *c)
{
	char path[4200];
	if (c->socket)
		return hello(c, c->socket, 0);
	if (c->cache_dir)
		return jc__dir_socket(c->cache_dir, path, sizeof(path), c->errmsg, sizeof(c->errmsg)) ?:
		       hello(c, path, 0);
	const char *cand[4];
	int own[4] = {0}; /* the per-user ones: this user's daemon or root's only */
	char user[4200] = "", dflt[4200] = "";
	size_t n = 0;
	const char *env = secure_getenv("JITCACHE_SOCKET"), *xdg = secure_getenv("XDG_RUNTIME_DIR");
	if (env && *env)
		cand[n++] = env;
	if (xdg && *xdg) {
		snprintf(user, sizeof(user), "%s/jitcached.sock", xdg);
		own[n] = 1;
		cand[n++] = user;
	}
	if (c->system_socket)
		cand[n++] = c->system_socket;
	/* Neither variable set: the default cache directory's own socket. */
	if (n == (c->system_socket ? 1u : 0u) && jc__default_socket_path(NULL, dflt, sizeof(dflt)) == 0) {
		own[n] = 1;
		cand[n++] = dflt;
	}
	int first = 0;
	char tried[900] = "", refusal[1024] = "";
	for (size_t i = 0; i < n; i++) {
		if (i && strcmp(cand[i], cand[i - 1]) == 0)
			continue;
		int rc = hello(c, cand[i], own[i]);
		if (rc == 0)
			return 0;
		if (rc != JC_ECONNECT && !first) {
			first = rc;
			snprintf(refusal, sizeof(refusal), "%s", c->errmsg);
		}
		size_t used = strlen(tried);
		snprintf(tried + used, sizeof(tried) - used, "%s%s", used ? ", " : "", cand[i]);
	}
	if (first)
		return jc__fail(c->errmsg, sizeof(c->errmsg), first, "%s", refusal);
	return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ECONNECT, "no jitcached answers (tried %s)",
			n ? tried : "nothing: no socket configured");
}

static int autostart_answer(void *ctx)
{
	jc_client *c = ctx;
	struct stat st;
	/* A cache directory the starter just made: its daemon must serve it. */
	if (c->cache_dir && !c->dir_ino && stat(c->cache_dir, &st) == 0) {
		c->dir_dev = (uint64_t)st.st_dev;
		c->dir_ino = (uint64_t)st.st_ino;
	}
	return search(c);
}

/* Step 5: start a daemon where search() finds it. 0 (connected) or an error. */
static int autostart(jc_client *c, const char *why)
{
	char dir[4096], sock[4200], err[1024];
	if (c->cache_dir) {
		snprintf(dir, sizeof(dir), "%s", c->cache_dir);
		snprintf(sock, sizeof(sock), "%s/jitcached.sock", c->cache_dir);
	} else if (jc__default_cache_dir(dir, sizeof(dir)) != 0 ||
		   jc__default_socket_path(dir, sock, sizeof(sock)) != 0) {
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ECONNECT,
				"%s; no auto-start: no cache directory (set JITCACHE_DIR or HOME)", why);
	}
	if (strlen(sock) >= SUN_PATH_MAX)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ECONNECT,
				"%s; no auto-start: socket path too long: %s", why, sock);
	struct jc_autostart a = {.daemon = c->daemon, .cache_dir = dir, .socket = sock,
				 .idle_exit_s = c->idle_exit_s,
				 .wait_ms = c->fallback == JC_FALLBACK_COMPILE ? AUTOSTART_WAIT_MS
									       : AUTOSTART_WAIT_ERROR_MS};
	int rc = jc__autostart(&a, autostart_answer, c, err, sizeof(err));
	if (rc == 0) {
		say(c, JC_LOG_NOTICE, "jitcache: started jitcached (pid %u) on %s at %s", c->daemon_pid,
		    dir, sock);
		return 0;
	}
	c->autostart_after_ns = jc__now_ns() + AUTOSTART_AGAIN_NS;
	snprintf(c->autostart_err, sizeof(c->autostart_err), "%s", err);
	return jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s; %s", why, err);
}

/* Steps 1-5: 0 when c is connected, else the error (message in c->errmsg). */
static int find_daemon(jc_client *c)
{
	int rc = search(c);
	if (rc != JC_ECONNECT || !c->autostart || c->socket)
		return rc;
	char why[1024];
	snprintf(why, sizeof(why), "%s", c->errmsg);
	if (jc__now_ns() >= c->autostart_after_ns)
		return autostart(c, why);
	/* Not again so soon: the last attempt's reason still holds. */
	return jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s; %s", why, c->autostart_err);
}

/*
 * $JITCACHE_FALLBACK: "error" is JC_FALLBACK_ERROR; unset, empty and
 * "compile" are JC_FALLBACK_COMPILE; anything else is JC_FALLBACK_COMPILE
 * too (the default: the library does not fail the application over a
 * setting), with a warning naming the variable, the value and the accepted
 * ones in warn (else warn is ""). The value is shown printable.
 */
static int fallback_env(char *warn, size_t len)
{
	const char *v = secure_getenv("JITCACHE_FALLBACK");
	char shown[48];
	size_t i = 0;
	*warn = '\0';
	if (!v || !*v || strcmp(v, "compile") == 0)
		return JC_FALLBACK_COMPILE;
	if (strcmp(v, "error") == 0)
		return JC_FALLBACK_ERROR;
	for (; v[i] && i < sizeof(shown) - 4; i++)
		shown[i] = v[i] > 0x20 && v[i] < 0x7f ? v[i] : '?';
	snprintf(shown + i, sizeof(shown) - i, "%s", v[i] ? "..." : "");
	snprintf(warn, len, "jitcache: JITCACHE_FALLBACK=%s is neither \"compile\" nor \"error\" (lower "
		 "case): using compile, the default", shown);
	return JC_FALLBACK_COMPILE;
}

/* $NAME as 0 or 1; def when unset or anything else. */
static int env_bool(const char *name, int def)
{
	const char *v = secure_getenv(name);
	return v && (!strcmp(v, "0") || !strcmp(v, "1")) ? v[0] == '1' : def;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Fills c's settings from o (may be NULL) and the environment. */
static int resolve_options(jc_client *c, const jc_options *o)
{
	static const jc_options none = {.autostart = -1, .retries = -1};
	const char *v;
	char cwd[4096];
	if (!o)
		o = &none;
	c->socket = dup_or_null(o->socket);
	if (o->cache_dir && o->cache_dir[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)))
			return jc__fail(connect_errmsg, sizeof(connect_errmsg), JC_EINVAL,
					"cannot resolve cache directory %s: %s", o->cache_dir, strerror(errno));
		if (asprintf(&c->cache_dir, "%s/%s", cwd, o->cache_dir) < 0)
			c->cache_dir = NULL;
	} else {
		c->cache_dir = dup_or_null(o->cache_dir);
	}
	if (o->system_socket_set)
		v = o->system_socket;
	else if (!(v = secure_getenv("JITCACHE_SYSTEM_SOCKET")))
		v = JC_SYSTEM_SOCKET;
	c->system_socket = v && *v ? strdup(v) : NULL;
	c->autostart = o->autostart >= 0 ? o->autostart : env_bool("JITCACHE_AUTOSTART", 1);
	c->send_trees = env_bool("JITCACHE_SEND_HEADERS", 0);
	c->fallback = o->fallback ? o->fallback : fallback_env(c->fallback_warn, sizeof(c->fallback_warn));
	c->retries = o->retries >= 0 ? o->retries : RETRIES_DEFAULT;
	v = secure_getenv("JITCACHE_AUTOSTART_IDLE_EXIT");
	c->idle_exit_s = o->idle_exit_s ? o->idle_exit_s : v && atoi(v) > 0 ? atoi(v) : IDLE_EXIT_DEFAULT;
	c->daemon = dup_or_null(o->daemon);
	c->nvrtc = dup_or_null(o->nvrtc ? o->nvrtc : secure_getenv("JITCACHE_REAL_NVRTC"));
	c->log = o->log;
	c->log_ctx = o->log_ctx;
	if (c->fallback_warn[0])
		say(c, JC_LOG_WARNING, "%s", c->fallback_warn);
	if ((o->socket && !c->socket) || (o->cache_dir && !c->cache_dir) || (o->daemon && !c->daemon))
		return jc__fail(connect_errmsg, sizeof(connect_errmsg), JC_ENOMEM, "out of memory");
	if (c->cache_dir) {
		struct stat st;
		/* A directory not there yet has no daemon; auto-start makes it. */
		if (stat(c->cache_dir, &st) == 0) {
			c->dir_dev = (uint64_t)st.st_dev;
			c->dir_ino = (uint64_t)st.st_ino;
		}
	}
	return 0;
}

int jc__client_new(const jc_options *o, jc_client **out)
{
	*out = NULL;
	pthread_once(&atfork_once, install_atfork);
	jc_client *c = calloc(1, sizeof(*c));
	if (!c)
		return jc__fail(connect_errmsg, sizeof(connect_errmsg), JC_ENOMEM, "out of memory");
	c->fd = -1;
	c->spin_ns = spin_setting();
	c->timeout_ms = -1;
	int rc = resolve_options(c, o);
	if (rc != 0) {
		jc_client_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

int jc__client_search(jc_client *c)
{
	int rc = search(c);
	if (rc != 0)
		snprintf(c->why_none, sizeof(c->why_none), "%s", c->errmsg);
	return rc;
}

JC_API int jc_client_open(const jc_options *o, jc_client **out)
{
	jc_client *c;
	int rc = jc__client_new(o, &c);
	*out = NULL;
	if (rc != 0)
		return rc;
	if ((rc = find_daemon(c)) != 0 && rc != JC_ENOMEM && c->fallback == JC_FALLBACK_COMPILE) {
		snprintf(c->why_none, sizeof(c->why_none), "%s", c->errmsg);
		rc = 0; /* jc_compile compiles in-process */
	}
	if (rc != 0) {
		if (c->errmsg[0])
			snprintf(connect_errmsg, sizeof(connect_errmsg), "%s", c->errmsg);
		jc_client_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* The source of an environment-or-default value. */
static const char *env_src(const char *name, int given)
{
	const char *v = secure_getenv(name);
	return given ? "option" : v ? name : "default";
}

void jc__client_config(const jc_options *o, jc_client *c, jc__config_fn emit, void *ctx)
{
	char buf[4200], dir[4096];
	const char *v, *xdg = secure_getenv("XDG_RUNTIME_DIR");
	emit("socket", c->socket ? c->socket : "(none: search)", c->socket ? "--socket" : "default", ctx);
	if (c->cache_dir)
		emit("cache_dir", c->cache_dir, "--cache-dir", ctx);
	else if (jc__default_cache_dir(dir, sizeof(dir)) == 0)
		emit("cache_dir", dir, secure_getenv("JITCACHE_DIR") && *secure_getenv("JITCACHE_DIR") ? "JITCACHE_DIR"
			 : secure_getenv("XDG_CACHE_HOME") && *secure_getenv("XDG_CACHE_HOME") ? "XDG_CACHE_HOME" : "HOME", ctx);
	v = secure_getenv("JITCACHE_SOCKET");
	emit("search.env_socket", v && *v ? v : "(unset)", "JITCACHE_SOCKET", ctx);
	snprintf(buf, sizeof(buf), "%s%s", xdg && *xdg ? xdg : "(unset XDG_RUNTIME_DIR)",
		 xdg && *xdg ? "/jitcached.sock" : "");
	emit("search.user_socket", buf, "XDG_RUNTIME_DIR", ctx);
	emit("search.system_socket", c->system_socket ? c->system_socket : "(skipped)",
	     env_src("JITCACHE_SYSTEM_SOCKET", o && o->system_socket_set), ctx);
	emit("autostart", c->autostart ? "1" : "0", env_src("JITCACHE_AUTOSTART", o && o->autostart >= 0), ctx);
	v = secure_getenv("JITCACHED");
	emit("autostart.daemon", c->daemon ? c->daemon : v && *v ? v : JC_SBINDIR "/jitcached, else PATH",
	     c->daemon ? "option" : v && *v ? "JITCACHED" : "default", ctx);
	snprintf(buf, sizeof(buf), "%d s", c->idle_exit_s);
	emit("autostart.idle_exit", buf, env_src("JITCACHE_AUTOSTART_IDLE_EXIT", o && o->idle_exit_s), ctx);
	snprintf(buf, sizeof(buf), "%s%s%s", c->fallback == JC_FALLBACK_COMPILE ? "compile" : "error",
		 c->fallback_warn[0] ? " -- " : "", c->fallback_warn);
	emit("fallback", buf, env_src("JITCACHE_FALLBACK", o && o->fallback), ctx);
	emit("fallback.nvrtc", c->nvrtc ? c->nvrtc : "libnvrtc.so (the toolkit's soname), search path, then "
	     JC_CUDA_LIBDIR, c->nvrtc ? env_src("JITCACHE_REAL_NVRTC", o && o->nvrtc) : "default", ctx);
	snprintf(buf, sizeof(buf), "%d", c->retries);
	emit("retries", buf, o && o->retries >= 0 ? "option" : "default", ctx);
	snprintf(buf, sizeof(buf), "%llu us", (unsigned long long)(c->spin_ns / 1000));
	emit("spin", buf, env_src("JITCACHE_CLIENT_SPIN_US", 0), ctx);
	if (c->fd >= 0) {
		snprintf(buf, sizeof(buf), "%s (pid %u, serving %s)", c->sock, c->daemon_pid,
			 c->daemon_dir ? c->daemon_dir : "?");
		emit("daemon", buf, "answered", ctx);
	} else {
		emit("daemon", c->why_none[0] ? c->why_none : c->errmsg, "none answers", ctx);
	}
}

JC_API int jc_client_connect(const char *socket_path, jc_client **out)
{
	if (!socket_path)
		return jc_client_open(NULL, out);
	jc_options o = {.socket = (char *)socket_path, .autostart = 0, .fallback = JC_FALLBACK_ERROR,
			.retries = -1};
	return jc_client_open(&o, out);
}

JC_API int jc_client_set_timeout(jc_client *c, int timeout_ms)
{
	if (timeout_ms < -1)
		return JC_EINVAL;
	c->timeout_ms = timeout_ms;
	return 0;
}

JC_API void jc_client_close(jc_client *c)
{
	if (!c)
		return;
	drop_connection(c);
	jc__buf_free(&c->in);
	jc__buf_free(&c->out);
	free(c->socket);
	free(c->cache_dir);
	free(c->system_socket);
	free(c->daemon);
	free(c->nvrtc);
	free(c->nvrtc_id);
	jc__tree_cache_free(c->trees);
	free(c);
}

/* --- options ------------------------------------------------------------------------ */

JC_API int jc_options_new(jc_options **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return JC_ENOMEM;
	(*out)->autostart = -1;
	(*out)->retries = -1;
	return 0;
}

JC_API void jc_options_free(jc_options *o)
{
	if (!o)
		return;
	free(o->socket);
	free(o->cache_dir);
	free(o->system_socket);
	free(o->daemon);
	free(o->nvrtc);
	free(o);
}

/* Replaces *dst with a copy of s (NULL: unset). */
static int set_opt_str(char **dst, const char *s)
{
	char *copy = s ? strdup(s) : NULL;
	if (s && !copy)
		return JC_ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

JC_API int jc_options_set_socket(jc_options *o, const char *path)
{
	return path && !*path ? JC_EINVAL : set_opt_str(&o->socket, path);
}

JC_API int jc_options_set_cache_dir(jc_options *o, const char *dir)
{
	return dir && !*dir ? JC_EINVAL : set_opt_str(&o->cache_dir, dir);
}

JC_API int jc_options_set_system_socket(jc_options *o, const char *path)
{
	int rc = set_opt_str(&o->system_socket, path && *path ? path : NULL);
	o->system_socket_set = rc == 0 && path != NULL;
	return rc;
}

JC_API int jc_options_set_autostart(jc_options *o, int on)
{
	if (on < -1 || on > 1)
		return JC_EINVAL;
	o->autostart = on;
	return 0;
}

JC_API int jc_options_set_daemon(jc_options *o, const char *path)
{
	return path && !*path ? JC_EINVAL : set_opt_str(&o->daemon, path);
}

JC_API int jc_options_set_idle_exit(jc_options *o, int seconds)
{
	if (seconds < 0)
		return JC_EINVAL;
	o->idle_exit_s = seconds;
	return 0;
}

JC_API int jc_options_set_fallback(jc_options *o, jc_fallback f)
{
	if ((int)f != 0 && f != JC_FALLBACK_COMPILE && f != JC_FALLBACK_ERROR)
		return JC_EINVAL;
	o->fallback = (int)f;
	return 0;
}

JC_API int jc_options_set_nvrtc(jc_options *o, const char *path)
{
	return path && !*path ? JC_EINVAL : set_opt_str(&o->nvrtc, path);
}

JC_API int jc_options_set_retries(jc_options *o, int tries)
{
	if (tries < -1 || tries > 20)
		return JC_EINVAL;
	o->retries = tries;
	return 0;
}

JC_API int jc_options_set_log(jc_options *o, jc_log_cb cb, void *ctx)
{
	o->log = cb;
	o->log_ctx = ctx;
	return 0;
}

/* --- requests to the daemon ---------------------------------------------------------- */

/*
 * Sends the frame in c->out and reads the answer; ERROR frames become codes.
 * A failure of the transport (the write, or the connection closed before an
 * answer) sets c->broken and drops the connection: the request may be sent
 * again on a new one. A timeout or a garbled answer drops it too.
 */
static int roundtrip(jc_client *c, uint16_t want, uint16_t *type, int *fd)
{
	uint64_t t0 = jc__now_ns();
	c->broken = 0;
	int rc = jc__io_write_all(c->fd, c->out.data, c->out.len);
	if (rc != 0) {
		c->broken = 1;
		jc__fail(c->errmsg, sizeof(c->errmsg), JC_EIO, "send to jitcached at %s failed: %s",
			 c->sock, strerror(errno));
		drop_connection(c);
		return JC_EIO;
	}
	spin_for_answer(c, t0);
	rc = jc__io_read_answer(c->fd, &c->in, type, fd, c->timeout_ms);
	c->fast = jc__now_ns() - t0 < c->spin_ns;
	if (rc != 0) {
		c->broken = rc == JC_EIO;
		if (rc == JC_ETIMEOUT)
			jc__fail(c->errmsg, sizeof(c->errmsg), rc, "no answer from jitcached within %d ms",
				 c->timeout_ms);
		else
			jc__fail(c->errmsg, sizeof(c->errmsg), rc, "no answer from jitcached at %s: %s", c->sock,
				 rc == JC_EIO ? strerror(errno) : jc_strerror(rc));
		drop_connection(c);
		return rc;
	}
	if (*type == JC_MSG_ERROR) {
		char *msg = NULL;
		int code = JC_EPROTO;
		if (jc__decode_error(c->in.data, c->in.len, &code, &msg) != 0)
			code = JC_EPROTO;
		jc__fail(c->errmsg, sizeof(c->errmsg), code, "%s", msg ? msg : jc_strerror(code));
		free(msg);
		/* The daemon closes the connection after an ERROR. */
		drop_connection(c);
		c->broken = code == JC_EBUSY; /* shutting down, or too many clients: try again */
		return code < 0 ? code : JC_EPROTO;
	}
	if (*type != want) {
		drop_connection(c);
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_EPROTO, "unexpected answer type %u", *type);
	}
	return 0;
}
/* What makes a served descriptor's bytes immutable (memfd seals). */
#define SEALED (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
/* Below this size the hash costs less than asking for the seals. */
#define SEALED_MIN (16u << 10)

/*
 * Whether a served descriptor is of a memfd the daemon sealed against every
 * change (daemon/memcache.c: its copy of a hot object, whose bytes it
 * checked against their hash after sealing) holding res->size bytes: then
 * no byte of it can have changed since that check, and the bytes read from
 * it need no other. (Mapping it instead of reading it costs more here: a
 * page fault per page, and the unmap.)
 */
static int sealed(const struct jc_res *res)
{
	struct stat st;
	int seals = res->size < SEALED_MIN ? -1 : fcntl(res->fd, F_GET_SEALS);
	return seals >= 0 && (seals & SEALED) == SEALED && fstat(res->fd, &st) == 0 &&
	       (uint64_t)st.st_size == res->size;
}

/*
 * Reads the served object's res->size bytes from its descriptor into
 * res->data (the bytes the hash check then covers: the daemon checked the
 * file's size when it opened it). A shorter file fails; a descriptor that
 * cannot be read at an offset (not a regular file) fails pread.
 */
static int read_object(struct jc_res *res)
{
	size_t want = res->size, off = 0;
	res->data = malloc(want ? want : 1);
	if (!res->data)
		return JC_ENOMEM;
	while (off < want) {
		ssize_t n = pread(res->fd, res->data + off, want - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return JC_ECORRUPT;
		if (n == 0)
			break;
		off += (size_t)n;
	}
	if (off != res->size)
		return JC_ECORRUPT;
	close(res->fd);
	res->fd = -1;
	return 0;
}

static int check_hash(const struct jc_res *res)
{
	XXH128_canonical_t canon;
	XXH128_canonicalFromHash(&canon, XXH3_128bits(res->data, res->size));
	return memcmp(canon.digest, res->object, 16) == 0 ? 0 : JC_ECORRUPT;
}

/* One COMPILE round trip. When the served bytes fail their check, the
 * object's hash is copied to bad_object so the caller can reject it. */
static int do_compile(jc_client *c, const struct jc_req *req, jc_result **out,
		      uint8_t bad_object[16])
{
	uint64_t t0 = jc__now_ns();
	*out = NULL;
	jc_result *r = calloc(1, sizeof(*r));
	if (!r)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ENOMEM, "out of memory");
	jc__res_init(&r->res);
	jc__buf_reset(&c->out);
	uint16_t type;
	int fd = -1;
	/* The application named its NVRTC (the shim's real library): the
	 * daemon serves it only with that very build (req.h, nvrtc_id). */
	char id[80];
	if (c->nvrtc && !c->nvrtc_id && jc__file_identity(c->nvrtc, id, sizeof(id), NULL, 0) == 0 &&
	    strcmp(id, "none") != 0)
		c->nvrtc_id = strdup(id);
	struct jc_req sent = *req; /* shallow: req keeps ownership */
	sent.nvrtc_id = c->nvrtc_id;
	/* A daemon older than version 4 would refuse the field: then a request
	 * under the program's own name, as any. */
	if (c->proto < 4)
		sent.name_free = 0;
	int rc = jc__encode_req(&c->out, &sent);
	if (rc != 0)
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "request too large or out of memory");
	else
		rc = roundtrip(c, JC_MSG_RESULT, &type, &fd);
	if (rc == 0 && (rc = jc__decode_res(c->in.data, c->in.len, &r->res)) != 0)
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "malformed RESULT from jitcached");
	if (rc != 0 && fd >= 0)
		close(fd);
	else
		r->res.fd = fd;
	if (rc == 0 && r->res.status == 0) {
		int checked = r->res.fd >= 0 && !r->res.data && sealed(&r->res);
		if (r->res.fd >= 0 && !r->res.data)
			rc = read_object(&r->res);
		else if (!r->res.data)
			rc = JC_EPROTO;
		rc = rc ?: checked ? 0 : check_hash(&r->res);
		if (rc) {
			memcpy(bad_object, r->res.object, 16);
			jc__fail(c->errmsg, sizeof(c->errmsg), rc, "artifact failed its size/hash check");
		}
	} else if (rc == 0 && r->res.status == JC_ECOMPILE) {
		/* The result is kept (its log says why); the message says what failed. */
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s", r->res.message ? r->res.message : jc_strerror(JC_ECOMPILE));
	} else if (rc == 0) {
		rc = jc__fail(c->errmsg, sizeof(c->errmsg), r->res.status, "%s",
			    r->res.message ? r->res.message : jc_strerror(r->res.status));
	}
	if (rc != 0) {
		jc_result_free(r);
		return rc;
	}
	jc__hex16(r->res.key, r->key);
	r->total_ns = jc__now_ns() - t0;
	*out = r;
	return r->res.status;
}

/*
 * do_compile() for a daemon that must not open our include directories: the
 * files' hashes first (a hit re-stats the tree, reads nothing), their bytes
 * only when the daemon has no entry (JC_ENOTFOUND).
 */
static int compile_tree(jc_client *c, const struct jc_req *req, jc_result **out,
			uint8_t bad_object[16])
{
	struct jc_req view;
	int rc = 0;
	uint64_t walk_ns = 0;
	for (int bytes = 0; bytes < 2; bytes++) {
		uint64_t ns;
		rc = jc__tree_build(&c->trees, c->daemon_toolkit, req, bytes, &view, &ns, c->errmsg, sizeof(c->errmsg));
		if (rc != 0)
			return rc;
		walk_ns += ns;
		rc = do_compile(c, &view, out, bad_object);
		jc__req_tree_clear(&view);
		if (rc != JC_ENOTFOUND || c->broken)
			break;
	}
	if (*out)
		(*out)->includes_ns = walk_ns;
	return rc;
}

/* --- in-process fallback, and the compile loop --------------------------------------- */

/* Step 6: req compiled here; same result shape as the daemon's. */
static int compile_here(jc_client *c, const struct jc_req *req, jc_result **out)
{
	char desc[4400], err[4400];
	uint64_t t0 = jc__now_ns();
	*out = NULL;
	int rc = jc__fallback_load(c->nvrtc, desc, sizeof(desc), err, sizeof(err));
	if (rc != 0)
		return jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s; and %s", c->why_none, err);
	if (!c->warned) {
		c->warned = 1;
		say(c, JC_LOG_WARNING, "jitcache: %s; compiling in this process with %s: results are "
		    "not cached", c->why_none, desc);
	}
	jc_result *r = calloc(1, sizeof(*r));
	if (!r)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ENOMEM, "out of memory");
	jc__res_init(&r->res);
	rc = jc__fallback_run(req, &r->res);
	if (rc != 0 && rc != JC_ECOMPILE) {
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s", r->res.message ? r->res.message : jc_strerror(rc));
		jc_result_free(r);
		return rc;
	}
	if (rc == JC_ECOMPILE)
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s", r->res.message ? r->res.message : jc_strerror(rc));
	r->key[0] = '\0';
	r->total_ns = jc__now_ns() - t0;
	*out = r;
	return rc;
}

/*
 * req through a daemon, mending a broken connection and resending up to
 * c->retries times (jitcache.h, "Reconnect"), else in-process when allowed.
 * A corrupt artifact is rejected once (the daemon quarantines it and
 * compiles afresh).
 */
static int run(jc_client *c, const struct jc_req *req, jc_result **out)
{
	struct jc_req rejecting;
	uint8_t bad[16] = {0};
	int rc = 0, corrupt_seen = 0, mending = 0, attempt = 0;
	unsigned wait = RETRY_FIRST_WAIT_MS;
	char first[1024] = "";
	*out = NULL;
	if (c->fd >= 0 && c->forks != fork_count)
		drop_connection(c); /* the parent's (see fork_count) */
	for (;;) {
		if (c->fd < 0 && (rc = find_daemon(c)) != 0) {
			/* None now: the reason stays for the fallback's warning. A
			 * handle without a daemon does not wait for one; one whose
			 * daemon went away in this call does, a little. */
			snprintf(c->why_none, sizeof(c->why_none), "%s", c->errmsg);
			if (!mending || rc == JC_ENOMEM || attempt >= c->retries)
				break;
			jc__sleep_ms(wait);
			wait *= 2;
			attempt++;
			continue;
		}
		if (mending)
			say(c, JC_LOG_INFO, "jitcache: resending to jitcached at %s (try %d)", c->sock,
			    attempt + 1);
		rc = req->include_dirs.n && (c->daemon_other_uid || c->send_trees)
		     ? compile_tree(c, req, out, bad) : do_compile(c, req, out, bad);
		if (rc == JC_ECORRUPT && !corrupt_seen) {
			corrupt_seen = 1;
			rejecting = *req; /* shallow: req keeps ownership */
			memcpy(rejecting.reject_object, bad, 16);
			rejecting.reject_reason = JC_REJECT_CORRUPT;
			rejecting.reject_message = NULL;
			req = &rejecting;
			continue;
		}
		if (!c->broken && rc != JC_EBUSY)
			return rc;
		drop_connection(c);
		if (!mending)
			snprintf(first, sizeof(first), "%s", c->errmsg);
		snprintf(c->why_none, sizeof(c->why_none), "%s", c->errmsg);
		mending = 1;
		if (attempt >= c->retries)
			break;
		if (rc == JC_EBUSY) { /* a stopping or overloaded daemon: give it time */
			jc__sleep_ms(wait);
			wait *= 2;
		}
		attempt++;
	}
	if (mending && strcmp(first, c->errmsg) != 0) {
		/* What went wrong first says most: "shutting down", "reset". */
		snprintf(c->why_none, sizeof(c->why_none), "%.500s; then, %d tries later: %.400s", first,
			 attempt + 1, c->errmsg);
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", c->why_none);
	}
	if (c->fallback != JC_FALLBACK_COMPILE || rc == JC_ENOMEM)
		return rc;
	return compile_here(c, req, out);
}

/* Appends "-I<absolute dir>" to opts and the absolute dir to dirs (a
 * relative dir is taken against the working directory, as NVRTC does). */
static int push_dir(struct jc_strv *opts, struct jc_strv *dirs, const char *dir, char *err,
		    size_t errlen)
{
	char cwd[PATH_MAX], *abs = NULL, *opt = NULL;
	if (dir[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)))
			return jc__fail(err, errlen, JC_EINVAL, "cannot resolve include directory %s: %s",
					dir, strerror(errno));
		while (dir[0] == '.' && dir[1] == '/')
			dir += 2;
		if (asprintf(&abs, "%s%s%s", cwd, strcmp(dir, ".") && *dir ? "/" : "",
			     strcmp(dir, ".") ? dir : "") < 0)
			abs = NULL;
	} else {
		abs = strdup(dir);
	}
	if (abs) {
		size_t n = strlen(abs);
		while (n > 1 && abs[n - 1] == '/')
			abs[--n] = '\0';
	}
	int rc = abs && asprintf(&opt, "-I%s", abs) >= 0 ? 0 : JC_ENOMEM;
	rc = rc ?: jc__strv_push(opts, opt);
	rc = rc ?: jc__strv_push(dirs, abs);
	free(abs);
	free(opt);
	return rc == JC_ENOMEM ? jc__fail(err, errlen, rc, "out of memory") : rc;
}

static void include_view_clear(struct jc_req *view, const struct jc_req *in)
{
	if (view->options.v == in->options.v)
		return;
	struct jc_req owned = {.options = view->options, .include_dirs = view->include_dirs};
	jc__req_clear(&owned);
}

/*
 * The request as it goes out: every include directory option as one
 * "-I<absolute DIR>" with DIR in include_dirs too (the daemon checks both
 * agree), and jc_request_add_include_dir's directories not named by an
 * option appended. *out is a shallow copy of in unless in has include
 * directories; then out->options and out->include_dirs are new arrays
 * (free with include_view_clear). 0, JC_EINVAL (an option without its
 * directory, an unresolvable relative one) or JC_ENOMEM.
 */
static int include_view(const struct jc_req *in, struct jc_req *out, char *err, size_t errlen)
{
	const struct jc_strv *o = &in->options;
	const char *val;
	size_t used;
	int dir, any = in->include_dirs.n > 0;
	*out = *in;
	for (size_t i = 0; i < o->n && !any; i++)
		any = jc__inc_option(o, i, &dir, &val, &used) && dir;
	if (!any)
		return 0;
	struct jc_strv opts = {0}, dirs = {0};
	int rc = 0;
	for (size_t i = 0; i < o->n && rc == 0; i++) {
		if (!jc__inc_option(o, i, &dir, &val, &used) || !dir) {
			rc = jc__strv_push(&opts, o->v[i]);
			continue;
		}
		if (!val || !*val)
			rc = jc__fail(err, errlen, JC_EINVAL, "option \"%s\" needs a directory", o->v[i]);
		else
			rc = push_dir(&opts, &dirs, val, err, errlen);
		i += used - 1;
	}
	size_t from_options = dirs.n;
	for (size_t i = 0; i < in->include_dirs.n && rc == 0; i++) {
		struct jc_strv probe_o = {0}, probe_d = {0};
		rc = push_dir(&probe_o, &probe_d, in->include_dirs.v[i], err, errlen);
		int named = 0;
		for (size_t k = 0; rc == 0 && k < from_options && !named; k++)
			named = strcmp(dirs.v[k], probe_d.v[0]) == 0;
		if (rc == 0 && !named)
			rc = jc__strv_push(&opts, probe_o.v[0]) ?: jc__strv_push(&dirs, probe_d.v[0]);
		struct jc_req probe = {.options = probe_o, .include_dirs = probe_d};
		jc__req_clear(&probe);
	}
	if (rc == JC_ENOMEM)
		jc__fail(err, errlen, rc, "out of memory");
	out->options = opts;
	out->include_dirs = dirs;
	if (rc != 0) {
		include_view_clear(out, in);
		*out = *in;
	}
	return rc;
}

/* run() on the request as it goes out. */
static int run_request(jc_client *c, const struct jc_req *req, jc_result **out)
{
	struct jc_req view;
	*out = NULL;
	int rc = include_view(req, &view, c->errmsg, sizeof(c->errmsg));
	if (rc != 0)
		return rc;
	rc = run(c, &view, out);
	include_view_clear(&view, req);
	return rc;
}

JC_API int jc_compile(jc_client *c, const jc_request *r, jc_result **out)
{
	return run_request(c, &r->req, out);
}

JC_API int jc_report_load_failure(jc_client *c, const jc_request *r, const jc_result *res,
				  const char *reason, jc_result **out)
{
	struct jc_req copy = r->req; /* shallow: r keeps ownership */
	memcpy(copy.reject_object, res->res.object, 16);
	copy.reject_reason = JC_REJECT_LOAD_FAILED;
	copy.reject_message = (char *)reason;
	return run_request(c, &copy, out);
}

int jc__client_admin(jc_client *c, const struct jc_admin_req *req, struct jc_admin_reply *out)
{
	uint16_t type;
	int fd = -1;
	/* Not resent after a broken connection (purge is not idempotent): the
	 * caller decides; a later call reconnects. */
	if (c->fd >= 0 && c->forks != fork_count)
		drop_connection(c); /* the parent's (see fork_count) */
	if (c->fd < 0 && find_daemon(c) != 0)
		return JC_ECONNECT;
	jc__buf_reset(&c->out);
	int rc = jc__encode_admin(&c->out, req);
	if (rc != 0)
		return jc__fail(c->errmsg, sizeof(c->errmsg), rc, "admin request too large");
	rc = roundtrip(c, JC_MSG_ADMIN_REPLY, &type, &fd);
	if (fd >= 0)
		close(fd);
	if (rc == 0 && (rc = jc__decode_admin_reply(c->in.data, c->in.len, out)) != 0)
		jc__fail(c->errmsg, sizeof(c->errmsg), rc, "malformed ADMIN_REPLY from jitcached");
	return rc;
}

struct jc_stats {
	struct jc_admin_reply reply; /* one record */
};

JC_API int jc_client_stats(jc_client *c, jc_stats **out)
{
	if (!out)
		return JC_EINVAL;
	*out = NULL;
	if (!c)
		return JC_EINVAL;
	jc_stats *s = calloc(1, sizeof(*s));
	if (!s)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ENOMEM, "out of memory");
	struct jc_admin_req req = {.command = (char *)"stats"};
	int rc = jc__client_admin(c, &req, &s->reply);
	if (rc == 0 && s->reply.status != 0)
		rc = jc__fail(c->errmsg, sizeof(c->errmsg), s->reply.status, "stats: %s",
			      s->reply.message ? s->reply.message : jc_strerror(s->reply.status));
	else if (rc == 0 && s->reply.n_rec != 1)
		rc = jc__fail(c->errmsg, sizeof(c->errmsg), JC_EPROTO,
			      "stats: %zu records from jitcached, expected 1", s->reply.n_rec);
	if (rc != 0) {
		jc_stats_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

JC_API size_t jc_stats_count(const jc_stats *s)
{
	return s ? s->reply.rec[0].n : 0;
}

JC_API int jc_stats_at(const jc_stats *s, size_t i, const char **name, int64_t *num,
		       const char **str)
{
	if (!s || !name || !num || !str || i >= s->reply.rec[0].n)
		return JC_EINVAL;
	const struct jc_kv *kv = &s->reply.rec[0].kv[i];
	*name = kv->name;
	*num = kv->is_int ? kv->i : 0;
	*str = kv->is_int ? NULL : kv->s;
	return 0;
}

JC_API void jc_stats_free(jc_stats *s)
{
	if (!s)
		return;
	jc__admin_reply_clear(&s->reply);
	free(s);
}

/* --- request builder ----------------------------------------------------------- */

JC_API int jc_request_new(jc_request **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return JC_ENOMEM;
	(*out)->req.job = JC_JOB_COMPILE;
	(*out)->req.output = JC_OUTPUT_CUBIN;
	return 0;
}

JC_API void jc_request_free(jc_request *r)
{
	if (!r)
		return;
	jc__req_clear(&r->req);
	free(r);
}

/* Replaces *dst with a copy of s. */
static int set_str(char **dst, const char *s)
{
	if (!s)
		return JC_EINVAL;
	char *copy = strdup(s);
	if (!copy)
		return JC_ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

/* The job follows from what the request holds. */
static void update_job(struct jc_req *q)
{
	if (q->n_link_inputs)
		q->job = q->source ? JC_JOB_COMPILE_LINK : JC_JOB_LINK;
	else
		q->job = JC_JOB_COMPILE;
}

JC_API int jc_request_set_source(jc_request *r, const char *name, const void *data, size_t size)
{
	struct jc_req *q = &r->req;
	if (!name || (!data && size))
		return JC_EINVAL;
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return JC_ENOMEM;
	if (size)
		memcpy(copy, data, size);
	int rc = set_str(&q->source_name, name);
	if (rc) {
		free(copy);
		return rc;
	}
	free(q->source);
	q->source = copy;
	q->source_size = size;
	update_job(q);
	return 0;
}

JC_API int jc_request_add_header(jc_request *r, const char *name, const void *data, size_t size)
{
	if (!name || (!data && size))
		return JC_EINVAL;
	return jc__blob_push(&r->req.headers, &r->req.n_headers, name, data, size, 0);
}

JC_API int jc_request_add_include_dir(jc_request *r, const char *path)
{
	return path && *path ? jc__strv_push(&r->req.include_dirs, path) : JC_EINVAL;
}

JC_API int jc_request_add_option(jc_request *r, const char *option)
{
	return option && *option ? jc__strv_push(&r->req.options, option) : JC_EINVAL;
}

JC_API int jc_request_set_arch(jc_request *r, const char *arch)
{
	if (!arch || !*arch)
		return JC_EINVAL;
	int rc = set_str(&r->req.arch, arch);
	if (rc == 0 && strchr(arch, ','))
		r->req.output = JC_OUTPUT_FATBIN; /* a target list makes a fatbin */
	return rc;
}

JC_API int jc_request_set_output(jc_request *r, jc_output output)
{
	if (output < JC_CUBIN || output > JC_FATBIN)
		return JC_EINVAL;
	r->req.output = (uint32_t)output;
	return 0;
}

JC_API int jc_request_add_name_expression(jc_request *r, const char *expr)
{
	return expr && *expr ? jc__strv_push(&r->req.name_exprs, expr) : JC_EINVAL;
}

JC_API int jc_request_add_link_input(jc_request *r, jc_link_input type, const char *name,
				     const void *data, size_t size)
{
	if (type < JC_LINK_CUBIN || type > JC_LINK_LIBRARY || !name || (!data && size))
		return JC_EINVAL;
	int rc = jc__blob_push(&r->req.link_inputs, &r->req.n_link_inputs, name, data, size,
			       (uint32_t)type);
	update_job(&r->req);
	return rc;
}

JC_API int jc_request_add_link_option(jc_request *r, const char *option)
{
	return option && *option ? jc__strv_push(&r->req.link_options, option) : JC_EINVAL;
}

JC_API int jc_request_set_app_abi(jc_request *r, const char *abi)
{
	return set_str(&r->req.app_abi, abi);
}

int jc__request_set_name_free(jc_request *r)
{
	if (!r->req.source_name)
		return JC_EINVAL;
	r->req.name_free = 1;
	return set_str(&r->req.display_name, r->req.source_name);
}

int jc__request_set_test_fault(jc_request *r, uint32_t fault)
{
	if (fault > JC_FAULT_ALLOC)
		return JC_EINVAL;
	r->req.test_fault = fault;
	return 0;
}

/* --- results --------------------------------------------------------------------- */

JC_API void jc_result_free(jc_result *res)
{
	if (!res)
		return;
	jc__res_clear(&res->res);
	free(res);
}

JC_API const void *jc_result_data(const jc_result *res, size_t *size)
{
	if (size)
		*size = res->res.status == 0 ? res->res.size : 0;
	return res->res.status == 0 ? res->res.data : NULL;
}

JC_API jc_output jc_result_output(const jc_result *res)
{
	return (jc_output)res->res.output;
}

JC_API jc_cache_status jc_result_cache_status(const jc_result *res)
{
	return (jc_cache_status)res->res.cache;
}

JC_API const char *jc_result_log(const jc_result *res)
{
	return res->res.log ? res->res.log : "";
}

JC_API const char *jc_result_lowered_name(const jc_result *res, const char *expr)
{
	for (size_t i = 0; i < res->res.n_lowered; i++)
		if (strcmp(res->res.lowered[i].expr, expr) == 0)
			return res->res.lowered[i].lowered;
	return NULL;
}

JC_API size_t jc_result_lowered_count(const jc_result *res)
{
	return res->res.n_lowered;
}

JC_API int jc_result_lowered_at(const jc_result *res, size_t i, const char **expr,
				const char **lowered)
{
	if (i >= res->res.n_lowered)
		return JC_EINVAL;
	*expr = res->res.lowered[i].expr;
	*lowered = res->res.lowered[i].lowered;
	return 0;
}

JC_API const char *jc_result_key(const jc_result *res)
{
	return res->key;
}

JC_API uint64_t jc_result_time_ns(const jc_result *res, jc_timing which)
{
	switch (which) {
	case JC_TIME_TOTAL:
		return res->total_ns;
	case JC_TIME_SERVER:
		return res->res.server_ns;
	case JC_TIME_COMPILE:
		return res->res.compile_ns;
	case JC_TIME_INCLUDES:
		return res->includes_ns;
	}
	return 0;
}
