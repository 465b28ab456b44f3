//! The two calls of cuBLAS's documented C API through which a program hands device memory to
//! the library as its workspace: `cublasSetWorkspace_v2` (kept by the handle until the next
//! one) and `cublasLtMatmul` (its `workspace` argument). PyTorch allocates one workspace per
//! cuBLAS handle and stream from its caching allocator and keeps it for the life of the
//! process (PyTorch's documentation, "cuBLAS workspaces"): a [`LibWorkspace`] record lets the
//! analyzer count that block as the library's, not as a tensor the program leaked.
//!
//! These are no driver entry points: they are exported here and forward to the next
//! definition (the library's), resolved once. They never go through the driver's table, the
//! `dlsym` door or the resolvers. The real call runs outside the guard: cuBLAS calls the
//! driver itself (launches, its own allocations), and those calls are recorded as the
//! program's, as they are without these wrappers.
//!
//! PyTorch calls `cublasSetWorkspace_v2` before every matmul, so the path of a call that
//! repeats the thread's last (handle, workspace, size) is one compare of thread-local words.

#![allow(non_snake_case)]

use std::cell::Cell;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use gpuleak_format::LibWorkspace;

use crate::dlsym::{real_dlsym, RTLD_NEXT};
use crate::{elf, guard, tracer};

/// `cublasStatus_t` (an `enum`, an `int` in the C ABI).
pub type CublasStatus = i32;

/// `CUBLAS_STATUS_SUCCESS`.
const STATUS_SUCCESS: CublasStatus = 0;
/// `CUBLAS_STATUS_NOT_INITIALIZED`: returned only when no library defines the function,
/// which a caller linked to cuBLAS never meets.
pub const STATUS_NOT_INITIALIZED: CublasStatus = 1;

/// Objects that define cuBLAS's functions, for a library the loader put where `RTLD_NEXT`
/// does not look (a dependency of an object loaded with `dlopen(RTLD_LOCAL)`, as Python
/// loads PyTorch's extension): cuBLASLt's first, then cuBLAS's.
const OBJECTS: &[&[u8]] = &[b"libcublasLt", b"libcublas"];

/// The real `cublasSetWorkspace_v2`; 0 until found.
static REAL_SET_WORKSPACE: AtomicUsize = AtomicUsize::new(0);
/// The real `cublasLtMatmul`; 0 until found.
static REAL_LT_MATMUL: AtomicUsize = AtomicUsize::new(0);

/// The definition of `name` after the shim, remembered in `slot` once found. Never
/// remembered absent: a caller of the function has the library that defines it loaded.
fn real(slot: &AtomicUsize, name: &CStr) -> usize {
    let addr = slot.load(Ordering::Acquire);
    if addr != 0 {
        return addr;
    }
    find(slot, name)
}

#[cold]
fn find(slot: &AtomicUsize, name: &CStr) -> usize {
    let mut addr = real_dlsym(RTLD_NEXT, name) as usize;
    if addr == 0 {
        addr = elf::find_function(OBJECTS, name).unwrap_or(0);
    }
    slot.store(addr, Ordering::Release);
    addr
}

thread_local! {
    // Const-initialised `Cell`s of plain data: no destructor, safe to touch at thread exit.
    /// This thread's last recorded (handle, workspace, size) of `cublasSetWorkspace_v2`.
    static LAST_SET: Cell<[u64; 3]> = const { Cell::new([0; 3]) };
    /// This thread's last recorded (handle, workspace, size) of `cublasLtMatmul`.
    static LAST_LT: Cell<[u64; 3]> = const { Cell::new([0; 3]) };
}

/// Whether `now` differs from the thread's last recorded triple in `last` (a thread whose
/// thread-locals are gone records nothing).
#[inline]
fn is_new(last: &'static std::thread::LocalKey<Cell<[u64; 3]>>, now: [u64; 3]) -> bool {
    last.try_with(|c| c.get() != now).unwrap_or(false)
}

/// Records `workspace` for `library` after a call that returned `status`, unless the call
/// failed, named no workspace, or repeats this thread's last triple in `last`. The triple is
/// remembered only once its record is written, so calls made before tracing started (or
/// inside another hook) are recorded by the next one.
#[inline]
fn note(
    last: &'static std::thread::LocalKey<Cell<[u64; 3]>>,
    library: u32,
    status: CublasStatus,
    handle: *mut c_void,
    workspace: *mut c_void,
    bytes: usize,
) {
    if status != STATUS_SUCCESS || workspace.is_null() {
        return;
    }
    let now = [handle as u64, workspace as u64, bytes as u64];
    if !is_new(last, now) {
        return;
    }
    record(last, library, now);
}

