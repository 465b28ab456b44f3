//! Which kernel parameters can hold a device pointer: the 8-byte ones, learned from the
//! driver's `cuFuncGetParamInfo` (or `cuKernelGetParamInfo` for a library's kernel) once per
//! function and kept in a fixed lock-free table.
//!
//! These getters are the one extra driver call the launch hook makes. Each is a getter on
//! a function handle: it changes no driver state, and the driver API has no "last error" that
//! a failed call could set (the runtime's `cudaGetLastError` only sees runtime calls), so it
//! cannot change what the program observes. It is made once per function, not per launch.
//! The shim records every 8-byte parameter that could be an address; the analyzer decides
//! which ones are live device pointers.
//!
//! A function handle reused by another function after its module was unloaded keeps the
//! first function's layout (a wrong layout only changes which values are recorded).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::cuda::CUresult;

/// The most 8-byte parameters recorded per launch.
pub const MAX_PTRS: usize = 16;
/// The most parameters asked about per function.
const MAX_PARAMS: usize = 4096;
const SLOTS: usize = 4096;
const PROBES: usize = 16;
/// Values below this are never addresses (null, small integers, sizes).
const MIN_ADDRESS: u64 = 0x1_0000;

/// Where one function's 8-byte parameters are, as asked of the driver.
#[derive(Clone, Copy)]
pub struct Asked {
    count: usize,
    /// (parameter index, byte offset in a packed buffer).
    at: [(u16, u16); MAX_PTRS],
}

/// A function's layout: read in place from the table (the common case), or just asked.
pub enum Layout {
    /// A published table entry (never written again).
    Cached(&'static Slot),
    /// Asked now (the table had no room, or another thread was filling the entry).
    Asked(Asked),
}

impl Layout {
    fn len(&self) -> usize {
        match self {
            Layout::Cached(slot) => (slot.count.load(Ordering::Relaxed) as usize).min(MAX_PTRS),
            Layout::Asked(a) => a.count,
        }
    }

