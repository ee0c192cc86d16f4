/* SPDX-License-Identifier: MIT */
/*
 * Include trees watched by the daemon (common/watch.h), with a real daemon,
 * real inotify and real NVRTC compiles to PTX (whose text shows the value a
 * header defined, so a stale hit would be seen). A generated tree of 2,000
 * headers (40 nested directories of 50) is included in full by the kernel;
 * then: an edit of a deep file is a miss, then watched hits; a new file
 * shadowing a later search-path entry is a miss; a directory renamed away,
 * removed and made again, or a symbolic link to a directory swapped (inside
 * the tree, and the -I directory itself) is a miss with the new bytes; an
 * overflowed event queue (the daemon stopped while more events than
 * fs.inotify.max_queued_events arrive, then a content change the queue
 * cannot hold) falls back to the stat walk and stays correct; a watch budget
 * too small for the tree stat-walks every hit, correctly; a process that
 * rewrites its generated header with the same bytes before each of 5 runs
 * costs 1 compile and 4 hits.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

enum { DIRS = 40, FILES = 50 }; /* 2,000 headers */

/* The directory of level i of the nested chain, relative to the tree root. */
static void level_dir(int i, char *out, size_t len)
{
	size_t n = (size_t)snprintf(out, len, "t");
	for (int k = 0; k <= i && n < len; k++)
		n += (size_t)snprintf(out + n, len - n, "/d%d", k);
}

/*
 * root/t/d0/d1/.../d39, 50 headers in each; root/all.h includes every one
 * (each defines H_<dir>_<file>); the deepest, d39/f49.h, defines DEEP.
 */
static void make_tree(const struct jtl_daemon *d, const char *root, int deep_value)
{
	size_t cap = (size_t)DIRS * FILES * (DIRS * 4 + 40), n = 0;
	char *all = malloc(cap), rel[1024], path[1200], text[128];
	assert_non_null(all);
	for (int i = 0; i < DIRS; i++) {
		level_dir(i, rel, sizeof(rel));
		snprintf(path, sizeof(path), "%s/%s/%s", d->dir, root, rel);
		assert_int_equal(jct_sh("mkdir -p '%s'", path), 0);
		for (int f = 0; f < FILES; f++) {
			char file[1300];
			snprintf(file, sizeof(file), "%s/f%d.h", path, f);
			if (i == DIRS - 1 && f == FILES - 1)
				snprintf(text, sizeof(text), "#define DEEP %d\n", deep_value);
			else
				snprintf(text, sizeof(text), "#define H_%d_%d %d\n", i, f,
					 i * FILES + f);
			jct_write_file(file, text, strlen(text));
			n += (size_t)snprintf(all + n, cap - n, "#include \"%s/f%d.h\"\n", rel, f);
		}
	}
	snprintf(path, sizeof(path), "%s/all.h", root);
	jct_put(d->dir, path, all);
	free(all);
}

/* jct_expect_ptx, the result dropped. */
static void expect(const struct jtl_daemon *d, const jc_request *r, jc_cache_status st,
		   const char *want)
{
	jc_result_free(jct_expect_ptx(d, r, st, want));
}

/*
 * A hit at once (a tree written within the settle margin is stat-walked and
 * re-hashed, not watched: common/includes.h), then, once the margin has
 * passed, hits until one is keyed through the watch (the first may be a stat
 * walk: a key learnt from what NVRTC read is watched from its first lookup),
 * then a hit with no stat call at all.
 */
static void expect_watched_hits(const struct jtl_daemon *d, const jc_request *r, const char *want)
{
	expect(d, r, JC_HIT, want);
	jct_settle();
	int64_t w0 = jct_stat(d, "include_tree_watch_hits");
	expect(d, r, JC_HIT, want);
	expect(d, r, JC_HIT, want);
	int64_t w1 = jct_stat(d, "include_tree_watch_hits");
	assert_true(w1 - w0 >= 1);
	int64_t s1 = jct_stat(d, "include_stats");
	expect(d, r, JC_HIT, want);
	assert_int_equal(jct_stat(d, "include_tree_watch_hits"), w1 + 1);
	assert_int_equal(jct_stat(d, "include_stats"), s1); /* no stat call at all */
}

static const char tree_kernel[] =
    "#include <all.h>\n"
    "extern \"C\" __global__ void k(int *x) { x[threadIdx.x] = DEEP + H_0_0 + H_20_7; }\n";

static void deep_path(const struct jtl_daemon *d, char *out, size_t len)
{
	char rel[1024];
	level_dir(DIRS - 1, rel, sizeof(rel));
	snprintf(out, len, "%s/tree/%s/f%d.h", d->dir, rel, FILES - 1);
}

