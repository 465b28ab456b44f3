#!/usr/bin/env python3
"""bench/framework_startup.py: what the sitecustomize of `gpuleak run` costs a Python program
that never imports a framework (docs/performance.md).

Times `python -c pass` ROUNDS times in each of two ways, interleaved (medians reported):

  plain         no sitecustomize of gpuleak's
  sitecustomize analyzer/src/run_sitecustomize.py first on PYTHONPATH, as `gpuleak run` puts
                it (GPULEAK_FRAMEWORKS unset: the torch finder is installed)

Neither run preloads the shim: this is the interpreter's start-up alone, which is what the
sitecustomize adds to. Settings (environment): ROUNDS (200), PYTHON (target/pkgenv/bin/python).
Never run in CI; nothing here is a timed test.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    rounds = int(os.environ.get("ROUNDS", "200"))
    python = os.environ.get("PYTHON") or os.path.join(ROOT, "target/pkgenv/bin/python")
    site = tempfile.mkdtemp(prefix="gpuleak-startup-")
    try:
        shutil.copy(os.path.join(ROOT, "analyzer/src/run_sitecustomize.py"), os.path.join(site, "sitecustomize.py"))
        base = {k: v for k, v in os.environ.items() if not k.startswith(("GPULEAK_", "PYTHON"))}
        variants = {"plain": dict(base), "sitecustomize": dict(base, PYTHONPATH=site)}
        times = {name: [] for name in variants}
        for _ in range(rounds):
            for name, env in variants.items():
                t = time.perf_counter()
                subprocess.run([python, "-c", "pass"], env=env, check=True)
                times[name].append(time.perf_counter() - t)
        plain = statistics.median(times["plain"])
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"{name:14} median {m * 1e3:6.2f} ms  (+{(m - plain) * 1e3:5.2f} ms over plain)")
    finally:
        shutil.rmtree(site)
    return 0


if __name__ == "__main__":
    sys.exit(main())
