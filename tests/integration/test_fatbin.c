/* SPDX-License-Identifier: MIT */
/*
 * Multi-architecture requests with a real daemon and real NVRTC compiles: a
 * target list gives one fatbin that holds exactly the requested targets in
 * order (read with the project's own parser, `jitcachectl inspect`, and the
 * toolkit's cuobjdump where installed), whose images are byte for byte the
 * single-target entries, which hit afterwards; the order of the list is
 * part of the key; unsupported targets and a toolkit without a fatbin tool
 * are refused clearly; a part that does not compile fails the fatbin with
 * its log (and is negative-cached); lowered names come through.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/artifact.h"
#include "tests/lib/test.h"

static const char *const exprs[] = {"&saxpy<float>", NULL};
static const char *const targets[] = {"sm_80", "sm_90", "compute_90"};

/* The fatbin of r, parsed; *out gets the bytes (caller frees). */
static void parse(const jc_result *res, struct jc_artifact *a, const uint8_t **data, size_t *size)
{
	char err[256];
	*data = jc_result_data(res, size);
	assert_non_null(*data);
	int rc = jc__artifact_parse(*data, *size, a, err, sizeof(err));
	if (rc)
		fail_msg("parse: %s", err);
	assert_int_equal(a->kind, JC_ART_FATBIN);
}

/* PTX text without // comments and without blanks (malloc'd). */
static char *ptx_code(const char *p, size_t n)
{
	char *out = malloc(n + 1), *o = out;
	assert_non_null(out);
	for (size_t i = 0; i < n && p[i]; i++) {
		if (p[i] == '/' && i + 1 < n && p[i + 1] == '/') {
			while (i < n && p[i] != '\n')
				i++;
			continue;
		}
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n')
			*o++ = p[i];
	}
	*o = '\0';
	return out;
}

/* Whether the cuobjdump beside nvcc (or on PATH) is there. */
static const char *cuobjdump(void)
{
	static char path[4200];
	const char *nvcc = jct_nvcc();
	if (nvcc) {
		snprintf(path, sizeof(path), "%.*s/cuobjdump", (int)(strrchr(nvcc, '/') - nvcc),
			 nvcc);
		if (access(path, X_OK) == 0)
			return path;
	}
	return jct_sh("command -v cuobjdump >/dev/null") == 0 ? "cuobjdump" : NULL;
}

