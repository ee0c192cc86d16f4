/* SPDX-License-Identifier: MIT */
/*
 * redis-server fixtures for the remote-tier tests: see redis_fx.h.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "redis_fx.h"
#include "tests/lib/test.h"

int jct_redis_available(void)
{
	return system("command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null "
		      "2>&1") == 0;
}

static int port_free(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* A port p in 20000..39999 with p and p + 10000 (the cluster bus) free. */
static int free_port(void)
{
	static unsigned seed;
	if (!seed)
		seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	for (int tries = 0; tries < 1000; tries++) {
		int p = 20000 + (int)(rand_r(&seed) % 20000u);
		if (port_free(p) && port_free(p + 10000))
			return p;
	}
	fail_msg("no free loopback port");
	return -1;
}

static redisContext *connect_to(const struct jct_redis *r)
{
	struct timeval tv = {2, 0};
	redisContext *c = r->port ? redisConnectWithTimeout("127.0.0.1", r->port, tv)
				  : redisConnectUnixWithTimeout(r->sock, tv);
	if (c && !c->err)
		redisSetTimeout(c, tv);
	return c;
}

redisContext *jct_redis_connect(const struct jct_redis *r)
{
	redisContext *c = connect_to(r);
	if (!c || c->err)
		fail_msg("cannot connect to redis %s: %s", r->url, c ? c->errstr : "no memory");
	return c;
}

redisReply *jct_redis_cmd(const struct jct_redis *r, const char *fmt, ...)
{
	redisContext *c = jct_redis_connect(r);
	va_list ap;
	va_start(ap, fmt);
	redisReply *reply = redisvCommand(c, fmt, ap);
	va_end(ap);
	if (!reply)
		fail_msg("redis %s: %s: %s", r->url, fmt, c->errstr);
	redisFree(c);
	return reply;
}

long long jct_redis_dbsize(const struct jct_redis *r)
{
	redisReply *reply = jct_redis_cmd(r, "DBSIZE");
	assert_int_equal(reply->type, REDIS_REPLY_INTEGER);
	long long n = reply->integer;
	freeReplyObject(reply);
	return n;
}

static void spawn(struct jct_redis *r)
{
	char port[16], log[160];
	snprintf(port, sizeof(port), "%d", r->port);
	snprintf(log, sizeof(log), "%s/redis.log", r->dir);
	const char *argv[64] = {"redis-server",
				"--port",
				port,
				"--bind",
				"127.0.0.1",
				"--save",
				"",
				"--appendonly",
				"no",
				"--dir",
				r->dir,
				"--logfile",
				log,
				"--daemonize",
				"no",
				"--protected-mode",
				"no"};
	int n = 17;
	if (!r->port) {
		argv[n++] = "--unixsocket";
		argv[n++] = r->sock;
		argv[n++] = "--unixsocketperm";
		argv[n++] = "700";
	}
	for (int i = 0; r->extra && r->extra[i] && n < 62; i++)
		argv[n++] = r->extra[i];
	argv[n] = NULL;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execvp("redis-server", (char **)argv);
		_exit(127);
	}
	r->pid = pid;
	for (int i = 0; i < 400; i++) {
		redisContext *c = connect_to(r);
		redisReply *reply = c && !c->err ? redisCommand(c, "PING") : NULL;
		/* Up: PONG, or NOAUTH from a server with a password. */
		int ok =
		    reply && (reply->type == REDIS_REPLY_STATUS ||
			      (reply->type == REDIS_REPLY_ERROR && strstr(reply->str, "NOAUTH")));
		if (reply)
			freeReplyObject(reply);
		if (c)
			redisFree(c);
		if (ok)
			return;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			fail_msg("redis-server exited at start (see %s)", log);
		usleep(25000);
	}
	fail_msg("redis-server did not answer within 10 s (see %s)", log);
}

void jct_redis_start(struct jct_redis *r, const char *parent, int tcp, const char *const *extra)
{
	memset(r, 0, sizeof(*r));
	jct_tmpdir(r->dir, parent, "redis");
	r->extra = extra;
	if (tcp) {
		r->port = free_port();
		snprintf(r->url, sizeof(r->url), "redis://127.0.0.1:%d", r->port);
	} else {
		snprintf(r->sock, sizeof(r->sock), "%s/redis.sock", r->dir);
		snprintf(r->url, sizeof(r->url), "redis+unix://%s", r->sock);
	}
	spawn(r);
}

void jct_redis_restart(struct jct_redis *r)
{
	assert_true(r->pid < 0);
	spawn(r);
}

void jct_redis_kill(struct jct_redis *r)
{
	if (r->pid > 0) {
		kill(r->pid, SIGCONT);
		kill(r->pid, SIGKILL);
		waitpid(r->pid, NULL, 0);
	}
	r->pid = -1;
}