static void test_deep_edit(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"tree", NULL};
	make_tree(d, "tree", 100000);
	jct_settle();
	jc_request *r = jct_request_ptx_dirs(d, tree_kernel, dirs);
	expect(d, r, JC_MISS, "101007"); /* 100000 + 0 + 20 * 50 + 7 */
	expect_watched_hits(d, r, "101007");
	assert_true(jct_stat(d, "include_watches") > DIRS * FILES);
	char deep[1300];
	deep_path(d, deep, sizeof(deep));
	jct_write_file(deep, "#define DEEP 200000\n", 20);
	expect(d, r, JC_MISS, "201007");
	expect_watched_hits(d, r, "201007");
	assert_true(jct_stat(d, "include_watch_invalidations") >= 1);
	/* A file the tree does not use, created and written in a watched
	 * directory, leaves the tree valid. */
	int64_t inv = jct_stat(d, "include_watch_invalidations");
	jct_put(d->dir, "tree/t/d0/unrelated.log", "x\n");
	expect(d, r, JC_HIT, "201007");
	assert_int_equal(jct_stat(d, "include_watch_invalidations"), inv);
	assert_int_equal(jct_stat(d, "compiles"), 2);
	jc_request_free(r);
}

static const char value_kernel[] =
    "#include <x/v.h>\n"
    "extern \"C\" __global__ void k(int *x) { x[threadIdx.x] = VALUE; }\n";

/* A header added in an earlier -I directory (and a directory that did not
 * exist there) shadows the later one. */
static void test_shadowing_new_file(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"inc1", "inc2", NULL};
	jct_put(d->dir, "inc1/other.h", "\n");
	jct_put(d->dir, "inc2/x/v.h", "#define VALUE 3100\n");
	jct_settle();
	jc_request *r = jct_request_ptx_dirs(d, value_kernel, dirs);
	expect(d, r, JC_MISS, "3100");
	expect_watched_hits(d, r, "3100");
	jct_put(d->dir, "inc1/x/v.h", "#define VALUE 3200\n"); /* makes inc1/x, then the file */
	expect(d, r, JC_MISS, "3200");
	expect_watched_hits(d, r, "3200");
	jc_request_free(r);
}

static void test_directory_renamed_removed_remade(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"inc", NULL};
	jct_put(d->dir, "inc/x/v.h", "#define VALUE 4100\n");
	jct_settle();
	jc_request *r = jct_request_ptx_dirs(d, value_kernel, dirs);
	expect(d, r, JC_MISS, "4100");
	expect_watched_hits(d, r, "4100");
	/* Renamed away, another directory of that name put in its place. */
	assert_int_equal(jct_sh("mv '%s/inc/x' '%s/inc/x-old'", d->dir, d->dir), 0);
	jct_put(d->dir, "inc/x/v.h", "#define VALUE 4200\n");
	expect(d, r, JC_MISS, "4200");
	expect_watched_hits(d, r, "4200");
	/* Removed and made again with the first bytes: the first entry again. */
	assert_int_equal(jct_sh("rm -r '%s/inc/x'", d->dir), 0);
	jct_put(d->dir, "inc/x/v.h", "#define VALUE 4100\n");
	expect(d, r, JC_HIT, "4100");
	/* Removed: the compile fails (not a stale hit). */
	assert_int_equal(jct_sh("rm -r '%s/inc/x'", d->dir), 0);
	jc_result *res = jct_compile(d, r, JC_ECOMPILE);
	jc_result_free(res);
	assert_int_equal(jct_stat(d, "compiles"), 3);
	jc_request_free(r);
}

/* Atomically points d->dir/link at target (a symbolic link renamed over it). */
static void swap_link(const struct jtl_daemon *d, const char *link, const char *target)
{
	assert_int_equal(jct_sh("cd '%s' && ln -sfn '%s' '%s.new' && mv -T '%s.new' '%s'", d->dir,
				target, link, link, link),
			 0);
}

static void test_symlinked_directory_swapped(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"inc", NULL};
	/* (Inside the -I directory: the compile is confined to it.) */
	jct_put(d->dir, "inc/va/v.h", "#define VALUE 5100\n");
	jct_put(d->dir, "inc/vb/v.h", "#define VALUE 5200\n");
	swap_link(d, "inc/x", "va");
	jct_settle();
	jc_request *r = jct_request_ptx_dirs(d, value_kernel, dirs);
	expect(d, r, JC_MISS, "5100");
	expect_watched_hits(d, r, "5100");
	swap_link(d, "inc/x", "vb");
	expect(d, r, JC_MISS, "5200");
	expect_watched_hits(d, r, "5200");
	swap_link(d, "inc/x", "va");
	expect(d, r, JC_HIT, "5100");
	/* The target of the link edited (reached only through it). */
	jct_put(d->dir, "inc/va/v.h", "#define VALUE 5300\n");
	expect(d, r, JC_MISS, "5300");
	jc_request_free(r);

	/* The -I directory itself a link, swapped. */
	static const char *const ldirs[] = {"ilink", NULL};
	jct_put(d->dir, "ia/x/v.h", "#define VALUE 5400\n");
	jct_put(d->dir, "ib/x/v.h", "#define VALUE 5500\n");
	swap_link(d, "ilink", "ia");
	jct_settle();
	r = jct_request_ptx_dirs(d, value_kernel, ldirs);
	expect(d, r, JC_MISS, "5400");
	expect_watched_hits(d, r, "5400");
	swap_link(d, "ilink", "ib");
	expect(d, r, JC_MISS, "5500");
	expect_watched_hits(d, r, "5500");
	jc_request_free(r);
}

