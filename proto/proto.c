/* SPDX-License-Identifier: MIT */
/*
 * The wire messages (PROTOCOL.md). Every message is a table of fields
 * (declared once below, X-macro style) that says, for each tag, its wire
 * kind, whether it is required, optional or repeated, its length limit and
 * the struct member it fills; the engine that walks these tables is
 * codec.c's (codec.h). Also here: the admin reply's records, whose wire
 * form is a flat run of (name, value) pairs.
 */
#include "proto/proto.h"

#include <stdlib.h>
#include <string.h>

#include "jitcache/jitcache.h"
#include "proto/codec.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

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
#define HELLO_FIELDS(X) /* struct jc_hello: HELLO and HELLO_OK */                                  \
	X(3, U64, OPT, 0, dir_dev, 0, NULL)                                                        \
	X(4, U64, OPT, 0, dir_ino, 0, NULL)                                                        \
	X(5, STR, OPT, JC_STR_MAX, cache_dir, 0, NULL)                                             \
	X(6, U32, OPT, 0, pid, 0, NULL)                                                            \
	X(7, STR, OPT, JC_STR_MAX, archs, 0, NULL)                                                 \
	X(8, STR, OPT, JC_STR_MAX, nvrtc_version, 0, NULL)                                         \
	X(10, STR, OPT, JC_STR_MAX, toolkit_include, 0, NULL)                                      \
	X(1, U32, REQ, 0, version, 0, NULL)                                                        \
	X(2, STR, REQ, JC_STR_MAX, name, 0, NULL)

#define ERROR_FIELDS(X) /* struct error */                                                         \
	X(1, I32, REQ, 0, code, 0, NULL)                                                           \
	X(2, STR, REQ, JC_TEXT_MAX, message, 0, NULL)

#define HEADER_FIELDS(X) /* struct jc_blob, nested in COMPILE */                                   \
	X(1, STR, REQ, JC_STR_MAX, name, 0, NULL)                                                  \
	X(2, BYTES, REQ, JC_FRAME_MAX, data, OF(size), NULL)

#define LINK_INPUT_FIELDS(X) /* struct jc_blob, nested in COMPILE */                               \
	X(1, U32, REQ, 0, type, 0, NULL)                                                           \
	X(2, STR, REQ, JC_STR_MAX, name, 0, NULL)                                                  \
	X(3, BYTES, REQ, JC_FRAME_MAX, data, OF(size), NULL)

#define REQ_FIELDS(X) /* struct jc_req: COMPILE */                                                 \
	X(3, STR, OPT, JC_STR_MAX, arch, 0, NULL)                                                  \
	X(4, STR, OPT, JC_STR_MAX, source_name, 0, NULL)                                           \
	X(5, BYTES, OPT, JC_FRAME_MAX, source, OF(source_size), NULL)                              \
	X(6, ARRAY, REP, JC_FRAME_MAX, headers, OF(n_headers), &header_layout)                     \
	X(7, STRV, REP, JC_STR_MAX, options, 0, NULL)                                              \
	X(8, STRV, REP, JC_STR_MAX, include_dirs, 0, NULL)                                         \
	X(9, STRV, REP, JC_STR_MAX, name_exprs, 0, NULL)                                           \
	X(10, ARRAY, REP, JC_FRAME_MAX, link_inputs, OF(n_link_inputs), &link_input_layout)        \
	X(11, STRV, REP, JC_STR_MAX, link_options, 0, NULL)                                        \
	X(12, STR, OPT, JC_STR_MAX, app_abi, 0, NULL)                                              \
	X(13, U32, OPT, 0, test_fault, 0, NULL)                                                    \
	X(14, FIX16, OPT, 0, reject_object, 0, NULL)                                               \
	X(15, U32, OPT, 0, reject_reason, 0, NULL)                                                 \
	X(16, STR, OPT, JC_STR_MAX, reject_message, 0, NULL)                                       \
	X(17, ARRAY, REP, JC_FRAME_MAX, tree, OF(n_tree), &link_input_layout)                      \
	X(18, U32, OPT, 0, tree_round, 0, NULL)                                                    \
	X(19, FIX16, OPT, 0, tree_digest, 0, NULL)                                                 \
	X(32, STR, OPT, JC_STR_MAX, display_name, 0, NULL)                                         \
	X(33, U32, OPT, 0, name_free, 0, NULL)                                                     \
	X(20, STRV, REP, JC_STR_MAX, follow, 0, NULL)                                              \
	X(21, STR, OPT, JC_STR_MAX, nvrtc_id, 0, NULL)                                             \
	X(1, U32, REQ, 0, job, 0, NULL)                                                            \
	X(2, U32, REQ, 0, output, 0, NULL)

#define LOWERED_FIELDS(X) /* struct jc_lowered, nested in RESULT */                                \
	X(1, STR, REQ, JC_STR_MAX, expr, 0, NULL)                                                  \
	X(2, STR, REQ, JC_STR_MAX, lowered, 0, NULL)

