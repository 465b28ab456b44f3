"""Python frames in a forked child: the parent and the child each leak once from their own
function (lines marked `# LEAK: NAME`); each writes its own trace, which must describe the code
objects it names (the child's trace is a new one)."""

import ctypes
import os

cu = ctypes.CDLL("libcuda.so.1")


def setup():
    assert cu.cuInit(0) == 0
    dev = ctypes.c_int(0)
    assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    ctx = ctypes.c_void_p(0)
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0


def leak(size):
    ptr = ctypes.c_uint64(0)
    assert cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0  # LEAK: helper


def in_parent():
    leak(1 << 20)  # LEAK: parent


def in_child():
    leak(2 << 20)  # LEAK: child


setup()
in_parent()
pid = os.fork()
if pid == 0:
    setup()
    in_child()
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert status == 0, status
