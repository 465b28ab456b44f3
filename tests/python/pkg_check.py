"""gpuleak.check() and the rest of the Python API on cuda-bindings allocations, under
`gpuleak run` (tests/e2e/python_pkg.rs). Each case asserts what it must see and prints
`ok CASE ...`; the e2e test requires every case's line. A leaking block has a fixed twin.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpuleak  # noqa: E402
from pkg_cuda import alloc, context, free  # noqa: E402

MIB = 1 << 20
KEPT = []


def leaky_block():
    """The leak: a buffer kept past the block."""
    with gpuleak.check():
        KEPT.append(alloc(MIB))


def case_api():
    assert gpuleak.active()
    path = gpuleak.trace_path()
    assert path and os.path.isfile(path), path
    context()
    before = gpuleak.live_bytes()
    ptr = alloc(3 * MIB)
    assert gpuleak.live_bytes() - before == 3 * MIB, (before, gpuleak.live_bytes())
    assert gpuleak.live_bytes(0) >= 3 * MIB
    free(ptr)
    assert gpuleak.live_bytes() == before
    gpuleak.mark("step", 7)
    with gpuleak.region("forward"):
        pass
    a = gpuleak.snapshot("a")
    b = gpuleak.snapshot()
    assert a > 0 and b == a + 1, (a, b)
    print(f"ok api trace={path}", flush=True)


def case_leak_raises():
    try:
        leaky_block()
    except gpuleak.LeakError as e:
        assert e.leaked_bytes == MIB, e.leaked_bytes
        assert [leak.bytes for leak in e.leaks] == [MIB]
        leak = e.leaks[0]
        assert leak.kind == "device" and leak.api == "cuMemAlloc_v2", (leak.kind, leak.api)
        # The stack is the allocation's: it goes through cuda-bindings' driver module.
        modules = [f.module or "" for f in leak.stack]
        assert any("driver" in m for m in modules), modules
        assert "1048576 bytes (1.0 MiB) allocated in the block outlived it" in str(e), str(e)
        assert "allocated by cuMemAlloc_v2" in str(e)
        print(f"ok leak_raises frames={len(leak.stack)}", flush=True)
        print(str(e), flush=True)
        return
    raise AssertionError("gpuleak.check() did not raise on a leaking block")


def case_fixed_twin():
    with gpuleak.check() as c:
        ptr = alloc(MIB)
        free(ptr)
    assert c.checked and c.leaked_bytes == 0 and c.leaks == [], (c.checked, c.leaked_bytes)
    print("ok fixed_twin", flush=True)


def case_under_the_limit():
    with gpuleak.check(max_leaked_bytes="2 MiB") as c:
        KEPT.append(alloc(MIB))
    assert c.checked and c.leaked_bytes == MIB, c.leaked_bytes
    print("ok under_the_limit", flush=True)


def case_frees_older_memory():
    old = alloc(MIB)
    with gpuleak.check() as c:
        free(old)
    assert c.checked and c.leaked_bytes == 0
    print("ok frees_older_memory", flush=True)


def case_exception_passes_through():
    try:
        with gpuleak.check():
            KEPT.append(alloc(MIB))
            raise KeyError("the block's own error")
    except KeyError:
        print("ok exception_passes_through", flush=True)
        return
    raise AssertionError("the block's exception was replaced")


@gpuleak.check(max_leaked_bytes=0)
def decorated_leak():
    KEPT.append(alloc(64 << 10))


def case_decorator():
    try:
        decorated_leak()
    except gpuleak.LeakError as e:
        assert e.leaked_bytes == 64 << 10
        assert "decorated_leak()" in str(e), str(e)
        print("ok decorator", flush=True)
        return
    raise AssertionError("the decorated function's leak was not reported")


CASES = [
    case_api,
    case_leak_raises,
    case_fixed_twin,
    case_under_the_limit,
    case_frees_older_memory,
    case_exception_passes_through,
    case_decorator,
]

if __name__ == "__main__":
    wanted = sys.argv[1:]
    for case in CASES:
        if not wanted or case.__name__[len("case_"):] in wanted:
            case()
    print("done", flush=True)
