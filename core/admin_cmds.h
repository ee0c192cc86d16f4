/* SPDX-License-Identifier: MIT */
/*
 * What the admin command files share (admin.c: the table and dispatch;
 * admin_view.c: the helpers below and the commands that read;
 * admin_remove.c: the commands that remove). Private to core/admin*.c
 * (core/admin.h is the interface). Same rules as admin.h: one call at a
 * time per env.
 */
#ifndef JC_ADMIN_CMDS_H
#define JC_ADMIN_CMDS_H

#include <stdint.h>

#include "core/admin.h"

/* Sets out's status to code and its message to fmt (one %s: what) formatted,
 * at most 511 bytes; returns code. */
int jc__admin_fail(struct jc_admin_reply *out, int code, const char *fmt, const char *what);

/* A non-negative decimal s (no sign, no trailing text) into *v: 0, or
 * JC_EINVAL (NULL, not a number, out of range). */
int jc__admin_parse_i64(const char *s, int64_t *v);

/* Which entries a caller sees: all for an admin, else those it uses (a
 * filter of status, enum in tier.h). */
struct jc_filter jc__admin_scope(const struct jc_admin_env *env, int status);

/* The entries, failed entries and bytes the caller sees, into *t: 0 or the
 * tier's error. */
int jc__admin_scope_totals(struct jc_admin_env *env, struct jc_user_totals *t);

/*
 * A key argument (JC_ARG_KEY) named what in messages: 32 hex digits as they
 * are, or a unique prefix of the keys the caller may see (all for an admin,
 * else the caller's own: a prefix of another user's key finds nothing, as
 * the full key would). Fills key and returns 0; else fills out:
 * JC_ENOTFOUND (no key begins so), JC_EINVAL (not 1-32 hex digits, or
 * ambiguous: the matching keys listed), the index's error. With absent_ok a
 * prefix that nothing begins with gives 0 and the prefix padded with zeros:
 * a key the caller has none of (it begins so), which selects nothing, as a
 * full key nobody has.
 */
int jc__admin_resolve_key(struct jc_admin_env *env, const char *what, const char *text,
			  int absent_ok, uint8_t key[16], struct jc_admin_reply *out);

/* The commands (struct jc_admin_cmd's run). admin_view.c: */
int jc__admin_cmd_ls(struct jc_admin_env *env, const struct jc_admin_req *req,
		     struct jc_admin_reply *out);
int jc__admin_cmd_show(struct jc_admin_env *env, const struct jc_admin_req *req,
		       struct jc_admin_reply *out);
int jc__admin_cmd_stats(struct jc_admin_env *env, const struct jc_admin_req *req,
			struct jc_admin_reply *out);
int jc__admin_cmd_ping(struct jc_admin_env *env, const struct jc_admin_req *req,
		       struct jc_admin_reply *out);
int jc__admin_cmd_version(struct jc_admin_env *env, const struct jc_admin_req *req,
			  struct jc_admin_reply *out);
int jc__admin_cmd_export(struct jc_admin_env *env, const struct jc_admin_req *req,
			 struct jc_admin_reply *out);
/* admin_remove.c: */
int jc__admin_cmd_purge(struct jc_admin_env *env, const struct jc_admin_req *req,
			struct jc_admin_reply *out);
int jc__admin_cmd_verify(struct jc_admin_env *env, const struct jc_admin_req *req,
			 struct jc_admin_reply *out);
int jc__admin_cmd_gc(struct jc_admin_env *env, const struct jc_admin_req *req,
		     struct jc_admin_reply *out);

#endif
