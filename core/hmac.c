/* SPDX-License-Identifier: MIT */
/* HMAC-SHA256: see hmac.h. */
#include "core/hmac.h"

#include <sodium.h>

_Static_assert(JC_HMAC_LEN == crypto_auth_hmacsha256_BYTES, "HMAC-SHA256 is 32 bytes");

void jc__hmac_sha256(const void *msg, size_t len, const uint8_t *key, size_t key_len,
		     uint8_t out[JC_HMAC_LEN])
{
	crypto_auth_hmacsha256_state st;
	crypto_auth_hmacsha256_init(&st, key, key_len);
	crypto_auth_hmacsha256_update(&st, msg, len);
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}
