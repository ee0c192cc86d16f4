/* SPDX-License-Identifier: MIT */
/*
 * The Unix socket server: accepts clients, reassembles frames, answers the
 * handshake, hands COMPILE requests to the cache and ADMIN commands to the
 * thread pool, and sends replies (a RESULT for a hit carries the object's
 * read-only descriptor with SCM_RIGHTS instead of its bytes).
 *
 * Threads: --serve-threads serving threads, each with a loop of its own,
 * accept connections in turn (round-robin, srv_listen_cb), check the limits
 * below, read their frames, answer their handshakes and write their
 * replies. A hit is answered there and then (jc__cache_try_hit:
 * the thread's memory cache and SQLite reader, descriptors opened ahead);
 * every other request (a miss, a single flight, a client-read tree, a
 * rejected object, an admin command) is handed to the main loop with a
 * message, where a proxy connection stands for the client: what the request
 * path sends to the proxy goes back to the serving thread as frames
 * (MSG_REPLY, MSG_DONE), in order. docs/ARCHITECTURE.md, "Threads".
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
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
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

struct jc_srv;

struct jc_conn {
	uv_pipe_t pipe;
	uv_timer_t idle;
	struct jc_daemon *d;
	struct jc_srv *srv; /* the serving thread whose loop has its handles */
	struct jc_framer in;
	struct jc_conn *next, **pprev;	/* d->conns list (d->conns_lock) */
	struct jc_conn *snext, **sprev; /* srv's list (its thread) */
	int refs; /* the handles, waiters, messages, proxies holding it (atomic) */
	int closing;
	int hello;	   /* handshake done */
	int busy;	   /* a request is being answered */
	int replied;	   /* conn_frame_cb answered the frame it refused */
	int paused;	   /* reading stopped until it is */
	int drain_wait;	   /* answered: read again once the write queue drains */
	int pending_timer; /* which timeout the timer runs for (enum conn_wait) */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	jc_conn_sink_fn sink; /* an internal connection's answers go here */
	void *sink_ctx;
	int start_fd; /* accepted, until its serving thread opens it */
	int refuse;   /* refused at accept: this code, told in answer to HELLO */
	char refuse_why[160];
	/* A proxy: the main loop's stand-in for a serving thread's connection
	 * while the loop handles its request (main_async_cb). */
	struct jc_conn *real; /* that connection (a reference) */
	int peer_fd;	      /* a duplicate of its socket, for conn_gone; -1: none */
	int admin;	      /* its peer is an admin (asked on its thread) */
	int ended;	      /* answered or gone: the request's reference is dropped */
};

/* Messages between the main loop and the serving threads. */
enum msg_kind {
	MSG_REPLY,   /* to a thread: write buf (a frame) to conn, with fd when >= 0 */
	MSG_DONE,    /* to a thread: conn's request is answered (conn_done) */
	MSG_CLOSE,   /* to a thread: close conn (its client is gone) */
	MSG_STOP,    /* to a thread: end its connections and stop */
	MSG_WARM,    /* to a thread: read key's row, open its descriptors ahead */
	MSG_LISTEN,  /* to a thread: poll the listening socket (jc__server_accept) */
	MSG_COMPILE, /* to the loop: conn's request req */
	MSG_ADMIN,   /* to the loop: conn's ADMIN frame, payload in buf */
};

struct msg {
	struct msg *next;
	int kind;
	struct jc_conn *conn;  /* a reference; NULL for MSG_STOP, MSG_WARM, MSG_LISTEN */
	struct jc_buf buf;     /* owned */
	int fd;		       /* owned, or -1: MSG_REPLY's descriptor; MSG_COMPILE's and
				* MSG_ADMIN's duplicate of the client's socket */
	int admin;	       /* MSG_COMPILE, MSG_ADMIN: the peer is an admin */
	struct jc_req req;     /* MSG_COMPILE; owned */
	uint8_t key[16];       /* MSG_WARM */
	struct jc_budget *bud; /* MSG_COMPILE, MSG_ADMIN: the budget charged while queued, */
	size_t charged;	       /* with so many bytes (the frame's) */
};

/* A queue of messages to a loop, woken by its async handle. */
struct jc_mq {
	pthread_mutex_t lock;
	struct msg *head, **tail;
	uv_async_t async;
	int open; /* takes messages (its loop has not closed it) */
};

