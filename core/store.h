/* SPDX-License-Identifier: MIT */
/*
 * The content-addressed object store under a cache directory DIR:
 *
 *   DIR/lock                  flock: one daemon per directory (holds its pid)
 *   DIR/objects/ab/<32 hex>   artifact bytes named by the XXH3-128 of their
 *                             content (canonical big-endian, lowercase hex),
 *                             mode 0400; "ab" is the first two hex digits
 *   DIR/tmp/                  staging for jc__store_put(); emptied at open
 *   DIR/quarantine/           objects that failed a check, kept for inspection
 *   DIR/worker-cwd/           not the store's: the empty directory compile
 *                             workers run in (daemon/pool.c)
 *
 * An object is published by write + fsync in tmp/, rename into objects/ and an
 * fsync of the directories, so a crash leaves either no object or a complete
 * one. Nothing read back is trusted: objects are opened without following
 * links, owner/type/mode/size are checked on every open and the hash is
 * checked by jc__store_verify_fd() / jc__store_read_object().
 *
 * Thread-safety: after jc__store_open() returns, every function may be called
 * from any number of threads at once on the same store (it holds only
 * immutable state and descriptors). Processes are kept apart by the lock:
 * open the store, and write to it, only while holding jc__store_lock().
 *
 * All functions return 0 (or the documented non-negative value) on success
 * and a negative JC_E* code on failure. Where an err/errlen pair is taken, a
 * human-readable message (with the errno text) is written there on failure;
 * err may be NULL when errlen is 0.
 */
#ifndef JC_STORE_H
#define JC_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct jc_store;

/*
 * Takes the directory lock: flock(DIR/lock, LOCK_EX | LOCK_NB) on an
 * O_CLOEXEC descriptor, retried on EINTR, then writes our pid into the file
 * so that a refused second daemon can name the holder. Creates DIR (mode
 * 0700, parents included) and the lock file (0600) when missing, so it is
 * called before jc__store_open(), which needs the lock to empty tmp/.
 * dir: borrowed. wait_ms: 0 tries once; > 0 retries every 50 ms until that
 * many milliseconds have passed.
 * Returns the locked descriptor (>= 0; the lock is released by close() or at
 * exit), or JC_ELOCKED (held by another open file description, "held by pid
 * N" in err), JC_EIO (cannot create or open, errno in err), JC_EINVAL (dir
 * NULL or empty). Thread-safe; the lock excludes other processes and other
 * descriptors alike.
 */
int jc__store_lock(const char *dir, int wait_ms, char *err, size_t errlen);

/*
 * Opens the store in DIR: creates DIR (parents 0700) and objects/, tmp/ and
 * quarantine/ (0700) when missing; removes every file left in tmp/ (the
 * caller must hold jc__store_lock(): a second writer's staging would go too).
 *
 * The store belongs to the effective uid alone, in every mode (clients are
 * given descriptors, never paths). Checked at every open, before anything is
 * read: DIR is owned by us and not writable by group or others (else it is
 * set to 0700); worker-cwd/ (when present) is a directory of ours; objects/,
 * tmp/, quarantine/, manifests/ and each two-hex-digit directory under
 * objects/ and manifests/ are directories owned by us, mode 0700; lock,
 * index.sqlite, index.sqlite-wal, index.sqlite-shm and reserve (when
 * present) are regular files owned by us, mode 0600. Symbolic links are not
 * followed (DIR itself may be one). An entry that is ours but has a wider
 * mode (the 02770 / 0644 layout of the earlier --group-shared) is set to the
 * expected mode, with a warning naming it; one of another owner or type is
 * refused: JC_EDENIED, with the path, its owner and mode, what is expected and
 * what to do in err.
 *
 * DIR/reserve: a JC_STORE_RESERVE_BYTES file kept so that a full disk can
 * still be freed (see jc__store_reserve_release). Made here when missing and
 * there is room; released here when the filesystem has less free space than
 * its size, so that the index can be opened.
 *
 * Other refusals: DIR on a network filesystem (NFS, CIFS/SMB, AFS, Coda,
 * Ceph, 9p, GFS2/OCFS2/Lustre/GPFS, and FUSE filesystems known to be remote
 * such as sshfs, s3fs or rclone) -> JC_EINVAL, because the SQLite index in
 * WAL mode needs a local filesystem; other FUSE filesystems are accepted
 * with a warning. Other failures -> JC_EIO (errno in err), JC_ENOMEM.
 * dir: borrowed (copied). *out: set on success, owned by the caller, freed by
 * jc__store_close(); left untouched on failure. Not thread-safe against other
 * calls on the same DIR.
 */
