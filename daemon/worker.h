/* SPDX-License-Identifier: MIT */
/*
 * The contract between jitcached (daemon/pool.c) and its compile workers
 * (daemon/worker.c) beyond the frames on fd 0: the command line and the exit
 * codes the daemon turns into client errors.
 *
 * The daemon starts it in an empty directory, DIR/worker-cwd (see
 * make_worker_cwd in pool.c: NVRTC resolves quoted includes relative to the
 * working directory). The worker refuses to start (JC_WORKER_EXIT_CWD)
 * unless that directory is empty, owned by its uid and not writable by
 * group or others.
 *
 * Command line: jitcache-worker [--memory-limit BYTES] [--confine MODE]
 *   MODE is none (default), landlock or userns (worker_fs.h, enum
 *   jc_confine): the kernel confinement applied before each job. A job
 *   whose confinement fails is answered JC_EINTERNAL, never run unconfined.
 *   BYTES (decimal, 0 = none) is the address space the worker may map beyond
 *   what it has mapped when it starts (its own code, libc, libnvrtc and
 *   libnvJitLink): it sets RLIMIT_AS to its VmSize at start plus BYTES. The
 *   limit is relative so that it means the same with and without
 *   AddressSanitizer, whose shadow memory reserves terabytes of address space
 *   before main() runs (an absolute RLIMIT_AS below that would stop the
 *   worker from mapping anything at all).
 */
#ifndef JC_WORKER_H
#define JC_WORKER_H

/* Exit codes of a worker (besides 0 when the daemon closes its pipe). */
enum {
	JC_WORKER_EXIT_USAGE = 2, /* bad command line */
	JC_WORKER_EXIT_NOMEM = 3, /* an allocation failed under its memory limit */
	JC_WORKER_EXIT_CWD = 4,	  /* the working directory is not private and empty */
};

#endif
