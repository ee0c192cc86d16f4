/* SPDX-License-Identifier: MIT */
#include "core/key.h"

#include "common/includes.h"
#include "common/util.h"
#include "jitcache/jitcache.h"

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

/* Item tags of the key encoding. Never renumber: bump JC_KEY_FORMAT instead. */
enum {
	TAG_FORMAT = 1,
	TAG_JOB = 2,
	TAG_OUTPUT = 3,
	TAG_SOURCE_NAME = 4,
	TAG_SOURCE = 5,
	TAG_HEADER_COUNT = 6,
	TAG_HEADER_NAME = 7,
	TAG_HEADER_DATA = 8,
	TAG_INCLUDE_DIR_COUNT = 9,
	TAG_INCLUDE_DIR = 10,
	TAG_OPTION_COUNT = 11,
	TAG_OPTION = 12,
	TAG_ARCH = 13,
	TAG_NAME_EXPR_COUNT = 14,
	TAG_NAME_EXPR = 15,
	TAG_NVRTC_VERSION = 16,
	TAG_NVRTC_ID = 17,
	TAG_NVRTC_BUILTINS_ID = 18,
	TAG_NVJITLINK_VERSION = 19,
	TAG_NVJITLINK_ID = 20,
	TAG_DRIVER_VERSION = 21,
	TAG_DRIVER_BUILD = 22,
	TAG_LINK_INPUT_COUNT = 23,
	TAG_LINK_INPUT_TYPE = 24,
	TAG_LINK_INPUT_NAME = 25,
	TAG_LINK_INPUT_DATA = 26,
	TAG_LINK_OPTION_COUNT = 27,
	TAG_LINK_OPTION = 28,
	TAG_APP_ABI = 29,
	TAG_TOOLKIT_INCLUDE_ID = 30,
	TAG_DIRECT_KEY = 31,
	TAG_INCLUDE_TREE = 32,
	TAG_FATBIN_TOOL = 33, /* fatbin output only */
	TAG_NAME_FREE = 34,   /* in place of TAG_SOURCE_NAME: a name-free request */
	TAG_NAMED_KEY = 35,   /* jc__key_named */
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The encoding is gathered in buf and hashed a buffer-full at a time: most
 * items are a few bytes, and a hash update per item cost more than the rest
 * of a cache hit. The bytes hashed are exactly the encoding above (XXH3
 * gives one digest for one input however it is fed), and an encoding that
 * fits in buf is hashed in one call, without a streaming state.
 */
struct hasher {
	XXH3_state_t *st; /* made at the first full buffer; NULL until then */
	int oom;
	size_t len;
	uint8_t buf[4096];
};

static void flush(struct hasher *h)
{
	if (!h->st && !h->oom) {
		h->st = XXH3_createState();
		if (!h->st || XXH3_128bits_reset(h->st) != XXH_OK)
			h->oom = 1;
	}
	if (!h->oom)
		XXH3_128bits_update(h->st, h->buf, h->len);
	h->len = 0;
}

static void put(struct hasher *h, const void *data, size_t size)
{
	if (h->len + size > sizeof(h->buf)) {
		flush(h);
		if (size > sizeof(h->buf)) {
			if (!h->oom)
				XXH3_128bits_update(h->st, data, size);
			return;
		}
	}
	if (size)
		memcpy(h->buf + h->len, data, size);
	h->len += size;
}

static void item(struct hasher *st, uint16_t tag, const void *data, size_t size)
{
	uint8_t h[10] = {(uint8_t)tag, (uint8_t)(tag >> 8)};
	uint64_t le = htole64((uint64_t)size);
	memcpy(h + 2, &le, sizeof(le));
	if (st->len + sizeof(h) + size <= sizeof(st->buf)) { /* the usual case */
		memcpy(st->buf + st->len, h, sizeof(h));
		if (size)
			memcpy(st->buf + st->len + sizeof(h), data, size);
		st->len += sizeof(h) + size;
		return;
	}
	put(st, h, sizeof(h));
	put(st, data, size);
}

static void item_str(struct hasher *st, uint16_t tag, const char *s)
{
	item(st, tag, s, s ? strlen(s) : 0);
}

/* v as size (4 or 8) little-endian bytes. */
static void item_u64(struct hasher *st, uint16_t tag, uint64_t v, size_t size)
{
	uint64_t le = htole64(v);
	item(st, tag, &le, size);
}

static void item_strv(struct hasher *st, uint16_t count_tag, uint16_t tag, char *const *v, size_t n)
{
	item_u64(st, count_tag, n, 8);
	for (size_t i = 0; i < n; i++)
		item_str(st, tag, v[i]);
}

/*
 * DESIGN item 4, "headers read from include directories", and item 5: the
 * number of -I directories enters here, and each -I option as its index
 * (every spelling NVRTC accepts alike), not the directory's path: the
 * directories and the content of the files a compile may read from them
 * enter through jc__key_with_tree() and jc__inc_key_digest() (includes.h),
 * which the daemon applies after its include scan or to a client-read tree
 * (cache.c), so that the same bytes under other directories share a key.
 */
static void add_options(struct hasher *st, const struct jc_req *req)
{
	item_u64(st, TAG_INCLUDE_DIR_COUNT, req->include_dirs.n, 8);
	item_u64(st, TAG_OPTION_COUNT, req->options.n, 8);
	uint64_t dir = 0;
	for (size_t i = 0; i < req->options.n;) {
		int is_dir;
		const char *val;
		size_t used = 1;
		if (jc__inc_option(&req->options, i, &is_dir, &val, &used) && is_dir) {
			item_u64(st, TAG_INCLUDE_DIR, dir++, 8);
		} else {
			for (size_t k = 0; k < used && i + k < req->options.n; k++)
				item_str(st, TAG_OPTION, req->options.v[i + k]);
		}
		i += used;
	}
}

/* The digest of everything put, into key; frees the streaming state.
 * JC_ENOMEM when a streaming state was needed and could not be had. */
static int digest(struct hasher *h, uint8_t key[16])
{
	XXH128_hash_t d = {0, 0};
	if (h->st || h->oom) {
		flush(h);
		if (!h->oom)
			d = XXH3_128bits_digest(h->st);
		XXH3_freeState(h->st);
		h->st = NULL;
		if (h->oom)
			return JC_ENOMEM;
	} else {
		d = XXH3_128bits(h->buf, h->len);
	}
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, d);
	memcpy(key, c.digest, 16);
	return 0;
}

