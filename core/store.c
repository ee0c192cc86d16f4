/* SPDX-License-Identifier: MIT */
/* The content-addressed object store: see store.h for the layout and rules. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/log.h"
#include "common/req.h"
#include "common/util.h"
#include "core/store_dir.h"
#include "jitcache/jitcache.h"

/* "ab/<32 hex>" into out[36]. */
static void object_name(const uint8_t hash[16], char out[36])
{
	char hex[33];

	jc__hex16(hash, hex);
	snprintf(out, 36, "%.2s/%s", hex, hex);
}

static void hash_bytes(const void *data, size_t size, uint8_t out[16])
{
	XXH128_canonicalFromHash((XXH128_canonical_t *)out, XXH3_128bits(data, size));
}

/* A file we may serve: ours, regular, read-only to others, of that size. */
static const char *object_problem(const struct stat *st, uid_t uid, uint64_t size)
{
	if (!S_ISREG(st->st_mode))
		return "not a regular file";
	if (st->st_uid != uid)
		return "wrong owner";
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return "writable by group or others";
	if ((uint64_t)st->st_size != size)
		return "wrong size";
	return NULL;
}

/*
 * Checks one entry of the store (name under parent, path for messages):
 * ours, of the right type, no access for group or others. An entry of ours
 * with a wider mode (the group-shared layout of earlier versions made the
 * directories 02770 and the index 0644) is set to mode, with a warning: what
 * was written there by others is owned by them and refused here, or (objects,
 * manifests) checked on every use. Anything else is refused: JC_EDENIED with
 * the path, its owner and mode, and what is expected. Missing: 1.
 */
static int check_entry(struct jc_store *s, int parent, const char *name, const char *path, int dir,
		       mode_t mode, char *err, size_t errlen)
{
	struct stat st;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 1;
		jc__fail(err, errlen, 0, "stat %s: %s", path, strerror(errno));
		return JC_EIO;
	}
	const char *type = dir ? (S_ISDIR(st.st_mode) ? NULL : "not a directory")
			       : (S_ISREG(st.st_mode) ? NULL : "not a regular file");
	if (type || st.st_uid != s->uid) {
		jc__fail(
		    err, errlen, 0,
		    "%s is %s%s (owner uid %u, mode %04o); expected a %s owned "
		    "by uid %u (the daemon's) with mode %04o: someone else may have replaced it; "
		    "inspect it, then remove it (or the whole cache directory)",
		    path, type ? type : "not owned by the daemon's uid",
		    S_ISLNK(st.st_mode) ? ", a symbolic link" : "", (unsigned)st.st_uid,
		    (unsigned)(st.st_mode & 07777), dir ? "directory" : "file", (unsigned)s->uid,
		    (unsigned)mode);
		return JC_EDENIED;
	}
	if ((st.st_mode & 07777) == mode)
		return 0;
	if (fchmodat(parent, name, mode, 0) < 0) {
		jc__fail(err, errlen, 0, "%s has mode %04o, expected %04o, and chmod failed: %s",
			 path, (unsigned)(st.st_mode & 07777), (unsigned)mode, strerror(errno));
		return JC_EIO;
	}
	jc_log_warn(STORE,
		    "%s had mode %04o; set to %04o (the cache belongs to the daemon's uid "
		    "alone; a group-shared daemon shares only its socket)",
		    path, (unsigned)(st.st_mode & 07777), (unsigned)mode);
	return 0;
}

