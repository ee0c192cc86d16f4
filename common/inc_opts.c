/* SPDX-License-Identifier: MIT */
/* The include options of a request: see inc_opts.h for the contract. */
#include "common/inc_opts.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/inc_lex.h"
#include "common/util.h"
#include "jitcache/jitcache.h"

static int push_ptr(const char ***v, size_t *n, const char *s)
{
	const char **p = realloc(*v, (*n + 1) * sizeof(*p));
	if (!p)
		return JC_ENOMEM;
	p[(*n)++] = s;
	*v = p;
	return 0;
}

void jc__inc_path_clear(struct jc_inc_path *p)
{
	free(p->dirs);
	free(p->pre);
	memset(p, 0, sizeof(*p));
}

int jc__inc_dirs_check(const struct jc_strv *dirs, int resolve, char *err, size_t errlen)
{
	char where[PATH_MAX];
	for (size_t i = 0; i < dirs->n; i++) {
		const char *dir = dirs->v[i];
		int r = resolve ? jc__path_reaches_kernel(dir, where, sizeof(where))
				: jc__path_lexical(dir, where, sizeof(where), 1) == 0 &&
				      jc__kernel_path(where);
		if (r < 0)
			return jc__fail(err, errlen, JC_EINVAL,
					"include directory %s cannot be resolved: %s", dir,
					strerror(errno));
		if (r > 0)
			return jc__fail(
			    err, errlen, JC_EINVAL,
			    "include directory %s leads to %s: files under /proc, /sys and /dev "
			    "(and other kernel file systems) are process, kernel and device "
			    "state, never headers",
			    dir, where);
	}
	return 0;
}

int jc__inc_path_parse(const struct jc_req *req, struct jc_inc_path *out, char *err, size_t errlen)
{
	struct jc_inc_path p = {0};
	const struct jc_strv *o = &req->options;
	int rc = 0;
	for (size_t i = 0; i < o->n && rc == 0; i++) {
		const char *val;
		size_t used;
		int dir;
		if (!jc__inc_option(o, i, &dir, &val, &used))
			continue;
		if (!val || !*val)
			rc = jc__fail(err, errlen, JC_EINVAL, "option \"%s\" needs a %s", o->v[i],
				      dir ? "directory" : "header name");
		else if (dir && val[0] != '/')
			rc = jc__fail(
			    err, errlen, JC_EINVAL,
			    "include directory \"%s\" is not absolute (the daemon does not share "
			    "the client's working directory)",
			    val);
		else
			rc = push_ptr(dir ? &p.dirs : &p.pre, dir ? &p.n_dirs : &p.n_pre, val);
		i += used - 1;
	}
	if (rc == 0 && p.n_dirs != req->include_dirs.n)
		rc = jc__fail(err, errlen, JC_EINVAL,
			      "%zu -I option(s) but %zu declared include dir(s): declare each -I "
			      "directory, in order, as an include dir",
			      p.n_dirs, req->include_dirs.n);
	for (size_t i = 0; rc == 0 && i < p.n_dirs; i++)
		if (strcmp(p.dirs[i], req->include_dirs.v[i]) != 0)
			rc = jc__fail(err, errlen, JC_EINVAL,
				      "include dir %zu is \"%s\" but -I option %zu names \"%s\"", i,
				      req->include_dirs.v[i], i, p.dirs[i]);
	if (rc == JC_ENOMEM)
		jc__fail(err, errlen, rc, "out of memory parsing include options");
	if (rc == 0 && out)
		*out = p;
	else
		jc__inc_path_clear(&p);
	return rc;
}

int jc__inc_each_text(const struct jc_req *req, int (*fn)(const char *t, size_t n, void *ctx),
		      void *ctx)
{
	int rc = req->source ? fn((const char *)req->source, req->source_size, ctx) : 0;
	for (size_t i = 0; rc == 0 && i < req->n_headers; i++)
		if (req->headers[i].data) /* NULL data is refused by validation */
			rc = fn((const char *)req->headers[i].data, req->headers[i].size, ctx);
	return rc;
}

/* 1 when name has a ".." component (a climb out of where it is looked up). */
static int climbs(const char *name)
{
	for (const char *p = name; (p = strstr(p, "..")); p += 2)
		if ((p == name || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return 1;
	return 0;
}

/*
 * 1 when the text may make NVRTC look outside the declared directories: a
 * reference to an absolute path or one with a ".." component, or one the
 * lexer cannot read literally (a computed include, __has_include of a macro,
 * a #line that renames the file). Splices, digraphs and trigraphs are read
 * through. Conservative: out of memory says yes (the scan reports it).
 */
static int may_leave_declared_dirs(const char *t, size_t n, void *ctx)
{
	(void)ctx;
	if (!jc__inc_may_have_directive(t, n))
		return 0;
	struct jc_inc_buf refs = {0};
	int found = jc__inc_lex(t, n, &refs) != 0;
	size_t pos = 0;
	const char *name;
	char form;
	while (!found && (name = jc__inc_ref_next(&refs, &pos, &form)))
		found = form == JC_INC_REF_COMPUTED ||
			(form != JC_INC_REF_TIME && form != JC_INC_REF_FILE &&
			 (name[0] == '/' || climbs(name)));
	free(refs.p);
	return found;
}

int jc__inc_needed(const struct jc_req *req)
{
	if (req->include_dirs.n)
		return 1;
	for (size_t i = 0; i < req->options.n; i++) {
		const char *val;
		size_t used;
		int dir;
		if (jc__inc_option(&req->options, i, &dir, &val, &used) && !dir)
			return 1;
	}
	/* NVRTC looks for quoted includes in the directory of the program name
	 * (a name-free request's client found none there: req.h). */
	if (!req->name_free && req->source_name &&
	    (req->source_name[0] == '/' || climbs(req->source_name)))
		return 1;
	return jc__inc_each_text(req, may_leave_declared_dirs, NULL);
}
