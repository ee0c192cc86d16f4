/* SPDX-License-Identifier: MIT */
/*
 * The server's connections (server_int.h), on their serving thread: who the
 * peer is, references to closing, reading and reassembling frames, the
 * handshake, one request at a time (a hit answered here, the rest handed to
 * the main loop), writing replies against --buffer-budget, the timeouts
 * (handshake, write, idle) and the busy poll. The limits are described in
 * server.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "config.h"
#include "daemon/server_int.h"
#include "jitcache/jitcache.h"

struct write_req {
	uv_write_t req;
	struct jc_buf buf;
	struct jc_conn *conn;
	size_t charged; /* bytes charged to d->request.buffers */
};

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
/* After a handshake: a fresh client's first request comes after what it
 * does in between (a GPU process resolves its target and builds the
 * request), in a process whose first calls fault pages in, often later
 * than POLL_NS. */
#define POLL_FIRST_NS 1000000

static void idle_arm(struct jc_conn *c);
static void poll_for(struct jc_srv *s, uint64_t ns);
static void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void conn_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf);

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
int jc__srv_is_admin(const struct jc_conn *c)
{
	gid_t admin = c->d->cfg.admin_gid;
	if (c->real)
		return c->admin;
	if (c->uid == 0 || c->uid == geteuid())
		return 1;
	return admin != (gid_t)-1 && (c->gid == admin || peer_in_group(c, admin));
}

uid_t jc__srv_conn_uid(const struct jc_conn *c)
{
	return c->uid;
}

pid_t jc__srv_conn_pid(const struct jc_conn *c)
{
	return c->pid;
}

/* Adds 1 to counter k: the serving thread's figures for its connections
 * (collected by the main loop), the daemon's on the main loop. */
void jc__srv_conn_count(struct jc_conn *c, enum jc_counter k)
{
	if (c->srv)
		jc__memcache_count(c->srv->mc, k, 1, 0);
	else
		jc__count(&c->d->cache->counters, k, 1);
}

struct jc_conn *jc__srv_conn_internal(struct jc_daemon *d, const struct jc_conn *like, uid_t uid,
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

static void conn_handle_closed(uv_handle_t *h)
{
	jc__srv_conn_unref(h->data);
}

/* Takes c off the daemon's list of connections (the limits count it no
 * more). Any thread. */
static void conn_unlink(struct jc_conn *c)
{
	struct jc_daemon *d = c->d;
	pthread_mutex_lock(&d->server->conns_lock);
	if (c->pprev) {
		*c->pprev = c->next;
		if (c->next)
			c->next->pprev = c->pprev;
		c->pprev = NULL;
		d->server->n_conns--;
		if (d->server->n_conns == 0)
			d->server->idle_since_ns = jc__now_ns();
	}
	pthread_mutex_unlock(&d->server->conns_lock);
}

void jc__srv_conn_close(struct jc_conn *c)
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
		__atomic_sub_fetch(&c->srv->n_open, 1, __ATOMIC_RELAXED);
	}
	uv_close((uv_handle_t *)&c->pipe, conn_handle_closed);
	uv_close((uv_handle_t *)&c->idle, conn_handle_closed);
}

static void write_cb(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	struct jc_conn *c = w->conn;
	jc__budget_release(&c->d->request.buffers, w->charged);
	if (status < 0 && !c->closing)
		jc__srv_conn_close(c);
	if (!c->closing && c->drain_wait &&
	    uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) == 0) {
		c->drain_wait = 0; /* the answer is taken: read the next request */
		idle_arm(c);
		if (c->paused && !c->busy && !c->ending) {
			c->paused = 0;
			uv_read_start((uv_stream_t *)&c->pipe, conn_alloc_cb, conn_read_cb);
		}
	}
	jc__srv_conn_unref(c);
	jc__buf_free(&w->buf);
	free(w);
}

/* --- replies --------------------------------------------------------------- */

/* Whether a reply of len bytes may be queued now (jc__srv_budget_takes);
 * when not, the client is sent an EBUSY error instead (logged, counted)
 * and the caller drops the reply. */
