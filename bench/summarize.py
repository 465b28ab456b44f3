#!/usr/bin/env python3
"""summarize.py RESULTS BYTES FRAMES: the tables that bench/run prints.

RESULTS holds one line per measurement: round, frames, workload, variant, op, clock (wall or
cpu), ns (per pair or per call, as the workload printed it). BYTES holds, per gpuleak variant,
the key=value line of trace_bytes.py for its round-1 trace (and heaptrack's file size).

Every number is a median over the rounds; overhead = median(traced) - median(untraced) of the
same workload at the same depth. Cells read "CPU / WALL": the calling thread's CPU time, then
the wall clock. Verdicts use the CPU time: gpuleak does all its work on the calling thread, and
on this shared 2-core machine the wall clock also counts whatever other processes ran
meanwhile (its spread over rounds is shown). The wall clock is kept because it is what a
program feels and because heaptrack hands part of its work to another process
(heaptrack_interpret), which the CPU clock of the traced thread does not see. A third clock,
"tree" (bench/tree_cpu.py), is the CPU time summed over every process a run started, per pair:
it counts heaptrack_interpret's share, so it is the fair measure of what each profiler costs
the machine.
"""
import statistics
import sys
from collections import defaultdict

PAIR_TARGET_NS = 300
CALL_TARGET_NS = 60
BYTES_TARGET = 16
HEADLINE_FRAMES = "25"
NAMES = {"nostack": "gpuleak depth 0", "disabled": "GPULEAK_DISABLE=1"}


def load(results_path, bytes_path):
    runs = defaultdict(list)  # (frames, workload, variant, op, clock) -> [ns]
    with open(results_path) as f:
        for line in f:
            _, frames, workload, variant, op, clock, ns = line.rstrip("\n").split("\t")
            runs[(frames, workload, variant, op, clock)].append(float(ns))
    sizes = {}
    with open(bytes_path) as f:
        for line in f:
            frames, workload, variant, kvs = line.rstrip("\n").split("\t")
            sizes[(frames, workload, variant)] = {k: int(v) for k, v in (kv.split("=") for kv in kvs.split())}
    return runs, sizes


class Stats:
    def __init__(self, runs):
        self.runs = runs

    def med(self, f, w, v, op, clock="wall"):
        xs = self.runs.get((f, w, v, op, clock))
        return statistics.median(xs) if xs else None

    def spread(self, f, w, v, op, clock="wall"):
        xs = self.runs.get((f, w, v, op, clock))
        return max(xs) - min(xs) if xs else None

    def over(self, f, w, v, op, clock="wall", base="base"):
        t, b = self.med(f, w, v, op, clock), self.med(f, w, base, op, clock)
        return None if t is None or b is None else t - b


def num(x, digits=0):
    return "-" if x is None else f"{x:.{digits}f}"


def both(wall, cpu, digits=0):
    return f"{num(cpu, digits)} / {num(wall, digits)}"


def ratio(a, b):
    """a / b, or "-" when either is missing."""
    return "-" if a is None or not b else f"{a / b:.2f}"


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()


