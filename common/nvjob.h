/* SPDX-License-Identifier: MIT */
/*
 * Running one compile or link job with NVRTC and nvJitLink: the code both
 * the compile worker (daemon/worker.c, NVRTC linked in) and the client
 * library's in-process fallback (client/fallback.c, NVRTC loaded with
 * dlopen) run, so that both give the same result for the same request.
 *
 * The toolkit is reached only through a struct jc_nv of function pointers:
 * this unit names no NVRTC or nvJitLink symbol, so linking it pulls in
 * neither library. Reentrant: distinct jobs may run on distinct threads
 * (NVRTC and nvJitLink handles are per job).
 */
#ifndef JC_NVJOB_H
#define JC_NVJOB_H

#include <nvJitLink.h>

#include "common/nvrtc_api.h"
#include "common/req.h"

/* X(name): the nvJitLink calls; nvJitLink.h makes all but nvJitLinkVersion
 * inline wrappers of versioned symbols (__nvJitLinkCreate_13_0, ...). */
#define JC_NVJITLINK_FNS(X)                                                                        \
	X(nvJitLinkCreate)                                                                         \
	X(nvJitLinkAddData)                                                                        \
	X(nvJitLinkComplete)                                                                       \
	X(nvJitLinkGetErrorLogSize)                                                                \
	X(nvJitLinkGetErrorLog)                                                                    \
	X(nvJitLinkGetInfoLogSize)                                                                 \
	X(nvJitLinkGetInfoLog)                                                                     \
	X(nvJitLinkGetLinkedPtxSize)                                                               \
	X(nvJitLinkGetLinkedPtx)                                                                   \
	X(nvJitLinkGetLinkedCubinSize)                                                             \
	X(nvJitLinkGetLinkedCubin)                                                                 \
	X(nvJitLinkDestroy)
#define JC_NVJITLINK_UNVERSIONED_FNS(X) X(nvJitLinkVersion)

/*
 * The toolkit entry points: the NVRTC functions a job calls (use JOB in
 * common/nvrtc_api.h) and nvJitLink's. has_nvjitlink 0: the nvJitLink members are NULL
 * and link jobs fail with JC_ENOTSUP (message: why_no_nvjitlink).
 */
struct jc_nv {
#define JC_NV_NVRTC_MEMBER(ret, name, params, args, use) JC_NVRTC_IF_##use(ret(*name) params;)
	JC_NVRTC_FUNCTIONS(JC_NV_NVRTC_MEMBER)
#undef JC_NV_NVRTC_MEMBER
#define JC_NV_MEMBER(f) __typeof__(f) *f;
	JC_NVJITLINK_FNS(JC_NV_MEMBER)
	JC_NVJITLINK_UNVERSIONED_FNS(JC_NV_MEMBER)
#undef JC_NV_MEMBER
	int has_nvjitlink;
	char why_no_nvjitlink[256];
};

/* A log past this is cut (its head kept, with a note): logs travel in frames
 * and live in the index, and a compiler can print without bound. */
#define JC_NV_LOG_MAX (4u << 20)

/*
 * Runs req (borrowed) as its job says: NVRTC for JC_JOB_COMPILE, nvJitLink
 * for JC_JOB_LINK, NVRTC to LTO-IR then nvJitLink for JC_JOB_COMPILE_LINK.
 * res (initialised with jc__res_init) receives status (0, JC_ECOMPILE for a
 * deterministic failure of the input, JC_ENOMEM, JC_EINTERNAL, JC_ENOTSUP),
 * message, log (of every stage), lowered names, compile_ns, and on success
 * data/size/output. Returns res->status. Test faults are not handled here.
 */
int jc__nv_run_job(const struct jc_nv *nv, const struct jc_req *req, struct jc_res *res);

/* Sets res->status and res->message from fmt. */
void jc__nv_set_message(struct jc_res *res, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
