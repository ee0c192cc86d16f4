/* SPDX-License-Identifier: MIT */
/*
 * The toolchains the daemon keys and compiles with (toolchains.h): the one
 * probed at start-up, the identity the cache recorded, and the toolchain on
 * disk probed again (SIGHUP, a worker that loaded another compiler) and
 * switched to when it changed. Loop thread, but for the probe's job in the
 * thread pool.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/daemon.h"
#include "daemon/pool.h"
#include "daemon/toolchains.h"
#include "jitcache/jitcache.h"

/*
 * The toolchain on disk (jc__toolchains_recheck: SIGHUP, or a worker that
 * loaded another compiler), against the one this daemon keys with. Probed
 * by a fresh `jitcache-worker --identity` (the environment and the files as
 * a start now finds them), in the thread pool, which records a changed one
 * in the index. A change (a driver or toolkit update, LD_LIBRARY_PATH's
 * files replaced) is switched to: d->tc names it from then on, so requests
 * are keyed with it; the workers are replaced (idle ones now, busy ones
 * after their job), so compiles run with it; and the entries of the old one
 * are re-warmed. The daemon's own mapped libnvrtc is only asked for its
 * version at start-up, never compiles.
 */
struct jc_tc_gen {
	struct jc_toolchain tc;
	struct jc_tc_gen *prev;
};

struct jc_toolchains {
	struct jc_tc_gen *gens; /* every toolchain d->tc was, the newest first */
	char identity_read[sizeof(((struct jc_toolchain *)0)->summary)]; /* the cache's */
	int probing;							 /* a probe on disk runs */
};

struct disk_probe {
	uv_work_t work;
	struct jc_daemon *d;
	char why[96];
	struct jc_tc_gen *gen; /* the toolchain on disk, when it differs */
	char err[512];
};

/* Runs `jitcache-worker --identity` into out[cap] (NUL-terminated); 0, or
 * -1 with p->err set. */
int jc__toolchains_probe(struct jc_daemon *d, char *err, size_t errlen)
{
	struct jc_toolchains *t = calloc(1, sizeof(*t));
	if (!t || !(t->gens = calloc(1, sizeof(*t->gens)))) {
		free(t);
		return JC_ENOMEM;
	}
	d->toolchains = t;
	d->tc = &t->gens->tc;
	return jc__toolchain_probe(&t->gens->tc, err, errlen);
}

