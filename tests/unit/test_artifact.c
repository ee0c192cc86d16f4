/* SPDX-License-Identifier: MIT */
/*
 * The artifact parser (common/artifact.c) on NVRTC's real cubin, PTX and
 * LTO-IR, on fatbins built from them (plain and zstd-compressed images), and
 * on hostile input: every prefix of each, single-byte corruptions of their
 * headers, garbage, other ELF machines, sizes that point outside the data,
 * and a compressed image that claims to decode to more than the limit.
 * Every one gives a description or a clear error; none reads outside its
 * buffer (run under scripts/sanitize.sh to have ASan prove the last part).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "artifact_seeds.h"
#include "common/artifact.h"
#include "jitcache/jitcache.h"

static struct jct_blob cubin, ptx, ltoir, fat, fatz;

static int setup(void **state)
{
	(void)state;
	if (jct_seed_nvrtc("sm_90", 0, &cubin) || jct_seed_nvrtc("compute_90", 0, &ptx) ||
	    jct_seed_nvrtc("compute_90", 1, &ltoir))
		return -1;
	struct jct_fb_image plain[] = {{2, 90, &cubin, 0}, {1, 90, &ptx, 0}, {8, 90, &ltoir, 0}};
	struct jct_fb_image packed[] = {{2, 90, &cubin, 1}, {1, 90, &ptx, 1}};
	return jct_seed_fatbin(plain, 3, &fat) || jct_seed_fatbin(packed, 2, &fatz);
}

static int teardown(void **state)
{
	(void)state;
	free(cubin.data), free(ptx.data), free(ltoir.data), free(fat.data), free(fatz.data);
	return 0;
}

static int parse(const struct jct_blob *b, struct jc_artifact *a, char *err, size_t len)
{
	return jc__artifact_parse(b->data, b->size, a, err, len);
}

static const struct jc_art_kernel *kernel(const struct jc_art_image *im, const char *name)
{
	for (size_t i = 0; i < im->n_kernels; i++)
		if (strcmp(im->kernels[i].name, name) == 0)
			return &im->kernels[i];
	fail_msg("no kernel %s", name);
	return NULL;
}

static void check_cubin_image(const struct jc_art_image *im)
{
	assert_int_equal(im->kind, JC_ART_CUBIN);
	assert_string_equal(im->target, "sm_90");
	assert_non_null(strstr(im->producer, "compilation tools"));
	assert_int_equal(im->n_kernels, 2);
	const struct jc_art_kernel *s = kernel(im, "shared_k"), *k = kernel(im, "stack_k");
	assert_true(s->registers > 0 && s->registers < 256);
	assert_true(s->shared_bytes >= 128 * 4); /* + what sm_90 reserves */
	assert_int_equal(s->stack_bytes, 0);
	assert_int_equal(s->max_threads[0], 0);
	assert_true(k->registers > 0);
	assert_int_equal(k->shared_bytes, 0);
	assert_int_equal(k->stack_bytes, 40 * 8); /* the local array */
	assert_int_equal(k->max_threads[0], 64);
	assert_int_equal(k->max_threads[1], 1);
	assert_int_equal(k->max_threads[2], 1);
}

static void check_ptx_image(const struct jc_art_image *im)
{
	assert_int_equal(im->kind, JC_ART_PTX);
	assert_string_equal(im->target, "compute_90");
	assert_true(strncmp(im->ptx_isa, "9.", 2) == 0); /* NVRTC 13.0: PTX ISA 9.0 */
	assert_int_equal(im->n_kernels, 2);
	kernel(im, "shared_k");
	kernel(im, "stack_k");
	assert_int_equal(kernel(im, "stack_k")->registers, -1);
}

