/* SPDX-License-Identifier: MIT */
/*
 * Key derivation and toolchain identity. Table-driven: every key input changes
 * the key, order-insensitive inputs do not, bad requests are rejected; the key
 * is the same in another process (this binary re-executed as "key-helper"); the
 * toolchain probe runs against the real NVRTC / nvJitLink.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/req.h"
#include "common/util.h"
#include "core/key.h"
#include "core/toolchain.h"
#include "jitcache/jitcache.h"

static void set_str(char **p, const char *s)
{
	free(*p);
	*p = s ? strdup(s) : NULL;
	assert_true(!s || *p);
}

static void swap_str(char **a, char **b)
{
	char *t = *a;
	*a = *b;
	*b = t;
}

/* A compile+link request that sets every key input. */
static void base_req(struct jc_req *r)
{
	static const char src[] = "extern \"C\" __global__ void k(float *x) { x[0] = N; }";
	memset(r, 0, sizeof(*r));
	r->job = JC_JOB_COMPILE_LINK;
	r->output = JC_OUTPUT_CUBIN;
	set_str(&r->arch, "sm_90");
	set_str(&r->source_name, "k.cu");
	r->source = (uint8_t *)strdup(src);
	r->source_size = sizeof(src) - 1;
	assert_int_equal(jc__blob_push(&r->headers, &r->n_headers, "b.h", "#define B 2\n", 12, 0),
			 0);
	assert_int_equal(
	    jc__blob_push(&r->headers, &r->n_headers, "sub/a.h", "#define A 1\n", 12, 0), 0);
	assert_int_equal(jc__strv_push(&r->options, "-DN=1"), 0);
	assert_int_equal(jc__strv_push(&r->options, "-std=c++17"), 0);
	assert_int_equal(jc__strv_push(&r->options, "-I/inc"), 0);
	assert_int_equal(jc__strv_push(&r->include_dirs, "/inc"), 0);
	assert_int_equal(jc__strv_push(&r->name_exprs, "&k<float>"), 0);
	assert_int_equal(jc__strv_push(&r->name_exprs, "&k<double>"), 0);
	assert_int_equal(jc__blob_push(&r->link_inputs, &r->n_link_inputs, "lib.ltoir", "LTO1", 4,
				       JC_INPUT_LTOIR),
			 0);
	assert_int_equal(jc__blob_push(&r->link_inputs, &r->n_link_inputs, "dev.cubin", "CUB1", 4,
				       JC_INPUT_CUBIN),
			 0);
	assert_int_equal(jc__strv_push(&r->link_options, "-O3"), 0);
	set_str(&r->app_abi, "app-abi-1");
}

static void base_tc(struct jc_toolchain *tc)
{
	memset(tc, 0, sizeof(*tc));
	strcpy(tc->nvrtc_version, "13.0");
	strcpy(tc->nvrtc_id, "build-id:65be0db342ad51a06876e71e210bccc5aa8322cf");
	strcpy(tc->nvrtc_builtins_id, "build-id:08d17e32084d3171cc6e296843a5e09fbd20a331");
	strcpy(tc->nvjitlink_version, "13.0");
	strcpy(tc->nvjitlink_id, "build-id:157d67e654e020e4bc581f362fe42f752181ddda");
	strcpy(tc->driver_version, "none");
	strcpy(tc->driver_build, "none");
	strcpy(tc->toolkit_include_id, "tree:385ec4f4a97da2a1e0ee7b5a4188775b");
}

static void key_of(const struct jc_req *r, const struct jc_toolchain *tc, uint8_t key[16])
{
	char err[256] = "";
	int rc = jc__key_compute(r, tc, key, err, sizeof(err));
	if (rc)
		fail_msg("jc__key_compute: %d %s", rc, err);
}

/* ---- every single input changes the key ---- */

typedef void (*mutate_fn)(struct jc_req *r, struct jc_toolchain *tc);

#define M(name, body)                                                                              \
	static void name(struct jc_req *r, struct jc_toolchain *tc)                                \
	{                                                                                          \
		(void)r;                                                                           \
		(void)tc;                                                                          \
		body;                                                                              \
	}
