/* SPDX-License-Identifier: MIT */
/*
 * Limits between the users of a team daemon (a daemon whose socket a group
 * shares), with real users made for the run (useradd) whose jitcachectl runs
 * under setpriv:
 *
 * - fair queue: user A queues four long compiles (a kernel of 64 inlined
 *   sinf calls, a second or more each: its time is measured in the same
 *   run), user B one tiny compile; B is answered within the longest of A's
 *   compile times + 1 s, with one worker (B's job takes the next turn) and
 *   with two (A may hold only one: B starts at once). Single flight holds
 *   across users: A and B asking for one long key at once cost one compile.
 *
 * - budgets: with --max-size 512K --user-max-size 64K, user A floods the
 *   daemon with failing compiles whose logs are 1.8 MB of #warning output and
 *   with small successful ones, from two processes; the whole cache
 *   directory (du: objects, index, WAL, -shm, reserve, manifests) never
 *   passes 1.5 x the budget while it runs; A's share is trimmed, its logs
 *   and negative entries counted, while B's entry stays; a kept log is cut
 *   to its first and last parts with a marker; `purge --negative` gives the
 *   index's pages back.
 *
 * Exits 77 when not root or without setpriv/useradd.
 */
#include <errno.h>
#include <ftw.h>
#include <grp.h>
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

#include "tests/lib/test.h"

static char group[32], user_a[32], user_b[32];
static gid_t gid;
static uid_t uid_a, uid_b;

/* A kernel that takes NVRTC a second or more (64 inlined sinf calls);
 * -DSEED=N makes another key. */
static const char long_src[] = "#define R4(s) s s s s\n"
			       "#define R16(s) R4(R4(s))\n"
			       "#define R64(s) R4(R16(s))\n"
			       "__global__ void longk(float *p) {\n"
			       "  float x = p[threadIdx.x];\n"
			       "  R64(x = sinf(x) * 1.0001f + SEED;)\n"
			       "  p[threadIdx.x] = x;\n"
			       "}\n";
static const char tiny_src[] = "__global__ void tiny(int *p) { *p = TINY; }\n";

struct fx {
	struct jtl_daemon d;
	char src[160]; /* sources, readable by the users */
	char out[160]; /* outputs of the users' runs, writable by them */
};

