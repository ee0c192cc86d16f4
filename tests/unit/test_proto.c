/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the wire codec: round trips of every message, the byte
 * layout PROTOCOL.md promises, and rejection of malformed input (truncation
 * at every offset, bad fields, random and mutated payloads). The codec uses
 * libc malloc: run under ASan or valgrind to see leaks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "jitcache/jitcache.h"
#include "proto/io.h"
#include "proto/proto.h"

/* ---- helpers ------------------------------------------------------------ */

/* Checks the frame header at b->data + off and returns its payload. */
static const uint8_t *frame_payload(const struct jc_buf *b, size_t off, uint16_t want_type,
				    uint32_t *len)
{
	uint16_t type;
	assert_true(b->len >= off + JC_FRAME_HDR);
	assert_int_equal(jc__frame_header_decode(b->data + off, &type, len), 0);
	assert_int_equal(type, want_type);
	assert_true(b->len - off - JC_FRAME_HDR >= *len);
	return b->data + off + JC_FRAME_HDR;
}

/* Appends a raw field (for hand-made payloads). */
static void tlv(struct jc_buf *b, uint16_t tag, const void *v, uint32_t n)
{
	uint8_t h[6] = {(uint8_t)tag,	   (uint8_t)(tag >> 8), (uint8_t)n,
			(uint8_t)(n >> 8), (uint8_t)(n >> 16),	(uint8_t)(n >> 24)};
	size_t need = b->len + sizeof(h) + n;
	if (need > b->cap) {
		b->cap = need * 2;
		b->data = realloc(b->data, b->cap);
		assert_non_null(b->data);
	}
	memcpy(b->data + b->len, h, sizeof(h));
	if (n)
		memcpy(b->data + b->len + sizeof(h), v, n);
	b->len = need;
}

static void tlv_u32(struct jc_buf *b, uint16_t tag, uint32_t v)
{
	uint8_t w[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
	tlv(b, tag, w, 4);
}

static void tlv_str(struct jc_buf *b, uint16_t tag, const char *s)
{
	tlv(b, tag, s, (uint32_t)strlen(s));
}

static void assert_str_or_null(const char *a, const char *b)
{
	if (!a || !b)
		assert_ptr_equal(a, b);
	else
		assert_string_equal(a, b);
}

static void assert_bytes(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	assert_int_equal(na, nb);
	assert_true((a == NULL) == (b == NULL));
	if (na)
		assert_memory_equal(a, b, na);
}

static void assert_strv(const struct jc_strv *a, const struct jc_strv *b)
{
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++)
		assert_string_equal(a->v[i], b->v[i]);
}

static void assert_blobs(const struct jc_blob *a, size_t na, const struct jc_blob *b, size_t nb)
{
	assert_int_equal(na, nb);
	for (size_t i = 0; i < na; i++) {
		assert_string_equal(a[i].name, b[i].name);
		assert_bytes(a[i].data, a[i].size, b[i].data, b[i].size);
		assert_int_equal(a[i].type, b[i].type);
		assert_int_equal(b[i].data[b[i].size], 0); /* decoded: NUL after bytes */
	}
}

static void assert_req_equal(const struct jc_req *a, const struct jc_req *b)
{
	assert_int_equal(a->job, b->job);
	assert_int_equal(a->output, b->output);
	assert_str_or_null(a->arch, b->arch);
	assert_str_or_null(a->source_name, b->source_name);
	assert_bytes(a->source, a->source_size, b->source, b->source_size);
	assert_blobs(a->headers, a->n_headers, b->headers, b->n_headers);
	assert_strv(&a->options, &b->options);
	assert_strv(&a->include_dirs, &b->include_dirs);
	assert_strv(&a->name_exprs, &b->name_exprs);
	assert_blobs(a->link_inputs, a->n_link_inputs, b->link_inputs, b->n_link_inputs);
	assert_strv(&a->link_options, &b->link_options);
	assert_str_or_null(a->app_abi, b->app_abi);
	assert_int_equal(a->test_fault, b->test_fault);
	assert_memory_equal(a->reject_object, b->reject_object, 16);
	assert_int_equal(a->reject_reason, b->reject_reason);
	assert_str_or_null(a->reject_message, b->reject_message);
}

static void assert_res_equal(const struct jc_res *a, const struct jc_res *b)
{
	assert_int_equal(a->status, b->status);
	assert_int_equal(a->cache, b->cache);
	assert_memory_equal(a->key, b->key, 16);
	assert_memory_equal(a->object, b->object, 16);
	assert_int_equal(a->output, b->output);
	assert_int_equal(a->size, b->size);
	assert_true((a->data == NULL) == (b->data == NULL));
	if (a->data && a->size)
		assert_memory_equal(a->data, b->data, a->size);
	assert_str_or_null(a->log, b->log);
	assert_str_or_null(a->message, b->message);
	assert_int_equal(a->n_lowered, b->n_lowered);
	for (size_t i = 0; i < a->n_lowered; i++) {
		assert_string_equal(a->lowered[i].expr, b->lowered[i].expr);
		assert_string_equal(a->lowered[i].lowered, b->lowered[i].lowered);
	}
	assert_int_equal(a->compile_ns, b->compile_ns);
	assert_int_equal(a->server_ns, b->server_ns);
	assert_int_equal(a->n_deps, b->n_deps);
	for (size_t i = 0; i < a->n_deps; i++) {
		assert_string_equal(a->deps[i].path, b->deps[i].path);
		assert_int_equal(a->deps[i].kind, b->deps[i].kind);
		assert_int_equal(a->deps[i].dev, b->deps[i].dev);
		assert_int_equal(a->deps[i].ino, b->deps[i].ino);
		assert_int_equal(a->deps[i].size, b->deps[i].size);
		assert_int_equal(a->deps[i].mtime_ns, b->deps[i].mtime_ns);
		assert_int_equal(a->deps[i].ctime_ns, b->deps[i].ctime_ns);
	}
}

