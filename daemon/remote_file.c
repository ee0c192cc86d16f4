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
 *   lock-stale=DURATION  a fleet lock not renewed this long (default 30s)
 *                   is taken over: its holder died.
 *
 * Layout, for a key K (32 hex digits) and XX its first two: DIR/XX/K.v the
 * value of K, DIR/XX/K.d the dependency record of lookup key K, DIR/XX/K.lock
 * the fleet lock of K (its content: the holder's lock id). A value is
 * written to DIR/XX/.tmp-K-<pid>-<random> (O_EXCL), synced, then renamed
 * over K.v: a reader sees the old value or the new one, never a part; a
 * temp name is never read as a value (a writer killed midway leaves a temp
 * file, removed by the trim once an hour old).
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

#define DEFAULT_MAX_SIZE "10G"
#define DEFAULT_LOCK_STALE_S 30
#define TRIM_EVERY_S 60         /* a trim after a put at most this often ... */
#define TRIM_TEMP_S 3600        /* ... removing temp files older than this */
#define TRIM_TO_PERCENT 90

struct fb {
	uv_loop_t *loop;
	char dir[4096];
	int read_only;
	uint64_t max_size;
	int64_t lock_stale_s;
	uint64_t max_object;
	char lock_id[128];
	int64_t last_trim_s;   /* wall clock of the last trim started */
	uint64_t written;      /* bytes put since it */
	int trimming;
	int refs;              /* the handle + jobs */
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
			if (jc__parse_duration(o + 11, &stale) != 0 || stale < 1 || stale > 86400) {
				snprintf(err, errlen, "bad lock-stale '%.80s' (1s to 1d)", o + 11);
				return JC_EINVAL;
			}
		} else {
			snprintf(err, errlen, "unknown option '%.80s' (read-only, max-size=SIZE, "
				 "lock-stale=DURATION)", o);
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

/* The path of key's file with suffix (".v", ".d", ".lock"). */
static void path_of(const struct fb *b, const uint8_t key[16], const char *suffix, char *out,
		    size_t len)
{
	char hex[33];
	jc__hex16(key, hex);
	snprintf(out, len, "%s/%.2s/%s%s", b->dir, hex, hex, suffix);
}

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

static int fail(int err, const char *what, const char *path, char *why, size_t whylen)
{
	snprintf(why, whylen, "%s %.300s: %s", what, path, strerror(err));
	return rc_of(err);
}

/* Reads the regular file path (at most max bytes) into *val. */
static int read_value(const char *path, uint64_t max, uint8_t **val, size_t *len, char *why,
		      size_t whylen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	if (fd < 0 && errno == ELOOP) {
		snprintf(why, whylen, "%.300s is a symbolic link", path);
		return JC_ECORRUPT;
	}
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? JC_ENOTFOUND
							   : fail(errno, "open", path, why, whylen);
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return fail(e, "stat", path, why, whylen);
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		snprintf(why, whylen, "%.300s is %s", path,
			 S_ISREG(st.st_mode) ? "over remote-max-object" : "not a regular file");
		return JC_ECORRUPT;
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
			return fail(e, "read", path, why, whylen);
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

/* Makes DIR/XX for path when missing (DIR itself must exist). */
static void make_parent(const char *path)
{
	char parent[4200];
	snprintf(parent, sizeof(parent), "%s", path);
	char *slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		mkdir(parent, 0777);
	}
}

/* Writes len bytes at val to a temp file beside path, synced, then renames
 * it over path. */
static int write_atomic(const struct fb *b, const char *path, const uint8_t *val, size_t len,
			char *why, size_t whylen)
{
	char tmp[4200];
	const char *base = strrchr(path, '/') + 1;
	snprintf(tmp, sizeof(tmp), "%.*s.tmp-%.32s-%d-%08x", (int)(base - path), path, base,
		 (int)getpid(), randombytes_random());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 && errno == ENOENT) {
		make_parent(path);
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	}
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
	if (!e && rename(tmp, path) != 0)
		e = errno;
	if (e) {
		unlink(tmp);
		return fail(e, "write", tmp, why, whylen);
	}
	(void)b;
	return 0;
}

/* Whether the lock file path is ours: its content is our lock id. */
static int lock_is_ours(const struct fb *b, const char *path)
{
	char buf[sizeof(b->lock_id)];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && (size_t)n == strlen(b->lock_id) && memcmp(buf, b->lock_id, (size_t)n) == 0;
}

static int64_t age_s(const struct stat *st)
{
	return (int64_t)time(NULL) - (int64_t)st->st_mtime;
}

/* Takes the lock (or, read-only, looks whether a peer holds one). */
static int take_lock(const struct fb *b, const char *path, char *why, size_t whylen)
{
	struct stat st;
	if (b->read_only)
		return stat(path, &st) == 0 && age_s(&st) < b->lock_stale_s ? JC_EBUSY : 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 && errno == ENOENT) {
			make_parent(path);
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		}
		if (fd >= 0) {
			size_t n = strlen(b->lock_id);
			int ok = write(fd, b->lock_id, n) == (ssize_t)n;
			close(fd);
			if (!ok) {
				unlink(path);
				return fail(EIO, "write", path, why, whylen);
			}
			return 0;
		}
		if (errno != EEXIST)
			return fail(errno, "create", path, why, whylen);
		if (lstat(path, &st) != 0)
			continue; /* released meanwhile: try again */
		if (age_s(&st) < b->lock_stale_s)
			return JC_EBUSY;
		unlink(path); /* its holder stopped renewing it: taken over */
	}
	return JC_EBUSY;
}

