/* SPDX-License-Identifier: MIT */
/*
 * The Unix socket server: accepts clients, reassembles frames, answers the
 * handshake, hands COMPILE requests to the cache and ADMIN commands to the
 * thread pool, and sends replies (a RESULT for a hit carries the object's
 * read-only descriptor with SCM_RIGHTS instead of its bytes).
 *
 * Limits per connection: one request at a time (one not answered at once
 * pauses reading until it is, and the next is read only once the answer has
 * left our write queue, so a client that does not read cannot make us queue
 * more); a frame before the handshake is at most JC_HELLO_FRAME_MAX bytes and
 * the handshake must come within --handshake-timeout; an answer not taken
 * within --write-timeout is dropped with its connection; a connection is
 * closed when no whole request arrives within --idle-timeout; a queued
 * compile whose clients all closed their end is dropped (conn_gone, asked
 * through jc__server_conn_ops).
 *
 * Limits for all: at most --max-connections connections at once, and
 * --max-connections-per-uid for each uid other than root and the daemon's
 * own (the next one is told so, ERROR JC_EBUSY, and closed). Request and reply
 * buffers share --buffer-budget bytes (d->buffers): each connection's first
 * JC_FRAMER_BASE bytes of request buffer are not charged (so small requests
 * are always read), everything past them is, and so is every queued reply. A
 * request that would pass it is refused (JC_EBUSY) and its connection
 * closed; a reply larger than JC_FRAMER_BASE that would pass it is replaced
 * by such an error before any of it is sent. A compile request's bytes stay
 * charged while it is queued or compiled (flight.c, jc__flight_start), which
 * refuses it when they would pass the budget. So the daemon's buffers never
 * exceed the budget plus JC_FRAMER_BASE per connection (or one request or
 * reply larger than the whole budget, let through while nothing else is
 * buffered).
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/watch.h"
#include "config.h"
#include "core/admin.h"
#include "core/confine.h"
#include "daemon/daemon.h"
#include "daemon/framer.h"
#include "jitcache/jitcache.h"
#include "proto/io.h"

/* Largest frame accepted before the handshake (a HELLO is a few bytes). */
#define JC_HELLO_FRAME_MAX 4096

struct jc_conn {
	uv_pipe_t pipe;
	uv_timer_t idle;
	struct jc_daemon *d;
	struct jc_framer in;
	struct jc_conn *next, **pprev; /* d->conns list */
	int refs;                      /* the handles + waiters holding it */
	int closing;
	int hello;                     /* handshake done */
	int busy;                      /* a request is being answered */
	int replied;                   /* conn_frame_cb answered the frame it refused */
	int paused;                    /* reading stopped until it is */
	int drain_wait;                /* answered: read again once the write queue drains */
	int pending_timer;             /* which timeout the timer runs for (enum conn_wait) */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	jc_conn_sink_fn sink;          /* an internal connection's answers go here */
	void *sink_ctx;
};

static void conn_send_result(struct jc_conn *c, const struct jc_res *res, int objfd);
static void conn_send_error(struct jc_conn *c, int code, const char *message);
static void conn_done(struct jc_conn *c);
static void conn_ref(struct jc_conn *c);
static void conn_unref(struct jc_conn *c);
static int conn_gone(struct jc_conn *c);


struct write_req {
	uv_write_t req;
	struct jc_buf buf;
	struct jc_conn *conn;
	size_t charged;                /* bytes charged to d->buffers */
};

/* Replies up to this size are never refused for the budget (errors, hits by
 * descriptor, handshakes), though they are charged. */
#define REPLY_FREE_MAX JC_FRAMER_BASE

static void conn_close(struct jc_conn *c);
static void idle_arm(struct jc_conn *c);
static void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void conn_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf);

/* The allow-list (empty: every uid the socket's mode lets in). */
static int uid_allowed(const struct jc_daemon *d, uid_t uid)
{
	if (d->cfg.n_allow_uids == 0 || uid == 0 || uid == geteuid())
		return 1;
	for (size_t i = 0; i < d->cfg.n_allow_uids; i++)
		if (d->cfg.allow_uids[i] == uid)
			return 1;
	return 0;
}

/* Is gid among the peer's supplementary groups (SO_PEERGROUPS, Linux 4.13)?
 * The kernel captured them at connect(), like SO_PEERCRED's uid and gid. */
