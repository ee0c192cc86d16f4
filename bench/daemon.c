/* SPDX-License-Identifier: MIT */
/* The daemon under test: a real jitcached on a temporary cache directory,
 * spawned by tests/lib's core (tests/lib/core.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "client/client_internal.h"
#include "common/util.h"

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
	char bin[PATH_MAX];
	memset(d, 0, sizeof(*d));
	d->core.pid = -1;
	find_daemon(bin, sizeof(bin));
	if (jtl_daemon_init(&d->core, bin, "bench") != 0)
		bench_die("%s", d->core.why);
	/* An empty configuration: the user's own must not change the figures. */
	snprintf(d->conf, sizeof(d->conf), "%s/empty.conf", d->core.dir);
	int fd = open(d->conf, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		bench_die("create %s: %s", d->conf, strerror(errno));
	close(fd);
}

double bench_daemon_start(struct bench_daemon *d)
{
	/* No eviction during the run: the scale steps hold up to ~4 GB of
	 * (deduplicated) logical bytes. */
	const char *flags[22] = {"--config", d->conf, "--max-size", "1T", "--log-level", "warning"};
	size_t n = 6;
	for (size_t i = 0; i < 8 && d->extra[i]; i++)
		flags[n++] = d->extra[i];
	if (d->confinement) {
		flags[n++] = "--confinement";
		flags[n++] = d->confinement;
	}
	double ms;
	if (jtl_daemon_spawn(&d->core, flags, NULL, NULL) < 0 ||
	    jtl_daemon_wait_ready(&d->core, 30000, 200, &ms) != 0)
		bench_die("%s", d->core.why);
	return ms;
}

void bench_daemon_stop(struct bench_daemon *d)
{
	if (d->core.pid <= 0)
		return;
	int status = jtl_daemon_stop(&d->core);
	if (status != 0)
		bench_die("jitcached did not stop cleanly (%s %d); see %s",
			  status < 0 ? "signal" : "status", status < 0 ? -status : status,
			  d->core.log);
}

void bench_daemon_cleanup(struct bench_daemon *d, int keep_root)
{
	if (jtl_daemon_cleanup(&d->core, keep_root) != 0)
		fprintf(stderr, "jitcache-bench: %s\n", d->core.why);
}

jc_client *bench_connect(const struct bench_daemon *d)
{
	jc_client *c = NULL;
	if (jc_client_connect(d->core.sock, &c) != 0)
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
