//! The shim's only output of its own: single lines on stderr, prefixed `gpuleak:`.

use std::fmt::Arguments;
use std::io::Write;

/// Writes one line on stderr (unbuffered, one `write` call, so lines of concurrent threads
/// do not interleave); errors writing it are ignored.
pub fn line(args: Arguments<'_>) {
    let mut buf = Vec::with_capacity(128);
    let _ = buf.write_fmt(format_args!("gpuleak: {args}\n"));
    crate::sys::write(2, &buf);
}
