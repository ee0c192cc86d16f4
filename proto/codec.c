/* SPDX-License-Identifier: MIT */
/*
 * The field codec's engine (codec.h): one encoder, one decoder and one
 * destructor walk a message's table of fields (proto.c holds the tables).
 *
 * Members are read and written through memcpy at their offsetof() offset;
 * pointer members are copied as void * (all object pointers share one
 * representation on the platforms we build for).
 */
#include "proto/codec.h"

#include <stdlib.h>
#include <string.h>

#include "jitcache/jitcache.h"

#define FIELD_HDR 6 /* u16 tag + u32 len */

/* Value length of the fixed-size kinds; 0 for the others. */
static const uint8_t fixed_width[K_ARRAY + 1] = {
    [K_U32] = 4, [K_I32] = 4, [K_U64] = 8, [K_I64] = 8, [K_SIZE] = 8, [K_FIX16] = 16,
};

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

void jc__codec_put64(uint8_t *p, uint64_t v)
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
int jc__codec_grow(void *arrp, size_t n, size_t sz)
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
char *jc__codec_dup(struct cur v)
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
size_t jc__codec_put(struct enc *e, uint16_t tag, const void *v, size_t n, size_t limit)
{
	struct jc_buf *b = e->b;
	if (!b->err &&
	    (n > limit || FIELD_HDR + n > JC_FRAME_HDR + JC_FRAME_MAX - (b->len - e->start)))
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

void jc__codec_put_str(struct enc *e, const struct field *f, const char *s)
{
	jc__codec_put(e, f->tag, s, strlen(s), f->limit);
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
			jc__codec_put(e, f->tag, m, 16, 16);
		break;
	case K_STR:
		s = get_ptr(m);
		if (s || f->flags == F_REQ)
			jc__codec_put_str(e, f, s ? s : "");
		break;
	case K_BYTES:
		s = get_ptr(m);
		if (s || f->flags == F_REQ)
			jc__codec_put(e, f->tag, s, s ? get_size(obj + f->aux) : 0, f->limit);
		break;
	case K_STRV:
		sv = (const struct jc_strv *)m;
		if (sv->n > JC_REPEAT_MAX && !e->b->err)
			e->b->err = JC_ETOOBIG;
		for (size_t i = 0; i < sv->n && !e->b->err; i++)
			jc__codec_put_str(e, f, sv->v[i]);
		break;
	case K_ARRAY:
		arr = get_ptr(m);
		n = get_size(obj + f->aux);
		if (n > JC_REPEAT_MAX && !e->b->err)
			e->b->err = JC_ETOOBIG;
		for (size_t i = 0; i < n && !e->b->err; i++) {
			size_t at = jc__codec_put(e, f->tag, NULL, 0, 0);
			encode_fields(e, f->sub, arr + i * f->sub->size);
			put_end(e, at);
		}
		break;
	default: {
		uint64_t v = get_int(f, m);
		if (f->flags == F_REQ || v) {
			jc__codec_put64(w, v); /* little-endian: the low 4 bytes are the u32 */
			jc__codec_put(e, f->tag, w, fixed_width[f->kind], 8);
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
int jc__codec_encode(struct jc_buf *b, uint16_t type, const struct layout *l, const void *obj)
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
int jc__codec_next_field(struct cur *c, const struct layout *l, const struct field **fp,
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

static int decode_fields(const struct layout *l, struct cur c, char *obj);

/* Stores the value v of field f into obj. */
int jc__codec_store(const struct layout *l, const struct field *f, uint64_t seen, struct cur v,
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
		if (!(s = jc__codec_dup(v)))
			return JC_ENOMEM;
		set_ptr(m, s);
		if (f->kind == K_BYTES)
			set_size(obj + f->aux, v.len);
		return 0;
	case K_STRV:
		sv = (struct jc_strv *)m;
		if ((rc = jc__codec_grow(&sv->v, sv->n, sizeof(char *))))
			return rc;
		if (!(sv->v[sv->n] = jc__codec_dup(v)))
			return JC_ENOMEM;
		sv->n++;
		return 0;
	default: /* K_ARRAY */
		n = get_size(obj + f->aux);
		if ((rc = jc__codec_grow(m, n, f->sub->size)))
			return rc;
		arr = get_ptr(m);
		s = arr + n * f->sub->size;
		memset(s, 0, f->sub->size);
		rc = f->sub->decode ? f->sub->decode(f->sub, v, s) : decode_fields(f->sub, v, s);
		if (rc) {
			jc__codec_clear(f->sub, s);
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
		int rc = jc__codec_next_field(&c, l, &f, &v);
		if (rc)
			return rc;
		size_t i = (size_t)(f - l->f);
		if ((seen >> i & 1) && f->flags != F_REP)
			return JC_EPROTO;
		if ((rc = jc__codec_store(l, f, seen, v, obj)))
			return rc;
		seen |= (uint64_t)1 << i;
	}
	for (size_t i = 0; i < l->n; i++)
		if (l->f[i].flags == F_REQ && !(seen >> i & 1))
			return JC_EPROTO;
	return 0;
}

/* Frees what obj owns by layout l and zeroes it. */
void jc__codec_clear(const struct layout *l, char *obj)
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
				jc__codec_clear(f->sub, arr + j * f->sub->size);
			free(arr);
		}
	}
	memset(obj, 0, l->size);
}

/* Decodes a whole payload into obj (zeroed first, cleared on error). */
int jc__codec_decode(const struct layout *l, const uint8_t *payload, size_t len, void *obj)
{
	memset(obj, 0, l->size);
	int rc = decode_fields(l, (struct cur){payload, len}, obj);
	if (rc)
		jc__codec_clear(l, obj);
	return rc;
}
