"""The gpuleak pytest plugin: GPU leak and memory limits per test.

    pytest --gpuleak tests/
    pytest --gpuleak -n 4 tests/                        # pytest-xdist: one trace per worker
    gpuleak run -- pytest --gpuleak tests/             # the same, with gpuleak run's summary

Without the shim in the process, `--gpuleak` runs pytest again at once (`os.execve`, the same
process id) with the package's libgpuleak.so in `LD_PRELOAD` and `GPULEAK_OUTPUT` set (unless
already set) to `gpuleak.pytest.%p.trace` in the working directory; `GPULEAK_PYTEST_REEXEC=1`
marks the new process, so it never happens twice.

Each test's call phase is measured (fixtures' setup and teardown are not part of it) by a
window of the shim's live accounting, in the process, at a cost that does not grow with the
suite: the allocations made in the window, the bytes allocated, the bytes allocated and still
live at its end, and the highest those were. These bound what the analyzer would find, so the
analyzer (`gpuleak report --at`, which reads the trace so far) runs only for a test over a
limit, to confirm it and name the lines:

- `@pytest.mark.gpu_limit_leaks("1 MB")` fails the test when memory allocated during it is
  still live after it by more than the limit (net growth per allocation site, after a
  garbage collection), with the allocation stacks in the failure;
- `@pytest.mark.gpu_limit_memory("2 GB")` fails it when the memory it had allocated at once
  (the highest live bytes during the test, above what was live when it started; every kind
  the trace counts as memory: device, managed, stream-ordered, VMM, pinned host) exceeds the
  limit, with the stacks of the memory live at the test's highest point;
- `--gpuleak-limit-leaks SIZE` applies a leak limit to every test without the marker;
- `--gpuleak-baseline FILE` fails a test whose leaked bytes grew over the number the file holds
  for it (0 for a test it does not list); `--gpuleak-update-baseline` writes the file instead;
- `--gpuleak-summary` prints, at the end, the tests that had the most GPU memory allocated at
  once, each with its largest allocators.

Sizes are bytes or strings as pytest-memray's `limit_memory` reads them, every unit a power
of 1024 ("1 MB" = "1 MiB" = 1048576 bytes; `gpuleak.parse_size`).

Markers are registered always, so they can stay in the code when pytest runs without the
plugin (they then check nothing). See docs/python.md.
"""

import gc
import json
import os
import sys

import pytest

import gpuleak

from . import _frameworks, _shim, _tool

LEAKS_MARKER = "gpu_limit_leaks"
MEMORY_MARKER = "gpu_limit_memory"
LEAKED_PROPERTY = "gpuleak_leaked_bytes"
PEAK_PROPERTY = "gpuleak_peak_bytes"
ALLOCATIONS_PROPERTY = "gpuleak_allocations"
ALLOCATED_PROPERTY = "gpuleak_allocated_bytes"
BASELINE_FORMAT = "gpuleak-pytest-baseline"
REEXEC_VAR = "GPULEAK_PYTEST_REEXEC"
# Below this, a test's memory is not followed by watch snapshots for the summary.
SUMMARY_WATCH_FLOOR = 64 << 10


