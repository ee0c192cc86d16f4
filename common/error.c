/* SPDX-License-Identifier: MIT */
#include <stddef.h>

#include "jitcache/jitcache.h"

/* Indexed by -code. */
static const char *const error_names[] = {"success",
#define ERROR_NAME(name, value, text) [-(value)] = text,
					  JC_ERRORS(ERROR_NAME)
#undef ERROR_NAME
};

const char *jc_strerror(int code)
{
	size_t i = (size_t)(-code);
	if (code > 0 || i >= sizeof(error_names) / sizeof(error_names[0]))
		return "unknown error";
	return error_names[i] ? error_names[i] : "unknown error";
}

const char *jc_version(void)
{
	return JC_VERSION_STRING;
}
