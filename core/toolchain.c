/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/toolchain.h"

#include "common/elf_id.h"
#include "common/log.h"
#include "common/util.h"
#include "core/key.h"
#include "core/targets.h"
#include "jitcache/jitcache.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda.h>
#include <nvJitLink.h>
#include <nvrtc.h>
#include <pthread.h>
#include <xxhash.h>

/* Weak: a program that does not link NVRTC and nvJitLink sees NULL here and
 * loads them with dlopen (jc__nvrtc_api). */
#pragma weak nvrtcVersion
#pragma weak nvrtcGetErrorString
#pragma weak nvrtcGetNumSupportedArchs
#pragma weak nvrtcGetSupportedArchs
#pragma weak nvrtcCreateProgram
#pragma weak nvrtcCompileProgram
#pragma weak nvrtcGetPTXSize
#pragma weak nvrtcGetPTX
#pragma weak nvrtcDestroyProgram
#pragma weak nvJitLinkVersion

static pthread_once_t api_once = PTHREAD_ONCE_INIT;
static struct jc_nvrtc_api api;
static char api_err[400];

static void *sym(void *h, const char *lib, const char *name)
{
	void *p = h ? dlsym(h, name) : NULL;
	if (!p && !api_err[0])
		snprintf(api_err, sizeof(api_err), "%s: %s", h ? name : lib, dlerror());
	return p;
}

static void api_load(void)
{
	if (nvrtcVersion && nvJitLinkVersion) {
		api = (struct jc_nvrtc_api){
		    .version = (int (*)(int *, int *))nvrtcVersion,
		    .error_string = (const char *(*)(int))nvrtcGetErrorString,
		    .num_supported_archs = (int (*)(int *))nvrtcGetNumSupportedArchs,
		    .supported_archs = (int (*)(int *))nvrtcGetSupportedArchs,
		    .create_program =
			(int (*)(void **, const char *, const char *, int, const char *const *,
				 const char *const *))nvrtcCreateProgram,
		    .compile_program =
			(int (*)(void *, int, const char *const *))nvrtcCompileProgram,
		    .get_ptx_size = (int (*)(void *, size_t *))nvrtcGetPTXSize,
		    .get_ptx = (int (*)(void *, char *))nvrtcGetPTX,
		    .destroy_program = (int (*)(void **))nvrtcDestroyProgram,
		    .jitlink_version = (int (*)(unsigned *, unsigned *))nvJitLinkVersion,
		};
		return;
	}
	/* the sonames of the NVRTC and nvJitLink these headers declare ("libnvrtc.so.13") */
	char rtc[32], link[32];
	snprintf(rtc, sizeof(rtc), "libnvrtc.so.%d", CUDA_VERSION / 1000);
	snprintf(link, sizeof(link), "libnvJitLink.so.%d", CUDA_VERSION / 1000);
	void *h = dlopen(rtc, RTLD_NOW | RTLD_LOCAL), *j = dlopen(link, RTLD_NOW | RTLD_LOCAL);
	api = (struct jc_nvrtc_api){
	    .version = (int (*)(int *, int *))sym(h, rtc, "nvrtcVersion"),
	    .error_string = (const char *(*)(int))sym(h, rtc, "nvrtcGetErrorString"),
	    .num_supported_archs = (int (*)(int *))sym(h, rtc, "nvrtcGetNumSupportedArchs"),
	    .supported_archs = (int (*)(int *))sym(h, rtc, "nvrtcGetSupportedArchs"),
	    .create_program =
		(int (*)(void **, const char *, const char *, int, const char *const *,
			 const char *const *))sym(h, rtc, "nvrtcCreateProgram"),
	    .compile_program =
		(int (*)(void *, int, const char *const *))sym(h, rtc, "nvrtcCompileProgram"),
	    .get_ptx_size = (int (*)(void *, size_t *))sym(h, rtc, "nvrtcGetPTXSize"),
	    .get_ptx = (int (*)(void *, char *))sym(h, rtc, "nvrtcGetPTX"),
	    .destroy_program = (int (*)(void **))sym(h, rtc, "nvrtcDestroyProgram"),
	    .jitlink_version = (int (*)(unsigned *, unsigned *))sym(j, link, "nvJitLinkVersion"),
	};
}

