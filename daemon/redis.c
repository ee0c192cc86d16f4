/* SPDX-License-Identifier: MIT */
/*
 * Redis and Redis Cluster connections for the remote tier: see redis.h.
 */
#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/redis.h"
#include "jitcache/jitcache.h"

#define MAX_REDIRECTS  5
#define REFRESH_MIN_NS 100000000ull /* slot map asked at most every 100 ms */

struct node {
	struct jc_redis *r;
	char host[256];
	int port;
	redisAsyncContext *ac; /* NULL: not connected */
	int connected;	       /* the connect callback said yes */
	uv_timer_t connect_timer;
};

struct jc_redis {
	uv_loop_t *loop;
	struct jc_redis_url url;
	char *password;
	int connect_ms, timeout_ms;
	struct node nodes[JC_REDIS_MAX_NODES];
	int n_nodes;
	uint8_t slot_node[JC_REDIS_SLOTS]; /* 1 + index into nodes; 0: unknown */
	int refreshing;
	uint64_t refresh_ns;   /* when the last refresh was sent */
	unsigned refresh_next; /* node asked next */
	int closing;
	int open_handles;     /* timers not yet closed; r freed at 0 once closing */
	struct op *ops;	      /* commands not done yet */
	const char *drop_why; /* reason given to commands failed by a drop */
};

struct op {
	struct jc_redis *r;
	struct node *node; /* sent there (or NULL) */
	uv_timer_t timer;  /* the command's deadline */
	int argc;
	char **argv;
	size_t *argvlen;
	jc_redis_cb cb;
	void *arg;
	unsigned slot;
	int routed; /* route by slot (clusters) */
	int pinned; /* sent to one node, never redirected (slot map queries) */
	int redirects;
	int refs; /* the timer + commands hiredis holds */
	int done;
	int timed_out;
	const char *fail_why;	/* failed before it was sent: reported by the timer */
	struct op *prev, *next; /* the commands not done yet */
};

static uint64_t now_ns(void)
{
	return uv_hrtime();
}

/* --- URL and slots ------------------------------------------------------- */

static int parse_hostport(const char *s, size_t len, char *host, size_t hostcap, int *port)
{
	const char *end = s + len, *colon = NULL;
	if (len && s[0] == '[') {
		const char *rb = memchr(s, ']', len);
		if (!rb)
			return JC_EINVAL;
		if ((size_t)(rb - s - 1) >= hostcap || rb == s + 1)
			return JC_EINVAL;
		memcpy(host, s + 1, (size_t)(rb - s - 1));
		host[rb - s - 1] = '\0';
		colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
		if (rb + 1 < end && !colon)
			return JC_EINVAL;
	} else {
		for (const char *p = s; p < end; p++)
			if (*p == ':')
				colon = p;
		size_t hl = (size_t)((colon ? colon : end) - s);
		if (hl == 0 || hl >= hostcap)
			return JC_EINVAL;
		memcpy(host, s, hl);
		host[hl] = '\0';
	}
	*port = 6379;
	if (colon) {
		long p = 0;
		const char *q = colon + 1;
		if (q == end)
			return JC_EINVAL;
		for (; q < end; q++) {
			if (*q < '0' || *q > '9' || (p = p * 10 + (*q - '0')) > 65535)
				return JC_EINVAL;
		}
		if (p < 1)
			return JC_EINVAL;
		*port = (int)p;
	}
	return 0;
}

