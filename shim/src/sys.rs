//! The C library's system calls that are safe for every argument their Rust types allow,
//! behind safe functions: each `unsafe` block that calls one is here, with its reason.
//!
//! Calls whose safety depends on what the caller does with memory (`mmap` of a file,
//! `munmap`, installing a signal handler, the loader's tables) stay at their one caller, where
//! the reason can be checked against the code around it.

use std::ffi::{c_int, CStr};

/// `getpid()`.
#[inline]
pub fn getpid() -> u32 {
    // SAFETY: takes no argument and cannot fail.
    unsafe { libc::getpid() as u32 }
}

/// `getppid()`.
#[inline]
pub fn getppid() -> u32 {
    // SAFETY: takes no argument and cannot fail.
    unsafe { libc::getppid() as u32 }
}

/// `gettid()` (by system call: glibc before 2.30 has no wrapper).
#[inline]
pub fn gettid() -> i32 {
    // SAFETY: SYS_gettid takes no argument and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Whether thread `tid` of process `pid` exists (`tgkill(pid, tid, 0)`: no signal is sent);
/// false only when the kernel says it does not (`ESRCH`).
pub fn thread_exists(pid: i32, tid: i32) -> bool {
    // SAFETY: signal 0 only checks that the thread exists; any ids are allowed.
    let rc = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// `clock_gettime(clock)` in nanoseconds (0 if the clock does not exist).
#[inline]
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes one timespec into `ts`; an unknown clock is only an error.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// `close(fd)`, result ignored: every caller closes a descriptor it opened, once.
#[inline]
pub fn close(fd: c_int) {
    // SAFETY: closing touches no memory; a bad descriptor is only an error.
    unsafe { libc::close(fd) };
}

/// `write(fd, bytes)`: bytes written, or -1.
#[inline]
pub fn write(fd: c_int, bytes: &[u8]) -> isize {
    // SAFETY: reads at most `bytes.len()` bytes of a live slice.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) }
}

/// `pwrite(fd, bytes, offset)`: bytes written, or -1.
#[inline]
pub fn pwrite(fd: c_int, bytes: &[u8], offset: u64) -> isize {
    // SAFETY: reads at most `bytes.len()` bytes of a live slice.
    unsafe { libc::pwrite(fd, bytes.as_ptr().cast(), bytes.len(), offset as libc::off_t) }
}

/// `open(path, flags, mode)`: the new descriptor, or -1.
pub fn open(path: &CStr, flags: c_int, mode: libc::mode_t) -> c_int {
    // SAFETY: `path` is NUL-terminated; the mode is read only with O_CREAT or O_TMPFILE.
    unsafe { libc::open(path.as_ptr(), flags, mode) }
}

/// `unlink(path)`: 0 or -1.
pub fn unlink(path: &CStr) -> c_int {
    // SAFETY: `path` is NUL-terminated.
    unsafe { libc::unlink(path.as_ptr()) }
}

/// `fstat(fd)`, or `None` when the descriptor is not open (async-signal-safe).
pub fn fstat(fd: c_int) -> Option<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: writes one struct stat into `st`; a bad descriptor is only an error.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded and filled `st` (zeroed before: every byte initialised).
    Some(unsafe { st.assume_init() })
}

/// `lstat(path)`, or `None` on error.
pub fn lstat(path: &CStr) -> Option<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: `path` is NUL-terminated; writes one struct stat into `st`.
    if unsafe { libc::lstat(path.as_ptr(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: lstat succeeded and filled `st` (zeroed before: every byte initialised).
    Some(unsafe { st.assume_init() })
}

/// `ftruncate(fd, len)`: 0 or -1.
pub fn ftruncate(fd: c_int, len: u64) -> c_int {
    // SAFETY: touches no memory; a bad descriptor or length is only an error.
    unsafe { libc::ftruncate(fd, len as libc::off_t) }
}

/// `getrlimit(resource)`, or `None` on error.
pub fn getrlimit(resource: libc::__rlimit_resource_t) -> Option<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: writes one struct rlimit into `lim`.
    (unsafe { libc::getrlimit(resource, &mut lim) } == 0).then_some(lim)
}

/// `gethostname` into `buf`, keeping its last byte NUL: 0 or -1.
pub fn gethostname(buf: &mut [u8]) -> c_int {
    let Some(len) = buf.len().checked_sub(1) else { return -1 };
    // SAFETY: writes at most `len` bytes into `buf`, whose last byte stays as it was.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), len) }
}

/// `getrandom(buf, flags)`: bytes written, or -1.
pub fn getrandom(buf: &mut [u8], flags: libc::c_uint) -> isize {
    // SAFETY: writes at most `buf.len()` bytes into `buf`.
    unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), flags) }
}

/// `pread(fd, buf, offset)`: bytes read, or -1.
pub fn pread(fd: c_int, buf: &mut [u8], offset: u64) -> isize {
    // SAFETY: writes at most `buf.len()` bytes into `buf`.
    unsafe { libc::pread64(fd, buf.as_mut_ptr().cast(), buf.len(), offset as i64) }
}

/// `recv(fd, buf, flags)`: bytes received, or -1.
pub fn recv(fd: c_int, buf: &mut [u8], flags: c_int) -> isize {
    // SAFETY: writes at most `buf.len()` bytes into `buf`.
    unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags) }
}

