/* SPDX-License-Identifier: MIT */
/* Headers read from include directories: see includes.h for the contract. */
#include "includes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "jitcache/jitcache.h"
#include "util.h"

#define SETTLE_NS (100 * 1000000ll)         /* filesystems with sub-second timestamps */
#define SETTLE_COARSE_NS (2000 * 1000000ll) /* whole seconds (and FAT's 2 s) */

/* Reference records in a refs buffer: form byte, name, NUL. */
enum { REF_QUOTED = 'q', REF_ANGLE = 'a', REF_COMPUTED = 'c' };

/* --- a growable byte buffer ---------------------------------------------------- */

struct bytes {
	uint8_t *p;
	size_t n, cap;
};

static int bytes_add(struct bytes *b, const void *data, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p)
			return JC_ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, data, n);
	b->n += n;
	return 0;
}

static int add_ref(struct bytes *refs, char form, const char *name, size_t len)
{
	uint8_t f = (uint8_t)form, nul = 0;
	int rc = bytes_add(refs, &f, 1);
	rc = rc ?: bytes_add(refs, name, len);
	return rc ?: bytes_add(refs, &nul, 1);
}

/* --- the lexer: include references of one text ---------------------------------- */

static int is_ident(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '$';
}

static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int is_hspace(int c)
{
	return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r';
}

/* Removes backslash-newline splices (translation phase 2), the backslash
 * also spelt as the trigraph ??/ (phase 1, in case trigraphs are on), into a
 * new buffer. */
static char *unsplice(const char *s, size_t n, size_t *out_n)
{
	char *o = malloc(n ? n : 1);
	size_t j = 0;
	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '?' && i + 3 < n && s[i + 1] == '?' && s[i + 2] == '/' &&
		    (s[i + 3] == '\n' || (s[i + 3] == '\r' && i + 4 < n && s[i + 4] == '\n'))) {
			i += s[i + 3] == '\n' ? 3 : 4;
			continue;
		}
		if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\n') {
			i++;
			continue;
		}
		if (s[i] == '\\' && i + 2 < n && s[i + 1] == '\r' && s[i + 2] == '\n') {
			i += 2;
			continue;
		}
		o[j++] = s[i];
	}
	*out_n = j;
	return o;
}

/* Index after a block comment starting at i ("/ *"), or n. */
static size_t skip_block_comment(const char *s, size_t n, size_t i)
{
	for (i += 2; i + 1 < n; i++)
		if (s[i] == '*' && s[i + 1] == '/')
			return i + 2;
	return n;
}

/* Index after a string or character literal opened by s[i]; stops at a newline. */
static size_t skip_quoted(const char *s, size_t n, size_t i)
{
	char q = s[i];
	for (i++; i < n && s[i] != '\n'; i++) {
		if (s[i] == '\\')
			i++;
		else if (s[i] == q)
			return i + 1;
	}
	return i < n ? i : n;
}

/* Index after a raw string literal whose '"' is at i: R"delim( ... )delim". */
static size_t skip_raw(const char *s, size_t n, size_t i)
{
	size_t d0 = i + 1, d = d0;
	while (d < n && d - d0 <= 16 && s[d] != '(' && s[d] != '"' && s[d] != '\\' && s[d] != ' ' &&
	       s[d] != '\n')
		d++;
	if (d >= n || s[d] != '(')
		return skip_quoted(s, n, i); /* not a valid raw string: lex it as a plain one */
	size_t dlen = d - d0;
	for (size_t k = d + 1; k + dlen + 1 < n + 1; k++)
		if (s[k] == ')' && k + 1 + dlen < n && memcmp(s + k + 1, s + d0, dlen) == 0 &&
		    s[k + 1 + dlen] == '"')
			return k + dlen + 2;
	return n;
}

/* Skips blanks and block comments within a line. */
static size_t skip_hspace(const char *s, size_t n, size_t i)
{
	for (;;) {
		while (i < n && is_hspace(s[i]))
			i++;
		if (i + 1 < n && s[i] == '/' && s[i + 1] == '*')
			i = skip_block_comment(s, n, i);
		else
			return i;
	}
}

static size_t line_end(const char *s, size_t n, size_t i)
{
	const char *nl = memchr(s + i, '\n', n - i);
	return nl ? (size_t)(nl - s) : n;
}

/* A literal "name" or <name> at i (ending before eol): records it, returns 1. */
static int literal_ref(const char *s, size_t eol, size_t i, struct bytes *refs, int *rc)
{
	if (i >= eol || (s[i] != '"' && s[i] != '<'))
		return 0;
	char close = s[i] == '"' ? '"' : '>';
	const char *end = memchr(s + i + 1, close, eol - i - 1);
	if (!end)
		return 0;
	size_t len = (size_t)(end - (s + i + 1));
	if (len)
		*rc = add_ref(refs, close == '"' ? REF_QUOTED : REF_ANGLE, s + i + 1, len);
	return 1;
}

static int ident_is(const char *s, size_t len, const char *word)
{
	return strlen(word) == len && memcmp(s, word, len) == 0;
}

