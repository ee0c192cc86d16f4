/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for everything that reads bytes from a peer: the frame header
 * (jc__frame_header_decode), every message decoder of proto/proto.c
 * (hello, COMPILE, RESULT, ADMIN, ADMIN_REPLY, ERROR) and the daemon's frame
 * reassembly (daemon/framer.c), fed in chunks of varying size as a socket
 * would deliver them.
 *
 * Input: byte 0 picks the mode.
 *   0..5  the rest is one payload for decoder MODE (order of `decoders`);
 *   6..   byte 1 sets the chunk sizes, byte 2 the framer's limit (256 bytes
 *         or JC_FRAME_MAX), the rest is a byte stream of frames whose
 *         payloads go to the decoder of their type, as jitcached does.
 * Besides "no crash, no leak, no undefined behaviour" (the sanitizers' part)
 * every accepted payload must survive a round trip: re-encoding it and
 * decoding that again gives the same bytes when encoded once more.
 *
 * Built two ways (tests/fuzz/meson.build): with clang -fsanitize=fuzzer as a
 * libFuzzer target, and with JC_FUZZ_MAIN by the project's compiler as a
 * driver that writes the seed corpus (--seeds DIR), replays files (FILE...)
 * and runs seeded random mutations (--mutate N) without libFuzzer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/framer.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_proto: check failed: %s (line %d)\n", #cond,         \
				__LINE__);                                                         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* Decodes one payload of a message type and, when it decodes, encodes it
 * again into out (a whole frame). Returns the decoder's code. */
typedef int (*recode_fn)(uint16_t type, const uint8_t *p, size_t n, struct jc_buf *out);

static int recode_hello(uint16_t type, const uint8_t *p, size_t n, struct jc_buf *out)
{
	uint32_t version = 0;
	char *name = NULL;
	int rc = jc__decode_hello(p, n, &version, &name);
	CHECK((rc == 0) == (name != NULL));
	if (rc == 0)
		CHECK(jc__encode_hello(out, type, version, name) == 0);
	free(name);
	return rc;
}

static int recode_req(uint16_t type, const uint8_t *p, size_t n, struct jc_buf *out)
{
	struct jc_req r;
	(void)type;
	int rc = jc__decode_req(p, n, &r);
	if (rc == 0)
		CHECK(jc__encode_req(out, &r) == 0);
	jc__req_clear(&r);
	return rc;
}

static int recode_res(uint16_t type, const uint8_t *p, size_t n, struct jc_buf *out)
{
	struct jc_res r;
	(void)type;
	int rc = jc__decode_res(p, n, &r);
	CHECK(r.fd == -1);
	if (rc == 0)
		CHECK(jc__encode_res(out, &r) == 0);
	jc__res_clear(&r);
	return rc;
}

static int recode_admin(uint16_t type, const uint8_t *p, size_t n, struct jc_buf *out)
{
	struct jc_admin_req a;
	(void)type;
	int rc = jc__decode_admin(p, n, &a);
	if (rc == 0)
		CHECK(jc__encode_admin(out, &a) == 0);
	jc__admin_req_clear(&a);
	return rc;
}

static int recode_admin_reply(uint16_t type, const uint8_t *p, size_t n, struct jc_buf *out)
{
	struct jc_admin_reply a;
	(void)type;
	int rc = jc__decode_admin_reply(p, n, &a);
	if (rc == 0)
		CHECK(jc__encode_admin_reply(out, &a) == 0);
	jc__admin_reply_clear(&a);
	return rc;
}

static int recode_error(uint16_t type, const uint8_t *p, size_t n, struct jc_buf *out)
{
	int code = 0;
	char *msg = NULL;
	(void)type;
	int rc = jc__decode_error(p, n, &code, &msg);
	CHECK((rc == 0) == (msg != NULL));
	if (rc == 0)
		CHECK(jc__encode_error(out, code, msg) == 0);
	free(msg);
	return rc;
}

static const struct {
	uint16_t type;
	recode_fn recode;
} decoders[] = {
    {JC_MSG_HELLO, recode_hello},
    {JC_MSG_COMPILE, recode_req},
    {JC_MSG_RESULT, recode_res},
    {JC_MSG_ADMIN, recode_admin},
    {JC_MSG_ADMIN_REPLY, recode_admin_reply},
    {JC_MSG_ERROR, recode_error},
};
#define N_DECODERS (sizeof(decoders) / sizeof(decoders[0]))

static recode_fn recoder_of(uint16_t type)
{
	if (type == JC_MSG_HELLO_OK)
		return recode_hello;
	for (size_t i = 0; i < N_DECODERS; i++)
		if (decoders[i].type == type)
			return decoders[i].recode;
	return NULL;
}

/* The payload of the single frame in b, checking its header. */
static const uint8_t *payload_of(const struct jc_buf *b, uint16_t want_type, size_t *len)
{
	uint16_t type;
	uint32_t n;
	CHECK(b->len >= JC_FRAME_HDR);
	CHECK(jc__frame_header_decode(b->data, &type, &n) == 0);
	CHECK(type == want_type && n == b->len - JC_FRAME_HDR);
	*len = n;
	return b->data + JC_FRAME_HDR;
}

/* Decodes p; if it decodes, its re-encoding must decode and re-encode to
 * the same bytes. Returns the first decode's code. */
static int roundtrip(uint16_t type, const uint8_t *p, size_t n)
{
	recode_fn recode = recoder_of(type);
	struct jc_buf a = {0}, b = {0};
	CHECK(recode != NULL);
	int rc = recode(type, p, n, &a);
	if (rc == 0) {
		size_t n1, n2;
		const uint8_t *p1 = payload_of(&a, type, &n1);
		CHECK(recode(type, p1, n1, &b) == 0);
		const uint8_t *p2 = payload_of(&b, type, &n2);
		CHECK(n1 == n2 && memcmp(p1, p2, n1) == 0);
	} else {
		CHECK(rc == JC_EPROTO || rc == JC_ETOOBIG || rc == JC_ENOMEM);
		CHECK(a.len == 0);
	}
	jc__buf_free(&a);
	jc__buf_free(&b);
	return rc;
}

static int frame_cb(void *ctx, uint16_t type, const uint8_t *payload, size_t len)
{
	size_t *frames = ctx;
	(*frames)++;
	return roundtrip(type, payload, len);
}

/* Feeds stream to a framer in chunks, as libuv would hand them over. */
static void feed_stream(uint8_t chunk_seed, size_t max, const uint8_t *stream, size_t size)
{
	struct jc_framer f = {.max = max};
	size_t off = 0, frames = 0, step = 0;
	int rc = 0;
	while (off < size && rc == 0) {
		uv_buf_t buf;
		jc__framer_alloc(&f, 65536, &buf);
		CHECK(buf.base != NULL && buf.len >= 65536);
		/* All at once (0xff), a fixed 1 .. 64 bytes (< 0x80), or a size
		 * changing with every read. */
		size_t chunk = chunk_seed == 0xff  ? size - off
			       : chunk_seed < 0x80 ? 1u + chunk_seed % 64
						   : 1 + (chunk_seed + 7 * step++) % 64;
		if (chunk > size - off)
			chunk = size - off;
		memcpy(buf.base, stream + off, chunk);
		off += chunk;
		rc = jc__framer_feed(&f, chunk, frame_cb, &frames);
	}
	/* What is left unconsumed is less than a whole frame. */
	if (rc == 0 && f.buf.len >= JC_FRAME_HDR) {
		uint16_t type;
		uint32_t len;
		CHECK(jc__frame_header_decode(f.buf.data, &type, &len) == 0);
		CHECK(len <= max && f.buf.len - JC_FRAME_HDR < len);
	}
	jc__framer_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] < N_DECODERS) {
		roundtrip(decoders[data[0]].type, data + 1, size - 1);
		return 0;
	}
	if (size < 3)
		return 0;
	feed_stream(data[1], (data[2] & 1) ? JC_FRAME_MAX : 256, data + 3, size - 3);
	return 0;
}

