/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the units of the include scan (inc_lex.c, inc_opts.c,
 * inc_memo.c, inc_set.c, includes.c, inc_check.c, inc_deps.c), not for
 * other users: a growable byte buffer and the 16-byte content hash every
 * unit writes.
 */
#ifndef JC_INC_BUF_H
#define JC_INC_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "jitcache/jitcache.h"

/* A growable byte buffer: p (owned, free() it) holds n bytes of cap. A
 * zeroed struct is an empty buffer. */
struct jc_inc_buf {
	uint8_t *p;
	size_t n, cap;
};

/* Appends n bytes of data to b. 0 or JC_ENOMEM (b unchanged). */
static inline int jc__inc_buf_add(struct jc_inc_buf *b, const void *data, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p)
			return JC_ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, data, n);
	b->n += n;
	return 0;
}

/* Appends v as 8 little-endian bytes. 0 or JC_ENOMEM. */
static inline int jc__inc_buf_u64(struct jc_inc_buf *b, uint64_t v)
{
	uint8_t le[8];
	for (int j = 0; j < 8; j++)
		le[j] = (uint8_t)(v >> (8 * j));
	return jc__inc_buf_add(b, le, sizeof(le));
}

/* XXH3-128 of n bytes at p, canonical (big-endian) form, into out[16]. */
static inline void jc__inc_hash128(const void *p, size_t n, uint8_t out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
	memcpy(out, c.digest, 16);
}

#endif