static const uint8_t binary[] = {0, 1, 2, 0, 0xff, 0x80, 0, '\n', 0};

/* A request with every field set; n repeats of each repeated field. */
static void fill_req(struct jc_req *r, size_t n)
{
	char s[64];
	memset(r, 0, sizeof(*r));
	r->job = JC_JOB_COMPILE_LINK;
	r->output = JC_OUTPUT_LTOIR;
	r->arch = strdup("sm_90a");
	r->source_name = strdup("saxpy.cu");
	r->source = malloc(sizeof(binary));
	memcpy(r->source, binary, sizeof(binary));
	r->source_size = sizeof(binary);
	for (size_t i = 0; i < n; i++) {
		snprintf(s, sizeof(s), "h%zu.cuh", i);
		assert_int_equal(jc__blob_push(&r->headers, &r->n_headers, i ? s : "", binary,
					       i % sizeof(binary), 0),
				 0);
		snprintf(s, sizeof(s), "-DN=%zu", i);
		assert_int_equal(jc__strv_push(&r->options, i == 1 ? "" : s), 0);
		snprintf(s, sizeof(s), "/inc/%zu", i);
		assert_int_equal(jc__strv_push(&r->include_dirs, s), 0);
		snprintf(s, sizeof(s), "&k<%zu>", i);
		assert_int_equal(jc__strv_push(&r->name_exprs, s), 0);
		snprintf(s, sizeof(s), "in%zu.ltoir", i);
		assert_int_equal(jc__blob_push(&r->link_inputs, &r->n_link_inputs, s, binary,
					       sizeof(binary), JC_INPUT_LTOIR + (uint32_t)(i % 3)),
				 0);
		snprintf(s, sizeof(s), "-O%zu", i % 4);
		assert_int_equal(jc__strv_push(&r->link_options, s), 0);
	}
	r->app_abi = strdup("");
	r->test_fault = JC_FAULT_HANG;
	memset(r->reject_object, 0xab, 16);
	r->reject_object[3] = 0;
	r->reject_reason = JC_REJECT_LOAD_FAILED;
	r->reject_message = strdup("CUDA_ERROR_INVALID_PTX");
}

static void fill_res(struct jc_res *r, size_t n, int with_data)
{
	char e[64], l[64];
	jc__res_init(r);
	r->status = JC_ECOMPILE;
	r->cache = JC_CACHE_NEGATIVE_HIT;
	for (int i = 0; i < 16; i++) {
		r->key[i] = (uint8_t)(i * 17);
		r->object[i] = (uint8_t)(255 - i);
	}
	r->output = JC_OUTPUT_PTX;
	r->size = sizeof(binary);
	if (with_data) {
		r->data = malloc(sizeof(binary));
		memcpy(r->data, binary, sizeof(binary));
	}
	r->log = strdup("");
	r->message = strdup("error: expected a \";\"");
	r->lowered = calloc(n ? n : 1, sizeof(*r->lowered));
	for (size_t i = 0; i < n; i++) {
		snprintf(e, sizeof(e), "&k<%zu>", i);
		snprintf(l, sizeof(l), "_Z1kILi%zuEEvv", i);
		r->lowered[i].expr = strdup(e);
		r->lowered[i].lowered = strdup(l);
	}
	r->n_lowered = n;
	r->compile_ns = UINT64_MAX - 1;
	r->server_ns = 1234567890123ull;
	/* What a worker recorded (tag 13): a file read, a probe, a refusal. */
	r->deps = calloc(3, sizeof(*r->deps));
	r->deps[0] =
	    (struct jc_dep){strdup("/inc/a.h"), JC_DEP_FILE, 2049, 1234, 17, -5, INT64_MAX};
	r->deps[1] = (struct jc_dep){strdup("/inc/b.h"), JC_DEP_ABSENT, 0, 0, 0, 0, 0};
	r->deps[2] = (struct jc_dep){strdup("/etc/passwd"), JC_DEP_DENIED, 0, 0, 0, 0, 0};
	r->n_deps = 3;
}

static void fill_reply(struct jc_admin_reply *a)
{
	struct jc_record *r;
	memset(a, 0, sizeof(*a));
	a->status = JC_EDENIED;
	a->message = strdup("");
	assert_int_equal(jc__reply_add_record(a, &r), 0);
	assert_int_equal(jc__record_add_int(r, "hits", 42), 0);
	assert_int_equal(jc__record_add_str(r, "nvrtc", "12.4"), 0);
	assert_int_equal(jc__record_add_int(r, "min", INT64_MIN), 0);
	assert_int_equal(jc__record_add_str(r, "", NULL), 0);
	assert_int_equal(jc__reply_add_record(a, &r), 0); /* empty record */
	for (int i = 0; i < 100; i++) {
		char k[33];
		assert_int_equal(jc__reply_add_record(a, &r), 0);
		snprintf(k, sizeof(k), "%032x", i);
		assert_int_equal(jc__record_add_str(r, "key", k), 0);
		assert_int_equal(jc__record_add_int(r, "size", -i), 0);
	}
}

/* Every decoder behind one signature; obj is freed by the matching clear. */
typedef int (*decode_fn)(const uint8_t *p, size_t len);

static int try_hello(const uint8_t *p, size_t len)
{
	uint32_t v;
	char *name = (char *)"x";
	int rc = jc__decode_hello(p, len, &v, &name);
	if (rc)
		assert_null(name);
	free(name);
	return rc;
}

static int try_error(const uint8_t *p, size_t len)
{
	int code;
	char *msg = (char *)"x";
	int rc = jc__decode_error(p, len, &code, &msg);
	if (rc)
		assert_null(msg);
	free(msg);
	return rc;
}

static int try_req(const uint8_t *p, size_t len)
{
	struct jc_req r;
	memset(&r, 0x5a, sizeof(r));
	int rc = jc__decode_req(p, len, &r);
	if (rc) {
		struct jc_req zero = {0};
		assert_memory_equal(&r, &zero, sizeof(r));
	}
	jc__req_clear(&r);
	return rc;
}

