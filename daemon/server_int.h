/* SPDX-License-Identifier: MIT */
/*
 * The server's private header: what server.c (accept, serving threads,
 * start and stop), server_mq.c (message queues, proxies, connection
 * references), server_conn.c (connection I/O, frames, the buffer budget),
 * server_reply.c (results, descriptor passing) and server_loop.c (the main
 * loop's side: requests handed to it, admin commands) share. Nothing
 * outside daemon/server*.c includes it: other modules use server.h.
 * Layering (no cycles between the files): server_mq.c <- server_conn.c <-
 * server_reply.c, server_loop.c <- server.c.
 */
#ifndef JC_SERVER_INT_H
#define JC_SERVER_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "daemon/daemon.h"
#include "daemon/framer.h"
#include "daemon/server.h"

struct jc_srv;

struct jc_conn {
	uv_pipe_t pipe;
	uv_timer_t idle;
	struct jc_daemon *d;
	struct jc_srv *srv; /* the serving thread whose loop has its handles */
	struct jc_framer in;
	struct jc_conn *next, **pprev;	/* d->server->conns list (d->server->conns_lock) */
	struct jc_conn *snext, **sprev; /* srv's list (its thread) */
	int refs; /* the handles, waiters, messages, proxies holding it (atomic) */
	int closing;
	int hello;	   /* handshake done */
	int busy;	   /* a request is being answered */
	int replied;	   /* conn_frame_cb answered the frame it refused */
	int paused;	   /* reading stopped until it is */
	int ending;	   /* jc__srv_conn_end: closes once its replies are written */
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
	 * while the loop handles its request (jc__srv_main_async_cb). */
	struct jc_conn *real; /* that connection (a reference) */
	int peer_fd;	      /* a duplicate of its socket, for jc__srv_conn_gone; -1: none */
	int admin;	      /* its peer is an admin (asked on its thread) */
	int ended;	      /* answered or gone: the request's reference is dropped */
	/* A connection whose request its proxy answers: 1 while the proxy may
	 * write replies on its peer_fd itself (nothing is queued here), 2
	 * while it does (a send that does not wait), 3 when it sent part of
	 * one and the rest is queued to this thread, 0 when replies go
	 * through this thread's write queue (atomic; jc__srv_direct_end). */
	int direct;
};

/* Messages between the main loop and the serving threads. */
enum msg_kind {
	MSG_REPLY,   /* to a thread: write buf (a frame) to conn, with fd when >= 0 */
	MSG_DONE,    /* to a thread: conn's request is answered (jc__srv_conn_done) */
	MSG_CLOSE,   /* to a thread: close conn (its client is gone) */
	MSG_STOP,    /* to a thread: end its connections and stop */
	MSG_WARM,    /* to a thread: read key's row, open its descriptors ahead */
	MSG_LISTEN,  /* to a thread: poll the listening socket (jc__server_accept) */
	MSG_ADOPT,   /* to a thread: serve fd, a connection another one accepted */
	MSG_COMPILE, /* to the loop: conn's request req */
	MSG_ADMIN,   /* to the loop: conn's ADMIN frame, payload in buf */
};

