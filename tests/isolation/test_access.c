/* SPDX-License-Identifier: MIT */
/*
 * Access control against a real daemon, with real client processes that
 * drop root (setuid to nobody): the socket's mode keeps other users out of a
 * per-user daemon; the allow-list (SO_PEERCRED) turns away a uid the mode
 * lets in, with a clear error; a non-admin uid may ping, ask the version and
 * stats, compile, and run ls, show and purge on its own entries, but not
 * gc, verify or stats --zero, which the admin group (primary or
 * supplementary) may. The
 * cache directory (the daemon's alone, group-shared or not) and socket get
 * their modes; header names with a NUL byte
 * (sent as a raw frame), "..", or an absolute path are refused; an object
 * with the wrong owner or mode, or a symlink, is never served.
 */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "proto/io.h"
#include "tests/lib/test.h"

#define NOBODY	  65534
#define ADMIN_GID 4 /* "adm" on Debian; any group other than 0 and NOBODY */

static const char *const saxpy_exprs[] = {"&saxpy<float>", NULL};

static int setup(void **state)
{
	jct_setup(state);
	/* Let other users reach the socket in it (the cache stays 0700). */
	assert_int_equal(chmod(((struct jtl_daemon *)*state)->dir, 0711), 0);
	return 0;
}

static void need_root(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root to run clients as another uid\n");
		skip();
	}
}

/* Starts d with a configuration file holding text, logging at debug level
 * (where accepted connections are logged with the peer's credentials). */
static void start_with_config(struct jtl_daemon *d, const char *text)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/jitcached.conf", d->dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	const char *const flags[] = {"--config", path, "--log-level", "debug", NULL};
	jct_daemon_start(d, flags);
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode;
}

/* The one object in the cache (fails unless there is exactly one). */
static void the_object(const struct jtl_daemon *d, char *out, size_t len)
{
	char objects[400];
	int found = 0;
	snprintf(objects, sizeof(objects), "%s/objects", d->cache);
	DIR *top = opendir(objects);
	struct dirent *e, *o;
	assert_non_null(top);
	while ((e = readdir(top))) {
		if (e->d_name[0] == '.')
			continue;
		char sub[700];
		assert_true(strlen(objects) + strlen(e->d_name) + 2 < sizeof(sub));
		snprintf(sub, sizeof(sub), "%s/%s", objects, e->d_name);
		DIR *dir = opendir(sub);
		assert_non_null(dir);
		while ((o = readdir(dir)))
			if (o->d_name[0] != '.') {
				assert_true(strlen(sub) + strlen(o->d_name) + 2 <= len);
				strcpy(out, sub);
				strcat(strcat(out, "/"), o->d_name);
				found++;
			}
		closedir(dir);
	}
	closedir(top);
	assert_int_equal(found, 1);
}

/* --- clients as another uid ------------------------------------------------- */

/* What one operation of a child gave: its code and message. */
struct outcome {
	int rc;
	char msg[240];
};

enum op {
	OP_CONNECT,
	OP_PING,
	OP_VERSION,
	OP_STATS,
	OP_HIT,
	OP_COMPILE,
	OP_STATS_ZERO,
	OP_LS,
	OP_SHOW,
	OP_PURGE,
	OP_GC,
	OP_VERIFY,
	OP__COUNT
};
static const char *const op_names[OP__COUNT] = {"connect", "ping",    "version",      "stats",
						"hit",	   "compile", "stats --zero", "ls",
						"show",	   "purge",   "gc",	      "verify"};

struct child_ops {
	const struct jtl_daemon *d;
	const jc_request *hit, *fresh;
	const char *key; /* for show */
};

static void admin_op(jc_client *c, const char *cmd, const char *arg, struct outcome *o)
{
	struct jc_admin_req req = {.command = (char *)cmd};
	char *args[1] = {(char *)arg};
	struct jc_admin_reply reply = {0};
	if (arg)
		req.args = (struct jc_strv){args, 1};
	o->rc = jc__client_admin(c, &req, &reply);
	if (o->rc == 0)
		o->rc = reply.status;
	snprintf(o->msg, sizeof(o->msg), "%s", o->rc ? jc_client_errmsg(c) : "");
	jc__admin_reply_clear(&reply);
}

