/* SPDX-License-Identifier: MIT */
/* The include scan (jc__inc_scan) and the toolkit test: see includes.h for
 * the contract. Its re-checks are inc_check.c's, dependency truth
 * inc_deps.c's. */
#include "common/includes.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "common/inc_buf.h"
#include "common/inc_lex.h"
#include "common/inc_memo.h"
#include "common/inc_opts.h"
#include "common/util.h"
#include "jitcache/jitcache.h"

/* --- a string set (for the scan's bookkeeping) ------------------------------------------ */

struct sset {
	char **slot;
	size_t cap, n;
};

static void sset_free(struct sset *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
}

/* 1 when key was added, 0 when already there, JC_ENOMEM. */
static int sset_add(struct sset *s, const char *key)
{
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		char **slot = calloc(cap, sizeof(*slot));
		if (!slot)
			return JC_ENOMEM;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->slot[i])
				continue;
			size_t j = XXH3_64bits(s->slot[i], strlen(s->slot[i])) & (cap - 1);
			while (slot[j])
				j = (j + 1) & (cap - 1);
			slot[j] = s->slot[i];
		}
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	size_t j = XXH3_64bits(key, strlen(key)) & (s->cap - 1);
	for (; s->slot[j]; j = (j + 1) & (s->cap - 1))
		if (strcmp(s->slot[j], key) == 0)
			return 0;
	if (!(s->slot[j] = strdup(key)))
		return JC_ENOMEM;
	s->n++;
	return 1;
}

/* --- the scan ------------------------------------------------------------------------------ */

struct work {
	struct jc_inc_buf refs; /* owned */
	char *dir;		/* owned: directory of the file the refs come from */
	int toolkit;		/* that file is a toolkit header (ctx->toolkit_refs) */
};

struct scan {
	const struct jc_inc_ctx *ctx;
	struct jc_inc_path ip;
	const char **dirs; /* -I directories not covered by the toolkit */
	size_t n_dirs;
	unsigned char *in_tk; /* per ip.dirs: inside the toolkit tree */
	struct jc_inc_set *set;
	struct sset seen;     /* "f:path" visited candidates, "d:path" walked dirs */
	struct sset expanded; /* "dev:ino:folded dir" files whose refs were queued */
	struct work *work;
	size_t n_work, cap_work;
	int fallback_done;
	int64_t now;
	char *err;
	size_t errlen;
};

int jc__inc_in_toolkit(const char *root, const char *dir)
{
	char real[PATH_MAX];
	if (!root || !*root || !realpath(dir, real))
		return 0;
	size_t n = strlen(root);
	return strncmp(real, root, n) == 0 && (real[n] == '\0' || real[n] == '/');
}

static int over_limit(struct scan *s)
{
	if (s->set->n < s->ctx->max_entries)
		return 0;
	return jc__fail(s->err, s->errlen, JC_ETOOBIG,
			"include scan: over %llu files and directories",
			(unsigned long long)s->ctx->max_entries);
}

static int add(struct scan *s, const char *path, uint8_t kind, const uint8_t hash[16],
	       const struct jc_inc_stat *id)
{
	int rc = over_limit(s);
	if (rc == 0 && jc__inc_set_add(s->set, path, strlen(path), kind, hash) != 0)
		rc = jc__fail(s->err, s->errlen, JC_ENOMEM, "include scan: out of memory");
	if (rc == 0 && id)
		s->set->v[s->set->n - 1].st = *id;
	return rc;
}

static int oom(struct scan *s)
{
	return jc__fail(s->err, s->errlen, JC_ENOMEM, "include scan: out of memory");
}

/*
 * Marks "tag:path" seen. Returns 1 when it is new, with *st its stat() and
 * *ok whether that worked and found the file type want; 0 when seen before;
 * JC_ENOMEM.
 */
static int first_stat(struct scan *s, char tag, const char *path, mode_t want, struct stat *st,
		      int *ok)
{
	char key[PATH_MAX + 8];
	snprintf(key, sizeof(key), "%c:%s", tag, path);
	int rc = sset_add(&s->seen, key);
	if (rc <= 0)
		return rc < 0 ? oom(s) : 0;
	s->set->n_stat++;
	*ok = stat(path, st) == 0 && (st->st_mode & S_IFMT) == want;
	return 1;
}

