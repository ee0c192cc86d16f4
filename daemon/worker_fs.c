/* SPDX-License-Identifier: MIT */
/* What NVRTC may read in a compile worker, and what it did: see worker_fs.h. */
/* The interposers define both open and open64 (and so on): without this the
 * headers would rename open to open64 and the two would collide. */
#undef _FILE_OFFSET_BITS
#include "daemon/worker_fs.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/inc_memo.h"
#include "common/includes.h"
#include "common/util.h"
#include "core/confine.h"
#include "jitcache/jitcache.h"

#define MAX_DEPS 200000
/* The interposers must be in the executable's dynamic symbol table. */
#define JC_INTERPOSE	  __attribute__((visibility("default")))
#define MAX_REFUSAL_LINES 32

/* --- the record ------------------------------------------------------------------ */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int recording;
static char cwd[PATH_MAX];
/* A name-free job's (req.h) program directory, folded, or "": its client
 * found none of the quoted includes NVRTC looks for there first (docs/shim.md) */
static char progdir[PATH_MAX];
static char **roots; /* allowed roots: as given and as realpath'd, toolkit first */
static size_t n_roots, n_toolkit_roots;
static struct jc_dep *deps;
static size_t n_deps, cap_deps;
static int overflow, oom;
static char *refusals; /* log lines */
static size_t refusals_len;
static int n_refusals;

static void add_dep(const char *path, uint32_t kind, const struct stat *st)
{
	if (n_deps >= MAX_DEPS) {
		overflow = 1;
		return;
	}
	if (n_deps == cap_deps) {
		size_t cap = cap_deps ? cap_deps * 2 : 256;
		struct jc_dep *v = realloc(deps, cap * sizeof(*v));
		if (!v) {
			oom = 1;
			return;
		}
		deps = v;
		cap_deps = cap;
	}
	struct jc_dep *d = &deps[n_deps];
	memset(d, 0, sizeof(*d));
	if (!(d->path = strdup(path))) {
		oom = 1;
		return;
	}
	d->kind = kind;
	if (kind == JC_DEP_FILE && st) {
		d->dev = (uint64_t)st->st_dev;
		d->ino = (uint64_t)st->st_ino;
		d->size = (uint64_t)st->st_size;
		d->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
		d->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
	}
	n_deps++;
}

static int under(const char *path, const char *root);
static void fold(const char *in, char *out, size_t len);

/* Adds "jitcache: refused PATH: WHY" to the log, once per path; not for
 * NVRTC's routine probes of its (empty, private) working directory, nor for
 * the run-time files it reads about its own process and machine (/proc,
 * /sys: seen on the H200 host, e.g. /proc/cpuinfo, /proc/self/maps), which
 * are refused all the same but are no header a user named. */
static void refusal(const char *path, const char *why)
{
	char folded[PATH_MAX];
	fold(path, folded, sizeof(folded));
	if (n_refusals >= MAX_REFUSAL_LINES || (path[0] == '/' && under(folded, cwd)) ||
	    (progdir[0] && path[0] == '/' && under(folded, progdir)) || under(folded, "/proc") ||
	    under(folded, "/sys"))
		return;
	for (size_t i = 0; refusals && i < refusals_len;) { /* one line per path */
		const char *line = refusals + i, *nl = strchr(line, '\n');
		size_t plen = strlen(path);
		if (strncmp(line, "jitcache: refused ", 18) == 0 &&
		    strncmp(line + 18, path, plen) == 0 && line[18 + plen] == ':')
			return;
		i = (size_t)(nl - refusals) + 1;
	}
	char *line;
	int n = asprintf(&line, "jitcache: refused %s: %s\n", path, why);
	if (n < 0)
		return;
	char *p = realloc(refusals, refusals_len + (size_t)n + 1);
	if (p) {
		memcpy(p + refusals_len, line, (size_t)n + 1);
		refusals = p;
		refusals_len += (size_t)n;
		n_refusals++;
	}
	free(line);
}

/* --- paths and the policy ---------------------------------------------------------- */

/* path made absolute (joined to cwd) with empty and "." components dropped;
 * ".." kept (it is resolved by the kernel, not here). 0, or -1 if too long. */
static int normalise(const char *path, char *out, size_t len)
{
	char joined[PATH_MAX * 2];
	int n = path[0] == '/' ? snprintf(joined, sizeof(joined), "%s", path)
			       : snprintf(joined, sizeof(joined), "%s/%s", cwd, path);
	if (n < 0 || (size_t)n >= sizeof(joined))
		return -1;
	return jc__path_lexical(joined, out, len, 0);
}

