/* SPDX-License-Identifier: MIT */
/*
 * The request path's include tree watches (daemon.h, "cache_watch.c";
 * common/watch.h): the watcher cache.c keys with, its descriptor polled on
 * the loop, its event counts moved into the counters. Loop thread.
 */
#include "common/log.h"
#include "common/watch.h"
#include "daemon/daemon.h"

const char *jc__cache_watch_refusal(int why)
{
	switch (why) {
	case JC_WATCH_BUDGET:
		return "over --max-include-watches";
	case JC_WATCH_LIMIT:
		return "inotify_add_watch failed: see fs.inotify.max_user_watches";
	case JC_WATCH_REMOTE:
		return "a network or FUSE file system";
	default:
		return "out of memory";
	}
}

void jc__cache_watch_counts(struct jc_daemon *d, struct jc_watch_stats *out)
{
	struct jc_watch_stats st;
	jc__watch_stats(d->request.watch, &st, 1);
	jc__daemon_count(d, JC_CTR_include_watch_invalidations, st.invalidations);
	jc__daemon_count(d, JC_CTR_include_watch_overflows, st.overflows);
	if (out)
		*out = st;
}

static void watch_poll_cb(uv_poll_t *h, int status, int events)
{
	struct jc_daemon *d = h->data;
	(void)events;
	if (status < 0) { /* cannot happen to an inotify descriptor; do not spin on it */
		jc_log_warn(KEY, "include watch descriptor: %s; drained at each request only",
			    uv_strerror(status));
		uv_poll_stop(h);
	}
	jc__watch_drain(d->request.watch);
	jc__cache_watch_counts(d, NULL);
}

void jc__cache_watch_new(struct jc_daemon *d)
{
	char err[256];
	if (d->cfg.max_include_watches &&
	    jc__watch_new(d->cfg.max_include_watches, &d->request.watch, err, sizeof(err)) != 0)
		jc_log_warn(KEY, "include trees are not watched (every hit re-checks them): %s",
			    err);
}

void jc__cache_watch_start(struct jc_daemon *d)
{
	if (!d->request.watch)
		return;
	d->request.watch_poll.data = d;
	if (uv_poll_init(d->loop, &d->request.watch_poll, jc__watch_fd(d->request.watch)) == 0) {
		d->request.watch_polling = 1;
		uv_poll_start(&d->request.watch_poll, UV_READABLE, watch_poll_cb);
	}
}

void jc__cache_watch_stop(struct jc_daemon *d)
{
	if (d->request.watch_polling)
		uv_close((uv_handle_t *)&d->request.watch_poll, NULL);
	d->request.watch_polling = 0;
}
