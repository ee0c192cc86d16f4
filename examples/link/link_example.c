/* SPDX-License-Identifier: MIT */
/*
 * Runtime linking through jitcached (docs/ARCHITECTURE.md, "Examples"):
 *
 *   user specialisation PTX ---+
 *   prebuilt device library ---+-- nvJitLink (-lto) --> optimised cubin
 *   generated LTO-IR ----------+
 *
 * 1. spec.cu, the user's operator, becomes relocatable PTX (a cached NVRTC
 *    compile: -rdc=true keeps the device function for the linker);
 * 2. a kernel specialised for run-time parameters (a channel count and a
 *    scale, baked into the source as constants) is generated as text;
 * 3. one request compiles it with NVRTC to LTO-IR and links it with the PTX
 *    and the device library (libdevlib.a, LTO-IR inside) into one cubin.
 * The second run of the same parameters is a cache hit: no NVRTC, no link.
 *
 * Usage: link_example [--socket PATH] --devlib LIB.a --spec SPEC.cu
 *                     [--arch sm_90] [--channels N] [--scale X] -o OUT.cubin
 * Prints one line per request: "spec|link <TAB> miss|hit <TAB> ms <TAB> key".
 * Exit 0, or 1 with a message (and the log of a failed compile or link).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jitcache/jitcache.h"

static void *read_all(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		char *p = realloc(buf, cap *= 2);
		if (!p)
			free(buf);
		buf = p;
	}
	fclose(f);
	*size = n;
	return buf;
}

/* Runs r, prints the status line; returns the result or NULL (message printed). */
static jc_result *run(jc_client *c, const jc_request *r, const char *what)
{
	jc_result *res = NULL;
	int rc = jc_compile(c, r, &res);
	if (rc == JC_ECOMPILE) {
		fprintf(stderr, "link_example: %s failed:\n%s", what, jc_result_log(res));
		jc_result_free(res);
		return NULL;
	}
	if (rc != 0) {
		fprintf(stderr, "link_example: %s: %s\n", what, jc_client_errmsg(c));
		return NULL;
	}
	static const char *const names[] = {"?", "miss", "hit", "negative-hit", "joined"};
	printf("%s\t%s\t%.3f ms\t%s\n", what, names[jc_result_cache_status(res)],
	       (double)jc_result_time_ns(res, JC_TIME_TOTAL) / 1e6, jc_result_key(res));
	return res;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"devlib", required_argument, NULL, 'd'},
	    {"spec", required_argument, NULL, 'p'},
	    {"arch", required_argument, NULL, 'a'},
	    {"channels", required_argument, NULL, 'c'},
	    {"scale", required_argument, NULL, 'x'},
	    {NULL, 0, NULL, 0},
	};
	const char *sock = NULL, *devlib = NULL, *spec = NULL, *arch = "sm_90", *out = NULL;
	int channels = 8, c;
	double scale = 1.5;
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			sock = optarg;
			break;
		case 'd':
			devlib = optarg;
			break;
		case 'p':
			spec = optarg;
			break;
		case 'a':
			arch = optarg;
			break;
		case 'c':
			channels = atoi(optarg);
			break;
		case 'x':
			scale = atof(optarg);
			break;
		case 'o':
			out = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!devlib || !spec || !out || channels <= 0) {
		fprintf(stderr, "usage: link_example [--socket PATH] --devlib LIB.a --spec SPEC.cu "
				"[--arch ARCH] [--channels N] [--scale X] -o OUT.cubin\n");
		return 2;
	}
	size_t lib_size, spec_size;
	void *lib = read_all(devlib, &lib_size), *spec_src = read_all(spec, &spec_size);
	if (!lib || !spec_src) {
		fprintf(stderr, "link_example: cannot read %s\n", lib ? spec : devlib);
		return 1;
	}

	jc_client *cl;
	if (jc_client_connect(sock, &cl) != 0) {
		fprintf(stderr, "link_example: %s\n", jc_client_errmsg(NULL));
		return 1;
	}
	int status = 1;
	jc_request *sr = NULL, *lr = NULL;
	jc_result *ptx = NULL, *cubin = NULL;

	/* 1. The user's specialisation as relocatable PTX. */
	if (jc_request_new(&sr) != 0 || jc_request_set_source(sr, "spec.cu", spec_src, spec_size) ||
	    jc_request_set_arch(sr, arch) || jc_request_set_output(sr, JC_PTX) ||
	    jc_request_add_option(sr, "-rdc=true") || !(ptx = run(cl, sr, "spec")))
		goto out;

	/* 2. A kernel generated for this run's parameters. */
	char src[2048];
	snprintf(
	    src, sizeof(src),
	    "extern \"C\" __device__ float devlib_activation(float);\n"
	    "extern \"C\" __device__ float devlib_bias(int);\n"
	    "extern \"C\" __device__ float user_op(float, float);\n"
	    "#define CHANNELS %d\n"
	    "#define SCALE %.9gf\n"
	    "extern \"C\" __global__ void specialised(const float *in, float *out, int n)\n"
	    "{\n"
	    "\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	    "\tif (i < n)\n"
	    "\t\tout[i] = devlib_activation(user_op(in[i], SCALE) + devlib_bias(i %% CHANNELS));\n"
	    "}\n",
	    channels, scale);

	/* 3. NVRTC (-dlto) + nvJitLink with the PTX and the library, one request. */
	size_t ptx_size;
	const void *ptx_data = jc_result_data(ptx, &ptx_size);
	const char *base = strrchr(devlib, '/');
	if (jc_request_new(&lr) != 0 ||
	    jc_request_set_source(lr, "specialised.cu", src, strlen(src)) ||
	    jc_request_set_arch(lr, arch) ||
	    jc_request_add_link_input(lr, JC_LINK_PTX, "spec.ptx", ptx_data, ptx_size) ||
	    jc_request_add_link_input(lr, JC_LINK_LIBRARY, base ? base + 1 : devlib, lib,
				      lib_size) ||
	    !(cubin = run(cl, lr, "link")))
		goto out;
	size_t size;
	const void *data = jc_result_data(cubin, &size);
	FILE *f = fopen(out, "wb");
	if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
		fprintf(stderr, "link_example: cannot write %s\n", out);
		goto out;
	}
	/* cuModuleLoadData(&mod, data); cuModuleGetFunction(&fn, mod, "specialised"); */
	status = 0;
out:
	jc_result_free(ptx);
	jc_result_free(cubin);
	jc_request_free(sr);
	jc_request_free(lr);
	jc_client_close(cl);
	free(lib);
	free(spec_src);
	return status;
}
