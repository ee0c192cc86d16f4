/* SPDX-License-Identifier: MIT */
/*
 * What a tier stores and how it is selected: an entry (a cache key's
 * artifact, or a cached compile failure), the filters of a walk over
 * entries and kept requests, and a uid's totals. The local tier (tier.h)
 * hands these out; its index (index.h, private to the local tier) stores
 * them. Plain data: no function here but jc__entry_clear.
 */
#ifndef JC_ENTRY_H
#define JC_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "common/req.h"

enum { JC_ENTRY_OK = 0, JC_ENTRY_FAILED = 1 };

struct jc_entry {
	uint8_t key[16];
	int status;	    /* JC_ENTRY_OK or JC_ENTRY_FAILED */
	int32_t error;	    /* JC_E* of a failure (JC_ECOMPILE), 0 when ok */
	uint8_t object[16]; /* XXH3-128 of the artifact; zero for failures */
	uint64_t size;	    /* artifact bytes; 0 for failures */
	uint32_t output;    /* enum jc_output */
	/* Owned, NUL-terminated; never NULL after a get or in a foreach callback
	 * ("" instead). NULL is stored as "" by put. */
	char *arch, *versions, *options, *source_name, *app_abi, *log;
	int64_t created, last_access; /* unix seconds */
	int64_t expires;	      /* unix seconds; failures only, 0 otherwise */
	uint64_t hits;
	uint64_t compile_ns; /* nanoseconds the compile took */
	/* What the entry costs on disk, read back (put ignores it): its object
	 * in whole 4 KiB blocks (ok entries), the bytes of its log, lowered
	 * names and other text, and 256 for the row and its index entries. */
	uint64_t charge;
	struct jc_lowered *lowered; /* n_lowered owned pairs (req.h), in stored order */
	size_t n_lowered;
};

/* Frees everything e owns and zeroes it. A zeroed entry is empty; NULL-safe. */
void jc__entry_clear(struct jc_entry *e);

/* One uid's totals: the entries it uses, failed ones among them, bytes of
 * its ok entries (each in full), its hits, and the charges (jc_entry) of
 * every entry it uses, ok or failed: what its share (--user-max-size) counts. */
struct jc_user_totals {
	uint32_t uid;
	uint64_t entries, negative, bytes, hits, stored;
};

enum { JC_FILTER_ANY = 0, JC_FILTER_OK = 1, JC_FILTER_FAILED = 2 };

/* Conditions of a walk over entries (the tier's foreach, tier.h), all
 * AND-ed; a zeroed struct matches all. */
struct jc_filter {
	int status;		  /* JC_FILTER_ANY, _OK or _FAILED */
	int64_t created_before;	  /* created < this; 0 = no condition */
	int64_t accessed_before;  /* last_access < this; 0 = no condition */
	int64_t expired_at;	  /* failed entries with expires <= this; 0 = none */
	const char *arch;	  /* arch == this; NULL = any */
	const char *versions_not; /* versions != this; NULL = any */
	const uint8_t *key;	  /* key == these 16 bytes; NULL = any */
	/* by_uid: only the entries uid uses, in that uid's LRU order, with its
	 * own created, last_access and hits (as the tier's lookup_for), which
	 * created_before and accessed_before then test. */
	int by_uid;
	uint32_t uid;
};

/*
 * Kept requests (schema 3): the request that made an entry (its encoding,
 * core/kept.h), in the index, once per distinct request, found by its
 * content (a 32-bit hash, kept.h computes it, then the bytes compared), and
 * entries name it by id in their request column. A request goes with the last
 * entry that names it (triggers); the budget's bytes (the tier's health)
 * count each once. A uid sees the requests it made (the first to ask for
 * an entry): a request names its maker's files (program name, -I
 * directories), which another uid using the entry never sees.
 */
struct jc_kept {
	uint8_t key[16]; /* the entry's key */
	int64_t id;	 /* the request's id */
	uint64_t size;	 /* its bytes */
	uint32_t uid;	 /* who asked first */
	/* foreach_request only (tier.h), borrowed for the callback: */
	const char *versions, *source_name; /* the entry's toolchain identity, program name */
	uint64_t hits;
	int64_t last_access;
};

/* Which kept requests the tier's foreach_request visits. */
struct jc_kept_filter {
	int64_t now; /* unix seconds: the value's recency is measured from it */
	/* Entries of another toolchain identity whose request has no entry of
	 * this one yet; NULL = any. */
	const char *versions_not;
	int64_t accessed_since; /* last_access >= this; 0 = any */
	int by_uid;		/* only the requests uid made */
	uint32_t uid;
	uint64_t top; /* at most this many; 0 = all */
};

#endif