static void test_fatbin_targets_and_parts(void **state)
{
	struct jtl_daemon *d = *state;
	jc_request *r = jct_request("saxpy.cu", "sm_80,sm_90,compute_90", exprs);
	jc_result *res = jct_compile(d, r, 0);
	assert_int_equal(jc_result_cache_status(res), JC_MISS);
	assert_int_equal(jc_result_output(res), JC_FATBIN);
	const char *lowered = jc_result_lowered_name(res, "&saxpy<float>");
	assert_non_null(lowered);
	assert_int_equal(jct_stat(d, "compiles"), 3); /* one per target */
	printf("# fatbin log: %s\n", jc_result_log(res));
	printf("# fatbin build %.1f ms (from the request to the fatbin, parts in parallel)\n",
	       jc_result_time_ns(res, JC_TIME_COMPILE) / 1e6);

	struct jc_artifact a;
	const uint8_t *fat;
	size_t fat_size;
	parse(res, &a, &fat, &fat_size);
	assert_int_equal(a.n_images, 3);
	uint64_t parts_ns = 0;
	for (size_t i = 0; i < 3; i++) {
		const struct jc_art_image *im = &a.images[i];
		assert_string_equal(im->target, targets[i]);
		assert_int_equal(im->kind, i < 2 ? JC_ART_CUBIN : JC_ART_PTX);
		assert_int_equal(im->n_kernels, 1);
		assert_string_equal(im->kernels[0].name, lowered);
		if (i < 2)
			assert_true(im->kernels[0].registers > 0);
		/* The single-target request hits, and its bytes are the image. */
		jc_request *one = jct_request("saxpy.cu", targets[i], exprs);
		if (i == 2)
			assert_int_equal(jc_request_set_output(one, JC_PTX), 0);
		jc_result *single = jct_compile(d, one, 0);
		assert_int_equal(jc_result_cache_status(single), JC_HIT);
		parts_ns += jc_result_time_ns(single, JC_TIME_COMPILE);
		size_t n;
		const uint8_t *bytes = jc_result_data(single, &n);
		assert_true(im->offset + im->size <= fat_size);
		if (i < 2) {
			assert_int_equal(im->size, n);
			assert_memory_equal(fat + im->offset, bytes, n);
		} else {
			/* fatbinary drops PTX comments and indentation: the rest is equal. */
			char *a1 = ptx_code((const char *)fat + im->offset, im->size);
			char *a2 = ptx_code((const char *)bytes, n);
			assert_string_equal(a1, a2);
			free(a1);
			free(a2);
		}
		jc_result_free(single);
		jc_request_free(one);
	}
	printf("# the parts' NVRTC times add up to %.1f ms\n", parts_ns / 1e6);
	assert_int_equal(jct_stat(d, "compiles"), 3);
	jc__artifact_clear(&a);

	/* Again: a hit of the fatbin entry. */
	jc_result *again = jct_compile(d, r, 0);
	assert_int_equal(jc_result_cache_status(again), JC_HIT);
	assert_string_equal(jc_result_key(again), jc_result_key(res));
	jc_result_free(again);

	/* Another order: another key and fatbin, made of the same parts (no compile). */
	jc_request *r2 = jct_request("saxpy.cu", "compute_90,sm_90,sm_80", exprs);
	jc_result *res2 = jct_compile(d, r2, 0);
	assert_int_equal(jc_result_cache_status(res2), JC_MISS);
	assert_string_not_equal(jc_result_key(res2), jc_result_key(res));
	assert_int_equal(jct_stat(d, "compiles"), 3);
	parse(res2, &a, &fat, &fat_size);
	assert_int_equal(a.n_images, 3);
	for (size_t i = 0; i < 3; i++)
		assert_string_equal(a.images[i].target, targets[2 - i]);
	jc__artifact_clear(&a);
	jc_result_free(res2);
	jc_request_free(r2);
	jc_result_free(res);
	jc_request_free(r);
}

