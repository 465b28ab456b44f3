//! The real `dlsym`, and the lookups of the driver's functions through it: below every
//! handler and below the table of entry points, which find the real functions here.
//!
//! The shim's own `dlsym` (door 2) is in `dlsym_door`; it calls the real one found here.

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::elf;

/// `RTLD_DL_LINKMAP` for `dladdr1` (glibc's dlfcn.h).
const RTLD_DL_LINKMAP: libc::c_int = 2;

/// `RTLD_NEXT` on glibc.
pub const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

pub(super) type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
pub(super) type DlvsymFn = unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char) -> *mut c_void;

static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);
static REAL_DLVSYM: AtomicUsize = AtomicUsize::new(0);
/// The `link_map` of the `libcuda.so*` whose functions were handed out (it doubles as its
/// dlopen handle on glibc).
static LIBCUDA: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Where the dynamic linker keeps `dlsym`: libc since glibc 2.34, libdl before.
const DL_OBJECTS: &[&[u8]] = &[b"libc.so", b"libdl.so"];

fn resolve(slot: &AtomicUsize, name: &CStr) -> usize {
    let mut addr = slot.load(Ordering::Acquire);
    if addr == 0 {
        addr = elf::find_function(DL_OBJECTS, name).unwrap_or(0);
        slot.store(addr, Ordering::Release);
    }
    addr
}

/// The real `dlsym` (address), or 0 if it cannot be found (never seen on glibc).
pub(super) extern "C" fn real_dlsym_addr() -> usize {
    resolve(&REAL_DLSYM, c"dlsym")
}

/// The real `dlvsym` (address), or 0 if it cannot be found.
pub(super) extern "C" fn real_dlvsym_addr() -> usize {
    resolve(&REAL_DLVSYM, c"dlvsym")
}

/// Calls the real `dlsym` from inside the shim (so `RTLD_NEXT` means "after the shim").
/// `handle` is `RTLD_DEFAULT`, `RTLD_NEXT` or [`libcuda`]: glibc crashes on any other value
/// that is not an open `dlopen` handle.
pub fn real_dlsym(handle: *mut c_void, name: &CStr) -> *mut c_void {
    let addr = real_dlsym_addr();
    if addr == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: `addr` (non-zero) is libc's `dlsym`, found by name in the symbol table of libc
    // or libdl (`DL_OBJECTS`).
    let f: DlsymFn = unsafe { std::mem::transmute::<usize, DlsymFn>(addr) };
    // SAFETY: `name` is NUL-terminated, and `handle` one that dlsym accepts: every caller
    // passes `RTLD_DEFAULT`, `RTLD_NEXT` or `libcuda()`, a `dlopen` handle never closed (an
    // invalid handle would not be an error but a crash).
    unsafe { f(handle, name.as_ptr()) }
}

macro_rules! getters {
    ($($name:ident,)*) => {
        /// The driver functions the shim calls itself (getters: they change no state the
        /// program sees), named as the driver exports them.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Getter {
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                $name,
            )*
        }

        impl Getter {
            /// Every getter, in declaration order.
            pub const ALL: &'static [Getter] = &[$(Getter::$name,)*];

            /// The exported name.
            pub fn name(self) -> &'static CStr {
                match self {
                    $(Getter::$name => {
                        const NAME: &CStr = match CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                            Ok(n) => n,
                            Err(_) => panic!("a getter's name has no NUL"),
                        };
                        NAME
                    })*
                }
            }
        }
    };
}

getters! {
    cuArray3DGetDescriptor_v2,
    cuCtxGetCurrent,
    cuCtxGetDevice,
    cuDeviceGetMemPool,
    cuDeviceTotalMem_v2,
    cuFuncGetParamInfo,
    cuGraphChildGraphNodeGetGraph,
    cuGraphEventRecordNodeGetEvent,
    cuGraphEventWaitNodeGetEvent,
    cuGraphGetEdges,
    cuGraphGetEdges_v2,
    cuGraphGetNodes,
    cuGraphKernelNodeGetAttribute,
    cuGraphKernelNodeGetParams,
    cuGraphKernelNodeGetParams_v2,
    cuGraphMemAllocNodeGetParams,
    cuGraphMemFreeNodeGetParams,
    cuGraphMemcpyNodeGetParams,
    cuGraphMemsetNodeGetParams,
    cuGraphNodeGetType,
    cuKernelGetParamInfo,
    cuMemGetAddressRange_v2,
    cuMemPoolGetAttribute,
    cuPointerGetAttribute,
    cuStreamGetCaptureInfo_v2,
    cuStreamGetCaptureInfo_v3,
    cuStreamIsCapturing,
}

