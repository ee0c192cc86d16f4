/* SPDX-License-Identifier: MIT */
/* tests/lib cmocka layer: see test.h. */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/req.h"
#include "core/index.h"
#include "proto/io.h"
#include "proto/proto.h"

static const char *env_or_fail(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		fail_msg("%s is not set (run through meson test)", name);
	return v;
}

void jct_tmpdir(char root[JTL_ROOT_MAX], const char *parent, const char *tag)
{
	char why[512];
	if (jtl_tmpdir(root, JTL_ROOT_MAX, parent, tag, why, sizeof(why)) != 0)
		fail_msg("%s", why);
}

void jct_tmpdir_remove(const char *root)
{
	char why[512];
	if (!getenv("JC_TEST_KEEP") && jtl_rmtree(root, why, sizeof(why)) != 0)
		fail_msg("%s", why);
}

void jct_daemon_init(struct jtl_daemon *d)
{
	if (jtl_daemon_init(d, env_or_fail("JITCACHED"), "test") != 0)
		fail_msg("%s", d->why);
}

int jct_setup(void **state)
{
	struct jtl_daemon *d = calloc(1, sizeof(*d));
	assert_non_null(d);
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

int jct_setup_started(void **state)
{
	jct_setup(state);
	jct_daemon_start(*state, NULL);
	return 0;
}

pid_t jct_daemon_spawn_with(struct jtl_daemon *d, const char *const *flags,
			    int (*child_setup)(void *ctx), void *ctx)
{
	env_or_fail("JITCACHE_WORKER");
	pid_t pid = jtl_daemon_spawn(d, flags, child_setup, ctx);
	if (pid < 0)
		fail_msg("%s", d->why);
	return pid;
}

pid_t jct_daemon_spawn(struct jtl_daemon *d, const char *const *extra)
{
	const char *flags[64] = {"--log-level", "info"};
	size_t n = 2;
	for (size_t i = 0; extra && extra[i] && n < 57; i++)
		flags[n++] = extra[i];
	flags[n] = NULL;
	return jct_daemon_spawn_with(d, flags, NULL, NULL);
}

void jct_daemon_wait_ready(struct jtl_daemon *d)
{
	if (jtl_daemon_wait_ready(d, 20000, 10000, NULL) != 0)
		fail_msg("%s", d->why);
}

void jct_daemon_start(struct jtl_daemon *d, const char *const *extra)
{
	jct_daemon_spawn(d, extra);
	jct_daemon_wait_ready(d);
}

void jct_daemon_cleanup(struct jtl_daemon *d)
{
	if (jtl_daemon_cleanup(d, getenv("JC_TEST_KEEP") != NULL) != 0)
		fprintf(stderr, "could not remove the test root: %s\n", d->why);
}

int jct_run(const struct jtl_daemon *d, const char *const *argv, char **out, char **err)
{
	char env[160];
	snprintf(env, sizeof(env), "JITCACHE_SOCKET=%s", d->sock);
	const char *const envs[] = {env, NULL};
	int rc = jtl_run(argv, envs, d->dir, out, err);
	if (rc < 0)
		fail_msg("cannot run %s: %s", argv[0], strerror(errno));
	return rc;
}

int jct_ctl(const struct jtl_daemon *d, char **out, char **err, const char *const *args)
{
	const char *argv[64] = {env_or_fail("JITCACHECTL"), "--socket", d->sock, "--cache-dir",
				d->cache};
	size_t n = 5;
	for (size_t i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return jct_run(d, argv, out, err);
}

char *jct_ctl_expect(const struct jtl_daemon *d, int want, char **err, const char *const *args)
{
	char *out = NULL, *e = NULL;
	int rc = jct_ctl(d, &out, &e, args);
	if (rc != want) {
		fprintf(stderr, "jitcachectl");
		for (size_t i = 0; args[i]; i++)
			fprintf(stderr, " %s", args[i]);
		fprintf(stderr, ": exit %d, wanted %d\nstdout: %s\nstderr: %s\n", rc, want, out, e);
		fail();
	}
	if (err)
		*err = e;
	else
		free(e);
	return out;
}

void jct_daemon_start_as(struct jtl_daemon *d, const char *user, const char *group, gid_t gid,
			 int shared, const char *client, const char *const *flags)
{
	const char *argv[48] = {"setpriv",
				"--reuid",
				user,
				"--regid",
				group,
				"--clear-groups",
				"--",
				env_or_fail("JITCACHED"),
				"--cache-dir",
				d->cache,
				"--socket",
				d->sock,
				"--group-shared",
				shared ? "yes" : "no",
				"--workers",
				"1",
				"--log-level",
				"info"};
	size_t n = 18;
	for (size_t i = 0; flags && flags[i] && n < 47; i++)
		argv[n++] = flags[i];
	assert_int_equal(chmod(d->dir, 0711), 0);
	snprintf(d->sock, sizeof(d->sock), "%s/run/sock", d->dir);
	assert_int_equal(
	    jct_sh("mkdir -p -m 0700 %s && mkdir -m %s %s/run && chown %s:%s %s %s/run", d->cache,
		   shared ? "0750" : "0700", d->dir, user, group, d->cache, d->dir),
	    0);
	char logpath[300];
	snprintf(logpath, sizeof(logpath), "%s/daemon.log", d->dir);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (!freopen(logpath, "w", stderr))
			_exit(126);
		setenv("HOME", "/nonexistent", 1);
		unsetenv("XDG_RUNTIME_DIR");
		unsetenv("XDG_CACHE_HOME");
		unsetenv("XDG_CONFIG_HOME");
		execvp("setpriv", (char *const *)argv);
		_exit(127);
	}
	d->pid = pid;
	for (int i = 0; i < 600; i++) {
		if (jct_sh("setpriv --reuid %s --regid %s --groups %u -- %s --socket %s ping "
			   ">/dev/null 2>&1",
			   client, group, (unsigned)gid, env_or_fail("JITCACHECTL"), d->sock) == 0)
			return;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			d->pid = -1;
			jct_sh("cat %s >&2", logpath);
			fail_msg("the daemon run as %s exited before it was ready", user);
		}
		jtl_sleep_ms(50);
	}
	fail_msg("the daemon run as %s did not answer within 30 s", user);
}