    /// The `i`-th 8-byte parameter: (index, offset).
    #[inline]
    fn at(&self, i: usize) -> (u16, u16) {
        match self {
            Layout::Cached(slot) => {
                let v = slot.at[i].load(Ordering::Relaxed);
                ((v >> 16) as u16, v as u16)
            }
            Layout::Asked(a) => a.at[i],
        }
    }
}

/// One function's entry in the table.
pub struct Slot {
    func: AtomicU64,
    ready: AtomicU32,
    count: AtomicU32,
    at: [AtomicU32; MAX_PTRS],
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    func: AtomicU64::new(0),
    ready: AtomicU32::new(0),
    count: AtomicU32::new(0),
    at: [const { AtomicU32::new(0) }; MAX_PTRS],
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];

/// `cuFuncGetParamInfo(CUfunction, ...)` and `cuKernelGetParamInfo(CUkernel, ...)`: one
/// signature, a handle and three integers.
type GetInfo = unsafe extern "C" fn(*mut c_void, usize, *mut usize, *mut usize) -> CUresult;

fn getter(which: crate::dlsym::Getter) -> Option<GetInfo> {
    let f = crate::dlsym::driver_fn(which)?;
    // SAFETY: `f` is the driver's cuFuncGetParamInfo or cuKernelGetParamInfo, found by name,
    // whose public signature is `GetInfo` (CUfunction and CUkernel are both pointers).
    Some(unsafe { std::mem::transmute::<usize, GetInfo>(f) })
}

/// Asks the driver (drivers before CUDA 12.4 have neither getter: no pointers).
///
/// The handle a launch names is a `CUfunction`, or a `CUkernel` cast to one: CUDA 12 lets
/// `cuLaunchKernel` and kernel nodes take a library's context-less kernel that way, and
/// NVIDIA's runtime launches `<<<...>>>` kernels so. The real driver's `cuFuncGetParamInfo`
/// refuses a `CUkernel` with `CUDA_ERROR_INVALID_HANDLE`, as `cuKernelGetParamInfo` refuses a
/// `CUfunction` (seen on an H100, driver 580.159.04, 2026-11-23: before this every kernel an
/// nvcc-built program launched came out with no pointer, and its races went unfound), so
/// when it refuses the first parameter the handle is asked of `cuKernelGetParamInfo`. A
/// kernel with no parameters is refused by both.
#[cold]
fn ask(func: *mut c_void) -> Asked {
    let mut layout = Asked {
        count: 0,
        at: [(0, 0); MAX_PTRS],
    };
    let takes = |get: GetInfo| {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: a getter that writes two integers we own; a handle it does not know is an
        // error, not a fault (the handle was just launched with).
        unsafe { get(func, 0, &mut offset, &mut size) == 0 }
    };
    let get = match getter(crate::dlsym::Getter::cuFuncGetParamInfo) {
        Some(get) if takes(get) => get,
        _ => match getter(crate::dlsym::Getter::cuKernelGetParamInfo) {
            Some(get) => get,
            None => return layout,
        },
    };
    for index in 0..MAX_PARAMS {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: a getter that writes two integers we own; an index past the last
        // parameter returns an error, which ends the loop.
        if unsafe { get(func, index, &mut offset, &mut size) } != 0 {
            break;
        }
        if size == 8 && offset <= usize::from(u16::MAX) {
            layout.at[layout.count] = (index as u16, offset as u16);
            layout.count += 1;
            if layout.count == MAX_PTRS {
                break;
            }
        }
    }
    layout
}

fn hash(func: u64) -> usize {
    ((func >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize
}

/// The layout of `func`, from the table or asked once.
#[inline]
pub fn layout(func: *mut c_void) -> Layout {
    let key = func as u64;
    if key == 0 {
        return Layout::Asked(ask(func));
    }
    let start = hash(key);
    for probe in 0..PROBES {
        let slot = &TABLE[(start + probe) % SLOTS];
        let mut seen = slot.func.load(Ordering::Acquire);
        if seen == 0 {
            match slot.func.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    let l = ask(func);
                    for (i, &(index, offset)) in l.at[..l.count].iter().enumerate() {
                        slot.at[i].store(u32::from(index) << 16 | u32::from(offset), Ordering::Relaxed);
                    }
                    slot.count.store(l.count as u32, Ordering::Relaxed);
                    slot.ready.store(1, Ordering::Release);
                    return Layout::Asked(l);
                }
                Err(now) => seen = now,
            }
        }
        if seen == key {
            if slot.ready.load(Ordering::Acquire) == 0 {
                // Another thread is asking right now.
                return Layout::Asked(ask(func));
            }
            return Layout::Cached(slot);
        }
    }
    // The table is full around this function: ask every time (correct, slower).
    Layout::Asked(ask(func))
}

/// Collects the 8-byte parameter values of a successful launch that could be addresses into
/// `out`; returns how many.
///
/// # Safety
/// The launch succeeded with these `params` / `extra` arguments, so the driver has read every
/// parameter through them: they point at readable memory of the sizes the layout gives.
pub unsafe fn pointers(layout: &Layout, params: *mut *mut c_void, extra: *mut *mut c_void, out: &mut [u64]) -> usize {
    let mut n = 0;
    let mut keep = |v: u64| {
        if v >= MIN_ADDRESS && n < out.len() {
            out[n] = v;
            n += 1;
        }
    };
    if !params.is_null() {
        for i in 0..layout.len() {
            let (index, _) = layout.at(i);
            // SAFETY: see the function's contract: `params[index]` points at 8 bytes.
            let v = unsafe { (*params.add(usize::from(index))).cast::<u64>().read_unaligned() };
            keep(v);
        }
        return n;
    }
    if extra.is_null() {
        return 0;
    }
    let (mut buf, mut size): (*const u8, usize) = (std::ptr::null(), 0);
    let mut i = 0;
    loop {
        // SAFETY: `extra` is a list of (key, value) pairs ending with CU_LAUNCH_PARAM_END (0),
        // which the driver walked too.
        let key = unsafe { *extra.add(i) } as usize;
        match key {
            0 => break,
            // CU_LAUNCH_PARAM_BUFFER_POINTER.
            1 => {
                // SAFETY: as above; every key has its value after it.
                buf = unsafe { *extra.add(i + 1) }.cast::<u8>();
            }
            // CU_LAUNCH_PARAM_BUFFER_SIZE: a pointer to a size_t.
            2 => {
                // SAFETY: as above; the value points at a size_t.
                let p = unsafe { *extra.add(i + 1) }.cast::<usize>();
                if !p.is_null() {
                    // SAFETY: as above.
                    size = unsafe { p.read_unaligned() };
                }
            }
            _ => return 0,
        }
        i += 2;
    }
    if buf.is_null() {
        return 0;
    }
    for i in 0..layout.len() {
        let offset = usize::from(layout.at(i).1);
        if offset + 8 <= size {
            // SAFETY: inside the `size` bytes of the buffer the driver read.
            keep(unsafe { buf.add(offset).cast::<u64>().read_unaligned() });
        }
    }
    n
}
