/* SPDX-License-Identifier: MIT */
/*
 * jitcache client API: ask jitcached for the artifact (cubin, PTX or
 * LTO-IR) of an NVRTC compile or an nvJitLink link, compiling it at most once
 * per cache key across all processes of the machine.
 *
 * Conventions for every function below:
 *  - int results are 0 on success or a negative JC_E* code; jc_strerror()
 *    names a code and jc_client_errmsg() gives the last detailed message.
 *  - Strings and buffers passed in are borrowed: they are copied before the
 *    call returns, the caller keeps ownership.
 *  - Pointers returned by accessors are owned by the object they come from
 *    and stay valid until that object is freed.
 *  - A handle is not thread-safe: use one jc_client per thread, or serialise
 *    calls on it. Distinct handles may be used from distinct threads at once.
 *    After fork() a handle goes on in both processes: the child leaves the
 *    parent's connection and makes its own on its next call.
 *  - A cache must never be why a program fails: without a daemon the library
 *    starts one or compiles in-process (see jc_client_open).
 *  - The library never prints, never exits and never links libcuda.
 */
#ifndef JITCACHE_H
#define JITCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(JC_BUILDING_LIB)
#define JC_API __attribute__((visibility("default")))
#else
#define JC_API
#endif

#define JC_VERSION_MAJOR  0
#define JC_VERSION_MINOR  1
#define JC_VERSION_PATCH  0
#define JC_VERSION_STRING "0.1.0"

/*
 * Error codes: 0 is success, every failure is one of these (negative).
 * JC_ERRORS(X) is their one list: X(name, value, what jc_strerror() says).
 * Values are part of the ABI and never reused.
 */
#define JC_ERRORS(X)                                                                               \
	X(JC_EINVAL, -1, "invalid argument or request") /* bad argument or bad request field */    \
	X(JC_ENOMEM, -2, "out of memory")                                                          \
	X(JC_EIO, -3, "I/O error") /* read/write/socket failure (errno in message) */              \
	X(JC_ECONNECT, -4, "no daemon answers on the socket")                                      \
	X(JC_EPROTO, -5, "protocol error") /* malformed, truncated or unexpected frame */          \
	X(JC_ETOOBIG, -6, "frame or field too large") /* frame or field over its limit */          \
	X(JC_ECOMPILE, -7, "compile or link failed")  /* see the result log */                     \
	X(JC_ECRASH, -8, "compile worker crashed")                                                 \
	X(JC_ETIMEOUT, -9, "compile timed out") /* ran past --compile-timeout */                   \
	X(JC_ENOSPC, -10, "cache disk full")	/* nothing was stored */                           \
	X(JC_ECORRUPT, -11, "corrupt object")	/* an object failed its size/hash check */         \
	X(JC_EVERSION, -12, "version mismatch") /* protocol, schema or toolchain */                \
	X(JC_EDENIED, -13, "permission denied") /* peer not allowed to do this */                  \
	X(JC_ELOCKED, -14, "cache directory locked by another daemon") /* by its lock */           \
	X(JC_ENOTFOUND, -15, "not found")			       /* no such entry */         \
	X(JC_EBUSY, -16, "daemon busy or stopping") /* overloaded or shutting down */              \
	X(JC_EINTERNAL, -17, "internal error")	    /* a bug: the message says where */            \
	X(JC_ENOTSUP, -18, "not supported here")    /* no driver, no GPU, ... */

enum {
	JC_OK = 0,
#define JC_ERROR_ENUM_(name, value, text) name = value,
	JC_ERRORS(JC_ERROR_ENUM_)
#undef JC_ERROR_ENUM_
};

/* Opaque handles. */
typedef struct jc_client jc_client;   /* one connection to jitcached */
typedef struct jc_request jc_request; /* what to compile or link */
typedef struct jc_result jc_result;   /* the artifact, log and lowered names */

/* Requested artifact (enum values are part of the ABI). JC_FATBIN: one
 * fatbin holding a cubin per sm_NN target and the PTX of each compute_NN
 * target of a target list (jc_request_set_arch). */