void jct_daemon_stop_as(struct jtl_daemon *d)
{
	if (d->pid <= 0)
		return;
	jct_sh("%s --socket %s stop >/dev/null 2>&1", env_or_fail("JITCACHECTL"), d->sock);
	int st;
	for (int i = 0; i < 200 && waitpid(d->pid, &st, WNOHANG) == 0; i++)
		jtl_sleep_ms(50);
	if (waitpid(d->pid, &st, WNOHANG) == 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &st, 0);
	}
	d->pid = -1;
}

int jct_as_user(const char *dir, const char *user, const char *group, gid_t gid, char **out,
		const char *fmt, ...)
{
	char script[6000], outpath[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(script, sizeof(script), fmt, ap);
	va_end(ap);
	snprintf(outpath, sizeof(outpath), "%s/as-user.out", dir);
	int rc = jct_sh("setpriv --reuid %s --regid %s --groups %u -- sh -c '%s' > %s 2>&1", user,
			group, (unsigned)gid, script, outpath);
	size_t n;
	char *text = (char *)jtl_read_file(outpath, &n);
	*out = text ? text : strdup("");
	return rc;
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

int jct_run_confinement_groups(const struct CMUnitTest *tests, size_t n, const char **confinement)
{
	int rc = _cmocka_run_group_tests("auto", tests, n, NULL, NULL);
	if (jct_sh("unshare --user --mount true 2>/dev/null") == 0) {
		*confinement = "userns";
		rc |= _cmocka_run_group_tests("userns", tests, n, NULL, NULL);
	} else {
		fprintf(stderr, "userns group skipped: unshare --user --mount is refused here\n");
	}
	return rc;
}

int64_t jct_json_int(const char *json, const char *key)
{
	int64_t v;
	if (jtl_json_int(json, key, &v) != 0)
		fail_msg("no integer \"%s\" in:\n%s", key, json);
	return v;
}

double jct_json_num(const char *json, const char *key)
{
	double v;
	if (jtl_json_num(json, key, &v) != 0)
		fail_msg("no number \"%s\" in:\n%s", key, json);
	return v;
}

int64_t jct_stat(const struct jtl_daemon *d, const char *key)
{
	const char *args[] = {"stats", "--json", NULL};
	char *out = jct_ctl_expect(d, 0, NULL, args);
	int64_t v;
	int rc = jtl_json_int(out, key, &v);
	if (rc != 0)
		fprintf(stderr, "stats has no %s: %s\n", key, out);
	free(out);
	assert_int_equal(rc, 0);
	return v;
}

int jct_le(int64_t value, int64_t arg)
{
	return value <= arg;
}

int jct_ge(int64_t value, int64_t arg)
{
	return value >= arg;
}

int64_t jct_wait_stat(const struct jtl_daemon *d, const char *name,
		      int (*want)(int64_t value, int64_t arg), int64_t arg, int timeout_ms)
{
	int64_t v = jct_stat(d, name);
	for (int waited = 0; !want(v, arg) && waited < timeout_ms; waited += 50) {
		jtl_sleep_ms(50);
		v = jct_stat(d, name);
	}
	return v;
}

char *jct_log(const struct jtl_daemon *d)
{
	size_t n;
	char *log = (char *)jtl_read_file(d->log, &n);
	if (!log)
		fail_msg("cannot read the daemon log %s: %s", d->log, strerror(errno));
	return log;
}

int jct_log_count(const struct jtl_daemon *d, const char *s)
{
	return jtl_file_count(d->log, s);
}

int jct_wait_log(const struct jtl_daemon *d, const char *text, int timeout_ms)
{
	for (int waited = 0;; waited += 20) {
		size_t n;
		char *log = (char *)jtl_read_file(d->log, &n);
		int found = log && strstr(log, text);
		free(log);
		if (found || waited >= timeout_ms)
			return found;
		jtl_sleep_ms(20);
	}
}

void jct_assert_has(const char *text, const char *want)
{
	if (!strstr(text, want))
		fail_msg("no '%s' in:\n%s", want, text);
}

void jct_write_file(const char *path, const void *data, size_t size)
{
	char why[512];
	if (jtl_write_file(path, data, size, why, sizeof(why)) != 0)
		fail_msg("%s", why);
}

void jct_write_text(const char *path, const char *text)
{
	jct_write_file(path, text, strlen(text));
}

void jct_put(const char *root, const char *rel, const char *text)
{
	char path[512], dir[512];
	size_t skip = strlen(root);
	assert_true((size_t)snprintf(path, sizeof(path), "%s/%s", root, rel) < sizeof(path));
	for (char *p = strchr(path + skip + 1, '/'); p; p = strchr(p + 1, '/')) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(p - path), path);
		if (mkdir(dir, 0755) != 0 && errno != EEXIST)
			fail_msg("mkdir %s: %s", dir, strerror(errno));
	}
	jct_write_text(path, text);
}

