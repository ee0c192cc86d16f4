/* SPDX-License-Identifier: MIT */
/* Parsing of cubins, PTX, LTO-IR and fatbins: see artifact.h for the formats. */
#include "common/artifact.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/util.h"
#include "jitcache/jitcache.h"

#define EM_CUDA		 190
#define STO_CUDA_ENTRY	 0x10
#define SHT_SYMTAB	 2
#define SHT_NOBITS	 8
#define FATBIN_MAGIC	 0xba55ed50u
#define NVVM_MAGIC	 0x7f4e43edu
#define FATBIN_FLAG_LZ4	 0x2000u
#define FATBIN_FLAG_ZSTD 0x8000u

enum { EIATTR_MAX_THREADS = 0x05, EIATTR_FRAME_SIZE = 0x11, EIATTR_REGCOUNT = 0x2f };

/* Little-endian reads; the caller has checked the bounds. */
static uint16_t u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t u64(const uint8_t *p)
{
	return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32;
}

/* Whether [off, off + len) lies inside size bytes (no overflow). */
static int inside(uint64_t off, uint64_t len, size_t size)
{
	return off <= size && len <= size - off;
}

#define corrupt(err, errlen, ...) jc__fail(err, errlen, JC_ECORRUPT, __VA_ARGS__)

const char *jc__art_kind_name(uint32_t kind)
{
	static const char *const names[] = {NULL, "cubin", "ptx", "ltoir", "fatbin"};
	return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : NULL;
}

static void image_clear(struct jc_art_image *im)
{
	for (size_t i = 0; i < im->n_kernels; i++)
		free(im->kernels[i].name);
	free(im->kernels);
	im->kernels = NULL;
	im->n_kernels = 0;
}

void jc__artifact_clear(struct jc_artifact *a)
{
	for (size_t i = 0; i < a->n_images; i++)
		image_clear(&a->images[i]);
	free(a->images);
	memset(a, 0, sizeof(*a));
}

/* Appends a kernel named name[len] with nothing known yet; NULL on failure
 * (*rc set). */
static struct jc_art_kernel *add_kernel(struct jc_art_image *im, const char *name, size_t len,
					int *rc)
{
	if (im->n_kernels == JC_ART_MAX_KERNELS) {
		*rc = JC_ETOOBIG;
		return NULL;
	}
	struct jc_art_kernel *k = realloc(im->kernels, (im->n_kernels + 1) * sizeof(*k));
	if (!k) {
		*rc = JC_ENOMEM;
		return NULL;
	}
	im->kernels = k;
	k += im->n_kernels;
	memset(k, 0, sizeof(*k));
	if (!(k->name = strndup(name, len))) {
		*rc = JC_ENOMEM;
		return NULL;
	}
	k->registers = -1;
	k->shared_bytes = k->stack_bytes = -1;
	im->n_kernels++;
	return k;
}

/* --- cubin ----------------------------------------------------------------- */

struct elf {
	const uint8_t *d;
	size_t size;
	uint64_t shoff;
	uint16_t shnum;
	const uint8_t *shstr; /* section name table */
	uint64_t shstr_size;
	uint64_t extent; /* bytes up to the end of the last header table */
};

/* Header of section i (checked by elf_open). */
static const uint8_t *shdr(const struct elf *e, unsigned i)
{
	return e->d + e->shoff + (uint64_t)i * 64;
}

/* A NUL-terminated string at off of a table of size bytes, or NULL. */
static const char *str_at(const uint8_t *tab, uint64_t size, uint64_t off)
{
	if (off >= size || !memchr(tab + off, '\0', size - off))
		return NULL;
	return (const char *)tab + off;
}

static const char *sec_name(const struct elf *e, unsigned i)
{
	return str_at(e->shstr, e->shstr_size, u32(shdr(e, i)));
}

/* Section i's bytes: *p and *len; NOBITS sections have a size but no bytes
 * (*p NULL). Returns 0 or JC_ECORRUPT. */
