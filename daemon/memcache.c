/* SPDX-License-Identifier: MIT */
/*
 * The memory cache of index rows (hot keys skip SQLite), and the batching
 * of access times and hit counts, written with the counters in the thread
 * pool once a tick (and at a clean stop). Loop thread, but for the flush
 * job's writes. docs/ARCHITECTURE.md, "The store and its consistency rules".
 */
#include <fcntl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/log.h"
#include "daemon/daemon.h"
#include "jitcache/jitcache.h"

/* Direct-mapped: a key has one slot (the key is a hash). */
#define MEMCACHE_SLOTS 16384
/* Descriptors of a hot slot's object opened ahead (jc__memcache_take_fd):
 * at most this many per slot, and at most REFILL_MAX slots waiting for
 * theirs. The daemon holds at most a fraction of its descriptor limit so
 * (FD_SHARE_OF_LIMIT, FD_MAX; settings.c keeps a quarter of the limit for
 * descriptors being served). */
#define FD_DEPTH 4
#define REFILL_MAX 64
#define FD_SHARE_OF_LIMIT 8
#define FD_MAX 512
/* A hot object of at least MEMFD_MIN bytes is served from a sealed memfd
 * (the daemon's copy, hash-checked once; a client reads it without hashing
 * it again: client.c), MEMFD_BUDGET bytes of them at most. */
#define MEMFD_MIN (64u << 10)
#define MEMFD_BUDGET (256ull << 20)

struct jc_slot {
	int used;
	size_t touch;     /* 1 + its place in the pending touch list; 0 if none */
	int refill;       /* waits in the refill list */
	int n_fds;
	int fds[FD_DEPTH]; /* e's object, each opened and checked on its own */
	struct stat id;   /* theirs (device, inode), for jc_tier_ops.object_is */
	int memfd;        /* its sealed copy (fds are opened from it), or -1 */
	int no_copy;      /* making the copy failed: not tried again for this row */
	struct jc_entry e;
};

struct jc_memcache {
	struct jc_slot slots[MEMCACHE_SLOTS];
	/* Access times and hit counts not yet written: flushed in batches,
	 * one row per key however often it was hit. */
	uint8_t (*touch_keys)[16];
	uint32_t *touch_hits;
	uint32_t *touch_uids;     /* the uid served each (index.h: the entry's users) */
	size_t n_touch, cap_touch;
	int flush_busy;
	uv_work_t flush_work;
	/* Slots whose descriptors a hit took, refilled off the hot path. */
	uint32_t refill[REFILL_MAX];
	size_t n_refill;
	size_t n_fds, max_fds; /* descriptors held in all slots, and the cap */
	uint64_t memfd_bytes;  /* in the slots' memfds */
};

int jc__memcache_new(struct jc_daemon *d)
{
	struct rlimit rl;
	d->mc = calloc(1, sizeof(*d->mc));
	if (!d->mc)
		return JC_ENOMEM;
	for (size_t i = 0; i < MEMCACHE_SLOTS; i++)
		d->mc->slots[i].memfd = -1;
	d->mc->max_fds = FD_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur / FD_SHARE_OF_LIMIT < FD_MAX)
		d->mc->max_fds = (size_t)(rl.rlim_cur / FD_SHARE_OF_LIMIT);
	return 0;
}

void jc__memcache_free(struct jc_daemon *d)
{
	if (!d->mc)
		return;
	jc__cache_memcache_drop_all(d);
	free(d->mc->touch_keys);
	free(d->mc->touch_hits);
	free(d->mc->touch_uids);
	free(d->mc);
	d->mc = NULL;
}

static struct jc_slot *slot_of(struct jc_daemon *d, const uint8_t key[16])
{
	uint32_t h;
	memcpy(&h, key + 12, sizeof(h)); /* the key is a hash: any bits will do */
	return &d->mc->slots[h % MEMCACHE_SLOTS];
}

static void slot_close_fds(struct jc_memcache *m, struct jc_slot *s)
{
	while (s->n_fds) {
		close(s->fds[--s->n_fds]);
		m->n_fds--;
	}
}

static void slot_drop(struct jc_memcache *m, struct jc_slot *s)
{
	slot_close_fds(m, s);
	if (s->memfd >= 0) {
		close(s->memfd);
		m->memfd_bytes -= s->e.size;
		s->memfd = -1;
	}
	s->no_copy = 0;
	if (s->used)
		jc__entry_clear(&s->e);
	s->used = 0;
	s->touch = 0;
}

void jc__cache_memcache_drop_all(struct jc_daemon *d)
{
	for (size_t i = 0; i < MEMCACHE_SLOTS; i++)
		slot_drop(d->mc, &d->mc->slots[i]);
}

int jc__memcache_holds(struct jc_daemon *d, const uint8_t key[16])
{
	struct jc_slot *s = slot_of(d, key);
	return s->used && memcmp(s->e.key, key, 16) == 0;
}

