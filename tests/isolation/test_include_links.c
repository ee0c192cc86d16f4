/* SPDX-License-Identifier: MIT */
/*
 * Headers symlinked out of their -I directory (README, "Symlinked include
 * trees"; issue 22 item 3): Bazel execroots, conda environments, Spack views
 * and Nix profiles are -I directories whose headers are links to files
 * elsewhere. Real users made for the run (useradd, setpriv): U, who owns the
 * tree and the link targets, V, who owns a file U may not read, and D, the
 * uid of a team daemon. Each case runs against a per-user daemon (run as U:
 * it follows the links U may read, and its workers' confinement allows
 * exactly those targets) and a team daemon (run as D, --group-shared: U's
 * client reads the tree, links followed with U's rights):
 *  - a header that is a link to a file outside every declared directory
 *    compiles as plain NVRTC compiles it; again, a hit;
 *  - the target edited: a miss with the new bytes;
 *  - the link retargeted: a miss with the new bytes; the per-user daemon
 *    keys the link's target string too (a retarget to the same bytes
 *    under another name is a miss);
 *  - a chain of links (link -> link -> file) compiles; its end edited: a miss;
 *  - a link to V's 0600 file is refused, naming it, and nothing is stored.
 * Each with the kernel's confinement and again with --confinement userns
 * where the kernel allows it. Exits 77 when not root or without
 * setpriv/useradd.
 */
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

#include "tests/lib/test.h"

static char group[32], user_u[32], user_v[32], user_d[32];
static const char *confinement = "auto"; /* the daemon's --confinement */
static gid_t gid;

enum mode { PER_USER, TEAM };

struct fx {
	struct jtl_daemon d;
	enum mode mode;
	char home[200], outside[200], vdir[200];
};

/* Writes dir/rel as owner, mode 0600 (its directory must exist). */
static void put_as(const char *dir, const char *rel, const char *text, const char *owner)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	jct_write_file(path, text, strlen(text));
	assert_int_equal(jct_sh("chown %s:%s %s && chmod 0600 %s", owner, group, path, path), 0);
}

/* Makes dir/rel a symbolic link to target (replacing it), owned by U. */
static void link_as(const char *dir, const char *rel, const char *target)
{
	assert_int_equal(jct_sh("ln -sfn %s %s/%s && chown -h %s:%s %s/%s", target, dir, rel,
				user_u, group, dir, rel),
			 0);
}

static void header(const struct fx *f, const char *rel, int value)
{
	char text[200];
	snprintf(text, sizeof(text), "#pragma once\n#define LINKED_VALUE %d\n", value);
	put_as(f->outside, rel, text, user_u);
}

static void setup_users(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root to create users and run daemons as them\n");
		exit(77);
	}
	if (jct_sh("command -v setpriv && command -v useradd") != 0) {
		fprintf(stderr, "skipped: needs setpriv and useradd\n");
		exit(77);
	}
	if (jct_group_add("jclg", group, &gid) != 0 ||
	    jct_user_add("jclu", group, user_u, NULL, NULL) != 0 ||
	    jct_user_add("jclv", group, user_v, NULL, NULL) != 0 ||
	    jct_user_add("jcld", group, user_d, NULL, NULL) != 0) {
		fprintf(stderr, "skipped: useradd/groupadd failed\n");
		exit(77);
	}
}

static int setup(void **state, enum mode mode)
{
	struct fx *f = calloc(1, sizeof(*f));
	f->mode = mode;
	jct_daemon_init(&f->d);
	/* U's tree: home/k.cu, home/inc (the -I directory), outside/ (no -I) */
	snprintf(f->home, sizeof(f->home), "%s/home", f->d.dir);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->d.dir);
	snprintf(f->vdir, sizeof(f->vdir), "%s/vhome", f->d.dir);
	assert_int_equal(
	    jct_sh("mkdir -p %s/inc %s/deep %s && chown -R %s:%s %s %s && chmod 0700 %s %s "
		   "&& chown %s:%s %s && chmod 0700 %s",
		   f->home, f->outside, f->vdir, user_u, group, f->home, f->outside, f->home,
		   f->outside, user_v, group, f->vdir, f->vdir),
	    0);
	put_as(f->home, "k.cu",
	       "#include <lib.h>\n__global__ void linked_k(int *p) { *p = LINKED_VALUE; }\n",
	       user_u);
	put_as(f->home, "chain.cu",
	       "#include <chain.h>\n__global__ void chain_k(int *p) { *p = LINKED_VALUE + 1; }\n",
	       user_u);
	put_as(f->home, "secret.cu",
	       "#include <secret.h>\n__global__ void secret_k(int *p) { *p = LINKED_VALUE; }\n",
	       user_u);
	put_as(f->vdir, "secret.h", "#define LINKED_VALUE 4\n", user_v);
	header(f, "real.h", 31337);
	char target[300];
	snprintf(target, sizeof(target),
		 "../../outside/real.h"); /* relative, as Bazel makes them */
	link_as(f->home, "inc/lib.h", target);
	snprintf(target, sizeof(target), "%s/secret.h", f->vdir);
	link_as(f->home, "inc/secret.h", target);
	const char *flags[] = {"--confinement", confinement, NULL};
	jct_daemon_start_as(&f->d, mode == PER_USER ? user_u : user_d, group, gid, mode == TEAM,
			    user_u, flags);
	*state = f;
	return 0;
}

static int setup_per_user(void **state)
{
	return setup(state, PER_USER);
}

