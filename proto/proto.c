/* SPDX-License-Identifier: MIT */
/*
 * The field codec. Every message is a table of fields (declared once below,
 * X-macro style) that says, for each tag, its wire kind, whether it is
 * required, optional or repeated, its length limit and the struct member it
 * fills. One encoder, one decoder and one destructor walk these tables.
 *
 * Members are read and written through memcpy at their offsetof() offset;
 * pointer members are copied as void * (all object pointers share one
 * representation on the platforms we build for).
 */
#include "proto/proto.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "jitcache/jitcache.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define FIELD_HDR 6 /* u16 tag + u32 len */

enum kind {
	K_U32,   /* uint32_t, 4 bytes */
	K_I32,   /* int32_t, 4 bytes */
	K_U64,   /* uint64_t, 8 bytes */
	K_I64,   /* int64_t, 8 bytes */
	K_SIZE,  /* size_t, sent as 8 bytes */
	K_FIX16, /* uint8_t[16], exactly 16 bytes */
	K_STR,   /* char *, no NUL inside */
	K_BYTES, /* uint8_t * + size_t at aux */
	K_STRV,  /* struct jc_strv, one string per occurrence */
	K_ARRAY, /* array of sub->size elements + size_t count at aux, each nested */
};

/* Value length of the fixed-size kinds; 0 for the others. */
static const uint8_t fixed_width[K_ARRAY + 1] = {
	[K_U32] = 4, [K_I32] = 4, [K_U64] = 8, [K_I64] = 8, [K_SIZE] = 8, [K_FIX16] = 16,
};

enum flags {
	F_REQ, /* exactly once */
	F_OPT, /* at most once; absent = 0 / NULL (and left out when 0 / NULL) */
	F_REP, /* any number of times, order kept */
};

struct cur {
	const uint8_t *p;
	size_t len;
};

struct layout;

struct field {
	uint16_t tag;
	uint8_t kind;
	uint8_t flags;
	uint32_t limit; /* max value length (variable-length kinds) */
	size_t off;     /* the member */
	size_t aux;     /* K_BYTES: size member; K_ARRAY: count member */
	const struct layout *sub; /* K_ARRAY: element layout */
};

struct enc {
	struct jc_buf *b;
	size_t start; /* offset of the frame header in b */
};

/* A struct the tables fill; the hooks replace the table walk for element
 * types whose wire form is not one field per member (records). */
struct layout {
	const struct field *f;
	size_t n;
	size_t size;
	int (*decode)(const struct layout *l, struct cur c, char *obj);
	void (*encode)(struct enc *e, const struct layout *l, const char *obj);
	void (*clear)(const struct layout *l, char *obj);
};

/*
 * The messages. X(tag, kind, flags, limit, member, aux, sub):
 *   limit  max value bytes of STR / BYTES / STRV / ARRAY values (0 for fixed kinds)
 *   aux    OF(size or count member) for BYTES and ARRAY, else 0
 *   sub    element layout for ARRAY, else NULL
 * Encoders write fields in table order, and every table ends with a required
 * field, so any proper prefix of an encoded payload lacks it and fails to
 * decode (JC_EPROTO) even before the frame length catches the cut. Decoders
 * take fields in any order. Tags are never reused: a dropped field leaves a
 * hole.
 */
#define HELLO_FIELDS(X) /* struct jc_hello: HELLO and HELLO_OK */                 \
	X(3, U64, OPT, 0, dir_dev, 0, NULL)                                       \
	X(4, U64, OPT, 0, dir_ino, 0, NULL)                                       \
	X(5, STR, OPT, JC_STR_MAX, cache_dir, 0, NULL)                            \
	X(6, U32, OPT, 0, pid, 0, NULL)                                           \
	X(7, STR, OPT, JC_STR_MAX, archs, 0, NULL)                                \
	X(8, STR, OPT, JC_STR_MAX, nvrtc_version, 0, NULL)                        \
	X(10, STR, OPT, JC_STR_MAX, toolkit_include, 0, NULL)                     \
	X(1, U32, REQ, 0, version, 0, NULL)                                       \
	X(2, STR, REQ, JC_STR_MAX, name, 0, NULL)

#define ERROR_FIELDS(X) /* struct error */                                        \
	X(1, I32, REQ, 0, code, 0, NULL)                                          \
	X(2, STR, REQ, JC_TEXT_MAX, message, 0, NULL)

