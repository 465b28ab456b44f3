"""Unit tests of the gpuleak package's pure-Python parts, without the shim (tests/e2e/python_pkg.rs
runs `python -m pytest` on this file in target/pkgenv): reading `gpuleak report --at A..B` JSON,
the leak message and its stack cut, sizes (on the table tests/data/sizes.txt that the Rust
parser's tests read too), and the plugin's option errors."""

import json
import pathlib
import warnings

import pytest

import gpuleak
from gpuleak import pytest_plugin

pytest_plugins = ["pytester"]


def frame(function, file, line, module="python"):
    return {"function": function, "file": file, "line": line, "module": module, "address": None}


def report(rows, sites, peak=None):
    """A `gpuleak report --format json --at 1..2` document with the fields the package reads."""
    return {
        "schema_version": 1,
        "process": {
            "memory": {
                "snapshot": {
                    "id": 1,
                    "to_id": 2,
                    "live_bytes": 100,
                    "to_live_bytes": 100 + sum(r["delta"] for r in rows),
                    "peak_bytes_between": peak,
                    "sites": rows,
                },
                "sites": sites,
            }
        },
        "processes": [],
    }


STACK = [
    frame("cuMemAlloc_v2", None, None, "libcuda.so.1"),
    frame("alloc", "/src/util.py", 3),
    frame("Model.step", "/src/train.py", 10),
    frame("main", "/src/train.py", 20),
]


def test_the_window_keeps_sites_that_grew_largest_first_and_pools_on_request():
    doc = report(
        [
            {"stack_id": 1, "bytes": 0, "to_bytes": 10, "delta": 10},
            {"stack_id": 2, "bytes": 50, "to_bytes": 0, "delta": -50},
            {"stack_id": 3, "bytes": 0, "to_bytes": 30, "delta": 30},
            {"stack_id": 4, "bytes": 0, "to_bytes": 99, "delta": 99},
        ],
        [
            {"stack_id": 1, "kind": "device", "api": "cuMemAlloc_v2", "pool": False, "stack": STACK},
            {"stack_id": 2, "kind": "device", "api": "cuMemAlloc_v2", "pool": False, "stack": []},
            {"stack_id": 3, "kind": "async", "api": "cuMemAllocAsync", "pool": False, "stack": []},
            {"stack_id": 4, "kind": "device", "api": "cuMemAlloc_v2", "pool": True, "stack": []},
        ],
        peak=180,
    )
    w = gpuleak.Window(1, 2, doc)
    assert [(leak.stack_id, leak.bytes) for leak in w.leaks(count_pools=False)] == [(3, 30), (1, 10)]
    assert [leak.stack_id for leak in w.leaks(count_pools=True)] == [4, 3, 1]
    assert (w.live_bytes_before, w.peak_bytes) == (100, 180)
    assert w.leaks(count_pools=False)[1].stack[2].function == "Model.step"


def test_pools_count_by_default_only_without_framework_caches(monkeypatch):
    doc = report(
        [{"stack_id": 4, "bytes": 0, "to_bytes": 99, "delta": 99}],
        [{"stack_id": 4, "kind": "device", "api": "cuMemAlloc_v2", "pool": True, "stack": []}],
    )
    monkeypatch.delenv("GPULEAK_NO_FRAMEWORK_CACHE", raising=False)
    assert gpuleak.Window(1, 2, doc).leaks() == []
    monkeypatch.setenv("GPULEAK_NO_FRAMEWORK_CACHE", "1")
    assert [leak.bytes for leak in gpuleak.Window(1, 2, doc).leaks()] == [99]


def test_a_check_without_the_shim_warns_once(monkeypatch):
    monkeypatch.delenv("GPULEAK_REQUIRE_SHIM", raising=False)
    monkeypatch.setattr(gpuleak, "_warned_no_shim", False)
    with pytest.warns(RuntimeWarning, match="libgpuleak.so is not loaded"):
        with gpuleak.check() as c:
            pass
    assert not c.checked
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with gpuleak.check():
            pass


def test_a_check_without_the_shim_raises_under_gpuleak_require_shim(monkeypatch):
    monkeypatch.setenv("GPULEAK_REQUIRE_SHIM", "1")
    monkeypatch.setattr(gpuleak, "_warned_no_shim", False)
    ran = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="gpuleak run"):
            with gpuleak.check():
                ran.append(1)
    assert not ran