/// `send(fd, bytes, flags)`: bytes sent, or -1.
pub fn send(fd: c_int, bytes: &[u8], flags: c_int) -> isize {
    // SAFETY: reads at most `bytes.len()` bytes of a live slice.
    unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), flags) }
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, low)`: the copy's number, or -1.
pub fn dup_at_least(fd: c_int, low: c_int) -> c_int {
    // SAFETY: touches no memory; a bad descriptor is only an error.
    unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, low) }
}

/// `getauxval(kind)`: the entry of the auxiliary vector the kernel passed at exec (0: absent).
pub fn getauxval(kind: libc::c_ulong) -> libc::c_ulong {
    // SAFETY: only reads the auxiliary vector.
    unsafe { libc::getauxval(kind) }
}

/// Blocks every signal on the calling thread (the shim's own threads: the program's
/// handlers must never run on them).
pub fn block_all_signals() {
    // SAFETY: fills a local signal set and applies it to this thread only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Lowers the calling thread's priority to nice `value` (Linux gives each thread its own).
pub fn set_thread_nice(value: c_int) {
    // SAFETY: setpriority on the calling thread's own id touches no memory.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, gettid() as libc::id_t, value) };
}

/// `linkat(AT_FDCWD, from, AT_FDCWD, to, flags)`: 0 or -1.
pub fn linkat(from: &CStr, to: &CStr, flags: c_int) -> c_int {
    // SAFETY: both paths are NUL-terminated.
    unsafe { libc::linkat(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), flags) }
}

/// Whether `fd` is on tmpfs (`fstatfs`; false on error).
pub fn on_tmpfs(fd: c_int) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: writes one struct statfs into `st`; a bad descriptor is only an error.
    if unsafe { libc::fstatfs(fd, st.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: fstatfs succeeded and filled `st` (zeroed before: every byte initialised).
    unsafe { st.assume_init() }.f_type == libc::TMPFS_MAGIC
}

/// `posix_fallocate(fd, offset, len)`: 0 or an error number.
pub fn posix_fallocate(fd: c_int, offset: u64, len: u64) -> c_int {
    // SAFETY: touches no memory; a bad descriptor or range is only an error.
    unsafe { libc::posix_fallocate(fd, offset as libc::off_t, len as libc::off_t) }
}

/// `fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, len)`: whether the range
/// now reads as zeros and holds no blocks.
pub fn punch_hole(fd: c_int, offset: u64, len: u64) -> bool {
    // SAFETY: touches no memory; a bad descriptor or range is only an error.
    let rc = unsafe {
        libc::fallocate(
            fd,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset as libc::off_t,
            len as libc::off_t,
        )
    };
    rc == 0
}

/// Registers `child` to run in the child process after each `fork`
/// (`pthread_atfork(NULL, NULL, child)`): 0 or an error number.
pub fn at_fork_child(child: extern "C" fn()) -> c_int {
    // SAFETY: stores a function pointer in libc's list; `child` is a safe function, callable
    // whenever libc calls it.
    unsafe { libc::pthread_atfork(None, None, Some(child)) }
}

/// `poll(fds, timeout_ms)`: how many descriptors are ready, or -1.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: c_int) -> c_int {
    // SAFETY: reads and writes the `fds.len()` entries of a live slice; a negative descriptor
    // is skipped.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) }
}

/// `accept4(fd, NULL, NULL, flags)`: the new connection's descriptor, or -1.
pub fn accept(fd: c_int, flags: c_int) -> c_int {
    // SAFETY: no address is asked for (both pointers NULL); a bad descriptor is only an error.
    unsafe { libc::accept4(fd, std::ptr::null_mut(), std::ptr::null_mut(), flags) }
}

/// `getsockname(fd)` into `addr`: the address's full length (more than `addr.len()` when it
/// was cut short), or `None` on error.
pub fn getsockname(fd: c_int, addr: &mut [u8]) -> Option<libc::socklen_t> {
    let mut len = addr.len() as libc::socklen_t;
    // SAFETY: writes at most `len` (the slice's length) bytes into `addr`, and one socklen_t
    // into `len`; a bad descriptor is only an error.
    let rc = unsafe { libc::getsockname(fd, addr.as_mut_ptr().cast(), &mut len) };
    (rc == 0).then_some(len)
}

/// The current disposition of signal `sig` (`sigaction(sig, NULL, &old)`), or `None` on
/// error.
pub fn signal_disposition(sig: c_int) -> Option<libc::sigaction> {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: no new action (NULL): only writes one struct sigaction into `old`.
    if unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: sigaction succeeded and filled `old` (zeroed before: every byte initialised).
    Some(unsafe { old.assume_init() })
}

/// Whether the calling thread runs on its alternate signal stack (`sigaltstack`); true when
/// that cannot be told.
pub fn on_alternate_signal_stack() -> bool {
    let mut ss = libc::stack_t {
        ss_sp: std::ptr::null_mut(),
        ss_flags: 0,
        ss_size: 0,
    };
    // SAFETY: no new stack (NULL): only writes one stack_t into `ss`.
    let rc = unsafe { libc::sigaltstack(std::ptr::null(), &mut ss) };
    rc != 0 || ss.ss_flags & libc::SS_ONSTACK != 0
}

/// A fresh private anonymous read-write mapping of `len` bytes (whole pages), zero-filled,
/// placed where the kernel chooses; `None` on failure.
pub fn map_anonymous(len: usize) -> Option<*mut libc::c_void> {
    // SAFETY: with no address hint (NULL) and without MAP_FIXED, the kernel places the
    // mapping where nothing is mapped: no existing memory changes.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p)
}

/// Copies this process's memory at `addr` into `buf` with `process_vm_readv`, which the
/// kernel checks: the bytes copied, or -1 (`EFAULT` for an unmapped range, never a fault).
#[inline]
pub fn read_own_memory(addr: u64, buf: &mut [u8]) -> isize {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: writes at most `buf.len()` bytes into `buf`; the remote range is only read, by
    // the kernel, which fails with EFAULT where it is not mapped instead of faulting.
    unsafe { libc::process_vm_readv(getpid() as libc::pid_t, &local, 1, &remote, 1, 0) }
}
