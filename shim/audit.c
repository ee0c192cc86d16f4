/* SPDX-License-Identifier: MIT */
/*
 * libjitcache-audit: an rtld-audit module (LD_AUDIT, rtld-audit(7)) that
 * jitcache-run --by-path adds. glibc matches a library opened by path by its
 * file, never by soname, so an application that dlopen()s its own
 * libnvrtc.so.<major> by absolute path (ctypes.CDLL("/.../libnvrtc.so.13"))
 * would get the real library beside the preloaded shim. Before such a path
 * is opened, this module names the shim instead, for every object but the
 * shim itself (whose own dlopen of the real library must go through).
 * Names it redirects: basename "libnvrtc.so" or "libnvrtc.so.<major>[.*]".
 * The shim is libjitcache-nvrtc.so in this module's directory.
 */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim_config.h"

#define LA_API __attribute__((visibility("default")))

static char shim[PATH_MAX];
static uintptr_t *shim_cookie;

LA_API unsigned int la_version(unsigned int version)
{
	Dl_info info;
	char self[PATH_MAX];
	if (!dladdr((void *)la_version, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, self))
		return 0; /* not auditing: nothing would be redirected right */
	char *slash = strrchr(self, '/');
	*slash = '\0';
	size_t n = strlen(self);
	if (n + sizeof("/libjitcache-nvrtc.so") > sizeof(shim))
		return 0;
	memcpy(shim, self, n);
	memcpy(shim + n, "/libjitcache-nvrtc.so", sizeof("/libjitcache-nvrtc.so"));
	return version < LAV_CURRENT ? version : LAV_CURRENT;
}

LA_API unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
	char real[PATH_MAX];
	(void)lmid;
	if (!shim_cookie && map->l_name && map->l_name[0] && realpath(map->l_name, real) &&
	    strcmp(real, shim) == 0)
		shim_cookie = cookie;
	return 0; /* no symbol binding audit: calls cost nothing */
}

/* "libnvrtc.so", or JC_SHIM_SONAME optionally followed by ".anything". */
static int names_nvrtc(const char *base)
{
	size_t n = strlen(JC_SHIM_SONAME);
	if (strcmp(base, "libnvrtc.so") == 0)
		return 1;
	return strncmp(base, JC_SHIM_SONAME, n) == 0 && (base[n] == '\0' || base[n] == '.');
}

LA_API char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag)
{
	const char *slash = strrchr(name, '/');
	if (flag != LA_SER_ORIG || !slash || cookie == shim_cookie || !shim_cookie ||
	    !names_nvrtc(slash + 1))
		return (char *)name;
	return shim;
}
