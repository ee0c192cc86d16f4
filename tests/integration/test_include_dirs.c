/* SPDX-License-Identifier: MIT */
/*
 * Headers read from -I directories, with a real daemon and real NVRTC
 * compiles to PTX (whose text shows the value each header defined, so a wrong
 * hit would be seen): a nested header change is a new key; an mtime-only
 * change still hits, through the manifest, without a scan; reverting returns
 * to the old entry and bytes; a header added earlier on the search path
 * shadows another and changes the key; a computed include falls back to the
 * whole directory; a header changed a moment ago is compiled, re-read and stored;
 * bad include requests are refused; NVRTC-shaped -I options (relative, no
 * declaration) give the declared form's key; the toolkit's own tree costs no stat;
 * the same bytes under another directory share the entry, unless a header
 * uses __FILE__ (then its path is keyed).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "proto/io.h"
#include "tests/lib/test.h"

static const char kernel[] = "#include <a.h>\n"
			     "extern \"C\" __global__ void k(int *x) { x[threadIdx.x] = VALUE; }\n";

static void test_nested_change_touch_revert(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"inc", NULL};
	jct_put(d->dir, "inc/a.h", "#include \"sub/b.h\"\n#define VALUE (B + 1)\n");
	jct_put(d->dir, "inc/sub/b.h", "#define B 4100\n");
	jct_settle();
	jc_request *r = jct_request_ptx_dirs(d, kernel, dirs);
	jc_result *first = jct_expect_ptx(d, r, JC_MISS, "4101");
	jc_result_free(jct_expect_ptx(d, r, JC_HIT, "4101"));
	assert_int_equal(jct_stat(d, "include_scans"), 1);
	/* keyed without a scan: the tree is watched since the scan */
	assert_int_equal(jct_stat(d, "include_tree_watch_hits"), 1);
	assert_int_equal(jct_stat(d, "include_manifest_hits"), 0);

	/* The nested header changes: a new key, and PTX from the new bytes. */
	jct_put(d->dir, "inc/sub/b.h", "#define B 4200\n");
	jct_settle();
	jc_result *second = jct_expect_ptx(d, r, JC_MISS, "4201");
	assert_string_not_equal(jc_result_key(first), jc_result_key(second));
	jc_result_free(jct_expect_ptx(d, r, JC_HIT, "4201"));

	/* mtime only: the manifest still matches (a re-read, no scan); a hit. */
	char path[512];
	snprintf(path, sizeof(path), "%s/inc/sub/b.h", d->dir);
	struct timespec times[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
	assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
	int64_t scans = jct_stat(d, "include_scans");
	jc_result *touched = jct_expect_ptx(d, r, JC_HIT, "4201");
	assert_string_equal(jc_result_key(touched), jc_result_key(second));
	assert_int_equal(jct_stat(d, "include_scans"), scans);
	jc_result_free(touched);

	/* Revert: the older manifest variant matches, the first entry's bytes. */
	jct_put(d->dir, "inc/sub/b.h", "#define B 4100\n");
	jct_settle();
	jc_result *back = jct_expect_ptx(d, r, JC_HIT, "4101");
	assert_string_equal(jc_result_key(back), jc_result_key(first));
	size_t n1, n2;
	const void *b1 = jc_result_data(first, &n1), *b2 = jc_result_data(back, &n2);
	assert_int_equal(n1, n2);
	assert_memory_equal(b1, b2, n1);
	assert_int_equal(jct_stat(d, "include_scans"), scans);
	assert_int_equal(jct_stat(d, "compiles"), 2);
	jc_result_free(back);
	jc_result_free(first);
	jc_result_free(second);
	jc_request_free(r);
}

