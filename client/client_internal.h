/* SPDX-License-Identifier: MIT */
/* What jitcachectl and tests use of the client library beyond the public API. */
#ifndef JC_CLIENT_INTERNAL_H
#define JC_CLIENT_INTERNAL_H

#include "common/req.h"
#include "jitcache/jitcache.h"
#include "proto/proto.h"

struct jc_request {
	struct jc_req req;
};

/* Runs an admin command on the daemon. out is filled (cleared first by the
 * caller) on 0; returns the transport error otherwise (message in c). */
int jc__client_admin(jc_client *c, const struct jc_admin_req *req, struct jc_admin_reply *out);

/*
 * Test-only: asks the worker that compiles r to misbehave (JC_FAULT_CRASH,
 * JC_FAULT_HANG or JC_FAULT_ALLOC from req.h; JC_FAULT_NONE clears it). The
 * fault is not part of the cache key. A daemon started without
 * JITCACHE_TEST_FAULTS=1 in its environment refuses such requests with
 * JC_EINVAL. Returns 0, or JC_EINVAL for a value outside JC_FAULT_*.
 */
int jc__request_set_test_fault(jc_request *r, uint32_t fault);

/* Asks for a name-free entry (req.h name_free; the NVRTC shim), listed
 * under the source name (its display name). Call after
 * jc_request_set_source. 0, JC_EINVAL (no source yet) or JC_ENOMEM. */
int jc__request_set_name_free(jc_request *r);

/* The raw socket of c (for tests that send malformed frames); -1 without a daemon. */
int jc__client_fd(const jc_client *c);
/* What the daemon c is connected to said in its HELLO_OK: its pid (0: none
 * connected) and the cache directory it serves (NULL: none connected). */
uint32_t jc__client_daemon_pid(const jc_client *c);
/* The socket c is connected to ("" when none) and the system socket it
 * would try (NULL: skipped); both borrowed from c. */
const char *jc__client_socket(const jc_client *c);
const char *jc__client_system_socket(const jc_client *c);
const char *jc__client_daemon_dir(const jc_client *c);
/* The NVRTC version and supported architectures ("sm_75 sm_80 ...") of the
 * daemon c is connected to, from its HELLO_OK (protocol 3), borrowed from c
 * until its connection changes. 0, or JC_ENOTFOUND (not connected, or a
 * daemon older than protocol 3: ask with the admin command "version"). */
int jc__client_toolchain(const jc_client *c, const char **archs, const char **nvrtc_version);

/*
 * The socket of the daemon that serves cache directory dir, from
 * DIR/JC_SOCKET_POINTER (a regular file of ours or root's, not a link),
 * into out (len bytes). 0, or JC_ECONNECT (none: message in err).
 */
int jc__dir_socket(const char *dir, char *out, size_t len, char *err, size_t errlen);

/* A client with o's settings resolved (as jc_client_open) but not
 * connected; jc__client_search then runs steps 1-4 only (no auto-start).
 * For `jitcachectl config`. Errors as jc_client_open's. */
int jc__client_new(const jc_options *o, jc_client **out);
int jc__client_search(jc_client *c);
/* `jitcachectl config`: each setting of c (opened from o, which may be
 * NULL) with its value and where it came from ("option", an environment
 * variable's name, "default", ...). */
typedef void (*jc__config_fn)(const char *name, const char *value, const char *source, void *ctx);
void jc__client_config(const jc_options *o, jc_client *c, jc__config_fn emit, void *ctx);

/* --- client-read include trees (tree.c) --- */
struct jc_tree_cache;
/*
 * The request in as sent to a daemon of another uid: *out is a shallow copy
 * of in plus a tree (req.h) of what in's compile may read from its include
 * directories but those inside toolkit (borrowed; the daemon's toolkit
 * include tree from its HELLO_OK; NULL or "": none), which the daemon
 * compiles from its toolkit (common/includes.h, jc__inc_in_toolkit), found by the daemon's scanner
 * (common/includes.h) with the cache *cache (made on first use; free with jc__tree_cache_free): the
 * hash memo and the last request's include set (the client's manifest, re-checked with
 * jc__inc_check), so that an unchanged tree costs stat calls, not reads or a scan: with bytes 0 the
 * tree's key digest alone (the JC_TREE_DIGEST lookup round: computed from the files' hashes as the
 * daemon would, once while the set is unchanged), with 1 their bytes (read
 * again, and checked against the scan's hash). The tree of a request that the cache scanned or
 * checked is then watched (common/watch.h) while the process lives, so that an unchanged tree costs
 * nothing: *walk_ns is the time spent on the file system (0 when the watch answered). Free out's
 * tree with jc__req_tree_clear (req.h). 0; JC_EINVAL (a file outside the -I directories, a computed
 * #include: message names it), JC_EIO, JC_ETOOBIG, JC_ENOMEM, with a message in err. Not
 * thread-safe for one memo pointer.
 */