#define HEADER_FIELDS(X) /* struct jc_blob, nested in COMPILE */                  \
	X(1, STR, REQ, JC_STR_MAX, name, 0, NULL)                                 \
	X(2, BYTES, REQ, JC_FRAME_MAX, data, OF(size), NULL)

#define LINK_INPUT_FIELDS(X) /* struct jc_blob, nested in COMPILE */              \
	X(1, U32, REQ, 0, type, 0, NULL)                                          \
	X(2, STR, REQ, JC_STR_MAX, name, 0, NULL)                                 \
	X(3, BYTES, REQ, JC_FRAME_MAX, data, OF(size), NULL)

#define REQ_FIELDS(X) /* struct jc_req: COMPILE */                                \
	X(3, STR, OPT, JC_STR_MAX, arch, 0, NULL)                                 \
	X(4, STR, OPT, JC_STR_MAX, source_name, 0, NULL)                          \
	X(5, BYTES, OPT, JC_FRAME_MAX, source, OF(source_size), NULL)             \
	X(6, ARRAY, REP, JC_FRAME_MAX, headers, OF(n_headers), &header_layout)    \
	X(7, STRV, REP, JC_STR_MAX, options, 0, NULL)                             \
	X(8, STRV, REP, JC_STR_MAX, include_dirs, 0, NULL)                        \
	X(9, STRV, REP, JC_STR_MAX, name_exprs, 0, NULL)                          \
	X(10, ARRAY, REP, JC_FRAME_MAX, link_inputs, OF(n_link_inputs), &link_input_layout) \
	X(11, STRV, REP, JC_STR_MAX, link_options, 0, NULL)                       \
	X(12, STR, OPT, JC_STR_MAX, app_abi, 0, NULL)                             \
	X(13, U32, OPT, 0, test_fault, 0, NULL)                                   \
	X(14, FIX16, OPT, 0, reject_object, 0, NULL)                              \
	X(15, U32, OPT, 0, reject_reason, 0, NULL)                                \
	X(16, STR, OPT, JC_STR_MAX, reject_message, 0, NULL)                      \
	X(17, ARRAY, REP, JC_FRAME_MAX, tree, OF(n_tree), &link_input_layout)     \
	X(18, U32, OPT, 0, tree_round, 0, NULL)                                   \
	X(19, FIX16, OPT, 0, tree_digest, 0, NULL)                                \
	X(32, STR, OPT, JC_STR_MAX, display_name, 0, NULL)                        \
	X(33, U32, OPT, 0, name_free, 0, NULL)                                    \
	X(20, STRV, REP, JC_STR_MAX, follow, 0, NULL)                             \
	X(21, STR, OPT, JC_STR_MAX, nvrtc_id, 0, NULL)                            \
	X(1, U32, REQ, 0, job, 0, NULL)                                           \
	X(2, U32, REQ, 0, output, 0, NULL)

#define LOWERED_FIELDS(X) /* struct jc_lowered, nested in RESULT */               \
	X(1, STR, REQ, JC_STR_MAX, expr, 0, NULL)                                 \
	X(2, STR, REQ, JC_STR_MAX, lowered, 0, NULL)

#define DEP_FIELDS(X) /* struct jc_dep, nested in RESULT (worker -> daemon) */     \
	X(2, U64, OPT, 0, dev, 0, NULL)                                           \
	X(3, U64, OPT, 0, ino, 0, NULL)                                           \
	X(4, U64, OPT, 0, size, 0, NULL)                                          \
	X(5, I64, OPT, 0, mtime_ns, 0, NULL)                                      \
	X(6, I64, OPT, 0, ctime_ns, 0, NULL)                                      \
	X(7, U32, REQ, 0, kind, 0, NULL)                                          \
	X(1, STR, REQ, JC_STR_MAX, path, 0, NULL)