static int peer_in_group(const struct jc_conn *c, gid_t gid)
{
	uv_os_fd_t fd;
	gid_t groups[256];
	socklen_t len = sizeof(groups);
	if (uv_fileno((const uv_handle_t *)&c->pipe, &fd) != 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0)
		return 0; /* unknown (or more than 256 groups): not a member */
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}

/* Admins see and change every entry: root, the daemon's own uid, or a
 * member (primary or supplementary) of the admin group. */
static int is_admin(const struct jc_conn *c)
{
	gid_t admin = c->d->cfg.admin_gid;
	if (c->uid == 0 || c->uid == geteuid())
		return 1;
	return admin != (gid_t)-1 && (c->gid == admin || peer_in_group(c, admin));
}

static uid_t conn_uid(const struct jc_conn *c)
{
	return c->uid;
}

static pid_t conn_pid(const struct jc_conn *c)
{
	return c->pid;
}

static struct jc_conn *conn_internal(struct jc_daemon *d, const struct jc_conn *like, uid_t uid,
				  jc_conn_sink_fn sink, void *ctx)
{
	struct jc_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->d = d;
	c->refs = 1;
	c->hello = 1;
	c->busy = 1;
	c->uid = like ? like->uid : uid;
	c->gid = like ? like->gid : (gid_t)-1;
	c->pid = like ? like->pid : getpid();
	c->sink = sink;
	c->sink_ctx = ctx;
	return c;
}

static void conn_ref(struct jc_conn *c)
{
	c->refs++;
}

static void conn_unref(struct jc_conn *c)
{
	if (--c->refs == 0) {
		jc__framer_free(&c->in);
		free(c);
	}
}

static void conn_handle_closed(uv_handle_t *h)
{
	conn_unref(h->data);
}

static void conn_close(struct jc_conn *c)
{
	if (c->closing)
		return;
	c->closing = 1;
	if (c->pprev) {
		*c->pprev = c->next;
		if (c->next)
			c->next->pprev = c->pprev;
		c->pprev = NULL;
		c->d->n_conns--;
		if (c->d->n_conns == 0)
			c->d->idle_since_ns = jc__now_ns();
	}
	uv_close((uv_handle_t *)&c->pipe, conn_handle_closed);
	uv_close((uv_handle_t *)&c->idle, conn_handle_closed);
}

static void write_cb(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	struct jc_conn *c = w->conn;
	c->d->buffers.used -= w->charged;
	if (status < 0 && !c->closing)
		conn_close(c);
	if (!c->closing && c->drain_wait &&
	    uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) == 0) {
		c->drain_wait = 0; /* the answer is taken: read the next request */
		idle_arm(c);
		if (c->paused && !c->busy) {
			c->paused = 0;
			uv_read_start((uv_stream_t *)&c->pipe, conn_alloc_cb, conn_read_cb);
		}
	}
	conn_unref(c);
	jc__buf_free(&w->buf);
	free(w);
}

static void conn_write(struct jc_conn *c, struct jc_buf *buf, size_t off);

/* Whether a reply of len bytes may be queued now. One larger than
 * REPLY_FREE_MAX that would pass the budget is not: the client is sent an
 * EBUSY error instead (logged, counted) and the caller drops the reply. */
static int reply_fits(struct jc_conn *c, size_t len)
{
	struct jc_budget *bud = &c->d->buffers;
	/* (A reply larger than the whole budget goes when nothing else is queued.) */
	if (len <= REPLY_FREE_MAX || bud->used + len <= bud->max || bud->used == 0)
		return 1;
	char msg[200];
	snprintf(msg, sizeof(msg), "the daemon's reply buffers are full (%zu of %zu bytes, "
		 "--buffer-budget) and this reply takes %zu; try again later", bud->used, bud->max,
		 len);
	jc_log_warn(NET, "uid %d pid %d: reply of %zu bytes refused: buffer budget full",
		    (int)c->uid, (int)c->pid, len);
	jc__count(&c->d->cache->counters, JC_CTR_busy_refusals, 1);
	conn_send_error(c, JC_EBUSY, msg);
	return 0;
}

/* Queues buf's bytes from off on (taking ownership of buf), charging its
 * allocation to the buffer budget. A whole reply (off 0) that does not fit
 * is replaced by an error (reply_fits); the rest of one partly sent was
 * checked as a whole before. */