const struct jc_nvrtc_api *jc__nvrtc_api(char *err, size_t errlen)
{
	pthread_once(&api_once, api_load);
	if (api_err[0]) {
		snprintf(err, errlen, "toolchain: cannot load NVRTC: %s", api_err);
		return NULL;
	}
	return &api;
}

/* Copies s into dst[size]; JC_EINTERNAL when it does not fit. */
static int put(char *dst, size_t size, const char *what, const char *s, char *err, size_t errlen)
{
	size_t n = strlen(s);
	if (n >= size)
		return jc__fail(err, errlen, JC_EINTERNAL, "toolchain: %s is %zu bytes, over %zu",
				what, n, size - 1);
	memcpy(dst, s, n + 1);
	return 0;
}

struct mapped_search {
	uintptr_t addr; /* in: an address inside the library */
	char *out;	/* out: "build-id:<hex>" or untouched */
	size_t outlen;
	int found_module;
	int found_id;
};

static int mapped_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct mapped_search *s = data;
	(void)size;
	int inside = 0;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && s->addr >= start && s->addr - start < ph->p_memsz)
			inside = 1;
	}
	/* The main program reports an empty name: an address there is a PLT stub
	 * of a non-PIE executable, not the library. */
	if (!inside || !info->dlpi_name[0])
		return 0;
	s->found_module = 1;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum && !s->found_id; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE)
			s->found_id =
			    jc__elf_notes_build_id((const uint8_t *)(info->dlpi_addr + ph->p_vaddr),
						   ph->p_memsz, ph->p_align, s->out, s->outlen);
	}
	return 1;
}

/* Identity of the loaded library that defines fn; its path to dir[dirlen] if dir. */
static int mapped_identity(void *fn, const char *what, char *out, size_t outlen, char *dir,
			   size_t dirlen, char *err, size_t errlen)
{
	Dl_info di;
	if (!dladdr(fn, &di) || !di.dli_fname)
		return jc__fail(err, errlen, JC_EINTERNAL, "toolchain: dladdr found no %s mapping",
				what);
	struct mapped_search s = {.addr = (uintptr_t)fn, .out = out, .outlen = outlen};
	dl_iterate_phdr(mapped_cb, &s);
	if (!s.found_module)
		return jc__fail(
		    err, errlen, JC_EINTERNAL,
		    "toolchain: %s resolves into the executable (%s), not a shared library", what,
		    di.dli_fname);
	if (dir) {
		const char *slash = strrchr(di.dli_fname, '/');
		size_t n = slash ? (size_t)(slash - di.dli_fname) : 1;
		if (n >= dirlen)
			return jc__fail(err, errlen, JC_EINTERNAL, "toolchain: %s path too long",
					what);
		memcpy(dir, slash ? di.dli_fname : ".", n);
		dir[n] = '\0';
	}
	if (s.found_id)
		return 0;
	jc_log_info(KEY, "%s (%s) has no build-id: hashing the file", what, di.dli_fname);
	return jc__file_hash_id(di.dli_fname, out, outlen, err, errlen);
}

/* Lines "relative path\ttype size mtime_ns" of every entry under a tree. */
struct tree_lines {
	char **v;
	size_t n, cap;
};

static int tree_collect(const char *root, const char *rel, struct tree_lines *t, int depth)
{
	char path[8192];
	snprintf(path, sizeof(path), "%s%s", root, rel);
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT && depth ? 0 : -1; /* vanished while walking: harmless */
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char sub[8192];
		struct stat st;
		snprintf(sub, sizeof(sub), "%s/%s", rel, de->d_name);
		snprintf(path, sizeof(path), "%s%s", root, sub);
		if (lstat(path, &st) != 0)
			continue;
		if (t->n == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 1024;
			char **v = realloc(t->v, cap * sizeof(*v));
			if (!v) {
				rc = -1;
				break;
			}
			t->v = v;
			t->cap = cap;
		}
		if (asprintf(&t->v[t->n], "%s\t%o %lld %lld", sub, (unsigned)(st.st_mode & S_IFMT),
			     (long long)st.st_size,
			     (long long)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec) < 0) {
			rc = -1;
			break;
		}
		t->n++;
		/* Symbolic links enter as links (their size is the target's length). */
		if (S_ISDIR(st.st_mode) && depth < 64)
			rc = tree_collect(root, sub, t, depth + 1);
	}
	closedir(d);
	return rc;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* toolkit_include and toolkit_include_id from the directory of libnvrtc. */
