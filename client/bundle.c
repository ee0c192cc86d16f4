/* SPDX-License-Identifier: MIT */
/* Request bundles: see bundle.h. */
#include "client/bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "core/hmac.h"
#include "core/kept.h"
#include "jitcache/jitcache.h"

#define MAC_LEN	   JC_HMAC_LEN
#define SECRET_LEN 32

static int default_secret_path(char *out, size_t len)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	if (xdg && *xdg)
		return snprintf(out, len, "%s/jitcache/bundle.key", xdg) >= (int)len ? -1 : 0;
	if (home && *home)
		return snprintf(out, len, "%s/.config/jitcache/bundle.key", home) >= (int)len ? -1
											      : 0;
	return -1;
}

/* Makes path's missing parent directories (0700). */
static void make_parents(const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(dir, 0700);
		*p = '/';
	}
}

static int read_whole(const char *path, uint8_t **data, size_t *size, size_t max, char *err,
		      size_t errlen)
{
	/* O_NONBLOCK: a FIFO is refused below, not waited on for a writer (a
	 * regular file's reads ignore the flag). */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0)
		return jc__fail(err, errlen, errno == ENOENT ? JC_ENOTFOUND : JC_EIO,
				"cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return jc__fail(err, errlen, JC_EIO, "%s: not a regular file of at most %zu bytes",
				path, max);
	}
	uint8_t *buf = malloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (buf && got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (!buf || got != (size_t)st.st_size) {
		free(buf);
		return jc__fail(err, errlen, buf ? JC_EIO : JC_ENOMEM, "cannot read %s", path);
	}
	*data = buf;
	*size = got;
	return 0;
}

int jc__bundle_secret(const char *path, int create, uint8_t **key, size_t *len, char *err,
		      size_t errlen)
{
	char def[PATH_MAX];
	if (!path) {
		if (default_secret_path(def, sizeof(def)) != 0)
			return jc__fail(err, errlen, JC_EINVAL,
					"no secret file: give --secret-file "
					"(neither XDG_CONFIG_HOME nor HOME is set)");
		path = def;
	}
	struct stat st;
	if (stat(path, &st) != 0 && errno == ENOENT && create && path == def) {
		uint8_t secret[SECRET_LEN];
		if (sodium_init() < 0)
			return jc__fail(err, errlen, JC_EIO, "libsodium cannot start");
		randombytes_buf(secret, sizeof(secret));
		make_parents(path);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		int ok = fd >= 0 && write(fd, secret, sizeof(secret)) == (ssize_t)sizeof(secret);
		if (fd >= 0)
			ok &= close(fd) == 0;
		sodium_memzero(secret, sizeof(secret));
		if (!ok)
			return jc__fail(err, errlen, JC_EIO, "cannot make the secret %s: %s", path,
					strerror(errno));
		fprintf(stderr,
			"jitcachectl: made a new bundle secret %s (import needs the same: "
			"--secret-file)\n",
			path);
	}
	if (stat(path, &st) == 0 && (st.st_mode & 077))
		return jc__fail(err, errlen, JC_EINVAL,
				"secret %s may be read by others (mode %03o): "
				"chmod 600 it",
				path, (unsigned)(st.st_mode & 0777));
	int rc = read_whole(path, key, len, 1 << 20, err, errlen);
	if (rc == 0 && *len < 16) {
		sodium_memzero(*key, *len);
		free(*key);
		return jc__fail(err, errlen, JC_EINVAL,
				"secret %s holds %zu bytes: at least 16 are "
				"needed",
				path, *len);
	}
	if (rc == JC_ENOTFOUND)
		jc__fail(err, errlen, rc, "no secret %s: give the exporter's with --secret-file",
			 path);
	return rc;
}