/*
 * A directive whose '#' is at i - 1. Returns the index from which ordinary
 * lexing continues. See includes.h for what is recorded.
 */
static size_t directive(const char *s, size_t n, size_t i, struct bytes *refs, int *rc)
{
	i = skip_hspace(s, n, i);
	size_t w = i;
	while (i < n && is_ident(s[i]))
		i++;
	const char *word = s + w;
	size_t wlen = i - w;
	size_t eol = line_end(s, n, i);
	if (ident_is(word, wlen, "line") || (wlen && is_digit(word[0]))) {
		/* #line "name" (and GNU's # 1 "name") renames the file, which may
		 * change where quoted includes are looked for: unknowable here. */
		size_t eol2 = line_end(s, n, i);
		if (memchr(s + i, '"', eol2 - i))
			*rc = add_ref(refs, REF_COMPUTED, "", 0);
		return eol2;
	}
	if (ident_is(word, wlen, "include") || ident_is(word, wlen, "include_next") ||
	    ident_is(word, wlen, "import")) {
		i = skip_hspace(s, n, i);
		if (i >= eol)
			return i;
		if (!literal_ref(s, eol, i, refs, rc))
			*rc = add_ref(refs, REF_COMPUTED, "", 0);
		return eol;
	}
	int is_if = ident_is(word, wlen, "if") || ident_is(word, wlen, "elif");
	int is_define = ident_is(word, wlen, "define");
	if (!is_if && !is_define)
		return i;
	/* The rest of the logical line: literals in parentheses and __has_include. */
	for (size_t k = i; k < eol && *rc == 0; k++) {
		if (s[k] == '/' && k + 1 < eol && s[k + 1] == '*') {
			k = skip_block_comment(s, n, k) - 1;
			continue;
		}
		if (s[k] == '/' && k + 1 < eol && s[k + 1] == '/')
			break;
		if (is_if && s[k] == '(') {
			literal_ref(s, eol, skip_hspace(s, eol, k + 1), refs, rc);
			continue;
		}
		if (!is_ident(s[k]) || (k > i && is_ident(s[k - 1])))
			continue;
		size_t e = k;
		while (e < eol && is_ident(s[e]))
			e++;
		if (ident_is(s + k, e - k, "__has_include") || ident_is(s + k, e - k, "__has_include_next")) {
			size_t p = skip_hspace(s, eol, e);
			if (p < eol && s[p] == '(') {
				p = skip_hspace(s, eol, p + 1);
				if (!literal_ref(s, eol, p, refs, rc))
					*rc = add_ref(refs, REF_COMPUTED, "", 0);
			}
		}
		k = e - 1;
	}
	return eol;
}

/* Appends the include references of text[n] to refs. 0 or JC_ENOMEM. */
static int lex_refs(const char *text, size_t n0, struct bytes *refs)
{
	size_t n;
	char *s = unsplice(text, n0, &n);
	if (!s)
		return JC_ENOMEM;
	int bol = 1, rc = 0;
	size_t i = 0;
	while (i < n && rc == 0) {
		char c = s[i];
		if (c == '\n') {
			bol = 1;
			i++;
		} else if (is_hspace(c)) {
			i++;
		} else if (c == '/' && i + 1 < n && s[i + 1] == '/') {
			i = line_end(s, n, i);
		} else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
			i = skip_block_comment(s, n, i); /* a comment is a space: bol unchanged */
		} else if (c == '#' && bol) {
			i = directive(s, n, i + 1, refs, &rc);
			bol = 0;
		} else if (bol && c == '%' && i + 1 < n && s[i + 1] == ':') { /* digraph of # */
			i = directive(s, n, i + 2, refs, &rc);
			bol = 0;
		} else if (bol && c == '?' && i + 2 < n && s[i + 1] == '?' && s[i + 2] == '=') { /* trigraph */
			i = directive(s, n, i + 3, refs, &rc);
			bol = 0;
		} else if (c == '"' || c == '\'') {
			i = skip_quoted(s, n, i);
			bol = 0;
		} else if (is_digit(c) || (c == '.' && i + 1 < n && is_digit(s[i + 1]))) {
			/* pp-number, with C++14 digit separators and exponent signs */
			for (i++; i < n; i++) {
				if (is_ident(s[i]) || s[i] == '.')
					continue;
				if (s[i] == '\'' && i + 1 < n && is_ident(s[i + 1]))
					continue;
				if ((s[i] == '+' || s[i] == '-') && strchr("eEpP", s[i - 1]))
					continue;
				break;
			}
			bol = 0;
		} else if (is_ident(c)) {
			size_t w = i;
			while (i < n && is_ident(s[i]))
				i++;
			size_t len = i - w;
			/* An encoding prefix or R only matters right before a quote
			 * (and is at most 3 characters): most identifiers skip this. */
			if (i < n && len <= 3 && (s[i] == '"' || s[i] == '\'')) {
				int prefix = ident_is(s + w, len, "L") || ident_is(s + w, len, "u") ||
					     ident_is(s + w, len, "U") || ident_is(s + w, len, "u8");
				int raw = ident_is(s + w, len, "R") || ident_is(s + w, len, "LR") ||
					  ident_is(s + w, len, "uR") || ident_is(s + w, len, "UR") ||
					  ident_is(s + w, len, "u8R");
				if (s[i] == '"' && raw)
					i = skip_raw(s, n, i);
				else if (prefix)
					i = skip_quoted(s, n, i);
			}
			bol = 0;
		} else {
			i++;
			bol = 0;
		}
	}
	free(s);
	return rc;
}

