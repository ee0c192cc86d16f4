/* SPDX-License-Identifier: MIT */
/*
 * jitcachectl: compile and link through jitcached, and the ops commands
 * (stats, purge, ls, show, verify, gc, ping, version, doctor). stats, ls,
 * show, purge, verify and gc also work on the cache directory directly
 * when no daemon runs (under the same lock a daemon takes).
 */
#include "client/ctl.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/doctor.h"
#include "client/inspect.h"
#include "common/includes.h"
#include "common/util.h"
#include "config.h"
#include "core/admin.h"
#include "core/evict.h"

/* The cache directory in use: --cache-dir, else the one the daemon reached
 * serves (its stats say), else the default. 0 or -1 (none). */
static int daemon_cache_dir(char *dir, size_t len)
{
	struct jc_admin_reply rep = {0};
	if (jc__ctl_cache_dir)
		return snprintf(dir, len, "%s", jc__ctl_cache_dir) < (int)len ? 0 : -1;
	int rc =
	    jc__ctl_admin("stats", NULL, 1, &rep) == 0 && rep.status == 0 && rep.n_rec &&
		    *jc__ctl_gets(&rep.rec[0], "cache_dir")
		? (snprintf(dir, len, "%s", jc__ctl_gets(&rep.rec[0], "cache_dir")) < (int)len ? 0
											       : -1)
		: jc__default_cache_dir(dir, len);
	jc__admin_reply_clear(&rep);
	return rc;
}

/* The object of key's entry (admin "show" for its hash and size, then the
 * file in the cache directory, checked against its hash): *data malloc'd. */
static int entry_bytes(const char *key, uint8_t **data, size_t *size)
{
	struct jc_strv args = {0};
	struct jc_admin_reply rep = {0};
	char arg[64], dir[4096], path[4200];
	uint8_t hash[16];
	snprintf(arg, sizeof(arg), "key=%s", key);
	jc__strv_push(&args, arg);
	int rc = jc__ctl_admin("show", &args, 1, &rep);
	free(args.v ? args.v[0] : NULL);
	free(args.v);
	if (rc != 0)
		return rc;
	const char *obj = rep.n_rec ? jc__ctl_gets(&rep.rec[0], "object") : "";
	int64_t want = rep.n_rec ? jc__ctl_geti(&rep.rec[0], "size") : 0;
	if (rep.status != 0)
		rc = jc__ctl_die(1, "inspect: %s",
				 rep.message ? rep.message : jc_strerror(rep.status));
	else if (jc__unhex16(obj, hash) != 0)
		rc = jc__ctl_die(
		    1, "inspect: entry %s holds no artifact (a cached compile failure)", key);
	else if (daemon_cache_dir(dir, sizeof(dir)) != 0)
		rc = jc__ctl_die(2, "inspect: no cache directory (--cache-dir DIR)");
	if (rc == 0) {
		snprintf(path, sizeof(path), "%s/objects/%.2s/%s", dir, obj, obj);
		XXH128_canonical_t c;
		if (jc__ctl_read_file(path, data, size) != 0)
			rc = jc__ctl_die(
			    1,
			    "inspect: cannot read %s: %s (the cache directory is the daemon's "
			    "uid's)",
			    path, strerror(errno));
		else if (XXH128_canonicalFromHash(&c, XXH3_128bits(*data, *size)),
			 (int64_t)*size != want || memcmp(c.digest, hash, 16) != 0)
			rc = jc__ctl_die(
			    1,
			    "inspect: %s does not match its entry (size or hash): `jitcachectl "
			    "verify` quarantines it",
			    path);
	}
	jc__admin_reply_clear(&rep);
	return rc;
}

static int cmd_inspect(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"key", required_argument, NULL, 'k'},
	    {NULL, 0, NULL, 0},
	};
	const char *key = NULL;
	int json = 0, c;
	optind = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'j')
			json = 1;
		else if (c == 'k')
			key = optarg;
		else
			return jc__ctl_die(2, "usage: inspect FILE | --key KEY [--json]");
	}
	if ((key != NULL) == (optind < argc) || optind + 1 < argc)
		return jc__ctl_die(2, "usage: inspect FILE | --key KEY [--json]");
	uint8_t *data = NULL;
	size_t size = 0;
	char source[128], err[512];
	int rc;
	if (key) {
		snprintf(source, sizeof(source), "key %s", key);
		if ((rc = entry_bytes(key, &data, &size)) != 0)
			return rc;
	} else if (jc__ctl_read_file(argv[optind], &data, &size) != 0) {
		return jc__ctl_die(2, "cannot read %s: %s", argv[optind], strerror(errno));
	}
	rc = jc__inspect_print(stdout, key ? source : argv[optind], data, size, json, err,
			       sizeof(err));
	free(data);
	return rc ? jc__ctl_die(1, "inspect %s: %s", key ? source : argv[optind], err) : 0;
}

