#!/usr/bin/env python3
"""tree_cpu.py WORKLOAD PAIRS CMD...: the CPU time, over every process it starts, that one pair of
WORKLOAD costs under CMD.

Runs CMD twice, with its argument @PAIRS@ replaced by PAIRS and by 0, and prints one line,
`WORKLOAD op=pair tree_ns_per_pair=X`: the difference of the two runs' CPU time (user + system,
summed over the command and every descendant it waited for, from getrusage(RUSAGE_CHILDREN)),
divided by PAIRS. Start-up, warm-up and exit cost the same in both runs and cancel.

This is the clock that sees the work a profiler hands to a helper process: heaptrack's traced
program only writes raw events into a pipe, and heaptrack_interpret (which heaptrack's script
waits for) does the rest. The traced thread's own CPU clock, which bench/run's verdicts use,
misses that part; this one does not. gpuleak does all its work on the calling thread, so for it
the two agree.
"""
import resource
import subprocess
import sys


def cpu_ns():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1e9


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    workload, pairs, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    spent = {}
    for n in (pairs, 0):
        before = cpu_ns()
        out = subprocess.run([a.replace("@PAIRS@", str(n)) for a in cmd], capture_output=True, text=True)
        spent[n] = cpu_ns() - before
        if out.returncode != 0:
            sys.stderr.write(out.stdout + out.stderr)
            sys.exit(f"tree_cpu.py: {' '.join(cmd)} with {n} pairs exited with {out.returncode}")
    print(f"{workload} op=pair tree_ns_per_pair={(spent[pairs] - spent[0]) / pairs:.1f}")


if __name__ == "__main__":
    main()
