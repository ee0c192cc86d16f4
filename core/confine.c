/* SPDX-License-Identifier: MIT */
/* Kernel confinement of a compile: see confine.h. */
#include "core/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jitcache/jitcache.h"

static int raw_open(const char *path, int flags, mode_t mode)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static int raw_stat(const char *path, struct stat *st)
{
	return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, 0);
}

const char *jc__confine_name(int mode)
{
	switch (mode) {
	case JC_CONFINE_NONE:
		return "none";
	case JC_CONFINE_LANDLOCK:
		return "landlock";
	case JC_CONFINE_USERNS:
		return "userns";
	default:
		return NULL;
	}
}

int jc__confine_parse(const char *name)
{
	for (int m = JC_CONFINE_NONE; m <= JC_CONFINE_USERNS; m++)
		if (strcmp(name, jc__confine_name(m)) == 0)
			return m;
	return -1;
}

/* Landlock rights and attribute fields newer than the installed header may know. */
#define LL_FS_REFER		      (1ull << 13)
#define LL_FS_TRUNCATE		      (1ull << 14)
#define LL_FS_IOCTL_DEV		      (1ull << 15)
#define LL_NET_BIND_TCP		      (1ull << 0)
#define LL_NET_CONNECT_TCP	      (1ull << 1)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ull << 0)
#define LL_SCOPE_SIGNAL		      (1ull << 1)

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;	     /* ABI 6 */
};

static int landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	return abi > 0 ? (int)abi : 0;
}

/* Writes text to a /proc/self file (uid_map and friends). */
static int write_proc(const char *path, const char *text)
{
	int fd = raw_open(path, O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A user namespace mapping our uid and gid to themselves, plus a mount namespace. */
static int enter_namespaces(char *err, size_t errlen)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
		snprintf(err, errlen, "unshare(CLONE_NEWUSER | CLONE_NEWNS): %s", strerror(errno));
		return -1;
	}
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	int rc = write_proc("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	rc = rc ?: write_proc("/proc/self/setgroups", "deny");
	rc = rc ?: write_proc("/proc/self/gid_map", map);
	if (rc != 0)
		snprintf(err, errlen, "user namespace id maps: %s", strerror(errno));
	return rc;
}

int jc__confine_detect(int *abi, char *why, size_t len)
{
	*abi = landlock_abi();
	if (*abi) {
		snprintf(why, len, "Landlock ABI %d", *abi);
		return JC_CONFINE_LANDLOCK;
	}
	const char *ll =
	    strerror(errno); /* ENOSYS: not built in; EOPNOTSUPP: not enabled at boot */
	pid_t pid = fork();
	if (pid == 0) {
		char err[128];
		_exit(enter_namespaces(err, sizeof(err)) == 0 ? 0 : 1);
	}
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		snprintf(why, len, "no Landlock (%s); user and mount namespaces", ll);
		return JC_CONFINE_USERNS;
	}
	snprintf(why, len, "no Landlock (%s) and no user namespaces", ll);
	return JC_CONFINE_NONE;
}

static int landlock_confine(const char *const *roots, size_t n_roots, char *err, size_t errlen)
{
	int abi = landlock_abi();
	if (!abi) {
		snprintf(err, errlen, "Landlock is not available: %s", strerror(errno));
		return JC_EINTERNAL;
	}
	struct ll_ruleset_attr attr = {.handled_access_fs =
					   (1ull << 13) - 1}; /* ABI 1: EXECUTE..MAKE_SYM */
	size_t size = sizeof(attr.handled_access_fs);
	if (abi >= 2)
		attr.handled_access_fs |= LL_FS_REFER;
	if (abi >= 3)
		attr.handled_access_fs |= LL_FS_TRUNCATE;
	if (abi >= 4) {
		attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
		size = offsetof(struct ll_ruleset_attr, scoped);
	}
	if (abi >= 5)
		attr.handled_access_fs |= LL_FS_IOCTL_DEV;
	if (abi >= 6) {
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (rs < 0) {
		snprintf(err, errlen, "landlock_create_ruleset (ABI %d): %s", abi, strerror(errno));
		return JC_EINTERNAL;
	}
	int rc = 0;
	for (size_t i = 0; i <= n_roots && rc == 0; i++) {
		const char *p = i < n_roots ? roots[i] : "/etc/localtime";
		int fd = raw_open(p, O_PATH | O_CLOEXEC, 0);
		struct stat st;
		if (fd < 0)
			continue; /* a declared directory that does not exist: nothing to grant */
		struct landlock_path_beneath_attr pb = {.parent_fd = fd};
		pb.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE;
		if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
			pb.allowed_access |= LANDLOCK_ACCESS_FS_READ_DIR;
		if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0) {
			snprintf(err, errlen, "landlock_add_rule %s: %s", p, strerror(errno));
			rc = JC_EINTERNAL;
		}
		close(fd);
	}
	if (rc == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		rc = JC_EINTERNAL;
	}
	if (rc == 0 && syscall(SYS_landlock_restrict_self, rs, 0) != 0) {
		snprintf(err, errlen, "landlock_restrict_self: %s", strerror(errno));
		rc = JC_EINTERNAL;
	}
	close(rs);
	return rc;
}

