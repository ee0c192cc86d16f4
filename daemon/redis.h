/* SPDX-License-Identifier: MIT */
/*
 * Asynchronous Redis and Redis Cluster connections on the libuv loop, for
 * the remote tier (remote.h). hiredis speaks the protocol (its libuv adapter
 * does the I/O, so the loop never blocks); this module adds what hiredis
 * 0.14 lacks: a connect timeout and a per-command timeout, AUTH and SELECT on
 * every new connection, and cluster routing written here: the slot map from
 * CLUSTER SLOTS, CRC16 key slots with hash tags, MOVED (the map entry is
 * updated, a full refresh follows) and ASK (ASKING, then the command on the
 * node named) redirections, and a refresh after a node fails.
 *
 * A command that times out, or whose connection breaks, completes with an
 * error; a timed-out connection is closed (its replies could no longer be
 * matched to commands), which fails every command still waiting on it.
 * Connections are made when first needed and again after a failure.
 *
 * Host names are resolved by hiredis with getaddrinfo, which blocks: use
 * addresses (or names /etc/hosts answers) in the URL.
 *
 * Loop thread only: not thread-safe.
 */
#ifndef JC_REDIS_H
#define JC_REDIS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct redisReply;

#define JC_REDIS_SLOTS	   16384
#define JC_REDIS_MAX_NODES 64 /* seeds + nodes learnt from the cluster */

enum jc_redis_kind { JC_REDIS_TCP = 0, JC_REDIS_UNIX = 1, JC_REDIS_CLUSTER = 2 };

/* A parsed --remote URL. */
struct jc_redis_url {
	enum jc_redis_kind kind;
	char path[108]; /* JC_REDIS_UNIX: the socket */
	struct {
		char host[256];
		int port;
	} seeds[16]; /* TCP: one; CLUSTER: 1..16 */
	int n_seeds;
	int db; /* SELECT db (not for clusters); 0 = default */
};

/*
 * Parses redis://HOST[:PORT][/DB], redis+unix:///PATH[?db=N] or
 * redis-cluster://HOST:PORT[,HOST:PORT...] (port 6379 when left out; an IPv6
 * address in brackets). url borrowed. Returns 0 or JC_EINVAL with the reason
 * in err.
 */
int jc__redis_url_parse(const char *url, struct jc_redis_url *out, char *err, size_t errlen);

/* CRC16 (XMODEM, as Redis Cluster uses) of the hash tag of key (the bytes
 * between the first '{' and the next '}' when not empty, else all of key):
 * the key's slot, 0..16383. */
unsigned jc__redis_slot(const void *key, size_t len);

struct jc_redis;

/*
 * Called once per command on the loop thread: reply is the server's answer
 * (borrowed for the call; REDIS_REPLY_ERROR replies are passed through,
 * except MOVED and ASK, which are followed), or NULL with err saying why
 * (timeout, connection lost, redirected too often, closing).
 */
typedef void (*jc_redis_cb)(void *arg, struct redisReply *reply, const char *err);

/*
 * Makes the connection set for url (nothing is connected yet). password
 * (borrowed, copied; NULL = none) is sent with AUTH on every connection.
 * connect_ms and timeout_ms > 0. *out owned by the caller (jc__redis_close).
 * Returns 0, JC_ENOMEM.
 */
int jc__redis_new(uv_loop_t *loop, const struct jc_redis_url *url, const char *password,
		  int connect_ms, int timeout_ms, struct jc_redis **out);

/*
 * Sends one command (argc arguments, borrowed and copied) routed by the
 * slot of route (rlen bytes; clusters only, ignored otherwise). cb is called
 * exactly once, never before this returns. Returns 0, or JC_ENOMEM / JC_EBUSY
 * (closing) without calling cb.
 */
int jc__redis_command(struct jc_redis *r, const void *route, size_t rlen, int argc,
		      const char *const *argv, const size_t *argvlen, jc_redis_cb cb, void *arg);

/* For clusters: asks every known node for the slot map once (the first
 * answer wins); does nothing for one server. */
void jc__redis_refresh(struct jc_redis *r);

/* For clusters: the masters serving slots in the current map (0 before the
 * first map arrives); 1 for one server. */
int jc__redis_masters(const struct jc_redis *r);

/* Fails every waiting command (cb with an error), closes the connections
 * and frees r once their handles have closed on the loop. NULL-safe. */
void jc__redis_close(struct jc_redis *r);

#endif
