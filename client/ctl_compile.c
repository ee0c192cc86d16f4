/* SPDX-License-Identifier: MIT */
/* jitcachectl compile and link (ctl.h). */
#include "client/ctl.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/includes.h"
#include "common/log.h"

/* --- compile and link ---------------------------------------------------------- */

static void print_status(const jc_result *res)
{
	/* The status word first; this request's times; the entry's compile time
	 * (the original compile's, for any kind of hit) as compiled_ms. */
	const char *word = jc__cache_status_name((uint32_t)jc_result_cache_status(res));
	fprintf(stderr, "%s\tkey=%s\ttotal_ms=%.3f\tserver_ms=%.3f\tcompiled_ms=%.3f\n",
		word ? word : "?", jc_result_key(res), jc_result_time_ns(res, JC_TIME_TOTAL) / 1e6,
		jc_result_time_ns(res, JC_TIME_SERVER) / 1e6,
		jc_result_time_ns(res, JC_TIME_COMPILE) / 1e6);
}

/* nvcc's default output name: the source's (or "a") stem in the working
 * directory, with the extension of what was made. */
static void default_output(char *buf, size_t len, const char *source, jc_output output)
{
	const char *base = source ? strrchr(source, '/') : NULL;
	base = base ? base + 1 : source ? source : "a";
	const char *dot = strrchr(base, '.');
	int stem = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
	const char *ext = output == JC_PTX	? "ptx"
			  : output == JC_LTOIR	? "ltoir"
			  : output == JC_FATBIN ? "fatbin"
						: "cubin";
	snprintf(buf, len, "%.*s.%s", stem, base, ext);
}

/* Common tail of compile and link: run, report, write OUT (NULL: the
 * default name from source, said on stderr). what: "compile" or "link". */
static int run_request(jc_request *req, const char *out_path, const char *source, const char *what)
{
	int rc;
	char dflt[4200];
	jc_client *c = jc__ctl_connect_or_die(&rc);
	if (!c)
		return 1;
	jc_result *res = NULL;
	rc = jc_compile(c, req, &res);
	if (res)
		print_status(res);
	if (rc == JC_ECOMPILE) {
		jc__escape_fputs(jc_result_log(res), stderr);
		jc__ctl_die(1, "%s failed", what);
	} else if (rc != 0) {
		jc__ctl_die(1, "%s (%s)", jc_client_errmsg(c), jc_strerror(rc));
	} else {
		/* Warnings of a successful compile. */
		const char *log = jc_result_log(res);
		jc__escape_fputs(log, stderr);
		if (*log && log[strlen(log) - 1] != '\n')
			fputc('\n', stderr);
		const char *expr, *lowered;
		for (size_t i = 0; jc_result_lowered_at(res, i, &expr, &lowered) == 0; i++) {
			jc__escape_fputs(expr, stdout);
			putchar('\t');
			jc__escape_fputs(lowered, stdout);
			putchar('\n');
		}
		fflush(stdout);
		size_t size;
		const char *data = jc_result_data(res, &size);
		/* NVRTC's PTX ends with its NUL terminator: the file holds the text. */
		if (jc_result_output(res) == JC_PTX && size && data[size - 1] == '\0')
			size--;
		if (!out_path) {
			default_output(dflt, sizeof(dflt), source, jc_result_output(res));
			out_path = dflt;
		}
		char why[9000];
		if (jc__ctl_write_output(out_path, data, size, why, sizeof(why)) != 0) {
			jc__ctl_die(1, "%s", why);
			rc = JC_EIO;
		} else if (out_path == dflt) {
			fprintf(stderr,
				"jitcachectl: wrote %s (%zu bytes; -o PATH to choose, -o - for "
				"standard output)\n",
				out_path, size);
		}
	}
	jc_result_free(res);
	jc_client_close(c);
	return rc == 0 ? 0 : 1;
}

/* TYPE:PATH, or the type from PATH's extension; -1 when neither tells, -2
 * for an unknown TYPE (a prefix without '/' before a ':', unless ARG is an
 * existing file of that name). */
