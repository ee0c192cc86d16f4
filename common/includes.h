/* SPDX-License-Identifier: MIT */
/*
 * Headers read from include directories (DESIGN.md, "The cache key", item 4):
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
 *    with its content hash (and is scanned in turn), one that does not enters
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
 *    them. Their files are neither hashed nor scanned (toolkit headers only
 *    include toolkit headers).
 * The result, a struct jc_inc_set, is a sorted list of (path, kind, hash)
 * entries; its digest enters the cache key, and it is stored as a manifest
 * variant (manifest.h) so that a later lookup only re-checks it.
 *
 * File hashes are memoised (struct jc_inc_memo) by path and (st_dev, st_ino,
 * st_size, st_mtim, st_ctim): an unchanged tree costs stat() calls, not
 * reads. The race ccache guards against: a file written twice within one
 * timestamp tick keeps its stat identity. So a file whose ctime is within
 * the settle margin of now (100 ms; 2 s when both mtime and ctime have zero
 * nanoseconds, as on filesystems with whole-second timestamps) is never
 * memoised, and marks the set unsettled: the daemon then compiles it and,
 * after the compile, reads those files again (jc__inc_rehash); the result is
 * stored only when they still hold the hashed bytes. After a compile,
 * jc__inc_unchanged() re-stats every entry; a change during the compile
 * keeps the result out of the cache.
 * (ctime, not mtime: utimensat can set mtime to anything but always sets
 * ctime to now.) NFS attribute caching can hide changes for its timeout.
 *
 * Errors everywhere: 0 or a negative JC_E* code, with a one-line message in
 * err (errlen bytes, may be 0).
 */
#ifndef JC_INCLUDES_H
#define JC_INCLUDES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "req.h"

/* The include search of a request, parsed from its options. */
struct jc_inc_path {
	const char **dirs; /* -I directories in option order; borrowed from the request */
	size_t n_dirs;
	const char **pre;  /* pre-include names in option order; borrowed */
	size_t n_pre;
};


/*
 * Parses the include options of req->options: "-IDIR", "-I DIR", "-I=DIR",
 * "--include-path=DIR", "--include-path DIR" (the forms NVRTC 13.0 accepts,
 * tried against nvrtcCompileProgram) and the pre-include forms "-include
 * NAME", "-include=NAME", "--pre-include NAME", "--pre-include=NAME".
 * out may be NULL (validation only); else it gets arrays owned by the caller
 * (free with jc__inc_path_clear), whose strings are borrowed from req.
 * JC_EINVAL (message in err) when an option lacks its value, a directory is
 * not absolute (the daemon's working directory is not the client's), or
 * req->include_dirs is not exactly the list of -I directories in order (the
 * daemon reads only what the request declares, and reads all of it).
 * JC_ENOMEM. Thread-safe.
 */
int jc__inc_path_parse(const struct jc_req *req, struct jc_inc_path *out, char *err,
		       size_t errlen);
void jc__inc_path_clear(struct jc_inc_path *p);

/*
 * 1 when the compile of req may read files from disk: it has -I directories,
 * a pre-include, a program name that is absolute or climbs (".."), or its
 * source or an in-memory header has a reference the lexer cannot prove stays
 * inside the in-memory texts: an absolute name, a ".." component, a
 * computed include, __has_include of a macro, a #line naming a file
 * (splices, the digraph %: and the trigraph ??= are read through); else 0.
 * Conservative: when in doubt, 1. No I/O: it lexes the in-memory texts (only
 * those with a '#', "%:" or "??="). req must have passed
 * jc__inc_path_parse(). Thread-safe.
 *
 * This is the fast path and the early refusal of other uids, not the
 * guarantee: the worker records and confines what NVRTC does (worker_fs.h),
 * and the daemon stores only results whose key covers it (jc__inc_covers).
 */
int jc__inc_needed(const struct jc_req *req);

/* Thread-safe memo of file content hashes and include references. */
struct jc_inc_memo;

/* A memo holding at most max_entries files (all are dropped when full).
 * JC_ENOMEM. Free with jc__inc_memo_free (NULL-safe). */
int jc__inc_memo_new(size_t max_entries, struct jc_inc_memo **out);
void jc__inc_memo_free(struct jc_inc_memo *m);

enum jc_inc_kind {
	JC_INC_FILE = 1,    /* a regular file: hash = XXH3-128 of its bytes */
	JC_INC_ABSENT = 2,  /* a candidate that is not a regular file (or missing) */
	JC_INC_DIR = 3,     /* a directory walked by the fallback: hash of its sorted names */
	JC_INC_TOOLKIT = 4, /* an -I directory inside the toolkit include tree */
};

/* stat identity of an entry when it was checked (FILE, DIR). */
struct jc_inc_stat {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};

struct jc_inc_entry {
	char *path;             /* owned; as NVRTC would open it (not canonicalised) */
	uint8_t kind;           /* enum jc_inc_kind */
	uint8_t hash[16];       /* FILE, DIR; zero otherwise */
	struct jc_inc_stat st;  /* FILE, DIR: as seen by the scan or check; not in the digest */
};

