//! Door 2: the shim's own `dlsym`/`dlvsym`, and the real ones.
//!
//! Programs that `dlopen("libcuda.so.1")` and `dlsym` each function (cudarc, XLA, ctypes,
//! the runtime's bootstrap lookup of `cuGetProcAddress`) never see an exported symbol of a
//! preloaded library. The shim's `dlsym` asks the real one, and when the answer is a tracked
//! function inside `libcuda.so*`, hands out the wrapper instead.
//!
//! `dlsym(RTLD_NEXT, ...)` is special: glibc finds "next" from the caller's return address,
//! so the shim must not be the caller. The exported entry points are naked functions that
//! jump to the real `dlsym`/`dlvsym` with the caller's return address still on the stack (x86-64)
//! or in the link register (aarch64).

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::{elf, hooks};

/// `RTLD_DL_LINKMAP` for `dladdr1` (glibc's dlfcn.h).
const RTLD_DL_LINKMAP: libc::c_int = 2;

/// `RTLD_NEXT` on glibc.
const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
type DlvsymFn = unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char) -> *mut c_void;

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
extern "C" fn real_dlsym_addr() -> usize {
    resolve(&REAL_DLSYM, c"dlsym")
}

extern "C" fn real_dlvsym_addr() -> usize {
    resolve(&REAL_DLVSYM, c"dlvsym")
}

/// Calls the real `dlsym` from inside the shim (so `RTLD_NEXT` means "after the shim").
pub fn real_dlsym(handle: *mut c_void, name: &CStr) -> *mut c_void {
    let addr = real_dlsym_addr();
    if addr == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: `addr` is libc's `dlsym`, found by name in libc's own symbol table.
    let f: DlsymFn = unsafe { std::mem::transmute::<usize, DlsymFn>(addr) };
    // SAFETY: `name` is NUL-terminated; dlsym accepts any handle value and reports errors.
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

/// The driver's getter `g`, if it has one. Looked up by [`resolve_up_front`] when tracing
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

/// Looks up every getter and the real function of every driver entry point the shim exports,
/// once the driver is loaded: as tracing starts (inside the first intercepted call), and again
/// when the driver's handle becomes known (a driver opened with `RTLD_LOCAL` is out of reach
/// of the default lookup until then).
pub fn resolve_up_front() {
    if !driver_present() {
        return;
    }
    for &g in Getter::ALL {
        if GETTERS[g as usize].load(Ordering::Relaxed) <= 1 {
            resolve_getter(g);
        }
    }
    hooks::resolve_driver_rows();
}

/// The `libcuda.so*` handle, once any tracked function has been seen in it.
pub fn libcuda() -> *mut c_void {
    LIBCUDA.load(Ordering::Acquire)
}

/// Whether `addr` lies in an object named `libcuda.so` or `libcuda.so.N` (never
/// `libcudart`); remembers that object's handle.
pub fn in_libcuda(addr: *const c_void) -> bool {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let mut map: *mut c_void = std::ptr::null_mut();
    // SAFETY: dladdr1 only reads the loader's tables; both out-pointers are valid.
    let ok = unsafe { libc::dladdr1(addr, info.as_mut_ptr(), (&raw mut map).cast(), RTLD_DL_LINKMAP) };
    if ok == 0 {
        return false;
    }
    // SAFETY: dladdr1 succeeded, so `info` is initialised.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return false;
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
        if !handle.is_null()
            && LIBCUDA
                .compare_exchange(std::ptr::null_mut(), handle, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            resolve_up_front();
        }
    }
    is_cuda
}

/// What `dlsym`/`dlvsym` should return for `name`, given the real answer.
fn substitute(name: *const c_char, real: *mut c_void, caller: usize) -> *mut c_void {
    if real.is_null() || name.is_null() {
        return real;
    }
    // SAFETY: callers pass NUL-terminated names; the real dlsym already read this one.
    let name = unsafe { CStr::from_ptr(name) };
    let Some(hook) = hooks::by_name(name.to_bytes()) else {
        return real;
    };
    // Never substitute inside the driver itself.
    if in_libcuda(caller as *const c_void) {
        return real;
    }
    let wrapper = hook.wrapper();
    if real as usize == wrapper {
        // The lookup found the shim's own export (RTLD_DEFAULT, or a handle whose scope
        // includes the preload): answer as if the shim were not there.
        let next = real_dlsym(RTLD_NEXT, name);
        if !next.is_null() && in_libcuda(next) {
            hook.set_real(next as usize);
            return real;
        }
        return next;
    }
    if in_libcuda(real) {
        hook.set_real(real as usize);
        return wrapper as *mut c_void;
    }
    real
}