static int toolkit_include(const char *libdir, struct jc_toolchain *tc, char *err, size_t errlen)
{
	char guess[4200];
	snprintf(guess, sizeof(guess), "%s/../include", libdir);
	struct stat st;
	if (!realpath(guess, tc->toolkit_include) || stat(tc->toolkit_include, &st) != 0 ||
	    !S_ISDIR(st.st_mode)) {
		tc->toolkit_include[0] = '\0';
		return put(tc->toolkit_include_id, sizeof(tc->toolkit_include_id),
			   "toolkit include id", "none", err, errlen);
	}
	struct tree_lines t = {0};
	int rc = tree_collect(tc->toolkit_include, "", &t, 0);
	XXH3_state_t *hs = XXH3_createState();
	if (rc != 0 || !hs || XXH3_128bits_reset(hs) != XXH_OK) {
		rc = jc__fail(err, errlen, rc ? JC_EIO : JC_ENOMEM, "toolchain: walking %s: %s",
			      tc->toolkit_include, rc ? strerror(errno) : "out of memory");
	} else {
		qsort(t.v, t.n, sizeof(*t.v), cmp_line);
		for (size_t i = 0; i < t.n; i++)
			XXH3_128bits_update(hs, t.v[i], strlen(t.v[i]) + 1);
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(hs));
		char hex[33];
		jc__hex16(c.digest, hex);
		snprintf(tc->toolkit_include_id, sizeof(tc->toolkit_include_id), "tree:%s", hex);
	}
	XXH3_freeState(hs);
	for (size_t i = 0; i < t.n; i++)
		free(t.v[i]);
	free(t.v);
	return rc;
}

static int driver_version(char *out, size_t outlen, char *err, size_t errlen)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return put(out, outlen, "driver version", "none", err, errlen);
	/* CUresult cuDriverGetVersion(int *driverVersion): CUresult is an enum, 0 = CUDA_SUCCESS.
	 */
	int (*get)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
	int v = 0, rc = get ? get(&v) : -1;
	dlclose(h);
	if (rc != 0) {
		jc_log_warn(
		    KEY, "libcuda.so.1 loads but cuDriverGetVersion fails (%d): driver=none", rc);
		return put(out, outlen, "driver version", "none", err, errlen);
	}
	snprintf(out, outlen, "%d.%d", v / 1000, (v % 1000) / 10);
	return 0;
}

