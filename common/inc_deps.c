/* SPDX-License-Identifier: MIT */
/* Dependency truth (includes.h): what a compile read (its recorded
 * accesses) against what the key's include set covers (jc__inc_covers),
 * a set learned from those accesses (jc__inc_learn), the admission of a
 * set that came with a remote value (jc__inc_record_admit), and the time
 * macros that keep a result from being cached (jc__inc_time_macro). */
#include "common/includes.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/inc_buf.h"
#include "common/inc_lex.h"
#include "common/inc_memo.h"
#include "common/util.h"
#include "jitcache/jitcache.h"

/* --- dependency truth: what the compile read against what the key covers ---------------- */

/* path with empty and "." components dropped (".." kept), into out. */
static void normalise_path(const char *in, char *out, size_t len)
{
	if (jc__path_lexical(in, out, len, 0) != 0)
		snprintf(out, len, "%s", in); /* too long to open anyway: compared as it is */
}

struct norm_ent {
	char *path; /* owned, normalised */
	const struct jc_inc_entry *e;
};

static int cmp_norm(const void *a, const void *b)
{
	const struct norm_ent *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	return c ? c : (int)x->e->kind - (int)y->e->kind;
}

/* The entries of set by normalised path, sorted. NULL on ENOMEM (set->n > 0). */
static struct norm_ent *norm_index(const struct jc_inc_set *set)
{
	struct norm_ent *v = calloc(set->n + 1, sizeof(*v));
	for (size_t i = 0; v && i < set->n; i++) {
		char p[PATH_MAX];
		normalise_path(set->v[i].path, p, sizeof(p));
		v[i].e = &set->v[i];
		if (!(v[i].path = strdup(p))) {
			for (size_t j = 0; j < i; j++)
				free(v[j].path);
			free(v);
			return NULL;
		}
	}
	if (v && set->n)
		qsort(v, set->n, sizeof(*v), cmp_norm);
	return v;
}

static void norm_free(struct norm_ent *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].path);
	free(v);
}

/* The entry of kind for path in the index, or NULL. */
static const struct jc_inc_entry *norm_find(const struct norm_ent *v, size_t n, const char *path,
					    uint8_t kind)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(v[mid].path, path);
		if (c == 0)
			c = (int)v[mid].e->kind - (int)kind;
		if (c == 0)
			return v[mid].e;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

