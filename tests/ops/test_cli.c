/* SPDX-License-Identifier: MIT */
/*
 * jitcachectl and jitcached as a user meets them, with a real daemon and
 * real compiles: -o onto a character device made with mknod, a FIFO and a
 * symbolic link (the node survives, the bytes arrive), onto a regular file
 * (replaced, mode kept, no temporary left), -o - to standard output; the
 * default output name; warnings of a successful compile shown; the source's
 * directory as the first quoted-include directory; help per command;
 * jitcached --help with its defaults; config; stop; stats saying since when
 * the latency histogram counts.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

#include "core/admin.h"

static const char warn_src[] =
    "extern \"C\" __global__ void k(int *x) { int unused_here; x[threadIdx.x] = 1; }\n";

/* d->dir/k.cu holding warn_src; returns its path (static buffer). */
static const char *source(const struct jtl_daemon *d)
{
	static char path[200];
	snprintf(path, sizeof(path), "%s/k.cu", d->dir);
	jct_write_text(path, warn_src);
	return path;
}

/* The artifact as written to a regular file (the reference bytes). */
static uint8_t *reference(const struct jtl_daemon *d, size_t *n)
{
	char out[200];
	snprintf(out, sizeof(out), "%s/ref.cubin", d->dir);
	const char *args[] = {"compile", source(d), "--arch", "sm_90", "-o", out, NULL};
	free(jct_ctl_expect(d, 0, NULL, args));
	uint8_t *data = jtl_read_file(out, n);
	assert_non_null(data);
	assert_int_equal(jct_cubin_sm(data, *n), 90);
	return data;
}

/* No file but the expected ones in dir: no temporary left behind. */
static void assert_no_temp(const char *dir)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	assert_non_null(dh);
	while ((e = readdir(dh)))
		if (strstr(e->d_name, ".XXXXXX") ||
		    (e->d_name[0] == '.' && strstr(e->d_name, ".cubin.")))
			fail_msg("temporary file left: %s/%s", dir, e->d_name);
	closedir(dh);
}

