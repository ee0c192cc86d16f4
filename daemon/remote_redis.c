/* SPDX-License-Identifier: MIT */
/*
 * The remote tier's Redis / Redis Cluster backend (remote_backend.h):
 * redis://, redis+unix://, redis-cluster:// URLs (redis.h).
 *
 * Keys, for a cache key K (32 hex digits): "jc:{K}" holds the value,
 * "jc:{K}:deps" the dependency record of lookup key K, "jc:{K}:lock" the
 * fleet lock (SET NX PX, LOCK_MS, renewed and released by scripts that touch
 * it only while it is still ours). The hash tag puts the three in one cluster
 * slot (one node, one connection): a value written before the lock is
 * released is seen by everyone who sees the lock gone. Values expire by
 * --remote-ttl; the health probe is PING, and SET of a key of its own.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/redis.h"
#include "daemon/remote_backend.h"
#include "jitcache/jitcache.h"

#define LOCK_MS 10000 /* fleet lock lifetime; the stack renews held locks every 3 s */

static const char release_lua[] =
    "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) end return 0";
static const char renew_lua[] =
    "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('pexpire',KEYS[1],ARGV[2]) end "
    "return 0";

struct rb {
	struct jc_redis *redis;
	int read_only;
	int64_t ttl_ms;
	char lock_id[128];
	jc_rb_failed failed;
	void *failed_arg;
	int closing;
};

/* One command's callback and its argument. */
struct op {
	struct rb *b;
	jc_rb_cb cb;
	void *arg;
	int kind; /* what the reply means: enum op_kind */
};

enum op_kind { OP_GET, OP_LOCK, OP_PUT, OP_PROBE, OP_PROBE_WRITE };

static void name_of(enum jc_rb_kind kind, const uint8_t key[16], const char *suffix, char out[48])
{
	char hex[33];
	jc__hex16(key, hex);
	snprintf(out, 48, "jc:{%s}%s", hex, kind == JC_RB_RECORD ? ":deps" : suffix);
}

static int claims(const char *url)
{
	return strncmp(url, "redis://", 8) == 0 || strncmp(url, "redis+unix://", 13) == 0 ||
	       strncmp(url, "redis-cluster://", 16) == 0;
}

static int check(const char *url, char *err, size_t errlen)
{
	struct jc_redis_url u;
	return jc__redis_url_parse(url, &u, err, errlen);
}

static int rb_open(const struct jc_rb_open *o, void **out, char *err, size_t errlen)
{
	struct jc_redis_url url;
	uint8_t *pw = NULL;
	size_t pwlen = 0;
	int rc = jc__redis_url_parse(o->url, &url, err, errlen);
	if (rc != 0)
		return rc;
	if (o->cfg->password_file) {
		rc = jc__remote_read_small(o->cfg->password_file, 1024, &pw, &pwlen, err, errlen,
					   "remote-password-file");
		if (rc != 0)
			return rc;
		pw[pwlen] = '\0';
		char *nl = strchr((char *)pw, '\n');
		if (nl)
			*nl = '\0';
	}
	struct rb *b = calloc(1, sizeof(*b));
	rc = b ? jc__redis_new(o->loop, &url, (char *)pw, JC_REMOTE_CONNECT_MS, o->cfg->timeout_ms,
			       &b->redis)
	       : JC_ENOMEM;
	jc__remote_secret_free(pw, pwlen);
	if (rc != 0) {
		free(b);
		return rc;
	}
	b->read_only = o->cfg->read_only;
	b->ttl_ms = o->cfg->ttl_s * 1000;
	snprintf(b->lock_id, sizeof(b->lock_id), "%s", o->lock_id);
	b->failed = o->failed;
	b->failed_arg = o->failed_arg;
	*out = b;
	return 0;
}

/* What a reply means for each kind of command. */
static void reply_cb(void *arg, redisReply *reply, const char *why)
{
	struct op *op = arg;
	int rc;
	uint8_t *val = NULL;
	size_t len = 0;
	const char *msg = "";
	if (!reply) {
		rc = JC_EIO;
		msg = why ? why : "?";
	} else if (reply->type == REDIS_REPLY_ERROR) {
		rc = JC_EDENIED;
		msg = reply->str;
	} else if (op->kind == OP_GET && reply->type == REDIS_REPLY_STRING) {
		val = malloc(reply->len ? reply->len : 1);
		rc = val ? 0 : JC_ENOMEM;
		if (val) {
			memcpy(val, reply->str, reply->len);
			len = reply->len;
		}
	} else if (op->kind == OP_GET && reply->type == REDIS_REPLY_NIL) {
		rc = JC_ENOTFOUND;
	} else if (op->kind == OP_LOCK) {
		/* SET NX: OK (ours) or nil (held); EXISTS: 0 (free) or 1 (held). */
		int free_ = reply->type == REDIS_REPLY_STATUS ||
			    (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0);
		int held = reply->type == REDIS_REPLY_NIL ||
			   (reply->type == REDIS_REPLY_INTEGER && reply->integer == 1);
		rc = free_ ? 0 : held ? JC_EBUSY : JC_EDENIED;
		msg = free_ || held ? "" : "unexpected reply type";
	} else if (op->kind == OP_PROBE) {
		rc = 0;
	} else if (reply->type == REDIS_REPLY_STATUS) {
		rc = 0;
	} else {
		rc = op->kind == OP_GET ? JC_EIO : JC_EDENIED;
		msg = "unexpected reply type";
	}
	op->cb(op->arg, rc, val, len, msg);
	free(op);
}