static void conn_write(struct jc_conn *c, struct jc_buf *buf, size_t off)
{
	struct jc_budget *bud = &c->d->buffers;
	if (off == 0 && !reply_fits(c, buf->len)) {
		jc__buf_free(buf);
		return;
	}
	struct write_req *w = calloc(1, sizeof(*w));
	if (!w) {
		jc__buf_free(buf);
		conn_close(c);
		return;
	}
	w->buf = *buf;
	w->conn = c;
	w->charged = buf->cap;
	jc__budget_charge(bud, w->charged);
	conn_ref(c);
	uv_buf_t ub = uv_buf_init((char *)w->buf.data + off, (unsigned)(w->buf.len - off));
	if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &ub, 1, write_cb) != 0) {
		bud->used -= w->charged;
		conn_unref(c);
		jc__buf_free(&w->buf);
		free(w);
		conn_close(c);
	}
}

/*
 * Sends a frame with a descriptor beside it. libuv passes only its own
 * handles, so this uses sendmsg directly when nothing is queued on the
 * stream; returns the bytes sent (the descriptor goes with the first byte),
 * or -1 when the caller must fall back to sending the bytes inline.
 */
static ssize_t send_with_fd(struct jc_conn *c, const struct jc_buf *b, int fd)
{
	uv_os_fd_t sock;
	if (uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) != 0 ||
	    uv_fileno((uv_handle_t *)&c->pipe, &sock) != 0)
		return -1;
	union {
		struct cmsghdr hdr;
		char space[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct iovec iov = {.iov_base = b->data, .iov_len = b->len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.space, .msg_controllen = sizeof(ctl.space)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n;
}

static void conn_send_result(struct jc_conn *c, const struct jc_res *res, int objfd)
{
	struct jc_buf b = {0};
	if (c->sink) {
		c->sink(c->sink_ctx, res, objfd, 0, NULL);
		return;
	}
	if (c->closing) {
		if (objfd >= 0)
			close(objfd);
		return;
	}
	if (objfd >= 0) {
		/* Served by descriptor: the frame carries no bytes. */
		struct jc_res view = *res;
		view.data = NULL;
		int rc = jc__encode_res(&b, &view);
		if (rc == 0 && !reply_fits(c, b.len)) {
			jc__buf_free(&b);
			close(objfd);
			return;
		}
		if (rc == 0) {
			ssize_t n = send_with_fd(c, &b, objfd);
			if (n == (ssize_t)b.len) {
				jc__buf_free(&b);
				close(objfd);
				return;
			}
			if (n > 0) {
				conn_write(c, &b, (size_t)n);
				close(objfd);
				return;
			}
		}
		/* Could not pass the descriptor now: send the bytes inline. */
		jc__buf_reset(&b);
		struct jc_res inl = *res;
		inl.data = malloc(res->size ? res->size : 1);
		ssize_t got = inl.data ? pread(objfd, inl.data, res->size, 0) : -1;
		close(objfd);
		rc = got == (ssize_t)res->size ? jc__encode_res(&b, &inl) : JC_EIO;
		free(inl.data);
		if (rc != 0) {
			jc__buf_free(&b);
			conn_send_error(c, rc, "could not read the cached object");
			return;
		}
		conn_write(c, &b, 0);
		return;
	}
	if (jc__encode_res(&b, res) != 0) {
		jc__buf_free(&b);
		conn_send_error(c, JC_ENOMEM, "could not encode the result");
		return;
	}
	conn_write(c, &b, 0);
}

static void conn_send_error(struct jc_conn *c, int code, const char *message)
{
	struct jc_buf b = {0};
	if (c->sink) {
		c->sink(c->sink_ctx, NULL, -1, code, message);
		return;
	}
	if (c->closing)
		return;
	if (jc__encode_error(&b, code, message) != 0) {
		jc__buf_free(&b);
		conn_close(c);
		return;
	}
	conn_write(c, &b, 0);
}

/* What a connection's timer waits for. */
enum conn_wait { WAIT_HELLO, WAIT_ANSWER_TAKEN, WAIT_REQUEST };

/* Seconds the timer runs for w (0: none); a handshake gets no longer than
 * a request would. */
static int wait_s(const struct jc_config *cfg, int w)
{
	if (w == WAIT_HELLO)
		return cfg->idle_timeout_s > 0 && cfg->idle_timeout_s < cfg->handshake_timeout_s
			       ? cfg->idle_timeout_s : cfg->handshake_timeout_s;
	return w == WAIT_ANSWER_TAKEN ? cfg->write_timeout_s : cfg->idle_timeout_s;
}

static void idle_cb(uv_timer_t *t)
{
	struct jc_conn *c = t->data;
	const char *what = c->pending_timer == WAIT_HELLO ? "no handshake within --handshake-timeout"
			   : c->pending_timer == WAIT_ANSWER_TAKEN
				   ? "answer not taken within --write-timeout"
			   : c->in.buf.len ? "request not complete within --idle-timeout"
					   : "no request within --idle-timeout";
	jc_log_info(NET, "closing connection of uid %d pid %d: %s (%d s)", (int)c->uid,
		    (int)c->pid, what, wait_s(&c->d->cfg, c->pending_timer));
	if (c->pending_timer == WAIT_ANSWER_TAKEN)
		jc__count(&c->d->cache->counters, JC_CTR_busy_refusals, 1);
	conn_close(c);
}

/* (Re)starts the connection's timer for what it now waits for. */
static void idle_arm(struct jc_conn *c)
{
	c->pending_timer = !c->hello ? WAIT_HELLO : c->drain_wait ? WAIT_ANSWER_TAKEN : WAIT_REQUEST;
	int secs = wait_s(&c->d->cfg, c->pending_timer);
	if (c->closing)
		return;
	if (secs > 0)
		uv_timer_start(&c->idle, idle_cb, (uint64_t)secs * 1000, 0);
	else
		uv_timer_stop(&c->idle);
}

static void conn_done(struct jc_conn *c)
{
	c->busy = 0;
	if (c->closing || c->sink)
		return;
	/* An answer still in our write queue: read no further request until the
	 * client has taken it (write_cb resumes), so that one which does not
	 * read cannot make us queue more; it has --write-timeout to take it. */
	c->drain_wait = uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) != 0;
	idle_arm(c);
	if (c->drain_wait && !c->paused) {
		c->paused = 1;
		uv_read_stop((uv_stream_t *)&c->pipe);
	} else if (!c->drain_wait && c->paused) {
		c->paused = 0;
		uv_read_start((uv_stream_t *)&c->pipe, conn_alloc_cb, conn_read_cb);
	}
}

static int conn_gone(struct jc_conn *c)
{
	uv_os_fd_t fd;
	if (c->sink)
		return 0;
	if (!c->closing) {
		/* POLLHUP: both directions shut, the peer's socket is closed (a
		 * client that only shut down its sending side still reads). */
		struct pollfd p = {.events = POLLIN};
		if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0 ||
		    (p.fd = fd, poll(&p, 1, 0) != 1) || !(p.revents & (POLLHUP | POLLERR)))
			return 0;
		conn_close(c);
	}
	return 1;
}