static int sec_data(const struct elf *e, unsigned i, const uint8_t **p, uint64_t *len, char *err,
		    size_t errlen)
{
	const uint8_t *h = shdr(e, i);
	uint64_t off = u64(h + 24), sz = u64(h + 32);
	*len = sz;
	*p = NULL;
	if (u32(h + 4) == SHT_NOBITS)
		return 0;
	if (!inside(off, sz, e->size))
		return corrupt(err, errlen,
			       "cubin: section %u (%llu bytes at %llu) runs past the end "
			       "(%zu bytes)",
			       i, (unsigned long long)sz, (unsigned long long)off, e->size);
	*p = e->d + off;
	return 0;
}

static int elf_open(struct elf *e, const uint8_t *d, size_t size, char *err, size_t errlen)
{
	e->d = d;
	e->size = size;
	if (size < 64)
		return corrupt(err, errlen, "cubin: %zu bytes, shorter than an ELF64 header", size);
	if (d[4] != 2 || d[5] != 1)
		return jc__fail(err, errlen, JC_EINVAL,
				"an ELF file, but not 64-bit little-endian "
				"as a cubin is");
	if (u16(d + 18) != EM_CUDA)
		return jc__fail(err, errlen, JC_EINVAL,
				"an ELF file for machine %u, not a CUDA "
				"cubin (EM_CUDA, 190)",
				u16(d + 18));
	e->shoff = u64(d + 40);
	e->shnum = u16(d + 60);
	unsigned shstrndx = u16(d + 62);
	if (e->shnum && u16(d + 58) != 64)
		return corrupt(err, errlen, "cubin: section headers of %u bytes, not 64",
			       u16(d + 58));
	if (!inside(e->shoff, (uint64_t)e->shnum * 64, size))
		return corrupt(err, errlen,
			       "cubin: %u section headers at %llu run past the end (%zu "
			       "bytes)",
			       e->shnum, (unsigned long long)e->shoff, size);
	if (e->shnum == 0)
		return corrupt(err, errlen, "cubin: no section headers");
	uint64_t phoff = u64(d + 32);
	unsigned phnum = u16(d + 56), phentsize = u16(d + 54);
	if (phnum && (phentsize != 56 || !inside(phoff, (uint64_t)phnum * 56, size)))
		return corrupt(err, errlen,
			       "cubin: %u program headers of %u bytes at %llu do not fit in "
			       "%zu bytes",
			       phnum, phentsize, (unsigned long long)phoff, size);
	/* The ELF's own extent: a container may pad it. */
	e->extent = e->shoff + (uint64_t)e->shnum * 64;
	if (phnum && phoff + (uint64_t)phnum * 56 > e->extent)
		e->extent = phoff + (uint64_t)phnum * 56;
	if (shstrndx >= e->shnum)
		return corrupt(err, errlen, "cubin: section name table %u of %u", shstrndx,
			       e->shnum);
	int rc = sec_data(e, shstrndx, &e->shstr, &e->shstr_size, err, errlen);
	if (rc == 0 && !e->shstr)
		return corrupt(err, errlen, "cubin: the section name table has no bytes");
	return rc;
}

/* Index of the section named name, or -1. */
static int find_section(const struct elf *e, const char *prefix, const char *name)
{
	size_t pl = strlen(prefix);
	for (unsigned i = 1; i < e->shnum; i++) {
		const char *n = sec_name(e, i);
		if (n && strncmp(n, prefix, pl) == 0 && strcmp(n + pl, name) == 0)
			return (int)i;
	}
	return -1;
}

/* Calls fn for each record of an .nv.info section: attribute, value bytes. */
static int nv_info(const uint8_t *p, uint64_t len,
		   void (*fn)(void *, unsigned, const uint8_t *, unsigned), void *ctx, char *err,
		   size_t errlen)
{
	uint64_t off = 0;
	while (off + 4 <= len) {
		unsigned fmt = p[off], attr = p[off + 1], n = u16(p + off + 2);
		if (fmt != 4) { /* no value, a byte or a u16: all in these 4 bytes */
			fn(ctx, attr, p + off + 2, 2);
			off += 4;
			continue;
		}
		if (off + 4 + n > len)
			return corrupt(err, errlen,
				       "cubin: .nv.info attribute 0x%02x of %u bytes runs past "
				       "its section",
				       attr, n);
		fn(ctx, attr, p + off + 4, n);
		off += 4 + n;
	}
	return 0;
}

