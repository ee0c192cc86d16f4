/* SPDX-License-Identifier: MIT */
#include "daemon/framer.h"

#include <stdlib.h>
#include <string.h>

#include "jitcache/jitcache.h"

static size_t charge_of(size_t cap)
{
	return cap > JC_FRAMER_BASE ? cap - JC_FRAMER_BASE : 0;
}

/* Sets the buffer's capacity to cap (0: frees it), charging the budget;
 * 0, or -1 (nothing changed) when over budget or out of memory. */
static int set_cap(struct jc_framer *f, size_t cap)
{
	struct jc_buf *b = &f->buf;
	size_t old = charge_of(b->cap), now = charge_of(cap);
	/* Past the budget only when this buffer would be all it holds (one frame
	 * larger than the whole budget): charged before the memory is taken. */
	if (f->budget && now > old && jc__budget_try_charge(f->budget, now - old, old) != 0)
		return -1;
	uint8_t *p = cap ? realloc(b->data, cap) : (free(b->data), NULL);
	if (cap && !p) {
		if (f->budget && now > old)
			jc__budget_release(f->budget, now - old);
		return -1;
	}
	b->data = p;
	b->cap = cap;
	if (f->budget && now < old)
		jc__budget_release(f->budget, old - now);
	return 0;
}

void jc__framer_alloc(struct jc_framer *f, size_t hint, uv_buf_t *buf)
{
	struct jc_buf *b = &f->buf;
	size_t want = hint < 65536 ? 65536 : hint, cap = b->len + want;
	uint16_t type;
	uint32_t len;
	/* A frame whose header is here: room for all of it at once (no
	 * geometric growth, so a buffer never holds twice the frame it is for,
	 * only 64 KiB more at most). */
	if (b->len >= JC_FRAME_HDR && jc__frame_header_decode(b->data, &type, &len) == 0 &&
	    len <= (f->max ? f->max : JC_FRAME_MAX) && JC_FRAME_HDR + (size_t)len > b->len) {
		cap = JC_FRAME_HDR + (size_t)len > cap ? JC_FRAME_HDR + (size_t)len : cap;
	}
	if (b->cap - b->len < want && set_cap(f, cap) != 0) {
		*buf = uv_buf_init(NULL, 0);
		return;
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
	if (b->len == 0 && b->cap > JC_FRAMER_BASE)
		set_cap(f, 0);
	return rc;
}

void jc__framer_free(struct jc_framer *f)
{
	set_cap(f, 0);
	f->buf.len = 0;
}