static void test_output_targets(void **state)
{
	struct jtl_daemon *d = *state;
	size_t n;
	uint8_t *ref = reference(d, &n);
	char node[200], fifo[200], copy[200], target[200], link[200];

	/* A character device like /dev/null: written through, still a device. */
	struct stat null_st, st;
	assert_int_equal(stat("/dev/null", &null_st), 0);
	snprintf(node, sizeof(node), "%s/null", d->dir);
	if (mknod(node, S_IFCHR | 0666, null_st.st_rdev) != 0) {
		fprintf(stderr, "mknod: %s (not root?): skipping the device case\n",
			strerror(errno));
	} else {
		const char *args[] = {"compile", source(d), "--arch", "sm_90", "-o", node, NULL};
		free(jct_ctl_expect(d, 0, NULL, args));
		assert_int_equal(lstat(node, &st), 0);
		assert_true(S_ISCHR(st.st_mode));
		assert_int_equal(st.st_rdev, null_st.st_rdev);
	}

	/* A FIFO: the node survives, the reader gets the bytes. */
	snprintf(fifo, sizeof(fifo), "%s/fifo", d->dir);
	snprintf(copy, sizeof(copy), "%s/from-fifo", d->dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	pid_t reader = fork();
	assert_true(reader >= 0);
	if (reader == 0) {
		execl("/bin/sh", "sh", "-c", "cat \"$0\" > \"$1\"", fifo, copy, (char *)NULL);
		_exit(127);
	}
	const char *fargs[] = {"compile", source(d), "--arch", "sm_90", "-o", fifo, NULL};
	free(jct_ctl_expect(d, 0, NULL, fargs));
	int status;
	assert_int_equal(waitpid(reader, &status, 0), reader);
	assert_int_equal(lstat(fifo, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	size_t m;
	uint8_t *got = jtl_read_file(copy, &m);
	assert_int_equal(m, n);
	assert_memory_equal(got, ref, n);
	free(got);

	/* A symbolic link: still a link, its target holds the bytes. */
	snprintf(target, sizeof(target), "%s/target.bin", d->dir);
	snprintf(link, sizeof(link), "%s/link.cubin", d->dir);
	jct_write_text(target, "old contents, longer than nothing at all");
	assert_int_equal(symlink(target, link), 0);
	const char *largs[] = {"compile", source(d), "--arch", "sm_90", "-o", link, NULL};
	free(jct_ctl_expect(d, 0, NULL, largs));
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	got = jtl_read_file(target, &m);
	assert_int_equal(m, n);
	assert_memory_equal(got, ref, n);
	free(got);

	/* A regular file: replaced whole, its mode kept, no temporary left. */
	assert_int_equal(chmod(target, 0640), 0);
	jct_write_text(target, "stale");
	assert_int_equal(chmod(target, 0640), 0);
	const char *rargs[] = {"compile", source(d), "--arch", "sm_90", "-o", target, NULL};
	free(jct_ctl_expect(d, 0, NULL, rargs));
	assert_int_equal(stat(target, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	got = jtl_read_file(target, &m);
	assert_int_equal(m, n);
	assert_memory_equal(got, ref, n);
	free(got);
	assert_no_temp(d->dir);

	/* -o - : standard output. */
	char *out = NULL;
	const char *ctl = getenv("JITCACHECTL");
	const char *argv[] = {ctl,	"--socket", d->sock, "compile", source(d),
			      "--arch", "sm_90",    "-o",    "-",	NULL};
	assert_int_equal(jct_run(d, argv, &out, NULL), 0);
	assert_memory_equal(out, ref, n);
	struct stat dash;
	char dashpath[200];
	snprintf(dashpath, sizeof(dashpath), "%s/-", d->dir);
	assert_int_not_equal(stat(dashpath, &dash), 0);
	assert_int_not_equal(stat("-", &dash), 0);
	free(out);
	free(ref);
}

/* Without -o: FILE's stem with the output's extension in the working
 * directory, and the command says so; the warning is shown on success. */
static void test_default_output_and_warnings(void **state)
{
	struct jtl_daemon *d = *state;
	char cwd[4096], work[200], *err = NULL;
	snprintf(work, sizeof(work), "%s/work", d->dir);
	assert_int_equal(mkdir(work, 0700), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(work), 0);
	const char *args[] = {"compile", source(d), "--arch", "sm_90", NULL};
	free(jct_ctl_expect(d, 0, &err, args));
	const char *ptx_args[] = {"compile",  source(d), "--arch", "compute_90",
				  "--output", "ptx",	 NULL};
	char *err2 = NULL;
	free(jct_ctl_expect(d, 0, &err2, ptx_args));
	assert_int_equal(chdir(cwd), 0);
	assert_non_null(strstr(err, "wrote k.cubin"));
	assert_non_null(strstr(err, "unused_here")); /* NVRTC's warning */
	assert_non_null(strstr(err2, "wrote k.ptx"));
	char path[300];
	size_t n;
	snprintf(path, sizeof(path), "%s/k.cubin", work);
	uint8_t *data = jtl_read_file(path, &n);
	assert_int_equal(jct_cubin_sm(data, n), 90);
	free(data);
	snprintf(path, sizeof(path), "%s/k.ptx", work);
	data = jtl_read_file(path, &n);
	assert_non_null(strstr((char *)data, ".version"));
	free(data);
	free(err);
	free(err2);
}

/* #include "local.h" beside the source, compiled from elsewhere: found, as
 * nvcc finds it; a change to it is a new key. */
static void test_source_directory_is_searched(void **state)
{
	struct jtl_daemon *d = *state;
	char dir[200], src[260], hdr[260], out[260], *err = NULL;
	snprintf(dir, sizeof(dir), "%s/proj", d->dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(src, sizeof(src), "%s/main.cu", dir);
	snprintf(hdr, sizeof(hdr), "%s/local.h", dir);
	snprintf(out, sizeof(out), "%s/main.ptx", d->dir);
	jct_write_text(hdr, "#define VALUE 4321\n");
	jct_write_text(src, "#include \"local.h\"\n"
			    "extern \"C\" __global__ void k(int *x) { x[0] = VALUE; }\n");
	jct_settle();
	const char *args[] = {"compile", src,  "--arch", "compute_90", "--output",
			      "ptx",	 "-o", out,	 NULL};
	free(jct_ctl_expect(d, 0, &err, args));
	assert_true(strncmp(err, "miss", 4) == 0);
	free(err);
	size_t n;
	char *ptx = (char *)jtl_read_file(out, &n);
	assert_non_null(strstr(ptx, "4321"));
	free(ptx);
	jct_write_text(hdr, "#define VALUE 8765\n");
	jct_settle();
	free(jct_ctl_expect(d, 0, &err, args));
	assert_true(strncmp(err, "miss", 4) == 0);
	free(err);
	ptx = (char *)jtl_read_file(out, &n);
	assert_non_null(strstr(ptx, "8765"));
	free(ptx);
}

static void test_help(void **state)
{
	struct jtl_daemon *d = *state;
	const char *ctl = getenv("JITCACHECTL"), *daemon = getenv("JITCACHED");
	char *out = NULL, *err = NULL;
	const char *help_purge[] = {ctl, "help", "purge", NULL};
	assert_int_equal(jct_run(d, help_purge, &out, NULL), 0);
	assert_non_null(strstr(out, "purge --all"));
	assert_null(strstr(out, "compile FILE.cu"));
	free(out);
	const char *stats_help[] = {ctl, "stats", "--help", NULL};
	assert_int_equal(jct_run(d, stats_help, &out, NULL), 0);
	assert_non_null(strstr(out, "stats [--json"));
	assert_null(strstr(out, "purge"));
	free(out);
	const char *all[] = {ctl, "help", NULL};
	assert_int_equal(jct_run(d, all, &out, NULL), 0);
	assert_non_null(strstr(out, "config"));
	assert_non_null(strstr(out, "stop"));
	free(out);
	/* Every admin command of the table (admin.h) has its help, naming each
	 * of its options. */
	for (size_t i = 0; i < jc__admin_n_cmds; i++) {
		const struct jc_admin_cmd *c = &jc__admin_cmds[i];
		const char *sub[] = {ctl, "help", c->name, NULL};
		assert_int_equal(jct_run(d, sub, &out, NULL), 0);
		assert_non_null(strstr(out, c->name));
		for (const struct jc_admin_arg *a = c->args; a && a->name; a++) {
			char opt[64];
			snprintf(opt, sizeof(opt), "--%s", a->option ? a->option : "");
			if (a->option && !strstr(out, opt))
				fail_msg("help %s does not name %s:\n%s", c->name, opt, out);
		}
		free(out);
	}
	const char *bogus[] = {ctl, "help", "bogus", NULL};
	assert_int_equal(jct_run(d, bogus, NULL, &err), 2);
	assert_non_null(strstr(err, "unknown command 'bogus'"));
	free(err);
	const char *dhelp[] = {daemon, "--help", NULL};
	assert_int_equal(jct_run(d, dhelp, &out, NULL), 0);
	assert_non_null(strstr(out, "[10G]"));
	assert_non_null(strstr(out, "[300s]"));
	assert_non_null(strstr(out, "--idle-exit"));
	free(out);
}

static void test_config_stats_since_and_stop(void **state)
{
	struct jtl_daemon *d = *state;
	char *out = jct_ctl_expect(d, 0, NULL, (const char *[]){"config", NULL});
	char want[200];
	snprintf(want, sizeof(want), "(--socket) socket = %s", d->sock);
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "(JITCACHE_AUTOSTART) autostart = 0"));
	snprintf(want, sizeof(want), "serving %s", d->cache);
	assert_non_null(strstr(out, want));
	free(out);

	jct_compile_tiny(d, 1, "sm_90", NULL);
	jct_compile_tiny(d, 1, "sm_90", NULL);
	out = jct_ctl_expect(d, 0, NULL, (const char *[]){"stats", "--json", NULL});
	int64_t since = jct_json_int(out, "hit_latency_since");
	free(out);
	assert_true(since > 1700000000);
	out = jct_ctl_expect(d, 0, NULL, (const char *[]){"stats", NULL});
	assert_non_null(strstr(out, "hits since"));
	free(out);

	char *err = NULL;
	free(jct_ctl_expect(d, 0, &err, (const char *[]){"stop", NULL}));
	assert_non_null(strstr(err, "stopping"));
	free(err);
	assert_int_equal(jtl_daemon_wait(d), 0);
	assert_true(jct_wait_log(d, "stop by uid", 1000));
	/* Nothing answers now: stop says so and fails. */
	free(jct_ctl_expect(d, 1, NULL, (const char *[]){"stop", NULL}));
}

/* Keys by unique prefix wherever a key is taken (show, purge --key, inspect
 * --key), as git takes abbreviated ids; an ambiguous prefix is an error
 * listing the keys it begins; a prefix nothing begins with is "no entry". */
static void test_key_prefixes(void **state)
{
	struct jtl_daemon *d = *state;
	char keys[17][33], listed[32][33], *err = NULL;
	/* 17 keys: two at least share their first hex digit */
	for (int i = 0; i < 17; i++)
		jct_compile_tiny(d, 100 + i, "sm_90", keys[i]);
	size_t a = 0, b = 0;
	for (size_t i = 0; i < 17 && !b; i++)
		for (size_t j = i + 1; j < 17 && !b; j++)
			if (keys[i][0] == keys[j][0])
				a = i, b = j;
	assert_true(b > 0);
	/* the shortest prefix of keys[a] that no other key begins with */
	size_t len = 1;
	for (size_t i = 0; i < 17; i++)
		while (i != a && strncmp(keys[i], keys[a], len) == 0)
			len++;
	char prefix[33], amb[2] = {keys[a][0], '\0'};
	snprintf(prefix, sizeof(prefix), "%.*s", (int)len, keys[a]);
	printf("key %s: unique prefix %s; %s is ambiguous\n", keys[a], prefix, amb);

	char *out = jct_ctl_expect(d, 0, NULL, (const char *[]){"show", prefix, NULL});
	char want[80];
	snprintf(want, sizeof(want), "key          %.32s", keys[a]);
	assert_non_null(strstr(out, want));
	/* users by name (this process's uid: it is the admin here) */
	snprintf(want, sizeof(want), "users        %s\n", getpwuid(getuid())->pw_name);
	if (!strstr(out, want))
		fail_msg("show %s has no '%s':\n%s", prefix, want, out);
	free(out);
	out = jct_ctl_expect(d, 0, NULL, (const char *[]){"inspect", "--key", prefix, NULL});
	assert_non_null(strstr(out, "sm_90"));
	free(out);

	free(jct_ctl_expect(d, 1, &err, (const char *[]){"show", amb, NULL}));
	printf("show %s: %s", amb, err);
	assert_non_null(strstr(err, "is ambiguous"));
	assert_non_null(strstr(err, keys[a]));
	assert_non_null(strstr(err, keys[b]));
	free(err);
	free(jct_ctl_expect(d, 1, &err, (const char *[]){"purge", "--key", amb, NULL}));
	assert_non_null(strstr(err, "is ambiguous"));
	free(err);
	assert_int_equal(jct_ls_keys(d, listed, 32), 17); /* nothing removed */

	/* a prefix nobody's key begins with: as a key nobody has */
	char none[33] = "";
	for (const char *h = "0123456789abcdef"; *h && !none[0]; h++) {
		int used = 0;
		for (size_t i = 0; i < 17; i++)
			used |= keys[i][0] == *h && keys[i][1] == 'f';
		if (!used)
			snprintf(none, sizeof(none), "%cf", *h);
	}
	free(jct_ctl_expect(d, 1, &err, (const char *[]){"show", none, NULL}));
	assert_non_null(strstr(err, "no entry with key"));
	free(err);
	out = jct_ctl_expect(d, 0, NULL, (const char *[]){"purge", "--key", none, NULL});
	free(out);
	free(jct_ctl_expect(d, 1, &err, (const char *[]){"show", "xyz", NULL}));
	assert_non_null(strstr(err, "bad key 'xyz'"));
	free(err);

	/* purge --key PREFIX removes exactly that entry */
	free(jct_ctl_expect(d, 0, NULL, (const char *[]){"purge", "--key", prefix, NULL}));
	assert_int_equal(jct_ls_keys(d, listed, 32), 16);
	free(jct_ctl_expect(d, 1, &err, (const char *[]){"show", keys[a], NULL}));
	free(err);
}

/* version: one "name  value" line per field for people, --json the object. */
static void test_version(void **state)
{
	struct jtl_daemon *d = *state;
	char *out = jct_ctl_expect(d, 0, NULL, (const char *[]){"version", NULL});
	printf("%s", out);
	assert_null(strchr(out, '{'));
	assert_non_null(strstr(out, "\nnvrtc_version       "));
	char want[64];
	snprintf(want, sizeof(want), "\ndaemon_pid          %d\n", (int)d->pid);
	assert_non_null(strstr(out, want));
	free(out);
	out = jct_ctl_expect(d, 0, NULL, (const char *[]){"version", "--json", NULL});
	assert_int_equal(out[0], '{');
	assert_int_equal(jct_json_int(out, "daemon_pid"), d->pid);
	free(out);
}

/* Commands that compile nothing do not load NVRTC or nvJitLink (jitcachectl
 * links neither: toolchain.h, jc__nvrtc_api); doctor, which compiles a test
 * kernel, does. Seen from the files the process opens (strace). */
static void test_nvrtc_not_loaded(void **state)
{
	struct jtl_daemon *d = *state;
	if (jct_sh("command -v strace") != 0)
		skip();
	jct_compile_tiny(d, 1, "sm_90", NULL);
	const char *const cmds[] = {"stats", "ls", "version", "ping", "doctor"};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(*cmds); i++) {
		char trace[300];
		snprintf(trace, sizeof(trace), "%s/strace-%s", d->dir, cmds[i]);
		/* LeakSanitizer cannot stop a traced process's threads (it is
		 * ptrace itself): no leak check under strace (sanitize.sh); the
		 * same commands are checked untraced in the other tests. */
		assert_int_equal(
		    jct_sh("ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" "
			   "strace -f -qq -e trace=open,openat -o %s %s --socket %s %s "
			   ">/dev/null 2>&1; test -s %s",
			   trace, getenv("JITCACHECTL"), d->sock, cmds[i], trace),
		    0);
		int nvrtc = jct_sh("grep -qE 'libnvrtc|libnvJitLink' %s", trace) == 0;
		printf("jitcachectl %s: NVRTC %s\n", cmds[i], nvrtc ? "loaded" : "not loaded");
		assert_int_equal(nvrtc, strcmp(cmds[i], "doctor") == 0);
	}
}

/* Files without end (/dev/zero) are refused once past the most a request
 * carries, not read until memory runs out: inspect, compile, --header. */
static void test_endless_input(void **state)
{
	struct jtl_daemon *d = *state;
	char *err = NULL;
	const char *const cmds[][9] = {
	    /* each NULL-terminated */
	    {"inspect", "/dev/zero", NULL},
	    {"compile", "/dev/zero", "--arch", "sm_90", "-o", "/dev/null", NULL},
	    {"compile", jct_example("saxpy.cu"), "--arch", "sm_90", "--header", "z.h=/dev/zero",
	     "-o", "/dev/null"},
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		double t0 = jtl_now_s();
		char *out = jct_ctl_expect(d, i < 2 ? 2 : 1, &err, cmds[i]);
		fprintf(stderr, "%s %s: %.2f s: %s", cmds[i][0], cmds[i][1], jtl_now_s() - t0, err);
		assert_non_null(strstr(err, "/dev/zero"));
		assert_non_null(strstr(err, strerror(EFBIG)));
		free(out);
		free(err);
	}
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, jct_setup_started, jct_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_output_targets),
	    T(test_default_output_and_warnings),
	    T(test_source_directory_is_searched),
	    T(test_help),
	    T(test_config_stats_since_and_stop),
	    T(test_endless_input),
	    T(test_key_prefixes),
	    T(test_version),
	    T(test_nvrtc_not_loaded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
