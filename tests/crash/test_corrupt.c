/* SPDX-License-Identifier: MIT */
/*
 * Damaged objects: truncated to zero, truncated to half, one byte flipped
 * (same size: only the client's hash check can see it), replaced by a
 * symlink (to a good copy, even), or gone. The next read of the file (no hot
 * copies: --hot-copy-budget 0) detects each one,
 * counts it in corrupt_objects, quarantines it, recompiles and serves
 * NVRTC's own bytes; `jitcachectl verify` reports every one, through the
 * daemon and offline, and repairs them. A daemon whose tmp/ and quarantine/
 * are removed under it (cleaners of empty directories do) makes them again.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "tests/lib/test.h"
#include "tests/lib/variants.h"

enum damage { TRUNC_ZERO, TRUNC_HALF, FLIP, SYMLINK, MISSING, N_DAMAGE };
static const char *const damage_name[] = {"truncated to zero", "truncated to half",
					  "one byte flipped", "replaced by a symlink", "removed"};

/* One variant per kind of damage: sm_90, sm_80, PTX, sm_80, PTX. */
static int setup(void **state)
{
	jct_fx_new(state, "0:0,0:1,0:2,0:4,0:5");
	return 0;
}

/* The key and object file of each variant, as the last fetch_all() saw them. */
static char keys[N_DAMAGE][33];
static char objects[N_DAMAGE][512];

/* Fetches every variant, checks it against NVRTC and its cache status;
 * remembers keys and object paths. */
static void fetch_all(struct jct_fx *f, jc_cache_status want)
{
	jc_client *c = jct_connect(&f->d);
	for (int i = 0; i < f->pool.n; i++) {
		jc_request *r = jct_variant_request(&f->pool.v[i]);
		jc_result *res = NULL;
		uint64_t wrong = 0;
		int rc = jc_compile(c, r, &res);
		assert_int_equal(
		    jct_ref_check(&f->pool.ref[i], &f->pool.v[i], rc, res, "fetch", &wrong), 0);
		assert_int_equal(wrong, 0);
		if (jc_result_cache_status(res) != want)
			fprintf(stderr, "%s (%s): cache status %d, want %d\n", f->pool.v[i].name,
				damage_name[i], jc_result_cache_status(res), want);
		assert_int_equal(jc_result_cache_status(res), want);
		snprintf(keys[i], sizeof(keys[i]), "%s", jc_result_key(res));
		size_t n;
		const void *data = jc_result_data(res, &n);
		snprintf(objects[i], sizeof(objects[i]), "%s",
			 jct_object_path(f->d.cache, data, n));
		jc_result_free(res);
		jc_request_free(r);
	}
	jc_client_close(c);
}

/* Damages object i as its kind says. */
static void damage(struct jct_fx *f, enum damage how)
{
	const char *path = objects[how];
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(chmod(path, 0644), 0); /* objects are read-only */
	int fd;
	char copy[400];
	switch (how) {
	case TRUNC_ZERO:
		assert_int_equal(truncate(path, 0), 0);
		break;
	case TRUNC_HALF:
		assert_int_equal(truncate(path, st.st_size / 2), 0);
		break;
	case FLIP: {
		uint8_t byte;
		fd = open(path, O_RDWR);
		assert_true(fd >= 0);
		assert_int_equal(pread(fd, &byte, 1, st.st_size / 2), 1);
		byte ^= 0x10;
		assert_int_equal(pwrite(fd, &byte, 1, st.st_size / 2), 1);
		close(fd);
		break;
	}
	case SYMLINK:
		/* Even a link to the right bytes is refused: objects are never followed. */
		snprintf(copy, sizeof(copy), "%s/good-copy", f->d.dir);
		assert_int_equal(rename(path, copy), 0);
		assert_int_equal(symlink(copy, path), 0);
		break;
	case MISSING:
		assert_int_equal(unlink(path), 0);
		break;
	default:
		fail();
	}
	if (how != SYMLINK && how != MISSING)
		assert_int_equal(chmod(path, 0444), 0);
}