#define RES_FIELDS(X) /* struct jc_res: RESULT */                                 \
	X(1, I32, REQ, 0, status, 0, NULL)                                        \
	X(2, U32, REQ, 0, cache, 0, NULL)                                         \
	X(3, FIX16, REQ, 0, key, 0, NULL)                                         \
	X(4, FIX16, REQ, 0, object, 0, NULL)                                      \
	X(5, U32, REQ, 0, output, 0, NULL)                                        \
	X(6, BYTES, OPT, JC_FRAME_MAX, data, OF(size), NULL)                      \
	X(7, SIZE, REQ, 0, size, 0, NULL)                                         \
	X(8, STR, OPT, JC_TEXT_MAX, log, 0, NULL)                                 \
	X(9, STR, OPT, JC_TEXT_MAX, message, 0, NULL)                             \
	X(10, ARRAY, REP, JC_FRAME_MAX, lowered, OF(n_lowered), &lowered_layout)  \
	X(13, ARRAY, REP, JC_FRAME_MAX, deps, OF(n_deps), &dep_layout)            \
	X(20, U64, OPT, 0, cpu_ns, 0, NULL)                                       \
	X(21, STR, OPT, JC_STR_MAX, compiler, 0, NULL)                            \
	X(11, U64, REQ, 0, compile_ns, 0, NULL)                                   \
	X(12, U64, REQ, 0, server_ns, 0, NULL)

#define ADMIN_FIELDS(X) /* struct jc_admin_req: ADMIN */                          \
	X(2, STRV, REP, JC_STR_MAX, args, 0, NULL)                                \
	X(1, STR, REQ, JC_STR_MAX, command, 0, NULL)

/* struct jc_kv: a record is a flat run of (name, int | str) pairs, so these
 * fields are all "repeated" and record_decode() checks the pairing. */
#define KV_FIELDS(X)                                                              \
	X(1, STR, REP, JC_STR_MAX, name, 0, NULL)                                 \
	X(2, I64, REP, 0, i, 0, NULL)                                             \
	X(3, STR, REP, JC_TEXT_MAX, s, 0, NULL)                                   \
	X(4, U64, REP, 0, u, 0, NULL)

#define REPLY_FIELDS(X) /* struct jc_admin_reply: ADMIN_REPLY */                  \
	X(2, STR, OPT, JC_TEXT_MAX, message, 0, NULL)                             \
	X(3, ARRAY, REP, JC_FRAME_MAX, rec, OF(n_rec), &record_layout)            \
	X(1, I32, REQ, 0, status, 0, NULL)

enum { KV_NAME = 1, KV_INT = 2, KV_STR = 3, KV_U64 = 4 };

struct error {
	int32_t code;
	char *message;
};