int jc__store_open(const char *dir, struct jc_store **out, char *err, size_t errlen);

/* Size of DIR/reserve by default: room for the index's -shm and the
 * write-ahead log of the first deletions of a purge or eviction on a full
 * disk. A small budget makes it smaller (jc__store_set_reserve): it counts
 * in the budget. */
#define JC_STORE_RESERVE_BYTES (1u << 20)

/* Less free space than this on the cache's file system is a full disk
 * (jc__store_disk_full); the reserve is made again only with this much
 * left over beside it. */
#define JC_STORE_FULL_BYTES (64u << 10)

/* The size the reserve is made with from now on; an existing one of
 * another size is made again at it (when there is room). At most
 * JC_STORE_RESERVE_BYTES is sensible. Thread-safe. */
void jc__store_set_reserve(struct jc_store *s, uint64_t bytes);
/* That size. Thread-safe. */
uint64_t jc__store_reserve_size(struct jc_store *s);

/*
 * 1 when the cache's file system has less than JC_STORE_FULL_BYTES free (a
 * full disk: nothing can be stored until space returns), else 0 (also when
 * statvfs fails). *free_out (may be NULL): the free bytes, UINT64_MAX when
 * unknown. Thread-safe.
 */
int jc__store_disk_full(struct jc_store *s, uint64_t *free_out);

/*
 * Unlinks DIR/reserve, logging a warning: called when a removal (purge,
 * eviction, gc) fails for want of space, before it is retried. Returns 1 when
 * a reserve was released, 0 when there was none. Thread-safe.
 */
int jc__store_reserve_release(struct jc_store *s);

/*
 * Makes DIR/reserve again (staged in tmp/, then renamed) when it is missing
 * and the filesystem has its size and JC_STORE_FULL_BYTES more free; best
 * effort (a failure is logged). Called after removals and by the daemon's
 * periodic budget check, so a reserve spent on a full disk comes back as
 * soon as space does. Thread-safe.
 */
void jc__store_reserve_make(struct jc_store *s);

/*
 * The filesystem check of jc__store_open() alone, for diagnostics: 0 when DIR
 * (borrowed) is on a local filesystem (an unknown FUSE one is logged as a
 * warning and accepted), JC_EINVAL with the filesystem named in err when it
 * is a network filesystem, JC_EIO when DIR cannot be opened or statfs fails.
 * Changes nothing; needs no lock. Thread-safe.
 */
int jc__store_check_local(const char *dir, char *err, size_t errlen);

/* Closes the descriptors and frees s. NULL-safe. No call on s may be running. */
void jc__store_close(struct jc_store *s);

/* The directory as given to jc__store_open(); owned by s, valid until close. */
const char *jc__store_dir(const struct jc_store *s);

/*
 * Publishes size bytes at data (borrowed) as an object and writes their
 * XXH3-128 (canonical) to hash_out. An existing object of that name that is a
 * regular file of the right size, owned by us and not writable by others is
 * kept (CAS dedupe: nothing is written); anything else there is replaced.
 * Returns 0, JC_ENOSPC (ENOSPC/EDQUOT at any step: nothing is left behind),
 * JC_EIO (errno in err), JC_EINVAL (s, hash_out NULL or data NULL with size).
 * When the directory fsync after the rename fails, JC_EIO is returned and
 * the complete object is left in place (a later put keeps it). Thread-safe:
 * concurrent puts, of the same content too, use distinct temporary files.
 */
int jc__store_put(struct jc_store *s, const void *data, size_t size, uint8_t hash_out[16],
		  char *err, size_t errlen);

/*
 * tmp/ (and quarantine/) removed or replaced while the store is open, as
 * cleaners of old empty directories do, is made again (0700, logged as a
 * warning) by the next call that needs it: jc__store_put,
 * jc__store_reserve_make and jc__store_quarantine retry once after ENOENT,
 * and this call checks it for tools given the path DIR/tmp (fatbinary's
 * TMPDIR) before they start. Returns 0 (tmp/ is there and the store's),
 * JC_EIO when it cannot be made again (logged; a link or another's directory
 * in its place is never used). Thread-safe.
 */
int jc__store_tmp_check(struct jc_store *s);

