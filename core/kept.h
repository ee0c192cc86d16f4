/* SPDX-License-Identifier: MIT */
/*
 * Kept requests: the request that made an entry, stored so that it can be
 * compiled again for another toolchain identity (re-warm, daemon/rewarm.c)
 * or carried to another machine (jitcachectl export / import).
 *
 * A kept request is the request's COMPILE frame (proto.h: header and
 * payload, the wire encoding, PROTOCOL.md), zstd-compressed, kept in the
 * index (index.h, jc_kept: found by its content, one row for
 * every entry made by the same request, e.g. under two toolchain
 * identities). The fields that are not the request's own (a rejected
 * object, a test fault) are left out. Everything a compile needs travels
 * in it: the source, in-memory headers, the header bytes of a client-read
 * tree, options, target, name expressions, link inputs; a request whose
 * daemon reads -I directories from disk keeps their paths (re-read when it
 * is compiled again, so the new entry is the one a client's request will
 * look up).
 *
 * Thread-safe as the index is used: under the directory's wlock.
 */
#ifndef JC_KEPT_H
#define JC_KEPT_H

#include <stddef.h>
#include <stdint.h>

#include "common/req.h"
#include "core/entry.h"
#include "core/tier.h"
#include "proto/proto.h"

/* The largest decompressed kept request: one COMPILE frame. */
#define JC_KEPT_MAX ((size_t)JC_FRAME_HDR + JC_FRAME_MAX)

/*
 * Encodes r (borrowed) as a kept request: *out malloc'd (caller frees),
 * *len its bytes. Returns 0, JC_ENOMEM, JC_ETOOBIG (over a frame), JC_EIO
 * (zstd failed).
 */
int jc__kept_encode(const struct jc_req *r, uint8_t **out, size_t *len);

/*
 * Decodes a kept request (data, len borrowed; hostile bytes are checked:
 * the zstd frame's declared and real sizes, one COMPILE frame exactly) into
 * *out (zeroed first, owned by the caller: jc__req_clear). Returns 0,
 * JC_ECORRUPT (not a kept request), JC_ETOOBIG, JC_ENOMEM.
 */
int jc__kept_decode(const uint8_t *data, size_t len, struct jc_req *out);

/* The content hash of the kept request data (len bytes) the index finds it
 * by: the first 4 bytes of its XXH3-128 (canonical). */
uint32_t jc__kept_hash(const uint8_t *data, size_t len);

/*
 * Keeps r as the request of the entry key (which uid asked for), under
 * c->wlock (taken here): a key whose entry is gone or has a request already
 * is left alone. Returns 0, JC_ENOMEM, index errors (err says what).
 */
int jc__kept_store(struct jc_cachedir *c, const uint8_t key[16], uint32_t uid,
		   const struct jc_req *r, char *err, size_t errlen);

/* Reads and decodes the kept request of row k into *out (as
 * jc__kept_decode); the caller holds c->wlock. Returns 0, JC_ENOTFOUND,
 * JC_ECORRUPT, JC_ENOMEM, index errors. */
int jc__kept_load(struct jc_cachedir *c, const struct jc_kept *k, struct jc_req *out);

#endif