void jc__inc_print_path(char *what, size_t len, const char *path, const char *suffix)
{
	snprintf(what, len, "%s%s", path[0] ? path : "(more files than recorded)", suffix);
	for (char *p = what; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

static int same_dep_id(const struct jc_dep *d, const struct jc_inc_stat *st)
{
	return d->dev == st->dev && d->ino == st->ino && d->size == st->size &&
	       d->mtime_ns == st->mtime_ns && d->ctime_ns == st->ctime_ns;
}

/*
 * 1 when the listing of path's nearest walked ancestor is in the set (a name
 * appearing there changes it). The fallback walks every directory below a
 * listed one, so an ancestor without a DIR entry under the nearest listed one
 * is not a directory there: the probe is absent by that listing.
 */
static int dir_listed(const struct norm_ent *v, size_t n, const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	for (char *slash; (slash = strrchr(dir, '/'));) {
		slash[slash == dir] = '\0';
		const struct jc_inc_entry *e = norm_find(v, n, dir, JC_INC_DIR);
		if (e)
			return memcmp(e->hash, jc__inc_not_a_dir, 16) != 0;
		if (slash == dir)
			return 0;
	}
	return 0;
}

int jc__inc_covers(const struct jc_inc_set *set, const struct jc_dep *deps, size_t n_deps,
		   char *what, size_t len)
{
	static const struct jc_inc_set empty;
	if (!set)
		set = &empty;
	struct norm_ent *v = norm_index(set);
	if (!v)
		return JC_ENOMEM;
	int covered = 1;
	for (size_t i = 0; covered && i < n_deps; i++) {
		const struct jc_dep *d = &deps[i];
		char p[PATH_MAX];
		const struct jc_inc_entry *e;
		normalise_path(d->path, p, sizeof(p));
		switch (d->kind) {
		case JC_DEP_DENIED:
			break; /* refused without a look: the outcome is the policy's, a function of
				  the key */
		case JC_DEP_FILE:
			e = norm_find(v, set->n, p, JC_INC_FILE);
			covered = e && same_dep_id(d, &e->st);
			break;
		case JC_DEP_ABSENT:
		case JC_DEP_SPECIAL:
			covered =
			    norm_find(v, set->n, p, JC_INC_ABSENT) || dir_listed(v, set->n, p);
			break;
		case JC_DEP_DIR:
			e = norm_find(v, set->n, p, JC_INC_DIR);
			covered = e && memcmp(e->hash, jc__inc_not_a_dir, 16) != 0;
			break;
		default:
			covered = 0;
			break;
		}
		if (!covered)
			jc__inc_print_path(what, len, d->path,
					   d->kind == JC_DEP_FILE  ? ""
					   : d->kind == JC_DEP_DIR ? " (listed)"
								   : " (absent)");
	}
	norm_free(v, set->n);
	return covered;
}

int jc__inc_learn(const struct jc_inc_set *scan, const struct jc_dep *deps, size_t n_deps,
		  const struct jc_inc_ctx *ctx, struct jc_inc_set *out, char *what, size_t len)
{
	int64_t now = jc__inc_now_ns();
	int rc = 0, same = 1;
	memset(out, 0, sizeof(*out));
	out->checked_ns = now;
	for (size_t i = 0; scan && rc == 0 && i < scan->n; i++)
		if (scan->v[i].kind == JC_INC_TOOLKIT)
			rc = jc__inc_set_add(out, scan->v[i].path, strlen(scan->v[i].path),
					     JC_INC_TOOLKIT, NULL);
	for (size_t i = 0; rc == 0 && same && i < n_deps; i++) {
		const struct jc_dep *d = &deps[i];
		char p[PATH_MAX];
		struct stat st;
		struct jc_inc_stat id;
		uint8_t hash[16];
		normalise_path(d->path, p, sizeof(p));
		if (d->kind == JC_DEP_DENIED)
			continue;
		out->n_stat++;
		int exists = stat(p, &st) == 0;
		switch (d->kind) {
		case JC_DEP_FILE:
			same = exists && S_ISREG(st.st_mode);
			if (same) {
				jc__inc_stat_of(&st, &id);
				same = same_dep_id(d, &id);
			}
			if (same) {
				int r = jc__inc_file_info(ctx->memo, ctx->max_file_size, out, p,
							  &id, hash, NULL, now, NULL, 0);
				if (r == JC_ENOMEM)
					rc = r;
				same = r == 0 && same_dep_id(d, &id);
			}
			if (same && rc == 0)
				rc = jc__inc_set_add(out, p, strlen(p), JC_INC_FILE, hash);
			if (same && rc == 0) {
				out->v[out->n - 1].st = id;
				rc = jc__inc_link_entry(out, p);
				same = rc != JC_EIO;
				rc = rc == JC_EIO ? 0 : rc;
			}
			break;
		case JC_DEP_ABSENT:
		case JC_DEP_SPECIAL:
			same = !exists || !S_ISREG(st.st_mode);
			if (same)
				rc = jc__inc_set_add(out, p, strlen(p), JC_INC_ABSENT, NULL);
			break;
		case JC_DEP_DIR: {
			char **names;
			size_t n;
			same = exists && S_ISDIR(st.st_mode);
			if (same && (same = jc__inc_list_dir(p, &names, &n, NULL, 0) == 0)) {
				rc = jc__inc_names_hash(names, n, hash);
				jc__inc_free_names(names, n);
				jc__inc_stat_of(&st, &id);
				rc = rc ?: jc__inc_set_add(out, p, strlen(p), JC_INC_DIR, hash);
				if (rc == 0)
					out->v[out->n - 1].st = id;
				if (rc == 0 && jc__inc_unsettled(&id, now))
					jc__inc_mark_unsettled(out, p);
			}
			break;
		}
		default:
			same = 0;
			break;
		}
		if (!same)
			jc__inc_print_path(what, len, d->path, "");
	}
	rc = rc ?: jc__inc_set_finish(out);
	if (rc != 0 || !same) {
		jc__inc_set_clear(out);
		return rc ? rc : 0;
	}
	return 1;
}

/* --- dependency records from the remote tier ----------------------------------------------- */

int jc__inc_record_admit(const struct jc_inc_set *set, const struct jc_req *req,
			 const struct jc_inc_ctx *ctx, char *why, size_t len)
{
	const struct jc_strv *dirs = &req->include_dirs;
	struct jc_inc_tops *tops = NULL;
	char p[PATH_MAX], rel[PATH_MAX];
	if (set->n > ctx->max_entries) {
		snprintf(why, len, "%zu entries, over %llu", set->n,
			 (unsigned long long)ctx->max_entries);
		return 0;
	}
	int rc = jc__inc_tops_new(dirs, &tops);
	if (rc != 0)
		return rc; /* JC_EINVAL cannot be: the scan took these directories */
	rc = 1;
	for (size_t i = 0; rc == 1 && i < set->n; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		size_t top;
		int ok = e->path[0] == '/' && jc__path_lexical(e->path, p, sizeof(p), 0) == 0 &&
			 strcmp(p, e->path) == 0;
		if (ok && e->kind == JC_INC_TOOLKIT) {
			ok = 0;
			for (size_t k = 0; k < dirs->n && !ok; k++)
				ok = strcmp(dirs->v[k], e->path) == 0;
			ok = ok && jc__inc_in_toolkit(ctx->toolkit_root, e->path);
		} else if (ok) {
			/* below a top directory, no ".." component */
			ok = jc__inc_tops_rel(tops, e->path, &top, rel, sizeof(rel)) && rel[0];
		}
		if (!ok) {
			jc__inc_print_path(why, len, e->path, "");
			rc = 0;
		}
	}
	jc__inc_tops_free(tops);
	return rc;
}

/* --- time macros ------------------------------------------------------------------------ */

/* The first reference of form (JC_INC_REF_TIME, _FILE) in refs, or NULL. */
static const char *first_ref(const struct jc_inc_buf *refs, char form)
{
	size_t pos = 0;
	const char *name;
	char f;
	while ((name = jc__inc_ref_next(refs, &pos, &f)))
		if (f == form)
			return name;
	return NULL;
}

/* 1 when text[n] may name a time macro (a cheap filter before a lex). */
static int may_have_time(const char *t, size_t n)
{
	return memmem(t, n, "__DATE__", 8) || memmem(t, n, "__TIME__", 8) ||
	       memmem(t, n, "__TIMESTAMP__", 13);
}

/* A text's first time macro into what (where names it); 1, 0 or JC_ENOMEM. */
static int text_time(const char *t, size_t n, const char *where, char *what, size_t len)
{
	if (!may_have_time(t, n))
		return 0;
	struct jc_inc_buf refs = {0};
	int rc = jc__inc_lex(t, n, &refs);
	const char *m = rc == 0 ? first_ref(&refs, JC_INC_REF_TIME) : NULL;
	if (m)
		snprintf(what, len, "%s in %s", m, where);
	free(refs.p);
	return rc ? rc : m != NULL;
}

/* The first reference of form in the file on disk a compile read (dep, if
 * a JC_DEP_FILE: looked up in ctx's memo by the identity the worker saw,
 * else read and lexed), as "NAME in PATH" in what[len]: 1, 0 (none, not a
 * file, unreadable) or JC_ENOMEM. */
static int dep_ref(const struct jc_dep *dep, const struct jc_inc_ctx *ctx, char form, char *what,
		   size_t len)
{
	if (dep->kind != JC_DEP_FILE)
		return 0;
	struct jc_inc_set scratch = {0};
	struct jc_inc_buf refs = {0};
	struct jc_inc_stat id = {dep->dev, dep->ino, dep->size, dep->mtime_ns, dep->ctime_ns};
	uint8_t hash[16];
	int r = jc__inc_file_info(ctx->memo, ctx->max_file_size, &scratch, dep->path, &id, hash,
				  &refs, jc__inc_now_ns(), NULL, 0);
	const char *m = r == 0 ? first_ref(&refs, form) : NULL;
	if (m) {
		snprintf(what, len, "%s in ", m);
		jc__inc_print_path(what + strlen(what), len - strlen(what), dep->path, "");
	}
	free(refs.p);
	jc__inc_set_clear(&scratch);
	return r == JC_ENOMEM ? r : m != NULL;
}

int jc__inc_time_macro(const struct jc_req *req, const struct jc_dep *deps, size_t n_deps,
		       const struct jc_inc_ctx *ctx, char *what, size_t len)
{
	int rc = req->source
		     ? text_time((const char *)req->source, req->source_size,
				 req->source_name ? req->source_name : "the source", what, len)
		     : 0;
	for (size_t i = 0; rc == 0 && i < req->n_headers; i++)
		if (req->headers[i].data)
			rc = text_time((const char *)req->headers[i].data, req->headers[i].size,
				       req->headers[i].name, what, len);
	for (size_t i = 0; rc == 0 && i < req->n_tree; i++)
		if (req->tree[i].type == JC_TREE_FILE && req->tree[i].data)
			rc = text_time((const char *)req->tree[i].data, req->tree[i].size,
				       req->tree[i].name, what, len);
	for (size_t i = 0; rc == 0 && i < n_deps; i++)
		rc = dep_ref(&deps[i], ctx, JC_INC_REF_TIME, what, len);
	return rc;
}

int jc__inc_file_macro(const struct jc_dep *deps, size_t n_deps, const struct jc_inc_ctx *ctx,
		       char *what, size_t len)
{
	for (size_t i = 0; i < n_deps; i++) {
		int r = dep_ref(&deps[i], ctx, JC_INC_REF_FILE, what, len);
		if (r < 0)
			return r;
		/* the toolkit's headers expand them only into text (assert,
		 * CUB's __builtin_FILE() defaults), which the name check sees */
		if (r == 1 && !jc__inc_in_toolkit(ctx->toolkit_root, deps[i].path))
			return 1;
	}
	return 0;
}
