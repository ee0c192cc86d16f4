/* SPDX-License-Identifier: MIT */
/*
 * Identities of ELF libraries: the NVRTC, builtins, nvJitLink and nvFatbin
 * identities of the key (core/toolchain.h) and the identity of the NVRTC an
 * application loaded, which the client library sends with its requests
 * (req.h, nvrtc_id). "build-id:<hex>" from the NT_GNU_BUILD_ID note, else
 * "xxh128:<hex>" of the file's bytes. Thread-safe; they read files: not for
 * hot paths. Errors: 0 or a negative JC_E* code with a message in err
 * (errlen bytes, may be 0).
 */
#ifndef JC_ELF_ID_H
#define JC_ELF_ID_H

#include <stddef.h>
#include <stdint.h>

/* Scans an ELF note area (p, len bytes; align the segment's p_align) for
 * NT_GNU_BUILD_ID: 1 with "build-id:<hex>" in out[outlen] when found and it
 * fits, else 0. */
int jc__elf_notes_build_id(const uint8_t *p, size_t len, size_t align, char *out, size_t outlen);

/* "xxh128:<hex>" of the file at path into out[outlen]: 0, JC_EIO, JC_ENOMEM. */
int jc__file_hash_id(const char *path, char *out, size_t outlen, char *err, size_t errlen);

/* The identity of the ELF file at path (not loaded here): its build-id,
 * else its hash; "none" when it does not exist. 0, JC_EIO, JC_ENOMEM. */
int jc__file_identity(const char *path, char *out, size_t outlen, char *err, size_t errlen);

#endif
