/* SPDX-License-Identifier: MIT */
/*
 * HMAC-SHA256 (libsodium's crypto_auth_hmacsha256, any key length): the one
 * definition the fleet tier's values (daemon/remote_value.c) and the
 * request bundles (client/bundle.c) are signed with. Thread-safe; libsodium
 * needs no sodium_init() for it.
 */
#ifndef JC_HMAC_H
#define JC_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define JC_HMAC_LEN 32

/* out = HMAC-SHA256 of msg (len bytes) under key (key_len bytes); all borrowed. */
void jc__hmac_sha256(const void *msg, size_t len, const uint8_t *key, size_t key_len,
		     uint8_t out[JC_HMAC_LEN]);

#endif