struct info_ctx {
	struct jc_art_image *im;
	const uint32_t *sym_kernel; /* symbol index -> kernel index + 1 (0: none) */
	uint64_t n_syms;
	struct jc_art_kernel *k; /* for .nv.info.NAME */
};

static void global_info(void *ctx, unsigned attr, const uint8_t *v, unsigned n)
{
	struct info_ctx *c = ctx;
	if ((attr != EIATTR_REGCOUNT && attr != EIATTR_FRAME_SIZE) || n != 8)
		return;
	uint32_t sym = u32(v), val = u32(v + 4);
	if (sym >= c->n_syms || !c->sym_kernel[sym])
		return;
	struct jc_art_kernel *k = &c->im->kernels[c->sym_kernel[sym] - 1];
	if (attr == EIATTR_REGCOUNT)
		k->registers = (int32_t)(val > 65535 ? 65535 : val);
	else
		k->stack_bytes = val;
}

static void kernel_info(void *ctx, unsigned attr, const uint8_t *v, unsigned n)
{
	struct info_ctx *c = ctx;
	if (attr == EIATTR_MAX_THREADS && n == 12)
		for (int i = 0; i < 3; i++)
			c->k->max_threads[i] = u32(v + 4 * i);
}

/* target from e_flags, refined by the tkinfo note's "-arch sm_NN[af]". */
static void cubin_target(const struct elf *e, struct jc_art_image *im)
{
	uint32_t flags = u32(e->d + 48);
	unsigned sm = e->d[8] >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
	snprintf(im->target, sizeof(im->target), "sm_%u", sm);
	int i = find_section(e, ".note.nv.tkinfo", "");
	const uint8_t *p;
	uint64_t len;
	if (i < 0 || sec_data(e, (unsigned)i, &p, &len, NULL, 0) != 0 || !p)
		return;
	for (uint64_t off = 0; off + 1 < len; off++) {
		/* The strings of the note: the tool line, then the options. */
		const char *s = str_at(p, len, off);
		if (!s)
			break;
		size_t sl = strlen(s);
		if (!im->producer[0] && strstr(s, "compilation tools"))
			snprintf(im->producer, sizeof(im->producer), "%s", s);
		const char *a = strstr(s, "-arch sm_");
		unsigned num;
		char suffix = 0;
		if (a && sscanf(a + 9, "%u%c", &num, &suffix) >= 1 && num == sm &&
		    (suffix == 'a' || suffix == 'f'))
			snprintf(im->target, sizeof(im->target), "sm_%u%c", sm, suffix);
		off += sl;
	}
}

static int parse_cubin(const uint8_t *d, size_t size, struct jc_art_image *im, char *err,
		       size_t errlen)
{
	struct elf e;
	int rc = elf_open(&e, d, size, err, errlen);
	if (rc)
		return rc;
	im->kind = JC_ART_CUBIN;
	if (e.extent < im->size)
		im->size = e.extent;
	cubin_target(&e, im);
	int symtab = -1;
	for (unsigned i = 1; i < e.shnum && symtab < 0; i++)
		if (u32(shdr(&e, i) + 4) == SHT_SYMTAB)
			symtab = (int)i;
	if (symtab < 0)
		return 0; /* no symbols: no kernels to list */
	const uint8_t *syms, *strs;
	uint64_t syms_len, strs_len;
	unsigned link = u32(shdr(&e, (unsigned)symtab) + 40);
	if (link >= e.shnum)
		return corrupt(err, errlen, "cubin: the symbol table names string table %u of %u",
			       link, e.shnum);
	if ((rc = sec_data(&e, (unsigned)symtab, &syms, &syms_len, err, errlen)) ||
	    (rc = sec_data(&e, link, &strs, &strs_len, err, errlen)))
		return rc;
	if (!syms || !strs)
		return corrupt(err, errlen, "cubin: symbol or string table without bytes");
	uint64_t n_syms = syms_len / 24;
	uint32_t *sym_kernel = calloc(n_syms ? n_syms : 1, sizeof(*sym_kernel));
	if (!sym_kernel)
		return JC_ENOMEM;
	for (uint64_t i = 0; i < n_syms && rc == 0; i++) {
		const uint8_t *s = syms + i * 24;
		if ((s[4] & 0xf) != 2 || !(s[5] & STO_CUDA_ENTRY)) /* STT_FUNC, entry */
			continue;
		const char *name = str_at(strs, strs_len, u32(s));
		if (!name) {
			rc = corrupt(err, errlen,
				     "cubin: symbol %llu has its name outside the string table",
				     (unsigned long long)i);
			break;
		}
		struct jc_art_kernel *k = add_kernel(im, name, strlen(name), &rc);
		if (!k)
			break;
		sym_kernel[i] = (uint32_t)im->n_kernels;
		int sh = find_section(&e, ".nv.shared.", name);
		if (sh >= 0)
			k->shared_bytes = (int64_t)u64(shdr(&e, (unsigned)sh) + 32);
		else
			k->shared_bytes = 0;
	}
	struct info_ctx c = {.im = im, .sym_kernel = sym_kernel, .n_syms = n_syms};
	const uint8_t *p;
	uint64_t len;
	int info = rc ? -1 : find_section(&e, ".nv.info", "");
	if (info >= 0 && (rc = sec_data(&e, (unsigned)info, &p, &len, err, errlen)) == 0 && p)
		rc = nv_info(p, len, global_info, &c, err, errlen);
	for (size_t i = 0; rc == 0 && i < im->n_kernels; i++) {
		c.k = &im->kernels[i];
		info = find_section(&e, ".nv.info.", c.k->name);
		if (info >= 0 && (rc = sec_data(&e, (unsigned)info, &p, &len, err, errlen)) == 0 &&
		    p)
			rc = nv_info(p, len, kernel_info, &c, err, errlen);
	}
	free(sym_kernel);
	return rc;
}

