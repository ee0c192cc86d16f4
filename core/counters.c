/* SPDX-License-Identifier: MIT */
#include "core/counters.h"

#include <string.h>

#include "core/index.h"

const char *const jc__counter_names[JC_CTR__COUNT] = {
#define X(name, help) #name,
	JC_COUNTERS(X)
#undef X
};

const char *const jc__counter_help[JC_CTR__COUNT] = {
#define X(name, help) help,
	JC_COUNTERS(X)
#undef X
};

static int load_counter(const char *name, uint64_t value, void *ctx)
{
	uint64_t *counters = ctx;
	for (int i = 0; i < JC_CTR__COUNT; i++)
		if (strcmp(name, jc__counter_names[i]) == 0)
			counters[i] = value;
	return 0;
}

int jc__counters_load_array(struct jc_index *ix, uint64_t counters[JC_CTR__COUNT])
{
	return jc__index_counters_load(ix, load_counter, counters);
}

void jc__counters_zero(struct jc_counters *cs)
{
	memset(cs->v, 0, sizeof(cs->v));
	cs->dirty = 1;
}

int jc__counters_take(struct jc_counters *cs, uint64_t out[JC_CTR__COUNT])
{
	if (!cs->dirty)
		return 0;
	memcpy(out, cs->v, sizeof(cs->v));
	cs->dirty = 0;
	return 1;
}
