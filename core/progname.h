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
 * lowered names and the log (NUL-terminated or NULL): as given, its
 * directory, its last '/' component, and that component with every
 * character but [A-Za-z0-9] made '_' (internal-linkage mangling); in the artifact also as PTX
 * writes a string's bytes, in decimal ("{47, 116, 109, ...}").
 *
 * In the log, an occurrence of the whole name between characters that cannot
 * be part of a path (a diagnostic's "NAME(3): warning") is the program's: it
 * is replaced by JC_NAME_STANDIN. The name anywhere else in the log, or
 * JC_NAME_STANDIN already in it, counts as found.
 *
 * Returns 1 when no form is found (the result is every name's); 2 when only
 * the last component is (directly or mangled) and the name has a directory
 * (the directory is not found):
 * the result is every name's with that last component (CuPy names a
 * program after the same file in a fresh temporary directory); with 1 and 2,
 * *log_out is the log so rewritten (malloc'd; NULL when log is NULL). 0 when
 * the whole name is found, or its last component and it has no directory
 * (the result is the name's alone; *log_out NULL); JC_ENOMEM. Thread-safe;
 * borrows its arguments.
 */
int jc__progname_free(const char *name, const uint8_t *data, size_t size,
		      const struct jc_lowered *lowered, size_t n_lowered, const char *log,
		      char **log_out);

/* name's last '/' component (a pointer into name), "default_program" for "". */
const char *jc__progname_base(const char *name);

/*
 * The keys a name-free request's result may be stored under besides key
 * (its key without the name, or the key learnt in its place): full, key's
 * named key of name (jc__key_named), and base, that of name's last
 * component when name has a directory. Returns 2 (both written), 1 (only
 * full: no directory) or JC_ENOMEM. Thread-safe.
 */
int jc__progname_keys(const uint8_t key[16], const char *name, uint8_t base[16], uint8_t full[16]);

#endif