/* After a request was handed on: stop reading until it is answered (a hit
 * is answered before this, and then reading goes on without a pause). */
static void pause_if_busy(struct jc_conn *c)
{
	if (c->busy && !c->closing) {
		c->paused = 1;
		uv_read_stop((uv_stream_t *)&c->pipe);
	}
}

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
	jc__count(&d->cache->counters, JC_CTR_corrupt_objects, j->env.corrupt); /* verify, as offline */
	if (j->env.zero_counters) {
		jc__counters_zero(&d->cache->counters);
		memset(&d->hit_latency, 0, sizeof(d->hit_latency));
		d->hit_latency_since = (uint64_t)time(NULL);
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
		jc_log(!ok ? LOG_WARNING : dry ? LOG_INFO : LOG_NOTICE,
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
		conn_write(c, &b, 0);
	else
		jc__buf_free(&b);
	conn_done(c);
	conn_unref(c);
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
		conn_write(c, &b, 0);
	else
		jc__buf_free(&b);
	conn_done(c);
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
	conn_unref(c);
}

static void loop_warm(struct jc_conn *c, const struct jc_admin_req *req)
{
	struct jc_daemon *d = c->d;
	struct jc_admin_reply reply = {0};
	const char *top_s = jc__admin_arg(req, "top"), *since_s = jc__admin_arg(req, "since");
	char *end = NULL;
	unsigned long long top = top_s ? strtoull(top_s, &end, 10) : 0;
	long long since = since_s ? strtoll(since_s, NULL, 10) : 0;
	if (jc__admin_check(req, &reply) == 0 && top_s && (!*top_s || *end || *top_s == '-')) {
		reply.status = JC_EINVAL;
		reply.message = strdup("bad --top: a count");
	}
	if (reply.status != 0) {
		loop_reply(c, &reply);
		jc__admin_reply_clear(&reply);
		return;
	}
	conn_ref(c);
	if (jc__admin_arg(req, "status")) {
		warm_reply(c, 0);
		return;
	}
	jc_log_notice(ADMIN, "warm by uid %d pid %d", (int)c->uid, (int)c->pid);
	jc__rewarm_start(d, top, since > 0 ? jc__wall_s() - since : 0, "jitcachectl warm",
			 warm_reply, c);
}

static void handle_admin(struct jc_conn *c, const uint8_t *payload, size_t len)
{
	struct jc_daemon *d = c->d;
	struct admin_job *j = calloc(1, sizeof(*j));
	int rc = j ? jc__decode_admin(payload, len, &j->req) : JC_ENOMEM;
	char msg[4300] = "bad admin request";
	int admin = rc == 0 && is_admin(c);
	if (rc == 0 && !admin && (jc__admin_flags(&j->req) & JC_ADMIN_PRIVILEGED)) {
		rc = JC_EDENIED;
		const char *opt = jc__admin_privileged_option(&j->req);
		snprintf(msg, sizeof(msg), "'%.32s%s%s' is limited to root, uid %d and the admin group "
			 "(admin-group); uid %d may not run it (every user may run ls, show, purge "
			 "and stats on their own entries)", j->req.command, *opt ? " --" : "", opt,
			 (int)geteuid(), (int)c->uid);
		jc_log_warn(ADMIN, "refused '%.32s' to uid %d gid %d pid %d", j->req.command,
			    (int)c->uid, (int)c->gid, (int)c->pid);
	}
	if (rc != 0) {
		if (j)
			jc__admin_req_clear(&j->req);
		free(j);
		jc__count(&d->cache->counters, JC_CTR_bad_requests, 1);
		conn_send_error(c, rc, msg);
		conn_done(c);
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
			conn_write(c, &b, 0);
		else
			jc__buf_free(&b);
		jc__admin_req_clear(&j->req);
		free(j);
		conn_done(c);
		uv_kill(getpid(), SIGTERM);
		return;
	}
	j->conn = c;
	j->env.uid = (uint32_t)c->uid;
	j->env.all_users = admin;
	j->env.user_max_size = d->cfg.user_max_size;
	j->env.cd = d->cache;
	j->env.tc = d->tc;
	j->env.policy = &d->policy;
	j->env.confinement = jc__confine_name(d->confinement);
	j->env.cache_identity = d->cache_identity;
	j->env.keep_requests = d->cfg.keep_requests;
	struct jc_watch_stats ws;
	jc__cache_watch_counts(d, &ws);
	j->env.watch_trees = ws.trees;
	j->env.watch_count = ws.watches;
	j->env.watch_bytes = ws.bytes;
	memcpy(j->env.counters, d->cache->counters.v, sizeof(j->env.counters));
	j->env.uptime_s = (int64_t)((jc__now_ns() - d->start_ns) / 1000000000u);
	j->env.hit_samples = d->hit_latency.count;
	j->env.hit_sum_ns = d->hit_latency.sum_ns;
	j->env.hit_latency_since = (int64_t)d->hit_latency_since;
	j->env.hit_p50_ns = jc__latency_quantile_ns(&d->hit_latency, 0.5);
	j->env.hit_p99_ns = jc__latency_quantile_ns(&d->hit_latency, 0.99);
	j->env.max_size = d->cfg.max_size;
	j->env.daemon_pid = (int64_t)getpid();
	j->env.socket_path = d->cfg.socket_path;
	j->work.data = j;
	j->flush = jc__cache_flush_take(d);
	conn_ref(c);
	if (uv_queue_work(d->loop, &j->work, admin_work_cb, admin_after_cb) != 0) {
		jc__cache_flush_write(d, j->flush);
		conn_unref(c);
		jc__admin_req_clear(&j->req);
		free(j);
		conn_send_error(c, JC_EBUSY, "cannot queue the admin command");
		conn_done(c);
	}
}

/* --- frames from clients -------------------------------------------------- */

static int conn_frame_cb(void *ctx, uint16_t type, const uint8_t *payload, size_t len)
{
	struct jc_conn *c = ctx;
	struct jc_daemon *d = c->d;
	if (!c->hello) {
		struct jc_hello h = {0};
		char msg[4200] = "expected HELLO";
		int rc = type == JC_MSG_HELLO ? jc__decode_hello_ex(payload, len, &h) : JC_EPROTO;
		uint32_t version = rc == 0 ? h.version : 0;
		if (rc == 0 && (version < 1 || version > JC_PROTO_VERSION)) {
			rc = JC_EVERSION;
			snprintf(msg, sizeof(msg), "protocol version not supported");
		} else if (rc == 0 && h.dir_ino && (h.dir_dev != d->cache->dev || h.dir_ino != d->cache->ino)) {
			rc = JC_EINVAL;
			snprintf(msg, sizeof(msg), "this jitcached (pid %d) serves the cache directory %s, "
				 "not the one the client named (device %llu inode %llu)", (int)getpid(),
				 d->cfg.cache_dir, (unsigned long long)h.dir_dev,
				 (unsigned long long)h.dir_ino);
		}
		jc__hello_clear(&h);
		if (rc != 0) {
			jc__count(&d->cache->counters, JC_CTR_bad_requests, 1);
			conn_send_error(c, rc, msg);
			c->replied = 1;
			return rc;
		}
		c->hello = 1;
		c->in.max = JC_FRAME_MAX;
		idle_arm(c);
		struct jc_buf b = {0};
		/* Version 1 clients get what version 1 has. */
		struct jc_hello ok = {.version = version, .name = JC_VERSION};
		if (version >= 2) {
			ok.cache_dir = d->cfg.cache_dir;
			ok.pid = (uint32_t)getpid();
			ok.toolkit_include = (char *)d->tc->toolkit_include;
		}
		if (version >= 3) { /* what a client picks a target by: no round trip for it */
			ok.archs = (char *)d->tc->supported_archs;
			ok.nvrtc_version = (char *)d->tc->nvrtc_version;
		}
		if (jc__encode_hello_ex(&b, JC_MSG_HELLO_OK, &ok) != 0) {
			jc__buf_free(&b);
			return JC_ENOMEM;
		}
		conn_write(c, &b, 0);
		return 0;
	}
	if (c->busy || c->drain_wait) {
		conn_send_error(c, JC_EPROTO, "one request at a time per connection");
		c->replied = 1;
		return JC_EPROTO;
	}
	c->busy = 1;
	uv_timer_stop(&c->idle);
	if (type == JC_MSG_COMPILE) {
		struct jc_req req = {0};
		int rc = jc__decode_req(payload, len, &req);
		if (rc != 0) {
			jc__count(&d->cache->counters, JC_CTR_bad_requests, 1);
			conn_send_error(c, rc, "malformed COMPILE request");
			c->replied = 1;
			return rc;
		}
		jc__cache_request(d, c, &req);
		pause_if_busy(c);
		return 0;
	}
	if (type == JC_MSG_ADMIN) {
		handle_admin(c, payload, len);
		pause_if_busy(c);
		return 0;
	}
	jc__count(&d->cache->counters, JC_CTR_bad_requests, 1);
	conn_send_error(c, JC_EPROTO, "unexpected message type");
	c->replied = 1;
	return JC_EPROTO;
}

static void conn_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct jc_conn *c = h->data;
	jc__framer_alloc(&c->in, hint, buf);
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
	struct jc_conn *c = req->data;
	(void)status;
	free(req);
	conn_close(c);
	conn_unref(c);
}

