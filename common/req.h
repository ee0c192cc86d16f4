/* SPDX-License-Identifier: MIT */
/*
 * The request and result model shared by the client library, the protocol
 * codec, the key derivation and the daemon. It mirrors NVRTC's program model
 * (one source, in-memory headers, options, name expressions) plus nvJitLink's
 * link inputs, so a transparent NVRTC shim can fill it one call at a time.
 *
 * Every pointer inside is owned by the struct and freed by jc__req_clear() /
 * jc__res_clear(). Not thread-safe; a request is built by one thread.
 */
#ifndef JC_REQ_H
#define JC_REQ_H

#include <stddef.h>
#include <stdint.h>

enum jc_job {
	JC_JOB_COMPILE = 1,	 /* NVRTC only */
	JC_JOB_LINK = 2,	 /* nvJitLink over link inputs only */
	JC_JOB_COMPILE_LINK = 3, /* NVRTC (-dlto) then nvJitLink with the link inputs */
	/* Daemon -> worker only (clients' requests never carry it): put the
	 * link inputs (cubins and PTX, each named by its target) into one
	 * fatbin with nvFatbin (core/fatbin.h). */
	JC_JOB_FATBIN = 4,
};

enum jc_output {
	JC_OUTPUT_CUBIN = 1,
	JC_OUTPUT_PTX = 2,
	JC_OUTPUT_LTOIR = 3,
	JC_OUTPUT_FATBIN = 4, /* one image per target of a target list (core/fatbin.h) */
};

/* Link input types, as nvJitLinkInputType names them. */
enum jc_input_type {
	JC_INPUT_CUBIN = 1,
	JC_INPUT_PTX = 2,
	JC_INPUT_LTOIR = 3,
	JC_INPUT_FATBIN = 4,
	JC_INPUT_OBJECT = 5,
	JC_INPUT_LIBRARY = 6,
};

/* Where a result came from (client-visible cache status). */
enum jc_cache_status {
	JC_CACHE_MISS = 1,	   /* this request ran the compile */
	JC_CACHE_HIT = 2,	   /* served from the cache */
	JC_CACHE_NEGATIVE_HIT = 3, /* a cached compile failure, served with its log */
	JC_CACHE_JOINED = 4,	   /* waited on another request's compile (single flight) */
	JC_CACHE_UNCACHED = 5, /* compiled in the client's process (no daemon), or compiled by the
				* daemon and served without being stored */
	JC_CACHE_REMOTE_HIT =
	    6, /* a local miss served from the remote tier (verified, then stored) */
};

struct jc_blob {
	char *name;    /* NUL-terminated */
	uint8_t *data; /* size bytes */
	size_t size;
	uint32_t type; /* enum jc_input_type for link inputs, 0 for headers */
};

struct jc_strv {
	char **v; /* n NUL-terminated strings */
	size_t n;
};

struct jc_req {
	uint32_t job;	   /* enum jc_job */
	uint32_t output;   /* enum jc_output */
	char *arch;	   /* "sm_90", "sm_90a", "compute_90"; for JC_OUTPUT_FATBIN
			    * an ordered, comma-separated target list */
	char *source_name; /* NVRTC program name, e.g. "saxpy.cu" */
	uint8_t *source;
	size_t source_size;
	struct jc_blob *headers; /* in-memory headers (name = include name) */
	size_t n_headers;
	struct jc_strv options;	     /* NVRTC options, in order */
	struct jc_strv include_dirs; /* directories the daemon may scan/read */
	/* Client-read include trees (docs/team-daemon.md): the
	 * files the client's scan of include_dirs found, sent by a client whose
	 * daemon runs as another uid. name "I/REL": include_dirs.v[I] (decimal;
	 * a top directory: includes.h, jc__inc_tops_is_top) and the path relative to it
	 * (no "..", "." or empty component); type an
	 * enum jc_tree_kind. With a tree_round the daemon opens none of
	 * include_dirs: the worker compiles against a private copy. */
	struct jc_blob *tree;
	size_t n_tree;
	uint32_t
	    tree_round; /* enum jc_tree_round: 0 = no tree (the daemon may read include_dirs) */
	uint8_t
	    tree_digest[16]; /* JC_TREE_DIGEST: jc__inc_key_digest of the tree (then n_tree is 0) */
	/* Daemon to worker only (a client's request carrying it is refused):
	 * the keyed headers that are symbolic links (JC_INC_LINK entries), whose
	 * chains of targets the worker's confinement allows (README, "Symlinked
	 * include trees"). Not part of the key (the LINK entries are). */
	struct jc_strv follow;
	/* The identity (common/elf_id.h) of the NVRTC the application loaded,
	 * where it named one (the NVRTC shim: jc_options_set_nvrtc); NULL when
	 * not said. The daemon serves the request only when that is its own
	 * NVRTC build (else JC_EVERSION: the application compiles with its own
	 * library). Not part of the key: the daemon's toolchain identity is. */
	char *nvrtc_id;
	struct jc_strv name_exprs;   /* name expressions, e.g. "&saxpy<float>" */
	struct jc_blob *link_inputs; /* in link order */
	size_t n_link_inputs;
	struct jc_strv link_options;
	char *app_abi; /* application ABI/schema version, "" if unset */
	uint32_t
	    test_fault; /* test-only: see JC_FAULT_*; honoured only with JITCACHE_TEST_FAULTS=1 */
	/* Not part of the key: the client could not use the object it was served
	 * (hash mismatch or cuModuleLoadData failure). The daemon quarantines that
	 * object if the entry still names it and compiles afresh (bounded). */
	uint8_t reject_object[16];
	uint32_t reject_reason; /* 0 = none, else enum jc_reject */
	char *reject_message;	/* e.g. the driver's error string; may be NULL */
	/* Not part of the key: the program name to list the entry under when the
	 * key has another (the shim asks for a fixed name: shim.c, CANON_NAME);
	 * NULL: source_name. */
	char *display_name;
	/* 1: the client found no way for the program name to reach the
	 * artifact but one the daemon can see in it (the NVRTC shim:
	 * docs/shim.md, "Program names"). The key then leaves source_name out
	 * (key.h); the compile still uses it, and the result is stored under
	 * that key only when neither the artifact, its lowered names nor its log
	 * (but where the name is the program's, JC_NAME_STANDIN in the stored
	 * log) hold the name, else under a named key (core/progname.h). */
	uint32_t name_free;
};

