/* SPDX-License-Identifier: MIT */
/*
 * The remote tier's shared-directory backend (remote_backend.h), as
 * ccache's file storage and sccache's disk cache: a directory every daemon
 * of the fleet mounts (NFS, Lustre, or a local one shared by several
 * daemons).
 *
 * URL: file:///DIR[?OPTION[&OPTION...]]: DIR absolute, made by whoever
 * sets the share up (a missing DIR is a share that is down); options:
 *   read-only       never write (as --remote-read-only, for this backend);
 *   max-size=SIZE   byte budget of the values (default 10G): when over, the
 *                   oldest values (by the time they were written) are
 *                   removed until the share holds 90% of it;
 *   lock-stale=DURATION  a fleet lock not renewed this long (default 30s,
 *                   5s to 1d; it is renewed every 3 s) is taken over: its
 *                   holder died.
 *
 * Layout, for a key K (32 hex digits) and XX its first two: DIR/XX/K.v the
 * value of K, DIR/XX/K.d the dependency record of lookup key K, DIR/XX/K.lock
 * the fleet lock of K (its content: the holder's lock id). A value is
 * written to DIR/XX/.tmp-K-<pid>-<random> (O_EXCL), synced, then renamed
 * over K.v: a reader sees the old value or the new one, never a part; a
 * temp name is never read as a value (a writer killed midway leaves a temp
 * file, removed by the trim once an hour old, as are lock files). DIR/XX is
 * only used through a descriptor opened without following a symbolic link.
 *
 * No flock/fcntl locks (NFS breaks them): the fleet lock is an O_EXCL
 * create, renewed by touching its mtime; one older than lock-stale is
 * removed and created again. Two daemons taking over the same stale lock at
 * once may both compile: the single flight is best effort, the values they
 * write are the same, and each rename is atomic.
 *
 * Every byte read from the share is hostile: a value is read only when it
 * is a regular file of at most --remote-max-object bytes (else JC_ECORRUPT:
 * rejected), and remote.c verifies its format, key, sizes and MAC.
 *
 * --remote-ttl applies as in Redis: a value or record whose file was
 * written (mtime) longer ago is not read (a miss) and is removed by the
 * trim; reads do not extend it. --remote-timeout-ms does not apply: a read
 * from a stalled share cannot be interrupted in-process (it blocks a pool
 * thread until the kernel gives up), so the bound is the mount's (NFS
 * soft,timeo=,retrans=; docs/fleet.md).
 *
 * Failures: ENOSPC, EDQUOT, EROFS, EACCES, EPERM are refusals (the share
 * answers; counted, the tier stays up); any other error on the share (EIO,
 * ESTALE, DIR missing) is a transport failure. Blocking file system calls
 * run in the libuv thread pool, never on the loop.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "daemon/remote_backend.h"
#include "jitcache/jitcache.h"

#define DEFAULT_MAX_SIZE     "10G"
#define DEFAULT_LOCK_STALE_S 30
#define TRIM_EVERY_S	     60	  /* a trim after a put at most this often ... */
#define TRIM_STALE_S	     3600 /* ... removing temp and lock files older than this */
#define TRIM_TO_PERCENT	     90

struct fb {
	uv_loop_t *loop;
	char dir[4096];
	int read_only;
	uint64_t max_size;
	int64_t lock_stale_s;
	int64_t ttl_s; /* --remote-ttl: older values are not read, and trimmed */
	uint64_t max_object;
	char lock_id[128];
	int64_t last_trim_s; /* wall clock of the last trim started */
	uint64_t written;    /* bytes put since it */
	int trimming;
	int refs; /* the handle + jobs */
	int closing;
};