static int setup_team(void **state)
{
	return setup(state, TEAM);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	jct_daemon_stop_as(&f->d);
	if (getenv("JC_TEST_KEEP"))
		jct_sh("cat %s/daemon.log >&2", f->d.dir);
	jct_daemon_cleanup(&f->d);
	free(f);
	return 0;
}

/* U compiles home/SRC to PTX (-I home/inc): 0 or the exit status; *word
 * "hit"/"miss", key[33], and whether the PTX holds want (a folded value). */
static int compile(const struct fx *f, const char *src, char word[16], char key[33], int want,
		   char **out)
{
	int rc = jct_as_user(
	    f->d.dir, user_u, group, gid, out,
	    "cd %s && %s --socket %s compile %s --arch compute_90 --output ptx -o %s/out.ptx "
	    "-- -I%s/inc && cat %s/out.ptx",
	    f->home, getenv("JITCACHECTL"), f->d.sock, src, f->home, f->home, f->home);
	if (rc != 0)
		return rc;
	const char *k = strstr(*out, "key=");
	if (!k)
		fail_msg("no key in: %s", *out);
	snprintf(key, 33, "%.32s", k + 4);
	sscanf(*out, "%15s", word);
	char num[32];
	snprintf(num, sizeof(num), "%d;", want);
	if (!strstr(*out, num))
		fail_msg("the PTX lacks %d (the header's bytes): %s", want, *out);
	return 0;
}

static void expect(const struct fx *f, const char *src, const char *want_word, int want,
		   char key[33])
{
	char word[16], *out;
	int rc = compile(f, src, word, key, want, &out);
	if (rc != 0)
		fail_msg("compile %s: %s", src, out);
	if (strcmp(word, want_word) != 0)
		fail_msg("compile %s: %s, wanted %s: %s", src, word, want_word, out);
	free(out);
}

static void test_link_out_of_tree(void **state)
{
	struct fx *f = *state;
	char k1[33], k2[33], k3[33], k4[33];
	expect(f, "k.cu", "miss", 31337, k1);
	expect(f, "k.cu", "hit", 31337, k2);
	assert_string_equal(k1, k2);
	/* the target edited: a miss with the new bytes */
	header(f, "real.h", 4711);
	jct_settle();
	expect(f, "k.cu", "miss", 4711, k2);
	assert_string_not_equal(k1, k2);
	expect(f, "k.cu", "hit", 4711, k3);
	/* the link retargeted to other bytes: a miss with them */
	header(f, "other.h", 2024);
	link_as(f->home, "inc/lib.h", "../../outside/other.h");
	jct_settle();
	expect(f, "k.cu", "miss", 2024, k3);
	assert_string_not_equal(k2, k3);
	if (f->mode == PER_USER) {
		/* to the same bytes by another name: the link is keyed too */
		assert_int_equal(jct_sh("cp -p %s/other.h %s/same.h", f->outside, f->outside), 0);
		char target[300];
		snprintf(target, sizeof(target), "%s/same.h", f->outside); /* absolute */
		link_as(f->home, "inc/lib.h", target);
		jct_settle();
		expect(f, "k.cu", "miss", 2024, k4);
		assert_string_not_equal(k3, k4);
		expect(f, "k.cu", "hit", 2024, k4);
	}
}

static void test_chain_of_links(void **state)
{
	struct fx *f = *state;
	char k1[33], k2[33], target[300];
	header(f, "deep/end.h", 500);
	snprintf(target, sizeof(target), "%s/deep/end.h", f->outside);
	link_as(f->outside, "mid.h", target);
	link_as(f->home, "inc/chain.h", "../../outside/mid.h");
	expect(f, "chain.cu", "miss", 501, k1);
	expect(f, "chain.cu", "hit", 501, k2);
	header(f, "deep/end.h", 600);
	jct_settle();
	expect(f, "chain.cu", "miss", 601, k2);
	assert_string_not_equal(k1, k2);
	/* the middle link retargeted */
	header(f, "deep/end2.h", 700);
	snprintf(target, sizeof(target), "%s/deep/end2.h", f->outside);
	link_as(f->outside, "mid.h", target);
	jct_settle();
	expect(f, "chain.cu", "miss", 701, k1);
	assert_string_not_equal(k1, k2);
}

static void test_link_to_another_users_file(void **state)
{
	struct fx *f = *state;
	char word[16], key[33], *out;
	int64_t entries = jct_stat(&f->d, "entries");
	int rc = compile(f, "secret.cu", word, key, 4, &out);
	if (rc == 0)
		fail_msg("V's 0600 file was compiled for U: %s", out);
	jct_assert_has(out, "secret.h");
	free(out);
	assert_int_equal(jct_stat(&f->d, "entries"), entries);
}

int main(void)
{
	setup_users();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_link_out_of_tree, setup_per_user, teardown),
	    cmocka_unit_test_setup_teardown(test_chain_of_links, setup_per_user, teardown),
	    cmocka_unit_test_setup_teardown(test_link_to_another_users_file, setup_per_user,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_link_out_of_tree, setup_team, teardown),
	    cmocka_unit_test_setup_teardown(test_chain_of_links, setup_team, teardown),
	    cmocka_unit_test_setup_teardown(test_link_to_another_users_file, setup_team, teardown),
	};
	/* Then the namespace kind (the links' targets bound into the private
	 * root), where this kernel lets us make one. */
	return jct_run_confinement_groups(tests, sizeof(tests) / sizeof(tests[0]), &confinement);
}