def main():
    runs, sizes = load(sys.argv[1], sys.argv[2])
    s = Stats(runs)
    frames_list = sys.argv[3].split()
    present = {k[2] for k in runs if k[1] == "alloc_churn"}
    order = [v for v in ("dwarf", "libunwind", "fp", "gcc", "nostack", "disabled") if v in present]

    def recorded(f, v="dwarf"):
        z = sizes.get((f, "alloc_churn", v))
        return z.get("stack_frames") if z else None

    stackful = [v for v in order if v not in ("nostack", "disabled")]
    print("\n## 1. cuMemAlloc_v2 + cuMemFree_v2 pair (4 KiB): overhead in ns per pair, CPU / wall\n")
    print("overhead = median traced - median untraced; frames recorded = length of the allocation's stack"
          " in the round-1 trace of each unwinder (0: no stack was recorded at all)\n")
    header = ["frames asked", "frames recorded (" + ", ".join(stackful) + ")", "untraced pair"]
    header += [NAMES.get(v, f"gpuleak {v}") for v in order]
    header += ["untraced malloc pair", "heaptrack", "gpuleak dwarf / heaptrack"]
    rows = []
    for f in frames_list:
        row = [f, ", ".join(num(recorded(f, v)) for v in stackful),
               both(s.med(f, "alloc_churn", "base", "pair"), s.med(f, "alloc_churn", "base", "pair", "cpu"))]
        row += [both(s.over(f, "alloc_churn", v, "pair"), s.over(f, "alloc_churn", v, "pair", "cpu")) for v in order]
        row += [both(s.med(f, "malloc_churn", "base", "pair"), s.med(f, "malloc_churn", "base", "pair", "cpu")),
                both(s.over(f, "malloc_churn", "heaptrack", "pair"), s.over(f, "malloc_churn", "heaptrack", "pair", "cpu")),
                f"{ratio(s.over(f, 'alloc_churn', 'dwarf', 'pair', 'cpu'), s.over(f, 'malloc_churn', 'heaptrack', 'pair', 'cpu'))}"
                f" / {ratio(s.over(f, 'alloc_churn', 'dwarf', 'pair'), s.over(f, 'malloc_churn', 'heaptrack', 'pair'))}"]
        rows.append(row)
    table(header, rows)

    if any(k[4] == "tree" for k in runs):
        print("CPU time of every process of the run (tree clock, bench/tree_cpu.py), overhead in ns per pair:"
              " heaptrack's includes heaptrack_interpret, which digests the events its program writes into a pipe\n")
        rows = []
        for f in frames_list:
            g, h = s.over(f, "alloc_churn", "dwarf", "pair", "tree"), s.over(f, "malloc_churn", "heaptrack", "pair", "tree")
            rows.append([f, num(s.med(f, "alloc_churn", "base", "pair", "tree")), num(g),
                         num(s.spread(f, "alloc_churn", "dwarf", "pair", "tree")),
                         num(s.med(f, "malloc_churn", "base", "pair", "tree")), num(h),
                         num(s.spread(f, "malloc_churn", "heaptrack", "pair", "tree")), ratio(g, h)])
        table(["frames", "untraced pair", "gpuleak dwarf", "spread", "untraced malloc pair", "heaptrack", "spread",
               "gpuleak dwarf / heaptrack"], rows)

    if s.med("25", "alloc_churn", "dwarf-256", "pair") is not None:
        o = both(s.over("25", "alloc_churn", "dwarf-256", "pair", base="base-256"),
                 s.over("25", "alloc_churn", "dwarf-256", "pair", "cpu", base="base-256"))
        b = both(s.med("25", "alloc_churn", "base-256", "pair"), s.med("25", "alloc_churn", "base-256", "pair", "cpu"))
        print(f"Same pair at 256 bytes (no madvise in the simulator's free), 25 frames: untraced {b} ns,"
              f" gpuleak dwarf overhead {o} ns.\n")
    for n, why in (("2", "each site's last capture is replayed from its own memo"),
                   ("8", "each site's last capture is replayed from its own memo"),
                   ("32", "as many sites as the unwinder's 32 memos: each is replayed"),
                   ("64", "twice as many sites as memos: about a fifth of the captures replay, the rest walk")):
        if s.med("25", "alloc_churn", f"dwarf-{n}sites", "pair") is not None:
            o = both(s.over("25", "alloc_churn", f"dwarf-{n}sites", "pair", base=f"base-{n}sites"),
                     s.over("25", "alloc_churn", f"dwarf-{n}sites", "pair", "cpu", base=f"base-{n}sites"))
            print(f"Same pair from {n} call sites in turn (no stack repeats the previous one; {why}),"
                  f" 25 frames: gpuleak dwarf overhead {o} ns.\n")

    print("Raw medians in ns per pair, CPU / wall, and the spread (max - min) over the rounds of each clock:\n")
    rows = []
    for f in frames_list:
        for w, vs in (("alloc_churn", ["base"] + order + ["base-256", "dwarf-256"]), ("malloc_churn", ["base", "heaptrack"])):
            for v in vs:
                if (f, w, v, "pair", "wall") in runs:
                    rows.append([f, w, v, both(s.med(f, w, v, "pair"), s.med(f, w, v, "pair", "cpu"), 1),
                                 both(s.spread(f, w, v, "pair"), s.spread(f, w, v, "pair", "cpu"), 1),
                                 str(len(runs[(f, w, v, "pair", "wall")]))])
    table(["frames", "workload", "variant", "median", "spread", "rounds"], rows)

    print("## 2. Streams and events: ns per call, CPU / wall\n")
    ops = ["stream_create", "stream_destroy", "event_create", "event_destroy", "record_sync", "copy_async", "launch",
           "graph_launch", "instantiate"]
    rows = []
    for f in frames_list:
        for op in ops:
            if (f, "object_churn", "dwarf", op, "wall") not in runs:
                continue
            rows.append([f, op,
                         both(s.med(f, "object_churn", "base", op), s.med(f, "object_churn", "base", op, "cpu"), 1),
                         both(s.over(f, "object_churn", "dwarf", op), s.over(f, "object_churn", "dwarf", op, "cpu"), 1),
                         both(s.over(f, "object_churn", "objstacks", op), s.over(f, "object_churn", "objstacks", op, "cpu"), 1),
                         both(s.over(f, "object_churn", "nostack", op), s.over(f, "object_churn", "nostack", op, "cpu"), 1),
                         both(s.over(f, "object_churn", "live", op), s.over(f, "object_churn", "live", op, "cpu"), 1),
                         both(s.spread(f, "object_churn", "dwarf", op), s.spread(f, "object_churn", "dwarf", op, "cpu"), 1)])
    table(["frames", "call", "untraced", "overhead, gpuleak dwarf (defaults)",
           "overhead, GPULEAK_OBJECT_STACKS=1 (creation stacks)", "overhead, depth 0",
           "overhead, GPULEAK_LIVE=1 (live gauges)", "spread (dwarf)"], rows)

    print("## 3. Trace bytes per record (round-1 traces)\n")
    rows = []
    for (f, w, v), z in sorted(sizes.items(), key=lambda kv: (frames_list.index(kv[0][0]), kv[0][1], kv[0][2])):
        if w == "malloc_churn":
            rows.append([f, w, v, f"~{z['events']} events", "-", "-", "-", f"{z['file_bytes'] / z['events']:.3f}"])
            continue
        n = z["records"]
        if z.get("dump_records") not in (None, n):
            print(f"WARNING: {w}/{v} at {f}: the walk found {n} records, gpuleak dump {z['dump_records']}\n")
        churn = f"{z['churn_bytes'] / z['churn_events']:.2f}" if z["churn_events"] else "-"
        zs = f"{z['zstd_bytes'] / n:.3f}" if "zstd_bytes" in z else "-"
        rows.append([f, w, v, str(z.get("dump_records", n)), f"{z['file_bytes'] / n:.2f}",
                     f"{z['used_bytes'] / n:.2f}", churn, zs])
    table(["frames", "workload", "variant", "records (gpuleak dump)", "file bytes / record",
           "used bytes / record", "Alloc+Free bytes / record", "zstd -3 of the file, bytes / record"], rows)

    f = HEADLINE_FRAMES if HEADLINE_FRAMES in frames_list else frames_list[0]
    print(f"## 4. Targets at {f} frames (verdict on the CPU clock; numbers are CPU / wall)\n")

    def verdict(cpu, limit):
        return "HOLDS" if cpu is not None and cpu <= limit else "MISSED"

    for v in stackful:
        o = s.over(f, "alloc_churn", v, "pair", "cpu")
        r = recorded(f, v)
        if r is not None and r != int(f):
            judged = f"NOT A STACK CAPTURE: it recorded {r} of {f} frames, so this is not the cost the target is about"
        else:
            judged = verdict(o, PAIR_TARGET_NS)
        print(f"- alloc+free pair overhead <= {PAIR_TARGET_NS} ns, gpuleak {v}: "
              f"{both(s.over(f, 'alloc_churn', v, 'pair'), o)} ns: {judged}")
    g, h = s.over(f, "alloc_churn", "dwarf", "pair"), s.over(f, "malloc_churn", "heaptrack", "pair")
    gc, hc = s.over(f, "alloc_churn", "dwarf", "pair", "cpu"), s.over(f, "malloc_churn", "heaptrack", "pair", "cpu")
    print(f"- gpuleak dwarf / heaptrack, overhead per pair in the same run: CPU {num(gc)} / {num(hc)} = {ratio(gc, hc)};"
          f" wall {num(g)} / {num(h)} = {ratio(g, h)}")
    gt, ht = s.over(f, "alloc_churn", "dwarf", "pair", "tree"), s.over(f, "malloc_churn", "heaptrack", "pair", "tree")
    if gt is not None:
        at = ", ".join(f"{x}: {ratio(s.over(x, 'alloc_churn', 'dwarf', 'pair', 'tree'), s.over(x, 'malloc_churn', 'heaptrack', 'pair', 'tree'))}"
                       for x in frames_list)
        print(f"- the same on the CPU time of every process (heaptrack_interpret included): {num(gt)} / {num(ht)} ="
              f" {ratio(gt, ht)} (by depth, {at})")
    for op in ops:
        o = s.over(f, "object_churn", "dwarf", op, "cpu")
        if op == "instantiate":
            # Lists a graph's 32 memory nodes (a driver getter each) and records them with a
            # stack: no per-call target, measured so that its cost is known.
            print(f"- instantiate (16 allocation and 16 free nodes listed), no target: "
                  f"{both(s.over(f, 'object_churn', 'dwarf', op), o, 1)} ns per call; with GPULEAK_LIVE=1 "
                  f"{both(s.over(f, 'object_churn', 'live', op), s.over(f, 'object_churn', 'live', op, 'cpu'), 1)} ns")
            continue
        line = (f"- {op} overhead <= {CALL_TARGET_NS} ns per call: "
                f"{both(s.over(f, 'object_churn', 'dwarf', op), o, 1)} ns: {verdict(o, CALL_TARGET_NS)}")
        if op == "graph_launch":
            n = s.over(f, "object_churn", "live", op, "cpu")
            line += (f"; with the live gauges on (GPULEAK_LIVE=1): "
                     f"{both(s.over(f, 'object_churn', 'live', op), n, 1)} ns")
        if op.endswith("_create"):
            n = s.over(f, "object_churn", "objstacks", op, "cpu")
            line += (f" (no stack, the default); with its creation stack (GPULEAK_OBJECT_STACKS=1): "
                     f"{both(s.over(f, 'object_churn', 'objstacks', op), n, 1)} ns")
        print(line)
    z = sizes.get((f, "alloc_churn", "dwarf"))
    if z:
        used = z["used_bytes"] / z["records"]
        print(f"- trace <= {BYTES_TARGET} bytes per event on churn: {used:.2f} bytes used per record, "
              f"{z['file_bytes'] / z['records']:.2f} counting the whole file: {verdict(used, BYTES_TARGET)}")


if __name__ == "__main__":
    main()
