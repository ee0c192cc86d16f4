/* SPDX-License-Identifier: MIT */
/*
 * The server on the main loop (server_int.h): requests the serving threads
 * hand it, each through a proxy of its connection (the request path,
 * cache.c, for COMPILE), and the admin commands: the access check and audit
 * log, "warm" and "stop" answered on the loop, the rest run in the thread
 * pool (core/admin.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/watch.h"
#include "core/admin.h"
#include "core/confine.h"
#include "daemon/server_int.h"

/* --- admin commands run in the thread pool -------------------------------- */

struct admin_job {
	uv_work_t work;
	struct jc_conn *conn;
	struct jc_flush_job *flush; /* access times to write first (LRU order) */
	struct jc_admin_req req;
	struct jc_admin_reply reply;
	struct jc_admin_env env;
};

static void admin_work_cb(uv_work_t *w)
{
	struct admin_job *j = w->data;
	struct jc_daemon *d = j->conn->d;
	jc__cache_flush_write(d, j->flush);
	j->flush = NULL;
	pthread_mutex_lock(&d->cache->wlock);
	jc__admin_run(&j->env, &j->req, &j->reply);
	pthread_mutex_unlock(&d->cache->wlock);
}

static void admin_after_cb(uv_work_t *w, int status)
{
	struct admin_job *j = w->data;
	struct jc_conn *c = j->conn;
	struct jc_daemon *d = c->d;
	(void)status;
	unsigned flags = jc__admin_flags(&j->req);
	if (j->env.removed)
		jc__cache_memcache_drop_all(d);
	jc__count(&d->cache->counters, JC_CTR_evictions, j->env.evicted);
	jc__count(&d->cache->counters, JC_CTR_corrupt_objects,
		  j->env.corrupt); /* verify, as offline */
	if (j->env.zero_counters) {
		jc__counters_zero(&d->cache->counters);
		memset(&d->run.hit_latency, 0, sizeof(d->run.hit_latency));
		d->run.hit_latency_since = (uint64_t)time(NULL);
		jc__remote_stats_zero(d->remote);
	}
	/* Changes made on someone's behalf go to the log with who asked. */
	if (flags & JC_ADMIN_MUTATING) {
		char what[256];
		int ok = j->reply.status == 0 || j->reply.status == JC_ECORRUPT;
		int dry = jc__admin_arg(&j->req, "dry_run") != NULL;
		size_t n = (size_t)snprintf(what, sizeof(what), "%s", j->req.command);
		for (size_t i = 0; i < j->req.args.n && n < sizeof(what); i++)
			n += (size_t)snprintf(what + n, sizeof(what) - n, " %s", j->req.args.v[i]);
		jc_log(!ok   ? LOG_WARNING
		       : dry ? LOG_INFO
			     : LOG_NOTICE,
		       ADMIN, "%s by uid %d pid %d: %s", what, (int)c->uid, (int)c->pid,
		       j->reply.message ? j->reply.message : jc_strerror(j->reply.status));
	}
	/* The remote tier's figures count for all users: an admin's stats only. */
	if (strcmp(j->req.command, "stats") == 0 && j->env.all_users && !(flags & JC_ADMIN_LISTS) &&
	    j->reply.status == 0 && j->reply.n_rec == 1 &&
	    jc__remote_stats_add(d->remote, &j->reply.rec[0]) != 0)
		jc_log_warn(ADMIN, "stats: remote tier figures left out (out of memory)");
	struct jc_buf b = {0};
	if (jc__encode_admin_reply(&b, &j->reply) == 0 && !c->closing)
		jc__srv_conn_write(c, &b, 0);
	else
		jc__buf_free(&b);
	jc__srv_conn_done(c);
	jc__srv_conn_unref(c);
	jc__admin_req_clear(&j->req);
	jc__admin_reply_clear(&j->reply);
	free(j);
}

/* Sends a reply made on the loop (the JC_ADMIN_LOOP commands); the
 * connection may then read its next request. */
