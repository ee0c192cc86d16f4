/* SPDX-License-Identifier: MIT */
/*
 * Every purge selection and its --dry-run, through a running daemon and
 * offline on the directory (the same cache, the same expectations): entries
 * from real compiles, their times set through the index code, and entries of
 * another toolchain identity made by a daemon run with
 * JITCACHE_TEST_NVRTC_ID. Objects of removed entries leave the disk.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

enum { E_OLD, E_USED, E_KEY, E_KEEP, E_SM80, E_STALE, E_LRU1, E_LRU2, E_NEG, N_ENTRIES };

/* No kept requests: the daemon of another identity would re-warm them
 * (daemon/rewarm.c), making entries this test does not expect. */
static const char *const no_keep[] = {"--keep-requests", "no", NULL};

struct fx {
	struct jtl_daemon d;
	char key[N_ENTRIES][33];
	unsigned present; /* entries not purged yet (bits of the enum) */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	jct_daemon_init(&f->d);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	jct_daemon_cleanup(&f->d);
	free(f);
	return 0;
}

static size_t count_objects(const char *cache)
{
	char path[512];
	size_t n = 0;
	snprintf(path, sizeof(path), "%s/objects", cache);
	DIR *top = opendir(path);
	assert_non_null(top);
	for (struct dirent *de; (de = readdir(top));) {
		if (de->d_name[0] == '.')
			continue;
		char sub[800];
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		DIR *dir = opendir(sub);
		for (struct dirent *o; dir && (o = readdir(dir));)
			n += o->d_name[0] != '.';
		if (dir)
			closedir(dir);
	}
	closedir(top);
	return n;
}

/* Objects the entries of set name: E_STALE's bytes are E_KEEP's (the same
 * kernel, only the identity in the key differs), stored once (CAS). */
static size_t objects_of(unsigned set)
{
	size_t n = 0;
	for (int i = 0; i < E_NEG; i++)
		n += (set >> i) & 1;
	return n - ((set >> E_STALE) & (set >> E_KEEP) & 1);
}

/* Real compiles: eight artifacts (one by another NVRTC identity) and a
 * compile failure; then times: old / recently used / LRU order. */
static void populate(struct fx *f)
{
	struct jtl_daemon *d = &f->d;
	jct_daemon_start(d, no_keep);
	static const int kernel[] = {1, 2, 3, 4, 5, 0, 7, 8};
	for (int i = 0; i < E_NEG; i++)
		if (i != E_STALE)
			jct_compile_tiny(d, kernel[i], i == E_SM80 ? "sm_80" : "sm_90", f->key[i]);
	jct_compile_failure(d, f->key[E_NEG]);
	assert_int_equal(jtl_daemon_stop(d), 0);

	/* The same kernel as E_KEEP under another NVRTC identity: a new key,
	 * an entry whose versions are not the current ones. */
	setenv("JITCACHE_TEST_NVRTC_ID", "build-id:00000000000000000000000000000000000000ab", 1);
	jct_daemon_start(d, no_keep);
	unsetenv("JITCACHE_TEST_NVRTC_ID");
	assert_int_equal(jct_compile_tiny(d, kernel[E_KEEP], "sm_90", f->key[E_STALE]), JC_MISS);
	assert_string_not_equal(f->key[E_STALE], f->key[E_KEEP]);
	assert_int_equal(jtl_daemon_stop(d), 0);

	int64_t now = (int64_t)time(NULL);
	jct_set_times(d->cache, f->key[E_OLD], now - 7200, now - 7200); /* old, unused */
	jct_set_times(d->cache, f->key[E_USED], now - 7200, now - 60);	/* old, used lately */
	jct_set_times(d->cache, f->key[E_LRU1], now - 100, now - 300);	/* least recent */
	jct_set_times(d->cache, f->key[E_LRU2], now - 100, now - 200);
	f->present = (1u << N_ENTRIES) - 1;
	assert_int_equal(count_objects(d->cache), objects_of(f->present));
}

/* purge ARGS --dry-run, then purge ARGS: both list exactly the entries of
 * want (a bit set over the enum) and only those go. */
