/* SPDX-License-Identifier: MIT */
/* tests/lib core: a real jitcached on a temporary cache directory. */
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "jitcache/jitcache.h"

int jtl_daemon_init(struct jtl_daemon *d, const char *bin, const char *tag)
{
	memset(d, 0, sizeof(*d));
	d->pid = -1;
	if ((size_t)snprintf(d->bin, sizeof(d->bin), "%s", bin) >= sizeof(d->bin)) {
		snprintf(d->why, sizeof(d->why), "path of jitcached too long: %s", bin);
		return -1;
	}
	if (jtl_tmpdir(d->dir, sizeof(d->dir), NULL, tag ? tag : "test", d->why, sizeof(d->why)) !=
	    0)
		return -1;
	snprintf(d->cache, sizeof(d->cache), "%s/cache", d->dir);
	snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	return 0;
}

pid_t jtl_daemon_spawn(struct jtl_daemon *d, const char *const *flags,
		       int (*child_setup)(void *ctx), void *ctx)
{
	const char *argv[64] = {d->bin, "--cache-dir", d->cache, "--socket", d->sock};
	size_t n = 5;
	for (size_t i = 0; flags && flags[i]; i++) {
		if (n == 63) {
			snprintf(d->why, sizeof(d->why), "more than 58 daemon flags");
			return -1;
		}
		argv[n++] = flags[i];
	}
	argv[n] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(d->why, sizeof(d->why), "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		int rc = child_setup ? child_setup(ctx) : 0;
		if (rc != 0)
			_exit(rc);
		execv(d->bin, (char *const *)argv);
		_exit(127);
	}
	d->pid = pid;
	return pid;
}

int jtl_daemon_wait_ready(struct jtl_daemon *d, unsigned timeout_ms, unsigned poll_us,
			  double *ready_ms)
{
	uint64_t t0 = jc__now_ns(), limit = (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		jc_client *c = NULL;
		if (jc_client_connect(d->sock, &c) == 0) {
			jc_client_close(c);
			if (ready_ms)
				*ready_ms = (double)(jc__now_ns() - t0) / 1e6;
			return 0;
		}
		int status;
		if (d->pid > 0 && waitpid(d->pid, &status, WNOHANG) == d->pid) {
			d->pid = -1;
			snprintf(
			    d->why, sizeof(d->why), "jitcached exited at start (%s %d); log %s",
			    WIFEXITED(status) ? "status" : "signal",
			    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), d->log);
			return -1;
		}
		if (jc__now_ns() - t0 > limit) {
			snprintf(d->why, sizeof(d->why),
				 "jitcached did not answer within %u ms; log %s", timeout_ms,
				 d->log);
			return -1;
		}
		usleep(poll_us);
	}
}

int jtl_daemon_wait(struct jtl_daemon *d)
{
	if (d->pid <= 0)
		return 0;
	int status = 0;
	while (waitpid(d->pid, &status, 0) < 0 && errno == EINTR)
		;
	d->pid = -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

int jtl_daemon_stop(struct jtl_daemon *d)
{
	if (d->pid > 0)
		kill(d->pid, SIGTERM);
	return jtl_daemon_wait(d);
}

void jtl_daemon_kill(struct jtl_daemon *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGKILL);
	while (waitpid(d->pid, NULL, 0) < 0 && errno == EINTR)
		;
	d->pid = -1;
}

int jtl_daemon_cleanup(struct jtl_daemon *d, int keep)
{
	jtl_daemon_kill(d);
	if (keep || !d->dir[0])
		return 0;
	if (jtl_rmtree(d->dir, d->why, sizeof(d->why)) != 0)
		return -1;
	d->dir[0] = '\0';
	return 0;
}
