/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/watch.h"
#include "daemon/daemon.h"
#include "jitcache/jitcache.h"

/*
 * Key memo. A request that reads headers from disk is keyed in the thread
 * pool (cache.c), which re-checks its include set each time. When that set
 * holds nothing but -I directories inside the toolkit tree (or nothing at
 * all), the check only asks that those directories still resolve into the
 * toolkit tree, whose headers the toolkit identity covers; the full key is
 * then remembered by direct key and used on the loop thread for a second
 * after each check, sparing a CUB-style request two thread hand-offs and a
 * manifest read per hit. A toolkit directory that stops resolving into the
 * tree (a symbolic link moved) is seen at most a second late.
 */
#define KEYMEMO_TTL_NS 1000000000ull
#define KEYMEMO_SLOTS  256

/* A full key derived from a direct key (includes.h, manifest.h). */
struct jc_keymemo {
	uint8_t direct[16];
	uint8_t key[16];
	uint64_t checked_ns;  /* jc__now_ns() of the last check; 0 = empty */
	uint64_t watch_stamp; /* the tree's stamp (watch.h): valid until it changes; 0 = none */
};

struct jc_keymemos {
	pthread_mutex_t lock;
	struct jc_keymemo v[KEYMEMO_SLOTS]; /* direct-mapped by direct key */
};

int jc__keymemo_new(struct jc_daemon *d)
{
	d->request.keymemo = calloc(1, sizeof(*d->request.keymemo));
	if (!d->request.keymemo)
		return JC_ENOMEM;
	pthread_mutex_init(&d->request.keymemo->lock, NULL);
	return 0;
}

void jc__keymemo_free(struct jc_daemon *d)
{
	if (d->request.keymemo)
		pthread_mutex_destroy(&d->request.keymemo->lock);
	free(d->request.keymemo); /* the stamps go with the watcher (jc__cache_free) */
	d->request.keymemo = NULL;
}

static struct jc_keymemo *keymemo_slot(struct jc_daemon *d, const uint8_t direct[16])
{
	uint32_t h;
	memcpy(&h, direct + 12, sizeof(h));
	return &d->request.keymemo->v[h % KEYMEMO_SLOTS];
}

static void keymemo_drop(struct jc_daemon *d, struct jc_keymemo *m)
{
	jc__watch_forget(d->request.watch, m->watch_stamp);
	memset(m, 0, sizeof(*m));
}

/*
 * The remembered full key of direct: checked within the last second, or
 * (*watched set) its include tree is watched and unchanged since the check
 * (watch.h; the event queue is drained first).
 */
static int get_locked(struct jc_daemon *d, const uint8_t direct[16], uint8_t key[16], int *watched)
{
	struct jc_keymemo *m = keymemo_slot(d, direct);
	*watched = 0;
	if (!m->checked_ns || memcmp(m->direct, direct, 16) != 0)
		return 0;
	if (m->watch_stamp) {
		if (!jc__watch_valid(d->request.watch, m->watch_stamp)) {
			keymemo_drop(d, m);
			return 0;
		}
		*watched = 1;
	} else if (jc__now_ns() - m->checked_ns >= KEYMEMO_TTL_NS) {
		return 0;
	}
	memcpy(key, m->key, 16);
	return 1;
}

int jc__keymemo_get(struct jc_daemon *d, const uint8_t direct[16], uint8_t key[16], int *watched)
{
	pthread_mutex_lock(&d->request.keymemo->lock);
	int rc = get_locked(d, direct, key, watched);
	pthread_mutex_unlock(&d->request.keymemo->lock);
	return rc;
}

/* Remembers key for direct when set has nothing on disk to re-check, or
 * its tree is watched (stamp; then owned by the memo). */
void jc__keymemo_put(struct jc_daemon *d, const uint8_t direct[16], const uint8_t key[16],
		     const struct jc_inc_set *set, uint64_t stamp)
{
	for (size_t i = 0; !stamp && i < set->n; i++)
		if (set->v[i].kind != JC_INC_TOOLKIT)
			return;
	pthread_mutex_lock(&d->request.keymemo->lock);
	struct jc_keymemo *m = keymemo_slot(d, direct);
	keymemo_drop(d, m);
	memcpy(m->direct, direct, 16);
	memcpy(m->key, key, 16);
	m->checked_ns = jc__now_ns();
	m->watch_stamp = stamp;
	pthread_mutex_unlock(&d->request.keymemo->lock);
}

void jc__keymemo_forget(struct jc_daemon *d, const uint8_t direct[16])
{
	pthread_mutex_lock(&d->request.keymemo->lock);
	struct jc_keymemo *m = keymemo_slot(d, direct);
	if (memcmp(m->direct, direct, 16) == 0)
		keymemo_drop(d, m);
	pthread_mutex_unlock(&d->request.keymemo->lock);
}
