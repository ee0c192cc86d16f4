/* SPDX-License-Identifier: MIT */
/*
 * The Unix socket server: accepts clients, reassembles frames, answers the
 * handshake, hands COMPILE requests to the cache and ADMIN commands to the
 * thread pool, and sends replies (a RESULT for a hit carries the object's
 * read-only descriptor with SCM_RIGHTS instead of its bytes).
 *
 * Threads: --serve-threads serving threads, each with a loop of its own,
 * accept connections (one polls at a time and gives each to the thread with
 * the fewest, srv_listen_cb), check the limits
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
 * compile whose clients all closed their end is dropped (jc__srv_conn_gone, asked
 * through jc__server_conn_ops).
 *
 * Limits for all: at most --max-connections connections at once, and
 * --max-connections-per-uid for each uid other than root and the daemon's
 * own (the next one is told so, ERROR JC_EBUSY, and closed). Request and reply
 * buffers share --buffer-budget bytes (d->request.buffers): each connection's first
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
 *
 * This file: accepting (the limits above), the serving threads, listening,
 * shutting down, the connection ops table. The rest: server_mq.c (message
 * queues, proxies), server_conn.c (connection I/O, frames, the buffer
 * budget), server_reply.c (results, descriptor passing), server_loop.c
 * (the main loop's side, admin commands); server_int.h, what they share.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "daemon/server_int.h"
#include "jitcache/jitcache.h"
#include "proto/io.h"

/* Largest frame accepted before the handshake (a HELLO is a few bytes). */
#define JC_HELLO_FRAME_MAX 4096

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

/* --- the serving threads ------------------------------------------------------ */

static void srv_listen_cb(uv_poll_t *h, int status, int events);
static void conn_accepted(struct jc_srv *s, int fd);

/* MSG_STOP: the thread's connections end once what is queued to them is
 * written; its loop then runs out of handles. */
static void srv_stop(struct jc_srv *s)
{
	jc__srv_mq_close(&s->q);
	uv_close((uv_handle_t *)&s->poll_idle, NULL);
	uv_close((uv_handle_t *)&s->listen_poll, NULL);
	for (struct jc_conn *c = s->conns, *next; c; c = next) {
		next = c->snext;
		jc__srv_conn_end(
		    c); /* takes c off the list (jc__srv_conn_close), now or once written */
	}
}

