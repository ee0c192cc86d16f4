/* SPDX-License-Identifier: MIT */
/* Whether a program name reached a result (progname.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/key.h"
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

const char *jc__progname_base(const char *name)
{
	if (!name[0])
		return "default_program";
	return strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
}

/* 1 when form is in the artifact, a lowered name or the rewritten log (out);
 * an empty form always is; JC_ENOMEM. */
static int found(const char *form, const uint8_t *data, size_t size,
		 const struct jc_lowered *lowered, size_t n_lowered, const char *out)
{
	int in = form[0] ? in_bytes(data, size, form) : 1;
	if (in != 0 || (out && strstr(out, form)))
		return in < 0 ? in : 1;
	for (size_t k = 0; k < n_lowered; k++)
		if (lowered[k].lowered && strstr(lowered[k].lowered, form))
			return 1;
	return 0;
}

int jc__progname_free(const char *name, const uint8_t *data, size_t size,
		      const struct jc_lowered *lowered, size_t n_lowered, const char *log,
		      char **log_out)
{
	*log_out = NULL;
	const char *base = jc__progname_base(name);
	if (!name[0])
		name = base;
	char *mangled = strdup(base);
	char *out = log ? jc__text_replace(log, name, JC_NAME_STANDIN, 1) : NULL;
	if (!mangled || (log && !out)) {
		free(mangled);
		free(out);
		return JC_ENOMEM;
	}
	for (char *p = mangled; *p; p++)
		if (!isalnum((unsigned char)*p))
			*p = '_';
	/* the whole name or its directory (__FILE__, a directory cut from it),
	 * then its last component */
	int has_dir = base != name && base - name > 1;
	char *dir = has_dir ? strndup(name, (size_t)(base - name - 1)) : NULL;
	if (has_dir && !dir) {
		free(mangled);
		free(out);
		return JC_ENOMEM;
	}
	int full = log && strstr(log, JC_NAME_STANDIN)
		       ? 1
		       : found(name, data, size, lowered, n_lowered, out);
	if (full == 0 && dir)
		full = found(dir, data, size, lowered, n_lowered, out);
	int part = full ? 0 : found(base, data, size, lowered, n_lowered, out);
	part = part ? part : full ? 0 : found(mangled, data, size, lowered, n_lowered, out);
	free(mangled);
	free(dir);
	int rc = full < 0 || part < 0	   ? JC_ENOMEM
		 : full			   ? 0
		 : !part		   ? 1
		 : base != name && base[0] ? 2
					   : 0;
	if (rc == 1 || rc == 2)
		*log_out = out;
	else
		free(out);
	return rc;
}

int jc__progname_keys(const uint8_t key[16], const char *name, uint8_t base[16], uint8_t full[16])
{
	const char *b = jc__progname_base(name);
	int has_base = name[0] && b != name;
	if (jc__key_named(key, name, full) != 0 || (has_base && jc__key_named(key, b, base) != 0))
		return JC_ENOMEM;
	return has_base ? 2 : 1;
}
