/* SPDX-License-Identifier: MIT */
#include "core/request.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/includes.h"
#include "common/util.h"
#include "core/fatbin.h"
#include "jitcache/jitcache.h"

#define invalid(err, errlen, ...) jc__fail(err, errlen, JC_EINVAL, __VA_ARGS__)

static int names_arch(const char *opt)
{
	return strcmp(opt, "-arch") == 0 || strncmp(opt, "-arch=", 6) == 0 ||
	       strcmp(opt, "--gpu-architecture") == 0 ||
	       strncmp(opt, "--gpu-architecture=", 19) == 0;
}

/*
 * NVRTC options that make the compiler read or write files the request
 * names (NVRTC API reference, "Supported Compile Options": --time,
 * --fdevice-time-trace, the precompiled-header options; ptxas's own output
 * options through --ptxas-options/-Xptxas). The daemon never writes where a
 * client says, and a cached artifact must not depend on files outside the key.
 */
static int touches_files(const char *opt)
{
	static const char *const prefixes[] = {
	    "-time",
	    "--time",
	    "-fdevice-time-trace",
	    "--fdevice-time-trace",
	    "-pch",
	    "--pch",
	    "-create-pch",
	    "--create-pch",
	    "-use-pch",
	    "--use-pch",
	    "-pch-dir",
	    "--pch-dir",
	};
	const char *o = opt;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t n = strlen(prefixes[i]);
		if (strncmp(o, prefixes[i], n) == 0 && (o[n] == '\0' || o[n] == '='))
			return 1;
	}
	int ptxas = strncmp(o, "-Xptxas=", 8) == 0 || strncmp(o, "--ptxas-options=", 16) == 0;
	const char *v = strchr(o, '=');
	return ptxas && (strstr(v, "-o") || strstr(v, "output"));
}

static int check_opts(const struct jc_strv *sv, const char *what, char *err, size_t errlen)
{
	for (size_t i = 0; i < sv->n; i++) {
		if (!sv->v[i] || !sv->v[i][0])
			return invalid(err, errlen, "%s %zu is empty", what, i);
		if (names_arch(sv->v[i]))
			return invalid(
			    err, errlen,
			    "%s \"%s\": set the architecture with --arch, not as an option", what,
			    sv->v[i]);
		if (touches_files(sv->v[i]))
			return invalid(err, errlen,
				       "%s \"%s\" makes the compiler read or write files of its "
				       "own: not allowed through the cache",
				       what, sv->v[i]);
	}
	return 0;
}

/* Names end up in logs and compile logs: no control characters. */
static int check_name(const char *name, const char *what, char *err, size_t errlen)
{
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return invalid(err, errlen, "%s contains a control character (0x%02x)",
				       what, *c);
	return 0;
}

static int check_strs(const struct jc_strv *sv, const char *what, char *err, size_t errlen)
{
	for (size_t i = 0; i < sv->n; i++)
		if (!sv->v[i] || !sv->v[i][0])
			return invalid(err, errlen, "%s %zu is empty", what, i);
	return 0;
}

static int check_header_name(const char *name, char *err, size_t errlen)
{
	if (!name || !name[0])
		return invalid(err, errlen, "a header name is empty");
	if (name[0] == '/')
		return invalid(err, errlen, "header \"%s\": absolute names are not allowed", name);
	if (strchr(name, '\\'))
		return invalid(err, errlen, "header \"%s\": backslashes are not allowed", name);
	for (const char *c = name; c; c = strchr(c, '/')) {
		c += *c == '/';
		if (strncmp(c, "..", 2) == 0 && (c[2] == '/' || c[2] == '\0'))
			return invalid(err, errlen,
				       "header \"%s\": \"..\" components are not allowed", name);
	}
	return 0;
}

static int cmp_blob(const void *a, const void *b)
{
	return strcmp((*(const struct jc_blob *const *)a)->name,
		      (*(const struct jc_blob *const *)b)->name);
}

int jc__req_sorted_headers(const struct jc_req *req, const struct jc_blob ***out, char *err,
			   size_t errlen)
{
	*out = NULL;
	if (!req->n_headers)
		return 0;
	const struct jc_blob **h = malloc(req->n_headers * sizeof(*h));
	if (!h)
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory sorting %zu headers",
				req->n_headers);
	for (size_t i = 0; i < req->n_headers; i++)
		h[i] = &req->headers[i];
	qsort(h, req->n_headers, sizeof(*h), cmp_blob);
	*out = h;
	return 0;
}

