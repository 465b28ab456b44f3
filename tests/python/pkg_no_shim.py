"""Without the shim (plain python, no LD_PRELOAD), the gpuleak API must do nothing and say so;
its size parser must read what `gpuleak check` reads. Asserts, then prints `ok no_shim`."""

import gpuleak

assert not gpuleak.active()
assert gpuleak.live_bytes() == 0 and gpuleak.snapshot("x") == 0
assert gpuleak.trace_path() is None
gpuleak.mark("step", 1)
with gpuleak.region("r"):
    pass
with gpuleak.check() as c:
    pass
assert not c.checked
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
