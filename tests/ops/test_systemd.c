/* SPDX-License-Identifier: MIT */
/*
 * jitcached started the way systemd starts it: a listening socket passed as
 * fd 3 (LISTEN_FDS=1, LISTEN_PID=its pid) and NOTIFY_SOCKET naming a
 * datagram socket this test reads. It must send READY=1 from its main pid
 * (NotifyAccess=main), serve on the passed socket without binding its own,
 * report STATUS= and, on SIGTERM, STOPPING=1. Also: the daemon and its
 * workers compile and link with writable+executable memory refused by the
 * kernel (PR_SET_MDWE), which the unit's MemoryDenyWriteExecute=yes needs.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

#include "config.h"

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

static int unix_socket(int type, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Waits for a notification containing want; returns the sender's pid. */
static pid_t wait_notify(int fd, const char *want, char *msg, size_t len)
{
	for (int tries = 0; tries < 400; tries++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) != 1)
			continue;
		char cbuf[CMSG_SPACE(sizeof(struct ucred))];
		struct iovec iov = {.iov_base = msg, .iov_len = len - 1};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		ssize_t n = recvmsg(fd, &mh, 0);
		assert_true(n >= 0);
		msg[n] = '\0';
		if (!strstr(msg, want))
			continue;
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		assert_non_null(c);
		assert_int_equal(c->cmsg_type, SCM_CREDENTIALS);
		struct ucred cred;
		memcpy(&cred, CMSG_DATA(c), sizeof(cred));
		return cred.pid;
	}
	fprintf(stderr, "no notification with '%s' in 40 s\n", want);
	fail();
	return -1;
}

struct activation {
	int lfd;
	const char *notify;
};

/* What systemd does between fork and exec of a socket-activated Type=notify
 * service (sd_listen_fds(3), sd_notify(3)). */
static int as_systemd(void *ctx)
{
	struct activation *a = ctx;
	char n[32];
	if (a->lfd == 3 ? fcntl(3, F_SETFD, 0) != 0 : dup2(a->lfd, 3) != 3)
		return 126; /* fd 3, without close-on-exec */
	snprintf(n, sizeof(n), "%d", (int)getpid());
	setenv("LISTEN_PID", n, 1);
	setenv("LISTEN_FDS", "1", 1);
	setenv("NOTIFY_SOCKET", a->notify, 1);
	return 0;
}

static void test_socket_activation(void **state)
{
	struct jtl_daemon *d = *state;
#if !JC_HAVE_SYSTEMD
	skip(); /* built without libsystemd: no sd_notify, no socket activation */
#endif
	char passed[320], notify[320], msg[512];
	snprintf(passed, sizeof(passed), "%s/passed.sock", d->dir);
	snprintf(notify, sizeof(notify), "%s/notify", d->dir);
	int lfd = unix_socket(SOCK_STREAM, passed);
	assert_int_equal(listen(lfd, 16), 0);
	int nfd = unix_socket(SOCK_DGRAM, notify);
	int one = 1;
	assert_int_equal(setsockopt(nfd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)), 0);

	struct activation a = {.lfd = lfd, .notify = notify};
	pid_t pid = jct_daemon_spawn_with(d, NULL, as_systemd, &a);
	close(lfd);

	assert_int_equal(wait_notify(nfd, "READY=1", msg, sizeof(msg)), pid);
	assert_non_null(strstr(msg, "STATUS="));
	/* It serves on the passed socket and made none of its own. */
	struct jtl_daemon via = *d;
	snprintf(via.sock, sizeof(via.sock), "%s/passed.sock", d->dir);
	assert_int_equal(jct_compile_tiny(&via, 1, "sm_90", NULL), JC_MISS);
	assert_int_equal(jct_compile_tiny(&via, 1, "sm_90", NULL), JC_HIT);
	struct stat st;
	assert_int_equal(stat(d->sock, &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(wait_notify(nfd, "STATUS=serving: 1 entries", msg, sizeof(msg)), pid);
	assert_true(jct_wait_log(d, "socket passed by systemd", 1000));

	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(wait_notify(nfd, "STOPPING=1", msg, sizeof(msg)), pid);
	assert_int_equal(jtl_daemon_wait(d), 0);
	/* The socket belongs to systemd: still there after the daemon exits. */
	assert_int_equal(stat(passed, &st), 0);
	close(nfd);
}

/* Without LISTEN_FDS (or with LISTEN_PID of another process) the daemon binds
 * its own socket, as sd_listen_fds(3) prescribes. */
static void test_listen_pid_mismatch_binds_own(void **state)
{
	struct jtl_daemon *d = *state;
	setenv("LISTEN_PID", "1", 1);
	setenv("LISTEN_FDS", "1", 1);
	jct_daemon_start(d, NULL);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	struct stat st;
	assert_int_equal(stat(d->sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(jct_compile_tiny(d, 2, "sm_90", NULL), JC_MISS);
}

/* In the child: PR_SET_MDWE, kept across exec and by the workers; writes
 * 'y' (W+X now refused), 'n' (no MDWE here) or 'x' (set, yet W+X mapped) to
 * the pipe *ctx. */
static int refuse_wx(void *ctx)
{
	char verdict = 'n';
	if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) == 0) {
		void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		verdict = p == MAP_FAILED ? 'y' : 'x';
	}
	if (write(*(int *)ctx, &verdict, 1) != 1 || verdict != 'y')
		return 77;
	return 0;
}

/* The daemon under PR_SET_MDWE (Linux 6.3+), inherited by its workers:
 * compile, compile to LTO-IR and link with nvJitLink all still work. */
static void test_no_write_execute_memory(void **state)
{
	struct jtl_daemon *d = *state;
	int ready[2];
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	jct_daemon_spawn_with(d, NULL, refuse_wx, &ready[1]);
	close(ready[1]);
	char verdict = 0;
	assert_int_equal(read(ready[0], &verdict, 1), 1);
	close(ready[0]);
	assert_true(verdict != 'x'); /* MDWE set but W+X still mapped: a kernel bug */
	if (verdict == 'n') {
		jtl_daemon_wait(d);
		skip(); /* kernel older than 6.3: no PR_SET_MDWE */
	}
	jct_daemon_wait_ready(d);
	char out[400], ltoir[400];
	snprintf(ltoir, sizeof(ltoir), "%s/k.ltoir", d->dir);
	snprintf(out, sizeof(out), "%s/k.cubin", d->dir);
	const char *lto[] = {
	    "compile", jct_example("saxpy.cu"), "--arch",	 "sm_90", "--output", "ltoir", "-o",
	    ltoir,     "--name-expr",		"&saxpy<float>", NULL};
	free(jct_ctl_expect(d, 0, NULL, lto));
	const char *link[] = {"link", "--arch", "sm_90", "--lto", "-o", out, ltoir, NULL};
	free(jct_ctl_expect(d, 0, NULL, link));
	assert_int_equal(jct_compile_tiny(d, 3, "sm_90", NULL), JC_MISS);
	assert_int_equal(jct_stat(d, "worker_crashes"), 0);
	assert_int_equal(jct_stat(d, "compile_failures"), 0);
	size_t n;
	uint8_t *cubin = jtl_read_file(out, &n);
	assert_non_null(cubin);
	assert_true(n > 64 && memcmp(cubin, "\177ELF", 4) == 0);
	free(cubin);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_socket_activation, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_listen_pid_mismatch_binds_own, jct_setup,
					    jct_teardown),
	    cmocka_unit_test_setup_teardown(test_no_write_execute_memory, jct_setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
