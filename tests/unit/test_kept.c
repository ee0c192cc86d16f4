/* SPDX-License-Identifier: MIT */
/* Kept requests (core/kept.h): the encoding round-trips every field a
 * compile needs, drops those that are not the request's own, and hostile
 * bytes are refused, never misread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <cmocka.h>

#include "core/kept.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

static void fill(struct jc_req *r)
{
	static const char src[] = "#include \"v.h\"\nextern \"C\" __global__ void k(int *p) { *p = V; }\n";
	memset(r, 0, sizeof(*r));
	r->job = JC_JOB_COMPILE;
	r->output = JC_OUTPUT_CUBIN;
	r->arch = strdup("sm_90");
	r->source_name = strdup("k.cu");
	r->source = (uint8_t *)strdup(src);
	r->source_size = strlen(src);
	assert_int_equal(jc__blob_push(&r->headers, &r->n_headers, "v.h", "#define V 3\n", 12, 0), 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_hostile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