/* path with ".." folded lexically ("/" when too long: never under a root but /). */
static void fold(const char *in, char *out, size_t len)
{
	if (jc__path_lexical(in, out, len, 1) != 0)
		snprintf(out, len, "%s", "/(too long)");
}

static int under(const char *path, const char *root)
{
	size_t n = strlen(root);
	while (n > 1 && root[n - 1] == '/')
		n--;
	if (n == 1 && root[0] == '/')
		return 1;
	return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* ALLOW: under a declared include directory; TOOLKIT: under the toolkit
 * tree (covered by the toolkit identity in every key: not recorded). */
enum verdict { ALLOW, TOOLKIT, DENY };

static enum verdict root_verdict(const char *path)
{
	for (size_t i = 0; i < n_roots; i++)
		if (under(path, roots[i]))
			return i < n_toolkit_roots ? TOOLKIT : ALLOW;
	return DENY;
}

/*
 * The policy for path (normalised into abs): the lexical verdict, unless the
 * real location of the path (or, for a path that does not exist, of its
 * directory) says otherwise: outside every root is DENY, inside the toolkit
 * tree is TOOLKIT.
 */
static enum verdict judge(const char *path, char *abs, size_t len)
{
	char folded[PATH_MAX], real[PATH_MAX];
	if (normalise(path, abs, len) != 0)
		return DENY;
	fold(abs, folded, sizeof(folded));
	enum verdict v = root_verdict(folded);
	/* The private, empty working directory is never read, even where a
	 * declared directory holds it (a cache inside a -I tree); nor is
	 * /proc, /sys or /dev (-I / declares them too): /proc/self/root/etc/X
	 * is /etc/X after realpath, but no header. */
	if (v == DENY || under(folded, cwd) || jc__kernel_path(folded))
		return DENY;
	if (realpath(abs, real))
		return under(real, cwd) || jc__kernel_path(real) ? DENY : root_verdict(real);
	char *slash = strrchr(abs, '/');
	if (slash && slash != abs) {
		*slash = '\0';
		int found = realpath(abs, real) != NULL;
		*slash = '/';
		if (found)
			return root_verdict(real);
	}
	return v;
}

static const char *special_kind(mode_t m)
{
	return S_ISFIFO(m)   ? "a FIFO"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
	       : S_ISSOCK(m) ? "a socket"
			     : "not a regular file";
}

#define OUTSIDE "outside the toolkit tree and the request's include directories"

/* --- the real calls ------------------------------------------------------------------ */

#define REAL(name, ret, ...)                                                                       \
	static ret (*real_##name)(__VA_ARGS__);                                                    \
	static ret (*get_##name(void))(__VA_ARGS__)                                                \
	{                                                                                          \
		if (!real_##name)                                                                  \
			*(void **)&real_##name = dlsym(RTLD_NEXT, #name);                          \
		return real_##name;                                                                \
	}

REAL(open, int, const char *, int, ...)
REAL(open64, int, const char *, int, ...)
REAL(openat, int, int, const char *, int, ...)
REAL(openat64, int, int, const char *, int, ...)
REAL(fopen, FILE *, const char *, const char *)
REAL(fopen64, FILE *, const char *, const char *)
REAL(stat, int, const char *, struct stat *)
REAL(lstat, int, const char *, struct stat *)
REAL(access, int, const char *, int)
REAL(opendir, DIR *, const char *)

/* The raw syscalls, for the checks made inside an interposer. */
static int raw_open(const char *path, int flags, mode_t mode)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static int raw_stat(const char *path, struct stat *st, int nofollow)
{
	return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, nofollow ? AT_SYMLINK_NOFOLLOW : 0);
}

/*
 * An open for reading of an allowed path, done here: O_NONBLOCK so that a
 * FIFO cannot hold us, then checked. Returns the descriptor (flags as the
 * caller asked) or -1 with errno.
 */
static int admitted_open(const char *abs, const char *path, int flags, mode_t mode)
{
	int fd = raw_open(path, flags | O_NONBLOCK | O_NOCTTY, mode);
	if (fd < 0) {
		int e = errno;
		add_dep(abs, JC_DEP_ABSENT, NULL);
		errno = e;
		return -1;
	}
	struct stat st;
	struct statfs sf;
	const char *why = NULL;
	if (fstat(fd, &st) != 0)
		why = "cannot fstat it";
	else if (S_ISDIR(st.st_mode))
		return fd; /* opened as a directory; reading it fails with EISDIR */
	else if (!S_ISREG(st.st_mode))
		why = special_kind(st.st_mode);
	else if (fstatfs(fd, &sf) == 0 && jc__pseudo_fs(sf.f_type))
		why = "a /proc, /sys or other kernel file";
	if (why) {
		close(fd);
		add_dep(abs, JC_DEP_SPECIAL, NULL);
		refusal(abs, why);
		errno = EACCES;
		return -1;
	}
	if (!(flags & O_NONBLOCK))
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	add_dep(abs, JC_DEP_FILE, &st);
	return fd;
}

/* The interposed open: -2 to pass through (not recording), else the result. */
static int guarded_open(int dirfd, const char *path, int flags, mode_t mode)
{
	if (!recording || !path)
		return -2;
	char abs[PATH_MAX];
	enum verdict v;
	pthread_mutex_lock(&lock);
	int fd = -1, e = ENOENT;
	if (dirfd != AT_FDCWD && path[0] != '/') {
		snprintf(abs, sizeof(abs), "(fd %d)/%s", dirfd, path);
		add_dep(abs, JC_DEP_DENIED, NULL);
		refusal(abs, "a path relative to a directory descriptor");
	} else if ((v = judge(path, abs, sizeof(abs))) == DENY) {
		add_dep(abs, JC_DEP_DENIED, NULL);
		refusal(abs, OUTSIDE);
	} else if (v == TOOLKIT && (flags & O_ACCMODE) == O_RDONLY &&
		   !(flags & (O_CREAT | O_TRUNC))) {
		fd = raw_open(path, flags, mode);
		e = errno;
	} else if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC))) {
		add_dep(abs, JC_DEP_DENIED, NULL);
		refusal(abs, "an open for writing");
		e = EACCES;
	} else {
		fd = admitted_open(abs, path, flags, mode);
		e = errno;
	}
	pthread_mutex_unlock(&lock);
	errno = e;
	return fd;
}

