/* SPDX-License-Identifier: MIT */
#ifndef JC_DOCTOR_H
#define JC_DOCTOR_H

/*
 * `jitcachectl doctor`: the run-time checklist (docs/ARCHITECTURE.md,
 * "Doctor"): NVRTC and nvJitLink (versions, identities, supported
 * architectures), the CUDA runtime, the driver (dlopen'ed libcuda.so.1:
 * version; each device's name, compute capability and UUID), whether this
 * driver can JIT-compile the PTX this NVRTC emits (by PTX ISA version, and by
 * cuModuleLoadData where a device exists), the daemon on socket_path and the
 * cache directory (local filesystem, owner and mode, free space against the
 * budget, index). Prints one "ok|info|warn|FAIL  text" line per check to
 * stdout; returns the exit status: 1 when a check failed, 0 otherwise (no
 * driver or no daemon is a warning). socket_path, cache_dir: borrowed, NULL
 * for the defaults. Not thread-safe (loads and unloads libcuda).
 */
int jc__doctor(const char *socket_path, const char *cache_dir);

#endif
