/* SPDX-License-Identifier: MIT */
/* The id multimap: see idmap.h. */
#include "core/idmap.h"

#include <stdlib.h>

#include "jitcache/jitcache.h"

/* The first slot hash probes (the table's cap is a power of two). */
static size_t home(const struct jc_idmap *m, uint32_t hash)
{
	/* Fibonacci hashing spreads hashes that differ in their high bits only. */
	return (size_t)((hash * 2654435769u) & (uint32_t)(m->cap - 1));
}

static void put(struct jc_idmap *m, uint32_t hash, int64_t id)
{
	size_t i = home(m, hash);
	while (m->slots[i].id)
		i = (i + 1) & (m->cap - 1);
	m->slots[i].id = id;
	m->slots[i].hash = hash;
	m->n++;
}

int jc__idmap_add(struct jc_idmap *m, uint32_t hash, int64_t id)
{
	if ((m->n + 1) * 4 > m->cap * 3) {
		struct jc_idmap grown = {.cap = m->cap ? m->cap * 2 : 64};
		if (grown.cap < m->cap || !(grown.slots = calloc(grown.cap, sizeof(*grown.slots))))
			return JC_ENOMEM;
		for (size_t i = 0; i < m->cap; i++)
			if (m->slots[i].id)
				put(&grown, m->slots[i].hash, m->slots[i].id);
		free(m->slots);
		*m = grown;
	}
	put(m, hash, id);
	return 0;
}

int jc__idmap_next(const struct jc_idmap *m, uint32_t hash, size_t *pos, int64_t *id)
{
	if (!m->cap)
		return 0;
	/* *pos counts the slots probed so far from hash's home */
	for (; *pos < m->cap; (*pos)++) {
		const struct jc_idmap_slot *s = &m->slots[(home(m, hash) + *pos) & (m->cap - 1)];
		if (!s->id)
			return 0;
		if (s->hash == hash) {
			*id = s->id;
			(*pos)++;
			return 1;
		}
	}
	return 0;
}

void jc__idmap_clear(struct jc_idmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->n = 0;
}
