/* SPDX-License-Identifier: MIT */
/* File identities and content hashes, memoised: see inc_memo.h for the contract. */
#include "common/inc_memo.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/inc_lex.h"
#include "common/util.h"
#include "jitcache/jitcache.h"

#define SETTLE_NS	 (100 * 1000000ll)  /* filesystems with sub-second timestamps */
#define SETTLE_COARSE_NS (2000 * 1000000ll) /* whole seconds (and FAT's 2 s) */

struct memo_ent {
	struct memo_ent *next;
	uint64_t h;
	char *path;
	int is_dir;
	struct jc_inc_stat id;
	uint8_t hash[16];
	uint8_t *refs;
	size_t refs_len;
};

struct jc_inc_memo {
	pthread_mutex_t lock;
	struct memo_ent **b;
	size_t nb, n, max;
};

int jc__inc_memo_new(size_t max_entries, struct jc_inc_memo **out)
{
	struct jc_inc_memo *m = calloc(1, sizeof(*m));
	if (!m)
		return JC_ENOMEM;
	m->max = max_entries ? max_entries : 1;
	for (m->nb = 64; m->nb < m->max; m->nb *= 2)
		;
	m->b = calloc(m->nb, sizeof(*m->b));
	if (!m->b) {
		free(m);
		return JC_ENOMEM;
	}
	pthread_mutex_init(&m->lock, NULL);
	*out = m;
	return 0;
}

static void memo_ent_free(struct memo_ent *e)
{
	free(e->path);
	free(e->refs);
	free(e);
}

static void memo_drop_all(struct jc_inc_memo *m)
{
	for (size_t i = 0; i < m->nb; i++)
		while (m->b[i]) {
			struct memo_ent *e = m->b[i];
			m->b[i] = e->next;
			memo_ent_free(e);
		}
	m->n = 0;
}

void jc__inc_memo_free(struct jc_inc_memo *m)
{
	if (!m)
		return;
	memo_drop_all(m);
	pthread_mutex_destroy(&m->lock);
	free(m->b);
	free(m);
}

int jc__inc_same_stat(const struct jc_inc_stat *a, const struct jc_inc_stat *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

static struct memo_ent **memo_slot(struct jc_inc_memo *m, const char *path, int is_dir, uint64_t h)
{
	struct memo_ent **p = &m->b[h & (m->nb - 1)];
	while (*p && ((*p)->h != h || (*p)->is_dir != is_dir || strcmp((*p)->path, path) != 0))
		p = &(*p)->next;
	return p;
}

/* 1 and the hash (and a copy of the refs when refs) on a hit; 0 on a miss. */
static int memo_get(struct jc_inc_memo *m, const char *path, int is_dir,
		    const struct jc_inc_stat *id, uint8_t hash[16], struct jc_inc_buf *refs)
{
	uint64_t h = XXH3_64bits(path, strlen(path));
	int hit = 0;
	pthread_mutex_lock(&m->lock);
	struct memo_ent *e = *memo_slot(m, path, is_dir, h);
	if (e && jc__inc_same_stat(&e->id, id)) {
		memcpy(hash, e->hash, 16);
		hit = !refs || jc__inc_buf_add(refs, e->refs, e->refs_len) == 0;
	}
	pthread_mutex_unlock(&m->lock);
	return hit;
}

/* Remembers a settled file or directory; a failure to allocate only costs a re-read. */
static void memo_put(struct jc_inc_memo *m, const char *path, int is_dir,
		     const struct jc_inc_stat *id, const uint8_t hash[16],
		     const struct jc_inc_buf *refs)
{
	struct memo_ent *e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->h = XXH3_64bits(path, strlen(path));
	e->path = strdup(path);
	e->is_dir = is_dir;
	e->id = *id;
	memcpy(e->hash, hash, 16);
	if (refs && refs->n && (e->refs = malloc(refs->n))) {
		memcpy(e->refs, refs->p, refs->n);
		e->refs_len = refs->n;
	}
	if (!e->path || (refs && refs->n && !e->refs)) {
		memo_ent_free(e);
		return;
	}
	pthread_mutex_lock(&m->lock);
	struct memo_ent **p = memo_slot(m, path, is_dir, e->h);
	if (*p) {
		struct memo_ent *old = *p;
		e->next = old->next;
		memo_ent_free(old);
		m->n--;
	} else if (m->n >= m->max) {
		memo_drop_all(m);
		p = memo_slot(m, path, is_dir, e->h);
	}
	*p = e;
	m->n++;
	pthread_mutex_unlock(&m->lock);
}

/* --- files and directories ---------------------------------------------------------- */

static int64_t ts_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void jc__inc_stat_of(const struct stat *st, struct jc_inc_stat *id)
{
	id->dev = (uint64_t)st->st_dev;
	id->ino = (uint64_t)st->st_ino;
	id->size = (uint64_t)st->st_size;
	id->mtime_ns = ts_ns(st->st_mtim);
	id->ctime_ns = ts_ns(st->st_ctim);
}

int64_t jc__inc_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts_ns(ts);
}

