/* SPDX-License-Identifier: MIT */
/*
 * File identities and content hashes for the include scan (docs/
 * ARCHITECTURE.md, "The key"), memoised.
 *
 * File hashes (and the include references the lexer found in the file,
 * inc_lex.h) and directory listings are memoised (struct jc_inc_memo) by
 * path and stat identity (st_dev, st_ino, st_size, st_mtim, st_ctim): an
 * unchanged tree costs stat() calls, not reads. The race ccache guards
 * against: a file written twice within one timestamp tick keeps its stat
 * identity. So a file whose ctime is within the settle margin of now
 * (100 ms; 2 s when both mtime and ctime have zero nanoseconds, as on
 * filesystems with whole-second timestamps) is never memoised, and marks the
 * set being built unsettled: the daemon then compiles it and, after the
 * compile, reads those files again (jc__inc_rehash, includes.h); the result
 * is stored only when they still hold the hashed bytes. (ctime, not mtime:
 * utimensat can set mtime to anything but always sets ctime to now.) NFS
 * attribute caching can hide changes for its timeout.
 *
 * Errors: 0 or a negative JC_E* code, with a one-line message in err (errlen
 * bytes, may be 0). Every function is thread-safe (the memo locks).
 */
#ifndef JC_INC_MEMO_H
#define JC_INC_MEMO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/inc_buf.h"
#include "common/inc_set.h"

/* Thread-safe memo of file content hashes and include references. */
struct jc_inc_memo;

/* A memo holding at most max_entries files (all are dropped when full).
 * JC_ENOMEM. Free with jc__inc_memo_free (NULL-safe). */
int jc__inc_memo_new(size_t max_entries, struct jc_inc_memo **out);
void jc__inc_memo_free(struct jc_inc_memo *m);

/* The identity of *st into *id. */
void jc__inc_stat_of(const struct stat *st, struct jc_inc_stat *id);
/* 1 when a and b are the same identity (every field equal), else 0. */
int jc__inc_same_stat(const struct jc_inc_stat *a, const struct jc_inc_stat *b);
/* CLOCK_REALTIME in ns: the clock of the settle margin (file timestamps). */
int64_t jc__inc_now_ns(void);
/* 1 when a file or directory of identity id changed within the settle margin
 * before now (ns, jc__inc_now_ns()), so that its identity may not tell the
 * next change apart; else 0. */
int jc__inc_unsettled(const struct jc_inc_stat *id, int64_t now);

/*
 * Reads the whole regular file at path into out (appended; opened
 * O_NONBLOCK, so a FIFO swapped in cannot hold the caller), its identity
 * before and after the read into *a and *b. JC_EIO (not a regular file,
 * open/read/fstat failed: errno in err), JC_ETOOBIG (over max bytes, or grew
 * past it), JC_ENOMEM. Bypasses the memo.
 */
int jc__inc_read_file(const char *path, uint64_t max, struct jc_inc_buf *out, struct jc_inc_stat *a,
		      struct jc_inc_stat *b, char *err, size_t errlen);

/*
 * The content hash (jc__inc_file_hash, inc_lex.h) (and, when refs is not NULL, the include
 * references appended to refs) of the regular file at path whose stat() gave *id: from memo, else
 * read (at most max_size bytes; set->n_read counted) and lexed, and memoised when settled (its
 * identity unchanged by the read and outside the settle margin before now). *id becomes the
 * identity the content belongs to; set is marked unsettled (jc__inc_mark_unsettled) when it was
 * not. Errors of jc__inc_read_file, or JC_ENOMEM.
 */
int jc__inc_file_info(struct jc_inc_memo *memo, uint64_t max_size, struct jc_inc_set *set,
		      const char *path, struct jc_inc_stat *id, uint8_t hash[16],
		      struct jc_inc_buf *refs, int64_t now, char *err, size_t errlen);

/* The names of directory path (without "." and ".."), sorted by strcmp,
 * into *names[*n] (owned by the caller: jc__inc_free_names). JC_EIO
 * (opendir failed: errno in err), JC_ENOMEM. Bypasses the memo. */
int jc__inc_list_dir(const char *path, char ***names, size_t *n, char *err, size_t errlen);
void jc__inc_free_names(char **names, size_t n);
/* XXH3-128 of the names, each with its NUL, in order, into out[16]: the hash
 * of a DIR entry (inc_set.h). 0 or JC_ENOMEM. */
int jc__inc_names_hash(char *const *names, size_t n, uint8_t out[16]);
/* The listing hash (jc__inc_names_hash) of directory path whose stat gave
 * *id: from memo, else listed, and memoised unless unsettled at now.
 * Errors of jc__inc_list_dir (without a message). */
int jc__inc_dir_hash(struct jc_inc_memo *memo, const char *path, const struct jc_inc_stat *id,
		     int64_t now, uint8_t hash[16]);

/* Symbolic links followed in one chain (Linux's ELOOP limit). */
#define JC_INC_MAX_LINKS 40

/*
 * The chain of symbolic links that path's last component starts (README,
 * "Symlinked include trees"): 0 when it is no link; 1 when it is, with hash
 * = XXH3-128 of each target string with its NUL, in order (a JC_INC_LINK
 * entry's hash), and, where chain is not NULL, each step's path (the
 * target joined to the link's directory, not folded) pushed onto it, the
 * last one the first that is no link. JC_EIO (readlink failed, a chain
 * longer than JC_INC_MAX_LINKS or PATH_MAX), JC_ENOMEM. Thread-safe.
 */
int jc__inc_link_walk(const char *path, uint8_t hash[16], struct jc_strv *chain);
/* The JC_INC_LINK entry of path, added to set when path is a symbolic link
 * (its jc__inc_link_walk hash): 0 (also when it is none), JC_EIO (its chain
 * cannot be followed), JC_ENOMEM. */
int jc__inc_link_entry(struct jc_inc_set *set, const char *path);
/* 1 when the JC_INC_LINK entry e still names the same chain of targets,
 * else 0; JC_ENOMEM. Thread-safe. */
int jc__inc_link_same(const struct jc_inc_entry *e);

#endif
