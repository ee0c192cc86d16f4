/* SPDX-License-Identifier: MIT */
/* The include scan's lexer: see inc_lex.h for the contract. */
#include "common/inc_lex.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jitcache/jitcache.h"

int jc__inc_ref_add(struct jc_inc_buf *refs, enum jc_inc_ref form, const char *name, size_t len)
{
	uint8_t f = (uint8_t)form, nul = 0;
	int rc = jc__inc_buf_add(refs, &f, 1);
	rc = rc ?: jc__inc_buf_add(refs, name, len);
	return rc ?: jc__inc_buf_add(refs, &nul, 1);
}

const char *jc__inc_ref_next(const struct jc_inc_buf *refs, size_t *pos, char *form)
{
	if (*pos >= refs->n)
		return NULL;
	const char *name = (const char *)refs->p + *pos + 1;
	*form = (char)refs->p[*pos];
	*pos += strlen(name) + 2;
	return name;
}

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

/* Removes backslash-newline splices (translation phase 2), with trigraphs
 * the backslash also spelt as the trigraph ??/ (phase 1; *trigraph set when
 * one was), into a new buffer. */
static char *unsplice(const char *s, size_t n, int trigraphs, size_t *out_n, int *trigraph)
{
	char *o = malloc(n ? n : 1);
	size_t j = 0;
	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (trigraphs && s[i] == '?' && i + 3 < n && s[i + 1] == '?' && s[i + 2] == '/' &&
		    (s[i + 3] == '\n' || (s[i + 3] == '\r' && i + 4 < n && s[i + 4] == '\n'))) {
			i += s[i + 3] == '\n' ? 3 : 4;
			*trigraph = 1;
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

/* One pass of the lexer: include references (jc__inc_lex) or macro
 * records (jc__inc_lex_macros) into out, in one reading of the language. */
enum lex_mode { LEX_REFS, LEX_HEADER, LEX_SOURCE };
struct lexer {
	struct jc_inc_buf *out;
	enum lex_mode mode;
	int trigraphs; /* ??/ splices and ??= directives (C++03, perhaps C++11/14) */
	int modern;    /* raw strings (C++11) and digit separators (C++14) */
	int rc;
	int saw; /* the text held one of those, read as such: another reading differs */
};

/* Index after the pp-number at i (a digit, or '.' and a digit), with
 * exponent signs and, in lx's reading, C++14 digit separators. */
static size_t skip_number(const char *s, size_t n, size_t i, struct lexer *lx)
{
	for (i++; i < n; i++) {
		if (is_ident(s[i]) || s[i] == '.')
			continue;
		if (s[i] == '\'' && i + 1 < n && is_ident(s[i + 1]) && lx->modern && (lx->saw = 1))
			continue;
		if ((s[i] == '+' || s[i] == '-') && strchr("eEpP", s[i - 1]))
			continue;
		break;
	}
	return i;
}

static int ident_is(const char *s, size_t len, const char *word)
{
	return strlen(word) == len && memcmp(s, word, len) == 0;
}

/* Index after a literal whose prefix is the identifier s[w..e) (an encoding
 * prefix, or R: a raw string in lx's reading) and whose quote is at e; e
 * when s[w..e) is no such prefix or no quote follows. */
static size_t skip_prefixed(const char *s, size_t n, size_t w, size_t e, struct lexer *lx)
{
	size_t len = e - w;
	if (e >= n || len > 3 || (s[e] != '"' && s[e] != '\''))
		return e;
	if (s[e] == '"' &&
	    (ident_is(s + w, len, "R") || ident_is(s + w, len, "LR") ||
	     ident_is(s + w, len, "uR") || ident_is(s + w, len, "UR") ||
	     ident_is(s + w, len, "u8R")) &&
	    lx->modern && (lx->saw = 1))
		return skip_raw(s, n, e);
	if (ident_is(s + w, len, "L") || ident_is(s + w, len, "u") || ident_is(s + w, len, "U") ||
	    ident_is(s + w, len, "u8"))
		return skip_quoted(s, n, e);
	return e;
}

/* 1 when s[i] starts a universal character name (\u, \U): a name spelt
 * with one is none this lexer reads, so the name check binds (inc_names.c). */
static int ucn_at(const char *s, size_t n, size_t i)
{
	return s[i] == '\\' && i + 1 < n && (s[i + 1] == 'u' || s[i + 1] == 'U');
}

/* Records a universal character name for the name check: its gate's mark
 * (include references) or its use (macro records). */
static void ucn_mark(struct lexer *lx)
{
	lx->rc = jc__inc_ref_add(lx->out, lx->mode == LEX_REFS ? JC_INC_REF_FILE : JC_INC_REF_USE,
				 "\\u", 2);
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

/* A literal "name" or <name> at i (ending before eol): records it and
 * returns the index after it; 0 when there is none. */
static size_t literal_ref(const char *s, size_t eol, size_t i, struct jc_inc_buf *refs, int *rc)
{
	if (i >= eol || (s[i] != '"' && s[i] != '<'))
		return 0;
	char close = s[i] == '"' ? '"' : '>';
	const char *end = memchr(s + i + 1, close, eol - i - 1);
	if (!end)
		return 0;
	size_t len = (size_t)(end - (s + i + 1));
	if (len)
		*rc = jc__inc_ref_add(refs, close == '"' ? JC_INC_REF_QUOTED : JC_INC_REF_ANGLE,
				      s + i + 1, len);
	return (size_t)(end - s) + 1;
}

int jc__inc_file_macro_name(const char *s, size_t len)
{
	static const struct {
		const char *name;
		int pieces; /* its pieces count (jc__inc_piece) */
	} names[] = {{"__FILE__", 1},
		     {"__FILE_NAME__", 1},
		     {"__BASE_FILE__", 1},
		     {"__builtin_FILE", 1},
		     {"__builtin_source_location", 1},
		     {"source_location", 0}};
	int r = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		const char *m = names[i].name;
		size_t n = strlen(m);
		if (len == n && memcmp(s, m, n) == 0)
			return JC_INC_FILE_NAME;
		if (names[i].pieces &&
		    ((jc__inc_piece(len, n, 0) && memcmp(s, m, len) == 0) ||
		     (jc__inc_piece(len, n, 1) && memcmp(s, m + n - len, len) == 0)))
			r = JC_INC_FILE_PIECE;
	}
	return r;
}

/* Records the identifier s[len] when it is a time macro, names the file or
 * may be pasted into a name of the file (jc__inc_file_macro_name: each
 * starts with '_' or 's', or ends with '_', 'E' or 'n'). */
static int time_macro(const char *s, size_t len, struct jc_inc_buf *refs)
{
	if (len < 4 || len > 25)
		return 0;
	if (s[0] == '_' && (ident_is(s, len, "__DATE__") || ident_is(s, len, "__TIME__") ||
			    ident_is(s, len, "__TIMESTAMP__")))
		return jc__inc_ref_add(refs, JC_INC_REF_TIME, s, len);
	if ((s[0] == '_' || s[0] == 's' || s[len - 1] == '_' || s[len - 1] == 'E' ||
	     s[len - 1] == 'n') &&
	    jc__inc_file_macro_name(s, len))
		return jc__inc_ref_add(refs, JC_INC_REF_FILE, s, len);
	return 0;
}

/*
 * A directive whose '#' is at i - 1. Returns the index from which ordinary
 * lexing continues. See inc_lex.h for what is recorded.
 */
static size_t directive(const char *s, size_t n, size_t i, struct lexer *lx)
{
	struct jc_inc_buf *refs = lx->out;
	int *rc = &lx->rc;
	i = skip_hspace(s, n, i);
	size_t w = i;
	while (i < n && is_ident(s[i]))
		i++;
	const char *word = s + w;
	size_t wlen = i - w;
	size_t eol = line_end(s, n, i);
	if (ident_is(word, wlen, "line") || (wlen && is_digit(word[0]))) {
		/* #line "name" (and GNU's # 1 "name") renames the file, which may
		 * change where quoted includes are looked for: unknowable here.
		 * Its operands are lexed on (a macro may name the file). */
		if (memchr(s + i, '"', eol - i))
			*rc = jc__inc_ref_add(refs, JC_INC_REF_COMPUTED, "", 0);
		return i;
	}
	if (ident_is(word, wlen, "include") || ident_is(word, wlen, "include_next") ||
	    ident_is(word, wlen, "import")) {
		i = skip_hspace(s, n, i);
		if (i >= eol)
			return i;
		if (!literal_ref(s, eol, i, refs, rc))
			*rc = jc__inc_ref_add(refs, JC_INC_REF_COMPUTED, "", 0);
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
			if (k >= eol) /* it carries the directive on to the line it ends on */
				eol = line_end(s, n, k < n ? k : n);
			continue;
		}
		if (s[k] == '/' && k + 1 < eol && s[k + 1] == '/')
			break;
		if (is_if && s[k] == '(') {
			size_t after = literal_ref(s, eol, skip_hspace(s, eol, k + 1), refs, rc);
			if (after) /* a name, in which no comment starts */
				k = after - 1;
			continue;
		}
		if (s[k] == '"' || s[k] == '\'') { /* no comment starts in a literal */
			k = skip_quoted(s, eol, k) - 1;
			continue;
		}
		if (is_digit(s[k]) || (s[k] == '.' && k + 1 < eol && is_digit(s[k + 1]))) {
			k = skip_number(s, eol, k, lx) - 1;
			continue;
		}
		if (ucn_at(s, eol, k))
			ucn_mark(lx);
		if (!is_ident(s[k]))
			continue;
		size_t e = k;
		while (e < eol && is_ident(s[e]))
			e++;
		*rc = time_macro(s + k, e - k, refs);
		if (ident_is(s + k, e - k, "__has_include") ||
		    ident_is(s + k, e - k, "__has_include_next")) {
			size_t p = skip_hspace(s, eol, e);
			if (p < eol && s[p] == '(') {
				p = skip_hspace(s, eol, p + 1);
				if (!literal_ref(s, eol, p, refs, rc))
					*rc = jc__inc_ref_add(refs, JC_INC_REF_COMPUTED, "", 0);
			}
		}
		k = skip_prefixed(s, eol, k, e, lx) - 1;
	}
	return eol;
}

/* 1 when s[k] starts a ## (or its digraph %:%:). */
static int paste_at(const char *s, size_t n, size_t k)
{
	return (s[k] == '#' && k + 1 < n && s[k + 1] == '#') ||
	       (s[k] == '%' && k + 3 < n && s[k + 1] == ':' && s[k + 2] == '%' && s[k + 3] == ':');
}

/*
 * A directive whose '#' is at i - 1, for jc__inc_lex_macros (inc_lex.h): in
 * a header, a #define's name, its replacement list's identifiers and pastes,
 * and a #line's operands as code (they are expanded where they stand);
 * other directives are read past, unrecorded. In the source, every
 * identifier and paste of any directive. A block comment may carry the
 * directive past a newline; a <name> after #include or '(' is no comment.
 * Returns the index of its end.
 */
static size_t macro_directive(const char *s, size_t n, size_t i, struct lexer *lx)
{
	i = skip_hspace(s, n, i);
	size_t w = i;
	while (i < n && is_ident(s[i]))
		i++;
	enum jc_inc_ref kind = JC_INC_REF_USE;
	int record = lx->mode == LEX_SOURCE || ident_is(s + w, i - w, "line");
	int header_name = ident_is(s + w, i - w, "include") ||
			  ident_is(s + w, i - w, "include_next") ||
			  ident_is(s + w, i - w, "import");
	if (lx->mode == LEX_HEADER && ident_is(s + w, i - w, "define")) {
		w = i = skip_hspace(s, n, i);
		while (i < n && is_ident(s[i]))
			i++;
		if (i > w) {
			lx->rc = jc__inc_ref_add(lx->out, JC_INC_REF_DEFINE, s + w, i - w);
			kind = JC_INC_REF_BODY;
			record = 1;
		}
	}
	size_t k = i;
	char prev = 0;
	int has_include = 0; /* the last name was __has_include(_next) */
	while (k < n && s[k] != '\n' && lx->rc == 0) {
		char c = s[k];
		const char *gt;
		if (c == '/' && k + 1 < n && s[k + 1] == '*') {
			k = skip_block_comment(s, n, k);
			continue;
		}
		if (c == '/' && k + 1 < n && s[k + 1] == '/') {
			k = line_end(s, n, k);
		} else if (c == '"' || c == '\'') {
			k = skip_quoted(s, n, k);
		} else if (c == '<' && (header_name || (prev == '(' && has_include)) &&
			   (gt = memchr(s + k, '>', line_end(s, n, k) - k))) {
			k = (size_t)(gt - s) + 1;
		} else if (paste_at(s, n, k)) {
			if (record)
				lx->rc = jc__inc_ref_add(lx->out, JC_INC_REF_PASTE, "", 0);
			k += c == '#' ? 2 : 4;
		} else if (ucn_at(s, n, k)) {
			ucn_mark(lx);
			k += 2;
		} else if (is_digit(c) || (c == '.' && k + 1 < n && is_digit(s[k + 1]))) {
			k = skip_number(s, n, k, lx);
		} else if (is_ident(c)) {
			size_t e = k;
			while (e < n && is_ident(s[e]))
				e++;
			if (record)
				lx->rc = jc__inc_ref_add(lx->out, kind, s + k, e - k);
			/* a <name> in __has_include( of #if, not in a #define */
			has_include = kind == JC_INC_REF_USE &&
				      (ident_is(s + k, e - k, "__has_include") ||
				       ident_is(s + k, e - k, "__has_include_next"));
			k = skip_prefixed(s, n, k, e, lx);
		} else {
			k++;
		}
		if (!is_hspace(c))
			prev = c;
	}
	return k;
}

static size_t any_directive(const char *s, size_t n, size_t i, struct lexer *lx)
{
	return lx->mode == LEX_REFS ? directive(s, n, i, lx) : macro_directive(s, n, i, lx);
}

static int lex(const char *text, size_t n0, struct lexer *lx)
{
	size_t n;
	int trigraph = 0;
	char *s = unsplice(text, n0, lx->trigraphs, &n, &trigraph);
	if (!s)
		return JC_ENOMEM;
	lx->saw = trigraph;
	int bol = 1;
	size_t i = 0;
	while (i < n && lx->rc == 0) {
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
			i = any_directive(s, n, i + 1, lx);
			bol = 0;
		} else if (bol && c == '%' && i + 1 < n && s[i + 1] == ':') { /* digraph of # */
			i = any_directive(s, n, i + 2, lx);
			bol = 0;
		} else if (bol && lx->trigraphs && c == '?' && i + 2 < n && s[i + 1] == '?' &&
			   s[i + 2] == '=') { /* trigraph */
			lx->saw = 1;
			i = any_directive(s, n, i + 3, lx);
			bol = 0;
		} else if (c == '"' || c == '\'') {
			i = skip_quoted(s, n, i);
			bol = 0;
		} else if (is_digit(c) || (c == '.' && i + 1 < n && is_digit(s[i + 1]))) {
			i = skip_number(s, n, i, lx);
			bol = 0;
		} else if (is_ident(c)) {
			size_t w = i;
			while (i < n && is_ident(s[i]))
				i++;
			size_t len = i - w;
			lx->rc = lx->mode == LEX_REFS
				     ? time_macro(s + w, len, lx->out)
				     : jc__inc_ref_add(lx->out, JC_INC_REF_USE, s + w, len);
			i = skip_prefixed(s, n, w, i, lx);
			bol = 0;
		} else {
			if (ucn_at(s, n, i))
				ucn_mark(lx);
			else if (lx->mode == LEX_SOURCE && paste_at(s, n, i)) /* an option's -D */
				lx->rc = jc__inc_ref_add(lx->out, JC_INC_REF_PASTE, "", 0);
			i++;
			bol = 0;
		}
	}
	free(s);
	/* what another reading sees is for the name check, which reads them all
	 * (jc__inc_lex_macros): it is told to look */
	if (lx->saw && lx->mode == LEX_REFS && lx->rc == 0)
		lx->rc = jc__inc_ref_add(lx->out, JC_INC_REF_FILE, "(mode)", 6);
	return lx->rc;
}

