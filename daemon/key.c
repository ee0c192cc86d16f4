/* SPDX-License-Identifier: MIT */
#include "key.h"

#include "fatbin.h"
#include "includes.h"
#include "jitcache/jitcache.h"
#include "util.h"

#include <endian.h>
#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
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
};

#define invalid(err, errlen, ...) jc__fail(err, errlen, JC_EINVAL, __VA_ARGS__)

int jc__arch_number(const char *arch)
{
	if (!arch)
		return JC_EINVAL;
	const char *p = strncmp(arch, "sm_", 3) == 0 ? arch + 3
			: strncmp(arch, "compute_", 8) == 0 ? arch + 8 : NULL;
	if (!p)
		return JC_EINVAL;
	int n = 0, digits = 0;
	for (; *p >= '0' && *p <= '9' && digits < 3; p++, digits++)
		n = n * 10 + (*p - '0');
	if (digits < 2 || (*p && ((*p != 'a' && *p != 'f') || p[1])))
		return JC_EINVAL;
	return n;
}

static int names_arch(const char *opt)
{
	return strcmp(opt, "-arch") == 0 || strncmp(opt, "-arch=", 6) == 0 ||
	       strcmp(opt, "--gpu-architecture") == 0 || strncmp(opt, "--gpu-architecture=", 19) == 0;
}

/*
 * NVRTC options that make the compiler read or write files the request
 * names (NVRTC API reference, "Supported Compile Options": --time,
 * --fdevice-time-trace, the precompiled-header options; ptxas's own output
 * options through --ptxas-options/-Xptxas). The daemon never writes where a
 * client says, and a cached artifact must not depend on files outside the key.
 */
static int touches_files(const char *opt)
{
	static const char *const prefixes[] = {
		"-time", "--time", "-fdevice-time-trace", "--fdevice-time-trace",
		"-pch", "--pch", "-create-pch", "--create-pch", "-use-pch", "--use-pch",
		"-pch-dir", "--pch-dir",
	};
	const char *o = opt;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t n = strlen(prefixes[i]);
		if (strncmp(o, prefixes[i], n) == 0 && (o[n] == '\0' || o[n] == '='))
			return 1;
	}
	int ptxas = strncmp(o, "-Xptxas=", 8) == 0 || strncmp(o, "--ptxas-options=", 16) == 0;
	const char *v = strchr(o, '=');
	return ptxas && (strstr(v, "-o") || strstr(v, "output"));
}

static int check_opts(const struct jc_strv *sv, const char *what, char *err, size_t errlen)
{
	for (size_t i = 0; i < sv->n; i++) {
		if (!sv->v[i] || !sv->v[i][0])
			return invalid(err, errlen, "%s %zu is empty", what, i);
		if (names_arch(sv->v[i]))
			return invalid(err, errlen, "%s \"%s\": set the architecture with --arch, not as an option",
				       what, sv->v[i]);
		if (touches_files(sv->v[i]))
			return invalid(err, errlen, "%s \"%s\" makes the compiler read or write files of its "
				       "own: not allowed through the cache", what, sv->v[i]);
	}
	return 0;
}

/* Names end up in logs and compile logs: no control characters. */
static int check_name(const char *name, const char *what, char *err, size_t errlen)
{
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return invalid(err, errlen, "%s contains a control character (0x%02x)", what, *c);
	return 0;
}

static int check_strs(const struct jc_strv *sv, const char *what, char *err, size_t errlen)
{
	for (size_t i = 0; i < sv->n; i++)
		if (!sv->v[i] || !sv->v[i][0])
			return invalid(err, errlen, "%s %zu is empty", what, i);
	return 0;
}

static int check_header_name(const char *name, char *err, size_t errlen)
{
	if (!name || !name[0])
		return invalid(err, errlen, "a header name is empty");
	if (name[0] == '/')
		return invalid(err, errlen, "header \"%s\": absolute names are not allowed", name);
	if (strchr(name, '\\'))
		return invalid(err, errlen, "header \"%s\": backslashes are not allowed", name);
	for (const char *c = name; c; c = strchr(c, '/')) {
		c += *c == '/';
		if (strncmp(c, "..", 2) == 0 && (c[2] == '/' || c[2] == '\0'))
			return invalid(err, errlen, "header \"%s\": \"..\" components are not allowed", name);
	}
	return 0;
}

