/* SPDX-License-Identifier: MIT */
/*
 * The byte budget against a real daemon with real NVRTC compiles: eviction
 * keeps the budget, least recently used first (a hit protects an old entry),
 * the newest survive, `evictions` counts and persists; an entry being served
 * survives a purge (its descriptor stays readable after the unlink), and
 * hits racing purges never see a broken or missing object.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmocka.h>

#include "tests/lib/test.h"

#include "client/client_internal.h"
#include "proto/io.h"

/*
 * The budget counts every byte the cache directory holds: each entry's
 * charge (its object in whole blocks, log and row) and what the directory
 * holds besides (WAL, -shm, reserve, directories: tens of KiB that move as
 * the WAL grows and is cut back). These tests use entries of 64 KiB (a
 * kernel with an initialised 64 KiB global), so that this movement is about
 * one entry.
 */
static jc_cache_status fat(const struct jtl_daemon *d, int n, char key_out[33])
{
	char name[32], src[256];
	snprintf(name, sizeof(name), "fat%d.cu", n);
	snprintf(
	    src, sizeof(src),
	    "__device__ char pad[65536] = {%d};\n"
	    "extern \"C\" __global__ void fat(char *p) { p[threadIdx.x] = pad[threadIdx.x]; }\n",
	    n + 1);
	return jct_compile_src(d, name, src, "sm_90", 0, key_out);
}

/* What one fat entry costs (its charge and its fan-out directory) and what
 * an empty cache directory holds under a budget of about a megabyte. */
static void fat_cost(struct jtl_daemon *d, int64_t *entry, int64_t *base)
{
	/* artifacts only: kept requests count too (test_rewarm.c) */
	const char *flags[] = {"--max-size", "1M", "--keep-requests", "no", NULL};
	jct_daemon_start(d, flags);
	int64_t empty = jct_stat(d, "overhead_bytes");
	assert_int_equal(fat(d, 999, NULL), JC_MISS);
	*entry = jct_stat(d, "stored_bytes") + (jct_stat(d, "overhead_bytes") - empty);
	assert_true(*entry > 65536);
	const char *purge[] = {"purge", "--all", NULL};
	free(jct_ctl_expect(d, 0, NULL, purge));
	*base = jct_stat(d, "overhead_bytes");
	assert_int_equal(jtl_daemon_stop(d), 0);
}

/* The budget holds: what the entries are charged and what the directory
 * holds besides are within it (waiting for the background eviction). */
static void wait_within(const struct jtl_daemon *d, int64_t budget)
{
	double t0 = jtl_now_s();
	int64_t used;
	while ((used = jct_stat(d, "stored_bytes") + jct_stat(d, "overhead_bytes")) > budget &&
	       jtl_now_s() - t0 < 15)
		jtl_sleep_ms(100);
	printf("stored %lld + besides %lld = %lld of a budget of %lld\n",
	       (long long)jct_stat(d, "stored_bytes"), (long long)jct_stat(d, "overhead_bytes"),
	       (long long)used, (long long)budget);
	assert_true(used <= budget);
}

static int in(const char *key, char (*keys)[33], size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(keys[i], key) == 0)
			return 1;
	return 0;
}

/* Budget of 10.5 entries over an empty directory: 12 entries pass the
 * high-water mark, eviction goes to 90 % of the budget. Entries A (old), B,
 * then a hit on A[0], then C: what goes is the least recently used, A[1..3]
 * first; A[0] (hit) and every C survive, and the survivors are the most
 * recently used. */