int jc__redis_url_parse(const char *url, struct jc_redis_url *out, char *err, size_t errlen)
{
	static const char tcp[] = "redis://", unx[] = "redis+unix://", cl[] = "redis-cluster://";
	memset(out, 0, sizeof(*out));
	if (!url)
		url = "";
	if (strncmp(url, unx, sizeof(unx) - 1) == 0) {
		const char *p = url + sizeof(unx) - 1, *q = strchr(p, '?');
		size_t n = q ? (size_t)(q - p) : strlen(p);
		out->kind = JC_REDIS_UNIX;
		if (n == 0 || p[0] != '/' || n >= sizeof(out->path)) {
			snprintf(err, errlen,
				 "%s: want redis+unix:///ABSOLUTE/PATH (under %zu bytes)", url,
				 sizeof(out->path));
			return JC_EINVAL;
		}
		memcpy(out->path, p, n);
		if (q) {
			char *e;
			long db = strncmp(q, "?db=", 4) == 0 ? strtol(q + 4, &e, 10) : -1;
			if (db < 0 || db > 1000000 || *e) {
				snprintf(err, errlen, "%s: want ?db=N after the path", url);
				return JC_EINVAL;
			}
			out->db = (int)db;
		}
		return 0;
	}
	int cluster = strncmp(url, cl, sizeof(cl) - 1) == 0;
	if (!cluster && strncmp(url, tcp, sizeof(tcp) - 1) != 0) {
		snprintf(err, errlen,
			 "%s: want redis://HOST:PORT[/DB], redis+unix:///PATH or "
			 "redis-cluster://HOST:PORT[,HOST:PORT...]",
			 url);
		return JC_EINVAL;
	}
	out->kind = cluster ? JC_REDIS_CLUSTER : JC_REDIS_TCP;
	const char *p = url + (cluster ? sizeof(cl) : sizeof(tcp)) - 1;
	const char *slash = strchr(p, '/');
	const char *end = slash ? slash : p + strlen(p);
	if (slash) {
		char *e;
		long db = cluster ? -1 : strtol(slash + 1, &e, 10);
		if (db < 0 || db > 1000000 || *e || !slash[1]) {
			snprintf(err, errlen, "%s: %s", url,
				 cluster ? "a cluster has no database number"
					 : "want /DB as a number");
			return JC_EINVAL;
		}
		out->db = (int)db;
	}
	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma ? comma : end;
		if (out->n_seeds == (int)(sizeof(out->seeds) / sizeof(out->seeds[0])) ||
		    (!cluster && out->n_seeds == 1) ||
		    parse_hostport(p, (size_t)(stop - p), out->seeds[out->n_seeds].host,
				   sizeof(out->seeds[0].host),
				   &out->seeds[out->n_seeds].port) != 0) {
			snprintf(err, errlen, "%s: bad or too many HOST:PORT (at '%.*s')", url,
				 (int)(stop - p), p);
			return JC_EINVAL;
		}
		out->n_seeds++;
		p = comma ? comma + 1 : end;
	}
	if (out->n_seeds == 0) {
		snprintf(err, errlen, "%s: no host", url);
		return JC_EINVAL;
	}
	return 0;
}