void jct_settle(void)
{
	jtl_sleep_ms(150);
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
	uint8_t *src = jtl_read_file(jct_example(file), &size);
	assert_non_null(src);
	jc_request *r = jct_request_src(file, (const char *)src, arch);
	free(src);
	for (size_t i = 0; exprs && exprs[i]; i++)
		assert_int_equal(jc_request_add_name_expression(r, exprs[i]), 0);
	return r;
}

void jct_request_include(jc_request *r, const char *dir)
{
	char opt[4200];
	assert_true((size_t)snprintf(opt, sizeof(opt), "-I%s", dir) < sizeof(opt));
	assert_int_equal(jc_request_add_option(r, opt), 0);
	assert_int_equal(jc_request_add_include_dir(r, dir), 0);
}

jc_request *jct_request_ptx_dirs(const struct jtl_daemon *d, const char *src,
				 const char *const *dirs)
{
	jc_request *r = jct_request_src("k.cu", src, "compute_90");
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	for (size_t i = 0; dirs[i]; i++) {
		char dir[512];
		snprintf(dir, sizeof(dir), "%s/%s", d->dir, dirs[i]);
		jct_request_include(r, dir);
	}
	return r;
}

jc_client *jct_connect(const struct jtl_daemon *d)
{
	jc_client *c = NULL;
	int rc = jc_client_connect(d->sock, &c);
	if (rc != 0)
		fprintf(stderr, "connect: %s\n", jc_client_errmsg(NULL));
	assert_int_equal(rc, 0);
	return c;
}

