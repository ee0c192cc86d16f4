/* SPDX-License-Identifier: MIT */
#include "daemon/retry.h"

#include <stdlib.h>
#include <string.h>

#include "jitcache/jitcache.h"

struct slot {
	uint8_t key[16];
	int64_t at[JC_LOAD_RETRY_MAX]; /* times of the recompiles, 0 = none */
};

struct jc_retry {
	struct slot slots[JC_LOAD_RETRY_KEYS];
};

int jc__retry_new(struct jc_retry **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : JC_ENOMEM;
}

void jc__retry_free(struct jc_retry *t)
{
	free(t);
}

/* Recompiles of s inside the window ending at now; *oldest gets the index of
 * the oldest (or an empty) stamp. */
static int in_window(const struct slot *s, int64_t now, int *oldest)
{
	int n = 0;
	*oldest = 0;
	for (int i = 0; i < JC_LOAD_RETRY_MAX; i++) {
		if (s->at[i] && s->at[i] > now - JC_LOAD_RETRY_WINDOW_S)
			n++;
		if (s->at[i] < s->at[*oldest])
			*oldest = i;
	}
	return n;
}

int jc__retry_take(struct jc_retry *t, const uint8_t key[16], int64_t now_s)
{
	/* Reports are rare (a load failure each): a linear scan is cheap enough. */
	struct slot *mine = NULL, *free_slot = NULL;
	int oldest;
	for (size_t i = 0; i < JC_LOAD_RETRY_KEYS && !mine; i++) {
		struct slot *s = &t->slots[i];
		if (memcmp(s->key, key, 16) == 0 && s->at[0])
			mine = s;
		else if (!free_slot && in_window(s, now_s, &oldest) == 0)
			free_slot = s;
	}
	if (!mine) {
		if (!free_slot)
			return 0;
		mine = free_slot;
		memset(mine, 0, sizeof(*mine));
		memcpy(mine->key, key, 16);
	}
	if (in_window(mine, now_s, &oldest) >= JC_LOAD_RETRY_MAX)
		return 0;
	mine->at[oldest] = now_s > 0 ? now_s : 1; /* 0 marks an empty stamp */
	return 1;
}
