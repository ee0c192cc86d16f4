/* SPDX-License-Identifier: MIT */
/* Dropping root for --user / --group. See privs.h. */
#include "daemon/privs.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "jitcache/jitcache.h"

int jc__privs_drop(const char *user, uid_t uid, gid_t gid, char *err, size_t errlen)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	if (geteuid() != 0) {
		if (getuid() == uid && geteuid() == uid && getgid() == gid && getegid() == gid)
			return 0;
		snprintf(err, errlen,
			 "--user %s needs a daemon started as root (this one runs as uid %u)", user,
			 (unsigned)geteuid());
		return JC_EDENIED;
	}
	/* Groups first: once the uid is not 0 they can no longer change. */
	if (initgroups(user, gid) != 0) {
		snprintf(err, errlen, "initgroups(%s, %u): %s", user, (unsigned)gid,
			 strerror(errno));
		return JC_EINTERNAL;
	}
	if (setresgid(gid, gid, gid) != 0) {
		snprintf(err, errlen, "setresgid(%u): %s", (unsigned)gid, strerror(errno));
		return JC_EINTERNAL;
	}
	if (setresuid(uid, uid, uid) != 0) {
		snprintf(err, errlen, "setresuid(%u): %s", (unsigned)uid, strerror(errno));
		return JC_EINTERNAL;
	}
	if (getresuid(&ru, &eu, &su) != 0 || getresgid(&rg, &eg, &sg) != 0 || ru != uid ||
	    eu != uid || su != uid || rg != gid || eg != gid || sg != gid) {
		snprintf(err, errlen, "the ids did not change to uid %u gid %u", (unsigned)uid,
			 (unsigned)gid);
		return JC_EINTERNAL;
	}
	/* For good: none of this may work any more (uid 0 aside, when it is 0). */
	if (uid != 0 &&
	    (setuid(0) == 0 || seteuid(0) == 0 || setgid(0) == 0 || setgroups(0, NULL) == 0)) {
		snprintf(err, errlen, "root could be regained after dropping to uid %u",
			 (unsigned)uid);
		return JC_EINTERNAL;
	}
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	return 0;
}
