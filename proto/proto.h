/* SPDX-License-Identifier: MIT */
/*
 * The jitcache wire protocol: frames and the field codec shared by the
 * daemon, its compile workers, the client library and jitcachectl.
 * PROTOCOL.md describes every message field by field.
 *
 * Frame: u32 payload_len, u16 type, u16 reserved (0), then payload_len bytes
 * of fields: u16 tag, u32 len, len bytes. Integers are little-endian.
 *
 * Encoders append one complete frame to a struct jc_buf. Decoders take the
 * payload of one frame (header already removed by jc__frame_header_decode),
 * accept any byte string without crashing, and either fill *out completely
 * or leave it empty (cleared) and return an error; they never keep a pointer
 * into the payload. Every function is reentrant; distinct objects may be
 * used from distinct threads at once, one object from one thread at a time.
 */
#ifndef JC_PROTO_H
#define JC_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/req.h"

/* 2: HELLO and HELLO_OK carry the cache directory's identity (PROTOCOL.md).
 * 3: HELLO_OK carries the daemon's NVRTC version and supported
 * architectures. 4: COMPILE may carry name_free (field 33). The daemon
 * still speaks 1 to 3 to a client that asks. */
#define JC_PROTO_VERSION 4
#define JC_FRAME_HDR	 8	     /* bytes of frame header */
#define JC_FRAME_MAX	 (64u << 20) /* max payload bytes of one frame */
#define JC_STR_MAX	 (64u << 10) /* max bytes of a string field ... */
#define JC_TEXT_MAX	 (16u << 20) /* ... except logs and messages */
#define JC_REPEAT_MAX	 (1u << 20)  /* max occurrences of one repeated field */

enum jc_msg_type {
	JC_MSG_HELLO = 1,	/* client -> daemon: version, agent name */
	JC_MSG_HELLO_OK = 2,	/* daemon -> client: version, daemon version */
	JC_MSG_COMPILE = 3,	/* a struct jc_req (also daemon -> worker) */
	JC_MSG_RESULT = 4,	/* a struct jc_res (also worker -> daemon) */
	JC_MSG_ADMIN = 5,	/* a struct jc_admin_req */
	JC_MSG_ADMIN_REPLY = 6, /* a struct jc_admin_reply */
	JC_MSG_ERROR = 7,	/* a JC_E* code and a message */
};

/*
 * A growable byte buffer. A zeroed struct is an empty buffer. err is sticky:
 * once an append fails (JC_ENOMEM, or JC_ETOOBIG for a field or frame over
 * its limit) every later append does nothing and returns it, until
 * jc__buf_reset(). data is owned by the buffer.
 */
struct jc_buf {
	uint8_t *data;
	size_t len, cap;
	int err;
};

/* Frees the memory of b and zeroes it. b may be a zeroed buffer. */
void jc__buf_free(struct jc_buf *b);
/* Empties b (len = 0) and clears err; keeps the memory for reuse. */
void jc__buf_reset(struct jc_buf *b);

/*
 * Decodes a frame header (hdr: JC_FRAME_HDR bytes, borrowed) into *type and
 * *len (payload bytes that follow). Returns 0, JC_EPROTO (reserved bytes not
 * zero, or a type outside enum jc_msg_type) or JC_ETOOBIG (len > JC_FRAME_MAX).
 */
int jc__frame_header_decode(const uint8_t hdr[JC_FRAME_HDR], uint16_t *type, uint32_t *len);

/*
 * Encoders: each appends one complete frame (header + payload) to b and
 * returns 0 or b->err (JC_ENOMEM; JC_ETOOBIG when a field is over its limit
 * as PROTOCOL.md gives it, a repeated field occurs more than JC_REPEAT_MAX
 * times or the payload would pass JC_FRAME_MAX). On error nothing of the
 * frame is left in b. Inputs are borrowed and not kept. A NULL optional
 * string is left out; a NULL required string is sent as "".
 *
 * Decoders: payload (len bytes, borrowed; may be NULL when len is 0) is the
 * payload of a frame of the matching type. Out-parameters are owned by the
 * caller afterwards. Returns 0, JC_EPROTO (truncated field, trailing bytes,
 * unknown tag, non-repeatable field given twice, required field missing,
 * integer of the wrong width, fixed-size field of the wrong size, NUL in a
 * string, a result whose data length differs from its size), JC_ETOOBIG
 * (field over its limit, repeated field over JC_REPEAT_MAX) or JC_ENOMEM.
 * The decoders check the wire format, not the meaning of values (enum
 * ranges, versions): that is the caller's business.
 */

/*
 * HELLO / HELLO_OK. name is the agent name (HELLO) or the daemon version
 * (HELLO_OK). Version 2 adds (0 / NULL: absent):
 *  - HELLO: dir_dev, dir_ino: st_dev and st_ino of the cache directory the
 *    client means; a daemon serving another directory refuses the handshake
 *    (ERROR JC_EINVAL naming both).
 *  - HELLO_OK: cache_dir, the directory the daemon serves, and pid, its pid.
 * Strings owned by the struct (after decode); a zeroed struct is empty.
 */
