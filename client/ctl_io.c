/* SPDX-License-Identifier: MIT */
/* jitcachectl: reading inputs and writing an artifact where -o says (ctl.h). */
#include "client/ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/includes.h"

/* The bytes of path, malloc'd; -1 with errno (EFBIG at JC_FRAME_MAX, the
 * most a request carries: /dev/zero is not read until memory runs out). */
int jc__ctl_read_file(const char *path, uint8_t **data, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 65536, n = 0;
	uint8_t *buf = malloc(cap);
	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		if (cap >= JC_FRAME_MAX) {
			free(buf);
			fclose(f);
			errno = EFBIG;
			return -1;
		}
		uint8_t *p = realloc(buf, cap * 2);
		if (!p) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = p;
		cap *= 2;
	}
	int err = ferror(f);
	fclose(f);
	if (!buf || err) {
		free(buf);
		return -1;
	}
	*data = buf;
	*size = n;
	return 0;
}

static int write_all(int fd, const void *data, size_t size)
{
	const char *p = data;
	while (size) {
		ssize_t n = write(fd, p, size);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		size -= (size_t)n;
	}
	return 0;
}

/* The directory part of path ("." when none), into dir. */
static void dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	snprintf(dir, len, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
		 slash ? path : ".");
}

/*
 * A symbolic link (its lstat in st) that -o may follow: owned by this user
 * or root, in a directory nobody else may write (so nobody else could have
 * put it there, nor swap it). Else 0, with why it is not followed in why.
 */
static int link_trusted(const char *path, const struct stat *st, char *why, size_t len)
{
	char dir[4200];
	struct stat ds;
	dir_of(path, dir, sizeof(dir));
	if (st->st_uid != geteuid() && st->st_uid != 0)
		snprintf(why, len, "a symbolic link owned by uid %u (neither this user nor root)",
			 (unsigned)st->st_uid);
	else if (stat(dir, &ds) != 0 || (ds.st_mode & S_IWOTH))
		snprintf(why, len, "a symbolic link in %s, a directory anyone may write", dir);
	else
		return 1;
	return 0;
}

/* The bytes into a temporary file made with mkstemp beside path (O_EXCL,
 * an unpredictable name), renamed over path: a regular file, or a link not
 * to be followed, is replaced, never written through. The mode is that of
 * the regular file replaced (st, NULL: none) less its set-ID bits, else
 * 0666 & ~umask. -1 with errno. */
static int replace_output(const char *path, const struct stat *st, const void *data, size_t size)
{
	char tmp[4200];
	const char *slash = strrchr(path, '/');
	int n = slash ? snprintf(tmp, sizeof(tmp), "%.*s/.%s.XXXXXX", (int)(slash - path), path,
				 slash + 1)
		      : snprintf(tmp, sizeof(tmp), ".%s.XXXXXX", path);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -1;
	mode_t mask = umask(0);
	umask(mask);
	int rc = write_all(fd, data, size);
	/* Not its set-ID bits: the new file is ours, and a set-user-ID file
	 * another user owned must not become one of ours (root's, say). */
	rc = rc ?: fchmod(fd, st ? st->st_mode & 01777 : 0666 & ~mask);
	int e = errno;
	if (close(fd) != 0 && rc == 0)
		e = errno, rc = -1;
	if (rc == 0 && rename(tmp, path) != 0)
		e = errno, rc = -1;
	if (rc != 0) {
		unlink(tmp);
		errno = e;
	}
	return rc;
}

/* The bytes written into the existing node at path (a device, a FIFO, a
 * regular file reached through links this user may follow, /proc's links to
 * open files), truncating a regular one; follow: path may be a link (one
 * of /proc's). -1 with errno. */
static int write_through(const char *path, int follow, const void *data, size_t size)
{
	struct stat st;
	int regular = stat(path, &st) == 0 && S_ISREG(st.st_mode);
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | (follow ? 0 : O_NOFOLLOW) |
				(regular ? O_TRUNC : 0));
	if (fd < 0)
		return -1;
	int rc = write_all(fd, data, size);
	int e = errno;
	if (close(fd) != 0 && rc == 0)
		return -1;
	errno = e;
	return rc;
}

#define MAX_LINKS 40 /* as the kernel's path walk */

/*
 * Writes the artifact to path; 0, or -1 with the reason in why. "-" is
 * standard output. path is walked link by link: a symbolic link is followed
 * only when this user may trust it (link_trusted); the first one it may not
 * is replaced with a regular file (replace_output), or, where it cannot be
 * (another user's link in a sticky directory), nothing is written. A link
 * in /proc (/dev/stdout's /proc/self/fd/1) is opened as the kernel resolves
 * it. At the end of the walk: a node that is not a regular file (a device,
 * a FIFO) is written through, never replaced; a regular file named itself,
 * or no file, is replaced by replace_output (a regular file only when this
 * user may write it); a regular file reached through links is written
 * through.
 */
int jc__ctl_write_output(const char *path, const void *data, size_t size, char *why, size_t len)
{
	char cur[4200], next[4200], target[4096], dir[4200], untrusted[4300];
	struct stat st;
	struct statfs sf;
	int rc;
	if (strcmp(path, "-") == 0) {
		rc = write_all(STDOUT_FILENO, data, size) == 0 && fflush(stdout) == 0 ? 0 : -1;
		goto out;
	}
	snprintf(cur, sizeof(cur), "%s", path);
	for (int links = 0;; links++) {
		if (lstat(cur, &st) != 0) {
			rc = errno == ENOENT ? replace_output(cur, NULL, data, size) : -1;
			goto out;
		}
		if (!S_ISLNK(st.st_mode))
			break;
		if (!link_trusted(cur, &st, untrusted, sizeof(untrusted))) {
			if (replace_output(cur, NULL, data, size) == 0)
				return 0;
			snprintf(why, len,
				 "not writing %s: %s is %s: not followed, and it cannot be "
				 "replaced: %s",
				 path, cur, untrusted, strerror(errno));
			return -1;
		}
		dir_of(cur, dir, sizeof(dir));
		if (statfs(dir, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC) {
			rc = write_through(cur, 1, data, size);
			goto out;
		}
		ssize_t n = readlink(cur, target, sizeof(target) - 1);
		if (n < 0 || links == MAX_LINKS) {
			if (n >= 0)
				errno = ELOOP;
			rc = -1;
			goto out;
		}
		target[n] = '\0';
		if ((target[0] == '/' ? snprintf(next, sizeof(next), "%s", target)
				      : snprintf(next, sizeof(next), "%s/%s", dir, target)) >=
		    (int)sizeof(next)) {
			errno = ENAMETOOLONG;
			rc = -1;
			goto out;
		}
		memcpy(cur, next, sizeof(cur));
	}
	if (!S_ISREG(st.st_mode) || strcmp(cur, path) != 0)
		rc = write_through(cur, 0, data, size);
	else if (access(cur, W_OK) != 0)
		rc = -1; /* not ours to replace */
	else
		rc = replace_output(cur, &st, data, size);
out:
	if (rc != 0)
		snprintf(why, len, "cannot write %s: %s", cur, strerror(errno));
	return rc;
}

/* The options that say which daemon: --socket and --cache-dir, as jitcache.h
 * means them. compile: without either, every step (auto-start, in-process
 * fallback) as the environment says; with one, that daemon only, or an
 * error. Admin commands never auto-start nor compile. */