static long read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/*
 * The daemon stopped (SIGSTOP) while more attribute changes than
 * fs.inotify.max_queued_events reach a watched directory (of two files the
 * tree does not use: events that alone invalidate nothing), then the deep
 * header changes: its event cannot be queued, only IN_Q_OVERFLOW is.
 * Resumed, the daemon must stat-walk and see the new bytes.
 */
static void test_queue_overflow(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"tree", NULL};
	long max_q = read_long("/proc/sys/fs/inotify/max_queued_events");
	if (max_q <= 0 || max_q > 1 << 22)
		skip(); /* unknown, or too large to fill in a test */
	make_tree(d, "tree", 100000);
	jct_put(d->dir, "tree/t/d0/junk0", "");
	jct_put(d->dir, "tree/t/d0/junk1", "");
	jct_settle();
	jc_request *r = jct_request_ptx_dirs(d, tree_kernel, dirs);
	expect(d, r, JC_MISS, "101007");
	expect_watched_hits(d, r, "101007");
	char deep[1300], a[1400], b[1400];
	deep_path(d, deep, sizeof(deep));
	snprintf(a, sizeof(a), "%s/tree/t/d0/junk0", d->dir);
	snprintf(b, sizeof(b), "%s/tree/t/d0/junk1", d->dir);
	assert_int_equal(kill(d->pid, SIGSTOP), 0);
	/* Alternating files: inotify merges only an event identical to the last. */
	for (long i = 0; i < max_q + 1000; i++) {
		struct timespec t[2] = {{0, UTIME_OMIT}, {1000000 + i, 0}};
		assert_int_equal(utimensat(AT_FDCWD, i % 2 ? a : b, t, 0), 0);
	}
	jct_write_file(deep, "#define DEEP 300000\n", 20);
	assert_int_equal(kill(d->pid, SIGCONT), 0);
	expect(d, r, JC_MISS, "301007");
	assert_true(jct_stat(d, "include_watch_overflows") >= 1);
	expect_watched_hits(d, r, "301007"); /* watched again after the walk */
	jc_request_free(r);
}

/* A budget smaller than the tree: every hit stat-walks, and stays correct. */
static void test_watch_budget(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"tree", NULL};
	jtl_daemon_stop(d);
	jct_daemon_start(d, (const char *const[]){"--max-include-watches", "100", NULL});
	make_tree(d, "tree", 100000);
	jct_settle();
	jc_request *r = jct_request_ptx_dirs(d, tree_kernel, dirs);
	expect(d, r, JC_MISS, "101007");
	expect(d, r, JC_HIT, "101007");
	expect(d, r, JC_HIT, "101007");
	assert_int_equal(jct_stat(d, "include_tree_watch_hits"), 0);
	assert_int_equal(jct_stat(d, "include_tree_stat_walks"), 2);
	assert_true(jct_stat(d, "include_watch_fallbacks") >= 3);
	assert_int_equal(jct_stat(d, "include_watches"), 0);
	char deep[1300];
	deep_path(d, deep, sizeof(deep));
	jct_write_file(deep, "#define DEEP 200000\n", 20);
	jct_settle();
	expect(d, r, JC_MISS, "201007");
	jc_request_free(r);
}

/* One compile on c of r: want's status and PTX text; JC_TIME_INCLUDES is
 * 0 (the client's watch answered) when watched is 1, not 0 when it is 0;
 * either when it is -1. */
static void client_expect(jc_client *c, const jc_request *r, jc_cache_status st, const char *want,
			  int watched)
{
	jc_result *res = NULL;
	int rc = jc_compile(c, r, &res);
	if (rc != 0)
		fail_msg("jc_compile: %d: %s", rc, jc_client_errmsg(c));
	size_t n;
	const char *ptx = jc_result_data(res, &n);
	uint64_t ns = jc_result_time_ns(res, JC_TIME_INCLUDES);
	if (jc_result_cache_status(res) != st || !memmem(ptx, n, want, strlen(want)) ||
	    (watched >= 0 && (ns == 0) != watched))
		fail_msg("status %d (want %d), \"%s\" %sin the PTX, includes %llu ns (want %s)",
			 jc_result_cache_status(res), st, want,
			 memmem(ptx, n, want, strlen(want)) ? "" : "not ", (unsigned long long)ns,
			 watched ? "0: watched" : "a walk");
	jc_result_free(res);
}