static void driver_build(char *out, size_t outlen)
{
	FILE *f = fopen("/proc/driver/nvidia/version", "re");
	char line[1024];
	const char *s = "";
	if (f && fgets(line, sizeof(line), f)) {
		char *e = line + strlen(line);
		while (e > line &&
		       (e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
			*--e = '\0';
		s = line + strspn(line, " \t");
	}
	if (f)
		fclose(f);
	snprintf(out, outlen, "%s", *s ? s : "none");
}

static int archs(const struct jc_nvrtc_api *nv, char *out, size_t outlen, char *err, size_t errlen)
{
	int n = 0;
	int r = nv->num_supported_archs(&n);
	if (r != NVRTC_SUCCESS || n <= 0 || n > 256)
		return jc__fail(err, errlen, JC_EINTERNAL,
				"toolchain: nvrtcGetNumSupportedArchs: %s (%d)",
				nv->error_string(r), n);
	int a[256];
	r = nv->supported_archs(a);
	if (r != NVRTC_SUCCESS)
		return jc__fail(err, errlen, JC_EINTERNAL, "toolchain: nvrtcGetSupportedArchs: %s",
				nv->error_string(r));
	size_t len = 0;
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		int w = snprintf(out + len, outlen - len, "%ssm_%d", i ? " " : "", a[i]);
		if (w < 0 || (size_t)w >= outlen - len)
			return jc__fail(err, errlen, JC_EINTERNAL,
					"toolchain: supported arch list too long");
		len += (size_t)w;
	}
	return 0;
}

/* tc->fatbin_* (toolchain.h) for the toolkit whose libnvrtc is in libdir. */
static int fatbin_tool(const char *libdir, int nvrtc_major, struct jc_toolchain *tc, char *err,
		       size_t errlen)
{
	const char *force = getenv("JITCACHE_TEST_FATBIN");
	int lib = force && force[0] == '/';
	if (force && !lib && strcmp(force, "none") != 0 && strcmp(force, "fatbinary") != 0)
		return jc__fail(err, errlen, JC_EINVAL,
				"toolchain: JITCACHE_TEST_FATBIN must be none, "
				"fatbinary or the absolute path of a libnvfatbin, not '%s'",
				force);
	if (force)
		jc_log_warn(KEY, "test override JITCACHE_TEST_FATBIN=%s", force);
	char path[4300], id[96];
	int rc;
	if (lib)
		snprintf(path, sizeof(path), "%s", force);
	else
		snprintf(path, sizeof(path), "%s/libnvfatbin.so.%d", libdir, nvrtc_major);
	void *h = force && !lib ? NULL : dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib && !h)
		return jc__fail(err, errlen, JC_EINVAL, "toolchain: JITCACHE_TEST_FATBIN=%s: %s",
				force, dlerror());
	if (h) {
		/* nvFatbinResult nvFatbinVersion(unsigned *major, unsigned *minor) (nvFatbin.h). */
		int (*version)(unsigned *, unsigned *) =
		    (int (*)(unsigned *, unsigned *))dlsym(h, "nvFatbinVersion");
		unsigned maj = 0, min = 0;
		int ok = version && version(&maj, &min) == 0;
		dlclose(h);
		if (ok) {
			if ((rc = jc__file_identity(path, id, sizeof(id), err, errlen)) != 0)
				return rc;
			tc->fatbin_tool = JC_FATBIN_NVFATBIN;
			snprintf(tc->fatbin_id, sizeof(tc->fatbin_id), "nvfatbin %u.%u %s", maj,
				 min, id);
			return put(tc->fatbin_path, sizeof(tc->fatbin_path), "nvfatbin path", path,
				   err, errlen);
		}
		jc_log_warn(KEY, "%s lacks a working nvFatbinVersion: not used", path);
	}
	static const char *const rel[] = {"/../bin/fatbinary", "/../../../bin/fatbinary"};
	for (size_t i = 0; i < 2 && !(force && strcmp(force, "none") == 0); i++) {
		snprintf(path, sizeof(path), "%s%s", libdir, rel[i]);
		char real[4096];
		if (!realpath(path, real) || access(real, X_OK) != 0)
			continue;
		if ((rc = jc__file_hash_id(real, id, sizeof(id), err, errlen)) != 0)
			return rc;
		tc->fatbin_tool = JC_FATBIN_FATBINARY;
		snprintf(tc->fatbin_id, sizeof(tc->fatbin_id), "fatbinary %s", id);
		return put(tc->fatbin_path, sizeof(tc->fatbin_path), "fatbinary path", real, err,
			   errlen);
	}
	tc->fatbin_tool = JC_FATBIN_NONE;
	tc->fatbin_path[0] = '\0';
	return put(tc->fatbin_id, sizeof(tc->fatbin_id), "fatbin id", "none", err, errlen);
}

static int override(const char *env, char *field, size_t size, char *err, size_t errlen)
{
	const char *v = getenv(env);
	if (!v)
		return 0;
	if (!*v || strlen(v) >= size)
		return jc__fail(err, errlen, JC_EINVAL, "toolchain: %s must be 1..%zu bytes", env,
				size - 1);
	jc_log_warn(KEY, "test override %s=%s", env, v);
	memcpy(field, v, strlen(v) + 1);
	return 0;
}

/* The compiler fields of tc (toolchain.h, jc__toolchain_probe_compiler);
 * libdir gets the directory of the loaded libnvrtc when not NULL. */