/* The client-read tree (req.h): "I/REL" names of the request's -I
 * directories, each once, of one kind of round (bytes or hashes). */
static int check_tree(const struct jc_req *req, char *err, size_t errlen)
{
	int hashes = 0, bytes = 0, rc = 0;
	struct jc_inc_tops *tops = NULL;
	if (req->n_tree && (rc = jc__inc_tops_new(&req->include_dirs, &tops)) != 0)
		return rc == JC_ENOMEM ? rc
				       : invalid(err, errlen, "an include dir too long for a tree");
	for (size_t i = 0; rc == 0 && i < req->n_tree; i++) {
		const struct jc_blob *b = &req->tree[i];
		char *end;
		errno = 0;
		unsigned long dir = b->name ? strtoul(b->name, &end, 10) : 0;
		int top_itself = b->name && end != b->name && !*end &&
				 (b->type == JC_TREE_DIR || b->type == JC_TREE_TOOLKIT);
		if (!b->name || errno || end == b->name || (*end != '/' && !top_itself) ||
		    !jc__inc_tops_is_top(tops, dir) || (!top_itself && !jc__inc_rel_valid(end + 1)))
			rc = invalid(
			    err, errlen,
			    "tree file %zu: name \"%s\" is not DIR-INDEX/RELATIVE-PATH "
			    "of a top directory of the %zu include dirs (no \".\", \"..\" or empty "
			    "component)",
			    i, b->name ? b->name : "", req->include_dirs.n);
		if (((b->type == JC_TREE_HASH || b->type == JC_TREE_DIR) && b->size != 16) ||
		    ((b->type == JC_TREE_ABSENT || b->type == JC_TREE_TOOLKIT) && b->size != 0) ||
		    (b->type != JC_TREE_FILE && b->type != JC_TREE_HASH &&
		     b->type != JC_TREE_ABSENT && b->type != JC_TREE_DIR &&
		     b->type != JC_TREE_TOOLKIT))
			rc =
			    rc
				?: invalid(err, errlen, "tree file \"%s\": bad type %u or size %zu",
					   b->name, b->type, b->size);
		if (!b->data && b->size)
			rc = rc
				 ?: invalid(err, errlen,
					    "tree file \"%s\" has %zu bytes but no data", b->name,
					    b->size);
		if (rc)
			break;
		hashes |= b->type == JC_TREE_HASH;
		bytes |= b->type == JC_TREE_FILE;
	}
	jc__inc_tops_free(tops);
	if (rc)
		return rc;
	if (req->tree_round > JC_TREE_DIGEST || (!req->tree_round && req->n_tree) ||
	    (req->tree_round == JC_TREE_LOOKUP && bytes) ||
	    (req->tree_round == JC_TREE_BYTES && hashes) ||
	    (req->tree_round == JC_TREE_DIGEST && req->n_tree))
		return invalid(err, errlen, "tree round %u with %s", req->tree_round,
			       bytes	? "bytes"
			       : hashes ? "hashes"
					: "no files");
	if (req->tree_round && !req->include_dirs.n)
		return invalid(err, errlen, "a tree without include dirs");
	return 0;
}

