/* SPDX-License-Identifier: MIT */
#include "core/counters.h"

#include <string.h>

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
