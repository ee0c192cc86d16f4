/* SPDX-License-Identifier: MIT */
#include "framer.h"

#include <stdlib.h>
#include <string.h>

#include "jitcache/jitcache.h"

void jc__framer_alloc(struct jc_framer *f, size_t hint, uv_buf_t *buf)
{
	struct jc_buf *b = &f->buf;
	size_t want = hint < 65536 ? 65536 : hint;
	if (b->cap - b->len < want) {
		/* Grow geometrically: a frame arriving in many small reads must
		 * not cost a copy of everything received so far per read. */
		size_t cap = b->cap * 2 > b->len + want ? b->cap * 2 : b->len + want;
		uint8_t *p = realloc(b->data, cap);
		if (!p) {
			*buf = uv_buf_init(NULL, 0);
			return;
		}
		b->data = p;
		b->cap = cap;
	}
	*buf = uv_buf_init((char *)b->data + b->len, (unsigned)(b->cap - b->len));
}

int jc__framer_feed(struct jc_framer *f, size_t nread, jc_frame_cb cb, void *ctx)
{
	struct jc_buf *b = &f->buf;
	size_t off = 0;
	int rc = 0;
	b->len += nread;
	while (b->len - off >= JC_FRAME_HDR) {
		uint16_t type;
		uint32_t len;
		size_t max = f->max ? f->max : JC_FRAME_MAX; /* cb may change it */
		rc = jc__frame_header_decode(b->data + off, &type, &len);
		if (rc == 0 && len > max)
			rc = JC_ETOOBIG;
		if (rc != 0)
			break;
		if (b->len - off - JC_FRAME_HDR < len)
			break;
		rc = cb(ctx, type, b->data + off + JC_FRAME_HDR, len);
		off += JC_FRAME_HDR + len;
		if (rc != 0)
			break;
	}
	memmove(b->data, b->data + off, b->len - off);
	b->len -= off;
	/* Give back a large buffer once the big frame it held is consumed. */
	if (b->len == 0 && b->cap > (1u << 20)) {
		free(b->data);
		b->data = NULL;
		b->cap = 0;
	}
	return rc;
}

void jc__framer_free(struct jc_framer *f)
{
	jc__buf_free(&f->buf);
}