/*
 * Opens object hash for serving, cheaply (fstat, no read):
 * open(O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK), then checks it is a
 * regular file owned by the effective uid, not writable by group or others,
 * of expected_size bytes. O_NONBLOCK stays set (no effect on regular files;
 * it keeps a FIFO planted there from blocking the open).
 * *fd_out: on success a descriptor owned by the caller; -1 on failure.
 * Returns 0, JC_ENOTFOUND (no such object), JC_ECORRUPT (a symlink, or a
 * failed check: logged with the reason), JC_EIO (other open/fstat errors).
 * The caller decides what to do with a corrupt object (jc__store_quarantine).
 * Thread-safe.
 */
int jc__store_open_object(struct jc_store *s, const uint8_t hash[16], uint64_t expected_size,
			  int *fd_out);

/*
 * 1 when the object file of hash, not followed, is still the file st
 * describes (a descriptor of it opened earlier: same device and inode) and
 * still passes jc__store_open_object's checks (a regular file of ours, not
 * writable by group or others, of expected_size bytes), else 0 (removed,
 * replaced, a link, chowned, chmodded, truncated or grown). One fstatat.
 * Thread-safe.
 */
int jc__store_object_is(struct jc_store *s, const uint8_t hash[16], uint64_t expected_size,
			const struct stat *st);

/*
 * Full check of an open object descriptor (borrowed, offset not used): reads
 * every byte with pread, checks there are exactly expected_size of them and
 * that their XXH3-128 is hash. Returns 0, JC_ECORRUPT, JC_EIO (read error),
 * JC_ENOMEM. Thread-safe.
 */
int jc__store_verify_fd(int fd, const uint8_t hash[16], uint64_t expected_size);

/*
 * Reads a whole object: jc__store_open_object() then the checks of
 * jc__store_verify_fd(), done on the bytes read. *data: malloc'd (at least
 * one byte, even for an empty object), owned by the caller (free()); *size =
 * expected_size. Both are left untouched on failure. Returns 0, JC_ENOTFOUND,
 * JC_ECORRUPT, JC_EIO, JC_ENOMEM (also when expected_size does not fit in
 * memory). Thread-safe.
 */
int jc__store_read_object(struct jc_store *s, const uint8_t hash[16], uint64_t expected_size,
			  uint8_t **data, size_t *size);

/*
 * Moves objects/ab/<hash> to quarantine/<hash>.<unix time>.<pid>.<n> (n counts
 * this process's quarantines, so none replaces an earlier one), or unlinks
 * it when the move fails, and logs a warning. Returns 0, JC_ENOTFOUND (no
 * such object), JC_EIO (could neither move nor unlink). Thread-safe.
 * Nothing prunes quarantine/: it is for people to inspect and delete.
 */
int jc__store_quarantine(struct jc_store *s, const uint8_t hash[16]);

/* Unlinks object hash, and its fan-out directory when that is left empty.
 * Returns 0, JC_ENOTFOUND, JC_EIO. Thread-safe. */
int jc__store_remove(struct jc_store *s, const uint8_t hash[16]);

/*
 * Walks objects/ (both levels, in directory order) and calls cb for each
 * entry with its path ("DIR/objects/ab/<name>", borrowed for the call), the
 * lstat() result, and the hash parsed from the name, or hash NULL when the
 * name is not a canonical object name (not 32 lowercase hex digits, or in the
 * wrong "ab" directory, or anything but a two-hex-digit directory directly
 * under objects/). Entries that vanish during the walk are skipped. cb may
 * remove the entry it is given. A non-zero return from cb stops the walk and
 * is returned. Otherwise returns 0, JC_EIO (a directory cannot be read),
 * JC_ENOMEM. Thread-safe (cb runs on the calling thread).
 */
int jc__store_foreach(struct jc_store *s,
		      int (*cb)(const uint8_t *hash, const char *path, const struct stat *st,
				void *ctx),
		      void *ctx);

/*
 * What DIR holds besides the entries' objects, in bytes of disk (st_blocks):
 * DIR itself, the index's -wal and -shm (its rows are in the entries'
 * charges, index.h), the reserve, the lock, the
 * socket pointer and an auto-started daemon's log, tmp/, quarantine/,
 * manifests/ and worker-cwd/ with what they hold, and the directories
 * objects/ and objects/ab/ themselves. Counted in the budget
 * beside the entries' charges (evict.h). Always 0 (what cannot be read
 * counts nothing). Thread-safe; a walk of manifests/, for the thread pool.
 */
int jc__store_overhead(struct jc_store *s, uint64_t *out);

/*
 * Free space, in bytes, available to an unprivileged user on the filesystem
 * of DIR (statvfs f_bavail * f_frsize) into *out. Returns 0 or JC_EIO.
 * Thread-safe.
 */
int jc__store_free_bytes(struct jc_store *s, uint64_t *out);

#endif
