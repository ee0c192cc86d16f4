# SPDX-License-Identifier: MIT
"""jitcache.Client against a real jitcached and real NVRTC compiles."""
from __future__ import annotations

import gc
import os
import re
import signal
import subprocess
import threading
import time

import pytest
from conftest import SAXPY, SRC, Daemon, run_python, unique

import jitcache
from jitcache import _lib as L

SAXPY_EXPRS = ["saxpy<float>", "saxpy<double>"]


def header_enum() -> dict[str, int]:
    """Every `NAME = value` constant of the public header, and every error
    code of its JC_ERRORS table (`X(JC_E..., value, "text")`)."""
    text = (SRC / "include" / "jitcache" / "jitcache.h").read_text()
    consts = {m[1]: int(m[2]) for m in re.finditer(r"\b(JC_[A-Z0-9_]+)\s*=\s*(-?\d+)", text)}
    errors = {m[1]: int(m[2]) for m in re.finditer(r"\bX\((JC_E[A-Z]+), (-\d+), \"", text)}
    assert len(errors) >= 18, "the JC_ERRORS table was not found"
    return consts | errors


def test_constants_match_the_header():
    h = header_enum()
    codes = {n: v for n, v in vars(L).items() if re.fullmatch(r"JC_E[A-Z]+", n)}
    assert codes == {n: v for n, v in h.items() if re.fullmatch(r"JC_E[A-Z]+", n)}
    assert L.OUTPUTS == {"cubin": h["JC_CUBIN"], "ptx": h["JC_PTX"], "ltoir": h["JC_LTOIR"],
                         "fatbin": h["JC_FATBIN"]}
    assert L.LINK_INPUTS == {k: h["JC_LINK_" + k.upper()] for k in L.LINK_INPUTS}
    status = {h[n]: s for n, s in [("JC_MISS", "miss"), ("JC_HIT", "hit"),
                                   ("JC_NEGATIVE_HIT", "negative-hit"), ("JC_JOINED", "joined"),
                                   ("JC_UNCACHED", "uncached"),
                                   ("JC_REMOTE_HIT", "remote-hit")] if n in h}
    assert {k: v for k, v in L.CACHE_STATUS.items() if v in status.values()} == status
    assert (L.JC_TIME_TOTAL, L.JC_TIME_SERVER, L.JC_TIME_COMPILE, L.JC_TIME_INCLUDES) == (
        h["JC_TIME_TOTAL"], h["JC_TIME_SERVER"], h["JC_TIME_COMPILE"], h["JC_TIME_INCLUDES"])


def test_miss_then_hit_same_bytes_and_names(client):
    abi = unique("miss-hit")
    a = client.compile(SAXPY, name="saxpy.cu", arch="sm_90", name_expressions=SAXPY_EXPRS,
                       app_abi=abi)
    b = client.compile(SAXPY, name="saxpy.cu", arch="sm_90", name_expressions=SAXPY_EXPRS,
                       app_abi=abi)
    assert (a.status, b.status) == ("miss", "hit")
    assert a.key == b.key and re.fullmatch(r"[0-9a-f]{32}", a.key)
    assert isinstance(b.data, memoryview) and b.data.readonly and b.data.format == "B"
    assert bytes(a) == bytes(b) and bytes(b)[:4] == b"\x7fELF" and len(b) == b.data.nbytes
    assert a.lowered_names == b.lowered_names == {
        "saxpy<float>": "_Z5saxpyIfEvT_PKS0_PS0_y", "saxpy<double>": "_Z5saxpyIdEvT_PKS0_PS0_y"}
    assert a.output == b.output == "cubin"
    assert a.timings.compile_ns > 0 and b.timings.total_ns > 0
    assert b.timings.total_ns < a.timings.total_ns


