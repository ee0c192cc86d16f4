/* SPDX-License-Identifier: MIT */
#include <stddef.h>

#include "jitcache/jitcache.h"

static const char *const error_names[] = {
	"success", "invalid argument or request", "out of memory", "I/O error",
	"no daemon answers on the socket", "protocol error", "frame or field too large",
	"compile or link failed", "compile worker crashed", "compile timed out",
	"cache disk full", "corrupt object", "version mismatch", "permission denied",
	"cache directory locked by another daemon", "not found", "daemon busy or stopping",
	"internal error", "not supported here",
};

const char *jc_strerror(int code)
{
	size_t i = (size_t)(-code);
	if (code > 0 || i >= sizeof(error_names) / sizeof(error_names[0]))
		return "unknown error";
	return error_names[i];
}

const char *jc_version(void)
{
	return JC_VERSION_STRING;
}
