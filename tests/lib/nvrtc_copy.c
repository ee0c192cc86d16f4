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
		for (size_t off = ph.p_offset;
		     off + sizeof(Elf64_Nhdr) <= ph.p_offset + ph.p_filesz;) {
			Elf64_Nhdr nh;
			memcpy(&nh, f + off, sizeof(nh));
			size_t desc = off + sizeof(nh) + ((nh.n_namesz + pad - 1) & ~(pad - 1));
			size_t next = desc + ((nh.n_descsz + pad - 1) & ~(pad - 1));
			if (desc + nh.n_descsz > n || next <= off)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp(f + off + sizeof(nh), "GNU", 4)) {
				for (size_t k = 0; k < nh.n_descsz; k++)
					f[desc + k] ^= tag;
				found = 1;
			}
			off = next;
		}
	}
	int rc =
	    found ? jtl_write_file(path, f, n, why, whylen) : FAIL("%s has no build-id note", path);
	free(f);
	return rc;
}

/* The DT_SONAME of the ELF64 image f[n] (the name the loader looks the
 * library up by) into name[len]; 0, or -1 when it has none. */
static int elf_soname(const uint8_t *f, size_t n, char *name, size_t len)
{
	Elf64_Ehdr eh;
	Elf64_Phdr dyn = {0}, loads[16];
	size_t nloads = 0;
	memcpy(&eh, f, sizeof(eh));
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		size_t at = eh.e_phoff + (size_t)i * sizeof(ph);
		if (at + sizeof(ph) > n)
			return -1;
		memcpy(&ph, f + at, sizeof(ph));
		if (ph.p_type == PT_DYNAMIC)
			dyn = ph;
		else if (ph.p_type == PT_LOAD && nloads < 16)
			loads[nloads++] = ph;
	}
	uint64_t strtab = 0, soname = UINT64_MAX;
	for (size_t off = dyn.p_offset;
	     dyn.p_filesz && off + sizeof(Elf64_Dyn) <= dyn.p_offset + dyn.p_filesz &&
	     off + sizeof(Elf64_Dyn) <= n;
	     off += sizeof(Elf64_Dyn)) {
		Elf64_Dyn e;
		memcpy(&e, f + off, sizeof(e));
		if (e.d_tag == DT_STRTAB)
			strtab = e.d_un.d_ptr;
		else if (e.d_tag == DT_SONAME)
			soname = e.d_un.d_val;
		else if (e.d_tag == DT_NULL)
			break;
	}
	for (size_t i = 0; i < nloads && soname != UINT64_MAX; i++) {
		if (strtab < loads[i].p_vaddr || strtab >= loads[i].p_vaddr + loads[i].p_filesz)
			continue;
		size_t at = loads[i].p_offset + (strtab - loads[i].p_vaddr) + soname;
		if (at >= n || !memchr(f + at, '\0', n - at) || strlen((const char *)f + at) >= len)
			return -1;
		strcpy(name, (const char *)f + at);
		return 0;
	}
	return -1;
}

int jtl_nvrtc_copy_with_build_id(const char *nvrtc, const char *dir, uint8_t tag, char *out,
				 size_t outlen, char *why, size_t whylen)
{
	char real[PATH_MAX], srcdir[PATH_MAX], dst[PATH_MAX + 300];
	if (!realpath(nvrtc, real))
		return FAIL("realpath %s: %s", nvrtc, strerror(errno));
	snprintf(srcdir, sizeof(srcdir), "%s", real);
	*strrchr(srcdir, '/') = '\0';
	/* under its soname: the name the loader asks LD_LIBRARY_PATH for (a
	 * toolkit's libnvrtc.so.13 may be a link to libnvrtc.so.13.0.88) */
	char base[256];
	size_t n;
	uint8_t *f = jtl_read_file(real, &n);
	int named = f && n >= sizeof(Elf64_Ehdr) && memcmp(f, ELFMAG, SELFMAG) == 0 &&
		    f[EI_CLASS] == ELFCLASS64 && elf_soname(f, n, base, sizeof(base)) == 0;
	free(f);
	if (!named)
		snprintf(base, sizeof(base), "%s",
			 strrchr(nvrtc, '/') ? strrchr(nvrtc, '/') + 1 : nvrtc);
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
