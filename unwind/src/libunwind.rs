//! [`Method::LibUnwind`](crate::Method::LibUnwind): nongnu libunwind's `unw_backtrace`.
//!
//! Loaded with `dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL)` and never linked: libunwind
//! exports its own `_Unwind_*` functions, which would take over C++ exception unwinding for the
//! whole process if they entered the global scope.
//!
//! Local unwinding in libunwind reads memory without checking it. From a frame it has no unwind
//! information for (JIT code: Triton, LLVM ORC, LuaJIT), `unw_step` reads 16 bytes of code at
//! the IP (is it a signal trampoline or a PLT entry?), which faults when the code ends its
//! mapping, then follows RBP, which faults when the JIT code keeps data there. `unw_backtrace`
//! gives no chance to look between steps. So each capture first walks the stack with this
//! crate's cached CFI rules ([`walk::all_described`], about 5 ns a frame): when every frame's IP
//! lies in a loaded module, and RBP is a frame record in the live stack wherever a module has no
//! CFI (libunwind then falls back to the frame chain), `unw_backtrace` runs as before.
//! Otherwise the capture walks with `unw_step`, checking each frame the same way before
//! stepping from it, and ends after the first frame that fails (about 500 ns a frame: libunwind's
//! slow path, only for stacks with JIT or otherwise undescribed code).

use std::ffi::{c_int, c_void, CStr};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::rule::Rule;
use crate::thread::{self, Bounds};
use crate::{cache, cfi, walk, InitError};

type UnwBacktrace = unsafe extern "C" fn(buffer: *mut *mut c_void, size: c_int) -> c_int;
type InitLocal = unsafe extern "C" fn(cursor: *mut Cursor, context: *mut Context) -> c_int;
type Step = unsafe extern "C" fn(cursor: *mut Cursor) -> c_int;
type GetReg = unsafe extern "C" fn(cursor: *mut Cursor, register: c_int, value: *mut u64) -> c_int;
type GetContext = unsafe extern "C" fn(context: *mut Context) -> c_int;

/// `unw_context_t` on x86-64 (a `ucontext_t`, 968 bytes in glibc), with room to spare.
#[repr(C, align(16))]
struct Context([u64; 160]);
/// `unw_cursor_t` on x86-64 (`UNW_TDEP_CURSOR_LEN` = 127 words), with room to spare.
#[repr(C, align(16))]
struct Cursor([u64; 160]);

/// libunwind's register numbers on x86-64.
const UNW_X86_64_RBP: c_int = 6;
const UNW_X86_64_RSP: c_int = 7;
const UNW_REG_IP: c_int = 16;

/// The functions, 0 until [`load`] succeeds (`GET_CONTEXT` is stored last).
static GET_CONTEXT: AtomicUsize = AtomicUsize::new(0);
static BACKTRACE: AtomicUsize = AtomicUsize::new(0);
static INIT_LOCAL: AtomicUsize = AtomicUsize::new(0);
static STEP: AtomicUsize = AtomicUsize::new(0);
static GET_REG: AtomicUsize = AtomicUsize::new(0);
/// How many leading entries of a walk belong to this crate's own frames, measured by
/// [`crate::init`] against libgcc.
static LEAD: AtomicUsize = AtomicUsize::new(0);