static void test_shadowing_header(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"first", "second", NULL};
	jct_put(d->dir, "second/a.h", "#define VALUE 5200\n");
	assert_int_equal(jct_sh("mkdir -p '%s/first'", d->dir), 0);
	jct_settle();
	jc_request *r = jct_request_ptx_dirs(d, kernel, dirs);
	jc_result *a = jct_expect_ptx(d, r, JC_MISS, "5200");
	jct_put(d->dir, "first/a.h", "#define VALUE 5100\n"); /* earlier on the search path */
	jct_settle();
	jc_result *b = jct_expect_ptx(d, r, JC_MISS, "5100");
	assert_string_not_equal(jc_result_key(a), jc_result_key(b));
	/* jitcachectl, relative -I: made absolute, after the source's own
	 * directory (nvcc's first quoted-include directory): the same request
	 * and key as the library's with those three. */
	jc_request *r3 = jct_request_src("k.cu", kernel, "compute_90");
	char opt[512];
	assert_int_equal(jc_request_set_output(r3, JC_PTX), 0);
	snprintf(opt, sizeof(opt), "-I%s", d->dir);
	assert_int_equal(jc_request_add_option(r3, opt), 0);
	for (size_t i = 0; dirs[i]; i++) {
		snprintf(opt, sizeof(opt), "-I%s/%s", d->dir, dirs[i]);
		assert_int_equal(jc_request_add_option(r3, opt), 0);
	}
	jc_result *c = jct_expect_ptx(d, r3, JC_MISS, "5100");
	char src[512], *err = NULL;
	snprintf(src, sizeof(src), "%s/k.cu", d->dir);
	jct_write_file(src, kernel, strlen(kernel));
	const char *args[] = {"compile", src,	    "--arch", "compute_90", "--output", "ptx",
			      "--",	 "-Ifirst", "-I",     "second",	    NULL};
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(d->dir), 0);
	int rc = jct_ctl(d, NULL, &err, args);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(rc, 0);
	assert_true(strncmp(err, "hit", 3) == 0);
	assert_non_null(strstr(err, jc_result_key(c)));
	free(err);
	jc_result_free(a);
	jc_result_free(b);
	jc_result_free(c);
	jc_request_free(r);
	jc_request_free(r3);
}

static void test_computed_include_falls_back(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"inc", NULL};
	static const char src[] = "#define CONFIG <cfg/a.h>\n#include CONFIG\n"
				  "extern \"C\" __global__ void k(int *x) { x[0] = VALUE; }\n";
	jct_put(d->dir, "inc/cfg/a.h", "#define VALUE 6100\n");
	jct_put(d->dir, "inc/unrelated.txt", "x");
	jct_settle();
	jc_request *r = jct_request_ptx_dirs(d, src, dirs);
	jc_result *a = jct_expect_ptx(d, r, JC_MISS, "6100");
	jc_result_free(jct_expect_ptx(d, r, JC_HIT, "6100"));
	/* The header the macro names changes: seen, though no scan could name it. */
	jct_put(d->dir, "inc/cfg/a.h", "#define VALUE 6200\n");
	jct_settle();
	jc_result *b = jct_expect_ptx(d, r, JC_MISS, "6200");
	/* Any other file under the directory counts too (safe, not precise). */
	jct_put(d->dir, "inc/unrelated.txt", "y");
	jct_settle();
	jc_result *c = jct_expect_ptx(d, r, JC_MISS, "6200");
	jct_put(d->dir, "inc/cfg/new.h", "");
	jct_settle();
	jc_result *e = jct_expect_ptx(d, r, JC_MISS, "6200");
	assert_string_not_equal(jc_result_key(a), jc_result_key(b));
	assert_string_not_equal(jc_result_key(b), jc_result_key(c));
	assert_string_not_equal(jc_result_key(c), jc_result_key(e));
	jc_result_free(a);
	jc_result_free(b);
	jc_result_free(c);
	jc_result_free(e);
	jc_request_free(r);
}

/* A header written a moment ago: compiled, re-read after the compile (the
 * same bytes), stored; the next request hits. */