def test_a_fresh_process_hits(client, daemon):
    abi = unique("fresh")
    first = client.compile(SAXPY, name="saxpy.cu", arch="sm_90", app_abi=abi)
    p = run_python("-c",
        "import jitcache\n"
        f"src = open({str(SRC / 'examples' / 'saxpy.cu')!r}).read()\n"
        f"r = jitcache.Client({daemon.sock!r}).compile(src, name='saxpy.cu', arch='sm_90', "
        f"app_abi={abi!r})\n"
        "print(r.status, r.key, len(r))\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["hit", first.key, str(len(first))]


def test_data_outlives_result_and_client(daemon):
    with jitcache.Client(daemon.sock) as c:
        r = c.compile(SAXPY, arch="sm_90", app_abi=unique("lifetime"))
    copy, view = bytes(r), r.data
    del r
    gc.collect()
    for _ in range(3):  # churn the allocator: a freed buffer would change
        with jitcache.Client(daemon.sock) as c:
            c.compile(SAXPY, arch="sm_90", app_abi=unique("churn"))
    assert view.tobytes() == copy


def test_compile_error_has_the_log_and_is_negative_cached(client):
    src = "__global__ void k() { undefined_thing(); }\n"
    abi = unique("error")
    with pytest.raises(jitcache.CompileError) as first:
        client.compile(src, name="broken.cu", arch="sm_90", app_abi=abi)
    e = first.value
    assert isinstance(e, jitcache.Error) and e.code == L.JC_ECOMPILE
    assert "undefined_thing" in e.log and "broken.cu" in e.log and e.status == "miss"
    with pytest.raises(jitcache.CompileError) as again:
        client.compile(src, name="broken.cu", arch="sm_90", app_abi=abi)
    assert again.value.status == "negative-hit" and again.value.log == e.log
    assert again.value.key == e.key


def test_in_memory_headers_enter_the_key(client):
    src = '#include "params.h"\n__global__ void k(int *p) { *p = VALUE; }\n'
    abi = unique("headers")
    a = client.compile(src, arch="sm_90", headers={"params.h": "#define VALUE 3\n"}, app_abi=abi)
    b = client.compile(src, arch="sm_90", headers={"params.h": b"#define VALUE 4\n"}, app_abi=abi)
    c = client.compile(src, arch="sm_90", headers={"params.h": "#define VALUE 3\n"}, app_abi=abi)
    assert (a.status, b.status, c.status) == ("miss", "miss", "hit")
    assert a.key != b.key and a.key == c.key and bytes(a) != bytes(b)
    with pytest.raises(jitcache.CompileError) as e:
        client.compile(src, arch="sm_90", app_abi=abi)
    assert "params.h" in e.value.log


@pytest.mark.parametrize("form", ["-I{}", "-I", "--include-path={}"])
def test_include_directories_relative_and_changed(client, tmp_path, monkeypatch, form):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "value.h").write_text("#define VALUE 10\n")
    time.sleep(0.2)  # the daemon does not store a result from a header younger than 100 ms
    monkeypatch.chdir(tmp_path)
    opts = [form.format("inc")] if "{}" in form else [form, "inc"]
    src = '#include "value.h"\n__global__ void k(int *p) { *p = VALUE; }\n'
    abi = unique("incdir")
    a = client.compile(src, arch="sm_90", options=opts, app_abi=abi)
    b = client.compile(src, arch="sm_90", options=opts, app_abi=abi)
    assert (a.status, b.status) == ("miss", "hit") and a.key == b.key
    (inc / "value.h").write_text("#define VALUE 11\n")
    time.sleep(0.2)
    # The changed header is a new key, compiled (and its result is the new value's).
    c = client.compile(src, arch="sm_90", options=opts, app_abi=abi)
    assert c.status == "miss" and c.key != a.key and bytes(c) != bytes(a)


def test_ptx_output(client):
    r = client.compile(SAXPY, arch="compute_90", output="ptx", name_expressions=["saxpy<float>"],
                       app_abi=unique("ptx"))
    text = bytes(r).decode()
    assert r.output == "ptx" and ".version" in text and r.lowered_names["saxpy<float>"] in text


