/* SPDX-License-Identifier: MIT */
/*
 * The Unix socket server (daemon/server*.c): its state (struct jc_server,
 * d->server) is its own; the rest of the daemon starts and stops it and
 * asks it what it needs through these functions.
 */
#ifndef JC_SERVER_H
#define JC_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct jc_config;
struct jc_daemon;
struct jc_conn_ops;

/* Binds cfg->socket_path (mode 0600, 0660 with group_shared), unless another
 * daemon answers there (JC_ELOCKED); a socket file nobody answers on is
 * replaced. The bound, not yet listening descriptor goes to *fd (the caller
 * owns it). Returns 0, JC_EINVAL (path too long), JC_ELOCKED or JC_EIO, with
 * the reason in err. */
int jc__server_bind(const struct jc_config *cfg, int *fd, char *err, size_t errlen);
/* Makes d->server, listens on bound_fd (>= 0: socket activation, or
 * jc__server_bind before --user; taken), else binds cfg.socket_path first,
 * and starts the serving threads. 0 or a JC_E* code with the reason in err;
 * either way jc__server_shutdown, the loop's end, then jc__server_join
 * follow. */
int jc__server_listen(struct jc_daemon *d, int bound_fd, char *err, size_t errlen);
/* Stops accepting (new clients are refused) and tells the serving threads
 * to end their connections (once what is queued to them is written) and
 * stop. Main loop. */
void jc__server_shutdown(struct jc_daemon *d);
/* After the main loop ended: waits for the serving threads, frees them,
 * closes the listening socket, frees d->server. Again: nothing. */
void jc__server_join(struct jc_daemon *d);
/* The serving thread whose turn it is (or the next running one) starts
 * polling the listening socket: main.c once the signals are handled, the
 * tick after a pause (server.c, srv_listen_cb). Any thread, once the serving
 * threads are started. */
void jc__server_accept(struct jc_daemon *d);
/* Each tick (main loop): the serving threads accept again after accept
 * failed for want of descriptors. */
void jc__server_tick(struct jc_daemon *d);
/* The listening socket (borrowed), -1 before jc__server_listen bound one
 * and after jc__server_join. */
int jc__server_fd(const struct jc_daemon *d);
/* How many clients are connected now and, in *idle_since_ns, when the last
 * one closed (jc__now_ns; the daemon's start when none has); 0 and the start
 * without a server. Any thread (it takes the server's lock). */
int jc__server_clients(struct jc_daemon *d, uint64_t *idle_since_ns);
/* The connections of the server (d->conn_ops of the daemon). */
extern const struct jc_conn_ops jc__server_conn_ops;

#endif
