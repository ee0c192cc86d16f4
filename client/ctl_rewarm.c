/* SPDX-License-Identifier: MIT */
/* jitcachectl warm, export and import (ctl.h; daemon/rewarm.c, core/kept.h,
 * bundle.h). */
#include "client/ctl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/bundle.h"
#include "client/progress.h"
#include "common/includes.h"
#include "common/log.h"
#include "common/util.h"
#include "core/kept.h"

/* --- re-warm, export, import (daemon/rewarm.c, core/kept.h, bundle.h) ------ */

/* The requests a warm reply lists as failed (records after the first). */
static void print_failures(const struct jc_admin_reply *reply, const char *what)
{
	if (reply->n_rec > 1)
		printf("%zu requests failed to %s with this toolchain (kept as negative entries "
		       "with their logs; `jitcachectl show KEY`):\n",
		       reply->n_rec - 1, what);
	for (size_t i = 1; i < reply->n_rec; i++) {
		const struct jc_record *r = &reply->rec[i];
		printf("  %s  ", jc__ctl_gets(r, "key"));
		jc__escape_fputs(jc__ctl_gets(r, "source_name"), stdout);
		fputs(": ", stdout);
		jc__escape_fputs(jc__ctl_gets(r, "message"), stdout);
		putchar('\n');
		const char *log = jc__ctl_gets(r, "log");
		if (*log) {
			jc__escape_fputs(log, stdout);
			if (log[strlen(log) - 1] != '\n')
				putchar('\n');
		}
	}
}

int jc__ctl_cmd_warm(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"top", required_argument, NULL, 't'},
	    {"since", required_argument, NULL, 's'},
	    {"wait", no_argument, NULL, 'w'},
	    {"status", no_argument, NULL, 'S'},
	    {NULL, 0, NULL, 0},
	};
	struct jc_strv args = {0};
	char buf[64];
	int64_t secs;
	int c, wait = 0, rc;
	optind = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 't') {
			snprintf(buf, sizeof(buf), "top=%s", optarg);
		} else if (c == 's') {
			if (jc__parse_duration(optarg, &secs) != 0) {
				jc__strv_clear(&args);
				return jc__ctl_die(2, "bad duration '%s' (e.g. 90s, 15m, 2h, 7d)",
						   optarg);
			}
			snprintf(buf, sizeof(buf), "since=%" PRId64, secs);
		} else if (c == 'S') {
			snprintf(buf, sizeof(buf), "status");
		} else if (c == 'w') {
			wait = 1;
			continue;
		} else {
			jc__strv_clear(&args);
			jc__ctl_sub_usage(stderr, "warm");
			return 2;
		}
		jc__strv_push(&args, buf);
	}
	if (optind < argc) {
		jc__strv_clear(&args);
		return jc__ctl_die(2, "unexpected argument '%s'", argv[optind]);
	}
	struct jc_admin_reply reply = {0};
	rc = jc__ctl_admin("warm", &args, 0, &reply);
	jc__strv_clear(&args);
	if (rc == 0 && reply.status != 0)
		rc = jc__ctl_die(1, "warm: %s",
				 reply.message ? reply.message : jc_strerror(reply.status));
	if (rc != 0 || !reply.n_rec) {
		jc__admin_reply_clear(&reply);
		return rc ? rc : jc__ctl_die(1, "warm: empty answer");
	}
	const struct jc_record *r = &reply.rec[0];
	if (!jc__ctl_geti(r, "keep_requests") && !jc__ctl_getu(r, "total"))
		printf(
		    "requests are not kept (jitcached --keep-requests no): nothing to re-warm\n");
	else if (!jc__ctl_getu(r, "total") && strcmp(jc__ctl_gets(r, "state"), "running") != 0)
		printf(
		    "nothing to re-warm: no kept request of an entry made by another toolchain\n");
	else
		printf("re-warm %s: %" PRIu64 " requests for %s\n", jc__ctl_gets(r, "state"),
		       jc__ctl_getu(r, "total"), jc__ctl_gets(r, "identity"));
	struct jc_progress p;
	jc__progress_init(&p, stdout, "warm");
	while (wait && rc == 0 && strcmp(jc__ctl_gets(&reply.rec[0], "state"), "running") == 0) {
		r = &reply.rec[0];
		jc__progress_show(&p, jc__ctl_getu(r, "done"), jc__ctl_getu(r, "failed"),
				  jc__ctl_getu(r, "total"), 0);
		nanosleep(&(struct timespec){.tv_nsec = 200 * 1000000}, NULL);
		struct jc_strv st = {0};
		jc__strv_push(&st, "status");
		jc__admin_reply_clear(&reply);
		rc = jc__ctl_admin("warm", &st, 0, &reply);
		jc__strv_clear(&st);
		if (rc == 0 && (reply.status != 0 || !reply.n_rec))
			rc = jc__ctl_die(1, "warm: %s",
					 reply.message ? reply.message : "empty answer");
	}
	if (rc == 0 && jc__ctl_getu(&reply.rec[0], "total")) {
		r = &reply.rec[0];
		if (wait)
			jc__progress_show(&p, jc__ctl_getu(r, "done"), jc__ctl_getu(r, "failed"),
					  jc__ctl_getu(r, "total"), 1);
		if (strcmp(jc__ctl_gets(r, "state"), "running") != 0)
			printf("%" PRIu64 " done, %" PRIu64 " failed, %" PRIu64
			       " dropped (budget), "
			       "%.1f CPU s in %.1f s\n",
			       jc__ctl_getu(r, "done"), jc__ctl_getu(r, "failed"),
			       jc__ctl_getu(r, "dropped"), (double)jc__ctl_getu(r, "cpu_ms") / 1e3,
			       (double)jc__ctl_getu(r, "elapsed_ms") / 1e3);
		print_failures(&reply, "compile");
	}
	jc__admin_reply_clear(&reply);
	return rc;
}

