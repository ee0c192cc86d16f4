/* SPDX-License-Identifier: MIT */
/*
 * The daemon's persistent counters, declared once. Their names are the JSON
 * keys of `jitcachectl stats --json` and, with a jitcache_ prefix and a
 * _total suffix, the Prometheus counter names. Stored in the index's
 * counters table and reloaded at start-up.
 */
#ifndef JC_COUNTERS_H
#define JC_COUNTERS_H

#define JC_COUNTERS(X) \
	X(hits, "requests served from the cache") \
	X(misses, "requests that started a compile") \
	X(negative_hits, "requests answered with a cached compile failure") \
	X(single_flight_joins, "requests that waited on another request's compile") \
	X(compiles, "compiles and links run by workers") \
	X(compile_failures, "compiles that failed (compile errors, crashes, timeouts)") \
	X(compile_ns, "time spent in successful and failed compiles (JSON: ns; Prometheus: s)") \
	X(evictions, "entries evicted to keep the byte budget") \
	X(corrupt_objects, "objects that failed a check and were quarantined") \
	X(worker_crashes, "compile workers that crashed or were killed") \
	X(compile_timeouts, "compiles killed at --compile-timeout") \
	X(load_failures, "artifacts a client reported it could not load") \
	X(bad_requests, "malformed frames or invalid requests refused") \
	X(include_scans, "requests whose headers on disk were scanned (no manifest matched)") \
	X(include_manifest_hits, "requests keyed from a stored include manifest") \
	X(include_stats, "stat calls made to key requests that read headers from disk") \
	X(include_uncached, "compiles served but not stored: an include file changed") \
	X(deps_mismatch, "compiles served but not stored: NVRTC read a file the key does not cover") \
	X(deps_learned, "compiles stored under a key learnt from the files NVRTC read (the scan missed one)") \
	X(tree_requests, "requests whose client read and sent its include directories (a tree)") \
	X(busy_refusals, "connections, requests and replies refused or dropped by a resource bound")

enum jc_counter {
#define X(name, help) JC_CTR_##name,
	JC_COUNTERS(X)
#undef X
	JC_CTR__COUNT
};

extern const char *const jc__counter_names[JC_CTR__COUNT];
extern const char *const jc__counter_help[JC_CTR__COUNT];

#endif
