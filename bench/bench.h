/* SPDX-License-Identifier: MIT */
/*
 * jitcache-bench internals: a daemon of its own on a temporary cache, the
 * measurements, and the report. The benchmark is one process that forks its
 * client processes; nothing here is thread-safe.
 *
 * Errors end the run: bench_die() prints the message, stops the daemon,
 * keeps the temporary directory (its daemon.log explains most failures) and
 * exits 1. Figures that miss their target are not errors.
 */
#ifndef JC_BENCH_H
#define JC_BENCH_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/util.h" /* jc__now_ns */
#include "jitcache/jitcache.h"
#include "tests/lib/core.h"

/* How much to measure: --quick, the default (full) and --tiny (smoke test). */
struct bench_plan {
	const char *name; /* "quick", "full", "tiny" */
	size_t hit_iters; /* timed hits (and raw reads) per object size */
	double tput_s;	  /* seconds each throughput level runs */
	int levels[5];	  /* client processes per throughput level */
	size_t n_levels;
	size_t scale[3]; /* index sizes, ascending */
	size_t n_scale;
	size_t scale_iters;    /* timed hits per scale figure */
	int sf_rounds;	       /* single-flight rounds (the median counts) */
	int sf_clients;	       /* cold clients on one key */
	int compile_reps;      /* NVRTC compiles per example (the median counts) */
	int large;	       /* measure the CUB (~160 KiB) object too */
	size_t rewarm_entries; /* SAXPY entries re-warmed (1,000 in full) */
};

/* The daemon under test: tests/lib's (root core.dir holds cache/, sock,
 * daemon.log and empty.conf) with the bench's flags. */
struct bench_daemon {
	struct jtl_daemon core;
	char conf[JTL_ROOT_MAX + 16];
	const char *confinement; /* --confinement for the next start; NULL: the daemon's choice */
	const char *extra[8];	 /* more flags (NULL-terminated; borrowed), e.g. --remote URL */
};

/* Prints "jitcache-bench: <message>", stops the daemon, exits 1. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* --- daemon.c ------------------------------------------------------------ */

/* Makes the temporary root (jtl_daemon_init: under $TMPDIR, else /tmp) and finds jitcached:
 * $JITCACHED, else next to this program's build directory
 * (<dir>/../daemon/jitcached) or beside it (<dir>/jitcached). Dies on failure. */
void bench_daemon_init(struct bench_daemon *d);
/* Spawns jitcached on d and waits until it answers a handshake; returns the
 * milliseconds from fork to that answer. Dies if it exits or takes 30 s. */
double bench_daemon_start(struct bench_daemon *d);
/* SIGTERM, then waits; dies unless it exits 0. */
void bench_daemon_stop(struct bench_daemon *d);
/* Kills a running daemon; removes the root unless keep_root. Idempotent. */
void bench_daemon_cleanup(struct bench_daemon *d, int keep_root);
/* A connected client (dies on failure). */
jc_client *bench_connect(const struct bench_daemon *d);
/* The daemon's integer statistic name (jitcachectl stats), through c. */
int64_t bench_stat(jc_client *c, const char *name);

/* --- measure.c ----------------------------------------------------------- */

/* Percentiles in microseconds. */
struct bench_lat {
	double p50, p99, p999;
};

/* Sorts ns[0..n) and fills out. */
void bench_lat_of(uint64_t *ns, size_t n, struct bench_lat *out);

/* The artifact a request gives, fetched once (a miss or a hit). */
struct bench_object {
	size_t size;
	char path[PATH_MAX + 64]; /* DIR/objects/ab/<hash> */
	char key[33];
	double compile_ms; /* NVRTC time the daemon reports */
	double miss_ms;	   /* client wall time of that first request */
	int was_miss;
};

/* One request of r through c, timed (ns, client wall time); dies unless the
 * answer has cache status want and size bytes. */
uint64_t bench_timed_request(jc_client *c, const jc_request *r, jc_cache_status want, size_t size);

/* Sends r once through c, checks the answer, fills o (path under cache). */
void bench_fetch(jc_client *c, const jc_request *r, const char *cache, struct bench_object *o);

/* Warm hit latency of r through c, and in the same run, interleaved, the
 * open + read + close of o's object file; iters of each. */
void bench_hits_vs_raw(jc_client *c, const jc_request *r, const struct bench_object *o,
		       size_t iters, struct bench_lat *hit, struct bench_lat *raw);

/* The floor under any socket protocol here: p50 in microseconds of a
 * 64-byte write + read round trip between this process and a child over a
 * Unix stream socket pair. polling: each side waits as a client and the
 * daemon do (polls up to 50 us, yielding the CPU, then blocks): the floor a
 * hit is held to; else both block at once. */
