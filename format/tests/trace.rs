//! Whole-file round trips: blocks of several threads merged by seq, and damaged files.

use gpuleak_format::*;

fn file_with_blocks(blocks: usize) -> Vec<u8> {
    let mut file = vec![0u8; HEADER_SIZE + blocks * BLOCK_SIZE];
    let header = FileHeader {
        version: FORMAT_VERSION,
        block_size: BLOCK_SIZE as u32,
        pid: 9,
        start_unix_ns: 5,
    };
    header.write((&mut file[..HEADER_SIZE]).try_into().unwrap());
    file
}

fn block_mut(file: &mut [u8], i: usize) -> &mut [u8] {
    &mut file[HEADER_SIZE + i * BLOCK_SIZE..HEADER_SIZE + (i + 1) * BLOCK_SIZE]
}

fn mark(seq: u64, value: u64) -> Record<'static> {
    Record {
        seq: Seq(seq),
        time_ns: seq * 10,
        body: Mark {
            name: "m".into(),
            value,
        }
        .into(),
    }
}

fn seqs(trace: &Trace<'_>) -> Vec<u64> {
    assert_batches_match(trace);
    trace.records().map(|e| e.unwrap().record.seq.0).collect()
}

/// `Merged::next_batch`, at several batch sizes and handing its buffers back as a reader
/// does, gives exactly the records and errors of the one-at-a-time reader, in its order.
fn assert_batches_match(trace: &Trace<'_>) {
    let one: Vec<_> = trace.records().collect();
    for max in [1, 7, 300, 4096, 100_000] {
        let mut merged = trace.records();
        let mut got = Vec::new();
        let mut batch = Vec::new();
        while merged.next_batch(&mut batch, max) {
            assert!(
                !batch.is_empty() && batch.len() <= max.max(4096), // a whole run handed over may be longer
                "{} records in a batch of {max}",
                batch.len()
            );
            got.extend(batch.iter().cloned());
            merged.give_back(std::mem::take(&mut batch));
        }
        assert!(batch.is_empty());
        assert_eq!(got.len(), one.len(), "batches of {max}");
        assert!(got == one, "batches of {max} differ from the one-at-a-time reader");
    }
    // Blocks opened and decoded ahead (first runs of any length, as threads decoding ahead
    // give them), or only the first few of them before those threads are gone.
    for (n, gone_after) in [
        (1, usize::MAX),
        (5, usize::MAX),
        (4096, usize::MAX),
        (100_000, 2),
        (7, 0),
    ] {
        let mut merged = trace.records();
        let order = merged.admission_order();
        let hint = merged.run_hint();
        let ahead = trace.clone();
        let mut blocks = order.into_iter().take(gone_after);
        merged.decode_ahead(move || {
            let i = blocks.next()?;
            assert!(hint.load(std::sync::atomic::Ordering::Relaxed) >= 1);
            Some(ahead.open_decoded(i, n, Vec::new()))
        });
        let mut got = Vec::new();
        let mut batch = Vec::new();
        while merged.next_batch(&mut batch, 300) {
            got.append(&mut batch);
        }
        assert!(
            got == one,
            "decoded ahead {n} at a time, gone after {gone_after} blocks: differs"
        );
    }
}

/// Three threads interleave; block 1 starts later; block 2 was reserved but never started.
fn interleaved() -> (Vec<u8>, Vec<u64>) {
    let mut file = file_with_blocks(4);
    let mut c0 = BlockCursor::start(block_mut(&mut file, 0), 100, 0, 0);
    let mut c1 = BlockCursor::start(block_mut(&mut file, 1), 101, 3, 0);
    let mut c3 = BlockCursor::start(block_mut(&mut file, 3), 102, 4, 0);
    let mut all = Vec::new();
    for s in 0..40u64 {
        let (c, b) = match s % 3 {
            0 => (&mut c0, 0),
            1 if s >= 3 => (&mut c1, 1),
            2 if s >= 4 => (&mut c3, 3),
            _ => (&mut c0, 0),
        };
        c.append(block_mut(&mut file, b), &mark(s, s)).unwrap();
        all.push(s);
    }
    (file, all)
}

#[test]
fn blocks_merge_into_seq_order() {
    let (file, all) = interleaved();
    let trace = Trace::new(&file).unwrap();
    assert_eq!(trace.header().pid, 9);
    assert_eq!(seqs(&trace), all);
    let tids: std::collections::BTreeSet<u32> = trace.records().map(|e| e.unwrap().tid).collect();
    assert_eq!(tids.into_iter().collect::<Vec<_>>(), vec![100, 101, 102]);
}

#[test]
fn a_full_block_spills_into_the_next() {
    let mut file = file_with_blocks(3);
    let mut cur = BlockCursor::start(block_mut(&mut file, 0), 1, 0, 0);
    let mut b = 0;
    for s in 0..20_000u64 {
        if cur.append(block_mut(&mut file, b), &mark(s, s)).is_err() {
            b += 1;
            cur = BlockCursor::start(block_mut(&mut file, b), 1, s, s * 10);
            cur.append(block_mut(&mut file, b), &mark(s, s)).unwrap();
        }
    }
    assert!(b >= 1);
    let trace = Trace::new(&file).unwrap();
    assert_eq!(seqs(&trace), (0..20_000).collect::<Vec<_>>());
}

