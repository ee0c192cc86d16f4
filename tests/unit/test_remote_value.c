/* SPDX-License-Identifier: MIT */
/*
 * The remote tier's pure parts: --remote URLs, Redis Cluster key slots (the
 * CRC16 and hash tags of the Redis Cluster specification), and values:
 * round trip, and rejection of every single-byte change, every truncation,
 * another key, a missing or wrong signature and oversized values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include <cmocka.h>

#include "daemon/redis.h"
#include "daemon/remote.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

static void test_url(void **state)
{
	(void)state;
	struct jc_redis_url u;
	char err[256];
	assert_int_equal(jc__redis_url_parse("redis://127.0.0.1:6380/3", &u, err, sizeof(err)), 0);
	assert_int_equal(u.kind, JC_REDIS_TCP);
	assert_string_equal(u.seeds[0].host, "127.0.0.1");
	assert_int_equal(u.seeds[0].port, 6380);
	assert_int_equal(u.db, 3);
	assert_int_equal(jc__redis_url_parse("redis://cache.example", &u, err, sizeof(err)), 0);
	assert_int_equal(u.seeds[0].port, 6379);
	assert_int_equal(jc__redis_url_parse("redis://[::1]:7000", &u, err, sizeof(err)), 0);
	assert_string_equal(u.seeds[0].host, "::1");
	assert_int_equal(u.seeds[0].port, 7000);
	assert_int_equal(
	    jc__redis_url_parse("redis+unix:///run/redis/r.sock", &u, err, sizeof(err)), 0);
	assert_int_equal(u.kind, JC_REDIS_UNIX);
	assert_string_equal(u.path, "/run/redis/r.sock");
	assert_int_equal(jc__redis_url_parse("redis+unix:///r.sock?db=2", &u, err, sizeof(err)), 0);
	assert_int_equal(u.db, 2);
	assert_int_equal(jc__redis_url_parse("redis-cluster://10.0.0.1:7000,10.0.0.2:7001", &u, err,
					     sizeof(err)),
			 0);
	assert_int_equal(u.kind, JC_REDIS_CLUSTER);
	assert_int_equal(u.n_seeds, 2);
	assert_int_equal(u.seeds[1].port, 7001);
	static const char *const bad[] = {"",
					  "http://x",
					  "redis://",
					  "redis://h:0",
					  "redis://h:65536",
					  "redis://h:12x",
					  "redis://h/x",
					  "redis://h/",
					  "redis://a,b",
					  "redis+unix://rel/path",
					  "redis+unix:///p?db=x",
					  "redis-cluster://h:1/0",
					  "redis-cluster://h:1,,h:2",
					  "redis://[::1",
					  NULL};
	for (int i = 0; bad[i]; i++) {
		err[0] = '\0';
		assert_int_equal(jc__redis_url_parse(bad[i], &u, err, sizeof(err)), JC_EINVAL);
		assert_true(err[0] != '\0');
	}
}

static void test_slots(void **state)
{
	(void)state;
	/* Values from the Redis Cluster specification and redis-cli CLUSTER KEYSLOT. */
	assert_int_equal(jc__redis_slot("123456789", 9), 0x31C3 & 16383);
	assert_int_equal(jc__redis_slot("foo", 3), 12182);
	assert_int_equal(jc__redis_slot("{user1000}.following", 20),
			 jc__redis_slot("{user1000}.followers", 20));
	assert_int_equal(jc__redis_slot("{user1000}.following", 20), jc__redis_slot("user1000", 8));
	/* An empty tag hashes the whole key; only the first tag counts. */
	assert_int_equal(jc__redis_slot("foo{}{bar}", 10), 8363);
	assert_int_equal(jc__redis_slot("foo{{bar}}zap", 13), jc__redis_slot("{bar", 4));
	/* A value and its lock share a slot. */
	const char *v = "jc:{0123456789abcdef0123456789abcdef}";
	const char *l = "jc:{0123456789abcdef0123456789abcdef}:lock";
	assert_int_equal(jc__redis_slot(v, strlen(v)), jc__redis_slot(l, strlen(l)));
}

static const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t secret[] = "a secret of more than sixteen bytes";

/* A value of an artifact of n bytes for key k. */
static void make_value(const uint8_t k[16], size_t n, const uint8_t *sec, uint8_t **val,
		       size_t *len)
{
	uint8_t *art = malloc(n);
	for (size_t i = 0; i < n; i++)
		art[i] = (uint8_t)(i * 7 + i / 13);
	struct jc_lowered low = {(char *)"&saxpy<float>", (char *)"_Z5saxpyIfEvT_PKS0_PS0_y"};
	struct jc_res res;
	jc__res_init(&res);
	res.data = art;
	res.size = n;
	res.output = JC_OUTPUT_CUBIN;
	res.log = (char *)"compiled fine";
	res.lowered = &low;
	res.n_lowered = 1;
	res.compile_ns = 12345;
	memcpy(res.key, k, 16);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(art, n));
	memcpy(res.object, c.digest, 16);
	struct jc_buf frame = {0};
	assert_int_equal(jc__encode_res(&frame, &res), 0);
	assert_int_equal(jc__remote_value_encode(k, frame.data, frame.len, "arch=sm_90", sec,
						 sec ? sizeof(secret) : 0, 1u << 20, val, len),
			 0);
	jc__buf_free(&frame);
	free(art);
}