/* In the child: every operation, each on a connection of its own. */
static void child_run(const struct child_ops *ops, struct outcome *out)
{
	for (int op = 0; op < OP__COUNT; op++) {
		jc_client *c = NULL;
		struct outcome *o = &out[op];
		o->rc = jc_client_connect(ops->d->sock, &c);
		if (o->rc != 0) {
			snprintf(o->msg, sizeof(o->msg), "%s", jc_client_errmsg(NULL));
			continue;
		}
		jc_result *res = NULL;
		switch (op) {
		case OP_CONNECT:
			break;
		case OP_PING:
			admin_op(c, "ping", NULL, o);
			break;
		case OP_VERSION:
			admin_op(c, "version", NULL, o);
			break;
		case OP_STATS:
			admin_op(c, "stats", NULL, o);
			break;
		case OP_STATS_ZERO:
			admin_op(c, "stats", "zero", o);
			break;
		case OP_LS:
			admin_op(c, "ls", NULL, o);
			break;
		case OP_SHOW:
			admin_op(c, "show", ops->key, o);
			break;
		case OP_PURGE:
			admin_op(c, "purge", "all", o);
			break;
		case OP_GC:
			admin_op(c, "gc", NULL, o);
			break;
		case OP_VERIFY:
			admin_op(c, "verify", NULL, o);
			break;
		case OP_HIT:
		case OP_COMPILE:
			o->rc = jc_compile(c, op == OP_HIT ? ops->hit : ops->fresh, &res);
			snprintf(o->msg, sizeof(o->msg), "%s",
				 o->rc					 ? jc_client_errmsg(c)
				 : jc_result_cache_status(res) == JC_HIT ? "hit"
									 : "miss");
			jc_result_free(res);
			break;
		}
		jc_client_close(c);
	}
}

/* Runs every operation in a child that has become uid NOBODY with primary
 * group gid and the supplementary groups given; fills out[OP__COUNT]. */
