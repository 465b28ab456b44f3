//! The background thread (`gpuleak-ops`): serves the metrics page ([`super::metrics::render`])
//! on `GPULEAK_METRICS`, writes period snapshots and the signal's snapshots while the program
//! makes no CUDA calls.
//!
//! Started at the first intercepted call that finds a feature needing it, never in a
//! constructor; it blocks every signal, so the program's handlers keep running on the
//! program's threads. One thread and no thread per connection: non-blocking sockets
//! multiplexed with `poll`. At most [`MAX_CONNECTIONS`] are open (a new one pushes out the
//! oldest still sending its request after [`GRACE_MS`]; until then it waits in the listen
//! backlog), each has [`DEADLINE_MS`] for its whole exchange, and
//! responses are written as the socket takes them. The thread never sleeps past the next
//! snapshot tick, so no client delays another client or a snapshot.
//!
//! The shim lives in other people's processes, which may close descriptors they did not open
//! (`close_range`) and reuse the numbers for their own files and sockets. Every descriptor
//! the thread holds keeps the identity of its socket (device, inode, local address) taken
//! when it was opened, checked before the thread accepts on it, reads from it, writes to it
//! or closes it, and every second. On a mismatch the thread stops serving, closes only what
//! is still its own and says so in one line; snapshots go on. (A descriptor replaced between
//! the check and the call, microseconds apart, is not caught.)
//!
//! In a forked child the thread does not exist: the inherited sockets that are still ours are
//! closed and the thread started again at the child's next intercepted call (serving metrics
//! only if the address is free: the parent usually still holds it, and the child then says
//! so in one line and serves none, unless the setting asked for the first free port,
//! `PORT+`).

use std::net::TcpListener;
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use super::settings::{settings, FLAGS, SNAPSHOT_DUE};
use super::{metrics, snapshot};
use crate::guard;

/// Connections open at once; a new one beyond pushes out the oldest.
pub const MAX_CONNECTIONS: usize = 16;
/// Time a connection has, from its accept, to send its request and take the response.
pub const DEADLINE_MS: u64 = 5_000;
/// How long a connection still sending its request is safe from being pushed out.
const GRACE_MS: u64 = 200;
/// The longest request head read (Prometheus sends a few hundred bytes).
const MAX_REQUEST: usize = 16 * 1024;
/// The longest the thread sleeps, whatever else it waits for.
const TICK_MS: u64 = 100;
/// How often every descriptor is checked even without events on it.
const CHECK_EVERY_MS: u64 = 1_000;

static STARTED: AtomicBool = AtomicBool::new(false);

/// The descriptors the thread holds (slot 0: the listener), mirrored for a forked child,
/// which must close them without the thread: descriptor (-1: none), device and inode.
struct Registered {
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
}

static REGISTRY: [Registered; 1 + MAX_CONNECTIONS] = [const {
    Registered {
        fd: AtomicI32::new(-1),
        dev: AtomicU64::new(0),
        ino: AtomicU64::new(0),
    }
}; 1 + MAX_CONNECTIONS];

/// Starts the background thread (once per process).
pub fn start_background() {
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let s = settings();
    let listener = s.metrics.and_then(|addr| match bind(addr, s.metrics_ports) {
        Ok(l) => {
            if l.set_nonblocking(true).is_err() {
                crate::diag::line(format_args!("cannot serve metrics on {addr}: socket setup failed"));
                return None;
            }
            let fd = l.into_raw_fd();
            match Ours::adopt(fd, 0) {
                Some(ours) => Some(ours),
                None => {
                    // The descriptor TcpListener just opened and handed over.
                    crate::sys::close(fd);
                    crate::diag::line(format_args!("cannot serve metrics on {addr}: socket setup failed"));
                    None
                }
            }
        }
        Err(e) => {
            let tried = if s.metrics_ports > 1 {
                format!(
                    " (ports {} to {})",
                    addr.port(),
                    addr.port().saturating_add(s.metrics_ports - 1)
                )
            } else {
                String::new()
            };
            crate::diag::line(format_args!(
                "cannot serve metrics on {addr}{tried}: {e}; metrics are off"
            ));
            None
        }
    });
    // At least 1 ms; a period too long for u64 milliseconds is as good as never.
    let period = s
        .snapshot_period
        .map(|p| u64::try_from(p.as_millis()).unwrap_or(u64::MAX).max(1));
    let spawned = std::thread::Builder::new()
        .name("gpuleak-ops".into())
        .spawn(move || run(listener.map(Server::new), period));
    if let Err(e) = spawned {
        crate::diag::line(format_args!(
            "cannot start the metrics and snapshot thread: {e}; it is off"
        ));
    }
}

