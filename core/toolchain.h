/* SPDX-License-Identifier: MIT */
/*
 * Toolchain identity: which NVRTC, nvJitLink and CUDA driver this process
 * compiles with. Probed once at start-up; every field that can change an
 * artifact or whether it loads enters the cache key (see key.h), and the
 * summary line is stored with each entry so stale entries can be found.
 *
 * libnvrtc and libnvJitLink are linked; libcuda is never linked, only
 * dlopen()ed, so the daemon runs on machines without a driver.
 */
#ifndef JC_TOOLCHAIN_H
#define JC_TOOLCHAIN_H

#include <stddef.h>
#include <stdio.h>

enum jc_fatbin_tool { JC_FATBIN_NONE = 0, JC_FATBIN_NVFATBIN = 1, JC_FATBIN_FATBINARY = 2 };

/* All string fields are NUL-terminated, never empty (but fatbin_path). */
struct jc_toolchain {
	/* "13.0": nvrtcVersion() (NVRTC API reference, "nvrtcVersion"). */
	char nvrtc_version[16];
	/* Identity of the libnvrtc mapped into this process: "build-id:<hex>" from
	 * the ELF NT_GNU_BUILD_ID note of the mapped image (located through
	 * dladdr(nvrtcVersion) and dl_iterate_phdr's PT_NOTE segments), else
	 * "xxh128:<hex>" of the file's bytes. Patch releases keep the version and
	 * change the code, hence this field. */
	char nvrtc_id[80];
	/* Same for libnvrtc-builtins.so.<major>.<minor> in the directory of the
	 * loaded libnvrtc (read from the file: NVRTC loads it only when
	 * compiling); "none" when that file does not exist. */
	char nvrtc_builtins_id[80];
	/* "13.0": nvJitLinkVersion() (nvJitLink API reference, "nvJitLinkVersion"). */
	char nvjitlink_version[16];
	/* Identity of the mapped libnvJitLink, as nvrtc_id. */
	char nvjitlink_id[80];
	/* cuDriverGetVersion() of dlopen("libcuda.so.1") as "<major>.<minor>"
	 * (13000 -> "13.0": CUDA driver API reference, "cuDriverGetVersion");
	 * "none" when libcuda cannot be loaded or the call fails. */
	char driver_version[16];
	/* First line of /proc/driver/nvidia/version, leading and trailing blanks
	 * removed (cut to the field size); "none" when absent. */
	char driver_build[256];
	/* The CUDA toolkit's own include tree: realpath of <directory of the
	 * loaded libnvrtc>/../include (/usr/local/cuda-13.0/include, or
	 * .../targets/x86_64-linux/include); "" when there is none. Include
	 * directories inside it are covered by toolkit_include_id instead of
	 * being hashed per request (includes.h). */
	char toolkit_include[4096];
	/* "tree:<xxh128>" over the sorted (relative path, type, size,
	 * mtime_ns) of every entry under toolkit_include, taken once at start-up
	 * (about 2000 stat calls for CUDA 13.0); "none" without the tree. A
	 * toolkit update in place changes sizes and mtimes (packages carry their
	 * files' mtimes) and needs a daemon restart, as libnvrtc itself does. */
	char toolkit_include_id[80];
	/* "sm_75 sm_80 ...": nvrtcGetSupportedArchs() (NVRTC API reference,
	 * "nvrtcGetSupportedArchs"), space-separated, in NVRTC's order.
	 * Not in the key nor the summary: nvrtc_id determines it. */
	char supported_archs[1024];
	/* The tool that puts images into a fatbin (fatbin.h), searched for
	 * beside the loaded libnvrtc: nvFatbin (libnvfatbin.so.<nvrtc major> in
	 * its directory, CUDA 12.4+), else the fatbinary executable
	 * (<libdir>/../bin or <libdir>/../../../bin, for the lib64 and
	 * targets/<triple>/lib layouts), else none. fatbin_path is its file
	 * ("" for none); fatbin_id ("nvfatbin <version> <build-id or xxh128>",
	 * "fatbinary xxh128:<hex>" of the executable, or "none") enters the key
	 * of every fatbin request, not the summary. Test-only override:
	 * JITCACHE_TEST_FATBIN=none or =fatbinary skips nvFatbin (and fatbinary
	 * too for none); =/ABSOLUTE/PATH uses that library as nvFatbin. */
	int fatbin_tool; /* enum jc_fatbin_tool */
	char fatbin_path[4096];
	char fatbin_id[160];
	/* One canonical line of every field above except supported_archs,
	 * toolkit_include and the fatbin tool's:
	 * "nvrtc=<ver>/<id>;builtins=<id>;nvjitlink=<ver>/<id>;
	 * driver=<ver>/<build>;toolkit_include=<id>". */
	char summary[768];
};