/* Every hit is served from the object file, as when the daemon keeps no
 * copies of hot objects (a copy serves the bytes it checked when it was
 * made, whatever happens to the file: test_hitpath). */
static const char *const no_copies[] = {"--hot-copy-budget", "0", NULL};

/* The next read of each damaged object detects it and serves a fresh compile. */
static void test_next_read_repairs(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jtl_now_s();
	jct_daemon_start(&f->d, no_copies);
	fetch_all(f, JC_MISS);
	int64_t compiles = jct_stat(&f->d, "compiles");
	for (int i = 0; i < N_DAMAGE; i++)
		damage(f, (enum damage)i);
	fetch_all(f, JC_MISS); /* recompiled: each object failed a check */
	assert_int_equal(jct_stat(&f->d, "compiles") - compiles, N_DAMAGE);
	assert_int_equal(jct_stat(&f->d, "corrupt_objects"), N_DAMAGE);
	struct jct_store_scan scan;
	jct_scan_store(f->d.cache, &scan);
	assert_int_equal(scan.bad_objects, 0);
	assert_int_equal(scan.objects, N_DAMAGE);
	assert_int_equal(scan.quarantined, N_DAMAGE - 1); /* a missing file has nothing to keep */
	fetch_all(f, JC_HIT);
	const char *verify[] = {"verify", NULL};
	assert_int_equal(jct_ctl(&f->d, NULL, NULL, verify), 0);
	printf("next read: %d objects damaged, %lld detected and recompiled; %.1f s\n", N_DAMAGE,
	       (long long)jct_stat(&f->d, "corrupt_objects"), jtl_now_s() - t0);
}

/* verify lists every damaged object (key, object, problem), repairs, and a
 * second run is clean. */
static void verify_reports_all(struct jct_fx *f, const char *when)
{
	const char *verify[] = {"verify", "--json", NULL};
	char *out = NULL, *err = NULL;
	assert_int_equal(jct_ctl(&f->d, &out, &err, verify), 1);
	for (int i = 0; i < N_DAMAGE; i++) {
		char want[200];
		snprintf(want, sizeof(want), "\"key\": \"%s\"", keys[i]);
		if (!strstr(out, want))
			fprintf(stderr, "verify (%s) missed the object %s: %s\n", when,
				damage_name[i], out);
		assert_non_null(strstr(out, want));
	}
	assert_non_null(strstr(out, "\"problem\": \"missing\""));
	assert_non_null(strstr(out, "\"problem\": \"corrupt\""));
	free(out);
	out = NULL;
	free(err);
	assert_int_equal(jct_ctl(&f->d, &out, NULL, verify), 0);
	assert_string_equal(out, "[]\n");
	free(out);
}

static void test_verify_online_and_offline(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jtl_now_s();
	jct_daemon_start(&f->d, NULL);
	fetch_all(f, JC_MISS);

	/* Through the running daemon. */
	for (int i = 0; i < N_DAMAGE; i++)
		damage(f, (enum damage)i);
	verify_reports_all(f, "daemon");
	assert_int_equal(jct_stat(&f->d, "corrupt_objects"), N_DAMAGE);
	fetch_all(f, JC_MISS);

	/* Offline, on the directory. */
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
	for (int i = 0; i < N_DAMAGE; i++)
		damage(f, (enum damage)i);
	verify_reports_all(f, "offline");
	jct_daemon_start(&f->d, NULL);
	assert_int_equal(jct_stat(&f->d, "corrupt_objects"), 2 * N_DAMAGE);
	fetch_all(f, JC_MISS);
	fetch_all(f, JC_HIT);
	struct jct_store_scan scan;
	jct_scan_store(f->d.cache, &scan);
	assert_int_equal(scan.bad_objects, 0);
	printf("verify: %d objects damaged twice (daemon, offline), %lld reported and repaired; "
	       "%.1f s\n",
	       N_DAMAGE, (long long)jct_stat(&f->d, "corrupt_objects"), jtl_now_s() - t0);
}