/* mkdir -p of path (0755). */
static int mkdirs(const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(p, 0755) != 0 && errno != EEXIST)
				return -1;
			if (!c)
				return 0;
			*s = c;
		}
	}
}

/* Bind-mounts src read-only at the same path under top. */
static int bind_ro(const char *top, const char *src, char *err, size_t errlen)
{
	char dst[PATH_MAX * 2];
	struct stat st;
	struct statvfs sv;
	if (raw_stat(src, &st) != 0)
		return 0; /* nothing to show */
	snprintf(dst, sizeof(dst), "%s%s", top, src);
	int ok;
	if (S_ISDIR(st.st_mode)) {
		ok = mkdirs(dst) == 0;
	} else {
		char parent[PATH_MAX * 2];
		snprintf(parent, sizeof(parent), "%s", dst);
		*strrchr(parent, '/') = '\0';
		int fd = -1;
		ok = mkdirs(parent) == 0 &&
		     (fd = raw_open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) >= 0;
		if (fd >= 0)
			close(fd);
	}
	unsigned long keep = 0;
	if (ok && statvfs(src, &sv) == 0)
		keep = (sv.f_flag & ST_NOSUID ? MS_NOSUID : 0) |
		       (sv.f_flag & ST_NODEV ? MS_NODEV : 0) |
		       (sv.f_flag & ST_NOEXEC ? MS_NOEXEC : 0);
	if (!ok || mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0 ||
	    mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | keep, NULL) != 0) {
		snprintf(err, errlen, "bind mount of %s: %s", src, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * A private root: a tmpfs mounted over the (empty) working directory, the
 * allowed roots bound read-only at their own paths inside it, and an empty
 * directory at the working directory's path; then chroot into it.
 */
static int userns_confine(const char *const *roots, size_t n_roots, const char *cwd, char *err,
			  size_t errlen)
{
	if (enter_namespaces(err, errlen) != 0)
		return JC_EINTERNAL;
	const char *top = cwd;
	char inner[PATH_MAX * 2];
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("jitcache-root", top, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0755,size=1m") != 0) {
		snprintf(err, errlen, "private root on %s: %s", top, strerror(errno));
		return JC_EINTERNAL;
	}
	for (size_t i = 0; i <= n_roots; i++)
		if (bind_ro(top, i < n_roots ? roots[i] : "/etc/localtime", err, errlen) != 0)
			return JC_EINTERNAL;
	snprintf(inner, sizeof(inner), "%s%s", top, cwd);
	if (mkdirs(inner) != 0 || chmod(inner, 0500) != 0 || chroot(top) != 0 || chdir(cwd) != 0 ||
	    mount(NULL, "/", NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
		snprintf(err, errlen, "entering the private root: %s", strerror(errno));
		return JC_EINTERNAL;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return JC_EINTERNAL;
	}
	return 0;
}

int jc__confine_apply(int mode, const char *const *roots, size_t n_roots, const char *cwd,
		      char *err, size_t errlen)
{
	switch (mode) {
	case JC_CONFINE_NONE:
		return 0;
	case JC_CONFINE_LANDLOCK:
		return landlock_confine(roots, n_roots, err, errlen);
	case JC_CONFINE_USERNS:
		return userns_confine(roots, n_roots, cwd, err, errlen);
	default:
		snprintf(err, errlen, "unknown confinement %d", mode);
		return JC_EINTERNAL;
	}
}
