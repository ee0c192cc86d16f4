/* SPDX-License-Identifier: MIT */
/* Loading the real libnvrtc (real.h). */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/bypath.h"
#include "shim/real.h"
#include "shim_config.h"

static struct jc_real_nvrtc table;
static const struct jc_real_nvrtc *loaded; /* &table once complete, read atomically */
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* The real library's path (shim/bypath.h): exported for the audit module. */
__attribute__((visibility("default"))) struct jc_bypath_slot jc__bypath_slot;
static const char *const path = jc__bypath_slot.path;

/* 1 when the object has a DT_RUNPATH or DT_RPATH entry. */
static int has_runpath(void *handle)
{
	struct link_map *lm = NULL;
	if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
		return 0;
	for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++)
		if (d->d_tag == DT_RUNPATH || d->d_tag == DT_RPATH)
			return 1;
	return 0;
}

/*
 * NVRTC dlopen()s "libnvrtc-builtins.so.<major>.<minor>" by soname when it
 * compiles. Opened by absolute path from outside the loader's search path
 * (a pip wheel's directory, $JITCACHE_REAL_NVRTC), a library without a
 * RUNPATH would not find its own builtins, or would find another build's:
 * the one beside it is opened first, and glibc then matches the soname.
 */
static void preload_builtins(void *handle)
{
	int major = 0, minor = 0;
	if (has_runpath(handle) || table.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
		return;
	char dir[sizeof(jc__bypath_slot.path)], builtins[sizeof(jc__bypath_slot.path) + 64];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return;
	*slash = '\0';
	snprintf(builtins, sizeof(builtins), "%s/libnvrtc-builtins.so.%d.%d", dir, major, minor);
	if (access(builtins, R_OK) == 0)
		dlopen(builtins, RTLD_NOW | RTLD_LOCAL); /* kept for the process's life */
}

const char *jc__real_path(void)
{
	int st = __atomic_load_n(&jc__bypath_slot.state, __ATOMIC_ACQUIRE);
	if (__builtin_expect(st == JC_BYPATH_SET, 1))
		return path;
	int expect = JC_BYPATH_FREE;
	if (__atomic_compare_exchange_n(&jc__bypath_slot.state, &expect, JC_BYPATH_WRITING, 0,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		const char *env = getenv("JITCACHE_REAL_NVRTC");
		snprintf(jc__bypath_slot.path, sizeof(jc__bypath_slot.path), "%s",
			 env && *env ? env : JC_REAL_NVRTC);
		__atomic_store_n(&jc__bypath_slot.state, JC_BYPATH_SET, __ATOMIC_RELEASE);
	}
	while (__atomic_load_n(&jc__bypath_slot.state, __ATOMIC_ACQUIRE) != JC_BYPATH_SET)
		sched_yield(); /* another thread, or the audit module, is writing it */
	return path;
}

/* A path the user named outright is claimed at start: the audit module then
 * redirects only opens of that very file. */
__attribute__((constructor)) static void claim_named_path(void)
{
	const char *env = getenv("JITCACHE_REAL_NVRTC");
	if (env && *env)
		jc__real_path();
}

static void load(void)
{
	jc__real_path();
	if (path[0] != '/') {
		fprintf(stderr,
			"libjitcache-nvrtc: JITCACHE_REAL_NVRTC=%s is not an absolute path\n",
			path);
		return;
	}
	/* RTLD_LOCAL: its symbols never interpose on anyone's; the real library
	 * is linked -Bsymbolic, so its own calls stay inside it. */
	__atomic_store_n(&jc__bypath_slot.opening_real, 1, __ATOMIC_RELEASE);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	__atomic_store_n(&jc__bypath_slot.opening_real, 0, __ATOMIC_RELEASE);
	if (!h) {
		fprintf(stderr, "libjitcache-nvrtc: cannot load the real NVRTC: %s\n", dlerror());
		return;
	}
#define JC_REAL_LOOKUP(ret, name, params, args, use)                                               \
	if (!(*(void **)&table.name = dlsym(h, #name))) {                                          \
		fprintf(stderr,                                                                    \
			"libjitcache-nvrtc: %s lacks %s: not an NVRTC of this major version\n",    \
			path, #name);                                                              \
		return;                                                                            \
	}
	JC_NVRTC_FUNCTIONS(JC_REAL_LOOKUP)
#undef JC_REAL_LOOKUP
	preload_builtins(h);
	__atomic_store_n(&loaded, &table, __ATOMIC_RELEASE);
}

const struct jc_real_nvrtc *jc__real(void)
{
	const struct jc_real_nvrtc *t = __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
	if (__builtin_expect(t != NULL, 1))
		return t;
	pthread_once(&once, load);
	return __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
}
