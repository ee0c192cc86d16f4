/* SPDX-License-Identifier: MIT */
/* Kept requests (core/kept.h): the encoding round-trips every field a
 * compile needs, drops those that are not the request's own, and hostile
 * bytes are refused, never misread; the map that finds them by content
 * (core/idmap.h) returns every id of a hash, across growth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <cmocka.h>

#include "core/idmap.h"
#include "core/kept.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

static void fill(struct jc_req *r)
{
	static const char src[] =
	    "#include \"v.h\"\nextern \"C\" __global__ void k(int *p) { *p = V; }\n";
	memset(r, 0, sizeof(*r));
	r->job = JC_JOB_COMPILE;
	r->output = JC_OUTPUT_CUBIN;
	r->arch = strdup("sm_90");
	r->source_name = strdup("k.cu");
	r->source = (uint8_t *)strdup(src);
	r->source_size = strlen(src);
	assert_int_equal(jc__blob_push(&r->headers, &r->n_headers, "v.h", "#define V 3\n", 12, 0),
			 0);
	assert_int_equal(jc__strv_push(&r->options, "-default-device"), 0);
	assert_int_equal(jc__strv_push(&r->include_dirs, "/opt/include"), 0);
	assert_int_equal(jc__strv_push(&r->name_exprs, "&k"), 0);
	r->app_abi = strdup("app/1");
	r->test_fault = JC_FAULT_CRASH;
	r->reject_reason = JC_REJECT_CORRUPT;
	memset(r->reject_object, 7, 16);
	r->reject_message = strdup("bad");
}

/* fill(r), then its kept encoding into *z (malloc'd) and *len. */
static void encoded(struct jc_req *r, uint8_t **z, size_t *len)
{
	fill(r);
	assert_int_equal(jc__kept_encode(r, z, len), 0);
}

static void test_round_trip(void **state)
{
	(void)state;
	struct jc_req r, back;
	uint8_t *z;
	size_t len;
	encoded(&r, &z, &len);
	assert_int_equal(jc__kept_decode(z, len, &back), 0);
	assert_string_equal(back.arch, "sm_90");
	assert_string_equal(back.source_name, "k.cu");
	assert_int_equal(back.source_size, r.source_size);
	assert_memory_equal(back.source, r.source, r.source_size);
	assert_int_equal(back.n_headers, 1);
	assert_string_equal(back.headers[0].name, "v.h");
	assert_string_equal(back.options.v[0], "-default-device");
	assert_string_equal(back.include_dirs.v[0], "/opt/include");
	assert_string_equal(back.name_exprs.v[0], "&k");
	assert_string_equal(back.app_abi, "app/1");
	/* not the request's own: left out */
	assert_int_equal(back.test_fault, 0);
	assert_int_equal(back.reject_reason, 0);
	assert_null(back.reject_message);
	jc__req_clear(&back);
	/* the same request, the same bytes (one object for every entry it made) */
	uint8_t *z2;
	size_t len2;
	assert_int_equal(jc__kept_encode(&r, &z2, &len2), 0);
	assert_int_equal(len2, len);
	assert_memory_equal(z2, z, len);
	free(z2);
	free(z);
	jc__req_clear(&r);
}

static void test_hostile(void **state)
{
	(void)state;
	struct jc_req r, back;
	uint8_t *z;
	size_t len;
	encoded(&r, &z, &len);
	/* truncated, flipped, garbage */
	assert_int_equal(jc__kept_decode(z, len - 1, &back), JC_ECORRUPT);
	for (size_t i = 0; i < len; i += 7) {
		z[i] ^= 0x5a;
		int rc = jc__kept_decode(z, len, &back);
		if (rc == 0)
			jc__req_clear(&back); /* a flip zstd's frame accepts and the codec reads */
		else
			assert_true(rc == JC_ECORRUPT || rc == JC_ETOOBIG);
		z[i] ^= 0x5a;
	}
	assert_int_equal(jc__kept_decode((const uint8_t *)"hello", 5, &back), JC_ECORRUPT);
	/* a well-formed zstd frame of another message: not a request */
	struct jc_buf b = {0};
	assert_int_equal(jc__encode_hello(&b, JC_MSG_HELLO, 2, "x"), 0);
	uint8_t out[256];
	size_t n = ZSTD_compress(out, sizeof(out), b.data, b.len, 1);
	assert_false(ZSTD_isError(n));
	assert_int_equal(jc__kept_decode(out, n, &back), JC_ECORRUPT);
	jc__buf_free(&b);
	free(z);
	jc__req_clear(&r);
}

/* Every id of a hash, once each, whatever else shares its probe run (ids
 * of other hashes, a hash 0, growth from 64 slots to thousands); none for
 * an absent hash or an empty map. */
static void test_idmap(void **state)
{
	(void)state;
	struct jc_idmap m = {0};
	size_t pos = 0;
	int64_t id;
	assert_int_equal(jc__idmap_next(&m, 7, &pos, &id), 0);
	enum { N = 5000 };
	for (int64_t i = 1; i <= N; i++)
		/* hashes 0..99: 50 ids each; high bits only differ for some */
		assert_int_equal(jc__idmap_add(&m, (uint32_t)(i % 100) << (i % 2 ? 24 : 0), i), 0);
	assert_int_equal(m.n, N);
	assert_true(m.cap >= N * 4 / 3);
	for (uint32_t h = 0; h < 100; h++) {
		int seen[N + 1] = {0}, found = 0;
		for (int odd = 0; odd < 2; odd++) {
			uint32_t key = h << (odd ? 24 : 0);
			if (h == 0 && odd)
				continue; /* 0 << 24 is 0 too */
			pos = 0;
			while (jc__idmap_next(&m, key, &pos, &id)) {
				assert_true(id >= 1 && id <= N);
				assert_int_equal(seen[id], 0);
				seen[id] = 1;
				found++;
				assert_int_equal((uint32_t)(id % 100) << (id % 2 ? 24 : 0), key);
			}
		}
		assert_int_equal(found, N / 100);
	}
	pos = 0;
	assert_int_equal(jc__idmap_next(&m, 12345, &pos, &id), 0);
	jc__idmap_clear(&m);
	assert_int_equal(m.n, 0);
	pos = 0;
	assert_int_equal(jc__idmap_next(&m, 1, &pos, &id), 0);
	assert_int_equal(jc__idmap_add(&m, 1, 9), 0);
	pos = 0;
	assert_int_equal(jc__idmap_next(&m, 1, &pos, &id), 1);
	assert_int_equal(id, 9);
	jc__idmap_clear(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_hostile),
	    cmocka_unit_test(test_idmap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