static int probe_compiler(struct jc_toolchain *tc, char *libdir, size_t libdirlen, char *err,
			  size_t errlen)
{
	int maj, min, rc;
	const struct jc_nvrtc_api *nv = jc__nvrtc_api(err, errlen);
	if (!nv)
		return JC_EINTERNAL;
	int r = nv->version(&maj, &min);
	if (r != NVRTC_SUCCESS)
		return jc__fail(err, errlen, JC_EINTERNAL, "toolchain: nvrtcVersion: %s",
				nv->error_string(r));
	snprintf(tc->nvrtc_version, sizeof(tc->nvrtc_version), "%d.%d", maj, min);
	unsigned jmaj, jmin;
	int jr = nv->jitlink_version(&jmaj, &jmin);
	if (jr != NVJITLINK_SUCCESS)
		return jc__fail(err, errlen, JC_EINTERNAL,
				"toolchain: nvJitLinkVersion failed (%d)", (int)jr);
	snprintf(tc->nvjitlink_version, sizeof(tc->nvjitlink_version), "%u.%u", jmaj, jmin);

	char dir[4096], builtins[4200];
	if ((rc = mapped_identity((void *)nv->version, "libnvrtc", tc->nvrtc_id,
				  sizeof(tc->nvrtc_id), dir, sizeof(dir), err, errlen)) ||
	    (rc = mapped_identity((void *)nv->jitlink_version, "libnvJitLink", tc->nvjitlink_id,
				  sizeof(tc->nvjitlink_id), NULL, 0, err, errlen)))
		return rc;
	snprintf(builtins, sizeof(builtins), "%s/libnvrtc-builtins.so.%d.%d", dir, maj, min);
	if ((rc = jc__file_identity(builtins, tc->nvrtc_builtins_id, sizeof(tc->nvrtc_builtins_id),
				    err, errlen)) ||
	    (rc = override("JITCACHE_TEST_NVRTC_ID", tc->nvrtc_id, sizeof(tc->nvrtc_id), err,
			   errlen)))
		return rc;
	if (libdir)
		snprintf(libdir, libdirlen, "%s", dir);
	return 0;
}

int jc__toolchain_probe_compiler(struct jc_toolchain *tc, char *err, size_t errlen)
{
	memset(tc, 0, sizeof(*tc));
	return probe_compiler(tc, NULL, 0, err, errlen);
}

int jc__toolchain_compiler(const struct jc_toolchain *tc, char *out, size_t len)
{
	int n =
	    snprintf(out, len, "nvrtc=%s/%s;builtins=%s;nvjitlink=%s/%s", tc->nvrtc_version,
		     tc->nvrtc_id, tc->nvrtc_builtins_id, tc->nvjitlink_version, tc->nvjitlink_id);
	return n < 0 || (size_t)n >= len ? JC_ETOOBIG : 0;
}

int jc__toolchain_probe(struct jc_toolchain *tc, char *err, size_t errlen)
{
	memset(tc, 0, sizeof(*tc));
	char dir[4096];
	int rc = probe_compiler(tc, dir, sizeof(dir), err, errlen);
	const struct jc_nvrtc_api *nv = rc ? NULL : jc__nvrtc_api(err, errlen);
	if (rc != 0)
		return rc;
	if ((rc = toolkit_include(dir, tc, err, errlen)) ||
	    (rc = fatbin_tool(dir, atoi(tc->nvrtc_version), tc, err, errlen)) ||
	    (rc = driver_version(tc->driver_version, sizeof(tc->driver_version), err, errlen)) ||
	    (rc = archs(nv, tc->supported_archs, sizeof(tc->supported_archs), err, errlen)) ||
	    (rc = override("JITCACHE_TEST_DRIVER_VERSION", tc->driver_version,
			   sizeof(tc->driver_version), err, errlen)))
		return rc;
	driver_build(tc->driver_build, sizeof(tc->driver_build));

	char compiler[sizeof(tc->summary)];
	int n =
	    jc__toolchain_compiler(tc, compiler, sizeof(compiler)) != 0
		? -1
		: snprintf(tc->summary, sizeof(tc->summary), "%s;driver=%s/%s;toolkit_include=%s",
			   compiler, tc->driver_version, tc->driver_build, tc->toolkit_include_id);
	if (n < 0 || (size_t)n >= sizeof(tc->summary))
		return jc__fail(err, errlen, JC_EINTERNAL, "toolchain: summary over %zu bytes",
				sizeof(tc->summary) - 1);
	return 0;
}

