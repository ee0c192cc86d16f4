/* SPDX-License-Identifier: MIT */
/* The program name check for headers (includes.h, jc__inc_name_reach): the
 * macros of the files a compile read, which of them expand a file name
 * macro, and whether the source invokes one. */
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
	T_FILE = 1,    /* expands __FILE__ or __FILE_NAME__: the file where it is expanded */
	T_CALLER = 2,  /* expands __builtin_FILE, or calls what does in a default argument:
			* the file of the call */
	T_BASE = 4,    /* expands __BASE_FILE__: the source's name anywhere */
	IN_SOURCE = 8, /* used in the source or an in-memory header */
	IN_CODE = 16,  /* used outside the directives of a header read from disk */
	IN_BODY = 32,  /* in a replacement list of a header's macro */
	BY_CALL = 64,  /* T_CALLER only by calling a function that is (code_pass) */
	TAINTS = T_FILE | T_CALLER | T_BASE,
};

struct name {
	uint64_t h;
	uint32_t off, len; /* in the pool */
	uint32_t root;	   /* the file name macro it expands (a name's index) */
	uint32_t def_file; /* files index of the definition that made it expand root */
	uint32_t use_file; /* files index of its first IN_CODE use */
	uint8_t flags;
};

struct def {
	uint32_t name, body, n_body, file; /* body: index of its first name in names.body */
};

struct names {
	struct jc_inc_buf v;	/* struct name[] */
	struct jc_inc_buf pool; /* the names' bytes */
	uint32_t *slots;	/* open addressing: a name's index + 1, or 0 */
	size_t mask;
	struct jc_inc_buf defs;	 /* struct def[] */
	struct jc_inc_buf body;	 /* uint32_t[]: names of the definitions' replacement lists */
	const char **files;	 /* borrowed paths; 0 is the source */
	struct jc_inc_buf *recs; /* each file's records (jc__inc_lex_macros) */
	size_t n_files;
};