/* The options of a file:// URL into b (NULL: only checked). */
static int parse(const char *url, struct fb *b, char *err, size_t errlen)
{
	char buf[4096];
	if (strncmp(url, "file://", 7) != 0 || url[7] != '/') {
		snprintf(err, errlen, "a shared directory is file:///ABSOLUTE/PATH[?options]");
		return JC_EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", url + 7);
	if (strlen(url + 7) >= sizeof(buf) - 64) {
		snprintf(err, errlen, "path too long");
		return JC_EINVAL;
	}
	char *opts = strchr(buf, '?');
	if (opts)
		*opts++ = '\0';
	size_t n = strlen(buf);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	int read_only = 0;
	uint64_t max_size = 0;
	int64_t stale = DEFAULT_LOCK_STALE_S;
	jc__parse_size(DEFAULT_MAX_SIZE, &max_size);
	for (char *save = NULL, *o = opts ? strtok_r(opts, "&", &save) : NULL; o;
	     o = strtok_r(NULL, "&", &save)) {
		if (strcmp(o, "read-only") == 0) {
			read_only = 1;
		} else if (strncmp(o, "max-size=", 9) == 0) {
			if (jc__parse_size(o + 9, &max_size) != 0 || max_size == 0) {
				snprintf(err, errlen, "bad max-size '%.80s'", o + 9);
				return JC_EINVAL;
			}
		} else if (strncmp(o, "lock-stale=", 11) == 0) {
			if (jc__parse_duration(o + 11, &stale) != 0 || stale < 5 || stale > 86400) {
				snprintf(err, errlen, "bad lock-stale '%.80s' (5s to 1d)", o + 11);
				return JC_EINVAL;
			}
		} else {
			snprintf(err, errlen,
				 "unknown option '%.80s' (read-only, max-size=SIZE, "
				 "lock-stale=DURATION)",
				 o);
			return JC_EINVAL;
		}
	}
	if (b) {
		snprintf(b->dir, sizeof(b->dir), "%s", buf);
		b->read_only = read_only;
		b->max_size = max_size;
		b->lock_stale_s = stale;
	}
	return 0;
}

static int claims(const char *url)
{
	return strncmp(url, "file:", 5) == 0;
}

static int check(const char *url, char *err, size_t errlen)
{
	return parse(url, NULL, err, errlen);
}

static int fb_open(const struct jc_rb_open *o, void **out, char *err, size_t errlen)
{
	struct fb *b = calloc(1, sizeof(*b));
	if (!b)
		return JC_ENOMEM;
	int rc = parse(o->url, b, err, errlen);
	if (rc != 0) {
		free(b);
		return rc;
	}
	b->loop = o->loop;
	b->read_only |= o->cfg->read_only;
	b->max_object = o->cfg->max_object;
	b->ttl_s = o->cfg->ttl_s;
	snprintf(b->lock_id, sizeof(b->lock_id), "%s", o->lock_id);
	b->refs = 1;
	*out = b;
	return 0;
}

static void fb_unref(struct fb *b)
{
	if (--b->refs == 0)
		free(b);
}

/* --- the file system side (thread pool) ------------------------------------------ */

/* errno of a failed call on the share as an rc (remote_backend.h). */
static int rc_of(int err)
{
	switch (err) {
	case ENOSPC:
	case EDQUOT:
	case EROFS:
	case EACCES:
	case EPERM:
		return JC_EDENIED;
	default:
		return JC_EIO;
	}
}

static int fail(int err, const char *what, const char *name, char *why, size_t whylen)
{
	snprintf(why, whylen, "%s %.300s: %s", what, name, strerror(err));
	return rc_of(err);
}

/*
 * DIR/XX for key, opened as a directory that is not a symbolic link (a
 * share's user cannot send reads, writes or the trim elsewhere); made when
 * missing and create. Every file of the key is used relative to it. The
 * descriptor, or -1 with errno (ENOENT: not there).
 */
static int sub_open(const struct fb *b, const uint8_t key[16], int create)
{
	char hex[33], sub[4200];
	jc__hex16(key, hex);
	snprintf(sub, sizeof(sub), "%s/%.2s", b->dir, hex);
	int fd = open(sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create && (mkdir(sub, 0777) == 0 || errno == EEXIST))
		fd = open(sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd;
}

/* The name of key's file with suffix (".v", ".d", ".lock") in its DIR/XX. */
static void name_of(const uint8_t key[16], const char *suffix, char out[48])
{
	char hex[33];
	jc__hex16(key, hex);
	snprintf(out, 48, "%s%s", hex, suffix);
}

static int64_t age_s(const struct stat *st)
{
	return (int64_t)time(NULL) - (int64_t)st->st_mtime;
}

/* Whether a value or record written at st's mtime has passed ttl_s (then
 * it is not read, as if Redis had expired it, and the trim removes it). */
static int expired(const struct stat *st, int64_t ttl_s)
{
	return ttl_s > 0 && age_s(st) >= ttl_s;
}

/* Reads the regular file name in dfd (at most max bytes, not expired) into
 * *val. */
static int read_value(int dfd, const char *name, uint64_t max, int64_t ttl_s, uint8_t **val,
		      size_t *len, char *why, size_t whylen)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	if (fd < 0 && errno == ELOOP) {
		snprintf(why, whylen, "%s is a symbolic link", name);
		return JC_ECORRUPT;
	}
	if (fd < 0)
		return errno == ENOENT ? JC_ENOTFOUND : fail(errno, "open", name, why, whylen);
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return fail(e, "stat", name, why, whylen);
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		snprintf(why, whylen, "%s is %s", name,
			 S_ISREG(st.st_mode) ? "over remote-max-object" : "not a regular file");
		return JC_ECORRUPT;
	}
	if (expired(&st, ttl_s)) {
		close(fd);
		return JC_ENOTFOUND;
	}
	size_t want = (size_t)st.st_size, got = 0;
	uint8_t *buf = malloc(want ? want : 1);
	if (!buf) {
		close(fd);
		return JC_ENOMEM;
	}
	while (got < want) {
		ssize_t n = read(fd, buf + got, want - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			free(buf);
			return fail(e, "read", name, why, whylen);
		}
		if (n == 0)
			break; /* shorter than it was: the checks say what it is */
		got += (size_t)n;
	}
	close(fd);
	*val = buf;
	*len = got;
	return 0;
}