#define OF(m) offsetof(T, m)
#define FIELD(tag, kind, flags, limit, member, aux, sub) \
	{tag, K_##kind, F_##flags, limit, offsetof(T, member), aux, sub},
/* Defines layout name from FIELDS for the struct type T (#defined around it). */
#define LAYOUT(name, FIELDS)                                                      \
	static const struct field name##_fields[] = {FIELDS(FIELD)};              \
	_Static_assert(ARRAY_SIZE(name##_fields) <= 64, "seen mask is 64 bits");  \
	static const struct layout name = {                                       \
		.f = name##_fields, .n = ARRAY_SIZE(name##_fields), .size = sizeof(T)}

static int record_decode(const struct layout *l, struct cur c, char *obj);
static void record_encode(struct enc *e, const struct layout *l, const char *obj);
static void record_clear(const struct layout *l, char *obj);

#define T struct jc_hello
LAYOUT(hello_layout, HELLO_FIELDS);
#undef T
#define T struct error
LAYOUT(error_layout, ERROR_FIELDS);
#undef T
#define T struct jc_blob
LAYOUT(header_layout, HEADER_FIELDS);
LAYOUT(link_input_layout, LINK_INPUT_FIELDS);
#undef T
#define T struct jc_req
LAYOUT(req_layout, REQ_FIELDS);
#undef T
#define T struct jc_lowered
LAYOUT(lowered_layout, LOWERED_FIELDS);
#undef T
#define T struct jc_dep
LAYOUT(dep_layout, DEP_FIELDS);
#undef T
#define T struct jc_res
LAYOUT(res_layout, RES_FIELDS);
#undef T
#define T struct jc_admin_req
LAYOUT(admin_layout, ADMIN_FIELDS);
#undef T
#define T struct jc_kv
LAYOUT(kv_layout, KV_FIELDS);
#undef T
/* The fields of kv_layout are what a record holds; its size is a record's. */
static const struct layout record_layout = {
	.f = kv_layout_fields, .n = ARRAY_SIZE(kv_layout_fields), .size = sizeof(struct jc_record),
	.decode = record_decode, .encode = record_encode, .clear = record_clear};
#define T struct jc_admin_reply
LAYOUT(reply_layout, REPLY_FIELDS);
#undef T

/* ---- little-endian and member access ---------------------------------- */

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static void *get_ptr(const char *m)
{
	void *p;
	memcpy(&p, m, sizeof(p));
	return p;
}

static void set_ptr(char *m, const void *p)
{
	memcpy(m, &p, sizeof(p));
}

static size_t get_size(const char *m)
{
	size_t n;
	memcpy(&n, m, sizeof(n));
	return n;
}

static void set_size(char *m, size_t n)
{
	memcpy(m, &n, sizeof(n));
}

/* An integer member (any fixed kind but FIX16) widened to 64 bits. */
static uint64_t get_int(const struct field *f, const char *m)
{
	uint32_t v32;
	uint64_t v64;
	switch (f->kind) {
	case K_U32:
	case K_I32:
		memcpy(&v32, m, 4);
		return v32;
	case K_SIZE:
		return get_size(m);
	default:
		memcpy(&v64, m, 8);
		return v64;
	}
}

int jc__proto_fail_alloc;

/* Every allocation of the codec, so that tests can make each one fail. */
static void *xrealloc(void *p, size_t n)
{
	if (jc__proto_fail_alloc > 0 && --jc__proto_fail_alloc == 0)
		return NULL;
	return realloc(p, n);
}

/*
 * Makes room for element n (of sz bytes) in the array *arrp holds. Arrays
 * grown here start empty and grow only here, so their capacity is n rounded
 * up to a power of two: they are reallocated only when n is 0 or a power of
 * two. Returns 0, JC_ETOOBIG or JC_ENOMEM (*arrp unchanged).
 */
static int grow(void *arrp, size_t n, size_t sz)
{
	if (n >= JC_REPEAT_MAX)
		return JC_ETOOBIG;
	if (n && (n & (n - 1)))
		return 0;
	void *p = xrealloc(get_ptr(arrp), (n ? 2 * n : 1) * sz);
	if (!p)
		return JC_ENOMEM;
	set_ptr(arrp, p);
	return 0;
}

/* A malloc'd copy of v with a NUL after it. */
static char *dup_nul(struct cur v)
{
	char *s = xrealloc(NULL, v.len + 1);
	if (s) {
		if (v.len)
			memcpy(s, v.p, v.len);
		s[v.len] = '\0';
	}
	return s;
}

/* ---- buffer and encoder ------------------------------------------------ */

void jc__buf_free(struct jc_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void jc__buf_reset(struct jc_buf *b)
{
	b->len = 0;
	b->err = 0;
}

/* Appends n bytes to b and returns where they go, or NULL (b->err set). */
static uint8_t *buf_append(struct jc_buf *b, size_t n)
{
	if (b->err)
		return NULL;
	if (n > b->cap - b->len) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap - b->len < n) {
			if (cap > SIZE_MAX / 2) {
				b->err = JC_ENOMEM;
				return NULL;
			}
			cap *= 2;
		}
		uint8_t *p = xrealloc(b->data, cap);
		if (!p) {
			b->err = JC_ENOMEM;
			return NULL;
		}
		b->data = p;
		b->cap = cap;
	}
	b->len += n;
	return b->data + b->len - n;
}

/* Appends field tag with n bytes of v; returns the field's offset in the
 * buffer (for nested fields, whose length put_end() fixes) or 0 on error. */
static size_t put(struct enc *e, uint16_t tag, const void *v, size_t n, size_t limit)
{
	struct jc_buf *b = e->b;
	if (!b->err && (n > limit || FIELD_HDR + n > JC_FRAME_HDR + JC_FRAME_MAX - (b->len - e->start)))
		b->err = JC_ETOOBIG;
	uint8_t *p = buf_append(b, FIELD_HDR + n);
	if (!p)
		return 0;
	p[0] = (uint8_t)tag;
	p[1] = (uint8_t)(tag >> 8);
	put32(p + 2, (uint32_t)n);
	if (n)
		memcpy(p + FIELD_HDR, v, n);
	return (size_t)(p - b->data);
}

/* Sets the length of the nested field that starts at offset at. */
static void put_end(struct enc *e, size_t at)
{
	if (!e->b->err)
		put32(e->b->data + at + 2, (uint32_t)(e->b->len - at - FIELD_HDR));
}

static void put_str(struct enc *e, const struct field *f, const char *s)
{
	put(e, f->tag, s, strlen(s), f->limit);
}

static void encode_fields(struct enc *e, const struct layout *l, const char *obj);

static void encode_field(struct enc *e, const struct field *f, const char *obj)
{
	const char *m = obj + f->off;
	const uint8_t zero[16] = {0};
	uint8_t w[8];
	const char *s;
	const char *arr;
	const struct jc_strv *sv;
	size_t n;

	switch (f->kind) {
	case K_FIX16:
		if (f->flags == F_REQ || memcmp(m, zero, 16))
			put(e, f->tag, m, 16, 16);
		break;
	case K_STR:
		s = get_ptr(m);
		if (s || f->flags == F_REQ)
			put_str(e, f, s ? s : "");
		break;
	case K_BYTES:
		s = get_ptr(m);
		if (s || f->flags == F_REQ)
			put(e, f->tag, s, s ? get_size(obj + f->aux) : 0, f->limit);
		break;
	case K_STRV:
		sv = (const struct jc_strv *)m;
		if (sv->n > JC_REPEAT_MAX && !e->b->err)
			e->b->err = JC_ETOOBIG;
		for (size_t i = 0; i < sv->n && !e->b->err; i++)
			put_str(e, f, sv->v[i]);
		break;
	case K_ARRAY:
		arr = get_ptr(m);
		n = get_size(obj + f->aux);
		if (n > JC_REPEAT_MAX && !e->b->err)
			e->b->err = JC_ETOOBIG;
		for (size_t i = 0; i < n && !e->b->err; i++) {
			size_t at = put(e, f->tag, NULL, 0, 0);
			encode_fields(e, f->sub, arr + i * f->sub->size);
			put_end(e, at);
		}
		break;
	default: {
		uint64_t v = get_int(f, m);
		if (f->flags == F_REQ || v) {
			put64(w, v); /* little-endian: the low 4 bytes are the u32 */
			put(e, f->tag, w, fixed_width[f->kind], 8);
		}
	}
	}
}

static void encode_fields(struct enc *e, const struct layout *l, const char *obj)
{
	if (l->encode) {
		l->encode(e, l, obj);
		return;
	}
	for (size_t i = 0; i < l->n; i++)
		encode_field(e, &l->f[i], obj);
}

/* Appends a frame of type holding obj laid out by l. */
static int encode_msg(struct jc_buf *b, uint16_t type, const struct layout *l, const void *obj)
{
	struct enc e = {b, b->len};
	uint8_t *h = buf_append(b, JC_FRAME_HDR);
	if (h) {
		memset(h, 0, JC_FRAME_HDR);
		h[4] = (uint8_t)type;
		h[5] = (uint8_t)(type >> 8);
	}
	encode_fields(&e, l, obj);
	if (b->err) {
		if (b->len > e.start)
			b->len = e.start;
		return b->err;
	}
	put32(b->data + e.start, (uint32_t)(b->len - e.start - JC_FRAME_HDR));
	return 0;
}

/* ---- decoder ----------------------------------------------------------- */

int jc__frame_header_decode(const uint8_t hdr[JC_FRAME_HDR], uint16_t *type, uint32_t *len)
{
	*type = (uint16_t)(hdr[4] | hdr[5] << 8);
	*len = get32(hdr);
	if (hdr[6] || hdr[7] || *type < JC_MSG_HELLO || *type > JC_MSG_ERROR)
		return JC_EPROTO;
	return *len > JC_FRAME_MAX ? JC_ETOOBIG : 0;
}

/* Takes the next field off c: checks that it fits, that l knows its tag and
 * that its value has the right size and content. */
static int next_field(struct cur *c, const struct layout *l, const struct field **fp,
		      struct cur *v)
{
	if (c->len < FIELD_HDR)
		return JC_EPROTO;
	uint16_t tag = (uint16_t)(c->p[0] | c->p[1] << 8);
	size_t n = get32(c->p + 2);
	if (n > c->len - FIELD_HDR)
		return JC_EPROTO;
	*v = (struct cur){c->p + FIELD_HDR, n};
	c->p += FIELD_HDR + n;
	c->len -= FIELD_HDR + n;

	const struct field *f = NULL;
	for (size_t i = 0; i < l->n && !f; i++)
		if (l->f[i].tag == tag)
			f = &l->f[i];
	if (!f)
		return JC_EPROTO;
	*fp = f;
	if (fixed_width[f->kind])
		return n == fixed_width[f->kind] ? 0 : JC_EPROTO;
	if (n > f->limit)
		return JC_ETOOBIG;
	if ((f->kind == K_STR || f->kind == K_STRV) && memchr(v->p, 0, n))
		return JC_EPROTO;
	return 0;
}

/* The offset of the size_t member f writes, or SIZE_MAX. */
static size_t size_member(const struct field *f)
{
	return f->kind == K_SIZE ? f->off : f->kind == K_BYTES ? f->aux : SIZE_MAX;
}

/* Fields that write the same size member (RESULT data and size) must agree. */
static int size_agrees(const struct layout *l, const struct field *f, uint64_t seen,
		       const char *obj, size_t n)
{
	size_t at = size_member(f);
	for (size_t i = 0; i < l->n; i++)
		if (&l->f[i] != f && (seen >> i & 1) && size_member(&l->f[i]) == at &&
		    get_size(obj + at) != n)
			return JC_EPROTO;
	return 0;
}

static void clear_fields(const struct layout *l, char *obj);
static int decode_fields(const struct layout *l, struct cur c, char *obj);

/* Stores the value v of field f into obj. */
static int store(const struct layout *l, const struct field *f, uint64_t seen, struct cur v,
		 char *obj)
{
	char *m = obj + f->off;
	struct jc_strv *sv;
	char *s, *arr;
	size_t n;
	uint32_t x32;
	uint64_t x;
	int rc;

	switch (f->kind) {
	case K_U32:
	case K_I32:
		x32 = get32(v.p);
		memcpy(m, &x32, 4);
		return 0;
	case K_U64:
	case K_I64:
		x = get64(v.p);
		memcpy(m, &x, 8);
		return 0;
	case K_SIZE:
		x = get64(v.p);
		if (x > SIZE_MAX)
			return JC_EPROTO;
		if ((rc = size_agrees(l, f, seen, obj, (size_t)x)))
			return rc;
		set_size(m, (size_t)x);
		return 0;
	case K_FIX16:
		memcpy(m, v.p, 16);
		return 0;
	case K_STR:
	case K_BYTES:
		if (f->kind == K_BYTES && (rc = size_agrees(l, f, seen, obj, v.len)))
			return rc;
		if (!(s = dup_nul(v)))
			return JC_ENOMEM;
		set_ptr(m, s);
		if (f->kind == K_BYTES)
			set_size(obj + f->aux, v.len);
		return 0;
	case K_STRV:
		sv = (struct jc_strv *)m;
		if ((rc = grow(&sv->v, sv->n, sizeof(char *))))
			return rc;
		if (!(sv->v[sv->n] = dup_nul(v)))
			return JC_ENOMEM;
		sv->n++;
		return 0;
	default: /* K_ARRAY */
		n = get_size(obj + f->aux);
		if ((rc = grow(m, n, f->sub->size)))
			return rc;
		arr = get_ptr(m);
		s = arr + n * f->sub->size;
		memset(s, 0, f->sub->size);
		rc = f->sub->decode ? f->sub->decode(f->sub, v, s) : decode_fields(f->sub, v, s);
		if (rc) {
			clear_fields(f->sub, s);
			return rc;
		}
		set_size(obj + f->aux, n + 1);
		return 0;
	}
}

/* Decodes the fields in c into obj (zeroed, or partly filled on error). */
static int decode_fields(const struct layout *l, struct cur c, char *obj)
{
	uint64_t seen = 0;
	while (c.len) {
		const struct field *f;
		struct cur v;
		int rc = next_field(&c, l, &f, &v);
		if (rc)
			return rc;
		size_t i = (size_t)(f - l->f);
		if ((seen >> i & 1) && f->flags != F_REP)
			return JC_EPROTO;
		if ((rc = store(l, f, seen, v, obj)))
			return rc;
		seen |= (uint64_t)1 << i;
	}
	for (size_t i = 0; i < l->n; i++)
		if (l->f[i].flags == F_REQ && !(seen >> i & 1))
			return JC_EPROTO;
	return 0;
}

/* Frees what obj owns by layout l and zeroes it. */
static void clear_fields(const struct layout *l, char *obj)
{
	if (l->clear) {
		l->clear(l, obj);
		return;
	}
	for (size_t i = 0; i < l->n; i++) {
		const struct field *f = &l->f[i];
		char *m = obj + f->off;
		char *arr = NULL;
		if (f->kind == K_STR || f->kind == K_BYTES) {
			free(get_ptr(m));
		} else if (f->kind == K_STRV) {
			struct jc_strv *sv = (struct jc_strv *)m;
			for (size_t j = 0; j < sv->n; j++)
				free(sv->v[j]);
			free(sv->v);
		} else if (f->kind == K_ARRAY) {
			arr = get_ptr(m);
			for (size_t j = 0, n = get_size(obj + f->aux); j < n; j++)
				clear_fields(f->sub, arr + j * f->sub->size);
			free(arr);
		}
	}
	memset(obj, 0, l->size);
}

/* Decodes a whole payload into obj (zeroed first, cleared on error). */
static int decode_msg(const struct layout *l, const uint8_t *payload, size_t len, void *obj)
{
	memset(obj, 0, l->size);
	int rc = decode_fields(l, (struct cur){payload, len}, obj);
	if (rc)
		clear_fields(l, obj);
	return rc;
}

/* ---- records ----------------------------------------------------------- */

static int record_decode(const struct layout *l, struct cur c, char *obj)
{
	struct jc_record *r = (struct jc_record *)obj;
	while (c.len) {
		const struct field *fn, *fv;
		struct cur name, val;
		int rc = next_field(&c, l, &fn, &name);
		if (!rc && fn->tag != KV_NAME)
			rc = JC_EPROTO;
		if (!rc)
			rc = next_field(&c, l, &fv, &val);
		if (!rc && fv->tag == KV_NAME)
			rc = JC_EPROTO;
		if (!rc)
			rc = grow(&r->kv, r->n, sizeof(*r->kv));
		if (rc)
			return rc;
		struct jc_kv *kv = memset(&r->kv[r->n], 0, sizeof(*kv));
		kv->is_int = fv->tag == KV_INT || fv->tag == KV_U64;
		kv->is_unsigned = fv->tag == KV_U64;
		if ((rc = store(l, fn, 0, name, (char *)kv)) || (rc = store(l, fv, 0, val, (char *)kv))) {
			clear_fields(&kv_layout, (char *)kv);
			return rc;
		}
		if (kv->is_unsigned)
			kv->i = (int64_t)kv->u;
		r->n++;
	}
	return 0;
}

static void record_encode(struct enc *e, const struct layout *l, const char *obj)
{
	const struct jc_record *r = (const struct jc_record *)obj;
	uint8_t w[8];
	if (r->n > JC_REPEAT_MAX && !e->b->err)
		e->b->err = JC_ETOOBIG;
	for (size_t i = 0; i < r->n && !e->b->err; i++) {
		const struct jc_kv *kv = &r->kv[i];
		put_str(e, &l->f[KV_NAME - 1], kv->name ? kv->name : "");
		if (kv->is_int) {
			put64(w, kv->is_unsigned ? kv->u : (uint64_t)kv->i);
			put(e, kv->is_unsigned ? KV_U64 : KV_INT, w, 8, 8);
		} else {
			put_str(e, &l->f[KV_STR - 1], kv->s ? kv->s : "");
		}
	}
}

static void record_clear(const struct layout *l, char *obj)
{
	struct jc_record *r = (struct jc_record *)obj;
	(void)l;
	for (size_t i = 0; i < r->n; i++)
		clear_fields(&kv_layout, (char *)&r->kv[i]);
	free(r->kv);
	memset(r, 0, sizeof(*r));
}

static int record_add(struct jc_record *r, const char *name, const char *s, int64_t v)
{
	int rc = grow(&r->kv, r->n, sizeof(*r->kv));
	if (rc)
		return rc;
	struct jc_kv *kv = memset(&r->kv[r->n], 0, sizeof(*kv));
	kv->name = dup_nul((struct cur){(const uint8_t *)name, strlen(name)});
	kv->is_int = !s;
	kv->i = v;
	if (s)
		kv->s = dup_nul((struct cur){(const uint8_t *)s, strlen(s)});
	if (!kv->name || (s && !kv->s)) {
		clear_fields(&kv_layout, (char *)kv);
		return JC_ENOMEM;
	}
	r->n++;
	return 0;
}

int jc__record_add_int(struct jc_record *r, const char *name, int64_t v)
{
	return record_add(r, name, NULL, v);
}

int jc__record_add_u64(struct jc_record *r, const char *name, uint64_t v)
{
	int rc = record_add(r, name, NULL, (int64_t)v);
	if (rc == 0) {
		r->kv[r->n - 1].is_unsigned = 1;
		r->kv[r->n - 1].u = v;
	}
	return rc;
}

int jc__record_add_str(struct jc_record *r, const char *name, const char *v)
{
	return record_add(r, name, v ? v : "", 0);
}

int jc__reply_add_record(struct jc_admin_reply *a, struct jc_record **rec_out)
{
	int rc = grow(&a->rec, a->n_rec, sizeof(*a->rec));
	if (rc)
		return rc;
	*rec_out = memset(&a->rec[a->n_rec++], 0, sizeof(**rec_out));
	return 0;
}

const struct jc_kv *jc__record_get(const struct jc_record *r, const char *name)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->kv[i].name, name) == 0)
			return &r->kv[i];
	return NULL;
}