typedef enum { JC_CUBIN = 1, JC_PTX = 2, JC_LTOIR = 3, JC_FATBIN = 4 } jc_output;
/* Link input types; the values equal nvJitLinkInputType's (nvJitLink.h). */
typedef enum {
	JC_LINK_CUBIN = 1,
	JC_LINK_PTX = 2,
	JC_LINK_LTOIR = 3,
	JC_LINK_FATBIN = 4,
	JC_LINK_OBJECT = 5,
	JC_LINK_LIBRARY = 6,
} jc_link_input;
/*
 * Where a result came from (`jitcachectl compile` prints the same as its
 * first word: miss, hit, negative-hit, joined, uncached, remote-hit).
 * JC_MISS: this request ran the compile (and it was stored). JC_HIT: served
 * from the daemon's own cache. JC_NEGATIVE_HIT: a cached compile failure.
 * JC_JOINED: waited on another request's compile of the same key (single
 * flight). JC_UNCACHED: compiled but not stored: no daemon could be had,
 * so this process compiled it with NVRTC itself (see jc_client_open;
 * jc_result_key() is then ""), or the daemon compiled it and would not
 * store it (a header changed during the compile, a time macro: see the
 * daemon's stats). JC_REMOTE_HIT: not in the daemon's cache, served from
 * its remote tier (another machine's compile, verified, then stored
 * locally); no compile ran. In every case JC_TIME_COMPILE is the compile
 * time of the entry (the original compile's, on another machine for a
 * remote hit), JC_TIME_TOTAL and JC_TIME_SERVER this request's.
 */
typedef enum {
	JC_MISS = 1,
	JC_HIT = 2,
	JC_NEGATIVE_HIT = 3,
	JC_JOINED = 4,
	JC_UNCACHED = 5,
	JC_REMOTE_HIT = 6,
} jc_cache_status;
/* Timings of a result (nanoseconds). */
typedef enum {
	JC_TIME_TOTAL = 0,   /* jc_compile call, client side */
	JC_TIME_SERVER = 1,  /* inside the daemon, incl. waiting on the compile */
	JC_TIME_COMPILE = 2, /* NVRTC/nvJitLink time when the entry was compiled (its
			      * original compile, for a hit; not this request's) */
	/* Client side, a request whose include trees the client reads (a daemon
	 * of another uid, or JITCACHE_SEND_HEADERS=1): scanning or re-checking
	 * them on disk (stat calls). 0 when the client's inotify watches showed
	 * them unchanged since the last check (JITCACHE_CLIENT_WATCHES=0: never),
	 * or it read none. */
	JC_TIME_INCLUDES = 3,
} jc_timing;

