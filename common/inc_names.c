/* SPDX-License-Identifier: MIT */
/* The program name check (includes.h, jc__inc_name_reach): the macros of
 * what a compile read, which of them expand a file name macro, and whether
 * the source reaches one. */
#include "common/includes.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/inc_buf.h"
#include "common/inc_lex.h"
#include "common/inc_memo.h"
#include "jitcache/jitcache.h"

/* What a name (identifier) is known to do, and where it was seen. */
enum {
	T_FILE = 1,	  /* expands __FILE__ or __FILE_NAME__: the file where it is expanded */
	T_CALLER = 2,	  /* expands __builtin_FILE, __builtin_source_location or names
			   * source_location: the file of the call, which a default
			   * argument defers to its caller's */
	T_BASE = 4,	  /* expands __BASE_FILE__: the source's name anywhere */
	IN_SOURCE = 8,	  /* used in the source, an in-memory header or an option */
	IN_CODE = 16,	  /* used outside the directives of a header */
	IN_BODY = 32,	  /* in a replacement list of a header's macro */
	PASTES = 64,	  /* a macro whose replacement list pastes (##) */
	REACHED = 128,	  /* the source expands it: IN_SOURCE, or in the list of one REACHED */
	UNREADABLE = 256, /* the lexer's mark of a universal character name */
	NO_PIECES = 512,  /* source_location: a common word's pieces are no sign */
	TAINTS = T_FILE | T_CALLER | T_BASE,
};

struct name {
	uint64_t h;
	uint32_t off, len; /* in the pool */
	uint32_t root;	   /* the file name macro it expands (a name's index) */
	uint32_t def_file; /* files index of the definition that made it expand root */
	uint32_t use_file; /* files index of its first IN_CODE use */
	uint16_t flags;
};

struct def {
	uint32_t name, body, n_body, file; /* body: index of its first name in names.body */
};

struct names {
	struct jc_inc_buf v;	/* struct name[] */
	struct jc_inc_buf pool; /* the names' bytes */
	uint32_t *slots;	/* open addressing: a name's index + 1, or 0 */
	size_t mask;
	struct jc_inc_buf defs; /* struct def[] */
	struct jc_inc_buf body; /* uint32_t[]: names of the definitions' replacement lists */
	const char **files;	/* borrowed paths; 0 is the source */
	size_t n_files;
	int source_pastes;
};

#define AT(buf, type, i) (((type *)(void *)(buf).p)[i])
#define COUNT(buf, type) ((buf).n / sizeof(type))

/* Passes over the definitions before a chain of macros is taken as too
 * long to follow (the result is then bound): each pass follows every chain
 * one step at least, so hostile headers cost passes x definitions. */
#define MAX_PASSES 64

static int grow_slots(struct names *t)
{
	size_t n = COUNT(t->v, struct name), cap = t->slots ? (t->mask + 1) * 2 : 4096;
	uint32_t *s = calloc(cap, sizeof(*s));
	if (!s)
		return JC_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t k = AT(t->v, struct name, i).h & (cap - 1);
		while (s[k])
			k = (k + 1) & (cap - 1);
		s[k] = (uint32_t)i + 1;
	}
	free(t->slots);
	t->slots = s;
	t->mask = cap - 1;
	return 0;
}

/* The index of name s[len], added with flags when new; -1 when out of memory. */
/* The index of name s[len] (hash h), or -1. */
static int64_t find(const struct names *t, const char *s, size_t len, uint64_t h)
{
	if (t->slots)
		for (size_t k = h & t->mask; t->slots[k]; k = (k + 1) & t->mask) {
			const struct name *e = &AT(t->v, struct name, t->slots[k] - 1);
			if (e->h == h && e->len == len && memcmp(t->pool.p + e->off, s, len) == 0)
				return t->slots[k] - 1;
		}
	return -1;
}