static void srv_async_cb(uv_async_t *a)
{
	struct jc_srv *s = a->data;
	for (struct msg *m = jc__srv_mq_take(&s->q), *next; m; m = next) {
		next = m->next;
		struct jc_conn *c = m->conn;
		switch (m->kind) {
		case MSG_REPLY:
			if (m->off) /* the rest of one the loop began: it goes first */
				__atomic_store_n(&c->direct, 0, __ATOMIC_RELEASE);
			if (m->off && !c->closing) {
				jc__srv_conn_write(c, &m->buf, m->off); /* takes buf */
				memset(&m->buf, 0, sizeof(m->buf));
			} else if (!c->closing) {
				jc__srv_conn_send_frame(c, &m->buf, m->fd); /* takes both */
				memset(&m->buf, 0, sizeof(m->buf));
				m->fd = -1;
			}
			break;
		case MSG_DONE:
			jc__srv_conn_done(c);
			/* Its client reads the loop's answer now: its next
			 * request finds us awake. */
			jc__srv_poll_awhile(s);
			break;
		case MSG_CLOSE:
			if (!c->closing)
				jc__srv_conn_close(c);
			break;
		case MSG_STOP:
			srv_stop(s);
			break;
		case MSG_LISTEN:
			if (!uv_is_closing((uv_handle_t *)&s->listen_poll))
				uv_poll_start(&s->listen_poll, UV_READABLE, srv_listen_cb);
			break;
		case MSG_ADOPT:
			/* A connection, and the turn with it; none after MSG_STOP
			 * (m's fd is closed with it). */
			if (!s->q.open) {
				__atomic_sub_fetch(&s->n_open, 1, __ATOMIC_RELAXED);
				break;
			}
			if (!uv_is_closing((uv_handle_t *)&s->listen_poll))
				uv_poll_start(&s->listen_poll, UV_READABLE, srv_listen_cb);
			conn_accepted(s, m->fd);
			m->fd = -1;
			break;
		case MSG_WARM:
			jc__memcache_sync(s->mc); /* what was forgotten before it */
			jc__memcache_warm(s->mc, m->key);
			break;
		}
		jc__srv_msg_free(m);
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
	d->server->srv[i] = s;
	s->d = d;
	s->stop.kind = MSG_STOP;
	s->stop.fd = -1;
	int rc = uv_loop_init(&s->loop);
	if (rc != 0) {
		free(s);
		d->server->srv[i] = NULL;
		return jc__fail(err, errlen, JC_EIO, "serving thread: %s", uv_strerror(rc));
	}
	uv_idle_init(&s->loop, &s->poll_idle);
	s->poll_idle.data = s;
	s->index = i;
	rc = uv_poll_init(&s->loop, &s->listen_poll, d->server->listen_fd) != 0 ? JC_EIO : 0;
	s->listen_poll.data = s;
	if (rc != 0) {
		uv_close((uv_handle_t *)&s->poll_idle, NULL);
		srv_main(s);
		return jc__fail(err, errlen, JC_EIO,
				"serving thread: cannot poll the listening socket");
	}
	rc = jc__srv_mq_init(&s->q, &s->loop, srv_async_cb, s) != 0 ? JC_EIO : 0;
	rc = rc ?: jc__cachedir_open_reader(d->cache, &rix, err, errlen);
	if (rc == 0 && jc__memcache_new(d, rix, 1, 1 + d->server->n_srv, &s->mc) != 0) {
		jc__reader_close(rix);
		rc = jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	}
	if (rc == 0 && (rc = pthread_create(&s->thread, NULL, srv_main, s)) != 0)
		rc = jc__fail(err, errlen, JC_EIO, "cannot start a serving thread: %s",
			      strerror(rc));
	if (rc != 0) { /* its handles close when the thread runs the loop: run it here */
		if (s->q.open)
			jc__srv_mq_close(&s->q);
		uv_close((uv_handle_t *)&s->poll_idle, NULL);
		uv_close((uv_handle_t *)&s->listen_poll, NULL);
		srv_main(s);
		return rc;
	}
	s->running = 1;
	return 0;
}

/* --- accepted connections (on the serving threads) ------------------------- */

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
	for (const struct jc_conn *c = d->server->conns; c; c = c->next)
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
	} else if (d->server->n_conns >= d->cfg.max_connections) {
		c->refuse = JC_EBUSY;
		snprintf(c->refuse_why, sizeof(c->refuse_why),
			 "too many connections (%d, --max-connections); try again later",
			 d->server->n_conns);
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
	d->server->n_conns++;
	c->next = d->server->conns;
	if (d->server->conns)
		d->server->conns->pprev = &c->next;
	c->pprev = &d->server->conns;
	d->server->conns = c;
}

/* An accepted socket fd (owned, counted in s->n_open), on serving thread
 * s: checked against the limits, then served here, or told why it is
 * refused. */
static void conn_accepted(struct jc_srv *s, int fd)
{
	struct jc_daemon *d = s->d;
	struct jc_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		__atomic_sub_fetch(&s->n_open, 1, __ATOMIC_RELAXED);
		return;
	}
	c->d = d;
	c->in.max = JC_HELLO_FRAME_MAX;
	c->in.budget = &d->request.buffers;
	c->refs = 2; /* its two handles */
	c->start_fd = fd;
	c->peer_fd = -1;
	c->srv = s;
	peer_creds(c, fd);
	pthread_mutex_lock(&d->server->conns_lock);
	conn_admit(d, c);
	pthread_mutex_unlock(&d->server->conns_lock);
	if (c->refuse == JC_EBUSY)
		jc__srv_conn_count(c, JC_CTR_busy_refusals);
	if (c->refuse)
		jc_log_warn(NET, "refused connection of uid %d gid %d pid %d: %s", (int)c->uid,
			    (int)c->gid, (int)c->pid, c->refuse_why);
	else
		jc_log_debug(NET, "client uid %d gid %d pid %d connected (serving thread %u)",
			     (int)c->uid, (int)c->gid, (int)c->pid, s->index);
	jc__srv_conn_start(s, c);
}

/* The serving thread a connection s accepted goes to: s itself while it
 * has none open, else the running one with the fewest open, the others
 * before s among equals (the next after s first), so that connections open
 * at once go round the threads even beside one that stays idle. Its count
 * is raised for the connection. */