/* Writes len bytes at val to a temp name in dfd, synced, then renames it
 * over name (and syncs the directory). */
static int write_atomic(int dfd, const char *name, const uint8_t *val, size_t len, char *why,
			size_t whylen)
{
	char tmp[128];
	snprintf(tmp, sizeof(tmp), ".tmp-%s-%d-%08x", name, (int)getpid(), randombytes_random());
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return fail(errno, "create", tmp, why, whylen);
	size_t done = 0;
	int e = 0;
	while (done < len && !e) {
		ssize_t n = write(fd, val + done, len - done);
		if (n < 0 && errno != EINTR)
			e = errno;
		else if (n > 0)
			done += (size_t)n;
	}
	if (!e && fsync(fd) != 0)
		e = errno;
	if (close(fd) != 0 && !e)
		e = errno;
	if (!e && renameat(dfd, tmp, dfd, name) != 0)
		e = errno;
	if (e) {
		unlinkat(dfd, tmp, 0);
		return fail(e, "write", tmp, why, whylen);
	}
	fsync(dfd);
	return 0;
}

/* Whether the lock file name in dfd is ours: its content is our lock id. */
static int lock_is_ours(const struct fb *b, int dfd, const char *name)
{
	char buf[sizeof(b->lock_id)];
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && (size_t)n == strlen(b->lock_id) && memcmp(buf, b->lock_id, (size_t)n) == 0;
}

/* Takes the lock name in dfd (or, read-only, looks whether a peer holds a
 * fresh one). */