static void loop_reply(struct jc_conn *c, const struct jc_admin_reply *reply)
{
	struct jc_buf b = {0};
	if (jc__encode_admin_reply(&b, reply) == 0 && !c->closing)
		jc__srv_conn_write(c, &b, 0);
	else
		jc__buf_free(&b);
	jc__srv_conn_done(c);
}

/* warm: the re-warm's report, after starting one (rewarm.c) unless only
 * its status is asked. */
static void warm_reply(void *ctx, int64_t queued)
{
	struct jc_conn *c = ctx;
	struct jc_admin_reply reply = {0};
	int rc = queued < 0 ? (int)queued : jc__rewarm_report(c->d, &reply);
	if (rc != 0) {
		jc__admin_reply_clear(&reply);
		reply.status = rc;
		reply.message = strdup(jc_strerror(rc));
	}
	loop_reply(c, &reply);
	jc__admin_reply_clear(&reply);
	jc__srv_conn_unref(c);
}

static void loop_warm(struct jc_conn *c, const struct jc_admin_req *req)
{
	struct jc_daemon *d = c->d;
	struct jc_admin_reply reply = {0};
	int64_t top = 0, since = 0;
	const char *bad = NULL;
	if (jc__admin_check(req, &reply) == 0) {
		if (jc__admin_arg_count(req, "top", &top) != 0)
			bad = "top";
		else if (jc__admin_arg_count(req, "since", &since) != 0)
			bad = "since";
	}
	if (bad) {
		char msg[128];
		snprintf(msg, sizeof(msg), "bad --%s '%.32s': a count", bad,
			 jc__admin_arg(req, bad));
		reply.status = JC_EINVAL;
		reply.message = strdup(msg);
	}
	if (reply.status != 0) {
		loop_reply(c, &reply);
		jc__admin_reply_clear(&reply);
		return;
	}
	jc__srv_conn_ref(c);
	if (jc__admin_arg(req, "status")) {
		warm_reply(c, 0);
		return;
	}
	jc_log_notice(ADMIN, "warm by uid %d pid %d", (int)c->uid, (int)c->pid);
	jc__rewarm_start(d, (uint64_t)top, since > 0 ? jc__wall_s() - since : 0, "jitcachectl warm",
			 warm_reply, c);
}

