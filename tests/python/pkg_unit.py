"""Unit tests of the gpuleak package's pure-Python parts, without the shim (tests/e2e/python_pkg.rs
runs `python -m pytest` on this file in target/pkgenv): reading `gpuleak report --at A..B` JSON,
the leak message and its stack cut, sizes, and the plugin's option errors."""

import json

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