int jc__srv_reply_fits(struct jc_conn *c, size_t len)
{
	struct jc_budget *bud = &c->d->request.buffers;
	if (jc__srv_budget_takes(bud, len))
		return 1;
	size_t used = jc__budget_used(bud);
	char msg[200];
	snprintf(msg, sizeof(msg),
		 "the daemon's reply buffers are full (%zu of %zu bytes, "
		 "--buffer-budget) and this reply takes %zu; try again later",
		 used, bud->max, len);
	jc_log_warn(NET, "uid %d pid %d: reply of %zu bytes refused: buffer budget full",
		    (int)c->uid, (int)c->pid, len);
	jc__srv_conn_count(c, JC_CTR_busy_refusals);
	jc__srv_conn_send_error(c, JC_EBUSY, msg);
	return 0;
}

ssize_t jc__srv_conn_send_now(struct jc_conn *c, const uint8_t *data, size_t len, int fd)
{
	uv_os_fd_t sock;
	/* Not after uv_shutdown (which makes the stream unwritable at once, its
	 * shutdown(2) a turn later), as libuv's own write would not. */
	if (c->closing || !uv_is_writable((uv_stream_t *)&c->pipe) ||
	    uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) != 0 ||
	    uv_fileno((uv_handle_t *)&c->pipe, &sock) != 0)
		return 0;
	ssize_t n = jc__srv_sendmsg(sock, data, len, fd);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	return n;
}

/* Writes buf's bytes from off on (taking ownership of buf): what the socket
 * takes now at once, the rest queued, its allocation charged to the buffer
 * budget. A whole reply (off 0) that does not fit is replaced by an error
 * (jc__srv_reply_fits); the rest of one partly sent was checked as a whole
 * before. A proxy's goes to its thread, which does so. */
void jc__srv_conn_write(struct jc_conn *c, struct jc_buf *buf, size_t off)
{
	struct jc_budget *bud = &c->d->request.buffers;
	if (c->real) {
		jc__srv_proxy_post(c, MSG_REPLY, buf, -1);
		return;
	}
	if (!jc__srv_direct_end(c) || (off == 0 && !jc__srv_reply_fits(c, buf->len))) {
		jc__buf_free(buf);
		return;
	}
	/* Most answers fit the socket's buffer: sent now, they need no write
	 * request, no callback a loop turn later and no epoll_ctl (libuv
	 * rearms the descriptor once a queued write drains: one a hit). A
	 * failed send is queued all the same: libuv reports it in write_cb, a
	 * turn later, as before (closing the connection here, in the middle of
	 * the framer's loop over a read, would hand a COMPILE pipelined behind
	 * this answer to the main loop with no way to see its client gone). */
	ssize_t n = jc__srv_conn_send_now(c, buf->data + off, buf->len - off, -1);
	if (n > 0 && (size_t)n == buf->len - off) {
		jc__buf_free(buf);
		return;
	}
	if (n > 0)
		off += (size_t)n;
	struct write_req *w = calloc(1, sizeof(*w));
	if (!w) {
		jc__buf_free(buf);
		jc__srv_conn_close(c);
		return;
	}
	w->buf = *buf;
	w->conn = c;
	w->charged = buf->cap;
	jc__budget_charge(bud, w->charged);
	jc__srv_conn_ref(c);
	uv_buf_t ub = uv_buf_init((char *)w->buf.data + off, (unsigned)(w->buf.len - off));
	if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &ub, 1, write_cb) != 0) {
		jc__budget_release(bud, w->charged);
		jc__srv_conn_unref(c);
		jc__buf_free(&w->buf);
		free(w);
		jc__srv_conn_close(c);
	}
}

void jc__srv_conn_send_error(struct jc_conn *c, int code, const char *message)
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
			jc__srv_proxy_end(c, MSG_CLOSE);
		else
			jc__srv_conn_close(c);
		return;
	}
	jc__srv_conn_write(c, &b, 0);
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
		jc__srv_conn_count(c, JC_CTR_busy_refusals);
	jc__srv_conn_close(c);
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