int jc__tree_build(struct jc_tree_cache **cache, const char *toolkit, const struct jc_req *in,
		   int bytes, struct jc_req *out, uint64_t *walk_ns, char *err, size_t errlen);
void jc__tree_cache_free(struct jc_tree_cache *cache);

/* --- auto-start (autostart.c) --- */
struct jc_autostart {
	const char *daemon;    /* jitcached to run; NULL: $JITCACHED, SBINDIR, $PATH */
	const char *cache_dir; /* --cache-dir (created 0700 when missing) */
	const char *socket;    /* --socket; the lock is SOCKET.lock */
	int idle_exit_s;       /* --idle-exit */
	int wait_ms;	       /* the whole attempt at most this long (lock and answer) */
};
/*
 * Starts a jitcached as a says unless answer(ctx) (which tries to connect
 * and do the handshake, 0 on success) succeeds once the lock is held, then
 * waits until answer(ctx) succeeds or the daemon exits; all of it within
 * a->wait_ms. The lock SOCKET.lock is taken only when the socket's directory
 * is this user's and not writable by others, and the lock file is this
 * user's; while a starter of this user (or the daemon it started, which
 * inherits the lock) holds it, answer(ctx) is polled instead. Returns 0
 * (answer succeeded: c connected) or JC_ECONNECT / JC_EIO with a message in
 * err (the last line of the daemon's log when it exited).
 */
int jc__autostart(const struct jc_autostart *a, int (*answer)(void *ctx), void *ctx, char *err,
		  size_t errlen);

/* --- in-process fallback (fallback.c) --- */
/*
 * Loads NVRTC (nvrtc_path, else as jitcache.h's step 6 says) and nvJitLink
 * once per process; desc gets "NVRTC X.Y from PATH". 0, or JC_ENOTSUP
 * (message in err). Thread-safe.
 */
int jc__fallback_load(const char *nvrtc_path, char *desc, size_t desclen, char *err, size_t errlen);
/* Runs req in this process (after jc__fallback_load succeeded); res gets
 * what a worker's RESULT holds, cache JC_UNCACHED. Returns res->status. */
int jc__fallback_run(const struct jc_req *req, struct jc_res *res);

/* The forced load paths of jitcache_cuda.h: JITCACHE_FORCE_PTX=1 or
 * JITCACHE_FORCE_CUBIN=1 in the environment. */
enum { JC__FORCE_NONE = 0, JC__FORCE_PTX = 1, JC__FORCE_CUBIN = 2 };

/*
 * The target for a device of compute capability cc (10 * major + minor)
 * given NVRTC's supported architectures as jitcached lists them ("sm_75
 * sm_80 ..."). force JC__FORCE_NONE: "sm_<cc>" when cc is listed, else
 * "compute_<N>" for the highest listed N below cc (jc_cuda_resolve_target
 * says why); JC__FORCE_PTX: "compute_<N>" for the highest listed N at or
 * below cc; JC__FORCE_CUBIN: "sm_<cc>" only. arch gets len (>= 16) bytes.
 * Returns 0; JC_ENOTSUP (nothing fits); JC_EPROTO (a malformed list);
 * JC_EINVAL (NULL, len < 16). Thread-safe.
 */
int jc__cuda_pick_target(int cc, const char *supported, int force, char *arch, size_t len);

/*
 * The one target a forced load fetches for a request that names its
 * targets (requested: "sm_90", "compute_90" or a list "sm_80,sm_90,compute_90"):
 * JC__FORCE_PTX: "compute_<N>" for the highest N at or below cc among the
 * compute_N and sm_N[a|f] of requested (a cubin's own architecture's PTX);
 * JC__FORCE_CUBIN: "sm_<cc>" (with the a/f of a listed sm_<cc>a/f) when
 * requested holds sm_<cc>[a|f] or compute_<cc>. Returns 0, JC_ENOTSUP (no
 * target fits), JC_EINVAL (NULL, len < 16, a malformed item). Thread-safe.
 */
int jc__cuda_pick_forced(int cc, const char *requested, int force, char *arch, size_t len);

#endif
