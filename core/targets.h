/* SPDX-License-Identifier: MIT */
/*
 * Target lists of multi-architecture requests ("sm_80,sm_90,compute_90",
 * output JC_OUTPUT_FATBIN): parsed and validated here, keyed by key.c; the
 * fatbin is built by the daemon (fatbin.h; docs/ARCHITECTURE.md, "Fatbins").
 */
#ifndef JC_TARGETS_H
#define JC_TARGETS_H

#include <stddef.h>
#include <stdint.h>

#define JC_TARGETS_MAX 16 /* targets in one list */
#define JC_TARGET_LEN  16 /* bytes of one target name, NUL included ("compute_100a") */

/* A parsed target list, in its order. */
struct jc_targets {
	size_t n;
	char v[JC_TARGETS_MAX][JC_TARGET_LEN];
};

/*
 * The architecture number of "sm_90", "sm_90a", "sm_100f" or "compute_90"
 * (90, 90, 100, 90); JC_EINVAL when arch is NULL or does not match
 * ^(sm|compute)_[0-9]{2,3}[af]?$. Thread-safe.
 */
int jc__arch_number(const char *arch);

/*
 * Splits a comma-separated target list: 1..JC_TARGETS_MAX targets, each of
 * jc__arch_number()'s form, no empty item, no target twice. list borrowed;
 * *t filled. Returns 0 or JC_EINVAL with a message naming the bad item in
 * err (errlen bytes). Thread-safe.
 */
int jc__targets_parse(const char *list, struct jc_targets *t, char *err, size_t errlen);

/* The output a target's part is made as: JC_OUTPUT_PTX for compute_NN, else
 * JC_OUTPUT_CUBIN. */
uint32_t jc__target_output(const char *target);

#endif