#ifdef JC_FUZZ_MAIN
/* --- the driver without libFuzzer ------------------------------------------ */

#include <errno.h>
#include <sys/stat.h>

static int write_seed(const char *dir, int *n, uint8_t mode, const uint8_t *lead, size_t nlead,
		      const uint8_t *p, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/seed-%03d", dir, (*n)++);
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	int ok = fwrite(&mode, 1, 1, f) == 1 && (!nlead || fwrite(lead, 1, nlead, f) == nlead) &&
		 fwrite(p, 1, len, f) == len;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* One valid message of each kind, as encoded frames appended to all. */
static void encode_samples(struct jc_buf *all)
{
	static uint8_t src[] = "extern \"C\" __global__ void k(float *x) { x[0] = 1; }";
	static uint8_t hdr[] = "#pragma once\n#define N 4\n";
	static uint8_t ptx[] = ".version 8.0\n.target sm_90\n";
	struct jc_blob header = {.name = "a/b.cuh", .data = hdr, .size = sizeof(hdr) - 1};
	struct jc_blob link = {
	    .name = "lib.ptx", .data = ptx, .size = sizeof(ptx) - 1, .type = JC_INPUT_PTX};
	char *opts[] = {"-std=c++17", "-DN=4"}, *dirs[] = {"/usr/include"},
	     *exprs[] = {"&k<float>", "&k<double>"}, *lopts[] = {"-O3"};
	struct jc_req req = {
	    .job = JC_JOB_COMPILE_LINK,
	    .output = JC_OUTPUT_CUBIN,
	    .arch = "sm_90",
	    .source_name = "k.cu",
	    .source = src,
	    .source_size = sizeof(src) - 1,
	    .headers = &header,
	    .n_headers = 1,
	    .options = {opts, 2},
	    .include_dirs = {dirs, 1},
	    .name_exprs = {exprs, 2},
	    .link_inputs = &link,
	    .n_link_inputs = 1,
	    .link_options = {lopts, 1},
	    .app_abi = "app-1",
	    .test_fault = JC_FAULT_CRASH,
	    .reject_object = {1, 2, 3},
	    .reject_reason = JC_REJECT_LOAD_FAILED,
	    .reject_message = "CUDA_ERROR_INVALID_IMAGE",
	};
	struct jc_lowered low[] = {{"&k<float>", "_Z1kIfEvPT_"}, {"&k<double>", "_Z1kIdEvPT_"}};
	struct jc_res res = {
	    .status = 0,
	    .cache = JC_CACHE_MISS,
	    .key = {9, 8, 7},
	    .object = {6, 5, 4},
	    .output = JC_OUTPUT_CUBIN,
	    .data = ptx,
	    .size = sizeof(ptx) - 1,
	    .fd = -1,
	    .log = "warning: something",
	    .lowered = low,
	    .n_lowered = 2,
	    .compile_ns = 123456789,
	    .server_ns = 42,
	};
	struct jc_res failed = {.status = JC_ECOMPILE,
				.cache = JC_CACHE_NEGATIVE_HIT,
				.fd = -1,
				.log = "error: undefined",
				.message = "compile failed"};
	char *args[] = {"older_than=3600", "dry_run"};
	struct jc_admin_req admin = {.command = "purge", .args = {args, 2}};
	struct jc_admin_reply reply = {0};
	struct jc_record *r;
	CHECK(jc__reply_add_record(&reply, &r) == 0);
	CHECK(jc__record_add_int(r, "hits", 12) == 0 && jc__record_add_str(r, "key", "abc") == 0);
	CHECK(jc__reply_add_record(&reply, &r) == 0);
	CHECK(jc__record_add_int(r, "size", -1) == 0);
	reply.message = strdup("2 entries");

	CHECK(jc__encode_hello(all, JC_MSG_HELLO, JC_PROTO_VERSION, "libjitcache-client") == 0);
	CHECK(jc__encode_req(all, &req) == 0);
	CHECK(jc__encode_res(all, &res) == 0);
	CHECK(jc__encode_admin(all, &admin) == 0);
	CHECK(jc__encode_admin_reply(all, &reply) == 0);
	CHECK(jc__encode_error(all, JC_EDENIED, "not allowed") == 0);
	CHECK(jc__encode_hello(all, JC_MSG_HELLO_OK, JC_PROTO_VERSION, "0.1.0") == 0);
	CHECK(jc__encode_res(all, &failed) == 0);
	jc__admin_reply_clear(&reply);
}

/* The seed corpus: each message alone for its decoder, and the frames as
 * streams (whole, byte by byte, and in chunks) for the framer. */
static int write_seeds(const char *dir)
{
	struct jc_buf all = {0};
	int n = 0, rc = 0;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -1;
	encode_samples(&all);
	for (size_t off = 0; off < all.len && rc == 0;) {
		uint16_t type;
		uint32_t len;
		CHECK(jc__frame_header_decode(all.data + off, &type, &len) == 0);
		for (uint8_t m = 0; m < N_DECODERS; m++)
			if (recoder_of(type) == decoders[m].recode)
				rc |= write_seed(dir, &n, m, NULL, 0, all.data + off + JC_FRAME_HDR,
						 len);
		uint8_t lead[2] = {0xff, 1};
		rc |= write_seed(dir, &n, N_DECODERS, lead, 2, all.data + off, JC_FRAME_HDR + len);
		off += JC_FRAME_HDR + len;
	}
	uint8_t bytewise[2] = {0, 1}, varying[2] = {0x80, 1}, small_limit[2] = {3, 0};
	rc |= write_seed(dir, &n, N_DECODERS, bytewise, 2, all.data, all.len);
	rc |= write_seed(dir, &n, N_DECODERS, varying, 2, all.data, all.len);
	rc |= write_seed(dir, &n, N_DECODERS, small_limit, 2, all.data, all.len);
	jc__buf_free(&all);
	return rc ? -1 : n;
}

static uint8_t *read_all(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0, got;
	uint8_t *buf = malloc(cap);
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		uint8_t *p = n == cap ? realloc(buf, cap *= 2) : buf;
		if (!p)
			free(buf);
		buf = p;
	}
	fclose(f);
	*size = n;
	return buf;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* n seeded mutations (flips, overwrites, cuts, inserted length-like words)
 * of the seed stream of every mode. */
static void mutate(size_t n)
{
	struct jc_buf all = {0};
	encode_samples(&all);
	uint8_t *buf = malloc(all.len + 64);
	CHECK(buf != NULL);
	for (size_t i = 0; i < n; i++) {
		size_t len = all.len + 3;
		buf[0] = (uint8_t)(rnd() % (N_DECODERS + 1));
		buf[1] = (uint8_t)rnd();
		buf[2] = (uint8_t)rnd();
		memcpy(buf + 3, all.data, all.len);
		if (buf[0] < N_DECODERS) {
			/* One message: start at a frame boundary of the stream. */
			size_t off = 0, pick = rnd() % 8;
			for (size_t k = 0; k < pick && off < all.len; k++) {
				uint16_t type;
				uint32_t plen;
				jc__frame_header_decode(all.data + off, &type, &plen);
				off += JC_FRAME_HDR + plen;
			}
			if (off >= all.len)
				off = 0;
			uint32_t plen;
			uint16_t type;
			jc__frame_header_decode(all.data + off, &type, &plen);
			memmove(buf + 1, all.data + off + JC_FRAME_HDR, plen);
			len = 1 + plen;
		}
		for (int k = 1 + (int)(rnd() % 4); k > 0; k--) {
			size_t at = 1 + rnd() % (len - 1);
			switch (rnd() % 4) {
			case 0:
				buf[at] ^= (uint8_t)(1u << (rnd() % 8));
				break;
			case 1:
				buf[at] = (uint8_t)rnd();
				break;
			case 2:
				len = at;
				break;
			default:
				if (at + 4 <= len) {
					uint32_t v =
					    (uint32_t)(rnd() % 3 == 0 ? rnd() : rnd() % 300);
					memcpy(buf + at, &v, 4);
				}
				break;
			}
			if (len < 2)
				break;
		}
		LLVMFuzzerTestOneInput(buf, len);
	}
	free(buf);
	jc__buf_free(&all);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--seeds") == 0) {
		int n = write_seeds(argv[2]);
		if (n < 0) {
			fprintf(stderr, "fuzz_proto: cannot write seeds to %s\n", argv[2]);
			return 1;
		}
		printf("fuzz_proto: %d seeds in %s\n", n, argv[2]);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "--mutate") == 0) {
		size_t n = strtoull(argv[2], NULL, 10);
		mutate(n);
		printf("fuzz_proto: %zu mutated inputs, no failure\n", n);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: fuzz_proto --seeds DIR | --mutate N | FILE...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		size_t size;
		uint8_t *data = read_all(argv[i], &size);
		if (!data) {
			fprintf(stderr, "fuzz_proto: cannot read %s\n", argv[i]);
			return 1;
		}
		LLVMFuzzerTestOneInput(data, size);
		free(data);
	}
	printf("fuzz_proto: %d inputs replayed, no failure\n", argc - 1);
	return 0;
}
#endif