static void test_fresh_header_is_stored_after_rehash(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"inc", NULL};
	jct_put(d->dir, "inc/a.h", "#define VALUE 7100\n");
	jc_request *r = jct_request_ptx_dirs(d, kernel, dirs);
	jc_result_free(jct_expect_ptx(d, r, JC_MISS, "7100"));
	assert_int_equal(jct_stat(d, "include_rehashed"), 1);
	assert_int_equal(jct_stat(d, "include_uncached"), 0);
	assert_int_equal(jct_stat(d, "entries"), 1);
	jc_result_free(jct_expect_ptx(d, r, JC_HIT, "7100"));
	assert_int_equal(jct_stat(d, "compiles"), 1);
	jc_request_free(r);
}

/*
 * Sends req as it is (no client-side resolution) on a raw connection and
 * returns the daemon's code, with its message in msg.
 */
static int raw_compile(const struct jtl_daemon *d, const struct jc_req *req, char *msg,
		       size_t msglen)
{
	int fd = jct_raw_connect(d);
	struct jc_buf b = {0};
	uint16_t type;
	char *text = NULL;
	int code = 0;
	assert_int_equal(jc__encode_hello(&b, JC_MSG_HELLO, JC_PROTO_VERSION, "raw test"), 0);
	assert_int_equal(jc__encode_req(&b, req), 0);
	assert_int_equal(jc__io_write_all(fd, b.data, b.len), 0);
	assert_int_equal(jc__io_read_frame(fd, &b, &type, NULL, 5000), 0);
	assert_int_equal(type, JC_MSG_HELLO_OK);
	assert_int_equal(jc__io_read_frame(fd, &b, &type, NULL, 5000), 0);
	if (type == JC_MSG_ERROR) {
		assert_int_equal(jc__decode_error(b.data, b.len, &code, &text), 0);
	} else {
		struct jc_res res;
		assert_int_equal(type, JC_MSG_RESULT);
		assert_int_equal(jc__decode_res(b.data, b.len, &res), 0);
		code = res.status;
		text = res.message ? strdup(res.message) : NULL;
		jc__res_clear(&res);
	}
	snprintf(msg, msglen, "%s", text ? text : "");
	free(text);
	jc__buf_free(&b);
	close(fd);
	return code;
}

/* The daemon's own checks, on requests the client library would have
 * mended: a relative directory, a -I not declared as an include dir. */
static void test_bad_include_requests(void **state)
{
	struct jtl_daemon *d = *state;
	char msg[1024];
	jc_request *r = jct_request_src("k.cu", kernel, "sm_90");
	struct jc_req *q = &((struct jc_request *)r)->req;
	assert_int_equal(jc__strv_push(&q->options, "-Iinc"), 0);
	assert_int_equal(jc__strv_push(&q->include_dirs, "inc"), 0);
	assert_int_equal(raw_compile(d, q, msg, sizeof(msg)), JC_EINVAL);
	assert_non_null(strstr(msg, "not absolute"));
	jc_request_free(r);
	r = jct_request_src("k.cu", kernel, "sm_90");
	q = &((struct jc_request *)r)->req;
	assert_int_equal(jc__strv_push(&q->options, "-I/usr/include"), 0); /* not declared */
	assert_int_equal(raw_compile(d, q, msg, sizeof(msg)), JC_EINVAL);
	assert_non_null(strstr(msg, "declare each -I"));
	jc_request_free(r);
	assert_int_equal(jct_stat(d, "bad_requests"), 2);
	/* Through the library, a -I option without its directory. */
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	r = jct_request_src("k.cu", kernel, "sm_90");
	assert_int_equal(jc_request_add_option(r, "--include-path"), 0);
	assert_int_equal(jc_compile(c, r, &res), JC_EINVAL);
	assert_null(res);
	assert_non_null(strstr(jc_client_errmsg(c), "needs a directory"));
	jc_request_free(r);
	jc_client_close(c);
}

/*
 * An NVRTC option list as it is: "-I" "DIR", "-IDIR" and "--include-path=DIR"
 * with relative directories (taken against the working directory), and no
 * jc_request_add_include_dir. The key is the one of the absolute, declared
 * form; the old call alone (no option) gives the same key too; giving both
 * (the old way) does not declare a directory twice.
 */
