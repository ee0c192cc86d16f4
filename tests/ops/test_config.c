/* SPDX-License-Identifier: MIT */
/*
 * Configuration of a real jitcached: the system file, the user's file over
 * it, --config FILE instead of both, flags over every file; SIGHUP applies
 * max-size (evicting at once) and log-level, names what needs a restart, and
 * keeps the running settings when the file is bad; --log-level filters the
 * log; group-shared modes; the shipped example configuration is accepted
 * with every setting uncommented and names every flag.
 */
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
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

struct fx {
	struct jtl_daemon d;
	char sysconf[320], xdg[320], file[320];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	jct_daemon_init(&f->d);
	char path[400];
	snprintf(f->sysconf, sizeof(f->sysconf), "%s/etc", f->d.dir);
	snprintf(f->xdg, sizeof(f->xdg), "%s/xdg", f->d.dir);
	snprintf(f->file, sizeof(f->file), "%s/my.conf", f->d.dir);
	snprintf(path, sizeof(path), "%s/jitcache", f->sysconf);
	assert_int_equal(mkdir(f->sysconf, 0700), 0);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/jitcache", f->xdg);
	assert_int_equal(mkdir(f->xdg, 0700), 0);
	assert_int_equal(mkdir(path, 0700), 0);
	setenv("JITCACHE_TEST_SYSCONFDIR", f->sysconf, 1);
	setenv("XDG_CONFIG_HOME", f->xdg, 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	unsetenv("JITCACHE_TEST_SYSCONFDIR");
	unsetenv("XDG_CONFIG_HOME");
	jct_daemon_cleanup(&f->d);
	free(f);
	return 0;
}

static void write_conf(const char *dir, const char *text)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/jitcache/jitcached.conf", dir);
	jct_write_text(path, text);
}

static void assert_log(const struct jtl_daemon *d, const char *text)
{
	if (!jct_wait_log(d, text, 5000)) {
		char *log = jct_log(d);
		fprintf(stderr, "no '%s' in the log:\n%s\n", text, log);
		free(log);
		fail();
	}
}

/* Starts with flags, checks the budget and the ready line, stops. */
static void run_and_check(struct fx *f, const char *const *flags, int64_t max_size,
			  const char *ready_part)
{
	unlink(f->d.log);
	jct_daemon_spawn_with(&f->d, flags, NULL, NULL);
	jct_daemon_wait_ready(&f->d);
	assert_int_equal(jct_stat(&f->d, "max_size"), max_size);
	assert_log(&f->d, ready_part);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);
}

/* Starts with flags, expects exit status 2 and msg in the log. */
static void run_and_refuse(struct fx *f, const char *const *flags, const char *msg)
{
	unlink(f->d.log);
	jct_daemon_spawn_with(&f->d, flags, NULL, NULL);
	assert_int_equal(jtl_daemon_wait(&f->d), 2);
	assert_log(&f->d, msg);
}

static void test_precedence(void **state)
{
	struct fx *f = *state;
	write_conf(f->sysconf,
		   "# system\nmax-size = 100M\ngc-interval = 2h\n[other-tool]\nmax-size = 1\n");
	run_and_check(f, NULL, 100 << 20, "gc every 7200 s");
	/* The setting under another section did nothing, and the log says so. */
	assert_log(&f->d, "jitcached.conf:5: 'max-size' under [other-tool] is ignored");
	/* The user's file over the system's: its keys win, the others stay. */
	write_conf(f->xdg, "[jitcached]\nmax-size = 200M\n");
	run_and_check(f, NULL, 200 << 20, "gc every 7200 s");
	/* Flags over both. */
	const char *flag[] = {"--max-size", "300M", NULL};
	run_and_check(f, flag, 300 << 20, "budget 314572800 bytes");
	/* --config FILE instead of both (gc-interval back to its default). */
	jct_write_text(f->file, "max-size = 400M\n");
	const char *config[] = {"--config", f->file, NULL};
	run_and_check(f, config, 400 << 20, "gc every 3600 s");
	const char *both[] = {"--config", f->file, "--max-size", "500M", NULL};
	run_and_check(f, both, 500 << 20, "budget 524288000 bytes");

	/* Refusals name the file, line and setting. */
	jct_write_text(f->file, "max-size = 400M\ncolour = blue\n");
	run_and_refuse(f, config, "my.conf:2: unknown setting 'colour'");
	jct_write_text(f->file, "max-size = lots\n");
	run_and_refuse(f, config, "my.conf:1: bad value 'lots' for max-size");
	jct_write_text(f->file, "group-shared = maybe\n");
	run_and_refuse(f, config, "bad value 'maybe' for group-shared");
	/* A group or user the host lacks is named as such. */
	jct_write_text(f->file, "admin-group = jc-no-such-group\n");
	run_and_refuse(f, config, "my.conf:1: no such group 'jc-no-such-group' for admin-group");
	const char *no_user[] = {"--user", "jc-no-such-user", NULL};
	run_and_refuse(f, no_user, "no such user 'jc-no-such-user' for user");
	unlink(f->file);
	run_and_refuse(f, config, "cannot read");
	const char *bad_flag[] = {"--workers", "0", NULL};
	run_and_refuse(f, bad_flag, "workers 0 is out of range (1 to 256)");
	/* Out of range: an error naming the range, never a clamped value. */
	const char *long_ttl[] = {"--negative-ttl", "4000d", NULL};
	run_and_refuse(f, long_ttl, "negative-ttl 4000d is out of range (at most 10 years");
	const char *long_timeout[] = {"--compile-timeout", "3000000000", NULL};
	run_and_refuse(f, long_timeout, "compile-timeout 3000000000 is out of range");
	const char *tiny_budget[] = {"--buffer-budget", "4K", NULL};
	run_and_refuse(f, tiny_budget, "buffer-budget 4K is out of range (1048576 bytes");
	const char *huge_size[] = {"--max-size", "16E", NULL};
	run_and_refuse(f, huge_size, "bad value '16E' for max-size");
}

