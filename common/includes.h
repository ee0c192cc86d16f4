/* SPDX-License-Identifier: MIT */
/*
 * Headers read from include directories (docs/ARCHITECTURE.md, "The key"; key.h, item 4):
 * which files on disk a compile may read, and their content.
 *
 * A conservative scan, like ccache's direct mode but without a preprocessor:
 *  - Roots: the source, every in-memory header, and every pre-include
 *    (`-include NAME`, `--pre-include NAME`, `=` forms too).
 *  - References: `#include`, `#include_next` and `#import` with a literal
 *    "name" or <name>, in every branch (conditionals are ignored, so the set
 *    is a superset); in `#if` / `#elif` lines, every parenthesised literal
 *    "(<name>)" / "(\"name\")" (that is how __has_include and wrappers such
 *    as CCCL's _CCCL_HAS_INCLUDE(<x>) test for files); in `#define` lines,
 *    `__has_include(<name>)` with a literal. Comments, string, character and
 *    raw-string literals and line splices are honoured.
 *  - Resolution: an absolute name is itself; otherwise a quoted name is
 *    looked up in the including file's directory (for files on disk; in-memory
 *    texts have none: the worker runs in an empty, deleted directory, so
 *    NVRTC's "directory of the source" finds nothing), then in every -I
 *    directory in order; an angle name in every -I directory. EVERY candidate
 *    is recorded, not only the first that exists: a file that exists enters
 *    with its content hash (and is scanned in turn; a symbolic link also
 *    as a LINK entry of its chain of target strings), one that does not enters
 *    as absent, so a header added earlier on the search path changes the
 *    key, and a change to a shadowed file costs a miss, never a wrong hit.
 *  - A computed include (`#include MACRO`, or __has_include(MACRO) outside a
 *    #define) makes the scan fall back to every file under every -I
 *    directory (recursively; each directory's listing enters too, so a file
 *    added anywhere there changes the key). A macro that expands to a path
 *    outside the -I directories (absolute, or climbing out with "..") is not
 *    covered, nor is __has_include(MACRO) reached through a wrapper macro.
 *  - -I directories inside the CUDA toolkit's own include tree (the one next
 *    to the loaded libnvrtc: jc_toolchain.toolkit_include) are not read: the
 *    toolkit identity (jc_toolchain.toolkit_include_id, in every key) covers
 *    them. Their files are not hashed, and scanned only with
 *    ctx->toolkit_refs (then a toolkit header's candidates in the other -I
 *    directories enter as any candidate does).
 * The result, a struct jc_inc_set, is a sorted list of (path, kind, hash)
 * entries; its digest enters the cache key, and it is stored as a manifest
 * variant (manifest.h) so that a later lookup only re-checks it.
 *
 * File hashes are memoised by stat identity, and a file changed within the
 * settle margin marks the set unsettled (inc_memo.h): the daemon then
 * compiles it and, after the compile, reads those files again
 * (jc__inc_rehash); the result is stored only when they still hold the
 * hashed bytes. After a compile, jc__inc_unchanged() re-stats every entry; a
 * change during the compile keeps the result out of the cache.
 *
 * The units: the lexer (inc_lex.h), the include options of a request
 * (inc_opts.h), the hash memo and file layer (inc_memo.h), include sets and
 * their key digest (inc_set.h), and here the scan, the re-checks and
 * dependency truth.
 *
 * Errors everywhere: 0 or a negative JC_E* code, with a one-line message in
 * err (errlen bytes, may be 0).
 */
#ifndef JC_INCLUDES_H
#define JC_INCLUDES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/inc_memo.h"
#include "common/inc_opts.h"
#include "common/inc_set.h"
#include "common/req.h"

/* What the scan and checks need. Borrowed; must outlive the call. */
struct jc_inc_ctx {
	struct jc_inc_memo *memo; /* required */
	const char *toolkit_root; /* realpath of the toolkit include tree; NULL or "" = none */
	/* 1: the scan follows the references of the toolkit headers it finds
	 * (not recorded) and records their candidates in the other -I
	 * directories, as NVRTC probes them (a client-read tree must hold those
	 * probes: the daemon cannot learn them; client/tree.c). 0: the
	 * toolkit's headers are not read (the daemon's scan; what the compile
	 * probed beyond it is learnt, "Dependency truth"). */
	int toolkit_refs;
	uint64_t max_entries;	/* a scan recording more entries fails (JC_ETOOBIG) */
	uint64_t max_file_size; /* a bigger header fails the scan (JC_ETOOBIG) */
};