/*
 * --- Finding a daemon, and what happens without one -------------------------
 *
 * jc_client_open() looks for a daemon in this order and uses the first that
 * answers the handshake:
 *   1. the socket given with jc_options_set_socket() (then steps 2-5 are
 *      skipped: that daemon or none), or the daemon of the directory given
 *      with jc_options_set_cache_dir(), found through the file
 *      DIR/jitcached.socket-path that daemon writes, and which refuses the
 *      handshake unless it serves DIR itself (then steps 2-4 are skipped);
 *   2. $JITCACHE_SOCKET;
 *   3. the per-user socket, $XDG_RUNTIME_DIR/jitcached.sock;
 *   4. the system socket, /run/jitcached/jitcached.sock
 *      (jc_options_set_system_socket(), $JITCACHE_SYSTEM_SOCKET; "" skips it);
 *   5. auto-start: a per-user jitcached on the default cache directory
 *      ($JITCACHE_DIR, else $XDG_CACHE_HOME/jitcache, else ~/.cache/jitcache;
 *      or the jc_options_set_cache_dir() one), listening where such a daemon
 *      listens by default ($JITCACHE_SOCKET, else $XDG_RUNTIME_DIR/
 *      jitcached.sock, else DIR/jitcached.sock; DIR/jitcached.sock for an
 *      explicit cache dir), started with --idle-exit 600 (seconds;
 *      $JITCACHE_AUTOSTART_IDLE_EXIT, jc_options_set_idle_exit()), so it
 *      exits once unused. One process starts it at a time, under the lock
 *      file SOCKET.lock, which the daemon started holds while it lives: the
 *      others wait for it to answer. The lock is taken only where the
 *      socket's directory belongs to the calling user and nobody else may
 *      write it, and only when the lock file is that user's; anywhere else
 *      there is no auto-start (the message says why), and another user's
 *      lock is never waited on. The whole attempt (the lock, the daemon's
 *      start) takes at most 1 s before step 6, or 30 s with fallback
 *      "error"; a daemon still starting then serves later calls. Its stderr
 *      goes to DIR/jitcached.log.
 *      The jitcached started is: jc_options_set_daemon(), else $JITCACHED,
 *      else the installed one (SBINDIR/jitcached, as configured at build),
 *      else the first `jitcached` on $PATH. On by default;
 *      jc_options_set_autostart(), $JITCACHE_AUTOSTART=0|1;
 *   6. in-process fallback: jc_compile() runs NVRTC (and nvJitLink for link
 *      jobs) in the calling process, loaded with dlopen the first time (the
 *      library is not linked with them): jc_options_set_nvrtc(), else
 *      $JITCACHE_REAL_NVRTC, else libnvrtc.so.<major> of the toolkit the
 *      library was built with, through the loader's search path, then from
 *      that toolkit's lib64 directory; libnvJitLink.so.<major> likewise
 *      (without it a link job fails with JC_ENOTSUP). A library that holds
 *      this library's own code (the jitcache NVRTC shim, which has NVRTC's
 *      soname) is refused: the shim names the real NVRTC. Results have the
 *      status JC_UNCACHED and the same shape as the daemon's (bytes, log,
 *      lowered names); nothing is cached. The first fallback of a handle
 *      reports one warning through the log callback (jc_options_set_log);
 *      the library itself never prints. jc_options_set_fallback(),
 *      $JITCACHE_FALLBACK=compile|error: with "error", jc_client_open()
 *      fails with JC_ECONNECT instead (message: what was tried). Any
 *      other value of the variable means "compile" (the default), and
 *      jc_client_open() reports a warning naming it through the log
 *      callback.
 * A daemon is used only when it runs as the calling user or as root, or (not
 * for the per-user sockets of steps 3 and 5) as the owner of the directory
 * holding its socket; any other refuses as JC_EDENIED (its uid in the
 * message) and the search goes on. In a set-user-ID or
 * set-group-ID process (AT_SECURE) the library reads no environment
 * variable (secure_getenv): the defaults apply.
 * A handle in fallback mode looks for a daemon again (steps 1-4, and
 * auto-start at most every 30 s) before each jc_compile(), so it uses a
 * daemon as soon as one is there; those attempts cost a few microseconds.
 *
 * Reconnect: a compile request is idempotent, so when a connection breaks
 * (daemon restarted, the connection closed by --idle-timeout, the daemon
 * killed in the middle of a request) or the daemon answers that it is
 * shutting down or busy (JC_EBUSY), jc_compile() finds a daemon again as
 * above and resends, up to jc_options_set_retries() times (default 5) with
 * waits of 20 ms doubling each time (20 + 40 + ... + 320 ms); then it falls
 * back (step 6) or fails (JC_EIO / JC_ECONNECT / JC_EBUSY, with "error").
 * None of this costs anything on a connection that works.
 *
 * Environment variables are read by jc_client_open(); options set on a
 * jc_options win over them.
 */

/* Options of jc_client_open(). Opaque, so it can grow. One jc_options may
 * be read by several jc_client_open() calls at once, but not changed
 * meanwhile. Every setter copies its strings and returns 0 or the error it
 * names. */
typedef struct jc_options jc_options;
typedef enum { JC_FALLBACK_COMPILE = 1, JC_FALLBACK_ERROR = 2 } jc_fallback;
/* Severity of a log callback message (syslog's numbers). */
enum { JC_LOG_WARNING = 4, JC_LOG_NOTICE = 5, JC_LOG_INFO = 6 };
/*
 * Receives the library's messages: level (JC_LOG_*), message (borrowed, valid
 * during the call, no trailing newline). Called on the thread that called
 * into the library, from jc_client_open() or jc_compile(); it must not call
 * back into the same handle.
 */
typedef void (*jc_log_cb)(void *ctx, int level, const char *message);

/* A set of options, all unset (environment or default). Errors: JC_ENOMEM. */
JC_API int jc_options_new(jc_options **out);
JC_API void jc_options_free(jc_options *o); /* NULL is accepted */
/* Step 1: only the daemon on this socket (path copied; NULL unsets). */
JC_API int jc_options_set_socket(jc_options *o, const char *path);
/* Step 1: only the daemon of cache directory dir (copied; NULL unsets); a
 * relative dir is taken against the working directory at jc_client_open. */
JC_API int jc_options_set_cache_dir(jc_options *o, const char *dir);
/* Step 4's socket; "" skips the step; NULL: $JITCACHE_SYSTEM_SOCKET, else
 * /run/jitcached/jitcached.sock. */