struct msg {
	struct msg *next;
	int kind;
	struct jc_conn *conn;  /* a reference; NULL for MSG_STOP, MSG_WARM, MSG_LISTEN, MSG_ADOPT */
	struct jc_buf buf;     /* owned */
	size_t off;	       /* MSG_REPLY: bytes of buf the main loop sent itself */
	int fd;		       /* owned, or -1: MSG_REPLY's descriptor; MSG_COMPILE's and
				* MSG_ADMIN's duplicate of the client's socket;
				* MSG_ADOPT's accepted socket */
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

/* The serving thread's loop polls instead of sleeping for a while, making
 * ready what the last turn's hits took (memcache.c). Its own thread. */
void jc__srv_poll_awhile(struct jc_srv *s);

/* A serving thread. */
struct jc_srv {
	struct jc_daemon *d;
	uv_loop_t loop;
	struct jc_mq q;
	uv_idle_t poll_idle; /* active: the loop polls instead of sleeping */
	uint64_t poll_until_ns;
	uv_poll_t listen_poll; /* the listening socket (srv_listen_cb) */
	/* Connections given to it and not closed yet (atomic: the accepting
	 * thread reads every thread's to choose one, server.c). */
	int n_open;
	unsigned index;		/* its place in d->server->srv: its turns to accept */
	struct jc_memcache *mc; /* its memory cache (memcache.c) */
	struct jc_conn *conns;	/* its connections */
	struct msg stop;	/* MSG_STOP, posted once */
	pthread_t thread;
	int running; /* thread started, not joined */
};

/* The server's state (d->server): made by jc__server_listen, freed by
 * jc__server_join. The listening socket, which the serving threads poll and
 * accept on in turn; the threads; requests they hand the loop; the open
 * connections. */
struct jc_server {
	int listen_fd;
	unsigned accept_turn; /* the serving thread polling the listening socket (atomic) */
	int accept_paused;    /* accept failed (no descriptor left): again at the tick (atomic) */
	struct jc_srv **srv;
	unsigned n_srv;
	struct jc_mq *mainq;
	pthread_mutex_t conns_lock; /* conns, n_conns, idle_since_ns: accepts and closes */
	struct jc_conn *conns;	    /* open connections (for the limits; conns_lock) */
	int n_conns;		    /* how many are in conns (conns_lock) */
	uint64_t idle_since_ns;	    /* the last connection closed then (for idle_exit_s) */
};

/* server_mq.c: messages between the main loop and the serving threads. */
/* Connection references, any thread: the last unref frees c (a proxy's with
 * it, its connection's reference). */
void jc__srv_conn_ref(struct jc_conn *c);
void jc__srv_conn_unref(struct jc_conn *c);
/* Posts m to q (any thread); 0, or -1 when q is closed (m not taken). */
int jc__srv_mq_post(struct jc_mq *q, struct msg *m);
/* Frees m and what it owns (MSG_STOP's, embedded in its thread, is not freed). */
void jc__srv_msg_free(struct msg *m);
/* Sends kind (buf and fd taken; NULL, -1: none) to proxy p's connection on
 * its thread; what cannot go (out of memory, the thread stopped) is freed.
 * A reply (MSG_REPLY) the main loop writes on the client's socket itself
 * when the connection's thread has nothing queued for it (direct): the
 * client has its answer without waiting for that thread to wake; what a
 * full socket does not take goes through the thread, which writes from
 * then on. */
void jc__srv_proxy_post(struct jc_conn *p, int kind, struct jc_buf *buf, int fd);
/* Whether a reply of len bytes may be queued now, by the buffer budget
 * bud: one up to JC_FRAMER_BASE always, a larger one when it fits or
 * nothing else is queued. Any thread. */
int jc__srv_budget_takes(struct jc_budget *bud, size_t len);
/* c's thread, before it writes on c: the proxy writes no more (one
 * writing now finishes first). 1: the thread may write; 0: the proxy sent
 * part of a reply whose rest is queued to the thread (MSG_REPLY with off),
 * and nothing may go before it (the caller drops what it had to say: an
 * error to a client that sent a frame it should not have). */
int jc__srv_direct_end(struct jc_conn *c);
/* sendmsg of len bytes of data on sock, with fd (>= 0) beside the first
 * byte (SCM_RIGHTS), not waiting: the bytes sent, or -1 (errno). */
ssize_t jc__srv_sendmsg(int sock, const uint8_t *data, size_t len, int fd);
/* The proxy's request is over (MSG_DONE, MSG_CLOSE): its thread is told,
 * and the request's reference dropped; once. */
void jc__srv_proxy_end(struct jc_conn *p, int kind);
/* Takes what is queued, a list (owner's thread). */
struct msg *jc__srv_mq_take(struct jc_mq *q);
/* The owner's loop takes no more messages; what was queued is freed. */
void jc__srv_mq_close(struct jc_mq *q);
/* Opens q on loop: cb(async with data) runs there when messages come.
 * 0 or a libuv error (q then takes nothing). */
int jc__srv_mq_init(struct jc_mq *q, uv_loop_t *loop, uv_async_cb cb, void *data);

/* server_conn.c: connections (on their serving thread unless said). */
/* 1 when c's peer is an admin (a proxy: as asked on its connection's thread). */
int jc__srv_is_admin(const struct jc_conn *c);
/* jc_conn_ops.uid, .pid, .internal, .gone, .done (daemon.h). */
uid_t jc__srv_conn_uid(const struct jc_conn *c);
pid_t jc__srv_conn_pid(const struct jc_conn *c);
struct jc_conn *jc__srv_conn_internal(struct jc_daemon *d, const struct jc_conn *like, uid_t uid,
				      jc_conn_sink_fn sink, void *ctx);
int jc__srv_conn_gone(struct jc_conn *c);
void jc__srv_conn_done(struct jc_conn *c);
/* Adds 1 to counter k: the serving thread's figures, or the daemon's on
 * the main loop. */
void jc__srv_conn_count(struct jc_conn *c, enum jc_counter k);
/* Closes c's handles (once); it leaves the daemon's list. */
void jc__srv_conn_close(struct jc_conn *c);
/* Sends len bytes of data (borrowed) on c's socket now, not waiting, fd
 * (>= 0; borrowed) beside the first, when nothing is queued before them:
 * the bytes sent (0: none, the socket is full or something is queued), or
 * -1 when the socket failed (errno). */
ssize_t jc__srv_conn_send_now(struct jc_conn *c, const uint8_t *data, size_t len, int fd);
/* Writes buf's bytes from off on (buf taken): what the socket takes now,
 * the rest queued, charged to the buffer budget; a whole reply that does
 * not fit is replaced by an error. A proxy's goes to its thread. */
void jc__srv_conn_write(struct jc_conn *c, struct jc_buf *buf, size_t off);
/* Whether a reply of len bytes may be queued now; when not, c was sent an
 * EBUSY error and the caller drops the reply. */
int jc__srv_reply_fits(struct jc_conn *c, size_t len);
/* Sends an ERROR frame (message borrowed); jc_conn_ops.send_error. */
void jc__srv_conn_send_error(struct jc_conn *c, int code, const char *message);
/* Ends c after its queued replies are written. */
void jc__srv_conn_end(struct jc_conn *c);
/* Serving thread s starts serving c (just accepted), or tells it why it
 * was refused. */
void jc__srv_conn_start(struct jc_srv *s, struct jc_conn *c);

/* server_reply.c: results and descriptors. */
/* Sends frame b (taken) on c with objfd (taken; -1: none) beside it. */
void jc__srv_conn_send_frame(struct jc_conn *c, struct jc_buf *b, int objfd);
/* jc_conn_ops.send_result: a RESULT, objfd (>= 0) passed with it, always closed. */
void jc__srv_conn_send_result(struct jc_conn *c, const struct jc_res *res, int objfd);

/* server_loop.c: the main loop's message queue callback (a->data: the
 * daemon): each request handed to it, through a proxy. */
void jc__srv_main_async_cb(uv_async_t *a);

#endif