void jct_redis_cleanup(struct jct_redis *r)
{
	jct_redis_kill(r);
	if (r->dir[0])
		jct_tmpdir_remove(r->dir);
	r->dir[0] = '\0';
}

/* --- cluster ------------------------------------------------------------- */

void jct_cluster_start(struct jct_cluster *c)
{
	static const char *const extra[] = {"--cluster-enabled",
					    "yes",
					    "--cluster-config-file",
					    "nodes.conf",
					    "--cluster-node-timeout",
					    "1000",
					    NULL};
	memset(c, 0, sizeof(*c));
	jct_tmpdir(c->dir, NULL, "cluster");
	char cmd[1024];
	size_t n = (size_t)snprintf(cmd, sizeof(cmd), "redis-cli --cluster create");
	size_t u = (size_t)snprintf(c->url, sizeof(c->url), "redis-cluster://");
	for (int i = 0; i < 6; i++) {
		jct_redis_start(&c->node[i], c->dir, 1, extra);
		n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, " 127.0.0.1:%d", c->node[i].port);
		if (i < 3)
			u += (size_t)snprintf(c->url + u, sizeof(c->url) - u, "%s127.0.0.1:%d",
					      i ? "," : "", c->node[i].port);
	}
	snprintf(cmd + n, sizeof(cmd) - n,
		 " --cluster-replicas 1 --cluster-yes >'%s/create.log' 2>&1", c->dir);
	assert_int_equal(jct_sh("%s", cmd), 0);
	assert_true(jct_cluster_wait_ok(c, 30));
}

/* CLUSTER SLOTS from the first live node (NULL when none answers). */
static redisReply *slots_reply(struct jct_cluster *c)
{
	for (int i = 0; i < 6; i++) {
		if (c->node[i].pid < 0)
			continue;
		redisContext *ctx = connect_to(&c->node[i]);
		redisReply *reply = ctx && !ctx->err ? redisCommand(ctx, "CLUSTER SLOTS") : NULL;
		if (ctx)
			redisFree(ctx);
		if (reply && reply->type == REDIS_REPLY_ARRAY)
			return reply;
		if (reply)
			freeReplyObject(reply);
	}
	return NULL;
}

static int node_of_port(struct jct_cluster *c, long long port)
{
	for (int i = 0; i < 6; i++)
		if (c->node[i].port == port)
			return i;
	return -1;
}

int jct_cluster_master_of(struct jct_cluster *c, unsigned slot)
{
	redisReply *reply = slots_reply(c);
	int found = -1;
	for (size_t i = 0; reply && i < reply->elements && found < 0; i++) {
		redisReply *e = reply->element[i];
		if (e->element[0]->integer <= slot &&
		    slot <= (unsigned long long)e->element[1]->integer)
			found = node_of_port(c, e->element[2]->element[1]->integer);
	}
	if (reply)
		freeReplyObject(reply);
	return found;
}

void jct_cluster_id(struct jct_cluster *c, int i, char id[64])
{
	redisReply *reply = jct_redis_cmd(&c->node[i], "CLUSTER MYID");
	assert_int_equal(reply->type, REDIS_REPLY_STRING);
	snprintf(id, 64, "%s", reply->str);
	freeReplyObject(reply);
}

int jct_cluster_wait_ok(struct jct_cluster *c, double timeout_s)
{
	double end = jtl_now_s() + timeout_s;
	while (jtl_now_s() < end) {
		int ok = 1;
		for (int i = 0; i < 6 && ok; i++) {
			if (c->node[i].pid < 0)
				continue;
			redisContext *ctx = connect_to(&c->node[i]);
			redisReply *reply =
			    ctx && !ctx->err ? redisCommand(ctx, "CLUSTER INFO") : NULL;
			ok = reply && reply->type == REDIS_REPLY_STRING &&
			     strstr(reply->str, "cluster_state:ok");
			if (reply)
				freeReplyObject(reply);
			if (ctx)
				redisFree(ctx);
		}
		long long covered = 0;
		redisReply *reply = ok ? slots_reply(c) : NULL;
		for (size_t i = 0; reply && i < reply->elements; i++) {
			redisReply *e = reply->element[i];
			int m = node_of_port(c, e->element[2]->element[1]->integer);
			if (m >= 0 && c->node[m].pid > 0)
				covered += e->element[1]->integer - e->element[0]->integer + 1;
		}
		if (reply)
			freeReplyObject(reply);
		if (ok && covered == 16384)
			return 1;
		usleep(100000);
	}
	return 0;
}

void jct_cluster_cleanup(struct jct_cluster *c)
{
	for (int i = 0; i < 6; i++)
		jct_redis_cleanup(&c->node[i]);
	if (c->dir[0])
		jct_tmpdir_remove(c->dir);
	c->dir[0] = '\0';
}