static void test_sighup_reload(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d;
	jct_write_text(f->file, "max-size = 1G\nlog-level = notice\n");
	const char *config[] = {"--config", f->file, NULL};
	jct_daemon_spawn_with(d, config, NULL, NULL);
	jct_daemon_wait_ready(d);
	assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_MISS);
	assert_int_equal(jct_compile_tiny(d, 2, "sm_90", NULL), JC_MISS);
	int64_t bytes = jct_stat(d, "bytes");
	char *log = jct_log(d);
	assert_null(strstr(log, "] debug "));
	assert_null(strstr(log, "] info "));
	free(log);

	/* A budget of 1.5 entries and debug logging, without a restart. */
	char conf[256];
	snprintf(conf, sizeof(conf), "max-size = %lld\nlog-level = debug\nworkers = 1\n",
		 (long long)(bytes * 3 / 4));
	jct_write_text(f->file, conf);
	assert_int_equal(kill(d->pid, SIGHUP), 0);
	assert_log(d, "notice MAIN: SIGHUP: configuration reloaded");
	assert_log(d, "SIGHUP: max-size 1073741824 -> ");
	assert_log(d, "SIGHUP: log-level 5 -> 7");
	assert_log(d, "warning MAIN: SIGHUP: workers changed; it takes effect at the next start");
	assert_int_equal(jct_stat(d, "max_size"), bytes * 3 / 4);
	/* The smaller budget (less than the directory holds besides its
	 * entries) evicts at once, down to its low-water mark. */
	assert_true(jct_wait_stat(d, "entries", jct_le, 1, 10000) <= 1);
	assert_true(jct_stat(d, "evictions") >= 1);
	assert_log(d, "least recently used entries: ");
	assert_log(d, "debug NET: client uid"); /* debug lines now */

	/* A bad file changes nothing and says so; the daemon goes on. */
	jct_write_text(f->file, "max-size = 1G\nlog-level = loud\n");
	assert_int_equal(kill(d->pid, SIGHUP), 0);
	assert_log(d, "bad value 'loud' for log-level");
	assert_log(
	    d, "err MAIN: SIGHUP: configuration not reloaded (see above); keeping the running one");
	assert_int_equal(jct_stat(d, "max_size"), bytes * 3 / 4);
	assert_int_equal(jct_compile_tiny(d, 3, "sm_90", NULL), JC_MISS);
	assert_int_equal(jtl_daemon_stop(d), 0);
}

static void test_log_level(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d;
	const char *warning[] = {"--log-level", "warning", NULL};
	jct_daemon_spawn_with(d, warning, NULL, NULL);
	jct_daemon_wait_ready(d);
	assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_MISS);
	assert_int_equal(jtl_daemon_stop(d), 0);
	char *log = jct_log(d);
	assert_null(strstr(log, "ready")); /* a notice */
	assert_null(strstr(log, "stopping"));
	free(log);

	unlink(d->log);
	const char *debug[] = {"--log-level", "debug", NULL};
	jct_daemon_spawn_with(d, debug, NULL, NULL);
	jct_daemon_wait_ready(d);
	assert_log(d, "<7>jitcached[");
	assert_log(d, "debug WORKER: worker ");
	assert_log(d, "<5>jitcached[");
	assert_log(d, "notice MAIN: jitcached ");
	assert_int_equal(jtl_daemon_stop(d), 0);
	assert_log(d, "notice MAIN: signal 15: stopping");
	run_and_refuse(f, (const char *const[]){"--log-level", "loud", NULL},
		       "bad value 'loud' for log-level");
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	return st.st_mode;
}