static int try_res(const uint8_t *p, size_t len)
{
	struct jc_res r;
	memset(&r, 0x5a, sizeof(r));
	int rc = jc__decode_res(p, len, &r);
	assert_int_equal(r.fd, -1);
	if (rc)
		assert_null(r.data);
	jc__res_clear(&r);
	return rc;
}

static int try_admin(const uint8_t *p, size_t len)
{
	struct jc_admin_req a;
	int rc = jc__decode_admin(p, len, &a);
	if (rc)
		assert_null(a.command);
	jc__admin_req_clear(&a);
	return rc;
}

static int try_reply(const uint8_t *p, size_t len)
{
	struct jc_admin_reply a;
	int rc = jc__decode_admin_reply(p, len, &a);
	if (rc)
		assert_int_equal(a.n_rec, 0);
	jc__admin_reply_clear(&a);
	return rc;
}

static const decode_fn decoders[] = {NULL,    try_hello, try_hello, try_req,
				     try_res, try_admin, try_reply, try_error};

/* Decodes every proper prefix of a valid payload: each must fail cleanly. */
static void assert_truncations_fail(const uint8_t *p, size_t len, decode_fn fn)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t *copy = malloc(i ? i : 1); /* exact size: ASan sees overreads */
		memcpy(copy, p, i);
		int rc = fn(copy, i);
		free(copy);
		if (rc != JC_EPROTO)
			fail_msg("prefix of %zu of %zu bytes: rc %d", i, len, rc);
	}
	assert_int_equal(fn(p, len), 0);
}

/* ---- round trips --------------------------------------------------------- */

static void test_req_roundtrip(void **state)
{
	(void)state;
	struct jc_req in, out;
	struct jc_buf b = {0}, b2 = {0};
	uint32_t len, len2;

	fill_req(&in, 300);
	assert_int_equal(jc__encode_req(&b, &in), 0);
	const uint8_t *p = frame_payload(&b, 0, JC_MSG_COMPILE, &len);
	assert_int_equal(jc__decode_req(p, len, &out), 0);
	assert_req_equal(&in, &out);
	assert_int_equal(out.source[out.source_size], 0);
	assert_string_equal(out.options.v[299], "-DN=299"); /* order kept */
	assert_string_equal(out.headers[0].name, "");

	/* Encoding is canonical: decoded and re-encoded gives the same bytes. */
	assert_int_equal(jc__encode_req(&b2, &out), 0);
	const uint8_t *p2 = frame_payload(&b2, 0, JC_MSG_COMPILE, &len2);
	assert_int_equal(len, len2);
	assert_memory_equal(p, p2, len);

	jc__req_clear(&in);
	jc__req_clear(&out);
	jc__buf_free(&b);
	jc__buf_free(&b2);
}

static void test_req_minimal(void **state)
{
	(void)state;
	struct jc_req in = {0}, out;
	struct jc_buf b = {0};
	uint32_t len;

	/* Only the required fields: NULL strings stay NULL. */
	in.job = JC_JOB_LINK;
	in.output = JC_OUTPUT_CUBIN;
	assert_int_equal(jc__encode_req(&b, &in), 0);
	const uint8_t *p = frame_payload(&b, 0, JC_MSG_COMPILE, &len);
	assert_int_equal(len, 2 * (6 + 4));
	assert_int_equal(jc__decode_req(p, len, &out), 0);
	assert_req_equal(&in, &out);
	assert_null(out.source);
	jc__req_clear(&out);

	/* A zero-size source is sent and comes back non-NULL and empty. */
	in.source = (uint8_t *)"";
	jc__buf_reset(&b);
	assert_int_equal(jc__encode_req(&b, &in), 0);
	p = frame_payload(&b, 0, JC_MSG_COMPILE, &len);
	assert_int_equal(jc__decode_req(p, len, &out), 0);
	assert_non_null(out.source);
	assert_int_equal(out.source_size, 0);
	jc__req_clear(&out);
	jc__buf_free(&b);
}

static void test_res_roundtrip(void **state)
{
	(void)state;
	struct jc_res in, out;
	struct jc_buf b = {0};
	uint32_t len;

	for (int with_data = 0; with_data < 2; with_data++) {
		fill_res(&in, 50, with_data);
		in.fd = 1000; /* never encoded */
		jc__buf_reset(&b);
		assert_int_equal(jc__encode_res(&b, &in), 0);
		const uint8_t *p = frame_payload(&b, 0, JC_MSG_RESULT, &len);
		assert_int_equal(jc__decode_res(p, len, &out), 0);
		assert_res_equal(&in, &out);
		assert_int_equal(out.fd, -1);
		if (with_data)
			assert_int_equal(out.data[out.size], 0);
		in.fd = -1;
		jc__res_clear(&in);
		jc__res_clear(&out);
	}

	/* A large size without data (artifact passed as a descriptor). */
	jc__res_init(&in);
	in.size = (size_t)5 << 32;
	jc__buf_reset(&b);
	assert_int_equal(jc__encode_res(&b, &in), 0);
	const uint8_t *p = frame_payload(&b, 0, JC_MSG_RESULT, &len);
	assert_int_equal(jc__decode_res(p, len, &out), 0);
	assert_int_equal(out.size, (size_t)5 << 32);
	assert_null(out.data);
	assert_null(out.log);
	jc__res_clear(&out);
	jc__buf_free(&b);
}