static int unhex(const char *s, struct jc_blob *out)
{
	size_t n = strlen(s);
	if (n % 2)
		return JC_EINVAL;
	out->size = n / 2;
	out->data = malloc(out->size ? out->size : 1);
	if (!out->data)
		return JC_ENOMEM;
	for (size_t i = 0; i < out->size; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1) {
			free(out->data);
			out->data = NULL;
			return JC_EINVAL;
		}
		out->data[i] = (uint8_t)v;
	}
	return 0;
}

int jc__ctl_cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"top", required_argument, NULL, 't'},
	    {"uid", required_argument, NULL, 'u'},
	    {"secret-file", required_argument, NULL, 'k'},
	    {NULL, 0, NULL, 0},
	};
	struct jc_strv args = {0};
	const char *out = NULL, *secret = NULL;
	char buf[64], err[512];
	int c, rc;
	optind = 0;
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		if (c == 't' || c == 'u') {
			snprintf(buf, sizeof(buf), "%s=%s", c == 't' ? "top" : "uid", optarg);
			jc__strv_push(&args, buf);
		} else if (c == 'o') {
			out = optarg;
		} else if (c == 'k') {
			secret = optarg;
		} else {
			jc__strv_clear(&args);
			jc__ctl_sub_usage(stderr, "export");
			return 2;
		}
	}
	if (!out || optind < argc) {
		jc__strv_clear(&args);
		jc__ctl_sub_usage(stderr, "export");
		return 2;
	}
	uint8_t *key;
	size_t key_len;
	if (jc__bundle_secret(secret, 1, &key, &key_len, err, sizeof(err)) != 0) {
		jc__strv_clear(&args);
		return jc__ctl_die(1, "export: %s", err);
	}
	struct jc_admin_reply reply = {0};
	rc = jc__ctl_admin("export", &args, 1, &reply);
	jc__strv_clear(&args);
	if (rc == 0 && reply.status != 0)
		rc = jc__ctl_die(1, "export: %s",
				 reply.message ? reply.message : jc_strerror(reply.status));
	struct jc_blob *reqs = calloc(reply.n_rec ? reply.n_rec : 1, sizeof(*reqs));
	const char *identity = reply.n_rec ? jc__ctl_gets(&reply.rec[0], "versions") : "";
	for (size_t i = 0; rc == 0 && i < reply.n_rec; i++)
		if (!reqs || unhex(jc__ctl_gets(&reply.rec[i], "request"), &reqs[i]) != 0)
			rc = jc__ctl_die(1, "export: a bad request record from the daemon");
	if (rc == 0 &&
	    jc__bundle_write(out, key, key_len, identity, reqs, reply.n_rec, err, sizeof(err)) != 0)
		rc = jc__ctl_die(1, "export: %s", err);
	if (rc == 0) {
		printf("exported %zu requests to %s\n", reply.n_rec, out);
		if (reply.message)
			fprintf(stderr, "%s\n", reply.message);
	}
	for (size_t i = 0; reqs && i < reply.n_rec; i++)
		free(reqs[i].data);
	free(reqs);
	sodium_memzero(key, key_len);
	free(key);
	jc__admin_reply_clear(&reply);
	return rc;
}

