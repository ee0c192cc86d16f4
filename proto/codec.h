/* SPDX-License-Identifier: MIT */
/* The field codec's tables and engine, shared by codec.c (the engine: one
 * encoder, one decoder and one destructor that walk a message's table) and
 * proto.c (the tables of the messages, the admin records, the messages'
 * calls). Private to proto/ (proto.h is its interface). */
#ifndef JC_PROTO_CODEC_H
#define JC_PROTO_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

enum kind {
	K_U32,	 /* uint32_t, 4 bytes */
	K_I32,	 /* int32_t, 4 bytes */
	K_U64,	 /* uint64_t, 8 bytes */
	K_I64,	 /* int64_t, 8 bytes */
	K_SIZE,	 /* size_t, sent as 8 bytes */
	K_FIX16, /* uint8_t[16], exactly 16 bytes */
	K_STR,	 /* char *, no NUL inside */
	K_BYTES, /* uint8_t * + size_t at aux */
	K_STRV,	 /* struct jc_strv, one string per occurrence */
	K_ARRAY, /* array of sub->size elements + size_t count at aux, each nested */
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
	uint32_t limit;		  /* max value length (variable-length kinds) */
	size_t off;		  /* the member */
	size_t aux;		  /* K_BYTES: size member; K_ARRAY: count member */
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

/* Appends a frame of type holding obj laid out by l to b. 0, or JC_ETOOBIG /
 * JC_ENOMEM (b as it was). */
int jc__codec_encode(struct jc_buf *b, uint16_t type, const struct layout *l, const void *obj);
/* Decodes a whole payload into obj (zeroed first, cleared on error). 0,
 * JC_EPROTO, JC_ETOOBIG or JC_ENOMEM. */
int jc__codec_decode(const struct layout *l, const uint8_t *payload, size_t len, void *obj);
/* Frees what obj owns by layout l and zeroes it. */
void jc__codec_clear(const struct layout *l, char *obj);

/* For the hooks of a layout whose wire form is not one field per member
 * (records, proto.c): */
/* Takes the next field off c: checks that it fits, that l knows its tag
 * and that its value has the right size and content. *fp gets its field,
 * *v its value. 0, JC_EPROTO or JC_ETOOBIG. */
int jc__codec_next_field(struct cur *c, const struct layout *l, const struct field **fp,
			 struct cur *v);
/* Stores the value v of field f of l into obj (seen: the fields of l taken
 * so far, bit i for l->f[i]). 0, JC_EPROTO, JC_ETOOBIG or JC_ENOMEM. */
int jc__codec_store(const struct layout *l, const struct field *f, uint64_t seen, struct cur v,
		    char *obj);
/* Appends field tag with n bytes of v (at most limit; b->err set past it or
 * the frame's end); its offset in the buffer, or 0 on error. */
size_t jc__codec_put(struct enc *e, uint16_t tag, const void *v, size_t n, size_t limit);
/* Appends field f's tag with the string s (without its NUL). */
void jc__codec_put_str(struct enc *e, const struct field *f, const char *s);
/* v little-endian into p[8]. */
void jc__codec_put64(uint8_t *p, uint64_t v);
/* Makes room for element n (of sz bytes) in the array *arrp holds (grown
 * only here). 0, JC_ETOOBIG or JC_ENOMEM (*arrp unchanged). */
int jc__codec_grow(void *arrp, size_t n, size_t sz);
/* A malloc'd copy of v with a NUL after it; NULL when out of memory. */
char *jc__codec_dup(struct cur v);

#endif
