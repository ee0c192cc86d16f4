/* SPDX-License-Identifier: MIT */
/*
 * Property test of dependency truth, against a real daemon and real NVRTC:
 * random sources built from include forms (literal, computed relative and
 * absolute, spliced, digraph, nested, conditional, __has_include) over a
 * small random tree of two -I directories whose headers shadow each other;
 * then random changes to the tree (a header rewritten, removed, created
 * earlier on the search path, its nested include changed). After every
 * change the daemon's answer must be what NVRTC itself says for the tree as
 * it is now (the same compile in this process): never a hit with stale
 * bytes. A change to a file the compile read changes the key or leaves the
 * result unstored; that is what makes this hold.
 *
 * Seeded: JC_PROPERTY_SEED (else the time), printed; JC_PROPERTY_ROUNDS
 * sources (meson sets it: more with -Dlong_tests=true), 8 changes each.
 */
#include <nvrtc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

#define N_HDR	6
#define CHANGES 8

static unsigned seed;
static unsigned rng;

static unsigned rnd(unsigned n)
{
	rng = rng * 1103515245u + 12345u;
	return (rng >> 8) % n;
}

struct tree {
	char dir[2][300];     /* the two -I directories, in search order */
	int value[2][N_HDR];  /* 0: the file does not exist */
	int nested[2][N_HDR]; /* -1, or the header it includes (always a later one) */
	int nested_form[2][N_HDR];
};

/* One include of header h in form f (a line or a few), appended to out. */
static void include_line(const struct tree *t, int h, int f, int uniq, char *out, size_t len)
{
	size_t n = strlen(out);
	char name[32];
	snprintf(name, sizeof(name), "h%d.h", h);
	switch (f) {
	case 0:
		snprintf(out + n, len - n, "#include \"%s\"\n", name);
		break;
	case 1:
		snprintf(out + n, len - n, "#include <%s>\n", name);
		break;
	case 2: /* computed, relative: the scan takes the whole directories */
		snprintf(out + n, len - n, "#define JCP%d \"%s\"\n#include JCP%d\n", uniq, name,
			 uniq);
		break;
	case 3: /* computed, absolute, into the second directory */
		snprintf(out + n, len - n,
			 "#if __has_include(\"%s/%s\")\n#define JCA%d \"%s/%s\"\n"
			 "#include JCA%d\n#endif\n",
			 t->dir[1], name, uniq, t->dir[1], name, uniq);
		break;
	case 4:
		snprintf(out + n, len - n, "#inc\\\nlude \"%s\"\n", name);
		break;
	case 5:
		snprintf(out + n, len - n, "%%:include \"%s\"\n", name);
		break;
	case 6: /* conditional: only one branch is taken */
		snprintf(out + n, len - n,
			 "#if %d\n#include \"%s\"\n#else\n#include \"h%d.h\"\n#endif\n", uniq & 1,
			 name, (h + 1) % N_HDR);
		break;
	default: /* __has_include */
		snprintf(out + n, len - n, "#if __has_include(\"%s\")\n#include \"%s\"\n#endif\n",
			 name, name);
		break;
	}
}

#define N_FORMS 8

static void write_header(const struct tree *t, int d, int h)
{
	char path[400], text[1024] = "";
	snprintf(path, sizeof(path), "%s/h%d.h", t->dir[d], h);
	if (!t->value[d][h]) {
		unlink(path);
		return;
	}
	snprintf(text, sizeof(text), "#pragma once\n#ifndef V_%d\n#define V_%d %d\n#endif\n", h, h,
		 t->value[d][h]);
	if (t->nested[d][h] >= 0)
		include_line(t, t->nested[d][h], t->nested_form[d][h], 100 + 10 * d + h, text,
			     sizeof(text));
	jct_write_file(path, text, strlen(text));
}

/* A source that includes some headers in random forms and sums every V_i it sees. */
static void make_source(const struct tree *t, char *src, size_t len)
{
	src[0] = '\0';
	int n = 1 + (int)rnd(4);
	for (int i = 0; i < n; i++)
		include_line(t, (int)rnd(N_HDR), (int)rnd(N_FORMS), i, src, len);
	size_t o = strlen(src);
	o += (size_t)snprintf(src + o, len - o,
			      "extern \"C\" __global__ void k(int *x) {\n int s = 1;\n");
	for (int h = 0; h < N_HDR; h++)
		o += (size_t)snprintf(src + o, len - o,
				      "#ifdef V_%d\n s = s * 31 + V_%d;\n#endif\n", h, h);
	snprintf(src + o, len - o, " x[0] = s;\n}\n");
}

/* NVRTC in this process, in an empty directory: status (0 or not) and PTX. */
static int truth(const char *src, const struct tree *t, char **ptx, size_t *n)
{
	nvrtcProgram p;
	char o0[320], o1[320];
	snprintf(o0, sizeof(o0), "-I%s", t->dir[0]);
	snprintf(o1, sizeof(o1), "-I%s", t->dir[1]);
	const char *opts[] = {o0, o1, "--gpu-architecture=compute_90"};
	assert_int_equal(nvrtcCreateProgram(&p, src, "k.cu", 0, NULL, NULL), NVRTC_SUCCESS);
	nvrtcResult r = nvrtcCompileProgram(p, 3, opts);
	*ptx = NULL;
	*n = 0;
	if (r == NVRTC_SUCCESS) {
		assert_int_equal(nvrtcGetPTXSize(p, n), NVRTC_SUCCESS);
		*ptx = malloc(*n);
		assert_int_equal(nvrtcGetPTX(p, *ptx), NVRTC_SUCCESS);
	}
	nvrtcDestroyProgram(&p);
	return r == NVRTC_SUCCESS ? 0 : -1;
}

