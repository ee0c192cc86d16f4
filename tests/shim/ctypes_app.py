# SPDX-License-Identifier: MIT
"""NVRTC from Python through ctypes.CDLL("libnvrtc.so.<major>"), no third-party
modules: compiles a templated kernel with name expressions and prints the
result code, the PTX and cubin sizes and hashes and the lowered names.
test_shim.sh compares its output with and without jitcache-run.

Usage: ctypes_app.py SONAME ARCH
"""
import ctypes
import hashlib
import sys

soname, arch = sys.argv[1], sys.argv[2]
nvrtc = ctypes.CDLL(soname)
c_size = ctypes.c_size_t
prog = ctypes.c_void_p()
src = b"""template <typename T> __global__ void scale(T *x, T a) { x[threadIdx.x] *= a; }
__global__ void plain(int *p) { *p = 7; }
"""
rc = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"py.cu", 0, None, None)
assert rc == 0, rc
exprs = [b"&scale<float>", b"&scale<int>", b"plain"]
for e in exprs:
    assert nvrtc.nvrtcAddNameExpression(prog, e) == 0
opts = (ctypes.c_char_p * 2)(b"--gpu-architecture=" + arch.encode(), b"-std=c++17")
print("compile rc=%d" % nvrtc.nvrtcCompileProgram(prog, 2, opts))
for what in ("PTX", "CUBIN"):
    n = c_size()
    getattr(nvrtc, "nvrtcGet%sSize" % what)(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    getattr(nvrtc, "nvrtcGet%s" % what)(prog, buf)
    print("%s size=%d sha256=%s" % (what, n.value, hashlib.sha256(buf.raw).hexdigest()))
for e in exprs:
    name = ctypes.c_char_p()
    rc = nvrtc.nvrtcGetLoweredName(prog, e, ctypes.byref(name))
    print("lowered %s rc=%d %s" % (e.decode(), rc, name.value.decode() if rc == 0 else "-"))
n = c_size()
nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
print("log size=%d" % n.value)
nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
