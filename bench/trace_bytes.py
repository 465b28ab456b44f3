#!/usr/bin/env python3
"""trace_bytes.py TRACE [GPULEAK]: where the bytes of a gpuleak trace go.

Walks the file the way the format crate lays it out (format/src/block.rs, record.rs): a
4096-byte header, then 65536-byte blocks, each a 24-byte header followed by records
`kind u8 | len LEB128 | payload[len]` up to the first zero kind byte. Prints one line of
key=value pairs:

  file_bytes      size of the file on disk
  blocks          blocks started (magic "GBLK")
  records         records found by the walk
  used_bytes      block headers + every record: the bytes the trace actually needed
  churn_events    Alloc + Free records
  churn_bytes     bytes of those records alone: the marginal cost of steady churn
  dump_records    records printed by `gpuleak dump` (when GPULEAK is given), a cross-check
  stack_frames    frames of the first Stack record in the dump (the allocation stack)
  zstd_bytes      the file compressed with `zstd -3` (when zstd is installed), only to compare
                  with heaptrack, whose trace is compressed; gpuleak writes it uncompressed

The walk reads only kinds and lengths, never the fields, so it measures the encoding without
re-implementing it.
"""
import json
import shutil
import subprocess
import sys

HEADER_SIZE = 4096
BLOCK_SIZE = 65536
BLOCK_HEADER_SIZE = 24
BLOCK_MAGIC = b"GBLK"
ALLOC, FREE = 16, 17


def varint(buf, pos):
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def walk(data):
    stats = {"blocks": 0, "records": 0, "used_bytes": 0, "churn_events": 0, "churn_bytes": 0}
    for start in range(HEADER_SIZE, len(data), BLOCK_SIZE):
        block = data[start:start + BLOCK_SIZE]
        if block[0:4] != BLOCK_MAGIC:
            continue
        stats["blocks"] += 1
        pos = BLOCK_HEADER_SIZE
        while pos < len(block) and block[pos] != 0:
            kind = block[pos]
            length, body = varint(block, pos + 1)
            end = body + length
            stats["records"] += 1
            if kind in (ALLOC, FREE):
                stats["churn_events"] += 1
                stats["churn_bytes"] += end - pos
            pos = end
        stats["used_bytes"] += pos
    return stats


def from_dump(gpuleak, path):
    records = 0
    frames = None
    with subprocess.Popen([gpuleak, "dump", path], stdout=subprocess.PIPE, text=True) as p:
        for line in p.stdout:
            records += 1
            if frames is None and '"type":"Stack"' in line:
                frames = len(json.loads(line)["frames"])
    if p.returncode != 0:
        sys.exit(f"trace_bytes: gpuleak dump {path} failed with status {p.returncode}")
    return {"dump_records": records, "stack_frames": frames if frames is not None else 0}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: trace_bytes.py TRACE [GPULEAK]")
    path = sys.argv[1]
    with open(path, "rb") as f:
        data = f.read()
    stats = {"file_bytes": len(data)}
    stats.update(walk(data))
    if len(sys.argv) == 3:
        stats.update(from_dump(sys.argv[2], path))
    if shutil.which("zstd"):
        z = subprocess.run(["zstd", "-q", "-3", "-c", path], stdout=subprocess.PIPE, check=True)
        stats["zstd_bytes"] = len(z.stdout)
    print(" ".join(f"{k}={v}" for k, v in stats.items()))


if __name__ == "__main__":
    main()