struct jc_hello {
	uint32_t version;
	char *name;
	uint64_t dir_dev, dir_ino;
	char *cache_dir;
	uint32_t pid;
	char *archs;	     /* HELLO_OK, v3: NVRTC's supported architectures ("sm_75 sm_80 ...") */
	char *nvrtc_version; /* HELLO_OK, v3: e.g. "13.0" */
	/* HELLO_OK: the realpath of the daemon's toolkit include tree
	 * (jc_toolchain.toolkit_include; "" or absent: none). A client that
	 * reads its own include trees names -I directories inside it instead
	 * of reading them (common/includes.h, jc__inc_in_toolkit). */
	char *toolkit_include;
};
/* type must be HELLO or HELLO_OK (else JC_EINVAL, b untouched). */
int jc__encode_hello_ex(struct jc_buf *b, uint16_t type, const struct jc_hello *h);
/* out is zeroed first; on error it is cleared. */
int jc__decode_hello_ex(const uint8_t *payload, size_t len, struct jc_hello *out);
void jc__hello_clear(struct jc_hello *h);
/* Version and name only (tests, tools): as the _ex calls. *name: malloc'd,
 * NUL-terminated; NULL on error. */
int jc__encode_hello(struct jc_buf *b, uint16_t type, uint32_t version, const char *name);
int jc__decode_hello(const uint8_t *payload, size_t len, uint32_t *version, char **name);

/* COMPILE. Bytes fields (source, header and link input data) decode into
 * buffers with one NUL byte after their size (not counted), so a source or
 * a PTX text can be used as a C string. A zero-size source sent with a
 * non-NULL pointer decodes non-NULL; a NULL source is left out. */
int jc__encode_req(struct jc_buf *b, const struct jc_req *r);
/* out is zeroed first; on error it is cleared (jc__req_clear). */
int jc__decode_req(const uint8_t *payload, size_t len, struct jc_req *out);

/* RESULT. data is sent only when r->data != NULL; size always. r->fd is not
 * encoded: a descriptor travels with SCM_RIGHTS beside the frame. */
int jc__encode_res(struct jc_buf *b, const struct jc_res *r);
/* out is initialised first (out->fd = -1, as it stays); on error it is
 * cleared. */
int jc__decode_res(const uint8_t *payload, size_t len, struct jc_res *out);

/* ERROR: code is a JC_E* value; message may be NULL (sent as ""). */
int jc__encode_error(struct jc_buf *b, int code, const char *message);
/* *message: malloc'd, NUL-terminated; NULL on error. */
int jc__decode_error(const uint8_t *payload, size_t len, int *code, char **message);

/* ADMIN: a jitcachectl command ("stats", "purge", ...) and its arguments,
 * in order. Owned strings; a zeroed struct is empty. */
struct jc_admin_req {
	char *command;
	struct jc_strv args;
};

int jc__encode_admin(struct jc_buf *b, const struct jc_admin_req *a);
/* out is zeroed first; on error it is cleared. */
int jc__decode_admin(const uint8_t *payload, size_t len, struct jc_admin_req *out);
/* Frees what a owns and zeroes it. */
void jc__admin_req_clear(struct jc_admin_req *a);

/* ADMIN_REPLY: a status, a message and a list of records (one per cache
 * entry for "ls", one for "stats", ...). A record is an ordered list of
 * named values, each an integer or a string. All strings owned; a zeroed
 * struct is empty. */
struct jc_kv {
	char *name;
	int is_int;	 /* 1: the value is i (and u, when is_unsigned), 0: the value is s */
	int is_unsigned; /* a u64 value (counters, sizes): u; i holds the same bits */
	int64_t i;
	uint64_t u;
	char *s; /* NULL when is_int */
};

struct jc_record {
	struct jc_kv *kv;
	size_t n;
};

struct jc_admin_reply {
	int32_t status; /* 0 or a JC_E* code */
	char *message;	/* may be NULL */
	struct jc_record *rec;
	size_t n_rec;
};

/* Append a named value to r (name and v copied; v NULL -> ""). Records must
 * be built only through these functions (they rely on how the arrays grow).
 * Return 0, JC_ENOMEM or JC_ETOOBIG (over JC_REPEAT_MAX values); on error r
 * is unchanged. */
int jc__record_add_int(struct jc_record *r, const char *name, int64_t v);
/* An unsigned 64-bit value (a counter, a size): sent as such, printed as such. */
int jc__record_add_u64(struct jc_record *r, const char *name, uint64_t v);
int jc__record_add_str(struct jc_record *r, const char *name, const char *v);
/* Appends an empty record to a and points *rec_out at it (borrowed: valid
 * until the next append to a or until a is cleared). Returns 0, JC_ENOMEM or
 * JC_ETOOBIG (over JC_REPEAT_MAX records). */
int jc__reply_add_record(struct jc_admin_reply *a, struct jc_record **rec_out);
/* The first value named name in r (borrowed from r), or NULL if absent. */
const struct jc_kv *jc__record_get(const struct jc_record *r, const char *name);

int jc__encode_admin_reply(struct jc_buf *b, const struct jc_admin_reply *a);
/* out is zeroed first; on error it is cleared. */
int jc__decode_admin_reply(const uint8_t *payload, size_t len, struct jc_admin_reply *out);
/* Frees what a owns and zeroes it. */
void jc__admin_reply_clear(struct jc_admin_reply *a);

/* Test hook, 0 in production: when set to n > 0, the codec's n-th memory
 * allocation from now fails (once). Not thread-safe: set it only in
 * single-threaded tests. */
extern int jc__proto_fail_alloc;

#endif