int jc__inc_unsettled(const struct jc_inc_stat *id, int64_t now)
{
	int coarse = id->mtime_ns % 1000000000 == 0 && id->ctime_ns % 1000000000 == 0;
	return id->ctime_ns >= now - (coarse ? SETTLE_COARSE_NS : SETTLE_NS);
}

int jc__inc_read_file(const char *path, uint64_t max, struct jc_inc_buf *out, struct jc_inc_stat *a,
		      struct jc_inc_stat *b, char *err, size_t errlen)
{
	/* O_NONBLOCK: a FIFO swapped in since the stat() must not hold us. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	int stat_ok = fd >= 0 && fstat(fd, &st) == 0;
	if (!stat_ok || !S_ISREG(st.st_mode)) {
		int rc = stat_ok ? jc__fail(err, errlen, JC_EIO,
					    "include scan: %s is not a regular file", path)
				 : jc__fail(err, errlen, JC_EIO, "include scan: open %s: %s", path,
					    strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	jc__inc_stat_of(&st, a);
	int rc = 0;
	if ((uint64_t)st.st_size > max)
		rc = jc__fail(err, errlen, JC_ETOOBIG, "include scan: %s has %lld bytes, over %llu",
			      path, (long long)st.st_size, (unsigned long long)max);
	uint8_t buf[65536];
	while (rc == 0) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = jc__fail(err, errlen, JC_EIO, "include scan: read %s: %s", path,
				      strerror(errno));
		else if (n == 0)
			break;
		else if (out->n + (size_t)n > max)
			rc = jc__fail(err, errlen, JC_ETOOBIG,
				      "include scan: %s grew over %llu bytes", path,
				      (unsigned long long)max);
		else if (jc__inc_buf_add(out, buf, (size_t)n) != 0)
			rc = jc__fail(err, errlen, JC_ENOMEM,
				      "include scan: out of memory reading %s", path);
	}
	if (rc == 0 && fstat(fd, &st) != 0)
		rc = jc__fail(err, errlen, JC_EIO, "include scan: fstat %s: %s", path,
			      strerror(errno));
	close(fd);
	if (rc == 0)
		jc__inc_stat_of(&st, b);
	return rc;
}

int jc__inc_file_info(struct jc_inc_memo *memo, uint64_t max_size, struct jc_inc_set *set,
		      const char *path, struct jc_inc_stat *id, uint8_t hash[16],
		      struct jc_inc_buf *refs, int64_t now, char *err, size_t errlen)
{
	if (memo_get(memo, path, 0, id, hash, refs)) {
		if (jc__inc_unsettled(id, now))
			jc__inc_mark_unsettled(set,
					       path); /* memoised earlier, touched since: be safe */
		return 0;
	}
	struct jc_inc_buf data = {0}, own = {0};
	struct jc_inc_stat a, b;
	struct jc_inc_buf *r = refs ? refs : &own;
	size_t r0 = r->n;
	int rc = jc__inc_read_file(path, max_size, &data, &a, &b, err, errlen);
	set->n_read++;
	if (rc == 0) {
		rc = jc__inc_lex((const char *)data.p, data.n, r);
		if (rc)
			jc__fail(err, errlen, rc, "include scan: out of memory lexing %s", path);
	}
	if (rc == 0) {
		struct jc_inc_buf mine = {r->p + r0, r->n - r0, 0};
		jc__inc_file_hash(path, data.p, data.n, &mine, hash);
	}
	if (rc == 0) {
		*id = b;
		if (!jc__inc_same_stat(&a, &b) || jc__inc_unsettled(&b, now)) {
			jc__inc_mark_unsettled(set, path);
		} else {
			struct jc_inc_buf mine = {r->p + r0, r->n - r0, 0};
			memo_put(memo, path, 0, &b, hash, &mine);
		}
	}
	free(data.p);
	free(own.p);
	return rc;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int jc__inc_list_dir(const char *path, char ***names, size_t *n, char *err, size_t errlen)
{
	DIR *d = opendir(path);
	*names = NULL;
	*n = 0;
	if (!d)
		return jc__fail(err, errlen, JC_EIO, "include scan: opendir %s: %s", path,
				strerror(errno));
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char **v = realloc(*names, (*n + 1) * sizeof(*v));
		char *s = strdup(de->d_name);
		if (v)
			*names = v;
		if (!v || !s) {
			free(s);
			rc = jc__fail(err, errlen, JC_ENOMEM,
				      "include scan: out of memory listing %s", path);
			break;
		}
		v[(*n)++] = s;
	}
	closedir(d);
	if (rc == 0 && *n > 1) /* qsort's base must not be NULL, even for no entries */
		qsort(*names, *n, sizeof(**names), cmp_name);
	return rc;
}