static void run_as(const struct child_ops *ops, gid_t gid, const gid_t *groups, size_t n,
		   struct outcome *out)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct outcome res[OP__COUNT];
		memset(res, 0, sizeof(res));
		close(p[0]);
		if (setgroups(n, groups) != 0 || setgid(gid) != 0 || setuid(NOBODY) != 0 ||
		    getuid() != NOBODY)
			_exit(99);
		child_run(ops, res);
		_exit(write(p[1], res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 98);
	}
	close(p[1]);
	size_t got = 0;
	while (got < sizeof(struct outcome) * OP__COUNT) {
		ssize_t r = read(p[0], (char *)out + got, sizeof(struct outcome) * OP__COUNT - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(p[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(got, sizeof(struct outcome) * OP__COUNT);
}

static void expect(const struct outcome *out, int op, int rc, const char *msg)
{
	if (out[op].rc != rc || (msg && !strstr(out[op].msg, msg)))
		fprintf(stderr, "%s: %d (%s): %s\n", op_names[op], out[op].rc,
			jc_strerror(out[op].rc), out[op].msg);
	assert_int_equal(out[op].rc, rc);
	if (msg)
		assert_non_null(strstr(out[op].msg, msg));
}

/* Warms the cache with saxpy (the hit) and prepares a fresh request. */
static void prepare(struct child_ops *ops, const struct jtl_daemon *d, char *key, size_t keylen)
{
	jc_request *hit = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	assert_int_equal(jc_compile(c, hit, &res), 0);
	snprintf(key, keylen, "key=%s", jc_result_key(res));
	jc_result_free(res);
	jc_client_close(c);
	ops->d = d;
	ops->hit = hit;
	ops->fresh =
	    jct_request_src("other.cu", "__global__ void other_k(int *p) { *p = 7; }", "sm_90");
	ops->key = key;
}

static void release(struct child_ops *ops)
{
	jc_request_free((jc_request *)ops->hit);
	jc_request_free((jc_request *)ops->fresh);
}

/* --- tests ------------------------------------------------------------------------- */

static void test_modes(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_client *c = jct_connect(d);
	jc_result *res = NULL;
	assert_int_equal(jc_compile(c, r, &res), 0);
	jc_result_free(res);
	jc_client_close(c);
	char path[800], obj[800];
	assert_true(S_ISSOCK(mode_of(d->sock)));
	assert_int_equal(mode_of(d->sock) & 07777, 0600);
	assert_int_equal(mode_of(d->cache) & 07777, 0700);
	const char *subs[] = {"objects", "tmp", "quarantine"};
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", d->cache, subs[i]);
		assert_int_equal(mode_of(path) & 07777, 0700);
	}
	the_object(d, obj, sizeof(obj));
	assert_int_equal(mode_of(obj) & 07777, 0400);
	*strrchr(obj, '/') = '\0';
	assert_int_equal(mode_of(obj) & 07777, 0700);
	static const char *const files[] = {"lock", "index.sqlite", "index.sqlite-wal", "reserve"};
	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", d->cache, files[i]);
		assert_int_equal(mode_of(path) & 07777, 0600);
	}
	assert_int_equal(jtl_daemon_stop(d), 0);

	/* Group-shared: the socket is 0660; the store stays the daemon's alone. */
	start_with_config(d, "group-shared = yes\n");
	assert_int_equal(mode_of(d->sock) & 07777, 0660);
	assert_int_equal(mode_of(d->cache) & 07777, 0700);
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", d->cache, subs[i]);
		assert_int_equal(mode_of(path) & 07777, 0700);
	}
	jc_request_free(r);
}

/* A per-user daemon's socket (0600) keeps another uid out at connect(). */
static void test_other_uid_kept_out_by_mode(void **state)
{
	struct jtl_daemon *d = *state;
	need_root();
	jct_daemon_start(d, NULL);
	struct child_ops ops;
	char key[64];
	struct outcome out[OP__COUNT];
	prepare(&ops, d, key, sizeof(key));
	gid_t none[1] = {NOBODY};
	run_as(&ops, NOBODY, none, 1, out);
	for (int op = 0; op < OP__COUNT; op++)
		expect(out, op, JC_ECONNECT, "Permission denied");
	release(&ops);
}

/* The socket lets the group in; the allow-list still turns nobody away. */
static void test_allow_list_refuses(void **state)
{
	struct jtl_daemon *d = *state;
	need_root();
	start_with_config(d, "group-shared = yes\nallow-uids = 4242, 4243\n");
	struct child_ops ops;
	char key[64];
	struct outcome out[OP__COUNT];
	prepare(&ops, d, key, sizeof(key));
	gid_t root_group[1] = {0}; /* the socket's group: connect() is allowed */
	run_as(&ops, NOBODY, root_group, 1, out);
	for (int op = 0; op < OP__COUNT; op++)
		expect(out, op, JC_EDENIED,
		       "uid 65534 is not allowed to use this jitcached (allow-uids)");
	assert_true(jct_log_count(d, "refused connection of uid 65534 gid 65534 pid "));
	/* root and the daemon's own uid are always allowed. */
	assert_int_equal(jct_stat(d, "entries"), 1);
	release(&ops);
}