static mode_t mode_arg(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

#define OPEN_BODY(dirfd, call)                                                                     \
	va_list ap;                                                                                \
	va_start(ap, flags);                                                                       \
	mode_t mode = mode_arg(flags, ap);                                                         \
	va_end(ap);                                                                                \
	int fd = guarded_open(dirfd, path, flags, mode);                                           \
	return fd != -2 ? fd : call;

JC_INTERPOSE int open(const char *path, int flags,
		      ...){OPEN_BODY(AT_FDCWD, get_open()(path, flags, mode))}

JC_INTERPOSE int open64(const char *path, int flags,
			...){OPEN_BODY(AT_FDCWD, get_open64()(path, flags, mode))}

JC_INTERPOSE int openat(int dirfd, const char *path, int flags,
			...){OPEN_BODY(dirfd, get_openat()(dirfd, path, flags, mode))}

JC_INTERPOSE int openat64(int dirfd, const char *path, int flags, ...)
{
	OPEN_BODY(dirfd, get_openat64()(dirfd, path, flags, mode))
}

static FILE *guarded_fopen(const char *path, const char *mode,
			   FILE *(*real)(const char *, const char *))
{
	if (!recording || !path || !mode)
		return real(path, mode);
	int write = strpbrk(mode, "wa+") != NULL;
	int fd = guarded_open(AT_FDCWD, path,
			      write ? O_RDWR : O_RDONLY | (strchr(mode, 'e') ? O_CLOEXEC : 0), 0);
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, mode);
	if (!f) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

JC_INTERPOSE FILE *fopen(const char *path, const char *mode)
{
	return guarded_fopen(path, mode, get_fopen());
}

JC_INTERPOSE FILE *fopen64(const char *path, const char *mode)
{
	return guarded_fopen(path, mode, get_fopen64());
}

/*
 * The interposed stat-like probes: -2 to pass through, else -1 (refused,
 * errno set) or 1 (allowed: the caller makes the real call). Records what
 * the probe finds (its own stat, following links unless nofollow).
 */
static int guarded_probe(const char *path, int nofollow)
{
	if (!recording || !path)
		return -2;
	char abs[PATH_MAX];
	struct stat st;
	int rc = 1, e = 0;
	pthread_mutex_lock(&lock);
	enum verdict v = judge(path, abs, sizeof(abs));
	if (v == DENY) {
		/* No log line for a probe (NVRTC stats directories as a matter of
		 * course): only what it then tries to read is named in the log. */
		add_dep(abs, JC_DEP_DENIED, NULL);
		rc = -1, e = ENOENT;
	} else if (v == TOOLKIT) {
		/* covered by the toolkit identity */
	} else if (raw_stat(path, &st, nofollow) != 0) {
		add_dep(abs, JC_DEP_ABSENT, NULL);
	} else if (S_ISREG(st.st_mode)) {
		add_dep(abs, JC_DEP_FILE, &st);
	} else if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) {
		add_dep(abs, JC_DEP_SPECIAL, NULL);
		refusal(abs, special_kind(st.st_mode));
		rc = -1, e = EACCES;
	}
	pthread_mutex_unlock(&lock);
	if (rc < 0)
		errno = e;
	return rc;
}