/* The program name a stored log of a name-free entry says where the
 * program's name was; the shim writes the caller's name back. */
#define JC_NAME_STANDIN "jitcache-program.cu"

enum jc_tree_kind {
	JC_TREE_FILE = 1,   /* data: the file's bytes */
	JC_TREE_HASH = 2,   /* data: the XXH3-128 (canonical) of its bytes: a lookup, no compile */
	JC_TREE_ABSENT = 3, /* no regular file there (a search candidate); no data */
	/* A directory walked for a computed include (includes.h, JC_INC_DIR):
	 * data the hash of its listing, as the client's scan made it; name
	 * "I" alone for the top directory itself. The compile sees the files
	 * sent under it, and the listing enters the key as the client's word. */
	JC_TREE_DIR = 4,
	/* An -I directory inside the daemon's toolkit include tree (its
	 * HELLO_OK toolkit_include; includes.h, jc__inc_in_toolkit), named as
	 * a DIR entry is ("I" or "I/REL"); no data. Nothing under it is sent:
	 * the worker compiles it from the toolkit, after checking that its
	 * realpath is inside (else the request fails), and the toolkit
	 * identity in the key covers it (JC_INC_TOOLKIT). */
	JC_TREE_TOOLKIT = 5,
};

enum jc_tree_round {
	JC_TREE_NONE = 0,
	JC_TREE_LOOKUP = 1, /* FILE entries as JC_TREE_HASH: served on a hit, else JC_ENOTFOUND */
	JC_TREE_BYTES = 2,  /* FILE entries as JC_TREE_FILE: compiled on a miss */
	/* No entries: tree_digest, the key digest of the LOOKUP round's tree
	 * (jc__inc_tree_set, then jc__inc_key_digest), which a client keeps
	 * while its tree is unchanged; served on a hit, else JC_ENOTFOUND. */
	JC_TREE_DIGEST = 3,
};

enum jc_reject { JC_REJECT_NONE = 0, JC_REJECT_CORRUPT = 1, JC_REJECT_LOAD_FAILED = 2 };

enum { JC_FAULT_NONE = 0, JC_FAULT_CRASH = 1, JC_FAULT_HANG = 2, JC_FAULT_ALLOC = 3 };

/* A lowered name for one name expression. */
struct jc_lowered {
	char *expr;
	char *lowered;
};

/*
 * One file-system access of NVRTC during a compile, as the worker's
 * interposers saw it (daemon/worker_fs.c). path is absolute (a relative one
 * is joined to the worker's working directory, not folded); the stat
 * identity is that of the descriptor NVRTC got (JC_DEP_FILE only, else 0).
 */
