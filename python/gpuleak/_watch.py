"""The frameworks' state at the snapshots the shim takes on its own.

The shim writes a Snapshot record on its signal (`GPULEAK_SNAPSHOT_SIGNAL`), every period
(`GPULEAK_SNAPSHOT_PERIOD`) and after an out-of-memory failure (`GPULEAK_OOM_SNAPSHOT=1`),
from a signal handler or its own thread, where no Python can run. Once a framework is attached
and one of those settings is on, one daemon thread polls the shim's
`gpuleak_snapshot_generation()` (one atomic load) every `PERIOD` seconds, and when it has
moved past a snapshot that the package did not take itself (`gpuleak.snapshot()` writes the
state of its own), writes every attached framework's state with that snapshot's id. Several
snapshots between two polls get one state, with the latest id: nothing ran in between that the
state could show.

The thread never holds a lock while it reads a framework, so it cannot deadlock with a
framework's own locks (PyTorch's out-of-memory observer runs under its allocator's).
"""

import os
import threading
import time

from . import _shim

PERIOD = 0.2
SETTINGS = ("GPULEAK_SNAPSHOT_SIGNAL", "GPULEAK_SNAPSHOT_PERIOD", "GPULEAK_OOM_SNAPSHOT")

_LOCK = threading.Lock()
_OWN = set()  # ids of the package's own snapshots not yet passed by the watcher
_THREAD = None
_WRITTEN = []  # snapshot ids the watcher wrote a state for


def shim_snapshots_on():
    """Whether a setting makes the shim take snapshots on its own."""
    return any(os.environ.get(name, "") not in ("", "0") for name in SETTINGS)


def own_snapshot(reason):
    """Takes a snapshot through the shim for the package (its id, or 0), so that the watcher
    leaves its state to the caller."""
    with _LOCK:
        ident = int(_shim.shim().call("gpuleak_snapshot", _shim.encode(reason), default=0))
        if ident and _THREAD is not None:
            _OWN.add(ident)
    return ident


def written():
    """The snapshot ids the watcher has written a state for, oldest first."""
    return list(_WRITTEN)


def start():
    """Starts the watcher once, if the shim takes snapshots on its own and exports its
    generation (an older shim does not)."""
    global _THREAD
    if _THREAD is not None or not shim_snapshots_on():
        return
    generation = _shim.shim().functions.get("gpuleak_snapshot_generation")
    if generation is None:
        return
    with _LOCK:
        if _THREAD is not None:
            return
        _THREAD = threading.Thread(target=_run, args=(generation, int(generation())), name="gpuleak-frameworks", daemon=True)
    _THREAD.start()


def _forget_in_child():
    """After fork: the parent's thread is not in the child, and the shim counts the child's
    snapshots from 1 again; a child of a watched parent is watched too."""
    global _LOCK, _THREAD
    watched, _THREAD = _THREAD is not None, None
    _LOCK = threading.Lock()
    _OWN.clear()
    _WRITTEN.clear()
    if watched:
        start()


os.register_at_fork(after_in_child=_forget_in_child)


def _fresh(generation, seen):
    """The latest snapshot id past `seen` that the package did not take, or 0; and the
    generation now."""
    with _LOCK:
        now = int(generation())
        if now <= seen:
            return 0, now
        theirs = [i for i in range(seen + 1, now + 1) if i not in _OWN]
        _OWN.difference_update(range(seen + 1, now + 1))
    return (theirs[-1] if theirs else 0), now


def _run(generation, seen):
    from . import _frameworks

    while True:
        time.sleep(PERIOD)
        try:
            ident, seen = _fresh(generation, seen)
            if ident:
                _frameworks.dump("snapshot", ident)
                _WRITTEN.append(ident)
        except Exception:  # noqa: BLE001 - a watcher must never take the program down
            continue
