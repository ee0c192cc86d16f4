/* SPDX-License-Identifier: MIT */
/* The daemon under test: a real jitcached on a temporary cache directory. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "util.h"
#include "client/client_internal.h"

static int exists_x(const char *path)
{
	return access(path, X_OK) == 0;
}

static void find_daemon(char *out, size_t len)
{
	const char *env = getenv("JITCACHED");
	if (env && *env) {
		snprintf(out, len, "%s", env);
		return;
	}
	if ((jc__beside_self("../daemon/jitcached", out, len) == 0 && exists_x(out)) ||
	    (jc__beside_self("jitcached", out, len) == 0 && exists_x(out)))
		return;
	bench_die("cannot find jitcached: set JITCACHED or run from the build tree");
}

void bench_daemon_init(struct bench_daemon *d)
{
	const char *tmp = getenv("TMPDIR");
	memset(d, 0, sizeof(*d));
	d->pid = -1;
	snprintf(d->root, sizeof(d->root), "%s/jc-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(d->root))
		bench_die("mkdtemp %s: %s", d->root, strerror(errno));
	snprintf(d->cache, sizeof(d->cache), "%s/cache", d->root);
	snprintf(d->sock, sizeof(d->sock), "%s/sock", d->root);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->root);
	/* An empty configuration: the user's own must not change the figures. */
	snprintf(d->conf, sizeof(d->conf), "%s/empty.conf", d->root);
	int fd = open(d->conf, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		bench_die("create %s: %s", d->conf, strerror(errno));
	close(fd);
	find_daemon(d->bin, sizeof(d->bin));
}

double bench_daemon_start(struct bench_daemon *d)
{
	/* No eviction during the run: the scale steps hold up to ~4 GB of
	 * (deduplicated) logical bytes. */
	const char *argv[26] = {d->bin, "--cache-dir", d->cache, "--socket", d->sock,
				"--config", d->conf, "--max-size", "1T", "--log-level", "warning"};
	size_t n = 11;
	for (size_t i = 0; i < 8 && d->extra[i]; i++)
		argv[n++] = d->extra[i];
	if (d->confinement) {
		argv[n++] = "--confinement";
		argv[n++] = d->confinement;
	}
	uint64_t t0 = jc__now_ns();
	pid_t pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(d->bin, (char *const *)argv);
		_exit(127);
	}
	d->pid = pid;
	for (;;) {
		jc_client *c = NULL;
		if (jc_client_connect(d->sock, &c) == 0) {
			double ms = (double)(jc__now_ns() - t0) / 1e6;
			jc_client_close(c);
			return ms;
		}
		int status;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			d->pid = -1;
			bench_die("jitcached exited at start (status %d); see %s", status, d->log);
		}
		if (jc__now_ns() - t0 > 30000000000ull)
			bench_die("jitcached did not answer within 30 s; see %s", d->log);
		usleep(200);
	}
}

void bench_daemon_stop(struct bench_daemon *d)
{
	int status = 0;
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGTERM);
	while (waitpid(d->pid, &status, 0) < 0 && errno == EINTR)
		;
	d->pid = -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bench_die("jitcached did not stop cleanly (status %d); see %s", status, d->log);
}

static int remove_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 ? 0 : -1;
}

void bench_daemon_cleanup(struct bench_daemon *d, int keep_root)
{
	if (d->pid > 0) {
		kill(d->pid, SIGKILL);
		while (waitpid(d->pid, NULL, 0) < 0 && errno == EINTR)
			;
		d->pid = -1;
	}
	if (!keep_root && d->root[0]) {
		/* Objects are read-only files: removal needs only the directories' modes. */
		if (nftw(d->root, remove_cb, 16, FTW_DEPTH | FTW_PHYS) != 0)
			fprintf(stderr, "jitcache-bench: could not remove %s\n", d->root);
		d->root[0] = '\0';
	}
}

jc_client *bench_connect(const struct bench_daemon *d)
{
	jc_client *c = NULL;
	if (jc_client_connect(d->sock, &c) != 0)
		bench_die("connect: %s", jc_client_errmsg(NULL));
	return c;
}

int64_t bench_stat(jc_client *c, const char *name)
{
	struct jc_admin_req req = {.command = (char *)"stats"};
	struct jc_admin_reply reply = {0};
	int rc = jc__client_admin(c, &req, &reply);
	if (rc != 0 || reply.status != 0 || reply.n_rec != 1)
		bench_die("stats: %s", rc ? jc_client_errmsg(c) : jc_strerror(reply.status));
	const struct jc_kv *kv = jc__record_get(&reply.rec[0], name);
	if (!kv || !kv->is_int)
		bench_die("stats has no integer '%s'", name);
	int64_t v = kv->i;
	jc__admin_reply_clear(&reply);
	return v;
}