def test_an_analyzer_without_the_peak_field_gives_none():
    w = gpuleak.Window(1, 2, report([], [], peak=None))
    assert w.peak_bytes is None and w.grown == []


def test_the_message_cuts_the_stack_at_the_caller_and_names_native_files_by_name():
    leak = gpuleak.Leak(
        2048,
        1,
        kind="device",
        api="cuMemAlloc_v2",
        stack=[gpuleak.Frame.from_json(f) for f in STACK]
        + [gpuleak.Frame("PyEval", "/build/Python/ceval.c", 99, "/usr/lib/libpython3.11.so")],
    )
    e = gpuleak.LeakError([leak], 1024, "the test", caller=("/src/train.py", "step"))
    text = str(e)
    assert text.splitlines() == [
        "gpuleak: 2048 bytes (2.0 KiB) allocated in the test outlived it (limit 1024 bytes) at 1 site",
        "2048 bytes (2.0 KiB) still live (device, allocated by cuMemAlloc_v2):",
        "    #0 cuMemAlloc_v2 (libcuda.so.1)",
        "    #1 alloc /src/util.py:3 (python)",
        "    #2 Model.step /src/train.py:10 (python)",
    ]
    assert e.leaked_bytes == 2048 and isinstance(e, AssertionError)
    # No caller frame in the stack: all of it, native files by their name.
    full = leak.format()
    assert "    #4 PyEval ceval.c:99 (libpython3.11.so)" in full


def test_format_size_matches_gpuleak_run():
    assert [gpuleak.format_size(n) for n in (0, 1000, 3 << 20, 5 << 30)] == ["0 B", "1000 B", "3.0 MiB", "5.0 GiB"]


SIZES = pathlib.Path(__file__).resolve().parent.parent / "data" / "sizes.txt"


def size_cases():
    """(line, text, bytes or None for an error) from the shared table."""
    cases = []
    for number, line in enumerate(SIZES.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        text, want = line.split("\t")
        text = "" if text == "<empty>" else text.replace("\\s", " ").replace("\\t", "\t")
        cases.append((number, text, None if want == "error" else int(want)))
    return cases


def test_sizes_follow_the_table_the_rust_parser_is_tested_on():
    cases = size_cases()
    assert len(cases) > 40
    for number, text, want in cases:
        if want is None:
            with pytest.raises(ValueError, match="expected a number of bytes with an optional unit"):
                gpuleak.parse_size(text)
        else:
            assert gpuleak.parse_size(text) == want, (number, text)
    # The units mean the same as pytest-memray's: powers of 1024.
    assert gpuleak.parse_size("1MB") == gpuleak.parse_size("1 MiB") == gpuleak.parse_size("1M") == 1 << 20


def test_bad_sizes_raise_value_error_with_the_accepted_forms():
    for bad in (-1, 1 << 64, True, 1.5, None, "lots"):
        with pytest.raises(ValueError, match="K/KB/KiB, M/MB/MiB") as e:
            gpuleak.parse_size(bad)
        assert repr(bad) in str(e.value)
    assert gpuleak.parse_size((1 << 64) - 1) == (1 << 64) - 1
    with pytest.raises(ValueError, match=r"invalid size '1 XB': unknown unit; expected .*powers of 1024"):
        gpuleak.check(max_leaked_bytes="1 XB")
    assert gpuleak.check(max_leaked_bytes="1 MB").limit == 1 << 20


class FakeItem:
    """What `_marker_limit` reads of a test item."""

    nodeid = "t.py::test_x"

    def __init__(self, *args):
        self.marker = pytest.mark.gpu_limit_leaks(*args).mark

    def get_closest_marker(self, name):
        return self.marker if name == self.marker.name else None


def test_marker_sizes_follow_the_rule_and_bad_ones_are_usage_errors():
    assert pytest_plugin._marker_limit(FakeItem("1 MB"), "gpu_limit_leaks") == 1 << 20
    assert pytest_plugin._marker_limit(FakeItem(4096), "gpu_limit_leaks") == 4096
    assert pytest_plugin._marker_limit(FakeItem("1 MB"), "gpu_limit_memory") is None
    with pytest.raises(pytest.UsageError, match=r"t.py::test_x: @gpu_limit_leaks: invalid size '1 XB': unknown unit; expected"):
        pytest_plugin._marker_limit(FakeItem("1 XB"), "gpu_limit_leaks")


def test_a_bad_limit_option_is_a_usage_error_that_says_what_is_accepted(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("--gpuleak-limit-leaks", "lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuleak-limit-leaks: invalid size 'lots': not a number; expected a number of bytes*"])


def test_a_baseline_that_is_not_one_is_refused(tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"tests": {}}))
    with pytest.raises(pytest.UsageError, match="not a gpuleak pytest baseline"):
        pytest_plugin.Baseline(str(bad)).load()
    assert pytest_plugin.Baseline(str(tmp_path / "absent.json")).load().tests == {}