struct tally {
	int hits, misses, failures;
};

/* The daemon's answer for src must be NVRTC's for the tree now. */
static void check(const struct jtl_daemon *d, const struct tree *t, const char *src, int round,
		  struct tally *tl)
{
	jc_request *r = jct_request_src("k.cu", src, "compute_90");
	assert_int_equal(jc_request_set_output(r, JC_PTX), 0);
	for (int i = 0; i < 2; i++)
		jct_request_include(r, t->dir[i]);
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	int rc = jc_compile(c, r, &res);
	char *want;
	size_t want_n;
	int want_rc = truth(src, t, &want, &want_n);
	if ((rc == 0) != (want_rc == 0))
		fail_msg("seed %u round %d: daemon rc %d, NVRTC %s\nsource:\n%s\nlog:\n%s", seed,
			 round, rc, want_rc ? "fails" : "compiles", src,
			 res ? jc_result_log(res) : jc_client_errmsg(c));
	if (rc == 0) {
		size_t n;
		const char *ptx = jc_result_data(res, &n);
		if (n != want_n || memcmp(ptx, want, n) != 0)
			fail_msg("seed %u round %d: %s with other bytes than NVRTC gives "
				 "now\nsource:\n%s",
				 seed, round,
				 jc_result_cache_status(res) == JC_HIT ? "a hit" : "a miss", src);
		if (jc_result_cache_status(res) == JC_HIT)
			tl->hits++;
		else
			tl->misses++;
	} else {
		tl->failures++;
	}
	free(want);
	jc_result_free(res);
	jc_client_close(c);
	jc_request_free(r);
}

static void change(struct tree *t)
{
	int d = (int)rnd(2), h = (int)rnd(N_HDR);
	switch (rnd(4)) {
	case 0: /* remove (or create, if absent) */
		t->value[d][h] = t->value[d][h] ? 0 : 1 + (int)rnd(100000);
		break;
	case 1: /* its nested include */
		t->nested[d][h] = h + 1 < N_HDR && rnd(2) ? h + 1 + (int)rnd(N_HDR - h - 1) : -1;
		t->nested_form[d][h] = (int)rnd(N_FORMS);
		if (!t->value[d][h])
			t->value[d][h] = 1 + (int)rnd(100000);
		break;
	default: /* its bytes */
		t->value[d][h] = 1 + (int)rnd(100000);
		break;
	}
	write_header(t, d, h);
}

static void test_random_trees(void **state)
{
	struct jtl_daemon *d = *state;
	const char *s = getenv("JC_PROPERTY_ROUNDS");
	int sources = s && atoi(s) > 0 ? atoi(s) : 6;
	struct tree t;
	struct tally tl = {0};
	char src[8192], empty[300];
	snprintf(empty, sizeof(empty), "%s/cwd", d->dir);
	assert_int_equal(jct_sh("mkdir -p '%s'", empty), 0);
	assert_int_equal(chdir(empty), 0); /* NVRTC here looks in its working directory too */
	for (int i = 0; i < 2; i++) {
		snprintf(t.dir[i], sizeof(t.dir[i]), "%s/tree/%c", d->dir, 'a' + i);
		assert_int_equal(jct_sh("mkdir -p '%s'", t.dir[i]), 0);
	}
	int round = 0;
	for (int k = 0; k < sources; k++) {
		for (int dd = 0; dd < 2; dd++)
			for (int h = 0; h < N_HDR; h++) {
				t.value[dd][h] = rnd(3) ? 1 + (int)rnd(100000) : 0;
				t.nested[dd][h] =
				    h + 1 < N_HDR && rnd(2) ? h + 1 + (int)rnd(N_HDR - h - 1) : -1;
				t.nested_form[dd][h] = (int)rnd(N_FORMS);
				write_header(&t, dd, h);
			}
		make_source(&t, src, sizeof(src));
		jct_settle();
		check(d, &t, src, round++, &tl);
		for (int c = 0; c < CHANGES; c++) {
			check(d, &t, src, round++, &tl); /* unchanged: may hit */
			change(&t);
			jct_settle();
			check(d, &t, src, round++, &tl);
		}
	}
	print_message("seed %u: %d sources, %d checks: %d hits, %d misses, %d compile errors; "
		      "learnt %lld, not stored (uncovered) %lld\n",
		      seed, sources, round, tl.hits, tl.misses, tl.failures,
		      (long long)jct_stat(d, "deps_learned"),
		      (long long)jct_stat(d, "deps_mismatch"));
	assert_true(tl.hits > 0); /* the cache does its job too */
}

int main(void)
{
	const char *s = getenv("JC_PROPERTY_SEED");
	seed = s && *s ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL) ^ (unsigned)getpid();
	rng = seed;
	fprintf(stderr, "JC_PROPERTY_SEED=%u\n", seed);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_random_trees, jct_setup_started, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
