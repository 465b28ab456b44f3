//! End-to-end tests: real C programs (`tests/clients/`) and third-party CUDA clients on the
//! simulated CUDA driver (`simcuda/`), with and without `libgpuleak.so` preloaded.
//!
//! One test binary; each module is one area:
//! - `sim`: the simulator itself, with no interposer (it must be right before the shim's tests
//!   can mean anything);
//! - `shim`: the shim under the C clients;
//! - `report`: `gpuleak report` on traces of C clients (JSON field by field, text against
//!   golden files);
//! - `third_party`: cudarc, cuda-bindings and cuda-core, alone and under the shim;
//! - `check`: `gpuleak check`, the CI gate (limits, suppressions, baselines, JUnit, SARIF);
//! - `diff`: `gpuleak diff`, two runs or two snapshots side by side;
//! - `docs`: the settings table and the links between Markdown pages, against the repository;
//! - `layers`: no import circle between the analyzer's and the format crate's modules, and none
//!   in the shim but the graph handlers' knot;
//! - `trace`: reading traces and client output in tests;
//! - `browser`: the HTML pages in headless Chromium, driven by a script of the test's;
//! - `memory`: timeline, peak, growth, fragmentation, OOM forensics and the HTML page;
//! - `ops`: metrics endpoint, snapshots, OOM dumps, budgets and fault injection;
//! - `python_frames`: Python frames in the stacks of CPython programs;
//! - `python_pkg`: the Python wheel in a fresh virtual environment, `gpuleak.check()`, the
//!   pytest plugin (with pytest-xdist) and `gpuleak run --no-framework-cache`;
//! - `python_frameworks`: PyTorch's caching allocator read from inside (a stand-in torch on
//!   real driver allocations), joined with the driver's view;
//! - `validation`: `scripts/validate-gpu` (the real-GPU validation) end to end on the simulator.

mod browser;
pub(crate) mod check;
mod diff;
mod docs;
mod layers;
mod memory;
mod ops;
mod ordering;
mod python_frames;
mod python_frameworks;
mod python_pkg;
mod ranks;
mod report;
mod run;
mod shim;
mod sim;
mod third_party;
mod trace;
mod validation;