def test_a_baseline_round_trips(tmp_path):
    path = str(tmp_path / "b.json")
    pytest_plugin.Baseline(path).save({"t.py::a": (10, 20), "t.py::b": (0, 5)})
    assert pytest_plugin.Baseline(path).load().tests == {"t.py::a": 10, "t.py::b": 0}


def test_update_baseline_needs_a_baseline_file(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("--gpuleak-update-baseline")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuleak-update-baseline needs --gpuleak-baseline FILE*"])


def test_markers_are_registered_without_the_plugin_on(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.gpu_limit_leaks("1 MB")
        @pytest.mark.gpu_limit_memory("2 GB")
        def test_x():
            pass
        """
    )
    result = pytester.runpytest_subprocess("--strict-markers")
    result.assert_outcomes(passed=1)


def test_a_long_stack_with_cpp_frames_keeps_every_python_frame_and_the_user_s_line():
    from gpuleak import _frameworks

    cpp = [{"filename": "??", "line": 0, "name": f"c{i}"} for i in range(40)]
    python = [
        {"filename": "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"},
        {"filename": "/home/me/train.py", "line": 18, "name": "step"},
        {"filename": "/home/me/train.py", "line": 30, "name": "<module>"},
    ]
    frames = cpp[:30] + python[:2] + cpp[30:] + python[2:]
    kept = _frameworks._kept_frames(frames)
    assert len(kept) == _frameworks.MAX_FRAMES
    assert [f for f in kept if f["filename"] != "??"] == python
    assert kept[:29] == cpp[:29], "then the innermost C++ frames"
    # A short stack is kept whole.
    assert _frameworks._kept_frames(frames[:10]) == frames[:10]
    # The user's frame is the first Python frame outside the frameworks, C++ frames before it.
    triples = [(f["filename"], f["line"], f["name"]) for f in kept]
    assert triples[_frameworks.user_frame(triples)] == ("/home/me/train.py", 18, "step")
    # Without a Python frame of the user's, the first frame outside the frameworks.
    assert _frameworks.user_frame([("??", 0, "a"), ("/x/torch/f.py", 1, "g")]) == 0
    assert _frameworks.user_frame([("/x/torch/f.py", 1, "g")]) == 0


def test_xla_out_of_memory_errors_give_their_request_and_other_errors_nothing():
    from gpuleak import _jax

    class XlaRuntimeError(RuntimeError):
        pass

    class JaxRuntimeError(RuntimeError):
        pass

    message = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes."
    assert _jax.out_of_memory_request(XlaRuntimeError(message)) == 17179869184
    assert _jax.out_of_memory_request(JaxRuntimeError(message)) == 17179869184
    bfc = "RESOURCE_EXHAUSTED: Failed to allocate request for 16.00GiB (17179869184B) on device ordinal 0"
    assert _jax.out_of_memory_request(XlaRuntimeError(bfc)) == 17179869184
    assert _jax.out_of_memory_request(XlaRuntimeError("INVALID_ARGUMENT: shapes 4 bytes")) is None
    assert _jax.out_of_memory_request(ValueError(message)) is None
    assert _jax.out_of_memory_request(KeyboardInterrupt()) is None


def test_the_jax_hook_prints_the_program_s_error_whatever_happens_in_it(monkeypatch):
    from gpuleak import _jax

    seen = []
    monkeypatch.setattr("sys.excepthook", lambda *a: seen.append(a[1]))

    class BrokenRuntimeError(RuntimeError):
        def __str__(self):
            raise ValueError("no message")

    class Jax:
        def local_devices(self):
            raise AssertionError("not asked")

    adapter = _jax.JaxAdapter(Jax())
    monkeypatch.setattr("atexit.register", lambda f: None)
    adapter.attach()
    import sys

    error = BrokenRuntimeError()
    sys.excepthook(BrokenRuntimeError, error, None)
    assert seen == [error]
    other = KeyError("x")
    sys.excepthook(KeyError, other, None)
    assert seen == [error, other]
