/* SPDX-License-Identifier: MIT */
/* The directory a store lives in: its lock, the local-filesystem check,
 * free and overhead bytes (store.h), and the helpers store.c uses
 * (store_dir.h). Calls nothing of store.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/store_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "core/store.h"
#include "jitcache/jitcache.h"

/* Network filesystems, by statfs f_type (linux/magic.h and fs sources). */
static const struct {
	unsigned long magic;
	const char *name;
} remote_fs[] = {
    {0x6969, "NFS"},	  {0x517B, "SMB"},	{0xFF534D42, "CIFS"},  {0xFE534D42, "SMB2"},
    {0x5346414F, "AFS"},  {0x6B414653, "AFS"},	{0x73757245, "Coda"},  {0x00C36400, "Ceph"},
    {0x01021997, "9p"},	  {0x01161970, "GFS2"}, {0x7461636F, "OCFS2"}, {0x0BD00BD0, "Lustre"},
    {0x47504653, "GPFS"},
};
#define FUSE_MAGIC 0x65735546UL
/* FUSE subtypes (mountinfo "fuse.<x>") known to be remote. */
static const char *const remote_fuse[] = {
    "sshfs",   "s3fs",	 "rclone",   "gcsfuse",	  "glusterfs",	   "ceph-fuse", "davfs",
    "juicefs", "goofys", "blobfuse", "blobfuse2", "mountpoint-s3", "lizardfs",	"moosefs",
};

/* mkdir -p for the parents of path and path itself (mode for all). */
int jc__store_mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	size_t len = strlen(path);

	if (len >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, mode) < 0 && errno != EEXIST ? -1 : 0;
}

int jc__store_lock(const char *dir, int wait_ms, char *err, size_t errlen)
{
	char path[4096], pid[32];
	struct timespec start, now;
	int fd, n;

	if (!dir || !*dir)
		return jc__fail(err, errlen, 0, "no cache directory"), JC_EINVAL;
	if (snprintf(path, sizeof(path), "%s/lock", dir) >= (int)sizeof(path))
		return jc__fail(err, errlen, 0, "%s: path too long", dir), JC_EINVAL;
	if (jc__store_mkdir_p(dir, 0700) < 0) {
		jc__fail(err, errlen, 0, "create %s: %s", dir, strerror(errno));
		return JC_EIO;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		jc__fail(err, errlen, 0, "open %s: %s", path, strerror(errno));
		return JC_EIO;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		ssize_t got;

		if (e == EINTR)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (e == EWOULDBLOCK &&
		    (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 <
			wait_ms) {
			nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000}, NULL);
			continue;
		}
		if (e != EWOULDBLOCK) {
			jc__fail(err, errlen, 0, "flock %s: %s", path, strerror(e));
			close(fd);
			return JC_EIO;
		}
		got = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[got > 0 ? got : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		jc__fail(err, errlen, 0, "%s is in use by another jitcached (pid %s)", dir,
			 *pid ? pid : "unknown");
		close(fd);
		return JC_ELOCKED;
	}
	/* Best effort: the pid is only for the message above. */
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) < 0)
		jc_log_warn(STORE, "write pid to %s: %s", path, strerror(errno));
	return fd;
}

/* For FUSE: the subtype from /proc/self/mountinfo, matched on st_dev. */
static void fuse_subtype(dev_t dev, char *out, size_t outlen)
{
	char line[4096], want[32], type[256];
	FILE *f = fopen("/proc/self/mountinfo", "re");

	snprintf(out, outlen, "fuse");
	if (!f)
		return;
	snprintf(want, sizeof(want), "%u:%u", major(dev), minor(dev));
	while (fgets(line, sizeof(line), f)) {
		char devs[32], *sep;

		/* "id parent major:minor root mountpoint opts [optional...] - type src opts" */
		if (sscanf(line, "%*s %*s %31s", devs) != 1 || strcmp(devs, want) != 0)
			continue;
		sep = strstr(line, " - ");
		if (sep && sscanf(sep + 3, "%255s", type) == 1)
			snprintf(out, outlen, "%s", type);
		break;
	}
	fclose(f);
}

