/* SPDX-License-Identifier: MIT */
/*
 * Request bundles (jitcachectl export / import): kept requests
 * (core/kept.h) carried to another machine or a container image build.
 *
 * Format (self-describing; every integer little-endian):
 *   "jitcache-bundle 1\n"
 *   header lines "NAME VALUE\n": requests N, created UNIX-SECONDS,
 *     identity TOOLCHAIN-SUMMARY (the exporting daemon's), mac hmac-sha256,
 *     compression zstd
 *   "\n"
 *   N records: u32 size, then size bytes: one kept request (a
 *     zstd-compressed COMPILE frame, PROTOCOL.md)
 *   32 bytes: HMAC-SHA256 (libsodium crypto_auth_hmacsha256) of every byte
 *     before it, keyed with the secret.
 *
 * What the signature protects against: a bundle changed after it was
 * written (in an artifact store, a cache, a network hop) by anyone who does
 * not hold the secret, and a bundle made by such a one: import refuses it
 * before decoding anything, so nobody without the secret can get code
 * compiled on the importing machine in the importer's name. It does not
 * hide what the bundle holds (the sources are readable), and anyone with
 * the secret can sign any bundle: keep it as a CI secret.
 *
 * The secret: --secret-file FILE, else $XDG_CONFIG_HOME/jitcache/bundle.key
 * (~/.config/jitcache/bundle.key), which export makes (32 random bytes,
 * mode 0600) when it is missing. Not thread-safe (one caller).
 */
#ifndef JC_BUNDLE_H
#define JC_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/req.h"

#define JC_BUNDLE_MAGIC "jitcache-bundle 1\n"
/* The largest bundle read (bytes). */
#define JC_BUNDLE_MAX ((size_t)1 << 32)

/*
 * The secret of path (NULL: the default file above; create: make that
 * default when missing) into *key (malloc'd, caller frees) and *len (at
 * least 16 bytes, else an error). Returns 0, JC_ENOTFOUND, JC_EINVAL (too
 * short, or group/other may read it), JC_EIO, JC_ENOMEM; err says why.
 */
int jc__bundle_secret(const char *path, int create, uint8_t **key, size_t *len, char *err,
		      size_t errlen);

/*
 * Writes n kept requests (reqs[i].data, .size: borrowed) to path (replaced
 * atomically), signed with key. identity goes to the header. Returns 0,
 * JC_EIO, JC_ENOMEM; err says why.
 */
int jc__bundle_write(const char *path, const uint8_t *key, size_t key_len, const char *identity,
		     const struct jc_blob *reqs, size_t n, char *err, size_t errlen);

/*
 * Reads path, checks its signature with key, then its form, and decodes
 * every request (core/kept.h, jc__kept_decode) into *reqs (n of them,
 * malloc'd array, each jc__req_clear'ed and the array freed by the
 * caller). *identity (may be NULL): the exporter's identity, malloc'd.
 * Returns 0, JC_EDENIED (the signature does not match: tampered with or
 * another secret), JC_ECORRUPT (not a bundle, or a bad record), JC_EIO,
 * JC_ENOMEM, JC_ETOOBIG; err says why.
 */
int jc__bundle_read(const char *path, const uint8_t *key, size_t key_len, struct jc_req **reqs,
		    size_t *n, char **identity, char *err, size_t errlen);

#endif
