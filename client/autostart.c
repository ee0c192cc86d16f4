/* SPDX-License-Identifier: MIT */
/*
 * Auto-start of a per-user jitcached (jitcache.h, step 5), in the manner of
 * sccache: one starter at a time under a lock file beside the socket, taken
 * only where the socket's directory and the lock file are this user's (never
 * waiting on another user's lock); the daemon is detached (double fork, its
 * own session, no descriptor of the application but the lock, which it holds
 * while it lives, so that nobody starts a second one while it starts), exits
 * by itself when idle (--idle-exit), and logs to DIR/jitcached.log. The
 * whole attempt is bounded by the caller (a->wait_ms).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "common/util.h"
#include "config.h"

/* The descriptor number of the starter lock in the daemon started. */
#define LOCK_FD 3

/* mkdir -p with mode 0700 for what it creates. */
static int mkdirs(const char *dir)
{
	char p[4096];
	if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
		return -1;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(p, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

/* The jitcached to start: given, $JITCACHED, SBINDIR/jitcached, $PATH. */
static int find_daemon(const char *given, char *out, size_t len)
{
	const char *env = secure_getenv("JITCACHED");
	if (given && *given)
		return snprintf(out, len, "%s", given) < (int)len ? 0 : -1;
	if (env && *env)
		return snprintf(out, len, "%s", env) < (int)len ? 0 : -1;
	snprintf(out, len, "%s/jitcached", JC_SBINDIR);
	if (access(out, X_OK) == 0)
		return 0;
	const char *path = secure_getenv("PATH");
	while (path && *path) {
		size_t n = strcspn(path, ":");
		if (n && snprintf(out, len, "%.*s/jitcached", (int)n, path) < (int)len &&
		    access(out, X_OK) == 0)
			return 0;
		path += n + (path[n] == ':');
	}
	return -1;
}

/* The last line of the daemon's log, for the error message. */
static void log_tail(const char *log, char *out, size_t len)
{
	char buf[2048];
	*out = '\0';
	int fd = open(log, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	off_t from = end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	char *nl = strrchr(buf, '\n');
	snprintf(out, len, "%.500s", nl ? nl + 1 : buf);
}

/* 0 once pid has exited: gone, or a zombie that whoever adopted it has not
 * reaped yet (not ours to reap: it was detached). */
static int alive(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kill(pid, 0) == 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	const char *paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

/*
 * Starts argv[0] detached: its stdin /dev/null, stdout and stderr log_fd,
 * lock_fd as descriptor LOCK_FD (the lock stays held while it runs), no
 * other descriptor, default signal mask, its own session. Returns its pid,
 * or -1 (errno: the fork's or the exec's failure).
 */
static pid_t spawn_detached(char *const argv[], int log_fd, int lock_fd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid_t mid = fork();
	if (mid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (mid == 0) {
		/* Only async-signal-safe calls from here to exec. */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		pid_t pid = fork();
		if (pid != 0) {
			int32_t v = pid;
			(void)!write(p[1], &v, sizeof(v));
			_exit(0);
		}
		/* Out of the way of 0-LOCK_FD first (the application may have
		 * closed its standard descriptors). */
		int lk = fcntl(lock_fd, F_DUPFD_CLOEXEC, LOCK_FD + 1);
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (lk < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(log_fd, 1) < 0 ||
		    dup2(log_fd, 2) < 0 || dup2(lk, LOCK_FD) < 0)
			_exit(127);
		/* The application's descriptors stay with it: all close at exec
		 * (p[1] is O_CLOEXEC too, and needed until then). */
		jc__cloexec_from(LOCK_FD + 1);
		execv(argv[0], argv);
		int32_t e = -errno;
		(void)!write(p[1], &e, sizeof(e));
		_exit(127);
	}
	close(p[1]);
	int32_t pid = -1, e = 0;
	ssize_t n = read(p[0], &pid, sizeof(pid));
	waitpid(mid, NULL, 0);
	if (n == (ssize_t)sizeof(pid) && read(p[0], &e, sizeof(e)) == (ssize_t)sizeof(e) && e < 0) {
		close(p[0]);
		errno = -e;
		return -1;
	}
	close(p[0]);
	if (n != (ssize_t)sizeof(pid) || pid <= 0) {
		errno = ECHILD;
		return -1;
	}
	return pid;
}

/* The directory of path ("." when none), into dir. */
static void dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	snprintf(dir, len, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
		 slash ? path : ".");
}

/*
 * Opens the starter lock beside the socket, only where that directory is
 * this user's and nobody else may write it, and only a regular file of this
 * user (another's lock is never waited on). Read-only: the daemon inherits
 * it and needs no more. The descriptor, or JC_ECONNECT / JC_EIO with a
 * message in err.
 */
static int open_lock(const char *lock_path, char *err, size_t errlen)
{
	char dir[4200];
	struct stat st;
	dir_of(lock_path, dir, sizeof(dir));
	if (stat(dir, &st) != 0)
		return jc__fail(err, errlen, JC_EIO, "auto-start: %s: %s", dir, strerror(errno));
	if (st.st_uid != geteuid() || (st.st_mode & S_IWOTH))
		return jc__fail(
		    err, errlen, JC_ECONNECT,
		    "auto-start: not starting a daemon in %s (owner uid %u, mode %04o): "
		    "the socket's directory must be this user's and writable by no one "
		    "else (set XDG_RUNTIME_DIR or JITCACHE_SOCKET to one)",
		    dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	int lock = open(lock_path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
	if (lock < 0)
		return jc__fail(err, errlen, JC_EIO, "auto-start: cannot open %s: %s", lock_path,
				strerror(errno));
	if (fstat(lock, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(lock);
		return jc__fail(err, errlen, JC_ECONNECT,
				"auto-start: %s is not a file of this user's (owner uid %u): not "
				"waiting on it",
				lock_path, (unsigned)st.st_uid);
	}
	return lock;
}

int jc__autostart(const struct jc_autostart *a, int (*answer)(void *ctx), void *ctx, char *err,
		  size_t errlen)
{
	char lock_path[4200], log_path[4200], exe[4096], idle[32], tail[512];
	uint64_t deadline = jc__now_ms() + (uint64_t)a->wait_ms;
	if (mkdirs(a->cache_dir) != 0)
		return jc__fail(err, errlen, JC_EIO, "auto-start: cannot create %s: %s",
				a->cache_dir, strerror(errno));
	if (find_daemon(a->daemon, exe, sizeof(exe)) != 0)
		return jc__fail(err, errlen, JC_ECONNECT,
				"auto-start: no jitcached found (set "
				"JITCACHED, or install it in " JC_SBINDIR " or on PATH)");
	snprintf(lock_path, sizeof(lock_path), "%s.lock", a->socket);
	snprintf(log_path, sizeof(log_path), "%s/jitcached.log", a->cache_dir);
	int lock = open_lock(lock_path, err, errlen);
	if (lock < 0)
		return lock;
	/* Held by a starter of ours, or by the daemon it started while that
	 * one starts (or runs but does not answer): no second daemon; it may
	 * answer meanwhile. */
	int rc = 0;
	for (unsigned wait = 1; flock(lock, LOCK_EX | LOCK_NB) != 0;
	     wait = wait < 20 ? wait * 2 : 20) {
		int e = errno;
		if (e == EWOULDBLOCK && answer(ctx) == 0)
			goto out;
		if ((e != EWOULDBLOCK && e != EINTR) || jc__now_ms() > deadline) {
			rc = jc__fail(
			    err, errlen, JC_ECONNECT, "auto-start: lock %s: %s", lock_path,
			    e == EWOULDBLOCK ? "held by another starter of this user, or by "
					       "the daemon it started, which did not answer in time"
					     : strerror(e));
			goto out;
		}
		jc__sleep_ms(wait);
	}
	/* Whoever held the lock before may have started it. */
	if (answer(ctx) == 0)
		goto out;
	int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (log_fd < 0) {
		rc = jc__fail(err, errlen, JC_EIO, "auto-start: cannot open %s: %s", log_path,
			      strerror(errno));
		goto out;
	}
	snprintf(idle, sizeof(idle), "%d", a->idle_exit_s);
	char *argv[] = {
	    exe,  "--cache-dir", (char *)a->cache_dir, "--socket", (char *)a->socket, "--idle-exit",
	    idle, NULL};
	pid_t pid = spawn_detached(argv, log_fd, lock);
	int spawn_errno = errno;
	close(log_fd);
	if (pid < 0) {
		rc = jc__fail(err, errlen, JC_ECONNECT, "auto-start: cannot run %s: %s", exe,
			      strerror(spawn_errno));
		goto out;
	}
	for (unsigned wait = 1;; wait = wait < 20 ? wait * 2 : 20) {
		if (answer(ctx) == 0)
			goto out;
		if (!alive(pid)) {
			log_tail(log_path, tail, sizeof(tail));
			rc = jc__fail(err, errlen, JC_ECONNECT,
				      "auto-started %s (pid %d) exited: %s", exe, (int)pid,
				      tail[0] ? tail : "(nothing in its log)");
			goto out;
		}
		if (jc__now_ms() > deadline) {
			rc = jc__fail(err, errlen, JC_ECONNECT,
				      "auto-started %s (pid %d) did not "
				      "answer within %d ms (it goes on starting; its log is %s)",
				      exe, (int)pid, a->wait_ms, log_path);
			goto out;
		}
		jc__sleep_ms(wait);
	}
out:
	close(lock);
	return rc;
}
