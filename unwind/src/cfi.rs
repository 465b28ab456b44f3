//! The cold path: from an instruction address to its [`Rule`], read from the containing module's
//! `.eh_frame_hdr` and `.eh_frame` with gimli.
//!
//! The module registry is glibc's own list of loaded objects, walked with `dl_iterate_phdr` on
//! every miss, and the whole lookup runs inside its callback. Three things follow:
//!
//! * a module loaded after start-up is found on its first miss, with no refresh logic to get
//!   wrong;
//! * glibc holds its module-list lock during the callback, so `dlclose` cannot unmap the CFI we
//!   are reading (the same guarantee libgcc's `_Unwind_Find_FDE` relies on for exceptions), and
//!   the lock is recursive, so a capture from inside another `dl_iterate_phdr` callback or a
//!   library constructor cannot deadlock on it;
//! * the `dlpi_subs` counter tells us when any module was unloaded since the last miss, and the
//!   cache is flushed before the new rule is stored under that same lock.
//!
//! Nothing here allocates. gimli's unwind context and its parsing frames take about 10 KiB of
//! stack, more than a small thread stack or an alternate signal stack has to spare, so the
//! parse runs on a stack of its own (`ColdStack`, mapped on the first miss, one per process:
//! misses are serialised by the module-list lock anyway). A miss that finds it in use (a signal
//! handler interrupting a miss on the same thread) is answered as an address in no module.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EndianSlice, NativeEndian, Pointer, Reader, Register, RegisterRule,
    UnwindContext, UnwindContextStorage, UnwindExpression, UnwindSection, UnwindTableRow, X86_64,
};

use crate::cache;
use crate::rule::Rule;

/// Process-wide count of cache flushes (module unloads seen, plus `modules_changed` calls).
pub(crate) static FLUSHES: AtomicU64 = AtomicU64::new(0);

/// The `dlpi_subs` value seen by the last miss; `u64::MAX` before the first.
static LAST_SUBS: AtomicU64 = AtomicU64::new(u64::MAX);

/// Computes the rule for the instruction at `address` and stores it in the cache. `None` if the
/// address lies in no loaded module (JIT code, garbage); such results are not cached, because a
/// module may be loaded there later.
pub(crate) fn rule_for(address: u64) -> Option<Rule> {
    let mut query = Query {
        address,
        rule: None,
        checked_subs: false,
    };
    // SAFETY: `visit` has the callback type dl_iterate_phdr expects, and its contract (its
    // `# Safety`) holds: `data` is `query`, a local that outlives the call and that nothing
    // else touches until it returns; glibc calls `visit` on this thread only, with its own
    // `info` and `size`.
    unsafe {
        libc::dl_iterate_phdr(Some(visit), (&mut query as *mut Query).cast());
    }
    query.rule
}

/// Flushes the cache and counts it.
pub(crate) fn flush() {
    cache::flush();
    FLUSHES.fetch_add(1, Ordering::Relaxed);
}

struct Query {
    address: u64,
    rule: Option<Rule>,
    checked_subs: bool,
}

/// dl_iterate_phdr's callback: looks `Query::address` up in the module `info` describes.
///
/// # Safety
///
/// Called by dl_iterate_phdr only: `info` points to its description of one loaded object,
/// `size` bytes, valid for this call; `data` points to a `Query` that nothing else uses during
/// the call.
unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, size: usize, data: *mut c_void) -> c_int {
    // SAFETY: the contract above. The reference spans the whole `dl_phdr_info` (64 bytes on
    // x86-64, TLS fields included), which glibc passes whole (`size` is 64 with glibc 2.36);
    // `size` is still checked before `dlpi_subs` is read, as dl_iterate_phdr(3) asks. Both
    // references end with this call.
    let (info, query) = unsafe { (&*info, &mut *data.cast::<Query>()) };
    if !query.checked_subs {
        query.checked_subs = true;
        let subs_end = std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) + 8;
        if size >= subs_end {
            let previous = LAST_SUBS.swap(info.dlpi_subs, Ordering::Relaxed);
            if previous != u64::MAX && previous != info.dlpi_subs {
                flush();
            }
        }
    }
    if info.dlpi_phdr.is_null() || info.dlpi_phnum == 0 {
        return 0;
    }
    // SAFETY: glibc describes each loaded object with `dlpi_phnum` aligned program headers at
    // `dlpi_phdr` (not null: checked above), valid while its module-list lock is held, i.e.
    // during this callback; the slice lives in `module`, which does not outlive it (only the
    // `Copy` rule leaves).
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let module = Module {
        bias: info.dlpi_addr,
        phdrs,
    };
    if module.segment_end(query.address).is_none() {
        return 0;
    }
    let address = query.address;
    let Some(rule) = cold_stack::run(|| module.rule_for(address)) else {
        // Parsed nowhere (the cold stack is busy or could not be mapped): not cached.
        return 1;
    };
    cache::insert(address, rule);
    query.rule = Some(rule);
    1
}