static void test_group_shared(void **state)
{
	struct fx *f = *state;
	struct jtl_daemon *d = &f->d;
	jct_daemon_spawn_with(d, NULL, NULL, NULL);
	jct_daemon_wait_ready(d);
	assert_true(S_ISSOCK(mode_of(d->sock)));
	assert_int_equal(mode_of(d->sock) & 0777, 0600);
	assert_int_equal(mode_of(d->cache) & 07777, 0700);
	assert_int_equal(jtl_daemon_stop(d), 0);
	jct_write_text(f->file, "group-shared = yes\n");
	jct_daemon_spawn_with(d, (const char *const[]){"--config", f->file, NULL}, NULL, NULL);
	jct_daemon_wait_ready(d);
	assert_int_equal(mode_of(d->sock) & 0777, 0660);
	assert_int_equal(mode_of(d->cache) & 07777, 0700); /* only the socket is shared */
	assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_MISS);
	assert_int_equal(jtl_daemon_stop(d), 0);
}

/* The example configuration: every "#key = value" line uncommented is
 * accepted, and every flag of jitcached --help is a key there. */
static void test_example_config(void **state)
{
	struct fx *f = *state;
	char path[512], line[512];
	snprintf(path, sizeof(path), "%s/systemd/jitcached.conf.example", getenv("JC_BUILD_ROOT"));
	FILE *in = fopen(path, "r");
	assert_non_null(in);
	FILE *out = fopen(f->file, "w");
	char keys[4096] = " ";
	int settings = 0;
	while (fgets(line, sizeof(line), in)) {
		char key[64];
		if (sscanf(line, "#%63[a-z-] = ", key) == 1 && strstr(line, " = ")) {
			settings++;
			strcat(keys, key);
			strcat(keys, " ");
			/* Groups and users differ between machines: ones that exist,
			 * user and group this process's own (nothing to drop). */
			if (strcmp(key, "admin-group") == 0)
				fputs("admin-group = root\n", out);
			else if (strcmp(key, "user") == 0)
				fprintf(out, "user = %s\n", getpwuid(geteuid())->pw_name);
			else if (strcmp(key, "group") == 0)
				fprintf(out, "group = %s\n", getgrgid(getegid())->gr_name);
			else
				fputs(line + 1, out);
		}
	}
	fclose(in);
	fclose(out);
	assert_int_equal(settings, 41); /* 29 + user-max-size, max-log-size, user-max-workers, user,
					 * group, remote-unsigned, remote-lock-wait, keep-requests,
					 * rewarm-workers, rewarm-budget, serve-threads,
					 * hot-copy-budget */
	/* Paths from the flags (they win); the rest from the example. */
	jct_daemon_spawn_with(&f->d, (const char *const[]){"--config", f->file, NULL}, NULL, NULL);
	jct_daemon_wait_ready(&f->d);
	assert_int_equal(jct_stat(&f->d, "max_size"), 10ll << 30);
	assert_int_equal(jtl_daemon_stop(&f->d), 0);

	/* Every setting flag in the usage text is documented there. */
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "%s --help > %s/help.txt", getenv("JITCACHED"), f->d.dir);
	assert_int_equal(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/help.txt", f->d.dir);
	size_t n;
	char *help = (char *)jtl_read_file(path, &n);
	int flags = 0;
	for (char *p = help; (p = strstr(p, "\n  --"));) {
		char flag[64], want[70];
		p += 5;
		if (sscanf(p, "%63[a-z-]", flag) != 1)
			continue;
		if (strcmp(flag, "config") == 0 || strcmp(flag, "help") == 0)
			continue;
		flags++;
		snprintf(want, sizeof(want), " %s ", flag);
		if (!strstr(keys, want))
			fprintf(stderr, "--%s is not in the example configuration\n", flag);
		assert_non_null(strstr(keys, want));
	}
	assert_int_equal(flags, settings); /* and every key is a flag */
	free(help);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_precedence, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sighup_reload, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_log_level, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_group_shared, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_example_config, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