JC_API int jc_options_set_system_socket(jc_options *o, const char *path);
/* Step 5 on (1) or off (0); -1: $JITCACHE_AUTOSTART, else on. Errors: JC_EINVAL. */
JC_API int jc_options_set_autostart(jc_options *o, int on);
/* The jitcached executable step 5 starts (copied; NULL: see above). */
JC_API int jc_options_set_daemon(jc_options *o, const char *path);
/* --idle-exit of an auto-started daemon, seconds >= 1 (0: the environment
 * or 600). Errors: JC_EINVAL. */
JC_API int jc_options_set_idle_exit(jc_options *o, int seconds);
/* Step 6: JC_FALLBACK_COMPILE or JC_FALLBACK_ERROR (0: $JITCACHE_FALLBACK,
 * else compile). Errors: JC_EINVAL. */
JC_API int jc_options_set_fallback(jc_options *o, jc_fallback f);
/* The NVRTC library step 6 loads (copied; NULL: see above). The first load
 * in a process is kept for its lifetime. */
JC_API int jc_options_set_nvrtc(jc_options *o, const char *path);
/* Reconnect-and-resend tries per call, 0..20 (-1: the default, 5). Errors: JC_EINVAL. */
JC_API int jc_options_set_retries(jc_options *o, int tries);
/* The log callback (NULL: messages are dropped) and its ctx (borrowed, kept). */
JC_API int jc_options_set_log(jc_options *o, jc_log_cb cb, void *ctx);

/*
 * Opens a client as described above: o (borrowed; NULL: all defaults) is
 * copied. *out is owned by the caller: free it with jc_client_close(). It
 * returns 0 with a handle whether a daemon was found or the fallback will
 * compile (jc_client_socket() tells); on failure *out is NULL and the
 * message is kept for jc_client_errmsg(NULL) on the calling thread.
 * The handshake with each daemon is bounded (10 s); a daemon that answers
 * but refuses (another cache directory, a protocol version, a uid not
 * allowed) ends the search with its error when it was named in step 1,
 * else the search goes on. After sending a request, the client polls its
 * socket for up to $JITCACHE_CLIENT_SPIN_US microseconds (read at open;
 * default 50, 0 never) before it sleeps, when the previous answer on this
 * connection came within that time: hits then do, and sleeping through them
 * costs wake-ups that on virtual machines cost more than the hit itself.
 * It yields the CPU (sched_yield) between polls.
 * Errors: JC_ECONNECT (no daemon, fallback "error"), JC_EINVAL (the daemon
 * of step 1 serves another directory, a path too long), JC_EVERSION,
 * JC_EDENIED, JC_EBUSY, JC_EPROTO, JC_EIO, JC_ENOMEM.
 */
JC_API int jc_client_open(const jc_options *o, jc_client **out);
/*
 * jc_client_open() with socket_path as jc_options_set_socket(), no
 * auto-start and fallback "error": that daemon or JC_ECONNECT (what
 * jitcachectl --socket does). socket_path NULL: jc_client_open(NULL, out),
 * every step with its defaults. Reconnects as above either way.
 */
JC_API int jc_client_connect(const char *socket_path, jc_client **out);
/* The socket of the daemon c is connected to (owned by c, valid until the
 * next call on c), or NULL while it compiles in-process (step 6). */
JC_API const char *jc_client_socket(const jc_client *c);
/* Closes and frees; NULL is accepted. */
JC_API void jc_client_close(jc_client *c);
/*
 * Bounds how long each later call on c waits for the daemon's answer, in
 * milliseconds (-1, the default: no bound; a compile takes as long as it
 * takes, up to the daemon's --compile-timeout). Past it the call returns
 * JC_ETIMEOUT and drops the connection (a late answer would be misread);
 * the next call connects afresh. The handshake is always bounded (10 s).
 * Errors: JC_EINVAL.
 */
JC_API int jc_client_set_timeout(jc_client *c, int timeout_ms);
/* The last error message of c (NULL: of the last failed connect on this
 * thread). Owned by the library; valid until the next call on c. Never NULL. */
JC_API const char *jc_client_errmsg(const jc_client *c);

/* Builds an empty request (job: compile to cubin). Errors: JC_ENOMEM. */
JC_API int jc_request_new(jc_request **out);
JC_API void jc_request_free(jc_request *r); /* NULL is accepted */
/* The CUDA C++ source: name is NVRTC's program name (e.g. "saxpy.cu"); size
 * bytes are copied. Errors: JC_EINVAL (NULL name/data), JC_ENOMEM. */