/* An allowed, unprivileged uid: the everyday commands, not the admin ones. */
static void test_admin_commands_need_admin(void **state)
{
	struct jtl_daemon *d = *state;
	need_root();
	start_with_config(d, "group-shared = yes\nallow-uids = 65534\n");
	struct child_ops ops;
	char key[64];
	struct outcome out[OP__COUNT];
	prepare(&ops, d, key, sizeof(key));
	gid_t root_group[1] = {0};
	run_as(&ops, NOBODY, root_group, 1, out);
	expect(out, OP_CONNECT, 0, NULL);
	expect(out, OP_PING, 0, NULL);
	expect(out, OP_VERSION, 0, NULL);
	expect(out, OP_STATS, 0, NULL);
	expect(out, OP_HIT, 0, "hit");
	expect(out, OP_COMPILE, 0, "miss");
	expect(out, OP_STATS_ZERO, JC_EDENIED, "is limited to root, uid 0 and the admin group");
	expect(out, OP_GC, JC_EDENIED, "is limited to root, uid 0 and the admin group");
	expect(out, OP_VERIFY, JC_EDENIED, "is limited to root, uid 0 and the admin group");
	/* ls, show and purge run on the uid's own entries (issue 15): the one
	 * it hit (show) and the one it compiled; purge --all drops its use of
	 * both, and only the one nobody else uses leaves the cache. */
	expect(out, OP_LS, 0, NULL);
	expect(out, OP_SHOW, 0, NULL);
	expect(out, OP_PURGE, 0, NULL);
	assert_true(jct_log_count(d, "debug NET: client uid 65534 gid 65534 pid "));
	assert_true(jct_log_count(d, "refused 'stats' to uid 65534 gid 65534"));
	assert_true(jct_log_count(d, "purge all by uid 65534 pid "));
	/* Nothing was zeroed; root's entry is still there. */
	assert_int_equal(jct_stat(d, "entries"), 1);
	assert_int_equal(jct_stat(d, "hits"), 1);
	assert_int_equal(jct_stat(d, "compiles"), 2);
	release(&ops);
}

/* The admin group, as a supplementary group (SO_PEERGROUPS) or the primary one. */
static void test_admin_group(void **state)
{
	struct jtl_daemon *d = *state;
	need_root();
	struct group *g = getgrgid(ADMIN_GID);
	if (!g) {
		fprintf(stderr, "skipped: no group %d to use as the admin group\n", ADMIN_GID);
		skip();
	}
	char conf[256];
	snprintf(conf, sizeof(conf), "group-shared = yes\nallow-uids = 65534\nadmin-group = %s\n",
		 g->gr_name);
	start_with_config(d, conf);
	struct child_ops ops;
	char key[64];
	struct outcome out[OP__COUNT];
	prepare(&ops, d, key, sizeof(key));
	gid_t supplementary[2] = {0, ADMIN_GID};
	run_as(&ops, NOBODY, supplementary, 2, out);
	for (int op = 0; op < OP__COUNT; op++)
		expect(out, op, 0, NULL); /* purge --all among them */
	assert_int_equal(jct_stat(d, "entries"), 0);
	/* Primary group: same rights (the socket reached through group 0). */
	gid_t zero[1] = {0};
	run_as(&ops, ADMIN_GID, zero, 1, out);
	expect(out, OP_LS, 0, NULL);
	expect(out, OP_PURGE, 0, NULL);
	release(&ops);
}

