/* SPDX-License-Identifier: MIT */
/*
 * Whose daemon a client uses, tried with a real jitcached run by a real
 * unprivileged user made for the run (useradd; removed at the end): a socket
 * that user made as $XDG_RUNTIME_DIR/jitcached.sock in a directory anyone may
 * write (a careless XDG_RUNTIME_DIR=/tmp) is refused, saying whose it is,
 * instead of being sent the client's sources and trusted for its objects;
 * the same daemon with its socket in a directory of its own is used (a
 * shared daemon's). Exits 77 when not root.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

static char other[32];
static uid_t other_uid;
static gid_t other_gid;

static int drop_to_other(void *ctx)
{
	(void)ctx;
	setenv("HOME", "/nonexistent", 1); /* its own (no) configuration, not root's */
	unsetenv("XDG_CONFIG_HOME");
	if (setgroups(0, NULL) != 0 || setgid(other_gid) != 0 || setuid(other_uid) != 0)
		return 99;
	return 0;
}

/* Starts jitcached as the other user, its socket at DIR/jitcached.sock, and
 * waits until something accepts connections there (the library would not
 * say more: that is what is tried). */
static void start_as_other(struct jtl_daemon *d)
{
	snprintf(d->sock, sizeof(d->sock), "%s/jitcached.sock", d->dir);
	jct_daemon_spawn_with(d, (const char *const[]){"--log-level", "info", NULL}, drop_to_other,
			      NULL);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->sock);
	for (int i = 0; i < 2000; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			return;
		usleep(10000);
	}
	fprintf(stderr, "jitcached as %s did not listen in 20 s; log %s\n", other, d->log);
	fail();
}

/* jc_client_open by the search alone ($XDG_RUNTIME_DIR the test's root);
 * its status, the message in msg. */
static int open_by_search(const struct jtl_daemon *d, char *msg, size_t len)
{
	jc_options *o;
	jc_client *c = NULL;
	assert_int_equal(jc_options_new(&o), 0);
	jc_options_set_autostart(o, 0);
	jc_options_set_fallback(o, JC_FALLBACK_ERROR);
	jc_options_set_system_socket(o, "");
	setenv("XDG_RUNTIME_DIR", d->dir, 1);
	unsetenv("JITCACHE_SOCKET");
	int rc = jc_client_open(o, &c);
	snprintf(msg, len, "%s", jc_client_errmsg(rc ? NULL : c));
	if (rc == 0) {
		/* What the planted daemon gets to see and answer. */
		jc_request *r = jct_request("saxpy.cu", "sm_90", NULL);
		jc_result *res = NULL;
		int crc = jc_compile(c, r, &res);
		fprintf(stderr, "connected to the other user's daemon; its compile: %d\n", crc);
		jc_result_free(res);
		jc_request_free(r);
		jc_client_close(c);
	}
	jc_options_free(o);
	unsetenv("XDG_RUNTIME_DIR");
	return rc;
}

/* Another user's socket in a world-writable directory: not ours. */
static void test_planted_socket_refused(void **state)
{
	struct jtl_daemon *d = *state;
	/* root's, sticky and writable by all, as /tmp is */
	assert_int_equal(chmod(d->dir, 01777), 0);
	start_as_other(d);
	char msg[1024], want[200];
	int rc = open_by_search(d, msg, sizeof(msg));
	fprintf(stderr, "open: %d %s\n", rc, msg);
	assert_int_equal(rc, JC_EDENIED);
	snprintf(want, sizeof(want), "runs as uid %u, which is neither this user nor root",
		 (unsigned)other_uid);
	assert_non_null(strstr(msg, want));
	/* Named (jitcachectl --socket, through the same library): refused too,
	 * the directory being nobody's in particular. */
	char *err = NULL;
	int ctl = jct_ctl(d, NULL, &err, (const char *const[]){"ping", NULL});
	snprintf(want, sizeof(want), "runs as uid %u, which is neither this user, root, nor the owner of %s",
		 (unsigned)other_uid, d->dir);
	assert_int_not_equal(ctl, 0);
	assert_non_null(strstr(err, want));
	free(err);
}

/* A daemon whose socket lies in its own directory (a shared daemon's) is
 * used when named, whoever runs it; at the per-user path ($XDG_RUNTIME_DIR
 * a directory another user made there first) it is not. */