/*
 * The rule for -I directories of the toolkit's own include tree: 1 when the
 * realpath of dir is root (the realpath of a toolkit include tree:
 * jc_toolchain.toolkit_include) or below it; 0 when not, when root is NULL
 * or "", or when dir cannot be resolved. Such a directory is not read: the
 * toolkit identity covers it (the daemon's scan, a client-read tree, whose
 * client learns root from the daemon's HELLO_OK, and the worker writing a
 * tree all decide with this). No I/O but realpath; thread-safe.
 */
int jc__inc_in_toolkit(const char *root, const char *dir);

/*
 * Scans req (see the top of this file) into *out (zeroed first; owned by the
 * caller). Returns 0, or JC_EINVAL (bad include options), JC_ETOOBIG (over
 * a limit of ctx), JC_EIO (a file that exists could not be read or a
 * directory listed: errno in err), JC_ENOMEM. Thread-safe (the memo locks).
 */
int jc__inc_scan(const struct jc_req *req, const struct jc_inc_ctx *ctx, struct jc_inc_set *out,
		 char *err, size_t errlen);

/*
 * Re-checks a recorded set (from a manifest) against the file system: every
 * FILE still a regular file with the same hash, every LINK still the same
 * chain of target strings (inc_memo.h, jc__inc_link_walk), every ABSENT still absent,
 * every DIR listing the same names, every TOOLKIT directory still inside the
 * toolkit tree. Returns 1 when all match (st of every entry, unsettled,
 * n_stat and n_read updated), 0 on the first difference, or JC_ENOMEM /
 * JC_ETOOBIG. A file that cannot be read counts as a difference. Thread-safe.
 */
int jc__inc_check(struct jc_inc_set *set, const struct jc_inc_ctx *ctx);

/*
 * After a compile: 1 when every FILE and DIR entry still has the stat
 * identity in its st, every LINK entry the same chain of targets, and every
 * ABSENT one is still absent; else 0, with the
 * path that changed in what[len]. Thread-safe.
 */
int jc__inc_unchanged(const struct jc_inc_set *set, char *what, size_t len);

/*
 * Generated headers: a set that is unsettled (a file or listing changed
 * within the settle margin before set->checked_ns, so its stat identity may
 * hide a second change) is shown to hold what was hashed by reading those
 * entries again after the compile: 1 when each such FILE still has the
 * identity in its st, before and after the read, and the hashed content,
 * and each such DIR the same identity and names; else 0 with the path in
 * what[len]. With jc__inc_unchanged() and jc__inc_covers() (the worker saw
 * the same identities) the compile read the hashed bytes, unless the file
 * was rewritten twice, to other bytes and back, within one timestamp tick
 * of the same size. JC_ENOMEM. Reads bypass the memo. Thread-safe.
 */
int jc__inc_rehash(const struct jc_inc_set *set, const struct jc_inc_ctx *ctx, char *what,
		   size_t len);

/*
 * Dependency truth (docs/ARCHITECTURE.md): deps (n_deps, borrowed) is what
 * the worker recorded NVRTC doing in the compile (req.h, struct jc_dep); set
 * (may be NULL: nothing on disk) the include set the key was made from.
 * jc__inc_covers() is 1 when set covers every access exactly: a file read
 * is a FILE entry of the same path whose stat identity is the one the
 * worker saw (so its content is the hashed one), a probe that found no
 * regular file is an ABSENT entry or a name in a listed DIR entry, a listed
 * directory a DIR entry; a refusal (JC_DEP_DENIED) is covered, since its
 * outcome depends only on the request's declared directories and the
 * toolkit, which the key holds. Else 0, with the first uncovered access in
 * what[len] (control characters shown as ?). JC_ENOMEM. Paths are compared
 * with empty and "." components dropped. Thread-safe.
 */
int jc__inc_covers(const struct jc_inc_set *set, const struct jc_dep *deps, size_t n_deps,
		   char *what, size_t len);

/*
 * ccache's depend mode: the include set that says exactly what deps (the
 * accesses of a compile, see above) read, built into *out (owned by the
 * caller): the TOOLKIT entries of scan (may be NULL), a FILE entry with its
 * content hash for each file read, an ABSENT one for each probe that found
 * none, a DIR one for each listing. Returns 1 when every file still has the
 * stat identity the worker saw and every probe still finds what it found
 * (out->unsettled set when one changed too recently to tell); 0 when one
 * changed since the compile (path in what[len]; *out empty); JC_ENOMEM.
 * Thread-safe (the memo locks).
 */
int jc__inc_learn(const struct jc_inc_set *scan, const struct jc_dep *deps, size_t n_deps,
		  const struct jc_inc_ctx *ctx, struct jc_inc_set *out, char *what, size_t len);

