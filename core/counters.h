/* SPDX-License-Identifier: MIT */
/*
 * The daemon's persistent counters, declared once. Their names are the JSON
 * keys of `jitcachectl stats --json` and, with a jitcache_ prefix and a
 * _total suffix, the Prometheus counter names. Stored in the index's
 * counters table and reloaded at start-up.
 */
#ifndef JC_COUNTERS_H
#define JC_COUNTERS_H

#include <stdint.h>

#define JC_COUNTERS(X)                                                                             \
	X(hits, "requests served from the cache")                                                  \
	X(misses, "requests not in the local cache (compiled, or served by the remote tier)")      \
	X(negative_hits, "requests answered with a cached compile failure")                        \
	X(single_flight_joins, "requests that waited on another request's compile")                \
	X(compiles, "compiles and links run by workers")                                           \
	X(compile_failures, "compiles that failed (compile errors, crashes, timeouts)")            \
	X(compile_ns, "time spent in successful and failed compiles (JSON: ns; Prometheus: s)")    \
	X(evictions, "entries evicted to keep the byte budget")                                    \
	X(user_evictions,                                                                          \
	  "entries dropped from a uid's share (--user-max-size); one another uid uses stays")      \
	X(corrupt_objects, "objects that failed a check and were quarantined")                     \
	X(worker_crashes, "compile workers that crashed or were killed")                           \
	X(compile_timeouts, "compiles killed at --compile-timeout")                                \
	X(load_failures, "artifacts a client reported it could not load")                          \
	X(bad_requests, "malformed frames or invalid requests refused")                            \
	X(nvrtc_other_builds, "compiles refused: the application loaded another NVRTC build "      \
			      "(compiled in the application)")                                     \
	X(include_scans, "requests whose headers on disk were scanned (no manifest matched)")      \
	X(include_manifest_hits, "requests keyed from a stored include manifest")                  \
	X(include_stats, "stat calls made to key requests that read headers from disk")            \
	X(include_uncached, "compiles served but not stored: an include file changed")             \
	X(deps_mismatch,                                                                           \
	  "compiles served but not stored: NVRTC read a file the key does not cover")              \
	X(time_macros, "compiles served but not stored: a source or header uses __DATE__, "        \
		       "__TIME__ or __TIMESTAMP__")                                                \
	X(name_free, "results of name-free compiles (the NVRTC shim's) stored for every program "  \
		     "name: the name is not in them")                                              \
	X(name_bound,                                                                              \
	  "results of name-free compiles stored for their program name only: the name is in them") \
	X(deps_learned,                                                                            \
	  "compiles stored under a key learnt from the files NVRTC read (the scan missed one)")    \
	X(include_tree_watch_hits,                                                                 \
	  "requests keyed with no stat call: their include tree is watched and unchanged")         \
	X(include_tree_stat_walks,                                                                 \
	  "requests keyed by re-checking a stored include manifest file by file")                  \
	X(include_watch_fallbacks, "include trees left to the stat walk: watch budget, inotify "   \
				   "limit, or a network file system")                              \
	X(include_watch_invalidations, "watched include trees invalidated by a change under them") \
	X(include_watch_overflows,                                                                 \
	  "inotify event queue overflows (every watched tree invalidated)")                        \
	X(include_rehashed,                                                                        \
	  "compiles stored after re-reading headers changed just before them (same bytes)")        \
	X(tree_requests, "requests whose client read and sent its include directories (a tree)")   \
	X(tree_digest_hits,                                                                        \
	  "tree requests served on the tree's digest alone (no file list, no bytes)")              \
	X(busy_refusals,                                                                           \
	  "connections, requests and replies refused or dropped by a resource bound")              \
	X(remote_hits, "local misses served from the remote tier (verified, then stored locally)") \
	X(remote_misses, "remote lookups that found no value (the request compiled)")              \
	X(remote_errors, "remote commands that failed: timeouts, lost connections, error replies") \
	X(remote_rejected, "remote values that failed verification (never served)")                \
	X(remote_publishes, "results written to the remote tier")                                  \
	X(remote_deps_published, "dependency records (include sets learnt from what NVRTC read) "  \
				 "written to the remote tier")                                     \
	X(remote_deps_used, "requests keyed by a dependency record from the remote tier that "     \
			    "matched this machine's files")                                        \
	X(remote_bytes_in, "bytes of values fetched from the remote tier")                         \
	X(remote_bytes_out, "bytes of values written to the remote tier")                          \
	X(rewarm_queued,                                                                           \
	  "kept requests queued to be compiled again for a new toolchain (re-warm)")               \
	X(rewarm_done, "re-warm requests that ended with an entry for this toolchain (compiled, "  \
		       "or there already)")                                                        \
	X(rewarm_failed,                                                                           \
	  "re-warm requests that failed (a compile error is kept as a negative entry)")            \
	X(rewarm_cpu_s, "CPU seconds of re-warm compiles (whole seconds; rewarm_cpu_ms is finer)") \
	X(rewarm_cpu_ms, "CPU milliseconds of re-warm compiles")                                   \
	X(compiler_mismatches, "worker results not stored: the worker loaded another compiler "    \
			       "than the key's (the toolchain changed on disk)")                   \
	X(toolchain_switches, "times the daemon switched to a toolchain changed on disk (SIGHUP, " \
			      "or a worker that loaded it)")

enum jc_counter {
#define X(name, help) JC_CTR_##name,
	JC_COUNTERS(X)
#undef X
	    JC_CTR__COUNT
};

extern const char *const jc__counter_names[JC_CTR__COUNT];
extern const char *const jc__counter_help[JC_CTR__COUNT];

/*
 * The counters of one cache (daemon/cachedir.h owns them) and whether they
 * changed since they were last written. Every change goes through
 * jc__count() or jc__counters_zero(), which mark them dirty, so that the
 * next flush and the flush at a clean stop write them. Not thread-safe: the
 * daemon changes them on its loop thread only.
 */
struct jc_counters {
	uint64_t v[JC_CTR__COUNT];
	int dirty; /* changed since the last jc__counters_take() */
};

/* Adds n to counter c (n = 0 changes nothing). */
static inline void jc__count(struct jc_counters *cs, enum jc_counter c, uint64_t n)
{
	if (n) {
		cs->v[c] += n;
		cs->dirty = 1;
	}
}

/* Sets every counter to 0 (`stats --zero`). */
void jc__counters_zero(struct jc_counters *cs);

/* When dirty: copies the values to out, clears dirty and returns 1; else 0. */
int jc__counters_take(struct jc_counters *cs, uint64_t out[JC_CTR__COUNT]);

#endif