static void test_hello_error_admin_roundtrip(void **state)
{
	(void)state;
	struct jc_buf b = {0};
	uint32_t len, v;
	char *s;
	int code;
	size_t off;

	/* Several frames appended to one buffer. */
	assert_int_equal(jc__encode_hello(&b, JC_MSG_HELLO, JC_PROTO_VERSION, "libjitcache/0.1"),
			 0);
	off = b.len;
	assert_int_equal(jc__encode_hello(&b, JC_MSG_HELLO_OK, 7, NULL), 0);
	assert_int_equal(jc__encode_hello(&b, JC_MSG_ERROR, 1, "x"), JC_EINVAL);
	assert_int_equal(b.err, 0);

	const uint8_t *p = frame_payload(&b, 0, JC_MSG_HELLO, &len);
	assert_int_equal(jc__decode_hello(p, len, &v, &s), 0);
	assert_int_equal(v, JC_PROTO_VERSION);
	assert_string_equal(s, "libjitcache/0.1");
	free(s);
	p = frame_payload(&b, off, JC_MSG_HELLO_OK, &len);
	assert_int_equal(jc__decode_hello(p, len, &v, &s), 0);
	assert_int_equal(v, 7);
	assert_string_equal(s, "");
	free(s);

	jc__buf_reset(&b);
	assert_int_equal(jc__encode_error(&b, JC_ETIMEOUT, "compile ran past 60 s"), 0);
	p = frame_payload(&b, 0, JC_MSG_ERROR, &len);
	assert_int_equal(jc__decode_error(p, len, &code, &s), 0);
	assert_int_equal(code, JC_ETIMEOUT);
	assert_string_equal(s, "compile ran past 60 s");
	free(s);

	struct jc_admin_req a = {0}, a2;
	a.command = strdup("purge");
	jc__strv_push(&a.args, "--older-than");
	jc__strv_push(&a.args, "7d");
	jc__strv_push(&a.args, "");
	jc__buf_reset(&b);
	assert_int_equal(jc__encode_admin(&b, &a), 0);
	p = frame_payload(&b, 0, JC_MSG_ADMIN, &len);
	assert_int_equal(jc__decode_admin(p, len, &a2), 0);
	assert_string_equal(a2.command, "purge");
	assert_strv(&a.args, &a2.args);
	jc__admin_req_clear(&a);
	jc__admin_req_clear(&a2);
	assert_null(a.command);
	jc__buf_free(&b);
}

static void test_admin_reply_roundtrip(void **state)
{
	(void)state;
	struct jc_admin_reply in, out;
	struct jc_buf b = {0};
	uint32_t len;

	fill_reply(&in);
	assert_int_equal(jc__encode_admin_reply(&b, &in), 0);
	const uint8_t *p = frame_payload(&b, 0, JC_MSG_ADMIN_REPLY, &len);
	assert_int_equal(jc__decode_admin_reply(p, len, &out), 0);
	assert_int_equal(out.status, JC_EDENIED);
	assert_string_equal(out.message, "");
	assert_int_equal(out.n_rec, in.n_rec);
	for (size_t i = 0; i < in.n_rec; i++) {
		assert_int_equal(out.rec[i].n, in.rec[i].n);
		for (size_t j = 0; j < in.rec[i].n; j++) {
			const struct jc_kv *x = &in.rec[i].kv[j], *y = &out.rec[i].kv[j];
			assert_string_equal(x->name, y->name);
			assert_int_equal(x->is_int, y->is_int);
			if (x->is_int) {
				assert_int_equal(x->i, y->i);
				assert_null(y->s);
			} else {
				assert_string_equal(x->s, y->s);
			}
		}
	}
	const struct jc_kv *kv = jc__record_get(&out.rec[0], "min");
	assert_non_null(kv);
	assert_true(kv->is_int && kv->i == INT64_MIN);
	assert_string_equal(jc__record_get(&out.rec[0], "nvrtc")->s, "12.4");
	assert_string_equal(jc__record_get(&out.rec[0], "")->s, "");
	assert_null(jc__record_get(&out.rec[0], "misses"));
	assert_int_equal(out.rec[1].n, 0);
	assert_int_equal(jc__record_get(&out.rec[101], "size")->i, -99);

	jc__admin_reply_clear(&in);
	jc__admin_reply_clear(&out);
	assert_null(in.rec);
	jc__buf_free(&b);
}

/* The exact bytes of a frame, as PROTOCOL.md gives them. */
static void test_wire_layout(void **state)
{
	(void)state;
	struct jc_buf b = {0};
	static const uint8_t want[] = {
	    18, 0, 0, 0, 1, 0, 0,   0,	       /* payload_len 18, HELLO, reserved */
	    1,	0, 4, 0, 0, 0, 1,   0,	 0, 0, /* tag 1 u32 version = 1 */
	    2,	0, 2, 0, 0, 0, 'h', 'i',       /* tag 2 str name = "hi" */
	};
	assert_int_equal(jc__encode_hello(&b, JC_MSG_HELLO, 1, "hi"), 0);
	assert_int_equal(b.len, sizeof(want));
	assert_memory_equal(b.data, want, sizeof(want));
	jc__buf_free(&b);
}

/* ---- malformed input ------------------------------------------------------ */

/* An answer read whole (header and payload together), small or larger than
 * JC_ANSWER_BUF, with the descriptor sent beside it; bytes after it are a
 * protocol error. */
