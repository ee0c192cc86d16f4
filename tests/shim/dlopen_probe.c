/* SPDX-License-Identifier: MIT */
/*
 * What a dlopen() of NVRTC resolves to in this process: for each argument (a
 * soname or a path), prints "ARG -> FILE same-as-soname=0|1", FILE being the
 * object that defines the nvrtcCompileProgram dlsym() returns on the handle,
 * and whether the handle is the one dlopen(SONAME, RTLD_NOLOAD) gives (what
 * cuda-pathfinder's already-loaded check sees). Usage: dlopen_probe SONAME ARG...
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: dlopen_probe SONAME ARG...\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			printf("%s -> error %s\n", argv[i], dlerror());
			continue;
		}
		void *by_soname = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
		Dl_info info = {0};
		void *f = dlsym(h, "nvrtcCompileProgram");
		char real[PATH_MAX] = "?";
		if (f && dladdr(f, &info) && info.dli_fname && !realpath(info.dli_fname, real))
			snprintf(real, sizeof(real), "%s", info.dli_fname);
		printf("%s -> %s same-as-soname=%d\n", argv[i], real, h == by_soname);
	}
	return 0;
}
