/* SPDX-License-Identifier: MIT */
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2) /* linux/close_range.h, Linux 5.11 */
#endif

#include "jitcache/jitcache.h"

int jc__parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0 || !isfinite(v))
		return JC_EINVAL;
	double mul = 1;
	switch (toupper((unsigned char)*end)) {
	case 'T':
		mul *= 1024; /* fall through */
	case 'G':
		mul *= 1024; /* fall through */
	case 'M':
		mul *= 1024; /* fall through */
	case 'K':
		mul *= 1024;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'i' && mul > 1)
		end++;
	if (toupper((unsigned char)*end) == 'B')
		end++;
	if (*end || v * mul > 1.8e19)
		return JC_EINVAL;
	*out = (uint64_t)(v * mul);
	return 0;
}

int jc__parse_duration(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || v < 0)
		return JC_EINVAL;
	int64_t mul = 1;
	switch (*end) {
	case 'd':
		mul = 86400;
		end++;
		break;
	case 'h':
		mul = 3600;
		end++;
		break;
	case 'm':
		mul = 60;
		end++;
		break;
	case 's':
		end++;
		break;
	default:
		break;
	}
	if (*end || v > INT64_MAX / mul)
		return JC_EINVAL;
	*out = v * mul;
	return 0;
}

static int fmt(char *buf, size_t len, const char *a, const char *b)
{
	int n = snprintf(buf, len, "%s%s", a, b);
	return n < 0 || (size_t)n >= len ? JC_EINVAL : 0;
}

int jc__default_cache_dir(char *buf, size_t len)
{
	const char *v;
	if ((v = secure_getenv("JITCACHE_DIR")) && *v)
		return fmt(buf, len, v, "");
	if ((v = secure_getenv("XDG_CACHE_HOME")) && *v)
		return fmt(buf, len, v, "/jitcache");
	if ((v = secure_getenv("HOME")) && *v)
		return fmt(buf, len, v, "/.cache/jitcache");
	return JC_EINVAL;
}

int jc__default_socket_path(const char *cache_dir, char *buf, size_t len)
{
	const char *v;
	char dir[4096];
	if ((v = secure_getenv("JITCACHE_SOCKET")) && *v)
		return fmt(buf, len, v, "");
	if ((v = secure_getenv("XDG_RUNTIME_DIR")) && *v)
		return fmt(buf, len, v, "/jitcached.sock");
	if (!cache_dir) {
		int rc = jc__default_cache_dir(dir, sizeof(dir));
		if (rc)
			return rc;
		cache_dir = dir;
	}
	return fmt(buf, len, cache_dir, "/jitcached.sock");
}

int jc__path_lexical(const char *in, char *out, size_t len, int fold_dotdot)
{
	size_t o = 0;
	for (const char *p = in; *p;) {
		while (*p == '/')
			p++;
		const char *e = strchrnul(p, '/');
		size_t l = (size_t)(e - p);
		if (fold_dotdot && l == 2 && p[0] == '.' && p[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
		} else if (l && !(l == 1 && p[0] == '.')) {
			if (o + 1 + l >= len)
				return -1;
			out[o++] = '/';
			memcpy(out + o, p, l);
			o += l;
		}
		p = e;
	}
	if (len < 2)
		return -1;
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

int jc__kernel_path(const char *path)
{
	static const char *const roots[] = {"/proc", "/sys", "/dev"};
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		size_t n = strlen(roots[i]);
		if (strncmp(path, roots[i], n) == 0 && (path[n] == '\0' || path[n] == '/'))
			return 1;
	}
	return 0;
}

int jc__pseudo_fs(long type)
{
	switch ((unsigned long)type) {
	case 0x9fa0:	 /* proc */
	case 0x62656572: /* sysfs */
	case 0x1cd1:	 /* devpts */
	case 0x64626720: /* debugfs */
	case 0x74726163: /* tracefs */
	case 0x73636673: /* securityfs */
	case 0x63677270: /* cgroup2 */
	case 0x27e0eb:	 /* cgroup */
	case 0xcafe4a11: /* bpf */
	case 0x62656570: /* configfs */
	case 0xde5e81e4: /* efivarfs */
		return 1;
	default:
		return 0;
	}
}

/* Drops the last component of the resolved prefix done (length *dl). */
static void drop_last(char *done, size_t *dl)
{
	while (*dl && done[*dl - 1] != '/')
		(*dl)--;
	if (*dl)
		(*dl)--;
	done[*dl] = '\0';
}

int jc__path_reaches_kernel(const char *path, char *where, size_t len)
{
	char done[PATH_MAX], rest[PATH_MAX], next[PATH_MAX], target[PATH_MAX];
	size_t dl = 0;
	int links = 0;
	struct stat st;
	struct statfs sf;
	done[0] = '\0';
	if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest))
		goto too_long;
	for (const char *p = rest; *p;) {
		while (*p == '/')
			p++;
		const char *e = strchrnul(p, '/');
		size_t l = (size_t)(e - p);
		if (l == 0 || (l == 1 && p[0] == '.')) {
			p = e;
			continue;
		}
		if (l == 2 && p[0] == '.' && p[1] == '.') {
			drop_last(done, &dl);
			p = e;
			continue;
		}
		if (dl + 1 + l >= sizeof(done))
			goto too_long;
		done[dl++] = '/';
		memcpy(done + dl, p, l);
		dl += l;
		done[dl] = '\0';
		p = e;
		if (jc__kernel_path(done))
			goto found;
		if (lstat(done, &st) != 0) {
			/* Nothing to follow: the rest as written. */
			if (snprintf(next, sizeof(next), "%s%s", done, p) >= (int)sizeof(next) ||
			    jc__path_lexical(next, done, sizeof(done), 1) != 0)
				goto too_long;
			return jc__kernel_path(done) ? (snprintf(where, len, "%s", done), 1) : 0;
		}
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(done, target, sizeof(target) - 1);
			if (n < 0)
				return -1;
			if (++links > 40) {
				errno = ELOOP;
				return -1;
			}
			target[n] = '\0';
			if (snprintf(next, sizeof(next), "%s/%s", target, p) >= (int)sizeof(next))
				goto too_long;
			memcpy(rest, next, sizeof(rest));
			p = rest;
			if (target[0] == '/') {
				dl = 0;
				done[0] = '\0';
			} else {
				drop_last(done, &dl);
			}
			continue;
		}
		if (statfs(done, &sf) == 0 && jc__pseudo_fs(sf.f_type))
			goto found;
	}
	return 0;