static void print_config(const char *name, const char *value, const char *source, void *ctx)
{
	(void)ctx;
	printf("(%s) %s = %s\n", source, name, value);
}

/* `config`: what the client library would use, and where each value came
 * from, in the manner of `ccache -p`. */
static int cmd_config(void)
{
	jc_options *o = NULL;
	jc_client *c = NULL;
	int rc = jc_options_new(&o);
	rc = rc ?: jc_options_set_socket(o, jc__ctl_socket);
	rc = rc ?: jc_options_set_cache_dir(o, jc__ctl_cache_dir);
	rc = rc ?: jc__client_new(o, &c);
	if (rc != 0) {
		jc_options_free(o);
		return jc__ctl_die(1, "%s", jc_client_errmsg(NULL));
	}
	jc__client_search(c);
	jc__client_config(o, c, print_config, NULL);
	jc_client_close(c);
	jc_options_free(o);
	return 0;
}

/* `stop`: the daemon stops as on SIGTERM, after answering. */
static int cmd_stop(void)
{
	struct jc_admin_reply reply = {0};
	int rc = jc__ctl_admin("stop", NULL, 0, &reply);
	if (rc == 0 && reply.status != 0)
		rc = jc__ctl_die(1, "stop: %s",
				 reply.message ? reply.message : jc_strerror(reply.status));
	else if (rc == 0)
		fprintf(stderr, "%s\n", reply.message ? reply.message : "stopping");
	jc__admin_reply_clear(&reply);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"cache-dir", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			jc__ctl_socket = optarg;
			break;
		case 'd':
			jc__ctl_cache_dir = optarg;
			break;
		case 'h':
			jc__ctl_usage(stdout);
			return 0;
		case 'V':
			printf("jitcachectl %s\n", JC_VERSION);
			return 0;
		default:
			jc__ctl_usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		jc__ctl_usage(stderr);
		return 2;
	}
	const char *cmd = argv[optind];
	argc -= optind;
	argv += optind;
	if (strcmp(cmd, "help") == 0) {
		if (argc > 1 && !jc__ctl_find_sub(argv[1])) {
			fprintf(stderr, "jitcachectl: unknown command '%s'\n", argv[1]);
			jc__ctl_usage(stderr);
			return 2;
		}
		if (argc > 1)
			jc__ctl_sub_usage(stdout, argv[1]);
		else
			jc__ctl_usage(stdout);
		return 0;
	}
	if (!jc__ctl_find_sub(cmd)) {
		fprintf(stderr, "jitcachectl: unknown command '%s'\n", cmd);
		jc__ctl_usage(stderr);
		return 2;
	}
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			jc__ctl_sub_usage(stdout, cmd);
			return 0;
		}
	if (strcmp(cmd, "compile") == 0)
		return jc__ctl_cmd_compile(argc, argv);
	if (strcmp(cmd, "link") == 0)
		return jc__ctl_cmd_link(argc, argv);
	if (strcmp(cmd, "doctor") == 0) {
		/* The daemon of --cache-dir DIR, if one serves it. */
		static char sock[4096];
		char err[512];
		if (!jc__ctl_socket && jc__ctl_cache_dir &&
		    jc__dir_socket(jc__ctl_cache_dir, sock, sizeof(sock), err, sizeof(err)) == 0)
			jc__ctl_socket = sock;
		return jc__doctor(jc__ctl_socket, jc__ctl_cache_dir);
	}
	if (strcmp(cmd, "inspect") == 0)
		return cmd_inspect(argc, argv);
	if (strcmp(cmd, "warm") == 0)
		return jc__ctl_cmd_warm(argc, argv);
	if (strcmp(cmd, "export") == 0)
		return jc__ctl_cmd_export(argc, argv);
	if (strcmp(cmd, "import") == 0)
		return jc__ctl_cmd_import(argc, argv);
	if (argc > 1 && (strcmp(cmd, "config") == 0 || strcmp(cmd, "stop") == 0)) {
		fprintf(stderr, "jitcachectl: unexpected argument '%s'\n", argv[1]);
		jc__ctl_sub_usage(stderr, cmd);
		return 2;
	}
	if (strcmp(cmd, "config") == 0)
		return cmd_config();
	if (strcmp(cmd, "stop") == 0)
		return cmd_stop();
	return jc__ctl_cmd_admin(cmd, argc, argv);
}