static void test_nvrtc_shaped_include_options(void **state)
{
	struct jtl_daemon *d = *state;
	static const char *const dirs[] = {"inc", "inc2", "inc3", NULL};
	char cwd[4096];
	jct_put(d->dir, "inc/a.h", "#include \"b.h\"\n");
	jct_put(d->dir, "inc2/b.h", "#include \"c.h\"\n");
	jct_put(d->dir, "inc3/c.h", "#define VALUE 8300\n");
	jct_settle();
	jc_request *decl = jct_request_ptx_dirs(d, kernel, dirs);
	jc_result *a = jct_expect_ptx(d, decl, JC_MISS, "8300");
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(d->dir), 0);
	jc_request *r = jct_request_src("k.cu", kernel, "compute_90");
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	assert_int_equal(jc_request_add_option(r, "-I"), 0);
	assert_int_equal(jc_request_add_option(r, "inc"), 0);
	assert_int_equal(jc_request_add_option(r, "-I./inc2/"), 0);
	assert_int_equal(jc_request_add_option(r, "--include-path=inc3"), 0);
	jc_result *b = jct_expect_ptx(d, r, JC_HIT, "8300");
	assert_string_equal(jc_result_key(a), jc_result_key(b));
	jc_request *alias = jct_request_src("k.cu", kernel, "compute_90");
	assert_int_equal(jc_request_set_output(alias, JC_PTX), 0);
	for (size_t i = 0; dirs[i]; i++)
		assert_int_equal(jc_request_add_include_dir(alias, dirs[i]), 0);
	jc_result *c = jct_expect_ptx(d, alias, JC_HIT, "8300");
	assert_string_equal(jc_result_key(a), jc_result_key(c));
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(jct_stat(d, "bad_requests"), 0);
	jc_result_free(a);
	jc_result_free(b);
	jc_result_free(c);
	jc_request_free(decl);
	jc_request_free(r);
	jc_request_free(alias);
}

/* -I inside the toolkit's include tree: covered by its identity, no stat. */
static void test_toolkit_tree_is_covered(void **state)
{
	struct jtl_daemon *d = *state;
	char *out = NULL, inc[4200];
	const char *args[] = {"version", "--json", NULL};
	assert_int_equal(jct_ctl(d, &out, NULL, args), 0);
	const char *p = strstr(out, "\"toolkit_include\": \"");
	if (!p || p[20] == '"') {
		free(out);
		skip(); /* no toolkit include tree next to libnvrtc */
	}
	snprintf(inc, sizeof(inc), "%.*s", (int)(strchr(p + 20, '"') - (p + 20)), p + 20);
	free(out);
	jc_request *r =
	    jct_request_src("k.cu",
			    "#include <cuda/std/cstdint>\n"
			    "extern \"C\" __global__ void k(int *x) { x[0] = INT8_MAX; }\n",
			    "compute_90");
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	char cccl[4300];
	snprintf(cccl, sizeof(cccl), "%s/cccl", inc);
	jct_request_include(r, cccl);
	assert_int_equal(jc_request_add_option(r, "-std=c++17"), 0);
	jc_result_free(jct_expect_ptx(d, r, JC_MISS, "127"));
	jc_result_free(jct_expect_ptx(d, r, JC_HIT, "127"));
	assert_int_equal(jct_stat(d, "include_stats"), 0);
	jc_request_free(r);
}

/*
 * NVRTC looks for a quoted include in the directory of the program name,
 * relative to its working directory; the daemon's working directory (here
 * the test's, which it inherits) must play no part, since no key covers it.
 */
static void test_working_directory_is_not_searched(void **state)
{
	struct jtl_daemon *d = *state;
	static const char probe[] = "jc_cwd_probe.h";
	jct_write_file(probe, "#define VALUE 1\n", 16);
	jc_request *r =
	    jct_request_src("k.cu",
			    "#include \"jc_cwd_probe.h\"\n"
			    "extern \"C\" __global__ void k(int *x) { x[0] = VALUE; }\n",
			    "sm_90");
	jc_result *res = jct_compile(d, r, JC_ECOMPILE);
	remove(probe);
	assert_non_null(strstr(jc_result_log(res), "jc_cwd_probe.h"));
	jc_result_free(res);
	jc_request_free(r);
}