static void handle_admin(struct jc_conn *c, const uint8_t *payload, size_t len)
{
	struct jc_daemon *d = c->d;
	struct admin_job *j = calloc(1, sizeof(*j));
	int rc = j ? jc__decode_admin(payload, len, &j->req) : JC_ENOMEM;
	char msg[4300] = "bad admin request";
	int admin = rc == 0 && jc__srv_is_admin(c);
	if (rc == 0 && !admin && (jc__admin_flags(&j->req) & JC_ADMIN_PRIVILEGED)) {
		rc = JC_EDENIED;
		const char *opt = jc__admin_privileged_option(&j->req);
		snprintf(msg, sizeof(msg),
			 "'%.32s%s%s' is limited to root, uid %d and the admin group "
			 "(admin-group); uid %d may not run it (every user may run ls, show, purge "
			 "and stats on their own entries)",
			 j->req.command, *opt ? " --" : "", opt, (int)geteuid(), (int)c->uid);
		jc_log_warn(ADMIN, "refused '%.32s' to uid %d gid %d pid %d", j->req.command,
			    (int)c->uid, (int)c->gid, (int)c->pid);
	}
	if (rc != 0) {
		if (j)
			jc__admin_req_clear(&j->req);
		free(j);
		jc__count(&d->cache->counters, JC_CTR_bad_requests, 1);
		jc__srv_conn_send_error(c, rc, msg);
		jc__srv_conn_done(c);
		return;
	}
	if ((jc__admin_flags(&j->req) & JC_ADMIN_LOOP) && strcmp(j->req.command, "warm") == 0) {
		loop_warm(c, &j->req);
		jc__admin_req_clear(&j->req);
		free(j);
		return;
	}
	if (jc__admin_flags(&j->req) & JC_ADMIN_LOOP) { /* stop */
		/* As SIGTERM: this answer is written before the connections end. */
		struct jc_admin_reply reply = {.message = msg};
		struct jc_buf b = {0};
		snprintf(msg, sizeof(msg), "jitcached pid %d serving %s is stopping", (int)getpid(),
			 d->cfg.cache_dir);
		jc_log_notice(ADMIN, "stop by uid %d pid %d", (int)c->uid, (int)c->pid);
		if (jc__encode_admin_reply(&b, &reply) == 0)
			jc__srv_conn_write(c, &b, 0);
		else
			jc__buf_free(&b);
		jc__admin_req_clear(&j->req);
		free(j);
		jc__srv_conn_done(c);
		uv_kill(getpid(), SIGTERM);
		return;
	}
	j->conn = c;
	j->env.uid = (uint32_t)c->uid;
	j->env.all_users = admin;
	j->env.user_max_size = d->cfg.user_max_size;
	j->env.cd = d->cache;
	j->env.tc = d->tc;
	j->env.policy = &d->request.policy;
	j->env.confinement = jc__confine_name(d->request.confinement);
	j->env.cache_identity = d->cache_identity;
	j->env.keep_requests = d->cfg.keep_requests;
	struct jc_watch_stats ws;
	jc__cache_watch_counts(d, &ws);
	jc__memcache_collect(d); /* the serving threads' hits */
	j->env.watch_trees = ws.trees;
	j->env.watch_count = ws.watches;
	j->env.watch_bytes = ws.bytes;
	memcpy(j->env.counters, d->cache->counters.v, sizeof(j->env.counters));
	j->env.uptime_s = (int64_t)((jc__now_ns() - d->run.start_ns) / 1000000000u);
	j->env.hit_samples = d->run.hit_latency.count;
	j->env.hit_sum_ns = d->run.hit_latency.sum_ns;
	j->env.hit_latency_since = (int64_t)d->run.hit_latency_since;
	j->env.hit_p50_ns = jc__latency_quantile_ns(&d->run.hit_latency, 0.5);
	j->env.hit_p99_ns = jc__latency_quantile_ns(&d->run.hit_latency, 0.99);
	j->env.max_size = d->cfg.max_size;
	j->env.daemon_pid = (int64_t)getpid();
	j->env.socket_path = d->cfg.socket_path;
	j->work.data = j;
	j->flush = jc__cache_flush_take(d);
	jc__srv_conn_ref(c);
	if (uv_queue_work(d->loop, &j->work, admin_work_cb, admin_after_cb) != 0) {
		jc__cache_flush_write(d, j->flush);
		jc__srv_conn_unref(c);
		jc__admin_req_clear(&j->req);
		free(j);
		jc__srv_conn_send_error(c, JC_EBUSY, "cannot queue the admin command");
		jc__srv_conn_done(c);
	}
}

/* --- the main loop: requests handed to it ---------------------------------- */

/* A serving thread's request, on the main loop: a proxy of its connection
 * takes it through the request path (cache.c) or the admin commands. */
void jc__srv_main_async_cb(uv_async_t *a)
{
	struct jc_daemon *d = a->data;
	for (struct msg *m = jc__srv_mq_take(d->server->mainq), *next; m; m = next) {
		next = m->next;
		struct jc_conn *p = calloc(1, sizeof(*p));
		if (!p) { /* the client cannot be answered: closed on its thread */
			struct jc_srv *s = m->conn->srv;
			jc__req_clear(&m->req);
			m->kind = MSG_CLOSE;
			if (jc__srv_mq_post(&s->q, m) != 0)
				jc__srv_msg_free(m);
			continue;
		}
		p->d = d;
		p->refs = 1; /* the request's, until it is answered (jc__srv_proxy_end) */
		p->hello = p->busy = 1;
		p->start_fd = -1;
		p->real = m->conn;
		p->peer_fd = m->fd;
		p->admin = m->admin;
		p->uid = m->conn->uid;
		p->gid = m->conn->gid;
		p->pid = m->conn->pid;
		m->conn = NULL;
		m->fd = -1;
		jc__budget_release(m->bud, m->charged); /* the request path charges its own */
		m->charged = 0;
		if (m->kind == MSG_COMPILE)
			jc__cache_request(d, p, &m->req);
		else
			handle_admin(p, m->buf.data, m->buf.len);
		jc__srv_msg_free(m);
	}
}