/// The stack that CFI is parsed on (see the module documentation).
mod cold_stack {
    use std::arch::asm;
    use std::ffi::c_void;
    use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

    /// Usable bytes, above one inaccessible guard page: gimli needs about 10 KiB, and a signal
    /// handler of the program may run on it.
    const SIZE: usize = 128 * 1024;
    const GUARD: usize = 4096;

    /// The top of the stack (16-aligned), null until mapped.
    static TOP: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
    static BUSY: AtomicBool = AtomicBool::new(false);

    /// Runs `f` on the cold stack; `None` if it is busy or cannot be mapped, or `f` panicked.
    pub(super) fn run<F: FnOnce() -> R, R>(f: F) -> Option<R> {
        let top = top()?;
        if BUSY.swap(true, Ordering::Acquire) {
            return None;
        }
        let mut slot: (Option<F>, Option<R>) = (Some(f), None);
        // SAFETY: `switch`'s contract: `top` is the 16-aligned top of the mapping `top()` made,
        // SIZE writable bytes above a guard page, which only the holder of BUSY uses (this
        // swap took it: a miss on another thread, or in a signal handler interrupting this one,
        // finds it set and does not switch); SIZE is more than ten times what gimli needs.
        // `trampoline::<F, R>` does not unwind (it catches `f`'s panic, and an `extern "C"` fn
        // aborts rather than unwind), and its own contract holds: `data` is `slot`, typed as it
        // expects, on this frame, which outlives the call, and not touched until it returns.
        unsafe {
            switch(
                top,
                trampoline::<F, R>,
                (&mut slot as *mut (Option<F>, Option<R>)).cast(),
            )
        };
        BUSY.store(false, Ordering::Release);
        slot.1
    }

    /// Calls the closure in the slot at `data` and stores its result there; a panic leaves none.
    ///
    /// # Safety
    ///
    /// `data` must point to a `(Option<F>, Option<R>)`, valid for reads and writes and used by
    /// nothing else during the call.
    unsafe extern "C" fn trampoline<F: FnOnce() -> R, R>(data: *mut c_void) {
        // SAFETY: the contract above; `run`, the only caller (through `switch`), passes its
        // slot.
        let slot = unsafe { &mut *data.cast::<(Option<F>, Option<R>)>() };
        if let Some(f) = slot.0.take() {
            slot.1 = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok();
        }
    }

    /// Calls `f(data)` with the stack pointer at `top`, and restores it after.
    ///
    /// # Safety
    ///
    /// `top` must be the 16-aligned top of writable memory that nothing else uses, big enough
    /// for `f`; `f` must not unwind.
    unsafe fn switch(top: *mut u8, f: unsafe extern "C" fn(*mut c_void), data: *mut c_void) {
        // SAFETY: r12 is callee-saved, so it holds the old stack pointer across the call (it is
        // declared an output, so the compiler keeps nothing of its own there, nor `top` or
        // `f`); the call is made with RSP 16-aligned as the ABI wants, on the caller's memory
        // (`top` and what `f` needs below it, the contract above), and nothing is pushed on
        // this stack, whose red zone stays untouched; every register the C ABI lets `f` change
        // is declared clobbered, and `f` does not unwind (the contract again). A walker that
        // steps out of `f`'s frames reaches this frame with the cold stack's pointer and stops
        // at its bounds.
        unsafe {
            asm!(
                "mov r12, rsp",
                "mov rsp, {top}",
                "call {f}",
                "mov rsp, r12",
                top = in(reg) top,
                f = in(reg) f,
                in("rdi") data,
                out("r12") _,
                clobber_abi("C"),
            );
        }
    }

    /// The stack's top, mapped on first use.
    fn top() -> Option<*mut u8> {
        let top = TOP.load(Ordering::Acquire);
        if !top.is_null() {
            return Some(top);
        }
        // SAFETY: a fresh anonymous private mapping, checked before use, known to nothing else
        // yet; the mprotect touches only its lowest page, making it inaccessible so that an
        // overflow faults instead of writing below. If mprotect fails (ENOMEM: out of
        // mappings), the mapping is given back and no cold stack is used.
        let base = unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                GUARD + SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return None;
            }
            if libc::mprotect(base, GUARD, libc::PROT_NONE) != 0 {
                libc::munmap(base, GUARD + SIZE);
                return None;
            }
            base.cast::<u8>()
        };
        // SAFETY: one past the end of the mapping just made, which `add` allows (the end is
        // page-aligned, so 16-aligned).
        let fresh = unsafe { base.add(GUARD + SIZE) };
        match TOP.compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Some(fresh),
            Err(other) => {
                // SAFETY: the mapping made above, of this size; never published, so nothing refers
                // to it.
                unsafe { libc::munmap(base.cast(), GUARD + SIZE) };
                Some(other)
            }
        }
    }
}

