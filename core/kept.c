/* SPDX-License-Identifier: MIT */
/* Kept requests: see kept.h. */
#include "core/kept.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "jitcache/jitcache.h"

/* zstd's level for kept requests: sources and headers compress well at 3
 * already; higher levels cost the publish path more than they save. */
#define KEPT_ZSTD_LEVEL 3

int jc__kept_encode(const struct jc_req *r, uint8_t **out, size_t *len)
{
	struct jc_req own = *r; /* shallow: only the fields that are not the request's own change */
	memset(own.reject_object, 0, sizeof(own.reject_object));
	own.reject_reason = JC_REJECT_NONE;
	own.reject_message = NULL;
	own.test_fault = JC_FAULT_NONE;
	struct jc_buf b = {0};
	int rc = jc__encode_req(&b, &own);
	if (rc != 0) {
		jc__buf_free(&b);
		return rc;
	}
	size_t cap = ZSTD_compressBound(b.len);
	uint8_t *z = malloc(cap);
	if (!z) {
		jc__buf_free(&b);
		return JC_ENOMEM;
	}
	size_t n = ZSTD_compress(z, cap, b.data, b.len, KEPT_ZSTD_LEVEL);
	jc__buf_free(&b);
	if (ZSTD_isError(n)) {
		free(z);
		return JC_EIO;
	}
	*out = z;
	*len = n;
	return 0;
}

int jc__kept_decode(const uint8_t *data, size_t len, struct jc_req *out)
{
	memset(out, 0, sizeof(*out));
	unsigned long long n = ZSTD_getFrameContentSize(data, len);
	if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n < JC_FRAME_HDR)
		return JC_ECORRUPT;
	if (n > JC_KEPT_MAX)
		return JC_ETOOBIG;
	uint8_t *raw = malloc((size_t)n);
	if (!raw)
		return JC_ENOMEM;
	size_t got = ZSTD_decompress(raw, (size_t)n, data, len);
	uint16_t type;
	uint32_t plen;
	int rc = JC_ECORRUPT;
	if (!ZSTD_isError(got) && got == n && jc__frame_header_decode(raw, &type, &plen) == 0 &&
	    type == JC_MSG_COMPILE && (size_t)plen == got - JC_FRAME_HDR)
		rc = jc__decode_req(raw + JC_FRAME_HDR, plen, out) == 0 ? 0 : JC_ECORRUPT;
	free(raw);
	return rc;
}

uint32_t jc__kept_hash(const uint8_t *data, size_t len)
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
	return (uint32_t)c.digest[0] << 24 | (uint32_t)c.digest[1] << 16 |
	       (uint32_t)c.digest[2] << 8 | c.digest[3];
}

int jc__kept_store(struct jc_cachedir *c, const uint8_t key[16], uint32_t uid,
		   const struct jc_req *r, char *err, size_t errlen)
{
	uint8_t *z;
	size_t len;
	int rc = jc__kept_encode(r, &z, &len);
	if (rc != 0) {
		snprintf(err, errlen, "encoding the request: %s", jc_strerror(rc));
		return rc;
	}
	pthread_mutex_lock(&c->wlock);
	if ((rc = c->ops->keep_request(c, key, jc__kept_hash(z, len), uid, z, len)) != 0)
		snprintf(err, errlen, "index: %s", jc__cachedir_errmsg(c));
	pthread_mutex_unlock(&c->wlock);
	free(z);
	return rc;
}

int jc__kept_load(struct jc_cachedir *c, const struct jc_kept *k, struct jc_req *out)
{
	uint8_t *data;
	size_t size;
	int rc = c->ops->request_data(c, k->id, &data, &size);
	if (rc != 0)
		return rc;
	rc = jc__kept_decode(data, size, out);
	free(data);
	return rc;
}
