/* SPDX-License-Identifier: MIT */
#include "doctor.h"

#include <stdio.h>
#include <string.h>

#include "jitcache/jitcache.h"
#include "toolchain.h"
#include "util.h"

int jc__doctor(const char *socket_path, const char *cache_dir)
{
	struct jc_toolchain tc;
	char err[256], dir[4096];
	int failed = 0;
	if (jc__toolchain_probe(&tc, err, sizeof(err)) == 0) {
		printf("ok    NVRTC %s (%s, builtins %s)\n", tc.nvrtc_version, tc.nvrtc_id,
		       tc.nvrtc_builtins_id);
		printf("ok    nvJitLink %s (%s)\n", tc.nvjitlink_version, tc.nvjitlink_id);
		printf("info  supported architectures: %s\n", tc.supported_archs);
		printf("info  toolkit headers %s (%s)\n",
		       tc.toolkit_include[0] ? tc.toolkit_include : "(none)", tc.toolkit_include_id);
		printf("%s  driver %s (%s)\n", strcmp(tc.driver_version, "none") ? "ok  " : "warn",
		       tc.driver_version, tc.driver_build);
	} else {
		printf("FAIL  toolchain: %s\n", err);
		failed = 1;
	}
	if (!cache_dir && jc__default_cache_dir(dir, sizeof(dir)) == 0)
		cache_dir = dir;
	printf("info  cache directory: %s\n", cache_dir ? cache_dir : "(none)");
	jc_client *c = NULL;
	if (jc_client_connect(socket_path, &c) == 0)
		printf("ok    daemon reachable\n");
	else
		printf("warn  %s\n", jc_client_errmsg(NULL));
	jc_client_close(c);
	return failed;
}