static int decode(const uint8_t *v, size_t len, const uint8_t *sec, struct jc_res *res)
{
	char why[160];
	int rc = jc__remote_value_decode(key, v, len, sec, sec ? sizeof(secret) : 0, 1u << 20, res,
					 why, sizeof(why));
	if (rc != 0)
		assert_true(why[0] != '\0');
	return rc;
}

static void test_round_trip(void **state)
{
	(void)state;
	for (int signed_ = 0; signed_ < 2; signed_++) {
		const uint8_t *sec = signed_ ? secret : NULL;
		uint8_t *v;
		size_t len;
		make_value(key, 5000, sec, &v, &len);
		struct jc_res res;
		assert_int_equal(decode(v, len, sec, &res), 0);
		assert_int_equal(res.size, 5000);
		assert_int_equal(res.data[4999], (uint8_t)(4999 * 7 + 4999 / 13));
		assert_int_equal(res.n_lowered, 1);
		assert_string_equal(res.lowered[0].lowered, "_Z5saxpyIfEvT_PKS0_PS0_y");
		assert_string_equal(res.log, "compiled fine");
		assert_int_equal(res.compile_ns, 12345);
		assert_memory_equal(res.key, key, 16);
		jc__res_clear(&res);
		free(v);
	}
}

/* Whether res is what make_value(key, 3000, ...) encoded. */
static int same_as_original(const struct jc_res *res)
{
	if (res->size != 3000 || res->n_lowered != 1 || strcmp(res->log, "compiled fine") != 0 ||
	    strcmp(res->lowered[0].expr, "&saxpy<float>") != 0 ||
	    strcmp(res->lowered[0].lowered, "_Z5saxpyIfEvT_PKS0_PS0_y") != 0 ||
	    res->compile_ns != 12345 || res->output != JC_OUTPUT_CUBIN)
		return 0;
	for (size_t i = 0; i < res->size; i++)
		if (res->data[i] != (uint8_t)(i * 7 + i / 13))
			return 0;
	return 1;
}

static void test_every_change_rejected(void **state)
{
	(void)state;
	for (int signed_ = 0; signed_ < 2; signed_++) {
		const uint8_t *sec = signed_ ? secret : NULL;
		uint8_t *v;
		size_t len;
		make_value(key, 3000, sec, &v, &len);
		uint32_t mlen = v[28] | (uint32_t)v[29] << 8;
		struct jc_res res;
		int accepted = 0;
		for (size_t i = 0; i < len; i++) {
			/* Unsigned, the meta text is for people and not checked. */
			if (!signed_ && i >= 48 && i < 48 + mlen)
				continue;
			for (int bit = 0; bit < 8; bit += 3) {
				v[i] ^= (uint8_t)(1u << bit);
				/* Rejected, or (a bit of the compressed stream the decoder
				 * ignores) decoded to exactly the same result. */
				if (decode(v, len, sec, &res) == 0) {
					accepted++;
					if (!same_as_original(&res))
						fail_msg(
						    "byte %zu bit %d changed, accepted with other "
						    "content (signed %d)",
						    i, bit, signed_);
					jc__res_clear(&res);
				}
				v[i] ^= (uint8_t)(1u << bit);
			}
		}
		/* Signed, nothing changed passes. */
		if (signed_)
			assert_int_equal(accepted, 0);
		for (size_t n = 0; n < len; n++)
			assert_int_equal(decode(v, n, sec, &res), JC_ECORRUPT);
		assert_int_equal(decode(v, len, sec, &res), 0);
		jc__res_clear(&res);
		free(v);
	}
}

static void test_trust(void **state)
{
	(void)state;
	uint8_t *v, *u, other[16];
	size_t len, ulen;
	struct jc_res res;
	char why[160];
	/* Another key's value, even a valid one. */
	memcpy(other, key, 16);
	other[15] ^= 1;
	make_value(other, 100, secret, &v, &len);
	assert_int_equal(decode(v, len, secret, &res), JC_ECORRUPT);
	free(v);
	/* Unsigned under a secret; another secret's signature. */
	make_value(key, 100, NULL, &u, &ulen);
	assert_int_equal(jc__remote_value_decode(key, u, ulen, secret, sizeof(secret), 1u << 20,
						 &res, why, sizeof(why)),
			 JC_ECORRUPT);
	assert_non_null(strstr(why, "unsigned"));
	make_value(key, 100, secret, &v, &len);
	static const uint8_t other_secret[] = "another secret, also long enough";
	assert_int_equal(jc__remote_value_decode(key, v, len, other_secret, sizeof(other_secret),
						 1u << 20, &res, why, sizeof(why)),
			 JC_ECORRUPT);
	assert_non_null(strstr(why, "signature"));
	/* Over the size limit, on either side. */
	assert_int_equal(jc__remote_value_decode(key, v, len, secret, sizeof(secret), len - 1, &res,
						 why, sizeof(why)),
			 JC_ECORRUPT);
	struct jc_buf frame = {0};
	struct jc_res r;
	jc__res_init(&r);
	r.data = v;
	r.size = len;
	assert_int_equal(jc__encode_res(&frame, &r), 0);
	uint8_t *big;
	size_t biglen;
	assert_int_equal(
	    jc__remote_value_encode(key, frame.data, frame.len, NULL, NULL, 0, 64, &big, &biglen),
	    JC_ETOOBIG);
	jc__buf_free(&frame);
	free(v);
	free(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_url),	       cmocka_unit_test(test_slots),
	    cmocka_unit_test(test_round_trip), cmocka_unit_test(test_every_change_rejected),
	    cmocka_unit_test(test_trust),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