/// Each getter's address: 0 not looked up yet, 1 absent.
static GETTERS: [AtomicUsize; Getter::ALL.len()] = [const { AtomicUsize::new(0) }; Getter::ALL.len()];

/// Looks `g` up: in the `libcuda` the program uses when the shim has seen it, else wherever
/// the default lookup finds it.
fn look_up(g: Getter) -> Option<usize> {
    let handle = libcuda();
    let mut p = if handle.is_null() {
        std::ptr::null_mut()
    } else {
        real_dlsym(handle, g.name())
    };
    if p.is_null() {
        p = real_dlsym(RTLD_NEXT, g.name());
    }
    (!p.is_null()).then_some(p as usize)
}

/// Whether the driver can be looked into: its handle is known, or the default lookup reaches
/// it (a getter not found then is one this driver does not have).
fn driver_present() -> bool {
    !libcuda().is_null() || !real_dlsym(RTLD_NEXT, c"cuInit").is_null()
}

/// Looks `g` up now; remembers it absent only where the driver was there to look into.
#[cold]
fn resolve_getter(g: Getter) -> Option<usize> {
    let found = look_up(g);
    let slot = &GETTERS[g as usize];
    match found {
        Some(f) => slot.store(f, Ordering::Relaxed),
        None if driver_present() => slot.store(1, Ordering::Relaxed),
        None => {}
    }
    found
}

/// The driver's getter `g`, if it has one. Looked up by [`resolve_getters`] when tracing
/// starts and when the driver's handle becomes known, so that no intercepted call after that
/// takes the loader's lock (a signal handler that leaves a call by `longjmp` would leave the
/// lock held); looked up here only when neither had reached the driver yet (tracing started by
/// the control API before the program loaded it).
pub fn driver_fn(g: Getter) -> Option<usize> {
    match GETTERS[g as usize].load(Ordering::Relaxed) {
        0 => resolve_getter(g),
        1 => None,
        f => Some(f),
    }
}

/// Looks up every getter not found yet, once the driver is loaded (see
/// `table::resolve_up_front`, which also looks up the real entry points); false when the
/// driver is not there to look into.
pub fn resolve_getters() -> bool {
    if !driver_present() {
        return false;
    }
    for &g in Getter::ALL {
        if GETTERS[g as usize].load(Ordering::Relaxed) <= 1 {
            resolve_getter(g);
        }
    }
    true
}

/// The `libcuda.so*` handle, once any tracked function has been seen in it.
pub fn libcuda() -> *mut c_void {
    LIBCUDA.load(Ordering::Acquire)
}

/// Whether `addr` lies in an object named `libcuda.so` or `libcuda.so.N` (never
/// `libcudart`), and whether this call learned that object's handle (the first to see it):
/// the caller then looks the driver's functions up (`table::in_libcuda`).
pub fn note_libcuda(addr: *const c_void) -> (bool, bool) {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let mut map: *mut c_void = std::ptr::null_mut();
    // SAFETY: dladdr1 only reads the loader's tables; both out-pointers are valid.
    let ok = unsafe { libc::dladdr1(addr, info.as_mut_ptr(), (&raw mut map).cast(), RTLD_DL_LINKMAP) };
    if ok == 0 {
        return (false, false);
    }
    // SAFETY: dladdr1 succeeded, so `info` is initialised.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return (false, false);
    }
    // SAFETY: the loader's file names are NUL-terminated.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes();
    let file = path.rsplit(|&c| c == b'/').next().unwrap_or(path);
    let is_cuda = file == b"libcuda.so" || file.starts_with(b"libcuda.so.");
    if is_cuda && !map.is_null() && LIBCUDA.load(Ordering::Acquire).is_null() {
        // The link map itself is no handle for `dlsym` when the library came in as a
        // dependency of the program (`-lcuda`): glibc fills its search list only for objects
        // that were `dlopen`ed, and a lookup through the empty list crashes. Opening the
        // loaded object again (RTLD_NOLOAD: never loads anything) gives a real handle.
        // SAFETY: `dli_fname` names an object that is loaded; RTLD_NOLOAD only looks it up.
        let handle = unsafe { libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        let learned = !handle.is_null()
            && LIBCUDA
                .compare_exchange(std::ptr::null_mut(), handle, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        return (true, learned);
    }
    (is_cuda, false)
}

/// The runtime's own function: the next definition after the shim (a program or library
/// linked with `-lcudart`), else the one in a `libcudart.so` loaded privately.
pub fn find_runtime_fn(name: &CStr) -> usize {
    let next = real_dlsym(RTLD_NEXT, name);
    if !next.is_null() {
        return next as usize;
    }
    elf::find_function(&[b"libcudart.so"], name).unwrap_or(0)
}
