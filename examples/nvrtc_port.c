/* SPDX-License-Identifier: MIT */
/* The README's application written only against jitcache.h: an NVRTC program
 * moved by replacing calls, its option list unchanged. Prints "N bytes,
 * LOWERED, cached|uncached"; exit 0 on success. */
#include <jitcache/jitcache.h> /* cc app.c $(pkg-config --cflags --libs jitcache-client) */
#include <stdio.h>
#include <string.h>

static void warn(void *ctx, int level, const char *msg)
{
	(void)ctx, (void)level;
	fprintf(stderr, "%s\n", msg);
}

int main(void)
{
	static const char src[] = "template <typename T> __global__ void saxpy(T a, T *x, T *y)"
				  " { int i = threadIdx.x; y[i] = a * x[i] + y[i]; }\n";
	const char *nvrtc_opts[] = {"-std=c++17", "-I", "include", "--include-path=third_party"};
	jc_options *o;
	jc_client *c;
	jc_request *r;
	jc_result *res = NULL;
	jc_options_new(&o);
	jc_options_set_log(o, warn, NULL); /* e.g. "... compiling in this process" */
	if (jc_client_open(o, &c) != 0)	   /* fails only with JITCACHE_FALLBACK=error */
		return 1;
	jc_request_new(&r);
	jc_request_set_source(r, "saxpy.cu", src, strlen(src)); /* nvrtcCreateProgram */
	for (size_t i = 0; i < sizeof(nvrtc_opts) / sizeof(*nvrtc_opts); i++)
		jc_request_add_option(r, nvrtc_opts[i]);
	jc_request_set_arch(r, "sm_90");		    /* --gpu-architecture */
	jc_request_add_name_expression(r, "&saxpy<float>"); /* nvrtcAddNameExpression */
	int rc = jc_compile(c, r, &res);		    /* nvrtcCompileProgram */
	if (rc == 0) {
		size_t n;
		const void *cubin = jc_result_data(res, &n); /* nvrtcGetCUBIN */
		const char *fn =
		    jc_result_lowered_name(res, "&saxpy<float>"); /* nvrtcGetLoweredName */
		printf("%zu bytes, %s, %s\n", n, fn,
		       jc_result_cache_status(res) == JC_UNCACHED ? "uncached" : "cached");
		(void)cubin; /* cuModuleLoadData(&mod, cubin); cuModuleGetFunction(&f, mod, fn); */
	} else if (rc == JC_ECOMPILE) {
		fputs(jc_result_log(res), stderr); /* nvrtcGetProgramLog */
	}
	jc_result_free(res);
	jc_request_free(r);
	jc_client_close(c);
	jc_options_free(o);
	return rc == 0 ? 0 : 1;
}
