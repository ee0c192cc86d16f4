/* SPDX-License-Identifier: MIT */
/* Fatbin containers for tests (artifact_seeds.h): the parser's seeds and the
 * stand-in nvFatbin (tests/integration/stub_nvfatbin.c). */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "artifact_seeds.h"

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v & 0xffff), put16(p + 2, v >> 16);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v), put32(p + 4, (uint32_t)(v >> 32));
}

int jct_seed_fatbin(const struct jct_fb_image *images, size_t n, struct jct_blob *out)
{
	size_t cap = 16;
	for (size_t i = 0; i < n; i++)
		cap += 64 + ZSTD_compressBound(images[i].bytes->size) + 8;
	uint8_t *d = calloc(1, cap);
	if (!d)
		return -1;
	size_t off = 16;
	for (size_t i = 0; i < n; i++) {
		const struct jct_fb_image *im = &images[i];
		uint8_t *e = d + off;
		size_t stored = im->bytes->size;
		if (im->zstd) {
			stored = ZSTD_compress(e + 64, cap - off - 64, im->bytes->data,
					       im->bytes->size, 3);
			if (ZSTD_isError(stored)) {
				free(d);
				return -1;
			}
		} else {
			memcpy(e + 64, im->bytes->data, stored);
		}
		size_t padded = (stored + 7) & ~(size_t)7;
		put16(e, im->kind);
		put16(e + 2, 0x0101);
		put32(e + 4, 64);
		put64(e + 8, padded);
		put32(e + 0x10, im->zstd ? (uint32_t)stored : 0);
		put16(e + 0x18, im->kind == 1 ? 0 : 8);
		put16(e + 0x1a, im->kind == 1 ? 9 : 1);
		put32(e + 0x1c, im->arch);
		put64(e + 0x28, 0x11 | (im->zstd ? 0x8000 : 0));
		put64(e + 0x38, im->zstd ? im->bytes->size : 0);
		off += 64 + padded;
	}
	put32(d, 0xba55ed50u);
	put16(d + 4, 1);
	put16(d + 6, 16);
	put64(d + 8, off - 16);
	out->data = d;
	out->size = off;
	return 0;
}
