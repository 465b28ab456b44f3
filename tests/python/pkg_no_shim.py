"""Without the shim (plain python, no LD_PRELOAD), the gpuleak API must do nothing and say so
(a leak check warns once per process, or raises under GPULEAK_REQUIRE_SHIM=1); its size parser
must read what `gpuleak check` reads. Asserts, then prints `ok no_shim`."""

import os
import warnings

import gpuleak

assert not gpuleak.active()
assert gpuleak.live_bytes() == 0 and gpuleak.snapshot("x") == 0
assert gpuleak.trace_path() is None
gpuleak.mark("step", 1)
with gpuleak.region("r"):
    pass
# A check that cannot check warns, once per process; GPULEAK_REQUIRE_SHIM=1 makes it an error.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with gpuleak.check() as c:
        pass
    with gpuleak.check("1 MB"):
        pass
assert not c.checked
assert [w.category for w in caught] == [RuntimeWarning], caught
assert "libgpuleak.so is not loaded" in str(caught[0].message), caught[0].message
assert caught[0].filename == __file__, caught[0].filename
os.environ["GPULEAK_REQUIRE_SHIM"] = "1"
try:
    with gpuleak.check():
        raise AssertionError("the block ran")
    raise AssertionError("GPULEAK_REQUIRE_SHIM=1 without the shim did not raise")
except RuntimeError as e:
    assert isinstance(e, gpuleak.ToolError) and "gpuleak run" in str(e), e
del os.environ["GPULEAK_REQUIRE_SHIM"]
try:
    with gpuleak.check(strict=True):
        pass
    raise AssertionError("strict check without the shim did not raise")
except gpuleak.ToolError as e:
    assert "gpuleak run" in str(e)

sizes = {"4096": 4096, "64K": 65536, "1 MB": 1 << 20, "1.5MiB": 1572864, "2 GiB": 2 << 30, "7b": 7, 12: 12}
for text, want in sizes.items():
    assert gpuleak.parse_size(text) == want, (text, gpuleak.parse_size(text), want)
for bad in ("", "1 XB", "MB", -1, 1.5, "1.2.3"):
    try:
        gpuleak.parse_size(bad)
    except ValueError:
        continue
    raise AssertionError(f"parse_size accepted {bad!r}")
print("ok no_shim", flush=True)
