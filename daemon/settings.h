/* SPDX-License-Identifier: MIT */
/*
 * jitcached's configuration (docs/ARCHITECTURE.md, "Processes";
 * docs/configuration.md): the settings, their defaults, the flags (getopt), the
 * configuration files (inih: the system file, then the user's over it, or
 * only --config FILE; flags win over files), and what a SIGHUP may change
 * in a running daemon. A setting's name in a file is its long flag's name
 * (`jitcached --help`). Loop thread only (getopt and the
 * log level are process-wide).
 */
#ifndef JC_SETTINGS_H
#define JC_SETTINGS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/remote.h"

/* Settings, defaults in settings.c (`jitcached --help` lists them). */
struct jc_config {
	char *cache_dir;
	char *socket_path;
	char *worker_path; /* jitcache-worker executable */
	uint64_t max_size; /* byte budget of the cache directory (evict.h) */
	uint64_t
	    user_max_size; /* byte share of each uid: its entries' charges (evict.h); 0 = none */
	int64_t negative_ttl_s;	 /* lifetime of a negative entry */
	uint64_t max_log_size;	 /* a compile log kept (flight.c), also capped at max_size / 16 */
	int workers;		 /* compile worker processes */
	int user_max_workers;	 /* of one uid's compiles at once (pool.h); 0 = the default */
	int compile_timeout_s;	 /* per compile; 0 = none */
	uint64_t worker_memory;	 /* RLIMIT_AS of a worker in bytes; 0 = none */
	int idle_timeout_s;	 /* a connection silent this long is closed */
	int handshake_timeout_s; /* a connection without HELLO this long is closed */
	int write_timeout_s;	 /* an answer not taken this long is dropped, with its connection */
	int max_connections;	 /* client connections at once; more are refused */
	int max_connections_per_uid; /* of one uid other than root and ours; more are refused */
	uint64_t buffer_budget;	     /* bytes of request and reply buffers (server.c) */
	uint64_t hot_copy_budget;    /* bytes of hot objects' checked copies (memcache.c) */
	int group_shared;  /* socket 0660 (group access); the cache dir stays ours alone */
	int test_faults;   /* JITCACHE_TEST_FAULTS=1: honour test_fault requests */
	uid_t *allow_uids; /* clients allowed besides root and our uid; none = all */
	size_t n_allow_uids;
	gid_t admin_gid;       /* may run privileged admin commands; -1 = none */
	int64_t gc_interval_s; /* periodic collector (evict.c); 0 = never */
	int confinement;       /* --confinement: enum jc_confine, or -1 = the best there is */
	int allow_unconfined;  /* a daemon serving other uids may run without confinement */
	uint32_t max_include_watches; /* inotify watches for include trees (watch.h); 0 = none */
	int idle_exit_s;    /* exit this long after the last connection closed; 0 = never */
	int keep_requests;  /* keep each entry's request (core/kept.h) for re-warm and export */
	int rewarm_workers; /* idle-priority workers for re-warm compiles (rewarm.c) */
	int serve_threads;  /* threads serving clients (server.c), 1 to 64 */
	int64_t rewarm_budget_s;	/* CPU seconds one re-warm may spend; 0 = no limit */
	struct jc_remote_config remote; /* the remote tier (remote.h) */
	char *run_user; /* --user: run as this user once the socket is bound; NULL = as started */
	uid_t run_uid;	/* its uid */
	gid_t run_gid;	/* --group's gid, else run_user's primary group */
	int run_group_set; /* --group was given */
};

/*
 * The settings of a start: defaults, then the flags of argv (argc entries,
 * borrowed) are checked, the configuration files read over the defaults
 * and the flags applied again over them; the default cache directory and
 * socket filled in where none was given. *c is overwritten (free with
 * jc__settings_clear, also after a failure); the log level given goes to
 * *log_level. Returns 0, or 2 (the exit status of a bad command line) with
 * the reason on stderr or in the log. --help and --version print and
 * exit(0).
 */
int jc__settings_read(struct jc_config *c, int argc, char **argv, int *log_level);

/* Frees what c owns and zeroes it. */
void jc__settings_clear(struct jc_config *c);

/*
 * Room for c->max_connections descriptors: raises the soft RLIMIT_NOFILE
 * towards the hard one (systemd's default soft limit is 1024), or lowers
 * c->max_connections (with a warning) so that clients past it get a clear
 * refusal rather than a failed accept.
 */
void jc__settings_fit_connections(struct jc_config *c);

/*
 * SIGHUP: applies fresh (from jc__settings_read) to the running c: the log
 * level (jc__log_level) and every setting that can change while running
 * are taken, each change logged; allow_uids is moved from fresh; a setting
 * that needs a restart is named in a warning and kept. The remote tier
 * (fresh->remote) is left to the caller, which restarts it.
 */
void jc__settings_apply(struct jc_config *c, struct jc_config *fresh, int log_level);

#endif