static void test_read_answer(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct jc_buf out = {0}, in = {0};
	uint16_t type;
	int got = -1;
	char big[JC_ANSWER_BUF + 4096];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	const char *msgs[] = {"small", big};
	for (int i = 0; i < 2; i++) {
		char *msg = NULL;
		int code = 0;
		jc__buf_reset(&out);
		assert_int_equal(jc__encode_error(&out, JC_EBUSY, msgs[i]), 0);
		int pipefd[2];
		assert_int_equal(pipe(pipefd), 0);
		union {
			struct cmsghdr hdr;
			char space[CMSG_SPACE(sizeof(int))];
		} ctl;
		memset(&ctl, 0, sizeof(ctl));
		struct iovec iov = {.iov_base = out.data, .iov_len = out.len};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = ctl.space,
				   .msg_controllen = sizeof(ctl.space)};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pipefd[0], sizeof(int));
		assert_int_equal(sendmsg(sv[0], &m, 0), (ssize_t)out.len);
		close(pipefd[0]);
		close(pipefd[1]);
		assert_int_equal(jc__io_read_answer(sv[1], &in, &type, &got, 1000), 0);
		assert_int_equal(type, JC_MSG_ERROR);
		assert_true(got >= 0);
		close(got);
		got = -1;
		assert_int_equal(jc__decode_error(in.data, in.len, &code, &msg), 0);
		assert_int_equal(code, JC_EBUSY);
		assert_string_equal(msg, msgs[i]);
		free(msg);
	}
	/* One answer and a stray byte after it, in one read. */
	jc__buf_reset(&out);
	assert_int_equal(jc__encode_error(&out, JC_EBUSY, "small"), 0);
	assert_int_equal(jc__io_write_all(sv[0], out.data, out.len), 0);
	assert_int_equal(jc__io_write_all(sv[0], "!", 1), 0);
	assert_int_equal(jc__io_read_answer(sv[1], &in, &type, &got, 1000), JC_EPROTO);
	/* The peer gone: JC_EIO. */
	close(sv[0]);
	assert_int_equal(jc__io_read_answer(sv[1], &in, &type, &got, 1000), JC_EIO);
	close(sv[1]);
	jc__buf_free(&out);
	jc__buf_free(&in);
}

static void test_frame_header(void **state)
{
	(void)state;
	uint8_t h[JC_FRAME_HDR] = {0, 0, 0, 4, 3, 0, 0, 0}; /* 64 MiB, COMPILE */
	uint16_t type;
	uint32_t len;

	assert_int_equal(jc__frame_header_decode(h, &type, &len), 0);
	assert_int_equal(type, JC_MSG_COMPILE);
	assert_int_equal(len, JC_FRAME_MAX);
	h[0] = 1; /* one byte over */
	assert_int_equal(jc__frame_header_decode(h, &type, &len), JC_ETOOBIG);
	memset(h, 0xff, 4);
	assert_int_equal(jc__frame_header_decode(h, &type, &len), JC_ETOOBIG);
	memset(h, 0, 4);
	h[7] = 1; /* reserved */
	assert_int_equal(jc__frame_header_decode(h, &type, &len), JC_EPROTO);
	h[7] = 0;
	h[6] = 0x80;
	assert_int_equal(jc__frame_header_decode(h, &type, &len), JC_EPROTO);
	h[6] = 0;
	h[4] = 0; /* type 0 */
	assert_int_equal(jc__frame_header_decode(h, &type, &len), JC_EPROTO);
	h[4] = JC_MSG_ERROR + 1;
	assert_int_equal(jc__frame_header_decode(h, &type, &len), JC_EPROTO);
}

static void test_truncation(void **state)
{
	(void)state;
	struct jc_buf b = {0};
	struct jc_req req;
	struct jc_res res;
	struct jc_admin_req adm = {0};
	struct jc_admin_reply rep;
	uint32_t len;
	uint16_t type;

	fill_req(&req, 3);
	fill_res(&res, 3, 1);
	fill_reply(&rep);
	adm.command = strdup("ls");
	jc__strv_push(&adm.args, "--json");
	assert_int_equal(jc__encode_req(&b, &req), 0);
	assert_int_equal(jc__encode_res(&b, &res), 0);
	assert_int_equal(jc__encode_admin(&b, &adm), 0);
	assert_int_equal(jc__encode_admin_reply(&b, &rep), 0);
	assert_int_equal(jc__encode_hello(&b, JC_MSG_HELLO, 1, "agent"), 0);
	assert_int_equal(jc__encode_error(&b, JC_EIO, "broken pipe"), 0);

	int frames = 0;
	for (size_t off = 0; off < b.len; off += JC_FRAME_HDR + len, frames++) {
		assert_int_equal(jc__frame_header_decode(b.data + off, &type, &len), 0);
		assert_truncations_fail(b.data + off + JC_FRAME_HDR, len, decoders[type]);
	}
	assert_int_equal(frames, 6);

	jc__req_clear(&req);
	jc__res_clear(&res);
	jc__admin_req_clear(&adm);
	jc__admin_reply_clear(&rep);
	jc__buf_free(&b);
}

/* A valid COMPILE payload prefix: the two required fields. */
static void req_base(struct jc_buf *b)
{
	jc__buf_reset(b);
	tlv_u32(b, 1, JC_JOB_COMPILE);
	tlv_u32(b, 2, JC_OUTPUT_PTX);
}

static void test_bad_fields(void **state)
{
	(void)state;
	struct jc_buf b = {0}, n = {0};
	const uint8_t key15[15] = {0};
	uint8_t u64[8] = {0};

	req_base(&b);
	assert_int_equal(try_req(b.data, b.len), 0);

	req_base(&b);
	tlv_str(&b, 99, "x"); /* unknown tag */
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);

	req_base(&b);
	tlv_str(&b, 3, "sm_90");
	tlv_str(&b, 3, "sm_80"); /* arch twice */
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);

	req_base(&b);
	tlv_u32(&b, 1, JC_JOB_LINK); /* job twice */
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);

	jc__buf_reset(&b);
	tlv(&b, 1, u64, 8); /* u32 sent as 8 bytes */
	tlv_u32(&b, 2, JC_OUTPUT_PTX);
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);

	req_base(&b);
	tlv(&b, 3, "sm\0_90", 6); /* NUL inside a string */
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);

	req_base(&b);
	tlv(&b, 7, "-G\0", 3); /* NUL inside a repeated string */
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);

	req_base(&b);
	tlv(&b, 14, key15, 15); /* reject_object not 16 bytes */
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);

	jc__buf_reset(&b);
	tlv_u32(&b, 2, JC_OUTPUT_PTX); /* job missing */
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);
	assert_int_equal(try_req(NULL, 0), JC_EPROTO);

	req_base(&b);
	b.len -= 1; /* last field runs past the payload */
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);

	req_base(&b);
	tlv_str(&b, 3, "sm_90");
	b.data[b.len++] = 0; /* trailing garbage */
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);

	/* Nested header: name without data, unknown sub-tag, valid. */
	tlv_str(&n, 1, "a.h");
	req_base(&b);
	tlv(&b, 6, n.data, (uint32_t)n.len);
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);
	tlv(&n, 2, "x", 1);
	req_base(&b);
	tlv_str(&b, 3, "sm_90");
	tlv(&b, 6, n.data, (uint32_t)n.len);
	tlv(&b, 6, n.data, (uint32_t)n.len); /* repeated: fine (the key checks names) */
	assert_int_equal(try_req(b.data, b.len), 0);
	tlv(&n, 9, "", 0);
	req_base(&b);
	tlv(&b, 6, n.data, (uint32_t)n.len);
	assert_int_equal(try_req(b.data, b.len), JC_EPROTO);

	/* Strings over their limit. */
	char *big = malloc(JC_STR_MAX + 1);
	memset(big, 'a', JC_STR_MAX + 1);
	req_base(&b);
	tlv(&b, 4, big, JC_STR_MAX);
	assert_int_equal(try_req(b.data, b.len), 0);
	req_base(&b);
	tlv(&b, 4, big, JC_STR_MAX + 1);
	assert_int_equal(try_req(b.data, b.len), JC_ETOOBIG);
	free(big);

	jc__buf_free(&b);
	jc__buf_free(&n);
}

