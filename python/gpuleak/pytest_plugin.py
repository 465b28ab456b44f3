"""The gpuleak pytest plugin: GPU leak and memory limits per test.

Run pytest under the shim, with the plugin on::

    gpuleak run -- pytest --gpuleak tests/
    gpuleak run -- pytest --gpuleak -n 4 tests/          # pytest-xdist: one trace per worker

Each test's call phase is measured between two snapshots of the process's trace (fixtures'
setup and teardown are not part of it):

- `@pytest.mark.gpu_limit_leaks("1 MB")` fails the test when memory allocated during it is
  still live after it by more than the limit (net growth per allocation site, after a
  garbage collection), with the allocation stacks in the failure;
- `@pytest.mark.gpu_limit_memory("2 GB")` fails it when the memory it had allocated at once
  (the highest live bytes during the test, above what was live when it started; every kind
  the trace counts as memory: device, managed, stream-ordered, VMM, pinned host) exceeds the
  limit;
- `--gpuleak-limit-leaks SIZE` applies a leak limit to every test without the marker;
- `--gpuleak-baseline FILE` fails a test whose leaked bytes grew over the number the file holds
  for it (0 for a test it does not list); `--gpuleak-update-baseline` writes the file instead.

Sizes are bytes or strings as pytest-memray's `limit_memory` reads them, every unit a power
of 1024 ("1 MB" = "1 MiB" = 1048576 bytes; `gpuleak.parse_size`).

Markers are registered always, so they can stay in the code when pytest runs without the
plugin (they then check nothing). See docs/python.md.
"""

import gc
import json
import os

import pytest

import gpuleak

LEAKS_MARKER = "gpu_limit_leaks"
MEMORY_MARKER = "gpu_limit_memory"
LEAKED_PROPERTY = "gpuleak_leaked_bytes"
PEAK_PROPERTY = "gpuleak_peak_bytes"
BASELINE_FORMAT = "gpuleak-pytest-baseline"


def pytest_addoption(parser):
    group = parser.getgroup("gpuleak", "GPU memory leaks per test (run pytest under `gpuleak run`)")
    group.addoption(
        "--gpuleak",
        action="store_true",
        default=False,
        help="measure the GPU memory of every test and apply the gpu_limit_leaks and "
        "gpu_limit_memory markers; needs libgpuleak.so loaded: `gpuleak run -- pytest --gpuleak`",
    )
    group.addoption(
        "--gpuleak-limit-leaks",
        metavar="SIZE",
        default=None,
        help="leak limit for tests without a gpu_limit_leaks marker: bytes or a size such as "
        "64KB or '1.5 MiB' (every unit a power of 1024)",
    )
    group.addoption(
        "--gpuleak-baseline",
        metavar="FILE",
        default=None,
        help="JSON file of leaked bytes per test: a test that leaks more than its entry (0 when "
        "absent) fails (implies --gpuleak)",
    )
    group.addoption(
        "--gpuleak-update-baseline",
        action="store_true",
        default=False,
        help="write the leaked bytes of every test that ran into --gpuleak-baseline instead of "
        "comparing",
    )
    group.addoption(
        "--gpuleak-count-pools",
        action="store_true",
        default=False,
        help="count memory that caching allocators (PyTorch, CuPy, JAX, RMM) keep as leaked "
        "(the default under `gpuleak run --no-framework-cache`)",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{LEAKS_MARKER}(size): with --gpuleak, fail when GPU memory allocated during the test "
        "outlives it by more than size (bytes, or '1 MB', '64KiB', ...; every unit a power of 1024)",
    )
    config.addinivalue_line(
        "markers",
        f"{MEMORY_MARKER}(size): with --gpuleak, fail when the GPU memory the test has allocated "
        "at once exceeds size",
    )
    baseline = config.getoption("gpuleak_baseline")
    if config.getoption("gpuleak_update_baseline") and not baseline:
        raise pytest.UsageError("--gpuleak-update-baseline needs --gpuleak-baseline FILE")
    limit = config.getoption("gpuleak_limit_leaks")
    try:
        default_limit = None if limit is None else gpuleak.parse_size(limit)
    except ValueError as e:
        raise pytest.UsageError(f"--gpuleak-limit-leaks: {e}") from None
    if not (config.getoption("gpuleak") or baseline):
        return
    if not gpuleak.active():
        raise pytest.UsageError(
            "--gpuleak: libgpuleak.so is not loaded in this process, so nothing can be measured: "
            "run pytest under the shim: gpuleak run -- pytest --gpuleak ..."
        )
    if os.environ.get("GPULEAK_DISABLE") == "1":
        raise pytest.UsageError("--gpuleak: GPULEAK_DISABLE=1 is set, so nothing is traced: unset it")
    config.pluginmanager.register(GpuleakPlugin(config, default_limit), "gpuleak-plugin")


def _marker_limit(item, name):
    marker = item.get_closest_marker(name)
    if marker is None:
        return None
    if marker.args:
        value = marker.args[0]
    elif "size" in marker.kwargs:
        value = marker.kwargs["size"]
    else:
        raise pytest.UsageError(f"{item.nodeid}: @{name} needs a size, as in @pytest.mark.{name}('1 MB')")
    try:
        return gpuleak.parse_size(value)
    except ValueError as e:
        raise pytest.UsageError(f"{item.nodeid}: @{name}: {e}") from None


def _test_frame(item):
    """(file, function) of the test function, where its leaks' stacks are cut."""
    func = getattr(item, "function", None)
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    return (code.co_filename, getattr(code, "co_qualname", code.co_name))


