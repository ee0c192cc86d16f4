/* SPDX-License-Identifier: MIT */
/*
 * jitcachectl stats, ls, purge and verify work on the cache directory when
 * no daemon runs (under DIR/lock), go through the daemon when one runs, and
 * corrupt nothing when both happen at once: a helper runs those commands in
 * a loop while a daemon is started and stopped again and again on the same
 * directory (it waits for the lock), and every kernel is still served with
 * NVRTC's own bytes.
 *
 * Helper (this binary run again): --helper ctl-loop SOCK CACHE SEED STOP_FD
 * runs random commands until STOP_FD reaches EOF, and prints
 * "commands failures offline online" (offline/online: stats answered by the
 * directory / by a daemon).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"
#include "tests/lib/variants.h"

static const char pool_spec[] = "0:0,0:1,0:2,0:3,0:4,0:5,1:0,1:1";

static int helper_ctl_loop(char **argv)
{
	static const char *const cmds[][3] = {
	    {"stats", "--json", NULL}, {"ls", "--json", NULL},	      {"verify", NULL, NULL},
	    {"purge", "--all", NULL},  {"purge", "--negative", NULL}, {"purge", "--arch", "sm_80"},
	};
	const char *ctl = getenv("JITCACHECTL");
	unsigned seed = (unsigned)strtoul(argv[2], NULL, 10);
	struct pollfd stop = {.fd = atoi(argv[3]), .events = POLLIN};
	unsigned long commands = 0, failures = 0, offline = 0, online = 0;
	char scratch[JTL_ROOT_MAX], why[512];
	if (jtl_tmpdir(scratch, sizeof(scratch), NULL, "ctl-loop", why, sizeof(why)) != 0) {
		fprintf(stderr, "ctl-loop: %s\n", why);
		return 1;
	}
	while (poll(&stop, 1, 0) == 0) {
		const char *const *c = cmds[rand_r(&seed) % 6];
		const char *args[] = {ctl,  "--socket", argv[0], "--cache-dir", argv[1],
				      c[0], c[1],	c[2],	 NULL};
		char *out = NULL, *err = NULL;
		int rc = jtl_run(args, NULL, scratch, &out, &err);
		commands++;
		if (rc != 0) {
			fprintf(stderr, "ctl-loop: jitcachectl %s %s: exit %d: %s\n", c[0],
				c[1] ? c[1] : "", rc, err ? err : "");
			failures++;
		} else if (strcmp(c[0], "stats") == 0) {
			if (strstr(out, "\"uptime_s\": -1"))
				offline++;
			else
				online++;
		}
		free(out);
		free(err);
		usleep(rand_r(&seed) % 20000);
	}
	if (jtl_rmtree(scratch, why, sizeof(why)) != 0)
		fprintf(stderr, "ctl-loop: %s\n", why);
	printf("%lu %lu %lu %lu\n", commands, failures, offline, online);
	return 0;
}

static int setup(void **state)
{
	jct_fx_new(state, pool_spec);
	return 0;
}

/* Fetches the whole pool; returns how many were hits. */
static int fetch_all(struct jct_fx *f)
{
	jc_client *c = jct_connect(&f->d);
	int hits = 0;
	uint64_t wrong = 0;
	for (int i = 0; i < f->pool.n; i++) {
		int rc, status;
		assert_int_equal(jct_pool_fetch(&f->pool, i, c, "fetch", &rc, &status, &wrong), 0);
		hits += status == JC_HIT || status == JC_NEGATIVE_HIT;
	}
	jc_client_close(c);
	assert_int_equal(wrong, 0);
	return hits;
}

