/* SPDX-License-Identifier: MIT */
/*
 * Cache key derivation (docs/ARCHITECTURE.md, "The key"); requests are
 * validated first (request.h).
 *
 * key = XXH3-128 (seed 0) over a canonical encoding in which every item is
 *   u16 tag | u64 length | length bytes          (integers little-endian)
 * and every list is a count item (u64 count as 8 bytes) followed by its items.
 * Items, in this order:
 *   1. JC_KEY_FORMAT, job, output (u32 each)
 *   2. source name, source bytes; for a name-free request (req.h name_free)
 *      a TAG_NAME_FREE item in place of the name (existing encodings are
 *      unchanged by it: no format bump)
 *   3. in-memory headers sorted by name (strcmp): name, bytes for each
 *   4. the number of include_dirs; their paths and the CONTENT of what a
 *      compile reads from disk (or a client-read tree, req.h) enter through
 *      jc__key_with_tree() with jc__inc_key_digest() (see below and
 *      includes.h), so that the same bytes elsewhere share the key
 *   5. options, in the order given; an -I option (any form) as the index of
 *      its directory
 *   6. target architecture string, exactly as given ("sm_90a"); for fatbin
 *      output the target list as given, so its order is part of the key
 *   7. name expressions sorted (strcmp); duplicates kept, so "&f","&f" and
 *      "&f" are distinct keys (conservative: a miss, never a wrong hit)
 *   8. toolchain: nvrtc version, nvrtc id, builtins id, nvjitlink version,
 *      nvjitlink id, driver version, driver build, toolkit include tree id.
 *      nvJitLink enters for every job, also compile-only ones: one rule, and
 *      a toolkit update changes both.
 *   9. link inputs in order: type (u32), name, bytes; then link options in order
 *  10. app ABI string (NULL is "")
 *  11. fatbin output only: the fatbin tool's identity (toolchain.h fatbin_id)
 * A NULL string or NULL data of size 0 encodes as empty. Each item has its own
 * tag, so no two different requests share an encoding. Change anything here
 * and JC_KEY_FORMAT must be bumped.
 *
 * The key is stored and sent as XXH128_canonical_t (big-endian bytes);
 * jc__hex16() prints it.
 */
#ifndef JC_KEY_H
#define JC_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "common/req.h"
#include "core/request.h"
#include "core/toolchain.h"

#define JC_KEY_FORMAT 3

/*
 * Validates req (as jc__req_validate, same errors) and writes its key to
 * key[16]. tc comes from jc__toolchain_probe(). Returns 0, JC_EINVAL (message
 * in err) or JC_ENOMEM. Borrowed arguments; thread-safe (no globals).
 */
int jc__key_compute(const struct jc_req *req, const struct jc_toolchain *tc, uint8_t key[16],
		    char *err, size_t errlen);

/* jc__key_compute of a request that has passed jc__req_validate (the
 * daemon validates once, request.h, then keys): JC_ENOMEM or 0. */
int jc__key_of_valid(const struct jc_req *req, const struct jc_toolchain *tc, uint8_t key[16],
		     char *err, size_t errlen);

/*
 * The key of a request whose compile reads headers from disk: XXH3-128 over
 * the items JC_KEY_FORMAT, direct (the request's jc__key_compute() key, its
 * "direct key") and tree (the digest of its include set, includes.h), each
 * tagged as above. Returns 0 or JC_ENOMEM. Borrowed arguments; thread-safe.
 */
int jc__key_with_tree(const uint8_t direct[16], const uint8_t tree[16], uint8_t key[16]);

/*
 * The lookup key of a request that reads headers from disk: XXH3-128 over
 * JC_KEY_FORMAT, its direct key and its include directory strings, each
 * tagged as above, into out[16]. The direct key leaves the directories'
 * paths out (item 4), so this is what the daemon files manifests and memos
 * under: a manifest variant records absolute paths and is re-checked there,
 * so it must be looked up only for the same directories. Returns 0 or
 * JC_ENOMEM. Borrowed arguments; thread-safe.
 */
int jc__key_lookup(const uint8_t direct[16], const struct jc_strv *dirs, uint8_t out[16]);

/*
 * The key of a name-free request's result that turned out to hold its
 * program name (core/progname.h): XXH3-128 over JC_KEY_FORMAT, key (the
 * name-free key it was looked up under, or the key learnt in its place) and
 * name, each tagged, into out[16]. Returns 0 or JC_ENOMEM. Borrowed
 * arguments; thread-safe.
 */
int jc__key_named(const uint8_t key[16], const char *name, uint8_t out[16]);

#endif
