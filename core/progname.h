/* SPDX-License-Identifier: MIT */
/*
 * Whether a name-free request's program name (req.h name_free) reached its
 * result. NVRTC's program name enters an artifact only as text: __FILE__,
 * __BASE_FILE__ and __FILE_NAME__ (an assert, a logging macro or a
 * __builtin_FILE() default argument of a header, expanded in the source),
 * and the names of internal-linkage entities (an anonymous namespace, a
 * static __device__ function), which NVRTC mangles with the name's last
 * component (_INTERNAL_00000000_5_x1_cu_... for ".../x1.cu"). The options
 * that record it otherwise (-G, -lineinfo, -dlto: LTO-IR is compressed, so
 * not searchable) and __FILE__ in the source or its in-memory headers never
 * come here: the shim sends those under their own name (shim/options.c,
 * shim.c). docs/shim.md, "Program names".
 */
#ifndef JC_PROGNAME_H
#define JC_PROGNAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/req.h"

/*
 * Looks for name (NVRTC's program name; "" stands for NVRTC's
 * "default_program") in the artifact (data, size bytes), the n_lowered
 * lowered names and the log (NUL-terminated or NULL): as given, as its last
 * '/' component, and as that component with every character but [A-Za-z0-9]
 * made '_' (internal-linkage mangling); in the artifact also as PTX writes
 * a string's bytes, in decimal ("{47, 116, 109, ...}").
 *
 * In the log, an occurrence of the whole name between characters that cannot
 * be part of a path (a diagnostic's "NAME(3): warning") is the program's: it
 * is replaced by JC_NAME_STANDIN. The name anywhere else in the log, or
 * JC_NAME_STANDIN already in it, makes the result name-bound.
 *
 * Returns 1 when the name is nowhere else: *log_out is then the log so
 * rewritten (malloc'd; NULL when log is NULL); 0 when it is (the result is
 * the name's alone; *log_out NULL); JC_ENOMEM. Thread-safe; borrows its
 * arguments.
 */
int jc__progname_free(const char *name, const uint8_t *data, size_t size,
		      const struct jc_lowered *lowered, size_t n_lowered, const char *log,
		      char **log_out);

#endif
