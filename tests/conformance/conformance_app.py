# SPDX-License-Identifier: MIT
"""conformance_app.c over ctypes, as Python applications call NVRTC (and
nvJitLink): CDLL("libnvrtc.so.<major>"), no third-party modules. Same
arguments, output lines and artifact file as the C program.

Usage: conformance_app.py NVRTC_SONAME NVJITLINK_SONAME [--lib LIB.cu]
       [--expr EXPR]... -o OUT SRC.cu ARCH [NVRTC_OPTION...]
"""
import ctypes
import os
import sys

nvrtc = ctypes.CDLL(sys.argv[1])
jitlink_soname = sys.argv[2]
args = sys.argv[3:]
lib, exprs, out = None, [], None
while len(args) >= 2 and args[0] in ("--lib", "--expr", "-o"):
    if args[0] == "--lib":
        lib = args[1]
    elif args[0] == "--expr":
        exprs.append(args[1])
    else:
        out = args[1]
    args = args[2:]
src, arch, opts = args[0], args[1], args[2:]


def compile_one(path, lto, names):
    prog = ctypes.c_void_p()
    name = os.path.basename(path).encode()
    with open(path, "rb") as f:
        text = f.read()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), text, name, 0, None, None) == 0
    for e in names:
        nvrtc.nvrtcAddNameExpression(prog, e.encode())
    all_opts = [o.encode() for o in opts] + [b"--gpu-architecture=" + arch.encode()]
    if lto:
        all_opts.append(b"-dlto")
    arr = (ctypes.c_char_p * len(all_opts))(*all_opts)
    rc = nvrtc.nvrtcCompileProgram(prog, len(all_opts), arr)
    print("compile %s rc=%d" % (name.decode(), rc))
    n = ctypes.c_size_t()
    if rc != 0:
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        print(log.value.decode(errors="replace"))
        sys.exit(1)
    what = "LTOIR" if lto else "CUBIN"
    getattr(nvrtc, "nvrtcGet%sSize" % what)(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    getattr(nvrtc, "nvrtcGet%s" % what)(prog, buf)
    for e in names:
        lowered = ctypes.c_char_p()
        if nvrtc.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(lowered)) == 0:
            print("lowered %s %s" % (e, lowered.value.decode()))
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return buf.raw


data = compile_one(src, lib is not None, exprs)
if lib is not None:
    libdata = compile_one(lib, True, [])
    jl = ctypes.CDLL(jitlink_soname)
    major, minor = ctypes.c_int(), ctypes.c_int()
    jl.nvJitLinkVersion(ctypes.byref(major), ctypes.byref(minor))

    def fn(name):  # nvJitLink.h's inline wrappers call versioned symbols
        return getattr(jl, "__nvJitLink%s_%d_%d" % (name, major.value, minor.value))

    h = ctypes.c_void_p()
    lopts = (ctypes.c_char_p * 2)(b"-arch=" + arch.encode(), b"-lto")
    ok = fn("Create")(ctypes.byref(h), 2, lopts) == 0
    for blob, name in ((data, b"src"), (libdata, b"lib")):
        ok = ok and fn("AddData")(h, 3, blob, ctypes.c_size_t(len(blob)), name) == 0  # NVJITLINK_INPUT_LTOIR
    n = ctypes.c_size_t()
    ok = ok and fn("Complete")(h) == 0 and fn("GetLinkedCubinSize")(h, ctypes.byref(n)) == 0
    if not ok:
        print("link failed")
        sys.exit(1)
    buf = ctypes.create_string_buffer(n.value)
    fn("GetLinkedCubin")(h, buf)
    fn("Destroy")(ctypes.byref(h))
    data = buf.raw
with open(out, "wb") as f:
    f.write(data)
