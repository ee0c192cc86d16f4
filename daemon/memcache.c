/* SPDX-License-Identifier: MIT */
/*
 * The memory cache of index rows (hot keys skip SQLite), and the batching
 * of access times and hit counts, written with the counters in the thread
 * pool once a tick (and at a clean stop). docs/ARCHITECTURE.md, "The store
 * and its consistency rules".
 *
 * One instance per thread that serves hits: the main loop's (d->request.mc, reading
 * through the cache's reader d->cache->rix) and one per serving thread
 * (server.c), each with its own SQLite reader, slots and descriptors opened
 * ahead; an instance is used by its thread alone, but for what its lock
 * guards. What the main loop forgets (a key replaced, entries removed) it
 * publishes to every other instance through a ring of forgotten keys, which
 * each applies before its next lookup (jc__memcache_sync).
 */
#include <errno.h>
#include <fcntl.h>
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
 * (FD_SHARE_OF_LIMIT, FD_MAX, shared by the instances; settings.c keeps a
 * quarter of the limit for descriptors being served). */
#define FD_DEPTH	  4
#define REFILL_MAX	  64
#define FD_SHARE_OF_LIMIT 8
#define FD_MAX		  512
/* A hot object is served from the daemon's own copy, hash-checked once:
 * under MEMFD_MIN bytes its bytes go inline in the answer (no descriptor,
 * no open, no fstatat per hit; the client hashes them), from MEMFD_MIN on
 * from a sealed memfd (a client reads it without hashing it again:
 * client.c). --hot-copy-budget bytes of copies at most (shared by the
 * instances); 0: every hit is a descriptor of the object file. */
#define MEMFD_MIN (64u << 10)
/* Keys the main loop forgot, kept for the other instances; one that falls
 * further behind drops every row. */
#define INVAL_RING 256

struct jc_slot {
	int used;
	size_t touch; /* 1 + its place in the pending touch list; 0 if none */
	int refill;   /* waits in the refill list */
	int n_fds;
	int fds[FD_DEPTH]; /* e's object, each opened and checked on its own */
	struct stat id;	   /* theirs (device, inode), for jc_tier_ops.object_is */
	int memfd;	   /* its sealed copy (fds are opened from it), or -1; set when used */
	uint8_t *bytes;	   /* its bytes, checked (an object under MEMFD_MIN), or NULL */
	int no_copy;	   /* making the copy failed: not tried again for this row */
	int taken;	   /* hits of the row since it came in, up to 2 (jc__memcache_take) */
	struct jc_entry e;
};

/* What the main loop forgot (in its instance; the others read it). */
struct jc_mc_inval {
	pthread_mutex_t lock;
	uint64_t seq;	  /* keys published; read without the lock (atomic) */
	uint64_t all_seq; /* 1 + seq when every row was dropped; 0 never */
	uint8_t keys[INVAL_RING][16];
};

/* Access times and hit counts not yet written: a row per key and uid
 * (keys[i], hits[i], uids[i] for i < n; room for cap). */
struct touches {
	uint8_t (*keys)[16];
	uint32_t *hits;
	uint32_t *uids; /* the uid served each (index.h: the entry's users) */
	size_t n, cap;
};

/* Makes room for need rows in t (doubling, from 256); 0 or JC_ENOMEM with
 * t's rows kept. */
static int touches_reserve(struct touches *t, size_t need)
{
	if (need <= t->cap)
		return 0;
	size_t cap = t->cap ? t->cap : 256;
	while (cap < need)
		cap *= 2;
	void *k = realloc(t->keys, cap * sizeof(*t->keys));
	if (k)
		t->keys = k;
	void *h = k ? realloc(t->hits, cap * sizeof(*t->hits)) : NULL;
	if (h)
		t->hits = h;
	void *u = h ? realloc(t->uids, cap * sizeof(*t->uids)) : NULL;
	if (!u)
		return JC_ENOMEM;
	t->uids = u;
	t->cap = cap;
	return 0;
}

static void touches_free(struct touches *t)
{
	free(t->keys);
	free(t->hits);
	free(t->uids);
}

