/* SPDX-License-Identifier: MIT */
/* Whether a program name reached a result (progname.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/progname.h"
#include "jitcache/jitcache.h"

/* 1 when s is in data: as it is (a cubin's string), or as PTX writes a
 * string's bytes ("$str[16] = {47, 116, ...}"); JC_ENOMEM. */
static int in_bytes(const uint8_t *data, size_t size, const char *s)
{
	if (!data || !size)
		return 0;
	if (memmem(data, size, s, strlen(s)))
		return 1;
	char *dec = malloc(strlen(s) * 5 + 1), *w = dec;
	if (!dec)
		return JC_ENOMEM;
	for (const char *p = s; *p; p++)
		w += sprintf(w, "%s%u", p == s ? "" : ", ", (unsigned)(unsigned char)*p);
	int found = memmem(data, size, dec, (size_t)(w - dec)) != NULL;
	free(dec);
	return found;
}

int jc__progname_free(const char *name, const uint8_t *data, size_t size,
		      const struct jc_lowered *lowered, size_t n_lowered, const char *log,
		      char **log_out)
{
	*log_out = NULL;
	if (!name[0])
		name = "default_program";
	const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	char *mangled = strdup(base);
	if (!mangled)
		return JC_ENOMEM;
	for (char *p = mangled; *p; p++)
		if (!isalnum((unsigned char)*p))
			*p = '_';
	const char *forms[] = {name, base, mangled};
	char *out = log ? jc__text_replace(log, name, JC_NAME_STANDIN, 1) : NULL;
	int rc = log && !out ? JC_ENOMEM : 1;
	if (rc == 1 && log && strstr(log, JC_NAME_STANDIN))
		rc = 0;
	for (size_t i = 0; rc == 1 && i < sizeof(forms) / sizeof(forms[0]); i++) {
		int in = forms[i][0] ? in_bytes(data, size, forms[i]) : 1;
		if (in != 0 || (out && strstr(out, forms[i])))
			rc = in < 0 ? in : 0;
		for (size_t k = 0; rc == 1 && k < n_lowered; k++)
			if (lowered[k].lowered && strstr(lowered[k].lowered, forms[i]))
				rc = 0;
	}
	free(mangled);
	if (rc == 1)
		*log_out = out;
	else
		free(out);
	return rc;
}
