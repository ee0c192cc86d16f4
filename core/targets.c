/* SPDX-License-Identifier: MIT */
/* Target lists of multi-architecture requests: see targets.h. */
#include "core/targets.h"

#include <string.h>

#include "common/util.h"
#include "core/key.h"
#include "jitcache/jitcache.h"

int jc__arch_number(const char *arch)
{
	if (!arch)
		return JC_EINVAL;
	const char *p = strncmp(arch, "sm_", 3) == 0	    ? arch + 3
			: strncmp(arch, "compute_", 8) == 0 ? arch + 8
							    : NULL;
	if (!p)
		return JC_EINVAL;
	int n = 0, digits = 0;
	for (; *p >= '0' && *p <= '9' && digits < 3; p++, digits++)
		n = n * 10 + (*p - '0');
	if (digits < 2 || (*p && ((*p != 'a' && *p != 'f') || p[1])))
		return JC_EINVAL;
	return n;
}

int jc__targets_parse(const char *list, struct jc_targets *t, char *err, size_t errlen)
{
	t->n = 0;
	if (!list || !*list)
		return jc__fail(err, errlen, JC_EINVAL, "the target list is empty");
	for (const char *p = list;; p++) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == 0)
			return jc__fail(err, errlen, JC_EINVAL,
					"target list \"%s\" has an empty item", list);
		if (t->n == JC_TARGETS_MAX)
			return jc__fail(err, errlen, JC_EINVAL,
					"target list \"%s\" has more than %d targets", list,
					JC_TARGETS_MAX);
		char *v = t->v[t->n];
		if (len >= JC_TARGET_LEN ||
		    (memcpy(v, p, len), v[len] = '\0', jc__arch_number(v) < 0))
			return jc__fail(err, errlen, JC_EINVAL,
					"target \"%.*s\" in \"%s\" is not sm_NN, "
					"sm_NNa, sm_NNf or compute_NN",
					(int)(len > 64 ? 64 : len), p, list);
		for (size_t i = 0; i < t->n; i++)
			if (strcmp(t->v[i], v) == 0)
				return jc__fail(err, errlen, JC_EINVAL,
						"target %s is given twice in \"%s\"", v, list);
		t->n++;
		if (!end)
			return 0;
		p = end;
	}
}

uint32_t jc__target_output(const char *target)
{
	return strncmp(target, "compute_", 8) == 0 ? JC_OUTPUT_PTX : JC_OUTPUT_CUBIN;
}