struct jc_memcache {
	struct jc_daemon *d;
	struct jc_index *rix;	  /* this instance's reader */
	int owns_rix;		  /* opened for it (a serving thread's) */
	struct jc_memcache *next; /* the instances, d->request.mc first */
	struct jc_slot slots[MEMCACHE_SLOTS];
	/* Under lock (the flush and stats take them from the main loop):
	 * access times and hit counts not yet written, flushed in batches, one
	 * row per key and uid however often it was hit; counter increments and
	 * hit latencies not yet moved into the daemon's (jc__memcache_collect). */
	pthread_mutex_t lock;
	struct touches touch;
	uint64_t counts[JC_CTR__COUNT];
	int counted;
	struct jc_latency hit_latency;
	/* The main instance's flush, and its ring of forgotten keys. */
	int flush_busy;
	uv_work_t flush_work;
	struct jc_mc_inval inval;
	uint64_t inval_seen; /* the main instance's inval.seq applied here */
	/* Whether a request reads from disk (cache.c), by direct key. */
	struct jc_needed_memo needed_memo[JC_NEEDED_MEMO_SLOTS];
	/* Slots whose descriptors a hit took, refilled off the hot path. */
	uint32_t refill[REFILL_MAX];
	size_t n_refill;
	size_t n_fds, max_fds;		  /* descriptors held in all slots, and the cap */
	uint64_t copy_bytes, copy_budget; /* in the slots' copies (memfds, bytes), and the cap */
};

int jc__memcache_new(struct jc_daemon *d, struct jc_index *rix, int owns_rix, unsigned share,
		     struct jc_memcache **out)
{
	struct rlimit rl;
	struct jc_memcache *m = calloc(1, sizeof(*m));
	if (!m)
		return JC_ENOMEM;
	m->d = d;
	m->rix = rix;
	m->owns_rix = owns_rix;
	m->max_fds = FD_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur / FD_SHARE_OF_LIMIT < FD_MAX)
		m->max_fds = (size_t)(rl.rlim_cur / FD_SHARE_OF_LIMIT);
	share = share ? share : 1;
	m->max_fds /= share;
	m->copy_budget = d->cfg.hot_copy_budget / share;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->inval.lock, NULL);
	if (d->request.mc) {
		m->next = d->request.mc->next;
		d->request.mc->next = m;
		m->inval_seen = __atomic_load_n(&d->request.mc->inval.seq, __ATOMIC_ACQUIRE);
	}
	*out = m;
	return 0;
}

static void drop_all(struct jc_memcache *m);

struct jc_daemon *jc__memcache_daemon(const struct jc_memcache *m)
{
	return m->d;
}

void jc__memcache_free(struct jc_memcache *m)
{
	if (!m)
		return;
	if (m == m->d->request.mc) /* the main instance: the others go first */
		for (struct jc_memcache *o = m->next, *next; o; o = next) {
			next = o->next;
			m->next = next;
			jc__memcache_free(o);
		}
	drop_all(m);
	if (m->owns_rix)
		jc__reader_close(m->rix);
	touches_free(&m->touch);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->inval.lock);
	free(m);
}

static struct jc_slot *slot_of(struct jc_memcache *m, const uint8_t key[16])
{
	uint32_t h;
	memcpy(&h, key + 12, sizeof(h)); /* the key is a hash: any bits will do */
	return &m->slots[h % MEMCACHE_SLOTS];
}

static void slot_close_fds(struct jc_memcache *m, struct jc_slot *s)
{
	while (s->n_fds) {
		close(s->fds[--s->n_fds]);
		m->n_fds--;
	}
}

/* (A slot never used is left untouched: an instance's pages are only
 * mapped as its slots fill.) */
static void slot_drop(struct jc_memcache *m, struct jc_slot *s)
{
	if (!s->used)
		return;
	slot_close_fds(m, s);
	if (s->memfd >= 0 || s->bytes) {
		if (s->memfd >= 0)
			close(s->memfd);
		free(s->bytes);
		m->copy_bytes -= s->e.size;
		s->memfd = -1;
		s->bytes = NULL;
	}
	s->no_copy = 0;
	s->taken = 0;
	jc__entry_clear(&s->e);
	s->used = 0;
	s->touch = 0;
}

static void drop_all(struct jc_memcache *m)
{
	for (size_t i = 0; i < MEMCACHE_SLOTS; i++)
		slot_drop(m, &m->slots[i]);
}

