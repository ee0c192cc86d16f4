/* SPDX-License-Identifier: MIT */
#ifndef JC_INSPECT_H
#define JC_INSPECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * `jitcachectl inspect`: prints what size bytes at data (borrowed) hold
 * (common/artifact.h) to f: one line per image (kind, target, PTX ISA,
 * sizes, compression, producer), then one per kernel (registers, static
 * shared memory, stack frame, launch bounds where the cubin says), or with
 * json one JSON object: {"source", "kind", "images": [{"kind", "target",
 * "ptx_isa", "size", "stored_size", "compression", "decoded", "producer",
 * "kernels": [{"name", "registers", "shared_bytes", "stack_bytes",
 * "max_threads"}]}]} (unknown numbers are -1, no launch bounds []).
 * source names the input in both (a path, or "key KEY"). Returns 0, or the
 * code of jc__artifact_parse with its message in err (errlen bytes).
 */
int jc__inspect_print(FILE *f, const char *source, const uint8_t *data, size_t size, int json,
		      char *err, size_t errlen);

#endif
