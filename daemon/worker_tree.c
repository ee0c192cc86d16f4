/* SPDX-License-Identifier: MIT */
/*
 * jitcache-worker's client-read trees (req.h, jc_req.tree; worker_tree.h):
 * the parent (worker.c) writes the job's files into a private directory, TREE/I/REL for include
 * directory I, points the -I options there, and runs the job in a child as for any include
 * directory; the child names what NVRTC read under the client's directory
 * strings (stat identity zeroed: the copy is ours), so that the daemon's
 * coverage check holds the record against the tree it was sent. The parent
 * removes the directory when the child is done. The client's directories
 * are never opened: they are strings here.
 */
#include "daemon/worker_tree.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/includes.h"
#include "common/log.h"
#include "common/util.h"
#include "jitcache/jitcache.h"
#include "proto/io.h"

static char tree_root[PATH_MAX]; /* "" when the job has no tree */
const char *jc__wtree_tmp;
static struct jc_strv tree_dirs; /* the client's include_dirs of that job */

/* In the job's child: deps under TREE/I/ renamed to the client's dir I. */
void jc__wtree_name_deps(struct jc_res *res)
{
	size_t rl = strlen(tree_root);
	for (size_t i = 0; rl && i < res->n_deps; i++) {
		struct jc_dep *d = &res->deps[i];
		char *end;
		if (strncmp(d->path, tree_root, rl) != 0 || d->path[rl] != '/')
			continue;
		unsigned long dir = strtoul(d->path + rl + 1, &end, 10);
		if (end == d->path + rl + 1 || (*end && *end != '/') || dir >= tree_dirs.n)
			continue;
		char *named;
		if (asprintf(&named, "%s%s", tree_dirs.v[dir], end) < 0)
			continue; /* left under the copy's name: uncovered, so not stored */
		free(d->path);
		d->path = named;
		d->dev = d->ino = d->size = 0;
		d->mtime_ns = d->ctime_ns = 0;
	}
}

void jc__wtree_remove(void)
{
	char why[PATH_MAX + 64];
	if (tree_root[0] && jc__rmtree(tree_root, why, sizeof(why)) != 0)
		jc_log_warn(WORKER, "cannot remove %s", why);
	tree_root[0] = '\0';
	jc__strv_clear(&tree_dirs);
}

/* Creates the directories of TREE/I/REL up to its last component (0700). */
static int tree_mkdirs(char *path, size_t from)
{
	for (char *p = path + from; (p = strchr(p, '/')); p++) {
		*p = '\0';
		int rc = mkdir(path, 0700);
		*p = '/';
		if (rc != 0 && errno != EEXIST)
			return -1;
	}
	return 0;
}

/* Writes req's tree under a new tree_root and re-points its include
 * options there; the blobs are dropped. 0, or a JC_E code with a message. */
