/* SPDX-License-Identifier: MIT */
/*
 * ls, show, verify and gc against a real daemon and offline: what show
 * reports of a real compile (options, versions, lowered names, timings, the
 * log), a flipped byte found and quarantined by verify, orphaned objects and
 * expired negative entries collected after their grace period, by `gc` and
 * by the daemon's periodic collector.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

#include "common/req.h"
#include "core/index.h"

/* Compiles saxpy with an option and two name expressions; returns the key
 * and the lowered name of &saxpy<float>. */
static void compile_saxpy(struct jtl_daemon *d, char key[33], char lowered[128])
{
	static const char *const exprs[] = {"&saxpy<float>", "&saxpy<double>", NULL};
	jc_request *r = jct_request("saxpy.cu", "sm_90", exprs);
	assert_int_equal(jc_request_add_option(r, "-DJC_SHOW_TEST=1"), 0);
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	assert_int_equal(jc_compile(c, r, &res), 0);
	snprintf(key, 33, "%s", jc_result_key(res));
	snprintf(lowered, 128, "%s", jc_result_lowered_name(res, "&saxpy<float>"));
	jc_result_free(res);
	jc_client_close(c);
	jc_request_free(r);
}

static void test_ls_and_show(void **state)
{
	struct jtl_daemon *d = *state;
	char key[33], bad[33], lowered[128], want[256];
	jct_daemon_start(d, NULL);
	compile_saxpy(d, key, lowered);
	jct_compile_failure(d, bad);
	for (int offline = 0; offline < 2; offline++) {
		const char *ls[] = {"ls", NULL}, *ls_json[] = {"ls", "--json", NULL};
		char *out = jct_ctl_expect(d, 0, NULL, ls);
		jct_assert_has(out, "KEY ");
		jct_assert_has(out, "LAST ACCESS");
		snprintf(want, sizeof(want), "%s  cubin     sm_90", key);
		jct_assert_has(out, want);
		snprintf(want, sizeof(want), "%s  negative  sm_90", bad);
		jct_assert_has(out, want);
		jct_assert_has(out, "saxpy.cu");
		free(out);
		out = jct_ctl_expect(d, 0, NULL, ls_json);
		assert_true(out[0] == '[');
		static const char *const fields[] = {"\"kind\": \"cubin\"",
						     "\"arch\": \"sm_90\"",
						     "\"size\": ",
						     "\"hits\": ",
						     "\"last_access\": ",
						     "\"source_name\": \"saxpy.cu\"",
						     "\"kind\": \"negative\""};
		for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
			jct_assert_has(out, fields[i]);
		free(out);

		const char *show[] = {"show", key, NULL};
		out = jct_ctl_expect(d, 0, NULL, show);
		jct_assert_has(out, "options      -DJC_SHOW_TEST=1");
		jct_assert_has(out, "versions     nvrtc=");
		jct_assert_has(out, "driver=");
		snprintf(want, sizeof(want), "lowered.0    &saxpy<float>\t%s\n", lowered);
		if (!strstr(out, want)) /* stored order is the request's or sorted */
			snprintf(want, sizeof(want), "&saxpy<float>\t%s\n", lowered);
		jct_assert_has(out, want);
		jct_assert_has(out, "&saxpy<double>\t_Z5saxpyIdEv");
		jct_assert_has(out, "compile_us   ");
		jct_assert_has(out, "created      ");
		jct_assert_has(out, "status       ok");
		free(out);
		const char *show_json[] = {"show", "--json", key, NULL};
		out = jct_ctl_expect(d, 0, NULL, show_json);
		assert_true(jct_json_int(out, "compile_us") > 0);
		free(out);

		/* A negative entry: the compile log, and when it expires. */
		const char *show_bad[] = {"show", bad, NULL};
		out = jct_ctl_expect(d, 0, NULL, show_bad);
		jct_assert_has(out, "status       failed");
		jct_assert_has(out, "log:\n");
		jct_assert_has(out, "undefined_thing");
		jct_assert_has(out, "expires      ");
		free(out);

		char *err = NULL;
		const char *missing[] = {"show", "00000000000000000000000000000000", NULL};
		free(jct_ctl_expect(d, 1, &err, missing));
		jct_assert_has(err, "no entry with key");
		free(err);
		const char *bogus[] = {"show", "nothex", NULL};
		free(jct_ctl_expect(d, 1, &err, bogus));
		jct_assert_has(err, "bad key 'nothex': a key (32 hex digits) or a unique prefix");
		free(err);
		if (!offline)
			assert_int_equal(jtl_daemon_stop(d), 0);
	}
}

