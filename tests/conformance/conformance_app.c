/* SPDX-License-Identifier: MIT */
/*
 * An ordinary NVRTC (and nvJitLink) application for the conformance suite:
 * compiles one source file as NVRTC's users do, and prints what it got, so
 * that runs with and without the shim (jitcache-run) can be compared line
 * for line. tests/conformance/conformance_app.py is the same program over
 * ctypes and prints the same lines.
 *
 * Usage: conformance_app [--lib LIB.cu] [--expr EXPR]... -o OUT SRC.cu ARCH [NVRTC_OPTION...]
 *   SRC.cu is compiled for ARCH to a cubin, with the name expressions;
 *   with --lib, SRC.cu and LIB.cu are compiled with -dlto to LTO-IR and
 *   linked by nvJitLink (-lto) into the cubin. The cubin is written to OUT.
 * Prints "compile NAME rc=R" per program, "lowered EXPR NAME" per
 * expression, and on a failure the log. Exit 0 when every step succeeded.
 */
#include <nvJitLink.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *p = malloc((size_t)n + 1);
	if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
		free(p);
		p = NULL;
	}
	if (p)
		p[n] = '\0';
	fclose(f);
	return p;
}

static int write_out(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, n, f) == n;
	if (f)
		ok &= fclose(f) == 0;
	if (!ok)
		printf("cannot write %s\n", path);
	return !ok;
}

/* Compiles path; the cubin or LTO-IR (lto) into *out. */
static int compile(const char *path, const char *arch, int lto, const char *const *opts, int n_opts,
		   const char *const *exprs, int n_exprs, char **out, size_t *size)
{
	char *src = slurp(path);
	const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	nvrtcProgram prog;
	if (!src || nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL) != NVRTC_SUCCESS) {
		printf("compile %s: cannot read or create\n", name);
		return 1;
	}
	for (int i = 0; i < n_exprs; i++)
		nvrtcAddNameExpression(prog, exprs[i]);
	const char *all[80];
	char arch_opt[64];
	int n = 0;
	for (int i = 0; i < n_opts && n < 77; i++)
		all[n++] = opts[i];
	snprintf(arch_opt, sizeof(arch_opt), "--gpu-architecture=%s", arch);
	all[n++] = arch_opt;
	if (lto)
		all[n++] = "-dlto";
	nvrtcResult r = nvrtcCompileProgram(prog, n, all);
	printf("compile %s rc=%d\n", name, (int)r);
	if (r != NVRTC_SUCCESS) {
		size_t len = 0;
		nvrtcGetProgramLogSize(prog, &len);
		char *log = malloc(len + 1);
		nvrtcGetProgramLog(prog, log);
		printf("%s\n", log);
		free(log);
		free(src);
		return 1;
	}
	if (lto) {
		nvrtcGetLTOIRSize(prog, size);
		*out = malloc(*size);
		nvrtcGetLTOIR(prog, *out);
	} else {
		nvrtcGetCUBINSize(prog, size);
		*out = malloc(*size);
		nvrtcGetCUBIN(prog, *out);
	}
	for (int i = 0; i < n_exprs; i++) {
		const char *lowered = NULL;
		if (nvrtcGetLoweredName(prog, exprs[i], &lowered) == NVRTC_SUCCESS)
			printf("lowered %s %s\n", exprs[i], lowered);
	}
	nvrtcDestroyProgram(&prog);
	free(src);
	return 0;
}

int main(int argc, char **argv)
{
	const char *lib = NULL, *exprs[64], *outpath = NULL;
	int n_exprs = 0, i = 1;
	for (; i < argc - 1; i += 2) {
		if (!strcmp(argv[i], "--lib"))
			lib = argv[i + 1];
		else if (!strcmp(argv[i], "-o"))
			outpath = argv[i + 1];
		else if (!strcmp(argv[i], "--expr") && n_exprs < 64)
			exprs[n_exprs++] = argv[i + 1];
		else
			break;
	}
	if (argc - i < 2 || !outpath) {
		fprintf(stderr, "usage: conformance_app [--lib LIB.cu] [--expr EXPR]... -o OUT "
				"SRC.cu ARCH [OPTION...]\n");
		return 2;
	}
	const char *src = argv[i], *arch = argv[i + 1];
	const char *const *opts = (const char *const *)argv + i + 2;
	int n_opts = argc - i - 2;
	char *out = NULL, *libout = NULL;
	size_t size = 0, libsize = 0;
	if (compile(src, arch, lib != NULL, opts, n_opts, exprs, n_exprs, &out, &size))
		return 1;
	if (!lib) {
		int rc = write_out(outpath, out, size);
		free(out);
		return rc;
	}
	if (compile(lib, arch, 1, opts, n_opts, NULL, 0, &libout, &libsize)) {
		free(out);
		return 1;
	}
	nvJitLinkHandle h;
	char arch_opt[64];
	snprintf(arch_opt, sizeof(arch_opt), "-arch=%s", arch);
	const char *lopts[] = {arch_opt, "-lto"};
	size_t linked_size = 0;
	if (nvJitLinkCreate(&h, 2, lopts) != NVJITLINK_SUCCESS ||
	    nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, out, size, "src") != NVJITLINK_SUCCESS ||
	    nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, libout, libsize, "lib") !=
		NVJITLINK_SUCCESS ||
	    nvJitLinkComplete(h) != NVJITLINK_SUCCESS ||
	    nvJitLinkGetLinkedCubinSize(h, &linked_size) != NVJITLINK_SUCCESS) {
		printf("link failed\n");
		return 1;
	}
	free(out);
	free(libout);
	char *cubin = malloc(linked_size);
	nvJitLinkGetLinkedCubin(h, cubin);
	nvJitLinkDestroy(&h);
	int rc = write_out(outpath, cubin, linked_size);
	free(cubin);
	return rc;
}