/* ---- messages ---------------------------------------------------------- */

int jc__encode_hello_ex(struct jc_buf *b, uint16_t type, const struct jc_hello *h)
{
	if (type != JC_MSG_HELLO && type != JC_MSG_HELLO_OK)
		return JC_EINVAL;
	return encode_msg(b, type, &hello_layout, h);
}

int jc__decode_hello_ex(const uint8_t *payload, size_t len, struct jc_hello *out)
{
	return decode_msg(&hello_layout, payload, len, out);
}

void jc__hello_clear(struct jc_hello *h)
{
	free(h->name);
	free(h->cache_dir);
	free(h->archs);
	free(h->nvrtc_version);
	free(h->toolkit_include);
	memset(h, 0, sizeof(*h));
}

int jc__encode_hello(struct jc_buf *b, uint16_t type, uint32_t version, const char *name)
{
	struct jc_hello h = {.version = version, .name = (char *)name};
	return jc__encode_hello_ex(b, type, &h);
}

int jc__decode_hello(const uint8_t *payload, size_t len, uint32_t *version, char **name)
{
	struct jc_hello h;
	int rc = jc__decode_hello_ex(payload, len, &h);
	*version = h.version;
	*name = h.name;
	free(h.cache_dir);
	return rc;
}

int jc__encode_req(struct jc_buf *b, const struct jc_req *r)
{
	return encode_msg(b, JC_MSG_COMPILE, &req_layout, r);
}