double bench_socket_floor_us(size_t iters, int polling);

/* p50 in microseconds of XXH3-128 over o's bytes in memory: the check the
 * client library makes of every object it is served. */
double bench_hash_us(const struct bench_object *o, size_t iters);

/* The cost of a hit's own open file description: the daemon's reopen of o
 * (openat under objects/ + fstat + close) against the dup of a kept
 * descriptor that earlier versions sent (fcntl + fstat + close), iters of
 * each, interleaved in blocks of 50. */
void bench_reopen_vs_dup(const struct bench_object *o, size_t iters, struct bench_lat *reopen,
			 struct bench_lat *dup);

/* Hits per second of procs client processes hitting r for secs seconds. */
double bench_throughput(const struct bench_daemon *d, const jc_request *r, int procs, double secs);

/* One single-flight round: clients processes request r (a key not yet in the
 * cache) at once. Fills the compiles the daemon ran for it (stats delta) and
 * the wall time from the start signal to the last answer. */
void bench_single_flight(const struct bench_daemon *d, const jc_request *r, int clients,
			 int64_t *compiles, double *wall_ms);

/* --- python.c ------------------------------------------------------------ */

/*
 * Hit latency of jitcache.Client.compile from Python beside the C client's,
 * interleaved in blocks in one run: r (a request for source file src_path,
 * program name, arch and one name expression expr, already cached as o)
 * through c, and the same compile from a Python process running
 * bench/python_hit.py on d's socket. The interpreter is $JC_PYTHON, else
 * python3 on PATH; the package and library come from the source and build
 * trees. iters hits of each. Returns 0, or -1 when Python could not be run
 * (why: the reason, whylen bytes); dies on other failures.
 */
int bench_python_hits(const struct bench_daemon *d, jc_client *c, const jc_request *r,
		      const struct bench_object *o, const char *src_path, const char *name,
		      const char *arch, const char *expr, size_t iters, struct bench_lat *py,
		      struct bench_lat *cl, char *why, size_t whylen);

/* --- scale.c ------------------------------------------------------------- */

struct bench_scale {
	size_t entries;	      /* entries in the index */
	double insert_s;      /* bulk insert time for this step */
	double ready_ms;      /* restart: fork to first handshake answered */
	double first_hit_us;  /* first hit after the restart */
	double hit_p50_us;    /* hits over a fixed 1000-key working set */
	double spread_p50_us; /* hits on keys drawn uniformly from all entries */
};

/* Grows the cache of d (daemon running, nothing else in it but what the run
 * compiled) to each size of plan->scale in turn: stop the daemon, bulk-insert
 * entries (see scale.c), restart, measure. out: plan->n_scale figures. */
void bench_scale_run(struct bench_daemon *d, const struct bench_plan *plan,
		     struct bench_scale *out);

/* --- rewarm.c ------------------------------------------------------------ */

struct bench_rewarm {
	size_t entries;	       /* SAXPY-sized entries re-warmed */
	double total_s;	       /* the re-warm, start to end (1 re-warm worker) */
	double per_entry_ms;   /* total_s / entries */
	double cpu_s;	       /* CPU time of its compiles */
	double zstd_bytes;     /* a request, encoded and zstd-compressed, mean */
	double extra_bytes;    /* store bytes per entry: keep-requests yes - no */
	size_t store_entries;  /* ... over this many (entries compiled, the rest bulk) */
	double miss_idle_ms;   /* a client's miss, idle daemon (median) */
	double miss_rewarm_ms; /* the same during the re-warm (median) */
};

/* Fills two daemons (requests kept, and not) with plan->rewarm_entries
 * SAXPY variants of saxpy (borrowed), compares their stores, then restarts
 * the first with another toolchain identity (JITCACHE_TEST_NVRTC_ID) and
 * times the re-warm it starts, and client misses during it and after. */
void bench_rewarm_run(const struct bench_plan *plan, jc_request *saxpy, struct bench_rewarm *out);

/* Makes r's key fresh (its application ABI string: what, i, pid, time). */
void bench_freshen(jc_request *r, const char *what, int i);

/* A request for the tiny kernel (~3.5 KiB of cubin for sm_90); variant != 0
 * adds a comment line "// entry <variant>" that changes the key, not the
 * code. Dies on failure. */
jc_request *bench_tiny_request(uint64_t variant);

/* --- shim.c -------------------------------------------------------------- */

struct bench_shim {
	struct bench_lat hit;	/* create -> compile -> get CUBIN -> destroy, served */
	double real_compile_ms; /* the same with the real NVRTC, median of compile_reps */
	double version_shim_ns; /* nvrtcVersion through the shim, mean */
	double version_real_ns; /* nvrtcVersion of the real library, mean */
};