static void forget(struct jc_memcache *m, const uint8_t key[16])
{
	struct jc_slot *s = slot_of(m, key);
	if (s->used && memcmp(s->e.key, key, 16) == 0)
		slot_drop(m, s);
}

/* Main loop: tells the other instances to forget key (NULL: every row). */
static void publish_forget(struct jc_memcache *main, const uint8_t *key)
{
	struct jc_mc_inval *v = &main->inval;
	if (!main->next)
		return; /* no other instance */
	pthread_mutex_lock(&v->lock);
	if (key)
		memcpy(v->keys[v->seq % INVAL_RING], key, 16);
	else
		v->all_seq = v->seq + 1;
	__atomic_store_n(&v->seq, v->seq + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&v->lock);
}

void jc__memcache_sync(struct jc_memcache *m)
{
	struct jc_mc_inval *v = &m->d->request.mc->inval;
	if (__atomic_load_n(&v->seq, __ATOMIC_ACQUIRE) == m->inval_seen)
		return;
	pthread_mutex_lock(&v->lock);
	if (v->seq - m->inval_seen > INVAL_RING || v->all_seq > m->inval_seen)
		drop_all(m);
	else
		for (uint64_t q = m->inval_seen; q < v->seq; q++)
			forget(m, v->keys[q % INVAL_RING]);
	m->inval_seen = v->seq;
	pthread_mutex_unlock(&v->lock);
}

void jc__cache_memcache_drop_all(struct jc_daemon *d)
{
	drop_all(d->request.mc);
	publish_forget(d->request.mc, NULL);
}

int jc__memcache_holds(struct jc_memcache *m, const uint8_t key[16])
{
	struct jc_slot *s = slot_of(m, key);
	return s->used && memcmp(s->e.key, key, 16) == 0;
}

void jc__memcache_forget(struct jc_memcache *m, const uint8_t key[16])
{
	forget(m, key);
	if (m == m->d->request.mc)
		publish_forget(m, key);
}

