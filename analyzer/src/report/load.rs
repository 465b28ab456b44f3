//! Reading traces into reports on every core.
//!
//! Several traces are read by a pool of scoped threads (the standard library's
//! `std::thread::scope`: no dependency, and the traces' mappings are simply borrowed), each
//! thread taking the next trace in turn; the reports come back in the order of the traces,
//! so the output is the same whatever the number of threads. A trace read while a thread is
//! spare (one trace on two cores) is read by two threads at once, one for each of the two
//! models that replay it ([`replay`]), in batches, in order.
//!
//! Memory follows the live set of each trace being read, never its length: the mapped pages
//! already read are handed back to the kernel as the reading goes ([`TraceFile::records`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use gpuleak_format::{Api, Body, DecodeError, Entry, Seq};

use crate::file::{Records, TraceFile};
use crate::memory::TrackerOptions;
use crate::replay::{Leaks, Replay, Replayer};
use crate::streams::Streams;

use super::progress::Progress;
use super::{build, frames, Options, ProcessReport};

/// Records decoded ahead of the replay in one batch.
const BATCH: usize = 4096;
/// The most threads that decode one reading's blocks ahead of its merge.
const MAX_DECODERS: usize = 4;
/// Blocks each of them decodes ahead at most (a block of records decodes to about 0.5 MB).
const DECODED_AHEAD: usize = 2;
/// Pages are handed back every time the replay has gone this far...
const RELEASE_EVERY: u64 = 8 << 20;
/// ...up to this far behind it, so that the blocks still being merged stay mapped.
const RELEASE_LAG: u64 = 4 << 20;

