/* SPDX-License-Identifier: MIT */
/*
 * The heavy example (examples/cub_sort.cu, sort_and_sum<128, 8>: per-block
 * radix sort of keys with values, then a block sum, with CUB) fetched from
 * jitcached, loaded with jc_cuda_module_load and checked against the CPU:
 * every key, every value and every block sum.
 *
 * Usage: cub_sort [TARGETS] [BLOCKS]
 *   TARGETS  "auto" (default: the device's target, resolved by
 *            jc_cuda_module_load: a cubin where NVRTC knows the GPU), one
 *            target ("sm_90", "compute_90"), or a list for a fatbin
 *            ("sm_80,sm_90,compute_90"). JITCACHE_FORCE_PTX=1 or
 *            JITCACHE_FORCE_CUBIN=1 in the environment apply
 *            (jitcache_cuda.h).
 *   BLOCKS   thread blocks of 1024 items (default 64).
 * The include directory of CCCL is $JCX_CCCL, else the toolkit's
 * (/usr/local/cuda/include/cccl). Keys are distinct within a block (an odd
 * multiplier is a bijection of 32-bit integers), so the sorted order is
 * unique; values are small integers, so every block sum is exact in float
 * and compared for equality.
 * Prints one "cub_sort key=value ..." line and exits 0 when every check
 * passes, 1 otherwise (a device-side assert shows as CUDA_ERROR_ASSERT).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"

#define THREADS 128
#define ITEMS	8
#define TILE	(THREADS * ITEMS)
#define EXPR	"sort_and_sum<128, 8>"

static unsigned key_of(unsigned i)
{
	return i * 2654435761u ^ 0x9e3779b9u;
}

static float val_of(unsigned i)
{
	return (float)(i % 97u);
}

static int cmp_pair(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return (x > y) - (x < y);
}

static char *read_source(size_t *size)
{
	FILE *f = fopen(JCX_CUB_CU, "rb");
	if (!f) {
		fprintf(stderr, "cub_sort: cannot open %s\n", JCX_CUB_CU);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *s = malloc((size_t)n + 1);
	if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "cub_sort: cannot read %s\n", JCX_CUB_CU);
		exit(1);
	}
	fclose(f);
	s[n] = '\0';
	*size = (size_t)n;
	return s;
}

int main(int argc, char **argv)
{
	const char *targets = argc > 1 ? argv[1] : "auto";
	int blocks = argc > 2 ? atoi(argv[2]) : 64;
	if (blocks < 1 || blocks > 65535) {
		fprintf(stderr, "usage: cub_sort [auto|TARGET[,TARGET...]] [BLOCKS]\n");
		return 2;
	}
	const char *cccl = getenv("JCX_CCCL") ? getenv("JCX_CCCL") : "/usr/local/cuda/include/cccl";
	char inc[4200];
	snprintf(inc, sizeof(inc), "-I%s", cccl);
	CUdevice dev;
	CUcontext ctx;
	jcx_primary_ctx(0, &dev, &ctx);
	jc_client *c = NULL;
	jcx_jc_check(jc_client_connect(NULL, &c), "jc_client_connect", NULL);
	size_t src_size;
	char *src = read_source(&src_size);
	jc_request *r = NULL;
	jcx_jc_check(jc_request_new(&r), "jc_request_new", NULL);
	jcx_jc_check(jc_request_set_source(r, "cub_sort.cu", src, src_size), "set_source", NULL);
	jcx_jc_check(jc_request_add_option(r, "-std=c++17"), "add_option", NULL);
	jcx_jc_check(jc_request_add_option(r, inc), "add_option", NULL);
	jcx_jc_check(jc_request_add_include_dir(r, cccl), "add_include_dir", NULL);
	jcx_jc_check(jc_request_add_name_expression(r, EXPR), "add_name_expression", NULL);
	if (strcmp(targets, "auto") != 0)
		jcx_jc_check(jc_request_set_arch(r, targets), "set_arch", NULL);
	if (strncmp(targets, "compute_", 8) == 0 && !strchr(targets, ','))
		jcx_jc_check(jc_request_set_output(r, JC_PTX), "set_output",
			     NULL); /* one PTX target */
	jc_cuda_module *m = NULL;
	int rc = jc_cuda_module_load(c, r, &m);
	if (rc) {
		fprintf(stderr, "cub_sort: jc_cuda_module_load: %s: %s\n", jc_strerror(rc),
			jc_cuda_errmsg());
		if (m)
			fprintf(stderr, "%s\n", jc_result_log(jc_cuda_module_result(m)));
		return 1;
	}
	CUfunction f;
	jcx_jc_check(jc_cuda_module_function(m, EXPR, &f), "lookup", NULL);

	size_t n = (size_t)blocks * TILE;
	unsigned *keys = malloc(n * sizeof(*keys)), *keys_out = malloc(n * sizeof(*keys));
	float *vals = malloc(n * sizeof(*vals)), *vals_out = malloc(n * sizeof(*vals));
	float *sums = malloc((size_t)blocks * sizeof(*sums));
	unsigned *pairs = malloc(2 * TILE * sizeof(*pairs));
	if (!keys || !keys_out || !vals || !vals_out || !sums || !pairs)
		return 1;
	for (size_t i = 0; i < n; i++) {
		keys[i] = key_of((unsigned)i);
		vals[i] = val_of((unsigned)i);
	}
	CUdeviceptr dk, dv, dko, dvo, ds;
	CU_CHECK(cuMemAlloc(&dk, n * sizeof(*keys)));
	CU_CHECK(cuMemAlloc(&dv, n * sizeof(*vals)));
	CU_CHECK(cuMemAlloc(&dko, n * sizeof(*keys)));
	CU_CHECK(cuMemAlloc(&dvo, n * sizeof(*vals)));
	CU_CHECK(cuMemAlloc(&ds, (size_t)blocks * sizeof(*sums)));
	CU_CHECK(cuMemcpyHtoD(dk, keys, n * sizeof(*keys)));
	CU_CHECK(cuMemcpyHtoD(dv, vals, n * sizeof(*vals)));
	void *params[] = {&dk, &dv, &dko, &dvo, &ds};
	uint64_t t0 = jcx_now_ns();
	CU_CHECK(cuLaunchKernel(f, (unsigned)blocks, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL));
	CUresult sync = cuCtxSynchronize();
	uint64_t t1 = jcx_now_ns();
	if (sync != CUDA_SUCCESS) {
		fprintf(stderr,
			"cub_sort: the kernel failed: %s (a device-side assert is "
			"CUDA_ERROR_ASSERT)\n",
			jcx_cu_name(sync));
		return 1;
	}
	CU_CHECK(cuMemcpyDtoH(keys_out, dko, n * sizeof(*keys)));
	CU_CHECK(cuMemcpyDtoH(vals_out, dvo, n * sizeof(*vals)));
	CU_CHECK(cuMemcpyDtoH(sums, ds, (size_t)blocks * sizeof(*sums)));

	size_t bad_keys = 0, bad_vals = 0, bad_sums = 0;
	for (int b = 0; b < blocks; b++) {
		double sum = 0;
		for (unsigned i = 0; i < TILE; i++) {
			unsigned g = (unsigned)b * TILE + i;
			pairs[2 * i] = keys[g];
			pairs[2 * i + 1] = g;
			sum += vals[g];
		}
		qsort(pairs, TILE, 2 * sizeof(*pairs), cmp_pair);
		for (unsigned i = 0; i < TILE; i++) {
			size_t g = (size_t)b * TILE + i;
			if (keys_out[g] != pairs[2 * i] && bad_keys++ == 0)
				fprintf(stderr, "block %d item %u: key %u, want %u\n", b, i,
					keys_out[g], pairs[2 * i]);
			if (vals_out[g] != vals[pairs[2 * i + 1]] && bad_vals++ == 0)
				fprintf(stderr, "block %d item %u: value %g, want %g\n", b, i,
					vals_out[g], vals[pairs[2 * i + 1]]);
		}
		if (sums[b] != (float)sum && bad_sums++ == 0)
			fprintf(stderr, "block %d: sum %.1f, want %.1f\n", b, sums[b], sum);
	}
	const jc_result *res = jc_cuda_module_result(m);
	int ok = !bad_keys && !bad_vals && !bad_sums;
	printf(
	    "cub_sort targets=%s cache=%s loaded=%s blocks=%d items=%zu fetch_ms=%.3f load_ms=%.3f "
	    "kernel_ms=%.3f wrong_keys=%zu wrong_values=%zu wrong_sums=%zu result=%s\n",
	    targets, jc_result_cache_status(res) == JC_HIT ? "hit" : "miss",
	    jc_result_output(res) == JC_PTX	 ? "ptx"
	    : jc_result_output(res) == JC_FATBIN ? "fatbin"
						 : "cubin",
	    blocks, n, jc_cuda_module_time_ns(m, JC_CUDA_TIME_FETCH) / 1e6,
	    jc_cuda_module_time_ns(m, JC_CUDA_TIME_LOAD) / 1e6, jcx_ms(t0, t1), bad_keys, bad_vals,
	    bad_sums, ok ? "ok" : "WRONG");
	const char *log = jc_result_log(res);
	if (jc_result_output(res) == JC_FATBIN && jc_result_cache_status(res) != JC_HIT)
		printf("cub_sort_fatbin_log %.*s\n", (int)strcspn(log, "\n"), log);
	CU_CHECK(cuMemFree(dk));
	CU_CHECK(cuMemFree(dv));
	CU_CHECK(cuMemFree(dko));
	CU_CHECK(cuMemFree(dvo));
	CU_CHECK(cuMemFree(ds));
	jcx_jc_check(jc_cuda_module_free(m), "unload", NULL);
	jc_request_free(r);
	jc_client_close(c);
	free(src), free(keys), free(keys_out), free(vals), free(vals_out), free(sums), free(pairs);
	CU_CHECK(cuDevicePrimaryCtxRelease(dev));
	return ok ? 0 : 1;
}