void jc__memcache_forget(struct jc_daemon *d, const uint8_t key[16])
{
	struct jc_slot *s = slot_of(d, key);
	if (s->used && memcmp(s->e.key, key, 16) == 0)
		slot_drop(d->mc, s);
}

const struct jc_entry *jc__memcache_lookup(struct jc_daemon *d, const uint8_t key[16])
{
	struct jc_slot *s = slot_of(d, key);
	if (s->used && memcmp(s->e.key, key, 16) == 0)
		return &s->e;
	struct jc_entry e = {0};
	int rc = d->cache->ops->lookup(d->cache, key, &e);
	if (rc != 0) {
		if (rc != JC_ENOTFOUND)
			jc_log_err(INDEX, "index lookup failed: %s", jc__index_errmsg(d->cache->rix));
		return NULL;
	}
	slot_drop(d->mc, s);
	s->e = e;
	s->used = 1;
	return &s->e;
}

static void queue_refill(struct jc_memcache *m, struct jc_slot *s)
{
	if (!s->refill && m->n_refill < REFILL_MAX) {
		s->refill = 1;
		m->refill[m->n_refill++] = (uint32_t)(s - m->slots);
	}
}

void jc__memcache_warm(struct jc_daemon *d, const uint8_t key[16])
{
	const struct jc_entry *e = jc__memcache_lookup(d, key);
	if (e) {
		queue_refill(d->mc, slot_of(d, key));
		jc__memcache_refill(d);
	}
}

int jc__memcache_take_fd(struct jc_daemon *d, const struct jc_entry *e)
{
	struct jc_memcache *m = d->mc;
	struct jc_slot *s = slot_of(d, e->key);
	if (!s->used || &s->e != e || e->status)
		return -1;
	queue_refill(m, s);
	if (!s->n_fds)
		return -1;
	/* The sealed copy cannot change; a file must still be the one at the
	 * object's name, passing the checks of an open (owner, type, mode, size). */
	if (s->memfd < 0 && !d->cache->ops->object_is(d->cache, e, &s->id)) {
		slot_close_fds(m, s);
		return -1;
	}
	m->n_fds--;
	return s->fds[--s->n_fds];
}

/* A sealed memfd holding e's object (F_SEAL_WRITE, _SHRINK, _GROW, _SEAL),
 * its bytes checked against e->object after sealing; -1 when it cannot be
 * made or the bytes do not check (the next hit opens the file and finds out
 * why). */
