/* SPDX-License-Identifier: MIT */
/* The include scan, its re-checks and dependency truth: see includes.h for
 * the contract. */
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
	char *dir;         /* owned: directory of the file the refs come from */
	int toolkit;       /* that file is a toolkit header (ctx->toolkit_refs) */
};

struct scan {
	const struct jc_inc_ctx *ctx;
	struct jc_inc_path ip;
	const char **dirs;         /* -I directories not covered by the toolkit */
	size_t n_dirs;
	unsigned char *in_tk;      /* per ip.dirs: inside the toolkit tree */
	struct jc_inc_set *set;
	struct sset seen;          /* "f:path" visited candidates, "d:path" walked dirs */
	struct sset expanded;      /* "dev:ino:folded dir" files whose refs were queued */
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
	return jc__fail(s->err, s->errlen, JC_ETOOBIG, "include scan: over %llu files and directories",
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

/* The JC_INC_LINK entry of path, added to set when path is a symbolic link:
 * 0 (also when it is none), JC_EIO (its chain cannot be followed), JC_ENOMEM. */
static int link_entry(struct jc_inc_set *set, const char *path)
{
	uint8_t hash[16];
	int rc = jc__inc_link_walk(path, hash, NULL);
	return rc <= 0 ? rc : jc__inc_set_add(set, path, strlen(path), JC_INC_LINK, hash);
}

/* 1 when the LINK entry e still names the same chain of targets, else 0;
 * JC_ENOMEM. */
static int link_same(const struct jc_inc_entry *e)
{
	uint8_t hash[16];
	int rc = jc__inc_link_walk(e->path, hash, NULL);
	return rc == JC_ENOMEM ? rc : rc == 1 && memcmp(hash, e->hash, 16) == 0;
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
		slash[slash == dir] = '\0';     /* "/a/x.h" -> "/a", "/x.h" -> "/" */
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
	if (rc == 0 && (rc = link_entry(s->set, path)) != 0)
		rc = rc == JC_ENOMEM ? oom(s)
				     : jc__fail(s->err, s->errlen, rc, "include scan: cannot follow the link %s",
						path);
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
	int n = snprintf(path, sizeof(path), "%.*s/%s", (int)(dl && dir[dl - 1] == '/' ? dl - 1 : dl),
			 dir, name);
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
	snprintf(key, sizeof(key), "%llu:%llu", (unsigned long long)id.dev, (unsigned long long)id.ino);
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
	int n = snprintf(path, sizeof(path), "%.*s/%s", (int)(dl && dir[dl - 1] == '/' ? dl - 1 : dl),
			 dir, name);
	s->set->n_stat++;
	if (n < 0 || (size_t)n >= PATH_MAX || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	struct jc_inc_stat id;
	jc__inc_stat_of(&st, &id);
	uint8_t hash[16];
	struct jc_inc_buf refs = {0};
	int rc = jc__inc_file_info(s->ctx->memo, s->ctx->max_file_size, s->set, path, &id, hash, &refs,
				   s->now, s->err, s->errlen);
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
 * system headers, widens to the fallback as the source's would). With ctx->toolkit_refs a name without
 * an extension is looked up as NAME.stdh first, as NVRTC probes it.
 */
static int resolve(struct scan *s, const struct jc_inc_buf *refs, const char *dir, int toolkit)
{
	int rc = 0;
	size_t pos = 0;
	const char *name;
	char form, stdh[PATH_MAX];
	int (*one)(struct scan *, char, const char *, const char *) = toolkit ? toolkit_name : user_name;
	while (rc == 0 && (name = jc__inc_ref_next(refs, &pos, &form))) {
		if (form == JC_INC_REF_TIME)
			continue; /* not a file (jc__inc_time_macro) */
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
	struct scan s = {.ctx = ctx, .set = out, .now = jc__inc_now_ns(), .err = err, .errlen = errlen};
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
		if ((s.in_tk[i] = (unsigned char)jc__inc_in_toolkit(ctx->toolkit_root, s.ip.dirs[i])))
			rc = add(&s, s.ip.dirs[i], JC_INC_TOOLKIT, NULL, NULL);
		else
			s.dirs[s.n_dirs++] = s.ip.dirs[i];
	}
	if (rc == 0 && jc__inc_each_text(req, lex_text, &roots) != 0)
		rc = oom(&s);
	for (size_t i = 0; rc == 0 && i < s.ip.n_pre; i++)
		if (jc__inc_ref_add(&roots, JC_INC_REF_QUOTED, s.ip.pre[i], strlen(s.ip.pre[i])) != 0)
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

/* --- re-checks ------------------------------------------------------------------------------- */

/*
 * Directories seen while re-checking ABSENT entries. A name whose lookup
 * fails with ENOENT lies under a missing directory or in an existing one:
 * its parents are looked at (once per directory: the set is sorted, so a
 * directory's names are mostly together), and every later name below the
 * topmost missing one is absent without a stat, since resolving it would
 * fail there. CUB's probes next to a source (cub/..., cuda/..., hundreds of
 * names under a few missing directories) cost a few stat calls, not one
 * each.
 */
struct absent_dirs {
	char gone[PATH_MAX];  /* the topmost missing directory found; "" none */
	char there[PATH_MAX]; /* the last parent found to exist; "" none */
};

/* 1 when path lies below dir ("" never). */
static int below(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return n && strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* path, which stat() did not find (ENOENT): records its missing parents. */
static void absent_walk(struct absent_dirs *a, const char *path, uint64_t *n_stat)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return;
	for (char *slash = strrchr(dir, '/'); slash && slash > dir; slash = strrchr(dir, '/')) {
		*slash = 0;
		if (strcmp(dir, a->there) == 0)
			return;
		struct stat st;
		(*n_stat)++;
		if (stat(dir, &st) == 0 || errno != ENOENT) {
			snprintf(a->there, sizeof(a->there), "%s", dir);
			return;
		}
		memcpy(a->gone, dir, strlen(dir) + 1);
	}
}

int jc__inc_check(struct jc_inc_set *set, const struct jc_inc_ctx *ctx)
{
	int64_t now = jc__inc_now_ns();
	struct absent_dirs absent = {"", ""};
	set->unsettled = 0;
	set->checked_ns = now;
	for (size_t i = 0; i < set->n; i++) {
		struct jc_inc_entry *e = &set->v[i];
		struct stat st;
		uint8_t hash[16];
		int exists;
		if (e->kind == JC_INC_TOOLKIT) {
			if (!jc__inc_in_toolkit(ctx->toolkit_root, e->path))
				return 0;
			continue;
		}
		if (e->kind == JC_INC_LINK) {
			int same = link_same(e);
			if (same != 1)
				return same;
			continue;
		}
		if (e->kind == JC_INC_ABSENT && below(e->path, absent.gone))
			continue;
		set->n_stat++;
		exists = stat(e->path, &st) == 0;
		if (e->kind == JC_INC_ABSENT) {
			if (exists && S_ISREG(st.st_mode))
				return 0;
			if (!exists && errno == ENOENT)
				absent_walk(&absent, e->path, &set->n_stat);
			continue;
		}
		if (e->kind == JC_INC_DIR) {
			if (!exists || !S_ISDIR(st.st_mode)) {
				if (memcmp(e->hash, jc__inc_not_a_dir, 16) != 0)
					return 0;
				continue;
			}
			jc__inc_stat_of(&st, &e->st);
			if (jc__inc_dir_hash(ctx->memo, e->path, &e->st, now, hash) != 0 ||
			    memcmp(hash, e->hash, 16) != 0)
				return 0;
			if (jc__inc_unsettled(&e->st, now))
				jc__inc_mark_unsettled(set, e->path);
			continue;
		}
		if (!exists || !S_ISREG(st.st_mode))
			return 0;
		jc__inc_stat_of(&st, &e->st);
		int rc = jc__inc_file_info(ctx->memo, ctx->max_file_size, set, e->path, &e->st, hash,
					   NULL, now, NULL, 0);
		if (rc == JC_ENOMEM)
			return rc;
		if (rc != 0 || memcmp(hash, e->hash, 16) != 0)
			return 0;
	}
	return 1;
}

int jc__inc_unchanged(const struct jc_inc_set *set, char *what, size_t len)
{
	for (size_t i = 0; i < set->n; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		struct stat st;
		struct jc_inc_stat id;
		if (e->kind == JC_INC_TOOLKIT)
			continue;
		if (e->kind == JC_INC_LINK) {
			if (link_same(e) != 1) {
				snprintf(what, len, "%s", e->path);
				return 0;
			}
			continue;
		}
		int exists = stat(e->path, &st) == 0, same;
		if (e->kind == JC_INC_ABSENT) {
			same = !exists || !S_ISREG(st.st_mode);
		} else if (e->kind == JC_INC_DIR && memcmp(e->hash, jc__inc_not_a_dir, 16) == 0) {
			same = !exists || !S_ISDIR(st.st_mode);
		} else {
			same = exists && (e->kind == JC_INC_DIR ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
			if (same) {
				jc__inc_stat_of(&st, &id);
				same = jc__inc_same_stat(&id, &e->st);
			}
		}
		if (!same) {
			snprintf(what, len, "%s", e->path);
			return 0;
		}
	}
	return 1;
}

int jc__inc_rehash(const struct jc_inc_set *set, const struct jc_inc_ctx *ctx, char *what,
		   size_t len)
{
	for (size_t i = 0; i < set->n; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		if ((e->kind != JC_INC_FILE && e->kind != JC_INC_DIR) ||
		    !jc__inc_unsettled(&e->st, set->checked_ns))
			continue;
		struct jc_inc_stat a, b;
		uint8_t hash[16];
		int same;
		if (e->kind == JC_INC_FILE) {
			struct jc_inc_buf data = {0};
			int rc = jc__inc_read_file(e->path, ctx->max_file_size, &data, &a, &b, NULL, 0);
			if (rc == 0)
				jc__inc_hash128(data.p, data.n, hash);
			free(data.p);
			if (rc == JC_ENOMEM)
				return rc;
			same = rc == 0;
		} else {
			struct stat st;
			char **names;
			size_t n;
			same = stat(e->path, &st) == 0 && S_ISDIR(st.st_mode);
			if (same)
				jc__inc_stat_of(&st, &a);
			if (same && (same = jc__inc_list_dir(e->path, &names, &n, NULL, 0) == 0)) {
				int rc = jc__inc_names_hash(names, n, hash);
				jc__inc_free_names(names, n);
				if (rc)
					return rc;
				same = stat(e->path, &st) == 0;
				if (same)
					jc__inc_stat_of(&st, &b);
			}
		}
		if (!same || !jc__inc_same_stat(&a, &e->st) || !jc__inc_same_stat(&b, &e->st) ||
		    memcmp(hash, e->hash, 16)) {
			snprintf(what, len, "%s", e->path);
			return 0;
		}
	}
	return 1;
}

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

/* "PATH SUFFIX" into what[len], control characters of PATH (which a
 * client's #include names) shown as '?': it reaches the daemon's log. */
static void name_access(char *what, size_t len, const char *path, const char *suffix)
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
			break; /* refused without a look: the outcome is the policy's, a function of the key */
		case JC_DEP_FILE:
			e = norm_find(v, set->n, p, JC_INC_FILE);
			covered = e && same_dep_id(d, &e->st);
			break;
		case JC_DEP_ABSENT:
		case JC_DEP_SPECIAL:
			covered = norm_find(v, set->n, p, JC_INC_ABSENT) || dir_listed(v, set->n, p);
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
			name_access(what, len, d->path,
				    d->kind == JC_DEP_FILE ? "" : d->kind == JC_DEP_DIR ? " (listed)" : " (absent)");
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
				int r = jc__inc_file_info(ctx->memo, ctx->max_file_size, out, p, &id, hash,
						  NULL, now, NULL, 0);
				if (r == JC_ENOMEM)
					rc = r;
				same = r == 0 && same_dep_id(d, &id);
			}
			if (same && rc == 0)
				rc = jc__inc_set_add(out, p, strlen(p), JC_INC_FILE, hash);
			if (same && rc == 0) {
				out->v[out->n - 1].st = id;
				rc = link_entry(out, p);
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
			name_access(what, len, d->path, "");
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
		snprintf(why, len, "%zu entries, over %llu", set->n, (unsigned long long)ctx->max_entries);
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
			name_access(why, len, e->path, "");
			rc = 0;
		}
	}
	jc__inc_tops_free(tops);
	return rc;
}

/* --- time macros ------------------------------------------------------------------------ */

/* The first time macro in refs, or NULL. */
static const char *time_ref(const struct jc_inc_buf *refs)
{
	size_t pos = 0;
	const char *name;
	char form;
	while ((name = jc__inc_ref_next(refs, &pos, &form)))
		if (form == JC_INC_REF_TIME)
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
	const char *m = rc == 0 ? time_ref(&refs) : NULL;
	if (m)
		snprintf(what, len, "%s in %s", m, where);
	free(refs.p);
	return rc ? rc : m != NULL;
}

int jc__inc_time_macro(const struct jc_req *req, const struct jc_dep *deps, size_t n_deps,
		       const struct jc_inc_ctx *ctx, char *what, size_t len)
{
	int rc = req->source ? text_time((const char *)req->source, req->source_size,
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
	for (size_t i = 0; rc == 0 && i < n_deps; i++) {
		if (deps[i].kind != JC_DEP_FILE)
			continue;
		struct jc_inc_set scratch = {0};
		struct jc_inc_buf refs = {0};
		struct jc_inc_stat id = {deps[i].dev, deps[i].ino, deps[i].size, deps[i].mtime_ns,
					 deps[i].ctime_ns};
		uint8_t hash[16];
		int r = jc__inc_file_info(ctx->memo, ctx->max_file_size, &scratch, deps[i].path, &id,
					  hash, &refs, jc__inc_now_ns(), NULL, 0);
		const char *m = r == 0 ? time_ref(&refs) : NULL;
		if (m) {
			snprintf(what, len, "%s in ", m);
			name_access(what + strlen(what), len - strlen(what), deps[i].path, "");
		}
		rc = r == JC_ENOMEM ? r : m != NULL;
		free(refs.p);
		jc__inc_set_clear(&scratch);
	}
	return rc;
}