int jc__wtree_write(struct jc_req *req, const char *tk_include, char *err, size_t errlen)
{
	/* In the daemon's own directory, never the TMPDIR it was started
	 * with (a client's, maybe, which this uid may not write). */
	if (!jc__wtree_tmp || snprintf(tree_root, sizeof(tree_root), "%s/jc-tree-XXXXXX",
				       jc__wtree_tmp) >= (int)sizeof(tree_root)) {
		tree_root[0] = '\0';
		return jc__fail(err, errlen, JC_EIO, "no directory for the sent headers (--tmp)");
	}
	if (!mkdtemp(tree_root)) {
		tree_root[0] = '\0';
		return jc__fail(err, errlen, JC_EIO,
				"cannot make a directory for the sent headers: %s",
				strerror(errno));
	}
	struct jc_strv opts = {0}, dirs = {0};
	char path[2 * PATH_MAX + 32];
	int rc = 0;
	/* include dir j is TREE/T/REL of its top directory T (includes.h) */
	struct jc_inc_tops *tops = NULL;
	if ((rc = jc__inc_tops_new(&req->include_dirs, &tops)) != 0)
		rc = jc__fail(err, errlen, rc, "include dirs: %s", jc_strerror(rc));
	for (size_t i = 0; rc == 0 && i < req->include_dirs.n; i++) {
		size_t top;
		char rel[PATH_MAX];
		if (!jc__inc_tops_rel(tops, req->include_dirs.v[i], &top, rel, sizeof(rel))) {
			rc = jc__fail(err, errlen, JC_EINVAL, "include dir %s: no lexical form",
				      req->include_dirs.v[i]);
			break;
		}
		/* One the client names as the toolkit's (req.h, JC_TREE_TOOLKIT):
		 * compiled from the toolkit when it is inside it (only such a
		 * directory is resolved here: no other client path is touched). */
		snprintf(path, sizeof(path), "%zu%s%s", top, rel[0] ? "/" : "", rel);
		int claimed = 0;
		for (size_t k = 0; k < req->n_tree && !claimed; k++)
			claimed = req->tree[k].type == JC_TREE_TOOLKIT &&
				  strcmp(req->tree[k].name, path) == 0;
		if (claimed && !jc__inc_in_toolkit(tk_include, req->include_dirs.v[i])) {
			rc =
			    jc__fail(err, errlen, JC_EINVAL,
				     "include dir %s is sent as the toolkit's but "
				     "is not inside the daemon's toolkit include tree %s",
				     req->include_dirs.v[i], tk_include[0] ? tk_include : "(none)");
			break;
		}
		if (claimed) {
			rc = jc__strv_push(&dirs, req->include_dirs.v[i]);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%zu%s%s/", tree_root, top, rel[0] ? "/" : "", rel);
		rc = tree_mkdirs(path, strlen(tree_root) + 1) == 0
			 ? (path[strlen(path) - 1] = '\0', jc__strv_push(&dirs, path))
			 : jc__fail(err, errlen, JC_EIO, "mkdir %s: %s", path, strerror(errno));
	}
	jc__inc_tops_free(tops);
	for (size_t i = 0; rc == 0 && i < req->n_tree; i++) {
		const struct jc_blob *b = &req->tree[i];
		if (b->type == JC_TREE_ABSENT || b->type == JC_TREE_TOOLKIT)
			continue;
		if (b->type ==
		    JC_TREE_DIR) { /* walked by the client: exists here too, maybe empty */
			snprintf(path, sizeof(path), "%s/%s/", tree_root, b->name);
			if (tree_mkdirs(path, strlen(tree_root) + 1) != 0)
				rc = jc__fail(err, errlen, JC_EINVAL,
					      "cannot make the sent directory %s: %s", b->name,
					      strerror(errno));
			continue;
		}
		if (b->type != JC_TREE_FILE) {
			rc = jc__fail(err, errlen, JC_EINVAL, "tree file %s: hashes only", b->name);
			break;
		}
		int n = snprintf(path, sizeof(path), "%s/%s", tree_root, b->name);
		int fd = -1;
		if (n < 0 || (size_t)n >= sizeof(path) ||
		    tree_mkdirs(path, strlen(tree_root) + 1) != 0 ||
		    (fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) <
			0 ||
		    jc__io_write_all(fd, b->data, b->size) != 0)
			rc = jc__fail(err, errlen, JC_EINVAL, "cannot write the sent header %s: %s",
				      b->name, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	for (size_t i = 0, dir = 0; rc == 0 && i < req->options.n;) {
		int is_dir;
		const char *val;
		size_t used = 1;
		if (jc__inc_option(&req->options, i, &is_dir, &val, &used) && is_dir) {
			snprintf(path, sizeof(path), "-I%s", dirs.v[dir++]);
			rc = jc__strv_push(&opts, path);
		} else {
			for (size_t k = 0; rc == 0 && k < used && i + k < req->options.n; k++)
				rc = jc__strv_push(&opts, req->options.v[i + k]);
		}
		i += used;
	}
	if (rc != 0) {
		jc__strv_clear(&opts);
		jc__strv_clear(&dirs);
		return rc == JC_ENOMEM ? jc__fail(err, errlen, rc, "worker out of memory") : rc;
	}
	jc__strv_clear(&req->options);
	req->options = opts;
	tree_dirs = req->include_dirs;
	req->include_dirs = dirs;
	jc__req_tree_clear(req);
	return 0;
}