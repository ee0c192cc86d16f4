/* SPDX-License-Identifier: MIT */
/*
 * A multimap from 32-bit content hashes to 64-bit row ids, in memory: how
 * the index finds a kept request by its content (index.c, "kept
 * requests") without an on-disk index, whose pages (filled at random,
 * about 70 %) cost about 5 % of each request. Open addressing with linear
 * probing; several ids may share a hash (the caller compares the rows).
 * Nothing is removed: an id whose row is gone is skipped by the caller,
 * which rebuilds the map when such ids outnumber the live ones.
 *
 * A zeroed struct is an empty map. Not thread-safe: its owner's lock.
 */
#ifndef JC_IDMAP_H
#define JC_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct jc_idmap_slot {
	int64_t id; /* 0: empty (SQLite row ids of these tables start at 1) */
	uint32_t hash;
};

struct jc_idmap {
	struct jc_idmap_slot *slots; /* owned; cap of them, a power of two */
	size_t cap, n;
};

/* Adds (hash, id); id must be > 0. Grows the table past 3/4 full.
 * 0, or JC_ENOMEM (the map unchanged). */
int jc__idmap_add(struct jc_idmap *m, uint32_t hash, int64_t id);

/*
 * The ids of hash, one per call: *pos starts at 0 and is advanced; returns
 * 1 with *id set, 0 when there are no more. The map must not change
 * between calls of one walk.
 */
int jc__idmap_next(const struct jc_idmap *m, uint32_t hash, size_t *pos, int64_t *id);

/* Frees the table; the map is empty (and usable) again. */
void jc__idmap_clear(struct jc_idmap *m);

#endif
