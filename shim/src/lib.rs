//! `libgpuleak.so`: preloaded into a process (`LD_PRELOAD=libgpuleak.so app`), it records
//! every CUDA allocation, free, context, stream and event with the host call stack of each
//! allocation, into a compact trace that the `gpuleak` analyzer reads.
//!
//! Programs reach the driver through three doors, and the shim stands at all of them:
//! exported symbols for programs linked with `-lcuda` ([`exports`]), its own `dlsym` for
//! programs that `dlopen` the driver ([`exports::dlsym_door`]), and wrappers of the driver's resolvers
//! `cuGetProcAddress*`, through which the CUDA runtime gets every function
//! ([`exports::resolver`]). Allocations are recorded once, at the driver layer; runtime
//! entry points only tag those records.
//!
//! Nothing happens until the first CUDA call: no file, no thread, no work in constructors.

mod config;
mod cuda;
mod diag;
mod dlsym;
mod elf;
mod exports;
mod fd;
mod fingerprint;
mod guard;
mod heap;
mod leaked;
mod modules;
mod ops;
mod params;
mod python;
mod rank;
mod scratch;
mod stacks;

mod sys;
mod table;
mod tracer;
mod writer;

/// The shim allocates from a heap of its own, never from the C library's `malloc` (see
/// [`heap`]).

#[global_allocator]
static HEAP: heap::Heap = heap::Heap::new();