static void test_single_images(void **state)
{
	(void)state;
	struct jc_artifact a;
	char err[256];
	assert_int_equal(parse(&cubin, &a, err, sizeof(err)), 0);
	assert_int_equal(a.kind, JC_ART_CUBIN);
	assert_int_equal(a.n_images, 1);
	check_cubin_image(&a.images[0]);
	jc__artifact_clear(&a);
	assert_int_equal(parse(&ptx, &a, err, sizeof(err)), 0);
	check_ptx_image(&a.images[0]);
	jc__artifact_clear(&a);
	assert_int_equal(parse(&ltoir, &a, err, sizeof(err)), 0);
	assert_int_equal(a.kind, JC_ART_LTOIR);
	assert_string_equal(a.images[0].target, "lto_90");
	jc__artifact_clear(&a);
}

static void test_fatbins(void **state)
{
	(void)state;
	struct jc_artifact a;
	char err[256];
	assert_int_equal(parse(&fat, &a, err, sizeof(err)), 0);
	assert_int_equal(a.kind, JC_ART_FATBIN);
	assert_int_equal(a.n_images, 3);
	check_cubin_image(&a.images[0]);
	assert_memory_equal(fat.data + a.images[0].offset, cubin.data, cubin.size);
	check_ptx_image(&a.images[1]);
	assert_int_equal(a.images[2].kind, JC_ART_LTOIR);
	assert_string_equal(a.images[2].target, "lto_90");
	assert_string_equal(a.images[0].compression, "");
	jc__artifact_clear(&a);

	assert_int_equal(parse(&fatz, &a, err, sizeof(err)), 0);
	assert_int_equal(a.n_images, 2);
	check_cubin_image(&a.images[0]);
	check_ptx_image(&a.images[1]);
	assert_string_equal(a.images[1].compression, "zstd");
	assert_int_equal(a.images[1].size, ptx.size);
	assert_true(a.images[1].stored_size < ptx.size);
	jc__artifact_clear(&a);
}

/* Every prefix of b either parses or fails with a message. */
static void prefixes(const struct jct_blob *b, size_t *ok, size_t *bad)
{
	for (size_t n = 0; n <= b->size; n++) {
		struct jc_artifact a;
		char err[256] = "";
		int rc = jc__artifact_parse(b->data, n, &a, err, sizeof(err));
		if (rc == 0) {
			++*ok;
		} else {
			assert_true(rc == JC_EINVAL || rc == JC_ECORRUPT);
			assert_true(err[0] != '\0');
			++*bad;
		}
		jc__artifact_clear(&a);
	}
}

static void test_truncated(void **state)
{
	(void)state;
	const struct jct_blob *all[] = {&cubin, &ptx, &ltoir, &fat, &fatz};
	for (size_t i = 0; i < 5; i++) {
		size_t ok = 0, bad = 0;
		prefixes(all[i], &ok, &bad);
		assert_true(bad > 0); /* the empty prefix at least */
	}
	/* A cubin cut short (its program headers come last) is refused, not misread. */
	struct jc_artifact a;
	char err[256];
	assert_int_equal(jc__artifact_parse(cubin.data, cubin.size - 1, &a, err, sizeof(err)),
			 JC_ECORRUPT);
	assert_non_null(strstr(err, "program headers"));
	jc__artifact_clear(&a);
	assert_int_equal(jc__artifact_parse(fat.data, fat.size - 1, &a, err, sizeof(err)),
			 JC_ECORRUPT);
	jc__artifact_clear(&a);
}

/* Every byte of the first 256 of each input set to 0x00, 0xff and 0x80. */
static void test_corrupted_bytes(void **state)
{
	(void)state;
	const struct jct_blob *all[] = {&cubin, &fat, &fatz};
	static const uint8_t vals[] = {0x00, 0xff, 0x80, 0x7f};
	for (size_t i = 0; i < 3; i++) {
		uint8_t *copy = malloc(all[i]->size);
		assert_non_null(copy);
		for (size_t off = 0; off < 256 && off < all[i]->size; off++)
			for (size_t v = 0; v < sizeof(vals); v++) {
				memcpy(copy, all[i]->data, all[i]->size);
				copy[off] = vals[v];
				struct jc_artifact a;
				char err[256];
				int rc =
				    jc__artifact_parse(copy, all[i]->size, &a, err, sizeof(err));
				assert_true(rc == 0 || rc == JC_EINVAL || rc == JC_ECORRUPT ||
					    rc == JC_ETOOBIG);
				jc__artifact_clear(&a);
			}
		free(copy);
	}
}

