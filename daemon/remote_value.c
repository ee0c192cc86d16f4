/* SPDX-License-Identifier: MIT */
/*
 * Values of the remote tier: encoding and every check of a fetched value.
 * The layout is described in remote.h. And the secrets they are signed
 * with (and a backend's password): read from their files, wiped when freed
 * (remote_backend.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader */
#include <zstd.h>

#include "common/log.h"
#include "core/hmac.h"
#include "core/manifest.h"
#include "daemon/remote.h"
#include "daemon/remote_backend.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

#define HDR	    48
#define MAC	    JC_HMAC_LEN
#define FLAG_SIGNED 1u
#define FLAG_RECORD 2u /* a dependency record, not a value */
#define ZSTD_LEVEL  3

static const uint8_t magic[4] = {'J', 'C', 'R', 'V'};

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The envelope of a value or a dependency record (remote.h): header, meta,
 * the zstd frame of payload, and the MAC when signed. */
static int seal(const uint8_t key[16], uint32_t kind, const uint8_t *payload, size_t payload_len,
		const char *meta, const uint8_t *secret, size_t secret_len, uint64_t max,
		uint8_t **out, size_t *outlen)
{
	size_t mlen = meta ? strnlen(meta, JC_REMOTE_META_MAX) : 0;
	size_t bound = ZSTD_compressBound(payload_len);
	size_t cap = HDR + mlen + bound + (secret ? MAC : 0);
	uint8_t *v = malloc(cap);
	if (!v)
		return JC_ENOMEM;
	/* With its content checksum (XXH64, checked by ZSTD_decompress): the
	 * lowered names and log are covered as well as the artifact. */
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	size_t zlen = cctx ? ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL) : 0;
	if (cctx && !ZSTD_isError(zlen))
		zlen = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	if (cctx && !ZSTD_isError(zlen))
		zlen = ZSTD_compress2(cctx, v + HDR + mlen, bound, payload, payload_len);
	ZSTD_freeCCtx(cctx);
	if (!cctx)
		zlen = (size_t)-1;
	if (ZSTD_isError(zlen)) {
		free(v);
		return JC_ENOMEM;
	}
	memcpy(v, magic, 4);
	put32(v + 4, JC_REMOTE_VERSION);
	memcpy(v + 8, key, 16);
	put32(v + 24, (secret ? FLAG_SIGNED : 0) | kind);
	put32(v + 28, (uint32_t)mlen);
	put64(v + 32, payload_len);
	put64(v + 40, zlen);
	if (mlen)
		memcpy(v + HDR, meta, mlen);
	size_t n = HDR + mlen + zlen;
	if (secret) {
		jc__hmac_sha256(v, n, secret, secret_len, v + n);
		n += MAC;
	}
	if (n > max) {
		free(v);
		return JC_ETOOBIG;
	}
	*out = v;
	*outlen = n;
	return 0;
}

int jc__remote_value_encode(const uint8_t key[16], const uint8_t *frame, size_t frame_len,
			    const char *meta, const uint8_t *secret, size_t secret_len,
			    uint64_t max, uint8_t **out, size_t *outlen)
{
	return seal(key, 0, frame, frame_len, meta, secret, secret_len, max, out, outlen);
}

int jc__remote_record_encode(const uint8_t lookup[16], const uint8_t *variant, size_t len,
			     const char *meta, const uint8_t *secret, size_t secret_len,
			     uint64_t max, uint8_t **out, size_t *outlen)
{
	return seal(lookup, FLAG_RECORD, variant, len, meta, secret, secret_len, max, out, outlen);
}

int jc__remote_record_hint(const uint8_t *val, size_t len, uint8_t key[16])
{
	static const char tag[] = "key=";
	if (len < HDR || memcmp(val, magic, 4) != 0 || !(get32(val + 24) & FLAG_RECORD))
		return 0;
	uint32_t mlen = get32(val + 28);
	if (mlen < sizeof(tag) - 1 + 32 || mlen > JC_REMOTE_META_MAX ||
	    HDR + (uint64_t)mlen > len || memcmp(val + HDR, tag, sizeof(tag) - 1) != 0)
		return 0;
	char hex[33];
	memcpy(hex, val + HDR + sizeof(tag) - 1, 32);
	hex[32] = '\0';
	return jc__unhex16(hex, key) == 0;
}

static int reject(char *why, size_t whylen, const char *what)
{
	snprintf(why, whylen, "%s", what);
	return JC_ECORRUPT;
}

/* Checks a fetched envelope of kind (0: value, FLAG_RECORD) for key and
 * decompresses its payload into *body (malloc'd, *raw bytes, at most
 * raw_max). Returns 0 or JC_ECORRUPT with the reason in why. */