#[test]
fn a_record_without_its_kind_byte_ends_the_block_cleanly() {
    // What a kill between writing a record's body and its kind byte leaves behind.
    let mut file = file_with_blocks(1);
    let mut cur = BlockCursor::start(block_mut(&mut file, 0), 1, 0, 0);
    cur.append(block_mut(&mut file, 0), &mark(1, 1)).unwrap();
    let at = cur.pos;
    cur.append(block_mut(&mut file, 0), &mark(2, 2)).unwrap();
    block_mut(&mut file, 0)[at] = 0;
    assert_eq!(seqs(&Trace::new(&file).unwrap()), vec![1]);
}

#[test]
fn a_truncated_file_keeps_everything_before_the_cut_and_names_the_offset() {
    let (file, _) = interleaved();
    let whole = Trace::new(&file).unwrap();
    let offsets: Vec<u64> = whole
        .records()
        .map(|e| e.unwrap().offset)
        .filter(|&o| o < (HEADER_SIZE + BLOCK_SIZE) as u64)
        .collect();
    // Cut block 0 in the middle of its 5th record.
    let cut = offsets[4] as usize + 2;
    let short = &file[..cut];
    let trace = Trace::new(short).unwrap();
    assert_batches_match(&trace);
    let results: Vec<_> = trace.records().collect();
    let good = results.iter().filter(|r| r.is_ok()).count();
    let errs: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(good, 4);
    assert_eq!(errs.len(), 1);
    assert!(errs[0].to_string().contains("truncated"), "{}", errs[0]);
    assert!(
        errs[0].offset >= offsets[4] && errs[0].offset <= cut as u64,
        "{}",
        errs[0]
    );
}

#[test]
fn a_corrupted_block_is_reported_and_the_others_survive() {
    let (mut file, all) = interleaved();
    let b1 = HEADER_SIZE + BLOCK_SIZE;
    file[b1] = 0x55; // bad magic
    let trace = Trace::new(&file).unwrap();
    assert_batches_match(&trace);
    let results: Vec<_> = trace.records().collect();
    let errs: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].offset, b1 as u64);
    assert!(errs[0].to_string().contains("block header"));
    let good: Vec<u64> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|e| e.record.seq.0)
        .collect();
    let lost: Vec<u64> = all.iter().copied().filter(|s| s % 3 == 1 && *s >= 3).collect();
    assert_eq!(good.len(), all.len() - lost.len());
}

#[test]
fn a_corrupted_length_is_an_error_not_a_panic() {
    let (mut file, _) = interleaved();
    let first = HEADER_SIZE + BLOCK_HEADER_SIZE;
    file[first + 1] = 0xff;
    file[first + 2] = 0xff;
    file[first + 3] = 0x7f;
    let trace = Trace::new(&file).unwrap();
    let errs: Vec<_> = trace.records().filter_map(|r| r.err()).collect();
    assert_eq!(errs.len(), 1);
    assert!(errs[0].offset >= first as u64);
}

#[test]
fn bad_headers_are_rejected_loudly() {
    let (mut file, _) = interleaved();
    assert_eq!(Trace::new(b"hello world").err().unwrap().kind, ErrorKind::BadMagic);
    assert_eq!(
        Trace::new(&file[..20]).err().unwrap().kind,
        ErrorKind::Truncated("file header")
    );
    file[8] = 99;
    let e = Trace::new(&file).err().unwrap();
    assert_eq!(e.kind, ErrorKind::UnsupportedVersion(99));
    assert!(e.to_string().contains("version 99"));
}

#[test]
fn a_small_file_that_is_not_a_trace_is_not_called_a_truncated_trace() {
    for not_a_trace in [&b"hello"[..], b"{}\n", b"GPULEAX"] {
        let e = Trace::new(not_a_trace).err().unwrap();
        assert_eq!(e.kind, ErrorKind::BadMagic, "{not_a_trace:?}");
        assert!(e.to_string().starts_with("not a gpuleak trace"), "{e}");
    }
    // Its start is a trace's: a trace cut inside its header.
    let (file, _) = interleaved();
    for cut in [3, 8, 39] {
        let e = Trace::new(&file[..cut]).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Truncated("file header"), "{cut}");
    }
    let e = Trace::new(b"").err().unwrap();
    assert_eq!(e.kind, ErrorKind::Empty);
    assert!(
        e.to_string().starts_with("empty file, not a gpuleak trace") && e.to_string().contains("offset 0"),
        "{e}"
    );
}

#[test]
fn every_byte_of_a_real_block_can_be_flipped_without_a_panic() {
    let (file, _) = interleaved();
    let end = HEADER_SIZE + 600;
    for i in HEADER_SIZE..end {
        for v in [0u8, 0x80, 0xff, 0x01] {
            let mut f = file.clone();
            f[i] = v;
            if let Ok(t) = Trace::new(&f) {
                for r in t.records() {
                    let _ = r;
                }
            }
        }
    }
}

