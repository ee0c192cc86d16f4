/* SPDX-License-Identifier: MIT */
/*
 * Client-read include trees (client_internal.h; docs/team-daemon.md): the client scans its own
 * include directories with the daemon's scanner (common/includes.c) and sends what a compile may
 * read, as "I/REL" names of its -I directories, so that a daemon of another uid opens none of the
 * client's paths.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "client/client_internal.h"
#include "common/inc_lex.h"
#include "common/inc_memo.h"
#include "common/includes.h"
#include "common/util.h"
#include "common/watch.h"
#include "jitcache/jitcache.h"

/* As the daemon's scan (daemon/cache.c), and the frame holds the bytes. */
#define TREE_MAX_ENTRIES   200000
#define TREE_MAX_FILE_SIZE (64u << 20)
#define TREE_MEMO_FILES	   65536
/* inotify watches one client process may hold for its trees (a CCCL copy
 * needs about 1,700; fs.inotify.max_user_watches bounds all of a user's). */
#define TREE_MAX_WATCHES 16384

/* Reads path whole into *data (malloc'd) when its bytes still hash to
 * hash (jc__inc_file_hash); JC_EIO with a message otherwise, JC_ENOMEM. */
static int read_checked(const char *path, const uint8_t hash[16], uint8_t **data, size_t *size,
			char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > TREE_MAX_FILE_SIZE) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return jc__fail(err, errlen, JC_EIO, "cannot read include file %s: %s", path,
				fd >= 0 ? "not a regular file of at most 64 MiB" : strerror(e));
	}
	*size = (size_t)st.st_size;
	*data = malloc(*size ? *size : 1);
	ssize_t got = *data ? 0 : -1;
	while (got >= 0 && (size_t)got < *size) {
		ssize_t r = read(fd, *data + got, *size - (size_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		got = r <= 0 ? -1 : got + r;
	}
	close(fd);
	uint8_t now[16];
	int rc = got == (ssize_t)*size ? jc__inc_file_hash(path, *data, *size, NULL, now) : 0;
	if (rc != 0) {
		free(*data);
		*data = NULL;
		return jc__fail(err, errlen, rc, "out of memory reading %s", path);
	}
	if (got != (ssize_t)*size || memcmp(now, hash, 16) != 0) {
		free(*data);
		*data = NULL;
		return jc__fail(err, errlen, JC_EIO,
				"include file %s changed while it was sent; try again", path);
	}
	return 0;
}

struct jc_tree_cache {
	struct jc_inc_memo *memo; /* file hashes and references by stat identity */
	/* The client's manifest: the last request scanned (its fingerprint) and
	 * its include set, re-checked (stat calls) instead of scanned again. */
	uint8_t fp[16];
	int has_set;
	struct jc_inc_set set;
	/* The set's tree watched (common/watch.h): while its stamp is valid a
	 * request re-checks nothing. The watcher is made on first use, in the
	 * process that made it only: a child of fork() shares its inotify
	 * descriptor, and a read there would take the parent's events. */
	struct jc_watch *watch;
	pid_t watch_pid;
	int watch_off;	/* no inotify here, or JITCACHE_CLIENT_WATCHES=0 */
	uint64_t stamp; /* of set's tree; 0 = not watched */
	/* The key digest of set's tree (req.h, JC_TREE_DIGEST), while set is
	 * unchanged: a lookup sends these 16 bytes instead of every hash. */
	int has_digest;
	uint8_t digest[16];
};

/* Drops the watcher without reading its queue (closes this process's copy). */
static void watch_drop(struct jc_tree_cache *tc)
{
	jc__watch_free(tc->watch);
	tc->watch = NULL;
	tc->stamp = 0;
}

void jc__tree_cache_free(struct jc_tree_cache *tc)
{
	if (!tc)
		return;
	watch_drop(tc);
	jc__inc_memo_free(tc->memo);
	jc__inc_set_clear(&tc->set);
	free(tc);
}

/* The watcher of this process, made on first use; NULL without one. */
static struct jc_watch *watcher(struct jc_tree_cache *tc)
{
	if (tc->watch && tc->watch_pid != getpid())
		watch_drop(tc); /* inherited across fork() */
	if (tc->watch || tc->watch_off)
		return tc->watch;
	const char *v = secure_getenv("JITCACHE_CLIENT_WATCHES");
	char err[256];
	if ((v && strcmp(v, "0") == 0) ||
	    jc__watch_new(TREE_MAX_WATCHES, &tc->watch, err, sizeof(err)) != 0) {
		tc->watch_off = 1; /* every request re-checks its tree (stat calls) */
		return NULL;
	}
	tc->watch_pid = getpid();
	return tc->watch;
}

static void fp_add(XXH3_state_t *st, const void *p, size_t n)
{
	uint64_t len = n;
	XXH3_128bits_update(st, &len, sizeof(len));
	XXH3_128bits_update(st, p, n);
}

static void fp_strv(XXH3_state_t *st, const struct jc_strv *v)
{
	fp_add(st, &v->n, sizeof(v->n));
	for (size_t i = 0; i < v->n; i++)
		fp_add(st, v->v[i], strlen(v->v[i]));
}

/* What the scan of in depends on: its texts, names and options, and the
 * daemon's toolkit include tree (toolkit: "" for none). */
static int fingerprint(const char *toolkit, const struct jc_req *in, uint8_t fp[16])
{
	XXH3_state_t *st = XXH3_createState();
	if (!st || XXH3_128bits_reset(st) != XXH_OK) {
		XXH3_freeState(st);
		return JC_ENOMEM;
	}
	fp_add(st, in->source_name ? in->source_name : "",
	       in->source_name ? strlen(in->source_name) : 0);
	fp_add(st, in->source, in->source_size);
	fp_add(st, &in->n_headers, sizeof(in->n_headers));
	for (size_t i = 0; i < in->n_headers; i++) {
		fp_add(st, in->headers[i].name, strlen(in->headers[i].name));
		fp_add(st, in->headers[i].data, in->headers[i].size);
	}
	fp_strv(st, &in->options);
	fp_strv(st, &in->include_dirs);
	fp_add(st, toolkit, strlen(toolkit));
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	memcpy(fp, c.digest, 16);
	XXH3_freeState(st);
	return 0;
}

/* The include set of in: the cached one when in is the request it was
 * scanned for and its tree is watched and unchanged, or still matches the
 * files; else a new scan (then cached). The set is then watched. *walk_ns:
 * the time spent on the file system (0 when the watch answered). */
static int tree_set(struct jc_tree_cache *tc, const char *toolkit, const struct jc_req *in,
		    uint64_t *walk_ns, char *err, size_t errlen)
{
	const struct jc_inc_ctx ctx = {.memo = tc->memo,
				       .toolkit_root = toolkit,
				       .toolkit_refs = 1,
				       .max_entries = TREE_MAX_ENTRIES,
				       .max_file_size = TREE_MAX_FILE_SIZE};
	uint8_t fp[16];
	*walk_ns = 0;
	if (fingerprint(toolkit, in, fp) != 0)
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	int same = tc->has_set && memcmp(fp, tc->fp, 16) == 0;
	struct jc_watch *w = watcher(tc);
	if (same && tc->stamp && jc__watch_valid(w, tc->stamp))
		return 0;
	jc__watch_forget(w, tc->stamp);
	tc->stamp = 0;
	uint64_t t0 = jc__now_ns();
	int rc = jc__inc_dirs_check(&in->include_dirs, 1, err, errlen);
	if (rc == 0 && (!same || jc__inc_check(&tc->set, &ctx) != 1)) {
		jc__inc_set_clear(&tc->set);
		tc->has_set = 0;
		tc->has_digest = 0;
		rc = jc__inc_scan(in, &ctx, &tc->set, err, errlen);
		if (rc == 0) {
			memcpy(tc->fp, fp, 16);
			tc->has_set = 1;
		}
	}
	int why;
	if (rc == 0 && w)
		tc->stamp = jc__watch_checked(w, &tc->set, &ctx, &why);
	*walk_ns = jc__now_ns() - t0;
	return rc;
}

/* out's tree (a shallow copy of in plus the entries of tc's set; with bytes
 * the files' bytes, read again and checked against the scan's hashes). */
static int tree_blobs(const struct jc_tree_cache *tc, const struct jc_req *in, int bytes,
		      struct jc_req *out, char *err, size_t errlen)
{
	const struct jc_inc_set set = tc->set; /* borrowed */
	struct jc_inc_tops *tops = NULL;
	int rc = jc__inc_tops_new(&in->include_dirs, &tops);
	if (rc != 0)
		jc__fail(err, errlen, rc, "include dirs: %s", jc_strerror(rc));
	struct jc_blob *tree = NULL;
	size_t n = 0;
	for (size_t i = 0; rc == 0 && i < set.n; i++) {
		const struct jc_inc_entry *e = &set.v[i];
		size_t dir;
		char rel[PATH_MAX];
		/* A symlinked header travels as its bytes under the link's name
		 * (read with the client's rights); the target string stays here.
		 * An -I directory of the daemon's toolkit tree is named alone: it
		 * is compiled from the toolkit there (req.h, JC_TREE_TOOLKIT). */
		if (e->kind == JC_INC_LINK)
			continue;
		if (!jc__inc_tops_rel(tops, e->path, &dir, rel, sizeof(rel)) ||
		    (!rel[0] && e->kind != JC_INC_DIR && e->kind != JC_INC_TOOLKIT)) {
			rc = jc__fail(
			    err, errlen, JC_EINVAL,
			    "%s is outside the include directories (an "
			    "absolute #include, or a \"..\"): a daemon of another uid is sent only "
			    "files under -I directories",
			    e->path);
			break;
		}
		char name[PATH_MAX + 24];
		snprintf(name, sizeof(name), "%zu%s%s", dir, rel[0] ? "/" : "", rel);
		uint8_t *data = NULL;
		size_t size = 0;
		uint32_t type = e->kind == JC_INC_ABSENT    ? JC_TREE_ABSENT
				: e->kind == JC_INC_TOOLKIT ? JC_TREE_TOOLKIT
				: e->kind == JC_INC_DIR	    ? JC_TREE_DIR
				: bytes			    ? JC_TREE_FILE
							    : JC_TREE_HASH;
		if (type == JC_TREE_FILE)
			rc = read_checked(e->path, e->hash, &data, &size, err, errlen);
		int hashed = type == JC_TREE_HASH || type == JC_TREE_DIR;
		rc = rc
			 ?: jc__blob_push(&tree, &n, name, hashed ? e->hash : data,
					  hashed ? 16 : size, type);
		free(data);
		if (rc == JC_ENOMEM)
			jc__fail(err, errlen, rc, "out of memory");
	}
	jc__inc_tops_free(tops);
	out->tree = tree;
	out->n_tree = n;
	out->tree_round = bytes ? JC_TREE_BYTES : JC_TREE_LOOKUP;
	if (rc != 0)
		jc__req_tree_clear(out);
	return rc;
}

/* tc's digest of its set's tree, computed as the daemon keys a lookup
 * round's tree (common/inc_set.h: jc__inc_tree_set, jc__inc_key_digest). */
static int tree_digest(struct jc_tree_cache *tc, const struct jc_req *in, char *err, size_t errlen)
{
	struct jc_req view = *in;
	int rc = tree_blobs(tc, in, 0, &view, err, errlen);
	if (rc != 0)
		return rc;
	struct jc_inc_set keyed;
	rc = jc__inc_tree_set(&view, &keyed, err, errlen);
	rc = rc ?: jc__inc_key_digest(&keyed, &in->include_dirs, tc->digest);
	if (rc == JC_ENOMEM)
		jc__fail(err, errlen, rc, "out of memory");
	jc__inc_set_clear(&keyed);
	jc__req_tree_clear(&view);
	tc->has_digest = rc == 0;
	return rc;
}

int jc__tree_build(struct jc_tree_cache **cache, const char *toolkit, const struct jc_req *in,
		   int bytes, struct jc_req *out, uint64_t *walk_ns, char *err, size_t errlen)
{
	toolkit = toolkit ? toolkit : "";
	*out = *in;
	out->tree = NULL;
	out->n_tree = 0;
	if (!*cache && (!(*cache = calloc(1, sizeof(**cache))) ||
			jc__inc_memo_new(TREE_MEMO_FILES, &(*cache)->memo) != 0)) {
		jc__tree_cache_free(*cache);
		*cache = NULL;
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	}
	struct jc_tree_cache *tc = *cache;
	int rc = tree_set(tc, toolkit, in, walk_ns, err, errlen);
	if (rc != 0 || bytes)
		return rc ?: tree_blobs(tc, in, 1, out, err, errlen);
	if (!tc->has_digest && (rc = tree_digest(tc, in, err, errlen)) != 0)
		return rc;
	out->tree_round = JC_TREE_DIGEST;
	memcpy(out->tree_digest, tc->digest, 16);
	return 0;
}
