/* SPDX-License-Identifier: MIT */
/* What store.c and store_dir.c share; private to the store (core/store.h is
 * its interface). */
#ifndef JC_STORE_DIR_H
#define JC_STORE_DIR_H

#include <dirent.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

struct jc_store {
	char *dir;
	int dirfd, objfd, tmpfd, quarfd;
	uid_t uid;
	atomic_uint seq;		/* distinct temp and quarantine names across threads */
	_Atomic uint64_t reserve_bytes; /* the size DIR/reserve is made with */
};

/* Every directory of the store is 0700 and every file the daemon opens by
 * name 0600: the store belongs to the daemon's uid alone (clients are given
 * descriptors). */
#define DIR_MODE  0700
#define FILE_MODE 0600
#define RESERVE	  "reserve"

/* mkdir -p: path's parents and path itself, each with mode; 0, or -1 with
 * errno (ENAMETOOLONG past 4095 bytes). Thread-safe. */
int jc__store_mkdir_p(const char *path, mode_t mode);

/* jc__store_check_local() on an open directory descriptor fd (borrowed; dir
 * names it in messages): 0 on a local filesystem, JC_EINVAL (network
 * filesystem, named in err), JC_EIO (statfs failed). Thread-safe. */
int jc__store_check_local_fd(int fd, const char *dir, char *err, size_t errlen);

/* opendir of name under parent without following a link; NULL with errno. */
DIR *jc__store_open_dir(int parent, const char *name);

/* 1 for "." and "..". */
int jc__store_is_dots(const char *n);

#endif