static int cmp_blob(const void *a, const void *b)
{
	return strcmp((*(const struct jc_blob *const *)a)->name, (*(const struct jc_blob *const *)b)->name);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The client-read tree (req.h): "I/REL" names of the request's -I
 * directories, each once, of one kind of round (bytes or hashes). */
static int check_tree(const struct jc_req *req, char *err, size_t errlen)
{
	int hashes = 0, bytes = 0, rc = 0;
	struct jc_inc_tops *tops = NULL;
	if (req->n_tree && (rc = jc__inc_tops_new(&req->include_dirs, &tops)) != 0)
		return rc == JC_ENOMEM ? rc : invalid(err, errlen, "an include dir too long for a tree");
	for (size_t i = 0; rc == 0 && i < req->n_tree; i++) {
		const struct jc_blob *b = &req->tree[i];
		char *end;
		errno = 0;
		unsigned long dir = b->name ? strtoul(b->name, &end, 10) : 0;
		int top_itself = b->name && end != b->name && !*end && b->type == JC_TREE_DIR;
		if (!b->name || errno || end == b->name || (*end != '/' && !top_itself) ||
		    !jc__inc_tops_is_top(tops, dir) || (!top_itself && !jc__inc_rel_valid(end + 1)))
			rc = invalid(err, errlen, "tree file %zu: name \"%s\" is not DIR-INDEX/RELATIVE-PATH "
				       "of a top directory of the %zu include dirs (no \".\", \"..\" or empty "
				       "component)", i, b->name ? b->name : "", req->include_dirs.n);
		if (((b->type == JC_TREE_HASH || b->type == JC_TREE_DIR) && b->size != 16) ||
		    (b->type == JC_TREE_ABSENT && b->size != 0) ||
		    (b->type != JC_TREE_FILE && b->type != JC_TREE_HASH && b->type != JC_TREE_ABSENT &&
		     b->type != JC_TREE_DIR))
			rc = rc ?: invalid(err, errlen, "tree file \"%s\": bad type %u or size %zu", b->name,
				       b->type, b->size);
		if (!b->data && b->size)
			rc = rc ?: invalid(err, errlen, "tree file \"%s\" has %zu bytes but no data", b->name,
				       b->size);
		if (rc)
			break;
		hashes |= b->type == JC_TREE_HASH;
		bytes |= b->type == JC_TREE_FILE;
	}
	jc__inc_tops_free(tops);
	if (rc)
		return rc;
	if (req->tree_round > JC_TREE_DIGEST || (!req->tree_round && req->n_tree) ||
	    (req->tree_round == JC_TREE_LOOKUP && bytes) || (req->tree_round == JC_TREE_BYTES && hashes) ||
	    (req->tree_round == JC_TREE_DIGEST && req->n_tree))
		return invalid(err, errlen, "tree round %u with %s", req->tree_round,
			       bytes ? "bytes" : hashes ? "hashes" : "no files");
	if (req->tree_round && !req->include_dirs.n)
		return invalid(err, errlen, "a tree without include dirs");
	return 0;
}


/* Validates req; on success *sorted gets the headers sorted by name (caller frees; NULL if none). */
static int validate(const struct jc_req *req, const struct jc_blob ***sorted, char *err, size_t errlen)
{
	*sorted = NULL;
	int rc;
	if (req->job < JC_JOB_COMPILE || req->job > JC_JOB_COMPILE_LINK)
		return invalid(err, errlen, "unknown job kind %u", req->job);
	if (!jc__output_name(req->output))
		return invalid(err, errlen, "unknown output kind %u", req->output);
	if (req->job != JC_JOB_COMPILE && req->output == JC_OUTPUT_LTOIR)
		return invalid(err, errlen, "a link produces cubin or PTX, not LTO-IR");
	if (req->job == JC_JOB_LINK && !req->n_link_inputs)
		return invalid(err, errlen, "a link job needs link inputs");
	if (req->output == JC_OUTPUT_FATBIN) {
		struct jc_targets t;
		if (req->job != JC_JOB_COMPILE)
			return invalid(err, errlen, "a fatbin is made from a compile: a link takes one target");
		if ((rc = jc__targets_parse(req->arch, &t, err, errlen)))
			return rc;
	} else if (req->arch && strchr(req->arch, ',')) {
		return invalid(err, errlen, "a target list (%s) makes a fatbin: ask for fatbin output, "
			       "not %s", req->arch, jc__output_name(req->output));
	} else if (jc__arch_number(req->arch) < 0) {
		return invalid(err, errlen, "architecture \"%s\" is not sm_NN, sm_NNa, sm_NNf or compute_NN",
			       req->arch ? req->arch : "");
	}
	if (req->output == JC_OUTPUT_CUBIN && strncmp(req->arch, "compute_", 8) == 0)
		return invalid(err, errlen, "%s is a virtual architecture: a cubin needs a real one "
			       "(sm_%s), or ask for PTX or LTO-IR output", req->arch, req->arch + 8);
	if (req->job != JC_JOB_LINK && (!req->source_name || !req->source_name[0]))
		return invalid(err, errlen, "the source name is empty");
	if (req->source_name && (rc = check_name(req->source_name, "the source name", err, errlen)))
		return rc;
	if (req->reject_reason > JC_REJECT_LOAD_FAILED)
		return invalid(err, errlen, "unknown reject reason %u", req->reject_reason);
	if (!req->source && req->source_size)
		return invalid(err, errlen, "source has %zu bytes but no data", req->source_size);
	if ((rc = check_opts(&req->options, "option", err, errlen)) ||
	    (rc = check_opts(&req->link_options, "link option", err, errlen)) ||
	    (rc = check_strs(&req->include_dirs, "include dir", err, errlen)) ||
	    (rc = check_strs(&req->name_exprs, "name expression", err, errlen)) ||
	    (rc = jc__inc_path_parse(req, NULL, err, errlen)))
		return rc;
	if ((rc = check_tree(req, err, errlen)))
		return rc;
	for (size_t i = 0; i < req->n_link_inputs; i++) {
		const struct jc_blob *b = &req->link_inputs[i];
		if (!b->name || !b->name[0])
			return invalid(err, errlen, "link input %zu has no name", i);
		if ((rc = check_name(b->name, "a link input name", err, errlen)))
			return rc;
		if (!jc__input_type_name(b->type))
			return invalid(err, errlen, "link input \"%s\": unknown type %u", b->name, b->type);
		if (!b->data && b->size)
			return invalid(err, errlen, "link input \"%s\" has %zu bytes but no data", b->name,
				       b->size);
	}
	for (size_t i = 0; i < req->n_headers; i++) {
		const struct jc_blob *b = &req->headers[i];
		if ((rc = check_header_name(b->name, err, errlen)) ||
		    (rc = check_name(b->name, "a header name", err, errlen)))
			return rc;
		if (!b->data && b->size)
			return invalid(err, errlen, "header \"%s\" has %zu bytes but no data", b->name, b->size);
	}
	if (!req->n_headers)
		return 0;
	const struct jc_blob **h = malloc(req->n_headers * sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "out of memory sorting %zu headers", req->n_headers);
		return JC_ENOMEM;
	}
	for (size_t i = 0; i < req->n_headers; i++)
		h[i] = &req->headers[i];
	qsort(h, req->n_headers, sizeof(*h), cmp_blob);
	for (size_t i = 1; i < req->n_headers; i++) {
		if (strcmp(h[i - 1]->name, h[i]->name) == 0) {
			rc = invalid(err, errlen, "header \"%s\" is given twice", h[i]->name);
			free(h);
			return rc;
		}
	}
	*sorted = h;
	return 0;
}

int jc__req_validate(const struct jc_req *req, char *err, size_t errlen)
{
	const struct jc_blob **sorted;
	int rc = validate(req, &sorted, err, errlen);
	free(sorted);
	return rc;
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
	const struct jc_blob **headers;
	int rc = validate(req, &headers, err, errlen);
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
	item_strv(st, TAG_LINK_OPTION_COUNT, TAG_LINK_OPTION, req->link_options.v, req->link_options.n);
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