static void test_garbage(void **state)
{
	(void)state;
	struct jc_artifact a;
	char err[256];
	static const uint8_t text[] = "int main(void) { return 0; }\n";
	assert_int_equal(jc__artifact_parse(text, sizeof(text) - 1, &a, err, sizeof(err)),
			 JC_EINVAL);
	assert_non_null(strstr(err, "not a cubin, PTX, LTO-IR or fatbin"));
	jc__artifact_clear(&a);
	assert_int_equal(jc__artifact_parse(NULL, 0, &a, err, sizeof(err)), JC_EINVAL);
	jc__artifact_clear(&a);
	/* The message shows the bytes there are, no more. */
	assert_int_equal(jc__artifact_parse((const uint8_t *)"", 0, &a, err, sizeof(err)),
			 JC_EINVAL);
	assert_non_null(strstr(err, "(0 bytes)"));
	jc__artifact_clear(&a);
	assert_int_equal(jc__artifact_parse((const uint8_t *)"\x01\x02", 2, &a, err, sizeof(err)),
			 JC_EINVAL);
	assert_non_null(strstr(err, "(2 bytes: 01 02)"));
	jc__artifact_clear(&a);
	/* An x86-64 ELF header. */
	uint8_t elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
	elf[18] = 62;
	assert_int_equal(jc__artifact_parse(elf, sizeof(elf), &a, err, sizeof(err)), JC_EINVAL);
	assert_non_null(strstr(err, "machine 62"));
	jc__artifact_clear(&a);
	/* Random bytes. */
	uint8_t rnd[4096];
	srand(7);
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < sizeof(rnd); i++)
			rnd[i] = (uint8_t)rand();
		int rc = jc__artifact_parse(rnd, sizeof(rnd), &a, err, sizeof(err));
		assert_int_not_equal(rc, 0);
		jc__artifact_clear(&a);
	}
}

static void test_hostile_fatbins(void **state)
{
	(void)state;
	struct jc_artifact a;
	char err[256];
	uint8_t *copy = malloc(fatz.size);
	assert_non_null(copy);
	/* Entry header size 0: would loop forever if trusted. */
	memcpy(copy, fatz.data, fatz.size);
	memset(copy + 16 + 4, 0, 4);
	assert_int_equal(jc__artifact_parse(copy, fatz.size, &a, err, sizeof(err)), JC_ECORRUPT);
	jc__artifact_clear(&a);
	/* Payload size past the end. */
	memcpy(copy, fatz.data, fatz.size);
	memset(copy + 16 + 8, 0xff, 8);
	assert_int_equal(jc__artifact_parse(copy, fatz.size, &a, err, sizeof(err)), JC_ECORRUPT);
	jc__artifact_clear(&a);
	/* The second (zstd) image claims to decode to 1 TiB. */
	assert_int_equal(parse(&fatz, &a, err, sizeof(err)), 0);
	size_t second = (size_t)a.images[0].offset + ((a.images[0].stored_size + 7) & ~7ull);
	jc__artifact_clear(&a);
	memcpy(copy, fatz.data, fatz.size);
	copy[second + 0x38 + 5] = 1;
	assert_int_equal(jc__artifact_parse(copy, fatz.size, &a, err, sizeof(err)), JC_ETOOBIG);
	jc__artifact_clear(&a);
	/* ... or to a size other than the frame's. */
	memcpy(copy, fatz.data, fatz.size);
	copy[second + 0x38] ^= 1;
	assert_int_equal(jc__artifact_parse(copy, fatz.size, &a, err, sizeof(err)), JC_ECORRUPT);
	assert_non_null(strstr(err, "decode"));
	jc__artifact_clear(&a);
	free(copy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_single_images), cmocka_unit_test(test_fatbins),
	    cmocka_unit_test(test_truncated),	  cmocka_unit_test(test_corrupted_bytes),
	    cmocka_unit_test(test_garbage),	  cmocka_unit_test(test_hostile_fatbins),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
