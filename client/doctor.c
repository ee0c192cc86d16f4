/* SPDX-License-Identifier: MIT */
/*
 * `jitcachectl doctor`: the run-time checklist (docs/ARCHITECTURE.md,
 * "Doctor"), one line per check: the toolchain (NVRTC, nvJitLink, supported
 * architectures), then the driver and its devices (doctor_driver.c), the
 * cache directory, the daemon's socket and which daemon this user reaches.
 */
#include "client/doctor.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "client/doctor_check.h"
#include "common/util.h"
#include "core/tier.h"
#include "core/toolchain.h"
#include "jitcache/jitcache.h"

/* --- cache directory and daemon -------------------------------------------------- */

/*
 * Whether the entries were made by the toolchain the daemon runs (identity:
 * its summary, toolchain.h): after an NVRTC, nvJitLink or driver change
 * most are another's, every request misses until `jitcachectl warm` (or
 * the daemon's own re-warm at start) has made them again.
 */
static void check_identity(struct report *r, struct jc_cachedir *cd, const char *identity)
{
	struct jc_tier_health h;
	uint64_t mine = 0;
	if (cd->ops->health(cd, &h) != 0 || cd->ops->count_versions(cd, identity, &mine) != 0) {
		say(r, WARN, "cannot count the entries by toolchain: %s", jc__cachedir_errmsg(cd));
		return;
	}
	const uint64_t entries = h.entries, kept = h.requests;
	if (entries && mine * 2 < entries)
		say(r, WARN,
		    "%" PRIu64 " of %" PRIu64 " entries were made by another toolchain than the "
		    "daemon's (%s): they miss until made again; run `jitcachectl warm` (%" PRIu64
		    " requests kept%s)",
		    entries - mine, entries, identity, kept,
		    kept ? "" : ": none to re-warm, they fill again as clients ask");
	else if (entries)
		say(r, OK,
		    "%" PRIu64 " of %" PRIu64 " entries are the daemon's toolchain's; %" PRIu64
		    " requests kept for re-warm and export",
		    mine, entries, kept);
}

