/* SPDX-License-Identifier: MIT */
/* Include manifests: see manifest.h for the contract and the file format. */
#include "core/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/util.h"
#include "jitcache/jitcache.h"

#define MAGIC	"JCMF"
#define VERSION 2  /* 2: LINK entries (symlinked headers) */
#define HEAD	32 /* magic, version, body length, body hash */

struct jc_manifests {
	char *dir;
	mode_t mode;
	pthread_mutex_t lock;
	unsigned long seq; /* temporary names, under lock */
};

int jc__manifests_open(const char *cache_dir, mode_t mode, struct jc_manifests **out, char *err,
		       size_t errlen)
{
	struct jc_manifests *m = calloc(1, sizeof(*m));
	if (!m || asprintf(&m->dir, "%s/manifests", cache_dir) < 0) {
		free(m);
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	}
	if (mkdir(m->dir, mode) != 0 && errno != EEXIST) {
		int rc = jc__fail(err, errlen, JC_EIO, "mkdir %s: %s", m->dir, strerror(errno));
		free(m->dir);
		free(m);
		return rc;
	}
	m->mode = mode;
	pthread_mutex_init(&m->lock, NULL);
	*out = m;
	return 0;
}

void jc__manifests_close(struct jc_manifests *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m->dir);
	free(m);
}

static void path_of(const struct jc_manifests *m, const uint8_t direct[16], char *buf, size_t len,
		    int subdir_only)
{
	char hex[33];
	jc__hex16(direct, hex);
	if (subdir_only)
		snprintf(buf, len, "%s/%.2s", m->dir, hex);
	else
		snprintf(buf, len, "%s/%.2s/%s", m->dir, hex, hex);
}

/* The body of the manifest of direct (malloc'd), or NULL when absent or invalid. */
static uint8_t *load(const struct jc_manifests *m, const uint8_t direct[16], size_t *len)
{
	char path[4200];
	path_of(m, direct, path, sizeof(path), 0);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	uint8_t head[HEAD], *body = NULL;
	uint64_t n = 0;
	struct stat st;
	/* Only a manifest the daemon wrote is read: a regular file of ours that
	 * nobody else can write. */
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & (S_IWGRP | S_IWOTH))) {
		close(fd);
		return NULL;
	}
	if (pread(fd, head, HEAD, 0) == HEAD && memcmp(head, MAGIC, 4) == 0 && head[4] == VERSION &&
	    !head[5] && !head[6] && !head[7]) {
		for (int i = 0; i < 8; i++)
			n |= (uint64_t)head[8 + i] << (8 * i);
		if (n <= JC_MANIFEST_MAX_BYTES && (body = malloc(n ? n : 1)) &&
		    pread(fd, body, n, HEAD) == (ssize_t)n) {
			uint8_t h[16];
			XXH128_canonical_t c;
			XXH128_canonicalFromHash(&c, XXH3_128bits(body, n));
			memcpy(h, c.digest, 16);
			if (memcmp(h, head + 16, 16) != 0) {
				free(body);
				body = NULL;
			}
		} else {
			free(body);
			body = NULL;
		}
	}
	close(fd);
	*len = (size_t)n;
	return body;
}

struct cursor {
	const uint8_t *p, *end;
};

static int get_u32(struct cursor *c, uint32_t *v)
{
	if (c->end - c->p < 4)
		return -1;
	*v = (uint32_t)c->p[0] | (uint32_t)c->p[1] << 8 | (uint32_t)c->p[2] << 16 |
	     (uint32_t)c->p[3] << 24;
	c->p += 4;
	return 0;
}

/* Decodes one variant at the cursor into *set (finished: sorted, digest),
 * of at most max entries. Returns 0, -1 (malformed) or JC_ENOMEM; the
 * caller clears *set. */