M(m_job, r->job = JC_JOB_LINK)
M(m_output, r->output = JC_OUTPUT_PTX)
M(m_source_name, set_str(&r->source_name, "k2.cu"))
M(m_source_bytes, r->source[r->source_size - 2] = ';')
M(m_header_name, set_str(&r->headers[1].name, "sub/c.h"))
M(m_header_bytes, r->headers[0].data[9] = '3')
M(m_header_added, assert_int_equal(jc__blob_push(&r->headers, &r->n_headers, "c.h", "", 0, 0), 0))
M(m_option_text, set_str(&r->options.v[0], "-DN=2"))
M(m_option_order, swap_str(&r->options.v[0], &r->options.v[1]))
M(m_option_extra_define, assert_int_equal(jc__strv_push(&r->options, "-DM=1"), 0))
M(m_include_dir_added, {
	assert_int_equal(jc__strv_push(&r->include_dirs, "/inc2"), 0);
	assert_int_equal(jc__strv_push(&r->options, "-I/inc2"), 0);
})
M(m_arch_sm80, set_str(&r->arch, "sm_80"))
/* compute_90 makes PTX, not a cubin: compare with m_output (sm_90, PTX). */
M(m_arch_compute90, {
	set_str(&r->arch, "compute_90");
	r->output = JC_OUTPUT_PTX;
})
M(m_arch_sm90a, set_str(&r->arch, "sm_90a"))
M(m_name_expr_added, assert_int_equal(jc__strv_push(&r->name_exprs, "&k<int>"), 0))
M(m_name_expr_changed, set_str(&r->name_exprs.v[1], "&k<half>"))
M(m_nvrtc_version, strcpy(tc->nvrtc_version, "13.1"))
M(m_nvrtc_id, tc->nvrtc_id[20] = '0')
M(m_builtins_id, strcpy(tc->nvrtc_builtins_id, "none"))
M(m_nvjitlink_version, strcpy(tc->nvjitlink_version, "13.1"))
M(m_nvjitlink_id, strcpy(tc->nvjitlink_id, "xxh128:00112233445566778899aabbccddeeff"))
M(m_driver_version, strcpy(tc->driver_version, "13.0"))
M(m_driver_build,
  strcpy(tc->driver_build, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06"))
M(m_toolkit_include_id, strcpy(tc->toolkit_include_id, "tree:00112233445566778899aabbccddeeff"))
M(m_link_type, r->link_inputs[1].type = JC_INPUT_OBJECT)
M(m_link_name, set_str(&r->link_inputs[1].name, "dev2.cubin"))
M(m_link_bytes, r->link_inputs[0].data[3] = '2')
M(m_link_order, {
	struct jc_blob t = r->link_inputs[0];
	r->link_inputs[0] = r->link_inputs[1];
	r->link_inputs[1] = t;
})
M(m_link_option, set_str(&r->link_options.v[0], "-O2"))
M(m_link_option_added, assert_int_equal(jc__strv_push(&r->link_options, "-lto"), 0))
M(m_app_abi, set_str(&r->app_abi, "app-abi-2"))

static const struct {
	const char *name;
	mutate_fn fn;
} changes[] = {
#define ROW(f)                                                                                     \
	{                                                                                          \
#f, f                                                                              \
	}
    ROW(m_job),
    ROW(m_output),
    ROW(m_source_name),
    ROW(m_source_bytes),
    ROW(m_header_name),
    ROW(m_header_bytes),
    ROW(m_header_added),
    ROW(m_option_text),
    ROW(m_option_order),
    ROW(m_option_extra_define),
    ROW(m_include_dir_added),
    ROW(m_arch_sm80),
    ROW(m_arch_compute90),
    ROW(m_toolkit_include_id),
    ROW(m_arch_sm90a),
    ROW(m_name_expr_added),
    ROW(m_name_expr_changed),
    ROW(m_nvrtc_version),
    ROW(m_nvrtc_id),
    ROW(m_builtins_id),
    ROW(m_nvjitlink_version),
    ROW(m_nvjitlink_id),
    ROW(m_driver_version),
    ROW(m_driver_build),
    ROW(m_link_type),
    ROW(m_link_name),
    ROW(m_link_bytes),
    ROW(m_link_order),
    ROW(m_link_option),
    ROW(m_link_option_added),
    ROW(m_app_abi),
};
#define N_CHANGES (sizeof(changes) / sizeof(changes[0]))

static void test_each_input_changes_key(void **state)
{
	(void)state;
	uint8_t keys[N_CHANGES + 1][16];
	struct jc_req r;
	struct jc_toolchain tc;
	base_req(&r);
	base_tc(&tc);
	key_of(&r, &tc, keys[0]);
	jc__req_clear(&r);
	for (size_t i = 0; i < N_CHANGES; i++) {
		base_req(&r);
		base_tc(&tc);
		changes[i].fn(&r, &tc);
		key_of(&r, &tc, keys[i + 1]);
		jc__req_clear(&r);
	}
	/* Pairwise distinct: each change differs from the base and from every other. */
	for (size_t i = 0; i <= N_CHANGES; i++)
		for (size_t j = 0; j < i; j++)
			if (memcmp(keys[i], keys[j], 16) == 0)
				fail_msg("same key for %s and %s", i ? changes[i - 1].name : "base",
					 j ? changes[j - 1].name : "base");
}

/* ---- inputs whose order must not matter, and repeatability ---- */

M(s_nothing, )
M(s_header_order, {
	struct jc_blob t = r->headers[0];
	r->headers[0] = r->headers[1];
	r->headers[1] = t;
})
M(s_name_expr_order, swap_str(&r->name_exprs.v[0], &r->name_exprs.v[1]))
M(s_supported_archs, strcpy(tc->supported_archs, "sm_75 sm_80")) /* not a key input */
M(s_summary, strcpy(tc->summary, "other"))			 /* not a key input */
M(s_reject_fields, {
	r->reject_reason = JC_REJECT_CORRUPT;
	r->reject_object[0] = 1;
	r->test_fault = JC_FAULT_HANG;
})

static const struct {
	const char *name;
	mutate_fn fn;
} sames[] = {
    ROW(s_nothing),	    ROW(s_header_order), ROW(s_name_expr_order),
    ROW(s_supported_archs), ROW(s_summary),	 ROW(s_reject_fields),
};

/* The directory's path and the -I spelling are not in the direct key: the
 * path enters with the tree (jc__inc_key_digest), so the same bytes under
 * another directory share a key. */
static void test_include_dir_path_not_direct(void **state)
{
	(void)state;
	uint8_t a[16], b[16];
	struct jc_req r;
	struct jc_toolchain tc;
	base_tc(&tc);
	base_req(&r);
	key_of(&r, &tc, a);
	set_str(&r.include_dirs.v[0], "/home/u2/inc");
	set_str(&r.options.v[2], "--include-path=/home/u2/inc");
	key_of(&r, &tc, b);
	assert_memory_equal(a, b, 16);
	jc__req_clear(&r);
}

static void test_same_key(void **state)
{
	(void)state;
	uint8_t base[16], k[16];
	struct jc_req r;
	struct jc_toolchain tc;
	base_req(&r);
	base_tc(&tc);
	key_of(&r, &tc, base);
	jc__req_clear(&r);
	for (size_t i = 0; i < sizeof(sames) / sizeof(sames[0]); i++) {
		base_req(&r);
		base_tc(&tc);
		sames[i].fn(&r, &tc);
		key_of(&r, &tc, k);
		jc__req_clear(&r);
		if (memcmp(base, k, 16) != 0)
			fail_msg("%s changed the key", sames[i].name);
	}
}

/* ---- rejected requests ---- */

M(x_dup_header, set_str(&r->headers[1].name, "b.h"))
M(x_header_dotdot, set_str(&r->headers[0].name, "../x.h"))
M(x_header_inner_dotdot, set_str(&r->headers[0].name, "a/../x.h"))
M(x_header_trailing_dotdot, set_str(&r->headers[0].name, "a/.."))
M(x_header_abs, set_str(&r->headers[0].name, "/abs.h"))
M(x_header_backslash, set_str(&r->headers[0].name, "a\\b.h"))
M(x_header_empty, set_str(&r->headers[0].name, ""))
M(x_arch_null, set_str(&r->arch, NULL))
M(x_arch_short, set_str(&r->arch, "sm_9"))
M(x_arch_long, set_str(&r->arch, "sm_9000"))
M(x_arch_suffix, set_str(&r->arch, "sm_90b"))
M(x_arch_suffix2, set_str(&r->arch, "sm_90aa"))
M(x_arch_prefix, set_str(&r->arch, "gfx90"))
M(x_opt_arch_eq, set_str(&r->options.v[1], "-arch=sm_90"))
M(x_opt_arch_two, {
	set_str(&r->options.v[1], "-arch");
	set_str(&r->options.v[2], "sm_90");
})
M(x_opt_gpu_arch_eq, set_str(&r->options.v[1], "--gpu-architecture=compute_90"))
M(x_opt_gpu_arch, set_str(&r->options.v[1], "--gpu-architecture"))
M(x_link_opt_arch, set_str(&r->link_options.v[0], "-arch=sm_90"))
M(x_opt_empty, set_str(&r->options.v[0], ""))
M(x_name_expr_empty, set_str(&r->name_exprs.v[0], ""))
M(x_include_dir_empty, set_str(&r->include_dirs.v[0], ""))
M(x_include_dir_mismatch, set_str(&r->include_dirs.v[0], "/other"))
M(x_include_dir_relative, {
	set_str(&r->include_dirs.v[0], "inc");
	set_str(&r->options.v[2], "-Iinc");
})
M(x_include_dir_undeclared, assert_int_equal(jc__strv_push(&r->options, "-I/inc2"), 0))
M(x_include_dir_unused, assert_int_equal(jc__strv_push(&r->include_dirs, "/inc2"), 0))
M(x_include_opt_no_value, set_str(&r->options.v[2], "-I"))
M(x_include_path_no_value, set_str(&r->options.v[2], "--include-path="))
M(x_pre_include_no_value, assert_int_equal(jc__strv_push(&r->options, "-include"), 0))
M(x_source_name_empty, set_str(&r->source_name, ""))
M(x_source_no_data, {
	free(r->source);
	r->source = NULL;
})
M(x_job, r->job = 0)
M(x_output, r->output = 9)
M(x_link_ltoir, r->output = JC_OUTPUT_LTOIR)
M(x_virtual_cubin, set_str(&r->arch, "compute_90"))
M(x_opt_time_file, set_str(&r->options.v[0], "--time=/etc/crontab"))
M(x_opt_pch_dir, set_str(&r->options.v[0], "--pch-dir=/tmp"))
M(x_opt_ptxas_output, set_str(&r->options.v[0], "-Xptxas=--output-file=/tmp/x"))
M(x_source_name_newline, set_str(&r->source_name, "x\nINJECTED"))
M(x_reject_reason, r->reject_reason = 99)
M(x_link_job_no_inputs, {
	r->job = JC_JOB_LINK;
	for (size_t i = 0; i < r->n_link_inputs; i++) {
		free(r->link_inputs[i].name);
		free(r->link_inputs[i].data);
	}
	r->n_link_inputs = 0;
})
M(x_link_type, r->link_inputs[0].type = 0)
M(x_link_name_empty, set_str(&r->link_inputs[0].name, ""))

static const struct {
	const char *name;
	mutate_fn fn;
} rejects[] = {
    ROW(x_dup_header),
    ROW(x_header_dotdot),
    ROW(x_header_inner_dotdot),
    ROW(x_header_trailing_dotdot),
    ROW(x_header_abs),
    ROW(x_header_backslash),
    ROW(x_header_empty),
    ROW(x_arch_null),
    ROW(x_arch_short),
    ROW(x_arch_long),
    ROW(x_arch_suffix),
    ROW(x_arch_suffix2),
    ROW(x_arch_prefix),
    ROW(x_opt_arch_eq),
    ROW(x_opt_arch_two),
    ROW(x_opt_gpu_arch_eq),
    ROW(x_opt_gpu_arch),
    ROW(x_link_opt_arch),
    ROW(x_opt_empty),
    ROW(x_name_expr_empty),
    ROW(x_include_dir_empty),
    ROW(x_include_dir_mismatch),
    ROW(x_include_dir_relative),
    ROW(x_include_dir_undeclared),
    ROW(x_include_dir_unused),
    ROW(x_include_opt_no_value),
    ROW(x_include_path_no_value),
    ROW(x_pre_include_no_value),
    ROW(x_source_name_empty),
    ROW(x_source_no_data),
    ROW(x_job),
    ROW(x_output),
    ROW(x_link_ltoir),
    ROW(x_virtual_cubin),
    ROW(x_opt_time_file),
    ROW(x_opt_pch_dir),
    ROW(x_opt_ptxas_output),
    ROW(x_source_name_newline),
    ROW(x_reject_reason),
    ROW(x_link_job_no_inputs),
    ROW(x_link_type),
    ROW(x_link_name_empty),
};

static void test_rejects(void **state)
{
	(void)state;
	struct jc_req r;
	struct jc_toolchain tc;
	base_tc(&tc);
	for (size_t i = 0; i < sizeof(rejects) / sizeof(rejects[0]); i++) {
		char err[256] = "", verr[256] = "";
		uint8_t key[16];
		base_req(&r);
		rejects[i].fn(&r, &tc);
		int rc = jc__key_compute(&r, &tc, key, err, sizeof(err));
		int vrc = jc__req_validate(&r, verr, sizeof(verr));
		jc__req_clear(&r);
		if (rc != JC_EINVAL || vrc != JC_EINVAL || !err[0] || strcmp(err, verr) != 0)
			fail_msg("%s: key %d \"%s\", validate %d \"%s\"", rejects[i].name, rc, err,
				 vrc, verr);
	}
	/* The architecture message names the right way to set it. */
	char err[256];
	base_req(&r);
	x_opt_arch_eq(&r, &tc);
	assert_int_equal(jc__req_validate(&r, err, sizeof(err)), JC_EINVAL);
	assert_non_null(strstr(err, "set the architecture with --arch"));
	jc__req_clear(&r);
}

/* The key of a request with headers on disk: direct key and include tree both count. */
static void test_key_with_tree(void **state)
{
	(void)state;
	uint8_t d1[16] = {1}, d2[16] = {2}, t1[16] = {3}, t2[16] = {4}, k[4][16], again[16];
	assert_int_equal(jc__key_with_tree(d1, t1, k[0]), 0);
	assert_int_equal(jc__key_with_tree(d1, t2, k[1]), 0);
	assert_int_equal(jc__key_with_tree(d2, t1, k[2]), 0);
	assert_int_equal(jc__key_with_tree(t1, d1, k[3]), 0); /* the fields are tagged */
	for (int i = 0; i < 4; i++) {
		assert_memory_not_equal(k[i], d1, 16);
		for (int j = 0; j < i; j++)
			assert_memory_not_equal(k[i], k[j], 16);
	}
	assert_int_equal(jc__key_with_tree(d1, t1, again), 0);
	assert_memory_equal(again, k[0], 16);
}

/* A plain compile: no link inputs, no headers, no name expressions, NULL app ABI. */
static void test_minimal_compile(void **state)
{
	(void)state;
	struct jc_req r = {.job = JC_JOB_COMPILE, .output = JC_OUTPUT_LTOIR};
	struct jc_toolchain tc;
	base_tc(&tc);
	set_str(&r.arch, "sm_100f");
	set_str(&r.source_name, "e.cu");
	uint8_t a[16], b[16];
	key_of(&r, &tc, a);
	set_str(&r.app_abi, ""); /* NULL and "" are the same ABI string */
	key_of(&r, &tc, b);
	assert_memory_equal(a, b, 16);
	jc__req_clear(&r);
}

/* A name-free request (req.h): one key for every program name, apart from
 * every named request's; jc__key_named() gives each name its own. Only a
 * compile of one target may ask for it. */
static void test_name_free(void **state)
{
	(void)state;
	struct jc_req r = {.job = JC_JOB_COMPILE, .output = JC_OUTPUT_CUBIN};
	struct jc_toolchain tc;
	char err[256];
	uint8_t a[16], b[16], na[16], nb[16], plain_a[16], again[16];
	base_tc(&tc);
	set_str(&r.arch, "sm_90");
	set_str(&r.source_name, "/tmp/tmp1/k.cu");
	key_of(&r, &tc, plain_a);
	r.name_free = 1;
	key_of(&r, &tc, a);
	set_str(&r.source_name, "/tmp/tmp2/other.cu");
	key_of(&r, &tc, b);
	assert_memory_equal(a, b, 16);
	assert_memory_not_equal(a, plain_a, 16);
	set_str(&r.source_name, "jitcache-program.cu"); /* the shim's former stand-in, named */
	r.name_free = 0;
	key_of(&r, &tc, b);
	assert_memory_not_equal(a, b, 16);
	assert_int_equal(jc__key_named(a, "/tmp/tmp1/k.cu", na), 0);
	assert_int_equal(jc__key_named(a, "/tmp/tmp2/k.cu", nb), 0);
	assert_memory_not_equal(na, nb, 16);
	assert_memory_not_equal(na, a, 16);
	assert_memory_not_equal(na, plain_a, 16);
	assert_int_equal(jc__key_named(a, "/tmp/tmp1/k.cu", again), 0);
	assert_memory_equal(na, again, 16);
	r.name_free = 2;
	assert_int_equal(jc__key_compute(&r, &tc, a, err, sizeof(err)), JC_EINVAL);
	r.name_free = 1;
	r.output = JC_OUTPUT_FATBIN;
	set_str(&r.arch, "sm_80,sm_90");
	assert_int_equal(jc__key_compute(&r, &tc, a, err, sizeof(err)), JC_EINVAL);
	assert_non_null(strstr(err, "name_free"));
	jc__req_clear(&r);
}

/* ---- same key in another process ---- */

static void base_key_hex(char hex[33])
{
	struct jc_req r;
	struct jc_toolchain tc;
	uint8_t key[16];
	base_req(&r);
	base_tc(&tc);
	key_of(&r, &tc, key);
	jc__req_clear(&r);
	jc__hex16(key, hex);
}

static void test_cross_process(void **state)
{
	(void)state;
	char mine[33], theirs[34] = "";
	base_key_hex(mine);
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], STDOUT_FILENO);
		close(p[0]);
		close(p[1]);
		execl("/proc/self/exe", "test_key", "key-helper", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	size_t got = 0;
	ssize_t n;
	while (got < sizeof(theirs) - 1 &&
	       (n = read(p[0], theirs + got, sizeof(theirs) - 1 - got)) > 0)
		got += (size_t)n;
	close(p[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(got, 33);
	assert_int_equal(theirs[32], '\n');
	theirs[32] = '\0';
	assert_string_equal(mine, theirs);
}

/* ---- the real toolchain ---- */

static void probe(struct jc_toolchain *tc)
{
	char err[256] = "";
	int rc = jc__toolchain_probe(tc, err, sizeof(err));
	if (rc)
		fail_msg("jc__toolchain_probe: %d %s", rc, err);
}

static int starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_probe(void **state)
{
	(void)state;
	struct jc_toolchain tc;
	uint64_t t0 = jc__now_ns();
	probe(&tc);
	print_message("probe: %.3f ms\n  %s\n  archs: %s\n", (double)(jc__now_ns() - t0) / 1e6,
		      tc.summary, tc.supported_archs);

	assert_true(starts_with(tc.nvrtc_version, "13"));
	assert_true(starts_with(tc.nvjitlink_version, "13"));
	assert_true(starts_with(tc.nvrtc_id, "build-id:") || starts_with(tc.nvrtc_id, "xxh128:"));
	assert_true(starts_with(tc.nvjitlink_id, "build-id:") ||
		    starts_with(tc.nvjitlink_id, "xxh128:"));
	assert_true(strcmp(tc.nvrtc_id, tc.nvjitlink_id) != 0);
	assert_true(tc.nvrtc_builtins_id[0]);
	assert_true(tc.driver_build[0]);
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (cuda) {
		unsigned maj, min;
		char end;
		dlclose(cuda);
		assert_int_equal(sscanf(tc.driver_version, "%u.%u%c", &maj, &min, &end), 2);
	} else {
		assert_string_equal(tc.driver_version, "none");
	}
	if (access("/proc/driver/nvidia/version", R_OK) != 0)
		assert_string_equal(tc.driver_build, "none");
	assert_non_null(strstr(tc.summary, tc.nvrtc_id));
	assert_non_null(strstr(tc.summary, tc.nvjitlink_id));
	assert_non_null(strstr(tc.supported_archs, "sm_90"));
	/* The toolkit's include tree next to libnvrtc, and its identity. */
	char want[4200], real[4096];
	assert_true(tc.toolkit_include[0] == '/');
	snprintf(want, sizeof(want), "%s/cuda_runtime.h", tc.toolkit_include);
	assert_int_equal(access(want, R_OK), 0);
	assert_non_null(realpath(tc.toolkit_include, real));
	assert_string_equal(real, tc.toolkit_include);
	assert_true(starts_with(tc.toolkit_include_id, "tree:") &&
		    strlen(tc.toolkit_include_id) == 37);
	assert_non_null(strstr(tc.summary, tc.toolkit_include_id));

	assert_true(jc__toolchain_supports_arch(&tc, "sm_90"));
	assert_true(jc__toolchain_supports_arch(&tc, "sm_90a"));
	assert_true(jc__toolchain_supports_arch(&tc, "compute_90"));
	assert_false(jc__toolchain_supports_arch(&tc, "sm_10"));
	assert_false(jc__toolchain_supports_arch(&tc, "sm_9"));
	assert_false(jc__toolchain_supports_arch(&tc, "sm_90x"));

	/* A second probe gives the same identity. */
	struct jc_toolchain again;
	probe(&again);
	assert_string_equal(tc.summary, again.summary);
}

static void test_probe_overrides(void **state)
{
	(void)state;
	struct jc_toolchain real, over;
	struct jc_req r;
	uint8_t k_real[16], k_over[16];
	probe(&real);
	base_req(&r);
	key_of(&r, &real, k_real);

	static const struct {
		const char *env, *value;
		size_t field;
	} rows[] = {
	    {"JITCACHE_TEST_NVRTC_ID", "build-id:0123456789abcdef",
	     offsetof(struct jc_toolchain, nvrtc_id)},
	    {"JITCACHE_TEST_DRIVER_VERSION", "99.9", offsetof(struct jc_toolchain, driver_version)},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(setenv(rows[i].env, rows[i].value, 1), 0);
		probe(&over);
		assert_string_equal((char *)&over + rows[i].field, rows[i].value);
		assert_true(strcmp(over.summary, real.summary) != 0);
		key_of(&r, &over, k_over);
		assert_memory_not_equal(k_real, k_over, 16);

		char err[256] = "";
		assert_int_equal(setenv(rows[i].env, "", 1), 0);
		assert_int_equal(jc__toolchain_probe(&over, err, sizeof(err)), JC_EINVAL);
		assert_non_null(strstr(err, rows[i].env));
		assert_int_equal(unsetenv(rows[i].env), 0);
	}
	jc__req_clear(&r);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "key-helper") == 0) {
		char hex[33];
		base_key_hex(hex);
		printf("%s\n", hex);
		return 0;
	}
	unsetenv("JITCACHE_TEST_NVRTC_ID");
	unsetenv("JITCACHE_TEST_DRIVER_VERSION");
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_each_input_changes_key),
	    cmocka_unit_test(test_same_key),
	    cmocka_unit_test(test_include_dir_path_not_direct),
	    cmocka_unit_test(test_rejects),
	    cmocka_unit_test(test_minimal_compile),
	    cmocka_unit_test(test_key_with_tree),
	    cmocka_unit_test(test_name_free),
	    cmocka_unit_test(test_cross_process),
	    cmocka_unit_test(test_probe),
	    cmocka_unit_test(test_probe_overrides),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