int jct_raw_connect(const struct jtl_daemon *d)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	assert_true(fd >= 0 && strlen(d->sock) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, d->sock, strlen(d->sock) + 1);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

int jct_raw_hello_version(const struct jtl_daemon *d, uint32_t version, struct jc_hello *ok)
{
	int fd = jct_raw_connect(d);
	struct jc_buf b = {0};
	uint16_t type;
	assert_int_equal(jc__encode_hello(&b, JC_MSG_HELLO, version, "raw test"), 0);
	assert_int_equal(jc__io_write_all(fd, b.data, b.len), 0);
	assert_int_equal(jc__io_read_frame(fd, &b, &type, NULL, 10000), 0);
	assert_int_equal(type, JC_MSG_HELLO_OK);
	if (ok) {
		assert_int_equal(jc__decode_hello_ex(b.data, b.len, ok), 0);
		assert_int_equal(ok->version, version);
	}
	jc__buf_free(&b);
	return fd;
}

int jct_raw_hello(const struct jtl_daemon *d)
{
	return jct_raw_hello_version(d, JC_PROTO_VERSION, NULL);
}

jc_result *jct_compile(const struct jtl_daemon *d, const jc_request *r, int want_rc)
{
	return jct_compile_msg(d, r, want_rc, NULL, 0);
}

jc_result *jct_compile_msg(const struct jtl_daemon *d, const jc_request *r, int want_rc, char *msg,
			   size_t msglen)
{
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	int rc = jc_compile(c, r, &res);
	if (rc != want_rc)
		fprintf(stderr, "jc_compile: %d (%s): %s%s%s\n", rc, jc_strerror(rc),
			jc_client_errmsg(c), res ? "\nlog: " : "", res ? jc_result_log(res) : "");
	assert_int_equal(rc, want_rc);
	if (msg)
		snprintf(msg, msglen, "%s", jc_client_errmsg(c));
	jc_client_close(c);
	return res;
}

