/* SPDX-License-Identifier: MIT */
/*
 * The admin command table (admin.h) and its dispatch: which arguments a
 * command takes, its flags, the check and the run. The commands are in
 * admin_view.c (those that read) and admin_remove.c (those that remove).
 */
#include "core/admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/admin_cmds.h"
#include "jitcache/jitcache.h"

/* --- the command table ------------------------------------------------------ */

static const struct jc_admin_arg stats_args[] = {
    {"zero", "zero", JC_ARG_FLAG, JC_ADMIN_PRIVILEGED | JC_ADMIN_MUTATING},
    {"by_user", "by-user", JC_ARG_FLAG, JC_ADMIN_PRIVILEGED | JC_ADMIN_LISTS},
    {"prometheus", "prometheus", JC_ARG_FLAG, JC_ADMIN_LOCAL},
    {NULL, NULL, 0, 0},
};
static const struct jc_admin_arg show_args[] = {
    {"key", NULL, JC_ARG_KEY, 0},
    {NULL, NULL, 0, 0},
};
static const struct jc_admin_arg purge_args[] = {
    {"all", "all", JC_ARG_FLAG, 0},
    {"negative", "negative", JC_ARG_FLAG, 0},
    {"older_than", "older-than", JC_ARG_SECONDS, 0},
    {"unused_for", "unused-for", JC_ARG_SECONDS, 0},
    {"key", "key", JC_ARG_KEY, 0},
    {"arch", "arch", JC_ARG_TEXT, 0},
    {"stale_versions", "stale-versions", JC_ARG_FLAG, 0},
    {"to_size", "to-size", JC_ARG_BYTES, 0},
    {"dry_run", "dry-run", JC_ARG_FLAG, 0},
    {NULL, NULL, 0, 0},
};

static const struct jc_admin_arg warm_args[] = {
    {"top", "top", JC_ARG_TEXT, 0},
    {"since", "since", JC_ARG_SECONDS, 0},
    {"status", "status", JC_ARG_FLAG, 0},
    {"wait", "wait", JC_ARG_FLAG, JC_ADMIN_LOCAL},
    {NULL, NULL, 0, 0},
};
static const struct jc_admin_arg export_args[] = {
    {"top", "top", JC_ARG_TEXT, 0},
    {"uid", "uid", JC_ARG_TEXT, JC_ADMIN_PRIVILEGED},
    {NULL, NULL, 0, 0},
};

#define P JC_ADMIN_PRIVILEGED
#define M JC_ADMIN_MUTATING
#define O JC_ADMIN_OFFLINE
#define L JC_ADMIN_LISTS
const struct jc_admin_cmd jc__admin_cmds[] = {
    {"ping", 0, NULL, jc__admin_cmd_ping, "ping\n  Asks the daemon whether it answers.\n"},
    {"version", 0, NULL, jc__admin_cmd_version,
     "version [--json]\n  The daemon's and the toolchain's versions (--json: as one "
     "JSON object).\n"},
    {"stats", O, stats_args, jc__admin_cmd_stats,
     "stats [--json | --prometheus] [--zero] [--by-user]\n"
     "  Counters and figures (offline from the cache directory when no daemon runs).\n"
     "  Admins (root, the daemon's uid, --admin-group) see the daemon's; any other user\n"
     "  of a shared daemon their own entries, bytes and hits. --by-user (admins): one\n"
     "  line per uid and its user name: entries, bytes (a shared entry in full for\n"
     "  each), hits.\n"
     "  --zero (admins) resets the counters.\n"},
    {"ls", O | L, NULL, jc__admin_cmd_ls,
     "ls [--json]\n  Lists the entries (a user who is not an admin: their own, with their\n"
     "  own hits and access times).\n"},
    {"show", O, show_args, jc__admin_cmd_show,
     "show KEY\n  One entry, with its compile log (a user's own only: another's key\n"
     "  answers as one nobody has).\n"},
    {"purge", O | L | M, purge_args, jc__admin_cmd_purge,
     "purge --all | --negative | --older-than DUR | --unused-for DUR | --key KEY | --arch ARCH\n"
     "      | --stale-versions | --to-size SIZE  [--dry-run]\n"
     "  Removes entries (selections combine with AND). A user who is not an admin\n"
     "  purges their own: an entry another user also uses stays for them.\n"},
    {"verify", P | O | L | M, NULL, jc__admin_cmd_verify,
     "verify\n  Checks every object's size and hash; quarantines bad ones.\n"},
    {"gc", P | O | L | M, NULL, jc__admin_cmd_gc, "gc\n  Collects orphaned objects.\n"},
    {"stop", P | JC_ADMIN_LOOP, NULL, NULL, "stop\n  Stops the daemon cleanly, as SIGTERM does.\n"},
    {"warm", P | M | L | JC_ADMIN_LOOP, warm_args, NULL,
     "warm [--top N] [--since DURATION] [--wait] [--status]\n"
     "  Compiles the kept requests of entries made by another toolchain (NVRTC,\n"
     "  nvJitLink, driver) again for the daemon's, most used first, in the background\n"
     "  at idle priority (--rewarm-workers, --rewarm-budget); clients go first. --top:\n"
     "  the N most valuable; --since: used within DURATION. --wait: until done, with\n"
     "  progress. Lists the requests the new toolchain fails to compile (each kept as a\n"
     "  negative entry with its log). --status: the last re-warm's figures. Admins.\n"},
    {"export", O | L, export_args, jc__admin_cmd_export,
     "export [--top N] [--uid U] [--secret-file FILE] -o FILE\n"
     "  Writes the kept requests (the most valuable N) to a signed bundle (HMAC-SHA256\n"
     "  with the secret: ~/.config/jitcache/bundle.key, made when missing). A user\n"
     "  who is not an admin exports their own; --uid U (admins): U's.\n"},
};
#undef P
#undef M
#undef O
#undef L
const size_t jc__admin_n_cmds = sizeof(jc__admin_cmds) / sizeof(jc__admin_cmds[0]);