/*
 * A lookup on an unchanged -I tree of the CCCL size. A copy of the toolkit's
 * cccl directory is not covered by the toolkit identity (cub reaches thrust,
 * whose computed includes make the scan take the whole tree); the daemon
 * watches it (watch.h), so a hit makes no stat call at all. (Speed: the
 * bench, beside the toolkit tree.)
 */
static void test_cccl_sized_tree(void **state)
{
	struct jtl_daemon *d = *state;
	char cccl[300], copy[400], opt[420];
	snprintf(cccl, sizeof(cccl), "%s/include/cccl",
		 getenv("CUDA_PATH") && *getenv("CUDA_PATH") ? getenv("CUDA_PATH")
							     : "/usr/local/cuda");
	if (access(cccl, R_OK) != 0)
		skip();
	snprintf(copy, sizeof(copy), "%s/cccl-copy", d->dir);
	assert_int_equal(jct_sh("cp -r '%s' '%s'", cccl, copy), 0);
	jct_settle();
	static const char *const exprs[] = {"sort_and_sum<128, 8>", NULL};
	jc_request *r = jct_request("cub_sort.cu", "sm_90", exprs);
	snprintf(opt, sizeof(opt), "-I%s", copy);
	assert_int_equal(jc_request_add_option(r, "-std=c++17"), 0);
	assert_int_equal(jc_request_add_option(r, opt), 0);
	assert_int_equal(jc_request_add_include_dir(r, copy), 0);
	jc_result *res = jct_compile(d, r, 0);
	assert_int_equal(jc_result_cache_status(res), JC_MISS);
	uint64_t miss_ms = jc_result_time_ns(res, JC_TIME_TOTAL) / 1000000;
	jc_result_free(res);
	int64_t stats0 = jct_stat(d, "include_stats");
	enum { N = 21 };
	uint64_t server[N], total[N];
	for (int i = 0; i < N; i++) {
		res = jct_compile(d, r, 0);
		assert_int_equal(jc_result_cache_status(res), JC_HIT);
		server[i] = jc_result_time_ns(res, JC_TIME_SERVER);
		total[i] = jc_result_time_ns(res, JC_TIME_TOTAL);
		jc_result_free(res);
	}
	/* At most one stat walk (the first hit, when the compile's key was learnt
	 * from what NVRTC read rather than the scan's); the rest are watched. */
	int64_t walks = jct_stat(d, "include_tree_stat_walks");
	assert_true(walks <= 1);
	assert_int_equal(jct_stat(d, "include_tree_watch_hits"), N - walks);
	assert_int_equal(jct_stat(d, "include_scans"), 1);
	assert_int_equal(jct_stat(d, "include_watch_fallbacks"), 0);
	int64_t stat_calls = jct_stat(d, "include_stats") - stats0,
		watches = jct_stat(d, "include_watches");
	assert_true(watches > 1000); /* the files, their directories, the way to them */
	assert_true(stat_calls < 4 * watches * walks + 1);
	jtl_sort_u64(server, N);
	jtl_sort_u64(total, N);
	print_message("cccl copy: miss %llu ms; %d hits, %lld by a stat walk (%lld stat calls); "
		      "%lld watches, %lld bytes; daemon median %.3f ms (min %.3f), client median "
		      "%.3f ms\n",
		      (unsigned long long)miss_ms, N, (long long)walks, (long long)stat_calls,
		      (long long)watches, (long long)jct_stat(d, "include_watch_bytes"),
		      server[N / 2] / 1e6, server[0] / 1e6, total[N / 2] / 1e6);
	jc_request_free(r);
}

