#!/usr/bin/env python3
"""bench/pytest_plugin.py: what `pytest --gpuleak` costs per test (docs/performance.md).

Generates a suite of TESTS tests (each allocates and frees a 64 KiB buffer through NVIDIA's
cuda-bindings, on the simulated driver) and times whole pytest runs of it, interleaved over
ROUNDS rounds (medians reported):

  plain       python -m pytest (the plugin installed, not asked for; no shim)
  gpuleak     python -m pytest --gpuleak (runs itself again with libgpuleak.so preloaded)
  run         gpuleak run -- python -m pytest --gpuleak
  old         OLD_PYTHON -m pytest --gpuleak under gpuleak run, when OLD_PYTHON names the
              interpreter of another install of the package (e.g. an older build's
              target/pkgenv/bin/python)

and prints the cost per test over plain pytest: (median(variant) - median(plain)) / TESTS.

Settings (environment): TESTS (300), ROUNDS (5), PYTHON (target/pkgenv/bin/python, made by
scripts/build-wheel and scripts/wheel-test-env), OLD_PYTHON (unset). The simulated driver is
built into target/bench/lib if it is not there. Never run in CI; nothing here is a timed test.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = int(os.environ.get("TESTS", "300"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
PYTHON = os.environ.get("PYTHON", os.path.join(ROOT, "target/pkgenv/bin/python"))
OLD_PYTHON = os.environ.get("OLD_PYTHON")
GPULEAK = os.path.join(ROOT, "target/release/gpuleak")
LIB = os.path.join(ROOT, "target/bench/lib")

SUITE_HEAD = """from cuda.bindings import driver as cu


def ok(result):
    err, *values = result
    assert err == cu.CUresult.CUDA_SUCCESS, err
    return values[0] if values else None


ok(cu.cuInit(0))
CTX = ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))
"""

TEST = """

def test_{i:04}():
    ok(cu.cuCtxSetCurrent(CTX))
    ok(cu.cuMemFree(ok(cu.cuMemAlloc(64 << 10))))
"""


def simulated_driver():
    if not os.path.exists(os.path.join(LIB, "libcuda.so.1")):
        os.makedirs(LIB, exist_ok=True)
        driver = os.path.join(ROOT, "simcuda/driver")
        sources = sorted(os.path.join(driver, f) for f in os.listdir(driver) if f.endswith(".c"))
        subprocess.run(
            ["gcc", "-O2", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden", "-Wl,-Bsymbolic-functions",
             "-Wl,-soname,libcuda.so.1", "-I" + os.path.join(ROOT, "simcuda/include"), "-I" + driver,
             "-o", os.path.join(LIB, "libcuda.so.1"), *sources],
            check=True,
        )
    return LIB


def environment():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPULEAK_", "PYTEST_", "SIMCUDA_"))}
    env.pop("LD_PRELOAD", None)
    env["LD_LIBRARY_PATH"] = simulated_driver()
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def timed(cmd, cwd, env, want):
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if f"{TESTS} passed" not in out.stdout or out.returncode != want:
        sys.exit(f"bench/pytest_plugin.py: {' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return elapsed


def main():
    for path in (PYTHON, GPULEAK):
        if not os.access(path, os.X_OK):
            sys.exit(f"bench/pytest_plugin.py: {path} is missing: cargo build --release, scripts/build-wheel, "
                     "scripts/wheel-test-env")
    env = environment()
    work = tempfile.mkdtemp(prefix="gpuleak-bench-pytest-")
    try:
        suite = os.path.join(work, "test_suite.py")
        with open(suite, "w", encoding="utf-8") as f:
            f.write(SUITE_HEAD + "".join(TEST.format(i=i) for i in range(TESTS)))
        pytest = ["-m", "pytest", "-q", "-p", "no:cacheprovider", suite]
        variants = {
            "plain": [PYTHON, *pytest],
            "gpuleak": [PYTHON, *pytest, "--gpuleak"],
            "run": [GPULEAK, "run", "--", PYTHON, *pytest, "--gpuleak"],
        }
        if OLD_PYTHON:
            variants["old"] = [GPULEAK, "run", "--", OLD_PYTHON, *pytest, "--gpuleak"]
        times = {name: [] for name in variants}
        for r in range(ROUNDS):
            for name, cmd in variants.items():
                times[name].append(timed(cmd, work, env, 0))
                for f in os.listdir(work):
                    if f.endswith(".trace"):
                        os.unlink(os.path.join(work, f))
            print(f"round {r + 1}/{ROUNDS}: " + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items()),
                  file=sys.stderr)
        plain = statistics.median(times["plain"])
        print(f"{TESTS} tests, {ROUNDS} rounds, medians of the whole run (wall clock)")
        print(f"{'variant':<10} {'run (s)':>9} {'per test over plain (ms)':>26}")
        for name, t in times.items():
            m = statistics.median(t)
            over = "" if name == "plain" else f"{(m - plain) / TESTS * 1000:.2f}"
            print(f"{name:<10} {m:>9.2f} {over:>26}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