/* --- include options --------------------------------------------------------------- */

static int push_ptr(const char ***v, size_t *n, const char *s)
{
	const char **p = realloc(*v, (*n + 1) * sizeof(*p));
	if (!p)
		return JC_ENOMEM;
	p[(*n)++] = s;
	*v = p;
	return 0;
}

void jc__inc_path_clear(struct jc_inc_path *p)
{
	free(p->dirs);
	free(p->pre);
	memset(p, 0, sizeof(*p));
}

int jc__inc_path_parse(const struct jc_req *req, struct jc_inc_path *out, char *err,
		       size_t errlen)
{
	struct jc_inc_path p = {0};
	const struct jc_strv *o = &req->options;
	int rc = 0;
	for (size_t i = 0; i < o->n && rc == 0; i++) {
		const char *val;
		size_t used;
		int dir;
		if (!jc__inc_option(o, i, &dir, &val, &used))
			continue;
		if (!val || !*val)
			rc = jc__fail(err, errlen, JC_EINVAL, "option \"%s\" needs a %s", o->v[i],
				  dir ? "directory" : "header name");
		else if (dir && val[0] != '/')
			rc = jc__fail(err, errlen, JC_EINVAL,
				  "include directory \"%s\" is not absolute (the daemon does not share "
				  "the client's working directory)", val);
		else
			rc = push_ptr(dir ? &p.dirs : &p.pre, dir ? &p.n_dirs : &p.n_pre, val);
		i += used - 1;
	}
	if (rc == 0 && p.n_dirs != req->include_dirs.n)
		rc = jc__fail(err, errlen, JC_EINVAL,
			  "%zu -I option(s) but %zu declared include dir(s): declare each -I "
			  "directory, in order, as an include dir", p.n_dirs, req->include_dirs.n);
	for (size_t i = 0; rc == 0 && i < p.n_dirs; i++)
		if (strcmp(p.dirs[i], req->include_dirs.v[i]) != 0)
			rc = jc__fail(err, errlen, JC_EINVAL,
				  "include dir %zu is \"%s\" but -I option %zu names \"%s\"", i,
				  req->include_dirs.v[i], i, p.dirs[i]);
	if (rc == JC_ENOMEM)
		jc__fail(err, errlen, rc, "out of memory parsing include options");
	if (rc == 0 && out)
		*out = p;
	else
		jc__inc_path_clear(&p);
	return rc;
}

/* Calls fn for each in-memory text of req (source, then headers). */
static int each_text(const struct jc_req *req, int (*fn)(const char *t, size_t n, void *ctx),
		     void *ctx)
{
	int rc = req->source ? fn((const char *)req->source, req->source_size, ctx) : 0;
	for (size_t i = 0; rc == 0 && i < req->n_headers; i++)
		if (req->headers[i].data) /* NULL data is refused by validation */
			rc = fn((const char *)req->headers[i].data, req->headers[i].size, ctx);
	return rc;
}

