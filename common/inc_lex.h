/* SPDX-License-Identifier: MIT */
/*
 * The include scan's lexer (docs/ARCHITECTURE.md, "The key"): the include
 * references of one text, found without a preprocessor.
 *
 * What is recorded (conservatively; conditionals are ignored, so the set is
 * a superset of what a compile includes):
 *  - `#include`, `#include_next` and `#import` with a literal "name" or
 *    <name>; any other operand is a computed include;
 *  - in `#if` / `#elif` lines, every parenthesised literal "(<name>)" /
 *    "(\"name\")" (that is how __has_include and wrappers such as CCCL's
 *    _CCCL_HAS_INCLUDE(<x>) test for files);
 *  - in `#if`, `#elif` and `#define` lines, `__has_include(<name>)` and
 *    `__has_include_next` with a literal; with anything else, a computed
 *    include;
 *  - `#line` (and GNU's `# 1 "name"`) with a file name: a computed include
 *    (it may change where quoted includes are looked for);
 *  - the time macros `__DATE__`, `__TIME__` and `__TIMESTAMP__` as tokens,
 *    anywhere (their expansion is not in the cache key: the daemon serves
 *    such a compile without storing it, flight.c);
 *  - the identifiers that can bring a file's name into a compile
 *    (jc__inc_file_macro_name: `__FILE__`, `__builtin_FILE`,
 *    `source_location`, pieces `##` could paste into one: `__FI`, `ILE__`)
 *    anywhere (a file that uses a `__FILE__`-like one is keyed by its path
 *    too: jc__inc_file_hash below); and, for the name check to see
 *    (includes.h), a universal character name as "\u" and a text whose
 *    reading depends on the language mode (a trigraph, a raw string, a
 *    digit separator) as "(mode)".
 * Comments, string, character and raw-string literals, pp-numbers and line
 * splices (backslash-newline, also as the trigraph ??/) are honoured; the
 * digraph %: and the trigraph ??= start a directive too.
 *
 * References go into a struct jc_inc_buf as records: a form byte (enum
 * jc_inc_ref), the name, a NUL. No I/O, no global state: thread-safe.
 */
#ifndef JC_INC_LEX_H
#define JC_INC_LEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/inc_buf.h"

enum jc_inc_ref {
	JC_INC_REF_QUOTED = 'q',   /* "name" */
	JC_INC_REF_ANGLE = 'a',	   /* <name> */
	JC_INC_REF_COMPUTED = 'c', /* not a literal (empty name) */
	JC_INC_REF_TIME = 't', /* a time macro used (name: __DATE__, __TIME__ or __TIMESTAMP__) */
	JC_INC_REF_FILE =
	    'f', /* a file name macro (__FILE__, __BASE_FILE__, ...) or a piece of one */
	/* jc__inc_lex_macros' records */
	JC_INC_REF_DEFINE = 'D', /* a header's #define of name */
	JC_INC_REF_BODY = 'B',	 /* an identifier of the last DEFINE's replacement list */
	JC_INC_REF_USE = 'U', /* an identifier outside a header's directives; any of the source's */
	JC_INC_REF_PASTE = 'P', /* a ## (empty name): the last DEFINE's, or in the source */
};

/* Appends the include references of text[n] (borrowed; any bytes, not
 * NUL-terminated) to refs. 0 or JC_ENOMEM (refs may hold some of them). */
int jc__inc_lex(const char *text, size_t n, struct jc_inc_buf *refs);

/*
 * Appends the macro records of text[n] (borrowed) to out, for the program
 * name check (includes.h, jc__inc_name_reach), with the lexing rules above;
 * a text whose reading depends on the language mode (a trigraph, a raw
 * string, a digit separator: NVRTC's -std) is lexed again as C++17 (no
 * trigraphs) and as C++03 (no raw strings or digit separators), and what
 * any reading holds is recorded. A header's (source
 * 0): for each #define, DEFINE with the macro's name, then BODY for each
 * identifier after it (parameters included) and PASTE for each ## (or
 * %:%:); USE for each identifier outside directives; other directives are
 * read past. The source's (source 1): USE for every identifier, in
 * directives too, and PASTE for each ## in a directive. Identifiers inside
 * literals and comments are none; a block comment may carry a directive
 * past a newline. 0 or JC_ENOMEM (out may hold some).
 */
int jc__inc_lex_macros(const char *text, size_t n, int source, struct jc_inc_buf *out);

/* What jc__inc_file_macro_name says of an identifier. */
enum {
	JC_INC_FILE_PIECE = 1, /* ## could paste it with one other piece into one */
	JC_INC_FILE_NAME = 2,  /* one of them */
};

/*
 * 1 when a proper piece of len characters of a name of n characters, taken
 * from its start (suffix 0) or its end (suffix 1), is one that ## could
 * paste with one other into the name and that is counted as such: a prefix
 * of 4 or more characters, a suffix that leaves out at most 3 (any split in
 * two has such a piece). Shorter pieces ("_", "__b", a template parameter
 * "E") are common in real headers and are not counted, nor pastes of three
 * or more. Used for the lexer's names (jc__inc_file_macro_name) and the
 * name check's macros (inc_names.c).
 */
static inline int jc__inc_piece(size_t len, size_t n, int suffix)
{
	return len < n && (suffix ? len + 3 >= n : len >= 4);
}

/*
 * Whether the identifier s[len] can bring a file's name into a compile:
 * JC_INC_FILE_NAME for __FILE__, __FILE_NAME__, __BASE_FILE__,
 * __builtin_FILE, __builtin_source_location and source_location (the
 * toolkit's cuda::std::source_location::current() takes __builtin_FILE() as
 * a default argument); else JC_INC_FILE_PIECE when it is a piece
 * (jc__inc_piece) of one of the first five ("__FI", "ILE__"); pieces of
 * source_location are not counted. Else 0.
 */
int jc__inc_file_macro_name(const char *s, size_t len);

/* Appends one record (form, len bytes of name) to refs. 0 or JC_ENOMEM. */
int jc__inc_ref_add(struct jc_inc_buf *refs, enum jc_inc_ref form, const char *name, size_t len);

/* The record at *pos of refs: returns its name (borrowed from refs, NUL-
 * terminated), its form in *form, and moves *pos past it; NULL at the end. */
const char *jc__inc_ref_next(const struct jc_inc_buf *refs, size_t *pos, char *form);

/*
 * The hash of a FILE entry (inc_set.h) at path whose bytes are data[n]:
 * XXH3-128 of the bytes; for a file that uses __FILE__, __BASE_FILE__,
 * __FILE_NAME__ or __builtin_FILE as a token (the lexer's JC_INC_REF_FILE;
 * not the other names or pieces jc__inc_file_macro_name knows),
 * XXH3-128 of that hash (16 bytes) followed by path (as NVRTC opens it):
 * what such a file compiles to depends on the path it was found under, so
 * the same bytes elsewhere are another key (README, "The key"). refs: the
 * data's records from jc__inc_lex, or NULL to lex them here (only when the
 * bytes hold "FILE"). 0 or JC_ENOMEM (lexing). No I/O; thread-safe.
 */
int jc__inc_file_hash(const char *path, const void *data, size_t n, const struct jc_inc_buf *refs,
		      uint8_t hash[16]);

/* 1 when text[n] might hold a directive (a '#', the digraph "%:" or "??"):
 * a cheap filter before jc__inc_lex, so that a source without one costs a
 * few memchr calls, not a lex. Conservative. */
int jc__inc_may_have_directive(const char *text, size_t n);

#endif