JC_API int jc_request_set_source(jc_request *r, const char *name, const void *data, size_t size);
/* An in-memory header that `#include "name"` finds, as NVRTC's headers /
 * includeNames. Names must be relative without "..". Errors: JC_EINVAL, JC_ENOMEM. */
JC_API int jc_request_add_header(jc_request *r, const char *name, const void *data, size_t size);
/* One NVRTC option, in order ("-std=c++17", "-DN=4"), as nvrtcCompileProgram
 * takes them; options naming the architecture are refused by the daemon:
 * use jc_request_set_arch. An include directory option, "-IDIR", "-I" "DIR"
 * (two options), "-I=DIR", "--include-path=DIR" or "--include-path" "DIR",
 * is all it takes to use DIR: jc_compile() sends it as "-I<absolute DIR>"
 * (a relative DIR is taken against the working directory at jc_compile(),
 * as NVRTC does) and the daemon reads the headers the compile may include
 * from it; their content enters the key (a header changed on disk is a new
 * key), relative to DIR, so the same bytes elsewhere share it. With a daemon
 * of another uid (a system daemon; or any, with $JITCACHE_SEND_HEADERS=1),
 * jc_compile() reads those headers itself, with this process's rights, and
 * sends them (docs/team-daemon.md): it then fails with
 * JC_EINVAL, naming the file, for an #include outside the -I directories,
 * and JC_EIO for a header it cannot read.
 * Errors: JC_EINVAL (NULL or empty), JC_ENOMEM. */
JC_API int jc_request_add_option(jc_request *r, const char *option);
/* Alias of jc_request_add_option("-I" path) kept from earlier versions: a
 * path that an -I option of the request already names is not added twice
 * (so code that gives both keeps its keys); others are searched after the
 * options' own -I directories, in the order added.
 * Errors: JC_EINVAL (NULL or empty), JC_ENOMEM. */
JC_API int jc_request_add_include_dir(jc_request *r, const char *path);
/*
 * Target architecture: "sm_90" (cubin), "sm_90a", "compute_90" (PTX).
 * Required. A comma-separated list of targets ("sm_80,sm_90,compute_90",
 * at most 16, no repeats) asks for one fatbin holding a cubin for each
 * sm_NN and the PTX of each compute_NN, in the order given: this call then
 * sets the output to JC_FATBIN (a later jc_request_set_output other than
 * JC_FATBIN makes jc_compile refuse the request). The order is part of the
 * key. The daemon compiles each target as its own single-target request
 * (output JC_CUBIN for sm_NN, JC_PTX for compute_NN, everything else the
 * same), in parallel, so those requests are hits afterwards, and puts the
 * results into the fatbin with nvFatbin or the toolkit's fatbinary tool;
 * without either jc_compile returns JC_ENOTSUP. A target NVRTC does not
 * support is refused (JC_EINVAL, naming it). Link jobs take one target.
 * Errors: JC_EINVAL (NULL or empty arch), JC_ENOMEM.
 */
JC_API int jc_request_set_arch(jc_request *r, const char *arch);
/* Requested output; JC_LTOIR compiles with -dlto; JC_FATBIN needs a target
 * list (a single target makes a fatbin of one image). Errors: JC_EINVAL. */
JC_API int jc_request_set_output(jc_request *r, jc_output output);
/* A name expression ("&saxpy<float>") whose lowered (mangled) name the
 * result will hold (nvrtcAddNameExpression / nvrtcGetLoweredName). */
JC_API int jc_request_add_name_expression(jc_request *r, const char *expr);
/* A link input for nvJitLink, linked in the order added; its type, name and
 * bytes enter the key. With a source the job is compile (NVRTC -dlto to
 * LTO-IR) + link; without, link only. The daemon adds "-lto" when an input
 * is LTO-IR (or a source is compiled), and "-ptx" for JC_PTX output, which
 * nvJitLink only makes when every input holds LTO-IR. A link error is a
 * JC_ECOMPILE result with nvJitLink's log (negative-cached like a compile
 * error); LTO-IR from a newer toolkit than the daemon's nvJitLink is refused
 * so, with a message saying that. size bytes copied. */
JC_API int jc_request_add_link_input(jc_request *r, jc_link_input type, const char *name,
				     const void *data, size_t size);
/* One nvJitLink option ("-lto", "-O3"); the architecture comes from set_arch. */
JC_API int jc_request_add_link_option(jc_request *r, const char *option);
/* The application's ABI/schema version, part of the key. */
JC_API int jc_request_set_app_abi(jc_request *r, const char *abi);