static void res_base(struct jc_buf *b, int with_size)
{
	static const uint8_t h16[16] = {1};
	jc__buf_reset(b);
	tlv_u32(b, 1, 0);
	tlv_u32(b, 2, JC_CACHE_HIT);
	tlv(b, 3, h16, 16);
	tlv(b, 4, h16, 16);
	tlv_u32(b, 5, JC_OUTPUT_CUBIN);
	if (with_size) {
		uint8_t sz[8] = {3};
		tlv(b, 7, sz, 8);
	}
	uint8_t ns[8] = {0};
	tlv(b, 11, ns, 8);
	tlv(b, 12, ns, 8);
}

static void test_bad_res(void **state)
{
	(void)state;
	struct jc_buf b = {0}, n = {0};
	uint8_t sz[8] = {3};

	res_base(&b, 1);
	assert_int_equal(try_res(b.data, b.len), 0);
	res_base(&b, 0); /* size missing */
	assert_int_equal(try_res(b.data, b.len), JC_EPROTO);

	res_base(&b, 1);
	tlv(&b, 6, "abc", 3); /* data agrees with size */
	assert_int_equal(try_res(b.data, b.len), 0);
	res_base(&b, 1);
	tlv(&b, 6, "abcd", 4); /* size before data, disagreeing */
	assert_int_equal(try_res(b.data, b.len), JC_EPROTO);
	res_base(&b, 0);
	tlv(&b, 6, "ab", 2);
	tlv(&b, 7, sz, 8); /* data before size, disagreeing */
	assert_int_equal(try_res(b.data, b.len), JC_EPROTO);

	res_base(&b, 1);
	tlv(&b, 3, sz, 8); /* key twice */
	assert_int_equal(try_res(b.data, b.len), JC_EPROTO);
	jc__buf_reset(&b);
	tlv(&b, 3, sz, 8); /* key of 8 bytes */
	assert_int_equal(try_res(b.data, b.len), JC_EPROTO);

	/* lowered: expr without lowered name. */
	tlv_str(&n, 1, "&k");
	res_base(&b, 1);
	tlv(&b, 10, n.data, (uint32_t)n.len);
	assert_int_equal(try_res(b.data, b.len), JC_EPROTO);

	/* log may be long; other strings may not. */
	char *big = calloc(1, JC_TEXT_MAX + 1);
	memset(big, 'e', JC_TEXT_MAX + 1);
	res_base(&b, 1);
	tlv(&b, 8, big, JC_TEXT_MAX);
	assert_int_equal(try_res(b.data, b.len), 0);
	res_base(&b, 1);
	tlv(&b, 8, big, JC_TEXT_MAX + 1);
	assert_int_equal(try_res(b.data, b.len), JC_ETOOBIG);
	free(big);

	jc__buf_free(&b);
	jc__buf_free(&n);
}

static void test_bad_records(void **state)
{
	(void)state;
	struct jc_buf b = {0}, r = {0};
	uint8_t i64[8] = {0};
	static const struct {
		int tags[4];
	} cases[] = {
	    {{2, 0}},	    /* value without name */
	    {{1, 0}},	    /* name without value */
	    {{1, 1, 0}},    /* name after name */
	    {{1, 2, 2, 0}}, /* two values */
	    {{1, 4, 0}},    /* unknown tag */
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		jc__buf_reset(&r);
		for (const int *t = cases[c].tags; *t; t++)
			tlv(&r, (uint16_t)*t, *t == 2 ? i64 : (const uint8_t *)"n",
			    *t == 2 ? 8 : 1);
		jc__buf_reset(&b);
		tlv_u32(&b, 1, 0);
		tlv(&b, 3, r.data, (uint32_t)r.len);
		assert_int_equal(try_reply(b.data, b.len), JC_EPROTO);
	}
	/* i64 of 4 bytes */
	jc__buf_reset(&r);
	tlv_str(&r, 1, "n");
	tlv(&r, 2, i64, 4);
	jc__buf_reset(&b);
	tlv_u32(&b, 1, 0);
	tlv(&b, 3, r.data, (uint32_t)r.len);
	assert_int_equal(try_reply(b.data, b.len), JC_EPROTO);

	/* admin: command missing; error: message missing */
	jc__buf_reset(&b);
	tlv_str(&b, 2, "--all");
	assert_int_equal(try_admin(b.data, b.len), JC_EPROTO);
	jc__buf_reset(&b);
	tlv_u32(&b, 1, (uint32_t)JC_EIO);
	assert_int_equal(try_error(b.data, b.len), JC_EPROTO);
	tlv_str(&b, 2, "");
	assert_int_equal(try_error(b.data, b.len), 0);
	jc__buf_free(&b);
	jc__buf_free(&r);
}