static int probe_worker(struct disk_probe *p, char *out, size_t cap)
{
	int fds[2];
	posix_spawn_file_actions_t fa;
	char *argv[] = {(char *)p->d->cfg.worker_path, (char *)"--identity", NULL};
	pid_t pid;
	if (pipe2(fds, O_CLOEXEC) != 0) {
		snprintf(p->err, sizeof(p->err), "pipe: %s", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	size_t n = 0;
	ssize_t got;
	while (rc == 0 && n < cap - 1 &&
	       ((got = read(fds[0], out + n, cap - 1 - n)) > 0 || (got < 0 && errno == EINTR)))
		n += got > 0 ? (size_t)got : 0;
	close(fds[0]);
	out[n] = '\0';
	int status = 0;
	if (rc != 0)
		snprintf(p->err, sizeof(p->err), "cannot start %s: %s", argv[0], strerror(rc));
	else if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		snprintf(p->err, sizeof(p->err), "%s --identity failed (status %d)", argv[0],
			 status);
	return p->err[0] ? -1 : 0;
}

static void disk_probe_work(uv_work_t *w)
{
	struct disk_probe *p = w->data;
	struct jc_daemon *d = p->d;
	size_t cap = sizeof(struct jc_toolchain) + 1024;
	char *out = malloc(cap);
	struct jc_tc_gen *g = calloc(1, sizeof(*g));
	/* Only the loop changes d->tc, and not while this probe runs. */
	const struct jc_toolchain *now = __atomic_load_n(&d->tc, __ATOMIC_ACQUIRE);
	if (!out || !g)
		snprintf(p->err, sizeof(p->err), "out of memory");
	else if (probe_worker(p, out, cap) == 0)
		jc__toolchain_parse(out, &g->tc, p->err, sizeof(p->err));
	if (!p->err[0] && strcmp(g->tc.summary, now->summary) != 0) {
		struct jc_cachedir *c = d->cache;
		pthread_mutex_lock(&c->wlock);
		if (jc__cachedir_set_identity(c, g->tc.summary) != 0)
			jc_log_warn(MAIN, "cannot record the toolchain identity: %s",
				    jc__cachedir_errmsg(c));
		pthread_mutex_unlock(&c->wlock);
		p->gen = g;
		g = NULL;
	}
	free(g);
	free(out);
}

static void disk_probe_done(uv_work_t *w, int status)
{
	struct disk_probe *p = w->data;
	struct jc_daemon *d = p->d;
	d->toolchains->probing = 0;
	if (status != 0 || p->err[0]) {
		jc_log_err(MAIN, "%s: cannot probe the toolchain on disk: %s", p->why,
			   p->err[0] ? p->err : uv_strerror(status));
	} else if (!p->gen) {
		jc_log_info(MAIN, "%s: toolchain on disk unchanged", p->why);
	} else if (d->run.stopping) {
		free(p->gen);
	} else {
		struct jc_tc_gen *g = p->gen;
		jc_log_notice(MAIN,
			      "%s: toolchain changed on disk: now keying and compiling with %s "
			      "(was %s); new workers, re-warming",
			      p->why, g->tc.summary, d->tc->summary);
		g->prev = d->toolchains->gens;
		d->toolchains->gens = g;
		d->cache_identity = d->tc->summary;
		__atomic_store_n(&d->tc, &g->tc, __ATOMIC_RELEASE);
		__atomic_store_n(&d->request.policy.tc, d->tc,
				 __ATOMIC_RELEASE); /* serving threads admit */
		jc__daemon_count(d, JC_CTR_toolchain_switches, 1);
		jc__pool_recycle(d->pool);
		jc__rewarm_start(d, 0, 0, "the toolchain changed on disk", NULL, NULL);
	}
	free(p);
}

void jc__toolchains_recheck(struct jc_daemon *d, const char *why)
{
	struct disk_probe *p =
	    d->toolchains->probing || d->run.stopping ? NULL : calloc(1, sizeof(*p));
	if (!p)
		return; /* one runs already (or no memory): it answers this ask too */
	p->d = d;
	p->work.data = p;
	snprintf(p->why, sizeof(p->why), "%s", why);
	if (uv_queue_work(d->loop, &p->work, disk_probe_work, disk_probe_done) != 0) {
		free(p);
		return;
	}
	d->toolchains->probing = 1;
}

void jc__toolchains_free(struct jc_daemon *d)
{
	struct jc_toolchains *t = d->toolchains;
	while (t && t->gens) {
		struct jc_tc_gen *g = t->gens;
		t->gens = g->prev;
		free(g);
	}
	free(t);
	d->toolchains = NULL;
	d->tc = NULL;
	d->cache_identity = NULL;
}

/*
 * The toolchain identity the cache recorded (d->cache_identity: the last
 * daemon's) is replaced by this daemon's. A different one starts a re-warm
 * once the daemon serves (rewarm.c).
 */
void jc__toolchains_record_identity(struct jc_daemon *d)
{
	struct jc_cachedir *c = d->cache;
	pthread_mutex_lock(&c->wlock);
	char *recorded = d->toolchains->identity_read;
	d->cache_identity = recorded;
	int rc = jc__cachedir_identity(c, recorded, sizeof(d->toolchains->identity_read));
	if (rc != 0 && rc != JC_ENOTFOUND)
		jc_log_warn(MAIN, "cannot read the cache's toolchain identity: %s",
			    jc__cachedir_errmsg(c));
	if (rc != 0)
		recorded[0] = '\0';
	if (strcmp(d->cache_identity, d->tc->summary) != 0) {
		if (d->cache_identity[0])
			jc_log_notice(MAIN, "toolchain identity changed: the cache was built by %s",
				      d->cache_identity);
		if (jc__cachedir_set_identity(c, d->tc->summary) != 0)
			jc_log_warn(MAIN, "cannot record the toolchain identity: %s",
				    jc__cachedir_errmsg(c));
	}
	pthread_mutex_unlock(&c->wlock);
}
