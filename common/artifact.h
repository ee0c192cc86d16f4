/* SPDX-License-Identifier: MIT */
/*
 * What a CUDA artifact holds (`jitcachectl inspect`): the images of a cubin,
 * a PTX text, an LTO-IR (NVVM IR container) or a fatbin, their targets, PTX
 * ISA versions and kernels, with registers, static shared memory, stack
 * frame and launch bounds where a cubin's ELF says.
 *
 * Formats, as read here (none is documented by NVIDIA beyond what its tools
 * print; each field below was checked against CUDA 13.0's nvcc, NVRTC and
 * fatbinary output and, where installed, cuobjdump):
 *  - cubin: ELF64 little-endian, e_machine EM_CUDA (190). The architecture
 *    is e_flags bits 8..15 when e_ident[EI_ABIVERSION] >= 8 (CUDA 12.8+),
 *    else bits 0..7; an "a"/"f" suffix comes from the "-arch sm_NNa" of the
 *    .note.nv.tkinfo note when its number agrees. Kernels are STT_FUNC
 *    symbols with st_other bit 0x10 (entry). Per kernel: static shared
 *    memory = size of section .nv.shared.NAME (with what the toolkit
 *    reserves for the system: on sm_90 1 KiB more than ptxas -v says); from .nv.info (records
 *    u8 format, u8 attribute, then u16 size + size bytes for format 4, a
 *    u16 value otherwise) EIATTR_REGCOUNT (0x2f) and EIATTR_FRAME_SIZE
 *    (0x11), each "u32 symbol index, u32 value"; from .nv.info.NAME
 *    EIATTR_MAX_THREADS (0x05: u32 x, y, z, the launch bounds).
 *  - PTX: text with ".version X.Y" and ".target sm_NN[,...]"; kernels are
 *    the names after ".entry".
 *  - LTO-IR: magic 0x7f4e43ed (little-endian u32), the target's number
 *    times ten as u16 at offset 0x1a (reported as lto_NN).
 *  - fatbin: u32 magic 0xba55ed50, u16 version 1, u16 header size, u64
 *    size of the entries; each entry: u16 kind (1 PTX, 2 ELF, 8 LTO-IR),
 *    u16, u32 entry header size (>= 64), u64 payload size, u32 compressed
 *    size, u32, u16 minor, u16 major (the PTX ISA for PTX), u32 arch, ...,
 *    u32 name offset, u32 name size, u64 flags (0x2000 LZ4-, 0x8000
 *    zstd-compressed), u64, u64
 *    uncompressed size at 0x38. zstd images are decoded (libzstd); LZ4
 *    ones, and those flagged zstd whose payload is no zstd frame (nvcc's
 *    LTO-IR images), are listed with compression "lz4" or "unknown",
 *    their kernels not read.
 *
 * Every offset and size is checked against the buffer before use: any byte
 * string gives either a description or an error, never a read outside it
 * (tests/fuzz/fuzz_artifact.c). Thread-safe; no global state.
 */
#ifndef JC_ARTIFACT_H
#define JC_ARTIFACT_H

#include <stddef.h>
#include <stdint.h>

enum jc_art_kind { JC_ART_CUBIN = 1, JC_ART_PTX = 2, JC_ART_LTOIR = 3, JC_ART_FATBIN = 4 };

#define JC_ART_MAX_IMAGES  1024		/* images of one fatbin */
#define JC_ART_MAX_KERNELS 65536	/* kernels of one image */
#define JC_ART_MAX_DECODED (256u << 20) /* bytes one compressed image may decode to */

struct jc_art_kernel {
	char *name;		 /* owned, NUL-terminated */
	int32_t registers;	 /* -1: not said */
	int64_t shared_bytes;	 /* static shared memory; -1: not said */
	int64_t stack_bytes;	 /* stack frame per thread; -1: not said */
	uint32_t max_threads[3]; /* launch bounds x, y, z; 0 0 0: none */
};

struct jc_art_image {
	uint32_t kind;		       /* enum jc_art_kind, never JC_ART_FATBIN */
	char target[24];	       /* "sm_90a", "compute_90", "lto_90"; "" unknown */
	char ptx_isa[16];	       /* PTX: its .version ("9.0"); "" otherwise */
	char producer[96];	       /* cubin: the tool line of .note.nv.tkinfo; "" */
	uint64_t size;		       /* bytes of the image (decoded) */
	uint64_t stored_size;	       /* bytes it takes in its container */
	uint64_t offset;	       /* where those bytes start in the input */
	const char *compression;       /* static: "" (none), "zstd", "lz4" or "unknown" */
	int decoded;		       /* 0: compressed and not decoded (no kernels) */
	struct jc_art_kernel *kernels; /* owned, n_kernels of them */
	size_t n_kernels;
};

struct jc_artifact {
	uint32_t kind;		     /* enum jc_art_kind of the whole */
	struct jc_art_image *images; /* owned; one, except for fatbins */
	size_t n_images;
};

/*
 * Describes size bytes at data (borrowed, not kept) into *out (zeroed
 * first; owned by the caller, free with jc__artifact_clear, also after an
 * error). Returns 0, or
 *   JC_EINVAL   not a cubin, PTX, LTO-IR or fatbin (also an ELF file of
 *               another machine);
 *   JC_ECORRUPT one of those, but malformed (the message says where);
 *   JC_ETOOBIG  over JC_ART_MAX_IMAGES / _KERNELS / _DECODED;
 *   JC_ENOMEM.
 * err: errlen bytes for the message (may be 0).
 */
int jc__artifact_parse(const uint8_t *data, size_t size, struct jc_artifact *out, char *err,
		       size_t errlen);

/* Frees what *a owns and zeroes it; a zeroed struct is accepted. */
void jc__artifact_clear(struct jc_artifact *a);

/* "cubin", "ptx", "ltoir", "fatbin"; NULL for another value. */
const char *jc__art_kind_name(uint32_t kind);

#endif