static void check_cache_dir(struct report *r, const char *dir, uint64_t budget, uint64_t used,
			    const char *identity)
{
	struct stat st;
	char err[512], path[4200];
	if (stat(dir, &st) != 0) {
		say(r, errno == ENOENT ? WARN : FAIL, "cache directory %s: %s%s", dir,
		    strerror(errno),
		    errno == ENOENT ? " (jitcached creates it at its first start)" : "");
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		say(r, FAIL, "cache directory %s is not a directory", dir);
		return;
	}
	int ours = st.st_uid == geteuid();
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		say(r, WARN,
		    "cache directory %s is writable by group or others (mode %04o): its "
		    "jitcached sets it to 0700 at start, and refuses what others put in it",
		    dir, (unsigned)(st.st_mode & 07777));
	else if (ours)
		say(r, OK, "cache directory %s: ours, mode %04o%s", dir,
		    (unsigned)(st.st_mode & 07777), access(dir, W_OK) == 0 ? ", writable" : "");
	else
		say(r, INFO, "cache directory %s belongs to uid %u (a system daemon's?): mode %04o",
		    dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	int rc = jc__cachedir_check_local(dir, err, sizeof(err));
	if (rc == 0)
		say(r, OK, "cache directory is on a local filesystem (SQLite WAL works)");
	else if (rc != JC_EIO || ours)
		say(r, FAIL, "%s", err);
	struct statvfs vfs;
	if (statvfs(dir, &vfs) == 0) {
		uint64_t free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
		uint64_t room = budget > used ? budget - used : 0;
		if (budget && free_bytes < room)
			say(r, WARN,
			    "%" PRIu64 " MiB free, less than the %" PRIu64 " MiB the budget still "
			    "allows: the disk fills before eviction starts; lower --max-size",
			    free_bytes >> 20, room >> 20);
		else if (free_bytes < (1ull << 30))
			say(r, WARN, "only %" PRIu64 " MiB free on the cache filesystem",
			    free_bytes >> 20);
		else
			say(r, OK, "%" PRIu64 " MiB free on the cache filesystem",
			    free_bytes >> 20);
	}
	snprintf(path, sizeof(path), "%s/index.sqlite", dir);
	struct jc_cachedir *cd = NULL;
	rc = ours ? jc__cachedir_open(dir, JC_CACHEDIR_INSPECT, 0, &cd, err, sizeof(err)) : 0;
	if (rc == 0 && cd)
		say(r, OK, "index %s opens (schema current)", path);
	if (rc == 0 && cd && *identity)
		check_identity(r, cd, identity);
	else if (rc == JC_ENOTFOUND)
		say(r, INFO, "no index yet (%s): created at the first start", path);
	else if (rc != 0)
		say(r, rc == JC_EVERSION ? WARN : FAIL, "index %s: %s", path, err);
	jc__cachedir_close(cd);
}

/* The daemon's remote tier, from its stats: the daemon probes it (PING for
 * reach and round trip, a SET for write permission unless read-only). */
static void check_remote(struct report *r, const struct jc_record *s)
{
	const struct jc_kv *state = jc__record_get(s, "remote_state");
	const struct jc_kv *url = jc__record_get(s, "remote_url");
	const struct jc_kv *rtt = jc__record_get(s, "remote_probe_rtt_us");
	const struct jc_kv *wr = jc__record_get(s, "remote_write_ok");
	const struct jc_kv *ro = jc__record_get(s, "remote_read_only");
	const struct jc_kv *last = jc__record_get(s, "remote_last_error");
	if (!state || state->is_int || strcmp(state->s, "off") == 0) {
		say(r, INFO, "no remote tier (--remote URL shares compiles between machines)");
		return;
	}
	const char *u = url && !url->is_int ? url->s : "?";
	const char *err = last && !last->is_int && last->s[0] ? last->s : "no error recorded";
	if (strcmp(state->s, "down") == 0)
		say(r, FAIL, "remote tier %s is down: %s (requests compile locally meanwhile)", u,
		    err);
	else if (strcmp(state->s, "degraded") == 0)
		say(r, WARN, "remote tier %s is degraded: %s", u, err);
	else if (rtt && rtt->is_int && rtt->i >= 0)
		say(r, OK, "remote tier %s answers: round trip %" PRId64 " us", u, rtt->i);
	else
		say(r, INFO, "remote tier %s: not probed yet", u);
	if (ro && ro->is_int && ro->i)
		say(r, INFO, "remote tier is read-only here: nothing is written");
	else if (wr && wr->is_int && wr->i == 0)
		say(r, FAIL, "remote tier refuses writes: %s", err);
	else if (wr && wr->is_int && wr->i == 1)
		say(r, OK, "remote tier accepts writes");
	const struct jc_kv *uns = jc__record_get(s, "remote_unsigned");
	if (uns && uns->is_int && uns->i)
		say(r, WARN,
		    "remote tier values are unsigned (--remote-unsigned): anyone who can write "
		    "to %s can forge one; give every daemon of the fleet --remote-secret-file",
		    u);
	else if (uns && uns->is_int)
		say(r, OK, "remote tier values are signed (--remote-secret-file)");
}

/* Asks the daemon this user's programs reach (the client's search, steps
 * 1-4: --socket, --cache-dir, $JITCACHE_SOCKET, the per-user and the system
 * socket; no auto-start) for its version and compares its NVRTC with ours
 * (tc, NULL when unknown); fills *budget and *used from its stats, dir
 * (len bytes) with the cache directory it serves ("" when none answers),
 * and identity (idlen bytes) with its toolchain identity (left as it is
 * when it does not say). */
static void check_daemon(struct report *r, const char *socket_path, const char *cache_dir,
			 const struct jc_toolchain *tc, uint64_t *budget, uint64_t *used, char *dir,
			 size_t len, char *identity, size_t idlen)
{
	jc_client *c = NULL;
	jc_options *o = NULL;
	dir[0] = '\0';
	int rc = jc_options_new(&o);
	rc = rc ?: jc_options_set_socket(o, socket_path);
	rc = rc ?: jc_options_set_cache_dir(o, cache_dir);
	rc = rc ?: jc__client_new(o, &c);
	if (rc == 0 && jc__client_search(c) != 0) {
		say(r, WARN,
		    "no daemon answers%s%s: %s (start jitcached, or the jitcached.socket unit)",
		    socket_path ? " on " : "", socket_path ? socket_path : "", jc_client_errmsg(c));
		jc_client_close(c);
		jc_options_free(o);
		return;
	}
	if (rc != 0) {
		say(r, WARN, "client settings: %s", jc_client_errmsg(NULL));
		jc_options_free(o);
		return;
	}
	socket_path = jc__client_socket(c);
	if (jc__client_daemon_dir(c))
		snprintf(dir, len, "%s", jc__client_daemon_dir(c));
	struct jc_admin_req version = {.command = (char *)"version"},
			    stats = {.command = (char *)"stats"};
	struct jc_admin_reply v = {0}, s = {0};
	if (jc__client_admin(c, &version, &v) == 0 && v.status == 0 && v.n_rec) {
		const struct jc_kv *pid = jc__record_get(&v.rec[0], "daemon_pid");
		const struct jc_kv *id = jc__record_get(&v.rec[0], "nvrtc_id");
		const struct jc_kv *ver = jc__record_get(&v.rec[0], "jitcache");
		say(r, OK, "daemon answers on %s: pid %" PRId64 ", jitcache %s", socket_path,
		    pid && pid->is_int ? pid->i : -1, ver && !ver->is_int ? ver->s : "?");
		if (tc && id && !id->is_int && strcmp(id->s, tc->nvrtc_id) != 0)
			say(r, WARN, "the daemon's NVRTC (%s) is not this jitcachectl's (%s)",
			    id->s, tc->nvrtc_id);
		const struct jc_kv *builds = jc__record_get(&v.rec[0], "nvrtc_builds");
		if (builds && !builds->is_int)
			say(r, OK, "NVRTC builds applications asked the daemon for: %s", builds->s);
	} else {
		say(r, FAIL, "daemon on %s does not answer admin commands: %s", socket_path,
		    jc_client_errmsg(c));
	}
	if (jc__client_admin(c, &stats, &s) == 0 && s.status == 0 && s.n_rec) {
		const struct jc_kv *b = jc__record_get(&s.rec[0], "max_size");
		const struct jc_kv *u = jc__record_get(&s.rec[0], "bytes");
		*budget = b && b->is_int ? (uint64_t)b->i : 0;
		*used = u && u->is_int ? (uint64_t)u->i : 0;
		/* Which kernel confinement the compile workers apply (confine.h). */
		const struct jc_kv *cf = jc__record_get(&s.rec[0], "confinement");
		if (cf && !cf->is_int && strcmp(cf->s, "none") == 0)
			say(r, WARN,
			    "compile workers are not confined by the kernel (confinement none): "
			    "NVRTC's file access is limited by the worker's own checks only");
		else if (cf && !cf->is_int)
			say(r, OK,
			    "compile workers confined: %s (NVRTC reads only the toolkit tree and "
			    "each request's include directories)",
			    cf->s);
		const struct jc_kv *full = jc__record_get(&s.rec[0], "disk_full");
		const struct jc_kv *fb = jc__record_get(&s.rec[0], "disk_free_bytes");
		if (full && full->is_int && full->i)
			say(r, FAIL,
			    "disk full: %" PRId64
			    " KiB free on the cache's file system; the daemon "
			    "serves hits but stores nothing until space returns (free space, or "
			    "`jitcachectl purge`)",
			    fb && fb->is_int ? fb->i >> 10 : -1);
		check_remote(r, &s.rec[0]);
		const struct jc_kv *id = jc__record_get(&s.rec[0], "identity");
		if (id && !id->is_int)
			snprintf(identity, idlen, "%s", id->s);
	}
	jc__admin_reply_clear(&v);
	jc__admin_reply_clear(&s);
	jc_client_close(c);
	jc_options_free(o);
}

/* 1 when this process's groups include gid. */
static int in_group(gid_t gid)
{
	gid_t groups[1024];
	int n = getgroups(1024, groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return 1;
	return getegid() == gid;
}

/*
 * Which daemon this user's programs reach (the client library's search:
 * jitcache.h) and, for the system daemon's socket, whether they may use it:
 * a socket is usable with write permission, which the system unit gives to
 * its group (docs/team-daemon.md).
 */
static void check_reach(struct report *r)
{
	jc_client *c = NULL;
	if (jc__client_new(NULL, &c) != 0) {
		say(r, WARN, "client settings: %s", jc_client_errmsg(NULL));
		return;
	}
	const char *sys = jc__client_system_socket(c);
	struct stat st;
	if (sys && stat(sys, &st) == 0) {
		struct group *g = getgrgid(st.st_gid);
		char gname[64];
		snprintf(gname, sizeof(gname), "%s", g ? g->gr_name : "?");
		int may = geteuid() == 0 || (st.st_uid == geteuid() ? st.st_mode & 0200
					     : in_group(st.st_gid)  ? st.st_mode & 0020
								    : st.st_mode & 0002);
		if (may)
			say(r, OK,
			    "system daemon socket %s (group %s, mode %04o): this user may use it",
			    sys, gname, (unsigned)(st.st_mode & 07777));
		else
			say(r, WARN,
			    "system daemon socket %s (group %s, mode %04o): this user may not use "
			    "it "
			    "(not in group %s: an admin runs `usermod -aG %s %s`, then log in "
			    "again)",
			    sys, gname, (unsigned)(st.st_mode & 07777), gname, gname,
			    getenv("USER") ? getenv("USER") : "USER");
	} else if (sys) {
		say(r, INFO, "no system daemon socket at %s", sys);
	}
	if (jc__client_search(c) != 0) {
		say(r, INFO, "this user's programs reach no daemon now: %s", jc_client_errmsg(c));
	} else {
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		int other =
		    getsockopt(jc__client_fd(c), SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
		    cred.uid != geteuid();
		say(r, OK, "this user's programs reach the daemon on %s (pid %u%s%s)",
		    jc__client_socket(c), (unsigned)jc__client_daemon_pid(c),
		    sys && strcmp(jc__client_socket(c), sys) == 0 ? ", the system daemon" : "",
		    other ? ", another uid: the client reads and sends the "
			    "include files, the daemon opens none of this user's paths"
			  : ", this uid");
	}
	jc_client_close(c);
}

int jc__doctor(const char *socket_path, const char *cache_dir)
{
	struct report r = {0};
	struct jc_toolchain tc;
	char err[256], dir[4096];
	uint64_t budget = 0, used = 0;
	int have_tc = jc__toolchain_probe(&tc, err, sizeof(err)) == 0;
	if (have_tc) {
		say(&r, OK, "NVRTC %s (%s, builtins %s)", tc.nvrtc_version, tc.nvrtc_id,
		    tc.nvrtc_builtins_id);
		say(&r, OK, "nvJitLink %s (%s)", tc.nvjitlink_version, tc.nvjitlink_id);
		say(&r, INFO, "supported architectures: %s", tc.supported_archs);
		say(&r, INFO, "toolkit headers %s (%s)",
		    tc.toolkit_include[0] ? tc.toolkit_include : "(none)", tc.toolkit_include_id);
		if (tc.fatbin_tool == JC_FATBIN_NONE)
			say(&r, WARN,
			    "no fatbin tool (nvFatbin or fatbinary) in this toolkit: requests for "
			    "several architectures (--arch sm_80,sm_90,...) are refused");
		else
			say(&r, OK, "fatbins by %s (%s)", tc.fatbin_path, tc.fatbin_id);
	} else {
		say(&r, FAIL, "toolchain: %s", err);
	}
	jc__doctor_driver(&r, have_tc ? &tc : NULL);
	/* The cache directory checked: --cache-dir, else the one the daemon
	 * reached serves, else the default (offline use); the daemon's
	 * toolchain, else (no daemon) the one this machine has. */
	char identity[sizeof(tc.summary)] = "";
	if (have_tc)
		snprintf(identity, sizeof(identity), "%s", tc.summary);
	check_daemon(&r, socket_path, cache_dir, have_tc ? &tc : NULL, &budget, &used, dir,
		     sizeof(dir), identity, sizeof(identity));
	if (!socket_path)
		check_reach(&r);
	if (!cache_dir && (dir[0] || jc__default_cache_dir(dir, sizeof(dir)) == 0))
		cache_dir = dir;
	if (cache_dir)
		check_cache_dir(&r, cache_dir, budget, used, identity);
	else
		say(&r, FAIL, "no cache directory: set JITCACHE_DIR or HOME, or pass --cache-dir");
	printf("%d failed, %d warnings\n", r.fails, r.warns);
	return r.fails ? 1 : 0;
}
