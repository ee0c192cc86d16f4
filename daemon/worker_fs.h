/* SPDX-License-Identifier: MIT */
/*
 * What NVRTC may read in a compile worker, and what it did read (linked into
 * jitcache-worker only; see docs/ARCHITECTURE.md, "Dependency truth").
 *
 * Recording. worker_fs.c defines the libc file calls NVRTC 13.0 makes (its
 * dynamic imports: open, fopen, fopen64, __xstat, __lxstat, access, opendir;
 * plus open64, openat, stat, lstat and their 64-bit forms for libraries
 * built against a newer glibc). Symbols of the executable interpose those of
 * libc for every shared object, so NVRTC's calls land here first; the real
 * ones are found with dlsym(RTLD_NEXT). Between jc__wfs_begin() and
 * jc__wfs_end() every path passed to them becomes a struct jc_dep (req.h):
 * a regular file opened or found, a probe that found none, a directory
 * listed, or a refusal. Outside that window they only pass through.
 *
 * Policy (the same whether or not the kernel confines the process). During
 * the window a path is allowed when it lies under the toolkit tree (not
 * recorded: the toolkit identity in every key covers it) or under one of
 * the request's declared include directories: lexically after
 * joining a relative path to the working directory and dropping "." and
 * empty components, and again after realpath() (a symbolic link that leads
 * out is refused); never beneath the worker's own (empty) working
 * directory. Anything else is answered ENOENT without touching the
 * file system (JC_DEP_DENIED; no existence is revealed). An allowed path is
 * opened with O_NONBLOCK and checked with fstat/fstatfs: a FIFO, device,
 * socket, or a file on /proc or /sys is closed and answered EACCES
 * (JC_DEP_SPECIAL), so such a header can neither hold a worker nor leak
 * process state. Opens for writing are refused. Each refused open (and each
 * special file, also when only probed) adds one line "jitcache: refused
 * ...: REASON" to the compile log; refused stat/access probes add none (NVRTC
 * probes directories as a matter of course; real NVRTC's log stays as it is),
 * nor do opens beneath the working directory or, for a name-free request
 * (req.h), beneath the program name's directory (NVRTC's first look for a
 * quoted include, there empty as its client checked).
 *
 * Confinement (jc__wfs_confine, confine.h) adds the kernel's enforcement of
 * the same rule to the current process, irreversibly. The worker calls it in
 * a child forked for each job (worker.c): per-request directories need a
 * fresh process, and the child starts warm from its parent's NVRTC.
 *
 * Not thread-safe beyond NVRTC's own use: begin/end/confine are called by
 * the worker's one thread; the interposers lock for the record itself.
 */
#ifndef JC_WORKER_FS_H
#define JC_WORKER_FS_H

#include <stddef.h>

#include "common/req.h"
#include "core/confine.h"

/*
 * Sets the allowed roots (the toolkit tree toolkit_root, borrowed, and
 * req->include_dirs, copied) and starts recording. cwd is the worker's
 * working directory (for relative paths). Returns 0 or JC_ENOMEM.
 */
int jc__wfs_begin(const struct jc_req *req, const char *toolkit_root, const char *cwd);

/*
 * Stops recording and moves the record into res->deps (sorted by path, then
 * kind; duplicates dropped) and its refusals into res->log. Returns 0 or
 * JC_ENOMEM (res->status set).
 */
int jc__wfs_end(struct jc_res *res);

/*
 * jc__confine_apply() (confine.h) to the roots set by the last
 * jc__wfs_begin() and its working directory.
 */
int jc__wfs_confine(int mode, char *err, size_t errlen);

#endif