/* The same commands offline and through a daemon give the same answers. */
static void test_offline_then_daemon(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jtl_now_s();
	jct_daemon_start(&f->d, NULL);
	assert_int_equal(fetch_all(f), 0);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);

	const char *stats[] = {"stats", "--json", NULL}, *ls[] = {"ls", "--json", NULL};
	const char *verify[] = {"verify", NULL}, *neg[] = {"purge", "--negative", NULL};
	const char *arch[] = {"purge", "--arch", "sm_80", NULL};
	char *out = NULL, *err = NULL;
	for (int online = 0; online < 2; online++) {
		if (online) {
			jct_daemon_start(&f->d, NULL);
			fetch_all(f);
		}
		assert_int_equal(jct_ctl(&f->d, &out, NULL, stats), 0);
		assert_true(online ? jct_json_int(out, "uptime_s") >= 0
				   : jct_json_int(out, "uptime_s") == -1);
		assert_int_equal(jct_json_int(out, "entries"), 6);
		assert_int_equal(jct_json_int(out, "negative_entries"), 2);
		free(out);
		assert_int_equal(jct_ctl(&f->d, &out, NULL, ls), 0);
		assert_int_equal(jtl_count(out, "\"key\""), 8);
		free(out);
		assert_int_equal(jct_ctl(&f->d, &out, &err, verify), 0);
		assert_non_null(strstr(out, "checked 6 objects, 0 bad")); /* results: stdout */
		assert_null(strstr(err, "checked"));
		free(out);
		free(err);
		assert_int_equal(jct_ctl(&f->d, NULL, NULL, neg), 0);
		assert_int_equal(jct_ctl(&f->d, NULL, NULL, arch), 0); /* 0:1 and 0:4 */
		assert_int_equal(jct_ctl(&f->d, &out, NULL, stats), 0);
		assert_int_equal(jct_json_int(out, "entries"), 4);
		assert_int_equal(jct_json_int(out, "negative_entries"), 0);
		free(out);
		struct jct_store_scan scan;
		jct_scan_store(f->d.cache, &scan);
		assert_int_equal(scan.objects, 4);
		assert_int_equal(scan.bad_objects, 0);
		if (!online)
			continue;
		/* A daemon that holds the directory but does not answer on the
		 * given socket: jitcachectl says so and leaves the directory alone. */
		const char *argv[] = {getenv("JITCACHECTL"),
				      "--socket",
				      "/nonexistent/sock",
				      "--cache-dir",
				      f->d.cache,
				      "purge",
				      "--all",
				      NULL};
		assert_int_equal(jct_run(&f->d, argv, NULL, NULL), 1);
		assert_int_equal(jct_stat(&f->d, "entries"), 4);
	}
	printf("offline then daemon: same answers; %.1f s\n", jtl_now_s() - t0);
}

/* The command loop runs while a daemon starts and stops 6 times. */
static void test_offline_and_daemon_at_once(void **state)
{
	struct jct_fx *f = *state;
	double t0 = jtl_now_s();
	jct_daemon_start(&f->d, NULL);
	fetch_all(f);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);

	int stop[2], out[2];
	assert_int_equal(pipe(stop), 0);
	assert_int_equal(pipe(out), 0);
	assert_int_equal(fcntl(stop[1], F_SETFD, FD_CLOEXEC), 0);
	char sfd[16];
	snprintf(sfd, sizeof(sfd), "%d", stop[0]);
	const char *args[] = {f->d.sock, f->d.cache, "4242", sfd, NULL};
	pid_t loop = jct_spawn_helper("ctl-loop", args, out[1]);
	close(stop[0]);
	close(out[1]);
	int starts = 0;
	double slowest = 0;
	for (int i = 0; i < 6; i++) {
		usleep(300000); /* offline for a while */
		double s0 = jtl_now_s();
		jct_daemon_start(&f->d, NULL); /* waits for the lock the loop may hold */
		if (jtl_now_s() - s0 > slowest)
			slowest = jtl_now_s() - s0;
		starts++;
		fetch_all(f);
		usleep(300000);
		assert_int_equal(jtl_daemon_stop(&f->d), 0);
	}
	close(stop[1]);
	assert_int_equal(jtl_wait(loop), 0);
	unsigned long v[4] = {0};
	FILE *in = fdopen(out[0], "r");
	assert_int_equal(fscanf(in, "%lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]), 4);
	fclose(in);

	struct jct_store_scan scan;
	jct_scan_store(f->d.cache, &scan);
	assert_int_equal(scan.tmp_files, 0);
	assert_int_equal(scan.bad_objects, 0);
	const char *verify[] = {"verify", NULL};
	assert_int_equal(jct_ctl(&f->d, NULL, NULL, verify), 0);
	jct_daemon_start(&f->d, NULL);
	fetch_all(f);
	printf("offline tools and daemon at once: %d daemon starts (slowest %.2f s), %lu commands "
	       "(%lu stats offline, %lu through the daemon), %lu failures; %.1f s\n",
	       starts, slowest, v[0], v[2], v[3], v[1], jtl_now_s() - t0);
	assert_int_equal(v[1], 0);
	assert_true(v[2] > 0 && v[3] > 0);
}

int main(int argc, char **argv)
{
	if (argc == 7 && strcmp(argv[1], "--helper") == 0 && strcmp(argv[2], "ctl-loop") == 0)
		return helper_ctl_loop(argv + 3);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_offline_then_daemon, setup, jct_fx_free),
	    cmocka_unit_test_setup_teardown(test_offline_and_daemon_at_once, setup, jct_fx_free),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
