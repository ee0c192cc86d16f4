/* SPDX-License-Identifier: MIT */
/*
 * The remote tier against a real redis-server (started here on a Unix socket
 * or a free loopback port in a mkdtemp directory): daemons with separate
 * cache directories sharing one Redis, tampered values, read-only mode,
 * Redis killed, stopped (SIGSTOP) and full under load, and the fleet single
 * flight. Every artifact served is compared with NVRTC's own output for the
 * source, compiled in this process. Exits 77 when redis-server is absent.
 *
 * Helpers are this binary run again as `--helper client ...` (tests/lib/variants.h).
 */
#include <arpa/inet.h>
#include <fcntl.h>
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>
#include <cmocka.h>

#include "client/client_internal.h"
#include "core/manifest.h"
#include "daemon/remote.h"
#include "redis_fx.h"
#include "tests/lib/test.h"
#include "tests/lib/variants.h"

#define MAX_DAEMONS 4

struct rfx {
	struct jct_fx *fx; /* references, temp root */
	struct jtl_daemon d[MAX_DAEMONS];
	struct jct_redis redis;	     /* one server, or ... */
	struct jct_cluster *cluster; /* ... a cluster (NULL for one server) */
	const char *url;	     /* --remote of either */
	char secret[2][320];	     /* two secret files */
};

enum { ON_UNIX = 0, ON_TCP = 1, ON_CLUSTER = 2 };

static struct rfx *rfx_new(void **state, const char *spec, int on, const char *const *redis_extra)
{
	struct rfx *x = calloc(1, sizeof(*x));
	void *fx;
	assert_non_null(x);
	jct_fx_new(&fx, spec);
	x->fx = fx;
	for (int i = 0; i < MAX_DAEMONS; i++)
		jct_daemon_init(&x->d[i]);
	for (int i = 0; i < 2; i++) {
		snprintf(x->secret[i], sizeof(x->secret[i]), "%s/secret%d", x->fx->d.dir, i);
		char s[64];
		snprintf(s, sizeof(s), "fleet secret number %d, 32+ bytes long!\n", i);
		jct_write_file(x->secret[i], s, strlen(s));
		chmod(x->secret[i], 0600);
	}
	if (on == ON_CLUSTER) {
		x->cluster = calloc(1, sizeof(*x->cluster));
		assert_non_null(x->cluster);
		*state = x;
		jct_cluster_start(x->cluster);
		x->url = x->cluster->url;
		return x;
	}
	jct_redis_start(&x->redis, x->fx->d.dir, on == ON_TCP, redis_extra);
	x->url = x->redis.url;
	*state = x;
	return x;
}

static int rfx_free(void **state)
{
	struct rfx *x = *state;
	if (!x)
		return 0; /* its setup failed first (and said why) */
	for (int i = 0; i < MAX_DAEMONS; i++)
		jct_daemon_cleanup(&x->d[i]);
	jct_redis_cleanup(&x->redis);
	if (x->cluster)
		jct_cluster_cleanup(x->cluster);
	free(x->cluster);
	void *fx = x->fx;
	jct_fx_free(&fx);
	free(x);
	return 0;
}

/* Starts daemon i on the fixture's Redis with more flags (NULL-terminated). */
static void start(struct rfx *x, int i, ...)
{
	const char *flags[24] = {"--remote", x->url, "--log-level", "info"};
	int n = 4, secret = 0;
	va_list ap;
	va_start(ap, i);
	for (const char *f; n < 22 && (f = va_arg(ap, const char *));) {
		secret |= strcmp(f, "--remote-secret-file") == 0;
		flags[n++] = f;
	}
	va_end(ap);
	if (!secret) /* the tests' own Redis: nobody else writes to it */
		flags[n++] = "--remote-unsigned";
	flags[n] = NULL;
	jct_daemon_start(&x->d[i], flags);
}

/* Fetches pool variant v from daemon d; checks it against NVRTC's output
 * (status, bytes, lowered name) and returns the cache status; the key's
 * hex goes to key (33 bytes) when not NULL. */
static int fetch(struct rfx *x, const struct jtl_daemon *d, int v, char *key)
{
	return jct_pool_fetch_from(&x->fx->pool, v, d, key);
}

/* Waits (at most 10 s) until stat key of d is at least min; returns it. */
static int64_t wait_stat(const struct jtl_daemon *d, const char *key, int64_t min)
{
	return jct_wait_stat(d, key, jct_ge, min, 10000);
}

/* The string stat key of d into out (outlen bytes). */
static void stat_str(const struct jtl_daemon *d, const char *key, char *out, size_t outlen)
{
	char *json = NULL, pat[96];
	const char *args[] = {"stats", "--json", NULL};
	assert_int_equal(jct_ctl(d, &json, NULL, args), 0);
	snprintf(pat, sizeof(pat), "\"%s\": \"", key);
	char *p = strstr(json, pat);
	assert_non_null(p);
	p += strlen(pat);
	size_t n = strcspn(p, "\"");
	snprintf(out, outlen, "%.*s", (int)n, p);
	free(json);
}

/* Waits (at most timeout_s) until d's remote_state is want; returns 1 if so. */
static int wait_state(const struct jtl_daemon *d, const char *want, double timeout_s)
{
	double end = jtl_now_s() + timeout_s;
	char st[32] = "";
	do {
		stat_str(d, "remote_state", st, sizeof(st));
		if (strcmp(st, want) == 0)
			return 1;
		usleep(50000);
	} while (jtl_now_s() < end);
	fprintf(stderr, "remote_state is %s, not %s\n", st, want);
	return 0;
}

/* Waits (at most 10 s) until d has an entry for key (hex): a remote hit is
 * stored just after it is served. */
static void wait_stored(const struct jtl_daemon *d, const char *key)
{
	const char *args[] = {"show", key, NULL};
	for (double end = jtl_now_s() + 10; jtl_now_s() < end; usleep(10000))
		if (jct_ctl(d, NULL, NULL, args) == 0)
			return;
	fail_msg("key %s not stored", key);
}

static void purge_all(const struct jtl_daemon *d)
{
	const char *args[] = {"purge", "--all", NULL};
	assert_int_equal(jct_ctl(d, NULL, NULL, args), 0);
}

/* The stored value of a cache key (hex) as a reply (caller frees); NULL reply
 * type nil when absent. */
static redisReply *value_of(struct rfx *x, const char *key)
{
	return jct_redis_cmd(&x->redis, "GET jc:{%s}", key);
}