static int sealed_copy(struct jc_daemon *d, const struct jc_entry *e)
{
	int src = -1, fd = -1, ok = 0;
	off_t off = 0;
	if (d->cache->ops->open_object(d->cache, e, &src) != 0)
		return -1;
	fd = memfd_create("jitcache-object", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	while (fd >= 0 && (uint64_t)off < e->size) {
		ssize_t n = sendfile(fd, src, &off, (size_t)(e->size - (uint64_t)off));
		if (n <= 0 && !(n < 0 && errno == EINTR))
			break;
	}
	close(src);
	if (fd >= 0 && (uint64_t)off == e->size &&
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == 0) {
		void *p = mmap(NULL, (size_t)e->size, PROT_READ, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			XXH128_canonical_t c;
			XXH128_canonicalFromHash(&c, XXH3_128bits(p, (size_t)e->size));
			ok = memcmp(c.digest, e->object, 16) == 0;
			munmap(p, (size_t)e->size);
		}
	}
	if (!ok && fd >= 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

void jc__memcache_refill(struct jc_daemon *d)
{
	struct jc_memcache *m = d->mc;
	for (size_t i = 0; i < m->n_refill; i++) {
		struct jc_slot *s = &m->slots[m->refill[i]];
		s->refill = 0;
		if (!s->used || s->e.status)
			continue;
		if (s->memfd < 0 && !s->no_copy && s->e.size >= MEMFD_MIN &&
		    m->memfd_bytes + s->e.size <= MEMFD_BUDGET) {
			s->memfd = sealed_copy(d, &s->e);
			s->no_copy = s->memfd < 0;
			if (s->memfd >= 0) {
				m->memfd_bytes += s->e.size;
				slot_close_fds(m, s); /* of the file: from now on, of the copy */
			}
		}
		while (s->n_fds < FD_DEPTH && m->n_fds < m->max_fds) {
			int fd;
			struct stat st;
			char self[40];
			snprintf(self, sizeof(self), "/proc/self/fd/%d", s->memfd);
			/* Each its own open file description, of the copy or the file. */
			if (s->memfd >= 0 ? (fd = open(self, O_RDONLY | O_CLOEXEC)) < 0
					  : d->cache->ops->open_object(d->cache, &s->e, &fd) != 0)
				break; /* the next hit opens it and finds out why */
			if (s->memfd < 0 && fstat(fd, &st) != 0) {
				close(fd);
				break;
			}
			if (s->memfd < 0 && s->n_fds &&
			    (st.st_dev != s->id.st_dev || st.st_ino != s->id.st_ino))
				slot_close_fds(m, s); /* of a file since replaced */
			if (s->memfd < 0)
				s->id = st;
			s->fds[s->n_fds++] = fd;
			m->n_fds++;
		}
	}
	m->n_refill = 0;
}

void jc__memcache_touch(struct jc_daemon *d, const uint8_t key[16], uid_t uid, uint32_t hits)
{
	struct jc_memcache *m = d->mc;
	struct jc_slot *s = slot_of(d, key);
	size_t i = s->used && memcmp(s->e.key, key, 16) == 0 ? s->touch : 0;
	if (i && i <= m->n_touch && memcmp(m->touch_keys[i - 1], key, 16) == 0 &&
	    m->touch_uids[i - 1] == (uint32_t)uid) {
		m->touch_hits[i - 1] += hits;
		return;
	}
	if (m->n_touch == m->cap_touch) {
		size_t cap = m->cap_touch ? m->cap_touch * 2 : 256;
		void *k = realloc(m->touch_keys, cap * sizeof(*m->touch_keys));
		if (k)
			m->touch_keys = k;
		void *h = k ? realloc(m->touch_hits, cap * sizeof(*m->touch_hits)) : NULL;
		if (h)
			m->touch_hits = h;
		void *u = h ? realloc(m->touch_uids, cap * sizeof(*m->touch_uids)) : NULL;
		if (!u)
			return; /* access time is advisory: losing one is harmless */
		m->touch_uids = u;
		m->cap_touch = cap;
	}
	memcpy(m->touch_keys[m->n_touch], key, 16);
	m->touch_hits[m->n_touch] = hits;
	m->touch_uids[m->n_touch++] = (uint32_t)uid;
	if (s->used && memcmp(s->e.key, key, 16) == 0)
		s->touch = m->n_touch;
}

/* --- periodic flush of access times and counters ----------------------------- */

struct jc_flush_job {
	struct jc_daemon *d;
	uint8_t (*keys)[16];
	uint32_t *hits, *uids;
	size_t n;
	uint64_t counters[JC_CTR__COUNT];
	int save_counters;
};

static void flush_run(struct jc_daemon *d, struct jc_flush_job *j)
{
	pthread_mutex_lock(&d->cache->wlock);
	if (j->n && jc__index_touch(d->cache->wix, (const uint8_t(*)[16])j->keys, j->hits, j->uids, j->n, jc__wall_s()) != 0)
		jc_log_warn(INDEX, "access times not recorded: %s", jc__index_errmsg(d->cache->wix));
	if (j->save_counters) {
		if (jc__cachedir_save_counters(d->cache, j->counters) != 0)
			jc_log_warn(INDEX, "counters not saved: %s", jc__index_errmsg(d->cache->wix));
	}
	pthread_mutex_unlock(&d->cache->wlock);
}

static void flush_work_cb(uv_work_t *w)
{
	struct jc_flush_job *j = w->data;
	flush_run(j->d, j);
}

static void flush_job_free(struct jc_flush_job *j)
{
	free(j->keys);
	free(j->hits);
	free(j->uids);
	free(j);
}

static void flush_after_cb(uv_work_t *w, int status)
{
	struct jc_flush_job *j = w->data;
	(void)status;
	j->d->mc->flush_busy = 0;
	flush_job_free(j);
}

struct jc_flush_job *jc__cache_flush_take(struct jc_daemon *d)
{
	if (!d->mc->n_touch && !d->cache->counters.dirty)
		return NULL;
	struct jc_flush_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->d = d;
	j->keys = d->mc->touch_keys;
	j->hits = d->mc->touch_hits;
	j->uids = d->mc->touch_uids;
	j->n = d->mc->n_touch;
	d->mc->touch_keys = NULL;
	d->mc->touch_hits = NULL;
	d->mc->touch_uids = NULL;
	d->mc->n_touch = d->mc->cap_touch = 0;
	j->save_counters = jc__counters_take(&d->cache->counters, j->counters);
	return j;
}

void jc__cache_tick(struct jc_daemon *d)
{
	if (d->mc->flush_busy)
		return;
	struct jc_flush_job *j = jc__cache_flush_take(d);
	if (!j)
		return;
	d->mc->flush_busy = 1;
	d->mc->flush_work.data = j;
	if (uv_queue_work(d->loop, &d->mc->flush_work, flush_work_cb, flush_after_cb) != 0) {
		d->mc->flush_busy = 0;
		flush_job_free(j);
	}
}

void jc__cache_flush_write(struct jc_daemon *d, struct jc_flush_job *j)
{
	if (j) {
		flush_run(d, j);
		flush_job_free(j);
	}
}

void jc__cache_flush_sync(struct jc_daemon *d)
{
	jc__cache_flush_write(d, jc__cache_flush_take(d));
}