def test_ltoir_then_link(client):
    src = 'extern "C" __global__ void k(int *p) { *p = 7; }\n'
    abi = unique("link")
    lto = client.compile(src, arch="sm_90", output="ltoir", app_abi=abi)
    assert lto.output == "ltoir" and len(lto) > 0
    linked = client.compile(None, arch="sm_90", link=[("ltoir", "k.ltoir", lto.data)], app_abi=abi)
    again = client.compile(None, arch="sm_90", link=[("ltoir", "k.ltoir", bytes(lto))], app_abi=abi)
    assert (linked.status, again.status) == ("miss", "hit")
    assert bytes(linked)[:4] == b"\x7fELF" and bytes(linked) == bytes(again)


def test_bad_requests(client):
    with pytest.raises(jitcache.InvalidRequest) as e:
        client.compile(SAXPY, arch="sm_1")
    assert isinstance(e.value, ValueError) and e.value.code == L.JC_EINVAL and e.value.message
    with pytest.raises(jitcache.InvalidRequest):
        client.compile(SAXPY, arch="sm_90", options=["-arch=sm_80"])
    with pytest.raises(jitcache.InvalidRequest):
        client.compile(SAXPY, arch="sm_90", headers={"../escape.h": ""})
    with pytest.raises(ValueError, match="output"):
        client.compile(SAXPY, arch="sm_90", output="sass")
    with pytest.raises(ValueError, match="link input kind"):
        client.compile(None, arch="sm_90", link=[("elf", "x", b"")])
    with pytest.raises(TypeError, match="name_expressions"):
        client.compile(SAXPY, arch="sm_90", name_expressions="saxpy<float>")
    with pytest.raises(TypeError, match="options"):
        client.compile(SAXPY, arch="sm_90", options="-std=c++17")
    # The connection is still good.
    assert client.compile(SAXPY, arch="sm_90", app_abi=unique("after-bad")).status == "miss"


def test_stats(client, daemon):
    abi = unique("stats")
    client.compile(SAXPY, arch="sm_90", app_abi=abi)
    before = client.stats()
    client.compile(SAXPY, arch="sm_90", app_abi=abi)
    after = jitcache.stats(daemon.sock)
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"]
    assert isinstance(after["nvrtc_version"], str) and after["entries"] >= 1