#[cold]
fn record(last: &'static std::thread::LocalKey<Cell<[u64; 3]>>, library: u32, now: [u64; 3]) {
    let Some(g) = guard::enter() else { return };
    if tracer::get().is_none() {
        return;
    }
    let [_, ptr, size] = now;
    remember(ptr, size);
    tracer::event_fields(&g, &LibWorkspace { library, ptr, size });
    let _ = last.try_with(|c| c.set(now));
}

/// Interposes cuBLAS's `cublasSetWorkspace_v2(cublasHandle_t, void *workspace, size_t
/// workspaceSizeInBytes)`.
///
/// # Safety
/// cuBLAS's contract for the function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cublasSetWorkspace_v2(
    handle: *mut c_void,
    workspace: *mut c_void,
    bytes: usize,
) -> CublasStatus {
    type Real = unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> CublasStatus;
    let addr = real(&REAL_SET_WORKSPACE, c"cublasSetWorkspace_v2");
    if addr == 0 {
        return STATUS_NOT_INITIALIZED;
    }
    // SAFETY: `addr` (non-zero) is the definition of `cublasSetWorkspace_v2` after the shim or
    // in a loaded cuBLAS, whose documented signature is the one declared here.
    let f = unsafe { std::mem::transmute::<usize, Real>(addr) };
    // SAFETY: the program's own arguments of its call to this very function, unchanged.
    let status = unsafe { f(handle, workspace, bytes) };
    note(&LAST_SET, LibWorkspace::CUBLAS, status, handle, workspace, bytes);
    status
}

/// Interposes cuBLASLt's `cublasLtMatmul`: its `workspace` and `workspaceSizeInBytes`
/// (the 14th and 15th arguments) are the call's workspace.
///
/// # Safety
/// cuBLASLt's contract for the function.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cublasLtMatmul(
    light_handle: *mut c_void,
    compute_desc: *mut c_void,
    alpha: *const c_void,
    a: *const c_void,
    a_desc: *mut c_void,
    b: *const c_void,
    b_desc: *mut c_void,
    beta: *const c_void,
    c: *const c_void,
    c_desc: *mut c_void,
    d: *mut c_void,
    d_desc: *mut c_void,
    algo: *const c_void,
    workspace: *mut c_void,
    workspace_size: usize,
    stream: *mut c_void,
) -> CublasStatus {
    type Real = unsafe extern "C" fn(
        *mut c_void,
        *mut c_void,
        *const c_void,
        *const c_void,
        *mut c_void,
        *const c_void,
        *mut c_void,
        *const c_void,
        *const c_void,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *const c_void,
        *mut c_void,
        usize,
        *mut c_void,
    ) -> CublasStatus;
    let addr = real(&REAL_LT_MATMUL, c"cublasLtMatmul");
    if addr == 0 {
        return STATUS_NOT_INITIALIZED;
    }
    // SAFETY: `addr` (non-zero) is the definition of `cublasLtMatmul` after the shim or in a
    // loaded cuBLASLt, whose documented signature is the one declared here.
    let f = unsafe { std::mem::transmute::<usize, Real>(addr) };
    // SAFETY: the program's own arguments of its call to this very function, unchanged.
    let status = unsafe {
        f(
            light_handle,
            compute_desc,
            alpha,
            a,
            a_desc,
            b,
            b_desc,
            beta,
            c,
            c_desc,
            d,
            d_desc,
            algo,
            workspace,
            workspace_size,
            stream,
        )
    };
    note(
        &LAST_LT,
        LibWorkspace::CUBLAS_LT,
        status,
        light_handle,
        workspace,
        workspace_size,
    );
    status
}

/// The most workspaces [`workspaces`] reports: PyTorch has one per (handle, stream), a
/// handful per device.
pub const KEPT: usize = 256;

/// Each workspace recorded, latest size per address, for the control API (the Python
/// package leaves them out of the tensors it judges). A slot is written once (its address
/// last, after its size), then only its size changes.
static SLOTS: [[AtomicU64; 2]; KEPT] = [const { [AtomicU64::new(0), AtomicU64::new(0)] }; KEPT];
/// Slots claimed.
static USED: AtomicUsize = AtomicUsize::new(0);

