/* SPDX-License-Identifier: MIT */
/*
 * Real redis-server processes for the remote-tier tests: one server on a
 * Unix socket or a free loopback port in a mkdtemp directory, or a Redis
 * Cluster of 3 masters + 3 replicas made with `redis-cli --cluster create`.
 * The test talks to them with hiredis's synchronous API. Servers are killed
 * and their directories removed by jct_redis_cleanup / jct_cluster_cleanup.
 * Failures abort the test through cmocka. Not thread-safe.
 */
#ifndef JC_TEST_REDIS_FX_H
#define JC_TEST_REDIS_FX_H

#include <hiredis/hiredis.h>
#include <sys/types.h>

#include "tests/lib/core.h"

struct jct_redis {
	char dir[JTL_ROOT_MAX];	  /* its directory (log, nodes.conf) */
	char sock[128];		  /* Unix socket; "" for TCP */
	int port;		  /* TCP port; 0 for a Unix socket */
	pid_t pid;		  /* -1 when not running */
	char url[192];		  /* the --remote URL of this server */
	const char *const *extra; /* more redis-server arguments, kept for restarts */
};

/* 1 when redis-server and redis-cli are on PATH. */
int jct_redis_available(void);
/* Starts a server in a new directory under parent (NULL: $TMPDIR or /tmp):
 * on a Unix socket when tcp is 0, else on a free loopback port (whose +10000
 * cluster bus port is free too). extra: NULL-terminated redis-server
 * arguments (borrowed, kept), may be NULL. Waits until it answers PING. */
void jct_redis_start(struct jct_redis *r, const char *parent, int tcp, const char *const *extra);
/* Starts it again on the same socket or port and directory. */
void jct_redis_restart(struct jct_redis *r);
/* SIGKILL and reap. */
void jct_redis_kill(struct jct_redis *r);
/* Kills it if running and removes its directory. */
void jct_redis_cleanup(struct jct_redis *r);
/* A synchronous connection (2 s timeouts); the caller frees it. */
redisContext *jct_redis_connect(const struct jct_redis *r);
/* Runs one command (hiredis format) on a fresh connection; returns the
 * reply (the caller frees it with freeReplyObject); fails the test when the
 * server does not answer. */
redisReply *jct_redis_cmd(const struct jct_redis *r, const char *fmt, ...);
/* DBSIZE of r. */
long long jct_redis_dbsize(const struct jct_redis *r);

/* A cluster of 3 masters and 3 replicas on loopback. */
struct jct_cluster {
	struct jct_redis node[6];
	char url[512]; /* redis-cluster://127.0.0.1:P1,... */
	char dir[JTL_ROOT_MAX];
};
/* Starts 6 nodes (cluster-node-timeout 1000 ms), creates the cluster and
 * waits until every node reports cluster_state:ok. */
void jct_cluster_start(struct jct_cluster *c);
/* Index of the node that is master of slot now (asked of a live node). */
int jct_cluster_master_of(struct jct_cluster *c, unsigned slot);
/* The node id of node i (CLUSTER MYID). */
void jct_cluster_id(struct jct_cluster *c, int i, char id[64]);
/* Waits (at most timeout_s) until live nodes report cluster_state:ok and
 * every slot has a live master; returns 1 when they do. */
int jct_cluster_wait_ok(struct jct_cluster *c, double timeout_s);
void jct_cluster_cleanup(struct jct_cluster *c);

#endif