static int64_t intern(struct names *t, const char *s, size_t len, uint16_t flags)
{
	uint64_t h = XXH3_64bits(s, len);
	int64_t id = find(t, s, len, h);
	if (id >= 0)
		return id;
	size_t n = COUNT(t->v, struct name);
	if (n >= UINT32_MAX - 1 || t->pool.n + len > UINT32_MAX ||
	    ((!t->slots || 2 * (n + 1) > t->mask + 1) && grow_slots(t) != 0))
		return -1;
	struct name e = {h, (uint32_t)t->pool.n, (uint32_t)len, (uint32_t)n, 0, 0, flags};
	if (jc__inc_buf_add(&t->pool, s, len) != 0 || jc__inc_buf_add(&t->v, &e, sizeof(e)) != 0)
		return -1;
	size_t k = h & t->mask;
	while (t->slots[k])
		k = (k + 1) & t->mask;
	t->slots[k] = (uint32_t)n + 1;
	return (int64_t)n;
}

/* Takes the records of one text (jc__inc_lex_macros) of files index file
 * (0: the source's). 0 or JC_ENOMEM. */
static int take(struct names *t, const struct jc_inc_buf *recs, uint32_t file)
{
	size_t pos = 0;
	const char *s;
	char form;
	int64_t def = -1;
	while ((s = jc__inc_ref_next(recs, &pos, &form))) {
		if (form == JC_INC_REF_PASTE) {
			if (file == 0)
				t->source_pastes = 1;
			else if (def >= 0)
				AT(t->v, struct name, AT(t->defs, struct def, def).name).flags |=
				    PASTES;
			continue;
		}
		int64_t id = intern(t, s, strlen(s), 0);
		if (id < 0)
			return JC_ENOMEM;
		uint32_t u = (uint32_t)id;
		struct name *e = &AT(t->v, struct name, u);
		if (form == JC_INC_REF_USE) {
			if (file == 0)
				e->flags |= IN_SOURCE;
			else if (!(e->flags & IN_CODE)) {
				e->flags |= IN_CODE;
				e->use_file = file;
			}
		} else if (form == JC_INC_REF_DEFINE) {
			struct def d = {u, (uint32_t)COUNT(t->body, uint32_t), 0, file};
			if (jc__inc_buf_add(&t->defs, &d, sizeof(d)) != 0)
				return JC_ENOMEM;
			def = (int64_t)COUNT(t->defs, struct def) - 1;
		} else if (form == JC_INC_REF_BODY && def >= 0) {
			e->flags |= IN_BODY;
			if (jc__inc_buf_add(&t->body, &u, sizeof(u)) != 0)
				return JC_ENOMEM;
			AT(t->defs, struct def, def).n_body++;
		}
	}
	return 0;
}

/* To a fixed point: a macro expands what any name of its replacement list
 * expands, and the source reaches what a macro it reaches lists. 0, or 1
 * when MAX_PASSES did not reach it. */
static int propagate(struct names *t)
{
	for (int pass = 0; pass < MAX_PASSES; pass++) {
		int changed = 0;
		for (size_t i = 0; i < COUNT(t->defs, struct def); i++) {
			const struct def *d = &AT(t->defs, struct def, i);
			struct name *m = &AT(t->v, struct name, d->name);
			for (uint32_t b = 0; b < d->n_body; b++) {
				struct name *x =
				    &AT(t->v, struct name, AT(t->body, uint32_t, d->body + b));
				uint16_t add = x->flags & TAINTS & ~m->flags;
				if (add) {
					m->flags |= add;
					m->root = x->root;
					m->def_file = d->file;
					changed = 1;
				}
				if ((m->flags & (IN_SOURCE | REACHED)) && !(x->flags & REACHED)) {
					x->flags |= REACHED;
					changed = 1;
				}
			}
		}
		if (!changed)
			return 0;
	}
	return 1;
}

static void print_name(const struct names *t, const struct name *e, char *out, size_t len)
{
	snprintf(out, len, "%.*s", (int)(e->len < 200 ? e->len : 200), t->pool.p + e->off);
}

/* "NAME (expanding ROOT, defined in PATH)" or "NAME" for a file name macro itself. */
static void describe(const struct names *t, const struct name *e, char *out, size_t len)
{
	print_name(t, e, out, len);
	const struct name *root = &AT(t->v, struct name, e->root);
	if (root == e)
		return;
	char r[208];
	print_name(t, root, r, sizeof(r));
	size_t used = strlen(out);
	snprintf(out + used, len - used, " (expanding %s, defined in ", r);
	used = strlen(out);
	jc__inc_print_path(out + used, len - used, t->files[e->def_file], ")");
}