static void purge_expect(struct fx *f, const char *a1, const char *a2, unsigned want)
{
	struct jtl_daemon *d = &f->d;
	char keys[N_ENTRIES][33];
	size_t before = jct_ls_keys(d, keys, N_ENTRIES), expect_n = 0;
	for (int i = 0; i < N_ENTRIES; i++)
		expect_n += (want >> i) & 1;
	for (int dry = 1; dry >= 0; dry--) {
		const char *args[6] = {"purge", a1};
		size_t n = 2;
		if (a2)
			args[n++] = a2;
		if (dry)
			args[n++] = "--dry-run";
		args[n] = NULL;
		char *err = NULL, *out = jct_ctl_expect(d, 0, &err, args);
		size_t lines = 0;
		for (const char *p = out; *p; p = strchr(p, '\n') + 1)
			lines++;
		/* one line per entry, then the summary */
		if (lines != expect_n + 1)
			fprintf(stderr, "purge %s %s: %s", a1, a2 ? a2 : "", out);
		assert_int_equal(lines, expect_n + 1);
		size_t n_ls = jct_ls_keys(d, keys, N_ENTRIES);
		unsigned left = dry ? f->present : f->present & ~want;
		for (int i = 0; i < N_ENTRIES; i++) {
			int in_ls = 0;
			for (size_t k = 0; k < n_ls; k++)
				in_ls |= strcmp(keys[k], f->key[i]) == 0;
			assert_int_equal(strstr(out, f->key[i]) != NULL, (want >> i) & 1);
			assert_int_equal(in_ls, (left >> i) & 1);
		}
		char msg[64];
		snprintf(msg, sizeof(msg), "%s %zu entries", dry ? "would remove" : "removed",
			 expect_n);
		assert_non_null(strstr(out, msg)); /* the result: stdout */
		assert_null(strstr(err, msg));
		free(out);
		free(err);
	}
	f->present &= ~want;
	size_t after = jct_ls_keys(d, keys, N_ENTRIES);
	assert_int_equal(after, before - expect_n);
	/* Objects go with their last entry, and only then. */
	assert_int_equal(count_objects(d->cache), objects_of(f->present));
}

#define BIT(e) (1u << (e))

static void all_variants(struct fx *f)
{
	struct jtl_daemon *d = &f->d;
	char size[32];
	purge_expect(f, "--unused-for", "30m", BIT(E_OLD));
	purge_expect(f, "--older-than", "1h", BIT(E_USED));
	purge_expect(f, "--arch", "sm_80", BIT(E_SM80));
	purge_expect(f, "--negative", NULL, BIT(E_NEG));
	purge_expect(f, "--key", f->key[E_KEY], BIT(E_KEY));
	purge_expect(f, "--stale-versions", NULL, BIT(E_STALE));
	/* Left: E_KEEP (recent), E_LRU1, E_LRU2, of one size. To one entry's
	 * stored size (its charge, within a few bytes of the others'): least
	 * recently used first. */
	snprintf(size, sizeof(size), "%lld", (long long)(jct_stat(d, "stored_bytes") / 3 + 64));
	purge_expect(f, "--to-size", size, BIT(E_LRU1) | BIT(E_LRU2));
	purge_expect(f, "--all", NULL, BIT(E_KEEP));
	assert_int_equal(count_objects(d->cache), 0);

	/* No selection, or a bad value: a clear error. */
	const char *none[] = {"purge", "--dry-run", NULL};
	char *err = NULL;
	free(jct_ctl_expect(d, 1, &err, none));
	assert_non_null(strstr(err, "purge needs a selection"));
	free(err);
	const char *bad[] = {"purge", "--unused-for", "soon", NULL};
	free(jct_ctl_expect(d, 2, &err, bad));
	assert_non_null(strstr(err, "bad duration"));
	free(err);
	const char *badkey[] = {"purge", "--key", "xyz", NULL};
	free(jct_ctl_expect(d, 1, &err, badkey));
	assert_non_null(strstr(err, "32 hex digits"));
	free(err);
}

static void test_purge_through_daemon(void **state)
{
	struct fx *f = *state;
	populate(f);
	jct_daemon_start(&f->d, NULL);
	all_variants(f);
	/* Logged with who asked; dry runs at info. */
	char *log = jct_log(&f->d);
	assert_non_null(strstr(log, "notice ADMIN: purge unused_for=1800 by uid"));
	assert_non_null(strstr(log, "info ADMIN: purge unused_for=1800 dry_run by uid"));
	free(log);
	/* The daemon still serves: a purged entry compiles afresh. */
	assert_int_equal(jct_compile_tiny(&f->d, 1, "sm_90", NULL), JC_MISS);
}

static void test_purge_offline(void **state)
{
	struct fx *f = *state;
	populate(f);
	all_variants(f); /* no daemon: jitcachectl works on the directory */
	jct_daemon_start(&f->d, NULL);
	assert_int_equal(jct_stat(&f->d, "entries"), 0);
	assert_int_equal(jct_compile_tiny(&f->d, 1, "sm_90", NULL), JC_MISS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_purge_through_daemon, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_purge_offline, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