/// Binds `addr`, or with `ports > 1` the first free port from `addr`'s on.
fn bind(addr: std::net::SocketAddr, ports: u16) -> std::io::Result<TcpListener> {
    let mut last = None;
    for i in 0..ports {
        let Some(port) = addr.port().checked_add(i) else { break };
        match TcpListener::bind(std::net::SocketAddr::new(addr.ip(), port)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrInUse)))
}

/// In a forked child (async-signal-safe work only): closes the parent's sockets that are
/// still ours; true if a thread must be started again.
pub fn forget_in_child() -> bool {
    for r in &REGISTRY {
        let fd = r.fd.swap(-1, Ordering::AcqRel);
        if fd >= 0 && same_file(fd, r.dev.load(Ordering::Acquire), r.ino.load(Ordering::Acquire)) {
            // Our own socket, inherited and checked to be the same file; nothing in the child
            // uses it (the thread that owned it does not exist here).
            crate::sys::close(fd);
        }
    }
    STARTED.swap(false, Ordering::AcqRel)
}

/// Whether `fd` names the socket with this device and inode (`fstat` only: async-signal-safe).
fn same_file(fd: i32, dev: u64, ino: u64) -> bool {
    crate::fd::FileId::of(fd).is_some_and(|id| id.is_socket() && id.dev == dev && id.ino == ino)
}

/// Milliseconds on the monotonic clock. Plain integers with saturating arithmetic: no setting
/// or clock value can make the thread's time arithmetic panic (as `Instant + Duration` can).
fn now_ms() -> u64 {
    crate::sys::clock_ns(libc::CLOCK_MONOTONIC) / 1_000_000
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn run(mut server: Option<Server>, period: Option<u64>) {
    crate::sys::block_all_signals();
    let mut next_tick = period.map(|p| now_ms().saturating_add(p));
    loop {
        let now = now_ms();
        if let (Some(p), Some(n)) = (period, next_tick) {
            if now >= n {
                snapshot::period_due();
                // A late tick (a stopped process) is one snapshot, not a burst.
                next_tick = Some(if now - n > p {
                    now.saturating_add(p)
                } else {
                    n.saturating_add(p)
                });
            }
        }
        if FLAGS.load(Ordering::Acquire) & SNAPSHOT_DUE != 0 {
            if let Some(g) = guard::enter() {
                snapshot::write_due(&g);
            }
        }
        let mut wake = now.saturating_add(TICK_MS);
        if let Some(n) = next_tick {
            wake = wake.min(n);
        }
        match server.as_mut() {
            Some(s) => {
                wake = wake.min(s.next_deadline());
                if let Err(lost) = s.step(wake.saturating_sub(now)) {
                    crate::diag::line(format_args!(
                        "the {} (descriptor {}) is no longer ours: the program closed it, and may reuse the number; metrics are off",
                        lost.what, lost.fd
                    ));
                    if let Some(s) = server.take() {
                        s.shut_down();
                    }
                }
            }
            None => std::thread::sleep(std::time::Duration::from_millis(wake.saturating_sub(now))),
        }
    }
}

/// A descriptor that is no longer the socket we opened.
struct Lost {
    what: &'static str,
    fd: i32,
}

/// What a socket was when we opened it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    /// The local address (`getsockname`), an IPv4 or IPv6 one.
    local: [u8; 28],
    local_len: u32,
}

