/* SPDX-License-Identifier: MIT */
/*
 * Include sets (docs/ARCHITECTURE.md, "The key"): what the include scan
 * (includes.h) found on disk, as a sorted list of (path, kind, hash)
 * entries; its digest, and the form of it that enters the cache key
 * (independent, where it can be, of where the -I directories are); and the
 * view of a request's include directories as trees relative to their top
 * directories. A set is stored as a manifest variant (manifest.h) so that a
 * later lookup only re-checks it.
 *
 * Errors: 0 or a negative JC_E* code. A set belongs to one thread at a time;
 * the functions keep no global state.
 */
#ifndef JC_INC_SET_H
#define JC_INC_SET_H

#include <stddef.h>
#include <stdint.h>

#include "common/req.h"

enum jc_inc_kind {
	JC_INC_FILE = 1,    /* a regular file: hash = XXH3-128 of its bytes */
	JC_INC_ABSENT = 2,  /* a candidate that is not a regular file (or missing) */
	JC_INC_DIR = 3,	    /* a directory walked by the fallback: hash of its sorted names */
	JC_INC_TOOLKIT = 4, /* an -I directory inside the toolkit include tree */
	/* A FILE entry's path that is a symbolic link (README, "Symlinked
	 * include trees"): hash = jc__inc_link_hash of its chain of target
	 * strings; the FILE entry of the same path holds the content. A
	 * retargeted link is another key even where the bytes are the same. */
	JC_INC_LINK = 5,
};

/* Entry kinds whose hash enters digests and manifests. */
#define JC_INC_HASHED(kind) ((kind) == JC_INC_FILE || (kind) == JC_INC_DIR || (kind) == JC_INC_LINK)

/* The hash of a DIR entry that is not a directory (missing or another type). */
extern const uint8_t jc__inc_not_a_dir[16];

/* stat identity of an entry when it was checked (FILE, DIR). */
struct jc_inc_stat {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};

struct jc_inc_entry {
	char *path;	       /* owned; as NVRTC would open it (not canonicalised) */
	uint8_t kind;	       /* enum jc_inc_kind */
	uint8_t hash[16];      /* FILE, DIR, LINK; zero otherwise */
	struct jc_inc_stat st; /* FILE, DIR: as seen by the scan or check; not in the digest */
};

struct jc_inc_set {
	struct jc_inc_entry *v; /* owned; sorted by path, then kind; no duplicates */
	size_t n;
	uint8_t digest[16]; /* XXH3-128 of (kind, path, hash) of every entry, in order */
	int unsettled; /* a file changed within the settle margin: store only after jc__inc_rehash
			*/
	char unsettled_path[256]; /* the first such file (for the log) */
	int fallback;		  /* a computed include made the scan take whole directories */
	uint64_t n_stat;	  /* stat() calls made (for figures) */
	uint64_t n_read;	  /* files read (memo misses) */
	int64_t checked_ns; /* CLOCK_REALTIME ns of the scan, check or learning (for the settle
			       margin) */
};

/* Frees what set owns and zeroes it (a zeroed set is empty). NULL-safe. */
void jc__inc_set_clear(struct jc_inc_set *set);
/* jc__inc_set_clear, then frees set itself (a malloc'd set). NULL-safe. */
void jc__inc_set_free(struct jc_inc_set *set);

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

/* Marks set unsettled (see inc_memo.h, the settle margin); the first path
 * so marked is kept in set->unsettled_path. */
void jc__inc_mark_unsettled(struct jc_inc_set *set, const char *path);

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

#endif