/* The compile that replaces a damaged object fails (its worker crashes):
 * the row naming the quarantined object goes too, so verify stays clean and
 * the next request is an ordinary miss, not a second corrupt object. */
static void test_failed_recompile_drops_row(void **state)
{
	struct jct_fx *f = *state;
	setenv("JITCACHE_TEST_FAULTS", "1", 1);
	jct_daemon_start(&f->d, no_copies);
	unsetenv("JITCACHE_TEST_FAULTS");
	fetch_all(f, JC_MISS);
	damage(f, TRUNC_HALF);
	jc_request *r = jct_variant_request(&f->pool.v[TRUNC_HALF]);
	r->req.test_fault = JC_FAULT_CRASH; /* same key: faults are not part of it */
	jc_client *c = jct_connect(&f->d);
	jc_result *res = NULL;
	assert_int_equal(jc_compile(c, r, &res), JC_ECRASH);
	jc_client_close(c);
	jc_request_free(r);
	assert_int_equal(jct_stat(&f->d, "corrupt_objects"), 1);
	const char *verify[] = {"verify", NULL};
	assert_int_equal(jct_ctl(&f->d, NULL, NULL, verify), 0);
	c = jct_connect(&f->d);
	int rc, status;
	uint64_t wrong = 0;
	assert_int_equal(
	    jct_pool_fetch(&f->pool, TRUNC_HALF, c, "after crash", &rc, &status, &wrong), 0);
	assert_int_equal(status, JC_MISS);
	jc_client_close(c);
	assert_int_equal(jct_stat(&f->d, "corrupt_objects"), 1);
}

/* tmp/ and quarantine/ removed under a running daemon (empty most of the
 * time: what cleaners of old empty directories remove): the next compile
 * and the next quarantine make them again and say so in the log. */
static void test_store_dirs_removed(void **state)
{
	struct jct_fx *f = *state;
	char tmp[400], quar[400];
	snprintf(tmp, sizeof(tmp), "%s/tmp", f->d.cache);
	snprintf(quar, sizeof(quar), "%s/quarantine", f->d.cache);
	jct_daemon_start(&f->d, NULL);
	fetch_all(f, JC_MISS);
	assert_int_equal(rmdir(tmp), 0);
	assert_int_equal(rmdir(quar), 0);
	damage(f, FLIP);
	const char *purge[] = {"purge", "--arch", "sm_90", NULL};
	assert_int_equal(jct_ctl(&f->d, NULL, NULL, purge), 0);
	/* sm_90 (TRUNC_ZERO) was purged and FLIP is corrupt: both compile again. */
	jc_client *c = jct_connect(&f->d);
	for (int i = 0; i < f->pool.n; i++) {
		int rc, status;
		uint64_t wrong = 0;
		assert_int_equal(
		    jct_pool_fetch(&f->pool, i, c, "after rmdir", &rc, &status, &wrong), 0);
		assert_int_equal(rc, 0);
		assert_int_equal(status, i == TRUNC_ZERO || i == FLIP ? JC_MISS : JC_HIT);
	}
	jc_client_close(c);
	struct jct_store_scan scan;
	jct_scan_store(f->d.cache, &scan); /* fails unless both are there again */
	assert_int_equal(scan.tmp_files, 0);
	assert_int_equal(scan.quarantined, 1);
	assert_int_equal(scan.bad_objects, 0);
	fetch_all(f, JC_HIT);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
	char *log = jct_log(&f->d);
	assert_non_null(strstr(log, "/tmp was removed or replaced while in use"));
	assert_non_null(strstr(log, "/quarantine was removed or replaced while in use"));
	free(log);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_next_read_repairs, setup, jct_fx_free),
	    cmocka_unit_test_setup_teardown(test_verify_online_and_offline, setup, jct_fx_free),
	    cmocka_unit_test_setup_teardown(test_failed_recompile_drops_row, setup, jct_fx_free),
	    cmocka_unit_test_setup_teardown(test_store_dirs_removed, setup, jct_fx_free),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
