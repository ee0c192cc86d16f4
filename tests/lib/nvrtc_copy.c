/* SPDX-License-Identifier: MIT */
/* A second NVRTC build for tests: see core.h, jtl_nvrtc_copy_with_build_id. */
#include "core.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAIL(...) (snprintf(why, whylen, __VA_ARGS__), -1)

/* Copies src to dst (mode 0755). */
static int copy_file(const char *src, const char *dst, char *why, size_t whylen)
{
	size_t n;
	uint8_t *data = jtl_read_file(src, &n);
	if (!data)
		return FAIL("cannot read %s: %s", src, strerror(errno));
	int rc = jtl_write_file(dst, data, n, why, whylen);
	free(data);
	return rc == 0 && chmod(dst, 0755) != 0 ? FAIL("chmod %s: %s", dst, strerror(errno)) : rc;
}

/* XORs the NT_GNU_BUILD_ID descriptor of the ELF64 file at path with tag
 * (every note of that type: the PT_NOTE segment and its section are the
 * same bytes). */
static int patch_build_id(const char *path, uint8_t tag, char *why, size_t whylen)
{
	size_t n;
	uint8_t *f = jtl_read_file(path, &n);
	if (!f)
		return FAIL("cannot read %s: %s", path, strerror(errno));
	Elf64_Ehdr eh;
	int found = 0;
	if (n < sizeof(eh) || memcmp(f, ELFMAG, SELFMAG) != 0 || f[EI_CLASS] != ELFCLASS64) {
		free(f);
		return FAIL("%s is not a 64-bit ELF file", path);
	}
	memcpy(&eh, f, sizeof(eh));
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		size_t at = eh.e_phoff + (size_t)i * sizeof(ph);
		if (at + sizeof(ph) > n)
			break;
		memcpy(&ph, f + at, sizeof(ph));
		if (ph.p_type != PT_NOTE || ph.p_offset + ph.p_filesz > n)
			continue;
		size_t pad = ph.p_align == 8 ? 8 : 4;
		for (size_t off = ph.p_offset; off + sizeof(Elf64_Nhdr) <= ph.p_offset + ph.p_filesz;) {
			Elf64_Nhdr nh;
			memcpy(&nh, f + off, sizeof(nh));
			size_t desc = off + sizeof(nh) + ((nh.n_namesz + pad - 1) & ~(pad - 1));
			size_t next = desc + ((nh.n_descsz + pad - 1) & ~(pad - 1));
			if (desc + nh.n_descsz > n || next <= off)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(f + off + sizeof(nh), "GNU", 4)) {
				for (size_t k = 0; k < nh.n_descsz; k++)
					f[desc + k] ^= tag;
				found = 1;
			}
			off = next;
		}
	}
	int rc = found ? jtl_write_file(path, f, n, why, whylen) : FAIL("%s has no build-id note", path);
	free(f);
	return rc;
}

int jtl_nvrtc_copy_with_build_id(const char *nvrtc, const char *dir, uint8_t tag, char *out,
				 size_t outlen, char *why, size_t whylen)
{
	char real[PATH_MAX], srcdir[PATH_MAX], dst[PATH_MAX + 300];
	if (!realpath(nvrtc, real))
		return FAIL("realpath %s: %s", nvrtc, strerror(errno));
	snprintf(srcdir, sizeof(srcdir), "%s", real);
	*strrchr(srcdir, '/') = '\0';
	const char *base = strrchr(nvrtc, '/') ? strrchr(nvrtc, '/') + 1 : nvrtc;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return FAIL("mkdir %s: %s", dir, strerror(errno));
	snprintf(dst, sizeof(dst), "%s/%s", dir, base);
	if (copy_file(real, dst, why, whylen) != 0 || patch_build_id(dst, tag, why, whylen) != 0)
		return -1;
	if ((size_t)snprintf(out, outlen, "%s", dst) >= outlen)
		return FAIL("path %s too long", dst);
	/* what it loads when it compiles: the builtins of its directory */
	DIR *d = opendir(srcdir);
	if (!d)
		return FAIL("opendir %s: %s", srcdir, strerror(errno));
	int rc = 0;
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		char src[PATH_MAX + 300];
		struct stat st;
		snprintf(src, sizeof(src), "%s/%s", srcdir, e->d_name);
		if (strncmp(e->d_name, "libnvrtc-builtins.so", 20) != 0 || stat(src, &st) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		snprintf(dst, sizeof(dst), "%s/%s", dir, e->d_name);
		rc = copy_file(src, dst, why, whylen);
	}
	closedir(d);
	return rc;
}