/// Loads libunwind (once; later calls reuse the handle).
pub(crate) fn load() -> Result<(), InitError> {
    if GET_CONTEXT.load(Ordering::Acquire) != 0 {
        return Ok(());
    }
    let missing = |what: &str| {
        // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call
        // on this thread, and it is copied out at once.
        let detail = unsafe {
            let error = libc::dlerror();
            if error.is_null() {
                String::from("no error reported")
            } else {
                CStr::from_ptr(error).to_string_lossy().into_owned()
            }
        };
        InitError::LibUnwindMissing {
            detail: format!("{what}: {detail}"),
        }
    };
    // SAFETY: the name is a NUL-terminated literal. Loading runs libunwind's initialisers, a
    // system library's, from `init` alone, which is documented for tracer start-up, never
    // inside dlsym or a constructor; RTLD_LOCAL keeps its `_Unwind_*` out of the global scope. The handle is never
    // closed, so the function pointers taken from it stay valid for the life of the process.
    let handle = unsafe { libc::dlopen(c"libunwind.so.8".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(missing("dlopen(libunwind.so.8)"));
    }
    // The names behind libunwind's unw_* macros for local unwinding on x86-64.
    let symbols = [
        (&BACKTRACE, c"unw_backtrace"),
        (&INIT_LOCAL, c"_ULx86_64_init_local"),
        (&STEP, c"_ULx86_64_step"),
        (&GET_REG, c"_ULx86_64_get_reg"),
        (&GET_CONTEXT, c"_Ux86_64_getcontext"),
    ];
    for (slot, name) in symbols {
        // SAFETY: `handle` is a live handle and `name` a NUL-terminated literal.
        let function = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if function.is_null() {
            return Err(missing(&format!("dlsym({})", name.to_string_lossy())));
        }
        slot.store(function as usize, Ordering::Release);
    }
    Ok(())
}

/// Sets how many leading entries to drop (see [`LEAD`]).
pub(crate) fn set_lead(lead: usize) {
    LEAD.store(lead, Ordering::Relaxed);
}

/// Stack buffer size of the fast path: captures asking for up to this many entries
/// (including skipped ones) are copied out of it; deeper requests go straight into `out`.
const BUFFER: usize = 256;

/// Captures with libunwind, dropping this crate's own frames and `skip` more.
#[inline(never)]
pub(crate) fn capture(skip: usize, out: &mut [u64]) -> usize {
    let regs = walk::registers();
    let drop = LEAD.load(Ordering::Relaxed).saturating_add(skip);
    let wanted = out.len().saturating_add(drop);
    if GET_CONTEXT.load(Ordering::Acquire) == 0 || out.is_empty() {
        return 0;
    }
    // One more frame than `unw_backtrace` will visit: the walk starts in this function.
    if walk::all_described(regs, wanted.saturating_add(1)) {
        backtrace(drop, out)
    } else {
        checked_steps(drop, out)
    }
}

/// `unw_backtrace`, for stacks [`walk::all_described`] found safe.
#[inline(always)]
fn backtrace(drop: usize, out: &mut [u64]) -> usize {
    // SAFETY: BACKTRACE was stored by `load` (with Release, before GET_CONTEXT, which the only
    // caller, `capture`, read as set with Acquire, so it is not 0 here) from
    // dlsym("unw_backtrace"), whose signature is `int unw_backtrace(void **buffer, int size)`,
    // in a library never unloaded.
    let backtrace = unsafe { std::mem::transmute::<usize, UnwBacktrace>(BACKTRACE.load(Ordering::Relaxed)) };
    let wanted = out.len().saturating_add(drop);
    if wanted <= BUFFER {
        let mut buffer = [MaybeUninit::<u64>::uninit(); BUFFER];
        // SAFETY: the buffer has room for `wanted` (at most BUFFER) pointer-sized entries;
        // unw_backtrace writes at most `size` of them and returns how many. Its reads of the
        // stack and of code stay in mapped memory because `capture` called this only after
        // `walk::all_described` vouched for every frame it will step from (module docs).
        let got = unsafe { backtrace(buffer.as_mut_ptr().cast(), wanted as c_int) };
        let got = usize::try_from(got).unwrap_or(0).min(wanted);
        let kept = got.saturating_sub(drop);
        for (slot, entry) in out.iter_mut().zip(&buffer[drop.min(got)..got]) {
            // SAFETY: entries below `got` were written by unw_backtrace.
            *slot = unsafe { entry.assume_init() };
        }
        kept
    } else {
        let size = c_int::try_from(out.len()).unwrap_or(c_int::MAX);
        // SAFETY: `out` has room for `size` u64 entries, the same size as pointers here; the
        // stack was vouched for as above.
        let got = unsafe { backtrace(out.as_mut_ptr().cast::<*mut c_void>(), size) };
        let got = usize::try_from(got).unwrap_or(0).min(out.len());
        if got <= drop {
            return 0;
        }
        out.copy_within(drop..got, 0);
        got - drop
    }
}

/// Walks with `unw_step`, checking each frame with [`can_step_from`] before stepping from it.
#[inline(always)]
fn checked_steps(mut drop: usize, out: &mut [u64]) -> usize {
    let (get_context, init_local, step, get_reg) = (
        GET_CONTEXT.load(Ordering::Acquire),
        INIT_LOCAL.load(Ordering::Relaxed),
        STEP.load(Ordering::Relaxed),
        GET_REG.load(Ordering::Relaxed),
    );
    // SAFETY: all four were stored by `load` from dlsym of the functions with these signatures
    // (`int unw_getcontext(unw_context_t *)`, `int unw_init_local(unw_cursor_t *, unw_context_t
    // *)`, `int unw_step(unw_cursor_t *)`, `int unw_get_reg(unw_cursor_t *, int, unw_word_t *)`)
    // in a library never unloaded, GET_CONTEXT last (Release), and read here after it
    // (Acquire); none is 0, since `capture`, the only caller, saw GET_CONTEXT set and nothing
    // clears it.
    let (get_context, init_local, step, get_reg) = unsafe {
        (
            std::mem::transmute::<usize, GetContext>(get_context),
            std::mem::transmute::<usize, InitLocal>(init_local),
            std::mem::transmute::<usize, Step>(step),
            std::mem::transmute::<usize, GetReg>(get_reg),
        )
    };
    let mut context = MaybeUninit::<Context>::uninit();
    let mut cursor = MaybeUninit::<Cursor>::uninit();
    // SAFETY: both buffers are at least as large and as aligned as libunwind's types (1,280
    // bytes, 16-aligned, against 968 and 1,016 on x86-64); unw_getcontext fills the context
    // and unw_init_local the cursor from it, which are used only when they succeed.
    if unsafe { get_context(context.as_mut_ptr()) != 0 || init_local(cursor.as_mut_ptr(), context.as_mut_ptr()) != 0 } {
        return 0;
    }
    let cursor = cursor.as_mut_ptr();
    // SAFETY: `cursor` was initialised above and lives in this frame, which the closure (used
    // only below) does not leave; get_reg writes one word, into `value`.
    let register = |number: c_int| unsafe {
        let mut value = 0u64;
        (get_reg(cursor, number, &mut value) == 0).then_some(value)
    };
    let Some(sp) = register(UNW_X86_64_RSP) else { return 0 };
    let mut n = 0;
    thread::with_bounds(sp & !7, false, |bounds, _, _| {
        while n < out.len() {
            let Some(ip) = register(UNW_REG_IP).filter(|&ip| ip != 0) else {
                break;
            };
            if drop > 0 {
                drop -= 1;
            } else {
                out[n] = ip;
                n += 1;
            }
            if !can_step_from(ip, &bounds, || register(UNW_X86_64_RBP)) {
                break;
            }
            // SAFETY: the cursor is initialised, and `can_step_from` checked that every read
            // this step makes is inside memory that stays mapped (see the module documentation).
            if unsafe { step(cursor) } <= 0 {
                break;
            }
        }
    });
    n
}

/// Whether libunwind can step from the frame at `ip` without reading unmapped memory: the IP
/// lies in a loaded module, and where that module has no CFI for it, RBP is a frame record in
/// the live stack.
fn can_step_from(ip: u64, bounds: &Bounds, rbp: impl FnOnce() -> Option<u64>) -> bool {
    let address = ip.wrapping_sub(1);
    match cache::lookup(address).or_else(|| cfi::rule_for(address)) {
        None => false,
        Some(Rule::FramePointer) => {
            rbp().is_some_and(|rbp| bounds.read(rbp).is_some() && bounds.read(rbp.wrapping_add(8)).is_some())
        }
        Some(_) => true,
    }
}