/* A serving thread. */
struct jc_srv {
	struct jc_daemon *d;
	uv_loop_t loop;
	struct jc_mq q;
	uv_idle_t poll_idle; /* active: the loop polls instead of sleeping */
	uint64_t poll_until_ns;
	uv_poll_t listen_poll;	/* the listening socket (srv_listen_cb) */
	unsigned index;		/* its place in d->srv: its turns to accept */
	struct jc_memcache *mc; /* its memory cache (memcache.c) */
	struct jc_conn *conns;	/* its connections */
	struct msg stop;	/* MSG_STOP, posted once */
	pthread_t thread;
	int running; /* thread started, not joined */
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
	size_t charged; /* bytes charged to d->buffers */
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
 * member (primary or supplementary) of the admin group. A proxy has its
 * connection's answer, asked on that connection's thread. */
static int is_admin(const struct jc_conn *c)
{
	gid_t admin = c->d->cfg.admin_gid;
	if (c->real)
		return c->admin;
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

/* Adds 1 to counter k: the serving thread's figures for its connections
 * (collected by the main loop), the daemon's on the main loop. */
static void conn_count(struct jc_conn *c, enum jc_counter k)
{
	if (c->srv)
		jc__memcache_count(c->srv->mc, k, 1, 0);
	else
		jc__count(&c->d->cache->counters, k, 1);
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
	c->peer_fd = c->start_fd = -1;
	c->uid = like ? like->uid : uid;
	c->gid = like ? like->gid : (gid_t)-1;
	c->pid = like ? like->pid : getpid();
	c->sink = sink;
	c->sink_ctx = ctx;
	return c;
}

static void conn_ref(struct jc_conn *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

/* Any thread: the last reference frees c (a proxy's with it, its
 * connection's reference). */
static void conn_unref(struct jc_conn *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (c->real) {
		if (c->peer_fd >= 0)
			close(c->peer_fd);
		conn_unref(c->real);
	}
	jc__framer_free(&c->in);
	free(c);
}

static void conn_handle_closed(uv_handle_t *h)
{
	conn_unref(h->data);
}

/* Takes c off the daemon's list of connections (the limits count it no
 * more). Any thread. */
static void conn_unlink(struct jc_conn *c)
{
	struct jc_daemon *d = c->d;
	pthread_mutex_lock(&d->conns_lock);
	if (c->pprev) {
		*c->pprev = c->next;
		if (c->next)
			c->next->pprev = c->pprev;
		c->pprev = NULL;
		d->n_conns--;
		if (d->n_conns == 0)
			d->idle_since_ns = jc__now_ns();
	}
	pthread_mutex_unlock(&d->conns_lock);
}

static void conn_close(struct jc_conn *c)
{
	if (c->closing)
		return;
	c->closing = 1;
	conn_unlink(c);
	if (c->sprev) {
		*c->sprev = c->snext;
		if (c->snext)
			c->snext->sprev = c->sprev;
		c->sprev = NULL;
	}
	uv_close((uv_handle_t *)&c->pipe, conn_handle_closed);
	uv_close((uv_handle_t *)&c->idle, conn_handle_closed);
}

static void write_cb(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	struct jc_conn *c = w->conn;
	jc__budget_release(&c->d->buffers, w->charged);
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

/* --- the main loop's proxies of serving threads' connections -------------- */

/* Posts m to q (any thread); 0, or -1 when q is closed (m not taken). */
static int mq_post(struct jc_mq *q, struct msg *m)
{
	m->next = NULL;
	pthread_mutex_lock(&q->lock);
	int open = q->open;
	if (open) {
		*q->tail = m;
		q->tail = &m->next;
		uv_async_send(&q->async); /* under the lock: the handle is open */
	}
	pthread_mutex_unlock(&q->lock);
	return open ? 0 : -1;
}

/* Frees m and what it owns. */
static void msg_free(struct msg *m)
{
	if (m->charged)
		jc__budget_release(m->bud, m->charged);
	if (m->conn)
		conn_unref(m->conn);
	if (m->fd >= 0)
		close(m->fd);
	jc__buf_free(&m->buf);
	jc__req_clear(&m->req);
	if (m->kind != MSG_STOP)
		free(m);
}

/* Sends kind (buf and fd taken; NULL, -1: none) to proxy p's connection on
 * its thread; what cannot go (out of memory, the thread stopped) is freed. */
static void proxy_post(struct jc_conn *p, int kind, struct jc_buf *buf, int fd)
{
	struct msg *m = calloc(1, sizeof(*m));
	if (!m) {
		if (buf)
			jc__buf_free(buf);
		if (fd >= 0)
			close(fd);
		return;
	}
	m->kind = kind;
	m->conn = p->real;
	conn_ref(p->real);
	m->fd = fd;
	if (buf) {
		m->buf = *buf;
		memset(buf, 0, sizeof(*buf));
	}
	if (mq_post(&p->real->srv->q, m) != 0)
		msg_free(m);
}

/* The proxy's request is over (answered: MSG_DONE; its client gone:
 * MSG_CLOSE): its thread is told, and the request's reference dropped. */
static void proxy_end(struct jc_conn *p, int kind)
{
	if (p->ended)
		return;
	p->ended = 1;
	proxy_post(p, kind, NULL, -1);
	conn_unref(p);
}

/* --- replies --------------------------------------------------------------- */

static void conn_write(struct jc_conn *c, struct jc_buf *buf, size_t off);

/* Whether a reply of len bytes may be queued now. One larger than
 * REPLY_FREE_MAX that would pass the budget is not: the client is sent an
 * EBUSY error instead (logged, counted) and the caller drops the reply. */
static int reply_fits(struct jc_conn *c, size_t len)
{
	struct jc_budget *bud = &c->d->buffers;
	size_t used = jc__budget_used(bud);
	/* (A reply larger than the whole budget goes when nothing else is queued.) */
	if (len <= REPLY_FREE_MAX || used + len <= bud->max || used == 0)
		return 1;
	char msg[200];
	snprintf(msg, sizeof(msg),
		 "the daemon's reply buffers are full (%zu of %zu bytes, "
		 "--buffer-budget) and this reply takes %zu; try again later",
		 used, bud->max, len);
	jc_log_warn(NET, "uid %d pid %d: reply of %zu bytes refused: buffer budget full",
		    (int)c->uid, (int)c->pid, len);
	conn_count(c, JC_CTR_busy_refusals);
	conn_send_error(c, JC_EBUSY, msg);
	return 0;
}

/* Queues buf's bytes from off on (taking ownership of buf), charging its
 * allocation to the buffer budget. A whole reply (off 0) that does not fit
 * is replaced by an error (reply_fits); the rest of one partly sent was
 * checked as a whole before. A proxy's goes to its thread, which does so. */
static void conn_write(struct jc_conn *c, struct jc_buf *buf, size_t off)
{
	struct jc_budget *bud = &c->d->buffers;
	if (c->real) {
		proxy_post(c, MSG_REPLY, buf, -1);
		return;
	}
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
		jc__budget_release(bud, w->charged);
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
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.space,
			     .msg_controllen = sizeof(ctl.space)};
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

/* b (taken): a RESULT frame without the object's bytes, served by objfd
 * (taken). When the descriptor cannot be passed now, the frame is sent
 * again with the bytes read from objfd inline; 0 or a JC_E* code (b freed). */
static int inline_bytes(struct jc_buf *b, int objfd)
{
	struct jc_res res;
	int rc = b->len >= JC_FRAME_HDR
		     ? jc__decode_res(b->data + JC_FRAME_HDR, b->len - JC_FRAME_HDR, &res)
		     : JC_EPROTO;
	jc__buf_reset(b);
	if (rc == 0) {
		res.data = malloc(res.size ? res.size : 1);
		ssize_t got = res.data ? pread(objfd, res.data, res.size, 0) : -1;
		rc = got == (ssize_t)res.size ? jc__encode_res(b, &res) : JC_EIO;
		jc__res_clear(&res);
	}
	close(objfd);
	if (rc != 0)
		jc__buf_free(b);
	return rc;
}

/* Sends frame b (taken) on c with objfd (taken; -1: none) beside it. */
static void conn_send_frame(struct jc_conn *c, struct jc_buf *b, int objfd)
{
	if (objfd < 0) {
		conn_write(c, b, 0);
		return;
	}
	if (!reply_fits(c, b->len)) {
		jc__buf_free(b);
		close(objfd);
		return;
	}
	ssize_t n = send_with_fd(c, b, objfd);
	if (n > 0) {
		close(objfd);
		if (n == (ssize_t)b->len)
			jc__buf_free(b);
		else
			conn_write(c, b, (size_t)n);
		return;
	}
	/* Could not pass the descriptor now: send the bytes inline. */
	if (inline_bytes(b, objfd) != 0) {
		conn_send_error(c, JC_EIO, "could not read the cached object");
		return;
	}
	conn_write(c, b, 0);
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
	/* Served by descriptor: the frame carries no bytes. */
	struct jc_res view = *res;
	if (objfd >= 0)
		view.data = NULL;
	if (jc__encode_res(&b, &view) != 0) {
		jc__buf_free(&b);
		if (objfd >= 0)
			close(objfd);
		conn_send_error(c, JC_ENOMEM, "could not encode the result");
		return;
	}
	if (c->real)
		proxy_post(c, MSG_REPLY, &b, objfd);
	else
		conn_send_frame(c, &b, objfd);
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
		if (c->real)
			proxy_end(c, MSG_CLOSE);
		else
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
			   ? cfg->idle_timeout_s
			   : cfg->handshake_timeout_s;
	return w == WAIT_ANSWER_TAKEN ? cfg->write_timeout_s : cfg->idle_timeout_s;
}

static void idle_cb(uv_timer_t *t)
{
	struct jc_conn *c = t->data;
	const char *what =
	    c->pending_timer == WAIT_HELLO	    ? "no handshake within --handshake-timeout"
	    : c->pending_timer == WAIT_ANSWER_TAKEN ? "answer not taken within --write-timeout"
	    : c->in.buf.len			    ? "request not complete within --idle-timeout"
						    : "no request within --idle-timeout";
	jc_log_info(NET, "closing connection of uid %d pid %d: %s (%d s)", (int)c->uid, (int)c->pid,
		    what, wait_s(&c->d->cfg, c->pending_timer));
	if (c->pending_timer == WAIT_ANSWER_TAKEN)
		conn_count(c, JC_CTR_busy_refusals);
	conn_close(c);
}

/* (Re)starts the connection's timer for what it now waits for. */
static void idle_arm(struct jc_conn *c)
{
	c->pending_timer = !c->hello	   ? WAIT_HELLO
			   : c->drain_wait ? WAIT_ANSWER_TAKEN
					   : WAIT_REQUEST;
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
	if (c->real) {
		proxy_end(c, MSG_DONE);
		return;
	}
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

/* POLLHUP on fd: both directions shut, the peer's socket is closed (a
 * client that only shut down its sending side still reads). */
static int peer_hung_up(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

static int conn_gone(struct jc_conn *c)
{
	uv_os_fd_t fd;
	if (c->sink)
		return 0;
	if (c->real) { /* a proxy: its thread closes the connection */
		if (!c->ended && !peer_hung_up(c->peer_fd))
			return 0;
		proxy_end(c, MSG_CLOSE);
		return 1;
	}
	if (!c->closing) {
		if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0 || !peer_hung_up(fd))
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
	jc__count(&d->cache->counters, JC_CTR_corrupt_objects,
		  j->env.corrupt); /* verify, as offline */
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
	conn_ref(c);
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
	int admin = rc == 0 && is_admin(c);
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
	jc__memcache_collect(d); /* the serving threads' hits */
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

/* --- frames from clients (on the connection's serving thread) -------------- */

/* Tells c's client that its request does not fit in --buffer-budget now. */
static void refuse_budget_full(struct jc_conn *c)
{
	struct jc_budget *bud = &c->d->buffers;
	size_t used = jc__budget_used(bud);
	char msg[200];
	snprintf(msg, sizeof(msg),
		 "the daemon's request buffers are full (%zu of %zu bytes, "
		 "--buffer-budget); try again later",
		 used, bud->max);
	jc_log_warn(NET,
		    "uid %d pid %d: request refused: buffer budget full (%zu of %zu "
		    "bytes)",
		    (int)c->uid, (int)c->pid, used, bud->max);
	conn_count(c, JC_CTR_busy_refusals);
	conn_send_error(c, JC_EBUSY, msg);
}

/* Hands c's request (req, taken; or an ADMIN frame's payload) to the main
 * loop; when it cannot (out of memory, stopping), c is told so. */
static void conn_handoff(struct jc_conn *c, int kind, struct jc_req *req, const uint8_t *payload,
			 size_t len)
{
	/* The frame's bytes stay charged while the request waits for the main
	 * loop: serving threads reading at once cannot queue past the budget. */
	if (jc__budget_try_charge(&c->d->buffers, len, 0) != 0) {
		if (req)
			jc__req_clear(req);
		refuse_budget_full(c);
		conn_done(c);
		return;
	}
	struct msg *m = calloc(1, sizeof(*m));
	uv_os_fd_t sock;
	const char *why = "out of memory";
	if (m) {
		m->kind = kind;
		m->bud = &c->d->buffers;
		m->charged = len;
		m->conn = c;
		m->admin = kind == MSG_ADMIN && is_admin(c);
		m->fd = uv_fileno((uv_handle_t *)&c->pipe, &sock) == 0
			    ? fcntl(sock, F_DUPFD_CLOEXEC, 3)
			    : -1;
		if (req) {
			m->req = *req;
			memset(req, 0, sizeof(*req));
		} else if ((m->buf.data = malloc(len ? len : 1))) {
			memcpy(m->buf.data, payload, len);
			m->buf.len = m->buf.cap = len;
		}
		conn_ref(c);
		if ((req || m->buf.data) && mq_post(c->d->mainq, m) == 0)
			return;
		why = req || m->buf.data ? "the daemon is shutting down" : why;
		msg_free(m);
	}
	if (req)
		jc__req_clear(req);
	if (!m)
		jc__budget_release(&c->d->buffers, len);
	conn_send_error(c, m ? JC_EBUSY : JC_ENOMEM, why);
	conn_done(c);
}

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
		} else if (rc == 0 && h.dir_ino &&
			   (h.dir_dev != d->cache->dev || h.dir_ino != d->cache->ino)) {
			rc = JC_EINVAL;
			snprintf(msg, sizeof(msg),
				 "this jitcached (pid %d) serves the cache directory %s, "
				 "not the one the client named (device %llu inode %llu)",
				 (int)getpid(), d->cfg.cache_dir, (unsigned long long)h.dir_dev,
				 (unsigned long long)h.dir_ino);
		}
		jc__hello_clear(&h);
		if (rc != 0) {
			conn_count(c, JC_CTR_bad_requests);
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
			conn_count(c, JC_CTR_bad_requests);
			conn_send_error(c, rc, "malformed COMPILE request");
			c->replied = 1;
			return rc;
		}
		/* A hit is answered here; the rest goes to the main loop. */
		if (!jc__cache_try_hit(c->srv->mc, c, &req))
			conn_handoff(c, MSG_COMPILE, &req, NULL, len);
		pause_if_busy(c);
		return 0;
	}
	if (type == JC_MSG_ADMIN) {
		conn_handoff(c, MSG_ADMIN, NULL, payload, len);
		pause_if_busy(c);
		return 0;
	}
	conn_count(c, JC_CTR_bad_requests);
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
 * Busy polling: for POLL_NS after the last bytes read from a client the
 * serving thread's loop does not sleep (an active idle handle makes libuv
 * poll with a zero timeout), so the next request of a client that sends
 * them one after the other finds the thread awake: on a virtual machine,
 * waking a thread asleep on an idle vCPU costs more than a hit. Each turn
 * yields the CPU to any other runnable task, such as that very client
 * (polling for its answer too, see client.c) on the same CPU. After
 * POLL_NS of silence the loop sleeps. The first turn after a request opens
 * ahead the descriptors its hits took (memcache.c), so that no hit waits
 * for an open.
 */
#define POLL_NS 50000

static void poll_idle_cb(uv_idle_t *h)
{
	struct jc_srv *s = h->data;
	jc__memcache_refill(s->mc); /* the answers of the last turn are out */
	if (jc__now_ns() >= s->poll_until_ns)
		uv_idle_stop(h);
	else
		sched_yield();
}

static void poll_awhile(struct jc_srv *s)
{
	s->poll_until_ns = jc__now_ns() + POLL_NS;
	if (!uv_is_active((uv_handle_t *)&s->poll_idle))
		uv_idle_start(&s->poll_idle, poll_idle_cb);
}

static void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct jc_conn *c = s->data;
	(void)buf;
	if (nread == UV_ENOBUFS) {
		refuse_budget_full(c);
		jc__framer_free(&c->in);
		conn_end(c);
		return;
	}
	if (nread < 0) {
		conn_close(c);
		return;
	}
	poll_awhile(c->srv);
	c->replied = 0;
	int rc = jc__framer_feed(&c->in, (size_t)nread, conn_frame_cb, c);
	if (rc == 0)
		return;
	if (!c->replied) {
		/* The framer itself refused the bytes: say why before closing. */
		char msg[128] = "malformed frame header";
		if (rc == JC_ETOOBIG)
			snprintf(msg, sizeof(msg), "frame larger than the limit (%zu bytes)",
				 c->in.max);
		conn_count(c, JC_CTR_bad_requests);
		conn_send_error(c, rc, msg);
	}
	conn_end(c);
}

/* Serving thread: starts serving c (just accepted), or tells it why it was
 * refused (in answer to the client's HELLO, which it reads first). */
static void conn_start(struct jc_srv *s, struct jc_conn *c)
{
	uv_pipe_init(&s->loop, &c->pipe, 0);
	uv_timer_init(&s->loop, &c->idle);
	c->pipe.data = c->idle.data = c;
	c->snext = s->conns;
	if (s->conns)
		s->conns->sprev = &c->snext;
	c->sprev = &s->conns;
	s->conns = c;
	if (uv_pipe_open(&c->pipe, c->start_fd) != 0) {
		close(c->start_fd);
		conn_close(c);
		return;
	}
	if (c->refuse) {
		conn_send_error(c, c->refuse, c->refuse_why);
		conn_end(c);
		return;
	}
	idle_arm(c);
	uv_read_start((uv_stream_t *)&c->pipe, conn_alloc_cb, conn_read_cb);
}

/* --- the serving threads ------------------------------------------------------ */

/* Takes what is queued (owner's thread). */
static struct msg *mq_take(struct jc_mq *q)
{
	pthread_mutex_lock(&q->lock);
	struct msg *m = q->head;
	q->head = NULL;
	q->tail = &q->head;
	pthread_mutex_unlock(&q->lock);
	return m;
}

/* The owner's loop takes no more messages; what was queued is freed. */
static void mq_close(struct jc_mq *q)
{
	pthread_mutex_lock(&q->lock);
	q->open = 0;
	pthread_mutex_unlock(&q->lock);
	for (struct msg *m = mq_take(q), *next; m; m = next) {
		next = m->next;
		msg_free(m);
	}
	uv_close((uv_handle_t *)&q->async, NULL);
}

static int mq_init(struct jc_mq *q, uv_loop_t *loop, uv_async_cb cb, void *data)
{
	pthread_mutex_init(&q->lock, NULL);
	q->head = NULL;
	q->tail = &q->head;
	int rc = uv_async_init(loop, &q->async, cb);
	q->async.data = data;
	q->open = rc == 0;
	return rc;
}

static void srv_listen_cb(uv_poll_t *h, int status, int events);

/* MSG_STOP: the thread's connections end once what is queued to them is
 * written; its loop then runs out of handles. */
static void srv_stop(struct jc_srv *s)
{
	mq_close(&s->q);
	uv_close((uv_handle_t *)&s->poll_idle, NULL);
	uv_close((uv_handle_t *)&s->listen_poll, NULL);
	for (struct jc_conn *c = s->conns, *next; c; c = next) {
		next = c->snext;
		conn_end(c); /* takes c off the list (conn_close), now or once written */
	}
}

static void srv_async_cb(uv_async_t *a)
{
	struct jc_srv *s = a->data;
	for (struct msg *m = mq_take(&s->q), *next; m; m = next) {
		next = m->next;
		struct jc_conn *c = m->conn;
		switch (m->kind) {
		case MSG_REPLY:
			if (!c->closing) {
				conn_send_frame(c, &m->buf, m->fd); /* takes both */
				memset(&m->buf, 0, sizeof(m->buf));
				m->fd = -1;
			}
			break;
		case MSG_DONE:
			conn_done(c);
			break;
		case MSG_CLOSE:
			if (!c->closing)
				conn_close(c);
			break;
		case MSG_STOP:
			srv_stop(s);
			break;
		case MSG_LISTEN:
			if (!uv_is_closing((uv_handle_t *)&s->listen_poll))
				uv_poll_start(&s->listen_poll, UV_READABLE, srv_listen_cb);
			break;
		case MSG_WARM:
			jc__memcache_sync(s->mc); /* what was forgotten before it */
			jc__memcache_warm(s->mc, m->key);
			break;
		}
		msg_free(m);
	}
}

static void *srv_main(void *arg)
{
	struct jc_srv *s = arg;
	uv_run(&s->loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&s->loop) != 0)
		jc_log_warn(NET, "a serving thread's loop closed with handles still open");
	return NULL;
}

/* Makes serving thread i (its loop, queue, SQLite reader, memory cache)
 * and starts it. 0 or a JC_E* code with the reason in err. */
static int srv_start(struct jc_daemon *d, unsigned i, char *err, size_t errlen)
{
	struct jc_srv *s = calloc(1, sizeof(*s));
	struct jc_index *rix = NULL;
	if (!s)
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	d->srv[i] = s;
	s->d = d;
	s->stop.kind = MSG_STOP;
	s->stop.fd = -1;
	int rc = uv_loop_init(&s->loop);
	if (rc != 0) {
		free(s);
		d->srv[i] = NULL;
		return jc__fail(err, errlen, JC_EIO, "serving thread: %s", uv_strerror(rc));
	}
	uv_idle_init(&s->loop, &s->poll_idle);
	s->poll_idle.data = s;
	s->index = i;
	rc = uv_poll_init(&s->loop, &s->listen_poll, d->listen_fd) != 0 ? JC_EIO : 0;
	s->listen_poll.data = s;
	if (rc != 0) {
		uv_close((uv_handle_t *)&s->poll_idle, NULL);
		srv_main(s);
		return jc__fail(err, errlen, JC_EIO,
				"serving thread: cannot poll the listening socket");
	}
	rc = mq_init(&s->q, &s->loop, srv_async_cb, s) != 0 ? JC_EIO : 0;
	rc = rc ?: jc__cachedir_open_reader(d->cache, &rix, err, errlen);
	if (rc == 0 && jc__memcache_new(d, rix, 1, 1 + d->n_srv, &s->mc) != 0) {
		jc__reader_close(rix);
		rc = jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	}
	if (rc == 0 && (rc = pthread_create(&s->thread, NULL, srv_main, s)) != 0)
		rc = jc__fail(err, errlen, JC_EIO, "cannot start a serving thread: %s",
			      strerror(rc));
	if (rc != 0) { /* its handles close when the thread runs the loop: run it here */
		if (s->q.open)
			mq_close(&s->q);
		uv_close((uv_handle_t *)&s->poll_idle, NULL);
		uv_close((uv_handle_t *)&s->listen_poll, NULL);
		srv_main(s);
		return rc;
	}
	s->running = 1;
	return 0;
}

/* --- the main loop: accepted connections, requests handed to it ----------- */

/* A serving thread's request, on the main loop: a proxy of its connection
 * takes it through the request path (cache.c) or the admin commands. */
static void main_async_cb(uv_async_t *a)
{
	struct jc_daemon *d = a->data;
	for (struct msg *m = mq_take(d->mainq), *next; m; m = next) {
		next = m->next;
		struct jc_conn *p = calloc(1, sizeof(*p));
		if (!p) { /* the client cannot be answered: closed on its thread */
			struct jc_srv *s = m->conn->srv;
			jc__req_clear(&m->req);
			m->kind = MSG_CLOSE;
			if (mq_post(&s->q, m) != 0)
				msg_free(m);
			continue;
		}
		p->d = d;
		p->refs = 1; /* the request's, until it is answered (proxy_end) */
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
		msg_free(m);
	}
}

static void peer_creds(struct jc_conn *c, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		c->uid = cred.uid;
		c->gid = cred.gid;
		c->pid = cred.pid;
	} else {
		c->uid = (uid_t)-1;
		c->gid = (gid_t)-1;
		c->pid = -1;
	}
}

/* Open connections of uid (a walk: accepts are rare beside requests);
 * conns_lock held. */
static int conns_of(const struct jc_daemon *d, uid_t uid)
{
	int n = 0;
	for (const struct jc_conn *c = d->conns; c; c = c->next)
		n += c->uid == uid;
	return n;
}

/* Checks the limits for c (its credentials known) and counts it in; else
 * sets why it is refused. conns_lock held. */
static void conn_admit(struct jc_daemon *d, struct jc_conn *c)
{
	if (!uid_allowed(d, c->uid)) {
		c->refuse = JC_EDENIED;
		snprintf(c->refuse_why, sizeof(c->refuse_why),
			 "uid %d is not allowed to use this jitcached (allow-uids)", (int)c->uid);
	} else if (d->n_conns >= d->cfg.max_connections) {
		c->refuse = JC_EBUSY;
		snprintf(c->refuse_why, sizeof(c->refuse_why),
			 "too many connections (%d, --max-connections); try again later",
			 d->n_conns);
	} else if (c->uid != 0 && c->uid != geteuid() &&
		   conns_of(d, c->uid) >= d->cfg.max_connections_per_uid) {
		c->refuse = JC_EBUSY;
		snprintf(c->refuse_why, sizeof(c->refuse_why),
			 "uid %d has %d connections open "
			 "(--max-connections-per-uid); try again later",
			 (int)c->uid, d->cfg.max_connections_per_uid);
	}
	if (c->refuse)
		return;
	d->n_conns++;
	c->next = d->conns;
	if (d->conns)
		d->conns->pprev = &c->next;
	c->pprev = &d->conns;
	d->conns = c;
}

/* An accepted socket fd (owned), on serving thread s: checked against the
 * limits, then served here, or told why it is refused. */
static void conn_accepted(struct jc_srv *s, int fd)
{
	struct jc_daemon *d = s->d;
	struct jc_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->d = d;
	c->in.max = JC_HELLO_FRAME_MAX;
	c->in.budget = &d->buffers;
	c->refs = 2; /* its two handles */
	c->start_fd = fd;
	c->peer_fd = -1;
	c->srv = s;
	peer_creds(c, fd);
	pthread_mutex_lock(&d->conns_lock);
	conn_admit(d, c);
	pthread_mutex_unlock(&d->conns_lock);
	if (c->refuse == JC_EBUSY)
		conn_count(c, JC_CTR_busy_refusals);
	if (c->refuse)
		jc_log_warn(NET, "refused connection of uid %d gid %d pid %d: %s", (int)c->uid,
			    (int)c->gid, (int)c->pid, c->refuse_why);
	else
		jc_log_debug(NET, "client uid %d gid %d pid %d connected", (int)c->uid, (int)c->gid,
			     (int)c->pid);
	conn_start(s, c);
}

/*
 * Every serving thread polls the listening socket; the one whose turn it is
 * (d->accept_turn, modulo the threads) accepts the next connection and
 * passes the turn on, so that connections go round-robin and each is read
 * by the thread that the kernel woke for it (no hand-off before its HELLO).
 * The others, woken too, leave it. When accept fails for want of
 * descriptors, every thread stops polling until the main loop's next tick
 * (jc__server_tick, MSG_LISTEN) rather than spin on a socket that stays
 * readable.
 */
static void srv_listen_cb(uv_poll_t *h, int status, int events)
{
	struct jc_srv *s = h->data;
	struct jc_daemon *d = s->d;
	(void)events;
	if (status < 0 || __atomic_load_n(&d->accept_paused, __ATOMIC_ACQUIRE)) {
		uv_poll_stop(h);
		return;
	}
	for (int i = 0; i < 16; i++) {
		unsigned turn = __atomic_load_n(&d->accept_turn, __ATOMIC_ACQUIRE);
		if (turn % d->n_srv != s->index)
			return;
		int fd = accept4(d->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			__atomic_store_n(&d->accept_turn, turn + 1, __ATOMIC_RELEASE);
			conn_accepted(s, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			if (!__atomic_load_n(&d->stopping, __ATOMIC_RELAXED))
				jc_log_warn(NET, "accept: %s; accepting again in a second",
					    strerror(errno));
			__atomic_store_n(&d->accept_paused, 1, __ATOMIC_RELEASE);
			uv_poll_stop(h);
		}
		return;
	}
}

void jc__server_accept(struct jc_daemon *d)
{
	for (unsigned i = 0; i < d->n_srv; i++) {
		struct msg *m = d->srv[i] && d->srv[i]->running ? calloc(1, sizeof(*m)) : NULL;
		if (!m)
			continue;
		m->kind = MSG_LISTEN;
		m->fd = -1;
		if (mq_post(&d->srv[i]->q, m) != 0)
			msg_free(m);
	}
}

void jc__server_tick(struct jc_daemon *d)
{
	if (!d->stopping && __atomic_exchange_n(&d->accept_paused, 0, __ATOMIC_ACQ_REL))
		jc__server_accept(d);
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
	if (in_use &&
	    jc__encode_hello(&b, JC_MSG_HELLO, JC_PROTO_VERSION, "jitcached " JC_VERSION) == 0 &&
	    jc__io_write_all(fd, b.data, b.len) == 0 &&
	    jc__io_read_frame(fd, &b, &type, NULL, 1000) == 0 && type == JC_MSG_HELLO_OK &&
	    jc__decode_hello_ex(b.data, b.len, &h) == 0)
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
		snprintf(err, errlen,
			 "%s already answers on %s: stop it first (jitcachectl "
			 "--socket %s stop), or give this daemon another --socket",
			 who, path, path);
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
	/* What jc__server_shutdown and jc__server_join undo exists from here
	 * on, whatever fails below. */
	pthread_mutex_init(&d->conns_lock, NULL);
	d->listen_fd = -1;
	d->n_srv = jc__server_threads(&d->cfg);
	d->srv = calloc(d->n_srv, sizeof(*d->srv));
	d->mainq = calloc(1, sizeof(*d->mainq));
	if (!d->srv || !d->mainq) {
		if (bound_fd >= 0)
			close(bound_fd);
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	}
	if (mq_init(d->mainq, d->loop, main_async_cb, d) != 0) {
		if (bound_fd >= 0)
			close(bound_fd);
		return jc__fail(err, errlen, JC_EIO, "cannot make the loop's message queue");
	}
	if (bound_fd < 0) {
		int e = jc__server_bind(&d->cfg, &bound_fd, err, errlen);
		if (e != 0)
			return e;
	}
	d->listen_fd = bound_fd;
	int fl = fcntl(bound_fd, F_GETFL);
	if (listen(bound_fd, 256) != 0 || fl < 0 || fcntl(bound_fd, F_SETFL, fl | O_NONBLOCK) != 0)
		return jc__fail(err, errlen, JC_EIO, "cannot listen: %s", strerror(errno));
	for (unsigned i = 0; i < d->n_srv; i++) {
		int rc = srv_start(d, i, err, errlen);
		if (rc != 0)
			return rc;
	}
	return 0;
}

void jc__server_shutdown(struct jc_daemon *d)
{
	/* New clients are refused from now on (ECONNREFUSED); the descriptor,
	 * which the serving threads poll until they stop, is closed once they
	 * have (jc__server_join). */
	if (d->listen_fd >= 0)
		shutdown(d->listen_fd, SHUT_RDWR);
	if (d->mainq && d->mainq->open)
		mq_close(d->mainq); /* requests not yet taken: their threads end them */
	/* Each thread's connections close once what is queued to them (a
	 * "shutting down" error, say) is written. */
	for (unsigned i = 0; d->srv && i < d->n_srv; i++)
		if (d->srv[i] && d->srv[i]->running)
			mq_post(&d->srv[i]->q, &d->srv[i]->stop);
}

void jc__server_join(struct jc_daemon *d)
{
	for (unsigned i = 0; d->srv && i < d->n_srv; i++) {
		struct jc_srv *s = d->srv[i];
		if (s && s->running)
			pthread_join(s->thread, NULL);
		if (s)
			pthread_mutex_destroy(&s->q.lock);
		free(s); /* its memory cache goes with d->mc's (jc__cache_free) */
	}
	free(d->srv);
	d->srv = NULL;
	d->n_srv = 0;
	free(d->mainq);
	d->mainq = NULL;
	if (d->listen_fd >= 0)
		close(d->listen_fd);
	d->listen_fd = -1;
}

/* Each serving thread warms key's row (MSG_WARM). */
static void srv_warm(struct jc_daemon *d, const uint8_t key[16])
{
	for (unsigned i = 0; i < d->n_srv; i++) {
		struct msg *m = d->srv[i] && d->srv[i]->running ? calloc(1, sizeof(*m)) : NULL;
		if (!m)
			continue;
		m->kind = MSG_WARM;
		m->fd = -1;
		memcpy(m->key, key, 16);
		if (mq_post(&d->srv[i]->q, m) != 0)
			msg_free(m);
	}
}

const struct jc_conn_ops jc__server_conn_ops = {
    .warm = srv_warm,
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