/* --- PTX ------------------------------------------------------------------------ */

/* Whether the bytes are text that holds a PTX .version directive. */
static int looks_like_ptx(const uint8_t *d, size_t size)
{
	size_t n = size;
	while (n && d[n - 1] == '\0')
		n--;
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (d[i] < 0x09 || (d[i] > 0x0d && d[i] < 0x20) || d[i] == 0x7f)
			return 0;
	return (n >= 9 && memcmp(d, ".version ", 9) == 0) || memmem(d, n, "\n.version ", 10);
}

static int ident_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '$' || c == '.';
}

static int parse_ptx(const uint8_t *d, size_t size, struct jc_art_image *im)
{
	const char *t = (const char *)d, *end = t + size;
	int rc = 0;
	im->kind = JC_ART_PTX;
	for (const char *line = t; line < end && rc == 0;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *le = nl ? nl : end;
		const char *p = line;
		while (p < le && (*p == ' ' || *p == '\t'))
			p++;
		size_t n = (size_t)(le - p);
		if (n > 9 && memcmp(p, ".version ", 9) == 0 && !im->ptx_isa[0]) {
			size_t v = 0;
			while (9 + v < n &&
			       ((p[9 + v] >= '0' && p[9 + v] <= '9') || p[9 + v] == '.'))
				v++;
			snprintf(im->ptx_isa, sizeof(im->ptx_isa), "%.*s", (int)(v < 15 ? v : 15),
				 p + 9);
		} else if (n > 8 && memcmp(p, ".target ", 8) == 0 && !im->target[0]) {
			size_t v = 0;
			while (8 + v < n && ident_char(p[8 + v]))
				v++;
			if (v >= 3 && memcmp(p + 8, "sm_", 3) == 0)
				snprintf(im->target, sizeof(im->target), "compute_%.*s",
					 (int)(v - 3 < 12 ? v - 3 : 12), p + 11);
		} else {
			/* [.visible|.weak|.extern] .entry NAME( */
			for (const char *q = p; q + 7 <= le; q++) {
				if (memcmp(q, ".entry", 6) != 0 || (q[6] != ' ' && q[6] != '\t') ||
				    (q > p && q[-1] != ' ' && q[-1] != '\t'))
					continue;
				const char *s = q + 7;
				while (s < le && (*s == ' ' || *s == '\t'))
					s++;
				const char *e = s;
				while (e < le && ident_char(*e))
					e++;
				if (e > s && !add_kernel(im, s, (size_t)(e - s), &rc))
					return rc;
				break;
			}
		}
		line = nl ? nl + 1 : end;
	}
	return rc;
}