#define DEP_FIELDS(X) /* struct jc_dep, nested in RESULT (worker -> daemon) */                     \
	X(2, U64, OPT, 0, dev, 0, NULL)                                                            \
	X(3, U64, OPT, 0, ino, 0, NULL)                                                            \
	X(4, U64, OPT, 0, size, 0, NULL)                                                           \
	X(5, I64, OPT, 0, mtime_ns, 0, NULL)                                                       \
	X(6, I64, OPT, 0, ctime_ns, 0, NULL)                                                       \
	X(7, U32, REQ, 0, kind, 0, NULL)                                                           \
	X(1, STR, REQ, JC_STR_MAX, path, 0, NULL)

#define RES_FIELDS(X) /* struct jc_res: RESULT */                                                  \
	X(1, I32, REQ, 0, status, 0, NULL)                                                         \
	X(2, U32, REQ, 0, cache, 0, NULL)                                                          \
	X(3, FIX16, REQ, 0, key, 0, NULL)                                                          \
	X(4, FIX16, REQ, 0, object, 0, NULL)                                                       \
	X(5, U32, REQ, 0, output, 0, NULL)                                                         \
	X(6, BYTES, OPT, JC_FRAME_MAX, data, OF(size), NULL)                                       \
	X(7, SIZE, REQ, 0, size, 0, NULL)                                                          \
	X(8, STR, OPT, JC_TEXT_MAX, log, 0, NULL)                                                  \
	X(9, STR, OPT, JC_TEXT_MAX, message, 0, NULL)                                              \
	X(10, ARRAY, REP, JC_FRAME_MAX, lowered, OF(n_lowered), &lowered_layout)                   \
	X(13, ARRAY, REP, JC_FRAME_MAX, deps, OF(n_deps), &dep_layout)                             \
	X(20, U64, OPT, 0, cpu_ns, 0, NULL)                                                        \
	X(21, STR, OPT, JC_STR_MAX, compiler, 0, NULL)                                             \
	X(11, U64, REQ, 0, compile_ns, 0, NULL)                                                    \
	X(12, U64, REQ, 0, server_ns, 0, NULL)

#define ADMIN_FIELDS(X) /* struct jc_admin_req: ADMIN */                                           \
	X(2, STRV, REP, JC_STR_MAX, args, 0, NULL)                                                 \
	X(1, STR, REQ, JC_STR_MAX, command, 0, NULL)

/* struct jc_kv: a record is a flat run of (name, int | str) pairs, so these
 * fields are all "repeated" and record_decode() checks the pairing. */
#define KV_FIELDS(X)                                                                               \
	X(1, STR, REP, JC_STR_MAX, name, 0, NULL)                                                  \
	X(2, I64, REP, 0, i, 0, NULL)                                                              \
	X(3, STR, REP, JC_TEXT_MAX, s, 0, NULL)                                                    \
	X(4, U64, REP, 0, u, 0, NULL)

#define REPLY_FIELDS(X) /* struct jc_admin_reply: ADMIN_REPLY */                                   \
	X(2, STR, OPT, JC_TEXT_MAX, message, 0, NULL)                                              \
	X(3, ARRAY, REP, JC_FRAME_MAX, rec, OF(n_rec), &record_layout)                             \
	X(1, I32, REQ, 0, status, 0, NULL)

enum { KV_NAME = 1, KV_INT = 2, KV_STR = 3, KV_U64 = 4 };

struct error {
	int32_t code;
	char *message;
};