int jc__req_validate(const struct jc_req *req, char *err, size_t errlen)
{
	int rc;
	if (req->job < JC_JOB_COMPILE || req->job > JC_JOB_COMPILE_LINK)
		return invalid(err, errlen, "unknown job kind %u", req->job);
	if (!jc__output_name(req->output))
		return invalid(err, errlen, "unknown output kind %u", req->output);
	if (req->job != JC_JOB_COMPILE && req->output == JC_OUTPUT_LTOIR)
		return invalid(err, errlen, "a link produces cubin or PTX, not LTO-IR");
	if (req->job == JC_JOB_LINK && !req->n_link_inputs)
		return invalid(err, errlen, "a link job needs link inputs");
	if (req->output == JC_OUTPUT_FATBIN) {
		struct jc_targets t;
		if (req->job != JC_JOB_COMPILE)
			return invalid(err, errlen,
				       "a fatbin is made from a compile: a link takes one target");
		if ((rc = jc__targets_parse(req->arch, &t, err, errlen)))
			return rc;
	} else if (req->arch && strchr(req->arch, ',')) {
		return invalid(err, errlen,
			       "a target list (%s) makes a fatbin: ask for fatbin output, "
			       "not %s",
			       req->arch, jc__output_name(req->output));
	} else if (jc__arch_number(req->arch) < 0) {
		return invalid(err, errlen,
			       "architecture \"%s\" is not sm_NN, sm_NNa, sm_NNf or compute_NN",
			       req->arch ? req->arch : "");
	}
	if (req->output == JC_OUTPUT_CUBIN && strncmp(req->arch, "compute_", 8) == 0)
		return invalid(err, errlen,
			       "%s is a virtual architecture: a cubin needs a real one "
			       "(sm_%s), or ask for PTX or LTO-IR output",
			       req->arch, req->arch + 8);
	if (req->job != JC_JOB_LINK && (!req->source_name || !req->source_name[0]))
		return invalid(err, errlen, "the source name is empty");
	if (req->source_name && (rc = check_name(req->source_name, "the source name", err, errlen)))
		return rc;
	if (req->display_name &&
	    (rc = check_name(req->display_name, "the display name", err, errlen)))
		return rc;
	if (req->name_free > 1 ||
	    (req->name_free && (req->job != JC_JOB_COMPILE || req->output == JC_OUTPUT_FATBIN)))
		return invalid(err, errlen,
			       "name_free (field 33) is 0 or 1, and only for a compile of "
			       "one target");
	if (req->follow.n)
		return invalid(err, errlen,
			       "field 20 (links to follow) is the daemon's, for its workers");
	if (req->reject_reason > JC_REJECT_LOAD_FAILED)
		return invalid(err, errlen, "unknown reject reason %u", req->reject_reason);
	if (!req->source && req->source_size)
		return invalid(err, errlen, "source has %zu bytes but no data", req->source_size);
	if ((rc = check_opts(&req->options, "option", err, errlen)) ||
	    (rc = check_opts(&req->link_options, "link option", err, errlen)) ||
	    (rc = check_strs(&req->include_dirs, "include dir", err, errlen)) ||
	    (rc = check_strs(&req->name_exprs, "name expression", err, errlen)) ||
	    (rc = jc__inc_path_parse(req, NULL, err, errlen)) ||
	    (rc = jc__inc_dirs_check(&req->include_dirs, 0, err, errlen)))
		return rc;
	if ((rc = check_tree(req, err, errlen)))
		return rc;
	for (size_t i = 0; i < req->n_link_inputs; i++) {
		const struct jc_blob *b = &req->link_inputs[i];
		if (!b->name || !b->name[0])
			return invalid(err, errlen, "link input %zu has no name", i);
		if ((rc = check_name(b->name, "a link input name", err, errlen)))
			return rc;
		if (!jc__input_type_name(b->type))
			return invalid(err, errlen, "link input \"%s\": unknown type %u", b->name,
				       b->type);
		if (!b->data && b->size)
			return invalid(err, errlen, "link input \"%s\" has %zu bytes but no data",
				       b->name, b->size);
	}
	for (size_t i = 0; i < req->n_headers; i++) {
		const struct jc_blob *b = &req->headers[i];
		if ((rc = check_header_name(b->name, err, errlen)) ||
		    (rc = check_name(b->name, "a header name", err, errlen)))
			return rc;
		if (!b->data && b->size)
			return invalid(err, errlen, "header \"%s\" has %zu bytes but no data",
				       b->name, b->size);
	}
	const struct jc_blob **h;
	if ((rc = jc__req_sorted_headers(req, &h, err, errlen)) != 0)
		return rc;
	for (size_t i = 1; i < req->n_headers; i++) {
		if (strcmp(h[i - 1]->name, h[i]->name) == 0) {
			rc = invalid(err, errlen, "header \"%s\" is given twice", h[i]->name);
			break;
		}
	}
	free(h);
	return rc;
}

/* Every target of a fatbin request is one NVRTC supports, and there is a
 * fatbin tool (fatbin.h). */
