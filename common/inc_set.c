/* SPDX-License-Identifier: MIT */
/* Include sets, tree-relative names and the key's digest of a set: see
 * inc_set.h for the contract. */
#include "common/inc_set.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/inc_buf.h"
#include "common/inc_lex.h"
#include "common/util.h"
#include "jitcache/jitcache.h"

const uint8_t jc__inc_not_a_dir[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
				       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

void jc__inc_mark_unsettled(struct jc_inc_set *set, const char *path)
{
	if (!set->unsettled)
		snprintf(set->unsettled_path, sizeof(set->unsettled_path), "%s", path);
	set->unsettled = 1;
}

void jc__inc_set_clear(struct jc_inc_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++)
		free(set->v[i].path);
	free(set->v);
	memset(set, 0, sizeof(*set));
}

void jc__inc_set_free(struct jc_inc_set *set)
{
	jc__inc_set_clear(set);
	free(set);
}

int jc__inc_set_add(struct jc_inc_set *set, const char *path, size_t path_len, uint8_t kind,
		    const uint8_t hash[16])
{
	if ((set->n & (set->n - 1)) == 0) { /* grow at powers of two */
		struct jc_inc_entry *v = realloc(set->v, (set->n ? set->n * 2 : 16) * sizeof(*v));
		if (!v)
			return JC_ENOMEM;
		set->v = v;
	}
	struct jc_inc_entry *e = &set->v[set->n];
	memset(e, 0, sizeof(*e));
	e->path = strndup(path, path_len);
	if (!e->path)
		return JC_ENOMEM;
	e->kind = kind;
	if (hash)
		memcpy(e->hash, hash, 16);
	set->n++;
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct jc_inc_entry *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	return c ? c : (int)x->kind - (int)y->kind;
}

int jc__inc_set_finish(struct jc_inc_set *set)
{
	/* A variant read back (a manifest's, a dependency record's) was written
	 * sorted: a pass that finds it so spares the sort. */
	size_t sorted = 1;
	while (sorted < set->n && cmp_entry(&set->v[sorted - 1], &set->v[sorted]) <= 0)
		sorted++;
	if (sorted < set->n)
		qsort(set->v, set->n, sizeof(*set->v), cmp_entry);
	size_t k = 0;
	for (size_t i = 0; i < set->n; i++) {
		if (k && cmp_entry(&set->v[k - 1], &set->v[i]) == 0) {
			free(set->v[i].path);
			continue;
		}
		set->v[k++] = set->v[i];
	}
	set->n = k;
	struct jc_inc_buf b = {0};
	uint8_t format = 1;
	int rc = jc__inc_buf_add(&b, &format, 1);
	for (size_t i = 0; rc == 0 && i < set->n; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		uint8_t head[9] = {e->kind};
		uint64_t len = strlen(e->path);
		for (int j = 0; j < 8; j++)
			head[1 + j] = (uint8_t)(len >> (8 * j));
		rc = jc__inc_buf_add(&b, head, sizeof(head));
		rc = rc ?: jc__inc_buf_add(&b, e->path, len);
		if (rc == 0 && JC_INC_HASHED(e->kind))
			rc = jc__inc_buf_add(&b, e->hash, 16);
	}
	if (rc == 0)
		jc__inc_hash128(b.p, b.n, set->digest);
	free(b.p);
	return rc;
}

int jc__inc_rel_valid(const char *rel)
{
	for (const char *p = rel;;) {
		const char *e = strchrnul(p, '/');
		size_t l = (size_t)(e - p);
		if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		if (!*e)
			return 1;
		p = e + 1;
	}
}

/* The part of path (lexical form) below dir (lexical form): NULL when dir
 * is not path or an ancestor of it; "" when equal. */
static const char *below(const char *dir, const char *path)
{
	size_t l = strlen(dir);
	if (l == 1) /* "/" */
		return path + 1;
	if (strncmp(dir, path, l) != 0 || (path[l] != '/' && path[l] != '\0'))
		return NULL;
	return path[l] ? path + l + 1 : path + l;
}

struct jc_inc_tops {
	size_t n;
	char **lex;   /* lexical form of each directory */
	uint8_t *top; /* 1: a top directory */
};

void jc__inc_tops_free(struct jc_inc_tops *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->lex[i]);
	free(t->lex);
	free(t->top);
	free(t);
}

int jc__inc_tops_new(const struct jc_strv *dirs, struct jc_inc_tops **out)
{
	char buf[PATH_MAX];
	struct jc_inc_tops *t = calloc(1, sizeof(*t));
	*out = NULL;
	if (!t || !(t->lex = calloc(dirs->n + 1, sizeof(*t->lex))) ||
	    !(t->top = calloc(dirs->n + 1, 1))) {
		jc__inc_tops_free(t);
		return JC_ENOMEM;
	}
	for (size_t i = 0; i < dirs->n; i++, t->n++) {
		if (jc__path_lexical(dirs->v[i], buf, sizeof(buf), 0) != 0) {
			jc__inc_tops_free(t);
			return JC_EINVAL;
		}
		if (!(t->lex[i] = strdup(buf))) {
			jc__inc_tops_free(t);
			return JC_ENOMEM;
		}
	}
	for (size_t i = 0; i < t->n; i++) {
		t->top[i] = 1;
		for (size_t k = 0; k < t->n && t->top[i]; k++) {
			const char *r = k == i ? NULL : below(t->lex[k], t->lex[i]);
			if (r && (*r || k < i))
				t->top[i] = 0;
		}
	}
	*out = t;
	return 0;
}