/* A team daemon run by root: socket 0660 for the run's group. */
static void start(struct fx *f, const char *const *flags)
{
	const char *argv[16];
	size_t n = 0;
	argv[n++] = "--group-shared";
	argv[n++] = "yes";
	for (; flags && *flags; flags++)
		argv[n++] = *flags;
	argv[n] = NULL;
	jct_daemon_start(&f->d, argv);
	assert_int_equal(chown(f->d.sock, (uid_t)-1, gid), 0);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	jct_daemon_init(&f->d);
	assert_int_equal(chmod(f->d.dir, 0711), 0);
	snprintf(f->src, sizeof(f->src), "%s/src", f->d.dir);
	snprintf(f->out, sizeof(f->out), "%s/out", f->d.dir);
	assert_int_equal(mkdir(f->src, 0755), 0);
	assert_int_equal(mkdir(f->out, 01777), 0);
	assert_int_equal(chmod(f->out, 01777), 0);
	char path[300];
	snprintf(path, sizeof(path), "%s/long.cu", f->src);
	jct_write_text(path, long_src);
	snprintf(path, sizeof(path), "%s/tiny.cu", f->src);
	jct_write_text(path, tiny_src);
	assert_int_equal(jct_sh("chmod 0644 %s/*.cu", f->src), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	jtl_daemon_kill(&f->d);
	jct_daemon_cleanup(&f->d);
	free(f);
	return 0;
}

/*
 * Starts `jitcachectl compile SRC.cu --arch sm_90 -- -DDEF` as user in the
 * background; its stdout+stderr go to OUT/TAG.log and its exit status to
 * OUT/TAG.rc once it ends.
 */
static void compile_bg(const struct fx *f, const char *user, const char *tag, const char *src,
		       const char *def)
{
	assert_int_equal(
	    jct_sh("setpriv --reuid %s --regid %s --clear-groups -- sh -c "
		   "'%s --socket %s compile %s/%s.cu --arch sm_90 -o %s/%s.cubin -- %s "
		   "> %s/%s.log 2>&1; echo $? > %s/%s.rc.tmp; mv %s/%s.rc.tmp %s/%s.rc' &",
		   user, group, getenv("JITCACHECTL"), f->d.sock, f->src, src, f->out, tag, def,
		   f->out, tag, f->out, tag, f->out, tag, f->out, tag),
	    0);
}

/* Waits for the background run TAG; returns its exit status, its output in
 * *log (malloc'd). */
static int wait_bg(const struct fx *f, const char *tag, char **log)
{
	char rc_path[300], log_path[300];
	snprintf(rc_path, sizeof(rc_path), "%s/%s.rc", f->out, tag);
	snprintf(log_path, sizeof(log_path), "%s/%s.log", f->out, tag);
	double t0 = jtl_now_s();
	while (access(rc_path, F_OK) != 0) {
		assert_true(jtl_now_s() - t0 < 240);
		jtl_sleep_ms(10);
	}
	size_t n;
	char *rc_text = (char *)jtl_read_file(rc_path, &n);
	*log = (char *)jtl_read_file(log_path, &n);
	assert_non_null(rc_text);
	assert_non_null(*log);
	int rc = atoi(rc_text);
	free(rc_text);
	return rc;
}

/* compiled_ms (the entry's compile time) of a jitcachectl status line, in
 * seconds. */
static double compile_s(const char *log)
{
	const char *p = strstr(log, "compiled_ms=");
	if (!p)
		fail_msg("no compiled_ms in: %s", log);
	return atof(p + strlen("compiled_ms=")) / 1000.0;
}

/* A queues four long compiles, then B one tiny one: B's answer comes within
 * the longest of A's compiles + 1 s. */
static void fair_round(struct fx *f, const char *workers, int round)
{
	char w_flag[8];
	snprintf(w_flag, sizeof(w_flag), "%s", workers);
	const char *const flags[] = {"--workers", w_flag, "--compile-timeout", "100", NULL};
	start(f, flags);
	int64_t misses0 = jct_stat(&f->d, "misses");
	char tag[32], def[32];
	for (int i = 0; i < 4; i++) {
		snprintf(tag, sizeof(tag), "a%d-%d", round, i);
		snprintf(def, sizeof(def), "-DSEED=%d", round * 10 + i);
		compile_bg(f, user_a, tag, "long", def);
	}
	/* All four are queued or running before B asks. */
	jct_wait_stat(&f->d, "misses", jct_ge, misses0 + 4, 60000);
	snprintf(tag, sizeof(tag), "b%d", round);
	snprintf(def, sizeof(def), "-DTINY=%d", round);
	double t0 = jtl_now_s();
	compile_bg(f, user_b, tag, "tiny", def);
	char *log;
	assert_int_equal(wait_bg(f, tag, &log), 0);
	double b_s = jtl_now_s() - t0;
	assert_non_null(strstr(log, "miss"));
	free(log);
	double longest = 0;
	for (int i = 0; i < 4; i++) {
		snprintf(tag, sizeof(tag), "a%d-%d", round, i);
		int rc = wait_bg(f, tag, &log);
		if (rc != 0)
			fail_msg("A's compile %d: %s", i, log);
		double s = compile_s(log);
		longest = s > longest ? s : longest;
		free(log);
	}
	printf("--workers %s: B's tiny compile answered in %.2f s behind four long compiles of A "
	       "(the longest %.2f s)\n",
	       workers, b_s, longest);
	assert_true(b_s <= longest + 1.0);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
}

static void test_fair_queue(void **state)
{
	struct fx *f = *state;
	fair_round(f, "1", 1);
	fair_round(f, "2", 2);
}

/* A and B ask for the same long key at once: one compile, both answered. */
static void test_single_flight_across_users(void **state)
{
	struct fx *f = *state;
	const char *const flags[] = {"--workers", "2", "--compile-timeout", "100", NULL};
	start(f, flags);
	int64_t compiles0 = jct_stat(&f->d, "compiles");
	compile_bg(f, user_a, "sa", "long", "-DSEED=99");
	compile_bg(f, user_b, "sb", "long", "-DSEED=99");
	char *log_a, *log_b;
	assert_int_equal(wait_bg(f, "sa", &log_a), 0);
	assert_int_equal(wait_bg(f, "sb", &log_b), 0);
	char key_a[33], key_b[33];
	assert_non_null(strstr(log_a, "key="));
	assert_non_null(strstr(log_b, "key="));
	snprintf(key_a, sizeof(key_a), "%.32s", strstr(log_a, "key=") + 4);
	snprintf(key_b, sizeof(key_b), "%.32s", strstr(log_b, "key=") + 4);
	assert_string_equal(key_a, key_b);
	assert_int_equal(jct_stat(&f->d, "compiles") - compiles0, 1);
	free(log_a);
	free(log_b);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
}

/* du of a directory tree, bytes (st_blocks). */
static uint64_t du_sum, du_big_size;
static char du_big[400]; /* the largest file of the last du() */
static int du_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)flag, (void)ftw;
	uint64_t n = (uint64_t)st->st_blocks * 512;
	du_sum += n;
	if (n > du_big_size) {
		du_big_size = n;
		snprintf(du_big, sizeof(du_big), "%s", path);
	}
	return 0;
}

