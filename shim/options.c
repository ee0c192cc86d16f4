/* SPDX-License-Identifier: MIT */
/* NVRTC options → a jitcached request, or the reason to pass through (shim.h). */
#include <stdio.h>
#include <string.h>

#include "shim/shim.h"
#include "shim_config.h"

/*
 * Options of nvrtc.h's "Supported Compile Options" whose whole effect is on
 * the artifact and the log, named here with what follows the name:
 * 0 alone, '=' "=VALUE", '*' either. Everything else passes through.
 */
static const struct known {
	const char *name;
	char arg;
} known[] = {
    {"--device-c", 0},
    {"-dc", 0},
    {"--device-w", 0},
    {"-dw", 0},
    {"--relocatable-device-code", '='},
    {"-rdc", '='},
    {"--extensible-whole-program", 0},
    {"-ewp", 0},
    {"--device-debug", 0},
    {"-G", 0},
    {"--generate-line-info", 0},
    {"-lineinfo", 0},
    {"--dopt", '='},
    {"-dopt", '='},
    {"--Ofast-compile", '='},
    {"-Ofc", '='},
    {"--ptxas-options", '='},
    {"-Xptxas", '='},
    {"--maxrregcount", '='},
    {"-maxrregcount", '='},
    {"--ftz", '='},
    {"-ftz", '='},
    {"--prec-sqrt", '='},
    {"-prec-sqrt", '='},
    {"--prec-div", '='},
    {"-prec-div", '='},
    {"--fmad", '='},
    {"-fmad", '='},
    {"--use_fast_math", 0},
    {"-use_fast_math", 0},
    {"--extra-device-vectorization", 0},
    {"-extra-device-vectorization", 0},
    {"--modify-stack-limit", '='},
    {"-modify-stack-limit", '='},
    {"--gen-opt-lto", 0},
    {"-gen-opt-lto", 0},
    {"--jump-table-density", '='},
    {"-jtd", '='},
    {"--device-stack-protector", '*'},
    {"-device-stack-protector", '*'},
    {"--no-cache", 0},
    {"-no-cache", 0},
    {"--frandom-seed", '='},
    {"-frandom-seed", '='},
    {"--define-macro", '='},
    {"--undefine-macro", '='},
    {"--pre-include", '='},
    {"-include", '='},
    {"--no-source-include", 0},
    {"-no-source-include", 0},
    {"--std", '='},
    {"-std", '='},
    {"--builtin-move-forward", '='},
    {"-builtin-move-forward", '='},
    {"--builtin-initializer-list", '='},
    {"-builtin-initializer-list", '='},
    {"--disable-warnings", 0},
    {"-w", 0},
    {"--restrict", 0},
    {"-restrict", 0},
    {"--device-as-default-execution-space", 0},
    {"-default-device", 0},
    {"--device-int128", 0},
    {"-device-int128", 0},
    {"--device-float128", 0},
    {"-device-float128", 0},
    {"--optimization-info", '='},
    {"-opt-info", '='},
    {"--display-error-number", 0},
    {"-err-no", 0},
    {"--no-display-error-number", 0},
    {"-no-err-no", 0},
    {"--diag-error", '='},
    {"-diag-error", '='},
    {"--diag-suppress", '='},
    {"-diag-suppress", '='},
    {"--diag-warn", '='},
    {"-diag-warn", '='},
    {"--brief-diagnostics", '='},
    {"-brief-diag", '='},
    {"--split-compile", '='},
    {"-split-compile", '='},
    {"--minimal", 0},
    {"-minimal", 0},
};

static int is_known(const char *o)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		size_t n = strlen(known[i].name);
		if (strncmp(o, known[i].name, n) != 0)
			continue;
		if (o[n] == '\0' && known[i].arg != '=')
			return 1;
		if (o[n] == '=' && o[n + 1] && known[i].arg != 0)
			return 1;
	}
	return 0;
}

/* The value of option `name` at opts[*i] ("NAME=V" or "NAME" "V"), else NULL. */
static const char *value_of(const char *name, const char *const *opts, int n, int *i)
{
	size_t len = strlen(name);
	const char *o = opts[*i];
	if (strncmp(o, name, len) != 0)
		return NULL;
	if (o[len] == '=')
		return o + len + 1;
	if (o[len] == '\0' && *i + 1 < n && opts[*i + 1]) {
		++*i;
		return opts[*i];
	}
	return NULL;
}

/* -I's forms (-IDIR, -I DIR, -I=DIR, "-I" "DIR", --include-path[=]DIR) → DIR. */
static const char *include_dir(const char *const *opts, int n, int *i)
{
	const char *o = opts[*i];
	if (strncmp(o, "-I", 2) == 0) {
		o += 2;
		if (*o == '=')
			o++;
		else
			o += strspn(o, " ");
		if (*o)
			return o;
		if (*i + 1 < n && opts[*i + 1] && opts[*i + 1][0]) {
			++*i;
			return opts[*i];
		}
		return NULL;
	}
	return value_of("--include-path", opts, n, i);
}

/* Options that put the program's name into the artifact: debug information
 * (file names in line tables) and LTO-IR (its module records the name). */
static int records_name(const char *o)
{
	static const char *const names[] = {"-G", "--device-debug", "-lineinfo",
					    "--generate-line-info"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(o, names[i]))
			return 1;
	return 0;
}

const char *jc__shim_plan(const char *const *opts, int n, jc_request *r, int *name_matters,
			  char *buf, size_t len)
{
	const char *arch = NULL;
	int lto = 0, rc = 0;
	*name_matters = 0;
	if (n < 0 || (n > 0 && !opts))
		return "invalid option array";
	for (int i = 0; i < n && rc == 0; i++) {
		const char *o = opts[i], *v;
		if (!o)
			return "a NULL option";
		*name_matters |= records_name(o);
		if ((v = value_of("--gpu-architecture", opts, n, &i)) ||
		    (v = value_of("-arch", opts, n, &i))) {
			if (arch)
				return "more than one architecture option";
			arch = v;
		} else if (!strcmp(o, "-dlto") || !strcmp(o, "--dlink-time-opt")) {
			lto = 1;
		} else if ((v = include_dir(opts, n, &i))) {
			snprintf(buf, len, "--include-path=%s", v);
			rc = jc_request_add_option(r, buf);
		} else if ((!strcmp(o, "-D") || !strcmp(o, "-U")) && i + 1 < n && opts[i + 1]) {
			snprintf(buf, len, "%s%s", o, opts[i + 1]);
			i++;
			rc = jc_request_add_option(r, buf);
		} else if ((!strncmp(o, "-D", 2) || !strncmp(o, "-U", 2)) && o[2]) {
			rc = jc_request_add_option(r, o);
		} else if (is_known(o)) {
			rc = jc_request_add_option(r, o);
		} else {
			snprintf(buf, len,
				 "option %s is not cached (unknown to the shim, or it reads "
				 "or writes files, or makes no artifact)",
				 o);
			return buf;
		}
	}
	if (rc != 0)
		return "out of memory";
	if (!arch)
		arch = JC_SHIM_DEFAULT_ARCH;
	if (!arch[0])
		return "no architecture option, and nvrtc.h names no default";
	*name_matters |= lto;
	jc_output out = lto ? JC_LTOIR : strncmp(arch, "sm_", 3) == 0 ? JC_CUBIN : JC_PTX;
	if (jc_request_set_arch(r, arch) != 0 || jc_request_set_output(r, out) != 0)
		return "out of memory";
	return NULL;
}