void jc__srv_conn_done(struct jc_conn *c)
{
	if (c->real) {
		jc__srv_proxy_end(c, MSG_DONE);
		return;
	}
	c->busy = 0;
	if (c->closing || c->sink || c->ending)
		return;
	/* An answer still in our write queue: read no further request until the
	 * client has taken it (write_cb resumes), so that one which does not
	 * read cannot make us queue more; it has --write-timeout to take it. */
	c->drain_wait = uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) != 0;
	idle_arm(c);
	if (c->drain_wait && !c->paused) {
		c->paused = 1;
		uv_read_stop((uv_stream_t *)&c->pipe);
	} else if (!c->drain_wait && c->paused && !c->ending) {
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

int jc__srv_conn_gone(struct jc_conn *c)
{
	uv_os_fd_t fd;
	if (c->sink)
		return 0;
	if (c->real) { /* a proxy: its thread closes the connection */
		if (!c->ended && !peer_hung_up(c->peer_fd))
			return 0;
		jc__srv_proxy_end(c, MSG_CLOSE);
		return 1;
	}
	if (!c->closing) {
		if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0 || !peer_hung_up(fd))
			return 0;
		jc__srv_conn_close(c);
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

/* --- frames from clients (on the connection's serving thread) -------------- */

/* Tells c's client that its request does not fit in --buffer-budget now. */
static void refuse_budget_full(struct jc_conn *c)
{
	struct jc_budget *bud = &c->d->request.buffers;
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
	jc__srv_conn_count(c, JC_CTR_busy_refusals);
	jc__srv_conn_send_error(c, JC_EBUSY, msg);
}

/* Hands c's request (req, taken; or an ADMIN frame's payload) to the main
 * loop; when it cannot (out of memory, stopping), c is told so. */
static void conn_handoff(struct jc_conn *c, int kind, struct jc_req *req, const uint8_t *payload,
			 size_t len)
{
	/* The frame's bytes stay charged while the request waits for the main
	 * loop: serving threads reading at once cannot queue past the budget. */
	if (jc__budget_try_charge(&c->d->request.buffers, len, 0) != 0) {
		if (req)
			jc__req_clear(req);
		refuse_budget_full(c);
		jc__srv_conn_done(c);
		return;
	}
	struct msg *m = calloc(1, sizeof(*m));
	uv_os_fd_t sock;
	const char *why = "out of memory";
	if (m) {
		m->kind = kind;
		m->bud = &c->d->request.buffers;
		m->charged = len;
		m->conn = c;
		m->admin = kind == MSG_ADMIN && jc__srv_is_admin(c);
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
		jc__srv_conn_ref(c);
		/* The client waits on the loop now, which answers it itself (a
		 * busy poll here would take a CPU from that work). */
		c->srv->poll_until_ns = 0;
		/* Nothing queued here: the proxy may answer on m->fd itself. */
		__atomic_store_n(&c->direct,
				 m->fd >= 0 &&
				     uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) == 0,
				 __ATOMIC_RELEASE);
		if ((req || m->buf.data) && jc__srv_mq_post(c->d->server->mainq, m) == 0)
			return;
		why = req || m->buf.data ? "the daemon is shutting down" : why;
		jc__srv_msg_free(m);
	}
	if (req)
		jc__req_clear(req);
	if (!m)
		jc__budget_release(&c->d->request.buffers, len);
	jc__srv_conn_send_error(c, m ? JC_EBUSY : JC_ENOMEM, why);
	jc__srv_conn_done(c);
}

static int conn_frame_cb(void *ctx, uint16_t type, const uint8_t *payload, size_t len)
{
	struct jc_conn *c = ctx;
	struct jc_daemon *d = c->d;
	if (c->closing)
		return JC_EIO; /* closed while the frames of this read were fed */
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
			jc__srv_conn_count(c, JC_CTR_bad_requests);
			jc__srv_conn_send_error(c, rc, msg);
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
		jc__srv_conn_write(c, &b, 0);
		poll_for(c->srv, POLL_FIRST_NS);
		return 0;
	}
	if (c->busy || c->drain_wait) {
		jc__srv_conn_send_error(c, JC_EPROTO, "one request at a time per connection");
		c->replied = 1;
		return JC_EPROTO;
	}
	c->busy = 1;
	uv_timer_stop(&c->idle);
	if (type == JC_MSG_COMPILE) {
		struct jc_req req = {0};
		int rc = jc__decode_req(payload, len, &req);
		if (rc != 0) {
			jc__srv_conn_count(c, JC_CTR_bad_requests);
			jc__srv_conn_send_error(c, rc, "malformed COMPILE request");
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
	jc__srv_conn_count(c, JC_CTR_bad_requests);
	jc__srv_conn_send_error(c, JC_EPROTO, "unexpected message type");
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
	jc__srv_conn_close(c);
	jc__srv_conn_unref(c);
}

/* Ends a connection after its queued replies (an error, say) are written. */
void jc__srv_conn_end(struct jc_conn *c)
{
	uv_shutdown_t *sd = calloc(1, sizeof(*sd));
	c->ending = 1;
	uv_read_stop((uv_stream_t *)&c->pipe);
	/* What is still queued gets --write-timeout to be taken, as any answer:
	 * a client that never reads holds neither the connection nor the
	 * daemon's stop (srv_stop ends every connection so) past it. */
	int secs = wait_s(&c->d->cfg, WAIT_ANSWER_TAKEN);
	c->pending_timer = WAIT_ANSWER_TAKEN;
	if (secs > 0 && uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) != 0)
		uv_timer_start(&c->idle, idle_cb, (uint64_t)secs * 1000, 0);
	else
		uv_timer_stop(&c->idle);
	if (sd) {
		sd->data = c;
		jc__srv_conn_ref(c);
		if (uv_shutdown(sd, (uv_stream_t *)&c->pipe, shutdown_cb) == 0)
			return;
		jc__srv_conn_unref(c);
		free(sd);
	}
	jc__srv_conn_close(c);
}

static void poll_idle_cb(uv_idle_t *h)
{
	struct jc_srv *s = h->data;
	jc__memcache_refill(s->mc); /* the answers of the last turn are out */
	if (jc__now_ns() >= s->poll_until_ns)
		uv_idle_stop(h);
	else
		sched_yield();
}

/* Polls for ns from now on, or longer if already so. */
static void poll_for(struct jc_srv *s, uint64_t ns)
{
	if (uv_is_closing((uv_handle_t *)&s->poll_idle))
		return; /* the thread stops (srv_stop) */
	uint64_t until = jc__now_ns() + ns;
	if (until > s->poll_until_ns)
		s->poll_until_ns = until;
	if (!uv_is_active((uv_handle_t *)&s->poll_idle))
		uv_idle_start(&s->poll_idle, poll_idle_cb);
}

void jc__srv_poll_awhile(struct jc_srv *s)
{
	poll_for(s, POLL_NS);
}

static void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct jc_conn *c = s->data;
	(void)buf;
	if (nread == UV_ENOBUFS) {
		refuse_budget_full(c);
		jc__framer_free(&c->in);
		jc__srv_conn_end(c);
		return;
	}
	if (nread < 0) {
		jc__srv_conn_close(c);
		return;
	}
	jc__srv_poll_awhile(c->srv);
	c->replied = 0;
	int rc = jc__framer_feed(&c->in, (size_t)nread, conn_frame_cb, c);
	if (rc == 0 || c->closing)
		return;
	if (!c->replied) {
		/* The framer itself refused the bytes: say why before closing. */
		char msg[128] = "malformed frame header";
		if (rc == JC_ETOOBIG)
			snprintf(msg, sizeof(msg), "frame larger than the limit (%zu bytes)",
				 c->in.max);
		jc__srv_conn_count(c, JC_CTR_bad_requests);
		jc__srv_conn_send_error(c, rc, msg);
	}
	jc__srv_conn_end(c);
}

