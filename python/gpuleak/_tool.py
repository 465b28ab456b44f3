"""Finding and running the `gpuleak` command that this package ships (or the one beside the
shim that is loaded, in a build tree)."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig

from . import _shim

BIN_VAR = "GPULEAK_BIN"
LIB_VAR = "GPULEAK_LIB"


class ToolError(RuntimeError):
    """The `gpuleak` command could not be found or failed."""


def _installed_files(suffix):
    """Files of the installed `gpuleak` distribution whose path ends with `suffix`."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution
    except ImportError:  # pragma: no cover - Python < 3.8
        return []
    try:
        dist = distribution("gpuleak")
    except PackageNotFoundError:
        return []
    found = []
    for f in dist.files or ():
        if str(f).replace("\\", "/").endswith(suffix):
            found.append(os.path.normpath(str(dist.locate_file(f))))
    return found


def _executable(path):
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def binary():
    """The `gpuleak` executable: `GPULEAK_BIN`; the one beside the loaded libgpuleak.so (a
    cargo build tree: target/release/), so that the analyzer matches the shim that writes the
    trace; the one installed with this package; the scripts directory of this interpreter;
    `PATH`."""
    explicit = os.environ.get(BIN_VAR)
    if explicit:
        if _executable(explicit):
            return explicit
        raise ToolError(f"{BIN_VAR}={explicit} is not an executable file")
    candidates = []
    lib = _shim.loaded_library_path()
    if lib:
        candidates.append(os.path.join(os.path.dirname(lib), "gpuleak"))
    candidates += _installed_files("bin/gpuleak")
    scripts = sysconfig.get_path("scripts")
    if scripts:
        candidates.append(os.path.join(scripts, "gpuleak"))
    candidates.append(shutil.which("gpuleak"))
    for c in candidates:
        if _executable(c):
            return c
    raise ToolError(
        "cannot find the gpuleak command: install the gpuleak wheel, put gpuleak on PATH "
        f"or set {BIN_VAR}"
    )


def library():
    """The libgpuleak.so this package ships, or None (a build tree has none)."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libgpuleak.so")
    return here if os.path.isfile(here) else None


def clean_environment():
    """This process's environment without the shim preloaded: the analyzer makes no CUDA
    call, but nothing it runs should be traced either."""
    env = dict(os.environ)
    preload = env.get("LD_PRELOAD")
    if preload:
        kept = [p for p in preload.replace(" ", ":").split(":") if p and os.path.basename(p) != "libgpuleak.so"]
        if kept:
            env["LD_PRELOAD"] = ":".join(kept)
        else:
            del env["LD_PRELOAD"]
    return env


def report_json(trace, *args):
    """`gpuleak report --format json ARGS TRACE`, parsed."""
    cmd = [binary(), "report", "--format", "json", "--quiet", *args, str(trace)]
    try:
        out = subprocess.run(cmd, capture_output=True, env=clean_environment(), check=False)
    except OSError as e:
        raise ToolError(f"cannot run {cmd[0]}: {e}") from e
    if out.returncode != 0:
        err = out.stderr.decode("utf-8", "replace").strip()
        raise ToolError(f"{' '.join(cmd)} failed with exit code {out.returncode}: {err}")
    try:
        return json.loads(out.stdout)
    except ValueError as e:
        raise ToolError(f"{' '.join(cmd)} printed no JSON: {e}") from e


def main(argv=None):
    """`python -m gpuleak ARGS`: runs the gpuleak command with ARGS (replacing this process)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        exe = binary()
    except ToolError as e:
        print(f"gpuleak: {e}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    lib = library()
    if lib and not env.get(LIB_VAR):
        # The command also finds it by itself; naming it removes any doubt about which copy.
        env[LIB_VAR] = lib
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(exe, [exe, *argv], env)
    return 2  # not reached