/// One loaded object, as dl_iterate_phdr describes it.
struct Module<'a> {
    bias: u64,
    phdrs: &'a [libc::Elf64_Phdr],
}

impl Module<'_> {
    /// The end of the loaded segment containing `address`, if any: the extent of memory that is
    /// mapped from `address` on.
    fn segment_end(&self, address: u64) -> Option<u64> {
        self.phdrs
            .iter()
            .filter(|ph| ph.p_type == libc::PT_LOAD)
            .find_map(|ph| {
                let start = self.bias.wrapping_add(ph.p_vaddr);
                let end = start.checked_add(ph.p_memsz)?;
                (start <= address && address < end).then_some(end)
            })
    }

    /// `len` bytes at `address` if they lie inside one loaded segment.
    fn bytes(&self, address: u64, len: u64) -> Option<&[u8]> {
        let end = self.segment_end(address)?;
        if len > end - address {
            return None;
        }
        // SAFETY: [address, address + len) lies inside one PT_LOAD segment of this module
        // (`segment_end` checked it, without overflow), and the module stays mapped while
        // glibc's module-list lock is held, i.e. during the callback that made `self`, which the
        // slice (borrowing `self`) cannot outlive. x86-64 loaders map every PT_LOAD segment
        // readable (PROT_EXEC implies PROT_READ there); the bytes read here (.eh_frame_hdr,
        // .eh_frame, code after a return address) are in segments no one writes after loading.
        Some(unsafe { std::slice::from_raw_parts(address as *const u8, len as usize) })
    }

    fn rule_for(&self, address: u64) -> Rule {
        self.rule_from_cfi(address)
            .or_else(|| self.signal_trampoline_without_cfi(address))
            .unwrap_or(Rule::FramePointer)
    }

    fn rule_from_cfi(&self, address: u64) -> Option<Rule> {
        let header = self.phdrs.iter().find(|ph| ph.p_type == libc::PT_GNU_EH_FRAME)?;
        let header_address = self.bias.wrapping_add(header.p_vaddr);
        let header_bytes = self.bytes(header_address, header.p_memsz)?;
        let bases = BaseAddresses::default().set_eh_frame_hdr(header_address);
        let header = EhFrameHdr::new(header_bytes, NativeEndian).parse(&bases, 8).ok()?;
        let Pointer::Direct(eh_frame_address) = header.eh_frame_ptr() else {
            return None;
        };
        // .eh_frame has no recorded length at run time: it runs at most to its segment's end.
        let eh_frame_len = self.segment_end(eh_frame_address)? - eh_frame_address;
        let eh_frame = EhFrame::new(self.bytes(eh_frame_address, eh_frame_len)?, NativeEndian);
        let bases = bases.set_eh_frame(eh_frame_address);
        let table = header.table()?;
        let fde = table
            .fde_for_address(&eh_frame, &bases, address, EhFrame::cie_from_offset)
            .ok()?;
        let mut context = UnwindContext::<usize, OnStack>::new_in();
        let row = fde
            .unwind_info_for_address(&eh_frame, &bases, &mut context, address)
            .ok()?;
        Some(if fde.is_signal_trampoline() {
            signal_rule(row, &eh_frame)
        } else {
            rule_from_row(row, &eh_frame)
        })
    }

    /// libgcc recognises `__restore_rt` by its code when a libc ships it without CFI; so do we.
    /// `address` is the return address minus one, so the trampoline starts one byte later.
    fn signal_trampoline_without_cfi(&self, address: u64) -> Option<Rule> {
        // mov $__NR_rt_sigreturn, %rax; syscall
        const RESTORE_RT: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];
        let code = self.bytes(address.checked_add(1)?, RESTORE_RT.len() as u64)?;
        (code == RESTORE_RT).then_some(Rule::Signal)
    }
}

/// Fixed-size storage for gimli's CFA interpreter: no allocation on the cold path. Programs
/// that need more than 32 register rules or 4 remembered states fail to evaluate and fall back.
struct OnStack;

impl UnwindContextStorage<usize> for OnStack {
    type Rules = [(Register, RegisterRule<usize>); 32];
    type Stack = [UnwindTableRow<usize, Self>; 4];
}

