/* SPDX-License-Identifier: MIT */
/* Identities of ELF libraries (key.h, item 7): see elf_id.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/elf_id.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/req.h"
#include "common/util.h"
#include "jitcache/jitcache.h"

#define NOTE_MAX (64 * 1024) /* PT_NOTE segments read from a file, at most */

/*
 * Scans an ELF note area for NT_GNU_BUILD_ID and writes "build-id:<hex>" to
 * out[outlen]. Returns 1 when found and it fits, else 0. align is the segment's
 * p_align: 8-aligned note segments pad name and descriptor to 8 (gABI).
 */
int jc__elf_notes_build_id(const uint8_t *p, size_t len, size_t align, char *out, size_t outlen)
{
	size_t pad = align == 8 ? 8 : 4;
	size_t off = 0;
	while (len - off >= sizeof(ElfW(Nhdr))) {
		ElfW(Nhdr) nh;
		memcpy(&nh, p + off, sizeof(nh));
		size_t name_at = off + sizeof(nh);
		size_t desc_at = name_at + ((nh.n_namesz + pad - 1) & ~(pad - 1));
		size_t next = desc_at + ((nh.n_descsz + pad - 1) & ~(pad - 1));
		if (desc_at > len || nh.n_descsz > len - desc_at || next <= off)
			return 0;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    memcmp(p + name_at, "GNU", 4) == 0 && nh.n_descsz > 0 &&
		    strlen("build-id:") + 2 * (size_t)nh.n_descsz < outlen) {
			int n = snprintf(out, outlen, "build-id:");
			for (size_t i = 0; i < nh.n_descsz; i++)
				n += snprintf(out + n, outlen - (size_t)n, "%02x", p[desc_at + i]);
			return 1;
		}
		off = next > len ? len : next;
	}
	return 0;
}

/* "xxh128:<hex>" of the file at path. */
int jc__file_hash_id(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return jc__fail(err, errlen, JC_EIO, "identity: open %s: %s", path,
				strerror(errno));
	XXH3_state_t *st = XXH3_createState();
	int rc = 0;
	if (!st || XXH3_128bits_reset(st) != XXH_OK) {
		rc = jc__fail(err, errlen, JC_ENOMEM, "identity: out of memory hashing %s", path);
		goto out;
	}
	uint8_t buf[1 << 16];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = jc__fail(err, errlen, JC_EIO, "identity: read %s: %s", path,
				      strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		XXH3_128bits_update(st, buf, (size_t)n);
	}
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	char hex[33];
	jc__hex16(c.digest, hex);
	snprintf(out, outlen, "xxh128:%s", hex);
out:
	XXH3_freeState(st);
	close(fd);
	return rc;
}

/* Identity of an ELF file not loaded here: its build-id, else its hash; "none" if absent. */
int jc__file_identity(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return snprintf(out, outlen, "none") < (int)outlen
			   ? 0
			   : jc__fail(err, errlen, JC_EINTERNAL, "identity: no room");
	if (fd < 0)
		return jc__fail(err, errlen, JC_EIO, "identity: open %s: %s", path,
				strerror(errno));
	ElfW(Ehdr) eh;
	int found = 0;
	const int elfclass = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
	if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) &&
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == elfclass &&
	    eh.e_phentsize == sizeof(ElfW(Phdr))) {
		for (ElfW(Half) i = 0; i < eh.e_phnum && !found; i++) {
			ElfW(Phdr) ph;
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
			    sizeof(ph))
				break;
			if (ph.p_type != PT_NOTE || ph.p_filesz > NOTE_MAX)
				continue;
			uint8_t notes[NOTE_MAX];
			if (pread(fd, notes, ph.p_filesz, (off_t)ph.p_offset) !=
			    (ssize_t)ph.p_filesz)
				break;
			found = jc__elf_notes_build_id(notes, ph.p_filesz, ph.p_align, out, outlen);
		}
	}
	close(fd);
	return found ? 0 : jc__file_hash_id(path, out, outlen, err, errlen);
}
