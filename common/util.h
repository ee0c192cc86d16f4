/* SPDX-License-Identifier: MIT */
/* Small helpers shared by the daemon, jitcachectl and the client library. */
#ifndef JC_UTIL_H
#define JC_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "10G", "512M", "4096", "1.5G" (K/M/G/T are powers of 1024; a trailing B or
 * iB is accepted). Returns 0 or JC_EINVAL. */
int jc__parse_size(const char *s, uint64_t *out);

/* CLOCK_MONOTONIC in nanoseconds, and in milliseconds (comparable across
 * the processes of one boot). Thread-safe. */
uint64_t jc__now_ns(void);
uint64_t jc__now_ms(void);
/* CPU time of the calling process, all its threads (NVRTC runs ptxas on
 * threads of its own), in nanoseconds (CLOCK_PROCESS_CPUTIME_ID); only
 * differences mean anything. Thread-safe. */
uint64_t jc__process_cpu_ns(void);
/*
 * Thread tid's (0: the caller's) CPU policy and I/O priority, idle or
 * normal. Idle: SCHED_IDLE (sched(7): runs only when the CPU has nothing
 * else to run) and the idle class of ioprio_set(2) (not wrapped by glibc);
 * no privilege needed. Normal: SCHED_OTHER at the thread's nice value and
 * I/O class none (its priority follows the nice value); leaving SCHED_IDLE
 * needs RLIMIT_NICE >= 20 - nice of the thread (sched_setscheduler(2)) or
 * CAP_SYS_NICE. Both are per thread, inherited by threads and processes it
 * starts later. The caller must be able to act on tid (same uid, or
 * CAP_SYS_NICE). Returns 0, or -1 with errno (EPERM, ESRCH, ...).
 */
int jc__set_idle_priority(int tid, int idle);
/* Wall-clock seconds since the epoch, for times stored in the index. */
int64_t jc__wall_s(void);
/* "300", "90s", "15m", "2h", "7d" into seconds. Returns 0 or JC_EINVAL. */
int jc__parse_duration(const char *s, int64_t *out);

/* Default cache directory: $JITCACHE_DIR, else $XDG_CACHE_HOME/jitcache,
 * else $HOME/.cache/jitcache. Returns 0 or JC_EINVAL (no HOME, too long). */
int jc__default_cache_dir(char *buf, size_t len);
/* Default socket: $JITCACHE_SOCKET, else $XDG_RUNTIME_DIR/jitcached.sock,
 * else CACHE_DIR/jitcached.sock (cache_dir NULL: the default one). */
int jc__default_socket_path(const char *cache_dir, char *buf, size_t len);

/*
 * Lexical form of an absolute path: repeated slashes and "." components
 * dropped; with fold_dotdot, ".." also removes the component before it
 * (symbolic links are not followed: only the kernel knows where ".." leads);
 * "/" for an empty result. Returns 0, or -1 when out (len bytes) is too
 * small. Thread-safe.
 */
int jc__path_lexical(const char *in, char *out, size_t len, int fold_dotdot);

/* 1 when the absolute lexical path (jc__path_lexical, ".." folded) is /proc,
 * /sys or /dev or lies beneath one: process, kernel and device state, never
 * a header. Thread-safe. */
int jc__kernel_path(const char *path);
/* 1 when a file system type (statfs's f_type) is one whose files are process
 * or kernel state (proc, sysfs, devpts, debugfs, tracefs, securityfs,
 * cgroup, bpf, configfs, efivarfs). */
int jc__pseudo_fs(long type);
/*
 * Resolves the absolute path as the kernel would, one component at a time
 * (symbolic links followed, at most 40; ".." taken on the resolved path; a
 * missing component ends the walk, the rest taken lexically) and stops at
 * the first spelling that jc__kernel_path names or that lies on a file
 * system jc__pseudo_fs names: 1, with that spelling in where (len bytes).
 * So /proc/self/root/etc (which realpath() turns into /etc) and a link to it
 * are both caught. 0 when the walk never reaches one; -1 with errno (ELOOP,
 * ENAMETOOLONG, a readlink failure). Thread-safe.
 */
int jc__path_reaches_kernel(const char *path, char *where, size_t len);

/* DIR/JC_SOCKET_POINTER holds, on one line, the path of the socket the daemon
 * of DIR listens on (written by that daemon; see jc__dir_socket). */
#define JC_SOCKET_POINTER "jitcached.socket-path"
/* The system daemon's socket (systemd/jitcached.socket). */
#define JC_SYSTEM_SOCKET "/run/jitcached/jitcached.sock"

/* Writes "<directory of this executable>/name" into out (len bytes) and
 * returns 0 when that file exists, -1 otherwise (also when it does not fit):
 * how programs find their companions in the build tree before the installed
 * paths. Thread-safe. */
int jc__beside_self(const char *name, char *out, size_t len);

/* The object of type TYPE in which MEMBER is at PTR (libuv's container_of):
 * for handles and jobs embedded in the objects that own them. */
#define JC_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Marks every descriptor from fd up close-on-exec (close_range, else one
 * fcntl each up to 65535). Async-signal-safe: for a child between fork and
 * exec, and for a program shedding what it inherited. */
void jc__cloexec_from(int fd);

/* Removes path and everything below it without following links (nftw,
 * FTW_PHYS). 0, or -1 when an entry could not be removed (the others go
 * all the same): the first such path and its error in why (whylen bytes).
 * Thread-safe. */
int jc__rmtree(const char *path, char *why, size_t whylen);

/* Sleeps ms milliseconds, through EINTR. */
void jc__sleep_ms(unsigned ms);

/* Writes a message made from fmt into err (errlen bytes; nothing when 0) and
 * returns code: `return jc__fail(err, errlen, JC_EIO, "open %s: %s", ...)`. */
int jc__fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Caps the NUL-terminated text *text (malloc'd, owned by the caller) at max
 * bytes: longer, it is replaced by a new string of its first and last parts
 * with a line between them saying how many bytes were dropped (a compile
 * log kept: --max-log-size), at most max bytes in all (the marker alone
 * when max is smaller than it). Returns 1 when it cut, 0 when the text fits
 * or *text is NULL, JC_ENOMEM (the text left as it was).
 */
int jc__text_cap(char **text, size_t max);

/* A character a path may have ([A-Za-z0-9_./+~-]). */
int jc__path_char(char c);

/*
 * text with every occurrence of from (not empty) replaced by to; with
 * whole, only the occurrences with no path character (jc__path_char) on
 * either side. Returns a malloc'd string, or NULL without memory.
 */
char *jc__text_replace(const char *text, const char *from, const char *to, int whole);

/* Writes s (borrowed, NUL-terminated) to f as a JSON string, quotes included. */
void jc__json_str(FILE *f, const char *s);

#endif