/*
 * Asks the daemon for the artifact of r (borrowed, unchanged). On return
 * *out (owned by the caller, free with jc_result_free) holds the result;
 * the artifact bytes have been checked against their content hash.
 * Returns 0 when the artifact is there; JC_ECOMPILE when the compile failed
 * (*out is set: its log says why; a repeat within the negative TTL is a
 * JC_NEGATIVE_HIT); other JC_E* codes when no result could be had (*out
 * NULL, message in jc_client_errmsg(c)): JC_EINVAL (bad request), JC_ECRASH,
 * JC_ETIMEOUT, JC_ENOSPC, JC_ECORRUPT (bad bytes served twice), JC_EIO,
 * JC_EPROTO, JC_EBUSY, JC_ENOMEM; in fallback mode (no daemon) also
 * JC_ENOTSUP (no NVRTC could be loaded, or a link job without nvJitLink).
 * A broken connection is mended as described at jc_client_open().
 */
JC_API int jc_compile(jc_client *c, const jc_request *r, jc_result **out);

/*
 * Tells the daemon that the artifact of res could not be used (e.g.
 * cuModuleLoadData failed with reason) and gets a freshly compiled one in
 * *out (same rules as jc_compile). The daemon quarantines the old object;
 * it compiles afresh once per report. reason is borrowed, may be NULL.
 */
JC_API int jc_report_load_failure(jc_client *c, const jc_request *r, const jc_result *res,
				  const char *reason, jc_result **out);

JC_API void jc_result_free(jc_result *res); /* NULL is accepted */
/* Artifact bytes (owned by res) and their size; NULL/0 when the compile failed. */
JC_API const void *jc_result_data(const jc_result *res, size_t *size);
JC_API jc_output jc_result_output(const jc_result *res);
JC_API jc_cache_status jc_result_cache_status(const jc_result *res);
/* The compile/link log ("" when empty), also for failures. Owned by res. */
JC_API const char *jc_result_log(const jc_result *res);
/* The lowered name of a name expression given in the request, or NULL. */
JC_API const char *jc_result_lowered_name(const jc_result *res, const char *expr);
/* Number of lowered names, and the i-th expression/lowered name pair. */
JC_API size_t jc_result_lowered_count(const jc_result *res);
JC_API int jc_result_lowered_at(const jc_result *res, size_t i, const char **expr,
				const char **lowered);
/* The cache key as 32 lowercase hex digits ("" for JC_UNCACHED). Owned by res. */
JC_API const char *jc_result_key(const jc_result *res);
JC_API uint64_t jc_result_time_ns(const jc_result *res, jc_timing which);

/*
 * The daemon's statistics, as `jitcachectl stats` shows them: an ordered
 * list of named values, each an integer or a string (the keys of
 * `stats --json`: hits, misses, compiles, entries, bytes, nvrtc_version, ...).
 * A caller that is not the daemon's admin (a shared daemon of another uid:
 * not root, its uid or its admin group) gets its own view: "scope" is
 * "uid N", entries, negative_entries, bytes and hits are its own, and the
 * counters summed over all users are left out.
 * *out (owned by the caller, free with jc_stats_free) is set on 0, else NULL
 * with the message in jc_client_errmsg(c). Not thread-safe per c.
 * Errors: JC_EINVAL (NULL argument), JC_ECONNECT (no daemon: c compiles
 * in-process), the transport errors of jc_compile (JC_EIO, JC_EPROTO,
 * JC_ETIMEOUT, JC_ENOMEM), the daemon's refusal (JC_EDENIED).
 */
typedef struct jc_stats jc_stats;
JC_API int jc_client_stats(jc_client *c, jc_stats **out);
/* Number of values in s (0 for NULL). */
JC_API size_t jc_stats_count(const jc_stats *s);
/* The i-th value: *name, and *str for a string (*num = 0) or *num for an
 * integer (*str = NULL). Strings owned by s. Errors: JC_EINVAL (NULL, i out
 * of range). */
JC_API int jc_stats_at(const jc_stats *s, size_t i, const char **name, int64_t *num,
		       const char **str);
JC_API void jc_stats_free(jc_stats *s); /* NULL is accepted */

/* Returns a static, never-NULL description of code (e.g. "compile timed out"). */
JC_API const char *jc_strerror(int code);
/* Returns JC_VERSION_STRING of the loaded library. */
JC_API const char *jc_version(void);

#ifdef __cplusplus
}
#endif
#endif