static struct jc_srv *serving_thread_for(struct jc_srv *s)
{
	struct jc_server *sv = s->d->server;
	struct jc_srv *best = s;
	int least = __atomic_load_n(&s->n_open, __ATOMIC_RELAXED);
	for (unsigned k = 1; k < sv->n_srv && least > 0; k++) {
		struct jc_srv *o = sv->srv[(s->index + k) % sv->n_srv];
		int n = o && o->running ? __atomic_load_n(&o->n_open, __ATOMIC_RELAXED) : INT_MAX;
		if (n < least || (n == least && best == s)) {
			best = o;
			least = n;
		}
	}
	__atomic_add_fetch(&best->n_open, 1, __ATOMIC_RELAXED);
	return best;
}

/*
 * One serving thread at a time polls the listening socket: the one whose
 * turn it is (d->server->accept_turn). It serves what it accepts itself,
 * reading it at once, while it has no other connection open; else the
 * connection goes to the thread with the fewest (serving_thread_for), and
 * the turn with it (MSG_ADOPT; one wake, which the connection needed). So
 * connections that come one after another (a process at a time, beside
 * others that stay connected or not) cost no wake of another thread, and
 * those open at once (a burst of processes that stay) are spread over the
 * threads. (Every thread polling woke them all on each connect: on the
 * 16-CPU H200 machine a fresh process's bare connect() took 75 us with 16
 * threads polling against 17 us with one. Passing the turn to the next
 * thread on each accept cost that wake whenever connects came one after
 * another: on a 2-CPU machine a connect and handshake took 65-79 us with
 * two serving threads against 36-48 us with one, medians of 2000.)
 * When accept fails for want of descriptors, the holder stops polling until
 * the main loop's next tick (jc__server_tick) rather than spin on a socket
 * that stays readable.
 */
