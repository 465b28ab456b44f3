//! The `GPULEAK_*` settings, parsed once into an immutable [`Config`] when tracing starts.
//! A bad value produces one line on stderr and the default; it never stops the program.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `GPULEAK_OUTPUT` | `gpuleak.<program>.<pid>.trace` | trace path; `%p` is replaced by the pid, `%%` by `%` |
//! | `GPULEAK_STACK_DEPTH` | 64 | frames per allocation stack, 0 to 256 (0: no stacks) |
//! | `GPULEAK_UNWIND` | `dwarf` | stack unwinder: `dwarf`, `libunwind`, `fp`, `gcc` |
//! | `GPULEAK_FREE_STACKS` | 0 | 1: capture a stack for every free (always done for failed frees) |
//! | `GPULEAK_SYNC_STACKS` | 0 | stacks on the hot stream-ordering calls (synchronize, query, wait, record, copies, memsets, launches, callbacks, capture): 0 none, 1 every call, N one call in N per thread |
//! | `GPULEAK_CLOCK` | `coarse` | record times: `coarse` (the kernel's coarse monotonic clock, ~5 ns a read, resolution one timer tick, 1 to 4 ms) or `precise` (`CLOCK_MONOTONIC`, ~25 ns a read, nanoseconds) |
//! | `GPULEAK_OBJECT_STACKS` | 1 | 0: no creation stacks for streams and events (stream-leak and event-leak findings then have no stack) |
//! | `GPULEAK_DISABLE` | 0 | 1: intercept nothing's behaviour, record nothing |

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use gpuleak_unwind::Method;

/// Parsed settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Trace path, `%p` already replaced; `None` means the default name.
    pub output: Option<OsString>,
    /// Frames per stack.
    pub stack_depth: usize,
    /// Unwinder requested.
    pub unwind: Method,
    /// Capture stacks for successful frees too.
    pub free_stacks: bool,
    /// Stacks on the hot stream-ordering calls: 0 never, 1 always, N one call in N per
    /// thread. Off by default: those calls must cost at most tens of nanoseconds, and the
    /// analyzer explains their findings with the stacks of the allocations, streams and
    /// events involved.
    pub sync_stacks: u32,
    /// Clock of the record times (`CLOCK_MONOTONIC_COARSE` or `CLOCK_MONOTONIC`).
    pub clock: libc::clockid_t,
    /// Creation stacks for streams and events.
    pub object_stacks: bool,
    /// Record nothing.
    pub disabled: bool,
}

/// The most frames a stack may have.
pub const MAX_DEPTH: usize = 256;

fn warn(var: &str, value: &str, expected: &str, default: &str) {
    crate::diag::line(format_args!("{var}={value:?} is not {expected}; using {default}"));
}

fn var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

fn flag(name: &str, default: bool) -> bool {
    match var(name).as_deref() {
        None | Some("") => default,
        Some("0") | Some("false") | Some("no") | Some("off") => false,
        Some("1") | Some("true") | Some("yes") | Some("on") => true,
        Some(other) => {
            warn(name, other, "0 or 1", if default { "1" } else { "0" });
            default
        }
    }
}

/// Replaces `%p` with `pid` and `%%` with `%`.
pub fn expand(template: &[u8], pid: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(template.len() + 8);
    let mut it = template.iter().copied().peekable();
    while let Some(c) = it.next() {
        if c == b'%' {
            match it.peek() {
                Some(b'p') => {
                    it.next();
                    out.extend_from_slice(pid.to_string().as_bytes());
                    continue;
                }
                Some(b'%') => {
                    it.next();
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

impl Config {
    /// Reads the environment.
    pub fn from_env(pid: u32) -> Config {
        let output = std::env::var_os("GPULEAK_OUTPUT")
            .filter(|v| !v.is_empty())
            .map(|v| OsString::from_vec(expand(&v.into_vec(), pid)));
        let stack_depth = match var("GPULEAK_STACK_DEPTH") {
            None => 64,
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if n <= MAX_DEPTH => n,
                _ => {
                    warn("GPULEAK_STACK_DEPTH", &v, "a number from 0 to 256", "64");
                    64
                }
            },
        };
        let unwind = match var("GPULEAK_UNWIND").as_deref() {
            None | Some("") | Some("dwarf") => Method::Dwarf,
            Some("libunwind") => Method::LibUnwind,
            Some("fp") => Method::FramePointer,
            Some("gcc") => Method::Gcc,
            Some(other) => {
                warn("GPULEAK_UNWIND", other, "one of dwarf, libunwind, fp, gcc", "dwarf");
                Method::Dwarf
            }
        };
        let sync_stacks = match var("GPULEAK_SYNC_STACKS") {
            None => 0,
            Some(v) => match v.trim() {
                "" => 0,
                t => t.parse::<u32>().unwrap_or_else(|_| {
                    warn("GPULEAK_SYNC_STACKS", &v, "0, 1 or a sampling period N", "0");
                    0
                }),
            },
        };
        let clock = match var("GPULEAK_CLOCK").as_deref() {
            None | Some("") | Some("coarse") => libc::CLOCK_MONOTONIC_COARSE,
            Some("precise") => libc::CLOCK_MONOTONIC,
            Some(other) => {
                warn("GPULEAK_CLOCK", other, "coarse or precise", "coarse");
                libc::CLOCK_MONOTONIC_COARSE
            }
        };
        Config {
            output,
            stack_depth,
            unwind,
            free_stacks: flag("GPULEAK_FREE_STACKS", false),
            sync_stacks,
            clock,
            object_stacks: flag("GPULEAK_OBJECT_STACKS", true),
            disabled: flag("GPULEAK_DISABLE", false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_expand() {
        assert_eq!(expand(b"/tmp/t.%p.trace", 42), b"/tmp/t.42.trace");
        assert_eq!(expand(b"a%%p%", 1), b"a%p%");
        assert_eq!(expand(b"%p%p", 7), b"77");
    }
}