/* Ends a connection after its queued replies (an error, say) are written. */
static void conn_end(struct jc_conn *c)
{
	uv_shutdown_t *sd = calloc(1, sizeof(*sd));
	uv_read_stop((uv_stream_t *)&c->pipe);
	uv_timer_stop(&c->idle);
	if (sd) {
		sd->data = c;
		conn_ref(c);
		if (uv_shutdown(sd, (uv_stream_t *)&c->pipe, shutdown_cb) == 0)
			return;
		conn_unref(c);
		free(sd);
	}
	conn_close(c);
}

/*
 * Busy polling: for POLL_NS after the last bytes read from a client the loop
 * does not sleep (an active idle handle makes libuv poll with a zero
 * timeout), so the next request of a client that sends them one after the
 * other finds the daemon awake: on a virtual machine, waking a daemon asleep
 * on an idle vCPU costs more than a hit. Each turn yields the CPU to any
 * other runnable task, such as that very client (polling for its answer too,
 * see client.c) on the same CPU. After POLL_NS of silence the loop sleeps.
 * The first turn after a request opens ahead the descriptors its hits took
 * (memcache.c), so that no hit waits for an open.
 */
#define POLL_NS 50000

static void poll_idle_cb(uv_idle_t *h)
{
	struct jc_daemon *d = h->data;
	jc__memcache_refill(d); /* the answers of the last turn are out */
	if (jc__now_ns() >= d->poll_until_ns)
		uv_idle_stop(h);
	else
		sched_yield();
}