/* Flips one byte of the object of key (objects are read-only files). */
static void corrupt_object(const struct jtl_daemon *d, const char *key, char object[33])
{
	const char *show[] = {"show", "--json", key, NULL};
	char *out = jct_ctl_expect(d, 0, NULL, show);
	const char *p = strstr(out, "\"object\": \"");
	assert_non_null(p);
	snprintf(object, 33, "%.32s", p + 11);
	free(out);
	char path[512];
	snprintf(path, sizeof(path), "%s/objects/%.2s/%s", d->cache, object, object);
	assert_int_equal(chmod(path, 0644), 0);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, 100), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, 100), 1);
	close(fd);
	assert_int_equal(chmod(path, 0444), 0);
}

/* 1 when quarantine/ holds a file named after object. */
static int in_quarantine(const struct jtl_daemon *d, const char *object)
{
	char path[512];
	int found = 0;
	snprintf(path, sizeof(path), "%s/quarantine", d->cache);
	DIR *dir = opendir(path);
	assert_non_null(dir);
	for (struct dirent *de; (de = readdir(dir));)
		found |= strncmp(de->d_name, object, 32) == 0;
	closedir(dir);
	return found;
}

static void test_verify_quarantines(void **state)
{
	struct jtl_daemon *d = *state;
	char a[33], b[33], object[33], want[128];
	jct_daemon_start(d, NULL);
	jct_compile_tiny(d, 1, "sm_90", a);
	jct_compile_tiny(d, 2, "sm_90", b);
	const char *verify[] = {"verify", NULL};
	char *err = NULL;
	/* The result on stdout, as every command's: stderr is for errors. */
	char *sum = jct_ctl_expect(d, 0, &err, verify);
	jct_assert_has(sum, "checked 2 objects, 0 bad");
	assert_null(strstr(err, "checked"));
	free(sum);
	free(err);
	for (int offline = 0; offline < 2; offline++) {
		const char *key = offline ? b : a;
		corrupt_object(d, key, object);
		char *out = jct_ctl_expect(d, 1, &err, verify);
		jct_assert_has(out, "1 bad (quarantined)");
		assert_null(strstr(err, "quarantined"));
		jct_assert_has(out, "problem      corrupt");
		jct_assert_has(out, key);
		snprintf(want, sizeof(want), "object       %s", object);
		jct_assert_has(out, want);
		free(out);
		free(err);
		assert_true(jct_listed(d, key) == 0);
		assert_true(in_quarantine(d, object));
		if (!offline) {
			assert_int_equal(jct_stat(d, "corrupt_objects"), 1);
			/* The next request compiles afresh, correct bytes again. */
			assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_MISS);
			assert_int_equal(jtl_daemon_stop(d), 0);
		}
	}
	assert_int_equal(jct_stat(d, "corrupt_objects"), 2); /* offline: stored counter */
}

/* An object no entry names, as a crash between rename and commit leaves:
 * the entry's row is deleted through the index, the file stays. Its mtime
 * is set age_s seconds back. Returns its path in path. */