found:
	snprintf(where, len, "%s", done);
	return 1;
too_long:
	errno = ENAMETOOLONG;
	return -1;
}

int jc__fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

int jc__beside_self(const char *name, char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -1;
	int w = snprintf(out, len, "%.*s/%s", (int)(slash - self), self, name);
	return w > 0 && (size_t)w < len && access(out, F_OK) == 0 ? 0 : -1;
}

void jc__json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

void jc__cloexec_from(int fd)
{
	if (syscall(SYS_close_range, (unsigned)fd, ~0u, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	for (; fd < 65536; fd++) {
		int flags = fcntl(fd, F_GETFD);
		if (flags >= 0)
			fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
	}
}

static __thread char *rm_why;
static __thread size_t rm_whylen;
static __thread int rm_failed;

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((flag == FTW_DP ? rmdir(path) : unlink(path)) != 0 && !rm_failed++)
		snprintf(rm_why, rm_whylen, "%s: %s", path, strerror(errno));
	return 0;
}

int jc__rmtree(const char *path, char *why, size_t whylen)
{
	rm_why = why;
	rm_whylen = whylen;
	rm_failed = 0;
	if (nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS) != 0 && !rm_failed++)
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
	return rm_failed ? -1 : 0;
}

void jc__sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

uint64_t jc__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int jc__set_idle_priority(int tid, int idle)
{
	enum { IOPRIO_WHO_PROCESS = 1, IOPRIO_CLASS_IDLE = 3, IOPRIO_CLASS_SHIFT = 13 };
	struct sched_param sp = {0};
	if (sched_setscheduler(tid, idle ? SCHED_IDLE : SCHED_OTHER, &sp) != 0)
		return -1;
	return (int)syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid,
			    idle ? IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT : 0);
}

uint64_t jc__process_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t jc__now_ms(void)
{
	return jc__now_ns() / 1000000u;
}

int64_t jc__wall_s(void)
{
	return (int64_t)time(NULL);
}

int jc__text_cap(char **text, size_t max)
{
	static const char fmt[] =
	    "\n[jitcache: %zu bytes of this log dropped here (--max-log-size)]\n";
	size_t len = *text ? strlen(*text) : 0;
	if (len <= max)
		return 0;
	char marker[128];
	/* The marker with len as its count is at least as long as the final one. */
	size_t m = (size_t)snprintf(marker, sizeof(marker), fmt, len);
	size_t keep = max > m ? max - m : 0, head = keep / 2, tail = keep - head;
	m = (size_t)snprintf(marker, sizeof(marker), fmt, len - keep);
	char *out = malloc(head + m + tail + 1);
	if (!out)
		return JC_ENOMEM;
	memcpy(out, *text, head);
	memcpy(out + head, marker, m);
	memcpy(out + head + m, *text + len - tail, tail);
	out[head + m + tail] = '\0';
	free(*text);
	*text = out;
	return 1;
}

int jc__path_char(char c)
{
	return isalnum((unsigned char)c) || (c && strchr("_./+~-", c) != NULL);
}

char *jc__text_replace(const char *text, const char *from, const char *to, int whole)
{
	size_t flen = strlen(from), tlen = strlen(to), n = 0;
	for (const char *p = text; (p = strstr(p, from)); p += flen)
		n++;
	char *out = malloc(strlen(text) + n * tlen + 1), *w = out;
	if (!out)
		return NULL;
	const char *p = text, *hit;
	while ((hit = strstr(p, from))) {
		int swap = !whole ||
			   ((hit == text || !jc__path_char(hit[-1])) && !jc__path_char(hit[flen]));
		size_t keep = (size_t)(hit - p) + (swap ? 0 : flen);
		memcpy(w, p, keep);
		w += keep;
		if (swap) {
			memcpy(w, to, tlen);
			w += tlen;
		}
		p = hit + flen;
	}
	strcpy(w, p);
	return out;
}
