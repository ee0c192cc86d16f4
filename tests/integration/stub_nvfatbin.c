/* SPDX-License-Identifier: MIT */
/*
 * A stand-in libnvfatbin for test_fatbin on toolkits without nvFatbin
 * (CUDA < 12.4, or this one): the calls jitcache-worker makes
 * (daemon/fatbin_asm.c), with nvFatbin.h's signatures, building the
 * container with tests/fatbin_write.c. It refuses what the real library
 * would: an option other than "-64", "-32", "-compress=true|false", an arch that is
 * not a number (optionally with a/f), a cubin that is not an ELF, PTX
 * without ".version". The daemon uses it through the test-only override
 * JITCACHE_TEST_FATBIN=<path of this library>.
 */
#include <stdlib.h>
#include <string.h>

#include "artifact_seeds.h"

#define STUB_API __attribute__((visibility("default")))

enum { OK = 0, ERR_INTERNAL = 1, ERR_OPTION = 5, ERR_ARCH = 6, ERR_INPUT = 9 };

struct handle {
	struct jct_fb_image im[16];
	struct jct_blob bytes[16];
	size_t n;
	struct jct_blob out;
};

STUB_API int nvFatbinVersion(unsigned *major, unsigned *minor)
{
	*major = 13, *minor = 0;
	return OK;
}

STUB_API const char *nvFatbinGetErrorString(int r)
{
	return r == ERR_OPTION	? "NVFATBIN_ERROR_UNRECOGNIZED_OPTION (stand-in)"
	       : r == ERR_ARCH	? "NVFATBIN_ERROR_INVALID_ARCH (stand-in)"
	       : r == ERR_INPUT ? "NVFATBIN_ERROR_INVALID_INPUT (stand-in)"
				: "stand-in error";
}

STUB_API int nvFatbinCreate(struct handle **h, const char **options, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(options[i], "-64") != 0 && strcmp(options[i], "-32") != 0 &&
		    strcmp(options[i], "-compress=false") != 0 &&
		    strcmp(options[i], "-compress=true") != 0)
			return ERR_OPTION;
	return (*h = calloc(1, sizeof(**h))) ? OK : ERR_INTERNAL;
}

static int add(struct handle *h, unsigned kind, const void *code, size_t size, const char *arch)
{
	char *end;
	unsigned long a = strtoul(arch, &end, 10);
	if (h->n == 16 || !a || (*end && ((*end != 'a' && *end != 'f') || end[1])))
		return ERR_ARCH;
	struct jct_blob *b = &h->bytes[h->n];
	if (!(b->data = malloc(size)))
		return ERR_INTERNAL;
	memcpy(b->data, code, size);
	b->size = size;
	h->im[h->n++] = (struct jct_fb_image){kind, (unsigned)a, b, 0};
	return OK;
}

STUB_API int nvFatbinAddCubin(struct handle *h, const void *code, size_t size, const char *arch,
			      const char *id)
{
	(void)id;
	return size < 4 || memcmp(code, "\177ELF", 4) ? ERR_INPUT : add(h, 2, code, size, arch);
}

STUB_API int nvFatbinAddPTX(struct handle *h, const char *code, size_t size, const char *arch,
			    const char *id, const char *options)
{
	(void)id, (void)options;
	return !memmem(code, size, ".version", 8) ? ERR_INPUT : add(h, 1, code, size, arch);
}

STUB_API int nvFatbinSize(struct handle *h, size_t *size)
{
	if (!h->out.data && jct_seed_fatbin(h->im, h->n, &h->out) != 0)
		return ERR_INTERNAL;
	*size = h->out.size;
	return OK;
}

STUB_API int nvFatbinGet(struct handle *h, void *buf)
{
	if (!h->out.data)
		return ERR_INTERNAL;
	memcpy(buf, h->out.data, h->out.size);
	return OK;
}

STUB_API int nvFatbinDestroy(struct handle **h)
{
	for (size_t i = 0; i < (*h)->n; i++)
		free((*h)->bytes[i].data);
	free((*h)->out.data);
	free(*h);
	*h = NULL;
	return OK;
}