#define OF(m) offsetof(T, m)
#define FIELD(tag, kind, flags, limit, member, aux, sub)                                           \
	{tag, K_##kind, F_##flags, limit, offsetof(T, member), aux, sub},
/* Defines layout name from FIELDS for the struct type T (#defined around it). */
#define LAYOUT(name, FIELDS)                                                                       \
	static const struct field name##_fields[] = {FIELDS(FIELD)};                               \
	_Static_assert(ARRAY_SIZE(name##_fields) <= 64, "seen mask is 64 bits");                   \
	static const struct layout name = {                                                        \
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
static const struct layout record_layout = {.f = kv_layout_fields,
					    .n = ARRAY_SIZE(kv_layout_fields),
					    .size = sizeof(struct jc_record),
					    .decode = record_decode,
					    .encode = record_encode,
					    .clear = record_clear};
#define T struct jc_admin_reply
LAYOUT(reply_layout, REPLY_FIELDS);
#undef T

/* ---- records ----------------------------------------------------------- */

static int record_decode(const struct layout *l, struct cur c, char *obj)
{
	struct jc_record *r = (struct jc_record *)obj;
	while (c.len) {
		const struct field *fn, *fv;
		struct cur name, val;
		int rc = jc__codec_next_field(&c, l, &fn, &name);
		if (!rc && fn->tag != KV_NAME)
			rc = JC_EPROTO;
		if (!rc)
			rc = jc__codec_next_field(&c, l, &fv, &val);
		if (!rc && fv->tag == KV_NAME)
			rc = JC_EPROTO;
		if (!rc)
			rc = jc__codec_grow(&r->kv, r->n, sizeof(*r->kv));
		if (rc)
			return rc;
		struct jc_kv *kv = memset(&r->kv[r->n], 0, sizeof(*kv));
		kv->is_int = fv->tag == KV_INT || fv->tag == KV_U64;
		kv->is_unsigned = fv->tag == KV_U64;
		if ((rc = jc__codec_store(l, fn, 0, name, (char *)kv)) ||
		    (rc = jc__codec_store(l, fv, 0, val, (char *)kv))) {
			jc__codec_clear(&kv_layout, (char *)kv);
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
		jc__codec_put_str(e, &l->f[KV_NAME - 1], kv->name ? kv->name : "");
		if (kv->is_int) {
			jc__codec_put64(w, kv->is_unsigned ? kv->u : (uint64_t)kv->i);
			jc__codec_put(e, kv->is_unsigned ? KV_U64 : KV_INT, w, 8, 8);
		} else {
			jc__codec_put_str(e, &l->f[KV_STR - 1], kv->s ? kv->s : "");
		}
	}
}

static void record_clear(const struct layout *l, char *obj)
{
	struct jc_record *r = (struct jc_record *)obj;
	(void)l;
	for (size_t i = 0; i < r->n; i++)
		jc__codec_clear(&kv_layout, (char *)&r->kv[i]);
	free(r->kv);
	memset(r, 0, sizeof(*r));
}

static int record_add(struct jc_record *r, const char *name, const char *s, int64_t v)
{
	int rc = jc__codec_grow(&r->kv, r->n, sizeof(*r->kv));
	if (rc)
		return rc;
	struct jc_kv *kv = memset(&r->kv[r->n], 0, sizeof(*kv));
	kv->name = jc__codec_dup((struct cur){(const uint8_t *)name, strlen(name)});
	kv->is_int = !s;
	kv->i = v;
	if (s)
		kv->s = jc__codec_dup((struct cur){(const uint8_t *)s, strlen(s)});
	if (!kv->name || (s && !kv->s)) {
		jc__codec_clear(&kv_layout, (char *)kv);
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
	int rc = jc__codec_grow(&a->rec, a->n_rec, sizeof(*a->rec));
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
	return jc__codec_encode(b, type, &hello_layout, h);
}

int jc__decode_hello_ex(const uint8_t *payload, size_t len, struct jc_hello *out)
{
	return jc__codec_decode(&hello_layout, payload, len, out);
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
	return jc__codec_encode(b, JC_MSG_COMPILE, &req_layout, r);
}

int jc__decode_req(const uint8_t *payload, size_t len, struct jc_req *out)
{
	return jc__codec_decode(&req_layout, payload, len, out);
}

int jc__encode_res(struct jc_buf *b, const struct jc_res *r)
{
	return jc__codec_encode(b, JC_MSG_RESULT, &res_layout, r);
}

int jc__decode_res(const uint8_t *payload, size_t len, struct jc_res *out)
{
	int rc = jc__codec_decode(&res_layout, payload, len, out);
	out->fd = -1;
	return rc;
}

int jc__encode_error(struct jc_buf *b, int code, const char *message)
{
	struct error m = {code, (char *)message};
	return jc__codec_encode(b, JC_MSG_ERROR, &error_layout, &m);
}

int jc__decode_error(const uint8_t *payload, size_t len, int *code, char **message)
{
	struct error m;
	int rc = jc__codec_decode(&error_layout, payload, len, &m);
	*code = m.code;
	*message = m.message;
	return rc;
}

int jc__encode_admin(struct jc_buf *b, const struct jc_admin_req *a)
{
	return jc__codec_encode(b, JC_MSG_ADMIN, &admin_layout, a);
}

int jc__decode_admin(const uint8_t *payload, size_t len, struct jc_admin_req *out)
{
	return jc__codec_decode(&admin_layout, payload, len, out);
}

void jc__admin_req_clear(struct jc_admin_req *a)
{
	jc__codec_clear(&admin_layout, (char *)a);
}

int jc__encode_admin_reply(struct jc_buf *b, const struct jc_admin_reply *a)
{
	return jc__codec_encode(b, JC_MSG_ADMIN_REPLY, &reply_layout, a);
}

int jc__decode_admin_reply(const uint8_t *payload, size_t len, struct jc_admin_reply *out)
{
	return jc__codec_decode(&reply_layout, payload, len, out);
}

void jc__admin_reply_clear(struct jc_admin_reply *a)
{
	jc__codec_clear(&reply_layout, (char *)a);
}