static void test_lru_eviction_keeps_budget(void **state)
{
	struct jtl_daemon *d = *state;
	int64_t size, base;
	fat_cost(d, &size, &base);
	int64_t limit = base + size * 21 / 2;
	char budget[32];
	snprintf(budget, sizeof(budget), "%lld", (long long)limit);
	/* artifacts only: kept requests count too (test_rewarm.c) */
	const char *flags[] = {"--max-size", budget, "--keep-requests", "no", NULL};
	jct_daemon_start(d, flags);
	char a[4][33], b[4][33], c[4][33];
	/* A[1..3] a second apart: last uses are whole seconds, and an eviction
	 * of two (the 11th entry is over 10.5) goes between them. */
	for (int i = 0; i < 4; i++) {
		if (i > 1)
			sleep(1);
		assert_int_equal(fat(d, i, a[i]), JC_MISS);
	}
	sleep(1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fat(d, 10 + i, b[i]), JC_MISS);
	sleep(1);
	assert_int_equal(fat(d, 0, NULL), JC_HIT); /* A[0] is used again */
	sleep(1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fat(d, 20 + i, c[i]), JC_MISS);

	/* Eviction runs in the background after each publish: wait for it. */
	wait_within(d, limit);
	char keys[64][33];
	size_t n = jct_ls_keys(d, keys, 64);
	int64_t evictions = jct_stat(d, "evictions");
	assert_int_equal(jct_stat(d, "entries"), (int64_t)n);
	assert_int_equal(evictions, 12 - (int64_t)n);
	assert_true(evictions >= 2 && evictions <= 5);
	/* Least recently used first: the survivors are a suffix of the use order. */
	const char *order[12] = {a[1], a[2], a[3], b[0], b[1], b[2],
				 b[3], a[0], c[0], c[1], c[2], c[3]};
	for (int i = 0; i < 12; i++)
		assert_int_equal(in(order[i], keys, n), i >= 12 - (int)n);
	/* An evicted entry is a miss again, and compiles afresh. */
	assert_int_equal(fat(d, 1, NULL), JC_MISS);

	/* The count persists across a restart. That miss is an eleventh entry
	 * over a budget of 10.5: its eviction (in the background) is counted
	 * first, every entry compiled is either kept or counted evicted. */
	wait_within(d, limit);
	double t0 = jtl_now_s();
	while (jct_stat(d, "entries") + jct_stat(d, "evictions") != 13 && jtl_now_s() - t0 < 15)
		jtl_sleep_ms(100);
	assert_int_equal(jct_stat(d, "entries") + jct_stat(d, "evictions"), 13);
	evictions = jct_stat(d, "evictions");
	assert_int_equal(jtl_daemon_stop(d), 0);
	jct_daemon_start(d, flags);
	assert_int_equal(jct_stat(d, "evictions"), evictions);
	char *log = jct_log(d);
	assert_non_null(strstr(log, "least recently used entries"));
	free(log);
}

/* A budget of 10 entries over an empty directory under 30 compiles from two
 * client processes: the budget holds, and the 4 compiled last (a second
 * later) all survive. */