static uint16_t crc16(const uint8_t *p, size_t n)
{
	uint16_t crc = 0;
	for (size_t i = 0; i < n; i++) {
		crc ^= (uint16_t)(p[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
	}
	return crc;
}

unsigned jc__redis_slot(const void *key, size_t len)
{
	const uint8_t *k = key, *open = memchr(k, '{', len);
	if (open) {
		const uint8_t *close = memchr(open + 1, '}', len - (size_t)(open + 1 - k));
		if (close && close > open + 1)
			return crc16(open + 1, (size_t)(close - open - 1)) & (JC_REDIS_SLOTS - 1);
	}
	return crc16(k, len) & (JC_REDIS_SLOTS - 1);
}

/* --- handles and lifetime -------------------------------------------------- */

static void maybe_free(struct jc_redis *r)
{
	if (r->closing && r->open_handles == 0) {
		free(r->password);
		free(r);
	}
}

static void handle_closed_cb(uv_handle_t *h)
{
	struct jc_redis *r = h->data;
	r->open_handles--;
	maybe_free(r);
}

static void op_unref(struct op *o)
{
	if (--o->refs > 0)
		return;
	for (int i = 0; i < o->argc; i++)
		free(o->argv[i]);
	free(o->argv);
	free(o->argvlen);
	struct jc_redis *r = o->r;
	free(o);
	r->open_handles--;
	maybe_free(r);
}

static void op_timer_closed_cb(uv_handle_t *h)
{
	op_unref(h->data);
}

/* Completes o once: its callback, then its timer goes. */
static void op_finish(struct op *o, redisReply *reply, const char *why)
{
	if (o->done)
		return;
	o->done = 1;
	if (o->prev)
		o->prev->next = o->next;
	else
		o->r->ops = o->next;
	if (o->next)
		o->next->prev = o->prev;
	o->cb(o->arg, reply, why);
	uv_timer_stop(&o->timer);
	uv_close((uv_handle_t *)&o->timer, op_timer_closed_cb);
}

/* --- connections -------------------------------------------------------------- */

static void node_drop(struct node *n, const char *why)
{
	redisAsyncContext *ac = n->ac;
	n->ac = NULL;
	n->connected = 0;
	uv_timer_stop(&n->connect_timer);
	if (ac) {
		const char *old = n->r->drop_why;
		n->r->drop_why = why;
		redisAsyncFree(ac); /* fails what waits on it: reply_cb with NULL */
		n->r->drop_why = old;
	}
	if (n->r->url.kind == JC_REDIS_CLUSTER && !n->r->closing)
		jc__redis_refresh(n->r);
}

static void connect_timeout_cb(uv_timer_t *t)
{
	struct node *n = t->data;
	if (n->ac && !n->connected) {
		jc_log_debug(REMOTE, "%s:%d: connect timed out after %d ms", n->host, n->port,
			     n->r->connect_ms);
		node_drop(n, "connect timed out");
	}
}

static void connect_cb(const redisAsyncContext *ac, int status)
{
	struct node *n = ac->data;
	if (!n || n->ac != ac)
		return;
	if (status != REDIS_OK) {
		/* hiredis frees ac after this returns, failing what waits on it. */
		n->ac = NULL;
		n->connected = 0;
		uv_timer_stop(&n->connect_timer);
		if (n->r->url.kind == JC_REDIS_CLUSTER && !n->r->closing)
			jc__redis_refresh(n->r);
		return;
	}
	n->connected = 1;
	uv_timer_stop(&n->connect_timer);
}

static void disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct node *n = ac->data;
	(void)status;
	if (!n || n->ac != ac)
		return;
	n->ac = NULL;
	n->connected = 0;
	uv_timer_stop(&n->connect_timer);
	if (n->r->url.kind == JC_REDIS_CLUSTER && !n->r->closing)
		jc__redis_refresh(n->r);
}

/* Connects n when it is not; 0 or JC_EIO. */
static int node_connect(struct node *n)
{
	struct jc_redis *r = n->r;
	if (n->ac)
		return 0;
	redisAsyncContext *ac = r->url.kind == JC_REDIS_UNIX ? redisAsyncConnectUnix(r->url.path)
							     : redisAsyncConnect(n->host, n->port);
	if (!ac)
		return JC_EIO;
	if (ac->err) {
		jc_log_debug(REMOTE, "%s:%d: %s", n->host, n->port, ac->errstr);
		redisAsyncFree(ac);
		return JC_EIO;
	}
	if (redisLibuvAttach(ac, r->loop) != REDIS_OK) {
		redisAsyncFree(ac);
		return JC_EIO;
	}
	ac->data = n;
	n->ac = ac;
	n->connected = 0;
	redisAsyncSetConnectCallback(ac, connect_cb);
	redisAsyncSetDisconnectCallback(ac, disconnect_cb);
	if (r->password) {
		const char *argv[] = {"AUTH", r->password};
		redisAsyncCommandArgv(ac, NULL, NULL, 2, argv, NULL);
	}
	if (r->url.db) {
		char db[16];
		snprintf(db, sizeof(db), "%d", r->url.db);
		const char *argv[] = {"SELECT", db};
		redisAsyncCommandArgv(ac, NULL, NULL, 2, argv, NULL);
	}
	uv_timer_start(&n->connect_timer, connect_timeout_cb, (uint64_t)r->connect_ms, 0);
	return 0;
}

static struct node *node_find_or_add(struct jc_redis *r, const char *host, int port)
{
	for (int i = 0; i < r->n_nodes; i++)
		if (r->nodes[i].port == port && strcmp(r->nodes[i].host, host) == 0)
			return &r->nodes[i];
	if (r->n_nodes == JC_REDIS_MAX_NODES || strlen(host) >= sizeof(r->nodes[0].host))
		return NULL;
	struct node *n = &r->nodes[r->n_nodes++];
	n->r = r;
	snprintf(n->host, sizeof(n->host), "%s", host);
	n->port = port;
	uv_timer_init(r->loop, &n->connect_timer);
	n->connect_timer.data = n;
	return n;
}

/* --- commands ----------------------------------------------------------------- */

static void op_send(struct op *o);

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": the node named, or NULL. An
 * empty host (":6381") is the host of from, the node that answered. */
static struct node *redirect_target(struct jc_redis *r, const struct node *from, const char *s,
				    unsigned *slot)
{
	const char *sp = strchr(s, ' '), *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
	char host[300];
	int port;
	if (!sp || !sp2)
		return NULL;
	*slot = (unsigned)strtoul(sp + 1, NULL, 10);
	const char *addr = sp2 + 1;
	if (addr[0] == ':') {
		snprintf(host, sizeof(host), "%s%s", from->host, addr);
		addr = host;
	}
	char h[256];
	if (*slot >= JC_REDIS_SLOTS || parse_hostport(addr, strlen(addr), h, sizeof(h), &port) != 0)
		return NULL;
	return node_find_or_add(r, h, port);
}

static void reply_cb(redisAsyncContext *ac, void *replyp, void *privdata)
{
	struct op *o = privdata;
	struct jc_redis *r = o->r;
	redisReply *reply = replyp;
	if (!o->done && reply && reply->type == REDIS_REPLY_ERROR && !o->pinned &&
	    r->url.kind == JC_REDIS_CLUSTER &&
	    (strncmp(reply->str, "MOVED ", 6) == 0 || strncmp(reply->str, "ASK ", 4) == 0)) {
		int ask = reply->str[0] == 'A';
		unsigned slot;
		struct node *to = redirect_target(r, o->node, reply->str, &slot);
		if (to && o->redirects++ < MAX_REDIRECTS) {
			if (!ask) {
				r->slot_node[slot] = (uint8_t)(to - r->nodes + 1);
				jc__redis_refresh(r);
			}
			o->node = to;
			if (node_connect(to) == 0) {
				if (ask) {
					const char *argv[] = {"ASKING"};
					redisAsyncCommandArgv(to->ac, NULL, NULL, 1, argv, NULL);
				}
				if (redisAsyncCommandArgv(to->ac, reply_cb, o, o->argc,
							  (const char **)o->argv,
							  o->argvlen) == REDIS_OK)
					return; /* o's reference goes with the new send */
			}
		}
		op_finish(o, NULL,
			  to ? "redirected too often, or the node named cannot be reached"
			     : "bad redirection");
	} else if (!reply) {
		op_finish(o, NULL,
			  o->timed_out		? "timed out"
			  : r->drop_why		? r->drop_why
			  : ac && ac->errstr[0] ? ac->errstr
						: "connection lost");
	} else {
		op_finish(o, reply, NULL);
	}
	op_unref(o);
}

static void op_timeout_cb(uv_timer_t *t)
{
	struct op *o = t->data;
	if (o->done)
		return;
	if (o->fail_why) {
		op_finish(o, NULL, o->fail_why);
		return;
	}
	o->timed_out = 1;
	if (o->node && o->node->ac)
		node_drop(o->node, "timed out"); /* completes o (and everything on the node) */
	op_finish(o, NULL, "timed out");
}

/* The node that serves o: by slot map, else a connected node, else a seed. */
static struct node *route(struct jc_redis *r, const struct op *o)
{
	if (r->url.kind != JC_REDIS_CLUSTER)
		return &r->nodes[0];
	if (o->routed && r->slot_node[o->slot])
		return &r->nodes[r->slot_node[o->slot] - 1];
	for (int i = 0; i < r->n_nodes; i++)
		if (r->nodes[i].connected)
			return &r->nodes[i];
	return &r->nodes[r->refresh_next++ % (unsigned)r->n_nodes];
}

static void op_send(struct op *o)
{
	struct jc_redis *r = o->r;
	struct node *n = o->node ? o->node : route(r, o);
	o->node = n;
	if (node_connect(n) != 0) {
		if (r->url.kind == JC_REDIS_CLUSTER)
			jc__redis_refresh(r);
		o->fail_why = "cannot connect";
	} else if (redisAsyncCommandArgv(n->ac, reply_cb, o, o->argc, (const char **)o->argv,
					 o->argvlen) != REDIS_OK) {
		o->fail_why = "cannot queue the command";
	} else {
		o->refs++;
		return;
	}
	uv_timer_start(&o->timer, op_timeout_cb, 0, 0); /* reported after we return */
}

/* A command; node NULL: routed by route (clusters), else sent to node. */
static int command(struct jc_redis *r, struct node *node, const void *rt, size_t rlen, int argc,
		   const char *const *argv, const size_t *argvlen, jc_redis_cb cb, void *arg)
{
	if (r->closing)
		return JC_EBUSY;
	struct op *o = calloc(1, sizeof(*o));
	if (!o)
		return JC_ENOMEM;
	o->argv = calloc((size_t)argc, sizeof(*o->argv));
	o->argvlen = calloc((size_t)argc, sizeof(*o->argvlen));
	int ok = o->argv && o->argvlen;
	for (int i = 0; ok && i < argc; i++) {
		size_t n = argvlen ? argvlen[i] : strlen(argv[i]);
		if (!(o->argv[i] = malloc(n + 1)))
			ok = 0;
		else {
			memcpy(o->argv[i], argv[i], n);
			o->argv[i][n] = '\0';
			o->argvlen[i] = n;
			o->argc = i + 1;
		}
	}
	o->r = r;
	o->refs = 1;
	r->open_handles++;
	if (!ok) {
		op_unref(o);
		return JC_ENOMEM;
	}
	o->cb = cb;
	o->arg = arg;
	o->node = node;
	o->pinned = node != NULL;
	if (rt && r->url.kind == JC_REDIS_CLUSTER) {
		o->slot = jc__redis_slot(rt, rlen);
		o->routed = 1;
	}
	uv_timer_init(r->loop, &o->timer);
	o->timer.data = o;
	uv_timer_start(&o->timer, op_timeout_cb, (uint64_t)r->timeout_ms, 0);
	o->next = r->ops;
	if (r->ops)
		r->ops->prev = o;
	r->ops = o;
	op_send(o);
	return 0;
}

int jc__redis_command(struct jc_redis *r, const void *rt, size_t rlen, int argc,
		      const char *const *argv, const size_t *argvlen, jc_redis_cb cb, void *arg)
{
	return command(r, NULL, rt, rlen, argc, argv, argvlen, cb, arg);
}

/* --- cluster slot map ------------------------------------------------------------ */

static void slots_cb(void *arg, redisReply *reply, const char *why)
{
	struct node *asked = arg;
	struct jc_redis *r = asked->r;
	r->refreshing = 0;
	if (r->closing)
		return;
	if (!reply || reply->type != REDIS_REPLY_ARRAY) {
		jc_log_debug(REMOTE, "CLUSTER SLOTS from %s:%d: %s", asked->host, asked->port,
			     why					 ? why
			     : reply && reply->type == REDIS_REPLY_ERROR ? reply->str
									 : "not an array");
		return;
	}
	uint8_t map[JC_REDIS_SLOTS] = {0};
	for (size_t i = 0; i < reply->elements; i++) {
		redisReply *e = reply->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER ||
		    e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
		    e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
		    e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
			continue;
		long long lo = e->element[0]->integer, hi = e->element[1]->integer;
		const char *host = e->element[2]->element[0]->str;
		long long port = e->element[2]->element[1]->integer;
		/* "?": a node whose address is not known yet. */
		if (lo < 0 || hi >= JC_REDIS_SLOTS || lo > hi || port < 1 || port > 65535 ||
		    strcmp(host, "?") == 0)
			continue;
		struct node *n = node_find_or_add(r, host[0] ? host : asked->host, (int)port);
		if (!n)
			continue;
		for (long long s = lo; s <= hi; s++)
			map[s] = (uint8_t)(n - r->nodes + 1);
	}
	memcpy(r->slot_node, map, sizeof(map));
}

void jc__redis_refresh(struct jc_redis *r)
{
	uint64_t t = now_ns();
	if (r->url.kind != JC_REDIS_CLUSTER || r->closing || r->refreshing ||
	    (r->refresh_ns && t - r->refresh_ns < REFRESH_MIN_NS))
		return;
	/* A node that is connected answers soonest; else the next in turn. */
	struct node *n = NULL;
	for (int i = 0; i < r->n_nodes && !n; i++) {
		struct node *c = &r->nodes[(r->refresh_next + (unsigned)i) % (unsigned)r->n_nodes];
		if (c->connected)
			n = c;
	}
	if (!n)
		n = &r->nodes[r->refresh_next % (unsigned)r->n_nodes];
	r->refresh_next++;
	r->refresh_ns = t;
	const char *argv[] = {"CLUSTER", "SLOTS"};
	if (command(r, n, NULL, 0, 2, argv, NULL, slots_cb, n) == 0)
		r->refreshing = 1;
}

int jc__redis_masters(const struct jc_redis *r)
{
	if (r->url.kind != JC_REDIS_CLUSTER)
		return 1;
	uint8_t seen[JC_REDIS_MAX_NODES + 1] = {0};
	int n = 0;
	for (size_t s = 0; s < JC_REDIS_SLOTS; s++)
		if (r->slot_node[s] && !seen[r->slot_node[s]]) {
			seen[r->slot_node[s]] = 1;
			n++;
		}
	return n;
}

int jc__redis_new(uv_loop_t *loop, const struct jc_redis_url *url, const char *password,
		  int connect_ms, int timeout_ms, struct jc_redis **out)
{
	struct jc_redis *r = calloc(1, sizeof(*r));
	if (!r || (password && !(r->password = strdup(password)))) {
		free(r);
		return JC_ENOMEM;
	}
	r->loop = loop;
	r->url = *url;
	r->connect_ms = connect_ms;
	r->timeout_ms = timeout_ms;
	if (url->kind == JC_REDIS_UNIX)
		node_find_or_add(r, url->path, 0);
	for (int i = 0; i < url->n_seeds; i++)
		node_find_or_add(r, url->seeds[i].host, url->seeds[i].port);
	*out = r;
	if (url->kind == JC_REDIS_CLUSTER)
		jc__redis_refresh(r);
	return 0;
}

void jc__redis_close(struct jc_redis *r)
{
	if (!r || r->closing)
		return;
	r->closing = 1;
	for (int i = 0; i < r->n_nodes; i++)
		node_drop(&r->nodes[i], "closing");
	while (r->ops)
		op_finish(r->ops, NULL, "closing");
	for (int i = 0; i < r->n_nodes; i++) {
		struct node *n = &r->nodes[i];
		r->open_handles++;
		n->connect_timer.data = r;
		uv_close((uv_handle_t *)&n->connect_timer, handle_closed_cb);
	}
	maybe_free(r);
}