static int link_input_type(const char *arg, const char **path)
{
	static const struct {
		const char *ext;
		jc_link_input type;
	} exts[] = {{".ptx", JC_LINK_PTX},     {".ltoir", JC_LINK_LTOIR},
		    {".cubin", JC_LINK_CUBIN}, {".fatbin", JC_LINK_FATBIN},
		    {".o", JC_LINK_OBJECT},    {".a", JC_LINK_LIBRARY}};
	const char *colon = strchr(arg, ':');
	if (colon) {
		char type[16];
		snprintf(type, sizeof(type), "%.*s", (int)(colon - arg), arg);
		int t = jc__input_type_parse(type);
		if (t > 0) {
			*path = colon + 1;
			return t;
		}
		if (colon > arg && !memchr(arg, '/', (size_t)(colon - arg)) &&
		    access(arg, F_OK) != 0)
			return -2;
	}
	*path = arg;
	const char *dot = strrchr(arg, '.');
	for (size_t i = 0; dot && i < sizeof(exts) / sizeof(exts[0]); i++)
		if (strcmp(dot, exts[i].ext) == 0)
			return exts[i].type;
	return -1;
}

/* Adds the link input ARG (TYPE:PATH or PATH with a known extension); 0 or exit code 2. */
static int add_link_input(jc_request *req, const char *arg)
{
	const char *path;
	int type = link_input_type(arg, &path);
	uint8_t *data;
	size_t size;
	if (type == -2)
		return jc__ctl_die(
		    2,
		    "unknown input type '%.*s' in %s: use ptx, ltoir, cubin, fatbin, object "
		    "or library",
		    (int)(strchr(arg, ':') - arg), arg, arg);
	if (type < 0)
		return jc__ctl_die(
		    2,
		    "cannot tell the type of %s: use TYPE:PATH (ptx, ltoir, cubin, fatbin, "
		    "object, library)",
		    arg);
	if (jc__ctl_read_file(path, &data, &size) != 0)
		return jc__ctl_die(2, "cannot read %s: %s", path, strerror(errno));
	const char *base = strrchr(path, '/');
	int rc =
	    jc_request_add_link_input(req, (jc_link_input)type, base ? base + 1 : path, data, size);
	free(data);
	return rc ? jc__ctl_die(2, "cannot add link input %s: %s", arg, jc_strerror(rc)) : 0;
}

/*
 * The NVRTC options: first "-I<the source file's directory>", so that
 * `#include "local.h"` beside the source works as with nvcc (it enters the
 * key like any -I), then the options after "--" as given (the client
 * library resolves relative -I directories against our working directory).
 */
static int add_nvrtc_options(jc_request *req, const char *file, char **argv, int n)
{
	char opt[4200];
	const char *slash = strrchr(file, '/');
	if (slash)
		snprintf(opt, sizeof(opt), "-I%.*s", slash == file ? 1 : (int)(slash - file), file);
	else
		snprintf(opt, sizeof(opt), "-I.");
	int rc = jc_request_add_option(req, opt);
	for (int i = 0; rc == 0 && i < n; i++)
		rc = jc_request_add_option(req, argv[i]);
	return rc ? jc__ctl_die(2, "bad NVRTC option: %s", jc_strerror(rc)) : 0;
}

/* --header NAME=PATH: PATH's bytes as the in-memory header NAME. 0, or 2
 * with the reason printed. */
static int add_header(jc_request *req, char *arg)
{
	char *eq = strchr(arg, '=');
	uint8_t *data;
	size_t size;
	if (!eq || eq == arg)
		return jc__ctl_die(2, "bad --header '%s': NAME=PATH expected", arg);
	*eq = '\0';
	if (jc__ctl_read_file(eq + 1, &data, &size) != 0)
		return jc__ctl_die(2, "cannot read header %s: %s", eq + 1, strerror(errno));
	int rc = jc_request_add_header(req, arg, data, size);
	free(data);
	return rc ? jc__ctl_die(2, "bad header name '%s'", arg) : 0;
}

/* --test-fault crash|hang|alloc (hidden, for tests and ops drills). 0, or 2
 * with the reason printed. */
static int set_test_fault(jc_request *req, const char *arg)
{
	static const char *const faults[] = {
	    [JC_FAULT_CRASH] = "crash", [JC_FAULT_HANG] = "hang", [JC_FAULT_ALLOC] = "alloc"};
	uint32_t f = JC_FAULT_CRASH;
	while (f <= JC_FAULT_ALLOC && strcmp(arg, faults[f]) != 0)
		f++;
	if (jc__request_set_test_fault(req, f) != 0)
		return jc__ctl_die(2, "bad --test-fault '%s': crash, hang or alloc", arg);
	return 0;
}

