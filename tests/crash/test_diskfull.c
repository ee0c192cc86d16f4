/* SPDX-License-Identifier: MIT */
/*
 * A full disk under a running daemon: its cache directory is a small tmpfs
 * mounted in a private mount namespace of this test (the daemon and
 * jitcachectl inherit it). Filled to the last block, a new compile fails
 * with JC_ENOSPC and a message that says so, hits are still served, a
 * failing source still gets its log, nothing partial is left in tmp/ or
 * objects/, and once space is freed everything works again. On a full disk
 * `purge --all` and `--to-size 0` free the space, through the daemon, after
 * a restart on the full disk, and offline, and so does eviction (the
 * store's reserve gives the index room for its first deletions). Exits 77 where no private mount
 * namespace can be made (not root).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"
#include "tests/lib/variants.h"

enum { HIT_A, HIT_B, HIT_C, NEW, FAILS };

/* The cache directory is a small tmpfs; the pool is 3 hits, one new kernel and a failing source. */
static int setup(void **state)
{
	jct_fx_new(state, "0:0,0:1,0:2,0:3,1:0");
	struct jct_fx *f = *state;
	assert_int_equal(mkdir(f->d.cache, 0700), 0);
	if (mount("jc-full", f->d.cache, "tmpfs", 0, "size=8m,mode=0700") != 0) {
		fprintf(stderr, "mount tmpfs on %s: %s\n", f->d.cache, strerror(errno));
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	struct jct_fx *f = *state;
	jtl_daemon_kill(&f->d);
	umount2(f->d.cache, MNT_DETACH);
	return jct_fx_free(state);
}

/* Requests pool variant i and checks it against NVRTC; returns the cache status. */
static int fetch(struct jct_fx *f, int i)
{
	jc_client *c = jct_connect(&f->d);
	int rc, status;
	uint64_t wrong = 0;
	assert_int_equal(jct_pool_fetch(&f->pool, i, c, "fetch", &rc, &status, &wrong), 0);
	jc_client_close(c);
	return status;
}

/* Writes the file DIR/name until the filesystem has no block left. */
static void fill_with(struct jct_fx *f, const char *name)
{
	static uint8_t chunk[64 * 1024];
	char path[400];
	snprintf(path, sizeof(path), "%s/%s", f->d.cache, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	for (size_t n = sizeof(chunk); n >= 1; n /= 2)
		while (write(fd, chunk, n) == (ssize_t)n)
			;
	assert_int_equal(errno, ENOSPC);
	close(fd);
	struct statvfs sv;
	assert_int_equal(statvfs(f->d.cache, &sv), 0);
	assert_int_equal(sv.f_bavail, 0);
}

static void fill(struct jct_fx *f)
{
	fill_with(f, "filler");
}

/* Nothing staged, nothing partial, every row's object sound. */
static void check_clean(struct jct_fx *f, size_t objects)
{
	struct jct_store_scan scan;
	jct_scan_store(f->d.cache, &scan);
	assert_int_equal(scan.tmp_files, 0);
	assert_int_equal(scan.bad_objects, 0);
	assert_int_equal(scan.objects, objects);
	const char *verify[] = {"verify", NULL};
	assert_int_equal(jct_ctl(&f->d, NULL, NULL, verify), 0);
}

/* A new compile on the full disk: a clear no-space error, nothing stored. */
static void expect_enospc(struct jct_fx *f)
{
	jc_client *c = jct_connect(&f->d);
	jc_request *r = jct_variant_request(&f->pool.v[NEW]);
	jc_result *res = NULL;
	assert_int_equal(jc_compile(c, r, &res), JC_ENOSPC);
	assert_null(res);
	printf("full disk: jc_compile: %s: %s\n", jc_strerror(JC_ENOSPC), jc_client_errmsg(c));
	assert_non_null(strstr(jc_client_errmsg(c), "No space left on device"));
	jc_client_close(c);
	jc_request_free(r);
}

static void test_disk_full(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jtl_now_s();
	jct_daemon_start(&f->d, NULL);
	for (int i = HIT_A; i <= HIT_C; i++)
		assert_int_equal(fetch(f, i), JC_MISS);
	fill(f);

	expect_enospc(f);

	/* Hits are served; a failing source still gets its log; the daemon lives
	 * through a few flushes of access times that cannot be written. */
	for (int i = HIT_A; i <= HIT_C; i++)
		assert_int_equal(fetch(f, i), JC_HIT);
	int st = fetch(f, FAILS);
	assert_true(st == JC_MISS);
	sleep(2);
	for (int i = HIT_A; i <= HIT_C; i++)
		assert_int_equal(fetch(f, i), JC_HIT);
	check_clean(f, 3);

	/* Space again: the same request compiles, is stored and hits. */
	char filler[400];
	snprintf(filler, sizeof(filler), "%s/filler", f->d.cache);
	assert_int_equal(unlink(filler), 0);
	assert_int_equal(fetch(f, NEW), JC_MISS);
	assert_int_equal(fetch(f, NEW), JC_HIT);
	st = fetch(f, FAILS);
	assert_true(st == JC_MISS || st == JC_NEGATIVE_HIT);
	assert_int_equal(fetch(f, FAILS), JC_NEGATIVE_HIT);
	check_clean(f, 4);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
	printf("disk full: new compile refused with JC_ENOSPC, 3 hits served, no partial object, "
	       "recovered once freed; %.1f s\n",
	       jtl_now_s() - t0);
}

/* Runs jitcachectl purge ARG... and checks it says it removed n entries. */
static void purge(struct jct_fx *f, const char *a, const char *b, int n)
{
	const char *args[] = {"purge", a, b, NULL};
	char *out = NULL, *err = NULL, want[64];
	int rc = jct_ctl(&f->d, &out, &err, args);
	if (rc != 0)
		fprintf(stderr, "purge %s: exit %d: %s%s\n", a, rc, out ? out : "", err ? err : "");
	assert_int_equal(rc, 0);
	snprintf(want, sizeof(want), "removed %d entries", n);
	if (!strstr(out, want))
		fprintf(stderr, "purge %s: no '%s' in: %s%s\n", a, want, out, err);
	assert_non_null(strstr(out, want));
	free(out);
	free(err);
}

static uint64_t free_bytes(struct jct_fx *f)
{
	struct statvfs sv;
	assert_int_equal(statvfs(f->d.cache, &sv), 0);
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

static void refill(struct jct_fx *f)
{
	char filler[400];
	snprintf(filler, sizeof(filler), "%s/filler", f->d.cache);
	unlink(filler);
	for (int i = HIT_A; i <= HIT_C; i++)
		assert_int_equal(fetch(f, i), JC_MISS);
	fill(f);
}

static void test_purge_on_full_disk(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jtl_now_s();
	jct_daemon_start(&f->d, NULL);
	/* Through the running daemon. */
	refill(f);
	purge(f, "--all", NULL, 3);
	check_clean(f, 0);
	printf("full disk: purge --all through the daemon freed %llu bytes\n",
	       (unsigned long long)free_bytes(f));
	assert_true(free_bytes(f) > 0);

	/* A daemon restarted on the full disk. */
	refill(f);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
	jct_daemon_start(&f->d, NULL);
	purge(f, "--to-size", "0", 3);
	check_clean(f, 0);
	assert_true(free_bytes(f) > 0);

	/* Offline, with no daemon. */
	refill(f);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
	purge(f, "--all", NULL, 3);
	assert_true(free_bytes(f) > 0);

	/* Eviction: a daemon started on the full disk with a budget the entries
	 * pass evicts them (its budget check runs every 5 s). */
	jct_daemon_start(&f->d, NULL);
	refill(f);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
	const char *const small[] = {"--max-size", "1K", NULL};
	jct_daemon_start(&f->d, small);
	double t1 = jtl_now_s();
	while (jct_stat(&f->d, "evictions") < 3 && jtl_now_s() - t1 < 15)
		usleep(200000);
	assert_int_equal(jct_stat(&f->d, "evictions"), 3);
	check_clean(f, 0);
	assert_true(free_bytes(f) > 0);
	printf("full disk: purge --all, --to-size 0 freed the space through the daemon, after a "
	       "restart and offline, and so did eviction; %.1f s\n",
	       jtl_now_s() - t0);
}

/* DIR/reserve's size, or -1 when there is none. */
static int64_t reserve_size(struct jct_fx *f)
{
	char path[400];
	struct stat st;
	snprintf(path, sizeof(path), "%s/reserve", f->d.cache);
	return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/*
 * The reserve spent on a full disk comes back once space does, even when
 * less than twice its size returns; a daemon restarted on the disk another
 * file then filled starts (the reserve gives the index room) and serves hits.
 */
static void test_reserve_comes_back(void **state)
{
	struct jct_fx *f = *state;
	jct_daemon_start(&f->d, NULL);
	int64_t reserve = reserve_size(f);
	assert_true(reserve > 0);
	refill(f);
	purge(f, "--all", NULL, 3);
	/* Space returns: half a reserve more than the reserve purge released. */
	char filler[400];
	snprintf(filler, sizeof(filler), "%s/filler", f->d.cache);
	struct stat st;
	assert_int_equal(stat(filler, &st), 0);
	assert_int_equal(truncate(filler, st.st_size - reserve / 2), 0);
	double t0 = jtl_now_s();
	while (reserve_size(f) < 0 && jtl_now_s() - t0 < 15)
		jtl_sleep_ms(200);
	printf("full disk: reserve made again %.1f s after space returned (%llu bytes free now)\n",
	       jtl_now_s() - t0, (unsigned long long)free_bytes(f));
	assert_int_equal(reserve_size(f), reserve);
	for (int i = HIT_A; i <= HIT_C; i++)
		assert_int_equal(fetch(f, i), JC_MISS);
	fill_with(f, "filler2");
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
	jct_daemon_start(&f->d, NULL);
	for (int i = HIT_A; i <= HIT_C; i++)
		assert_int_equal(fetch(f, i), JC_HIT);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
}

/*
 * No reserve at all (removed by hand, or spent and no room to make it): a
 * daemon starts on the full disk and serves hits, says so in stats and
 * doctor, stores nothing, and stores again once space returns; an offline
 * purge on the full disk frees space.
 */
static void test_full_disk_without_reserve(void **state)
{
	struct jct_fx *f = *state;
	char path[400];
	snprintf(path, sizeof(path), "%s/reserve", f->d.cache);
	jct_daemon_start(&f->d, NULL);
	for (int i = HIT_A; i <= HIT_C; i++)
		assert_int_equal(fetch(f, i), JC_MISS);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
	assert_int_equal(unlink(path), 0);
	fill(f);
	jct_daemon_start(&f->d, NULL);
	for (int i = HIT_A; i <= HIT_C; i++)
		assert_int_equal(fetch(f, i), JC_HIT);
	assert_int_equal(jct_stat(&f->d, "disk_full"), 1);
	const char *doctor[] = {"doctor", NULL};
	char *out = NULL, *err = NULL;
	jct_ctl(&f->d, &out, &err, doctor);
	if (!strstr(out, "disk full"))
		fail_msg("doctor does not say the disk is full: %s%s", out, err);
	free(out);
	free(err);
	expect_enospc(f);
	check_clean(f, 3);
	/* Space returns: stored again. */
	char filler[400];
	snprintf(filler, sizeof(filler), "%s/filler", f->d.cache);
	assert_int_equal(unlink(filler), 0);
	assert_int_equal(jct_stat(&f->d, "disk_full"), 0);
	assert_int_equal(fetch(f, NEW), JC_MISS);
	assert_int_equal(fetch(f, NEW), JC_HIT);
	/* Offline purge on a full disk with no reserve. */
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
	unlink(path);
	fill(f);
	purge(f, "--all", NULL, 4);
	printf(
	    "full disk without a reserve: the daemon started and served 3 hits, stats and doctor "
	    "said so; offline purge --all freed %llu bytes\n",
	    (unsigned long long)free_bytes(f));
	assert_true(free_bytes(f) > 0);
}

int main(void)
{
	/* A private mount namespace for this process and its children. */
	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		printf("cannot make a private mount namespace (%s): needs root; skipped\n",
		       strerror(errno));
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_disk_full, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_purge_on_full_disk, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reserve_comes_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_full_disk_without_reserve, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