static uint64_t du(const char *dir)
{
	du_sum = du_big_size = 0;
	du_big[0] = 0;
	nftw(dir, du_cb, 16, FTW_PHYS);
	return du_sum;
}

/* A's flood, run in the background as A: COUNT compiles of SRC, each with
 * -DSEED=FROM+i; its end is OUT/TAG.rc. */
static void flood_bg(const struct fx *f, const char *tag, const char *src, int from, int count)
{
	assert_int_equal(
	    jct_sh("setpriv --reuid %s --regid %s --clear-groups -- sh -c "
		   "'for i in $(seq %d %d); do %s --socket %s compile %s/%s.cu --arch sm_90 "
		   "-o %s/%s.cubin -- -DSEED=$i -DTINY=$i >/dev/null 2>&1; done; "
		   "echo 0 > %s/%s.rc.tmp; mv %s/%s.rc.tmp %s/%s.rc' &",
		   user_a, group, from, from + count - 1, getenv("JITCACHECTL"), f->d.sock, f->src,
		   src, f->out, tag, f->out, tag, f->out, tag, f->out, tag),
	    0);
}

static int64_t by_user(const struct fx *f, uid_t uid, const char *key)
{
	const char *args[] = {"stats", "--by-user", "--json", NULL};
	char *out = jct_ctl_expect(&f->d, 0, NULL, args), pat[32];
	snprintf(pat, sizeof(pat), "\"uid\": %u", (unsigned)uid);
	const char *at = strstr(out, pat);
	if (!at)
		fail_msg("no uid %u in stats --by-user: %s", (unsigned)uid, out);
	int64_t v = jct_json_int(at, key);
	free(out);
	return v;
}