int jc__ctl_cmd_compile(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"arch", required_argument, NULL, 'a'},
	    {"output", required_argument, NULL, 'O'},
	    {"header", required_argument, NULL, 'H'},
	    {"name-expr", required_argument, NULL, 'n'},
	    {"app-abi", required_argument, NULL, 'A'},
	    {"link", required_argument, NULL, 'k'},
	    {"link-option", required_argument, NULL, 'L'},
	    /* Hidden, for tests and ops drills: see docs/contributing.md (JITCACHE_TEST_FAULTS). */
	    {"test-fault", required_argument, NULL, 'F'},
	    {NULL, 0, NULL, 0},
	};
	jc_request *req;
	const char *out_path = NULL, *arch = NULL;
	int c, rc = 1, output = 0;
	if (jc_request_new(&req) != 0)
		return jc__ctl_die(1, "out of memory");
	/* Everything after "--" goes to NVRTC untouched. */
	int all = argc, nvrtc_first = argc;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			nvrtc_first = i + 1;
			argc = i;
			break;
		}
	optind = 0; /* 0: glibc re-initialises its scanner */
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		int out;
		switch (c) {
		case 'a':
			arch = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'O':
			if ((out = jc__output_parse(optarg)) < 0) {
				jc__ctl_die(2, "bad --output '%s': cubin, ptx, ltoir or fatbin",
					    optarg);
				goto out;
			}
			output = out;
			break;
		case 'H':
			if (add_header(req, optarg) != 0)
				goto out;
			break;
		case 'n':
			jc_request_add_name_expression(req, optarg);
			break;
		case 'A':
			jc_request_set_app_abi(req, optarg);
			break;
		case 'k':
			if ((rc = add_link_input(req, optarg)) != 0)
				goto out;
			rc = 1;
			break;
		case 'L':
			jc_request_add_link_option(req, optarg);
			break;
		case 'F':
			if ((rc = set_test_fault(req, optarg)) != 0)
				goto out;
			rc = 1;
			break;
		default:
			jc__ctl_sub_usage(stderr, "compile");
			rc = 2;
			goto out;
		}
	}
	if (optind != argc - 1 || !arch) {
		jc__ctl_die(
		    2, "compile needs one FILE.cu and --arch ARCH (NVRTC options go after --)");
		rc = 2;
		goto out;
	}
	const char *file = argv[optind++];
	uint8_t *src;
	size_t size;
	if (jc__ctl_read_file(file, &src, &size) != 0) {
		jc__ctl_die(2, "cannot read %s: %s", file, strerror(errno));
		rc = 2;
		goto out;
	}
	const char *base = strrchr(file, '/');
	jc_request_set_source(req, base ? base + 1 : file, src, size);
	free(src);
	/* A target list makes a fatbin (jc_request_set_arch). */
	if (strchr(arch, ',') && output && output != JC_FATBIN) {
		rc = jc__ctl_die(
		    2,
		    "--arch %s is a target list, which makes a fatbin: --output %s does not "
		    "go with it",
		    arch, jc__output_name((uint32_t)output));
		goto out;
	}
	jc_request_set_arch(req, arch);
	if (output)
		jc_request_set_output(req, (jc_output)output);
	if ((rc = add_nvrtc_options(req, file, argv + nvrtc_first, all - nvrtc_first)) == 0)
		rc = run_request(req, out_path, file, "compile");
out:
	jc_request_free(req);
	return rc;
}

int jc__ctl_cmd_link(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"arch", required_argument, NULL, 'a'},
	    {"output", required_argument, NULL, 'O'},
	    {"lto", no_argument, NULL, 'l'},
	    {"link-option", required_argument, NULL, 'L'},
	    {NULL, 0, NULL, 0},
	};
	jc_request *req;
	const char *out_path = NULL, *arch = NULL;
	int c, rc = 2;
	if (jc_request_new(&req) != 0)
		return jc__ctl_die(1, "out of memory");
	optind = 0; /* 0: glibc re-initialises its scanner */
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		int out;
		switch (c) {
		case 'a':
			arch = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'O':
			if ((out = jc__output_parse(optarg)) != JC_PTX && out != JC_CUBIN) {
				jc__ctl_die(2, "bad --output '%s': cubin or ptx", optarg);
				goto out;
			}
			jc_request_set_output(req, (jc_output)out);
			break;
		case 'l':
			jc_request_add_link_option(req, "-lto");
			break;
		case 'L':
			jc_request_add_link_option(req, optarg);
			break;
		default:
			jc__ctl_sub_usage(stderr, "link");
			goto out;
		}
	}
	if (!arch || optind >= argc) {
		jc__ctl_die(2, "link needs --arch ARCH and at least one INPUT");
		goto out;
	}
	jc_request_set_arch(req, arch);
	for (; optind < argc; optind++)
		if (add_link_input(req, argv[optind]) != 0)
			goto out;
	rc = run_request(req, out_path, NULL, "link");
out:
	jc_request_free(req);
	return rc;
}