def test_threads_share_one_client(client):
    abi = unique("threads")
    want = bytes(client.compile(SAXPY, arch="sm_90", app_abi=abi))
    got, errors = [], []

    def work():
        try:
            for _ in range(20):
                got.append(bytes(client.compile(SAXPY, arch="sm_90", app_abi=abi)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 80 and all(g == want for g in got)


def stop_all_threads(pid: int) -> None:
    """SIGSTOP pid and wait until every thread of it has stopped: a serving
    thread that is running may answer one more request meanwhile."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        states = []
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{t}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass  # a thread that ended
        if states and all(st in "tT" for st in states):
            return
        time.sleep(0.005)
    raise AssertionError(f"pid {pid} did not stop within 5 s")


def test_client_timeout_then_reconnect(own_daemon):
    abi = unique("timeout")
    with jitcache.Client(own_daemon.sock) as first:  # the miss: a compile may take > 0.3 s
        first.compile(SAXPY, arch="sm_90", app_abi=abi)
    c = jitcache.Client(own_daemon.sock, timeout=0.3)
    assert c.compile(SAXPY, arch="sm_90", app_abi=abi).status == "hit"
    try:
        stop_all_threads(own_daemon.proc.pid)
        t0 = time.monotonic()
        with pytest.raises(jitcache.Timeout) as e:
            c.compile(SAXPY, arch="sm_90", app_abi=abi)
        assert 0.25 < time.monotonic() - t0 < 5
        assert isinstance(e.value, TimeoutError) and e.value.code == L.JC_ETIMEOUT
    finally:
        os.kill(own_daemon.proc.pid, signal.SIGCONT)
    assert c.compile(SAXPY, arch="sm_90", app_abi=abi).status == "hit"  # a new connection
    c.close()
    c.close()


def test_compile_timeout_of_the_daemon(tmp_path):
    # 4 * 10^5 statements: NVRTC needs far more than a second for them (38 s
    # on the development machine, 2 s for a quarter of them).
    body = "#define A1 s = s * 3 + i;\n" + "".join(
        f"#define A{n} A{n - 1} A{n - 1} A{n - 1} A{n - 1} A{n - 1} A{n - 1} A{n - 1} A{n - 1} "
        f"A{n - 1} A{n - 1}\n" for n in range(2, 6)) + "#define A6 A5 A5 A5 A5\n"
    src = body + "__global__ void k(int *p, int i) { int s = *p; A6 *p = s; }\n"
    d = Daemon(tmp_path, "--compile-timeout", "1").start()
    try:
        with jitcache.Client(d.sock) as c:
            with pytest.raises(jitcache.Timeout) as e:
                c.compile(src, arch="sm_90")
            assert "time" in e.value.message
            # The daemon keeps serving.
            assert c.compile(SAXPY, arch="sm_90").status == "miss"
    finally:
        assert d.stop() == 0


def test_no_daemon_is_unavailable(tmp_path):
    env = {"JITCACHE_SOCKET": str(tmp_path / "none.sock"), "XDG_RUNTIME_DIR": str(tmp_path),
           "JITCACHE_SYSTEM_SOCKET": "", "JITCACHE_FALLBACK": "error", "JITCACHE_AUTOSTART": "0",
           "JITCACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    p = run_python("-c",
        "import jitcache\n"
        "try:\n"
        "    jitcache.Client().compile('__global__ void k() {}', arch='sm_90')\n"
        "except jitcache.Unavailable as e:\n"
        "    print('unavailable', e.code, e.message)\n", env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"unavailable {L.JC_ECONNECT} ") and "none.sock" in p.stdout


def test_no_daemon_falls_back_to_nvrtc_in_process(tmp_path):
    env = {"JITCACHE_SOCKET": str(tmp_path / "none.sock"), "XDG_RUNTIME_DIR": str(tmp_path),
           "JITCACHE_SYSTEM_SOCKET": "", "JITCACHE_FALLBACK": "compile", "JITCACHE_AUTOSTART": "0",
           "JITCACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    code = (
        "import jitcache\n"
        f"src = open({str(SRC / 'examples' / 'saxpy.cu')!r}).read()\n"
        "c = jitcache.Client()\n"
        "r = c.compile(src, arch='sm_90', name_expressions=['saxpy<float>'])\n"
        "print(r.status, r.lowered_names['saxpy<float>'], bytes(r)[:4] == b'\\x7fELF', "
        "c.socket, repr(r.key))\n"
        "try:\n"
        "    c.compile('__global__ void k() { nope(); }', arch='sm_90')\n"
        "except jitcache.CompileError as e:\n"
        "    print(e.status, 'nope' in e.log)\n")
    p = run_python("-c", code, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["uncached", "_Z5saxpyIfEvT_PKS0_PS0_y", "True", "None", "''",
                                "uncached", "True"]


def test_fallback_is_logged_and_the_daemon_used_once_there(tmp_path, caplog):
    sock = str(tmp_path / "later.sock")
    c = jitcache.Client(sock, fallback="compile")
    with caplog.at_level("INFO", logger="jitcache"):
        r = c.compile(SAXPY, arch="sm_90", app_abi=unique("fallback-log"))
    assert r.status == "uncached" and c.socket is None
    with pytest.raises(jitcache.Unavailable):
        c.stats()  # no daemon to ask
    assert any(rec.levelname == "WARNING" for rec in caplog.records), caplog.records
    d = Daemon(tmp_path, sock=sock).start()
    try:
        abi = unique("fallback-then-daemon")
        assert c.compile(SAXPY, arch="sm_90", app_abi=abi).status == "miss"
        assert c.socket == sock
        assert c.compile(SAXPY, arch="sm_90", app_abi=abi).status == "hit"
    finally:
        c.close()
        assert d.stop() == 0


def test_explicit_socket_without_a_daemon_and_fallback_error(tmp_path):
    with pytest.raises(jitcache.Unavailable) as e:
        jitcache.Client(str(tmp_path / "nobody.sock"), fallback="error")
    assert e.value.code == L.JC_ECONNECT and "nobody.sock" in e.value.message
    with pytest.raises(ValueError):
        jitcache.Client(fallback="sometimes")


def test_a_forked_child_gets_its_own_connection(client):
    abi = unique("fork")
    want = bytes(client.compile(SAXPY, arch="sm_90", app_abi=abi))
    pid = os.fork()
    if pid == 0:  # the child: the inherited Client must not share the parent's socket
        ok = False
        try:
            ok = all(bytes(client.compile(SAXPY, arch="sm_90", app_abi=abi)) == want
                     for _ in range(50))
        finally:
            os._exit(0 if ok else 1)
    for _ in range(50):
        assert bytes(client.compile(SAXPY, arch="sm_90", app_abi=abi)) == want
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_library_not_found_names_what_was_tried(tmp_path):
    p = run_python("-c",
        "import jitcache\n"
        "try:\n"
        "    jitcache.Client()\n"
        "except jitcache.LibraryNotFound as e:\n"
        "    print('missing', isinstance(e, jitcache.Unavailable), e)\n",
        env={"JITCACHE_CLIENT_LIB": str(tmp_path / "libnothing.so"), "LD_LIBRARY_PATH": ""})
    assert p.returncode == 0, p.stderr
    if not p.stdout.startswith("missing"):
        pytest.skip("libjitcache-client is installed system-wide: the loader finds it")
    assert "missing True" in p.stdout and "libnothing.so" in p.stdout and L.SONAME in p.stdout


def test_report_load_failure_gets_a_fresh_compile(client, daemon):
    abi = unique("load-failure")
    client.compile(SAXPY, arch="sm_90", app_abi=abi, name_expressions=["saxpy<float>"])
    hit = client.compile(SAXPY, arch="sm_90", app_abi=abi, name_expressions=["saxpy<float>"])
    before = client.stats()
    fresh = client.report_load_failure(hit, "pytest: pretend cuModuleLoadData failed")
    after = client.stats()
    assert hit.status == "hit" and fresh.status == "miss" and fresh.key == hit.key
    assert bytes(fresh) == bytes(hit) and fresh.lowered_names == hit.lowered_names
    assert after["compiles"] == before["compiles"] + 1
    assert "pretend cuModuleLoadData failed" in daemon.log.read_text()


def test_arch_none_is_the_device_target(client):
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        have_driver = True
    except OSError:
        have_driver = False
    abi = unique("arch-none")
    if have_driver and ctypes.CDLL("libcuda.so.1").cuInit(0) == 0:
        r = client.compile(SAXPY, app_abi=abi)
        assert r.output in ("cubin", "ptx") and len(r) > 0
        assert r.key == client.compile(SAXPY, app_abi=abi).key
    else:
        with pytest.raises(jitcache.Error) as e:
            client.compile(SAXPY, app_abi=abi)
        assert e.value.code == L.JC_ENOTSUP and "device 0" in e.value.message
        assert "libcuda" in e.value.message or "CUDA" in e.value.message


def test_hook_modules_import_without_their_frameworks():
    # Each in a fresh interpreter: importing the hooks imports no framework.
    p = run_python("-c",
        "import sys, jitcache.cupy, jitcache.cuda_core\n"
        "print('cupy' in sys.modules, 'cuda.core' in sys.modules)\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "False"]


def test_cupy_private_dir_outlives_a_forked_child():
    # A forked child that exits through atexit (sys.exit) leaves the parent's
    # directory of artifacts for CuPy in place, and makes its own to write in.
    p = run_python("-c",
        "import os, sys, jitcache.cupy as jc\n"
        "d = jc._private_dir()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0 if jc._private_dir() != d else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.path.isdir(d), os.waitstatus_to_exitcode(status))\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "0"]


def test_cache_dir_names_the_daemon_of_a_directory(daemon, tmp_path):
    abi = unique("cache-dir")
    with jitcache.Client(cache_dir=daemon.cache, autostart=False, fallback="error") as c:
        assert c.socket == daemon.sock
        assert c.compile(SAXPY, arch="sm_90", app_abi=abi).status == "miss"
    with jitcache.Client(daemon.sock) as c:
        assert c.compile(SAXPY, arch="sm_90", app_abi=abi).status == "hit"
    with pytest.raises(jitcache.Unavailable):
        jitcache.Client(cache_dir=tmp_path / "no-daemon", autostart=False, fallback="error")


def test_autostart_a_daemon_on_a_cache_dir(tmp_path):
    cache = tmp_path / "cache"
    ctl = os.environ["JITCACHECTL"]
    try:
        with jitcache.Client(cache_dir=cache, autostart=True, fallback="error") as c:
            assert c.socket is not None
            assert c.compile(SAXPY, arch="sm_90").status == "miss"
        with jitcache.Client(cache_dir=cache, autostart=False, fallback="error") as c:
            assert c.compile(SAXPY, arch="sm_90").status == "hit"
    finally:
        p = subprocess.run([ctl, "--cache-dir", str(cache), "stop"], capture_output=True,
                           text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    for _ in range(500):  # it removes the file once it has stopped listening
        if not (cache / "jitcached.socket-path").exists():
            break
        time.sleep(0.01)
    assert not (cache / "jitcached.socket-path").exists()


def test_remote_hit_status_and_times(tmp_path):
    """Issue 22 item 5: a result served from the remote tier says "remote-hit"
    (no compile ran on that daemon) and carries the original compile's time;
    a local hit says "hit". Two real daemons on one real redis-server."""
    import shutil
    server = shutil.which("redis-server")
    if not server:
        pytest.skip("redis-server not found (scripts/setup.sh installs it)")
    sock = tmp_path / "redis.sock"
    redis = subprocess.Popen([server, "--port", "0", "--unixsocket", str(sock), "--save", "",
                              "--appendonly", "no", "--dir", str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    daemons = []
    try:
        for _ in range(50):
            if sock.exists():
                break
            time.sleep(0.05)
        url = f"redis+unix://{sock}"
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            daemons.append(Daemon(tmp_path / name, "--remote", url, "--remote-unsigned").start())
        abi = unique("remote-hit")
        with jitcache.Client(daemons[0].sock, fallback="error") as a:
            first = a.compile(SAXPY, name="saxpy.cu", arch="sm_90", app_abi=abi)
            assert first.status == "miss"
            hit = a.compile(SAXPY, name="saxpy.cu", arch="sm_90", app_abi=abi)
            assert hit.status == "hit"
            assert hit.timings.compile_ns == first.timings.compile_ns > 0
            deadline = time.monotonic() + 10  # the publish is off the request path
            while a.stats()["remote_publishes"] < 1 and time.monotonic() < deadline:
                time.sleep(0.02)
        with jitcache.Client(daemons[1].sock, fallback="error") as b:
            r = b.compile(SAXPY, name="saxpy.cu", arch="sm_90", app_abi=abi)
            assert r.status == "remote-hit"
            assert bytes(r.data) == bytes(first.data)
            assert r.timings.compile_ns == first.timings.compile_ns
            # Stored locally just after it is served (a request meanwhile joins that).
            deadline = time.monotonic() + 10
            again = b.compile(SAXPY, name="saxpy.cu", arch="sm_90", app_abi=abi)
            while again.status == "joined" and time.monotonic() < deadline:
                again = b.compile(SAXPY, name="saxpy.cu", arch="sm_90", app_abi=abi)
            assert again.status == "hit"
            assert again.timings.compile_ns == first.timings.compile_ns
            assert b.stats()["compiles"] == 0
    finally:
        for d in daemons:
            d.stop()
        redis.kill()
        redis.wait()