int jc__inc_lex(const char *text, size_t n, struct jc_inc_buf *refs)
{
	struct lexer lx = {refs, LEX_REFS, 1, 1, 0, 0};
	return lex(text, n, &lx);
}

int jc__inc_lex_macros(const char *text, size_t n, int source, struct jc_inc_buf *out)
{
	enum lex_mode mode = source ? LEX_SOURCE : LEX_HEADER;
	struct lexer both = {out, mode, 1, 1, 0, 0};
	struct lexer cxx17 = {out, mode, 0, 1, 0, 0}; /* NVRTC's default: no trigraphs */
	struct lexer cxx03 = {out, mode, 1, 0, 0, 0}; /* no raw strings, no digit separators */
	int rc = lex(text, n, &both);
	if (rc == 0 && both.saw)
		rc = lex(text, n, &cxx17) ?: lex(text, n, &cxx03);
	return rc;
}

static int has_pair(const char *t, size_t n, char a, char b)
{
	for (const char *p = t, *end = t + n; (p = memchr(p, a, (size_t)(end - p))); p++)
		if (p + 1 < end && p[1] == b)
			return 1;
	return 0;
}

int jc__inc_may_have_directive(const char *t, size_t n)
{
	return memchr(t, '#', n) || has_pair(t, n, '%', ':') || has_pair(t, n, '?', '?');
}