static int take_lock(const struct fb *b, int dfd, const char *name, char *why, size_t whylen)
{
	struct stat st;
	if (b->read_only)
		return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			       age_s(&st) < b->lock_stale_s
			   ? JC_EBUSY
			   : 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		int fd =
		    openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
		if (fd >= 0) {
			size_t n = strlen(b->lock_id);
			int ok = write(fd, b->lock_id, n) == (ssize_t)n;
			close(fd);
			if (!ok) {
				unlinkat(dfd, name, 0);
				return fail(EIO, "write", name, why, whylen);
			}
			return 0;
		}
		if (errno != EEXIST)
			return fail(errno, "create", name, why, whylen);
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue; /* released meanwhile: try again */
		if (age_s(&st) < b->lock_stale_s)
			return JC_EBUSY;
		unlinkat(dfd, name, 0); /* its holder stopped renewing it: taken over */
	}
	return JC_EBUSY;
}

/* Values and records in DIR for the trim. */
struct victim {
	int64_t mtime;
	uint64_t size;
	char path[48]; /* XX/name */
};

static int victim_cmp(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;
	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Removes temp and lock files over an hour old (left by daemons killed
 * midway) and the values and records past --remote-ttl, then the oldest
 * values while the share holds more than max_size (down to TRIM_TO_PERCENT
 * of it). */
static void trim(const struct fb *b)
{
	struct victim *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0, removed = 0, removed_bytes = 0, expired_n = 0;
	int64_t now = (int64_t)time(NULL);
	for (int i = 0; i < 256; i++) {
		uint8_t key[16] = {(uint8_t)i};
		int dfd = sub_open(b, key, 0);
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
		if (!d) {
			if (dfd >= 0)
				close(dfd);
			continue;
		}
		struct dirent *e;
		while ((e = readdir(d))) {
			struct stat st;
			size_t len = strlen(e->d_name);
			int stale = strncmp(e->d_name, ".tmp-", 5) == 0 ||
				    (len == 37 && strcmp(e->d_name + 32, ".lock") == 0);
			int value = len == 34 && e->d_name[32] == '.' &&
				    (e->d_name[33] == 'v' || e->d_name[33] == 'd');
			if ((!stale && !value) ||
			    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
				continue;
			if (stale) {
				if (now - (int64_t)st.st_mtime > TRIM_STALE_S)
					unlinkat(dirfd(d), e->d_name, 0);
				continue;
			}
			if (expired(&st, b->ttl_s)) {
				expired_n += unlinkat(dirfd(d), e->d_name, 0) == 0;
				continue;
			}
			if (n == cap) {
				size_t c = cap ? cap * 2 : 1024;
				struct victim *p = realloc(v, c * sizeof(*v));
				if (!p)
					break;
				v = p;
				cap = c;
			}
			v[n].mtime = (int64_t)st.st_mtime;
			v[n].size = (uint64_t)st.st_size;
			snprintf(v[n].path, sizeof(v[n].path), "%02x/%.34s", i, e->d_name);
			total += v[n++].size;
		}
		closedir(d);
	}
	if (total > b->max_size) {
		uint64_t target = b->max_size / 100 * TRIM_TO_PERCENT;
		qsort(v, n, sizeof(*v), victim_cmp);
		for (size_t i = 0; i < n && total > target; i++) {
			uint8_t key[16] = {0};
			unsigned x = 0;
			sscanf(v[i].path, "%2x", &x);
			key[0] = (uint8_t)x;
			int dfd = sub_open(b, key, 0);
			if (dfd >= 0 && unlinkat(dfd, v[i].path + 3, 0) == 0) {
				total -= v[i].size;
				removed++;
				removed_bytes += v[i].size;
			}
			if (dfd >= 0)
				close(dfd);
		}
		jc_log_info(REMOTE,
			    "file://%s: over its max-size: %" PRIu64
			    " oldest values removed (%" PRIu64 " bytes), %" PRIu64 " bytes left",
			    b->dir, removed, removed_bytes, total);
	}
	if (expired_n)
		jc_log_info(REMOTE, "file://%s: %" PRIu64 " values past remote-ttl removed", b->dir,
			    expired_n);
	free(v);
}

/* --- jobs ------------------------------------------------------------------------ */

enum job_op { J_GET, J_LOCK, J_RENEW, J_UNLOCK, J_PUT, J_PROBE, J_PROBE_WRITE, J_TRIM };

struct job {
	uv_work_t work;
	struct fb *b;
	enum job_op op;
	enum jc_rb_kind kind;
	uint8_t key[16];
	uint8_t *val;
	size_t len;
	int unlock;
	jc_rb_cb cb;
	void *arg;
	int rc;
	char why[512];
};

/* The probes: DIR is a directory; a file can be made there. */
static int probe(const struct fb *b, int writing, char *why, size_t whylen)
{
	struct stat st;
	if (stat(b->dir, &st) != 0)
		return fail(errno, "stat", b->dir, why, whylen);
	if (!S_ISDIR(st.st_mode))
		return fail(ENOTDIR, "stat", b->dir, why, whylen);
	if (!writing)
		return 0;
	char path[4200];
	snprintf(path, sizeof(path), "%s/.tmp-probe-%d-%08x", b->dir, (int)getpid(),
		 randombytes_random());
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	int rc = fd >= 0 && write(fd, "1", 1) == 1 ? 0 : fail(errno, "write", path, why, whylen);
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	return rc;
}

static void job_work_cb(uv_work_t *w)
{
	struct job *j = w->data;
	struct fb *b = j->b;
	if (j->op == J_TRIM || j->op == J_PROBE || j->op == J_PROBE_WRITE) {
		if (j->op == J_TRIM)
			trim(b);
		else
			j->rc = probe(b, j->op == J_PROBE_WRITE, j->why, sizeof(j->why));
		return;
	}
	char name[48], lock[48];
	name_of(j->key, j->kind == JC_RB_RECORD ? ".d" : ".v", name);
	name_of(j->key, ".lock", lock);
	int dfd = sub_open(b, j->key, j->op == J_LOCK || j->op == J_PUT);
	if (dfd < 0) {
		int e = errno;
		/* No DIR/XX is a miss; no DIR, a share that is not there. */
		j->rc = e == ENOENT && j->op == J_GET && access(b->dir, F_OK) == 0 ? JC_ENOTFOUND
			: e == ELOOP || e == ENOTDIR
			    ? JC_ECORRUPT
			    : fail(e, "open", b->dir, j->why, sizeof(j->why));
		if (j->rc == JC_ECORRUPT)
			snprintf(j->why, sizeof(j->why), "%.300s/%.2s is not a directory", b->dir,
				 name);
		if (j->rc == JC_ECORRUPT && j->op != J_GET)
			j->rc = JC_EDENIED;
		return;
	}
	switch (j->op) {
	case J_GET:
		j->rc = read_value(dfd, name, b->max_object, b->ttl_s, &j->val, &j->len, j->why,
				   sizeof(j->why));
		break;
	case J_LOCK:
		j->rc = take_lock(b, dfd, lock, j->why, sizeof(j->why));
		break;
	case J_RENEW:
		if (lock_is_ours(b, dfd, lock))
			utimensat(dfd, lock, NULL, AT_SYMLINK_NOFOLLOW);
		break;
	case J_UNLOCK:
		if (lock_is_ours(b, dfd, lock))
			unlinkat(dfd, lock, 0);
		break;
	case J_PUT:
		j->rc = write_atomic(dfd, name, j->val, j->len, j->why, sizeof(j->why));
		if (j->unlock && lock_is_ours(b, dfd, lock))
			unlinkat(dfd, lock,
				 0); /* after the value: whoever sees it gone sees the value */
		break;
	default:
		break;
	}
	close(dfd);
}

static void job_after_cb(uv_work_t *w, int status)
{
	struct job *j = w->data;
	struct fb *b = j->b;
	(void)status;
	if (j->op == J_TRIM)
		b->trimming = 0;
	if (j->op == J_PUT && j->rc == 0 && !b->closing) {
		int64_t now = jc__wall_s();
		b->written += j->len;
		if (!b->trimming &&
		    (now - b->last_trim_s >= TRIM_EVERY_S || b->written >= b->max_size / 16)) {
			struct job *t = calloc(1, sizeof(*t));
			if (t) {
				t->b = b;
				t->op = J_TRIM;
				t->work.data = t;
				b->refs++;
				b->trimming = 1;
				b->last_trim_s = now;
				b->written = 0;
				if (uv_queue_work(b->loop, &t->work, job_work_cb, job_after_cb) !=
				    0) {
					b->refs--;
					b->trimming = 0;
					free(t);
				}
			}
		}
	}
	if (j->op == J_PUT) {
		free(j->val);
		j->val = NULL;
	}
	if (j->cb) {
		int rc = b->closing ? JC_EIO : j->rc;
		uint8_t *val = b->closing ? NULL : j->val;
		if (b->closing)
			free(j->val);
		j->cb(j->arg, rc, val, val ? j->len : 0,
		      b->closing ? "closing"
		      : j->rc	 ? j->why
				 : "");
	} else {
		free(j->val);
	}
	free(j);
	fb_unref(b);
}

static int job_start(struct fb *b, enum job_op op, enum jc_rb_kind kind, const uint8_t key[16],
		     uint8_t *val, size_t len, int unlock, jc_rb_cb cb, void *arg)
{
	struct job *j = b->closing ? NULL : calloc(1, sizeof(*j));
	if (!j) {
		free(val);
		return b->closing ? JC_EBUSY : JC_ENOMEM;
	}
	j->b = b;
	j->op = op;
	j->kind = kind;
	if (key)
		memcpy(j->key, key, 16);
	j->val = val;
	j->len = len;
	j->unlock = unlock;
	j->cb = cb;
	j->arg = arg;
	j->work.data = j;
	b->refs++;
	if (uv_queue_work(b->loop, &j->work, job_work_cb, job_after_cb) != 0) {
		b->refs--;
		free(j->val);
		free(j);
		return JC_ENOMEM;
	}
	return 0;
}

static int fb_get(void *b, enum jc_rb_kind kind, const uint8_t key[16], jc_rb_cb cb, void *arg)
{
	return job_start(b, J_GET, kind, key, NULL, 0, 0, cb, arg);
}

static int fb_lock(void *b, const uint8_t key[16], jc_rb_cb cb, void *arg)
{
	return job_start(b, J_LOCK, JC_RB_VALUE, key, NULL, 0, 0, cb, arg);
}

static void fb_renew(void *b, const uint8_t key[16])
{
	job_start(b, J_RENEW, JC_RB_VALUE, key, NULL, 0, 0, NULL, NULL);
}

static void fb_unlock(void *b, const uint8_t key[16])
{
	job_start(b, J_UNLOCK, JC_RB_VALUE, key, NULL, 0, 0, NULL, NULL);
}

static int fb_put(void *b, enum jc_rb_kind kind, const uint8_t key[16], uint8_t *val, size_t len,
		  int unlock, jc_rb_cb cb, void *arg)
{
	return job_start(b, J_PUT, kind, key, val, len, unlock, cb, arg);
}

static int fb_probe(void *b, int write, jc_rb_cb cb, void *arg)
{
	return job_start(b, write ? J_PROBE_WRITE : J_PROBE, JC_RB_VALUE, NULL, NULL, 0, 0, cb,
			 arg);
}

static void fb_info(void *p, struct jc_rb_info *out)
{
	struct fb *b = p;
	out->read_only = b->read_only;
	out->masters = 1;
}

static void fb_close(void *p)
{
	struct fb *b = p;
	b->closing = 1;
	fb_unref(b); /* jobs still running end with JC_EIO, then b goes */
}

const struct jc_remote_backend jc__remote_file = {
    .name = "file",
    .claims = claims,
    .check = check,
    .open = fb_open,
    .get = fb_get,
    .lock = fb_lock,
    .renew = fb_renew,
    .unlock = fb_unlock,
    .put = fb_put,
    .probe = fb_probe,
    .info = fb_info,
    .close = fb_close,
};
