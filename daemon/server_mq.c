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
#include <stdlib.h>
#include <string.h>
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

/* Sends kind (buf and fd taken; NULL, -1: none) to proxy p's connection on
 * its thread; what cannot go (out of memory, the thread stopped) is freed. */
void jc__srv_proxy_post(struct jc_conn *p, int kind, struct jc_buf *buf, int fd)
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
	jc__srv_conn_ref(p->real);
	m->fd = fd;
	if (buf) {
		m->buf = *buf;
		memset(buf, 0, sizeof(*buf));
	}
	if (jc__srv_mq_post(&p->real->srv->q, m) != 0)
		jc__srv_msg_free(m);
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