/* A client sends its HELLO right after connect(): it is most often here
 * already when its connection starts. Reading it now answers the handshake
 * in this turn of the loop, not the next (whose poll would only then see
 * the new descriptor): one turn less before a fresh process's first
 * request. */
static void read_at_start(struct jc_conn *c, int fd)
{
	uv_buf_t b;
	conn_alloc_cb((uv_handle_t *)&c->pipe, 0, &b);
	if (!b.len)
		return; /* the budget is full: libuv's read says so */
	ssize_t n;
	do
		n = recv(fd, b.base, b.len, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		conn_read_cb((uv_stream_t *)&c->pipe, n, &b);
}

/* Serving thread: starts serving c (just accepted, counted in s->n_open),
 * or tells it why it was refused (in answer to the client's HELLO, which it
 * reads first). */
void jc__srv_conn_start(struct jc_srv *s, struct jc_conn *c)
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
		jc__srv_conn_close(c);
		return;
	}
	if (c->refuse) {
		jc__srv_conn_send_error(c, c->refuse, c->refuse_why);
		jc__srv_conn_end(c);
		return;
	}
	idle_arm(c);
	read_at_start(c, c->start_fd);
	if (!c->closing && !c->ending && !c->paused)
		uv_read_start((uv_stream_t *)&c->pipe, conn_alloc_cb, conn_read_cb);
}