static void test_repeat_limit(void **state)
{
	(void)state;
	struct jc_buf b = {0};

	req_base(&b);
	for (uint32_t i = 0; i < JC_REPEAT_MAX; i++)
		tlv(&b, 9, NULL, 0);
	assert_int_equal(try_req(b.data, b.len), 0);
	tlv(&b, 9, NULL, 0);
	assert_int_equal(try_req(b.data, b.len), JC_ETOOBIG);
	jc__buf_free(&b);
}

/* ---- encoder limits ------------------------------------------------------- */

static void test_encode_limits(void **state)
{
	(void)state;
	struct jc_buf b = {0};
	struct jc_req r = {0};
	struct jc_res res;
	uint32_t len;

	assert_int_equal(jc__encode_hello(&b, JC_MSG_HELLO, 1, "first"), 0);
	size_t kept = b.len;

	/* A field over its limit: nothing of the frame stays, err is sticky. */
	r.job = JC_JOB_COMPILE;
	r.arch = malloc(JC_STR_MAX + 2);
	memset(r.arch, 'x', JC_STR_MAX + 1);
	r.arch[JC_STR_MAX + 1] = '\0';
	assert_int_equal(jc__encode_req(&b, &r), JC_ETOOBIG);
	assert_int_equal(b.len, kept);
	assert_int_equal(jc__encode_hello(&b, JC_MSG_HELLO, 1, "x"), JC_ETOOBIG);
	assert_int_equal(b.len, kept);
	jc__buf_reset(&b);
	assert_int_equal(b.err, 0);
	r.arch[JC_STR_MAX] = '\0';
	assert_int_equal(jc__encode_req(&b, &r), 0);
	free(r.arch);
	r.arch = NULL;

	/* Bytes over the frame: refused before they are read. */
	jc__res_init(&res);
	res.data = (uint8_t *)"tiny";
	res.size = (size_t)JC_FRAME_MAX + 1;
	jc__buf_reset(&b);
	assert_int_equal(jc__encode_res(&b, &res), JC_ETOOBIG);
	assert_int_equal(b.len, 0);

	/* Fields each under the limit but together over the frame. */
	uint8_t *mib40 = calloc(1, 40u << 20);
	for (int i = 0; i < 2; i++)
		assert_int_equal(jc__blob_push(&r.link_inputs, &r.n_link_inputs, "big.o", NULL, 0,
					       JC_INPUT_OBJECT),
				 0);
	free(r.link_inputs[0].data);
	r.link_inputs[0].data = mib40;
	r.link_inputs[0].size = 40u << 20;
	jc__buf_reset(&b);
	assert_int_equal(jc__encode_req(&b, &r), 0); /* one fits */
	frame_payload(&b, 0, JC_MSG_COMPILE, &len);
	free(r.link_inputs[1].data);
	r.link_inputs[1].data = r.link_inputs[0].data;
	r.link_inputs[1].size = r.link_inputs[0].size;
	jc__buf_reset(&b);
	assert_int_equal(jc__encode_req(&b, &r), JC_ETOOBIG);
	assert_int_equal(b.len, 0);
	r.link_inputs[1].data = NULL;
	r.link_inputs[1].size = 0;

	/* Too many repeats (checked before the array is read). */
	struct jc_req many = {.job = 1, .output = 1};
	many.options.n = (size_t)JC_REPEAT_MAX + 1;
	jc__buf_reset(&b);
	assert_int_equal(jc__encode_req(&b, &many), JC_ETOOBIG);

	jc__req_clear(&r);
	jc__buf_free(&b);
}

/* ---- allocation failures -------------------------------------------------- */

/* Fails each allocation of every encoder and decoder in turn: each failure
 * gives JC_ENOMEM, leaves nothing behind (ASan checks) and an empty output. */
static void test_alloc_failures(void **state)
{
	(void)state;
	struct jc_buf all = {0}, b;
	struct jc_req req;
	struct jc_res res;
	struct jc_admin_req adm = {0};
	struct jc_admin_reply rep;
	uint32_t len;
	uint16_t type;
	int rc, k;

	fill_req(&req, 3);
	fill_res(&res, 3, 1);
	fill_reply(&rep);
	adm.command = strdup("ls");
	jc__strv_push(&adm.args, "--json");
	for (int msg = 0; msg < 6; msg++) {
		for (k = 1;; k++) {
			memset(&b, 0, sizeof(b));
			jc__proto_fail_alloc = k;
			switch (msg) {
			case 0:
				rc = jc__encode_req(&b, &req);
				break;
			case 1:
				rc = jc__encode_res(&b, &res);
				break;
			case 2:
				rc = jc__encode_admin(&b, &adm);
				break;
			case 3:
				rc = jc__encode_admin_reply(&b, &rep);
				break;
			case 4:
				rc = jc__encode_hello(&b, JC_MSG_HELLO_OK, 1, "0.1.0");
				break;
			default:
				rc = jc__encode_error(&b, JC_EBUSY, "shutting down");
				break;
			}
			jc__proto_fail_alloc = 0;
			jc__buf_free(&b);
			if (rc == 0)
				break;
			assert_int_equal(rc, JC_ENOMEM);
		}
		assert_true(k > 1);
	}
	assert_int_equal(jc__encode_req(&all, &req), 0);
	assert_int_equal(jc__encode_res(&all, &res), 0);
	assert_int_equal(jc__encode_admin(&all, &adm), 0);
	assert_int_equal(jc__encode_admin_reply(&all, &rep), 0);
	assert_int_equal(jc__encode_hello(&all, JC_MSG_HELLO_OK, 1, "0.1.0"), 0);
	assert_int_equal(jc__encode_error(&all, JC_EBUSY, "shutting down"), 0);
	for (size_t off = 0; off < all.len; off += JC_FRAME_HDR + len) {
		assert_int_equal(jc__frame_header_decode(all.data + off, &type, &len), 0);
		for (k = 1;; k++) {
			jc__proto_fail_alloc = k;
			rc = decoders[type](all.data + off + JC_FRAME_HDR, len);
			jc__proto_fail_alloc = 0;
			if (rc == 0)
				break;
			assert_int_equal(rc, JC_ENOMEM);
		}
		assert_true(k > 1);
	}

	/* The record builders. */
	struct jc_admin_reply a = {0};
	struct jc_record *r = NULL;
	assert_int_equal(jc__reply_add_record(&a, &r), 0);
	for (k = 1; k <= 3; k++) { /* array, name, value */
		jc__proto_fail_alloc = k;
		assert_int_equal(jc__record_add_str(r, "name", "value"), JC_ENOMEM);
		jc__proto_fail_alloc = 0;
		assert_int_equal(r->n, 0);
	}
	jc__proto_fail_alloc = 2; /* name */
	assert_int_equal(jc__record_add_int(r, "n", 1), JC_ENOMEM);
	jc__proto_fail_alloc = 1; /* the array of records grows at n = 1 */
	assert_int_equal(jc__reply_add_record(&a, &r), JC_ENOMEM);
	jc__proto_fail_alloc = 0;
	assert_int_equal(a.n_rec, 1);
	assert_int_equal(jc__record_add_int(r, "n", 1), 0);
	assert_int_equal(jc__record_get(r, "n")->i, 1);
	jc__admin_reply_clear(&a);

	jc__req_clear(&req);
	jc__res_clear(&res);
	jc__admin_req_clear(&adm);
	jc__admin_reply_clear(&rep);
	jc__buf_free(&all);
}