/* 1 when refs (records of jc__inc_lex) hold a file name macro. */
static int uses_file_macro(const struct jc_inc_buf *refs)
{
	size_t pos = 0;
	const char *name;
	char form;
	/* the names with "FILE" in them: jc__inc_file_hash lexes only such bytes */
	while ((name = jc__inc_ref_next(refs, &pos, &form)))
		if (form == JC_INC_REF_FILE && strstr(name, "FILE") &&
		    jc__inc_file_macro_name(name, strlen(name)) == JC_INC_FILE_NAME)
			return 1;
	return 0;
}

/* The FILE hash of path from its bytes' refs (jc__inc_file_hash's rule). */
static void file_hash(const char *path, const void *data, size_t n, const struct jc_inc_buf *refs,
		      uint8_t hash[16])
{
	jc__inc_hash128(data, n, hash);
	if (!uses_file_macro(refs))
		return;
	size_t len = strlen(path);
	uint8_t *b = malloc(16 + len);
	if (!b) { /* keyed by the bytes of the path alone: still another key per path */
		jc__inc_hash128(path, len, hash);
		return;
	}
	memcpy(b, hash, 16);
	memcpy(b + 16, path, len);
	jc__inc_hash128(b, 16 + len, hash);
	free(b);
}

int jc__inc_file_hash(const char *path, const void *data, size_t n, const struct jc_inc_buf *refs,
		      uint8_t hash[16])
{
	if (refs) {
		file_hash(path, data, n, refs, hash);
		return 0;
	}
	struct jc_inc_buf own = {0};
	int rc = memmem(data, n, "FILE", 4) ? jc__inc_lex(data, n, &own) : 0;
	if (rc == 0)
		file_hash(path, data, n, &own, hash);
	free(own.p);
	return rc;
}