int jc__store_check_local_fd(int fd, const char *dir, char *err, size_t errlen)
{
	const char *remote = NULL, *sub;
	struct statfs sf;
	struct stat st;
	char type[256];

	if (fstatfs(fd, &sf) < 0 || fstat(fd, &st) < 0) {
		jc__fail(err, errlen, 0, "statfs %s: %s", dir, strerror(errno));
		return JC_EIO;
	}
	for (size_t i = 0; !remote && i < sizeof(remote_fs) / sizeof(remote_fs[0]); i++)
		if ((unsigned long)sf.f_type == remote_fs[i].magic)
			remote = remote_fs[i].name;
	if (!remote && (unsigned long)sf.f_type == FUSE_MAGIC) {
		fuse_subtype(st.st_dev, type, sizeof(type));
		sub = strncmp(type, "fuse.", 5) == 0 ? type + 5 : type;
		for (size_t i = 0; i < sizeof(remote_fuse) / sizeof(remote_fuse[0]); i++)
			if (strcmp(sub, remote_fuse[i]) == 0)
				remote = type;
		if (!remote)
			jc_log_warn(STORE,
				    "%s is on a FUSE filesystem (%s): SQLite WAL needs a "
				    "local filesystem with working shared memory",
				    dir, type);
	}
	if (!remote)
		return 0;
	jc__fail(err, errlen, 0,
		 "%s is on a network filesystem (%s): the SQLite index needs a "
		 "local filesystem; choose a local cache directory",
		 dir, remote);
	return JC_EINVAL;
}

int jc__store_check_local(const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		jc__fail(err, errlen, 0, "open %s: %s", dir, strerror(errno));
		return JC_EIO;
	}
	int rc = jc__store_check_local_fd(fd, dir, err, errlen);
	close(fd);
	return rc;
}

/* --- space: free bytes, what the directory holds besides objects ----------- */

DIR *jc__store_open_dir(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d && fd >= 0)
		close(fd);
	return d;
}

int jc__store_is_dots(const char *n)
{
	return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2]));
}

static void usage_at(int parent, const char *name, int depth, int top_only, uint64_t *sum)
{
	struct stat st;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return;
	*sum += (uint64_t)st.st_blocks * 512;
	if (!S_ISDIR(st.st_mode) || depth > 2)
		return;
	DIR *d = jc__store_open_dir(parent, name);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (jc__store_is_dots(de->d_name))
			continue;
		if (top_only) {
			struct stat sub;
			if (fstatat(dirfd(d), de->d_name, &sub, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISDIR(sub.st_mode))
				*sum += (uint64_t)sub.st_blocks * 512;
			continue;
		}
		usage_at(dirfd(d), de->d_name, depth + 1, 0, sum);
	}
	if (d)
		closedir(d);
}

int jc__store_overhead(struct jc_store *s, uint64_t *out)
{
	static const char *const files[] = {"index.sqlite-wal",
					    "index.sqlite-shm",
					    RESERVE,
					    "lock",
					    "tmp",
					    "quarantine",
					    "manifests",
					    "worker-cwd",
					    "jitcached.socket-path",
					    "jitcached.log"};
	struct stat st;
	uint64_t sum = fstat(s->dirfd, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		usage_at(s->dirfd, files[i], 0, 0, &sum);
	usage_at(s->dirfd, "objects", 0, 1, &sum);
	*out = sum;
	return 0;
}

int jc__store_free_bytes(struct jc_store *s, uint64_t *out)
{
	struct statvfs sv;

	if (fstatvfs(s->dirfd, &sv) < 0) {
		jc_log_err(STORE, "statvfs %s: %s", s->dir, strerror(errno));
		return JC_EIO;
	}
	*out = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}
