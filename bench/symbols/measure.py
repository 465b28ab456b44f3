#!/usr/bin/env python3
"""bench/symbols/measure.py LIBRARY TRACE: the measuring half of bench/symbols/run (see there).

Runs `gpuleak report TRACE` ROUNDS times per variant, interleaved, each time "cold" (the
library's pages dropped from the page cache first) and "warm" (right after), and prints medians
of wall time, peak RSS, major page faults and bytes read from disk. Variants: BASELINE's
binary when set; gpuleak with GPULEAK_SYMBOL_CACHE=0; gpuleak with a cache directory emptied
before each cold run (a first run; the warm run after it is served by the cache). Each also
reports with the stripped copy of the library in the sysroot that bench/symbols/run makes
("symbol table only", warm), and runs `gpuleak run PROGRAM` (warm).
"""

import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPULEAK = os.path.join(ROOT, "target", "release", "gpuleak")
SHIM = os.path.join(ROOT, "target", "release", "libgpuleak.so")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
BASELINE = os.environ.get("BASELINE", "")
ARGS = os.environ.get("GPULEAK_ARGS", "").split()


def drop(path):
    """Drops the file's clean pages from the page cache (no root needed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run(binary, trace, env, program=None, extra=()):
    """One report (or, with `program`, one `gpuleak run PROGRAM`, whose trace goes to a scratch
    directory): (wall s, peak RSS MiB, major faults, MiB read from disk)."""
    cmd = [binary, "report", *ARGS, *extra, trace]
    if program:
        out = os.path.join(os.path.dirname(trace), "run-traces")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        cmd = [binary, "run", "--output", out + "/", "--", program]
        env = dict(env, GPULEAK_LIB=SHIM, LD_LIBRARY_PATH=os.path.dirname(program) + "/lib")
    with open(os.devnull, "wb") as null:
        start = time.monotonic()
        child = subprocess.Popen(cmd, stdout=null, stderr=null, env=dict(os.environ, **env))
        _, code, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - start
    if code != 0:
        sys.exit(f"bench/symbols: {' '.join(cmd)} failed with status {code}")
    return wall, usage.ru_maxrss / 1024, usage.ru_majflt, usage.ru_inblock * 512 / 2**20


def main():
    library, trace = sys.argv[1], sys.argv[2]
    cache = os.path.join(os.path.dirname(trace), "symbol-cache")
    variants = [
        ("gpuleak, no cache", GPULEAK, {"GPULEAK_SYMBOL_CACHE": "0"}),
        ("gpuleak, cache", GPULEAK, {"GPULEAK_SYMBOL_CACHE": cache}),
    ]
    if BASELINE:
        variants.insert(0, ("baseline", BASELINE, {"GPULEAK_SYMBOL_CACHE": "0"}))
    results = {}
    for _ in range(ROUNDS):
        for label, binary, env in variants:
            shutil.rmtree(cache, ignore_errors=True)
            drop(library)
            results.setdefault((label, "cold"), []).append(run(binary, trace, env))
            results.setdefault((label, "warm"), []).append(run(binary, trace, env))
            # The library without DWARF (`strip --strip-debug`, as PyTorch's wheels ship it),
            # found first below the sysroot: names from its symbol table only.
            sysroot = os.path.join(os.path.dirname(trace), "sysroot")
            if os.path.isdir(sysroot):
                row = run(binary, trace, env, extra=("--sysroot", sysroot))
                results.setdefault((label + ": symbol table only", "warm"), []).append(row)
            # `gpuleak run PROGRAM`: the program's run and the closing summary line.
            program = os.path.join(os.path.dirname(trace), "program")
            results.setdefault((label + ": run", "warm"), []).append(run(binary, trace, env, program))
    size = os.path.getsize(library)
    print(f"\n`gpuleak report` of a trace through {os.path.basename(library)} ({size / 2**20:.0f} MiB), "
          f"medians of {ROUNDS} runs, {os.cpu_count()} CPUs\n")
    print("| variant | page cache | wall | peak RSS | major faults | read from disk |")
    print("|---|---|---:|---:|---:|---:|")
    for (label, cache), rows in results.items():
        wall, rss, majflt, read = (statistics.median(col) for col in zip(*rows))
        print(f"| {label} | {cache} | {wall * 1000:.0f} ms | {rss:.0f} MiB | {majflt:.0f} | {read:.1f} MiB |")


if __name__ == "__main__":
    main()