int jc__key_with_tree(const uint8_t direct[16], const uint8_t tree[16], uint8_t key[16])
{
	struct hasher st = {.st = NULL};
	item_u64(&st, TAG_FORMAT, JC_KEY_FORMAT, 4);
	item(&st, TAG_DIRECT_KEY, direct, 16);
	item(&st, TAG_INCLUDE_TREE, tree, 16);
	return digest(&st, key);
}

int jc__key_named(const uint8_t key[16], const char *name, uint8_t out[16])
{
	struct hasher st = {.st = NULL};
	item_u64(&st, TAG_FORMAT, JC_KEY_FORMAT, 4);
	item(&st, TAG_NAMED_KEY, key, 16);
	item_str(&st, TAG_SOURCE_NAME, name);
	return digest(&st, out);
}

int jc__key_lookup(const uint8_t direct[16], const struct jc_strv *dirs, uint8_t out[16])
{
	struct hasher st = {.st = NULL};
	item_u64(&st, TAG_FORMAT, JC_KEY_FORMAT, 4);
	item(&st, TAG_DIRECT_KEY, direct, 16);
	item_strv(&st, TAG_INCLUDE_DIR_COUNT, TAG_INCLUDE_DIR, dirs->v, dirs->n);
	return digest(&st, out);
}