jc_result *jct_expect_ptx(const struct jtl_daemon *d, const jc_request *r, jc_cache_status st,
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

const char *jct_tiny_src(int n)
{
	static char src[160];
	snprintf(src, sizeof(src), "extern \"C\" __global__ void tiny(int *p) { *p = %d; }\n",
		 100000 + n);
	return src;
}

/* Compiles src as name for arch, expecting jc_compile to return want. */
jc_cache_status jct_compile_src(const struct jtl_daemon *d, const char *name, const char *src,
				const char *arch, int want, char key_out[33])
{
	jc_request *r = jct_request_src(name, src, arch);
	jc_result *res = jct_compile(d, r, want);
	jc_cache_status st = jc_result_cache_status(res);
	if (key_out)
		snprintf(key_out, 33, "%s", jc_result_key(res));
	jc_result_free(res);
	jc_request_free(r);
	return st;
}

jc_cache_status jct_compile_tiny(const struct jtl_daemon *d, int n, const char *arch,
				 char key_out[33])
{
	char name[32];
	snprintf(name, sizeof(name), "tiny%d.cu", n);
	return jct_compile_src(d, name, jct_tiny_src(n), arch, 0, key_out);
}

jc_cache_status jct_compile_failure(const struct jtl_daemon *d, char key_out[33])
{
	static const char bad[] = "extern \"C\" __global__ void k() { undefined_thing(); }\n";
	return jct_compile_src(d, "bad.cu", bad, "sm_90", JC_ECOMPILE, key_out);
}

size_t jct_ls_keys(const struct jtl_daemon *d, char (*keys)[33], size_t max)
{
	const char *args[] = {"ls", "--json", NULL};
	char *out = jct_ctl_expect(d, 0, NULL, args);
	size_t n = 0;
	for (const char *p = out; (p = strstr(p, "\"key\": \"")); p += 8) {
		if (n < max)
			snprintf(keys[n], 33, "%.32s", p + 8);
		n++;
	}
	free(out);
	return n < max ? n : max;
}

int jct_listed(const struct jtl_daemon *d, const char *key)
{
	char keys[512][33];
	size_t n = jct_ls_keys(d, keys, 512);
	for (size_t i = 0; i < n; i++)
		if (strcmp(keys[i], key) == 0)
			return 1;
	return 0;
}

void jct_set_times(const char *cache, const char *key, int64_t created, int64_t last_access)
{
	char path[512], err[256];
	uint8_t k[16];
	struct jc_index *ix = NULL;
	struct jc_entry e = {0};
	snprintf(path, sizeof(path), "%s/index.sqlite", cache);
	assert_int_equal(jc__unhex16(key, k), 0);
	assert_int_equal(jc__index_open(path, 0, &ix, err, sizeof(err)), 0);
	assert_int_equal(jc__index_get(ix, k, &e), 0);
	e.created = created;
	e.last_access = last_access;
	assert_int_equal(jc__index_put(ix, &e), 0);
	jc__entry_clear(&e);
	jc__index_close(ix);
}

void jct_hash_hex(const void *data, size_t n, char hex[33])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(data, n));
	jc__hex16(c.digest, hex);
}

const char *jct_object_path(const char *cache, const void *data, size_t n)
{
	static char path[512];
	char hex[33];
	assert_non_null(data);
	jct_hash_hex(data, n, hex);
	snprintf(path, sizeof(path), "%s/objects/%.2s/%s", cache, hex, hex);
	return path;
}

/* What jct_group_add and jct_user_add made, for jct_users_remove. */
#define MADE_MAX 8
static char made_users[MADE_MAX][32], made_groups[MADE_MAX][32];
static int n_made_users, n_made_groups;

static void remember(char (*list)[32], int *n, const char *name)
{
	static int registered;
	assert_true(*n < MADE_MAX);
	snprintf(list[(*n)++], 32, "%s", name);
	if (!registered)
		registered = atexit(jct_users_remove) == 0;
}

int jct_group_add(const char *prefix, char name[32], gid_t *gid)
{
	snprintf(name, 32, "%s%d", prefix, (int)getpid());
	if (jct_sh("groupadd %s", name) != 0)
		return -1;
	remember(made_groups, &n_made_groups, name);
	struct group *g = getgrnam(name);
	if (!g)
		return -1;
	if (gid)
		*gid = g->gr_gid;
	return 0;
}

/* Whether a process of another uid, in none of our groups, can run path:
 * the file executable by others and every directory above it searchable. */
static int others_can_run(const char *path)
{
	char p[PATH_MAX];
	struct stat st;
	if (!realpath(path, p) || stat(p, &st) != 0 || !(st.st_mode & S_IXOTH))
		return 0;
	for (char *slash = strrchr(p, '/'); slash; slash = strrchr(p, '/')) {
		slash[slash == p] = '\0'; /* the last one: "/" itself */
		if (stat(p, &st) != 0 || !(st.st_mode & S_IXOTH))
			return 0;
		if (slash == p)
			break;
	}
	return 1;
}

static char shared_bins[JTL_ROOT_MAX];
static pid_t shared_bins_pid;

