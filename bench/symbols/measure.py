#!/usr/bin/env python3
"""bench/symbols/measure.py LIBRARY TRACE: the measuring half of bench/symbols/run (see there).

Runs `gpuleak report TRACE` (and BASELINE's, interleaved) ROUNDS times, each time "cold" (the
library's pages dropped from the page cache first) and "warm" (right after), and prints medians
of wall time, peak RSS, major page faults and bytes read from disk.
"""

import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPULEAK = os.path.join(ROOT, "target", "release", "gpuleak")
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


def run(binary, trace):
    """One report: (wall s, peak RSS MiB, major faults, MiB read from disk)."""
    cmd = [binary, "report", *ARGS, trace]
    with open(os.devnull, "wb") as null:
        start = time.monotonic()
        child = subprocess.Popen(cmd, stdout=null)
        _, code, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - start
    if code != 0:
        sys.exit(f"bench/symbols: {' '.join(cmd)} failed with status {code}")
    return wall, usage.ru_maxrss / 1024, usage.ru_majflt, usage.ru_inblock * 512 / 2**20


def main():
    library, trace = sys.argv[1], sys.argv[2]
    binaries = [("gpuleak", GPULEAK)]
    if BASELINE:
        binaries.insert(0, ("baseline", BASELINE))
    results = {}
    for _ in range(ROUNDS):
        for label, binary in binaries:
            drop(library)
            results.setdefault((label, "cold"), []).append(run(binary, trace))
            results.setdefault((label, "warm"), []).append(run(binary, trace))
    size = os.path.getsize(library)
    print(f"\n`gpuleak report` of a trace through {os.path.basename(library)} ({size / 2**20:.0f} MiB), "
          f"medians of {ROUNDS} runs, {os.cpu_count()} CPUs\n")
    print("| binary | page cache | wall | peak RSS | major faults | read from disk |")
    print("|---|---|---:|---:|---:|---:|")
    for (label, cache), rows in results.items():
        wall, rss, majflt, read = (statistics.median(col) for col in zip(*rows))
        print(f"| {label} | {cache} | {wall * 1000:.0f} ms | {rss:.0f} MiB | {majflt:.0f} | {read:.1f} MiB |")


if __name__ == "__main__":
    main()