/* check_entry() on every two-hex-digit directory of DIR/sub (when it exists). */
static int check_fanout(struct jc_store *s, const char *sub, char *err, size_t errlen)
{
	char path[4200];
	int fd = openat(s->dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int rc = 0;
	if (!d) {
		if (fd >= 0)
			close(fd);
		if (errno == ENOENT)
			return 0;
		jc__fail(err, errlen, 0, "read %s/%s: %s", s->dir, sub, strerror(errno));
		return JC_EIO;
	}
	while (rc == 0 && (de = readdir(d))) {
		if (strlen(de->d_name) != 2 || strspn(de->d_name, "0123456789abcdef") != 2)
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", s->dir, sub, de->d_name);
		rc = check_entry(s, dirfd(d), de->d_name, path, 1, DIR_MODE, err, errlen);
		rc = rc == 1 ? 0 : rc;
	}
	closedir(d);
	return rc;
}

/* The owner and mode of every part of the store, DIR included (see store.h). */
static int check_layout(struct jc_store *s, const struct stat *top, char *err, size_t errlen)
{
	static const char *const dirs[] = {"objects", "tmp", "quarantine", "manifests"};
	/* Re-made at every start by the pool (0500), but never one of another's. */
	static const char *const worker_cwd = "worker-cwd";
	static const char *const files[] = {"lock", "index.sqlite", "index.sqlite-wal",
					    "index.sqlite-shm", RESERVE};
	char path[4200];
	int rc = 0;
	if (top->st_uid != s->uid) {
		jc__fail(err, errlen, 0,
			 "%s is owned by uid %u (mode %04o), not by this process "
			 "(uid %u): the cache directory belongs to the daemon's uid alone",
			 s->dir, (unsigned)top->st_uid, (unsigned)(top->st_mode & 07777),
			 (unsigned)s->uid);
		return JC_EDENIED;
	}
	if (top->st_mode & (S_IWGRP | S_IWOTH | S_ISGID)) {
		/* 0700, not just without the write bits: what others may have
		 * made in it while it was open to them stays out of their reach. */
		mode_t want = DIR_MODE;
		if (fchmod(s->dirfd, want) < 0) {
			jc__fail(err, errlen, 0,
				 "%s is writable by group or others (mode %04o) and "
				 "chmod failed: %s",
				 s->dir, (unsigned)(top->st_mode & 07777), strerror(errno));
			return JC_EDENIED;
		}
		jc_log_warn(STORE,
			    "%s had mode %04o; set to %04o (only the daemon writes its cache "
			    "directory)",
			    s->dir, (unsigned)(top->st_mode & 07777), (unsigned)want);
	}
	for (size_t i = 0; rc == 0 && i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", s->dir, dirs[i]);
		rc = check_entry(s, s->dirfd, dirs[i], path, 1, DIR_MODE, err, errlen);
		rc = rc == 1 ? 0 : rc;
	}
	snprintf(path, sizeof(path), "%s/%s", s->dir, worker_cwd);
	rc = rc ?: check_entry(s, s->dirfd, worker_cwd, path, 1, 0500, err, errlen);
	rc = rc == 1 ? 0 : rc;
	for (size_t i = 0; rc == 0 && i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", s->dir, files[i]);
		rc = check_entry(s, s->dirfd, files[i], path, 0, FILE_MODE, err, errlen);
		rc = rc == 1 ? 0 : rc;
	}
	rc = rc ?: check_fanout(s, "objects", err, errlen);
	return rc ?: check_fanout(s, "manifests", err, errlen);
}

/* Opens (creating when missing, mode 0700) subdirectory name of parent. */
static int open_subdir(int parent, const char *name)
{
	if (mkdirat(parent, name, DIR_MODE) < 0 && errno != EEXIST)
		return -1;
	return openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/*
 * tmp/ and quarantine/ are empty most of the time, and so are what cleaners
 * of old empty directories remove (systemd-tmpfiles under /tmp and /var/tmp,
 * tmpreaper, find -empty -delete), as may an administrator. When DIR/name is
 * no longer the directory *fdp holds (removed, or moved away), it is made
 * again (0700) when missing, checked (ours, no access for others, not a
 * link), and *fdp is pointed at it with dup2: the number stays, so a thread
 * using it at that moment reaches the old directory or the new one, never
 * another file. Returns 0 when *fdp is DIR/name (again), -1 when it cannot
 * be (logged). Thread-safe.
 */
static int revive_subdir(struct jc_store *s, int *fdp, const char *name)
{
	struct stat held, now;
	if (fstat(*fdp, &held) == 0 && held.st_nlink > 0 &&
	    fstatat(s->dirfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == held.st_dev &&
	    now.st_ino == held.st_ino)
		return 0;
	int fd = open_subdir(s->dirfd, name);
	if (fd < 0 || fstat(fd, &now) != 0 || now.st_uid != s->uid || (now.st_mode & 077)) {
		if (fd >= 0)
			errno = EPERM; /* not one we made: another's, or open to others */
		jc_log_err(STORE,
			   "%s/%s was removed or replaced while in use and cannot be made "
			   "again: %s",
			   s->dir, name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int rc = dup2(fd, *fdp) < 0 ? -1 : 0, e = errno;
	close(fd);
	if (rc < 0)
		jc_log_err(STORE, "%s/%s was removed or replaced while in use; dup2: %s", s->dir,
			   name, strerror(e));
	else
		jc_log_warn(STORE,
			    "%s/%s was removed or replaced while in use (a cleaner of empty "
			    "directories, or by hand); using it afresh",
			    s->dir, name);
	return rc;
}

/*
 * Creates the staging file tmp/<prefix>.<pid>.<n> (at most 63 bytes, into
 * tmp) for writing with mode; after ENOENT (tmp/ removed under us) tmp/ is
 * made again and the create tried once more. Returns the descriptor, or -1
 * with errno set.
 */
static int create_staged(struct jc_store *s, const char *prefix, mode_t mode, char tmp[64])
{
	for (int again = 1;; again = 0) {
		snprintf(tmp, 64, "%.16s.%ld.%u", prefix, (long)getpid(),
			 atomic_fetch_add(&s->seq, 1));
		int fd = openat(s->tmpfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
		if (fd >= 0 || errno != ENOENT || !again)
			return fd;
		if (revive_subdir(s, &s->tmpfd, "tmp") != 0) {
			errno = ENOENT;
			return -1;
		}
	}
}

int jc__store_tmp_check(struct jc_store *s)
{
	return revive_subdir(s, &s->tmpfd, "tmp") != 0 ? JC_EIO : 0;
}

/* Removes every entry of tmp/: leftovers of a crash (staged files, the
 * directories a worker writes a client's headers into). */
static int empty_tmp(struct jc_store *s)
{
	int fd = dup(s->tmpfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int n = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")))
			continue;
		if (de->d_type == DT_DIR) {
			char path[PATH_MAX], why[PATH_MAX + 64];
			snprintf(path, sizeof(path), "%s/tmp/%s", s->dir, de->d_name);
			if (jc__rmtree(path, why, sizeof(why)) != 0)
				jc_log_warn(STORE, "remove %s", why);
			n++;
		} else if (unlinkat(s->tmpfd, de->d_name, 0) == 0)
			n++;
		else
			jc_log_warn(STORE, "remove %s/tmp/%s: %s", s->dir, de->d_name,
				    strerror(errno));
	}
	closedir(d);
	if (n)
		jc_log_info(STORE, "removed %d stale entries from %s/tmp", n, s->dir);
	return 0;
}

int jc__store_open(const char *dir, struct jc_store **out, char *err, size_t errlen)
{
	struct jc_store *s;
	struct stat st;
	int rc = JC_EIO;

	if (!dir || !*dir || !out)
		return jc__fail(err, errlen, 0, "no cache directory"), JC_EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->dir = strdup(dir))) {
		free(s);
		return jc__fail(err, errlen, 0, "out of memory"), JC_ENOMEM;
	}
	s->uid = geteuid();
	s->reserve_bytes = JC_STORE_RESERVE_BYTES;
	s->objfd = s->tmpfd = s->quarfd = -1;
	if (jc__store_mkdir_p(dir, DIR_MODE) < 0) {
		jc__fail(err, errlen, 0, "create %s: %s", dir, strerror(errno));
		goto err_after_alloc;
	}
	s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0 || fstat(s->dirfd, &st) < 0) {
		jc__fail(err, errlen, 0, "open %s: %s", dir, strerror(errno));
		goto err_after_dirfd;
	}
	rc = check_layout(s, &st, err, errlen);
	rc = rc ?: jc__store_check_local_fd(s->dirfd, dir, err, errlen);
	if (rc)
		goto err_after_dirfd;
	rc = JC_EIO;
	s->objfd = open_subdir(s->dirfd, "objects");
	if (s->objfd < 0) {
		jc__fail(err, errlen, 0, "open %s/objects: %s", dir, strerror(errno));
		goto err_after_dirfd;
	}
	s->tmpfd = open_subdir(s->dirfd, "tmp");
	if (s->tmpfd < 0) {
		jc__fail(err, errlen, 0, "open %s/tmp: %s", dir, strerror(errno));
		goto err_after_objfd;
	}
	s->quarfd = open_subdir(s->dirfd, "quarantine");
	if (s->quarfd < 0) {
		jc__fail(err, errlen, 0, "open %s/quarantine: %s", dir, strerror(errno));
		goto err_after_tmpfd;
	}
	if (empty_tmp(s) < 0) {
		jc__fail(err, errlen, 0, "read %s/tmp: %s", dir, strerror(errno));
		goto err_after_quarfd;
	}
	/* A full disk: give the index the reserve's room to open (its -shm and
	 * -wal need some), so that a purge can free space. */
	uint64_t free_bytes;
	if (jc__store_free_bytes(s, &free_bytes) == 0 && free_bytes < s->reserve_bytes)
		jc__store_reserve_release(s);
	else
		jc__store_reserve_make(s);
	*out = s;
	return 0;

err_after_quarfd:
	close(s->quarfd);
err_after_tmpfd:
	close(s->tmpfd);
err_after_objfd:
	close(s->objfd);
err_after_dirfd:
	if (s->dirfd >= 0)
		close(s->dirfd);
err_after_alloc:
	free(s->dir);
	free(s);
	return rc;
}

int jc__store_reserve_release(struct jc_store *s)
{
	if (unlinkat(s->dirfd, RESERVE, 0) == 0) {
		jc_log_warn(STORE, "disk full: released %s/%s (%llu KiB) to make room", s->dir,
			    RESERVE, (unsigned long long)(s->reserve_bytes >> 10));
		return 1;
	}
	if (errno != ENOENT)
		jc_log_err(STORE, "remove %s/%s: %s", s->dir, RESERVE, strerror(errno));
	return 0;
}

void jc__store_reserve_make(struct jc_store *s)
{
	struct stat st;
	uint64_t free_bytes;
	char tmp[64];
	if (fstatat(s->dirfd, RESERVE, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
	    jc__store_free_bytes(s, &free_bytes) != 0 ||
	    free_bytes < s->reserve_bytes + JC_STORE_FULL_BYTES)
		return;
	int fd = create_staged(s, RESERVE, FILE_MODE, tmp);
	if (fd < 0)
		return;
	int e = posix_fallocate(fd, 0, (off_t)s->reserve_bytes);
	if (e == 0 && fsync(fd) < 0)
		e = errno;
	if (close(fd) < 0 && e == 0)
		e = errno;
	if (e == 0 && renameat(s->tmpfd, tmp, s->dirfd, RESERVE) == 0)
		return;
	e = e ? e : errno;
	unlinkat(s->tmpfd, tmp, 0);
	jc_log_warn(STORE, "no disk reserve in %s: %s", s->dir, strerror(e));
}

void jc__store_set_reserve(struct jc_store *s, uint64_t bytes)
{
	struct stat st;
	s->reserve_bytes = bytes;
	/* One of another size is made again at this one. */
	if (fstatat(s->dirfd, RESERVE, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size != bytes && unlinkat(s->dirfd, RESERVE, 0) == 0)
		jc__store_reserve_make(s);
}

uint64_t jc__store_reserve_size(struct jc_store *s)
{
	return s->reserve_bytes;
}

int jc__store_disk_full(struct jc_store *s, uint64_t *free_out)
{
	uint64_t free_bytes = UINT64_MAX;
	int full = jc__store_free_bytes(s, &free_bytes) == 0 && free_bytes < JC_STORE_FULL_BYTES;
	if (free_out)
		*free_out = free_bytes;
	return full;
}

void jc__store_close(struct jc_store *s)
{
	if (!s)
		return;
	close(s->quarfd);
	close(s->tmpfd);
	close(s->objfd);
	close(s->dirfd);
	free(s->dir);
	free(s);
}

const char *jc__store_dir(const struct jc_store *s)
{
	return s->dir;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int fsync_dir(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	if (rc < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return close(fd);
}

int jc__store_put(struct jc_store *s, const void *data, size_t size, uint8_t hash_out[16],
		  char *err, size_t errlen)
{
	char name[36], tmp[64];
	const char *step;
	struct stat st;
	int fd, created_ab = 0, e;

	if (!s || !hash_out || (!data && size))
		return jc__fail(err, errlen, 0, "invalid argument"), JC_EINVAL;
	hash_bytes(data ? data : "", size, hash_out);
	object_name(hash_out, name);
	if (fstatat(s->objfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !object_problem(&st, s->uid, size))
		return 0;

	char prefix[9];
	snprintf(prefix, sizeof(prefix), "%.8s", name + 3);
	fd = create_staged(s, prefix, 0400, tmp);
	if (fd < 0) {
		step = "create";
		goto err;
	}
	if (write_all(fd, data, size) < 0 || fsync(fd) < 0) {
		step = "write";
		e = errno;
		close(fd);
		errno = e;
		goto err_after_tmp;
	}
	if (close(fd) < 0) {
		step = "close";
		goto err_after_tmp;
	}
	/* A removal may take an empty fan-out directory between the mkdir and
	 * the rename (jc__store_remove): then it is made again. */
	for (int tries = 0;; tries++) {
		name[2] = '\0';
		if (mkdirat(s->objfd, name, DIR_MODE) == 0) {
			created_ab = 1;
			fchmodat(s->objfd, name, DIR_MODE, 0); /* past the umask; best effort */
		} else if (errno != EEXIST) {
			step = "mkdir objects/ab for";
			goto err_after_tmp;
		}
		name[2] = '/';
		if (renameat(s->tmpfd, tmp, s->objfd, name) == 0)
			break;
		if (errno != ENOENT || tries == 3) {
			step = "rename";
			goto err_after_tmp;
		}
	}
	name[2] = '\0';
	if (fsync_dir(s->objfd, name) < 0 || (created_ab && fsync(s->objfd) < 0)) {
		/* The object is complete; only its durability is in doubt. */
		jc__fail(err, errlen, 0, "fsync %s/objects/%s: %s", s->dir, name, strerror(errno));
		return JC_EIO;
	}
	return 0;

err_after_tmp:
	e = errno;
	unlinkat(s->tmpfd, tmp, 0);
	errno = e;
err:
	e = errno;
	jc__fail(err, errlen, 0, "%s %s/tmp/%s: %s", step, s->dir, tmp, strerror(e));
	return e == ENOSPC || e == EDQUOT ? JC_ENOSPC : JC_EIO;
}

int jc__store_object_is(struct jc_store *s, const uint8_t hash[16], uint64_t expected_size,
			const struct stat *st)
{
	char name[36];
	struct stat now;
	object_name(hash, name);
	return fstatat(s->objfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
	       now.st_dev == st->st_dev && now.st_ino == st->st_ino &&
	       !object_problem(&now, s->uid, expected_size);
}

int jc__store_open_object(struct jc_store *s, const uint8_t hash[16], uint64_t expected_size,
			  int *fd_out)
{
	char name[36];
	const char *why;
	struct stat st;
	int fd;

	*fd_out = -1;
	object_name(hash, name);
	fd = openat(s->objfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			return JC_ENOTFOUND;
		if (errno != ELOOP && errno != ENOTDIR) {
			jc_log_err(STORE, "open %s/objects/%s: %s", s->dir, name, strerror(errno));
			return JC_EIO;
		}
		why = errno == ELOOP ? "a symbolic link" : "objects/ab is not a directory";
		goto corrupt;
	}
	if (fstat(fd, &st) < 0) {
		jc_log_err(STORE, "fstat %s/objects/%s: %s", s->dir, name, strerror(errno));
		close(fd);
		return JC_EIO;
	}
	why = object_problem(&st, s->uid, expected_size);
	if (why) {
		close(fd);
		goto corrupt;
	}
	*fd_out = fd;
	return 0;

corrupt:
	jc_log_warn(STORE, "object %s/objects/%s: %s", s->dir, name, why);
	return JC_ECORRUPT;
}

/*
 * Reads fd from offset 0 (into dst when not NULL, else through a bounce
 * buffer), checking that it holds exactly size bytes hashing to hash.
 */
static int read_check(int fd, uint8_t *dst, const uint8_t hash[16], uint64_t size)
{
	uint8_t bounce[64 * 1024], got[16], extra;
	XXH3_state_t *st = XXH3_createState();
	uint64_t off = 0;
	ssize_t n;
	int rc = JC_ECORRUPT;

	if (!st)
		return JC_ENOMEM;
	XXH3_128bits_reset(st);
	while (off < size) {
		uint8_t *p = dst ? dst + off : bounce;
		size_t cap = dst ? (size_t)1 << 30 : sizeof(bounce);
		size_t want = size - off > cap ? cap : (size_t)(size - off);

		n = pread(fd, p, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			jc_log_err(STORE, "read object: %s", strerror(errno));
			rc = JC_EIO;
			goto out;
		}
		if (n == 0)
			goto out; /* truncated */
		XXH3_128bits_update(st, p, (size_t)n);
		off += (uint64_t)n;
	}
	do
		n = pread(fd, &extra, 1, (off_t)off);
	while (n < 0 && errno == EINTR);
	if (n != 0) {
		rc = n < 0 ? JC_EIO : JC_ECORRUPT;
		goto out;
	}
	XXH128_canonicalFromHash((XXH128_canonical_t *)got, XXH3_128bits_digest(st));
	rc = memcmp(got, hash, 16) == 0 ? 0 : JC_ECORRUPT;
out:
	XXH3_freeState(st);
	return rc;
}

int jc__store_verify_fd(int fd, const uint8_t hash[16], uint64_t expected_size)
{
	return read_check(fd, NULL, hash, expected_size);
}

int jc__store_read_object(struct jc_store *s, const uint8_t hash[16], uint64_t expected_size,
			  uint8_t **data, size_t *size)
{
	uint8_t *buf;
	int fd, rc;

	if (expected_size >= SIZE_MAX)
		return JC_ENOMEM;
	rc = jc__store_open_object(s, hash, expected_size, &fd);
	if (rc)
		return rc;
	buf = malloc(expected_size ? (size_t)expected_size : 1);
	rc = buf ? read_check(fd, buf, hash, expected_size) : JC_ENOMEM;
	close(fd);
	if (rc) {
		if (rc == JC_ECORRUPT) {
			char hex[33];

			jc__hex16(hash, hex);
			jc_log_warn(STORE, "object %s: size or hash mismatch", hex);
		}
		free(buf);
		return rc;
	}
	*data = buf;
	*size = (size_t)expected_size;
	return 0;
}

int jc__store_quarantine(struct jc_store *s, const uint8_t hash[16])
{
	char name[36], dst[96];

	object_name(hash, name);
	/* seq: the same object may be quarantined twice in a second. */
	snprintf(dst, sizeof(dst), "%s.%lld.%ld.%u", name + 3, (long long)time(NULL),
		 (long)getpid(), atomic_fetch_add(&s->seq, 1));
	int rc = renameat(s->objfd, name, s->quarfd, dst);
	if (rc != 0 && errno == ENOENT && revive_subdir(s, &s->quarfd, "quarantine") == 0)
		rc = renameat(s->objfd, name, s->quarfd, dst);
	if (rc == 0) {
		jc_log_warn(STORE, "object %s moved to %s/quarantine/%s", name + 3, s->dir, dst);
		return 0;
	}
	if (errno == ENOENT)
		return JC_ENOTFOUND;
	jc_log_warn(STORE, "quarantine %s: %s; removing it", name + 3, strerror(errno));
	return jc__store_remove(s, hash);
}

int jc__store_remove(struct jc_store *s, const uint8_t hash[16])
{
	char name[36];

	object_name(hash, name);
	if (unlinkat(s->objfd, name, 0) == 0) {
		/* An empty fan-out directory goes too: on most file systems it
		 * holds a block, which counts in the budget. A put that finds it
		 * gone makes it again. */
		name[2] = '\0';
		unlinkat(s->objfd, name, AT_REMOVEDIR);
		return 0;
	}
	if (errno == ENOENT)
		return JC_ENOTFOUND;
	jc_log_err(STORE, "remove %s/objects/%s: %s", s->dir, name, strerror(errno));
	return JC_EIO;
}

/* fdopendir on a fresh descriptor of parent/name (name "." for parent). */
static int is_hex2(const char *n)
{
	return strlen(n) == 2 && strspn(n, "0123456789abcdef") == 2;
}

int jc__store_foreach(struct jc_store *s,
		      int (*cb)(const uint8_t *hash, const char *path, const struct stat *st,
				void *ctx),
		      void *ctx)
{
	DIR *top = jc__store_open_dir(s->objfd, "."), *sub;
	struct dirent *de, *fe;
	char path[4096];
	uint8_t hash[16];
	struct stat st;
	int rc = 0;

	if (!top) {
		jc_log_err(STORE, "read %s/objects: %s", s->dir, strerror(errno));
		return JC_EIO;
	}
	while (!rc && (de = readdir(top))) {
		if (jc__store_is_dots(de->d_name) ||
		    fstatat(s->objfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		snprintf(path, sizeof(path), "%s/objects/%s", s->dir, de->d_name);
		if (!S_ISDIR(st.st_mode) || !is_hex2(de->d_name)) {
			rc = cb(NULL, path, &st, ctx);
			continue;
		}
		sub = jc__store_open_dir(s->objfd, de->d_name);
		if (!sub) {
			jc_log_err(STORE, "read %s: %s", path, strerror(errno));
			rc = JC_EIO;
			break;
		}
		while (!rc && (fe = readdir(sub))) {
			int ok;

			if (jc__store_is_dots(fe->d_name) ||
			    fstatat(dirfd(sub), fe->d_name, &st, AT_SYMLINK_NOFOLLOW))
				continue;
			snprintf(path, sizeof(path), "%s/objects/%s/%s", s->dir, de->d_name,
				 fe->d_name);
			ok = strspn(fe->d_name, "0123456789abcdef") == 32 && !fe->d_name[32] &&
			     !strncmp(fe->d_name, de->d_name, 2) &&
			     jc__unhex16(fe->d_name, hash) == 0;
			rc = cb(ok ? hash : NULL, path, &st, ctx);
		}
		closedir(sub);
	}
	closedir(top);
	return rc;
}

/* Disk usage (st_blocks) of name under parent and, for a directory,
 * everything below it, into *sum; with top_only, a directory's entries are
 * counted as their own inodes only when they are directories (objects/:
 * the fan-out directories, not the objects, which entries are charged). */