const struct jc_entry *jc__memcache_lookup(struct jc_memcache *m, const uint8_t key[16])
{
	struct jc_slot *s = slot_of(m, key);
	if (s->used && memcmp(s->e.key, key, 16) == 0)
		return &s->e;
	struct jc_entry e = {0};
	char err[256];
	int rc = jc__reader_get(m->rix, key, &e, err, sizeof(err));
	if (rc != 0) {
		if (rc != JC_ENOTFOUND)
			jc_log_err(INDEX, "index lookup failed: %s", err);
		return NULL;
	}
	slot_drop(m, s);
	s->e = e;
	s->memfd = -1;
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

void jc__memcache_warm(struct jc_memcache *m, const uint8_t key[16])
{
	const struct jc_entry *e = jc__memcache_lookup(m, key);
	if (e) {
		queue_refill(m, slot_of(m, key));
		jc__memcache_refill(m);
	}
}

int jc__memcache_take(struct jc_memcache *m, const struct jc_entry *e, const uint8_t **bytes)
{
	struct jc_cachedir *cd = m->d->cache;
	struct jc_slot *s = slot_of(m, e->key);
	*bytes = NULL;
	if (!s->used || &s->e != e || e->status)
		return -1;
	if (s->bytes) {
		*bytes = s->bytes;
		return -1;
	}
	/* From its second hit on, a row's copy or descriptors are made ahead
	 * (after the answers): most rows hit once are not hit again (keys
	 * drawn from many), and a copy read and hashed for each of them cost
	 * the next hit more than it saved. */
	s->taken += s->taken < 2;
	if (s->taken > 1)
		queue_refill(m, s);
	if (!s->n_fds)
		return -1;
	/* The sealed copy cannot change; a file must still be the one at the
	 * object's name, passing the checks of an open (owner, type, mode, size). */
	if (s->memfd < 0 && !cd->ops->object_is(cd, e, &s->id)) {
		slot_close_fds(m, s);
		return -1;
	}
	m->n_fds--;
	return s->fds[--s->n_fds];
}

struct jc_needed_memo *jc__memcache_needed_memo(struct jc_memcache *m, const uint8_t direct[16])
{
	uint32_t h;
	memcpy(&h, direct + 8, sizeof(h));
	return &m->needed_memo[h % JC_NEEDED_MEMO_SLOTS];
}

/* A sealed memfd holding e's object (F_SEAL_WRITE, _SHRINK, _GROW, _SEAL),
 * its bytes checked against e->object after sealing; -1 when it cannot be
 * made or the bytes do not check (the next hit opens the file and finds out
 * why). */
static int sealed_copy(struct jc_memcache *m, const struct jc_entry *e)
{
	int src = -1, fd = -1, ok = 0;
	off_t off = 0;
	if (m->d->cache->ops->open_object(m->d->cache, e, &src) != 0)
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

void jc__memcache_refill(struct jc_memcache *m)
{
	struct jc_cachedir *cd = m->d->cache;
	for (size_t i = 0; i < m->n_refill; i++) {
		struct jc_slot *s = &m->slots[m->refill[i]];
		s->refill = 0;
		if (!s->used || s->e.status)
			continue;
		if (s->memfd < 0 && !s->bytes && !s->no_copy &&
		    m->copy_bytes + s->e.size <= m->copy_budget) {
			if (s->e.size >= MEMFD_MIN)
				s->memfd = sealed_copy(m, &s->e);
			else if (cd->ops->read_object(cd, &s->e, &s->bytes) != 0)
				s->bytes = NULL;
			s->no_copy = s->memfd < 0 && !s->bytes;
			if (!s->no_copy) {
				m->copy_bytes += s->e.size;
				slot_close_fds(m, s); /* of the file: from now on, the copy */
			}
		}
		if (s->bytes)
			continue; /* served inline */
		while (s->n_fds < FD_DEPTH && m->n_fds < m->max_fds) {
			int fd;
			struct stat st;
			char self[40];
			if (s->memfd >= 0) /* (formatted for copies only: refills are per hit) */
				snprintf(self, sizeof(self), "/proc/self/fd/%d", s->memfd);
			/* Each its own open file description, of the copy or the file. */
			if (s->memfd >= 0 ? (fd = open(self, O_RDONLY | O_CLOEXEC)) < 0
					  : cd->ops->open_object(cd, &s->e, &fd) != 0)
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

/* Appends (key, uid, hits) to m's pending touches, or adds hits to its row
 * there; caller holds m->lock. */
static void touch_locked(struct jc_memcache *m, const uint8_t key[16], uid_t uid, uint32_t hits)
{
	struct jc_slot *s = slot_of(m, key);
	size_t i = s->used && memcmp(s->e.key, key, 16) == 0 ? s->touch : 0;
	struct touches *t = &m->touch;
	if (i && i <= t->n && memcmp(t->keys[i - 1], key, 16) == 0 &&
	    t->uids[i - 1] == (uint32_t)uid) {
		t->hits[i - 1] += hits;
		return;
	}
	if (touches_reserve(t, t->n + 1) != 0)
		return; /* access time is advisory: losing one is harmless */
	memcpy(t->keys[t->n], key, 16);
	t->hits[t->n] = hits;
	t->uids[t->n++] = (uint32_t)uid;
	if (s->used && memcmp(s->e.key, key, 16) == 0)
		s->touch = t->n;
}

void jc__memcache_touch(struct jc_memcache *m, const uint8_t key[16], uid_t uid, uint32_t hits)
{
	pthread_mutex_lock(&m->lock);
	touch_locked(m, key, uid, hits);
	pthread_mutex_unlock(&m->lock);
}

void jc__memcache_count(struct jc_memcache *m, enum jc_counter c, uint64_t n, uint64_t hit_ns)
{
	if (!n && !hit_ns)
		return;
	if (m == m->d->request.mc) { /* the main loop's: straight into the daemon's */
		jc__daemon_count(m->d, c, n);
		if (hit_ns)
			jc__latency_add(&m->d->run.hit_latency, hit_ns);
		return;
	}
	pthread_mutex_lock(&m->lock);
	m->counts[c] += n;
	m->counted |= n != 0;
	if (hit_ns)
		jc__latency_add(&m->hit_latency, hit_ns);
	pthread_mutex_unlock(&m->lock);
}

void jc__memcache_collect(struct jc_daemon *d)
{
	for (struct jc_memcache *m = d->request.mc; m; m = m->next) {
		pthread_mutex_lock(&m->lock);
		for (size_t c = 0; m->counted && c < JC_CTR__COUNT; c++)
			jc__daemon_count(d, (enum jc_counter)c, m->counts[c]);
		memset(m->counts, 0, sizeof(m->counts));
		m->counted = 0;
		struct jc_latency *h = &d->run.hit_latency;
		h->count += m->hit_latency.count;
		h->sum_ns += m->hit_latency.sum_ns;
		for (size_t b = 0; m->hit_latency.count && b < JC_LATENCY_BUCKETS; b++)
			h->bucket[b] += m->hit_latency.bucket[b];
		memset(&m->hit_latency, 0, sizeof(m->hit_latency));
		pthread_mutex_unlock(&m->lock);
	}
}

/* --- periodic flush of access times and counters ----------------------------- */

struct jc_flush_job {
	struct jc_daemon *d;
	struct touches touch;
	uint64_t counters[JC_CTR__COUNT];
	int save_counters;
};

/* Moves m's pending touches to the end of j's (m->lock held); 0, or
 * JC_ENOMEM with m's left pending. */
static int take_touches(struct jc_flush_job *j, struct jc_memcache *m)
{
	struct touches *to = &j->touch, *from = &m->touch;
	if (!from->n)
		return 0;
	if (touches_reserve(to, to->n + from->n) != 0)
		return JC_ENOMEM;
	memcpy(to->keys + to->n, from->keys, from->n * sizeof(*to->keys));
	memcpy(to->hits + to->n, from->hits, from->n * sizeof(*to->hits));
	memcpy(to->uids + to->n, from->uids, from->n * sizeof(*to->uids));
	to->n += from->n;
	from->n = 0;
	return 0;
}

/* Writes j's counters and every touch pending now, taken under wlock: a
 * command that runs under wlock after this sees every hit served before it
 * was asked (a periodic flush that took them earlier, unwritten, would hide
 * them from it). */
static void flush_run(struct jc_daemon *d, struct jc_flush_job *j)
{
	pthread_mutex_lock(&d->cache->wlock);
	for (struct jc_memcache *m = d->request.mc; m; m = m->next) {
		pthread_mutex_lock(&m->lock);
		take_touches(j, m); /* (out of memory: left for the next flush) */
		pthread_mutex_unlock(&m->lock);
	}
	const struct touches *t = &j->touch;
	if (t->n && d->cache->ops->touch(d->cache, (const uint8_t(*)[16])t->keys, t->hits, t->uids,
					 t->n, jc__wall_s()) != 0)
		jc_log_warn(INDEX, "access times not recorded: %s", jc__cachedir_errmsg(d->cache));
	if (j->save_counters) {
		if (jc__cachedir_save_counters(d->cache, j->counters) != 0)
			jc_log_warn(INDEX, "counters not saved: %s", jc__cachedir_errmsg(d->cache));
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
	touches_free(&j->touch);
	free(j);
}

static void flush_after_cb(uv_work_t *w, int status)
{
	struct jc_flush_job *j = w->data;
	(void)status;
	j->d->request.mc->flush_busy = 0;
	flush_job_free(j);
}

struct jc_flush_job *jc__cache_flush_take(struct jc_daemon *d)
{
	jc__memcache_collect(d);
	struct jc_flush_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->d = d;
	int touches = 0; /* taken when written (flush_run) */
	for (struct jc_memcache *m = d->request.mc; m && !touches; m = m->next) {
		pthread_mutex_lock(&m->lock);
		touches = m->touch.n != 0;
		pthread_mutex_unlock(&m->lock);
	}
	j->save_counters = jc__counters_take(&d->cache->counters, j->counters);
	if (!touches && !j->save_counters) {
		flush_job_free(j);
		return NULL;
	}
	return j;
}
void jc__cache_tick(struct jc_daemon *d)
{
	if (d->request.mc->flush_busy)
		return;
	struct jc_flush_job *j = jc__cache_flush_take(d);
	if (!j)
		return;
	d->request.mc->flush_busy = 1;
	d->request.mc->flush_work.data = j;
	if (uv_queue_work(d->loop, &d->request.mc->flush_work, flush_work_cb, flush_after_cb) !=
	    0) {
		d->request.mc->flush_busy = 0;
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
