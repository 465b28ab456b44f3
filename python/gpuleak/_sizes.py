"""Byte sizes as `gpuleak check` reads them (analyzer/src/check/size.rs): digits with an
optional fraction and suffix, case insensitive: K/KB = 1000, M/MB = 1000², G/GB = 1000³,
KiB = 1024, MiB = 1024², GiB = 1024³, B = 1; spaces allowed ("1 MB")."""

import re

_MULTIPLIERS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
}
_SIZE = re.compile(r"^\s*(\d*)(?:\.(\d*))?\s*([A-Za-z]*)\s*$")


def parse_size(size):
    """Bytes from an int or a size string ("1 MB", "64KiB", "1.5GiB"); a fraction is rounded
    down to whole bytes. Raises ValueError on anything else."""
    if isinstance(size, bool):
        raise ValueError(f"invalid size {size!r}")
    if isinstance(size, int):
        if size < 0:
            raise ValueError(f"invalid size {size!r}: negative")
        return size
    if not isinstance(size, str):
        raise ValueError(f"invalid size {size!r}: expected bytes (int) or a string like '1 MB'")
    m = _SIZE.match(size)
    suffix = m.group(3).lower() if m else None
    if not m or suffix not in _MULTIPLIERS or not (m.group(1) or m.group(2)):
        raise ValueError(
            f"invalid size {size!r}: expected a number of bytes with an optional K, M, G "
            "(powers of 1000) or KiB, MiB, GiB (powers of 1024) suffix"
        )
    multiplier = _MULTIPLIERS[suffix]
    whole = int(m.group(1) or 0) * multiplier
    fraction = m.group(2) or ""
    if fraction:
        whole += int(fraction) * multiplier // 10 ** len(fraction)
    return whole


def format_size(n):
    """Human-readable bytes, binary units (as `gpuleak run` prints them)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # not reached