/* --- LTO-IR ------------------------------------------------------------------ */

static int parse_ltoir(const uint8_t *d, size_t size, struct jc_art_image *im, char *err,
		       size_t errlen)
{
	im->kind = JC_ART_LTOIR;
	if (size < 0x1c)
		return corrupt(err, errlen, "LTO-IR: %zu bytes, shorter than its container header",
			       size);
	unsigned arch = u16(d + 0x1a);
	if (arch >= 10 && arch < 100000 && arch % 10 == 0)
		snprintf(im->target, sizeof(im->target), "lto_%u", arch / 10);
	return 0;
}

/* --- one image of any kind; fatbins ---------------------------------------------- */

static int parse_image(const uint8_t *d, size_t size, struct jc_art_image *im, char *err,
		       size_t errlen)
{
	im->size = im->stored_size = size;
	im->compression = "";
	im->decoded = 1;
	if (size >= 4 && memcmp(d, "\177ELF", 4) == 0)
		return parse_cubin(d, size, im, err, errlen);
	if (size >= 4 && u32(d) == NVVM_MAGIC)
		return parse_ltoir(d, size, im, err, errlen);
	if (looks_like_ptx(d, size))
		return parse_ptx(d, size, im);
	char start[32] = "";
	for (size_t i = 0, o = 0; i < size && i < 4; i++)
		o += (size_t)snprintf(start + o, sizeof(start) - o, "%s%02x",
				      i		 ? " "
				      : size > 4 ? ", starting "
						 : ": ",
				      d[i]);
	return jc__fail(err, errlen, JC_EINVAL, "not a cubin, PTX, LTO-IR or fatbin (%zu bytes%s)",
			size, start);
}

static int fatbin_entry(const uint8_t *e, uint64_t hsize, uint64_t psize, struct jc_art_image *im,
			size_t index, uint64_t offset, char *err, size_t errlen)
{
	unsigned kind = u16(e);
	uint64_t flags = u64(e + 0x28), full = u64(e + 0x38);
	uint32_t csize = u32(e + 0x10);
	unsigned arch = u32(e + 0x1c);
	const uint8_t *payload = e + hsize;
	uint8_t *decoded = NULL;
	int rc = 0;
	if (kind != 1 && kind != 2 && kind != 8)
		return corrupt(err, errlen, "fatbin: image %zu has unknown kind %u", index, kind);
	if ((flags & (FATBIN_FLAG_LZ4 | FATBIN_FLAG_ZSTD)) && (csize == 0 || csize > psize))
		return corrupt(err, errlen,
			       "fatbin: image %zu compressed to %u bytes in a payload of "
			       "%llu",
			       index, csize, (unsigned long long)psize);
	static const uint8_t zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
	if ((flags & FATBIN_FLAG_ZSTD) && csize >= 4 && memcmp(payload, zstd_magic, 4) == 0) {
		if (full == 0 || full > JC_ART_MAX_DECODED)
			return jc__fail(err, errlen, full ? JC_ETOOBIG : JC_ECORRUPT,
					"fatbin: image %zu "
					"says it decodes to %llu bytes",
					index, (unsigned long long)full);
		if (!(decoded = malloc(full)))
			return JC_ENOMEM;
		size_t got = ZSTD_decompress(decoded, full, payload, csize);
		if (ZSTD_isError(got) || got != full) {
			free(decoded);
			return corrupt(err, errlen, "fatbin: image %zu does not decode (zstd: %s)",
				       index,
				       ZSTD_isError(got) ? ZSTD_getErrorName(got) : "wrong size");
		}
		rc = parse_image(decoded, full, im, err, errlen);
		im->compression = "zstd";
		im->stored_size = csize;
	} else if (flags & (FATBIN_FLAG_LZ4 | FATBIN_FLAG_ZSTD)) {
		/* LZ4, or an encoding that is not a zstd frame (nvcc's LTO-IR
		 * images set the zstd flag and 0x10000): listed, not read. */
		im->kind = kind == 1 ? JC_ART_PTX : kind == 2 ? JC_ART_CUBIN : JC_ART_LTOIR;
		im->size = full;
		im->stored_size = csize;
		im->compression = flags & FATBIN_FLAG_LZ4 ? "lz4" : "unknown";
		im->decoded = 0;
	} else {
		size_t n = (size_t)psize;
		if (kind == 1)
			while (n && payload[n - 1] == '\0')
				n--; /* PTX is padded with NULs */
		rc = parse_image(payload, n, im, err, errlen);
		im->stored_size = psize;
	}
	free(decoded);
	im->offset = offset;
	if (rc == JC_EINVAL)
		rc = corrupt(err, errlen,
			     "fatbin: image %zu (kind %u, arch %u): not what its kind says", index,
			     kind, arch);
	unsigned want = kind == 1 ? JC_ART_PTX : kind == 2 ? JC_ART_CUBIN : JC_ART_LTOIR;
	if (rc == 0 && im->kind != want)
		rc = corrupt(err, errlen, "fatbin: image %zu is kind %u but holds %s", index, kind,
			     jc__art_kind_name(im->kind));
	if (rc == 0 && kind == 1) {
		/* The entry says the PTX ISA and the arch, whatever the text holds. */
		if (!im->ptx_isa[0])
			snprintf(im->ptx_isa, sizeof(im->ptx_isa), "%u.%u", u16(e + 0x1a),
				 u16(e + 0x18));
		snprintf(im->target, sizeof(im->target), "compute_%u", arch);
	} else if (rc == 0 && !im->target[0]) {
		snprintf(im->target, sizeof(im->target), "%s_%u", kind == 2 ? "sm" : "lto", arch);
	}
	return rc;
}

