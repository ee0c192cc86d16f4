/* SPDX-License-Identifier: MIT */
#include "common/req.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jitcache/jitcache.h"

void jc__strv_clear(struct jc_strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = 0;
}

static void blobs_clear(struct jc_blob **arr, size_t *n)
{
	for (size_t i = 0; i < *n; i++) {
		free((*arr)[i].name);
		free((*arr)[i].data);
	}
	free(*arr);
	*arr = NULL;
	*n = 0;
}

void jc__req_tree_clear(struct jc_req *r)
{
	blobs_clear(&r->tree, &r->n_tree);
	r->tree_round = JC_TREE_NONE;
}

void jc__req_clear(struct jc_req *r)
{
	free(r->arch);
	free(r->source_name);
	free(r->source);
	blobs_clear(&r->headers, &r->n_headers);
	jc__strv_clear(&r->options);
	jc__strv_clear(&r->include_dirs);
	jc__strv_clear(&r->name_exprs);
	blobs_clear(&r->link_inputs, &r->n_link_inputs);
	blobs_clear(&r->tree, &r->n_tree);
	jc__strv_clear(&r->link_options);
	jc__strv_clear(&r->follow);
	free(r->nvrtc_id);
	free(r->app_abi);
	free(r->reject_message);
	free(r->display_name);
	memset(r, 0, sizeof(*r));
}

void jc__res_init(struct jc_res *r)
{
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

void jc__res_clear(struct jc_res *r)
{
	if (r->fd >= 0)
		close(r->fd);
	free(r->data);
	free(r->log);
	free(r->message);
	for (size_t i = 0; i < r->n_lowered; i++) {
		free(r->lowered[i].expr);
		free(r->lowered[i].lowered);
	}
	free(r->lowered);
	for (size_t i = 0; i < r->n_deps; i++)
		free(r->deps[i].path);
	free(r->deps);
	free(r->compiler);
	jc__res_init(r);
}

int jc__strv_push(struct jc_strv *sv, const char *s)
{
	char *copy = strdup(s);
	char **v = realloc(sv->v, (sv->n + 1) * sizeof(*v));
	if (!copy || !v) {
		free(copy);
		if (v)
			sv->v = v;
		return JC_ENOMEM;
	}
	v[sv->n++] = copy;
	sv->v = v;
	return 0;
}

int jc__blob_push(struct jc_blob **arr, size_t *n, const char *name, const void *data, size_t size,
		  uint32_t type)
{
	struct jc_blob *a = realloc(*arr, (*n + 1) * sizeof(*a));
	if (!a)
		return JC_ENOMEM;
	*arr = a;
	struct jc_blob *b = &a[*n];
	b->name = strdup(name);
	b->data = malloc(size ? size : 1);
	if (!b->name || !b->data) {
		free(b->name);
		free(b->data);
		return JC_ENOMEM;
	}
	if (size)
		memcpy(b->data, data, size);
	b->size = size;
	b->type = type;
	(*n)++;
	return 0;
}

static const char *const output_names[] = {NULL, "cubin", "ptx", "ltoir", "fatbin"};
static const char *const input_names[] = {NULL,	    "cubin",  "ptx",	"ltoir",
					  "fatbin", "object", "library"};
static const char *const cache_names[] = {NULL,	    "miss",	"hit",	     "negative-hit",
					  "joined", "uncached", "remote-hit"};

#define NAME_OF(table, v) ((v) < sizeof(table) / sizeof(table[0]) ? table[v] : NULL)

static int parse_name(const char *const *table, size_t n, const char *s)
{
	for (size_t i = 1; i < n; i++)
		if (strcmp(table[i], s) == 0)
			return (int)i;
	return JC_EINVAL;
}

const char *jc__output_name(uint32_t output)
{
	return NAME_OF(output_names, output);
}

int jc__output_parse(const char *s)
{
	return parse_name(output_names, sizeof(output_names) / sizeof(output_names[0]), s);
}

const char *jc__input_type_name(uint32_t type)
{
	return NAME_OF(input_names, type);
}

int jc__input_type_parse(const char *s)
{
	return parse_name(input_names, sizeof(input_names) / sizeof(input_names[0]), s);
}

const char *jc__cache_status_name(uint32_t cache)
{
	return NAME_OF(cache_names, cache);
}

void jc__hex16(const uint8_t in[16], char out[33])
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[32] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int jc__unhex16(const char *s, uint8_t out[16])
{
	if (strlen(s) != 32)
		return JC_EINVAL;
	for (int i = 0; i < 16; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return JC_EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* Value of option i of the form "-XVALUE", "-X=VALUE" or "-X" "VALUE" (joined: 1
 * allows the first form). Sets *val (borrowed) and *used (1 or 2); 0 when
 * option i is not this option. */
static int opt_value(const struct jc_strv *o, size_t i, const char *name, int joined,
		     const char **val, size_t *used)
{
	size_t len = strlen(name);
	const char *s = o->v[i];
	if (strncmp(s, name, len) != 0)
		return 0;
	*used = 1;
	if (s[len] == '=') {
		*val = s + len + 1;
	} else if (s[len] == '\0') {
		*val = i + 1 < o->n ? o->v[i + 1] : NULL;
		*used = 2;
	} else if (joined) {
		*val = s + len;
	} else {
		return 0;
	}
	return 1;
}

int jc__inc_option(const struct jc_strv *o, size_t i, int *is_dir, const char **val, size_t *used)
{
	*val = NULL;
	*used = 1;
	*is_dir =
	    opt_value(o, i, "-I", 1, val, used) || opt_value(o, i, "--include-path", 0, val, used);
	return *is_dir || opt_value(o, i, "-include", 0, val, used) ||
	       opt_value(o, i, "--pre-include", 0, val, used);
}

static int lowered_cmp(const void *a, const void *b)
{
	return strcmp(((const struct jc_lowered *)a)->expr, ((const struct jc_lowered *)b)->expr);
}

void jc__res_lowered_in_order(struct jc_res *res, const struct jc_strv *names,
			      struct jc_lowered **tmp)
{
	size_t n = res->n_lowered;
	*tmp = NULL;
	if (n < 2 || names->n != n)
		return;
	size_t i = 0;
	while (i < n && strcmp(res->lowered[i].expr, names->v[i]) == 0)
		i++;
	if (i == n)
		return;
	struct jc_lowered *sorted = malloc(2 * n * sizeof(*sorted));
	if (!sorted)
		return;
	memcpy(sorted, res->lowered, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), lowered_cmp);
	struct jc_lowered *out = sorted + n;
	for (i = 0; i < n; i++) {
		struct jc_lowered want = {.expr = names->v[i]};
		struct jc_lowered *hit = bsearch(&want, sorted, n, sizeof(*sorted), lowered_cmp);
		if (!hit) {
			free(sorted);
			return;
		}
		out[i] = *hit;
	}
	res->lowered = out;
	*tmp = sorted;
}