static void test_flood_stays_in_budget(void **state)
{
	struct fx *f = *state;
	const uint64_t budget = 512 << 10;
	/* 4000 #warning lines and an #error: 1.8 MB of log, about a second of NVRTC */
	char path[300];
	snprintf(path, sizeof(path), "%s/warn.cu", f->src);
	FILE *w = fopen(path, "w");
	assert_non_null(w);
	for (int i = 0; i < 4000; i++)
		fprintf(w, "#warning %0200d\n", i);
	fprintf(w, "#error flood SEED\n");
	fclose(w);
	assert_int_equal(chmod(path, 0644), 0);
	const char *const flags[] = {"--max-size", "512K", "--user-max-size", "64K", "--workers",
				     "2",	   NULL};
	start(f, flags);
	/* B's one entry, before the flood */
	compile_bg(f, user_b, "b-own", "tiny", "-DTINY=4242");
	char *log;
	assert_int_equal(wait_bg(f, "b-own", &log), 0);
	free(log);
	uint64_t before = du(f->d.cache), peak = before;
	double t0 = jtl_now_s();
	flood_bg(f, "fail1", "warn", 0, 12);
	flood_bg(f, "fail2", "warn", 100, 12);
	flood_bg(f, "ok1", "tiny", 1000, 40);
	char rc1[300], rc2[300], rc3[300];
	snprintf(rc1, sizeof(rc1), "%s/fail1.rc", f->out);
	snprintf(rc2, sizeof(rc2), "%s/fail2.rc", f->out);
	snprintf(rc3, sizeof(rc3), "%s/ok1.rc", f->out);
	/* peak: the size held over two samples running (50 ms apart), so a
	 * file staged between two samples (a temporary file, a WAL before its
	 * checkpoint) is not the directory over its budget; spike: the largest
	 * single sample, with its largest file (for the log). */
	int samples = 0;
	uint64_t prev = before, spike = before;
	char spike_big[480] = "";
	while (access(rc1, F_OK) != 0 || access(rc2, F_OK) != 0 || access(rc3, F_OK) != 0) {
		assert_true(jtl_now_s() - t0 < 240);
		uint64_t now = du(f->d.cache);
		uint64_t held = now < prev ? now : prev;
		peak = held > peak ? held : peak;
		if (now > spike) {
			spike = now;
			snprintf(spike_big, sizeof(spike_big), "%s, %llu bytes", du_big,
				 (unsigned long long)du_big_size);
		}
		prev = now;
		samples++;
		jtl_sleep_ms(50);
	}
	double flood_s = jtl_now_s() - t0;
	int64_t failures = jct_stat(&f->d, "compile_failures");
	/* the last budget check after the flood */
	jtl_sleep_ms(6000);
	uint64_t after = du(f->d.cache);
	if (peak > budget * 3 / 2)
		fail_msg(
		    "the cache directory held %llu bytes under a budget of %llu (largest single "
		    "sample %llu: %s)",
		    (unsigned long long)peak, (unsigned long long)budget, (unsigned long long)spike,
		    spike_big);
	if (spike > budget * 3 / 2)
		fprintf(stderr, "a single sample saw %llu bytes (largest file %s)\n",
			(unsigned long long)spike, spike_big);
	int64_t a_stored = by_user(f, uid_a, "stored_bytes");
	int64_t a_negative = by_user(f, uid_a, "negative_entries");
	int64_t b_entries = by_user(f, uid_b, "entries");
	printf(
	    "flood of %lld failing compiles (1.8 MB of log each) and 40 small ones in %.1f s: the "
	    "cache directory peaked at %llu bytes (%d samples; %llu before, %llu after) against a "
	    "budget of %llu (1.5 x: %llu); A's stored bytes %lld (share 65536), its negative "
	    "entries %lld; B's entries %lld\n",
	    (long long)failures, flood_s, (unsigned long long)peak, samples,
	    (unsigned long long)before, (unsigned long long)after, (unsigned long long)budget,
	    (unsigned long long)(budget * 3 / 2), (long long)a_stored, (long long)a_negative,
	    (long long)b_entries);
	assert_true(failures >= 20);
	assert_true(peak <= budget * 3 / 2);
	assert_true(a_stored <= 64 << 10);
	assert_int_equal(b_entries, 1);
	/* the table names each uid's user */
	const char *human[] = {"stats", "--by-user", NULL};
	char *table = jct_ctl_expect(&f->d, 0, NULL, human), line[80];
	snprintf(line, sizeof(line), "%10u  %s ", (unsigned)uid_a, user_a);
	jct_assert_has(table, line);
	free(table);

	/* A kept log: its first and last parts and the marker, in B's answer
	 * and in the entry (B is within its share). */
	compile_bg(f, user_b, "b-warn", "warn", "-DSEED=7777");
	assert_int_equal(wait_bg(f, "b-warn", &log), 1);
	jct_assert_has(log, "bytes of this log dropped here (--max-log-size)");
	jct_assert_has(log, "#error directive: flood");
	jct_assert_has(log, "#warning directive: 0000");
	printf("B's failing compile: %zu bytes of log answered and kept (cap: a sixteenth of the "
	       "budget, %llu)\n",
	       strlen(log), (unsigned long long)(budget / 16));
	assert_true(strlen(log) < budget / 16 + 4096); /* jitcachectl's own lines besides */
	free(log);
	assert_int_equal(by_user(f, uid_b, "negative_entries"), 1);

	/* purge --negative: the index gives its pages back */
	char index[300];
	snprintf(index, sizeof(index), "%s/index.sqlite", f->d.cache);
	struct stat st;
	assert_int_equal(stat(index, &st), 0);
	uint64_t index_before = (uint64_t)st.st_blocks * 512;
	const char *purge[] = {"purge", "--negative", NULL};
	free(jct_ctl_expect(&f->d, 0, NULL, purge));
	assert_int_equal(stat(index, &st), 0);
	printf("purge --negative: index.sqlite %llu -> %llu bytes\n",
	       (unsigned long long)index_before, (unsigned long long)st.st_blocks * 512);
	assert_true((uint64_t)st.st_blocks * 512 < index_before);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("skipped: needs root to create users\n");
		return 77;
	}
	if (jct_sh("command -v setpriv >/dev/null && command -v useradd >/dev/null") != 0) {
		printf("skipped: needs setpriv and useradd\n");
		return 77;
	}
	if (jct_group_add("jctg", group, &gid) != 0 ||
	    jct_user_add("jcta", group, user_a, &uid_a, NULL) != 0 ||
	    jct_user_add("jctb", group, user_b, &uid_b, NULL) != 0) {
		printf("skipped: useradd/groupadd failed\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_fair_queue, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_single_flight_across_users, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flood_stays_in_budget, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