enum jc_dep_kind {
	JC_DEP_FILE = 1,     /* a regular file opened for reading */
	JC_DEP_ABSENT = 2,   /* probed (stat, access, open): no regular file there */
	JC_DEP_DIR = 3,	     /* a directory listed (opendir) */
	JC_DEP_DENIED = 4,   /* outside the toolkit tree and the declared include dirs: refused */
	JC_DEP_SPECIAL = 5,  /* a FIFO, device, socket or /proc, /sys file: refused */
	JC_DEP_OVERFLOW = 6, /* more accesses than the worker records (path ""): never covered */
};

struct jc_dep {
	char *path;
	uint32_t kind; /* enum jc_dep_kind */
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};

struct jc_res {
	int32_t status;	    /* 0 = artifact present, else JC_E* (JC_ECOMPILE: see log) */
	uint32_t cache;	    /* enum jc_cache_status */
	uint8_t key[16];    /* cache key (XXH3-128, big-endian canonical form) */
	uint8_t object[16]; /* XXH3-128 of the artifact bytes */
	uint32_t output;    /* enum jc_output of the artifact */
	uint8_t *data;	    /* artifact bytes (size bytes), NULL when served by fd */
	size_t size;
	int fd;	       /* read-only descriptor of the object, or -1 */
	char *log;     /* compile/link log, "" when empty */
	char *message; /* error message when status != 0 */
	struct jc_lowered *lowered;
	size_t n_lowered;
	uint64_t compile_ns; /* compile time when it was compiled */
	uint64_t server_ns;  /* daemon time spent on this request */
	/* Worker -> daemon (and on to clients of that compile): CPU time of the
	 * compile or link (NVRTC, nvJitLink), for the re-warm budget; 0 when
	 * nothing was compiled for this result. */
	uint64_t cpu_ns;
	/* Worker -> daemon only (the daemon never sends them on): every path
	 * NVRTC opened or probed during the compile, in no particular order. */
	struct jc_dep *deps;
	size_t n_deps;
	/* Worker -> daemon only: the compiler identity of the libraries the
	 * worker loaded (jc__toolchain_compiler); the daemon stores a result
	 * only under a key of that identity. */
	char *compiler;
};

/* Frees everything a request owns and zeroes it (a zeroed struct is empty). */
void jc__req_clear(struct jc_req *r);
/* A result must be initialised (fd = -1) before use; clear closes fd and frees. */
void jc__res_init(struct jc_res *r);
void jc__res_clear(struct jc_res *r);
/*
 * Points res->lowered at a copy (malloc'd: the caller frees *tmp after the
 * reply is encoded; the strings stay borrowed) of its lowered names in the
 * order of names, the name expressions of the request being answered, as
 * PROTOCOL.md promises: a row or flight result has them in the order of
 * whoever compiled it. Left as it is when that order is already right or
 * memory is short (the client finds names by expression either way).
 */
void jc__res_lowered_in_order(struct jc_res *res, const struct jc_strv *names,
			      struct jc_lowered **tmp);

/* Frees r's tree and sets r->tree_round to JC_TREE_NONE (the rest of r stays). */
void jc__req_tree_clear(struct jc_req *r);
/* Frees the strings of sv and empties it (a zeroed sv is empty). */
void jc__strv_clear(struct jc_strv *sv);
/* Append helpers: copy their inputs; return 0 or JC_ENOMEM. */
int jc__strv_push(struct jc_strv *sv, const char *s);
int jc__blob_push(struct jc_blob **arr, size_t *n, const char *name, const void *data, size_t size,
		  uint32_t type);

/* Names used on the command line and in logs; NULL for an unknown value. */
const char *jc__output_name(uint32_t output);
int jc__output_parse(const char *s); /* -> enum jc_output or JC_EINVAL */
const char *jc__input_type_name(uint32_t type);
int jc__input_type_parse(const char *s);
const char *
jc__cache_status_name(uint32_t cache); /* "hit", "miss", "negative-hit", "joined", "uncached" */

/*
 * 1 when option i of o is an include option: "-IDIR", "-I DIR", "-I=DIR",
 * "--include-path=DIR", "--include-path DIR" (the forms NVRTC 13.0 accepts)
 * or a pre-include "-include NAME", "-include=NAME", "--pre-include NAME",
 * "--pre-include=NAME": *is_dir says -I (1) or pre-include (0), *val the directory or
 * name (borrowed; NULL when a two-word form is the last option) and *used
 * how many options it takes (1 or 2). 0 otherwise. Thread-safe.
 */
int jc__inc_option(const struct jc_strv *o, size_t i, int *is_dir, const char **val, size_t *used);

/* Lowercase hex of 16 bytes into out[33]. */
void jc__hex16(const uint8_t in[16], char out[33]);
/* Parses 32 hex digits; returns 0 or JC_EINVAL. */
int jc__unhex16(const char *s, uint8_t out[16]);

#endif
