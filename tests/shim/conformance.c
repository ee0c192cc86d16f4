/* SPDX-License-Identifier: MIT */
/*
 * NVRTC conformance table: an ordinary program linked with -lnvrtc that runs
 * every call of nvrtc.h in every state that matters to a caller (before a
 * compile, after a good and a failed compile, per target kind, NULL
 * arguments, unknown name expressions, repeated compiles) and prints one
 * line per case: the return code, sizes and a hash of every byte returned.
 * test_shim.sh runs it against the real libnvrtc and under jitcache-run and
 * requires the two outputs to be identical; under the shim it runs twice, so
 * the second run is served from the daemon's cache.
 *
 * Usage: conformance ARCH (a real architecture NVRTC supports, e.g. sm_90).
 */
#include <nvrtc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *arch;

static const char saxpy[] = "template <typename T>\n"
			    "__global__ void saxpy(T a, const T *x, T *y, int n)\n"
			    "{\n"
			    "\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
			    "\tif (i < n)\n"
			    "\t\ty[i] = a * x[i] + y[i];\n"
			    "}\n"
			    "__device__ int table[4];\n";

static const char warns[] = "__global__ void k(int *p) { int unused = 1; *p = 0; }\n";

static const char broken[] = "__global__ void k(int *p) { *p = undeclared_thing; }\n";

static const char with_header[] = "#include \"scale.h\"\n"
				  "__global__ void k(float *p) { *p *= SCALE; }\n";

static int flow_go(void *a, void *b)
{
	(void)a, (void)b;
	return 0;
}

static int flow_cancel(void *a, void *b)
{
	(void)a, (void)b;
	return 1;
}

static uint64_t fnv(const void *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}

/* Which byte ranges of an output may differ between two equal compiles:
 * none is allowed; printed so a mismatch names the output. */
typedef nvrtcResult (*size_fn)(nvrtcProgram, size_t *);
typedef nvrtcResult (*get_fn)(nvrtcProgram, char *);

static void output(const char *tag, const char *what, nvrtcProgram p, size_fn sz, get_fn get)
{
	size_t n = 12345;
	nvrtcResult r = sz(p, &n);
	printf("%s %sSize rc=%d size=%zu\n", tag, what, r, r == NVRTC_SUCCESS ? n : 0);
	if (r != NVRTC_SUCCESS)
		n = 64;
	char *buf = calloc(1, n + 1);
	memset(buf, 0x5a, n + 1);
	r = get(p, buf);
	/* The byte after the reported size must be untouched (no overrun). */
	printf("%s %s rc=%d hash=%016llx guard=%d\n", tag, what, r,
	       r == NVRTC_SUCCESS ? (unsigned long long)fnv(buf, n) : 0ull,
	       (unsigned char)buf[n] == 0x5a);
	if (r == NVRTC_SUCCESS && !strcmp(what, "Log"))
		printf("%s log-text <<%s>>\n", tag, buf);
	if (r == NVRTC_SUCCESS && !strcmp(what, "PTX"))
		printf("%s ptx-terminated=%d\n", tag, n > 0 && buf[n - 1] == '\0');
	free(buf);
}

static void outputs(const char *tag, nvrtcProgram p)
{
	output(tag, "PTX", p, nvrtcGetPTXSize, nvrtcGetPTX);
	output(tag, "CUBIN", p, nvrtcGetCUBINSize, nvrtcGetCUBIN);
	output(tag, "LTOIR", p, nvrtcGetLTOIRSize, nvrtcGetLTOIR);
	output(tag, "OptiXIR", p, nvrtcGetOptiXIRSize, nvrtcGetOptiXIR);
	output(tag, "Log", p, nvrtcGetProgramLogSize, nvrtcGetProgramLog);
}

static void lowered(const char *tag, nvrtcProgram p, const char *expr)
{
	const char *name = NULL;
	nvrtcResult r = nvrtcGetLoweredName(p, expr, &name);
	printf("%s lowered(%s) rc=%d name=%s\n", tag, expr ? expr : "NULL", r,
	       r == NVRTC_SUCCESS && name ? name : "-");
}