static void poll_awhile(struct jc_daemon *d)
{
	d->poll_until_ns = jc__now_ns() + POLL_NS;
	if (!uv_is_active((uv_handle_t *)&d->poll_idle))
		uv_idle_start(&d->poll_idle, poll_idle_cb);
}

static void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct jc_conn *c = s->data;
	(void)buf;
	if (nread == UV_ENOBUFS) {
		struct jc_budget *bud = &c->d->buffers;
		char msg[200];
		snprintf(msg, sizeof(msg), "the daemon's request buffers are full (%zu of %zu bytes, "
			 "--buffer-budget); try again later", bud->used, bud->max);
		jc_log_warn(NET, "uid %d pid %d: request refused: buffer budget full (%zu of %zu "
			    "bytes)", (int)c->uid, (int)c->pid, bud->used, bud->max);
		jc__count(&c->d->cache->counters, JC_CTR_busy_refusals, 1);
		conn_send_error(c, JC_EBUSY, msg);
		jc__framer_free(&c->in);
		conn_end(c);
		return;
	}
	if (nread < 0) {
		conn_close(c);
		return;
	}
	poll_awhile(c->d);
	c->replied = 0;
	int rc = jc__framer_feed(&c->in, (size_t)nread, conn_frame_cb, c);
	if (rc == 0)
		return;
	if (!c->replied) {
		/* The framer itself refused the bytes: say why before closing. */
		char msg[128] = "malformed frame header";
		if (rc == JC_ETOOBIG)
			snprintf(msg, sizeof(msg), "frame larger than the limit (%zu bytes)", c->in.max);
		jc__count(&c->d->cache->counters, JC_CTR_bad_requests, 1);
		conn_send_error(c, rc, msg);
	}
	conn_end(c);
}

