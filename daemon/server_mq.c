/* SPDX-License-Identifier: MIT */
/*
 * The server's message queues (server_int.h): a serving thread hands the
 * main loop the requests it does not answer itself (MSG_COMPILE,
 * MSG_ADMIN); the main loop's proxy of a connection sends what the request
 * path answers back to the connection's thread (MSG_REPLY, MSG_DONE,
 * MSG_CLOSE), and the main loop tells the threads to listen, warm and stop;
 * the accept turn goes to a thread as MSG_LISTEN, and a connection it
 * accepted to another as MSG_ADOPT.
 * Also the connections' reference counts, which messages hold.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/server_int.h"

void jc__srv_conn_ref(struct jc_conn *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

/* Any thread: the last reference frees c (a proxy's with it, its
 * connection's reference). */
void jc__srv_conn_unref(struct jc_conn *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (c->real) {
		if (c->peer_fd >= 0)
			close(c->peer_fd);
		jc__srv_conn_unref(c->real);
	}
	jc__framer_free(&c->in);
	free(c);
}

/* --- the main loop's proxies of serving threads' connections -------------- */

/* Posts m to q (any thread); 0, or -1 when q is closed (m not taken). */
int jc__srv_mq_post(struct jc_mq *q, struct msg *m)
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
void jc__srv_msg_free(struct msg *m)
{
	if (m->charged)
		jc__budget_release(m->bud, m->charged);
	if (m->conn)
		jc__srv_conn_unref(m->conn);
	if (m->fd >= 0)
		close(m->fd);
	jc__buf_free(&m->buf);
	jc__req_clear(&m->req);
	if (m->kind != MSG_STOP)
		free(m);
}

ssize_t jc__srv_sendmsg(int sock, const uint8_t *data, size_t len, int fd)
{
	union {
		struct cmsghdr hdr;
		char space[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		msg.msg_control = ctl.space;
		msg.msg_controllen = sizeof(ctl.space);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n;
}

/* Replies up to this size are never refused for the budget (errors, hits by
 * descriptor, handshakes), though they are charged. */
#define REPLY_FREE_MAX JC_FRAMER_BASE

int jc__srv_budget_takes(struct jc_budget *bud, size_t len)
{
	size_t used = jc__budget_used(bud);
	/* (A reply larger than the whole budget goes when nothing else is queued.) */
	return len <= REPLY_FREE_MAX || used + len <= bud->max || used == 0;
}

int jc__srv_direct_end(struct jc_conn *c)
{
	for (;;) {
		int v = __atomic_load_n(&c->direct, __ATOMIC_ACQUIRE);
		if (v == 0 ||
		    (v == 1 && __atomic_compare_exchange_n(&c->direct, &v, 0, 0, __ATOMIC_ACQ_REL,
							   __ATOMIC_ACQUIRE)))
			return 1;
		if (v == 3)
			return 0; /* a reply the loop began: its rest is queued to us */
		sched_yield();	  /* 2: the main loop is in a send that does not wait */
	}
}

/* Main loop: writes reply buf, with *fd beside it, on proxy p's socket
 * itself when p->real's thread lets it (direct). 1: all of it went (buf
 * freed, *fd closed); 0: *off bytes went (then *fd is closed and -1) and
 * the rest is the thread's to write, as every later reply (direct is 3
 * until it takes that rest: nothing else may be written before it). */
static int direct_write(struct jc_conn *p, struct jc_buf *buf, int *fd, size_t *off)
{
	struct jc_conn *c = p->real;
	int v = 1;
	/* What a full socket leaves must then be queued: only a reply the
	 * budget takes (the thread would refuse one that it does not). */
	if (p->ended || p->peer_fd < 0 || !jc__srv_budget_takes(&c->d->request.buffers, buf->len) ||
	    !__atomic_compare_exchange_n(&c->direct, &v, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return 0;
	ssize_t n = jc__srv_sendmsg(p->peer_fd, buf->data, buf->len, *fd);
	int all = n == (ssize_t)buf->len;
	__atomic_store_n(&c->direct, all ? 1 : n > 0 ? 3 : 0, __ATOMIC_RELEASE);
	if (n > 0) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		*off = (size_t)n;
	}
	if (all)
		jc__buf_free(buf);
	return all;
}

void jc__srv_proxy_post(struct jc_conn *p, int kind, struct jc_buf *buf, int fd)
{
	size_t off = 0;
	if (kind == MSG_REPLY && direct_write(p, buf, &fd, &off))
		return;
	struct msg *m = calloc(1, sizeof(*m));
	if (m) {
		m->kind = kind;
		m->conn = p->real;
		jc__srv_conn_ref(p->real);
		m->fd = fd;
		m->off = off;
		if (buf) {
			m->buf = *buf;
			memset(buf, 0, sizeof(*buf));
		}
		if (jc__srv_mq_post(&p->real->srv->q, m) == 0)
			return;
		jc__srv_msg_free(m);
	} else {
		if (buf)
			jc__buf_free(buf);
		if (fd >= 0)
			close(fd);
	}
	/* The rest of a frame the client has begun to read is lost: it must
	 * see the connection end, not read what follows as that frame's. */
	if (off)
		shutdown(p->peer_fd, SHUT_RDWR);
}

/* The proxy's request is over (answered: MSG_DONE; its client gone:
 * MSG_CLOSE): its thread is told, and the request's reference dropped. */
void jc__srv_proxy_end(struct jc_conn *p, int kind)
{
	if (p->ended)
		return;
	p->ended = 1;
	jc__srv_proxy_post(p, kind, NULL, -1);
	jc__srv_conn_unref(p);
}

/* Takes what is queued (owner's thread). */
struct msg *jc__srv_mq_take(struct jc_mq *q)
{
	pthread_mutex_lock(&q->lock);
	struct msg *m = q->head;
	q->head = NULL;
	q->tail = &q->head;
	pthread_mutex_unlock(&q->lock);
	return m;
}

/* The owner's loop takes no more messages; what was queued is freed. */
void jc__srv_mq_close(struct jc_mq *q)
{
	pthread_mutex_lock(&q->lock);
	q->open = 0;
	pthread_mutex_unlock(&q->lock);
	for (struct msg *m = jc__srv_mq_take(q), *next; m; m = next) {
		next = m->next;
		jc__srv_msg_free(m);
	}
	uv_close((uv_handle_t *)&q->async, NULL);
}

int jc__srv_mq_init(struct jc_mq *q, uv_loop_t *loop, uv_async_cb cb, void *data)
{
	pthread_mutex_init(&q->lock, NULL);
	q->head = NULL;
	q->tail = &q->head;
	int rc = uv_async_init(loop, &q->async, cb);
	q->async.data = data;
	q->open = rc == 0;
	return rc;
}

void jc__server_accept(struct jc_daemon *d)
{
	struct jc_server *sv = d->server;
	unsigned turn = __atomic_load_n(&sv->accept_turn, __ATOMIC_ACQUIRE);
	for (unsigned k = 0; k < sv->n_srv; k++) {
		struct jc_srv *s = sv->srv[(turn + k) % sv->n_srv];
		struct msg *m = s && s->running ? calloc(1, sizeof(*m)) : NULL;
		if (!m)
			continue;
		m->kind = MSG_LISTEN;
		m->fd = -1;
		__atomic_store_n(&sv->accept_turn, s->index, __ATOMIC_RELEASE);
		if (jc__srv_mq_post(&s->q, m) == 0)
			return;
		jc__srv_msg_free(m);
	}
}