#[test]
fn a_thread_record_hands_the_rest_of_its_block_to_another_thread() {
    let mut file = file_with_blocks(2);
    let mut c0 = BlockCursor::start(block_mut(&mut file, 0), 100, 1, 0);
    let mut c1 = BlockCursor::start(block_mut(&mut file, 1), 200, 2, 0);
    c0.append(block_mut(&mut file, 0), &mark(1, 0)).unwrap();
    c1.append(block_mut(&mut file, 1), &mark(2, 0)).unwrap();
    // Thread 100 exited; thread 300 continues its block.
    let handed = Record {
        seq: Seq(3),
        time_ns: 30,
        body: Thread { tid: 300 }.into(),
    };
    c0.append(block_mut(&mut file, 0), &handed).unwrap();
    c0.append(block_mut(&mut file, 0), &mark(3, 0)).unwrap();
    c1.append(block_mut(&mut file, 1), &mark(4, 0)).unwrap();
    c0.append(block_mut(&mut file, 0), &mark(5, 0)).unwrap();
    let trace = Trace::new(&file).unwrap();
    let got: Vec<(u64, u32)> = trace
        .records()
        .map(|e| e.unwrap())
        .map(|e| (e.record.seq.0, e.tid))
        .collect();
    // The framing record yields no entry.
    assert_eq!(got, [(1, 100), (2, 200), (3, 300), (4, 200), (5, 300)]);
}

/// One thread writes runs of records between the others' (the merge hands those runs out
/// without its heap), its blocks spill into later ones, and the other threads' blocks are
/// claimed in between: the merge still gives every record once, in seq order.
#[test]
fn runs_of_one_thread_between_others_merge_into_seq_order() {
    let mut file = file_with_blocks(24);
    let mut next_block = 0;
    let mut cursors: Vec<Option<(usize, BlockCursor)>> = vec![None, None, None];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let total = 30_000u64;
    for s in 0..total {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // Thread 0 writes most records, in runs; the others now and then.
        let t = match state % 100 {
            0..=3 => 1,
            4..=5 => 2,
            _ => 0,
        };
        let written = match &mut cursors[t] {
            Some((b, c)) => c.append(block_mut(&mut file, *b), &mark(s, s)).is_ok(),
            None => false,
        };
        if !written {
            let b = next_block;
            next_block += 1;
            let mut c = BlockCursor::start(block_mut(&mut file, b), 100 + t as u32, s, s * 10);
            c.append(block_mut(&mut file, b), &mark(s, s)).unwrap();
            cursors[t] = Some((b, c));
        }
    }
    assert!(next_block >= 6, "{next_block} blocks");
    let trace = Trace::new(&file[..HEADER_SIZE + next_block * BLOCK_SIZE]).unwrap();
    assert_eq!(seqs(&trace), (0..total).collect::<Vec<_>>());
    // The lending reader gives the same, offsets included.
    let copied: Vec<_> = trace.records().map(|e| e.unwrap()).collect();
    let mut lent = trace.records();
    let mut i = 0;
    while let Some(e) = lent.next_mut() {
        assert_eq!(e.unwrap(), &copied[i]);
        i += 1;
    }
    assert_eq!(i, copied.len());
}

/// Threads writing in runs of random length across many blocks, with records damaged here and
/// there: taken in batches, the merge hands over whole runs where it can and copies the rest,
/// and gives what the one-at-a-time reader gives.
#[test]
fn batches_are_the_records_one_at_a_time_whatever_the_interleaving_and_damage() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    for case in 0..12 {
        let threads = 1 + rand(6) as usize;
        let blocks = 10;
        let mut file = file_with_blocks(blocks);
        let mut next_block = 0;
        let mut cursors: Vec<Option<(usize, BlockCursor)>> = (0..threads).map(|_| None).collect();
        let mut t = 0;
        let mut s = 0u64;
        'write: while next_block < blocks {
            // A run of one thread, of 1 to 5,000 records.
            if rand(3) == 0 || threads == 1 {
                t = rand(threads as u64) as usize;
            }
            for _ in 0..1 + rand(if case % 2 == 0 { 5000 } else { 20 }) {
                let written = match &mut cursors[t] {
                    Some((b, c)) => c.append(block_mut(&mut file, *b), &mark(s, s)).is_ok(),
                    None => false,
                };
                if !written {
                    if next_block == blocks {
                        break 'write;
                    }
                    let b = next_block;
                    next_block += 1;
                    let mut c = BlockCursor::start(block_mut(&mut file, b), 100 + t as u32, s, s * 10);
                    c.append(block_mut(&mut file, b), &mark(s, s)).unwrap();
                    cursors[t] = Some((b, c));
                }
                s += 1;
            }
        }
        // Damage: a few bytes of record payloads, a block header now and then.
        for _ in 0..case / 3 {
            let b = rand(blocks as u64) as usize;
            let at = if rand(4) == 0 {
                0
            } else {
                BLOCK_HEADER_SIZE + rand(2000) as usize
            };
            block_mut(&mut file, b)[at] ^= 0x5a;
        }
        let trace = Trace::new(&file).unwrap();
        assert_batches_match(&trace);
    }
}