type Section<'a> = EhFrame<EndianSlice<'a, NativeEndian>>;
type Row = UnwindTableRow<usize, OnStack>;

/// Maps an ordinary row (CFA from RSP or RBP, return address at CFA-8) to a rule.
fn rule_from_row(row: &Row, section: &Section<'_>) -> Rule {
    match row.register(X86_64::RA) {
        RegisterRule::Undefined => return Rule::End,
        RegisterRule::Offset(-8) => {}
        _ => return Rule::FramePointer,
    }
    let rbp = row.register(X86_64::RBP);
    match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let Some(slot) = rbp_slot(&rbp) else {
                return Rule::FramePointer;
            };
            match *register {
                X86_64::RSP => Rule::rsp(*offset, slot),
                X86_64::RBP => Rule::rbp(*offset, slot),
                _ => Rule::FramePointer,
            }
        }
        CfaRule::Expression(cfa) => {
            // gcc's DRAP frames: CFA = *(RBP + n), RBP saved at the address RBP + 0.
            let cfa = simple_expression(cfa, section);
            let rbp = match rbp {
                RegisterRule::Expression(rbp) => simple_expression(&rbp, section),
                _ => None,
            };
            match (cfa, rbp) {
                (Some((X86_64::RBP, offset, true)), Some((X86_64::RBP, 0, false))) => Rule::deref_rbp(offset),
                _ => Rule::FramePointer,
            }
        }
    }
}

/// The kernel's `rt_sigframe` as glibc describes it: the `ucontext_t` at RSP, its saved RSP at
/// +160, RBP at +120 and RIP at +168. Anything else in a signal frame is not understood.
fn signal_rule(row: &Row, section: &Section<'_>) -> Rule {
    let saved_at = |rule: RegisterRule<usize>| match rule {
        RegisterRule::Expression(expression) => simple_expression(&expression, section),
        _ => None,
    };
    let cfa = match row.cfa() {
        CfaRule::Expression(cfa) => simple_expression(cfa, section),
        CfaRule::RegisterAndOffset { .. } => None,
    };
    let kernel_layout = cfa == Some((X86_64::RSP, 160, true))
        && saved_at(row.register(X86_64::RA)) == Some((X86_64::RSP, 168, false))
        && saved_at(row.register(X86_64::RBP)) == Some((X86_64::RSP, 120, false));
    if kernel_layout {
        Rule::Signal
    } else {
        Rule::FramePointer
    }
}

/// Where the caller's RBP is: 0 for "unchanged", n for "saved at CFA - 8n". An absent rule means
/// unchanged, as in libgcc (gimli reports it as `Undefined`).
fn rbp_slot(rule: &RegisterRule<usize>) -> Option<u8> {
    match *rule {
        RegisterRule::Undefined | RegisterRule::SameValue => Some(0),
        RegisterRule::Offset(offset) if offset < 0 && offset % 8 == 0 => u8::try_from(-offset / 8).ok(),
        _ => None,
    }
}

/// Decodes `DW_OP_breg<r> <n>` optionally followed by `DW_OP_deref`, the only expression
/// shapes x86-64 compilers and glibc emit for the registers we track: `(r, n, deref)`.
fn simple_expression(expression: &UnwindExpression<usize>, section: &Section<'_>) -> Option<(Register, i64, bool)> {
    const DW_OP_BREG0: u8 = 0x70;
    const DW_OP_BREG31: u8 = 0x8f;
    const DW_OP_DEREF: u8 = 0x06;
    let mut bytes = expression.get(section).ok()?.0;
    let op = bytes.read_u8().ok()?;
    if !(DW_OP_BREG0..=DW_OP_BREG31).contains(&op) {
        return None;
    }
    let offset = bytes.read_sleb128().ok()?;
    let deref = match bytes.read_u8() {
        Err(_) => false,
        Ok(DW_OP_DEREF) if bytes.is_empty() => true,
        Ok(_) => return None,
    };
    Some((Register(u16::from(op - DW_OP_BREG0)), offset, deref))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn some_function() -> u64 {
        std::hint::black_box(42)
    }

    #[test]
    fn addresses_in_no_module_have_no_rule() {
        assert_eq!(rule_for(0x10), None);
    }

    #[test]
    fn a_function_of_this_binary_has_an_ordinary_rule() {
        let entry = some_function as fn() -> u64 as usize as u64;
        // At the first instruction the CFA is RSP + 8 and RBP is untouched.
        assert_eq!(rule_for(entry), Some(Rule::Rsp { cfa: 8, rbp_slot: 0 }));
        assert_eq!(cache::lookup(entry), Some(Rule::Rsp { cfa: 8, rbp_slot: 0 }));
        assert_eq!(some_function(), 42);
    }
}