/* 1 when name has a ".." component (a climb out of where it is looked up). */
static int climbs(const char *name)
{
	for (const char *p = name; (p = strstr(p, "..")); p += 2)
		if ((p == name || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return 1;
	return 0;
}

/* 1 when the text might hold a directive: a cheap filter before lexing, so
 * that a source without one (the common SAXPY-like kernel) costs a few
 * memchr calls per hit, not a lex. Conservative: every way of spelling a
 * directive (#, the digraph %:, the trigraph ??=) lets the lexer decide. */
static int has_pair(const char *t, size_t n, char a, char b)
{
	for (const char *p = t, *end = t + n; (p = memchr(p, a, (size_t)(end - p))); p++)
		if (p + 1 < end && p[1] == b)
			return 1;
	return 0;
}

static int may_have_directive(const char *t, size_t n)
{
	return memchr(t, '#', n) || has_pair(t, n, '%', ':') || has_pair(t, n, '?', '?');
}

/*
 * 1 when the text may make NVRTC look outside the declared directories: a
 * reference to an absolute path or one with a ".." component, or one the
 * lexer cannot read literally (a computed include, __has_include of a macro,
 * a #line that renames the file). Splices, digraphs and trigraphs are read
 * through. Conservative: out of memory says yes (the scan reports it).
 */
static int may_leave_declared_dirs(const char *t, size_t n, void *ctx)
{
	(void)ctx;
	if (!may_have_directive(t, n))
		return 0;
	struct bytes refs = {0};
	int found = lex_refs(t, n, &refs) != 0;
	for (size_t i = 0; !found && i < refs.n; i += strlen((char *)refs.p + i + 1) + 2) {
		const char *name = (const char *)refs.p + i + 1;
		found = refs.p[i] == REF_COMPUTED || name[0] == '/' || climbs(name);
	}
	free(refs.p);
	return found;
}

int jc__inc_needed(const struct jc_req *req)
{
	if (req->include_dirs.n)
		return 1;
	for (size_t i = 0; i < req->options.n; i++) {
		const char *val;
		size_t used;
		int dir;
		if (jc__inc_option(&req->options, i, &dir, &val, &used) && !dir)
			return 1;
	}
	/* NVRTC looks for quoted includes in the directory of the program name. */
	if (req->source_name && (req->source_name[0] == '/' || climbs(req->source_name)))
		return 1;
	return each_text(req, may_leave_declared_dirs, NULL);
}

/* --- the memo ------------------------------------------------------------------------ */

struct memo_ent {
	struct memo_ent *next;
	uint64_t h;
	char *path;
	int is_dir;
	struct jc_inc_stat id;
	uint8_t hash[16];
	uint8_t *refs;
	size_t refs_len;
};

struct jc_inc_memo {
	pthread_mutex_t lock;
	struct memo_ent **b;
	size_t nb, n, max;
};

int jc__inc_memo_new(size_t max_entries, struct jc_inc_memo **out)
{
	struct jc_inc_memo *m = calloc(1, sizeof(*m));
	if (!m)
		return JC_ENOMEM;
	m->max = max_entries ? max_entries : 1;
	for (m->nb = 64; m->nb < m->max; m->nb *= 2)
		;
	m->b = calloc(m->nb, sizeof(*m->b));
	if (!m->b) {
		free(m);
		return JC_ENOMEM;
	}
	pthread_mutex_init(&m->lock, NULL);
	*out = m;
	return 0;
}

static void memo_ent_free(struct memo_ent *e)
{
	free(e->path);
	free(e->refs);
	free(e);
}

static void memo_drop_all(struct jc_inc_memo *m)
{
	for (size_t i = 0; i < m->nb; i++)
		while (m->b[i]) {
			struct memo_ent *e = m->b[i];
			m->b[i] = e->next;
			memo_ent_free(e);
		}
	m->n = 0;
}

void jc__inc_memo_free(struct jc_inc_memo *m)
{
	if (!m)
		return;
	memo_drop_all(m);
	pthread_mutex_destroy(&m->lock);
	free(m->b);
	free(m);
}

static int same_id(const struct jc_inc_stat *a, const struct jc_inc_stat *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

static struct memo_ent **memo_slot(struct jc_inc_memo *m, const char *path, int is_dir, uint64_t h)
{
	struct memo_ent **p = &m->b[h & (m->nb - 1)];
	while (*p && ((*p)->h != h || (*p)->is_dir != is_dir || strcmp((*p)->path, path) != 0))
		p = &(*p)->next;
	return p;
}

/* 1 and the hash (and a copy of the refs when refs) on a hit; 0 on a miss. */
static int memo_get(struct jc_inc_memo *m, const char *path, int is_dir,
		    const struct jc_inc_stat *id, uint8_t hash[16], struct bytes *refs)
{
	uint64_t h = XXH3_64bits(path, strlen(path));
	int hit = 0;
	pthread_mutex_lock(&m->lock);
	struct memo_ent *e = *memo_slot(m, path, is_dir, h);
	if (e && same_id(&e->id, id)) {
		memcpy(hash, e->hash, 16);
		hit = !refs || bytes_add(refs, e->refs, e->refs_len) == 0;
	}
	pthread_mutex_unlock(&m->lock);
	return hit;
}

/* Remembers a settled file or directory; a failure to allocate only costs a re-read. */
static void memo_put(struct jc_inc_memo *m, const char *path, int is_dir,
		     const struct jc_inc_stat *id, const uint8_t hash[16], const struct bytes *refs)
{
	struct memo_ent *e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->h = XXH3_64bits(path, strlen(path));
	e->path = strdup(path);
	e->is_dir = is_dir;
	e->id = *id;
	memcpy(e->hash, hash, 16);
	if (refs && refs->n && (e->refs = malloc(refs->n))) {
		memcpy(e->refs, refs->p, refs->n);
		e->refs_len = refs->n;
	}
	if (!e->path || (refs && refs->n && !e->refs)) {
		memo_ent_free(e);
		return;
	}
	pthread_mutex_lock(&m->lock);
	struct memo_ent **p = memo_slot(m, path, is_dir, e->h);
	if (*p) {
		struct memo_ent *old = *p;
		e->next = old->next;
		memo_ent_free(old);
		m->n--;
	} else if (m->n >= m->max) {
		memo_drop_all(m);
		p = memo_slot(m, path, is_dir, e->h);
	}
	*p = e;
	m->n++;
	pthread_mutex_unlock(&m->lock);
}

/* --- files and directories ------------------------------------------------------------ */

static int64_t ts_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void id_of(const struct stat *st, struct jc_inc_stat *id)
{
	id->dev = (uint64_t)st->st_dev;
	id->ino = (uint64_t)st->st_ino;
	id->size = (uint64_t)st->st_size;
	id->mtime_ns = ts_ns(st->st_mtim);
	id->ctime_ns = ts_ns(st->st_ctim);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts_ns(ts);
}

/* A file (or directory) changed so recently that its stat identity may not
 * tell the next change apart (see includes.h). */
static int unsettled(const struct jc_inc_stat *id, int64_t now)
{
	int coarse = id->mtime_ns % 1000000000 == 0 && id->ctime_ns % 1000000000 == 0;
	return id->ctime_ns >= now - (coarse ? SETTLE_COARSE_NS : SETTLE_NS);
}

static void mark_unsettled(struct jc_inc_set *set, const char *path)
{
	if (!set->unsettled)
		snprintf(set->unsettled_path, sizeof(set->unsettled_path), "%s", path);
	set->unsettled = 1;
}

/* Reads the whole file; its identity before and after in a, b. */
static int read_file(const char *path, uint64_t max, struct bytes *out, struct jc_inc_stat *a,
		     struct jc_inc_stat *b, char *err, size_t errlen)
{
	/* O_NONBLOCK: a FIFO swapped in since the stat() must not hold us. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	int stat_ok = fd >= 0 && fstat(fd, &st) == 0;
	if (!stat_ok || !S_ISREG(st.st_mode)) {
		int rc = stat_ok ? jc__fail(err, errlen, JC_EIO, "include scan: %s is not a regular file", path)
				 : jc__fail(err, errlen, JC_EIO, "include scan: open %s: %s", path,
					    strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	id_of(&st, a);
	int rc = 0;
	if ((uint64_t)st.st_size > max)
		rc = jc__fail(err, errlen, JC_ETOOBIG, "include scan: %s has %lld bytes, over %llu", path,
			  (long long)st.st_size, (unsigned long long)max);
	uint8_t buf[65536];
	while (rc == 0) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = jc__fail(err, errlen, JC_EIO, "include scan: read %s: %s", path, strerror(errno));
		else if (n == 0)
			break;
		else if (out->n + (size_t)n > max)
			rc = jc__fail(err, errlen, JC_ETOOBIG, "include scan: %s grew over %llu bytes", path,
				  (unsigned long long)max);
		else if (bytes_add(out, buf, (size_t)n) != 0)
			rc = jc__fail(err, errlen, JC_ENOMEM, "include scan: out of memory reading %s", path);
	}
	if (rc == 0 && fstat(fd, &st) != 0)
		rc = jc__fail(err, errlen, JC_EIO, "include scan: fstat %s: %s", path, strerror(errno));
	close(fd);
	if (rc == 0)
		id_of(&st, b);
	return rc;
}

static void hash128(const void *p, size_t n, uint8_t out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
	memcpy(out, c.digest, 16);
}

/*
 * Hash (and refs, when refs is not NULL) of the regular file at path whose
 * stat() gave id: from the memo, else read (and memoised when settled).
 * *id becomes the identity the content belongs to.
 */
static int file_info(const struct jc_inc_ctx *ctx, struct jc_inc_set *set, const char *path,
		     struct jc_inc_stat *id, uint8_t hash[16], struct bytes *refs, int64_t now,
		     char *err, size_t errlen)
{
	if (memo_get(ctx->memo, path, 0, id, hash, refs)) {
		if (unsettled(id, now))
			mark_unsettled(set, path); /* memoised earlier, touched since: be safe */
		return 0;
	}
	struct bytes data = {0}, own = {0};
	struct jc_inc_stat a, b;
	struct bytes *r = refs ? refs : &own;
	size_t r0 = r->n;
	int rc = read_file(path, ctx->max_file_size, &data, &a, &b, err, errlen);
	set->n_read++;
	if (rc == 0) {
		hash128(data.p, data.n, hash);
		rc = lex_refs((const char *)data.p, data.n, r);
		if (rc)
			jc__fail(err, errlen, rc, "include scan: out of memory lexing %s", path);
	}
	if (rc == 0) {
		*id = b;
		if (!same_id(&a, &b) || unsettled(&b, now)) {
			mark_unsettled(set, path);
		} else {
			struct bytes mine = {r->p + r0, r->n - r0, 0};
			memo_put(ctx->memo, path, 0, &b, hash, &mine);
		}
	}
	free(data.p);
	free(own.p);
	return rc;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of a directory (without . and ..), malloc'd. */
static int list_dir(const char *path, char ***names, size_t *n, char *err, size_t errlen)
{
	DIR *d = opendir(path);
	*names = NULL;
	*n = 0;
	if (!d)
		return jc__fail(err, errlen, JC_EIO, "include scan: opendir %s: %s", path, strerror(errno));
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char **v = realloc(*names, (*n + 1) * sizeof(*v));
		char *s = strdup(de->d_name);
		if (v)
			*names = v;
		if (!v || !s) {
			free(s);
			rc = jc__fail(err, errlen, JC_ENOMEM, "include scan: out of memory listing %s", path);
			break;
		}
		v[(*n)++] = s;
	}
	closedir(d);
	if (rc == 0 && *n > 1) /* qsort's base must not be NULL, even for no entries */
		qsort(*names, *n, sizeof(**names), cmp_name);
	return rc;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* The hash of a DIR entry that is not a directory (missing or another type). */
static const uint8_t not_a_dir[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
				      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static int names_hash(char *const *names, size_t n, uint8_t out[16])
{
	struct bytes b = {0};
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = bytes_add(&b, names[i], strlen(names[i]) + 1);
	if (rc == 0)
		hash128(b.p, b.n, out);
	free(b.p);
	return rc;
}

/* --- sets ----------------------------------------------------------------------------- */

void jc__inc_set_clear(struct jc_inc_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++)
		free(set->v[i].path);
	free(set->v);
	memset(set, 0, sizeof(*set));
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
	if (set->n)
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
	struct bytes b = {0};
	uint8_t format = 1;
	int rc = bytes_add(&b, &format, 1);
	for (size_t i = 0; rc == 0 && i < set->n; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		uint8_t head[9] = {e->kind};
		uint64_t len = strlen(e->path);
		for (int j = 0; j < 8; j++)
			head[1 + j] = (uint8_t)(len >> (8 * j));
		rc = bytes_add(&b, head, sizeof(head));
		rc = rc ?: bytes_add(&b, e->path, len);
		if (rc == 0 && (e->kind == JC_INC_FILE || e->kind == JC_INC_DIR))
			rc = bytes_add(&b, e->hash, 16);
	}
	if (rc == 0)
		hash128(b.p, b.n, set->digest);
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
	char **lex;  /* lexical form of each directory */
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

/* Appends u64le v to b. */
static int bytes_u64(struct bytes *b, uint64_t v)
{
	uint8_t le[8];
	for (int j = 0; j < 8; j++)
		le[j] = (uint8_t)(v >> (8 * j));
	return bytes_add(b, le, sizeof(le));
}

/* Appends u64le length and the bytes of s. */
static int bytes_str(struct bytes *b, const char *s)
{
	return bytes_u64(b, strlen(s)) ?: bytes_add(b, s, strlen(s));
}

/* Appends the relative form of path (jc__inc_tops_rel) or, for a TOOLKIT
 * entry (kind), its path: 0; 1 when it has none (nothing added); JC_ENOMEM. */
static int bytes_rel(struct bytes *b, const struct jc_inc_tops *tops, const char *path, int kind)
{
	char r[PATH_MAX];
	size_t t = SIZE_MAX;
	if (kind == JC_INC_TOOLKIT)
		snprintf(r, sizeof(r), "%s", path);
	else if (!jc__inc_tops_rel(tops, path, &t, r, sizeof(r)))
		return 1;
	return bytes_u64(b, t) ?: bytes_str(b, r);
}

int jc__inc_key_digest(const struct jc_inc_set *set, const struct jc_strv *dirs, uint8_t out[16])
{
	struct jc_inc_tops *tops = NULL;
	int rc = jc__inc_tops_new(dirs, &tops);
	if (rc == JC_ENOMEM)
		return rc;
	struct bytes b = {0};
	uint8_t format = 2; /* relative: (top, path below it) */
	rc = tops ? bytes_add(&b, &format, 1) ?: bytes_u64(&b, dirs->n) : 1;
	for (size_t i = 0; rc == 0 && i < dirs->n; i++)
		rc = bytes_rel(&b, tops, dirs->v[i], 0);
	for (size_t i = 0; rc == 0 && i < set->n; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		rc = bytes_add(&b, &e->kind, 1) ?: bytes_rel(&b, tops, e->path, e->kind);
		if (rc == 0 && (e->kind == JC_INC_FILE || e->kind == JC_INC_DIR))
			rc = bytes_add(&b, e->hash, 16);
	}
	jc__inc_tops_free(tops);
	int rel = rc == 0;
	if (rc == 1) { /* absolute: the directories' strings, the set's own digest */
		b.n = 0;
		format = 3;
		rc = bytes_add(&b, &format, 1) ?: bytes_u64(&b, dirs->n);
		for (size_t i = 0; rc == 0 && i < dirs->n; i++)
			rc = bytes_str(&b, dirs->v[i]);
	}
	if (rc == 0 && !rel)
		rc = bytes_add(&b, set->digest, 16);
	if (rc == 0)
		hash128(b.p, b.n, out);
	free(b.p);
	return rc;
}

static int cmp_entry_path(const void *a, const void *b)
{
	return strcmp(((const struct jc_inc_entry *)a)->path, ((const struct jc_inc_entry *)b)->path);
}

/* (includes.h) */
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
		if (b->type == JC_TREE_FILE) {
			XXH128_canonical_t c;
			XXH128_canonicalFromHash(&c, XXH3_128bits(b->data, b->size));
			memcpy(hash, c.digest, 16);
		} else if (b->type == JC_TREE_HASH || b->type == JC_TREE_DIR) {
			memcpy(hash, b->data, 16);
		}
		uint8_t kind = b->type == JC_TREE_ABSENT ? JC_INC_ABSENT
			       : b->type == JC_TREE_DIR ? JC_INC_DIR : JC_INC_FILE;
		rc = jc__inc_set_add(out, path, strlen(path), kind, kind == JC_INC_ABSENT ? NULL : hash);
		free(path);
	}
	if (rc == 0 && out->n)
		qsort(out->v, out->n, sizeof(*out->v), cmp_entry_path);
	for (size_t i = 1; rc == 0 && i < out->n; i++)
		if (cmp_entry_path(&out->v[i - 1], &out->v[i]) == 0)
			rc = jc__fail(err, errlen, JC_EINVAL, "tree: %s sent twice", out->v[i].path);
	rc = rc ?: jc__inc_set_finish(out);
	if (rc == JC_ENOMEM)
		snprintf(err, errlen, "out of memory");
	return rc;
}

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
	struct bytes refs; /* owned */
	char *dir;         /* owned: directory of the file the refs come from */
};

struct scan {
	const struct jc_inc_ctx *ctx;
	struct jc_inc_path ip;
	const char **dirs;         /* -I directories not covered by the toolkit */
	size_t n_dirs;
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

static int in_toolkit(const char *root, const char *dir)
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

/* A candidate path: recorded as FILE (and its refs queued once) or ABSENT. */
static int visit(struct scan *s, const char *path)
{
	char key[PATH_MAX + 64];
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
	id_of(&st, &id);
	uint8_t hash[16];
	struct bytes refs = {0};
	rc = file_info(s->ctx, s->set, path, &id, hash, &refs, s->now, s->err, s->errlen);
	rc = rc ?: add(s, path, JC_INC_FILE, hash, &id);
	if (rc == 0 && refs.n) {
		char dir[PATH_MAX], folded[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s", path);
		char *slash = strrchr(dir, '/'); /* paths are absolute: there is one */
		slash[slash == dir] = '\0';     /* "/a/x.h" -> "/a", "/x.h" -> "/" */
		jc__path_lexical(dir, folded, sizeof(folded), 1);
		snprintf(key, sizeof(key), "%llu:%llu:%s", (unsigned long long)id.dev,
			 (unsigned long long)id.ino, folded);
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
			s->n_work++;
			return 0;
		}
		rc = rc == 0 ? 0 : oom(s);
	}
	free(refs.p);
	return rc;
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
		return add(s, dir, JC_INC_DIR, not_a_dir, NULL);
	struct jc_inc_stat id;
	id_of(&st, &id);
	if (unsettled(&id, s->now))
		mark_unsettled(s->set, dir);
	snprintf(key, sizeof(key), "%llu:%llu", (unsigned long long)id.dev, (unsigned long long)id.ino);
	char **names;
	size_t n;
	uint8_t hash[16];
	rc = list_dir(dir, &names, &n, s->err, s->errlen);
	if (rc)
		return rc;
	rc = names_hash(names, n, hash) ? oom(s) : add(s, dir, JC_INC_DIR, hash, &id);
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
	free_names(names, n);
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

/* Resolves every reference of refs; dir is the including file's directory or NULL. */
static int resolve(struct scan *s, const struct bytes *refs, const char *dir)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < refs->n;) {
		char form = (char)refs->p[i];
		const char *name = (const char *)refs->p + i + 1;
		i += strlen(name) + 2;
		if (form == REF_COMPUTED) {
			rc = fallback(s);
			continue;
		}
		if (name[0] == '/') {
			rc = visit(s, name);
			continue;
		}
		if (form == REF_QUOTED && dir)
			rc = join_visit(s, dir, name);
		for (size_t d = 0; rc == 0 && d < s->n_dirs; d++)
			rc = join_visit(s, s->dirs[d], name);
	}
	return rc;
}

static int lex_text(const char *t, size_t n, void *ctx)
{
	struct bytes *refs = ctx;
	return lex_refs(t, n, refs);
}

int jc__inc_scan(const struct jc_req *req, const struct jc_inc_ctx *ctx, struct jc_inc_set *out,
		 char *err, size_t errlen)
{
	struct scan s = {.ctx = ctx, .set = out, .now = now_ns(), .err = err, .errlen = errlen};
	struct bytes roots = {0};
	memset(out, 0, sizeof(*out));
	out->checked_ns = s.now;
	int rc = jc__inc_path_parse(req, &s.ip, err, errlen);
	if (rc)
		return rc;
	s.dirs = calloc(s.ip.n_dirs + 1, sizeof(*s.dirs));
	if (!s.dirs)
		rc = oom(&s);
	for (size_t i = 0; rc == 0 && i < s.ip.n_dirs; i++) {
		if (in_toolkit(ctx->toolkit_root, s.ip.dirs[i]))
			rc = add(&s, s.ip.dirs[i], JC_INC_TOOLKIT, NULL, NULL);
		else
			s.dirs[s.n_dirs++] = s.ip.dirs[i];
	}
	if (rc == 0 && each_text(req, lex_text, &roots) != 0)
		rc = oom(&s);
	for (size_t i = 0; rc == 0 && i < s.ip.n_pre; i++)
		if (add_ref(&roots, REF_QUOTED, s.ip.pre[i], strlen(s.ip.pre[i])) != 0)
			rc = oom(&s);
	rc = rc ?: resolve(&s, &roots, NULL);
	while (rc == 0 && s.n_work) {
		struct work w = s.work[--s.n_work];
		rc = resolve(&s, &w.refs, w.dir);
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

/* The listing hash of a directory whose stat gave id: memo, else readdir. */
static int dir_hash(const struct jc_inc_ctx *ctx, const char *path, const struct jc_inc_stat *id,
		    int64_t now, uint8_t hash[16])
{
	if (memo_get(ctx->memo, path, 1, id, hash, NULL))
		return 0;
	char **names;
	size_t n;
	int rc = list_dir(path, &names, &n, NULL, 0);
	if (rc)
		return rc;
	rc = names_hash(names, n, hash);
	free_names(names, n);
	if (rc)
		return rc;
	if (!unsettled(id, now))
		memo_put(ctx->memo, path, 1, id, hash, NULL);
	return 0;
}

int jc__inc_check(struct jc_inc_set *set, const struct jc_inc_ctx *ctx)
{
	int64_t now = now_ns();
	set->unsettled = 0;
	set->checked_ns = now;
	for (size_t i = 0; i < set->n; i++) {
		struct jc_inc_entry *e = &set->v[i];
		struct stat st;
		uint8_t hash[16];
		int exists;
		if (e->kind == JC_INC_TOOLKIT) {
			if (!in_toolkit(ctx->toolkit_root, e->path))
				return 0;
			continue;
		}
		set->n_stat++;
		exists = stat(e->path, &st) == 0;
		if (e->kind == JC_INC_ABSENT) {
			if (exists && S_ISREG(st.st_mode))
				return 0;
			continue;
		}
		if (e->kind == JC_INC_DIR) {
			if (!exists || !S_ISDIR(st.st_mode)) {
				if (memcmp(e->hash, not_a_dir, 16) != 0)
					return 0;
				continue;
			}
			id_of(&st, &e->st);
			if (dir_hash(ctx, e->path, &e->st, now, hash) != 0 ||
			    memcmp(hash, e->hash, 16) != 0)
				return 0;
			if (unsettled(&e->st, now))
				mark_unsettled(set, e->path);
			continue;
		}
		if (!exists || !S_ISREG(st.st_mode))
			return 0;
		id_of(&st, &e->st);
		int rc = file_info(ctx, set, e->path, &e->st, hash, NULL, now, NULL, 0);
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
		int exists = stat(e->path, &st) == 0, same;
		if (e->kind == JC_INC_ABSENT) {
			same = !exists || !S_ISREG(st.st_mode);
		} else if (e->kind == JC_INC_DIR && memcmp(e->hash, not_a_dir, 16) == 0) {
			same = !exists || !S_ISDIR(st.st_mode);
		} else {
			same = exists && (e->kind == JC_INC_DIR ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
			if (same) {
				id_of(&st, &id);
				same = same_id(&id, &e->st);
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
		if ((e->kind != JC_INC_FILE && e->kind != JC_INC_DIR) || !unsettled(&e->st, set->checked_ns))
			continue;
		struct jc_inc_stat a, b;
		uint8_t hash[16];
		int same;
		if (e->kind == JC_INC_FILE) {
			struct bytes data = {0};
			int rc = read_file(e->path, ctx->max_file_size, &data, &a, &b, NULL, 0);
			if (rc == 0)
				hash128(data.p, data.n, hash);
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
				id_of(&st, &a);
			if (same && (same = list_dir(e->path, &names, &n, NULL, 0) == 0)) {
				int rc = names_hash(names, n, hash);
				free_names(names, n);
				if (rc)
					return rc;
				same = stat(e->path, &st) == 0;
				if (same)
					id_of(&st, &b);
			}
		}
		if (!same || !same_id(&a, &e->st) || !same_id(&b, &e->st) || memcmp(hash, e->hash, 16)) {
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
			return memcmp(e->hash, not_a_dir, 16) != 0;
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
			covered = e && memcmp(e->hash, not_a_dir, 16) != 0;
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
	int64_t now = now_ns();
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
				id_of(&st, &id);
				same = same_dep_id(d, &id);
			}
			if (same) {
				int r = file_info(ctx, out, p, &id, hash, NULL, now, NULL, 0);
				if (r == JC_ENOMEM)
					rc = r;
				same = r == 0 && same_dep_id(d, &id);
			}
			if (same && rc == 0)
				rc = jc__inc_set_add(out, p, strlen(p), JC_INC_FILE, hash);
			if (same && rc == 0)
				out->v[out->n - 1].st = id;
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
			if (same && (same = list_dir(p, &names, &n, NULL, 0) == 0)) {
				rc = names_hash(names, n, hash);
				free_names(names, n);
				id_of(&st, &id);
				rc = rc ?: jc__inc_set_add(out, p, strlen(p), JC_INC_DIR, hash);
				if (rc == 0)
					out->v[out->n - 1].st = id;
				if (rc == 0 && unsettled(&id, now))
					mark_unsettled(out, p);
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
