/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the artifact parser (common/artifact.c, `jitcachectl
 * inspect`): any bytes give a description or an error, never a read outside
 * the input (the sanitizers' part); a description is consistent: at least
 * one image, within the limits, each of a known kind, a fatbin's stored
 * bytes inside the input, every kernel named.
 *
 * Built two ways (tests/fuzz/meson.build): with clang -fsanitize=fuzzer as a
 * libFuzzer target, and with JC_FUZZ_MAIN by the project's compiler as a
 * driver that writes the seed corpus (--seeds DIR: NVRTC's cubin, PTX and
 * LTO-IR and fatbins of them, tests/artifact_seeds.h), replays files
 * (FILE...) and runs seeded random mutations of the seeds (--mutate N).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/artifact.h"
#include "jitcache/jitcache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_artifact: check failed: %s (line %d)\n", #cond,      \
				__LINE__);                                                         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jc_artifact a;
	char err[256] = "";
	int rc = jc__artifact_parse(data, size, &a, err, sizeof(err));
	if (rc != 0) {
		CHECK(rc == JC_EINVAL || rc == JC_ECORRUPT || rc == JC_ETOOBIG || rc == JC_ENOMEM);
		CHECK(err[0] != '\0' || rc == JC_ENOMEM);
	} else {
		CHECK(a.n_images >= 1 && a.n_images <= JC_ART_MAX_IMAGES);
		CHECK(jc__art_kind_name(a.kind) != NULL);
		for (size_t i = 0; i < a.n_images; i++) {
			const struct jc_art_image *im = &a.images[i];
			CHECK(im->kind >= JC_ART_CUBIN && im->kind <= JC_ART_LTOIR);
			CHECK(im->offset <= size && im->stored_size <= size - im->offset);
			CHECK(im->n_kernels <= JC_ART_MAX_KERNELS);
			CHECK(memchr(im->target, '\0', sizeof(im->target)));
			for (size_t k = 0; k < im->n_kernels; k++)
				CHECK(im->kernels[k].name != NULL);
		}
	}
	jc__artifact_clear(&a);
	return 0;
}

#ifdef JC_FUZZ_MAIN
/* --- the driver without libFuzzer ------------------------------------------ */

#include <errno.h>
#include <sys/stat.h>

#include "artifact_seeds.h"

#define N_SEEDS 5

static int make_seeds(struct jct_blob s[N_SEEDS])
{
	memset(s, 0, N_SEEDS * sizeof(*s));
	if (jct_seed_nvrtc("sm_90", 0, &s[0]) || jct_seed_nvrtc("compute_90", 0, &s[1]) ||
	    jct_seed_nvrtc("compute_90", 1, &s[2]))
		return -1;
	struct jct_fb_image plain[] = {{2, 90, &s[0], 0}, {1, 90, &s[1], 0}, {8, 90, &s[2], 0}};
	struct jct_fb_image packed[] = {{2, 90, &s[0], 1}, {1, 90, &s[1], 1}};
	return jct_seed_fatbin(plain, 3, &s[3]) || jct_seed_fatbin(packed, 2, &s[4]);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

/* One mutation of seed into buf (cap bytes): flips, header words set to
 * edge values, cuts and duplications. Returns the new size. */
static size_t mutate(const struct jct_blob *seed, uint8_t *buf, size_t cap)
{
	size_t n = seed->size < cap ? seed->size : cap;
	memcpy(buf, seed->data, n);
	static const uint64_t edges[] = {0, 1, 0x7f, 0xff, 0xffff, 0xffffffffull, ~0ull, 64, 16, 8};
	for (int m = 0, count = 1 + (int)(next() % 4); m < count; m++) {
		size_t lim = next() % 2 && n > 512 ? 512 : n; /* headers are in front */
		size_t at = (size_t)(next() % (lim ? lim : 1));
		switch (next() % 5) {
		case 0:
			if (n)
				buf[at % n] ^= (uint8_t)(1u << (next() % 8));
			break;
		case 1: {
			uint64_t v = edges[next() % (sizeof(edges) / sizeof(edges[0]))];
			size_t w = (size_t)1 << (next() % 4);
			if (at + w <= n)
				memcpy(buf + at, &v, w);
			break;
		}
		case 2:
			n = at;
			break;
		case 3:
			if (n)
				buf[at % n] = (uint8_t)next();
			break;
		default:
			if (n && n * 2 <= cap) {
				memcpy(buf + n, buf, n);
				n *= 2;
			}
		}
	}
	return n;
}

static uint8_t *read_all(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	uint8_t *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
	if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*size = (size_t)len;
	return buf;
}

int main(int argc, char **argv)
{
	struct jct_blob s[N_SEEDS];
	if (argc == 3 && strcmp(argv[1], "--seeds") == 0) {
		if (make_seeds(s) || (mkdir(argv[2], 0700) != 0 && errno != EEXIST))
			return 1;
		for (int i = 0; i < N_SEEDS; i++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/seed-%d", argv[2], i);
			FILE *f = fopen(path, "wb");
			if (!f || fwrite(s[i].data, 1, s[i].size, f) != s[i].size || fclose(f) != 0)
				return 1;
			free(s[i].data);
		}
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "--mutate") == 0) {
		long rounds = strtol(argv[2], NULL, 10);
		if (make_seeds(s))
			return 1;
		size_t cap = 0;
		for (int i = 0; i < N_SEEDS; i++) {
			LLVMFuzzerTestOneInput(s[i].data, s[i].size);
			cap = s[i].size * 2 > cap ? s[i].size * 2 : cap;
		}
		uint8_t *buf = malloc(cap);
		if (!buf)
			return 1;
		for (long r = 0; r < rounds; r++) {
			size_t n = mutate(&s[r % N_SEEDS], buf, cap);
			LLVMFuzzerTestOneInput(buf, n);
		}
		printf("fuzz_artifact: %ld mutations of %d seeds parsed\n", rounds, N_SEEDS);
		free(buf);
		for (int i = 0; i < N_SEEDS; i++)
			free(s[i].data);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		size_t n;
		uint8_t *d = read_all(argv[i], &n);
		if (!d) {
			fprintf(stderr, "fuzz_artifact: cannot read %s\n", argv[i]);
			return 1;
		}
		LLVMFuzzerTestOneInput(d, n);
		free(d);
	}
	return 0;
}
#endif