/* The shim (JC_SHIM_LIB, else the build tree's) against d's daemon, with the
 * SAXPY source saxpy_src (NUL-terminated). */
void bench_shim(const struct bench_daemon *d, const struct bench_plan *plan, const char *saxpy_src,
		struct bench_shim *out);

/* --- paths.c: the client library's other paths -------------------------- */

/* connect + handshake with d, iters times (out: percentiles); returns p50 us. */
double bench_connect_us(const struct bench_daemon *d, size_t iters, struct bench_lat *out);
/* n fresh processes (jitcache-fresh-hit, linked with the shared client
 * library), one after the other, each connecting to d and asking for the
 * SAXPY example (src_path, name expression expr, sm_90: cached by then, so
 * a hit): the time from fork to main (exec), jc_client_connect (connect),
 * the first jc_compile with its check (hit) and the daemon's time in it
 * (server, JC_TIME_SERVER). Dies on failure. */
void bench_fresh_process(const struct bench_daemon *d, const char *src_path, const char *expr,
			 size_t n, struct bench_lat *exec, struct bench_lat *connect,
			 struct bench_lat *hit, struct bench_lat *server);
/* p50 us of a hit of r on a handle whose connection was just broken
 * (shutdown): reconnect, handshake, resend, hit. */
double bench_reconnect_hit_us(const struct bench_daemon *d, const jc_request *r, size_t iters);
/* The first request (r, a miss) of a client with no daemon running: it
 * auto-starts one on a fresh cache directory under d->root; returns the ms
 * from jc_client_open to the result, *open_ms to the handshake. Stops that
 * daemon afterwards. */
double bench_autostart_ms(const struct bench_daemon *d, const jc_request *r, double *open_ms);
/* r compiled in-process by a client with no daemon (fallback), the first
 * time (loading NVRTC) and the median of reps more, and the median of reps
 * plain NVRTC compiles of the same request, in ms. */
void bench_fallback_ms(const struct bench_daemon *d, const jc_request *r, int reps,
		       double *fallback_first, double *fallback, double *plain);

/* --- remote.c ------------------------------------------------------------ */

#define BENCH_LEARNED_PHASES 10

/* The remote tier's figures (docs/fleet.md), side by side with a
 * daemon without it. */
struct bench_remote {
	int ran; /* 0: no redis-server here (why says so) */
	char why[160];
	double hit_saxpy_p50_us, hit_cub_p50_us; /* remote hit: fetch + verify + publish + serve */
	double value_saxpy, value_cub;		 /* bytes of each value in Redis */
	double local_hit_p50_us, local_hit_base_p50_us; /* remote up; no remote */
	double down_hit_p50_us, down_hit_base_p50_us;	/* Redis down (back-off tripped); none */
	double down_miss_ms, down_miss_base_ms;		/* median cold compile, same */
	double redis_bytes_per_entry; /* used_memory growth per SAXPY-sized value */
	double remote_hits_per_s;     /* remote hits/s, one client, serial */
	double redis_get_per_s;	      /* redis-benchmark GET/s of that value size; 0: none */
	/* The CUB example as jitcachectl sends it (its key learnt from what
	 * NVRTC read): the first request of fresh daemons (empty cache
	 * directory) served through the dependency record and the value. */
	int learned_ran;
	double learned_fresh_ms;	/* p50 client wall time of that request */
	double learned_compile_ms;	/* the writer's NVRTC compile of it */
	int64_t learned_fresh_compiles; /* compiles on the fresh daemons (want 0) */
	int learned_fresh_n;
	int64_t learned_hit_gets; /* Redis GETs during learned_hits local hits (want 0) */
	int learned_hits;
	double learned_hit_p50_us,
	    learned_hit_base_p50_us; /* its local hit: remote up; no remote */
	int64_t learned_hit_walks;   /* of those hits, keyed by a stat walk (want 0: watched) */
	/* That first request's phases inside the daemon (ms, medians over the
	 * fresh daemons; from their info log: bench_learned_phases[] names
	 * them, in order). */
	double learned_phase_ms[BENCH_LEARNED_PHASES];
};

/* For each phase: a log line's tag, the label of its number in that line, and its figure's label.
 */
extern const char *const bench_learned_phases[BENCH_LEARNED_PHASES][3];

/* Runs a redis-server of its own (Unix socket, in a temporary directory)
 * and two daemons on it beside local (running, no remote), measuring with
 * saxpy, cub and cub_ctl (the CUB example as jitcachectl sends it: its
 * directory the first -I) (NULL: left out). Dies on errors. */
void bench_remote_run(const struct bench_daemon *local, const struct bench_plan *plan,
		      jc_request *saxpy, jc_request *cub, jc_request *cub_ctl,
		      struct bench_remote *out);

#endif
