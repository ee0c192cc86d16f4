/* SPDX-License-Identifier: MIT */
/* tests/lib core: temporary directories, clocks, files, JSON, processes. */
#include "core.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

int jtl_tmpdir(char *root, size_t len, const char *parent, const char *tag, char *why,
	       size_t whylen)
{
	const char *tmp = parent ? parent : getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	if ((size_t)snprintf(root, len, "%s/jc-%s-XXXXXX", tmp, tag) >= len) {
		snprintf(why, whylen, "a temporary directory under %s is longer than %zu bytes",
			 tmp, len - 1);
		return -1;
	}
	if (!mkdtemp(root)) {
		snprintf(why, whylen, "mkdtemp %s: %s", root, strerror(errno));
		return -1;
	}
	return 0;
}

/* Removes the entries of the directory open as fd (closed here); entries
 * that vanish meanwhile are not an error. */
static int rm_below(int fd, const char *path, char *why, size_t whylen)
{
	DIR *dir = fdopendir(fd);
	if (!dir) {
		snprintf(why, whylen, "open %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(dir))) {
		const char *name = de->d_name;
		struct stat st;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			if (errno == ENOENT)
				continue; /* removed meanwhile (a process that was just killed) */
			snprintf(why, whylen, "stat %s/%s: %s", path, name, strerror(errno));
			rc = -1;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			char sub[4096];
			snprintf(sub, sizeof(sub), "%s/%s", path, name);
			fchmodat(fd, name, (st.st_mode | S_IRWXU) & 07777, 0);
			int subfd =
			    openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (subfd < 0) {
				snprintf(why, whylen, "open %s: %s", sub, strerror(errno));
				rc = -1;
				break;
			}
			rc = rm_below(subfd, sub, why, whylen);
		}
		if (rc == 0 && unlinkat(fd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0 &&
		    errno != ENOENT) {
			snprintf(why, whylen, "remove %s/%s: %s", path, name, strerror(errno));
			rc = -1;
		}
	}
	closedir(dir);
	return rc;
}

int jtl_rmtree(const char *path, char *why, size_t whylen)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(why, whylen, "stat %s: %s", path, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		chmod(path, (st.st_mode | S_IRWXU) & 07777);
		int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			snprintf(why, whylen, "open %s: %s", path, strerror(errno));
			return -1;
		}
		if (rm_below(fd, path, why, whylen) != 0)
			return -1;
	}
	if (remove(path) != 0) {
		snprintf(why, whylen, "remove %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

double jtl_now_s(void)
{
	return (double)jc__now_ns() / 1e9;
}

void jtl_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void jtl_sort_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double jtl_median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

uint8_t *jtl_read_file(const char *path, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 4096, n = 0;
	uint8_t *buf = malloc(cap);
	for (;;) {
		if (!buf)
			break;
		if (n + 1 >= cap) {
			uint8_t *more = realloc(buf, cap *= 2);
			if (!more) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = more;
		}
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			buf = NULL;
			errno = e;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	int e = errno;
	close(fd);
	errno = e;
	if (!buf)
		return NULL;
	buf[n] = '\0';
	*size = n;
	return buf;
}

int jtl_write_file(const char *path, const void *data, size_t size, char *why, size_t whylen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		snprintf(why, whylen, "create %s: %s", path, strerror(errno));
		return -1;
	}
	for (size_t done = 0; done < size;) {
		ssize_t w = write(fd, (const char *)data + done, size - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(why, whylen, "write %s: %s", path,
				 w < 0 ? strerror(errno) : "no progress");
			close(fd);
			return -1;
		}
		done += (size_t)w;
	}
	if (close(fd) != 0) {
		snprintf(why, whylen, "close %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int jtl_count(const char *text, const char *s)
{
	int count = 0;
	for (const char *p = text; (p = strstr(p, s)); p += strlen(s))
		count++;
	return count;
}

int jtl_file_count(const char *path, const char *s)
{
	size_t n;
	char *text = (char *)jtl_read_file(path, &n);
	int count = text ? jtl_count(text, s) : 0;
	free(text);
	return count;
}

/* Where the value of "key": starts in json, or NULL. */
static const char *json_value(const char *json, const char *key)
{
	char pat[160];
	if ((size_t)snprintf(pat, sizeof(pat), "\"%s\": ", key) >= sizeof(pat))
		return NULL;
	const char *p = strstr(json, pat);
	return p ? p + strlen(pat) : NULL;
}

int jtl_json_int(const char *json, const char *key, int64_t *value)
{
	const char *p = json_value(json, key);
	char *end;
	if (!p)
		return -1;
	long long v = strtoll(p, &end, 10);
	if (end == p)
		return -1;
	*value = v;
	return 0;
}

int jtl_json_num(const char *json, const char *key, double *value)
{
	const char *p = json_value(json, key);
	char *end;
	if (!p)
		return -1;
	double v = strtod(p, &end);
	if (end == p)
		return -1;
	*value = v;
	return 0;
}

int jtl_wait(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The file's text (malloc'd), "" when it cannot be read. */
static char *text_of(const char *path)
{
	size_t n;
	char *t = (char *)jtl_read_file(path, &n);
	return t ? t : strdup("");
}

int jtl_run(const char *const *argv, const char *const *env, const char *scratch, char **out,
	    char **err)
{
	char opath[4200], epath[4200];
	snprintf(opath, sizeof(opath), "%s/run.out", scratch);
	snprintf(epath, sizeof(epath), "%s/run.err", scratch);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int o = open(opath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (o < 0 || e < 0)
			_exit(126);
		dup2(o, 1);
		dup2(e, 2);
		for (size_t i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	int rc = jtl_wait(pid);
	if (out)
		*out = text_of(opath);
	if (err)
		*err = text_of(epath);
	return rc;
}

int jtl_nvrtc_file(char *lib, char *why, size_t whylen)
{
	void *h = dlopen("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
	void *sym = h ? dlsym(h, "nvrtcVersion") : NULL;
	Dl_info info;
	if (!sym || !dladdr(sym, &info) || !info.dli_fname || !realpath(info.dli_fname, lib)) {
		snprintf(why, whylen, "cannot find the libnvrtc this process loads: %s", dlerror());
		return -1;
	}
	return 0;
}

int jtl_nvrtc_toolkit_copy(const char *dir, char *why, size_t whylen)
{
	char lib[PATH_MAX], libdir[PATH_MAX + 8], path[PATH_MAX + 300], to[PATH_MAX + 300];
	if (jtl_nvrtc_file(lib, why, whylen) != 0)
		return -1;
	/* libnvrtc under the name the loader asks for (its soname: the file
	 * libnvrtc.so links to), the builtins beside it */
	snprintf(libdir, sizeof(libdir), "%s/lib", dir);
	if (jtl_nvrtc_copy_with_build_id(lib, libdir, 0xff, path, sizeof(path), why, whylen) != 0)
		return -1;
	*strrchr(lib, '/') = '\0';
	snprintf(path, sizeof(path), "%s/../include", lib);
	snprintf(to, sizeof(to), "%s/include", dir);
	if (!realpath(path, lib) || symlink(lib, to) != 0) {
		snprintf(why, whylen, "cannot link %s to the toolkit's include tree %s: %s", to,
			 path, strerror(errno));
		return -1;
	}
	return 0;
}