extern "C" fn dlsym_impl(handle: *mut c_void, name: *const c_char, caller: usize) -> *mut c_void {
    let addr = real_dlsym_addr();
    if addr == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: `addr` is libc's dlsym.
    let f: DlsymFn = unsafe { std::mem::transmute::<usize, DlsymFn>(addr) };
    // SAFETY: arguments passed through unchanged from the program's call.
    let real = unsafe { f(handle, name) };
    substitute(name, real, caller)
}

extern "C" fn dlvsym_impl(
    handle: *mut c_void,
    name: *const c_char,
    version: *const c_char,
    caller: usize,
) -> *mut c_void {
    let addr = real_dlvsym_addr();
    if addr == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: `addr` is libc's dlvsym.
    let f: DlvsymFn = unsafe { std::mem::transmute::<usize, DlvsymFn>(addr) };
    // SAFETY: arguments passed through unchanged from the program's call.
    let real = unsafe { f(handle, name, version) };
    substitute(name, real, caller)
}

/// The exported `dlsym`.
///
/// RTLD_NEXT goes to the real dlsym by a tail jump so that glibc sees the program's return
/// address; every other handle goes to [`dlsym_impl`] with the caller's return address as
/// an extra argument.
#[cfg(target_arch = "x86_64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn dlsym(_handle: *mut c_void, _name: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "cmp rdi, -1",
        "je 2f",
        "mov rdx, [rsp]",
        "jmp {imp}",
        "2:",
        // Keep the arguments across the lookup; rsp is 16-byte aligned at the call.
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {real}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jz 3f",
        "jmp rax",
        "3:",
        "ret",
        imp = sym dlsym_impl,
        real = sym real_dlsym_addr,
    )
}

/// The exported `dlvsym`; see [`dlsym`].
#[cfg(target_arch = "x86_64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn dlvsym(_handle: *mut c_void, _name: *const c_char, _version: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "cmp rdi, -1",
        "je 2f",
        "mov rcx, [rsp]",
        "jmp {imp}",
        "2:",
        "push rdi",
        "push rsi",
        "push rdx",
        "call {real}",
        "pop rdx",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jz 3f",
        "jmp rax",
        "3:",
        "ret",
        imp = sym dlvsym_impl,
        real = sym real_dlvsym_addr,
    )
}

/// The exported `dlsym` on aarch64; see the x86-64 one. The caller's return address is in x30
/// (LR), which glibc reads as its `__builtin_return_address(0)`: the RTLD_NEXT path saves it
/// around the lookup of the real `dlsym` and restores it before the tail branch. x16 (IP0) holds
/// the target, so the branch is allowed into a function that starts with `bti c`.
#[cfg(target_arch = "aarch64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn dlsym(_handle: *mut c_void, _name: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "cmn x0, #1",
        "b.eq 2f",
        "mov x2, x30",
        "b {imp}",
        "2:",
        // Keep the arguments and LR across the lookup; sp stays 16-byte aligned.
        "stp x0, x1, [sp, #-32]!",
        "str x30, [sp, #16]",
        "bl {real}",
        "mov x16, x0",
        "ldr x30, [sp, #16]",
        "ldp x0, x1, [sp], #32",
        "cbz x16, 3f",
        "br x16",
        "3:",
        "mov x0, #0",
        "ret",
        imp = sym dlsym_impl,
        real = sym real_dlsym_addr,
    )
}

/// The exported `dlvsym` on aarch64; see [`dlsym`].
#[cfg(target_arch = "aarch64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn dlvsym(_handle: *mut c_void, _name: *const c_char, _version: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "cmn x0, #1",
        "b.eq 2f",
        "mov x3, x30",
        "b {imp}",
        "2:",
        "stp x0, x1, [sp, #-32]!",
        "stp x2, x30, [sp, #16]",
        "bl {real}",
        "mov x16, x0",
        "ldp x2, x30, [sp, #16]",
        "ldp x0, x1, [sp], #32",
        "cbz x16, 3f",
        "br x16",
        "3:",
        "mov x0, #0",
        "ret",
        imp = sym dlvsym_impl,
        real = sym real_dlvsym_addr,
    )
}
