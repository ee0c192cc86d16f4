/* SPDX-License-Identifier: MIT */
/*
 * jitcache-worker's client-read trees (req.h, jc_req.tree; worker_tree.c):
 * a job's sent headers written into a private directory under --tmp, the
 * job's -I options pointed there, and what NVRTC read there named under the
 * client's directory strings again. One tree at a time (a worker runs one
 * job at a time); not thread-safe. Private to jitcache-worker.
 */
#ifndef JC_WORKER_TREE_H
#define JC_WORKER_TREE_H

#include <stddef.h>

#include "common/req.h"

/* --tmp: the daemon's DIR/tmp, where trees go (borrowed from argv; set once
 * by main; NULL: no tree can be written). */
extern const char *jc__wtree_tmp;

/* Writes req's tree under a new directory in jc__wtree_tmp (0700) and
 * re-points its include options there (a directory the client names as the
 * toolkit's, inside tk_include, stays as it is); the blobs are dropped and
 * req keeps the rewritten options. 0, or a JC_E code (JC_EIO, JC_EINVAL,
 * JC_ENOMEM) with a message in err. */
int jc__wtree_write(struct jc_req *req, const char *tk_include, char *err, size_t errlen);

/* In the job's child: the deps of res under the tree renamed to the
 * client's directories (stat identity zeroed). Nothing without a tree. */
void jc__wtree_name_deps(struct jc_res *res);

/* Removes the tree's directory (a failure is logged) and forgets it. */
void jc__wtree_remove(void);

#endif