static void srv_listen_cb(uv_poll_t *h, int status, int events)
{
	struct jc_srv *s = h->data;
	struct jc_daemon *d = s->d;
	(void)events;
	if (status < 0 || __atomic_load_n(&d->server->accept_paused, __ATOMIC_ACQUIRE)) {
		uv_poll_stop(h);
		return;
	}
	int fd;
	while ((fd = accept4(d->server->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) < 0 &&
	       (errno == EINTR || errno == ECONNABORTED))
		;
	if (fd >= 0) {
		struct jc_srv *to = serving_thread_for(s);
		struct msg *m = to != s ? calloc(1, sizeof(*m)) : NULL;
		if (m) {
			m->kind = MSG_ADOPT;
			m->fd = fd;
			__atomic_store_n(&d->server->accept_turn, to->index, __ATOMIC_RELEASE);
			uv_poll_stop(h);
			if (jc__srv_mq_post(&to->q, m) == 0)
				return;
			__atomic_store_n(&d->server->accept_turn, s->index, __ATOMIC_RELEASE);
			uv_poll_start(h, UV_READABLE, srv_listen_cb);
			m->fd = -1;
			jc__srv_msg_free(m);
		}
		if (to != s) { /* it could not be told: served here */
			__atomic_sub_fetch(&to->n_open, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&s->n_open, 1, __ATOMIC_RELAXED);
		}
		conn_accepted(s, fd);
		return;
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK) {
		if (!__atomic_load_n(&d->run.stopping, __ATOMIC_RELAXED))
			jc_log_warn(NET, "accept: %s; accepting again in a second",
				    strerror(errno));
		__atomic_store_n(&d->server->accept_paused, 1, __ATOMIC_RELEASE);
		uv_poll_stop(h);
	}
}

void jc__server_tick(struct jc_daemon *d)
{
	if (!d->run.stopping && __atomic_exchange_n(&d->server->accept_paused, 0, __ATOMIC_ACQ_REL))
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
	struct jc_server *sv = d->server = calloc(1, sizeof(*d->server));
	if (!sv) {
		if (bound_fd >= 0)
			close(bound_fd);
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&sv->conns_lock, NULL);
	sv->idle_since_ns = d->run.start_ns;
	sv->listen_fd = -1;
	sv->n_srv = jc__server_threads(&d->cfg);
	sv->srv = calloc(sv->n_srv, sizeof(*sv->srv));
	sv->mainq = calloc(1, sizeof(*sv->mainq));
	if (!sv->srv || !sv->mainq) {
		if (bound_fd >= 0)
			close(bound_fd);
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	}
	if (jc__srv_mq_init(sv->mainq, d->loop, jc__srv_main_async_cb, d) != 0) {
		if (bound_fd >= 0)
			close(bound_fd);
		return jc__fail(err, errlen, JC_EIO, "cannot make the loop's message queue");
	}
	if (bound_fd < 0) {
		int e = jc__server_bind(&d->cfg, &bound_fd, err, errlen);
		if (e != 0)
			return e;
	}
	sv->listen_fd = bound_fd;
	int fl = fcntl(bound_fd, F_GETFL);
	if (listen(bound_fd, 256) != 0 || fl < 0 || fcntl(bound_fd, F_SETFL, fl | O_NONBLOCK) != 0)
		return jc__fail(err, errlen, JC_EIO, "cannot listen: %s", strerror(errno));
	for (unsigned i = 0; i < sv->n_srv; i++) {
		int rc = srv_start(d, i, err, errlen);
		if (rc != 0)
			return rc;
	}
	return 0;
}

void jc__server_shutdown(struct jc_daemon *d)
{
	struct jc_server *sv = d->server;
	if (!sv)
		return;
	/* New clients are refused from now on (ECONNREFUSED); the descriptor,
	 * which the serving threads poll until they stop, is closed once they
	 * have (jc__server_join). */
	if (sv->listen_fd >= 0)
		shutdown(sv->listen_fd, SHUT_RDWR);
	if (sv->mainq && sv->mainq->open)
		jc__srv_mq_close(sv->mainq); /* requests not yet taken: their threads end them */
	/* Each thread's connections close once what is queued to them (a
	 * "shutting down" error, say) is written. */
	for (unsigned i = 0; sv->srv && i < sv->n_srv; i++)
		if (sv->srv[i] && sv->srv[i]->running)
			jc__srv_mq_post(&sv->srv[i]->q, &sv->srv[i]->stop);
}

void jc__server_join(struct jc_daemon *d)
{
	struct jc_server *sv = d->server;
	if (!sv)
		return;
	for (unsigned i = 0; sv->srv && i < sv->n_srv; i++) {
		struct jc_srv *s = sv->srv[i];
		if (s && s->running)
			pthread_join(s->thread, NULL);
		if (s)
			pthread_mutex_destroy(&s->q.lock);
		free(s); /* its memory cache goes with d->request.mc's (jc__cache_free) */
	}
	free(sv->srv);
	free(sv->mainq);
	if (sv->listen_fd >= 0)
		close(sv->listen_fd);
	pthread_mutex_destroy(&sv->conns_lock);
	free(sv);
	d->server = NULL;
}

int jc__server_fd(const struct jc_daemon *d)
{
	return d->server ? d->server->listen_fd : -1;
}

int jc__server_clients(struct jc_daemon *d, uint64_t *idle_since_ns)
{
	struct jc_server *sv = d->server;
	if (!sv) {
		*idle_since_ns = d->run.start_ns;
		return 0;
	}
	pthread_mutex_lock(&sv->conns_lock);
	int n = sv->n_conns;
	*idle_since_ns = sv->idle_since_ns;
	pthread_mutex_unlock(&sv->conns_lock);
	return n;
}

/* Each serving thread warms key's row (MSG_WARM). */
static void srv_warm(struct jc_daemon *d, const uint8_t key[16])
{
	for (unsigned i = 0; i < d->server->n_srv; i++) {
		struct msg *m =
		    d->server->srv[i] && d->server->srv[i]->running ? calloc(1, sizeof(*m)) : NULL;
		if (!m)
			continue;
		m->kind = MSG_WARM;
		m->fd = -1;
		memcpy(m->key, key, 16);
		if (jc__srv_mq_post(&d->server->srv[i]->q, m) != 0)
			jc__srv_msg_free(m);
	}
}

const struct jc_conn_ops jc__server_conn_ops = {
    .warm = srv_warm,
    .send_result = jc__srv_conn_send_result,
    .send_error = jc__srv_conn_send_error,
    .done = jc__srv_conn_done,
    .ref = jc__srv_conn_ref,
    .unref = jc__srv_conn_unref,
    .gone = jc__srv_conn_gone,
    .uid = jc__srv_conn_uid,
    .pid = jc__srv_conn_pid,
    .internal = jc__srv_conn_internal,
};