/*
 * Time macros (docs/ARCHITECTURE.md, "Dependency truth"): 1 when the
 * compile of req used __DATE__, __TIME__ or __TIMESTAMP__ as a token (the
 * lexer's JC_INC_REF_TIME: not in a comment or a literal) in its source, an
 * in-memory header, a client-read tree file, or a file on disk it read
 * (deps, n_deps: the worker's record, JC_DEP_FILE entries, each looked up
 * in ctx's memo by the identity the worker saw, else read and lexed); the
 * macro and where in what[len]. 0 when none; JC_ENOMEM. Texts without the
 * substring "__" followed by DATE, TIME or TIMESTAMP are not lexed. A file
 * that cannot be read is skipped (the result is then not stored anyway:
 * jc__inc_unchanged). Thread-safe.
 */
int jc__inc_time_macro(const struct jc_req *req, const struct jc_dep *deps, size_t n_deps,
		       const struct jc_inc_ctx *ctx, char *what, size_t len);

/*
 * File name macros in headers on disk: 1 when a file a compile read from
 * disk outside the toolkit (deps, n_deps, as for jc__inc_time_macro) uses
 * __FILE__, __BASE_FILE__, __FILE_NAME__ or __builtin_FILE as a token (the
 * memo's lexer records), with the macro and the file in what[len]; 0 when
 * none; JC_ENOMEM. The cheap test before jc__inc_name_reach reads them.
 * Thread-safe.
 */
int jc__inc_file_macro(const struct jc_dep *deps, size_t n_deps, const struct jc_inc_ctx *ctx,
		       char *what, size_t len);

/*
 * The program name check of a name-free request's compile (req.h;
 * docs/shim.md, "Program names"): 1 when req's program name may reach its
 * artifact other than as text that core/progname.h finds, with why in
 * what[len]; 0 when it cannot; JC_ENOMEM.
 *
 * __FILE__ and __FILE_NAME__ name the file being read where they are
 * expanded; __BASE_FILE__ always names the source; __builtin_FILE() and
 * __builtin_source_location() the file of the call, the source's for a
 * default argument of a call in it. Folded into a number (sizeof(__FILE__),
 * a constexpr sum of its characters), no search for the name's text finds
 * it. A header's own uses of __FILE__ name the header (its path is in its
 * key: jc__inc_file_hash), so its macros matter only where the source
 * expands them. The check reads the source, req's in-memory headers,
 * options and client-read tree's files, and every file of deps (n_deps; as
 * the compile saw them) outside the toolkit, follows which macros expand a
 * file name macro and which the source expands (through any chain), and
 * answers 1 when:
 *  - the source, an in-memory header or an option uses a file name macro
 *    or a macro expanding one, or names source_location (the toolkit's
 *    source_location::current() defers __builtin_FILE() to its caller);
 *  - a header's code (outside its directives, or a #line's operands) uses
 *    __BASE_FILE__, __builtin_FILE, __builtin_source_location,
 *    source_location or a macro expanding one;
 *  - the source or an option pastes (##), or expands a macro that does; the
 *    source holds a piece ## could paste into a file name macro, or a header
 *    one of __BASE_FILE__ or a builtin (jc__inc_file_macro_name);
 *  - a name is spelt with a universal character name (not read here);
 *  - a file changed since the compile, or macro chains run past what the
 *    check follows.
 * Only when something holds a file name macro or a piece of one
 * (jc__inc_file_macro for deps, the lexer for the rest): else 0 at once.
 * The toolkit's headers are not read: their macros are taken to expand
 * them into text only (assert's message), which the text search sees.
 * Reads files (bypassing the memo); thread-safe.
 */
int jc__inc_name_reach(const struct jc_req *req, const struct jc_dep *deps, size_t n_deps,
		       const struct jc_inc_ctx *ctx, char *what, size_t len);

/* "PATH SUFFIX" into what[len], control characters of PATH (which a
 * client's #include names) shown as '?': it reaches the daemon's log. */
void jc__inc_print_path(char *what, size_t len, const char *path, const char *suffix);

/*
 * A dependency record fetched from the remote tier (daemon/remote.h) is
 * hostile: before it may key req, every entry must name only what req
 * declares. 1 when set (borrowed) has at most ctx->max_entries entries,
 * each path absolute and in lexical form (no empty, "." or ".."
 * components), each TOOLKIT entry one of req->include_dirs inside the
 * toolkit tree, and every other entry below one of req->include_dirs; else
 * 0 with the first offending path in why[len]. JC_ENOMEM, JC_EINVAL (a
 * directory without a lexical form). Its content is then re-checked with jc__inc_check. No I/O but
 * realpath of TOOLKIT entries; thread-safe.
 */
int jc__inc_record_admit(const struct jc_inc_set *set, const struct jc_req *req,
			 const struct jc_inc_ctx *ctx, char *why, size_t len);

#endif