/*
 * The client-read path (JITCACHE_SEND_HEADERS=1: the tree is read and sent
 * by the client, as for a daemon of another uid): a long-lived client
 * watches the tree it sent, so an unchanged tree costs it no stat call; an
 * edit is seen. A child of fork() never reads the parent's inotify queue:
 * the parent still sees an edit made while the child compiled.
 */
static void test_client_watched_tree(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"tree", NULL};
	make_tree(d, "tree", 100000);
	jct_settle();
	assert_int_equal(setenv("JITCACHE_SEND_HEADERS", "1", 1), 0);
	jc_client *c = jct_connect(d);
	jc_request *r = jct_request_ptx_dirs(d, tree_kernel, dirs);
	client_expect(c, r, JC_MISS, "101007", 0);
	client_expect(c, r, JC_HIT, "101007", 1);
	client_expect(c, r, JC_HIT, "101007", 1);
	char deep[1300];
	deep_path(d, deep, sizeof(deep));
	jct_write_file(deep, "#define DEEP 200000\n", 20);
	client_expect(c, r, JC_MISS, "201007", 0);
	/* The miss's bytes round may come after the settle margin (then it
	 * watched the tree), or not (then the next request checks and watches). */
	jct_settle();
	client_expect(c, r, JC_HIT, "201007", -1);
	client_expect(c, r, JC_HIT, "201007", 1);
	/* A child compiles (its own check) while the parent edits the tree. */
	int go[2];
	assert_int_equal(pipe(go), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char b;
		close(go[1]);
		if (read(go[0], &b, 1) != 1)
			_exit(2);
		jc_result *res = NULL;
		int rc = jc_compile(c, r, &res);
		size_t n = 0;
		const char *ptx = res ? jc_result_data(res, &n) : NULL;
		_exit(rc == 0 && ptx && memmem(ptx, n, "301007", 6) ? 0 : 1);
	}
	close(go[0]);
	jct_write_file(deep, "#define DEEP 300000\n", 20);
	assert_int_equal(write(go[1], "g", 1), 1);
	close(go[1]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	client_expect(c, r, JC_HIT, "301007", 0); /* the child's compile, seen by the parent */
	/* Without watches (JITCACHE_CLIENT_WATCHES=0), every request walks. */
	jc_client_close(c);
	assert_int_equal(setenv("JITCACHE_CLIENT_WATCHES", "0", 1), 0);
	c = jct_connect(d);
	jct_settle();
	for (int i = 0; i < 3; i++)
		client_expect(c, r, JC_HIT, "301007", 0);
	jc_client_close(c);
	unsetenv("JITCACHE_CLIENT_WATCHES");
	unsetenv("JITCACHE_SEND_HEADERS");
	jc_request_free(r);
}

/*
 * A process that writes its generated header just before each of 5 runs,
 * with the same bytes: 1 compile, 4 hits (the header is re-read after the
 * compile; the settle margin no longer keeps the result out). Then other
 * bytes: 1 more compile, stored too.
 */
static void test_generated_header(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"gen", NULL};
	static const char kernel[] =
	    "#include <config.h>\n"
	    "extern \"C\" __global__ void k(int *x) { x[threadIdx.x] = BLOCK * 3; }\n";
	jc_request *r = jct_request_ptx_dirs(d, kernel, dirs);
	for (int run = 0; run < 5; run++) {
		jct_put(d->dir, "gen/config.h",
			"#define BLOCK 2300\n"); /* truncated and written again */
		expect(d, r, run == 0 ? JC_MISS : JC_HIT, "6900");
	}
	assert_int_equal(jct_stat(d, "compiles"), 1);
	assert_int_equal(jct_stat(d, "include_uncached"), 0);
	assert_true(jct_stat(d, "include_rehashed") >= 1);
	jct_put(d->dir, "gen/config.h", "#define BLOCK 2400\n");
	expect(d, r, JC_MISS, "7200");
	jct_put(d->dir, "gen/config.h", "#define BLOCK 2400\n");
	expect(d, r, JC_HIT, "7200");
	assert_int_equal(jct_stat(d, "compiles"), 2);
	jc_request_free(r);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, jct_setup_started, jct_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_deep_edit),
	    T(test_shadowing_new_file),
	    T(test_directory_renamed_removed_remade),
	    T(test_symlinked_directory_swapped),
	    T(test_queue_overflow),
	    T(test_watch_budget),
	    T(test_generated_header),
	    T(test_client_watched_tree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