static void test_budget_under_load(void **state)
{
	struct jtl_daemon *d = *state;
	int64_t size, base;
	fat_cost(d, &size, &base);
	int64_t limit = base + size * 10;
	char budget[32];
	snprintf(budget, sizeof(budget), "%lldB", (long long)limit);
	/* artifacts only: kept requests count too (test_rewarm.c) */
	const char *flags[] = {"--max-size", budget, "--keep-requests", "no", NULL};
	jct_daemon_start(d, flags);
	pid_t kids[2];
	for (int k = 0; k < 2; k++) {
		kids[k] = fork();
		assert_true(kids[k] >= 0);
		if (kids[k] == 0) {
			for (int i = k; i < 30; i += 2)
				fat(d, 100 + i, NULL);
			_exit(0);
		}
	}
	for (int k = 0; k < 2; k++) {
		int status;
		assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	sleep(1);
	char last[4][33];
	for (int i = 0; i < 4; i++)
		assert_int_equal(fat(d, 200 + i, last[i]), JC_MISS);
	wait_within(d, limit);
	char keys[64][33];
	size_t n = jct_ls_keys(d, keys, 64);
	assert_true(n >= 4 && n <= 10);
	for (int i = 0; i < 4; i++)
		assert_true(in(last[i], keys, n));
	assert_int_equal(jct_stat(d, "evictions"), 34 - (int64_t)n);
	assert_int_equal(jct_stat(d, "misses"), 35); /* with fat_cost's */
}

/* The object path of a served result. */
static void object_path(const struct jtl_daemon *d, const uint8_t object[16], char *path,
			size_t len)
{
	char hex[33];
	jc__hex16(object, hex);
	snprintf(path, len, "%s/objects/%.2s/%s", d->cache, hex, hex);
}

/* A hit is answered with a descriptor of the object (no hot copies: a small
 * one would come inline); a purge (which unlinks the object) while the
 * client still holds it does not break the bytes. */
static void test_served_entry_survives_purge(void **state)
{
	struct jtl_daemon *d = *state;
	const char *const no_copies[] = {"--hot-copy-budget", "0", NULL};
	jct_daemon_start(d, no_copies);
	jc_request *r = jct_request_src("held.cu", jct_tiny_src(7), "sm_90");
	jc_client *c = jct_connect(d);
	jc_result *first = NULL;
	assert_int_equal(jc_compile(c, r, &first), 0);
	size_t size;
	const void *bytes = jc_result_data(first, &size);

	/* The same request again, frame by frame, so the descriptor stays unread. */
	struct jc_buf out = {0}, in = {0};
	uint16_t type = 0;
	int objfd = -1;
	assert_int_equal(jc__encode_req(&out, &r->req), 0);
	assert_int_equal(jc__io_write_all(jc__client_fd(c), out.data, out.len), 0);
	assert_int_equal(jc__io_read_frame(jc__client_fd(c), &in, &type, &objfd, 10000), 0);
	assert_int_equal(type, JC_MSG_RESULT);
	struct jc_res res;
	assert_int_equal(jc__decode_res(in.data, in.len, &res), 0);
	assert_int_equal(res.cache, JC_CACHE_HIT);
	assert_true(objfd >= 0);
	char path[512];
	object_path(d, res.object, path, sizeof(path));
	struct stat st;
	assert_int_equal(stat(path, &st), 0);

	const char *purge[] = {"purge", "--all", NULL};
	free(jct_ctl_expect(d, 0, NULL, purge));
	assert_int_equal(jct_stat(d, "entries"), 0);
	assert_int_equal(stat(path, &st), -1); /* unlinked */
	assert_int_equal(errno, ENOENT);

	/* The held descriptor still reads the whole, correct artifact. */
	uint8_t *held = malloc(res.size + 1);
	ssize_t got = pread(objfd, held, res.size + 1, 0);
	assert_int_equal(got, (ssize_t)res.size);
	assert_int_equal(res.size, size);
	assert_memory_equal(held, bytes, size);
	XXH128_canonical_t canon;
	XXH128_canonicalFromHash(&canon, XXH3_128bits(held, res.size));
	assert_memory_equal(canon.digest, res.object, 16);

	free(held);
	close(objfd);
	jc__res_clear(&res);
	jc__buf_free(&out);
	jc__buf_free(&in);
	jc_result_free(first);
	jc_client_close(c);
	jc_request_free(r);
}

/* Hits from one process while another purges everything every 50 ms: each
 * request ends in a hit or a fresh compile with the right bytes, never an
 * error; no object is ever taken for corrupt. */
static void test_hits_race_purges(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	for (int i = 0; i < 3; i++)
		jct_compile_tiny(d, 300 + i, "sm_90", NULL);
	pid_t kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		jc_client *c = NULL;
		if (jc_client_connect(d->sock, &c) != 0)
			_exit(2);
		for (int n = 0; n < 600; n++) {
			jc_request *r =
			    jct_request_src("race.cu", jct_tiny_src(300 + n % 3), "sm_90");
			jc_result *res = NULL;
			int rc = jc_compile(c, r, &res); /* the client checks size and hash */
			if (rc != 0) {
				fprintf(stderr, "request %d: %s\n", n, jc_client_errmsg(c));
				_exit(1);
			}
			jc_result_free(res);
			jc_request_free(r);
		}
		jc_client_close(c);
		_exit(0);
	}
	const char *purge[] = {"purge", "--all", NULL};
	int status = 0, purges = 0;
	while (waitpid(kid, &status, WNOHANG) == 0) {
		free(jct_ctl_expect(d, 0, NULL, purge));
		purges++;
		usleep(50000);
	}
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(purges > 1);
	assert_int_equal(jct_stat(d, "corrupt_objects"), 0);
	assert_true(jct_stat(d, "misses") > 3); /* purges did remove served entries */
	assert_int_equal(
	    jct_stat(d, "hits") + jct_stat(d, "misses") + jct_stat(d, "single_flight_joins"), 603);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lru_eviction_keeps_budget, jct_setup,
					    jct_teardown),
	    cmocka_unit_test_setup_teardown(test_budget_under_load, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_served_entry_survives_purge, jct_setup,
					    jct_teardown),
	    cmocka_unit_test_setup_teardown(test_hits_race_purges, jct_setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