#define PROBE(nofollow, call)                                                                      \
	int g = guarded_probe(path, nofollow);                                                     \
	return g == -1 ? -1 : call;

/* The real stat or lstat (a raw system call where libc exports none: glibc
 * before 2.33 had only __xstat). */
static int real_stat_call(const char *path, struct stat *st, int nofollow)
{
	int (*f)(const char *, struct stat *) = nofollow ? get_lstat() : get_stat();
	return f ? f(path, st) : raw_stat(path, st, nofollow);
}

JC_INTERPOSE int stat(const char *path, struct stat *st){PROBE(0, real_stat_call(path, st, 0))}

JC_INTERPOSE int stat64(const char *path,
			struct stat64 *st){PROBE(0, real_stat_call(path, (struct stat *)st, 0))}

JC_INTERPOSE int lstat(const char *path, struct stat *st){PROBE(1, real_stat_call(path, st, 1))}

JC_INTERPOSE int lstat64(const char *path,
			 struct stat64 *st){PROBE(1, real_stat_call(path, (struct stat *)st, 1))}

/* glibc's old stat ABI, which NVRTC 13.0 imports (__xstat@GLIBC_2.2.5, a
 * compat symbol dlsym cannot find): on x86_64 and aarch64 its struct is
 * struct stat for every version NVRTC passes, so the modern call serves. */
JC_INTERPOSE int __xstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	PROBE(0, real_stat_call(path, st, 0))
}

JC_INTERPOSE int __xstat64(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	PROBE(0, real_stat_call(path, (struct stat *)st, 0))
}

JC_INTERPOSE int __lxstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	PROBE(1, real_stat_call(path, st, 1))
}

JC_INTERPOSE int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	PROBE(1, real_stat_call(path, (struct stat *)st, 1))
}

JC_INTERPOSE int access(const char *path, int mode){PROBE(0, get_access()(path, mode))}

JC_INTERPOSE DIR *opendir(const char *path)
{
	if (!recording)
		return get_opendir()(path);
	char abs[PATH_MAX];
	pthread_mutex_lock(&lock);
	DIR *d = NULL;
	int e = ENOENT;
	enum verdict v = judge(path, abs, sizeof(abs));
	if (v == DENY) {
		add_dep(abs, JC_DEP_DENIED, NULL);
		refusal(abs, OUTSIDE);
	} else {
		d = get_opendir()(path);
		e = errno;
		if (v == ALLOW)
			add_dep(abs, d ? JC_DEP_DIR : JC_DEP_ABSENT, NULL);
	}
	pthread_mutex_unlock(&lock);
	if (!d)
		errno = e;
	return d;
}

/* --- begin / end ------------------------------------------------------------------------ */

static void free_roots(void)
{
	for (size_t i = 0; i < n_roots; i++)
		free(roots[i]);
	free(roots);
	roots = NULL;
	n_roots = n_toolkit_roots = 0;
}

static int add_root(const char *dir)
{
	char real[PATH_MAX];
	char **v = realloc(roots, (n_roots + 2) * sizeof(*v));
	if (!v)
		return JC_ENOMEM;
	roots = v;
	if (!(roots[n_roots] = strdup(dir)))
		return JC_ENOMEM;
	n_roots++;
	if (realpath(dir, real) && strcmp(real, dir) != 0) {
		if (!(roots[n_roots] = strdup(real)))
			return JC_ENOMEM;
		n_roots++;
	}
	return 0;
}