impl Identity {
    fn of(fd: i32) -> Option<Identity> {
        let id = crate::fd::FileId::of(fd).filter(crate::fd::FileId::is_socket)?;
        let mut local = [0u8; 28];
        let local_len = crate::sys::getsockname(fd, &mut local)?;
        Some(Identity {
            dev: id.dev,
            ino: id.ino,
            local,
            local_len,
        })
    }
}

/// A socket descriptor we opened, with its identity and its slot in [`REGISTRY`].
struct Ours {
    fd: i32,
    id: Identity,
    slot: usize,
}

impl Ours {
    /// Takes `fd`, just opened by us, into registry slot `slot`.
    fn adopt(fd: i32, slot: usize) -> Option<Ours> {
        let id = Identity::of(fd)?;
        let r = &REGISTRY[slot];
        r.dev.store(id.dev, Ordering::Release);
        r.ino.store(id.ino, Ordering::Release);
        r.fd.store(fd, Ordering::Release);
        Some(Ours { fd, id, slot })
    }

    /// Whether the descriptor still names the socket we opened.
    fn still_ours(&self) -> bool {
        Identity::of(self.fd) == Some(self.id)
    }

    /// Closes the descriptor if it is still ours; false (and nothing closed) if it is not.
    fn close(self) -> bool {
        REGISTRY[self.slot].fd.store(-1, Ordering::Release);
        if !self.still_ours() {
            return false;
        }
        // The socket we opened, checked just now; no other copy of the number is used after
        // this.
        crate::sys::close(self.fd);
        true
    }
}

enum State {
    /// Reading the request head.
    Reading(Vec<u8>),
    /// Writing the response; bytes sent so far.
    Writing(Vec<u8>, usize),
}

struct Conn {
    sock: Ours,
    opened: u64,
    state: State,
}

/// What a connection needs next.
enum Next {
    Wait,
    Close,
}

impl Conn {
    fn events(&self) -> libc::c_short {
        match self.state {
            State::Reading(_) => libc::POLLIN,
            State::Writing(..) => libc::POLLOUT,
        }
    }

    /// Reads what has come, answers once the request head is complete, writes what the
    /// socket takes; never blocks.
    fn advance(&mut self, revents: libc::c_short) -> Next {
        if let State::Reading(req) = &mut self.state {
            let mut buf = [0u8; 4096];
            let mut ended = false;
            while req.len() < MAX_REQUEST {
                let n = crate::sys::recv(self.sock.fd, &mut buf, libc::MSG_DONTWAIT);
                if n > 0 {
                    req.extend_from_slice(&buf[..n as usize]);
                    continue;
                }
                if n == 0 {
                    ended = true;
                    break;
                }
                match errno() {
                    libc::EINTR => continue,
                    libc::EAGAIN => break,
                    _ => return Next::Close,
                }
            }
            let complete = req.windows(4).any(|w| w == b"\r\n\r\n");
            if complete || ended || req.len() >= MAX_REQUEST {
                self.state = State::Writing(respond(req), 0);
            } else if revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                return Next::Close;
            } else {
                return Next::Wait;
            }
        }
        let State::Writing(out, sent) = &mut self.state else {
            return Next::Wait;
        };
        while *sent < out.len() {
            let rest = &out[*sent..];
            // MSG_NOSIGNAL: a client gone raises no SIGPIPE in the program.
            let n = crate::sys::send(self.sock.fd, rest, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL);
            if n > 0 {
                *sent += n as usize;
                continue;
            }
            match errno() {
                libc::EINTR => continue,
                libc::EAGAIN => return Next::Wait,
                _ => return Next::Close,
            }
        }
        Next::Close
    }
}