static void shared_bins_remove(void)
{
	if (getpid() == shared_bins_pid) /* not in a forked child that exits */
		jct_tmpdir_remove(shared_bins);
}

/* The programs the users made for the run start (jitcached, jitcachectl,
 * jitcache-worker: $JITCACHED, $JITCACHECTL, $JITCACHE_WORKER), made
 * reachable for them: a build in a 0700 directory (a clone made under
 * `mktemp -d`) has them where no other uid may look, so they are copied
 * into a 0755 directory under $TMPDIR and the variables name the copies
 * (the worker beside the daemon, as installed). Once per process, on the
 * first user made; removed at exit. */
static void share_bins(void)
{
	static const char *const vars[] = {"JITCACHED", "JITCACHECTL", "JITCACHE_WORKER"};
	const size_t n = sizeof(vars) / sizeof(vars[0]);
	size_t unreachable = 0;
	if (shared_bins[0])
		return;
	for (size_t i = 0; i < n; i++)
		unreachable += getenv(vars[i]) && !others_can_run(getenv(vars[i]));
	if (!unreachable)
		return;
	jct_tmpdir(shared_bins, NULL, "bin");
	shared_bins_pid = getpid();
	atexit(shared_bins_remove);
	assert_int_equal(chmod(shared_bins, 0755), 0);
	for (size_t i = 0; i < n; i++) {
		const char *from = getenv(vars[i]);
		if (!from)
			continue;
		char to[JTL_ROOT_MAX + 64];
		snprintf(to, sizeof(to), "%s/%s", shared_bins,
			 strrchr(from, '/') ? strrchr(from, '/') + 1 : from);
		if (jct_sh("cp '%s' '%s' && chmod 0755 '%s'", from, to, to) != 0)
			fail_msg("cannot copy %s to %s for the run's other users", from, to);
		setenv(vars[i], to, 1);
	}
	fprintf(stderr,
		"the programs are out of other users' reach (a directory above them is not "
		"searchable by others): the run's users start copies in %s\n",
		shared_bins);
}

int jct_user_add(const char *prefix, const char *group, char name[32], uid_t *uid, gid_t *gid)
{
	char how[64];
	share_bins();
	snprintf(name, 32, "%s%d", prefix, (int)getpid());
	if (group)
		snprintf(how, sizeof(how), "-N -g %s", group);
	else
		snprintf(how, sizeof(how), "-U");
	if (jct_sh("useradd -M %s -d /nonexistent -s /usr/sbin/nologin %s", how, name) != 0)
		return -1;
	remember(made_users, &n_made_users, name);
	struct passwd *p = getpwnam(name);
	if (!p)
		return -1;
	if (uid)
		*uid = p->pw_uid;
	if (gid)
		*gid = p->pw_gid;
	return 0;
}

void jct_users_remove(void)
{
	while (n_made_users > 0)
		jct_sh("userdel %s 2>/dev/null", made_users[--n_made_users]);
	while (n_made_groups > 0)
		jct_sh("groupdel %s 2>/dev/null", made_groups[--n_made_groups]);
}

const char *jct_nvcc(void)
{
	static char path[512];
	const char *env = getenv("NVCC"), *cuda = getenv("CUDA_PATH");
	if (env && *env)
		snprintf(path, sizeof(path), "%s", env);
	else
		snprintf(path, sizeof(path), "%s/bin/nvcc",
			 cuda && *cuda ? cuda : "/usr/local/cuda");
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

int jct_replace_object(const char *path, size_t n)
{
	char tmp[600];
	if (access(path, F_OK) != 0)
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0444);
	assert_true(fd >= 0);
	uint8_t *bad = malloc(n);
	assert_non_null(bad);
	memset(bad, 0x5a, n);
	assert_int_equal(write(fd, bad, n), (ssize_t)n);
	close(fd);
	free(bad);
	if (rename(tmp, path) == 0)
		return 0;
	unlink(tmp);
	return -1;
}