static int send_cmd(struct rb *b, enum op_kind kind, int argc, const char *const *argv,
		    const size_t *lens, jc_rb_cb cb, void *arg)
{
	if (b->closing)
		return JC_EBUSY;
	struct op *op = malloc(sizeof(*op));
	if (!op)
		return JC_ENOMEM;
	*op = (struct op){b, cb, arg, kind};
	/* Routed by the key argument (argv[1]), or a key of the probe's own
	 * so that a cluster probe reaches a master. */
	const char *route = kind == OP_PROBE ? "jc:probe" : argv[1];
	size_t rlen = kind == OP_PROBE ? 8 : lens ? lens[1] : strlen(argv[1]);
	int rc = jc__redis_command(b->redis, route, rlen, argc, argv, lens, reply_cb, op);
	if (rc != 0)
		free(op);
	return rc;
}

static int rb_get(void *b, enum jc_rb_kind kind, const uint8_t key[16], jc_rb_cb cb, void *arg)
{
	char vkey[48];
	name_of(kind, key, "", vkey);
	const char *argv[] = {"GET", vkey};
	return send_cmd(b, OP_GET, 2, argv, NULL, cb, arg);
}

static int rb_lock(void *p, const uint8_t key[16], jc_rb_cb cb, void *arg)
{
	struct rb *b = p;
	char lkey[48], px[24];
	name_of(JC_RB_VALUE, key, ":lock", lkey);
	snprintf(px, sizeof(px), "%d", LOCK_MS);
	const char *set[] = {"SET", lkey, b->lock_id, "NX", "PX", px};
	const char *exists[] = {"EXISTS", lkey};
	return send_cmd(b, OP_LOCK, b->read_only ? 2 : 6, b->read_only ? exists : set, NULL, cb,
			arg);
}

/* A lock script's end: only a transport failure is worth reporting. */
static void script_cb(void *arg, redisReply *reply, const char *why)
{
	struct rb *b = arg;
	if (!b->closing && !reply)
		b->failed(b->failed_arg, "lock", why);
}

static void lock_script(struct rb *b, const uint8_t key[16], const char *script, const char *extra)
{
	char lkey[48];
	name_of(JC_RB_VALUE, key, ":lock", lkey);
	const char *argv[] = {"EVAL", script, "1", lkey, b->lock_id, extra};
	if (!b->closing)
		jc__redis_command(b->redis, lkey, strlen(lkey), extra ? 6 : 5, argv, NULL,
				  script_cb, b);
}

static void rb_renew(void *b, const uint8_t key[16])
{
	char ms[16];
	snprintf(ms, sizeof(ms), "%d", LOCK_MS);
	lock_script(b, key, renew_lua, ms);
}

static void rb_unlock(void *b, const uint8_t key[16])
{
	lock_script(b, key, release_lua, NULL);
}

static int rb_put(void *p, enum jc_rb_kind kind, const uint8_t key[16], uint8_t *val, size_t len,
		  int unlock, jc_rb_cb cb, void *arg)
{
	struct rb *b = p;
	char vkey[48], px[24];
	name_of(kind, key, "", vkey);
	snprintf(px, sizeof(px), "%lld", (long long)b->ttl_ms);
	const char *argv[] = {"SET", vkey, (const char *)val, "PX", px};
	const size_t lens[] = {3, strlen(vkey), len, 2, strlen(px)};
	int rc = send_cmd(b, OP_PUT, 5, argv, lens, cb, arg); /* the command is copied */
	free(val);
	/* The lock goes after the value, on the same connection (hash tag). */
	if (rc == 0 && unlock)
		rb_unlock(b, key);
	return rc;
}

static int rb_probe(void *p, int write, jc_rb_cb cb, void *arg)
{
	struct rb *b = p;
	if (!write) {
		jc__redis_refresh(b->redis);
		const char *argv[] = {"PING"};
		return send_cmd(b, OP_PROBE, 1, argv, NULL, cb, arg);
	}
	char pkey[300], host[256] = "?";
	gethostname(host, sizeof(host) - 1);
	snprintf(pkey, sizeof(pkey), "jc:probe:%s:%d", host, (int)getpid());
	const char *argv[] = {"SET", pkey, "1", "PX", "60000"};
	return send_cmd(b, OP_PROBE_WRITE, 5, argv, NULL, cb, arg);
}

static void rb_info(void *p, struct jc_rb_info *out)
{
	struct rb *b = p;
	out->read_only = b->read_only;
	out->masters = jc__redis_masters(b->redis);
}

static void rb_close(void *p)
{
	struct rb *b = p;
	b->closing = 1;
	jc__redis_close(b->redis); /* every waiting command's callback runs now */
	free(b);
}

const struct jc_remote_backend jc__remote_redis = {
    .name = "redis",
    .claims = claims,
    .check = check,
    .open = rb_open,
    .get = rb_get,
    .lock = rb_lock,
    .renew = rb_renew,
    .unlock = rb_unlock,
    .put = rb_put,
    .probe = rb_probe,
    .info = rb_info,
    .close = rb_close,
};