int jc__inc_tops_is_top(const struct jc_inc_tops *t, size_t i)
{
	return i < t->n && t->top[i];
}

int jc__inc_tops_rel(const struct jc_inc_tops *t, const char *path, size_t *top, char *rel,
		     size_t len)
{
	char p[PATH_MAX];
	if (jc__path_lexical(path, p, sizeof(p), 0) != 0)
		return 0;
	for (size_t i = 0; i < t->n; i++) {
		const char *r = t->top[i] ? below(t->lex[i], p) : NULL;
		if (!r)
			continue;
		if ((*r && !jc__inc_rel_valid(r)) || strlen(r) >= len)
			return 0;
		*top = i;
		snprintf(rel, len, "%s", r);
		return 1;
	}
	return 0;
}

/* Appends u64le length and the bytes of s. */
static int buf_str(struct jc_inc_buf *b, const char *s)
{
	return jc__inc_buf_u64(b, strlen(s)) ?: jc__inc_buf_add(b, s, strlen(s));
}

/* Appends the relative form of path (jc__inc_tops_rel) or, for a TOOLKIT
 * entry (kind), its path: 0; 1 when it has none (nothing added); JC_ENOMEM. */
static int buf_rel(struct jc_inc_buf *b, const struct jc_inc_tops *tops, const char *path, int kind)
{
	char r[PATH_MAX];
	size_t t = SIZE_MAX;
	if (kind == JC_INC_TOOLKIT)
		snprintf(r, sizeof(r), "%s", path);
	else if (!jc__inc_tops_rel(tops, path, &t, r, sizeof(r)))
		return 1;
	return jc__inc_buf_u64(b, t) ?: buf_str(b, r);
}

int jc__inc_key_digest(const struct jc_inc_set *set, const struct jc_strv *dirs, uint8_t out[16])
{
	struct jc_inc_tops *tops = NULL;
	int rc = jc__inc_tops_new(dirs, &tops);
	if (rc == JC_ENOMEM)
		return rc;
	struct jc_inc_buf b = {0};
	uint8_t format = 2; /* relative: (top, path below it) */
	rc = tops ? jc__inc_buf_add(&b, &format, 1) ?: jc__inc_buf_u64(&b, dirs->n) : 1;
	for (size_t i = 0; rc == 0 && i < dirs->n; i++)
		rc = buf_rel(&b, tops, dirs->v[i], 0);
	for (size_t i = 0; rc == 0 && i < set->n; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		rc = jc__inc_buf_add(&b, &e->kind, 1) ?: buf_rel(&b, tops, e->path, e->kind);
		if (rc == 0 && JC_INC_HASHED(e->kind))
			rc = jc__inc_buf_add(&b, e->hash, 16);
	}
	jc__inc_tops_free(tops);
	int rel = rc == 0;
	if (rc == 1) { /* absolute: the directories' strings, the set's own digest */
		b.n = 0;
		format = 3;
		rc = jc__inc_buf_add(&b, &format, 1) ?: jc__inc_buf_u64(&b, dirs->n);
		for (size_t i = 0; rc == 0 && i < dirs->n; i++)
			rc = buf_str(&b, dirs->v[i]);
	}
	if (rc == 0 && !rel)
		rc = jc__inc_buf_add(&b, set->digest, 16);
	if (rc == 0)
		jc__inc_hash128(b.p, b.n, out);
	free(b.p);
	return rc;
}

static int cmp_entry_path(const void *a, const void *b)
{
	return strcmp(((const struct jc_inc_entry *)a)->path,
		      ((const struct jc_inc_entry *)b)->path);
}

int jc__inc_tree_set(const struct jc_req *req, struct jc_inc_set *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < req->n_tree; i++) {
		const struct jc_blob *b = &req->tree[i];
		char *rel;
		unsigned long dir = strtoul(b->name, &rel, 10); /* validated: "I/REL" */
		const char *base = req->include_dirs.v[dir];
		size_t bl = strlen(base);
		bl -= bl > 1 && base[bl - 1] == '/';
		char *path;
		if (asprintf(&path, "%.*s%s", (int)bl, base, rel) < 0) /* rel: "/REL" or "" */
			return JC_ENOMEM;
		uint8_t hash[16];
		if (b->type == JC_TREE_FILE &&
		    jc__inc_file_hash(path, b->data, b->size, NULL, hash) != 0) {
			free(path);
			return JC_ENOMEM;
		} else if (b->type == JC_TREE_HASH || b->type == JC_TREE_DIR)
			memcpy(hash, b->data, 16);
		uint8_t kind = b->type == JC_TREE_ABSENT    ? JC_INC_ABSENT
			       : b->type == JC_TREE_DIR	    ? JC_INC_DIR
			       : b->type == JC_TREE_TOOLKIT ? JC_INC_TOOLKIT
							    : JC_INC_FILE;
		int no_hash = kind == JC_INC_ABSENT || kind == JC_INC_TOOLKIT;
		rc = jc__inc_set_add(out, path, strlen(path), kind, no_hash ? NULL : hash);
		free(path);
	}
	if (rc == 0 && out->n)
		qsort(out->v, out->n, sizeof(*out->v), cmp_entry_path);
	for (size_t i = 1; rc == 0 && i < out->n; i++)
		if (cmp_entry_path(&out->v[i - 1], &out->v[i]) == 0)
			rc =
			    jc__fail(err, errlen, JC_EINVAL, "tree: %s sent twice", out->v[i].path);
	rc = rc ?: jc__inc_set_finish(out);
	if (rc == JC_ENOMEM)
		snprintf(err, errlen, "out of memory");
	return rc;
}
