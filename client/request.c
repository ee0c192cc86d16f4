/* SPDX-License-Identifier: MIT */
/*
 * The request builder (jc_request_*: a jc_req filled from the caller's
 * copies, its job following from what it holds) and a result's accessors
 * (jc_result_*).
 */
#include <stdlib.h>
#include <string.h>

#include "client/handle.h"
#include "common/util.h"

JC_API int jc_request_new(jc_request **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return JC_ENOMEM;
	(*out)->req.job = JC_JOB_COMPILE;
	(*out)->req.output = JC_OUTPUT_CUBIN;
	return 0;
}

JC_API void jc_request_free(jc_request *r)
{
	if (!r)
		return;
	jc__req_clear(&r->req);
	free(r);
}

/* Replaces *dst with a copy of s. */
static int set_str(char **dst, const char *s)
{
	if (!s)
		return JC_EINVAL;
	char *copy = strdup(s);
	if (!copy)
		return JC_ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

/* The job follows from what the request holds. */
static void update_job(struct jc_req *q)
{
	if (q->n_link_inputs)
		q->job = q->source ? JC_JOB_COMPILE_LINK : JC_JOB_LINK;
	else
		q->job = JC_JOB_COMPILE;
}

JC_API int jc_request_set_source(jc_request *r, const char *name, const void *data, size_t size)
{
	struct jc_req *q = &r->req;
	if (!name || (!data && size))
		return JC_EINVAL;
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return JC_ENOMEM;
	if (size)
		memcpy(copy, data, size);
	int rc = set_str(&q->source_name, name);
	if (rc) {
		free(copy);
		return rc;
	}
	free(q->source);
	q->source = copy;
	q->source_size = size;
	update_job(q);
	return 0;
}

JC_API int jc_request_add_header(jc_request *r, const char *name, const void *data, size_t size)
{
	if (!name || (!data && size))
		return JC_EINVAL;
	return jc__blob_push(&r->req.headers, &r->req.n_headers, name, data, size, 0);
}

JC_API int jc_request_add_include_dir(jc_request *r, const char *path)
{
	return path && *path ? jc__strv_push(&r->req.include_dirs, path) : JC_EINVAL;
}

JC_API int jc_request_add_option(jc_request *r, const char *option)
{
	return option && *option ? jc__strv_push(&r->req.options, option) : JC_EINVAL;
}

JC_API int jc_request_set_arch(jc_request *r, const char *arch)
{
	if (!arch || !*arch)
		return JC_EINVAL;
	int rc = set_str(&r->req.arch, arch);
	if (rc == 0 && strchr(arch, ','))
		r->req.output = JC_OUTPUT_FATBIN; /* a target list makes a fatbin */
	return rc;
}

JC_API int jc_request_set_output(jc_request *r, jc_output output)
{
	if (output < JC_CUBIN || output > JC_FATBIN)
		return JC_EINVAL;
	r->req.output = (uint32_t)output;
	return 0;
}

JC_API int jc_request_add_name_expression(jc_request *r, const char *expr)
{
	return expr && *expr ? jc__strv_push(&r->req.name_exprs, expr) : JC_EINVAL;
}

JC_API int jc_request_add_link_input(jc_request *r, jc_link_input type, const char *name,
				     const void *data, size_t size)
{
	if (type < JC_LINK_CUBIN || type > JC_LINK_LIBRARY || !name || (!data && size))
		return JC_EINVAL;
	int rc = jc__blob_push(&r->req.link_inputs, &r->req.n_link_inputs, name, data, size,
			       (uint32_t)type);
	update_job(&r->req);
	return rc;
}

JC_API int jc_request_add_link_option(jc_request *r, const char *option)
{
	return option && *option ? jc__strv_push(&r->req.link_options, option) : JC_EINVAL;
}

JC_API int jc_request_set_app_abi(jc_request *r, const char *abi)
{
	return set_str(&r->req.app_abi, abi);
}

int jc__request_set_name_free(jc_request *r)
{
	if (!r->req.source_name)
		return JC_EINVAL;
	r->req.name_free = 1;
	return set_str(&r->req.display_name, r->req.source_name);
}

int jc__request_set_test_fault(jc_request *r, uint32_t fault)
{
	if (fault > JC_FAULT_ALLOC)
		return JC_EINVAL;
	r->req.test_fault = fault;
	return 0;
}

/* --- results --------------------------------------------------------------------- */

JC_API void jc_result_free(jc_result *res)
{
	if (!res)
		return;
	jc__res_clear(&res->res);
	free(res);
}

JC_API const void *jc_result_data(const jc_result *res, size_t *size)
{
	if (size)
		*size = res->res.status == 0 ? res->res.size : 0;
	return res->res.status == 0 ? res->res.data : NULL;
}

JC_API jc_output jc_result_output(const jc_result *res)
{
	return (jc_output)res->res.output;
}

JC_API jc_cache_status jc_result_cache_status(const jc_result *res)
{
	return (jc_cache_status)res->res.cache;
}

JC_API const char *jc_result_log(const jc_result *res)
{
	return res->res.log ? res->res.log : "";
}

JC_API const char *jc_result_lowered_name(const jc_result *res, const char *expr)
{
	for (size_t i = 0; i < res->res.n_lowered; i++)
		if (strcmp(res->res.lowered[i].expr, expr) == 0)
			return res->res.lowered[i].lowered;
	return NULL;
}

JC_API size_t jc_result_lowered_count(const jc_result *res)
{
	return res->res.n_lowered;
}

JC_API int jc_result_lowered_at(const jc_result *res, size_t i, const char **expr,
				const char **lowered)
{
	if (i >= res->res.n_lowered)
		return JC_EINVAL;
	*expr = res->res.lowered[i].expr;
	*lowered = res->res.lowered[i].lowered;
	return 0;
}

JC_API const char *jc_result_key(const jc_result *res)
{
	return res->key;
}

JC_API uint64_t jc_result_time_ns(const jc_result *res, jc_timing which)
{
	switch (which) {
	case JC_TIME_TOTAL:
		return res->total_ns;
	case JC_TIME_SERVER:
		return res->res.server_ns;
	case JC_TIME_COMPILE:
		return res->res.compile_ns;
	case JC_TIME_INCLUDES:
		return res->includes_ns;
	}
	return 0;
}
