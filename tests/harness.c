/* SPDX-License-Identifier: MIT */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static const char *env_or_fail(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v) {
		fprintf(stderr, "%s is not set (run through meson test)\n", name);
		fail();
	}
	return v;
}

void jct_daemon_init(struct jc_test_daemon *d)
{
	memset(d, 0, sizeof(*d));
	const char *tmp = getenv("TMPDIR");
	snprintf(d->dir, sizeof(d->dir), "%s/jc-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(d->dir));
	snprintf(d->cache, sizeof(d->cache), "%s/cache", d->dir);
	snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	d->pid = -1;
}

int jct_setup(void **state)
{
	struct jc_test_daemon *d = calloc(1, sizeof(*d));
	jct_daemon_init(d);
	*state = d;
	return 0;
}

int jct_teardown(void **state)
{
	jct_daemon_cleanup(*state);
	free(*state);
	return 0;
}

pid_t jct_daemon_spawn_with(struct jc_test_daemon *d, const char *const *flags,
			    int (*child_setup)(void *ctx), void *ctx)
{
	const char *bin = env_or_fail("JITCACHED");
	const char *argv[64] = {bin, "--cache-dir", d->cache, "--socket", d->sock};
	size_t n = 5;
	for (size_t i = 0; flags && flags[i] && n < 62; i++)
		argv[n++] = flags[i];
	argv[n] = NULL;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
		}
		setenv("JITCACHE_WORKER", env_or_fail("JITCACHE_WORKER"), 1);
		int rc = child_setup ? child_setup(ctx) : 0;
		if (rc != 0)
			_exit(rc);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	d->pid = pid;
	return pid;
}

pid_t jct_daemon_spawn(struct jc_test_daemon *d, const char *const *extra)
{
	const char *flags[64] = {"--log-level", "info"};
	size_t n = 2;
	for (size_t i = 0; extra && extra[i] && n < 57; i++)
		flags[n++] = extra[i];
	flags[n] = NULL;
	return jct_daemon_spawn_with(d, flags, NULL, NULL);
}

void jct_daemon_wait_ready(struct jc_test_daemon *d)
{
	for (int i = 0; i < 2000; i++) {
		jc_client *c = NULL;
		if (jc_client_connect(d->sock, &c) == 0) {
			jc_client_close(c);
			return;
		}
		int status;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			d->pid = -1;
			fprintf(stderr, "jitcached exited at start; log %s\n", d->log);
			fail();
		}
		usleep(10000);
	}
	fprintf(stderr, "jitcached did not answer in 20 s\n");
	fail();
}

void jct_daemon_start(struct jc_test_daemon *d, const char *const *extra)
{
	jct_daemon_spawn(d, extra);
	jct_daemon_wait_ready(d);
}

int jct_daemon_stop(struct jc_test_daemon *d)
{
	if (d->pid > 0)
		kill(d->pid, SIGTERM);
	return jct_daemon_wait(d);
}

int jct_daemon_wait(struct jc_test_daemon *d)
{
	if (d->pid <= 0)
		return 0;
	int status = 0;
	while (waitpid(d->pid, &status, 0) < 0 && errno == EINTR)
		;
	d->pid = -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

void jct_daemon_kill(struct jc_test_daemon *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGKILL);
	while (waitpid(d->pid, NULL, 0) < 0 && errno == EINTR)
		;
	d->pid = -1;
}

void jct_daemon_cleanup(struct jc_test_daemon *d)
{
	jct_daemon_kill(d);
	if (getenv("JC_TEST_KEEP"))
		return;
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", d->dir, d->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", d->dir);
}

static char *slurp_fd(int fd)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (n + 1 >= cap)
			buf = realloc(buf, cap *= 2);
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	return buf;
}