void jc__inc_free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int jc__inc_names_hash(char *const *names, size_t n, uint8_t out[16])
{
	struct jc_inc_buf b = {0};
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = jc__inc_buf_add(&b, names[i], strlen(names[i]) + 1);
	if (rc == 0)
		jc__inc_hash128(b.p, b.n, out);
	free(b.p);
	return rc;
}

int jc__inc_dir_hash(struct jc_inc_memo *memo, const char *path, const struct jc_inc_stat *id,
		     int64_t now, uint8_t hash[16])
{
	if (memo_get(memo, path, 1, id, hash, NULL))
		return 0;
	char **names;
	size_t n;
	int rc = jc__inc_list_dir(path, &names, &n, NULL, 0);
	if (rc)
		return rc;
	rc = jc__inc_names_hash(names, n, hash);
	jc__inc_free_names(names, n);
	if (rc)
		return rc;
	if (!jc__inc_unsettled(id, now))
		memo_put(memo, path, 1, id, hash, NULL);
	return 0;
}

int jc__inc_link_walk(const char *path, uint8_t hash[16], struct jc_strv *chain)
{
	char cur[PATH_MAX], target[PATH_MAX];
	struct jc_inc_buf b = {0};
	struct stat st;
	int rc = 0, links = 0;
	snprintf(cur, sizeof(cur), "%s", path);
	while (rc == 0 && lstat(cur, &st) == 0 && S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(cur, target, sizeof(target) - 1);
		if (n < 0 || ++links > JC_INC_MAX_LINKS) {
			rc = JC_EIO;
			break;
		}
		target[n] = '\0';
		rc = jc__inc_buf_add(&b, target, (size_t)n + 1);
		char next[PATH_MAX * 2];
		const char *slash = strrchr(cur, '/');
		if (target[0] == '/' || !slash)
			snprintf(next, sizeof(next), "%s", target);
		else
			snprintf(next, sizeof(next), "%.*s/%s", (int)(slash - cur), cur, target);
		if (strlen(next) >= sizeof(cur))
			rc = JC_EIO;
		else
			snprintf(cur, sizeof(cur), "%s", next);
		if (rc == 0 && chain)
			rc = jc__strv_push(chain, cur);
	}
	if (rc == 0 && links)
		jc__inc_hash128(b.p, b.n, hash);
	free(b.p);
	return rc ? rc : links > 0;
}

int jc__inc_link_entry(struct jc_inc_set *set, const char *path)
{
	uint8_t hash[16];
	int rc = jc__inc_link_walk(path, hash, NULL);
	return rc <= 0 ? rc : jc__inc_set_add(set, path, strlen(path), JC_INC_LINK, hash);
}

int jc__inc_link_same(const struct jc_inc_entry *e)
{
	uint8_t hash[16];
	int rc = jc__inc_link_walk(e->path, hash, NULL);
	return rc == JC_ENOMEM ? rc : rc == 1 && memcmp(hash, e->hash, 16) == 0;
}