static void test_ctl_fatbin_inspect(void **state)
{
	struct jtl_daemon *d = *state;
	char path[160], *out = NULL, *err = NULL;
	snprintf(path, sizeof(path), "%s/k.fatbin", d->dir);
	const char *compile[] = {
	    "compile",	   jct_example("saxpy.cu"), "--arch", "sm_80,sm_90,compute_90",
	    "--name-expr", "&saxpy<float>",	    "-o",     path,
	    NULL};
	assert_int_equal(jct_ctl(d, &out, &err, compile), 0);
	free(out);
	free(err);
	const char *inspect[] = {"inspect", "--json", path, NULL};
	assert_int_equal(jct_ctl(d, &out, &err, inspect), 0);
	const char *p = out;
	for (size_t i = 0; i < 3; i++) {
		char want[64];
		snprintf(want, sizeof(want), "\"target\": \"%s\"", targets[i]);
		p = strstr(p, want);
		if (!p)
			fail_msg("inspect --json lacks %s in order:\n%s", want, out);
	}
	assert_null(strstr(p + 1, "\"target\""));
	free(out);
	free(err);

	/* inspect --key of the same entry (its key from ls --json). */
	const char *ls[] = {"ls", "--json", NULL};
	assert_int_equal(jct_ctl(d, &out, NULL, ls), 0);
	const char *row = strstr(out, "\"arch\": \"sm_80,sm_90,compute_90\"");
	assert_non_null(row);
	const char *kp = row;
	while (kp > out && strncmp(kp, "\"key\": \"", 8) != 0)
		kp--;
	char key[33];
	snprintf(key, sizeof(key), "%.32s", kp + 8);
	free(out);
	const char *by_key[] = {"inspect", "--key", key, NULL};
	assert_int_equal(jct_ctl(d, &out, &err, by_key), 0);
	assert_non_null(strstr(out, "fatbin, 3 images"));
	assert_non_null(strstr(out, "compute_90"));
	free(out);
	free(err);

	/* The toolkit's own reader agrees, where it is installed. */
	const char *cod = cuobjdump();
	if (!cod) {
		printf("# cuobjdump not installed: toolkit cross-check skipped\n");
		return;
	}
	char cmd[4800], *lines = NULL;
	snprintf(cmd, sizeof(cmd), "%.200s --list-elf --list-ptx %s > %s/cod.txt 2>&1", cod, path,
		 d->dir);
	assert_int_equal(jct_sh("%s", cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/cod.txt", d->dir);
	size_t n;
	lines = (char *)jtl_read_file(cmd, &n);
	printf("# cuobjdump:\n%s", lines);
	assert_non_null(strstr(lines, "sm_80"));
	assert_non_null(strstr(lines, "sm_90"));
	assert_non_null(strstr(lines, "PTX file"));
	free(lines);

	/* Registers and stack per kernel agree with cuobjdump -res-usage:
	 * lines "Function NAME:" then "REG:N STACK:N SHARED:N ..." per cubin. */
	snprintf(cmd, sizeof(cmd), "%.200s -res-usage %s > %s/res.txt 2>&1", cod, path, d->dir);
	assert_int_equal(jct_sh("%s", cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/res.txt", d->dir);
	lines = (char *)jtl_read_file(cmd, &n);
	printf("# cuobjdump -res-usage:\n%s", lines);
	size_t fsize;
	uint8_t *fat = jtl_read_file(path, &fsize);
	struct jc_artifact a;
	char perr[256];
	assert_int_equal(jc__artifact_parse(fat, fsize, &a, perr, sizeof(perr)), 0);
	const char *at = lines;
	for (size_t i = 0; i < a.n_images; i++) {
		if (a.images[i].kind != JC_ART_CUBIN)
			continue;
		const struct jc_art_kernel *k = &a.images[i].kernels[0];
		char fn[300];
		snprintf(fn, sizeof(fn), "Function %s:", k->name);
		at = strstr(at, fn);
		assert_non_null(at);
		int reg = -1, stack = -1;
		const char *r = strstr(at, "REG:"), *st = strstr(at, "STACK:");
		assert_true(r && st && sscanf(r, "REG:%d", &reg) == 1 &&
			    sscanf(st, "STACK:%d", &stack) == 1);
		assert_int_equal(reg, k->registers);
		assert_int_equal(stack, k->stack_bytes);
		at += strlen(fn);
	}
	jc__artifact_clear(&a);
	free(fat);
	free(lines);
}

static void test_refusals_and_failures(void **state)
{
	struct jtl_daemon *d = *state;
	char msg[2048];
	jc_request *r = jct_request("saxpy.cu", "sm_80,sm_50,compute_90", exprs);
	jc_result *res = jct_compile_msg(d, r, JC_EINVAL, msg, sizeof(msg));
	assert_null(res);
	if (!strstr(msg, "does not support sm_50"))
		fail_msg("the refusal does not name sm_50: %s", msg);
	jc_request_free(r);

	r = jct_request("saxpy.cu", "sm_80,sm_80", exprs);
	jct_compile_msg(d, r, JC_EINVAL, msg, sizeof(msg));
	assert_non_null(strstr(msg, "given twice"));
	jc_request_free(r);

	/* A list with another output than fatbin. */
	r = jct_request("saxpy.cu", "sm_80,sm_90", exprs);
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	jct_compile_msg(d, r, JC_EINVAL, msg, sizeof(msg));
	assert_non_null(strstr(msg, "makes a fatbin"));
	jc_request_free(r);

	/* A source that does not compile: the fatbin fails with the part's log,
	 * negative-cached like the part. */
	r = jct_request_src("bad.cu", "__global__ void k() { undefined_thing(); }",
			    "sm_90,compute_90");
	res = jct_compile(d, r, JC_ECOMPILE);
	assert_non_null(res);
	assert_non_null(strstr(jc_result_log(res), "undefined_thing"));
	assert_non_null(strstr(jc_result_log(res), "sm_90"));
	jc_result_free(res);
	res = jct_compile(d, r, JC_ECOMPILE);
	assert_int_equal(jc_result_cache_status(res), JC_NEGATIVE_HIT);
	jc_result_free(res);
	jc_request_free(r);

	/* No fatbin tool: a clear refusal before anything compiles. */
	int64_t compiles = jct_stat(d, "compiles");
	assert_int_equal(jtl_daemon_stop(d), 0);
	setenv("JITCACHE_TEST_FATBIN", "none", 1);
	jct_daemon_start(d, NULL);
	unsetenv("JITCACHE_TEST_FATBIN");
	r = jct_request("saxpy.cu", "sm_86,sm_89", exprs);
	jct_compile_msg(d, r, JC_ENOTSUP, msg, sizeof(msg));
	if (!strstr(msg, "no fatbin tool"))
		fail_msg("refusal without a tool: %s", msg);
	assert_int_equal(jct_stat(d, "compiles"), compiles);
	jc_request_free(r);
}

/* The heavy example as a fatbin: with CCCL alone on the include path (as
 * the README compiles it) its PTX holds no device-side assert: the block
 * sum no longer goes through cub::ThreadReduce's array dispatch, which
 * sends float arrays to ThreadReduceSimd's "never reached" fallback when
 * cuda_fp16.h cannot be included (examples/cub_sort.cu says why). */
static void test_cub_example_fatbin(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const cub[] = {"sort_and_sum<128, 8>", NULL};
	char cccl[600], opt[620];
	const char *cuda = getenv("CUDA_PATH") ? getenv("CUDA_PATH") : "/usr/local/cuda";
	snprintf(cccl, sizeof(cccl), "%s/include/cccl", cuda);
	snprintf(opt, sizeof(opt), "-I%s", cccl);
	jc_request *r = jct_request("cub_sort.cu", "sm_90,compute_90", cub);
	assert_int_equal(jc_request_add_option(r, "-std=c++17"), 0);
	assert_int_equal(jc_request_add_option(r, opt), 0);
	assert_int_equal(jc_request_add_include_dir(r, cccl), 0);
	jc_result *res = jct_compile(d, r, 0);
	struct jc_artifact a;
	const uint8_t *fat;
	size_t size;
	parse(res, &a, &fat, &size);
	assert_int_equal(a.n_images, 2);
	assert_string_equal(a.images[1].target, "compute_90");
	const char *ptx = (const char *)fat + a.images[1].offset;
	size_t n = a.images[1].size;
	assert_non_null(memmem(ptx, n, ".entry _Z12sort_and_sumILi128ELi8EEvPKjPKfPjPfS5_", 49));
	if (memmem(ptx, n, "__assertfail", 12))
		fail_msg("the heavy example's PTX calls __assertfail (CUB's ThreadReduceSimd "
			 "fallback?)");
	printf("# CUB fatbin (sm_90 + compute_90): %zu bytes, built in %.0f ms\n", size,
	       jc_result_time_ns(res, JC_TIME_COMPILE) / 1e6);
	jc__artifact_clear(&a);
	jc_result_free(res);
	jc_request_free(r);
}

/* The nvFatbin path (a worker's JC_JOB_FATBIN job), with the stand-in
 * library (stub_nvfatbin.c) where the toolkit has no nvFatbin: the same
 * targets in order, the parts' bytes as they are, another tool identity in
 * the key. */
static void test_nvfatbin_path(void **state)
{
	struct jtl_daemon *d = *state;
	char lib[600];
	snprintf(lib, sizeof(lib), "%s/tests/integration/libnvfatbin.so.13",
		 getenv("JC_BUILD_ROOT"));
	jc_request *r = jct_request("saxpy.cu", "sm_80,sm_90,compute_90", exprs);
	jc_result *tool = jct_compile(d, r, 0);
	assert_int_equal(jtl_daemon_stop(d), 0);
	setenv("JITCACHE_TEST_FATBIN", lib, 1);
	jct_daemon_start(d, NULL);
	unsetenv("JITCACHE_TEST_FATBIN");
	int64_t compiles = jct_stat(d, "compiles");
	jc_result *res = jct_compile(d, r, 0);
	assert_int_equal(jc_result_cache_status(res), JC_MISS);
	assert_string_not_equal(jc_result_key(res), jc_result_key(tool));
	assert_int_equal(jct_stat(d, "compiles"), compiles); /* parts: hits */
	if (!strstr(jc_result_log(res), "put together by nvFatbin"))
		fail_msg("log: %s", jc_result_log(res));
	struct jc_artifact a;
	const uint8_t *fat;
	size_t size;
	parse(res, &a, &fat, &size);
	assert_int_equal(a.n_images, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_string_equal(a.images[i].target, targets[i]);
		jc_request *one = jct_request("saxpy.cu", targets[i], exprs);
		if (i == 2)
			assert_int_equal(jc_request_set_output(one, JC_PTX), 0);
		jc_result *single = jct_compile(d, one, 0);
		size_t n;
		const uint8_t *bytes = jc_result_data(single, &n);
		if (i == 2)
			n = strnlen((const char *)bytes, n); /* NUL padding is not PTX */
		assert_int_equal(a.images[i].size, n);
		assert_memory_equal(fat + a.images[i].offset, bytes, n);
		jc_result_free(single);
		jc_request_free(one);
	}
	assert_non_null(jc_result_lowered_name(res, "&saxpy<float>"));
	jc__artifact_clear(&a);
	jc_result_free(res);
	jc_result_free(tool);
	jc_request_free(r);
	assert_int_equal(jtl_daemon_stop(d), 0);
	jct_daemon_start(d, NULL);
}

/* Clients asking for one fatbin at once share its build. */
static void test_fatbin_single_flight(void **state)
{
	struct jtl_daemon *d = *state;
	jc_request *r = jct_request("saxpy.cu", "sm_86,sm_120", exprs);
	assert_int_equal(jc_request_set_app_abi(r, "single-flight"), 0);
	int64_t before = jct_stat(d, "compiles");
	pid_t kids[4];
	for (int i = 0; i < 4; i++) {
		if ((kids[i] = fork()) == 0) {
			jc_client *c = NULL;
			jc_result *res = NULL;
			int ok = jc_client_connect(d->sock, &c) == 0 &&
				 jc_compile(c, r, &res) == 0 && jc_result_output(res) == JC_FATBIN;
			_exit(ok ? 0 : 1);
		}
	}
	for (int i = 0; i < 4; i++) {
		int st;
		assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	assert_int_equal(jct_stat(d, "compiles") - before, 2);
	jc_request_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fatbin_targets_and_parts),
	    cmocka_unit_test(test_ctl_fatbin_inspect),
	    cmocka_unit_test(test_fatbin_single_flight),
	    cmocka_unit_test(test_cub_example_fatbin),
	    cmocka_unit_test(test_nvfatbin_path),
	    cmocka_unit_test(test_refusals_and_failures),
	};
	return cmocka_run_group_tests(tests, jct_setup_started, jct_teardown);
}
