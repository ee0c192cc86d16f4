/* SPDX-License-Identifier: MIT */
/*
 * The client handle's connection (handle.h): steps 1-5 of jitcache.h (the
 * socket search, the cache directory's socket pointer, auto-start), the
 * handshake in this library's protocol version or an older one, the check
 * of who runs the daemon, a connection left behind by fork(), and the
 * polling for a fast answer.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/handle.h"
#include "common/util.h"
#include "config.h"
#include "proto/io.h"

/* A daemon that accepts but does not answer the handshake (stopped, wedged). */
#define CONNECT_TIMEOUT_MS 10000
#define AUTOSTART_AGAIN_NS (30ull * 1000000000u) /* after a failed auto-start */
/* An auto-start attempt at most: before the in-process fallback, and with
 * fallback "error" (nothing else to wait for). */
#define AUTOSTART_WAIT_MS	1000
#define AUTOSTART_WAIT_ERROR_MS 30000

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
void jc__conn_spin(jc_client *c, uint64_t t0)
{
	char b;
	if (!c->fast)
		return;
	do {
		ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			return; /* data, EOF or an error: the read reports it */
		sched_yield();	/* the daemon may be waiting for this CPU */
	} while (jc__now_ns() - t0 < c->spin_ns);
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

void jc__conn_drop(jc_client *c)
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

void jc__conn_init(jc_client *c)
{
	pthread_once(&atfork_once, install_atfork);
	c->fd = -1;
	c->spin_ns = spin_setting();
}

void jc__conn_leave_parent(jc_client *c)
{
	if (c->fd >= 0 && c->forks != fork_count)
		jc__conn_drop(c);
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
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_EDENIED,
				"cannot tell who runs the daemon at %s: %s", path, strerror(errno));
	*other_uid = cred.uid != me;
	if (cred.uid == me || cred.uid == 0)
		return 0; /* (the common case: no formatting on a fresh process's path) */
	char dir[4200];
	struct stat st;
	const char *slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
		 slash ? path : ".");
	if (!own && stat(dir, &st) == 0 && st.st_uid == cred.uid)
		return 0;
	if (own)
		return jc__fail(
		    c->errmsg, sizeof(c->errmsg), JC_EDENIED,
		    "not using the daemon at %s: it runs as uid %u, which is neither this "
		    "user nor root, and that socket is this user's own (another user's "
		    "socket there?)",
		    path, (unsigned)cred.uid);
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
	jc__conn_drop(c);
	if (strlen(path) >= sizeof(sa.sun_path))
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_EINVAL, "socket path too long: %s",
				path);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		jc__fail(c->errmsg, sizeof(c->errmsg), JC_ECONNECT,
			 "cannot connect to jitcached at %s: %s", path, strerror(errno));
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
	struct jc_hello h = {.version = version,
			     .name = "libjitcache-client " JC_VERSION_STRING,
			     .dir_dev = c->dir_dev,
			     .dir_ino = c->dir_ino};
	jc__buf_reset(&c->out);
	int rc = jc__encode_hello_ex(&c->out, JC_MSG_HELLO, &h);
	int wrc = rc ?: jc__io_write_all(fd, c->out.data, c->out.len);
	/* A daemon that refuses a connection says why and closes it, maybe
	 * before our HELLO arrives: read its answer even if the write failed.
	 * A daemon that answers does so within microseconds: poll first, as
	 * for hits (jc__conn_spin). */
	c->fd = fd;
	c->fast = 1;
	jc__conn_spin(c, jc__now_ns());
	c->fd = -1;
	rc = rc ?: jc__io_read_answer(fd, &c->in, &type, NULL, CONNECT_TIMEOUT_MS);
	if (rc == 0 && type == JC_MSG_ERROR) {
		char *msg = NULL;
		int code = JC_EPROTO;
		jc__decode_error(c->in.data, c->in.len, &code, &msg);
		jc__fail(c->errmsg, sizeof(c->errmsg), code,
			 "jitcached at %s refused the handshake: %.600s%s%.300s", path,
			 msg ? msg : "",
			 c->dir_ino && code == JC_EINVAL ? "; this client means " : "",
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
		jc__fail(c->errmsg, sizeof(c->errmsg), rc,
			 "handshake with jitcached at %s failed: %s", path,
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
		return jc__fail(err, errlen, JC_ECONNECT, "no daemon serves %s (no %s: %s)", dir,
				path, strerror(errno));
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (st.st_uid == geteuid() || st.st_uid == 0))
		n = read(fd, out, len - 1);
	close(fd);
	if (n <= 0)
		return jc__fail(err, errlen, JC_ECONNECT,
				"no daemon serves %s (%s is not a socket name its daemon wrote)",
				dir, path);
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
		return jc__dir_socket(c->cache_dir, path, sizeof(path), c->errmsg,
				      sizeof(c->errmsg))
			   ?: hello(c, path, 0);
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
	if (n == (c->system_socket ? 1u : 0u) &&
	    jc__default_socket_path(NULL, dflt, sizeof(dflt)) == 0) {
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
	return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ECONNECT,
			"no jitcached answers (tried %s)",
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
				"%s; no auto-start: no cache directory (set JITCACHE_DIR or HOME)",
				why);
	}
	if (strlen(sock) >= SUN_PATH_MAX)
		return jc__fail(c->errmsg, sizeof(c->errmsg), JC_ECONNECT,
				"%s; no auto-start: socket path too long: %s", why, sock);
	struct jc_autostart a = {.daemon = c->daemon,
				 .cache_dir = dir,
				 .socket = sock,
				 .idle_exit_s = c->idle_exit_s,
				 .wait_ms = c->fallback == JC_FALLBACK_COMPILE
						? AUTOSTART_WAIT_MS
						: AUTOSTART_WAIT_ERROR_MS};
	int rc = jc__autostart(&a, autostart_answer, c, err, sizeof(err));
	if (rc == 0) {
		jc__client_say(c, JC_LOG_NOTICE, "jitcache: started jitcached (pid %u) on %s at %s",
			       c->daemon_pid, dir, sock);
		return 0;
	}
	c->autostart_after_ns = jc__now_ns() + AUTOSTART_AGAIN_NS;
	snprintf(c->autostart_err, sizeof(c->autostart_err), "%s", err);
	return jc__fail(c->errmsg, sizeof(c->errmsg), rc, "%s; %s", why, err);
}

/* Steps 1-5: 0 when c is connected, else the error (message in c->errmsg). */
int jc__conn_find(jc_client *c)
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

int jc__client_search(jc_client *c)
{
	int rc = search(c);
	if (rc != 0)
		snprintf(c->why_none, sizeof(c->why_none), "%s", c->errmsg);
	return rc;
}