/* Values and records in DIR (and temp files to drop) for the trim. */
struct victim {
	int64_t mtime;
	uint64_t size;
	char path[64]; /* XX/name */
};

static int victim_cmp(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;
	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Removes temp files over an hour old, then the oldest values while the
 * share holds more than max_size (down to TRIM_TO_PERCENT of it). */
static void trim(const struct fb *b)
{
	struct victim *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0, removed = 0, removed_bytes = 0;
	int64_t now = (int64_t)time(NULL);
	for (int i = 0; i < 256; i++) {
		char sub[4200];
		snprintf(sub, sizeof(sub), "%s/%02x", b->dir, i);
		DIR *d = opendir(sub);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			struct stat st;
			size_t len = strlen(e->d_name);
			int temp = strncmp(e->d_name, ".tmp-", 5) == 0;
			int value = len == 34 && e->d_name[32] == '.' &&
				    (e->d_name[33] == 'v' || e->d_name[33] == 'd');
			if ((!temp && !value) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
				continue;
			if (temp) {
				if (now - (int64_t)st.st_mtime > TRIM_TEMP_S)
					unlinkat(dirfd(d), e->d_name, 0);
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
			snprintf(v[n].path, sizeof(v[n].path), "%02x/%s", i, e->d_name);
			total += v[n++].size;
		}
		closedir(d);
	}
	if (total > b->max_size) {
		uint64_t target = b->max_size / 100 * TRIM_TO_PERCENT;
		qsort(v, n, sizeof(*v), victim_cmp);
		for (size_t i = 0; i < n && total > target; i++) {
			char path[4200];
			snprintf(path, sizeof(path), "%s/%s", b->dir, v[i].path);
			if (unlink(path) == 0) {
				total -= v[i].size;
				removed++;
				removed_bytes += v[i].size;
			}
		}
		jc_log_info(REMOTE, "file://%s: over its max-size: %" PRIu64 " oldest values removed (%"
			    PRIu64 " bytes), %" PRIu64 " bytes left", b->dir, removed, removed_bytes,
			    total);
	}
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

static void job_work_cb(uv_work_t *w)
{
	struct job *j = w->data;
	struct fb *b = j->b;
	char path[4200], lock[4200];
	const char *suffix = j->kind == JC_RB_RECORD ? ".d" : ".v";
	path_of(b, j->key, suffix, path, sizeof(path));
	path_of(b, j->key, ".lock", lock, sizeof(lock));
	struct stat st;
	switch (j->op) {
	case J_GET:
		j->rc = read_value(path, b->max_object, &j->val, &j->len, j->why, sizeof(j->why));
		break;
	case J_LOCK:
		j->rc = take_lock(b, lock, j->why, sizeof(j->why));
		break;
	case J_RENEW:
		if (lock_is_ours(b, lock))
			utimensat(AT_FDCWD, lock, NULL, AT_SYMLINK_NOFOLLOW);
		break;
	case J_UNLOCK:
		if (lock_is_ours(b, lock))
			unlink(lock);
		break;
	case J_PUT:
		j->rc = write_atomic(b, path, j->val, j->len, j->why, sizeof(j->why));
		if (j->unlock && lock_is_ours(b, lock))
			unlink(lock); /* after the value: whoever sees it gone sees the value */
		break;
	case J_PROBE:
		j->rc = stat(b->dir, &st) != 0		  ? fail(errno, "stat", b->dir, j->why, sizeof(j->why))
			: !S_ISDIR(st.st_mode) ? fail(ENOTDIR, "stat", b->dir, j->why, sizeof(j->why))
					       : 0;
		break;
	case J_PROBE_WRITE: {
		char probe[4200];
		snprintf(probe, sizeof(probe), "%s/.tmp-probe-%d-%08x", b->dir, (int)getpid(),
			 randombytes_random());
		int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		int ok = fd >= 0 && write(fd, "1", 1) == 1;
		j->rc = ok ? 0 : fail(errno, "write", probe, j->why, sizeof(j->why));
		if (fd >= 0) {
			close(fd);
			unlink(probe);
		}
		break;
	}
	case J_TRIM:
		trim(b);
		break;
	}
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
		if (!b->trimming && (now - b->last_trim_s >= TRIM_EVERY_S ||
				     b->written >= b->max_size / 16)) {
			struct job *t = calloc(1, sizeof(*t));
			if (t) {
				t->b = b;
				t->op = J_TRIM;
				t->work.data = t;
				b->refs++;
				b->trimming = 1;
				b->last_trim_s = now;
				b->written = 0;
				if (uv_queue_work(b->loop, &t->work, job_work_cb, job_after_cb) != 0) {
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
		j->cb(j->arg, rc, val, val ? j->len : 0, b->closing ? "closing" : j->rc ? j->why : "");
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
	return job_start(b, write ? J_PROBE_WRITE : J_PROBE, JC_RB_VALUE, NULL, NULL, 0, 0, cb, arg);
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