#define AT(buf, type, i) (((type *)(void *)(buf).p)[i])
#define COUNT(buf, type) ((buf).n / sizeof(type))

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
static int64_t intern(struct names *t, const char *s, size_t len, uint8_t flags)
{
	uint64_t h = XXH3_64bits(s, len);
	if (t->slots) {
		for (size_t k = h & t->mask; t->slots[k]; k = (k + 1) & t->mask) {
			struct name *e = &AT(t->v, struct name, t->slots[k] - 1);
			if (e->h == h && e->len == len && memcmp(t->pool.p + e->off, s, len) == 0)
				return t->slots[k] - 1;
		}
	}
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
 * (0: the source). 0 or JC_ENOMEM. */
static int take(struct names *t, const struct jc_inc_buf *recs, uint32_t file)
{
	size_t pos = 0;
	const char *s;
	char form;
	int64_t def = -1;
	while ((s = jc__inc_ref_next(recs, &pos, &form))) {
		if (form == JC_INC_REF_OPEN || form == JC_INC_REF_CLOSE)
			continue; /* code_pass */
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

/* A macro expands what any name of its replacement list expands: to a fixed point. */
static void propagate(struct names *t)
{
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = 0; i < COUNT(t->defs, struct def); i++) {
			const struct def *d = &AT(t->defs, struct def, i);
			struct name *m = &AT(t->v, struct name, d->name);
			for (uint32_t b = 0; b < d->n_body; b++) {
				const struct name *x =
				    &AT(t->v, struct name, AT(t->body, uint32_t, d->body + b));
				uint8_t add = x->flags & TAINTS & ~m->flags;
				/* it calls a function that does (BY_CALL) only when
				 * everything that made it so does */
				if (add & T_CALLER)
					m->flags |= x->flags & BY_CALL;
				else if ((x->flags & (T_CALLER | BY_CALL)) == T_CALLER &&
					 (m->flags & BY_CALL)) {
					m->flags &= (uint8_t)~BY_CALL;
					changed = 1;
				}
				if (add) {
					m->flags |= add;
					m->root = x->root;
					m->def_file = d->file;
					changed = 1;
				}
			}
		}
	}
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

/* Calls nested deeper in a header's code than this are taken as outside any. */
#define MAX_NEST 64

/*
 * A header's code, after propagate: a macro or builtin that expands
 * __builtin_FILE inside the parentheses of F (a default argument of F's
 * declaration; an argument of a call to F is taken as one too) makes F do
 * so: a call of F in the source would evaluate it there. Sets *changed when
 * it made one; 1 with why in what[len] when one is used outside any named
 * parentheses (a default member initializer evaluates it where the object
 * is made); 0; JC_ENOMEM. A call of a function made so, anywhere in a
 * header's code, is the header's own (not followed: a default argument or
 * member initializer that calls one, source_location l = current()).
 */
static int code_pass(struct names *t, const struct jc_inc_buf *recs, uint32_t file, int *changed,
		     char *what, size_t len)
{
	int64_t callee[MAX_NEST];
	size_t depth = 0, pos = 0;
	const char *s;
	char form;
	while ((s = jc__inc_ref_next(recs, &pos, &form))) {
		if (form == JC_INC_REF_OPEN) {
			int64_t id = s[0] ? intern(t, s, strlen(s), 0) : -1;
			if (s[0] && id < 0)
				return JC_ENOMEM;
			if (depth < MAX_NEST)
				callee[depth] = id;
			depth++;
		} else if (form == JC_INC_REF_CLOSE) {
			depth -= depth > 0;
		} else if (form == JC_INC_REF_USE) {
			int64_t id = intern(t, s, strlen(s), 0);
			if (id < 0)
				return JC_ENOMEM;
			const struct name *e = &AT(t->v, struct name, id);
			if (!(e->flags & T_CALLER))
				continue;
			int64_t f = depth && depth <= MAX_NEST ? callee[depth - 1] : -1;
			if (e->flags & BY_CALL)
				continue; /* a call of it in a header's code: the header's name */
			if (f < 0) {
				char d[700];
				describe(t, e, d, sizeof(d));
				snprintf(what, len, "%s used outside a call in ", d);
				size_t used = strlen(what);
				jc__inc_print_path(what + used, len - used, t->files[file], "");
				return 1;
			}
			struct name *g = &AT(t->v, struct name, f);
			if (!(g->flags & T_CALLER)) {
				g->flags |= T_CALLER | BY_CALL;
				g->root = e->root;
				g->def_file = file;
				*changed = 1;
			}
		}
	}
	return 0;
}

/* 1 with why in what[len] when the name can reach the compile through t's
 * macros and calls, else 0; JC_ENOMEM. */
static int verdict(struct names *t, char *what, size_t len)
{
	int rc = 0;
	for (int changed = 1; changed && rc == 0;) {
		propagate(t);
		changed = 0;
		for (size_t f = 1; rc == 0 && f < t->n_files; f++)
			rc = code_pass(t, &t->recs[f], (uint32_t)f, &changed, what, len);
	}
	char d[700];
	for (size_t i = 0; rc == 0 && i < COUNT(t->v, struct name); i++) {
		const struct name *e = &AT(t->v, struct name, i);
		if ((e->flags & TAINTS) && (e->flags & IN_SOURCE)) {
			describe(t, e, d, sizeof(d));
			snprintf(what, len, "%s used in the source", d);
			rc = 1;
		} else if ((e->flags & T_BASE) && (e->flags & IN_CODE)) {
			describe(t, e, d, sizeof(d));
			snprintf(what, len, "%s used in ", d);
			size_t used = strlen(what);
			jc__inc_print_path(what + used, len - used, t->files[e->use_file], "");
			rc = 1;
		} else if ((e->flags & (IN_SOURCE | IN_BODY)) &&
			   jc__inc_file_macro_name((const char *)t->pool.p + e->off, e->len) == 1) {
			/* a piece of a ## that may form one */
			print_name(t, e, d, sizeof(d));
			snprintf(what, len, "%s, which ## could make a file name macro, in %s", d,
				 e->flags & IN_SOURCE ? "the source" : "a macro");
			rc = 1;
		}
	}
	return rc;
}

/* Lexes text[n] of files index file into t (its records kept in t->recs
 * for code_pass). 0 or JC_ENOMEM. */
static int add_text(struct names *t, const void *text, size_t n, uint32_t file)
{
	struct jc_inc_buf recs = {0};
	int rc = jc__inc_lex_macros(text, n, file == 0, &recs);
	rc = rc ?: take(t, &recs, file);
	if (file != 0 && rc == 0)
		t->recs[file] = recs;
	else
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

static void names_clear(struct names *t)
{
	for (size_t i = 0; i < t->n_files; i++)
		free(t->recs[i].p);
	free(t->recs);
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
	if (rc < 0)
		return rc;
	rc = rc ?: has_file(req->source, req->source_size);
	for (size_t i = 0; rc == 0 && i < req->n_headers; i++)
		rc = has_file(req->headers[i].data, req->headers[i].size);
	for (size_t i = 0; rc == 0 && i < req->n_tree; i++)
		if (req->tree[i].type == JC_TREE_FILE && req->tree[i].data)
			rc = has_file(req->tree[i].data, req->tree[i].size);
	if (rc <= 0)
		return rc;
	rc = 0;
	struct names t = {0};
	t.files = calloc(1 + n_deps + req->n_tree, sizeof(*t.files));
	t.recs = calloc(1 + n_deps + req->n_tree, sizeof(*t.recs));
	if (!t.files || !t.recs) {
		names_clear(&t);
		return JC_ENOMEM;
	}
	t.files[t.n_files++] = "the source";
	static const char *const seeds[] = {"__FILE__", "__FILE_NAME__", "__BASE_FILE__",
					    "__builtin_FILE"};
	static const uint8_t flags[] = {T_FILE, T_FILE, T_BASE, T_CALLER};
	for (size_t i = 0; rc >= 0 && i < 4; i++)
		rc = intern(&t, seeds[i], strlen(seeds[i]), flags[i]) < 0 ? JC_ENOMEM : 0;
	rc = rc ?: add_text(&t, req->source, req->source_size, 0);
	for (size_t i = 0; rc == 0 && i < req->n_headers; i++)
		rc = add_text(&t, req->headers[i].data, req->headers[i].size, 0);
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