def pytest_addoption(parser):
    group = parser.getgroup("gpuleak", "GPU memory leaks per test")
    group.addoption(
        "--gpuleak",
        action="store_true",
        default=False,
        help="measure the GPU memory of every test and apply the gpu_limit_leaks and "
        "gpu_limit_memory markers (runs pytest again with libgpuleak.so preloaded when it is "
        "not loaded)",
    )
    group.addoption(
        "--gpuleak-summary",
        action="store_true",
        default=False,
        help="print the tests that had the most GPU memory allocated at once, with their "
        "largest allocators (implies --gpuleak)",
    )
    group.addoption(
        "--gpuleak-summary-tests",
        metavar="N",
        type=int,
        default=5,
        help="how many tests --gpuleak-summary shows (default 5)",
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


@pytest.hookimpl(tryfirst=True)
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
    if not (config.getoption("gpuleak") or baseline or config.getoption("gpuleak_summary")):
        return
    if os.environ.get("GPULEAK_DISABLE") == "1":
        raise pytest.UsageError("--gpuleak: GPULEAK_DISABLE=1 is set, so nothing is traced: unset it")
    if not gpuleak.active():
        _reexec_under_shim(config)  # returns only when it cannot
    config.pluginmanager.register(GpuleakPlugin(config, default_limit), "gpuleak-plugin")


def _one_line(why):
    return pytest.UsageError(
        f"--gpuleak: libgpuleak.so is not loaded in this process ({why}), so nothing can be "
        "measured: run pytest under the shim: gpuleak run -- pytest --gpuleak ..."
    )


def _reexec_under_shim(config):
    """Runs this pytest again, in this process (`os.execve`), with libgpuleak.so preloaded;
    raises a UsageError with the command to run when it cannot."""
    if os.environ.get(REEXEC_VAR) == "1":
        raise _one_line(f"pytest was already run again with it preloaded ({REEXEC_VAR}=1)")
    if _is_xdist_worker(config) or os.environ.get("PYTEST_XDIST_WORKER"):
        raise _one_line("a pytest-xdist worker is not run again")
    lib = os.environ.get(_tool.LIB_VAR) or _tool.library()
    if not lib or not os.path.isfile(lib):
        raise _one_line("this gpuleak package has no libgpuleak.so to preload and GPULEAK_LIB is not set")
    orig = getattr(sys, "orig_argv", None)
    args = list(config.invocation_params.args)
    if not orig or not sys.executable or list(sys.argv[1:]) != args:
        # pytest.main() called from a program, or a Python without sys.orig_argv (before 3.10):
        # the command line to run again is not known.
        raise _one_line("pytest was not started from a command line that can be run again")
    env = dict(os.environ)
    env[REEXEC_VAR] = "1"
    env[_tool.LIB_VAR] = lib
    preload = env.get("LD_PRELOAD")
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else lib
    if not env.get("GPULEAK_OUTPUT"):
        # Absolute: as under `gpuleak run`, a test that changes directory writes no trace elsewhere.
        env["GPULEAK_OUTPUT"] = os.path.join(str(config.invocation_params.dir), "gpuleak.pytest.%p.trace")
    # Output capturing has begun (stdout may be a file now): give the terminal back first.
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        capman.stop_global_capturing()
    print(
        f"gpuleak: running pytest again with LD_PRELOAD={lib} (traces: {env['GPULEAK_OUTPUT']})",
        file=sys.stderr,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *orig[1:]], env)
    except OSError as e:
        raise _one_line(f"running {sys.executable} again failed: {e}") from None


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
        self.summary = config.getoption("gpuleak_summary")
        self.summary_tests = max(0, config.getoption("gpuleak_summary_tests"))
        # nodeid -> (leaked bytes, peak bytes), from this process or from xdist workers.
        self.results = {}
        # nodeid -> (peak, allocations, allocated, leaked), for the summary.
        self.totals = {}
        # nodeid -> (first, watch, last) snapshot ids of the tests this process ran (summary).
        self.windows = {}
        # nodeid -> [(bytes, state, label)]: the summary's allocators (xdist: from the workers).
        self.allocators = {}

    def _analyze(self, item, first, last):
        try:
            return gpuleak.window(first, last)
        except gpuleak.ToolError as e:
            pytest.fail(f"gpuleak: cannot measure {item.nodeid}: {e}", pytrace=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        leak_limit = _marker_limit(item, LEAKS_MARKER)
        if leak_limit is None:
            leak_limit = self.default_limit
        memory_limit = _marker_limit(item, MEMORY_MARKER)
        allowed = None
        if self.baseline is not None and not self.update:
            allowed = self.baseline.tests.get(item.nodeid, 0)
        # A snapshot record costs microseconds; the analyzer reads it only for a test that
        # turns out to be over a limit.
        first = gpuleak.snapshot(f"pytest begin {item.nodeid}")
        # With a framework's cache on (PyTorch), its tensors are judged, not its segments.
        tensors_before = None
        if first and not (gpuleak.frameworks_uncached() if self.count_pools is None else self.count_pools):
            tensors_before = _frameworks.tensor_sites()
        watch = memory_limit or 0
        if self.summary:
            watch = min(watch, SUMMARY_WATCH_FLOOR) if watch else SUMMARY_WATCH_FLOOR
        windowed = bool(first) and _shim.window_begin(watch)
        result = yield  # the test's own failure propagates: it says more than a leak would
        if not first:
            return result
        stats = _shim.window_stats() if windowed else None
        if stats is not None and stats.live_bytes > 0:
            # Memory held only by garbage (reference cycles) is not a leak of the test's.
            gc.collect()
            stats = _shim.window_stats()
        if stats is None:
            # A shim without windows: the analyzer measures every test, as before.
            return self._measure_with_analyzer(item, first, leak_limit, memory_limit, allowed, result)
        tensor_leaks = []
        if tensors_before is not None:
            gc.collect()
            after = _frameworks.tensor_sites()
            if after is not None:
                tensor_leaks = gpuleak._tensor_leaks(tensors_before, after)
            else:
                tensors_before = None
        tensor_bytes = sum(leak.bytes for leak in tensor_leaks)
        leaked, peak = stats.live_bytes, stats.peak_bytes
        # Upper bounds of the analyzer's numbers: a site grew by at most the bytes allocated
        # in the test and still live; the live bytes rose by at most the test's highest. A
        # tensor kept in a cached segment allocates nothing: its bytes count too.
        leaked = max(leaked, tensor_bytes)
        suspect_leak = (leak_limit is not None and leaked > leak_limit) or (allowed is not None and leaked > allowed)
        suspect_peak = memory_limit is not None and peak > memory_limit
        last = 0
        if suspect_leak or suspect_peak or (self.summary and (stats.live_bytes or stats.watch_snapshot)):
            last = gpuleak.snapshot(f"pytest end {item.nodeid}")
        if self.summary and stats.allocations:
            self.windows[item.nodeid] = (first, stats.watch_snapshot, last)
        problems = []
        if suspect_leak or suspect_peak:
            window = self._analyze(item, first, last)
            leaks = tensor_leaks + window.leaks(self.count_pools, tensors=tensors_before is not None)
            leaked = sum(leak.bytes for leak in leaks)
            problems = self._verdict(item, window, leaks, leak_limit, memory_limit, allowed, stats.watch_snapshot)
            if window.peak_bytes is not None:
                peak = max(0, window.peak_bytes - window.live_bytes_before)
        item.user_properties.append((LEAKED_PROPERTY, leaked))
        item.user_properties.append((PEAK_PROPERTY, peak))
        item.user_properties.append((ALLOCATIONS_PROPERTY, stats.allocations))
        item.user_properties.append((ALLOCATED_PROPERTY, stats.allocated_bytes))
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
        return result

    def _measure_with_analyzer(self, item, first, leak_limit, memory_limit, allowed, result):
        gc.collect()
        last = gpuleak.snapshot(f"pytest end {item.nodeid}")
        window = self._analyze(item, first, last)
        leaks = window.leaks(self.count_pools)
        leaked = sum(leak.bytes for leak in leaks)
        peak = 0 if window.peak_bytes is None else max(0, window.peak_bytes - window.live_bytes_before)
        item.user_properties.append((LEAKED_PROPERTY, leaked))
        item.user_properties.append((PEAK_PROPERTY, peak))
        problems = self._verdict(item, window, leaks, leak_limit, memory_limit, allowed, 0)
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
        return result

    def _verdict(self, item, window, leaks, leak_limit, memory_limit, allowed, watch):
        frame = _test_frame(item)
        leaked = sum(leak.bytes for leak in leaks)
        problems = []
        if leak_limit is not None and leaked > leak_limit:
            problems.append(str(gpuleak.LeakError(leaks, leak_limit, "the test", frame)))
        if memory_limit is not None:
            if window.peak_bytes is None:
                problems.append(
                    f"gpuleak: @{MEMORY_MARKER} needs an analyzer that reports peak_bytes_between "
                    f"(gpuleak {gpuleak_version()} does not)"
                )
            else:
                peak = max(0, window.peak_bytes - window.live_bytes_before)
                if peak > memory_limit:
                    problems.append(
                        f"gpuleak: the test had {peak} bytes ({gpuleak.format_size(peak)}) of GPU "
                        f"memory allocated at once, over its limit of {memory_limit} bytes"
                        + self._peak_holders(item, window, watch, frame)
                    )
        if allowed is not None and leaked > allowed:
            listed = "its baseline" if item.nodeid in self.baseline.tests else "the baseline (absent: 0)"
            problems.append(
                f"gpuleak: the test leaked {leaked} bytes, more than the {allowed} bytes of {listed} "
                f"in {self.baseline.path}:\n" + "\n".join(leak.format(caller=frame) for leak in leaks)
            )
        return problems

    def _peak_holders(self, item, window, watch, frame):
        """The sites that held the test's memory at its highest point (the latest watch
        snapshot, within a fifth of it), with their stacks."""
        held, state = [], "live at the test's highest point"
        if watch:
            held = [h for h in self._analyze(item, window.first, watch).grown if h.bytes > 0]
        if not held:
            held, state = [h for h in window.grown if h.bytes > 0], "still live at the end"
        if not held:
            return "\n(no allocation of the test's is live at its end)"
        total = sum(h.bytes for h in held)
        head = f"\n{total} bytes ({gpuleak.format_size(total)}) {state} at {len(held)} site{'s' if len(held) != 1 else ''}:"
        each = "live then" if state.startswith("live at") else "still live"
        return head + "".join("\n" + h.format(caller=frame, state=each) for h in held[:10])

    def pytest_runtest_logreport(self, report):
        # Runs in the process that reports: the only process, or the xdist controller, which
        # gets the workers' user_properties with their reports.
        if report.when != "call":
            return
        props = dict(report.user_properties)
        if LEAKED_PROPERTY in props:
            leaked, peak = int(props[LEAKED_PROPERTY]), int(props.get(PEAK_PROPERTY, 0))
            self.results[report.nodeid] = (leaked, peak)
            self.totals[report.nodeid] = (
                peak,
                int(props.get(ALLOCATIONS_PROPERTY, 0)),
                int(props.get(ALLOCATED_PROPERTY, 0)),
                leaked,
            )

    def _summary_allocators(self, nodeids):
        """For the tests of `nodeids` this process ran: their largest allocators, from the
        analyzer (at the test's highest point, else at its end)."""
        found = {}
        for nodeid in nodeids:
            first, watch, last = self.windows.get(nodeid, (0, 0, 0))
            if not first:
                continue
            rows = []
            try:
                for end, state in ((watch, "at its highest"), (last, "left at the end")):
                    if end:
                        rows = [(g.bytes, state, _label(g)) for g in gpuleak.window(first, end).grown if g.bytes > 0]
                        if rows:
                            break
            except gpuleak.ToolError as e:
                rows = [(0, "error", str(e))]
            found[nodeid] = rows[:5]
        return found

    def _top_tests(self, among=None):
        """The tests the summary shows: the most memory at once, then the most allocated in
        all (the same order in xdist workers, for their own tests, as in the controller)."""
        totals = self.totals.items() if among is None else ((k, v) for k, v in self.totals.items() if k in among)
        ranked = sorted(totals, key=lambda kv: (-kv[1][0], -kv[1][2], kv[0]))
        return [k for k, v in ranked if v[1] > 0][: self.summary_tests]

    def pytest_sessionfinish(self, session):
        if _is_xdist_worker(self.config):
            if self.summary:
                # The worker's own tests, ranked there: the controller merges them.
                found = self._summary_allocators(self._top_tests(among=self.windows))
                self.config.workeroutput["gpuleak_allocators"] = json.dumps(found)
            return
        if self.summary:
            self.allocators.update(self._summary_allocators(self._top_tests()))
        if not self.update or self.baseline is None:
            return
        self.baseline.save(self.results)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        # xdist controller: a worker's summary allocators.
        doc = getattr(node, "workeroutput", {}).get("gpuleak_allocators")
        if doc:
            self.allocators.update({k: [tuple(r) for r in v] for k, v in json.loads(doc).items()})

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
        if self.summary:
            self._write_summary(tr)
        if self.update and self.baseline is not None:
            tr.write_line(f"gpuleak: baseline written to {self.baseline.path}")

    def _write_summary(self, tr):
        top = self._top_tests()
        tr.write_sep("-", "gpuleak summary: the tests with the most GPU memory at once")
        if not top:
            tr.write_line("gpuleak: no test allocated GPU memory")
        for nodeid in top:
            peak, allocations, allocated, leaked = self.totals[nodeid]
            tr.write_line(f"{nodeid}:")
            tr.write_line(
                f"  highest: {gpuleak.format_size(peak)}; {allocations} allocation"
                f"{'s' if allocations != 1 else ''} of {gpuleak.format_size(allocated)} in all; "
                f"left allocated: {gpuleak.format_size(leaked)}"
            )
            rows = self.allocators.get(nodeid) or []
            if rows:
                tr.write_line("  largest allocators:")
            for size, state, label in rows:
                tr.write_line(f"    {gpuleak.format_size(size):>10} {state}: {label}")


def _label(leak):
    """One line for an allocation site: its innermost Python frame (else its innermost frame),
    and the Python frame that called it."""
    python = [f for f in leak.stack if f.file and f.file.endswith(".py")]
    frames = python[:2] if python else leak.stack[:1]
    return " <- ".join(str(f) for f in frames) if frames else f"stack {leak.stack_id}"


def gpuleak_version():
    try:
        from importlib.metadata import version

        return version("gpuleak")
    except Exception:  # noqa: BLE001 - only for a message
        return "?"