static void peer_creds(struct jc_conn *c)
{
	uv_os_fd_t fd;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0 &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		c->uid = cred.uid;
		c->gid = cred.gid;
		c->pid = cred.pid;
	} else {
		c->uid = (uid_t)-1;
		c->gid = (gid_t)-1;
		c->pid = -1;
	}
}

/* Open connections of uid (a walk: accepts are rare beside requests). */
static int conns_of(const struct jc_daemon *d, uid_t uid)
{
	int n = 0;
	for (const struct jc_conn *c = d->conns; c; c = c->next)
		n += c->uid == uid;
	return n;
}

static void connection_cb(uv_stream_t *server, int status)
{
	struct jc_daemon *d = server->data;
	if (status < 0) {
		jc_log_warn(NET, "accept: %s", uv_strerror(status));
		return;
	}
	struct jc_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->d = d;
	c->in.max = JC_HELLO_FRAME_MAX;
	c->in.budget = &d->buffers;
	uv_pipe_init(d->loop, &c->pipe, 0);
	uv_timer_init(d->loop, &c->idle);
	c->pipe.data = c->idle.data = c;
	c->refs = 2;
	if (uv_accept(server, (uv_stream_t *)&c->pipe) != 0) {
		c->closing = 1;
		uv_close((uv_handle_t *)&c->pipe, conn_handle_closed);
		uv_close((uv_handle_t *)&c->idle, conn_handle_closed);
		return;
	}
	peer_creds(c);
	char why[160] = "";
	int code = 0;
	if (!uid_allowed(d, c->uid)) {
		code = JC_EDENIED;
		snprintf(why, sizeof(why), "uid %d is not allowed to use this jitcached (allow-uids)",
			 (int)c->uid);
	} else if (d->n_conns >= d->cfg.max_connections) {
		code = JC_EBUSY;
		snprintf(why, sizeof(why), "too many connections (%d, --max-connections); try again later",
			 d->n_conns);
	} else if (c->uid != 0 && c->uid != geteuid() &&
		   conns_of(d, c->uid) >= d->cfg.max_connections_per_uid) {
		code = JC_EBUSY;
		snprintf(why, sizeof(why), "uid %d has %d connections open (--max-connections-per-uid); "
			 "try again later", (int)c->uid, d->cfg.max_connections_per_uid);
	}
	if (code == JC_EBUSY)
		jc__count(&d->cache->counters, JC_CTR_busy_refusals, 1);
	if (code) {
		/* Said in answer to the client's HELLO, which it reads first. */
		jc_log_warn(NET, "refused connection of uid %d gid %d pid %d: %s", (int)c->uid,
			    (int)c->gid, (int)c->pid, why);
		conn_send_error(c, code, why);
		conn_end(c);
		return;
	}
	jc_log_debug(NET, "client uid %d gid %d pid %d connected", (int)c->uid, (int)c->gid,
		     (int)c->pid);
	d->n_conns++;
	c->next = d->conns;
	if (d->conns)
		d->conns->pprev = &c->next;
	c->pprev = &d->conns;
	d->conns = c;
	idle_arm(c);
	uv_read_start((uv_stream_t *)&c->pipe, conn_alloc_cb, conn_read_cb);
}