/* Compiles the n requests through the daemon; counts by outcome. */
static int import_run(struct jc_req *reqs, size_t n, int show)
{
	jc_client *cl = NULL;
	if (jc__ctl_open_client(2, &cl) != 0)
		return jc__ctl_die(1, "import: %s", jc_client_errmsg(NULL));
	uint64_t hit = 0, fleet = 0, compiled = 0, joined = 0, failed = 0;
	struct jc_progress p;
	jc__progress_init(&p, stdout, "import");
	for (size_t i = 0; i < n; i++) {
		jc_request *r = NULL;
		jc_result *res = NULL;
		int rc = jc_request_new(&r);
		if (rc == 0) {
			jc__req_clear(&r->req);
			r->req = reqs[i];
			memset(&reqs[i], 0, sizeof(reqs[i]));
			/* A tree another machine's client read: this client reads its own. */
			jc__req_tree_clear(&r->req);
			rc = jc_compile(cl, r, &res);
		}
		jc_cache_status st = rc == 0 ? jc_result_cache_status(res) : JC_MISS;
		if (rc != 0) {
			failed++;
			fprintf(stderr, "import: request %zu (%s): %s\n", i + 1,
				r && r->req.source_name ? r->req.source_name : "?",
				jc_client_errmsg(cl));
		} else if (st == JC_HIT) {
			hit++;
		} else if (st == JC_REMOTE_HIT) {
			fleet++; /* another machine's compile, verified: none ran here */
		} else if (st == JC_JOINED) {
			joined++; /* the daemon was compiling or fetching it already */
		} else {
			compiled++;
		}
		jc_result_free(res);
		jc_request_free(r);
		if (show)
			jc__progress_show(&p, hit + fleet + compiled + joined, failed, n,
					  i + 1 == n);
	}
	jc_client_close(cl);
	if (show) {
		printf("imported %zu requests: %" PRIu64 " were there, %" PRIu64
		       " from the fleet tier, "
		       "%" PRIu64 " compiled, %" PRIu64 " failed",
		       n, hit, fleet, compiled, failed);
		if (joined)
			printf(", %" PRIu64 " joined a compile or fetch in progress", joined);
		putchar('\n');
	}
	return failed ? 1 : 0;
}

int jc__ctl_cmd_import(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"wait", no_argument, NULL, 'w'},
	    {"secret-file", required_argument, NULL, 'k'},
	    {NULL, 0, NULL, 0},
	};
	const char *secret = NULL;
	int c, wait = 0;
	char err[1024];
	optind = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'w') {
			wait = 1;
		} else if (c == 'k') {
			secret = optarg;
		} else {
			jc__ctl_sub_usage(stderr, "import");
			return 2;
		}
	}
	if (optind + 1 != argc) {
		jc__ctl_sub_usage(stderr, "import");
		return 2;
	}
	uint8_t *key;
	size_t key_len, n;
	struct jc_req *reqs;
	char *identity = NULL;
	if (jc__bundle_secret(secret, 0, &key, &key_len, err, sizeof(err)) != 0)
		return jc__ctl_die(1, "import: %s", err);
	int rc =
	    jc__bundle_read(argv[optind], key, key_len, &reqs, &n, &identity, err, sizeof(err));
	sodium_memzero(key, key_len);
	free(key);
	if (rc != 0)
		return jc__ctl_die(1, "import: %s", err);
	printf("%s: %zu signed requests (exported by %s)\n", argv[optind], n, identity);
	free(identity);
	fflush(stdout);
	pid_t pid = wait ? 0 : fork();
	if (pid > 0) {
		printf(
		    "importing in the background (pid %d); `jitcachectl stats` shows the entries\n",
		    (int)pid);
	} else if (pid == 0) {
		if (!wait)
			setsid();
		rc = import_run(reqs, n, wait);
	} else {
		rc = jc__ctl_die(1, "import: cannot start in the background: %s", strerror(errno));
	}
	for (size_t i = 0; i < n; i++)
		jc__req_clear(&reqs[i]);
	free(reqs);
	if (pid == 0 && !wait)
		_exit(rc);
	return rc;
}