int jc__decode_req(const uint8_t *payload, size_t len, struct jc_req *out)
{
	return decode_msg(&req_layout, payload, len, out);
}

int jc__encode_res(struct jc_buf *b, const struct jc_res *r)
{
	return encode_msg(b, JC_MSG_RESULT, &res_layout, r);
}

int jc__decode_res(const uint8_t *payload, size_t len, struct jc_res *out)
{
	int rc = decode_msg(&res_layout, payload, len, out);
	out->fd = -1;
	return rc;
}

int jc__encode_error(struct jc_buf *b, int code, const char *message)
{
	struct error m = {code, (char *)message};
	return encode_msg(b, JC_MSG_ERROR, &error_layout, &m);
}

int jc__decode_error(const uint8_t *payload, size_t len, int *code, char **message)
{
	struct error m;
	int rc = decode_msg(&error_layout, payload, len, &m);
	*code = m.code;
	*message = m.message;
	return rc;
}

int jc__encode_admin(struct jc_buf *b, const struct jc_admin_req *a)
{
	return encode_msg(b, JC_MSG_ADMIN, &admin_layout, a);
}

int jc__decode_admin(const uint8_t *payload, size_t len, struct jc_admin_req *out)
{
	return decode_msg(&admin_layout, payload, len, out);
}

void jc__admin_req_clear(struct jc_admin_req *a)
{
	clear_fields(&admin_layout, (char *)a);
}

int jc__encode_admin_reply(struct jc_buf *b, const struct jc_admin_reply *a)
{
	return encode_msg(b, JC_MSG_ADMIN_REPLY, &reply_layout, a);
}

int jc__decode_admin_reply(const uint8_t *payload, size_t len, struct jc_admin_reply *out)
{
	return decode_msg(&reply_layout, payload, len, out);
}

void jc__admin_reply_clear(struct jc_admin_reply *a)
{
	clear_fields(&reply_layout, (char *)a);
}