/*
 * Another daemon answering on path? Then refuse, naming it (its pid and
 * directory, from its HELLO_OK) in who; a socket file nobody answers on is
 * stale and replaced. Returns 1 when in use.
 */
static int socket_in_use(const char *path, char *who, size_t wholen)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (fd < 0)
		return 0;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int in_use = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	snprintf(who, wholen, "a process that does not answer as jitcached does");
	struct jc_buf b = {0};
	struct jc_hello h = {0};
	uint16_t type;
	if (in_use && jc__encode_hello(&b, JC_MSG_HELLO, JC_PROTO_VERSION, "jitcached " JC_VERSION) == 0 &&
	    jc__io_write_all(fd, b.data, b.len) == 0 && jc__io_read_frame(fd, &b, &type, NULL, 1000) == 0 &&
	    type == JC_MSG_HELLO_OK && jc__decode_hello_ex(b.data, b.len, &h) == 0)
		snprintf(who, wholen, "jitcached %s pid %u serving %s", h.name, h.pid,
			 h.cache_dir ? h.cache_dir : "?");
	jc__hello_clear(&h);
	jc__buf_free(&b);
	close(fd);
	return in_use;
}

int jc__server_bind(const struct jc_config *cfg, int *fd, char *err, size_t errlen)
{
	const char *path = cfg->socket_path;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char who[4200];
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return JC_EINVAL;
	}
	if (socket_in_use(path, who, sizeof(who))) {
		snprintf(err, errlen, "%s already answers on %s: stop it first (jitcachectl "
			 "--socket %s stop), or give this daemon another --socket", who, path, path);
		return JC_ELOCKED;
	}
	unlink(path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	mode_t old = umask(cfg->group_shared ? 0117 : 0177);
	int rc = s >= 0 ? bind(s, (struct sockaddr *)&sa, sizeof(sa)) : -1;
	umask(old);
	if (rc != 0) {
		snprintf(err, errlen, "cannot bind %s: %s", path, strerror(errno));
		if (s >= 0)
			close(s);
		return JC_EIO;
	}
	*fd = s;
	return 0;
}

int jc__server_listen(struct jc_daemon *d, int bound_fd, char *err, size_t errlen)
{
	/* Both handles exist from here on, so that jc__server_shutdown can
	 * close them whatever fails below. */
	uv_idle_init(d->loop, &d->poll_idle);
	d->poll_idle.data = d;
	int rc = uv_pipe_init(d->loop, &d->listener, 0);
	d->listener.data = d;
	if (rc == 0 && bound_fd < 0) {
		int e = jc__server_bind(&d->cfg, &bound_fd, err, errlen);
		if (e != 0)
			return e;
	}
	if (rc == 0) {
		rc = uv_pipe_open(&d->listener, bound_fd);
		if (rc != 0)
			snprintf(err, errlen, "cannot use the listening socket: %s", uv_strerror(rc));
	}
	if (rc == 0) {
		rc = uv_listen((uv_stream_t *)&d->listener, 256, connection_cb);
		if (rc != 0)
			snprintf(err, errlen, "cannot listen: %s", uv_strerror(rc));
	}
	return rc == 0 ? 0 : JC_EIO;
}

void jc__server_shutdown(struct jc_daemon *d)
{
	if (!uv_is_closing((uv_handle_t *)&d->listener))
		uv_close((uv_handle_t *)&d->listener, NULL);
	if (!uv_is_closing((uv_handle_t *)&d->poll_idle))
		uv_close((uv_handle_t *)&d->poll_idle, NULL);
	/* Each connection closes once what is queued to it (a "shutting down"
	 * error, say) is written. */
	for (struct jc_conn *c = d->conns, *next; c; c = next) {
		next = c->next;
		conn_end(c);
	}
}

const struct jc_conn_ops jc__server_conn_ops = {
	.send_result = conn_send_result,
	.send_error = conn_send_error,
	.done = conn_done,
	.ref = conn_ref,
	.unref = conn_unref,
	.gone = conn_gone,
	.uid = conn_uid,
	.pid = conn_pid,
	.internal = conn_internal,
};