def _is_xdist_worker(config):
    return hasattr(config, "workerinput")


class Baseline:
    """Leaked bytes per test id, as a JSON file."""

    def __init__(self, path):
        self.path = path
        self.tests = {}

    def load(self):
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return self
        except (OSError, ValueError) as e:
            raise pytest.UsageError(f"--gpuleak-baseline {self.path}: cannot read it: {e}") from None
        if not isinstance(doc, dict) or doc.get("format") != BASELINE_FORMAT:
            raise pytest.UsageError(
                f"--gpuleak-baseline {self.path}: not a gpuleak pytest baseline (written by "
                "--gpuleak-update-baseline)"
            )
        self.tests = {k: int(v.get("leaked_bytes", 0)) for k, v in (doc.get("tests") or {}).items()}
        return self

    def save(self, results):
        doc = {
            "format": BASELINE_FORMAT,
            "version": 1,
            "tests": {
                nodeid: {"leaked_bytes": leaked, "peak_bytes": peak}
                for nodeid, (leaked, peak) in sorted(results.items())
            },
        }
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, self.path)


class GpuleakPlugin:
    """Measures each test's call phase; collects the results (in the xdist controller too)."""

    def __init__(self, config, default_limit):
        self.config = config
        self.default_limit = default_limit
        # None: count them exactly under `gpuleak run --no-framework-cache`.
        self.count_pools = True if config.getoption("gpuleak_count_pools") else None
        path = config.getoption("gpuleak_baseline")
        self.update = config.getoption("gpuleak_update_baseline")
        self.baseline = Baseline(path).load() if path else None
        # nodeid -> (leaked bytes, peak bytes), from this process or from xdist workers.
        self.results = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        leak_limit = _marker_limit(item, LEAKS_MARKER)
        if leak_limit is None:
            leak_limit = self.default_limit
        memory_limit = _marker_limit(item, MEMORY_MARKER)
        first = gpuleak.snapshot(f"pytest begin {item.nodeid}")
        result = yield  # the test's own failure propagates: it says more than a leak would
        if not first:
            return result
        # Memory held only by garbage (reference cycles) is not a leak of the test's.
        gc.collect()
        last = gpuleak.snapshot(f"pytest end {item.nodeid}")
        try:
            window = gpuleak.window(first, last)
        except gpuleak.ToolError as e:
            pytest.fail(f"gpuleak: cannot measure {item.nodeid}: {e}", pytrace=False)
        leaks = window.leaks(self.count_pools)
        leaked = sum(leak.bytes for leak in leaks)
        peak = 0
        if window.peak_bytes is not None:
            peak = max(0, window.peak_bytes - window.live_bytes_before)
        item.user_properties.append((LEAKED_PROPERTY, leaked))
        item.user_properties.append((PEAK_PROPERTY, peak))
        problems = []
        if leak_limit is not None and leaked > leak_limit:
            problems.append(str(gpuleak.LeakError(leaks, leak_limit, "the test", _test_frame(item))))
        if memory_limit is not None:
            if window.peak_bytes is None:
                problems.append(
                    f"gpuleak: @{MEMORY_MARKER} needs an analyzer that reports peak_bytes_between "
                    f"(gpuleak {gpuleak_version()} does not)"
                )
            elif peak > memory_limit:
                problems.append(
                    f"gpuleak: the test had {peak} bytes ({gpuleak.format_size(peak)}) of GPU "
                    f"memory allocated at once, over its limit of {memory_limit} bytes"
                )
        if self.baseline is not None and not self.update:
            allowed = self.baseline.tests.get(item.nodeid, 0)
            if leaked > allowed:
                listed = "its baseline" if item.nodeid in self.baseline.tests else "the baseline (absent: 0)"
                problems.append(
                    f"gpuleak: the test leaked {leaked} bytes, more than the {allowed} bytes of {listed} "
                    f"in {self.baseline.path}:\n"
                    + "\n".join(leak.format(caller=_test_frame(item)) for leak in leaks)
                )
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
        return result

    def pytest_runtest_logreport(self, report):
        # Runs in the process that reports: the only process, or the xdist controller, which
        # gets the workers' user_properties with their reports.
        if report.when != "call":
            return
        props = dict(report.user_properties)
        if LEAKED_PROPERTY in props:
            self.results[report.nodeid] = (int(props[LEAKED_PROPERTY]), int(props.get(PEAK_PROPERTY, 0)))

    def pytest_sessionfinish(self, session):
        if _is_xdist_worker(self.config) or not self.update or self.baseline is None:
            return
        self.baseline.save(self.results)

    def pytest_terminal_summary(self, terminalreporter):
        if _is_xdist_worker(self.config):
            return
        tr = terminalreporter
        leaking = sorted(((v[0], k) for k, v in self.results.items() if v[0] > 0), reverse=True)
        tr.write_sep("-", "gpuleak")
        total = sum(b for b, _ in leaking)
        tr.write_line(
            f"gpuleak: {len(self.results)} test{'s' if len(self.results) != 1 else ''} measured, "
            f"{len(leaking)} left GPU memory allocated ({gpuleak.format_size(total)})"
        )
        for leaked, nodeid in leaking[:10]:
            tr.write_line(f"  {gpuleak.format_size(leaked):>10}  {nodeid}")
        if self.update and self.baseline is not None:
            tr.write_line(f"gpuleak: baseline written to {self.baseline.path}")


def gpuleak_version():
    try:
        from importlib.metadata import version

        return version("gpuleak")
    except Exception:  # noqa: BLE001 - only for a message
        return "?"