int jct_run(const struct jc_test_daemon *d, const char *const *argv, char **out, char **err)
{
	/* Output goes through temp files: no pipe can fill up and block. */
	char opath[320], epath[320];
	snprintf(opath, sizeof(opath), "%s/run.out", d->dir);
	snprintf(epath, sizeof(epath), "%s/run.err", d->dir);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int o = open(opath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(o, 1);
		dup2(e, 2);
		setenv("JITCACHE_SOCKET", d->sock, 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int fd = open(opath, O_RDONLY);
	char *o = slurp_fd(fd);
	close(fd);
	fd = open(epath, O_RDONLY);
	char *e = slurp_fd(fd);
	close(fd);
	if (out)
		*out = o;
	else
		free(o);
	if (err)
		*err = e;
	else
		free(e);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int jct_ctl(const struct jc_test_daemon *d, char **out, char **err, const char *const *args)
{
	const char *bin = env_or_fail("JITCACHECTL");
	const char *argv[64] = {bin, "--socket", d->sock, "--cache-dir", d->cache};
	size_t n = 5;
	for (size_t i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return jct_run(d, argv, out, err);
}

int64_t jct_stat(const struct jc_test_daemon *d, const char *key)
{
	char *out = NULL;
	const char *args[] = {"stats", "--json", NULL};
	assert_int_equal(jct_ctl(d, &out, NULL, args), 0);
	char pat[128];
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	char *p = strstr(out, pat);
	if (!p) {
		fprintf(stderr, "stats has no %s: %s\n", key, out);
		free(out);
		fail();
	}
	int64_t v = strtoll(p + strlen(pat), NULL, 10);
	free(out);
	return v;
}

uint8_t *jct_read_file(const char *path, size_t *size)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	struct stat st;
	fstat(fd, &st);
	uint8_t *buf = malloc((size_t)st.st_size + 1);
	size_t n = 0;
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	*size = n;
	return buf;
}

const char *jct_example(const char *name)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/%s", env_or_fail("JC_EXAMPLES"), name);
	return path;
}

jc_request *jct_request_src(const char *name, const char *src, const char *arch)
{
	jc_request *r = NULL;
	assert_int_equal(jc_request_new(&r), 0);
	assert_int_equal(jc_request_set_source(r, name, src, strlen(src)), 0);
	assert_int_equal(jc_request_set_arch(r, arch), 0);
	return r;
}

jc_request *jct_request(const char *file, const char *arch, const char *const *exprs)
{
	size_t size;
	uint8_t *src = jct_read_file(jct_example(file), &size);
	assert_non_null(src);
	jc_request *r = jct_request_src(file, (const char *)src, arch);
	free(src);
	for (size_t i = 0; exprs && exprs[i]; i++)
		assert_int_equal(jc_request_add_name_expression(r, exprs[i]), 0);
	return r;
}

jc_client *jct_connect(const struct jc_test_daemon *d)
{
	jc_client *c = NULL;
	int rc = jc_client_connect(d->sock, &c);
	if (rc != 0)
		fprintf(stderr, "connect: %s\n", jc_client_errmsg(NULL));
	assert_int_equal(rc, 0);
	return c;
}

jc_result *jct_compile(const struct jc_test_daemon *d, const jc_request *r, int want_rc)
{
	return jct_compile_msg(d, r, want_rc, NULL, 0);
}

jc_result *jct_compile_msg(const struct jc_test_daemon *d, const jc_request *r, int want_rc,
			   char *msg, size_t msglen)
{
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	int rc = jc_compile(c, r, &res);
	if (rc != want_rc)
		fprintf(stderr, "jc_compile: %d (%s): %s%s%s\n", rc, jc_strerror(rc), jc_client_errmsg(c),
			res ? "\nlog: " : "", res ? jc_result_log(res) : "");
	assert_int_equal(rc, want_rc);
	if (msg)
		snprintf(msg, msglen, "%s", jc_client_errmsg(c));
	jc_client_close(c);
	return res;
}

void jct_write_file(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, size, f), size);
	assert_int_equal(fclose(f), 0);
}

int jct_sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int status = system(cmd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const char *jct_nvcc(void)
{
	static char path[512];
	const char *env = getenv("NVCC"), *cuda = getenv("CUDA_PATH");
	if (env && *env)
		snprintf(path, sizeof(path), "%s", env);
	else
		snprintf(path, sizeof(path), "%s/bin/nvcc", cuda && *cuda ? cuda : "/usr/local/cuda");
	return access(path, X_OK) == 0 ? path : NULL;
}

int jct_cubin_sm(const uint8_t *data, size_t size)
{
	assert_true(size > 64);
	assert_memory_equal(data, "\177ELF", 4);
	uint16_t machine;
	uint32_t flags;
	memcpy(&machine, data + 18, 2);
	memcpy(&flags, data + 48, 4);
	assert_int_equal(machine, 190); /* EM_CUDA */
	return (int)((flags >> 8) & 0xff);
}

void jct_settle(void)
{
	struct timespec ts = {0, 150 * 1000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int jct_setup_started(void **state)
{
	jct_setup(state);
	jct_daemon_start(*state, NULL);
	return 0;
}

int jct_raw_connect(const struct jc_test_daemon *d)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	assert_true(fd >= 0 && strlen(d->sock) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, d->sock, strlen(d->sock) + 1);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

int jct_log_count(const struct jc_test_daemon *d, const char *s)
{
	size_t n;
	char *log = (char *)jct_read_file(d->log, &n);
	int count = 0;
	for (char *p = log; p && (p = strstr(p, s)); p += strlen(s))
		count++;
	free(log);
	return count;
}

double jct_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void jct_put(const struct jc_test_daemon *d, const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", d->dir, rel);
	assert_int_equal(jct_sh("mkdir -p \"$(dirname '%s')\"", path), 0);
	jct_write_file(path, text, strlen(text));
}

jc_request *jct_request_ptx_dirs(const struct jc_test_daemon *d, const char *src,
				 const char *const *dirs)
{
	jc_request *r = jct_request_src("k.cu", src, "compute_90");
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	for (size_t i = 0; dirs[i]; i++) {
		char opt[512];
		snprintf(opt, sizeof(opt), "-I%s/%s", d->dir, dirs[i]);
		assert_int_equal(jc_request_add_option(r, opt), 0);
		assert_int_equal(jc_request_add_include_dir(r, opt + 2), 0);
	}
	return r;
}

jc_result *jct_expect_ptx(const struct jc_test_daemon *d, const jc_request *r, jc_cache_status st,
			  const char *want)
{
	jc_result *res = jct_compile(d, r, 0);
	if (jc_result_cache_status(res) != st)
		fail_msg("cache status %d, want %d (PTX should hold \"%s\")",
			 jc_result_cache_status(res), st, want);
	size_t n;
	const char *ptx = jc_result_data(res, &n);
	if (!memmem(ptx, n, want, strlen(want)))
		fail_msg("PTX does not hold \"%s\":\n%.*s", want, (int)n, ptx);
	return res;
}