/* Queues refs (taken) of the file path of identity id, once per file and
 * directory; toolkit: it is a toolkit header. */
static int queue(struct scan *s, const char *path, const struct jc_inc_stat *id,
		 struct jc_inc_buf *refs_in, int toolkit)
{
	char key[PATH_MAX + 64];
	struct jc_inc_buf refs = *refs_in;
	int rc = 0;
	if (refs.n) {
		char dir[PATH_MAX], folded[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s", path);
		char *slash = strrchr(dir, '/'); /* paths are absolute: there is one */
		slash[slash == dir] = '\0';	 /* "/a/x.h" -> "/a", "/x.h" -> "/" */
		jc__path_lexical(dir, folded, sizeof(folded), 1);
		snprintf(key, sizeof(key), "%s%llu:%llu:%s", toolkit ? "t:" : "",
			 (unsigned long long)id->dev, (unsigned long long)id->ino, folded);
		rc = sset_add(&s->expanded, key);
		if (rc == 1 && s->n_work == s->cap_work) {
			size_t cap = s->cap_work ? s->cap_work * 2 : 64;
			struct work *w = realloc(s->work, cap * sizeof(*w));
			if (w) {
				s->work = w;
				s->cap_work = cap;
			}
		}
		if (rc == 1 && s->n_work < s->cap_work && (s->work[s->n_work].dir = strdup(dir))) {
			s->work[s->n_work].refs = refs;
			s->work[s->n_work].toolkit = toolkit;
			s->n_work++;
			return 0;
		}
		rc = rc == 0 ? 0 : oom(s);
	}
	free(refs.p);
	return rc;
}

/* A candidate path: recorded as FILE (and its refs queued once) or ABSENT. */
static int visit(struct scan *s, const char *path)
{
	struct stat st;
	int ok;
	if (strlen(path) >= PATH_MAX)
		return add(s, path, JC_INC_ABSENT, NULL, NULL); /* NVRTC cannot open it either */
	int rc = first_stat(s, 'f', path, S_IFREG, &st, &ok);
	if (rc <= 0)
		return rc;
	if (!ok)
		return add(s, path, JC_INC_ABSENT, NULL, NULL);
	struct jc_inc_stat id;
	jc__inc_stat_of(&st, &id);
	uint8_t hash[16];
	struct jc_inc_buf refs = {0};
	rc = jc__inc_file_info(s->ctx->memo, s->ctx->max_file_size, s->set, path, &id, hash, &refs,
			       s->now, s->err, s->errlen);
	rc = rc ?: add(s, path, JC_INC_FILE, hash, &id);
	if (rc == 0 && (rc = jc__inc_link_entry(s->set, path)) != 0)
		rc = rc == JC_ENOMEM ? oom(s)
				     : jc__fail(s->err, s->errlen, rc,
						"include scan: cannot follow the link %s", path);
	if (rc) {
		free(refs.p);
		return rc;
	}
	return queue(s, path, &id, &refs, 0);
}

static int join_visit(struct scan *s, const char *dir, const char *name)
{
	char path[PATH_MAX + 8];
	size_t dl = strlen(dir);
	int n = snprintf(path, sizeof(path), "%.*s/%s",
			 (int)(dl && dir[dl - 1] == '/' ? dl - 1 : dl), dir, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return 0; /* longer than PATH_MAX: NVRTC cannot open it either */
	return visit(s, path);
}

static int walk(struct scan *s, const char *dir)
{
	char key[PATH_MAX + 8];
	struct stat st;
	int ok, rc = first_stat(s, 'd', dir, S_IFDIR, &st, &ok);
	if (rc <= 0)
		return rc;
	if (!ok)
		return add(s, dir, JC_INC_DIR, jc__inc_not_a_dir, NULL);
	struct jc_inc_stat id;
	jc__inc_stat_of(&st, &id);
	if (jc__inc_unsettled(&id, s->now))
		jc__inc_mark_unsettled(s->set, dir);
	snprintf(key, sizeof(key), "%llu:%llu", (unsigned long long)id.dev,
		 (unsigned long long)id.ino);
	char **names;
	size_t n;
	uint8_t hash[16];
	rc = jc__inc_list_dir(dir, &names, &n, s->err, s->errlen);
	if (rc)
		return rc;
	rc = jc__inc_names_hash(names, n, hash) ? oom(s) : add(s, dir, JC_INC_DIR, hash, &id);
	/* A directory reached twice (a symbolic link loop) is listed, not walked again. */
	int first = rc == 0 ? sset_add(&s->expanded, key) : 0;
	if (first < 0)
		rc = oom(s);
	for (size_t i = 0; rc == 0 && first == 1 && i < n; i++) {
		char path[PATH_MAX + 8];
		if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) >= (int)sizeof(path))
			continue;
		s->set->n_stat++;
		if (stat(path, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			rc = walk(s, path);
		else if (S_ISREG(st.st_mode))
			rc = visit(s, path);
	}
	jc__inc_free_names(names, n);
	return rc;
}

/* A computed include: every file under every (non-toolkit) -I directory. */
static int fallback(struct scan *s)
{
	if (s->fallback_done)
		return 0;
	s->fallback_done = 1;
	s->set->fallback = 1;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < s->n_dirs; i++)
		rc = walk(s, s->dirs[i]);
	return rc;
}

/*
 * A candidate dir/name in the toolkit tree (ctx->toolkit_refs): not
 * recorded (the toolkit identity covers it), but a header found there has
 * its references followed, so that its probes of the other -I directories
 * are. 1 when it is a regular file, 0 when not, or an error.
 */
static int toolkit_visit(struct scan *s, const char *dir, const char *name)
{
	char path[PATH_MAX + 8];
	struct stat st;
	size_t dl = strlen(dir);
	int n = snprintf(path, sizeof(path), "%.*s/%s",
			 (int)(dl && dir[dl - 1] == '/' ? dl - 1 : dl), dir, name);
	s->set->n_stat++;
	if (n < 0 || (size_t)n >= PATH_MAX || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	struct jc_inc_stat id;
	jc__inc_stat_of(&st, &id);
	uint8_t hash[16];
	struct jc_inc_buf refs = {0};
	int rc = jc__inc_file_info(s->ctx->memo, s->ctx->max_file_size, s->set, path, &id, hash,
				   &refs, s->now, s->err, s->errlen);
	if (rc) {
		free(refs.p);
		return rc;
	}
	return queue(s, path, &id, &refs, 1) ?: 1;
}

/* A name of a toolkit header's reference (in directory dir) as NVRTC looks
 * it up: a quoted name beside it, then every -I directory in order, up to
 * the first that has it; the candidates outside the toolkit are recorded. */
static int toolkit_name(struct scan *s, char form, const char *name, const char *dir)
{
	int rc = form == JC_INC_REF_QUOTED ? toolkit_visit(s, dir, name) : 0;
	for (size_t d = 0; rc == 0 && d < s->ip.n_dirs; d++) {
		if (s->in_tk[d]) {
			rc = toolkit_visit(s, s->ip.dirs[d], name);
			continue;
		}
		char path[PATH_MAX + 8];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", s->ip.dirs[d], name);
		int found = stat(path, &st) == 0 && S_ISREG(st.st_mode);
		rc = join_visit(s, s->ip.dirs[d], name) ?: found;
	}
	return rc < 0 ? rc : 0;
}

/* A name of a reference from the source, an in-memory header or a file
 * outside the toolkit (dir: its directory, or NULL): every candidate. */
static int user_name(struct scan *s, char form, const char *name, const char *dir)
{
	int rc = 0;
	if (name[0] == '/')
		return visit(s, name);
	if (form == JC_INC_REF_QUOTED && dir)
		rc = join_visit(s, dir, name);
	for (size_t d = 0; rc == 0 && d < s->n_dirs; d++)
		rc = join_visit(s, s->dirs[d], name);
	/* then into the toolkit: its headers' probes of the others */
	for (size_t d = 0; rc == 0 && s->ctx->toolkit_refs && d < s->ip.n_dirs; d++)
		rc = s->in_tk[d] ? toolkit_visit(s, s->ip.dirs[d], name) : 0;
	return rc < 0 ? rc : 0;
}

/*
 * Resolves every reference of refs; dir is the including file's directory
 * or NULL; toolkit: refs are a toolkit header's (ctx->toolkit_refs; its
 * absolute names are not followed, and a computed one, such as Thrust's
 * system headers, widens to the fallback as the source's would). With ctx->toolkit_refs a name
 * without an extension is looked up as NAME.stdh first, as NVRTC probes it.
 */
static int resolve(struct scan *s, const struct jc_inc_buf *refs, const char *dir, int toolkit)
{
	int rc = 0;
	size_t pos = 0;
	const char *name;
	char form, stdh[PATH_MAX];
	int (*one)(struct scan *, char, const char *, const char *) =
	    toolkit ? toolkit_name : user_name;
	while (rc == 0 && (name = jc__inc_ref_next(refs, &pos, &form))) {
		if (form == JC_INC_REF_TIME || form == JC_INC_REF_FILE)
			continue; /* not a file (jc__inc_time_macro, jc__inc_file_hash) */
		if (form == JC_INC_REF_COMPUTED) {
			rc = fallback(s);
			continue;
		}
		if (toolkit && name[0] == '/')
			continue;
		const char *base = strrchr(name, '/');
		if (s->ctx->toolkit_refs && name[0] != '/' && !strchr(base ? base : name, '.') &&
		    (size_t)snprintf(stdh, sizeof(stdh), "%s.stdh", name) < sizeof(stdh))
			rc = one(s, form, stdh, dir);
		rc = rc ?: one(s, form, name, dir);
	}
	return rc;
}

static int lex_text(const char *t, size_t n, void *ctx)
{
	struct jc_inc_buf *refs = ctx;
	return jc__inc_lex(t, n, refs);
}

int jc__inc_scan(const struct jc_req *req, const struct jc_inc_ctx *ctx, struct jc_inc_set *out,
		 char *err, size_t errlen)
{
	struct scan s = {
	    .ctx = ctx, .set = out, .now = jc__inc_now_ns(), .err = err, .errlen = errlen};
	struct jc_inc_buf roots = {0};
	memset(out, 0, sizeof(*out));
	out->checked_ns = s.now;
	int rc = jc__inc_path_parse(req, &s.ip, err, errlen);
	if (rc)
		return rc;
	s.dirs = calloc(s.ip.n_dirs + 1, sizeof(*s.dirs));
	s.in_tk = calloc(s.ip.n_dirs + 1, 1);
	if (!s.dirs || !s.in_tk)
		rc = oom(&s);
	for (size_t i = 0; rc == 0 && i < s.ip.n_dirs; i++) {
		if ((s.in_tk[i] =
			 (unsigned char)jc__inc_in_toolkit(ctx->toolkit_root, s.ip.dirs[i])))
			rc = add(&s, s.ip.dirs[i], JC_INC_TOOLKIT, NULL, NULL);
		else
			s.dirs[s.n_dirs++] = s.ip.dirs[i];
	}
	if (rc == 0 && jc__inc_each_text(req, lex_text, &roots) != 0)
		rc = oom(&s);
	for (size_t i = 0; rc == 0 && i < s.ip.n_pre; i++)
		if (jc__inc_ref_add(&roots, JC_INC_REF_QUOTED, s.ip.pre[i], strlen(s.ip.pre[i])) !=
		    0)
			rc = oom(&s);
	rc = rc ?: resolve(&s, &roots, NULL, 0);
	while (rc == 0 && s.n_work) {
		struct work w = s.work[--s.n_work];
		rc = resolve(&s, &w.refs, w.dir, w.toolkit);
		free(w.refs.p);
		free(w.dir);
	}
	while (s.n_work) {
		s.n_work--;
		free(s.work[s.n_work].refs.p);
		free(s.work[s.n_work].dir);
	}
	free(s.work);
	free(roots.p);
	free(s.dirs);
	free(s.in_tk);
	sset_free(&s.seen);
	sset_free(&s.expanded);
	jc__inc_path_clear(&s.ip);
	if (rc) {
		jc__inc_set_clear(out);
		return rc;
	}
	/* The stat identities stay with their entries through the sort. */
	if (jc__inc_set_finish(out) != 0) {
		jc__inc_set_clear(out);
		return jc__fail(err, errlen, JC_ENOMEM, "include scan: out of memory");
	}
	return 0;
}
