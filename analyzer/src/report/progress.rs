//! A progress bar on stderr while traces are read, for long traces: drawn only after a moment
//! (short runs never show one), redrawn a few times a second, erased when done. The command
//! line shows it only when stderr is a terminal and the output is text (never with
//! `--format json` or `--quiet`).
//!
//! Hand-written rather than a crate: one line of text, redrawn from a thread that sleeps on a
//! channel, needs no terminal library.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long work runs before a bar appears.
const DELAY: Duration = Duration::from_millis(300);
/// How often the bar is redrawn.
const TICK: Duration = Duration::from_millis(100);
/// The bar's line, in columns (one less than a terminal of 80, so it never wraps).
const WIDTH: usize = 79;

/// How far the reading of a set of traces is: bytes of the files read, traces done. Shared
/// by the threads that read them.
#[derive(Debug)]
pub struct Progress {
    total_bytes: u64,
    traces: usize,
    done_bytes: AtomicU64,
    done_traces: AtomicUsize,
}

impl Progress {
    /// Progress over `traces` traces of `total_bytes` bytes in all.
    pub fn new(total_bytes: u64, traces: usize) -> Progress {
        Progress {
            total_bytes,
            traces,
            done_bytes: AtomicU64::new(0),
            done_traces: AtomicUsize::new(0),
        }
    }

    /// `bytes` more were read.
    pub fn advance(&self, bytes: u64) {
        self.done_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// One more trace is done.
    pub fn trace_done(&self) {
        self.done_traces.fetch_add(1, Ordering::Relaxed);
    }

    /// The bar as one line of at most [`WIDTH`] columns.
    pub fn line(&self) -> String {
        let done = self.done_bytes.load(Ordering::Relaxed).min(self.total_bytes);
        let percent = (done as u128 * 100 / u128::from(self.total_bytes.max(1))) as u64;
        let traces = self.done_traces.load(Ordering::Relaxed).min(self.traces);
        // Counts padded to the totals' widths, so that the bar keeps its length.
        let total = size(self.total_bytes);
        let all = self.traces.to_string();
        let tail = format!(
            " {percent:>3}% {:>w$}/{total} {traces:>n$}/{all} trace{}",
            size(done),
            if self.traces == 1 { "" } else { "s" },
            w = total.len(),
            n = all.len(),
        );
        let head = "gpuleak: reading ";
        let bar = WIDTH
            .saturating_sub(head.len() + tail.chars().count() + 2)
            .clamp(10, 40);
        let filled = (bar as u64 * percent / 100) as usize;
        let mut line = format!("{head}[{}{}]{tail}", "#".repeat(filled), "-".repeat(bar - filled));
        if line.chars().count() > WIDTH {
            line = line.chars().take(WIDTH).collect();
        }
        line
    }
}

/// A size for people: 512 B, 3.4 MiB, 1.2 GiB.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Runs `work` while a bar for `progress` is drawn on stderr, then erases it.
pub fn show<R>(progress: &Progress, work: impl FnOnce() -> R) -> R {
    let (stop, stopped) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            let start = Instant::now();
            let mut drawn = false;
            // Ends when `stop` is dropped: after the work, or while a panic unwinds it.
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
                if start.elapsed() >= DELAY {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r{}", progress.line());
                    let _ = err.flush();
                    drawn = true;
                }
            }
            if drawn {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[2K");
                let _ = err.flush();
            }
        });
        let result = work();
        drop(stop);
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_fits_in_80_columns_and_counts_up() {
        let p = Progress::new(50 << 30, 300);
        let start = p.line();
        assert_eq!(
            start,
            "gpuleak: reading [----------------------]   0%      0 B/50.0 GiB   0/300 traces"
        );
        p.advance(25 << 30);
        p.trace_done();
        let half = p.line();
        assert!(half.ends_with("]  50% 25.0 GiB/50.0 GiB   1/300 traces"), "{half}");
        assert_eq!(half.matches('#').count(), 11, "{half}");
        p.advance(u64::MAX / 2);
        let full = p.line();
        assert!(full.contains("100%") && !full.contains('-'), "{full}");
        for line in [start, half, full] {
            assert_eq!(line.chars().count(), WIDTH, "{line}");
        }
        let one = Progress::new(0, 1);
        assert!(one.line().ends_with(" 0/1 trace"), "{}", one.line());
    }

    #[test]
    fn sizes_read_like_sizes() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(218 << 20), "218.0 MiB");
    }

    #[test]
    fn work_runs_and_returns_with_a_bar_or_without() {
        let p = Progress::new(10, 1);
        assert_eq!(show(&p, || 42), 42);
    }
}
