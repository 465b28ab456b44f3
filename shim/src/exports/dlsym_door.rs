//! Door 2: the shim's own `dlsym`/`dlvsym`.
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

use crate::dlsym::{real_dlsym, real_dlsym_addr, real_dlvsym_addr, DlsymFn, DlvsymFn, RTLD_NEXT};
use crate::table::{self, in_libcuda};

/// What `dlsym`/`dlvsym` should return for `name`, given the real answer. Called only by
/// [`dlsym_impl`] and [`dlvsym_impl`], with the program's `name`.
fn substitute(name: *const c_char, real: *mut c_void, caller: usize) -> *mut c_void {
    if real.is_null() || name.is_null() {
        return real;
    }
    // SAFETY: the program's `name`, NUL-terminated by `dlsym`'s contract (its only callers
    // pass it on unchanged); the real lookup just found a symbol by it.
    let name = unsafe { CStr::from_ptr(name) };
    table::install(&super::HOOKS);
    let Some(hook) = table::by_name(name.to_bytes()) else {
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

/// The exported `dlsym` for every handle but `RTLD_NEXT`: reached only by the jump from it,
/// with the program's arguments and return address.
extern "C" fn dlsym_impl(handle: *mut c_void, name: *const c_char, caller: usize) -> *mut c_void {
    let addr = real_dlsym_addr();
    if addr == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: `addr` (non-zero) is libc's `dlsym`, found by name in the symbol table of
    // libc or libdl.
    let f: DlsymFn = unsafe { std::mem::transmute::<usize, DlsymFn>(addr) };
    // SAFETY: the program's arguments to the exported function, unchanged (nothing else
    // jumps here), so they keep its contract.
    let real = unsafe { f(handle, name) };
    substitute(name, real, caller)
}

/// The exported `dlvsym` for every handle but `RTLD_NEXT`: as [`dlsym_impl`].
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
    // SAFETY: `addr` (non-zero) is libc's `dlvsym`, found by name in the symbol table of
    // libc or libdl.
    let f: DlvsymFn = unsafe { std::mem::transmute::<usize, DlvsymFn>(addr) };
    // SAFETY: the program's arguments to the exported function, unchanged (nothing else
    // jumps here), so they keep its contract.
    let real = unsafe { f(handle, name, version) };
    substitute(name, real, caller)
}

/// The exported `dlsym`.
///
/// # Safety
/// `dlsym`'s contract: `handle` is `RTLD_DEFAULT`, `RTLD_NEXT` or a handle `dlopen` returned
/// and nobody closed, and `name` a NUL-terminated string.
///
/// RTLD_NEXT goes to the real dlsym by a tail jump so that glibc sees the program's return
/// address; every other handle goes to [`dlsym_impl`] with the caller's return address as
/// an extra argument.
#[cfg(target_arch = "x86_64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn dlsym(_handle: *mut c_void, _name: *const c_char) -> *mut c_void {
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
///
/// # Safety
/// `dlvsym`'s contract: as `dlsym`'s, and `version` a NUL-terminated string.
#[cfg(target_arch = "x86_64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn dlvsym(_handle: *mut c_void, _name: *const c_char, _version: *const c_char) -> *mut c_void {
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
///
/// # Safety
/// `dlsym`'s contract, as on x86-64.
#[cfg(target_arch = "aarch64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn dlsym(_handle: *mut c_void, _name: *const c_char) -> *mut c_void {
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
///
/// # Safety
/// `dlvsym`'s contract, as on x86-64.
#[cfg(target_arch = "aarch64")]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn dlvsym(_handle: *mut c_void, _name: *const c_char, _version: *const c_char) -> *mut c_void {
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