/// The response to a request head (HTTP/1.1, one request per connection).
fn respond(req: &[u8]) -> Vec<u8> {
    let line = req.split(|&c| c == b'\r' || c == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|&c| c == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = path.split(|&c| c == b'?').next().unwrap_or_default();
    let (status, body) = match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") => ("200 OK", metrics::render()),
        (b"GET" | b"HEAD", _) => ("404 Not Found", "metrics are at /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", String::new()),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != b"HEAD" {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// The listener and its open connections.
struct Server {
    listener: Ours,
    conns: Vec<Conn>,
    /// When every descriptor is checked next.
    next_check: u64,
    /// No accepting before this (0: accepting): while the connections are full and new, or
    /// after running out of descriptors or memory.
    accept_after: u64,
}

impl Server {
    fn new(listener: Ours) -> Server {
        Server {
            listener,
            conns: Vec::with_capacity(MAX_CONNECTIONS),
            next_check: now_ms().saturating_add(CHECK_EVERY_MS),
            accept_after: 0,
        }
    }

    /// The next time something is due without an event: a connection's deadline, the check.
    fn next_deadline(&self) -> u64 {
        let accept = if self.accept_after == 0 {
            u64::MAX
        } else {
            self.accept_after
        };
        self.conns
            .iter()
            .map(|c| c.opened.saturating_add(DEADLINE_MS))
            .fold(self.next_check.min(accept), u64::min)
    }

    /// Waits up to `timeout_ms` for events and handles them.
    fn step(&mut self, timeout_ms: u64) -> Result<(), Lost> {
        let mut fds = [libc::pollfd {
            fd: -1,
            events: 0,
            revents: 0,
        }; 1 + MAX_CONNECTIONS];
        let now = now_ms();
        if now >= self.accept_after {
            self.accept_after = 0;
            fds[0].fd = self.listener.fd;
            fds[0].events = libc::POLLIN;
        }
        for (p, c) in fds[1..].iter_mut().zip(&self.conns) {
            p.fd = c.sock.fd;
            p.events = c.events();
        }
        // At most MAX_CONNECTIONS connections (accepting one more closes the oldest).
        let n = (1 + self.conns.len()).min(fds.len());
        let timeout = timeout_ms.min(TICK_MS) as libc::c_int;
        let ready = crate::sys::poll(&mut fds[..n], timeout);
        if ready < 0 {
            if errno() != libc::EINTR {
                std::thread::sleep(std::time::Duration::from_millis(timeout as u64));
            }
            return Ok(());
        }
        // Connections first, from the last (removal swaps the last one in).
        for i in (0..self.conns.len()).rev() {
            let revents = fds[1 + i].revents;
            if revents == 0 {
                continue;
            }
            if !self.conns[i].sock.still_ours() {
                return Err(self.forget(i));
            }
            if let Next::Close = self.conns[i].advance(revents) {
                self.close(i)?;
            }
        }
        let now = now_ms();
        for i in (0..self.conns.len()).rev() {
            if now >= self.conns[i].opened.saturating_add(DEADLINE_MS) {
                self.close(i)?;
            }
        }
        if fds[0].revents != 0 {
            if !self.listener.still_ours() {
                return Err(self.listener_lost());
            }
            if fds[0].revents & libc::POLLIN != 0 {
                self.accept(now)?;
            }
        }
        if now >= self.next_check {
            self.next_check = now.saturating_add(CHECK_EVERY_MS);
            if !self.listener.still_ours() {
                return Err(self.listener_lost());
            }
            if let Some(i) = self.conns.iter().position(|c| !c.sock.still_ours()) {
                return Err(self.forget(i));
            }
        }
        Ok(())
    }

    /// Accepts what is waiting, pushing out the oldest connections beyond the bound.
    fn accept(&mut self, now: u64) -> Result<(), Lost> {
        for _ in 0..MAX_CONNECTIONS {
            if self.conns.len() >= MAX_CONNECTIONS {
                // The oldest still sending its request (idle or trickling) makes room once
                // it has had GRACE_MS; until then new clients wait in the listen backlog
                // (a burst of scrapes is served, not cut off), and the listener is left out
                // of the poll so that it does not spin.
                let oldest = self
                    .conns
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| matches!(c.state, State::Reading(_)))
                    .min_by_key(|(_, c)| c.opened)
                    .map(|(i, c)| (i, c.opened.saturating_add(GRACE_MS)));
                match oldest {
                    Some((i, due)) if due <= now => self.close(i)?,
                    Some((_, due)) => {
                        self.accept_after = due;
                        return Ok(());
                    }
                    None => {
                        self.accept_after = now.saturating_add(TICK_MS);
                        return Ok(());
                    }
                }
            }
            // Our listener (checked by the caller); no address wanted.
            let fd = crate::sys::accept(self.listener.fd, libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
            if fd < 0 {
                match errno() {
                    libc::EAGAIN | libc::EINTR | libc::ECONNABORTED | libc::EPROTO => {}
                    // Out of descriptors or memory: the listener stays readable; wait a tick
                    // rather than spin.
                    _ => self.accept_after = now.saturating_add(TICK_MS),
                }
                return Ok(());
            }
            let slot = (1..REGISTRY.len()).find(|&s| REGISTRY[s].fd.load(Ordering::Acquire) < 0);
            match slot.and_then(|slot| Ours::adopt(fd, slot)) {
                Some(sock) => self.conns.push(Conn {
                    sock,
                    opened: now,
                    state: State::Reading(Vec::new()),
                }),
                // The descriptor accept4 just returned, never used elsewhere.
                None => crate::sys::close(fd),
            }
        }
        Ok(())
    }

    /// Closes connection `i`; an error if its descriptor is no longer ours (left open).
    fn close(&mut self, i: usize) -> Result<(), Lost> {
        let c = self.conns.swap_remove(i);
        let fd = c.sock.fd;
        if c.sock.close() {
            Ok(())
        } else {
            Err(Lost {
                what: "metrics connection",
                fd,
            })
        }
    }

    /// Drops connection `i` without closing it (its descriptor is no longer ours).
    fn forget(&mut self, i: usize) -> Lost {
        let c = self.conns.swap_remove(i);
        REGISTRY[c.sock.slot].fd.store(-1, Ordering::Release);
        Lost {
            what: "metrics connection",
            fd: c.sock.fd,
        }
    }

    fn listener_lost(&self) -> Lost {
        REGISTRY[self.listener.slot].fd.store(-1, Ordering::Release);
        Lost {
            what: "metrics socket",
            fd: self.listener.fd,
        }
    }

    /// Stops serving: closes each descriptor that is still ours, forgets the others.
    fn shut_down(self) {
        for c in self.conns {
            c.sock.close();
        }
        self.listener.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_other_than_get_or_head_of_metrics_get_short_answers() {
        let text = |req: &[u8]| String::from_utf8(respond(req)).unwrap();
        let not_found = text(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(not_found.starts_with("HTTP/1.1 404 Not Found\r\n"), "{not_found}");
        assert!(not_found.ends_with("\r\n\r\nmetrics are at /metrics\n"), "{not_found}");
        let head = text(b"HEAD /nope HTTP/1.1\r\n\r\n");
        assert!(
            head.contains("Content-Length: 24\r\n") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        for req in [&b"POST /metrics HTTP/1.1\r\n\r\n"[..], b"", b"\x00\xff garbage"] {
            let answer = text(req);
            assert!(answer.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{answer}");
            assert!(answer.contains("Content-Length: 0\r\n"), "{answer}");
        }
    }

    #[test]
    fn the_clock_never_goes_back_and_a_closed_descriptor_is_never_ours() {
        let a = now_ms();
        assert!(now_ms() >= a);
        assert!(!same_file(-1, 0, 0));
        assert!(Identity::of(-1).is_none());
    }
}