int jc__key_compute(const struct jc_req *req, const struct jc_toolchain *tc, uint8_t key[16],
		    char *err, size_t errlen)
{
	return jc__req_validate(req, err, errlen) ?: jc__key_of_valid(req, tc, key, err, errlen);
}

int jc__key_of_valid(const struct jc_req *req, const struct jc_toolchain *tc, uint8_t key[16],
		     char *err, size_t errlen)
{
	const struct jc_blob **headers;
	int rc = jc__req_sorted_headers(req, &headers, err, errlen);
	if (rc)
		return rc;
	char **exprs = NULL;
	struct hasher hs, *st = &hs;
	hs.st = NULL;
	hs.oom = 0;
	hs.len = 0;
	if (req->name_exprs.n && (exprs = malloc(req->name_exprs.n * sizeof(*exprs))))
		memcpy(exprs, req->name_exprs.v, req->name_exprs.n * sizeof(*exprs));
	if (req->name_exprs.n && !exprs) {
		rc = JC_ENOMEM;
		goto out;
	}
	if (exprs)
		qsort(exprs, req->name_exprs.n, sizeof(*exprs), cmp_str);

	item_u64(st, TAG_FORMAT, JC_KEY_FORMAT, 4);
	item_u64(st, TAG_JOB, req->job, 4);
	item_u64(st, TAG_OUTPUT, req->output, 4);
	if (req->name_free)
		item_u64(st, TAG_NAME_FREE, 1, 4);
	else
		item_str(st, TAG_SOURCE_NAME, req->source_name);
	item(st, TAG_SOURCE, req->source, req->source_size);
	item_u64(st, TAG_HEADER_COUNT, req->n_headers, 8);
	for (size_t i = 0; i < req->n_headers; i++) {
		item_str(st, TAG_HEADER_NAME, headers[i]->name);
		item(st, TAG_HEADER_DATA, headers[i]->data, headers[i]->size);
	}
	add_options(st, req);
	item_str(st, TAG_ARCH, req->arch);
	item_strv(st, TAG_NAME_EXPR_COUNT, TAG_NAME_EXPR, exprs, req->name_exprs.n);
	item_str(st, TAG_NVRTC_VERSION, tc->nvrtc_version);
	item_str(st, TAG_NVRTC_ID, tc->nvrtc_id);
	item_str(st, TAG_NVRTC_BUILTINS_ID, tc->nvrtc_builtins_id);
	item_str(st, TAG_NVJITLINK_VERSION, tc->nvjitlink_version);
	item_str(st, TAG_NVJITLINK_ID, tc->nvjitlink_id);
	item_str(st, TAG_DRIVER_VERSION, tc->driver_version);
	item_str(st, TAG_DRIVER_BUILD, tc->driver_build);
	item_str(st, TAG_TOOLKIT_INCLUDE_ID, tc->toolkit_include_id);
	item_u64(st, TAG_LINK_INPUT_COUNT, req->n_link_inputs, 8);
	for (size_t i = 0; i < req->n_link_inputs; i++) {
		const struct jc_blob *b = &req->link_inputs[i];
		item_u64(st, TAG_LINK_INPUT_TYPE, b->type, 4);
		item_str(st, TAG_LINK_INPUT_NAME, b->name);
		item(st, TAG_LINK_INPUT_DATA, b->data, b->size);
	}
	item_strv(st, TAG_LINK_OPTION_COUNT, TAG_LINK_OPTION, req->link_options.v,
		  req->link_options.n);
	item_str(st, TAG_APP_ABI, req->app_abi);
	if (req->output == JC_OUTPUT_FATBIN)
		item_str(st, TAG_FATBIN_TOOL, tc->fatbin_id);
	rc = digest(st, key);
out:
	if (rc == JC_ENOMEM)
		snprintf(err, errlen, "out of memory computing a key");
	free(exprs);
	free(headers);
	return rc;
}
