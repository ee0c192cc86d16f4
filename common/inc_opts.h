/* SPDX-License-Identifier: MIT */
/*
 * The include search of a request (docs/ARCHITECTURE.md, "The key"): its
 * include options parsed and checked against the declared include
 * directories, and whether its compile may read files from disk at all.
 * Options are recognised one at a time by jc__inc_option (req.h).
 */
#ifndef JC_INC_OPTS_H
#define JC_INC_OPTS_H

#include <stddef.h>

#include "common/req.h"

/* The include search of a request, parsed from its options. */
struct jc_inc_path {
	const char **dirs; /* -I directories in option order; borrowed from the request */
	size_t n_dirs;
	const char **pre; /* pre-include names in option order; borrowed */
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
int jc__inc_path_parse(const struct jc_req *req, struct jc_inc_path *out, char *err, size_t errlen);
void jc__inc_path_clear(struct jc_inc_path *p);

/*
 * Refuses include directories under /proc, /sys or /dev, whose files are
 * process, kernel and device state and never headers: with resolve 0 by
 * their lexical form (".." folded; for directory names a client sends with
 * its files, which the daemon never opens), with resolve 1 as the kernel
 * resolves them (jc__path_reaches_kernel: symbolic links and /proc's own,
 * such as /proc/self/root, followed), for the side that reads them. 0, or
 * JC_EINVAL with a message naming the directory in err. Thread-safe.
 */
int jc__inc_dirs_check(const struct jc_strv *dirs, int resolve, char *err, size_t errlen);

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

/* Calls fn(text, size, ctx) for each in-memory text of req: the source,
 * then each header with data, in order, until fn returns non-zero; returns
 * that value, else 0. */
int jc__inc_each_text(const struct jc_req *req, int (*fn)(const char *t, size_t n, void *ctx),
		      void *ctx);

#endif