const struct jc_admin_cmd *jc__admin_find(const char *name)
{
	for (size_t i = 0; name && i < jc__admin_n_cmds; i++)
		if (strcmp(jc__admin_cmds[i].name, name) == 0)
			return &jc__admin_cmds[i];
	return NULL;
}

/* The row of cmd's argument a ("name" or "name=value"), or NULL. */
static const struct jc_admin_arg *arg_spec(const struct jc_admin_cmd *cmd, const char *a)
{
	size_t n = strcspn(a, "=");
	for (const struct jc_admin_arg *s = cmd->args; s && s->name; s++)
		if (strlen(s->name) == n && strncmp(s->name, a, n) == 0)
			return s;
	return NULL;
}

unsigned jc__admin_flags(const struct jc_admin_req *req)
{
	const struct jc_admin_cmd *cmd = jc__admin_find(req->command);
	if (!cmd)
		return JC_ADMIN_PRIVILEGED | JC_ADMIN_MUTATING;
	unsigned flags = cmd->flags;
	for (size_t i = 0; i < req->args.n; i++) {
		const struct jc_admin_arg *s = arg_spec(cmd, req->args.v[i]);
		flags |= s ? s->flags : 0;
	}
	return flags;
}

const char *jc__admin_privileged_option(const struct jc_admin_req *req)
{
	const struct jc_admin_cmd *cmd = jc__admin_find(req->command);
	for (size_t i = 0; cmd && i < req->args.n; i++) {
		const struct jc_admin_arg *s = arg_spec(cmd, req->args.v[i]);
		if (s && s->option && (s->flags & JC_ADMIN_PRIVILEGED))
			return s->option;
	}
	return "";
}

/* Every argument of req is one cmd takes, with a value where it needs one. */
static int check_args(const struct jc_admin_cmd *cmd, const struct jc_admin_req *req,
		      struct jc_admin_reply *out)
{
	for (size_t i = 0; i < req->args.n; i++) {
		const char *a = req->args.v[i];
		const struct jc_admin_arg *s = arg_spec(cmd, a);
		int has_value = strchr(a, '=') != NULL;
		if (!s || (s->flags & JC_ADMIN_LOCAL))
			return jc__admin_fail(out, JC_EINVAL, "unknown argument '%.64s'", a);
		if (has_value != (s->kind != JC_ARG_FLAG))
			return jc__admin_fail(out, JC_EINVAL,
					      has_value ? "argument '%.64s' takes no value"
							: "argument '%.64s' needs a value",
					      a);
	}
	return 0;
}

int jc__admin_check(const struct jc_admin_req *req, struct jc_admin_reply *out)
{
	const struct jc_admin_cmd *cmd = jc__admin_find(req->command);
	out->status = 0;
	if (!cmd)
		return jc__admin_fail(out, JC_EINVAL, "unknown admin command '%s'", req->command);
	return check_args(cmd, req, out);
}

int jc__admin_run(struct jc_admin_env *env, const struct jc_admin_req *req,
		  struct jc_admin_reply *out)
{
	const char *c = req->command;
	const struct jc_admin_cmd *cmd = jc__admin_find(c);
	out->status = 0;
	if (!cmd || !cmd->run)
		return jc__admin_fail(out, JC_EINVAL, "unknown admin command '%s'", c);
	if (check_args(cmd, req, out) != 0)
		return out->status;
	int rc = cmd->run(env, req, out);
	if (rc != 0 && out->status == 0) {
		out->status = rc;
		if (!out->message) {
			char msg[256];
			snprintf(msg, sizeof(msg), "%s failed: %s", c,
				 jc__cachedir_errmsg(env->cd));
			out->message = strdup(msg);
		}
	}
	return out->status;
}
