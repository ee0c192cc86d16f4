/* SPDX-License-Identifier: MIT */
/*
 * Kernel confinement of a compile (docs/ARCHITECTURE.md, "Confinement"):
 * which kind this kernel offers, and applying it to the calling process.
 *
 * Landlock: a ruleset handling every file-system right the kernel's ABI
 * knows (ABI 1-7: execute, write, read, directories, every make_*, refer,
 * truncate, ioctl on devices), TCP bind and connect (ABI >= 4), and the
 * abstract-unix-socket and signal scopes (ABI >= 6); it grants reading files
 * and listing directories beneath each allowed root, reading
 * /etc/localtime, and nothing else. PR_SET_NO_NEW_PRIVS first.
 *
 * User + mount namespace (where Landlock is missing): unshare a user
 * namespace (our uid and gid mapped to themselves) and a mount namespace;
 * mount a small tmpfs over the (empty) working directory, bind every allowed
 * root and /etc/localtime read-only at its own path inside it, make an empty
 * directory at the working directory's own path, chroot into the tmpfs and
 * chdir there. Paths then mean what they meant outside; everything else is
 * gone.
 *
 * Both are irreversible: apply them in a process made for one job.
 */
#ifndef JC_CONFINE_H
#define JC_CONFINE_H

#include <stddef.h>

enum jc_confine {
	JC_CONFINE_NONE = 0, /* no kernel confinement (the worker's own policy still holds) */
	JC_CONFINE_LANDLOCK = 1,
	JC_CONFINE_USERNS = 2,
};

/* "none", "landlock", "userns"; NULL for another value. Thread-safe. */
const char *jc__confine_name(int mode);
/* The enum value of a name above, or -1. Thread-safe. */
int jc__confine_parse(const char *name);

/*
 * The best confinement this kernel lets the calling process apply: Landlock
 * when landlock_create_ruleset reports an ABI (*abi gets it, else 0), else
 * the namespaces when a forked child can enter them, else none; why (len
 * bytes) says what was found. Forks once; no other side effect.
 */
int jc__confine_detect(int *abi, char *why, size_t len);

/*
 * Confines the calling process to reading beneath roots[0..n_roots)
 * (absolute paths; missing ones are skipped). cwd is its working directory,
 * an empty directory (used by the namespace kind). mode is enum jc_confine;
 * NONE does nothing. Returns 0, or JC_EINTERNAL with a message in err when
 * the kernel refused (the caller must not go on unconfined).
 */
int jc__confine_apply(int mode, const char *const *roots, size_t n_roots, const char *cwd,
		      char *err, size_t errlen);

#endif