static int get_variant_max(struct cursor *c, struct jc_inc_set *set, uint64_t max)
{
	uint32_t n;
	memset(set, 0, sizeof(*set));
	if (get_u32(c, &n) != 0 || n > max)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t len;
		if (c->end - c->p < 1)
			return -1;
		uint8_t kind = *c->p++;
		if (kind < JC_INC_FILE || kind > JC_INC_LINK || get_u32(c, &len) != 0 ||
		    (size_t)(c->end - c->p) < len || len == 0 || memchr(c->p, 0, len))
			return -1;
		const char *path = (const char *)c->p;
		c->p += len;
		const uint8_t *hash = NULL;
		if (JC_INC_HASHED(kind)) {
			if (c->end - c->p < 16)
				return -1;
			hash = c->p;
			c->p += 16;
		}
		if (jc__inc_set_add(set, path, len, kind, hash) != 0)
			return JC_ENOMEM;
	}
	return jc__inc_set_finish(set);
}

static int get_variant(struct cursor *c, struct jc_inc_set *set)
{
	return get_variant_max(c, set, UINT32_MAX);
}

int jc__manifest_variant_decode(const uint8_t *p, size_t len, uint64_t max_entries,
				struct jc_inc_set *set)
{
	struct cursor c = {p, p + len};
	int rc = get_variant_max(&c, set, max_entries);
	if (rc == 0 && c.p != c.end)
		rc = -1;
	if (rc != 0)
		jc__inc_set_clear(set);
	return rc == -1 ? JC_ECORRUPT : rc;
}

int jc__manifest_exists(const struct jc_manifests *m, const uint8_t direct[16])
{
	char path[PATH_MAX];
	struct stat st;
	path_of(m, direct, path, sizeof(path), 0);
	return stat(path, &st) == 0;
}

int jc__manifest_lookup(struct jc_manifests *m, const uint8_t direct[16],
			const struct jc_inc_ctx *ctx, struct jc_inc_set *out, uint64_t *n_stat)
{
	size_t len;
	uint8_t *body = load(m, direct, &len);
	uint32_t nv = 0;
	int rc = 0;
	*n_stat = 0;
	memset(out, 0, sizeof(*out));
	struct cursor c = {body, body + len};
	if (!body || get_u32(&c, &nv) != 0)
		nv = 0;
	for (uint32_t i = 0; i < nv && rc == 0; i++) {
		int got = get_variant(&c, out);
		if (got == 0) {
			rc = jc__inc_check(out, ctx);
			*n_stat += out->n_stat;
		} else {
			rc = got == JC_ENOMEM ? JC_ENOMEM : 0;
			nv = 0; /* malformed: stop */
		}
		if (rc != 1)
			jc__inc_set_clear(out);
	}
	free(body);
	return rc;
}

static int put_bytes(uint8_t **buf, size_t *n, size_t *cap, const void *p, size_t len)
{
	if (*n + len > *cap) {
		size_t c = *cap ? *cap : 4096;
		while (c < *n + len)
			c *= 2;
		uint8_t *b = realloc(*buf, c);
		if (!b)
			return JC_ENOMEM;
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *n, p, len);
	*n += len;
	return 0;
}

static int put_u32(uint8_t **buf, size_t *n, size_t *cap, uint32_t v)
{
	uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
	return put_bytes(buf, n, cap, b, 4);
}

static int put_variant(uint8_t **buf, size_t *n, size_t *cap, const struct jc_inc_set *set)
{
	int rc = put_u32(buf, n, cap, (uint32_t)set->n);
	for (size_t i = 0; rc == 0 && i < set->n; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		uint32_t len = (uint32_t)strlen(e->path);
		rc = put_bytes(buf, n, cap, &e->kind, 1);
		rc = rc ?: put_u32(buf, n, cap, len);
		rc = rc ?: put_bytes(buf, n, cap, e->path, len);
		if (rc == 0 && JC_INC_HASHED(e->kind))
			rc = put_bytes(buf, n, cap, e->hash, 16);
	}
	return rc;
}