/// Builds the report on every trace of `files`, in order, with up to `jobs` threads (at least
/// one), advancing `progress` as the bytes are read.
pub fn from_files(
    files: &[TraceFile],
    options: &Options,
    jobs: usize,
    progress: Option<&Progress>,
) -> Vec<ProcessReport> {
    let jobs = jobs.max(1);
    let workers = jobs.min(files.len()).max(1);
    // A thread left over for each trace being read reads it a second time, for the
    // stream-ordering model.
    let parallel = jobs >= 2 * workers;
    // Threads beyond those two decode blocks ahead of their merges.
    let decoders = if parallel {
        (jobs / workers).saturating_sub(2).min(2 * MAX_DECODERS)
    } else {
        0
    };
    if workers == 1 {
        return files
            .iter()
            .map(|f| one(f, options, parallel, decoders, progress))
            .collect();
    }
    let next = AtomicUsize::new(0);
    let mut reports: Vec<Option<ProcessReport>> = files.iter().map(|_| None).collect();
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(f) = files.get(i) else { break };
                        done.push((i, one(f, options, parallel, decoders, progress)));
                    }
                    done
                })
            })
            .collect();
        for t in threads {
            match t.join() {
                Ok(done) => {
                    for (i, r) in done {
                        reports[i] = Some(r);
                    }
                }
                // A bug, not bad input: show it as the serial run would have.
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    // Every index below `files.len()` was taken by exactly one thread.
    reports.into_iter().flatten().collect()
}

/// Replays and reports on one trace.
fn one(
    file: &TraceFile,
    options: &Options,
    parallel: bool,
    decoders: usize,
    progress: Option<&Progress>,
) -> ProcessReport {
    let replay = replay(file, parallel, decoders, progress, options);
    let source = frames::source_for(&replay.modules, options);
    let mut report = build(replay, file.path().to_path_buf(), source.as_ref(), options);
    report.read_from(file);
    if let Some(p) = progress {
        p.trace_done();
    }
    report
}

/// A batch of decoded records.
type Batch<'a> = Vec<Result<Entry<'a>, DecodeError>>;

/// Replays every readable record of `file` (decoding errors are kept in the result, and the
/// records around them still replayed).
///
/// When `parallel`, two threads read the trace, each on its own: one replays the leak model
/// (and the memory pass, which observes it), the other the stream-ordering model. Each
/// decodes the records itself, where it then reads them. Decoded once and handed from thread
/// to thread, every record (96 bytes) would cross from core to core, and the thread that
/// decoded them would wait on the other cores' caches at every write into an emptied batch:
/// that cost more than decoding the 12 bytes of a record twice. The stream-ordering model
/// learns the context teardowns from the leak model ([`crate::replay`]): at a context's
/// destruction it waits for the leak model to have read that record, the only place where
/// one thread waits on the other.
///
/// `decoders` more threads open and decode the trace's blocks ahead of the readers' merges:
/// the leak model's reading gets the first when the memory pass runs (its thread does the
/// most), then they take turns. (On two cores, a thread decoding ahead for the memory pass
/// beside the two readers made it no faster, and cost more CPU.)
pub fn replay(
    file: &TraceFile,
    parallel: bool,
    decoders: usize,
    progress: Option<&Progress>,
    options: &Options,
) -> Replay {
    // The memory pass runs beside the leak model, on its thread, only when asked for.
    let memory = options.memory.then(|| TrackerOptions {
        snapshots: options.at.map(|a| a.ids()).unwrap_or_default(),
    });
    let mut read = Read {
        file,
        progress,
        reported: 0,
        at: 0,
    };
    // `TraceFile::open` checked the header; a file that fails now replays as empty.
    let Ok(mut records) = file.records(RELEASE_EVERY, RELEASE_LAG) else {
        return Replay::default();
    };
    let theirs = if parallel {
        file.records(RELEASE_EVERY, RELEASE_LAG).ok()
    } else {
        None
    };
    let Some(theirs) = theirs else {
        let mut replayer = Replayer::new(memory);
        let mut i = 0usize;
        // Each record replayed where the reader decoded it.
        while let Some(r) = records.next_ref() {
            match r {
                Ok(e) => {
                    read.at(e);
                    replayer.apply(e.tid, &e.record);
                }
                Err(e) => replayer.decode_error(e),
            }
            if i % BATCH == 0 {
                read.advanced();
            }
            i += 1;
        }
        read.finish();
        return replayer.finish();
    };
    // With the memory pass, the leak model's thread does the most: it gets the first.
    let leaks_decoders = if memory.is_some() {
        decoders.div_ceil(2)
    } else {
        decoders / 2
    };
    let streams_decoders = decoders.saturating_sub(leaks_decoders);
    std::thread::scope(|s| {
        // The leak model's verdict on each context's destruction, by its record's `seq`.
        let (teardowns, torn_down) = mpsc::channel::<(Seq, Vec<Api>)>();
        let ordering = s.spawn(move || {
            let mut streams = Streams::new();
            let mut verdicts = Verdicts {
                from: torn_down,
                early: None,
            };
            read_batches(s, theirs, streams_decoders, |batch| {
                for e in batch.iter().flatten() {
                    streams.apply(e.tid, &e.record);
                    if let Body::CtxDestroy(_) = e.record.body {
                        for api in verdicts.of(e.record.seq) {
                            streams.teardown(api);
                        }
                    }
                }
            });
            streams.finish()
        });
        let mut leaks = Leaks::new(memory);
        read_batches(s, records, leaks_decoders, |batch| {
            for r in batch {
                match r {
                    Ok(e) if matches!(e.record.body, Body::CtxDestroy(_)) => {
                        let mut apis = Vec::new();
                        leaks.apply(e.tid, &e.record, |api| apis.push(api));
                        // The other thread may be gone already (it panicked).
                        let _ = teardowns.send((e.record.seq, apis));
                    }
                    Ok(e) => leaks.apply(e.tid, &e.record, |_| {}),
                    Err(e) => leaks.decode_error(e.clone()),
                }
            }
            // How far the reading is, for the progress bar, by the batch's last record (a
            // batch merged from several blocks may have gone a little further).
            if let Some(Ok(e)) = batch.iter().rev().find(|r| r.is_ok()) {
                read.at(e);
            }
            read.advanced();
        });
        drop(teardowns);
        read.finish();
        match ordering.join() {
            Ok(findings) => leaks.finish(findings),
            // A bug, not bad input: show it as the serial replay would have.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// The leak model's teardowns, as the stream-ordering model's reading asks for them.
struct Verdicts {
    from: mpsc::Receiver<(Seq, Vec<Api>)>,
    /// A verdict received for a record this reading has not reached.
    early: Option<(Seq, Vec<Api>)>,
}

impl Verdicts {
    /// The teardowns the leak model made at the context destruction `seq`, waiting for it to
    /// have read that far. Both read the same records in the same order; a record only one of
    /// them read (a trace still being written, or cut while read) gets no teardown, and a
    /// leak model that is gone (it panicked) none either.
    fn of(&mut self, seq: Seq) -> Vec<Api> {
        loop {
            let Some((at, apis)) = self.early.take().or_else(|| self.from.recv().ok()) else {
                return Vec::new();
            };
            if at == seq {
                return apis;
            }
            if at > seq {
                self.early = Some((at, apis));
                return Vec::new();
            }
        }
    }
}

/// Reads `records` batch by batch, each batch lent to `each` where it was decoded, with
/// `decoders` threads of `s` opening and decoding its blocks ahead of its merge.
fn read_batches<'s, 'f: 's>(
    s: &'s std::thread::Scope<'s, '_>,
    mut records: Records<'f>,
    decoders: usize,
    mut each: impl FnMut(&Batch<'f>),
) {
    // Emptied batches go back to the threads decoding ahead, to decode into (fresh memory for
    // each block would cost the kernel's zeroing of its pages).
    let buffers: Arc<Mutex<Vec<Batch<'f>>>> = Arc::default();
    let ahead = records.ahead_plan().filter(|_| decoders > 0);
    // None for a bounded trace's segments, read as they are.
    let decoders = if ahead.is_some() { decoders } else { 0 };
    if let Some((trace, order, hint)) = ahead {
        // Each opens every `decoders`-th block in the merge's order; the merge takes them in
        // turn.
        let mut decoded = Vec::new();
        for first in 0..decoders {
            let (to_merge, from_decoder) = mpsc::sync_channel(DECODED_AHEAD);
            decoded.push(from_decoder);
            let (trace, hint, buffers) = (trace.clone(), Arc::clone(&hint), Arc::clone(&buffers));
            let blocks: Vec<usize> = order.iter().copied().skip(first).step_by(decoders).collect();
            s.spawn(move || {
                for i in blocks {
                    let run = buffers.lock().ok().and_then(|mut b| b.pop()).unwrap_or_default();
                    // Stops when the merge is gone.
                    if to_merge
                        .send(trace.open_decoded(i, hint.load(Ordering::Relaxed), run))
                        .is_err()
                    {
                        break;
                    }
                }
            });
        }
        let mut turn = 0;
        records.decode_ahead(move || {
            let opened = decoded[turn % decoded.len()].recv().ok();
            turn += 1;
            opened
        });
    }
    // Without threads decoding ahead, a run the merge hands over whole becomes the batch, and
    // the block decodes its next run into the batch's old buffer: the same few buffers, warm
    // in this core's cache.
    let mut batch: Batch<'f> = Vec::new();
    while records.next_batch(&mut batch, BATCH) {
        each(&batch);
        gpuleak_format::clear_run(&mut batch);
        if decoders > 0 {
            if let Ok(mut b) = buffers.lock() {
                if b.len() < decoders * (DECODED_AHEAD + 1) {
                    b.push(std::mem::take(&mut batch));
                }
            }
        }
    }
}

/// Where the replay of one file is, for the progress bar.
struct Read<'f> {
    file: &'f TraceFile,
    progress: Option<&'f Progress>,
    /// Bytes reported to `progress`.
    reported: u64,
    /// Highest record offset replayed (blocks are read in about file order).
    at: u64,
}

impl Read<'_> {
    /// `e` is being replayed.
    fn at(&mut self, e: &Entry<'_>) {
        self.at = self.at.max(e.offset);
    }

    fn advanced(&mut self) {
        if let Some(p) = self.progress {
            p.advance(self.at.saturating_sub(self.reported));
            self.reported = self.reported.max(self.at);
        }
    }

    fn finish(&mut self) {
        if let Some(p) = self.progress {
            p.advance(self.file.len().saturating_sub(self.reported));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::{Path, PathBuf};

    use gpuleak_format::{
        Addrs, Alloc, Api, BlockCursor, Ctx, CtxCreate, CtxDestroy, CuResult, Exit, FileHeader, Free, Launch,
        ProcessInfo, Ptr, Record, Seq, Stack, StackId, Stream, StreamCreate, BLOCK_SIZE, FORMAT_VERSION, HEADER_SIZE,
    };

    use super::*;
    use crate::report::{json, Report};

    /// Writes a trace of process `pid`: `events` allocations and frees on three threads (a
    /// block each, as many as they fill), leaving every hundredth allocation live, with
    /// kernels on a stream never synchronized or destroyed, and the context destroyed two
    /// thirds of the way (what is live then leaks at teardown).
    pub(crate) fn write_trace(path: &Path, pid: u32, events: u64) {
        let mut file = vec![0u8; HEADER_SIZE];
        FileHeader {
            version: FORMAT_VERSION,
            block_size: BLOCK_SIZE as u32,
            pid,
            start_unix_ns: 0,
        }
        .write((&mut file[..]).try_into().unwrap());
        let mut threads: Vec<Option<(usize, BlockCursor)>> = vec![None; 3];
        let mut seq = 0;
        let mut append = |file: &mut Vec<u8>, t: usize, body: gpuleak_format::Body<'_>| {
            seq += 1;
            let record = Record {
                seq: Seq(seq),
                time_ns: seq,
                body,
            };
            loop {
                let (at, cursor) = threads[t].get_or_insert_with(|| {
                    let at = file.len();
                    file.resize(at + BLOCK_SIZE, 0);
                    (at, BlockCursor::start(&mut file[at..], pid + t as u32, seq, seq))
                });
                if cursor.append(&mut file[*at..*at + BLOCK_SIZE], &record).is_ok() {
                    return;
                }
                threads[t] = None;
            }
        };
        let info = ProcessInfo {
            pid,
            ppid: 1,
            exe: "/bin/app".into(),
            args: Vec::new(),
            hostname: "h".into(),
            shim_version: "t".into(),
            unwinder: "fp".into(),
            stack_depth: 4,
            start_unix_ns: 0,
        };
        append(&mut file, 0, info.into());
        for id in 1..=7u32 {
            let frames = Addrs(vec![0x1000 * u64::from(id), 0x40_0000].into());
            append(
                &mut file,
                0,
                Stack {
                    id: StackId(id),
                    frames,
                }
                .into(),
            );
        }
        let ctx = CtxCreate {
            api: Api::cuCtxCreate_v2,
            result: CuResult::SUCCESS,
            ctx: Ctx(1),
            device: 0,
            flags: 0,
        };
        append(&mut file, 0, ctx.into());
        let stream = StreamCreate {
            api: Api::cuStreamCreate,
            result: CuResult::SUCCESS,
            stream: Stream(0x50),
            flags: 1,
            priority: 0,
            stack: StackId(1),
        };
        append(&mut file, 1, stream.into());
        for i in 0..events {
            let t = (i % 3) as usize;
            if i == events / 3 * 2 {
                // Work left on the stream when the context goes.
                let launch = Launch {
                    api: Api::cuLaunchKernel,
                    result: CuResult::SUCCESS,
                    stream: Stream(0x50),
                    function: 0x98,
                    ptrs: Addrs(Vec::new().into()),
                    stack: StackId::NONE,
                };
                append(&mut file, t, launch.into());
                let destroy = CtxDestroy {
                    api: Api::cuCtxDestroy_v2,
                    result: CuResult::SUCCESS,
                    ctx: Ctx(1),
                    device: -1,
                };
                append(&mut file, t, destroy.into());
            }
            if i % 50 == 0 {
                let launch = Launch {
                    api: Api::cuLaunchKernel,
                    result: CuResult::SUCCESS,
                    stream: Stream(0x50),
                    function: 0x99,
                    ptrs: Addrs(vec![0x7000_0000 + (i / 2) * 0x1000].into()),
                    stack: StackId::NONE,
                };
                append(&mut file, t, launch.into());
            }
            let ptr = Ptr(0x7000_0000 + (i / 2) * 0x1000);
            let body = if i % 2 == 0 {
                Alloc {
                    api: Api::cuMemAlloc_v2,
                    via: Api::NONE,
                    result: CuResult::SUCCESS,
                    ctx: Ctx(1),
                    stream: Stream(0),
                    ptr,
                    size: 64 + i % 1000,
                    stack: StackId(1 + (i % 7) as u32),
                    aux: 0,
                }
                .into()
            } else if i % 200 == 1 {
                continue;
            } else {
                Free {
                    api: Api::cuMemFree_v2,
                    via: Api::NONE,
                    result: CuResult::SUCCESS,
                    stream: Stream(0),
                    ptr,
                    size: 0,
                    stack: StackId::NONE,
                }
                .into()
            };
            append(&mut file, t, body);
        }
        append(&mut file, 0, Exit { code: 0, how: 0 }.into());
        std::fs::write(path, file).unwrap();
    }

    fn json_of(files: &[TraceFile], jobs: usize) -> String {
        let progress = Progress::new(files.iter().map(|f| f.len()).sum(), files.len());
        let mut report = Report::new(from_files(files, &Options::default(), jobs, Some(&progress)));
        let done = progress.line();
        let n = files.len();
        assert!(
            done.contains("100%") && done.contains(&format!(" {n}/{n} trace")),
            "{done}"
        );
        report.limit(3);
        let mut out = Vec::new();
        json::write(&report, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_memory_pass_gives_the_same_report_serial_and_in_parallel() {
        let dir = std::env::temp_dir().join(format!("gpuleak-load-memory-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        for i in 0..3u32 {
            write_trace(&dir.join(format!("t{i}")), 200 + i, 30_000 + u64::from(i) * 5_000);
        }
        let files = TraceFile::open_all(std::slice::from_ref(&dir)).unwrap();
        let options = Options {
            memory: true,
            ..Options::default()
        };
        let json = |files: &[TraceFile], jobs: usize| {
            let report = Report::new(from_files(files, &options, jobs, None));
            let mut out = Vec::new();
            json::write(&report, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let serial = json(&files, 1);
        assert!(serial.contains("\"memory\": {"), "no memory object");
        assert!(serial.contains("\"live_bytes_max\""));
        for jobs in [2, 6] {
            assert_eq!(json(&files, jobs), serial, "{jobs} threads");
        }
        // One trace alone, its memory pass beside the other reading.
        assert_eq!(json(&files[..1], 2), json(&files[..1], 1));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A trace long enough for hundreds of decoded batches and blocks of three writers merged
    /// over each other: the replay in parallel (one trace, spare threads) must give the serial
    /// report byte for byte, with and without the memory pass.
    #[test]
    fn a_large_trace_gives_the_same_report_on_one_thread_and_several() {
        let dir = std::env::temp_dir().join(format!("gpuleak-load-large-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("large.trace");
        write_trace(&path, 300, 1_200_000);
        let files = TraceFile::open_all(std::slice::from_ref(&path)).unwrap();
        assert!(files[0].len() > 20 * BLOCK_SIZE as u64, "{} bytes", files[0].len());
        for memory in [false, true] {
            let options = Options {
                memory,
                ..Options::default()
            };
            let json = |jobs: usize| {
                let report = Report::new(from_files(&files, &options, jobs, None));
                let mut out = Vec::new();
                json::write(&report, &mut out).unwrap();
                String::from_utf8(out).unwrap()
            };
            let serial = json(1);
            assert!(serial.contains("\"teardown\""), "{serial}");
            assert_eq!(serial.contains("\"live_bytes_max\""), memory);
            // 4 and 8: one and four threads decoding blocks ahead of the merge.
            for jobs in [2, 4, 8] {
                assert_eq!(json(jobs), serial, "{jobs} threads, memory pass {memory}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The stream-ordering model's reading asks for the leak model's teardown at each context
    /// destruction it reads; one the other reading did not see (a trace still being written,
    /// cut while read) gets none, and the verdicts after it still come to the records they
    /// belong to.
    #[test]
    fn teardown_verdicts_come_to_the_destruction_they_were_made_at() {
        let (send, from) = mpsc::channel();
        let mut verdicts = Verdicts { from, early: None };
        send.send((Seq(3), vec![Api::cuCtxDestroy_v2])).unwrap();
        send.send((Seq(7), Vec::new())).unwrap();
        send.send((Seq(8), vec![Api::cuCtxDestroy_v2])).unwrap();
        send.send((Seq(9), vec![Api::cuDevicePrimaryCtxRelease_v2])).unwrap();
        // Seen by both.
        assert_eq!(verdicts.of(Seq(3)), vec![Api::cuCtxDestroy_v2]);
        // Only this reading saw 5: no teardown, and 7's verdict is kept for 7.
        assert_eq!(verdicts.of(Seq(5)), Vec::new());
        assert_eq!(verdicts.of(Seq(7)), Vec::new());
        // Only the leak model read 8: its verdict is passed over, and 9's comes to 9.
        assert_eq!(verdicts.of(Seq(9)), vec![Api::cuDevicePrimaryCtxRelease_v2]);
        // The leak model gone: no verdict, no wait.
        drop(send);
        assert_eq!(verdicts.of(Seq(11)), Vec::new());
    }

    #[test]
    fn every_number_of_threads_gives_the_serial_report() {
        let dir = std::env::temp_dir().join(format!("gpuleak-load-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let paths: Vec<PathBuf> = (0..5u32)
            .map(|i| {
                let path = dir.join(format!("t{i}"));
                write_trace(&path, 100 + i, 20_000 + u64::from(i) * 7_000);
                path
            })
            .collect();
        // The last one damaged in its middle: its note must be the same too.
        let mut bytes = std::fs::read(&paths[4]).unwrap();
        let middle = HEADER_SIZE + BLOCK_SIZE + 3000;
        bytes[middle..middle + 64].fill(0xff);
        std::fs::write(&paths[4], bytes).unwrap();
        let files = TraceFile::open_all(std::slice::from_ref(&dir)).unwrap();
        let serial = json_of(&files, 1);
        assert!(serial.contains("\"merged_leaks\""));
        assert!(serial.contains("unreadable records"), "{serial}");
        for found in ["\"teardown\"", "\"stream-leak\"", "\"unsynchronized-at-exit\""] {
            assert!(serial.contains(found), "no {found} in {serial}");
        }
        for jobs in [2, 3, 8] {
            assert_eq!(json_of(&files, jobs), serial, "{jobs} threads");
        }
        // One trace alone, decoded beside its replay.
        let one = &files[..1];
        assert_eq!(json_of(one, 2), json_of(one, 1));
        // The damaged one, its blocks decoded ahead by three threads.
        let damaged = &files[4..];
        assert_eq!(json_of(damaged, 6), json_of(damaged, 1));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