struct jc_inc_set {
	struct jc_inc_entry *v; /* owned; sorted by path, then kind; no duplicates */
	size_t n;
	uint8_t digest[16];     /* XXH3-128 of (kind, path, hash) of every entry, in order */
	int unsettled;          /* a file changed within the settle margin: store only after jc__inc_rehash */
	char unsettled_path[256]; /* the first such file (for the log) */
	int fallback;           /* a computed include made the scan take whole directories */
	uint64_t n_stat;        /* stat() calls made (for figures) */
	uint64_t n_read;        /* files read (memo misses) */
	int64_t checked_ns;     /* CLOCK_REALTIME ns of the scan, check or learning (for the settle margin) */
};

/* Frees what set owns and zeroes it (a zeroed set is empty). NULL-safe. */
void jc__inc_set_clear(struct jc_inc_set *set);

/* What the scan and checks need. Borrowed; must outlive the call. */
struct jc_inc_ctx {
	struct jc_inc_memo *memo;  /* required */
	const char *toolkit_root;  /* realpath of the toolkit include tree; NULL or "" = none */
	uint64_t max_entries;      /* a scan recording more entries fails (JC_ETOOBIG) */
	uint64_t max_file_size;    /* a bigger header fails the scan (JC_ETOOBIG) */
};

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
 * FILE still a regular file with the same hash, every ABSENT still absent,
 * every DIR listing the same names, every TOOLKIT directory still inside the
 * toolkit tree. Returns 1 when all match (st of every entry, unsettled,
 * n_stat and n_read updated), 0 on the first difference, or JC_ENOMEM /
 * JC_ETOOBIG. A file that cannot be read counts as a difference. Thread-safe.
 */
int jc__inc_check(struct jc_inc_set *set, const struct jc_inc_ctx *ctx);

/*
 * After a compile: 1 when every FILE and DIR entry still has the stat
 * identity in its st, and every ABSENT one is still absent; else 0, with the
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
 * Appends an entry (path_len bytes of path copied; hash may be NULL) to set
 * without sorting; jc__inc_set_finish() then sorts, drops exact duplicates
 * and computes the digest: XXH3-128 of a format byte and, per entry, kind,
 * u64le path length, path, and the hash of FILE and DIR entries. Used by the
 * scan and by manifest.c when it loads a variant. Both return 0 or
 * JC_ENOMEM (after which the set may only be cleared).
 */
int jc__inc_set_add(struct jc_inc_set *set, const char *path, size_t path_len, uint8_t kind,
		    const uint8_t hash[16]);
int jc__inc_set_finish(struct jc_inc_set *set);

/*
 * Include trees relative to their directories. A top directory of dirs is
 * one that lies (lexically: jc__path_lexical without folding "..") inside
 * no other of them and is the first of its equals; every other directory
 * and every file of a tree is named relative to the first top directory
 * that holds it. jc__inc_tops_new makes that view of dirs (read once; owned
 * by the caller, free with jc__inc_tops_free): 0, JC_EINVAL (a directory
 * without a lexical form: too long), JC_ENOMEM. jc__inc_tops_is_top: 1 when
 * dirs->v[i] is a top directory. jc__inc_tops_rel: 1 when path (lexically)
 * is a top directory or lies under one with no "." or ".." component: *top
 * its index, rel[len] the path below it ("" for the directory itself); else
 * 0. No I/O; a view may be read by several threads at once.
 */
struct jc_inc_tops;
int jc__inc_tops_new(const struct jc_strv *dirs, struct jc_inc_tops **out);
void jc__inc_tops_free(struct jc_inc_tops *t);
int jc__inc_tops_is_top(const struct jc_inc_tops *t, size_t i);
int jc__inc_tops_rel(const struct jc_inc_tops *t, const char *path, size_t *top, char *rel,
		     size_t len);

/* 1 when rel is a valid relative tree path: non-empty components, none "."
 * or ".." (req.h, "I/REL" names), else 0. */
int jc__inc_rel_valid(const char *rel);

/*
 * The include tree as the cache key sees it (key.h, item 4), into out[16].
 * Where it can be, it is independent of where the -I directories are, so
 * that the same bytes under other directories (two users' checkouts, a
 * per-user daemon reading them and a system daemon sent them by the client)
 * get one key: when every directory and every entry but the TOOLKIT ones is
 * jc__inc_tops_rel() of a top directory, the digest is over each directory as
 * (top index, relative path) and each entry as (kind, top index, relative
 * path, hash), the TOOLKIT ones by their path: the same tree under other
 * top directories. Otherwise it is over the directory strings and
 * set->digest (absolute). JC_ENOMEM or 0. The artifact may still name the
 * paths of the compile that made it (__FILE__, -lineinfo, -G): README,
 * "Keys of include trees". Thread-safe.
 */
int jc__inc_key_digest(const struct jc_inc_set *set, const struct jc_strv *dirs, uint8_t out[16]);

/*
 * A client-read tree (req.h, req->tree: names validated as "I/REL" of
 * req->include_dirs) as the include set it describes, under the client's
 * directory strings (never opened): each FILE's hash computed from its
 * bytes, or, in the lookup round, as the client gives it (a wrong one only
 * misses: the bytes round hashes what it compiles). The daemon keys a tree
 * with it, and a client computes the digest of its own tree with it (one
 * function: both agree). Into *out (zeroed first; owned by the caller).
 * 0, JC_EINVAL (a path sent twice; message in err) or JC_ENOMEM.
 */
int jc__inc_tree_set(const struct jc_req *req, struct jc_inc_set *out, char *err, size_t errlen);

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

#endif