/*
 * 1 with why in what[len] when a piece of m (a name that expands a file
 * name) that ## could paste with one other into m is used where it would
 * matter: in the source (a toolkit macro's ## there), or, for m expanding
 * the call's file or the source's, in a header's code or macro. Pieces as
 * jc__inc_piece counts them.
 */
static int piece_used(const struct names *t, const struct name *m, char *what, size_t len)
{
	const char *p = (const char *)t->pool.p + m->off;
	uint16_t where = IN_SOURCE | (m->flags & (T_CALLER | T_BASE) ? IN_CODE | IN_BODY : 0);
	for (uint32_t l = 1; l < m->len; l++)
		for (int suffix = 0; suffix < 2; suffix++) {
			const char *q = suffix ? p + m->len - l : p;
			if (!jc__inc_piece(l, m->len, suffix))
				continue;
			int64_t id = find(t, q, l, XXH3_64bits(q, l));
			if (id < 0 || !(AT(t->v, struct name, id).flags & where))
				continue;
			char d[700];
			describe(t, m, d, sizeof(d));
			snprintf(what, len, "%.*s, which ## could paste into %s, used in %s",
				 (int)l, q, d,
				 AT(t->v, struct name, id).flags & IN_SOURCE ? "the source"
									     : "a header");
			return 1;
		}
	return 0;
}

/* 1 with why in what[len] when the name can reach the compile through t's
 * texts other than as text, else 0. */
static int verdict(struct names *t, char *what, size_t len)
{
	if (propagate(t)) {
		snprintf(what, len, "macro chains longer than %d", MAX_PASSES);
		return 1;
	}
	char d[700];
	for (size_t i = 0; i < COUNT(t->v, struct name); i++) {
		const struct name *e = &AT(t->v, struct name, i);
		if ((e->flags & TAINTS) && (e->flags & IN_SOURCE)) {
			describe(t, e, d, sizeof(d));
			snprintf(what, len, "%s used in the source", d);
			return 1;
		}
		if ((e->flags & (T_CALLER | T_BASE)) && (e->flags & IN_CODE)) {
			/* a default argument evaluates it where its function is
			 * called: perhaps in the source */
			describe(t, e, d, sizeof(d));
			snprintf(what, len, "%s used in ", d);
			size_t used = strlen(what);
			jc__inc_print_path(what + used, len - used, t->files[e->use_file], "");
			return 1;
		}
		if ((e->flags & UNREADABLE) && (e->flags & (IN_SOURCE | IN_CODE))) {
			snprintf(what, len, "a universal character name (\\u) in a name");
			return 1;
		}
		if ((e->flags & TAINTS) && !(e->flags & NO_PIECES) && piece_used(t, e, what, len))
			return 1;
		if (!t->source_pastes && (e->flags & PASTES) &&
		    (e->flags & (IN_SOURCE | REACHED))) {
			print_name(t, e, d, sizeof(d));
			snprintf(what, len, "the source expands %s, which pastes (##) names", d);
			return 1;
		}
	}
	if (t->source_pastes)
		snprintf(what, len, "the source pastes (##) names");
	return t->source_pastes;
}

/* Lexes text[n] of files index file into t. 0 or JC_ENOMEM. */
static int add_text(struct names *t, const void *text, size_t n, uint32_t file)
{
	struct jc_inc_buf recs = {0};
	int rc = jc__inc_lex_macros(text, n, file == 0, &recs);
	rc = rc ?: take(t, &recs, file);
	free(recs.p);
	return rc;
}

/* 1 when text[n] holds a file name macro or a piece of one (the lexer's
 * JC_INC_REF_FILE records); JC_ENOMEM. */
static int has_file(const void *text, size_t n)
{
	struct jc_inc_buf refs = {0};
	int rc = jc__inc_lex(text, n, &refs);
	size_t pos = 0;
	char form;
	while (rc == 0 && jc__inc_ref_next(&refs, &pos, &form))
		rc = form == JC_INC_REF_FILE;
	free(refs.p);
	return rc;
}

/* Reads the file of dep (as the compile saw it) into t; 1 with why in
 * what[len] when it cannot (changed, unreadable: the name check cannot
 * clear it); 0; JC_ENOMEM. */