static int unseal(const uint8_t key[16], uint32_t kind, const uint8_t *val, size_t len,
		  const uint8_t *secret, size_t secret_len, uint64_t max, uint64_t raw_max,
		  uint8_t **body, uint64_t *raw, char *why, size_t whylen)
{
	if (len > max)
		return reject(why, whylen, "larger than --remote-max-object");
	if (len < HDR || memcmp(val, magic, 4) != 0)
		return reject(why, whylen, "not a jitcache value (magic)");
	if (get32(val + 4) != JC_REMOTE_VERSION)
		return reject(why, whylen, "unknown format version");
	if (memcmp(val + 8, key, 16) != 0)
		return reject(why, whylen, "the value belongs to another key");
	uint32_t flags = get32(val + 24), mlen = get32(val + 28);
	uint64_t zlen = get64(val + 40);
	*raw = get64(val + 32);
	size_t maclen = flags & FLAG_SIGNED ? MAC : 0;
	if (flags & ~(FLAG_SIGNED | FLAG_RECORD))
		return reject(why, whylen, "unknown flags");
	if ((flags & FLAG_RECORD) != kind)
		return reject(why, whylen,
			      kind ? "a value, not a dependency record"
				   : "a dependency record, not a value");
	if (mlen > JC_REMOTE_META_MAX || zlen > len || *raw > raw_max ||
	    (uint64_t)HDR + mlen + zlen + maclen != len)
		return reject(why, whylen, "lengths do not add up (truncated or padded)");
	if (secret) {
		uint8_t mac[MAC];
		if (!maclen)
			return reject(why, whylen, "unsigned (a secret is configured)");
		jc__hmac_sha256(val, len - MAC, secret, secret_len, mac);
		if (crypto_verify_32(mac, val + len - MAC) != 0)
			return reject(why, whylen, "bad signature");
	}
	const uint8_t *z = val + HDR + mlen;
	ZSTD_frameHeader fh;
	if (ZSTD_getFrameHeader(&fh, z, zlen) != 0 || fh.frameType != ZSTD_frame ||
	    fh.frameContentSize != *raw || !fh.checksumFlag)
		return reject(why, whylen,
			      "compressed frame does not declare its size and checksum");
	if (!(*body = malloc(*raw ? *raw : 1)))
		return reject(why, whylen, "out of memory");
	size_t got = ZSTD_decompress(*body, *raw, z, zlen);
	if (ZSTD_isError(got) || got != *raw) {
		free(*body);
		*body = NULL;
		return reject(why, whylen, "compressed frame does not decode");
	}
	return 0;
}

int jc__remote_value_decode(const uint8_t key[16], const uint8_t *val, size_t len,
			    const uint8_t *secret, size_t secret_len, uint64_t max,
			    struct jc_res *res, char *why, size_t whylen)
{
	jc__res_init(res);
	uint8_t *body;
	uint64_t raw;
	int rc = unseal(key, 0, val, len, secret, secret_len, max,
			JC_FRAME_HDR + (uint64_t)JC_FRAME_MAX, &body, &raw, why, whylen);
	if (rc != 0)
		return rc;
	uint16_t type;
	uint32_t plen;
	rc = JC_ECORRUPT;
	if (raw < JC_FRAME_HDR || jc__frame_header_decode(body, &type, &plen) != 0 ||
	    type != JC_MSG_RESULT || plen != raw - JC_FRAME_HDR)
		snprintf(why, whylen, "not a result frame");
	else if (jc__decode_res(body + JC_FRAME_HDR, plen, res) != 0)
		snprintf(why, whylen, "result does not decode");
	else if (res->status != 0 || !res->data || !res->size || res->fd >= 0)
		snprintf(why, whylen, "result holds no artifact");
	else if (memcmp(res->key, key, 16) != 0)
		snprintf(why, whylen, "result names another key");
	else if (!jc__output_name(res->output))
		snprintf(why, whylen, "unknown output kind");
	else
		rc = 0;
	free(body);
	if (rc == 0) {
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits(res->data, res->size));
		if (memcmp(c.digest, res->object, 16) != 0) {
			snprintf(why, whylen, "artifact does not hash to its object name");
			rc = JC_ECORRUPT;
		}
	}
	if (rc != 0)
		jc__res_clear(res);
	return rc;
}

int jc__remote_value_small(const uint8_t *val, size_t len)
{
	return len >= HDR && len <= JC_REMOTE_DECODE_INLINE &&
	       get64(val + 32) <= JC_REMOTE_DECODE_INLINE;
}

int jc__remote_record_decode(const uint8_t lookup[16], const uint8_t *val, size_t len,
			     const uint8_t *secret, size_t secret_len, uint64_t max,
			     uint64_t max_entries, struct jc_inc_set *set, char *why, size_t whylen)
{
	uint8_t *body;
	uint64_t raw;
	memset(set, 0, sizeof(*set));
	int rc = unseal(lookup, FLAG_RECORD, val, len, secret, secret_len, max,
			JC_MANIFEST_MAX_BYTES, &body, &raw, why, whylen);
	if (rc != 0)
		return rc;
	rc = jc__manifest_variant_decode(body, raw, max_entries, set);
	free(body);
	if (rc == JC_ECORRUPT)
		snprintf(why, whylen, "dependency record does not decode");
	else if (rc == JC_ENOMEM)
		snprintf(why, whylen, "out of memory");
	return rc;
}

/* --- secrets -------------------------------------------------------------- */

void jc__remote_secret_free(uint8_t *secret, size_t len)
{
	if (secret)
		sodium_memzero(secret, len);
	free(secret);
}

int jc__remote_read_small(const char *path, size_t max, uint8_t **out, size_t *len, char *err,
			  size_t errlen, const char *what)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return JC_EINVAL;
	}
	if (st.st_mode & 077)
		jc_log_warn(REMOTE, "%s %s is readable or writable by others (mode %04o)", what,
			    path, (unsigned)(st.st_mode & 07777));
	uint8_t *buf = malloc(max + 1);
	ssize_t n = buf ? read(fd, buf, max + 1) : -1;
	close(fd);
	if (n < 0 || (size_t)n > max) {
		snprintf(err, errlen, "%s %s: %s", what, path,
			 n < 0 ? "cannot read it" : "too large");
		free(buf);
		return JC_EINVAL;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	*out = buf;
	*len = (size_t)n;
	return 0;
}