static void orphan(const struct jtl_daemon *d, const char *key, int age_s, char *path, size_t len)
{
	const char *show[] = {"show", "--json", key, NULL};
	char *out = jct_ctl_expect(d, 0, NULL, show);
	const char *p = strstr(out, "\"object\": \"");
	assert_non_null(p);
	snprintf(path, len, "%s/objects/%.2s/%.32s", d->cache, p + 11, p + 11);
	free(out);
	char ipath[512], err[256];
	struct jc_index *ix = NULL;
	uint8_t k[16];
	snprintf(ipath, sizeof(ipath), "%s/index.sqlite", d->cache);
	assert_int_equal(jc__unhex16(key, k), 0);
	assert_int_equal(jc__index_open(ipath, 0, &ix, err, sizeof(err)), 0);
	assert_int_equal(jc__index_delete(ix, k), 0);
	jc__index_close(ix);
	struct timespec t[2] = {{.tv_sec = time(NULL) - age_s}, {.tv_sec = time(NULL) - age_s}};
	assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

static void test_gc_grace(void **state)
{
	struct jtl_daemon *d = *state;
	char k[4][33], old0[512], old1[512], young[512], bad[33];
	struct stat st;
	const char *ttl[] = {"--negative-ttl", "1", NULL};
	jct_daemon_start(d, ttl);
	for (int i = 0; i < 4; i++)
		jct_compile_tiny(d, 10 + i, "sm_90", k[i]);
	jct_compile_failure(d, bad);
	assert_int_equal(jtl_daemon_stop(d), 0);
	orphan(d, k[0], 3600, old0, sizeof(old0)); /* past the 10 minute grace */
	orphan(d, k[1], 3600, old1, sizeof(old1));
	orphan(d, k[2], 60, young, sizeof(young)); /* a publish may still commit it */
	sleep(2);				   /* the negative entry expires */

	/* Offline gc: the old orphan and the expired failure go; the young stays. */
	const char *gc[] = {"gc", NULL};
	char *err = NULL, *out = NULL;
	out = jct_ctl_expect(d, 0, &err, gc);
	jct_assert_has(out, "removed 1 expired negative entries, 2 orphaned objects");
	assert_null(strstr(err, "orphaned"));
	free(out);
	free(err);
	assert_int_equal(stat(old0, &st), -1);
	assert_int_equal(stat(old1, &st), -1);
	assert_int_equal(stat(young, &st), 0);
	assert_int_equal(jct_listed(d, bad), 0);
	assert_int_equal(jct_listed(d, k[3]), 1); /* a referenced object is never touched */

	/* Through the daemon: an object aged past the grace now goes. */
	struct timespec t[2] = {{.tv_sec = time(NULL) - 3600}, {.tv_sec = time(NULL) - 3600}};
	assert_int_equal(utimensat(AT_FDCWD, young, t, 0), 0);
	jct_daemon_start(d, NULL);
	out = jct_ctl_expect(d, 0, &err, gc);
	jct_assert_has(out, "1 orphaned objects");
	jct_assert_has(out, young);
	free(out);
	free(err);
	assert_int_equal(stat(young, &st), -1);
	assert_int_equal(jct_compile_tiny(d, 13, "sm_90", NULL), JC_HIT);
}

/* The daemon collects by itself every --gc-interval. */
static void test_periodic_gc(void **state)
{
	struct jtl_daemon *d = *state;
	char k[33], path[512];
	struct stat st;
	jct_daemon_start(d, NULL);
	jct_compile_tiny(d, 20, "sm_90", k);
	assert_int_equal(jtl_daemon_stop(d), 0);
	orphan(d, k, 3600, path, sizeof(path));
	const char *every[] = {"--gc-interval", "1s", NULL};
	jct_daemon_start(d, every);
	int gone = 0;
	for (int i = 0; i < 100 && !gone; i++) {
		gone = stat(path, &st) != 0;
		usleep(50000);
	}
	assert_true(gone);
	char *log = jct_log(d);
	jct_assert_has(
	    log, "info EVICT: collector: removed 0 expired negative entries, 1 orphaned objects");
	free(log);
}

/* Source names and compile logs are other clients' words: ls and show
 * print them with escape sequences (ESC, a C1 CSI) written as \xNN, their
 * lines kept. */
static void test_terminal_escapes(void **state)
{
	struct jtl_daemon *d = *state;
	char key[33];
	jct_daemon_start(d, NULL);
	/* A source line NVRTC quotes in its log, an ESC in it. */
	static const char src[] =
	    "extern \"C\" __global__ void k() { int x = \"\x1b]0;pwned\x07\"; }\n";
	jc_request *r = jct_request_src("evil\xc2\x9b"
					"2J.cu",
					src, "sm_90");
	jc_result *res = jct_compile(d, r, JC_ECOMPILE);
	snprintf(key, sizeof(key), "%s", jc_result_key(res));
	jc_result_free(res);
	jc_request_free(r);
	const char *ls[] = {"ls", NULL}, *show[] = {"show", key, NULL};
	char *out = jct_ctl_expect(d, 0, NULL, ls);
	jct_assert_has(out, "evil\\xc2\\x9b2J.cu");
	assert_null(strstr(out, "\xc2\x9b"));
	free(out);
	out = jct_ctl_expect(d, 0, NULL, show);
	fprintf(stderr, "show of a hostile entry:\n%s", out);
	jct_assert_has(out, "evil\\xc2\\x9b2J.cu");
	jct_assert_has(out, "log:\n");
	jct_assert_has(out, "\\x1b]0;pwned\\x07");
	assert_null(strchr(out, 0x1b));
	assert_null(strchr(out, 0x07));
	free(out);
}

/* A count past INT64_MAX, a sign or a space is refused, not clamped: by
 * the admin table's commands (export's top) and by warm, which the daemon
 * answers itself; each parsed once (jc__admin_arg_count). */
static void test_counts_out_of_range(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	static const char *const bad[] = {"99999999999999999999", "-1", "+5", " 5", "5x", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *err = NULL;
		const char *exp[] = {"export", "--top", bad[i], "-o", "/dev/null", NULL};
		free(jct_ctl_expect(d, 1, &err, exp));
		jct_assert_has(err, "bad --top");
		free(err);
		const char *warm[] = {"warm", "--top", bad[i], NULL};
		free(jct_ctl_expect(d, 1, &err, warm));
		jct_assert_has(err, "bad --top");
		free(err);
	}
	const char *ok[] = {"warm", "--top", "9223372036854775807", NULL};
	free(jct_ctl_expect(d, 0, NULL, ok));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_ls_and_show, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_terminal_escapes, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_counts_out_of_range, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_verify_quarantines, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_gc_grace, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_periodic_gc, jct_setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