/*
 * Fills *tc. Reads ELF notes of the loaded libraries and of the builtins file;
 * hashes a library file (about 100 MiB for libnvrtc) only when it has no
 * build-id; stats the toolkit include tree. Call once at start-up and share
 * the result read-only.
 *
 * Test-only overrides, honoured whenever set (the daemon logs a warning):
 *   JITCACHE_TEST_NVRTC_ID          replaces nvrtc_id
 *   JITCACHE_TEST_DRIVER_VERSION    replaces driver_version
 * so tests can prove that an identity change changes the key.
 *
 * tc: out, borrowed. err: out, borrowed, errlen bytes (may be 0), gets a
 * message on failure.
 * Returns 0, or
 *   JC_EINTERNAL  an NVRTC / nvJitLink query failed (its error string in err),
 *                 a library's mapping could not be found, or a field overflowed;
 *   JC_EINVAL     an override value does not fit its field or is empty;
 *   JC_EIO        a library or builtins file could not be read, or the toolkit
 *                 include tree not walked (errno in err);
 *   JC_ENOMEM.
 * Thread-safe, but it calls dlopen/dlclose and reads files: not for hot paths.
 */
int jc__toolchain_probe(struct jc_toolchain *tc, char *err, size_t errlen);

/*
 * The compiler fields only (nvrtc_version, nvrtc_id, nvrtc_builtins_id,
 * nvjitlink_version, nvjitlink_id; the others zeroed), of the libraries
 * mapped into this process, as jc__toolchain_probe finds them (with its
 * JITCACHE_TEST_NVRTC_ID override): what a compile worker reports with
 * each result (worker.h). Returns as jc__toolchain_probe. Thread-safe.
 */
int jc__toolchain_probe_compiler(struct jc_toolchain *tc, char *err, size_t errlen);

/*
 * The compiler identity of tc into out[len]: "nvrtc=<ver>/<id>;builtins=<id>;
 * nvjitlink=<ver>/<id>", the start of its summary. The daemon stores a
 * worker's result only under a key of that identity. 0, or JC_ETOOBIG.
 */
int jc__toolchain_compiler(const struct jc_toolchain *tc, char *out, size_t len);

/*
 * Every field of tc as "name=value" lines to out (jitcache-worker
 * --identity), and back: jc__toolchain_parse takes exactly those lines, in
 * that order, each value within its field (text borrowed; tc zeroed first).
 * format: 0 or JC_EIO. parse: 0 or JC_EPROTO with a message in err.
 */
int jc__toolchain_format(const struct jc_toolchain *tc, FILE *out);
int jc__toolchain_parse(const char *text, struct jc_toolchain *tc, char *err, size_t errlen);

/*
 * NVRTC's and nvJitLink's entry points that the toolchain probe and
 * `jitcachectl doctor` call. A program linked with them (jitcached, the
 * worker, the tests) gets its own; one that is not (jitcachectl, so that
 * stats, ls and the other commands that compile nothing do not map 100 MB of
 * NVRTC) gets them from dlopen of the sonames (the loader's search, with the
 * program's RUNPATH) on first use. Returns the table, or NULL with the
 * reason in err. Thread-safe; the table lives as long as the process.
 */
struct jc_nvrtc_api {
	int (*version)(int *major, int *minor);	 /* nvrtcVersion */
	const char *(*error_string)(int result); /* nvrtcGetErrorString */
	int (*num_supported_archs)(int *n);	 /* nvrtcGetNumSupportedArchs */
	int (*supported_archs)(int *archs);	 /* nvrtcGetSupportedArchs */
	int (*create_program)(void **prog, const char *src, const char *name, int n_headers,
			      const char *const *headers, const char *const *include_names);
	int (*compile_program)(void *prog, int n_options, const char *const *options);
	int (*get_ptx_size)(void *prog, size_t *size);		  /* nvrtcGetPTXSize */
	int (*get_ptx)(void *prog, char *ptx);			  /* nvrtcGetPTX */
	int (*destroy_program)(void **prog);			  /* nvrtcDestroyProgram */
	int (*jitlink_version)(unsigned *major, unsigned *minor); /* nvJitLinkVersion */
};
const struct jc_nvrtc_api *jc__nvrtc_api(char *err, size_t errlen);

/*
 * Returns 1 when NVRTC lists the architecture number of arch among
 * supported_archs ("sm_90", "sm_90a", "sm_90f" and "compute_90" all ask for
 * 90), 0 otherwise, including when arch is not of the form
 * (sm|compute)_<2-3 digits>[a|f]. Borrowed arguments; thread-safe.
 */
int jc__toolchain_supports_arch(const struct jc_toolchain *tc, const char *arch);

#endif