/* Header names: a NUL byte (only a raw frame can carry one), "..", "/". */
static void test_bad_header_names(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	jc_request *r =
	    jct_request_src("k.cu", "#include \"evilXname.h\"\n__global__ void k() {}", "sm_90");
	assert_int_equal(jc_request_add_header(r, "evilXname.h", "#pragma once\n", 13), 0);
	jc_client *c = jct_connect(d);
	struct jc_buf b = {0};
	assert_int_equal(jc__encode_req(&b, &((struct jc_request *)r)->req), 0);
	/* The header's name field holds "evilXname.h": make the X a NUL. */
	uint8_t *x = NULL;
	for (size_t i = JC_FRAME_HDR + 6; i + 11 <= b.len && !x; i++)
		if (memcmp(b.data + i, "evilXname.h", 11) == 0 &&
		    b.data[i - 6] == 1) /* tag 1: name */
			x = b.data + i + 4;
	assert_non_null(x);
	*x = '\0';
	int fd = jc__client_fd(c);
	assert_int_equal(jc__io_write_all(fd, b.data, b.len), 0);
	struct jc_buf in = {0};
	uint16_t type;
	int code = 0;
	char *msg = NULL;
	assert_int_equal(jc__io_read_frame(fd, &in, &type, NULL, 5000), 0);
	assert_int_equal(type, JC_MSG_ERROR);
	assert_int_equal(jc__decode_error(in.data, in.len, &code, &msg), 0);
	assert_int_equal(code, JC_EPROTO);
	assert_non_null(strstr(msg, "malformed COMPILE request"));
	free(msg);
	jc__buf_free(&in);
	jc__buf_free(&b);
	jc_client_close(c);

	/* ".." and absolute names, through the library. */
	const char *names[] = {"../etc/passwd", "a/../../b.h", "/etc/passwd", "..", NULL};
	for (int i = 0; names[i]; i++) {
		jc_request *bad = jct_request_src("k.cu", "__global__ void k() {}", "sm_90");
		assert_int_equal(jc_request_add_header(bad, names[i], "x", 1), 0);
		c = jct_connect(d);
		jc_result *res = NULL;
		assert_int_equal(jc_compile(c, bad, &res), JC_EINVAL);
		assert_null(res);
		assert_non_null(
		    strstr(jc_client_errmsg(c), names[i][0] == '/' ? "absolute" : "\"..\""));
		jc_client_close(c);
		jc_request_free(bad);
	}
	assert_int_equal(jct_stat(d, "bad_requests"), 5);
	assert_int_equal(jct_stat(d, "compiles"), 0);
	jc_request_free(r);
}

/* An object with another owner, writable by others, or a symlink in its
 * place (to the right bytes, even) is never served: it is quarantined and
 * compiled again. Hits read the file (--hot-copy-budget 0: a hot copy keeps
 * serving the bytes it checked when it was made, test_hitpath). */
static void test_object_checks(void **state)
{
	struct jtl_daemon *d = *state;
	need_root();
	const char *const no_copies[] = {"--hot-copy-budget", "0", NULL};
	jct_daemon_start(d, no_copies);
	jc_request *r = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_client *c = jct_connect(d);
	jc_result *ref = NULL, *res = NULL;
	assert_int_equal(jc_compile(c, r, &ref), 0);
	char obj[800], copy[800];
	snprintf(copy, sizeof(copy), "%s/copy", d->dir);
	for (int round = 0; round < 3; round++) {
		the_object(d, obj, sizeof(obj));
		if (round == 0) {
			assert_int_equal(chown(obj, NOBODY, NOBODY), 0);
		} else if (round == 1) {
			assert_int_equal(chmod(obj, 0666), 0);
		} else {
			assert_int_equal(rename(obj, copy), 0);
			assert_int_equal(symlink(copy, obj), 0);
		}
		assert_int_equal(jc_compile(c, r, &res), 0);
		assert_int_equal(jc_result_cache_status(res), JC_MISS);
		size_t na, nb;
		const void *da = jc_result_data(ref, &na), *db = jc_result_data(res, &nb);
		assert_int_equal(na, nb);
		assert_memory_equal(da, db, na);
		jc_result_free(res);
		assert_int_equal(jct_stat(d, "corrupt_objects"), round + 1);
	}
	/* The fresh object is a plain file of ours again, and is served. */
	the_object(d, obj, sizeof(obj));
	struct stat st;
	assert_int_equal(lstat(obj, &st), 0);
	assert_true(S_ISREG(st.st_mode) && st.st_uid == 0 && (st.st_mode & 0777) == 0400);
	assert_int_equal(jc_compile(c, r, &res), 0);
	assert_int_equal(jc_result_cache_status(res), JC_HIT);
	jc_result_free(res);
	jc_result_free(ref);
	jc_client_close(c);
	jc_request_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_modes, setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_other_uid_kept_out_by_mode, setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_allow_list_refuses, setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_admin_commands_need_admin, setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_admin_group, setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_header_names, setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_object_checks, setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
