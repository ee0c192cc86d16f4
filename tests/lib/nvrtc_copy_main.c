/* SPDX-License-Identifier: MIT */
/* jtl_nvrtc_copy NVRTC DIR TAG: jtl_nvrtc_copy_with_build_id for shell
 * tests; prints the copy's path. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/lib/core.h"

int main(int argc, char **argv)
{
	char out[4096], why[512];
	if (argc != 4 || atoi(argv[3]) <= 0 || atoi(argv[3]) > 255) {
		fprintf(stderr, "usage: jtl_nvrtc_copy NVRTC DIR TAG(1-255)\n");
		return 2;
	}
	if (jtl_nvrtc_copy_with_build_id(argv[1], argv[2], (unsigned char)atoi(argv[3]), out,
					 sizeof(out), why, sizeof(why)) != 0) {
		fprintf(stderr, "jtl_nvrtc_copy: %s\n", why);
		return 1;
	}
	printf("%s\n", out);
	return 0;
}