static int fatbin_admit(const struct jc_toolchain *tc, const struct jc_req *req, char *err,
			size_t errlen)
{
	struct jc_targets t;
	int rc = jc__targets_parse(req->arch, &t, err, errlen);
	if (rc)
		return rc;
	for (size_t i = 0; i < t.n; i++)
		if (!jc__toolchain_supports_arch(tc, t.v[i]))
			return jc__fail(err, errlen, JC_EINVAL,
					"NVRTC %s does not support %s (in the target "
					"list %s); it supports %s",
					tc->nvrtc_version, t.v[i], req->arch, tc->supported_archs);
	if (tc->fatbin_tool == JC_FATBIN_NONE)
		return jc__fail(
		    err, errlen, JC_ENOTSUP,
		    "no fatbin tool in this CUDA toolkit: neither "
		    "nvFatbin (libnvfatbin.so.%.*s beside libnvrtc, CUDA 12.4+) nor the fatbinary "
		    "executable (its bin/); ask for one target at a time",
		    (int)strcspn(tc->nvrtc_version, "."), tc->nvrtc_version);
	return 0;
}

/* jc__toolchain_supports_arch, remembering the last architecture it
 * accepted: requests mostly name one, and the list is fixed at start-up. */
/* The last architecture found supported for a policy: one memo per thread
 * (the daemon's serving threads admit requests at once). */
static __thread struct {
	const struct jc_req_policy *p;
	char arch[24];
} arch_ok;

static int arch_supported(struct jc_req_policy *p, const char *arch)
{
	if (arch_ok.p == p && strcmp(arch, arch_ok.arch) == 0)
		return 1;
	if (!jc__toolchain_supports_arch(p->tc, arch))
		return 0;
	arch_ok.p = p;
	snprintf(arch_ok.arch, sizeof(arch_ok.arch), "%s", arch);
	return 1;
}

int jc__req_admit(struct jc_req_policy *p, const struct jc_req *req, int reads_disk, uid_t peer,
		  char *err, size_t errlen)
{
	if (req->test_fault && !p->test_faults)
		return invalid(err, errlen, "test faults are disabled (JITCACHE_TEST_FAULTS=1)");
	/* Never another compiler's bytes under the application's name. */
	if (req->nvrtc_id && strcmp(req->nvrtc_id, p->tc->nvrtc_id) != 0) {
		pthread_mutex_lock(&p->builds_lock);
		int i = 0;
		while (i < p->n_other_builds && strcmp(p->other_builds[i], req->nvrtc_id) != 0)
			i++;
		if (i == p->n_other_builds && i < JC_OTHER_BUILDS)
			snprintf(p->other_builds[p->n_other_builds++], sizeof(p->other_builds[0]),
				 "%s", req->nvrtc_id);
		pthread_mutex_unlock(&p->builds_lock);
		return jc__fail(
		    err, errlen, JC_EVERSION,
		    "the application loaded another NVRTC build (%s) than this daemon's (%s): "
		    "it compiles with its own",
		    req->nvrtc_id, p->tc->nvrtc_id);
	}
	if (req->output == JC_OUTPUT_FATBIN) {
		int rc = fatbin_admit(p->tc, req, err, errlen);
		if (rc)
			return rc;
	} else if (!arch_supported(p, req->arch)) {
		return invalid(err, errlen, "NVRTC %s does not support %s; it supports %s",
			       p->tc->nvrtc_version, req->arch, p->tc->supported_archs);
	}
	/* Trust model (docs/ARCHITECTURE.md): the daemon opens paths a request
	 * names only for its own uid (and root); another uid's client reads its
	 * include directories itself and sends the files (a tree). */
	if (reads_disk && !req->tree_round && peer != p->self && peer != 0)
		return jc__fail(
		    err, errlen, JC_EDENIED,
		    "this daemon reads include directories and "
		    "absolute #include paths only for its own uid; send the headers in memory");
	return 0;
}

void jc__req_builds(struct jc_req_policy *p, char *out, size_t len)
{
	size_t w = (size_t)snprintf(out, len, "%s (compiles here)", p->tc->nvrtc_id);
	pthread_mutex_lock(&p->builds_lock);
	for (int i = 0; i < p->n_other_builds && w < len; i++)
		w += (size_t)snprintf(out + w, len - w,
				      "; %s (another build: compiled in the application)",
				      p->other_builds[i]);
	pthread_mutex_unlock(&p->builds_lock);
}