int jc__bundle_write(const char *path, const uint8_t *key, size_t key_len, const char *identity,
		     const struct jc_blob *reqs, size_t n, char *err, size_t errlen)
{
	char *head = NULL;
	size_t head_len = 0, total;
	FILE *m = open_memstream(&head, &head_len);
	if (!m)
		return JC_ENOMEM;
	fprintf(m,
		"%srequests %zu\ncreated %" PRId64 "\nidentity %s\nmac hmac-sha256\n"
		"compression zstd\n\n",
		JC_BUNDLE_MAGIC, n, (int64_t)time(NULL), identity);
	if (fclose(m) != 0)
		return JC_ENOMEM;
	total = head_len + MAC_LEN;
	for (size_t i = 0; i < n; i++)
		total += 4 + reqs[i].size;
	uint8_t *buf = malloc(total), *p;
	if (!buf) {
		free(head);
		return JC_ENOMEM;
	}
	memcpy(buf, head, head_len);
	free(head);
	p = buf + head_len;
	for (size_t i = 0; i < n; i++) {
		uint32_t s = (uint32_t)reqs[i].size;
		for (int b = 0; b < 4; b++)
			*p++ = (uint8_t)(s >> (8 * b));
		memcpy(p, reqs[i].data, reqs[i].size);
		p += reqs[i].size;
	}
	jc__hmac_sha256(buf, (size_t)(p - buf), key, key_len, p);
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	size_t done = 0;
	while (fd >= 0 && done < total) {
		ssize_t w = write(fd, buf + done, total - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	int ok = fd >= 0 && done == total && fsync(fd) == 0;
	if (fd >= 0)
		ok &= close(fd) == 0;
	ok = ok && rename(tmp, path) == 0;
	free(buf);
	if (!ok) {
		int e = errno;
		unlink(tmp);
		return jc__fail(err, errlen, JC_EIO, "cannot write %s: %s", path, strerror(e));
	}
	return 0;
}

/* The value of header line name in head (len bytes), copied to out. */
static int header_value(const char *head, size_t len, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	for (const char *l = head; l < head + len;) {
		const char *e = memchr(l, '\n', (size_t)(head + len - l));
		if (!e)
			break;
		if ((size_t)(e - l) > nl && strncmp(l, name, nl) == 0 && l[nl] == ' ') {
			snprintf(out, cap, "%.*s", (int)(e - l - (ptrdiff_t)nl - 1), l + nl + 1);
			return 0;
		}
		l = e + 1;
	}
	return -1;
}

int jc__bundle_read(const char *path, const uint8_t *key, size_t key_len, struct jc_req **reqs,
		    size_t *n, char **identity, char *err, size_t errlen)
{
	uint8_t *buf, mac[MAC_LEN];
	size_t size;
	int rc = read_whole(path, &buf, &size, JC_BUNDLE_MAX, err, errlen);
	if (rc != 0)
		return rc;
	size_t magic = strlen(JC_BUNDLE_MAGIC);
	if (size < magic + MAC_LEN || memcmp(buf, JC_BUNDLE_MAGIC, magic) != 0) {
		free(buf);
		return jc__fail(err, errlen, JC_ECORRUPT,
				"%s is not a jitcache request bundle "
				"(version 1)",
				path);
	}
	/* The signature before anything else is believed. */
	jc__hmac_sha256(buf, size - MAC_LEN, key, key_len, mac);
	if (sodium_memcmp(mac, buf + size - MAC_LEN, MAC_LEN) != 0) {
		free(buf);
		return jc__fail(err, errlen, JC_EDENIED,
				"%s: the signature does not match: the "
				"bundle was changed after export, or signed with another secret; "
				"nothing imported",
				path);
	}
	size -= MAC_LEN;
	const uint8_t *end_head = NULL;
	for (size_t i = magic; i + 1 < size && !end_head; i++)
		if (buf[i] == '\n' && buf[i + 1] == '\n')
			end_head = buf + i + 2;
	char count[32], ident[1024] = "", *endp;
	size_t head_len = end_head ? (size_t)(end_head - buf) : 0;
	unsigned long long want = 0;
	if (!end_head ||
	    header_value((const char *)buf, head_len, "requests", count, sizeof(count)) ||
	    (want = strtoull(count, &endp, 10), *endp) || want > size / 4) {
		free(buf);
		return jc__fail(err, errlen, JC_ECORRUPT, "%s: bad bundle header", path);
	}
	header_value((const char *)buf, head_len, "identity", ident, sizeof(ident));
	struct jc_req *out = calloc(want ? want : 1, sizeof(*out));
	if (!out) {
		free(buf);
		return JC_ENOMEM;
	}
	const uint8_t *p = end_head;
	size_t i = 0;
	for (; rc == 0 && i < want; i++) {
		if ((size_t)(buf + size - p) < 4) {
			rc = JC_ECORRUPT;
			break;
		}
		uint32_t s = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			     (uint32_t)p[3] << 24;
		p += 4;
		if ((size_t)(buf + size - p) < s) {
			rc = JC_ECORRUPT;
			break;
		}
		rc = jc__kept_decode(p, s, &out[i]);
		p += s;
	}
	if (rc == 0 && p != buf + size)
		rc = JC_ECORRUPT;
	free(buf);
	if (rc != 0) {
		for (size_t k = 0; k < want; k++)
			jc__req_clear(&out[k]);
		free(out);
		return jc__fail(err, errlen, rc, "%s: request %zu of %llu: %s", path, i + 1, want,
				jc_strerror(rc));
	}
	*reqs = out;
	*n = want;
	if (identity)
		*identity = strdup(ident);
	return 0;
}