static int add_dep(struct names *t, const struct jc_dep *dep, uint64_t max, uint32_t file,
		   char *what, size_t len)
{
	struct jc_inc_buf b = {0};
	struct jc_inc_stat a, z,
	    seen = {dep->dev, dep->ino, dep->size, dep->mtime_ns, dep->ctime_ns};
	int rc = jc__inc_read_file(dep->path, max, &b, &a, &z, NULL, 0);
	if (rc == 0 && jc__inc_same_stat(&a, &seen) && jc__inc_same_stat(&z, &seen))
		rc = add_text(t, b.p, b.n, file);
	else if (rc != JC_ENOMEM) {
		jc__inc_print_path(what, len, dep->path,
				   " changed or cannot be read since the compile");
		rc = 1;
	}
	free(b.p);
	return rc;
}

/* 1 when something req holds as text (its source, in-memory headers,
 * options and client-read tree's files) names a file name macro; JC_ENOMEM. */
static int req_has_file(const struct jc_req *req)
{
	int rc = has_file(req->source, req->source_size);
	for (size_t i = 0; rc == 0 && i < req->n_headers; i++)
		rc = has_file(req->headers[i].data, req->headers[i].size);
	for (size_t i = 0; rc == 0 && i < req->options.n; i++)
		rc = has_file(req->options.v[i], strlen(req->options.v[i]));
	for (size_t i = 0; rc == 0 && i < req->n_tree; i++)
		if (req->tree[i].type == JC_TREE_FILE && req->tree[i].data)
			rc = has_file(req->tree[i].data, req->tree[i].size);
	return rc;
}

static void names_clear(struct names *t)
{
	free(t->v.p);
	free(t->pool.p);
	free(t->slots);
	free(t->defs.p);
	free(t->body.p);
	free(t->files);
}

int jc__inc_name_reach(const struct jc_req *req, const struct jc_dep *deps, size_t n_deps,
		       const struct jc_inc_ctx *ctx, char *what, size_t len)
{
	int rc = jc__inc_file_macro(deps, n_deps, ctx, what, len);
	rc = rc ?: req_has_file(req);
	if (rc <= 0)
		return rc;
	struct names t = {0};
	t.files = calloc(1 + n_deps + req->n_tree, sizeof(*t.files));
	if (!t.files)
		return JC_ENOMEM;
	t.files[t.n_files++] = "the source";
	static const char *const seeds[] = {"__FILE__",
					    "__FILE_NAME__",
					    "__BASE_FILE__",
					    "__builtin_FILE",
					    "__builtin_source_location",
					    "source_location",
					    "\\u"};
	static const uint16_t flags[] = {
	    T_FILE, T_FILE, T_BASE, T_CALLER, T_CALLER, T_CALLER | NO_PIECES, UNREADABLE};
	rc = 0;
	for (size_t i = 0; rc == 0 && i < sizeof(seeds) / sizeof(*seeds); i++)
		rc = intern(&t, seeds[i], strlen(seeds[i]), flags[i]) < 0 ? JC_ENOMEM : 0;
	/* the source's own text; an option (-D) defines a macro as it would */
	rc = rc ?: add_text(&t, req->source, req->source_size, 0);
	for (size_t i = 0; rc == 0 && i < req->n_headers; i++)
		rc = add_text(&t, req->headers[i].data, req->headers[i].size, 0);
	for (size_t i = 0; rc == 0 && i < req->options.n; i++)
		rc = add_text(&t, req->options.v[i], strlen(req->options.v[i]), 0);
	for (size_t i = 0; rc == 0 && i < req->n_tree; i++) {
		if (req->tree[i].type != JC_TREE_FILE || !req->tree[i].data)
			continue;
		t.files[t.n_files] = req->tree[i].name;
		rc = add_text(&t, req->tree[i].data, req->tree[i].size, (uint32_t)t.n_files++);
	}
	for (size_t i = 0; rc == 0 && i < n_deps; i++) {
		/* the toolkit's macros expand them only into text (includes.h) */
		if (deps[i].kind != JC_DEP_FILE ||
		    jc__inc_in_toolkit(ctx->toolkit_root, deps[i].path))
			continue;
		t.files[t.n_files] = deps[i].path;
		rc = add_dep(&t, &deps[i], ctx->max_file_size, (uint32_t)t.n_files++, what, len);
	}
	rc = rc ?: verdict(&t, what, len);
	names_clear(&t);
	return rc;
}
