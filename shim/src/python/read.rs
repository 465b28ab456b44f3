//! Reading the interpreter's memory: directly once the layout is proven, through
//! `process_vm_readv` (which reports a bad address as an error instead of faulting) before, or
//! through `/proc/self/mem` where a seccomp filter refuses `process_vm_readv`.

use std::sync::atomic::{AtomicBool, Ordering};

/// Lowest address a heap or data pointer can have (the first pages are never mapped).
const LOW: u64 = 0x10000;
/// One past the highest user-space address: 2^47 on x86-64 with 4-level paging, 2^48 on
/// aarch64 with 48-bit virtual addresses, the usual kernel configuration, where stacks and
/// mappings sit just below 2^48. (5-level paging and 52-bit address spaces give more, but the
/// kernel hands out addresses above these only to programs that ask for them.)
#[cfg(target_arch = "aarch64")]
const HIGH: u64 = 1 << 48;
#[cfg(not(target_arch = "aarch64"))]
const HIGH: u64 = 1 << 47;

/// Whether `p` can be a pointer to an interpreter structure: aligned, in user space.
#[inline(always)]
pub fn plausible(p: u64) -> bool {
    p & 7 == 0 && (LOW..HIGH).contains(&p)
}

/// How to read.
#[derive(Debug, Clone, Copy)]
pub enum Mem {
    /// Plain loads: for a proven layout on pointers taken from the interpreter's own
    /// structures of the calling thread.
    Direct,
    /// [`copy`]: `process_vm_readv` on this process, or `/proc/self/mem`.
    Careful,
}

/// Set once `process_vm_readv` has been refused: by a seccomp filter (`EPERM`: the default
/// profiles of Docker before 20.10 and containerd before 1.7, and stricter ones; a process may
/// always read itself otherwise) or by a kernel or emulator without it (`ENOSYS`, qemu-user).
static VM_READV_REFUSED: AtomicBool = AtomicBool::new(false);

/// Copies `buf.len()` bytes from `addr` with `process_vm_readv`, or from `/proc/self/mem` once
/// that is refused; false when any is not readable.
pub fn copy(addr: u64, buf: &mut [u8]) -> bool {
    if buf.is_empty() {
        return true;
    }
    if addr < LOW || addr.checked_add(buf.len() as u64).is_none_or(|end| end > HIGH) {
        return false;
    }
    if !VM_READV_REFUSED.load(Ordering::Relaxed) {
        let got = crate::sys::read_own_memory(addr, buf);
        if got == buf.len() as isize {
            return true;
        }
        let refused = matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EPERM | libc::ENOSYS)
        );
        if got >= 0 || !refused {
            return false;
        }
        VM_READV_REFUSED.store(true, Ordering::Relaxed);
    }
    copy_from_proc_mem(addr, buf)
}

/// [`copy`] through `/proc/self/mem`, opened for each copy: a descriptor kept open would name
/// the parent's memory in a forked child, and could be closed and its number reused by the
/// program. A read of an unmapped address fails with `EIO`.
fn copy_from_proc_mem(addr: u64, buf: &mut [u8]) -> bool {
    let fd = crate::sys::open(c"/proc/self/mem", libc::O_RDONLY | libc::O_CLOEXEC, 0);
    if fd < 0 {
        return false;
    }
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        let got = crate::sys::pread(fd, rest, addr + done as u64);
        if got <= 0 {
            break;
        }
        done += got as usize;
    }
    crate::sys::close(fd);
    done == buf.len()
}

impl Mem {
    #[inline(always)]
    fn word<const N: usize>(self, addr: u64) -> Option<[u8; N]> {
        if addr < LOW || addr >= HIGH - N as u64 {
            return None;
        }
        match self {
            Mem::Direct => {
                // SAFETY: `Direct` is used only after a careful walk proved this layout in
                // this process, on addresses inside the calling thread's own thread state,
                // frames and the code objects those frames hold alive (the thread is in our
                // hook, so none of them can be freed or changed meanwhile); an unaligned read
                // is allowed by `read_unaligned`.
                Some(unsafe { std::ptr::read_unaligned(addr as *const [u8; N]) })
            }
            Mem::Careful => {
                let mut b = [0u8; N];
                copy(addr, &mut b).then_some(b)
            }
        }
    }

    /// A pointer-sized word.
    #[inline(always)]
    pub fn ptr(self, addr: u64) -> Option<u64> {
        self.word::<8>(addr).map(u64::from_ne_bytes)
    }

    /// A C `int`.
    #[inline(always)]
    pub fn i32(self, addr: u64) -> Option<i32> {
        self.word::<4>(addr).map(i32::from_ne_bytes)
    }

    /// A byte.
    #[inline(always)]
    pub fn u8(self, addr: u64) -> Option<u8> {
        self.word::<1>(addr).map(|b| b[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn careful_reads_fail_on_unmapped_memory_and_read_mapped_memory() {
        let x: u64 = 0x1122_3344_5566_7788;
        let at = &x as *const u64 as u64;
        assert_eq!(Mem::Careful.ptr(at), Some(x));
        assert_eq!(Mem::Direct.ptr(at), Some(x));
        assert_eq!(Mem::Careful.u8(at), Some(0x88));
        assert_eq!(Mem::Careful.ptr(0x10_0000), None, "the first megabyte is not mapped");
        assert_eq!(Mem::Careful.ptr(8), None);
        assert_eq!(Mem::Careful.ptr(u64::MAX - 3), None);
        assert!(!plausible(at + 1));
        assert!(plausible(at));
        assert!(!plausible(0));
    }

    #[test]
    fn proc_mem_reads_fail_on_unmapped_memory_and_read_mapped_memory() {
        let x: u64 = 0x1122_3344_5566_7788;
        let at = &x as *const u64 as u64;
        let mut b = [0u8; 8];
        assert!(copy_from_proc_mem(at, &mut b));
        assert_eq!(u64::from_ne_bytes(b), x);
        assert!(
            !copy_from_proc_mem(0x10_0000, &mut b),
            "the first megabyte is not mapped"
        );
        let big = vec![7u8; 1 << 20];
        let mut back = vec![0u8; big.len()];
        assert!(copy_from_proc_mem(big.as_ptr() as u64, &mut back));
        assert!(back == big);
    }
}
