/* SPDX-License-Identifier: MIT */
/*
 * Change notification for include trees (inotify): a hit whose headers on
 * disk have not changed since their last validation skips the stat walk.
 *
 * A "tree" is the part of the file system an include set (includes.h)
 * depends on: every directory in which the resolution of one of its paths
 * looks a name up (each component's parent, symbolic links followed step by
 * step, so a link's own directory and every directory its target passes
 * through are watched; "/" included), every directory listed by a DIR entry,
 * and every FILE entry's file itself (a write through another hard link
 * reaches only the inode's own watch). jc__watch_tree() sets those watches
 * and returns a stamp; any event on any of them (a write, attribute change,
 * create, delete, rename, or the directory itself removed, renamed or
 * unmounted: IN_DELETE_SELF / IN_MOVE_SELF / IN_IGNORED) invalidates every
 * tree that holds it, for good: a tree is validated once and then only
 * dropped, never re-armed.
 *
 * No window: the caller sets the watches BEFORE the validating stat walk
 * (jc__inc_check), and a directory is watched before a name is looked up in
 * it, so a change after the walk started is an event. Events are queued by
 * the kernel inside the system call that makes the change, so draining the
 * queue before trusting a stamp (jc__watch_valid does) sees every change a
 * client made before it sent its request.
 *
 * Falls back (no stamp: the caller stat-walks on every request) when the
 * watch budget (max_watches, counted over all trees; inotify shares one
 * watch among trees on the same inode) would be exceeded, inotify_add_watch
 * fails (ENOSPC: fs.inotify.max_user_watches reached), or a directory lies
 * on a file system whose changes need not reach inotify (NFS, CIFS/SMB,
 * FUSE, 9p, Ceph, AFS, Lustre, GPFS: changes made by other hosts raise no
 * event). An overflowed event queue (IN_Q_OVERFLOW:
 * fs.inotify.max_queued_events) invalidates every tree. Not seen by inotify
 * at all: writes through a shared mmap of a header (they change mtime,
 * which the stat walk would see); such an application should not use -I
 * trees it maps writable.
 *
 * Thread-safety: every function may be called from any thread (one mutex).
 * Memory: jc__watch_stats() reports what the module holds; the kernel's own
 * cost is about 1 KiB per watch (fs.inotify.max_user_watches is sized on it).
 */
#ifndef JC_WATCH_H
#define JC_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/includes.h"

struct jc_watch;

/* Why jc__watch_tree() gave no stamp. */
enum jc_watch_refusal {
	JC_WATCH_OK = 0,
	JC_WATCH_BUDGET = 1, /* more watches than max_watches allows */
	JC_WATCH_LIMIT = 2,  /* inotify_add_watch: ENOSPC (max_user_watches) or another error */
	JC_WATCH_REMOTE = 3, /* a directory on a file system without reliable notification */
	JC_WATCH_NOMEM = 4,
	JC_WATCH_OFF = 5, /* watching is off (max_watches 0, or no inotify) */
};

/*
 * A watcher allowing at most max_watches inotify watches in all (0: off;
 * jc__watch_tree then always refuses with JC_WATCH_OFF). *out is owned by
 * the caller (jc__watch_free, NULL-safe). Returns 0, JC_ENOMEM, or JC_EIO
 * (inotify_init1 failed: errno in err; the caller may run without).
 */
int jc__watch_new(uint32_t max_watches, struct jc_watch **out, char *err, size_t errlen);
void jc__watch_free(struct jc_watch *w);

/* The inotify descriptor (non-blocking), to poll for readability on a
 * loop and call jc__watch_drain(); -1 when off. Owned by w. */
int jc__watch_fd(const struct jc_watch *w);

/* Reads every queued event and invalidates the trees they touch. */
void jc__watch_drain(struct jc_watch *w);

/*
 * Watches the tree of set (borrowed; only its paths and kinds are read).
 * Returns a stamp (> 0) that stays valid until an event under the tree, or
 * 0 with *why set (enum jc_watch_refusal; JC_WATCH_OK when the tree changed
 * while its watches were being set). The lock is let go between entries,
 * so stamps are checked meanwhile. The caller must then validate
 * set against the file system (jc__inc_check) before trusting the stamp,
 * and jc__watch_forget() it when that fails or the stamp is not kept.
 */
uint64_t jc__watch_tree(struct jc_watch *w, const struct jc_inc_set *set, int *why);

/*
 * jc__watch_tree() then the validation it asks for: watches set's tree and
 * checks set against the file system again (jc__inc_check with ctx; the
 * watches come first, so a change after this check is an event). A set
 * changed within the settle margin (unsettled) is not watched: its stat
 * identity, which the check trusts through the memo, may hide a second
 * change. Returns the stamp (owned by the caller: jc__watch_forget), or 0
 * with *why set (enum jc_watch_refusal; JC_WATCH_OK when the set is
 * unsettled, changed, or the check failed). set's st, unsettled, n_stat
 * and n_read are updated by the check. Thread-safe.
 */
uint64_t jc__watch_checked(struct jc_watch *w, struct jc_inc_set *set, const struct jc_inc_ctx *ctx,
			   int *why);

/* 1 when the tree of stamp has seen no event since jc__watch_tree (the
 * queue is drained first), else 0 (also for an unknown or forgotten stamp). */
int jc__watch_valid(struct jc_watch *w, uint64_t stamp);

/* Drops the tree of stamp and the watches no other tree holds. */
void jc__watch_forget(struct jc_watch *w, uint64_t stamp);

struct jc_watch_stats {
	uint64_t trees;		/* trees held (valid or not yet forgotten) */
	uint64_t watches;	/* inotify watches held */
	uint64_t bytes;		/* memory the module holds for them (not the kernel's) */
	uint64_t invalidations; /* trees invalidated by an event, since the last take */
	uint64_t overflows;	/* IN_Q_OVERFLOW seen, since the last take */
};

/* Fills *out; with take, the two event counts are zeroed after reading. */
void jc__watch_stats(struct jc_watch *w, struct jc_watch_stats *out, int take);

#endif
