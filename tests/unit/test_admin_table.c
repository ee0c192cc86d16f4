/* SPDX-License-Identifier: MIT */
/*
 * The admin command table (core/admin.h): its rows are well formed, the
 * flags the access check, audit log and jitcachectl read are the ones the
 * trust model needs, and jc__admin_run refuses what a command does not take
 * before it touches any store. (tests/ops/test_cli.c checks that every row
 * has `jitcachectl help` text.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/admin.h"
#include "jitcache/jitcache.h"

static unsigned flags_of(const char *command, const char *arg)
{
	char *args[1] = {(char *)arg};
	struct jc_admin_req req = {.command = (char *)command};
	if (arg)
		req.args = (struct jc_strv){args, 1};
	return jc__admin_flags(&req);
}

static void test_rows(void **state)
{
	(void)state;
	assert_true(jc__admin_n_cmds > 0);
	for (size_t i = 0; i < jc__admin_n_cmds; i++) {
		const struct jc_admin_cmd *c = &jc__admin_cmds[i];
		assert_ptr_equal(jc__admin_find(c->name), c); /* names unique */
		/* a handler exactly where jc__admin_run dispatches */
		assert_int_equal(c->run == NULL, (c->flags & JC_ADMIN_LOOP) != 0);
		int positional = 0;
		for (const struct jc_admin_arg *a = c->args; a && a->name; a++) {
			positional += a->option == NULL;
			/* one row per wire name and option within a command */
			for (const struct jc_admin_arg *b = a + 1; b->name; b++) {
				assert_string_not_equal(a->name, b->name);
				if (a->option && b->option)
					assert_string_not_equal(a->option, b->option);
			}
			/* a local argument is a flag of jitcachectl, never privileged */
			if (a->flags & JC_ADMIN_LOCAL)
				assert_int_equal(a->kind, JC_ARG_FLAG);
			if (a->flags & JC_ADMIN_LOCAL)
				assert_false(a->flags & JC_ADMIN_PRIVILEGED);
		}
		assert_true(positional <= 1);
		/* its help: the synopsis starts with the name, then lines that end
		 * with a newline, each at most 90 columns; every option named */
		assert_non_null(c->help);
		assert_int_equal(strncmp(c->help, c->name, strlen(c->name)), 0);
		assert_int_equal(c->help[strlen(c->help) - 1], '\n');
		for (const char *l = c->help; *l; l += strcspn(l, "\n") + 1)
			assert_true(strcspn(l, "\n") <= 90);
		for (const struct jc_admin_arg *a = c->args; a && a->name; a++)
			if (a->option) {
				char opt[64];
				snprintf(opt, sizeof(opt), "--%s", a->option);
				assert_non_null(strstr(c->help, opt));
			}
	}
	assert_null(jc__admin_find("bogus"));
	assert_null(jc__admin_find(NULL));
}

/* The trust model (ARCHITECTURE.md, "Per-user visibility"). */
static void test_flags(void **state)
{
	(void)state;
	/* every user, on their own entries */
	static const char *const everyone[] = {"ping", "version", "stats", "ls", "show", "purge"};
	for (size_t i = 0; i < sizeof(everyone) / sizeof(everyone[0]); i++)
		assert_false(flags_of(everyone[i], NULL) & JC_ADMIN_PRIVILEGED);
	assert_false(flags_of("purge", "all") & JC_ADMIN_PRIVILEGED);
	/* admins only */
	static const char *const admins[] = {"verify", "gc", "stop"};
	for (size_t i = 0; i < sizeof(admins) / sizeof(admins[0]); i++)
		assert_true(flags_of(admins[i], NULL) & JC_ADMIN_PRIVILEGED);
	assert_true(flags_of("stats", "zero") & JC_ADMIN_PRIVILEGED);
	assert_true(flags_of("stats", "zero") & JC_ADMIN_MUTATING);
	assert_true(flags_of("stats", "by_user") & JC_ADMIN_PRIVILEGED);
	assert_true(flags_of("stats", "by_user") & JC_ADMIN_LISTS);
	/* unknown: refused to non-admins, logged for admins */
	assert_int_equal(flags_of("bogus", NULL), JC_ADMIN_PRIVILEGED | JC_ADMIN_MUTATING);
	/* audited: what changes the store */
	assert_true(flags_of("purge", "all") & JC_ADMIN_MUTATING);
	assert_true(flags_of("verify", NULL) & JC_ADMIN_MUTATING);
	assert_false(flags_of("ls", NULL) & JC_ADMIN_MUTATING);
	assert_false(flags_of("show", "key=00") & JC_ADMIN_MUTATING);
	assert_false(flags_of("stats", NULL) & JC_ADMIN_MUTATING);
	/* offline: not ping, version (they ask a daemon) or stop */
	assert_false(flags_of("ping", NULL) & JC_ADMIN_OFFLINE);
	assert_false(flags_of("stop", NULL) & JC_ADMIN_OFFLINE);
	assert_true(flags_of("ls", NULL) & JC_ADMIN_OFFLINE);
	assert_true(flags_of("ls", NULL) & JC_ADMIN_LISTS);
}

/* Refused by the table before any handler runs (the env has no store). */
static void test_bad_arguments(void **state)
{
	(void)state;
	static const char *const bad[][2] = {
	    {"ls", "all"},	     /* ls takes no argument */
	    {"purge", "all=1"},	     /* a flag with a value */
	    {"purge", "key"},	     /* a key without one */
	    {"stats", "prometheus"}, /* jitcachectl's own, never sent */
	    {"show", "keyx=00"},     {"bogus", NULL},
	    {"stop", NULL}, /* the loop's, not jc__admin_run's */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *args[1] = {(char *)bad[i][1]};
		struct jc_admin_req req = {.command = (char *)bad[i][0]};
		struct jc_admin_env env = {0};
		struct jc_admin_reply out = {0};
		if (bad[i][1])
			req.args = (struct jc_strv){args, 1};
		assert_int_equal(jc__admin_run(&env, &req, &out), JC_EINVAL);
		assert_non_null(out.message);
		fprintf(stderr, "%s %s: %s\n", bad[i][0], bad[i][1] ? bad[i][1] : "", out.message);
		jc__admin_reply_clear(&out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rows),
	    cmocka_unit_test(test_flags),
	    cmocka_unit_test(test_bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