static void set_value(struct rfx *x, const char *key, const void *v, size_t len)
{
	redisReply *r = jct_redis_cmd(&x->redis, "SET jc:{%s} %b", key, v, len);
	assert_int_equal(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
}

/* --- tests --------------------------------------------------------------- */

/* A compiles; B, with its own cache directory, is served the same bytes and
 * lowered names from Redis without compiling, then from its own cache. */
static void test_two_daemons(void **state)
{
	struct rfx *x = rfx_new(state, "0:0,0:1", ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	start(x, 0, NULL);
	start(x, 1, NULL);
	char key[33];
	assert_int_equal(fetch(x, a, 0, key), JC_MISS);
	assert_int_equal(jct_stat(a, "compiles"), 1);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	assert_int_equal(jct_stat(a, "remote_misses"), 1);
	/* The value: TTL about 30 days. */
	redisReply *ttl = jct_redis_cmd(&x->redis, "PTTL jc:{%s}", key);
	assert_true(ttl->integer > 29LL * 86400 * 1000 && ttl->integer <= 30LL * 86400 * 1000);
	freeReplyObject(ttl);

	assert_int_equal(fetch(x, b, 0, NULL), JC_REMOTE_HIT); /* served from Redis */
	assert_int_equal(jct_stat(b, "compiles"), 0);
	wait_stored(b, key);
	assert_int_equal(jct_stat(b, "remote_hits"), 1);
	assert_true(jct_stat(b, "remote_bytes_in") > 0);
	assert_int_equal(jct_stat(b, "remote_publishes"), 0); /* a remote hit is not sent back */
	assert_int_equal(fetch(x, b, 0, NULL), JC_HIT);
	assert_int_equal(jct_stat(b, "compiles"), 0);
	assert_int_equal(jct_stat(b, "remote_hits"), 1);
	/* And the other way round. */
	assert_int_equal(fetch(x, b, 1, NULL), JC_MISS);
	assert_int_equal(jct_stat(b, "compiles"), 1);
	assert_int_equal(wait_stat(b, "remote_publishes", 1), 1);
	assert_int_equal(fetch(x, a, 1, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(a, "compiles"), 1);
	assert_int_equal(jct_stat(a, "remote_hits"), 1);
	char st[32];
	stat_str(a, "remote_state", st, sizeof(st));
	assert_string_equal(st, "up");
	printf(
	    "two daemons: A compiled 1, B served from Redis with 0 compiles, then a local hit\n");
}

/*
 * Two tiers, Redis first and a shared directory second (the value there
 * only, written by W, which has the share alone): R misses in Redis, is
 * served from the share, and writes the value to Redis (promotion: the
 * same bytes, a fresh TTL, its fleet lock there released); C, on Redis
 * alone, is then served without compiling.
 */
static void test_promotion_from_share(void **state)
{
	struct rfx *x = rfx_new(state, "0:0", ON_UNIX, NULL);
	struct jtl_daemon *w = &x->d[0], *r = &x->d[1], *c = &x->d[2];
	char share[400], url[500], key[33], path[600];
	snprintf(share, sizeof(share), "%s/share", x->fx->d.dir);
	assert_int_equal(mkdir(share, 0755), 0);
	snprintf(url, sizeof(url), "file://%s", share);
	const char *wflags[] = {"--remote", url, "--remote-unsigned", NULL};
	jct_daemon_start(w, wflags);
	assert_int_equal(fetch(x, w, 0, key), JC_MISS);
	assert_int_equal(wait_stat(w, "remote_publishes", 1), 1);
	assert_int_equal(jct_redis_dbsize(&x->redis), 0);
	snprintf(path, sizeof(path), "%s/%.2s/%s.v", share, key, key);
	size_t flen = 0;
	uint8_t *file = jtl_read_file(path, &flen);
	assert_non_null(file);

	start(x, 1, "--remote", url, NULL); /* Redis, then the share */
	assert_int_equal(fetch(x, r, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(r, "compiles"), 0);
	assert_int_equal(jct_stat(r, "remote_hits"), 1);
	assert_int_equal(jct_stat(r, "remote_misses"), 0);
	assert_int_equal(wait_stat(r, "remote_publishes", 1), 1);
	redisReply *v = value_of(x, key);
	assert_int_equal(v->type, REDIS_REPLY_STRING);
	assert_int_equal((size_t)v->len, flen);
	assert_memory_equal(v->str, file, flen); /* the bytes as fetched */
	freeReplyObject(v);
	redisReply *ttl = jct_redis_cmd(&x->redis, "PTTL jc:{%s}", key);
	assert_true(ttl->integer > 29LL * 86400 * 1000);
	freeReplyObject(ttl);
	redisReply *lock = jct_redis_cmd(&x->redis, "EXISTS jc:{%s}:lock", key);
	assert_int_equal(lock->integer, 0);
	freeReplyObject(lock);

	start(x, 2, NULL);
	assert_int_equal(fetch(x, c, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(c, "compiles"), 0);
	free(file);
	printf("Redis then a share: served from the share, promoted to Redis (%zu bytes, same "
	       "bytes); a daemon on Redis alone compiled 0\n",
	       flen);
}

/* A name-free request (the NVRTC shim's) of src named name from d; its
 * cache status; the artifact's XXH3-64 into *hash. */
static int name_free_fetch(const struct jtl_daemon *d, const char *name, const char *src,
			   uint64_t *hash)
{
	jc_request *r = jct_request_src(name, src, "sm_90");
	assert_int_equal(jc__request_set_name_free(r), 0);
	jc_result *res = jct_compile(d, r, 0);
	size_t n;
	const void *data = jc_result_data(res, &n);
	*hash = XXH3_64bits(data, n);
	int st = (int)jc_result_cache_status(res);
	jc_result_free(res);
	jc_request_free(r);
	return st;
}

/*
 * Name-free requests across the fleet: a result without the name, compiled
 * by A for one name, is served from Redis by a fresh B for another name
 * (the free key, peeked first); one with the name (an assert's __FILE__)
 * is served by B for the same name only (the named key), and another name
 * compiles there with its own bytes; one with the name's last component
 * only (an anonymous namespace) for every name with that last component.
 */
static void test_name_free(void **state)
{
	struct rfx *x = rfx_new(state, "0:0", ON_UNIX, NULL);
	static const char plain[] = "extern \"C\" __global__ void k(int *o) { o[0] = 42; }\n";
	static const char named[] = "extern \"C\" __global__ void k(int *o) { o[0] = 1;\n"
				    "  __assertfail(\"bad\", __FILE__, 1, \"k\", 1); }\n";
	/* its internal name holds the name's last component only */
	static const char anon[] =
	    "namespace { __device__ __noinline__ int f(int x) { return 2 * x; } }\n"
	    "extern \"C\" __global__ void k(int *o) { o[0] = f(o[1]); }\n";
	/* daemon, program name, source, status; its bytes are step same's (-1:
	 * none), or differ from step other's (-1: none) */
	static const struct {
		int d;
		const char *name, *src;
		int status, same, other;
	} steps[] = {
	    {0, "/tmp/tmpA1/p_2.cubin.cu", plain, JC_MISS, -1, -1},
	    {1, "/tmp/tmpB1/p_2.cubin.cu", plain, JC_REMOTE_HIT, 0, -1}, /* the free key */
	    {0, "/tmp/tmpA2/n_2.cubin.cu", named, JC_MISS, -1, -1},
	    {1, "/tmp/tmpA2/n_2.cubin.cu", named, JC_REMOTE_HIT, 2, -1}, /* the named key */
	    {1, "/tmp/tmpB2/n_2.cubin.cu", named, JC_MISS, -1, 2},	 /* its own bytes */
	    {1, "/tmp/tmpA2/n_2.cubin.cu", named, JC_HIT, 2, -1},
	    {0, "/tmp/tmpB2/n_2.cubin.cu", named, JC_REMOTE_HIT, 4, -1},
	    {0, "/tmp/tmpA3/a_2.cubin.cu", anon, JC_MISS, -1, -1},
	    {1, "/tmp/tmpB3/a_2.cubin.cu", anon, JC_REMOTE_HIT, 7, -1}, /* the base name's key */
	    {1, "/tmp/tmpB3/b_2.cubin.cu", anon, JC_MISS, -1, 7},
	};
	enum { N = sizeof(steps) / sizeof(steps[0]) };
	uint64_t hash[N];
	int64_t pubs[2] = {0, 0};
	start(x, 0, NULL);
	start(x, 1, NULL);
	for (int i = 0; i < N; i++) {
		const struct jtl_daemon *d = &x->d[steps[i].d];
		int st = name_free_fetch(d, steps[i].name, steps[i].src, &hash[i]);
		if (st != steps[i].status)
			fail_msg("step %d (%s): cache status %d, wanted %d", i, steps[i].name, st,
				 steps[i].status);
		if (steps[i].same >= 0)
			assert_int_equal(hash[i], hash[steps[i].same]);
		if (steps[i].other >= 0)
			assert_int_not_equal(hash[i], hash[steps[i].other]);
		if (st == JC_MISS) { /* published before the next step asks */
			int64_t want = ++pubs[steps[i].d];
			assert_int_equal(wait_stat(d, "remote_publishes", want), want);
		}
	}
	assert_int_equal(jct_stat(&x->d[0], "compiles"), 3);
	assert_int_equal(jct_stat(&x->d[1], "compiles"), 2);
	assert_int_equal(jct_stat(&x->d[0], "name_free"), 1);
	assert_int_equal(jct_stat(&x->d[0], "name_bound"), 2);
	assert_int_equal(jct_stat(&x->d[1], "name_bound"), 2);
	printf("name-free: another name served from Redis; a result holding its name only for that "
	       "name\n");
}

/* d's cache purged, variant v asked for: its value in Redis is rejected, the
 * request compiles, and the result is published over the bad value (the
 * counts given are d's, advanced here). */
static void rejected_then_compiled(struct rfx *x, struct jtl_daemon *d, int v, int64_t *compiles,
				   int64_t *rejected, int64_t *pub)
{
	purge_all(d);
	assert_int_equal(fetch(x, d, v, NULL), JC_MISS);
	assert_int_equal(jct_stat(d, "compiles"), ++*compiles);
	assert_int_equal(jct_stat(d, "remote_rejected"), ++*rejected);
	++*pub;
	assert_int_equal(wait_stat(d, "remote_publishes", *pub), *pub);
}

/* Values changed in Redis are rejected, counted and logged once per key; the
 * request compiles (and the good value replaces the bad one). */
static void test_tamper(void **state)
{
	struct rfx *x = rfx_new(state, "0:0,0:1,0:2", ON_UNIX, NULL);
	struct jtl_daemon *b = &x->d[0], *c = &x->d[1], *u = &x->d[2];
	start(x, 0, "--remote-secret-file", x->secret[0], NULL);
	char k0[33], k1[33], k2[33];
	assert_int_equal(fetch(x, b, 0, k0), JC_MISS);
	assert_int_equal(fetch(x, b, 1, k1), JC_MISS);
	int64_t pub = wait_stat(b, "remote_publishes", 2);
	assert_int_equal(pub, 2);
	int64_t compiles = 2, rejected = 0;

	/* 1. A flipped byte in the middle. */
	redisReply *v = value_of(x, k0);
	assert_int_equal(v->type, REDIS_REPLY_STRING);
	v->str[v->len / 2] ^= 0x20;
	set_value(x, k0, v->str, v->len);
	freeReplyObject(v);
	rejected_then_compiled(x, b, 0, &compiles, &rejected, &pub);

	/* 2. Another key's (good, signed) value. */
	v = value_of(x, k1);
	set_value(x, k0, v->str, v->len);
	freeReplyObject(v);
	rejected_then_compiled(x, b, 0, &compiles, &rejected, &pub);

	/* 3. Truncated. */
	v = value_of(x, k0);
	set_value(x, k0, v->str, v->len - 7);
	freeReplyObject(v);
	rejected_then_compiled(x, b, 0, &compiles, &rejected, &pub);

	/* 4. Signed with another secret: C rejects B's value and writes its own,
	 * which B rejects. */
	start(x, 1, "--remote-secret-file", x->secret[1], NULL);
	int64_t c_compiles = 0, c_rejected = 0, c_pub = 0;
	rejected_then_compiled(x, c, 0, &c_compiles, &c_rejected, &c_pub);
	rejected_then_compiled(x, b, 0, &compiles, &rejected, &pub);

	/* 5. Unsigned: U (no secret) writes one, B rejects it. */
	start(x, 2, NULL);
	assert_int_equal(fetch(x, u, 2, k2), JC_MISS);
	assert_int_equal(wait_stat(u, "remote_publishes", 1), 1);
	rejected_then_compiled(x, b, 2, &compiles, &rejected, &pub);

	/* 6. Not a value at all. */
	set_value(x, k1, "hello", 5);
	rejected_then_compiled(x, b, 1, &compiles, &rejected, &pub);
	assert_int_equal(jct_stat(b, "remote_hits"), 0);

	/* Logged once per key, however often it was rejected; the secret never. */
	char line[96];
	snprintf(line, sizeof(line), "key %s: value from", k0);
	assert_int_equal(jct_log_count(b, line), 1);
	assert_int_equal(jct_log_count(b, "fleet secret"), 0);
	assert_int_equal(jct_log_count(b, ": value from"), 3); /* k0, k2, k1 */
	snprintf(line, sizeof(line), "key %s: value from", k2);
	assert_int_equal(jct_log_count(b, line), 1);
	assert_true(jct_log_count(b, "unsigned (a secret is configured)") == 1);
	printf("tamper: %lld values rejected (flipped byte, other key, truncated, other secret, "
	       "unsigned, garbage), %lld compiles, 0 served\n",
	       (long long)rejected, (long long)compiles);
}

/* A read-only daemon reads hits and writes nothing: no value, lock or probe. */
static void test_read_only(void **state)
{
	struct rfx *x = rfx_new(state, "0:0,0:1", ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *ro = &x->d[1];
	start(x, 0, NULL);
	char k1[33];
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	long long before = jct_redis_dbsize(&x->redis);
	start(x, 1, "--remote-read-only", NULL);
	assert_int_equal(fetch(x, ro, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(ro, "remote_hits"), 1);
	assert_int_equal(fetch(x, ro, 1, k1), JC_MISS);
	assert_int_equal(jct_stat(ro, "compiles"), 1);
	usleep(300000); /* a publish would have landed by now */
	assert_int_equal(jct_stat(ro, "remote_publishes"), 0);
	redisReply *e = jct_redis_cmd(&x->redis, "EXISTS jc:{%s} jc:{%s}:lock", k1, k1);
	assert_int_equal(e->integer, 0);
	freeReplyObject(e);
	assert_int_equal(jct_redis_dbsize(&x->redis), before);
	/* A writer's lock held (1.2 s to live): the reader waits for it, then
	 * compiles, still writing nothing. */
	purge_all(ro);
	redisReply *l = jct_redis_cmd(&x->redis, "SET jc:{%s}:lock writer:1:0 PX 1200", k1);
	freeReplyObject(l);
	double t = jtl_now_s();
	assert_int_equal(fetch(x, ro, 1, NULL), JC_MISS);
	assert_true(jtl_now_s() - t >= 0.8);
	assert_int_equal(jct_stat(ro, "compiles"), 2);
	redisReply *gone = jct_redis_cmd(&x->redis, "EXISTS jc:{%s} jc:{%s}:lock", k1, k1);
	assert_int_equal(gone->integer, 0); /* the lock expired; no value was written */
	freeReplyObject(gone);
	assert_int_equal(jct_redis_dbsize(&x->redis), before);
	char st[32];
	stat_str(ro, "remote_state", st, sizeof(st));
	assert_string_equal(st, "up");
	assert_int_equal(jct_stat(ro, "remote_read_only"), 1);
	printf(
	    "read-only: 1 remote hit, 2 compiles (one after waiting for a writer's lock), 0 keys "
	    "written (DBSIZE %lld before and after)\n",
	    before);
}

/* Redis SIGKILLed in the middle of a load of 16 client processes on each of
 * two daemons, and started again: no client error, no wrong byte; the tier
 * comes back by itself. */
static void test_killed_under_load(void **state)
{
	char spec[512];
	size_t n = 0;
	for (int i = 0; i < 24; i++)
		n += (size_t)snprintf(spec + n, sizeof(spec) - n, "0:%d,", 100 + i);
	n += (size_t)snprintf(spec + n, sizeof(spec) - n, "0:200");
	struct rfx *x = rfx_new(state, spec, ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	start(x, 0, "--remote-timeout-ms", "500", NULL);
	start(x, 1, "--remote-timeout-ms", "500", NULL);
	/* The load leaves out the last variant (the recovery check's). */
	char load[512];
	snprintf(load, sizeof(load), "%.*s", (int)(strrchr(spec, ',') - spec), spec);
	struct jct_clients ca, cb;
	double t0 = jtl_now_s();
	jct_clients_start(a, x->fx->refdir, load, 16, 150, 11, &ca);
	jct_clients_start(b, x->fx->refdir, load, 16, 150, 911, &cb);
	/* Redis is killed a moment into the load and started again 1.5 s later
	 * (or when the load ends); purges keep both daemons asking Redis. */
	usleep(100000);
	jct_redis_kill(&x->redis);
	double killed = jtl_now_s() - t0, restarted = -1;
	while (jct_clients_running(&ca) || jct_clients_running(&cb)) {
		purge_all(a);
		purge_all(b);
		if (restarted < 0 && jtl_now_s() - t0 > killed + 1.5) {
			jct_redis_restart(&x->redis);
			restarted = jtl_now_s() - t0;
		}
		usleep(20000);
	}
	if (restarted < 0) {
		jct_redis_restart(&x->redis);
		restarted = jtl_now_s() - t0;
	}
	double done = jtl_now_s() - t0;
	struct jct_tally ta, tb;
	jct_clients_finish(&ca, &ta);
	jct_clients_finish(&cb, &tb);
	printf("redis killed at %.1f s under load, back at %.1f s (load over at %.1f s): %llu "
	       "requests, %llu errors, "
	       "%llu wrong bytes; remote errors %lld + %lld, remote hits %lld + %lld; %.1f s\n",
	       killed, restarted, done, (unsigned long long)(ta.requests + tb.requests),
	       (unsigned long long)(ta.errors + tb.errors),
	       (unsigned long long)(ta.wrong + tb.wrong), (long long)jct_stat(a, "remote_errors"),
	       (long long)jct_stat(b, "remote_errors"), (long long)jct_stat(a, "remote_hits"),
	       (long long)jct_stat(b, "remote_hits"), jtl_now_s() - t0);
	assert_int_equal(ta.failed_exits + tb.failed_exits, 0);
	assert_int_equal(ta.requests + tb.requests, 2 * 16 * 150);
	assert_int_equal(ta.errors + tb.errors, 0);
	assert_int_equal(ta.wrong + tb.wrong, 0);
	assert_true(jct_stat(a, "remote_errors") + jct_stat(b, "remote_errors") > 0);
	/* Recovery, by itself: both up again, and a new result goes through Redis. */
	assert_true(wait_state(a, "up", 12));
	assert_true(wait_state(b, "up", 12));
	int last = x->fx->pool.n - 1;
	int64_t pub = jct_stat(a, "remote_publishes"), hits = jct_stat(b, "remote_hits");
	assert_int_equal(fetch(x, a, last, NULL), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", pub + 1), pub + 1);
	assert_int_equal(fetch(x, b, last, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(b, "remote_hits"), hits + 1);
}

/* Redis stopped (SIGSTOP): every request completes within the op timeout
 * plus its compile; once down, requests do not wait at all; SIGCONT and the
 * tier is up again. */
static void test_stopped(void **state)
{
	struct rfx *x = rfx_new(state, "0:0,0:1,0:2,0:3,0:4,0:5", ON_TCP, NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	const double timeout = 0.3, slack = 0.5;
	start(x, 0, "--remote-timeout-ms", "300", NULL);
	start(x, 1, "--remote-timeout-ms", "300", NULL);
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	kill(x->redis.pid, SIGSTOP);
	double worst = 0;
	for (int v = 0; v < 6; v++) {
		const struct jct_pool *p = &x->fx->pool;
		jc_client *c = jct_connect(b);
		jc_request *r = jct_variant_request(&p->v[v]);
		jc_result *res = NULL;
		uint64_t wrong = 0;
		double t = jtl_now_s();
		int rc = jc_compile(c, r, &res);
		double took = jtl_now_s() - t;
		assert_int_equal(jct_ref_check(&p->ref[v], &p->v[v], rc, res, "stopped", &wrong),
				 0);
		double compile = (double)jc_result_time_ns(res, JC_TIME_COMPILE) / 1e9;
		printf("redis stopped: request %d took %.3f s (compile %.3f s)\n", v, took,
		       compile);
		assert_true(took <= timeout + compile + slack);
		if (took - compile > worst)
			worst = took - compile;
		jc_result_free(res);
		jc_request_free(r);
		jc_client_close(c);
	}
	assert_int_equal(jct_stat(b, "compiles"), 6);
	assert_int_equal(jct_stat(b, "remote_hits"), 0);
	assert_true(wait_state(b, "down", 3));
	kill(x->redis.pid, SIGCONT);
	assert_true(wait_state(b, "up", 12));
	assert_int_equal(jct_stat(b, "corrupt_objects"), 0);
	printf("redis stopped: worst wait beyond the compile %.3f s (op timeout %.1f s)\n", worst,
	       timeout);
}

/* Start-up does not need Redis: nothing listens on the URL's port. */
static void test_no_redis_at_start(void **state)
{
	struct rfx *x = rfx_new(state, "0:0,0:1", ON_TCP, NULL);
	struct jtl_daemon *a = &x->d[0];
	char url[sizeof(x->redis.url) + 4], key[33];
	snprintf(url, sizeof(url), "%s/3", x->redis.url); /* and database 3 */
	x->url = url;
	jct_redis_kill(&x->redis);
	start(x, 0, NULL);
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	assert_int_equal(fetch(x, a, 0, NULL), JC_HIT);
	assert_true(wait_state(a, "down", 5));
	assert_true(jct_stat(a, "remote_errors") >= 3);
	jct_redis_restart(&x->redis);
	assert_true(wait_state(a, "up", 12));
	assert_int_equal(fetch(x, a, 1, key), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	redisContext *c = jct_redis_connect(&x->redis);
	freeReplyObject(redisCommand(c, "SELECT 3"));
	redisReply *e = redisCommand(c, "EXISTS jc:{%s}", key);
	assert_int_equal(e->integer, 1);
	freeReplyObject(e);
	redisFree(c);
	assert_int_equal(jct_redis_dbsize(&x->redis), 0); /* nothing in database 0 */
}

/* AUTH from --remote-password-file; without it every command is refused
 * (NOAUTH, counted), and requests are served all the same. */
static void test_password(void **state)
{
	static const char *const auth[] = {"--requirepass", "s3cret-pass", NULL};
	struct rfx *x = rfx_new(state, "0:0", ON_UNIX, auth);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1], *c = &x->d[2];
	char pw[320];
	snprintf(pw, sizeof(pw), "%s/password", x->fx->d.dir);
	jct_write_file(pw, "s3cret-pass\n", 12);
	chmod(pw, 0600);
	start(x, 0, "--remote-password-file", pw, NULL);
	start(x, 1, "--remote-password-file", pw, NULL);
	start(x, 2, NULL);
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	assert_int_equal(fetch(x, b, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(b, "remote_hits"), 1);
	assert_int_equal(fetch(x, c, 0, NULL), JC_MISS);
	assert_int_equal(jct_stat(c, "compiles"), 1);
	assert_true(jct_stat(c, "remote_errors") >= 1);
	assert_int_equal(jct_stat(c, "remote_hits"), 0);
	assert_int_equal(jct_log_count(a, "s3cret"), 0);
	assert_int_equal(jct_log_count(c, "s3cret"), 0);
}

/* Redis full under noeviction: publishes fail (counted), nothing else. */
static void test_full(void **state)
{
	static const char *const full[] = {"--maxmemory-policy", "noeviction", NULL};
	struct rfx *x = rfx_new(state, "0:0,0:1,0:2,0:3", ON_UNIX, full);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	start(x, 0, NULL);
	start(x, 1, NULL);
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	/* Full: maxmemory set below what it holds, so that every write that
	 * needs memory is refused (as a fleet's Redis at its limit would). */
	static char junk[64 << 10];
	memset(junk, 'j', sizeof(junk));
	for (int i = 0; i < 16; i++)
		freeReplyObject(jct_redis_cmd(&x->redis, "SET junk:%d %b", i, junk, sizeof(junk)));
	redisReply *info = jct_redis_cmd(&x->redis, "INFO memory");
	const char *um = strstr(info->str, "used_memory:");
	assert_non_null(um);
	long long used = atoll(um + strlen("used_memory:"));
	freeReplyObject(info);
	freeReplyObject(jct_redis_cmd(&x->redis, "CONFIG SET maxmemory %lld", used / 2));
	redisReply *oom = jct_redis_cmd(&x->redis, "SET probe %b", junk, (size_t)100);
	assert_int_equal(oom->type, REDIS_REPLY_ERROR);
	assert_non_null(strstr(oom->str, "OOM"));
	freeReplyObject(oom);
	int64_t errors = jct_stat(a, "remote_errors");
	for (int v = 1; v < 4; v++)
		assert_int_equal(fetch(x, a, v, NULL), JC_MISS);
	usleep(300000);
	assert_int_equal(jct_stat(a, "remote_publishes"), 1);
	assert_true(jct_stat(a, "remote_errors") >= errors + 3);
	char st[32];
	stat_str(a, "remote_state", st, sizeof(st));
	assert_string_equal(st, "up"); /* the server answers: no back-off */
	/* Reads still work: B gets the value stored before Redis filled up. */
	assert_int_equal(fetch(x, b, 0, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(b, "remote_hits"), 1);
	assert_int_equal(fetch(x, b, 1, NULL), JC_MISS);
	assert_int_equal(jct_stat(b, "compiles"), 1);
	printf("redis full: 3 publishes refused (remote_errors %lld), every request served\n",
	       (long long)jct_stat(a, "remote_errors"));
}

/* A lock whose holder died (taken here, never released, 1.5 s to live):
 * the daemon waits for it to expire, then takes it and compiles. */
static void test_dead_holder(void **state)
{
	struct rfx *x = rfx_new(state, "0:0", ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *n = &x->d[1];
	char key[33];
	jct_daemon_start(n, NULL); /* no remote: the key alone */
	assert_int_equal(fetch(x, n, 0, key), JC_MISS);
	jtl_daemon_stop(n);
	/* timed from the lock's SET: the daemon's start (slow on a loaded
	 * machine) comes out of the lock's 1.5 s, not on top of it */
	double t = jtl_now_s();
	redisReply *l = jct_redis_cmd(&x->redis, "SET jc:{%s}:lock dead-host:1:0 PX 1500", key);
	assert_int_equal(l->type, REDIS_REPLY_STATUS);
	freeReplyObject(l);
	start(x, 0, NULL);
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	double took = jtl_now_s() - t;
	printf("dead lock holder: served %.2f s after the lock was set (it had 1.5 s to live)\n",
	       took);
	assert_true(took >= 1.45 && took < 1.5 + 10.0);
	assert_int_equal(jct_stat(a, "compiles"), 1);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	redisReply *e = jct_redis_cmd(&x->redis, "EXISTS jc:{%s}:lock", key);
	assert_int_equal(e->integer, 0); /* released after the value */
	freeReplyObject(e);
}

/*
 * A peer that holds the fleet lock of a key forever (set here by hand, no
 * expiry) and never writes the value: a miss waited the compile timeout
 * + 10 s (130 s by default; 40 s with --compile-timeout 30, as here) before
 * compiling. Now at most --remote-lock-wait: 10 s by default, 1 s when set
 * (the bounds below are generous for a loaded machine).
 */
static void test_peer_holds_lock_forever(void **state)
{
	struct rfx *x = rfx_new(state, "0:0,0:1", ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1], *n = &x->d[2];
	char k0[33], k1[33];
	jct_daemon_start(n, NULL); /* no remote: the keys alone */
	assert_int_equal(fetch(x, n, 0, k0), JC_MISS);
	assert_int_equal(fetch(x, n, 1, k1), JC_MISS);
	jtl_daemon_stop(n);
	for (int i = 0; i < 2; i++) {
		redisReply *l =
		    jct_redis_cmd(&x->redis, "SET jc:{%s}:lock peer-host:1:0", i ? k1 : k0);
		assert_int_equal(l->type, REDIS_REPLY_STATUS);
		freeReplyObject(l);
	}
	start(x, 0, "--compile-timeout", "30", NULL);
	double t = jtl_now_s();
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	double took = jtl_now_s() - t;
	start(x, 1, "--compile-timeout", "30", "--remote-lock-wait", "1", NULL);
	t = jtl_now_s();
	assert_int_equal(fetch(x, b, 1, NULL), JC_MISS);
	double took1 = jtl_now_s() - t;
	printf("a peer's lock held forever: served after %.2f s (default lock wait, 10 s), %.2f s "
	       "(--remote-lock-wait 1)\n",
	       took, took1);
	assert_true(took >= 9.5 && took < 10 + 15);
	assert_true(took1 >= 0.8 && took1 < 1 + 8);
	assert_int_equal(jct_stat(a, "compiles"), 1);
	assert_int_equal(jct_stat(b, "compiles"), 1);
	char line[64];
	snprintf(line, sizeof(line), "lock wait 1 s");
	assert_int_equal(jct_log_count(b, line), 1);
}

/*
 * Without a secret, a fleet's values are unsigned and anyone who can write
 * to Redis can forge one: --remote alone refuses to start, saying what to
 * give; with --remote-unsigned it starts and says so in its start-up line,
 * stats (remote_unsigned) and doctor; with a secret, signed.
 */
static void test_unsigned_needs_consent(void **state)
{
	struct rfx *x = rfx_new(state, "0:0", ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	const char *bare[] = {"--remote", x->url, NULL};
	jct_daemon_spawn(a, bare);
	assert_int_not_equal(jtl_daemon_wait(a), 0);
	assert_int_equal(jct_log_count(a, "without --remote-secret-file"), 1);
	assert_int_equal(jct_log_count(a, "--remote-unsigned to accept that"), 1);
	start(x, 0, NULL); /* start() adds --remote-unsigned */
	assert_int_equal(jct_log_count(a, "UNSIGNED values (--remote-unsigned)"), 1);
	assert_int_equal(jct_stat(a, "remote_unsigned"), 1);
	char *out = NULL;
	jct_ctl(a, &out, NULL, (const char *const[]){"doctor", NULL});
	assert_non_null(strstr(out, "values are unsigned (--remote-unsigned)"));
	free(out);
	start(x, 1, "--remote-secret-file", x->secret[0], NULL);
	assert_int_equal(jct_log_count(b, "signed values"), 1);
	assert_int_equal(jct_stat(b, "remote_unsigned"), 0);
	jct_ctl(b, &out, NULL, (const char *const[]){"doctor", NULL});
	assert_non_null(strstr(out, "values are signed"));
	free(out);
}

/* `jitcachectl compile` of saxpy for arch on d (output into dir): the
 * status line's first word into word (16 bytes) and its compiled_ms /
 * total_ms. */
static void ctl_compile_arch(const struct jtl_daemon *d, const char *dir, const char *arch,
			     char word[16], double *compiled_ms, double *total_ms)
{
	char out[400], *err = NULL;
	snprintf(out, sizeof(out), "%s/saxpy.out", dir);
	const char *args[] = {"compile",     jct_example("saxpy.cu"), "--arch", arch,
			      "--name-expr", "&saxpy<float>",	      "-o",	out,
			      NULL};
	free(jct_ctl_expect(d, 0, &err, args));
	assert_int_equal(sscanf(err, "%15s", word), 1);
	const char *c = strstr(err, "\tcompiled_ms="), *t = strstr(err, "\ttotal_ms=");
	assert_non_null(c);
	assert_non_null(t);
	assert_non_null(strstr(err, "\tserver_ms="));
	assert_null(strstr(err, "compile_ms=")); /* one compile time, the entry's */
	*compiled_ms = strtod(c + 13, NULL);
	*total_ms = strtod(t + 10, NULL);
	free(err);
}

static void ctl_compile(const struct jtl_daemon *d, const char *dir, char word[16],
			double *compiled_ms, double *total_ms)
{
	ctl_compile_arch(d, dir, "sm_90", word, compiled_ms, total_ms);
}

/* A multi-architecture request: its parts are published and fetched like
 * any result; the fatbin is assembled locally from them on each daemon. */
static void test_fatbin_parts(void **state)
{
	struct rfx *x = rfx_new(state, "0:0", ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	static const char *const exprs[] = {"&saxpy<float>", NULL};
	start(x, 0, NULL);
	start(x, 1, NULL);
	jc_request *r = jct_request("saxpy.cu", "sm_80,sm_90", exprs);
	jc_client *c = jct_connect(a);
	jc_result *ra = NULL;
	int rc = jc_compile(c, r, &ra);
	if (rc == JC_ENOTSUP || rc == JC_EINVAL) {
		fprintf(stderr, "no fatbin here: %s\n", jc_client_errmsg(c));
		jc_client_close(c);
		jc_request_free(r);
		skip();
	}
	assert_int_equal(rc, 0);
	jc_client_close(c);
	assert_int_equal(jc_result_output(ra), JC_FATBIN);
	assert_int_equal(jct_stat(a, "compiles"), 2);
	assert_int_equal(wait_stat(a, "remote_publishes", 2), 2); /* the two parts */
	assert_int_equal(jc_result_cache_status(ra), JC_MISS);
	jc_result *rb = jct_compile(b, r, 0);
	assert_int_equal(jc_result_output(rb), JC_FATBIN);
	assert_int_equal(jct_stat(b, "compiles"), 0);
	assert_int_equal(jct_stat(b, "remote_hits"), 2);
	/* Every part from Redis, none compiled: a remote hit (issue 22, item 5). */
	assert_int_equal(jc_result_cache_status(rb), JC_REMOTE_HIT);
	size_t na, nb;
	const void *da = jc_result_data(ra, &na), *db = jc_result_data(rb, &nb);
	assert_int_equal(na, nb);
	assert_memory_equal(da, db, na);
	assert_string_equal(jc_result_lowered_name(ra, "&saxpy<float>"),
			    jc_result_lowered_name(rb, "&saxpy<float>"));
	usleep(300000);
	assert_int_equal(jct_stat(b, "remote_publishes"), 0);
	/* jitcachectl says so too: a miss on A, a remote hit on a fresh C. */
	char word[16];
	double compiled, total;
	ctl_compile_arch(a, x->fx->d.dir, "sm_80,sm_90", word, &compiled, &total);
	assert_string_equal(word, "miss");
	assert_int_equal(wait_stat(a, "remote_publishes", 4), 4);
	start(x, 2, NULL);
	ctl_compile_arch(&x->d[2], x->fx->d.dir, "sm_80,sm_90", word, &compiled, &total);
	assert_string_equal(word, "remote-hit");
	assert_int_equal(jct_stat(&x->d[2], "compiles"), 0);
	jc_result_free(ra);
	jc_result_free(rb);
	jc_request_free(r);
}

/* Issue 22, item 5: the status word and times of `jitcachectl compile` and
 * of the C API: miss, then hit, on A; remote-hit on B (served from Redis,
 * no compile), then hit; each hit reports the original compile's time as
 * compiled_ms, and its own total. */
static void test_cli_status(void **state)
{
	struct rfx *x = rfx_new(state, "0:0", ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	start(x, 0, NULL);
	start(x, 1, NULL);
	char word[16];
	double compiled, total, c2, t2;
	ctl_compile(a, x->fx->d.dir, word, &compiled, &total);
	assert_string_equal(word, "miss");
	assert_int_equal(jct_stat(a, "compiles"), 1);
	assert_true(compiled > 0);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	ctl_compile(a, x->fx->d.dir, word, &c2, &t2);
	assert_string_equal(word, "hit");
	assert_true(c2 == compiled); /* the entry's, not this request's */
	ctl_compile(b, x->fx->d.dir, word, &c2, &t2);
	assert_string_equal(word, "remote-hit");
	assert_int_equal(jct_stat(b, "compiles"), 0);
	assert_int_equal(jct_stat(b, "remote_hits"), 1);
	assert_true(c2 == compiled); /* compiled on A, carried by the value */
	assert_true(t2 > 0);
	/* Stored on B (else the next request joins the flight that stores it). */
	assert_int_equal(wait_stat(b, "entries", 1), 1);
	/* The C API says the same (jc_result_cache_status, JC_TIME_COMPILE). */
	static const char *const exprs[] = {"&saxpy<float>", NULL};
	jc_request *r = jct_request("saxpy.cu", "sm_90", exprs);
	char dir[300];
	snprintf(dir, sizeof(dir), "%s", jct_example("saxpy.cu"));
	*strrchr(dir, '/') = '\0';
	jct_request_include(r, dir); /* as jitcachectl sends it: the same key */
	jc_result *res = jct_compile(b, r, 0);
	assert_int_equal(jc_result_cache_status(res), JC_HIT);
	double api_ms = (double)jc_result_time_ns(res, JC_TIME_COMPILE) / 1e6;
	assert_true(api_ms > compiled - 0.001 && api_ms < compiled + 0.001);
	jc_result_free(res);
	start(x, 2, NULL);
	res = jct_compile(&x->d[2], r, 0);
	assert_int_equal(jc_result_cache_status(res), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(&x->d[2], "compiles"), 0);
	assert_true(jc_result_time_ns(res, JC_TIME_COMPILE) > 0);
	jc_result_free(res);
	jc_request_free(r);
	printf("cli: miss, hit, remote-hit (compiled_ms %.3f each time)\n", compiled);
}

/* Issue 26: `jitcachectl import` on a machine whose daemon shares the
 * fleet tier counts what the tier served apart from what it compiled: A
 * compiles and exports; B, with an empty cache on the same Redis, imports
 * the bundle and compiles nothing. */
static void test_import_fleet(void **state)
{
	struct rfx *x = rfx_new(state, "0:0,0:1", ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	start(x, 0, NULL);
	start(x, 1, NULL);
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	assert_int_equal(fetch(x, a, 1, NULL), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 2), 2);
	char key[300], bundle[300];
	snprintf(key, sizeof(key), "%s/bundle.key", x->fx->d.dir);
	snprintf(bundle, sizeof(bundle), "%s/app.jcb", x->fx->d.dir);
	uint8_t secret[32];
	memset(secret, 'k', sizeof(secret));
	jct_write_file(key, secret, sizeof(secret));
	assert_int_equal(chmod(key, 0600), 0);
	char *out = jct_ctl_expect(
	    a, 0, NULL, (const char *const[]){"export", "--secret-file", key, "-o", bundle, NULL});
	jct_assert_has(out, "exported 2 requests");
	free(out);
	out = jct_ctl_expect(
	    b, 0, NULL,
	    (const char *const[]){"import", bundle, "--wait", "--secret-file", key, NULL});
	jct_assert_has(out, "imported 2 requests: 0 were there, 2 from the fleet tier, 0 compiled, "
			    "0 failed");
	free(out);
	assert_int_equal(jct_stat(b, "compiles"), 0);
	assert_int_equal(jct_stat(b, "remote_hits"), 2);
	/* and again, once B has stored both (a remote hit is stored just after
	 * it is served; a request meanwhile joins that flight): both are B's own */
	assert_int_equal(wait_stat(b, "entries", 2), 2);
	out = jct_ctl_expect(
	    b, 0, NULL,
	    (const char *const[]){"import", bundle, "--wait", "--secret-file", key, NULL});
	jct_assert_has(out, "imported 2 requests: 2 were there, 0 from the fleet tier, 0 compiled");
	free(out);
	assert_int_equal(jct_stat(b, "compiles"), 0);
}

/* The CUB example as `jitcachectl compile` sends it: the source's directory
 * as the first -I (NVRTC probes headers there that the scan does not
 * predict), -std=c++17 and -I CCCL. */
static jc_request *cub_request(char cccl[300])
{
	static const char *const exprs[] = {"sort_and_sum<128, 8>", NULL};
	const char *cuda =
	    getenv("CUDA_PATH") && *getenv("CUDA_PATH") ? getenv("CUDA_PATH") : "/usr/local/cuda";
	snprintf(cccl, 300, "%s/include/cccl", cuda);
	if (access(cccl, R_OK) != 0)
		return NULL;
	size_t size;
	uint8_t *src = jtl_read_file(jct_example("cub_sort.cu"), &size);
	assert_non_null(src);
	jc_request *r = jct_request_src("cub_sort.cu", (const char *)src, "sm_90");
	free(src);
	char dir[300];
	snprintf(dir, sizeof(dir), "%s", jct_example("cub_sort.cu"));
	*strrchr(dir, '/') = '\0';
	jct_request_include(r, dir);
	assert_int_equal(jc_request_add_name_expression(r, exprs[0]), 0);
	assert_int_equal(jc_request_add_option(r, "-std=c++17"), 0);
	jct_request_include(r, cccl);
	return r;
}

/* Daemon i's answer to r: an sm_90 cubin with ref's lowered name and, when
 * same (served, not compiled here), ref's very bytes. NVRTC's own output for
 * this kernel differs from compile to compile (internal-linkage names carry
 * a per-compile tag: _GLOBAL__N__00000000_11_cub_sort_cu_<hex>_<n>), so a
 * compile here is checked by its shape. Returns the cache status. */
static int cub_fetch(struct rfx *x, int i, const jc_request *r, const jc_result *ref, int same)
{
	jc_result *res = jct_compile(&x->d[i], r, 0);
	size_t n, nref;
	const void *data = jc_result_data(res, &n), *want = jc_result_data(ref, &nref);
	assert_int_equal(jct_cubin_sm(data, n), 90);
	if (same) {
		assert_int_equal(n, nref);
		assert_memory_equal(data, want, n);
	}
	assert_string_equal(jc_result_lowered_name(res, "sort_and_sum<128, 8>"),
			    jc_result_lowered_name(ref, "sort_and_sum<128, 8>"));
	int st = (int)jc_result_cache_status(res);
	jc_result_free(res);
	return st;
}

/* Daemon i again, with an empty cache directory (a fresh machine). */
static void fresh(struct rfx *x, int i, const char *secret)
{
	char why[256];
	if (x->d[i].pid > 0)
		jtl_daemon_stop(&x->d[i]);
	assert_int_equal(jtl_rmtree(x->d[i].cache, why, sizeof(why)), 0);
	start(x, i, "--remote-secret-file", secret, NULL);
}

/* The only dependency record in Redis: its Redis key into rkey (80 bytes). */
static void record_key(struct rfx *x, char rkey[80])
{
	redisReply *k = jct_redis_cmd(&x->redis, "KEYS jc:{*}:deps");
	assert_int_equal(k->type, REDIS_REPLY_ARRAY);
	assert_int_equal(k->elements, 1);
	snprintf(rkey, 80, "%s", k->element[0]->str);
	freeReplyObject(k);
}

/* Writes a record signed with secret file sf for the lookup key of rkey
 * holding set. */
static void put_record(struct rfx *x, const char *rkey, const char *sf,
		       const struct jc_inc_set *set)
{
	uint8_t lookup[16], *variant, *val;
	size_t vlen, len, slen;
	for (int i = 0; i < 16; i++)
		assert_int_equal(sscanf(rkey + 4 + 2 * i, "%2hhx", &lookup[i]), 1);
	uint8_t *secret = jtl_read_file(sf, &slen);
	assert_non_null(secret);
	while (slen && (secret[slen - 1] == '\n' || secret[slen - 1] == '\r'))
		slen--; /* as the daemon reads a secret file */
	assert_int_equal(jc__manifest_variant_encode(set, &variant, &vlen), 0);
	assert_int_equal(jc__remote_record_encode(lookup, variant, vlen, NULL, secret, slen,
						  64u << 20, &val, &len),
			 0);
	redisReply *rep = jct_redis_cmd(&x->redis, "SET %s %b", rkey, val, len);
	assert_int_equal(rep->type, REDIS_REPLY_STATUS);
	freeReplyObject(rep);
	free(variant);
	free(val);
	free(secret);
}

/* Issue 22, item 1: a key learnt from what NVRTC read (the CUB example: a
 * probe next to the source) reaches the fleet with its dependency record:
 * a second daemon and a fresh third serve it from Redis with 0 compiles; a
 * tampered or forged record is rejected and counted, and the request still
 * gets NVRTC's bytes. */
static void test_learned_record(void **state)
{
	struct rfx *x = rfx_new(state, "0:0", ON_UNIX, NULL);
	char cccl[300], rkey[80];
	jc_request *r = cub_request(cccl);
	if (!r)
		skip();
	const char *sf = x->secret[0];
	start(x, 0, "--remote-secret-file", sf, NULL);
	jc_result *ref = jct_compile(&x->d[0], r, 0);
	assert_int_equal(jc_result_cache_status(ref), JC_MISS);
	assert_int_equal(jct_stat(&x->d[0], "compiles"), 1);
	assert_int_equal(jct_stat(&x->d[0], "deps_learned"), 1); /* the scan missed a probe */
	assert_int_equal(wait_stat(&x->d[0], "remote_deps_published", 1), 1);
	assert_int_equal(wait_stat(&x->d[0], "remote_publishes", 1), 1);
	record_key(x, rkey);
	/* Its next request is keyed from the manifest, with no second scan. */
	assert_int_equal(cub_fetch(x, 0, r, ref, 1), JC_HIT);
	assert_int_equal(jct_stat(&x->d[0], "include_scans"), 1);

	/* A second daemon, then a fresh third: served from Redis, 0 compiles. */
	for (int i = 1; i <= 2; i++) {
		start(x, i, "--remote-secret-file", sf, NULL);
		assert_int_equal(cub_fetch(x, i, r, ref, 1), JC_REMOTE_HIT);
		assert_int_equal(jct_stat(&x->d[i], "compiles"), 0);
		assert_int_equal(jct_stat(&x->d[i], "remote_hits"), 1);
		assert_int_equal(jct_stat(&x->d[i], "remote_deps_used"), 1);
		wait_stored(&x->d[i], jc_result_key(ref));
		assert_int_equal(cub_fetch(x, i, r, ref, 1),
				 JC_HIT); /* keyed by its own manifest now */
		assert_int_equal(jct_stat(&x->d[i], "remote_hits"), 1);
		assert_int_equal(jct_stat(&x->d[i], "include_scans"), 1);
		assert_int_equal(jct_stat(&x->d[i], "include_manifest_hits"), 1);
	}

	/* A flipped byte: the MAC fails; rejected, counted, and the request
	 * compiles (and publishes a good record again). */
	struct jtl_daemon *d = &x->d[3];
	redisReply *v = jct_redis_cmd(&x->redis, "GET %s", rkey);
	assert_int_equal(v->type, REDIS_REPLY_STRING);
	v->str[v->len / 2] ^= 0x20;
	redisReply *set = jct_redis_cmd(&x->redis, "SET %s %b", rkey, v->str, v->len);
	freeReplyObject(set);
	freeReplyObject(v);
	fresh(x, 3, sf);
	assert_int_equal(cub_fetch(x, 3, r, ref, 0), JC_MISS);
	assert_int_equal(jct_stat(d, "remote_rejected"), 1);
	assert_int_equal(jct_stat(d, "remote_deps_used"), 0);
	assert_int_equal(jct_stat(d, "compiles"), 1);
	assert_int_equal(jct_log_count(d, "dependency record from"), 1);
	assert_int_equal(wait_stat(d, "remote_deps_published", 1), 1);

	/* Correctly signed, but naming a file the request does not declare
	 * (with its true hash, so that it would re-check): refused before any
	 * file is read, counted; the request is keyed by its scan. */
	size_t hn;
	uint8_t *host = jtl_read_file("/etc/hostname", &hn);
	assert_non_null(host);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(host, hn));
	free(host);
	struct jc_inc_set forged = {0};
	assert_int_equal(jc__inc_set_add(&forged, cccl, strlen(cccl), JC_INC_TOOLKIT, NULL), 0);
	assert_int_equal(jc__inc_set_add(&forged, "/etc/hostname", 13, JC_INC_FILE, c.digest), 0);
	assert_int_equal(jc__inc_set_finish(&forged), 0);
	put_record(x, rkey, sf, &forged);
	jc__inc_set_clear(&forged);
	fresh(x, 3, sf);
	assert_int_equal(cub_fetch(x, 3, r, ref, 0), JC_MISS);
	assert_int_equal(jct_stat(d, "remote_rejected"), 1);
	assert_int_equal(jct_stat(d, "remote_deps_used"), 0);
	assert_int_equal(jct_log_count(d, "rejected (names /etc/hostname, which the request does "
					  "not declare)"),
			 1);

	/* Admissible but false (a header next to the source that is not there
	 * claimed present): the local re-check fails, the scan keys it; no wrong
	 * bytes, the good record comes back with the compile. */
	char fake[400];
	snprintf(fake, sizeof(fake), "%s", jct_example("cub_sort.cu"));
	snprintf(strrchr(fake, '/'), sizeof(fake) - (size_t)(strrchr(fake, '/') - fake),
		 "/cub/block/block_exchange.cuh");
	assert_int_equal(jc__inc_set_add(&forged, cccl, strlen(cccl), JC_INC_TOOLKIT, NULL), 0);
	assert_int_equal(jc__inc_set_add(&forged, fake, strlen(fake), JC_INC_FILE, c.digest), 0);
	assert_int_equal(jc__inc_set_finish(&forged), 0);
	put_record(x, rkey, sf, &forged);
	jc__inc_set_clear(&forged);
	fresh(x, 3, sf);
	assert_int_equal(cub_fetch(x, 3, r, ref, 0), JC_MISS);
	assert_int_equal(jct_stat(d, "remote_deps_used"), 0);
	assert_int_equal(jct_stat(d, "remote_rejected"), 0);
	assert_int_equal(jct_stat(d, "compiles"), 1);
	assert_int_equal(wait_stat(d, "remote_deps_published", 1), 1);
	fresh(x, 3, sf);
	assert_int_equal(cub_fetch(x, 3, r, ref, 0), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(d, "compiles"), 0);
	assert_int_equal(jct_stat(d, "remote_deps_used"), 1);
	printf("learned key: B and a fresh C served the CUB example from Redis with 0 compiles; "
	       "tampered and forged records rejected, correct bytes served\n");
	jc_result_free(ref);
	jc_request_free(r);
}

/* 4 daemons x 16 client processes cold on one key: one compile in all. */
static void test_fleet_single_flight(void **state)
{
	struct rfx *x = rfx_new(state, "2:7", ON_UNIX, NULL);
	struct jct_clients cl[MAX_DAEMONS];
	for (int i = 0; i < MAX_DAEMONS; i++)
		start(x, i, NULL);
	double t0 = jtl_now_s();
	for (int i = 0; i < MAX_DAEMONS; i++)
		jct_clients_start(&x->d[i], x->fx->refdir, "2:7", 16, 1, 5 + (unsigned)i, &cl[i]);
	uint64_t requests = 0, errors = 0, wrong = 0;
	int64_t compiles = 0, hits = 0;
	for (int i = 0; i < MAX_DAEMONS; i++) {
		struct jct_tally t;
		jct_clients_finish(&cl[i], &t);
		assert_int_equal(t.failed_exits, 0);
		requests += t.requests;
		errors += t.errors;
		wrong += t.wrong;
		compiles += jct_stat(&x->d[i], "compiles");
		hits += jct_stat(&x->d[i], "remote_hits");
	}
	printf("fleet single flight: %d daemons, %llu requests, %llu errors, %llu wrong bytes, "
	       "%lld compile(s), %lld remote hits; %.1f s\n",
	       MAX_DAEMONS, (unsigned long long)requests, (unsigned long long)errors,
	       (unsigned long long)wrong, (long long)compiles, (long long)hits, jtl_now_s() - t0);
	assert_int_equal(requests, MAX_DAEMONS * 16);
	assert_int_equal(errors, 0);
	assert_int_equal(wrong, 0);
	assert_int_equal(compiles, 1);
	assert_int_equal(hits, MAX_DAEMONS - 1);
}

/* INFO clients' blocked_clients of the server (postponed clients count). */
static long long blocked_clients(struct rfx *x)
{
	redisReply *i = jct_redis_cmd(&x->redis, "INFO clients");
	const char *p = i->type == REDIS_REPLY_STRING ? strstr(i->str, "blocked_clients:") : NULL;
	long long n = p ? atoll(p + strlen("blocked_clients:")) : -1;
	freeReplyObject(i);
	return n;
}

/* Waits (at most 10 s) until n clients are postponed by CLIENT PAUSE. */
static void wait_blocked(struct rfx *x, long long n)
{
	for (double end = jtl_now_s() + 10; jtl_now_s() < end; usleep(5000))
		if (blocked_clients(x) >= n)
			return;
	fail_msg("%lld clients not postponed after 10 s", n);
}

/* The fleet lock's race, made certain: the holder's value lands between a
 * lookup's GET (nil) and its SET NX, after the holder released the lock.
 * CLIENT PAUSE WRITE lets the daemon's GET through and postpones the value
 * SET (sent first) and the daemon's SET NX (second), which run in that
 * order at CLIENT UNPAUSE. The lookup that took the lock looks once more:
 * a remote hit, no compile. */
static void test_lock_after_publish(void **state)
{
	struct rfx *x = rfx_new(state, "0:0", ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1];
	char key[33];
	start(x, 0, NULL);
	assert_int_equal(fetch(x, a, 0, key), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	redisReply *v = value_of(x, key);
	assert_int_equal(v->type, REDIS_REPLY_STRING);
	freeReplyObject(jct_redis_cmd(&x->redis, "DEL jc:{%s}", key));
	start(x, 1, "--remote-timeout-ms", "10000", NULL);
	assert_true(wait_state(b, "up", 10));
	assert_true(jct_wait_stat(b, "remote_write_ok", jct_ge, 1, 10000) >=
		    1); /* its probe SET done */
	freeReplyObject(jct_redis_cmd(&x->redis, "CLIENT PAUSE 20000 WRITE"));
	redisContext *holder = jct_redis_connect(&x->redis);
	int done = 0;
	redisAppendCommand(holder, "SET jc:{%s} %b PX 60000", key, v->str, v->len);
	while (!done)
		assert_int_equal(redisBufferWrite(holder, &done), REDIS_OK);
	wait_blocked(x, 1);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		jc_client *c = NULL;
		int rc = -1, status = 0;
		uint64_t wrong = 0;
		if (jc_client_connect(b->sock, &c) == 0 &&
		    jct_pool_fetch(&x->fx->pool, 0, c, "after publish", &rc, &status, &wrong) == 0)
			_exit(status);
		_exit(100);
	}
	wait_blocked(x, 2); /* b's SET NX, after its GET answered nil */
	freeReplyObject(jct_redis_cmd(&x->redis, "CLIENT UNPAUSE"));
	redisReply *set;
	assert_int_equal(redisGetReply(holder, (void **)&set), REDIS_OK);
	assert_int_equal(set->type, REDIS_REPLY_STATUS);
	freeReplyObject(set);
	redisFree(holder);
	freeReplyObject(v);
	int ws;
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	assert_true(WIFEXITED(ws));
	printf(
	    "value published between GET and SET NX: status %d (remote-hit %d), %lld compile(s)\n",
	    WEXITSTATUS(ws), JC_REMOTE_HIT, (long long)jct_stat(b, "compiles"));
	assert_int_equal(WEXITSTATUS(ws), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(b, "compiles"), 0);
	assert_int_equal(jct_stat(b, "remote_hits"), 1);
	redisReply *e = jct_redis_cmd(&x->redis, "EXISTS jc:{%s}:lock", key);
	for (double end = jtl_now_s() + 10; e->integer != 0 && jtl_now_s() < end; usleep(10000)) {
		freeReplyObject(e);
		e = jct_redis_cmd(&x->redis, "EXISTS jc:{%s}:lock", key);
	}
	assert_int_equal(e->integer, 0); /* the lock taken was released */
	freeReplyObject(e);
}

/* A TCP server on a free loopback port that answers anything with bytes
 * that are not RESP; returns its pid, its port in *port. */
static pid_t garbage_server(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		static const char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n\x01\x02garbage";
		for (;;) {
			int c = accept(fd, NULL, NULL);
			if (c >= 0) {
				char buf[512];
				if (read(c, buf, sizeof(buf)) > 0 &&
				    write(c, junk, sizeof(junk)) < 0)
					_exit(1);
				close(c);
			}
		}
	}
	close(fd);
	return pid;
}

/* Settings from a configuration file and SIGHUP; stats, Prometheus and
 * doctor show the tier; an oversized value is not written; a server that
 * answers garbage is a failure like any other. */
static void test_ops(void **state)
{
	struct rfx *x = rfx_new(state, "0:0,0:1,0:2", ON_UNIX, NULL);
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1], *c = &x->d[2];
	char conf[320], text[512], *out = NULL;
	snprintf(conf, sizeof(conf), "%s/jitcached.conf", x->fx->d.dir);
	snprintf(text, sizeof(text),
		 "[jitcached]\nremote = %s\nremote-unsigned = yes\n"
		 "remote-timeout-ms = 500\n",
		 x->url);
	jct_write_file(conf, text, strlen(text));
	const char *flags[] = {"--config", conf, "--log-level", "info", NULL};
	jct_daemon_start(a, flags);
	assert_int_equal(fetch(x, a, 0, NULL), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", 1), 1);
	assert_true(wait_state(a, "up", 5));
	const char *human[] = {"stats", NULL}, *prom[] = {"stats", "--prometheus", NULL};
	const char *doctor[] = {"doctor", NULL};
	assert_int_equal(jct_ctl(a, &out, NULL, human), 0);
	assert_non_null(strstr(out, "Remote tier:"));
	assert_non_null(strstr(out, x->url));
	free(out);
	assert_int_equal(jct_ctl(a, &out, NULL, prom), 0);
	assert_non_null(strstr(out, "jitcache_remote_state{state=\"up\"} 1"));
	assert_non_null(strstr(out, "jitcache_remote_publishes_total 1"));
	free(out);
	wait_stat(a, "remote_probe_rtt_us", 0);
	jct_ctl(a, &out, NULL, doctor); /* its exit code depends on the GPU, not on us */
	assert_non_null(strstr(out, "answers: round trip"));
	assert_non_null(strstr(out, "remote tier accepts writes"));
	free(out);
	/* SIGHUP: read-only from now on. */
	snprintf(text, sizeof(text),
		 "[jitcached]\nremote = %s\nremote-unsigned = yes\n"
		 "remote-read-only = yes\n",
		 x->url);
	jct_write_file(conf, text, strlen(text));
	kill(a->pid, SIGHUP);
	assert_int_equal(wait_stat(a, "remote_read_only", 1), 1);
	long long keys = jct_redis_dbsize(&x->redis);
	assert_int_equal(fetch(x, a, 1, NULL), JC_MISS);
	usleep(300000);
	assert_int_equal(jct_stat(a, "remote_publishes"), 1);
	jct_ctl(a, &out, NULL, doctor);
	assert_non_null(strstr(out, "read-only here"));
	free(out);

	/* Values over --remote-max-object stay local. */
	start(x, 1, "--remote-max-object", "100", NULL);
	assert_int_equal(fetch(x, b, 2, NULL), JC_MISS);
	usleep(300000);
	assert_int_equal(jct_stat(b, "remote_publishes"), 0);
	assert_true(jct_redis_dbsize(&x->redis) <= keys + 1); /* B's probe key, no value */

	/* Garbage instead of RESP: requests are served, the tier goes down. */
	int port;
	pid_t g = garbage_server(&port);
	char url[64];
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	const char *gflags[] = {"--remote",	     url, "--remote-timeout-ms", "300",
				"--remote-unsigned", NULL};
	jct_daemon_start(c, gflags);
	for (int v = 0; v < 3; v++) {
		double t = jtl_now_s();
		assert_int_equal(fetch(x, c, v, NULL), JC_MISS);
		assert_true(jtl_now_s() - t < 0.3 + 2.0);
	}
	assert_true(wait_state(c, "down", 5));
	assert_int_equal(jct_stat(c, "remote_hits"), 0);
	kill(g, SIGKILL);
	waitpid(g, NULL, 0);
}

/* --- Redis Cluster -------------------------------------------------------- */

#define CL_KEYS 24 /* variants 0..23 of the pool; 24 is the migrated one */

/* The node index of each master now, by CLUSTER SLOTS; returns how many. */
static int masters(struct rfx *x, int out[6])
{
	int n = 0;
	for (unsigned slot = 0; slot < 16384; slot += 64) {
		int m = jct_cluster_master_of(x->cluster, slot), seen = 0;
		for (int i = 0; i < n; i++)
			seen |= out[i] == m;
		if (m >= 0 && !seen)
			out[n++] = m;
	}
	return n;
}

static long long count_values(const struct jct_redis *r)
{
	redisReply *k = jct_redis_cmd(r, "KEYS jc:{*}");
	long long n = 0;
	for (size_t i = 0; i < k->elements; i++)
		n += strstr(k->element[i]->str, ":lock") == NULL;
	freeReplyObject(k);
	return n;
}

static unsigned keyslot(struct rfx *x, const char *key)
{
	redisReply *r = jct_redis_cmd(&x->cluster->node[0], "CLUSTER KEYSLOT jc:{%s}", key);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	unsigned slot = (unsigned)r->integer;
	freeReplyObject(r);
	return slot;
}

static void cluster_ok_cmd(const struct jct_redis *r, const char *fmt, const char *a, const char *b)
{
	redisReply *reply = jct_redis_cmd(r, fmt, a, b);
	if (reply->type == REDIS_REPLY_ERROR)
		fail_msg("%s on %d: %s", fmt, r->port, reply->str);
	freeReplyObject(reply);
}

/* Slot of key moved from its master to another while clients run, with
 * the value of a key in that slot written halfway (ASK) and read afterwards
 * by a daemon whose map is stale (MOVED). */
static void migrate_under_load(struct rfx *x, const char *spec)
{
	struct jct_cluster *c = x->cluster;
	struct jtl_daemon *a = &x->d[0], *b = &x->d[1], *n = &x->d[3];
	char key[33], src_id[64], dst_id[64], slot_s[16];
	jct_daemon_start(n, NULL); /* no remote: the key of variant 24 without storing it */
	assert_int_equal(fetch(x, n, CL_KEYS, key), JC_MISS);
	jtl_daemon_stop(n);
	unsigned slot = keyslot(x, key);
	snprintf(slot_s, sizeof(slot_s), "%u", slot);
	int m[6], nm = masters(x, m), src = jct_cluster_master_of(c, slot), dst = -1;
	for (int i = 0; i < nm && dst < 0; i++)
		if (m[i] != src)
			dst = m[i];
	assert_true(src >= 0 && dst >= 0);
	jct_cluster_id(c, src, src_id);
	jct_cluster_id(c, dst, dst_id);
	start(x, 1, NULL);
	struct jct_clients cl;
	jct_clients_start(b, x->fx->refdir, spec, 16, 6, 333, &cl);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %s IMPORTING %%s", slot_s);
	cluster_ok_cmd(&c->node[dst], cmd, src_id, NULL);
	snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %s MIGRATING %%s", slot_s);
	cluster_ok_cmd(&c->node[src], cmd, dst_id, NULL);
	/* Halfway: the new key's value goes to the importing node (ASK). */
	int st = fetch(x, b, CL_KEYS, NULL);
	assert_true(st == JC_MISS || st == JC_JOINED || st == JC_HIT);
	redisContext *ctx = jct_redis_connect(&c->node[dst]);
	int there = 0;
	for (double end = jtl_now_s() + 10; !there && jtl_now_s() < end; usleep(20000)) {
		freeReplyObject(redisCommand(ctx, "ASKING"));
		redisReply *e = redisCommand(ctx, "EXISTS jc:{%s}", key);
		there = e && e->type == REDIS_REPLY_INTEGER && e->integer == 1;
		freeReplyObject(e);
	}
	redisFree(ctx);
	assert_true(there);
	redisReply *keys = jct_redis_cmd(&c->node[src], "CLUSTER GETKEYSINSLOT %s 1000", slot_s);
	for (size_t i = 0; i < keys->elements; i++) {
		redisReply *mr = jct_redis_cmd(&c->node[src], "MIGRATE 127.0.0.1 %d %s 0 5000",
					       c->node[dst].port, keys->element[i]->str);
		freeReplyObject(mr);
	}
	freeReplyObject(keys);
	snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %s NODE %%s", slot_s);
	for (int i = 0; i < nm; i++)
		cluster_ok_cmd(&c->node[m[i]], cmd, dst_id, NULL);
	struct jct_tally t;
	jct_clients_finish(&cl, &t);
	int64_t errors = jct_stat(b, "remote_errors");
	printf("cluster: slot %u moved from node %d to %d under load: %llu requests, %llu errors, "
	       "%llu wrong bytes, %lld remote errors\n",
	       slot, src, dst, (unsigned long long)t.requests, (unsigned long long)t.errors,
	       (unsigned long long)t.wrong, (long long)errors);
	assert_int_equal(t.failed_exits, 0);
	assert_int_equal(t.errors, 0);
	assert_int_equal(t.wrong, 0);
	assert_int_equal(errors, 0); /* ASK and MOVED followed, never failed */
	/* The value sits on the new owner; A's map is stale: MOVED, then a hit. */
	redisReply *e = jct_redis_cmd(&c->node[dst], "EXISTS jc:{%s}", key);
	assert_int_equal(e->integer, 1);
	freeReplyObject(e);
	int64_t hits = jct_stat(a, "remote_hits");
	assert_int_equal(fetch(x, a, CL_KEYS, NULL), JC_REMOTE_HIT);
	assert_int_equal(jct_stat(a, "remote_hits"), hits + 1);
	assert_int_equal(jct_stat(a, "remote_errors"), 0);
}

/* A master killed during a load: the load never errs; once its replica is
 * promoted, every value is served from the cluster again. */
static void failover_under_load(struct rfx *x, const char *spec)
{
	struct jct_cluster *c = x->cluster;
	struct jtl_daemon *a = &x->d[0], *cd = &x->d[2], *n = &x->d[3];
	char key[33];
	/* The master of variant 0's key, once its replica holds what it holds. */
	assert_int_equal(fetch(x, a, 0, key), JC_HIT);
	int victim = jct_cluster_master_of(c, keyslot(x, key));
	long long held = jct_redis_dbsize(&c->node[victim]);
	double end = jtl_now_s() + 10;
	int synced = 0;
	while (!synced && jtl_now_s() < end) {
		for (int i = 0; i < 6; i++) {
			if (i == victim || c->node[i].pid < 0)
				continue;
			redisReply *r = jct_redis_cmd(&c->node[i], "ROLE");
			if (r->elements >= 3 && strcmp(r->element[0]->str, "slave") == 0 &&
			    r->element[2]->integer == c->node[victim].port &&
			    jct_redis_dbsize(&c->node[i]) == held)
				synced = 1;
			freeReplyObject(r);
		}
		usleep(50000);
	}
	assert_true(synced);
	start(x, 3, NULL);
	struct jct_clients cl;
	jct_clients_start(n, x->fx->refdir, spec, 16, 400, 4242, &cl);
	/* The master goes as the load starts; purges keep the load going to the
	 * cluster through the window. */
	jct_redis_kill(&c->node[victim]);
	double killed = jtl_now_s(), window = -1;
	int purges = 0;
	for (; jct_clients_running(&cl); purges++) {
		purge_all(n);
		if (window < 0 && jct_cluster_wait_ok(c, 0.02))
			window = jtl_now_s() - killed;
		usleep(20000);
	}
	if (window < 0) {
		assert_true(jct_cluster_wait_ok(c, 30));
		window = jtl_now_s() - killed;
	}
	struct jct_tally t;
	jct_clients_finish(&cl, &t);
	printf(
	    "cluster: master %d killed under load, replica promoted after %.1f s: %llu requests "
	    "(%d purges), %llu errors, %llu wrong bytes (remote hits %lld, remote errors %lld)\n",
	    victim, window, (unsigned long long)t.requests, purges, (unsigned long long)t.errors,
	    (unsigned long long)t.wrong, (long long)jct_stat(n, "remote_hits"),
	    (long long)jct_stat(n, "remote_errors"));
	assert_int_equal(t.failed_exits, 0);
	assert_int_equal(t.errors, 0);
	assert_int_equal(t.wrong, 0);
	/* After the window: a daemon that never saw the failover, then one that
	 * did, are served every value (the first after at most a map refresh). */
	start(x, 2, NULL);
	for (int pass = 0; pass < 2; pass++) {
		struct jtl_daemon *d = pass ? cd : a;
		purge_all(d);
		int64_t hits = jct_stat(d, "remote_hits"), compiles = jct_stat(d, "compiles");
		for (int v = 0; v <= CL_KEYS; v++) {
			int st = fetch(x, d, v, NULL); /* from Redis, or compiled after a refresh */
			assert_true(st == JC_REMOTE_HIT || st == JC_MISS);
		}
		hits = jct_stat(d, "remote_hits") - hits;
		compiles = jct_stat(d, "compiles") - compiles;
		printf("cluster after failover: %s daemon: %lld remote hits, %lld compiles of %d\n",
		       pass ? "a fresh" : "the first", (long long)hits, (long long)compiles,
		       CL_KEYS + 1);
		if (pass)
			assert_int_equal(hits, CL_KEYS + 1);
		else
			assert_true(hits >= CL_KEYS - 2);
	}
}

static void test_cluster(void **state)
{
	char spec[512];
	size_t n = 0;
	for (int i = 0; i <= CL_KEYS; i++)
		n += (size_t)snprintf(spec + n, sizeof(spec) - n, "%s0:%d", i ? "," : "", 300 + i);
	struct rfx *x = rfx_new(state, spec, ON_CLUSTER, NULL);
	struct jtl_daemon *a = &x->d[0];
	start(x, 0, NULL);
	/* Keys spread over the three masters. */
	for (int v = 0; v < CL_KEYS; v++)
		assert_int_equal(fetch(x, a, v, NULL), JC_MISS);
	assert_int_equal(wait_stat(a, "remote_publishes", CL_KEYS), CL_KEYS);
	int m[6], nm = masters(x, m);
	assert_int_equal(nm, 3);
	long long total = 0;
	for (int i = 0; i < nm; i++) {
		long long k = count_values(&x->cluster->node[m[i]]);
		printf("cluster: master %d (port %d) holds %lld values\n", m[i],
		       x->cluster->node[m[i]].port, k);
		assert_true(k > 0);
		total += k;
	}
	assert_int_equal(total, CL_KEYS);
	assert_int_equal(jct_stat(a, "remote_masters"), 3);
	migrate_under_load(x, spec);
	failover_under_load(x, spec);
}

int main(int argc, char **argv)
{
	if (argc == 10 && strcmp(argv[1], "--helper") == 0 && strcmp(argv[2], "client") == 0)
		return jct_helper_client(argv + 3);
	if (!jct_redis_available()) {
		printf("redis-server or redis-cli not found: skipped (scripts/setup.sh installs "
		       "them)\n");
		return 77;
	}
	if (argc == 2)
		cmocka_set_test_filter(argv[1]); /* one test by name (a rerun under load) */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_two_daemons, rfx_free),
	    cmocka_unit_test_teardown(test_promotion_from_share, rfx_free),
	    cmocka_unit_test_teardown(test_learned_record, rfx_free),
	    cmocka_unit_test_teardown(test_name_free, rfx_free),
	    cmocka_unit_test_teardown(test_cli_status, rfx_free),
	    cmocka_unit_test_teardown(test_import_fleet, rfx_free),
	    cmocka_unit_test_teardown(test_tamper, rfx_free),
	    cmocka_unit_test_teardown(test_read_only, rfx_free),
	    cmocka_unit_test_teardown(test_no_redis_at_start, rfx_free),
	    cmocka_unit_test_teardown(test_password, rfx_free),
	    cmocka_unit_test_teardown(test_stopped, rfx_free),
	    cmocka_unit_test_teardown(test_full, rfx_free),
	    cmocka_unit_test_teardown(test_killed_under_load, rfx_free),
	    cmocka_unit_test_teardown(test_dead_holder, rfx_free),
	    cmocka_unit_test_teardown(test_peer_holds_lock_forever, rfx_free),
	    cmocka_unit_test_teardown(test_unsigned_needs_consent, rfx_free),
	    cmocka_unit_test_teardown(test_fatbin_parts, rfx_free),
	    cmocka_unit_test_teardown(test_fleet_single_flight, rfx_free),
	    cmocka_unit_test_teardown(test_lock_after_publish, rfx_free),
	    cmocka_unit_test_teardown(test_ops, rfx_free),
	    cmocka_unit_test_teardown(test_cluster, rfx_free),
	};
	if (getenv("JCT_TEST_FILTER")) /* e.g. JCT_TEST_FILTER=test_learned_record */
		cmocka_set_test_filter(getenv("JCT_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
