/* SPDX-License-Identifier: MIT */
/* What the client library's files share: the handle, its options and a
 * result, and the calls one file makes into another (client.c: the handle
 * and its requests; connect.c: finding a daemon and the handshake;
 * settings.c: jc_options and their resolution; request.c: the request
 * builder and the result's accessors). Private to libjitcache-client
 * (client_internal.h is what jitcachectl and tests use of it). */
#ifndef JC_CLIENT_HANDLE_H
#define JC_CLIENT_HANDLE_H

#include <stdint.h>
#include <sys/un.h>

#include "client/client_internal.h"

#define SUN_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path))

struct jc_options {
	char *socket, *cache_dir, *system_socket, *daemon, *nvrtc;
	int system_socket_set; /* system_socket was given (NULL there: skip) */
	int autostart;	       /* -1 unset, 0, 1 */
	int idle_exit_s;       /* 0 unset */
	int fallback;	       /* 0 unset, else jc_fallback */
	int retries;	       /* -1 unset */
	jc_log_cb log;
	void *log_ctx;
};

struct jc_client {
	int fd;		/* -1: no daemon (fallback mode) */
	unsigned forks; /* fork_count when fd was connected */
	struct jc_buf in, out;
	uint64_t spin_ns; /* poll for the answer this long; 0 never */
	int timeout_ms;	  /* wait for an answer at most this long; -1 forever */
	int fast;	  /* the last answer came within spin_ns */
	int broken;	  /* the last round trip failed in transport: mend and resend */
	/* How to find a daemon (resolved at open; strings owned). */
	char *socket;		   /* step 1: only this socket */
	char *cache_dir;	   /* step 1: only the daemon of this directory (absolute) */
	uint64_t dir_dev, dir_ino; /* its identity, sent in HELLO (0: any directory) */
	char *system_socket;	   /* step 4; NULL: skipped */
	int autostart, fallback, retries, idle_exit_s;
	char *daemon, *nvrtc;
	char *nvrtc_id; /* identity of nvrtc (elf_id.h), sent with each compile; NULL until read */
	jc_log_cb log;
	void *log_ctx;
	uint64_t autostart_after_ns; /* no auto-start before (after one failed) */
	char autostart_err[1024];    /* why the last one failed */
	int warned;		     /* the fallback warning was given */
	char fallback_warn[160];     /* why $JITCACHE_FALLBACK is not used as given ("": it is) */
	/* The daemon connected to. */
	char sock[SUN_PATH_MAX];
	uint32_t daemon_pid;
	uint32_t proto;	      /* the protocol version its handshake agreed on */
	int daemon_other_uid; /* it runs as another uid (SO_PEERCRED): send include trees */
	int send_trees;	      /* JITCACHE_SEND_HEADERS=1: send them to any daemon */
	struct jc_tree_cache
	    *trees; /* the trees' memo and manifest (tree.c); NULL until one is sent */
	char *daemon_dir;
	char *archs,
	    *nvrtc_version;   /* its NVRTC's, from HELLO_OK (v3); NULL from an older daemon */
	char *daemon_toolkit; /* HELLO_OK's toolkit_include (NULL: none) */
	char why_none[1024];  /* why no daemon could be had (fallback mode) */
	char errmsg[1024];
};

struct jc_result {
	struct jc_res res;
	char key[33];
	uint64_t total_ns;
	uint64_t includes_ns; /* JC_TIME_INCLUDES */
};

/* --- settings.c --- */

/* A message to the application's log callback, if c has one. */
void jc__client_say(const jc_client *c, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fills c's settings from o (may be NULL) and the environment. 0, or
 * JC_EINVAL / JC_ENOMEM with a message in err. */
int jc__client_resolve(jc_client *c, const jc_options *o, char *err, size_t errlen);

/* --- connect.c --- */

/* Readies a zeroed c for connect.c: no connection, the answer polling of
 * $JITCACHE_CLIENT_SPIN_US, and (once per process) the count of forks that
 * jc__conn_leave_parent checks. */
void jc__conn_init(jc_client *c);
/* Closes c's connection (if any) and forgets what its daemon said. */
void jc__conn_drop(jc_client *c);
/* Drops c's connection when it was made before a fork of this process: the
 * parent's, whose answers would go to whichever process reads first. */
void jc__conn_leave_parent(jc_client *c);
/* Steps 1-5 of jitcache.h (search, then auto-start): 0 when c is connected,
 * else the error (message in c->errmsg). */
int jc__conn_find(jc_client *c);
/* Polls c's socket for an answer until t0 + c->spin_ns, while answers come
 * that fast (connect.c says why); consumes nothing. */
void jc__conn_spin(jc_client *c, uint64_t t0);

#endif