/* Allows the chain of targets of link, a keyed header that is a symbolic
 * link (req.h, follow): each step outside every root so far, as written
 * (folded) and as realpath'd. */
static int add_link_chain(const char *link)
{
	struct jc_strv chain = {0};
	uint8_t hash[16];
	int rc = jc__inc_link_walk(link, hash, &chain);
	rc = rc < 0 && rc != JC_ENOMEM ? 0 : rc; /* gone since it was keyed: nothing to allow */
	for (size_t i = 0; rc >= 0 && i < chain.n; i++) {
		char folded[PATH_MAX], real[PATH_MAX];
		fold(chain.v[i], folded, sizeof(folded));
		const char *p = realpath(folded, real) ? real : folded;
		if (root_verdict(folded) == DENY && root_verdict(p) == DENY)
			rc = add_root(folded);
	}
	jc__strv_clear(&chain);
	return rc < 0 ? rc : 0;
}

int jc__wfs_begin(const struct jc_req *req, const char *toolkit_root, const char *dir)
{
	free_roots();
	snprintf(cwd, sizeof(cwd), "%s", dir);
	const char *slash =
	    req->name_free && req->source_name ? strrchr(req->source_name, '/') : NULL;
	progdir[0] = '\0';
	if (slash && slash != req->source_name && req->source_name[0] == '/') {
		char dir_of[PATH_MAX];
		snprintf(dir_of, sizeof(dir_of), "%.*s", (int)(slash - req->source_name),
			 req->source_name);
		fold(dir_of, progdir, sizeof(progdir));
	}
	int rc = toolkit_root && *toolkit_root ? add_root(toolkit_root) : 0;
	/* An -I directory inside the toolkit is the toolkit's, also as spelt
	 * (a probe below it of a directory it lacks has no realpath). */
	for (size_t i = 0; rc == 0 && i < req->include_dirs.n; i++)
		if (jc__inc_in_toolkit(toolkit_root, req->include_dirs.v[i]))
			rc = add_root(req->include_dirs.v[i]);
	n_toolkit_roots = n_roots;
	for (size_t i = 0; rc == 0 && i < req->include_dirs.n; i++)
		if (!jc__inc_in_toolkit(toolkit_root, req->include_dirs.v[i]))
			rc = add_root(req->include_dirs.v[i]);
	for (size_t i = 0; rc == 0 && i < req->follow.n; i++)
		rc = add_link_chain(req->follow.v[i]);
	n_deps = 0;
	overflow = oom = 0;
	refusals_len = 0;
	n_refusals = 0;
	if (refusals)
		refusals[0] = '\0';
	recording = rc == 0;
	return rc;
}

static int cmp_dep(const void *a, const void *b)
{
	const struct jc_dep *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	if (c)
		return c;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return memcmp(&x->dev, &y->dev,
		      offsetof(struct jc_dep, ctime_ns) + sizeof(x->ctime_ns) -
			  offsetof(struct jc_dep, dev));
}

int jc__wfs_end(struct jc_res *res)
{
	recording = 0;
	if (overflow) {
		add_dep("", JC_DEP_OVERFLOW, NULL);
		refusal("(record)",
			"more file accesses than the worker records; the result is not stored");
	}
	if (n_deps)
		qsort(deps, n_deps, sizeof(*deps), cmp_dep);
	size_t k = 0;
	for (size_t i = 0; i < n_deps; i++) {
		if (k && cmp_dep(&deps[k - 1], &deps[i]) == 0) {
			free(deps[i].path);
			continue;
		}
		deps[k++] = deps[i];
	}
	res->deps = deps;
	res->n_deps = k;
	deps = NULL;
	n_deps = cap_deps = 0;
	if (refusals_len) {
		char *log;
		if (asprintf(&log, "%s%s", refusals, res->log ? res->log : "") < 0) {
			oom = 1;
		} else {
			free(res->log);
			res->log = log;
		}
	}
	free_roots();
	if (oom) {
		free(res->message);
		res->status = JC_ENOMEM;
		res->message = strdup("worker out of memory recording the files NVRTC read");
		return JC_ENOMEM;
	}
	return 0;
}

/* --- confinement -------------------------------------------------------------------------- */

int jc__wfs_confine(int mode, char *err, size_t errlen)
{
	return jc__confine_apply(mode, (const char *const *)roots, n_roots, cwd, err, errlen);
}
