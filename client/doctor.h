/* SPDX-License-Identifier: MIT */
#ifndef JC_DOCTOR_H
#define JC_DOCTOR_H

/*
 * `jitcachectl doctor`: the seed document's run-time checklist (device,
 * compute capability, driver, NVRTC/nvJitLink, supported architectures,
 * cache health, daemon reachable). Prints one line per check; returns the
 * exit status (0 when nothing failed). Arguments borrowed, may be NULL.
 */
int jc__doctor(const char *socket_path, const char *cache_dir);

#endif