int jc__manifest_variant_encode(const struct jc_inc_set *set, uint8_t **out, size_t *len)
{
	size_t cap = 0;
	*out = NULL;
	*len = 0;
	int rc = put_variant(out, len, &cap, set);
	if (rc != 0) {
		free(*out);
		*out = NULL;
		*len = 0;
	}
	return rc;
}

/* Writes head + body to a temporary file and renames it over the manifest. */
static int store(struct jc_manifests *m, const uint8_t direct[16], const uint8_t *body, size_t n,
		 char *err, size_t errlen)
{
	char path[4200], tmp[4300];
	path_of(m, direct, path, sizeof(path), 1);
	if (mkdir(path, m->mode) != 0 && errno != EEXIST)
		return jc__fail(err, errlen, JC_EIO, "mkdir %s: %s", path, strerror(errno));
	path_of(m, direct, path, sizeof(path), 0);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%lu", path, (long)getpid(), m->seq++);
	uint8_t head[HEAD] = {'J', 'C', 'M', 'F', VERSION};
	for (int i = 0; i < 8; i++)
		head[8 + i] = (uint8_t)((uint64_t)n >> (8 * i));
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(body, n));
	memcpy(head + 16, c.digest, 16);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return jc__fail(err, errlen, JC_EIO, "create %s: %s", tmp, strerror(errno));
	int ok = write(fd, head, HEAD) == HEAD && write(fd, body, n) == (ssize_t)n;
	int saved = errno;
	ok &= close(fd) == 0;
	if (!ok || rename(tmp, path) != 0) {
		saved = ok ? errno : saved;
		unlink(tmp);
		return jc__fail(err, errlen, saved == ENOSPC ? JC_ENOSPC : JC_EIO, "write %s: %s",
				path, strerror(saved));
	}
	return 0;
}

int jc__manifest_add(struct jc_manifests *m, const uint8_t direct[16], const struct jc_inc_set *set,
		     char *err, size_t errlen)
{
	uint8_t *out = NULL;
	size_t n = 0, cap = 0, len = 0;
	uint32_t nv = 0, kept = 1;
	pthread_mutex_lock(&m->lock);
	uint8_t *body = load(m, direct, &len);
	struct cursor c = {body, body + len};
	if (!body || get_u32(&c, &nv) != 0)
		nv = 0;
	int rc = put_u32(&out, &n, &cap, 0); /* variant count, patched below */
	rc = rc ?: put_variant(&out, &n, &cap, set);
	for (uint32_t i = 0; rc == 0 && i < nv && kept < JC_MANIFEST_VARIANTS; i++) {
		const uint8_t *start = c.p;
		struct jc_inc_set old;
		int got = get_variant(&c, &old);
		if (got == 0 && memcmp(old.digest, set->digest, 16) != 0) {
			rc = put_bytes(&out, &n, &cap, start, (size_t)(c.p - start));
			kept++;
		}
		jc__inc_set_clear(&old);
		if (got == JC_ENOMEM)
			rc = JC_ENOMEM;
		else if (got != 0)
			break; /* the rest is malformed: drop it */
	}
	if (rc == 0 && n > JC_MANIFEST_MAX_BYTES)
		rc = jc__fail(err, errlen, JC_ETOOBIG, "include manifest over %u bytes",
			      JC_MANIFEST_MAX_BYTES);
	else if (rc == JC_ENOMEM)
		jc__fail(err, errlen, rc, "out of memory writing an include manifest");
	if (rc == 0) {
		out[0] = (uint8_t)kept, out[1] = (uint8_t)(kept >> 8);
		out[2] = (uint8_t)(kept >> 16), out[3] = (uint8_t)(kept >> 24);
		rc = store(m, direct, out, n, err, errlen);
	}
	pthread_mutex_unlock(&m->lock);
	free(body);
	free(out);
	return rc;
}
