"""Byte sizes: the one rule of every gpuleak size (GPULEAK_LIMIT, `gpuleak check
--max-leaked-bytes`, `gpuleak.check()`, the pytest markers), as format/src/size.rs reads them;
both are tested on the table in tests/data/sizes.txt.

The rule follows pytest-memray's `limit_memory` marker: a decimal number ("1", "1.5", ".5"),
optional spaces, and an optional unit in any case: B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB,
P/PB/PiB. Every unit is a power of 1024: "1MB", "1 MiB" and "1M" are all 1048576 bytes. No unit
means bytes; a fraction is rounded down to a whole byte."""

ACCEPTED = (
    "a number of bytes with an optional unit B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB "
    "or P/PB/PiB (any case, all powers of 1024), such as 4096, 64KB, 1.5 MiB or 8G"
)
_MAX = (1 << 64) - 1
_SPACE = " \t\n\r\f"  # ASCII whitespace, as the Rust side trims it
_SHIFTS = {"": 0, "b": 0}
for _letter, _shift in (("k", 10), ("m", 20), ("g", 30), ("t", 40), ("p", 50)):
    for _tail in ("", "b", "ib"):
        _SHIFTS[_letter + _tail] = _shift


def _parse_text(text):
    """Bytes, or the reason the text is not a size (the Rust side's reasons, in its order)."""
    t = text.strip(_SPACE)
    end = 0
    while end < len(t) and t[end] in "0123456789.":
        end += 1
    number, unit = t[:end], t[end:].lstrip(_SPACE)
    whole, _, fraction = number.partition(".")
    if (not whole and not fraction) or number.endswith(".") or "." in fraction:
        return None, "not a number"
    # isascii: str.lower() maps some non-ASCII letters (the Kelvin sign) to ASCII ones.
    shift = _SHIFTS.get(unit.lower()) if unit.isascii() else None
    if shift is None:
        return None, "unknown unit"
    multiplier = 1 << shift
    part = 0
    for digit in reversed(fraction):  # floor(0.fraction x multiplier), exactly
        part = (int(digit) * multiplier + part) // 10
    n = int(whole or "0") * multiplier + part
    if n > _MAX:
        return None, "too large"
    return n, None


def parse_size(size):
    """Bytes from an int or a size string ("1 MB", "64KiB", "1.5GiB"); raises ValueError,
    with the accepted forms, on anything else."""
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise ValueError(f"invalid size {size!r}: not a number of bytes (int) or a string; expected {ACCEPTED}")
    if isinstance(size, int):
        if size < 0:
            raise ValueError(f"invalid size {size!r}: negative; expected {ACCEPTED}")
        if size > _MAX:
            raise ValueError(f"invalid size {size!r}: too large; expected {ACCEPTED}")
        return size
    n, why = _parse_text(size)
    if why:
        raise ValueError(f"invalid size {size!r}: {why}; expected {ACCEPTED}")
    return n


def format_size(n):
    """Bytes as every gpuleak output prints them: "512 B" under 1 KiB, else one decimal and a
    binary unit ("1.5 MiB"), as format/src/size.rs's `Bytes` does."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # not reached