/* Every field of struct jc_toolchain, for jc__toolchain_format / _parse
 * (fatbin_tool, an int, is written as its decimal value). */
#define TC_FIELD(f)                                                                                \
	{                                                                                          \
#f, offsetof(struct jc_toolchain, f), sizeof(((struct jc_toolchain *)0)->f)        \
	}
static const struct {
	const char *name;
	size_t off, size;
} tc_fields[] = {
    TC_FIELD(nvrtc_version),	 TC_FIELD(nvrtc_id),	    TC_FIELD(nvrtc_builtins_id),
    TC_FIELD(nvjitlink_version), TC_FIELD(nvjitlink_id),    TC_FIELD(driver_version),
    TC_FIELD(driver_build),	 TC_FIELD(toolkit_include), TC_FIELD(toolkit_include_id),
    TC_FIELD(supported_archs),	 TC_FIELD(fatbin_tool),	    TC_FIELD(fatbin_path),
    TC_FIELD(fatbin_id),	 TC_FIELD(summary),
};
#undef TC_FIELD

int jc__toolchain_format(const struct jc_toolchain *tc, FILE *out)
{
	for (size_t i = 0; i < sizeof(tc_fields) / sizeof(tc_fields[0]); i++) {
		const char *v = (const char *)tc + tc_fields[i].off;
		if (tc_fields[i].off == offsetof(struct jc_toolchain, fatbin_tool))
			fprintf(out, "%s=%d\n", tc_fields[i].name, tc->fatbin_tool);
		else
			fprintf(out, "%s=%s\n", tc_fields[i].name, v);
	}
	return ferror(out) ? JC_EIO : 0;
}

int jc__toolchain_parse(const char *text, struct jc_toolchain *tc, char *err, size_t errlen)
{
	memset(tc, 0, sizeof(*tc));
	const char *p = text;
	for (size_t i = 0; i < sizeof(tc_fields) / sizeof(tc_fields[0]); i++) {
		size_t name = strlen(tc_fields[i].name), len;
		if (strncmp(p, tc_fields[i].name, name) != 0 || p[name] != '=')
			return jc__fail(err, errlen, JC_EPROTO,
					"toolchain: field %s expected at \"%.40s\"",
					tc_fields[i].name, p);
		p += name + 1;
		len = strcspn(p, "\n");
		if (p[len] != '\n' || len >= tc_fields[i].size)
			return jc__fail(err, errlen, JC_EPROTO,
					"toolchain: field %s unterminated or "
					"over %zu bytes",
					tc_fields[i].name, tc_fields[i].size - 1);
		if (tc_fields[i].off == offsetof(struct jc_toolchain, fatbin_tool)) {
			char *end;
			long v = strtol(p, &end, 10);
			if (end != p + len || v < JC_FATBIN_NONE || v > JC_FATBIN_FATBINARY)
				return jc__fail(err, errlen, JC_EPROTO,
						"toolchain: bad fatbin_tool");
			tc->fatbin_tool = (int)v;
		} else {
			memcpy((char *)tc + tc_fields[i].off, p, len);
		}
		p += len + 1;
	}
	if (*p || !tc->summary[0] || !tc->nvrtc_id[0])
		return jc__fail(err, errlen, JC_EPROTO, "toolchain: trailing or missing fields");
	return 0;
}

int jc__toolchain_supports_arch(const struct jc_toolchain *tc, const char *arch)
{
	int want = jc__arch_number(arch);
	if (want < 0)
		return 0;
	for (const char *p = tc->supported_archs; (p = strstr(p, "sm_")); p += 3) {
		char *end;
		long have = strtol(p + 3, &end, 10);
		if (have == want && (*end == ' ' || *end == '\0'))
			return 1;
	}
	return 0;
}