static nvrtcProgram create(const char *tag, const char *src, const char *name, int nh,
			   const char *const *hs, const char *const *hn)
{
	nvrtcProgram p = NULL;
	nvrtcResult r = nvrtcCreateProgram(&p, src, name, nh, hs, hn);
	printf("%s create rc=%d\n", tag, r);
	return p;
}

static void compile(const char *tag, nvrtcProgram p, int n, const char *const *opts)
{
	printf("%s compile rc=%d\n", tag, nvrtcCompileProgram(p, n, opts));
}

static void destroy(const char *tag, nvrtcProgram *p)
{
	nvrtcResult r = nvrtcDestroyProgram(p);
	printf("%s destroy rc=%d cleared=%d\n", tag, r, *p == NULL);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: conformance ARCH\n");
		return 2;
	}
	arch = argv[1];
	char arch_opt[64], virt_opt[64];
	snprintf(arch_opt, sizeof(arch_opt), "--gpu-architecture=%s", arch);
	snprintf(virt_opt, sizeof(virt_opt), "-arch=compute_%s", arch + 3);
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* Library-level calls (always the real library's answers). */
	int major = -1, minor = -1, n_archs = -1;
	nvrtcResult vr = nvrtcVersion(&major, &minor);
	printf("version rc=%d %d.%d\n", vr, major, minor);
	printf("version-null rc=%d\n", nvrtcVersion(NULL, NULL));
	nvrtcResult nr = nvrtcGetNumSupportedArchs(&n_archs);
	printf("num-archs rc=%d n=%d\n", nr, n_archs);
	if (n_archs > 0) {
		int *a = calloc((size_t)n_archs, sizeof(int));
		nvrtcResult r = nvrtcGetSupportedArchs(a);
		printf("archs rc=%d first=%d last=%d\n", r, a[0], a[n_archs - 1]);
		free(a);
	}
	for (int code = 0; code <= 18; code++)
		printf("error-string %d %s\n", code, nvrtcGetErrorString((nvrtcResult)code));
	size_t heap = 0;
	printf("pch-heap rc=%d\n", nvrtcGetPCHHeapSize(&heap));

	/* Bad arguments. */
	printf("create-null-prog rc=%d\n", nvrtcCreateProgram(NULL, saxpy, "x.cu", 0, NULL, NULL));
	nvrtcProgram bad = NULL;
	printf("create-null-src rc=%d\n", nvrtcCreateProgram(&bad, NULL, "x.cu", 0, NULL, NULL));
	printf("create-neg-headers rc=%d\n",
	       nvrtcCreateProgram(&bad, saxpy, "x.cu", -1, NULL, NULL));
	printf("destroy-null rc=%d\n", nvrtcDestroyProgram(NULL));
	nvrtcProgram none = NULL;
	printf("destroy-nullprog rc=%d\n", nvrtcDestroyProgram(&none));
	printf("compile-null rc=%d\n", nvrtcCompileProgram(NULL, 0, NULL));
	size_t sz;
	printf("ptxsize-null-prog rc=%d\n", nvrtcGetPTXSize(NULL, &sz));
	printf("logsize-null-prog rc=%d\n", nvrtcGetProgramLogSize(NULL, &sz));
	printf("addname-null-prog rc=%d\n", nvrtcAddNameExpression(NULL, "&saxpy<float>"));

	/* A templated kernel with name expressions, real architecture. */
	nvrtcProgram p = create("sm", saxpy, "saxpy.cu", 0, NULL, NULL);
	printf("sm addname rc=%d\n", nvrtcAddNameExpression(p, "&saxpy<float>"));
	printf("sm addname2 rc=%d\n", nvrtcAddNameExpression(p, "&saxpy<double>"));
	printf("sm addname-dup rc=%d\n", nvrtcAddNameExpression(p, "&saxpy<float>"));
	printf("sm addname-var rc=%d\n", nvrtcAddNameExpression(p, "table"));
	printf("sm addname-null rc=%d\n", nvrtcAddNameExpression(p, NULL));
	outputs("sm-before", p);
	lowered("sm-before", p, "&saxpy<float>");
	printf("sm-before pch-status rc=%d\n", nvrtcGetPCHCreateStatus(p));
	printf("sm-before pch-required rc=%d\n", nvrtcGetPCHHeapSizeRequired(p, &sz));
	const char *opts[] = {arch_opt, "-std=c++17", "-DN=4"};
	compile("sm", p, 3, opts);
	outputs("sm", p);
	lowered("sm", p, "&saxpy<float>");
	lowered("sm", p, "&saxpy<double>");
	lowered("sm", p, "table");
	lowered("sm", p, "&saxpy<int>");
	lowered("sm", p, NULL);
	printf("sm lowered-nullout rc=%d\n", nvrtcGetLoweredName(p, "&saxpy<float>", NULL));
	printf("sm addname-after rc=%d\n", nvrtcAddNameExpression(p, "&saxpy<int>"));
	printf("sm addname-null-after rc=%d\n", nvrtcAddNameExpression(p, NULL));
	printf("sm ltoirsize-nullout rc=%d\n", nvrtcGetLTOIRSize(p, NULL));
	printf("sm ltoir-nullout rc=%d\n", nvrtcGetLTOIR(p, NULL));
	printf("sm optixsize-nullout rc=%d\n", nvrtcGetOptiXIRSize(p, NULL));
	printf("sm ptxsize-nullout rc=%d\n", nvrtcGetPTXSize(p, NULL));
	printf("sm cubinsize-nullout rc=%d\n", nvrtcGetCUBINSize(p, NULL));
	printf("sm logsize-nullout rc=%d\n", nvrtcGetProgramLogSize(p, NULL));
	printf("sm ptx-nullout rc=%d\n", nvrtcGetPTX(p, NULL));
	printf("sm cubin-nullout rc=%d\n", nvrtcGetCUBIN(p, NULL));
	printf("sm log-nullout rc=%d\n", nvrtcGetProgramLog(p, NULL));
	printf("sm pch-status rc=%d\n", nvrtcGetPCHCreateStatus(p));
	printf("sm pch-required rc=%d\n", nvrtcGetPCHHeapSizeRequired(p, &sz));
	/* Compiling the same program again, for another target. */
	const char *again[] = {virt_opt, "-std=c++17", "-DN=4"};
	compile("sm-again", p, 3, again);
	outputs("sm-again", p);
	lowered("sm-again", p, "&saxpy<float>");
	destroy("sm", &p);

	/* Two-string option forms and short names. */
	p = create("split", saxpy, "saxpy.cu", 0, NULL, NULL);
	nvrtcAddNameExpression(p, "&saxpy<float>");
	const char *split[] = {"-arch", arch, "-D", "N=4", "-I", "."};
	compile("split", p, 6, split);
	outputs("split", p);
	lowered("split", p, "&saxpy<float>");
	destroy("split", &p);

	/* A virtual architecture: PTX only. */
	p = create("virt", saxpy, "saxpy.cu", 0, NULL, NULL);
	nvrtcAddNameExpression(p, "&saxpy<float>");
	const char *virt[] = {virt_opt};
	compile("virt", p, 1, virt);
	outputs("virt", p);
	lowered("virt", p, "&saxpy<float>");
	printf("virt cubin-nullout rc=%d\n", nvrtcGetCUBIN(p, NULL));
	printf("virt cubinsize-nullout rc=%d\n", nvrtcGetCUBINSize(p, NULL));
	destroy("virt", &p);

	/* No architecture at all (NVRTC's default) and no name: "default_program". */
	p = create("default", warns, NULL, 0, NULL, NULL);
	compile("default", p, 0, NULL);
	outputs("default", p);
	destroy("default", &p);

	/* LTO-IR. */
	p = create("dlto", saxpy, "saxpy.cu", 0, NULL, NULL);
	nvrtcAddNameExpression(p, "&saxpy<float>");
	const char *dlto[] = {arch_opt, "-dlto"};
	compile("dlto", p, 2, dlto);
	outputs("dlto", p);
	lowered("dlto", p, "&saxpy<float>");
	destroy("dlto", &p);

	/* LTO-IR for a virtual architecture; relocatable device code. */
	p = create("dlto-virt", saxpy, "saxpy.cu", 0, NULL, NULL);
	const char *dlto_virt[] = {virt_opt, "--dlink-time-opt"};
	compile("dlto-virt", p, 2, dlto_virt);
	outputs("dlto-virt", p);
	destroy("dlto-virt", &p);
	p = create("rdc", saxpy, "saxpy.cu", 0, NULL, NULL);
	nvrtcAddNameExpression(p, "&saxpy<float>");
	const char *rdc[] = {arch_opt, "-rdc=true", "-lineinfo"};
	compile("rdc", p, 3, rdc);
	outputs("rdc", p);
	lowered("rdc", p, "&saxpy<float>");
	destroy("rdc", &p);

	/* A warning: a log on success. */
	p = create("warn", warns, "warns.cu", 0, NULL, NULL);
	const char *w[] = {arch_opt};
	compile("warn", p, 1, w);
	outputs("warn", p);
	destroy("warn", &p);

	/* In-memory headers. */
	const char *hs[] = {"#define SCALE 3.0f\n"}, *hn[] = {"scale.h"};
	p = create("header", with_header, "hdr.cu", 1, hs, hn);
	compile("header", p, 1, w);
	outputs("header", p);
	destroy("header", &p);

	/* A compile error, then every call on the failed program. */
	p = create("error", broken, "broken.cu", 0, NULL, NULL);
	nvrtcAddNameExpression(p, "k");
	compile("error", p, 1, w);
	outputs("error", p);
	lowered("error", p, "k");
	printf("error addname-after rc=%d\n", nvrtcAddNameExpression(p, "k"));
	destroy("error", &p);

	/* An empty name expression (the daemon refuses it: compiled in process). */
	p = create("empty-name", saxpy, "saxpy.cu", 0, NULL, NULL);
	printf("empty-name addname rc=%d\n", nvrtcAddNameExpression(p, ""));
	compile("empty-name", p, 1, w);
	lowered("empty-name", p, "");
	destroy("empty-name", &p);

	/* A name expression that names nothing. */
	p = create("badname", saxpy, "saxpy.cu", 0, NULL, NULL);
	nvrtcAddNameExpression(p, "&no_such_kernel<float>");
	compile("badname", p, 1, w);
	outputs("badname", p);
	destroy("badname", &p);

	/* A flow callback: one that lets the compile run, one that cancels it. */
	p = create("flow-go", warns, "flow.cu", 0, NULL, NULL);
	printf("flow-go set rc=%d\n", nvrtcSetFlowCallback(p, flow_go, NULL));
	compile("flow-go", p, 1, w);
	outputs("flow-go", p);
	destroy("flow-go", &p);
	p = create("flow-cancel", warns, "flow.cu", 0, NULL, NULL);
	printf("flow-cancel set rc=%d\n", nvrtcSetFlowCallback(p, flow_cancel, NULL));
	compile("flow-cancel", p, 1, w);
	outputs("flow-cancel", p);
	destroy("flow-cancel", &p);

	/* Bad options: unknown, bad value, unsupported architecture. */
	const char *unknown[] = {arch_opt, "--no-such-option"};
	p = create("unknown-opt", warns, "u.cu", 0, NULL, NULL);
	compile("unknown-opt", p, 2, unknown);
	outputs("unknown-opt", p);
	destroy("unknown-opt", &p);
	const char *badval[] = {arch_opt, "-std=c++98"};
	p = create("bad-value", warns, "b.cu", 0, NULL, NULL);
	compile("bad-value", p, 2, badval);
	outputs("bad-value", p);
	destroy("bad-value", &p);
	const char *badarch[] = {"-arch=sm_10"};
	p = create("bad-arch", warns, "a.cu", 0, NULL, NULL);
	compile("bad-arch", p, 1, badarch);
	outputs("bad-arch", p);
	destroy("bad-arch", &p);
	printf("compile-null-opts rc=%d\n", (p = create("nullopt", warns, "n.cu", 0, NULL, NULL),
					     nvrtcCompileProgram(p, 1, NULL)));
	destroy("nullopt", &p);
	return 0;
}
