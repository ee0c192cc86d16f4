/* SPDX-License-Identifier: MIT */
/*
 * Include manifests, like ccache's direct mode: for a request that reads
 * headers from disk, the "direct key" (jc__key_compute: everything but the
 * content of those headers) names a manifest holding up to
 * JC_MANIFEST_VARIANTS include sets (includes.h), newest first. A lookup
 * re-checks each variant against the file system (stat calls and memoised
 * hashes); the first that matches gives the full key
 * (jc__key_with_tree(direct, set.digest)). Only when none matches does the
 * daemon scan again and add the new variant.
 *
 *   DIR/manifests/ab/<32 hex of the direct key>
 *
 * File format (integers little-endian):
 *   "JCMF" | u32 version (1) | u64 body length | 16 bytes XXH3-128 of the body | body
 *   body: u32 variants, then per variant: u32 entries, then per entry:
 *         u8 kind | u32 path length | path | 16-byte hash (FILE and DIR only)
 * A manifest that is short, oversized, of another version or fails its hash
 * is ignored (and replaced by the next add): losing one costs a scan, never a
 * wrong key, since every variant is re-checked before use. Files are written
 * to a temporary name and renamed; they are not fsynced, for the same reason.
 *
 * Thread-safety: every function may be called from any thread; adds to one
 * store are serialised by a mutex so concurrent adds do not lose variants.
 * Errors: 0 / 1 or a negative JC_E* code, message in err where taken.
 */
#ifndef JC_MANIFEST_H
#define JC_MANIFEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/includes.h"

#define JC_MANIFEST_VARIANTS  8
#define JC_MANIFEST_MAX_BYTES (64u << 20)

struct jc_manifests;

/*
 * Opens (creating with mode, e.g. 0700 or 02770) DIR/manifests. cache_dir is
 * borrowed. *out is owned by the caller (jc__manifests_close, NULL-safe).
 * Returns 0, JC_EIO (mkdir failed: errno in err), JC_ENOMEM.
 */
int jc__manifests_open(const char *cache_dir, mode_t mode, struct jc_manifests **out, char *err,
		       size_t errlen);
void jc__manifests_close(struct jc_manifests *m);

/*
 * Looks for a variant of the manifest of direct that matches the file system
 * now (jc__inc_check). Returns 1 with *out filled (owned by the caller:
 * jc__inc_set_clear; its st and unsettled fields are fresh), 0 when there is
 * no manifest or no variant matches (*out zeroed), JC_ENOMEM. n_stat gets
 * the stat calls of every variant tried (also on 0). ctx is borrowed.
 */
int jc__manifest_lookup(struct jc_manifests *m, const uint8_t direct[16],
			const struct jc_inc_ctx *ctx, struct jc_inc_set *out, uint64_t *n_stat);

/* 1 when direct has a manifest file (valid or not: no read), else 0; a stat
 * call. For deciding, before a lookup, whether one can match. */
int jc__manifest_exists(const struct jc_manifests *m, const uint8_t direct[16]);

/*
 * Adds set (borrowed) as the newest variant of direct's manifest, dropping
 * an identical older variant and any beyond JC_MANIFEST_VARIANTS. Returns 0,
 * JC_ETOOBIG (the manifest would exceed JC_MANIFEST_MAX_BYTES), JC_EIO
 * (errno in err), JC_ENOMEM.
 */
int jc__manifest_add(struct jc_manifests *m, const uint8_t direct[16], const struct jc_inc_set *set,
		     char *err, size_t errlen);

/*
 * One variant in the body's form above (u32 entries, then the entries),
 * for the remote tier's dependency records (daemon/remote.h), so that a
 * variant is written and read one way. jc__manifest_variant_encode: set
 * borrowed; *out malloc'd (*len bytes), owned by the caller; 0 or
 * JC_ENOMEM. jc__manifest_variant_decode: p (len bytes, borrowed) must be
 * exactly one variant of at most max_entries entries; *set (zeroed first,
 * owned by the caller: jc__inc_set_clear) is finished (sorted, digest), its
 * entries unchecked against the file system (jc__inc_check); 0,
 * JC_ECORRUPT (malformed, trailing bytes, too many entries) or JC_ENOMEM.
 * Thread-safe.
 */
int jc__manifest_variant_encode(const struct jc_inc_set *set, uint8_t **out, size_t *len);
int jc__manifest_variant_decode(const uint8_t *p, size_t len, uint64_t max_entries,
				struct jc_inc_set *set);

#endif
