/* SPDX-License-Identifier: MIT */
/*
 * jitcached --user USER [--group GROUP]: a daemon started as root binds its
 * socket, then gives up root for good before it opens anything else, as
 * redis and unbound do (docs/team-daemon.md, "Without systemd").
 */
#ifndef JC_DAEMON_PRIVS_H
#define JC_DAEMON_PRIVS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Makes the process user (uid, with the supplementary groups of user as
 * initgroups(3) lists them plus gid) and group gid, real, effective and
 * saved, then checks that neither uid 0 nor the old ids can be regained.
 * Not root: succeeds when already uid and gid (nothing to drop), else
 * JC_EDENIED. The process stays dumpable, as any process of user is (the
 * kernel clears the flag on a uid change; /proc/self would be root's).
 * user is borrowed. Returns 0, JC_EDENIED or JC_EINTERNAL (a step failed or
 * root could be regained: the process must not go on), with the reason in
 * err. Call before any thread is started (set*id act per thread in the
 * kernel; glibc broadcasts, but only to threads it knows).
 */
int jc__privs_drop(const char *user, uid_t uid, gid_t gid, char *err, size_t errlen);

#endif