/* ---- random input ----------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	/* xorshift64; the masks keep the shifts free of dropped bits. */
	rng_state ^= (rng_state & (UINT64_MAX >> 13)) << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= (rng_state & (UINT64_MAX >> 17)) << 17;
	return rng_state;
}

static void assert_clean(int rc)
{
	if (rc != 0 && rc != JC_EPROTO && rc != JC_ETOOBIG)
		fail_msg("unexpected rc %d", rc);
}

static void test_random_payloads(void **state)
{
	(void)state;
	uint8_t p[512];

	for (int i = 0; i < 4000; i++) {
		size_t len = rng() % sizeof(p);
		for (size_t j = 0; j < len; j++)
			p[j] = (uint8_t)rng();
		/* Small tags and lengths now and then, so some fields parse. */
		if (i & 1)
			for (size_t j = 0; j + 6 <= len; j += 6 + p[j + 2]) {
				p[j] = (uint8_t)(rng() % 18);
				p[j + 1] = p[j + 3] = p[j + 4] = p[j + 5] = 0;
				p[j + 2] %= 24;
			}
		for (size_t t = 1; t < sizeof(decoders) / sizeof(decoders[0]); t++)
			assert_clean(decoders[t](p, len));
	}
}

/* Valid frames with a few bytes changed. */
static void test_mutated_payloads(void **state)
{
	(void)state;
	struct jc_buf b = {0};
	struct jc_req req;
	struct jc_res res;
	struct jc_admin_reply rep;
	uint32_t len;
	uint16_t type;

	fill_req(&req, 4);
	fill_res(&res, 4, 1);
	fill_reply(&rep);
	assert_int_equal(jc__encode_req(&b, &req), 0);
	assert_int_equal(jc__encode_res(&b, &res), 0);
	assert_int_equal(jc__encode_admin_reply(&b, &rep), 0);
	for (size_t off = 0; off < b.len; off += JC_FRAME_HDR + len) {
		assert_int_equal(jc__frame_header_decode(b.data + off, &type, &len), 0);
		uint8_t *m = malloc(len);
		for (int i = 0; i < 3000; i++) {
			memcpy(m, b.data + off + JC_FRAME_HDR, len);
			for (int k = 1 + (int)(rng() % 4); k > 0; k--)
				m[rng() % len] = (uint8_t)rng();
			assert_clean(decoders[type](m, len));
		}
		free(m);
	}
	jc__req_clear(&req);
	jc__res_clear(&res);
	jc__admin_reply_clear(&rep);
	jc__buf_free(&b);
}

/* jc_strerror() says each JC_ERRORS row's text; the codes run from -1
 * down without a gap or a repeat; anything else is "unknown error". */
static void test_error_texts(void **state)
{
	(void)state;
	int next = -1;
#define CHECK_ERROR(name, value, text)                                                             \
	assert_int_equal(name, next--);                                                            \
	assert_string_equal(jc_strerror(name), text);
	JC_ERRORS(CHECK_ERROR)
#undef CHECK_ERROR
	assert_string_equal(jc_strerror(JC_OK), "success");
	assert_string_equal(jc_strerror(next), "unknown error");
	assert_string_equal(jc_strerror(1), "unknown error");
	assert_string_equal(jc_strerror(-1000000), "unknown error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_req_roundtrip),
	    cmocka_unit_test(test_req_minimal),
	    cmocka_unit_test(test_res_roundtrip),
	    cmocka_unit_test(test_hello_error_admin_roundtrip),
	    cmocka_unit_test(test_admin_reply_roundtrip),
	    cmocka_unit_test(test_wire_layout),
	    cmocka_unit_test(test_frame_header),
	    cmocka_unit_test(test_read_answer),
	    cmocka_unit_test(test_truncation),
	    cmocka_unit_test(test_bad_fields),
	    cmocka_unit_test(test_bad_res),
	    cmocka_unit_test(test_bad_records),
	    cmocka_unit_test(test_repeat_limit),
	    cmocka_unit_test(test_encode_limits),
	    cmocka_unit_test(test_alloc_failures),
	    cmocka_unit_test(test_random_payloads),
	    cmocka_unit_test(test_mutated_payloads),
	    cmocka_unit_test(test_error_texts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