/*
 * The key holds the tree relative to its directory: the same bytes under
 * another directory share the entry; other bytes under the same layout do
 * not (the manifests and memos are filed per directory: key.h).
 */
static void test_same_bytes_elsewhere_share_key(void **state)
{
	struct jtl_daemon *d = *state;
	jct_put(d->dir, "u1/inc/a.h", "#define VALUE 1111\n");
	jct_put(d->dir, "u2/inc/a.h", "#define VALUE 2222\n");
	jct_put(d->dir, "u3/inc/a.h", "#define VALUE 1111\n");
	jct_settle();
	jc_request *r1 = jct_request_ptx_dirs(d, kernel, (const char *const[]){"u1/inc", NULL});
	jc_request *r2 = jct_request_ptx_dirs(d, kernel, (const char *const[]){"u2/inc", NULL});
	jc_request *r3 = jct_request_ptx_dirs(d, kernel, (const char *const[]){"u3/inc", NULL});
	jc_result *a = jct_expect_ptx(d, r1, JC_MISS, "1111");
	jc_result_free(jct_expect_ptx(d, r2, JC_MISS, "2222"));
	jc_result_free(jct_expect_ptx(d, r1, JC_HIT, "1111"));
	jc_result *c = jct_expect_ptx(d, r3, JC_HIT, "1111");
	assert_string_equal(jc_result_key(a), jc_result_key(c));
	jc_result_free(jct_expect_ptx(d, r2, JC_HIT, "2222"));
	jc_result_free(a);
	jc_result_free(c);
	jc_request_free(r1);
	jc_request_free(r2);
	jc_request_free(r3);
}

/*
 * A header that uses __FILE__ in its own text (here folded into a number,
 * so that no name is left in the PTX to find) makes the output depend on
 * the path the compiler found it under: its entry is keyed by that path
 * (README, "The key"), so the same bytes elsewhere are a miss with their
 * own value, not a hit on the first directory's.
 */
static void test_file_macro_header_keys_its_path(void **state)
{
	struct jtl_daemon *d = *state;
	static const char header[] = "static constexpr int a_len = 7000 + (int)sizeof(__FILE__);\n"
				     "#define VALUE a_len\n";
	jct_put(d->dir, "u1/inc/a.h", header);
	jct_put(d->dir, "u2222/inc/a.h", header);
	jct_settle();
	char want1[32], want2[32];
	/* sizeof a string literal counts its NUL */
	snprintf(want1, sizeof(want1), "%zu;", 7000 + strlen(d->dir) + strlen("/u1/inc/a.h") + 1);
	snprintf(want2, sizeof(want2), "%zu;",
		 7000 + strlen(d->dir) + strlen("/u2222/inc/a.h") + 1);
	jc_request *r1 = jct_request_ptx_dirs(d, kernel, (const char *const[]){"u1/inc", NULL});
	jc_request *r2 = jct_request_ptx_dirs(d, kernel, (const char *const[]){"u2222/inc", NULL});
	jc_result *a = jct_expect_ptx(d, r1, JC_MISS, want1);
	jc_result *b = jct_expect_ptx(d, r2, JC_MISS, want2);
	assert_string_not_equal(jc_result_key(a), jc_result_key(b));
	jc_result_free(jct_expect_ptx(d, r1, JC_HIT, want1));
	jc_result_free(jct_expect_ptx(d, r2, JC_HIT, want2));
	jc_result_free(a);
	jc_result_free(b);
	jc_request_free(r1);
	jc_request_free(r2);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, jct_setup_started, jct_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_nested_change_touch_revert),
	    T(test_shadowing_header),
	    T(test_computed_include_falls_back),
	    T(test_fresh_header_is_stored_after_rehash),
	    T(test_bad_include_requests),
	    T(test_nvrtc_shaped_include_options),
	    T(test_toolkit_tree_is_covered),
	    T(test_working_directory_is_not_searched),
	    T(test_cccl_sized_tree),
	    T(test_same_bytes_elsewhere_share_key),
	    T(test_file_macro_header_keys_its_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
