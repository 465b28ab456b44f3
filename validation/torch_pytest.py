"""Runs validation/test_torch_plugin.py under `pytest --gpuleak` (gpuleak's plugin, from the
package on PYTHONPATH) and exits 0 only when test_leaks failed with gpuleak's message and
test_clean passed; prints pytest's output and `leaked_bytes 0` (the kept tensors are freed at
teardown). Without the shim (the row's plain and compute-sanitizer runs) it runs the tests
without `--gpuleak`, which refuses to run where it could measure nothing, and exits 0 when
both pass."""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
traced = "libgpuleak" in os.environ.get("LD_PRELOAD", "")
# Without the shim `--gpuleak` refuses to run (it could measure nothing): the plain and
# compute-sanitizer runs time the tests alone.
gpuleak = ["--gpuleak"] if traced else []
run = subprocess.run(
    [sys.executable, "-m", "pytest", *gpuleak, "-p", "no:cacheprovider", "-q", "-rA",
     os.path.join(here, "test_torch_plugin.py")],
    capture_output=True,
    text=True,
)
print(run.stdout)
print(run.stderr, file=sys.stderr)
lines = run.stdout.splitlines()
failed = any(l.startswith("FAILED") and "test_leaks" in l for l in lines)
passed = any(l.startswith("PASSED") and "test_clean" in l for l in lines)
said = "allocated in the test outlived it" in run.stdout
if not traced:
    # Run plain (the row's timing) or under compute-sanitizer: every test passes.
    if run.returncode != 0:
        sys.exit(1)
elif not (run.returncode == 1 and failed and passed and said):
    print(f"torch_pytest: expected test_leaks to fail with gpuleak's message and test_clean to pass "
          f"(pytest exit {run.returncode})", file=sys.stderr)
    sys.exit(1)
print("leaked_bytes 0")
