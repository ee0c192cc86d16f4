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
 * The shim then compiles with the library the application named, not a
 * default: this module writes that path into the shim's slot
 * (shim/bypath.h) first. One path per process: an open of another file,
 * once the slot holds one, is not redirected (a line on stderr says so).
 */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/bypath.h"
#include "shim_config.h"

#define LA_API __attribute__((visibility("default")))

static char shim[PATH_MAX];
static uintptr_t *shim_cookie;
static struct link_map *shim_map;

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
		shim_cookie = cookie, shim_map = map;
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

/*
 * 1 when the shim is to stand in for path: the shim's slot was free and now
 * holds path, or holds a name of the same file. The slot is looked up here,
 * not at la_objopen: by now the shim is loaded and relocated (a by-path open
 * comes from running code). Without the slot nothing is redirected.
 */
static int claim(const char *path)
{
	static struct jc_bypath_slot *slot;
	char want[PATH_MAX], have[PATH_MAX];
	if (!slot) {
		/* dlsym() on the shim's own map would walk its search list, which a
		 * preloaded object does not have; the main program's is the global
		 * scope, preloaded objects included (the head of the shim's list). */
		struct link_map *head = shim_map;
		while (head->l_prev)
			head = head->l_prev;
		slot = dlsym(head, JC_BYPATH_SLOT);
	}
	if (!slot || __atomic_load_n(&slot->opening_real, __ATOMIC_ACQUIRE) ||
	    !realpath(path, want) || strlen(path) >= sizeof(slot->path))
		return 0; /* the shim's own open of the real one, or a missing file */
	int expect = JC_BYPATH_FREE;
	if (__atomic_compare_exchange_n(&slot->state, &expect, JC_BYPATH_WRITING, 0,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		const char *keep = path[0] == '/' ? path : want; /* the shim opens absolute paths */
		memcpy(slot->path, keep, strlen(keep) + 1);
		__atomic_store_n(&slot->state, JC_BYPATH_SET, __ATOMIC_RELEASE);
		return 1;
	}
	while (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) != JC_BYPATH_SET)
		; /* the shim is writing its path: a few stores */
	if (realpath(slot->path, have) && strcmp(have, want) == 0)
		return 1;
	fprintf(stderr,
		"libjitcache-audit: %s is not served (the shim of this process compiles with %s): "
		"opened as it is, uncached\n",
		path, slot->path);
	return 0;
}

LA_API char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag)
{
	const char *slash = strrchr(name, '/');
	if (flag != LA_SER_ORIG || !slash || cookie == shim_cookie || !shim_cookie ||
	    !names_nvrtc(slash + 1) || !claim(name))
		return (char *)name;
	return shim;
}