static void test_socket_in_daemon_dir_used(void **state)
{
	struct jtl_daemon *d = *state;
	assert_int_equal(chmod(d->dir, 0755), 0);
	assert_int_equal(chown(d->dir, other_uid, other_gid), 0);
	start_as_other(d);
	char msg[1024];
	assert_int_equal(open_by_search(d, msg, sizeof(msg)), JC_EDENIED);
	jc_client *c = NULL;
	assert_int_equal(jc_client_connect(d->sock, &c), 0);
	jc_client_close(c);
}

/* A set-user-ID program linked with the library takes nothing from its
 * environment that names code to load or a daemon to trust (secure_getenv):
 * here a root-owned set-user-ID copy of jitcachectl, run by the other user
 * with JITCACHE_REAL_NVRTC naming another library, compiles in-process with
 * the real NVRTC instead of loading that library as root. */
static void test_setuid_ignores_environment(void **state)
{
	struct jtl_daemon *d = *state;
	const char *ctl = getenv("JITCACHECTL");
	assert_non_null(ctl);
	assert_int_equal(chmod(d->dir, 0755), 0);
	assert_int_equal(jct_sh("cp %s %s/ctl-suid && chmod 04755 %s/ctl-suid && cp %s %s/k.cu && "
				"chmod 0644 %s/k.cu", ctl, d->dir, d->dir, jct_example("saxpy.cu"),
				d->dir, d->dir), 0);
	int rc = jct_sh("cd %s && setpriv --reuid %u --regid %u --clear-groups -- env -i "
			"PATH=/usr/bin:/bin JITCACHE_REAL_NVRTC=/lib/x86_64-linux-gnu/libz.so.1 "
			"JITCACHE_AUTOSTART=0 JITCACHE_SYSTEM_SOCKET= JITCACHE_SOCKET=%s/none "
			"./ctl-suid compile k.cu --arch sm_90 -o /dev/null > out 2>&1",
			d->dir, (unsigned)other_uid, (unsigned)other_gid, d->dir);
	char path[200];
	size_t n;
	snprintf(path, sizeof(path), "%s/out", d->dir);
	char *out = (char *)jtl_read_file(path, &n);
	fprintf(stderr, "set-user-ID jitcachectl compile: exit %d: %s\n", rc, out ? out : "");
	assert_null(strstr(out ? out : "", "libz"));
	assert_int_equal(rc, 0);
	free(out);
}

/* Root writing an artifact (jitcachectl -o) over a set-user-ID file another
 * user owns makes a file of root's without the set-ID bits (before, a
 * set-user-ID root file with the artifact in it). */
static void test_output_drops_setid_bits(void **state)
{
	struct jtl_daemon *d = *state;
	const char *ctl = getenv("JITCACHECTL");
	char out[200];
	struct stat st;
	snprintf(out, sizeof(out), "%s/k.cubin", d->dir);
	jct_write_file(out, "old", 3);
	assert_int_equal(chown(out, other_uid, other_gid), 0);
	assert_int_equal(chmod(out, 06755), 0);
	assert_int_equal(jct_sh("JITCACHE_AUTOSTART=0 JITCACHE_SOCKET=%s/none %s compile %s "
				"--arch sm_90 -o %s 2>/dev/null", d->dir, ctl, jct_example("saxpy.cu"),
				out), 0);
	assert_int_equal(stat(out, &st), 0);
	fprintf(stderr, "jitcachectl -o over a 06755 file of uid %u: now uid %u mode %04o\n",
		(unsigned)other_uid, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	assert_true(st.st_size > 3);
	assert_int_equal(st.st_mode & 07777, 0755);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("skipped: needs root to create a user and run a daemon as it\n");
		return 77;
	}
	if (jct_user_add("jco", NULL, other, &other_uid, &other_gid) != 0) {
		printf("skipped: cannot create a user with useradd\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_planted_socket_refused, jct_setup, jct_teardown),
		cmocka_unit_test_setup_teardown(test_socket_in_daemon_dir_used, jct_setup, jct_teardown),
		cmocka_unit_test_setup_teardown(test_setuid_ignores_environment, jct_setup,
						jct_teardown),
		cmocka_unit_test_setup_teardown(test_output_drops_setid_bits, jct_setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