/// Keeps `ptr`'s latest size (rare: only when a thread's triple changes). Two threads that
/// add the same new address at once may both take a slot: readers see it twice, harmlessly.
fn remember(ptr: u64, size: u64) {
    let used = USED.load(Ordering::Acquire).min(KEPT);
    if let Some(slot) = SLOTS[..used].iter().find(|s| s[0].load(Ordering::Acquire) == ptr) {
        slot[1].store(size, Ordering::Release);
        return;
    }
    let i = USED.fetch_add(1, Ordering::AcqRel);
    if let Some(slot) = SLOTS.get(i) {
        slot[1].store(size, Ordering::Release);
        slot[0].store(ptr, Ordering::Release);
    }
}

/// `gpuleak_workspaces`: writes up to `n` (address, size) pairs of the workspaces recorded so
/// far into `out` (`2 * n` words); how many pairs it wrote.
///
/// # Safety
/// `out` is NULL or valid for `2 * n` writes of `u64`.
pub unsafe fn workspaces(out: *mut u64, n: i32) -> i32 {
    if out.is_null() || n <= 0 {
        return 0;
    }
    let used = USED.load(Ordering::Acquire).min(KEPT);
    let mut written = 0usize;
    for slot in &SLOTS[..used] {
        if written == n as usize {
            break;
        }
        let ptr = slot[0].load(Ordering::Acquire);
        if ptr == 0 {
            continue; // claimed, not written yet
        }
        let size = slot[1].load(Ordering::Acquire);
        // SAFETY: the caller's contract: `out` holds `2 * n` words and `written < n`.
        unsafe {
            out.add(2 * written).write(ptr);
            out.add(2 * written + 1).write(size);
        }
        written += 1;
    }
    written as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static LAST_TEST: Cell<[u64; 3]> = const { Cell::new([0; 3]) };
    }

    fn at(addr: usize) -> *mut c_void {
        std::ptr::without_provenance_mut(addr)
    }

    fn set(now: [u64; 3]) {
        LAST_TEST.with(|c| c.set(now));
    }

    /// PyTorch's pattern: the same triple before every matmul is one compare, and a change
    /// of handle, address or size is new.
    #[test]
    fn a_repeated_triple_is_not_new_and_any_change_is() {
        std::thread::spawn(|| {
            assert!(is_new(&LAST_TEST, [1, 0x1000, 32]), "nothing recorded yet");
            set([1, 0x1000, 32]);
            assert!(!is_new(&LAST_TEST, [1, 0x1000, 32]));
            assert!(is_new(&LAST_TEST, [2, 0x1000, 32]), "another handle");
            assert!(is_new(&LAST_TEST, [1, 0x2000, 32]), "another workspace");
            assert!(is_new(&LAST_TEST, [1, 0x1000, 64]), "another size");
        })
        .join()
        .unwrap();
    }

    /// Each thread keeps its own last triple (PyTorch's autograd thread has its own handle).
    #[test]
    fn threads_do_not_share_their_last_triple() {
        set([1, 0x1000, 32]);
        std::thread::spawn(|| assert!(is_new(&LAST_TEST, [1, 0x1000, 32])))
            .join()
            .unwrap();
        assert!(!is_new(&LAST_TEST, [1, 0x1000, 32]));
    }

    /// A failed call or one without a workspace writes nothing and is not remembered: the
    /// next successful call with that triple is new.
    #[test]
    fn a_failed_call_or_a_null_workspace_is_not_remembered() {
        std::thread::spawn(|| {
            note(&LAST_TEST, LibWorkspace::CUBLAS, 7, at(1), at(0x1000), 32);
            note(&LAST_TEST, LibWorkspace::CUBLAS, 0, at(1), std::ptr::null_mut(), 32);
            assert_eq!(LAST_TEST.with(Cell::get), [0; 3]);
            assert!(is_new(&LAST_TEST, [1, 0x1000, 32]));
        })
        .join()
        .unwrap();
    }

    /// The control API reads each address once, with its latest size.
    #[test]
    fn the_table_keeps_the_latest_size_per_address() {
        remember(0xdead_0000, 32);
        remember(0xdead_0000, 64);
        remember(0xbeef_0000, 16);
        let mut out = [0u64; 2 * KEPT];
        // SAFETY: `out` holds 2 * KEPT words.
        let n = unsafe { workspaces(out.as_mut_ptr(), KEPT as i32) } as usize;
        let pairs: Vec<(u64, u64)> = out[..2 * n].chunks(2).map(|p| (p[0], p[1])).collect();
        assert!(pairs.contains(&(0xdead_0000, 64)), "{pairs:?}");
        assert!(pairs.contains(&(0xbeef_0000, 16)), "{pairs:?}");
        assert!(!pairs.contains(&(0xdead_0000, 32)), "{pairs:?}");
        // SAFETY: NULL is refused.
        assert_eq!(unsafe { workspaces(std::ptr::null_mut(), 4) }, 0);
    }
}