static int parse_fatbin(const uint8_t *d, size_t size, struct jc_artifact *a, char *err,
			size_t errlen)
{
	if (size < 16)
		return corrupt(err, errlen, "fatbin: %zu bytes, shorter than its header", size);
	unsigned version = u16(d + 4), hsize = u16(d + 6);
	uint64_t body = u64(d + 8);
	if (version != 1)
		return corrupt(err, errlen, "fatbin: version %u, not 1", version);
	if (hsize < 16 || !inside(hsize, body, size))
		return corrupt(err, errlen,
			       "fatbin: header of %u bytes and %llu bytes of images do not "
			       "fit in %zu",
			       hsize, (unsigned long long)body, size);
	uint64_t off = hsize, end = hsize + body;
	while (off < end) {
		if (a->n_images == JC_ART_MAX_IMAGES)
			return jc__fail(err, errlen, JC_ETOOBIG, "fatbin: more than %d images",
					JC_ART_MAX_IMAGES);
		if (!inside(off, 64, end))
			return corrupt(err, errlen,
				       "fatbin: image header %zu at %llu runs past the end",
				       a->n_images, (unsigned long long)off);
		const uint8_t *e = d + off;
		uint64_t eh = u32(e + 4), psize = u64(e + 8);
		if (eh < 64 || !inside(off, eh, end) || !inside(off + eh, psize, end))
			return corrupt(err, errlen,
				       "fatbin: image %zu (header %llu bytes, payload %llu) "
				       "runs past the end",
				       a->n_images, (unsigned long long)eh,
				       (unsigned long long)psize);
		struct jc_art_image *im = realloc(a->images, (a->n_images + 1) * sizeof(*im));
		if (!im)
			return JC_ENOMEM;
		a->images = im;
		im += a->n_images++;
		memset(im, 0, sizeof(*im));
		int rc = fatbin_entry(e, eh, psize, im, a->n_images - 1, off + eh, err, errlen);
		if (rc)
			return rc;
		off += eh + psize;
	}
	return a->n_images ? 0 : corrupt(err, errlen, "fatbin: no images");
}

int jc__artifact_parse(const uint8_t *data, size_t size, struct jc_artifact *out, char *err,
		       size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!data && size)
		return jc__fail(err, errlen, JC_EINVAL, "no data");
	if (size >= 4 && u32(data) == FATBIN_MAGIC) {
		out->kind = JC_ART_FATBIN;
		return parse_fatbin(data, size, out, err, errlen);
	}
	if (!(out->images = calloc(1, sizeof(*out->images))))
		return JC_ENOMEM;
	out->n_images = 1;
	int rc = parse_image(data, size, out->images, err, errlen);
	out->kind = out->images->kind;
	return rc;
}
