//! Segments and checkpoints: the header fields, a whole trace cut into a segment, and an
//! unfinished checkpoint.

use gpuleak_format::checkpoint::cut;
use gpuleak_format::*;

fn header() -> Vec<u8> {
    let mut file = vec![0u8; HEADER_SIZE];
    FileHeader {
        version: FORMAT_VERSION,
        block_size: BLOCK_SIZE as u32,
        pid: 9,
        start_unix_ns: 5,
    }
    .write((&mut file[..]).try_into().unwrap());
    file
}

fn alloc(seq: u64, ptr: u64) -> Record<'static> {
    Record {
        seq: Seq(seq),
        time_ns: seq * 10,
        body: Alloc {
            api: Api::cuMemAlloc_v2,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            ctx: Ctx(1),
            stream: Stream(0),
            ptr: Ptr(ptr),
            size: 64,
            stack: StackId::NONE,
            aux: 0,
        }
        .into(),
    }
}

fn free(seq: u64, ptr: u64) -> Record<'static> {
    Record {
        seq: Seq(seq),
        time_ns: seq * 10,
        body: Free {
            api: Api::cuMemFree_v2,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            stream: Stream(0),
            ptr: Ptr(ptr),
            size: 0,
            stack: StackId::NONE,
        }
        .into(),
    }
}

/// Two threads: thread 100 allocates 0x1000 and 0x2000 and frees 0x1000; thread 200 marks.
fn whole() -> Vec<u8> {
    let mut file = header();
    file.resize(HEADER_SIZE + 2 * BLOCK_SIZE, 0);
    let (a, b) = file[HEADER_SIZE..].split_at_mut(BLOCK_SIZE);
    let mut ca = BlockCursor::start(a, 100, 1, 10);
    let mut cb = BlockCursor::start(b, 200, 2, 20);
    for r in [alloc(1, 0x1000), alloc(3, 0x2000), free(5, 0x1000), alloc(7, 0x3000)] {
        ca.append(a, &r).unwrap();
    }
    for seq in [2, 4, 6] {
        let mark = Record {
            seq: Seq(seq),
            time_ns: seq * 10,
            body: Mark {
                name: "m".into(),
                value: seq,
            }
            .into(),
        };
        cb.append(b, &mark).unwrap();
    }
    file
}

#[test]
fn a_whole_trace_has_no_segment_and_a_segment_header_reads_back() {
    let file = whole();
    assert_eq!(Trace::new(&file).unwrap().segment(), None);
    let mut h = header();
    let seg = Segment {
        number: 7,
        trace_id: TraceId(0xfeed_beef_0123_4567),
    };
    seg.write((&mut h[..]).try_into().unwrap());
    let t = Trace::new(&h).unwrap();
    assert_eq!(t.segment(), Some(seg));
    assert_eq!(t.header().pid, 9, "the old fields are unchanged");
}

#[test]
fn a_cut_keeps_the_live_allocation_with_its_thread_and_counts_the_rest() {
    let file = whole();
    let seg = cut(&Trace::new(&file).unwrap(), Seq(5), 1, TraceId(3)).unwrap();
    let t = Trace::new(&seg).unwrap();
    assert_eq!(t.segment().map(|s| s.number), Some(1));
    let (blocks, finished) = t.checkpoint_blocks();
    assert!(finished && blocks == [0], "{blocks:?}");
    let got: Vec<(u32, u64, &str)> = t
        .records()
        .map(|e| e.unwrap())
        .filter(|e| e.record.body.kind() != SiteHistory::KIND)
        .map(|e| (e.tid, e.record.seq.0, e.record.body.name()))
        .collect();
    assert_eq!(
        got,
        [
            // 0x1000 was freed, and is kept to name the victim of a later double free.
            (100, 1, "Alloc"),
            (100, 3, "Alloc"),
            (100, 5, "Free"),
            // The last record covered comes before the checkpoint's own, which shares its seq.
            (0, 5, "Checkpoint"),
            (200, 6, "Mark"),
            (100, 7, "Alloc"),
        ]
    );
    let Some(Body::Checkpoint(c)) = t.records().map(|e| e.unwrap().record.body).find(|b| b.kind() == 67) else {
        panic!("no checkpoint");
    };
    assert_eq!((c.as_of, c.segment, c.kept, c.dropped, c.missing), (5, 1, 3, 2, 0));
    // Two marks, counted by kind.
    assert_eq!(c.counts.0.as_ref(), [u64::from(Mark::KIND), 0, 0, 2]);
}

#[test]
fn an_unfinished_checkpoint_is_ignored() {
    let file = whole();
    let mut seg = cut(&Trace::new(&file).unwrap(), Seq(5), 1, TraceId(3)).unwrap();
    let at = Trace::new(&seg)
        .unwrap()
        .records()
        .map(|e| e.unwrap())
        .find(|e| e.record.body.kind() == Checkpoint::KIND)
        .unwrap()
        .offset;
    // The writer stopped before it committed the last record's kind byte.
    seg[at as usize] = 0;
    let t = Trace::new(&seg).unwrap();
    assert!(!t.checkpoint_blocks().1);
    let seqs: Vec<u64> = t.records().map(|e| e.unwrap().record.seq.0).collect();
    assert_eq!(seqs, [6, 7], "the unfinished checkpoint's kept records are ignored too");
}

#[test]
fn a_record_larger_than_a_block_is_left_out_and_never_loops() {
    let huge = Record {
        seq: Seq(1),
        time_ns: 1,
        body: Stack {
            id: StackId(1),
            frames: Addrs((0..20_000u64).map(|i| i << 40).collect::<Vec<_>>().into()),
        }
        .into(),
    };
    let mut out = header();
    gpuleak_format::checkpoint::write_records(&mut out, [(7, huge), (7, alloc(2, 0x1000))].into_iter());
    let seqs: Vec<u64> = Trace::new(&out)
        .unwrap()
        .records()
        .map(|e| e.unwrap().record.seq.0)
        .collect();
    assert_eq!(seqs, [2]);
}

/// A whole trace split into three segments reads back as the whole when read from the first,
/// and as [checkpoint + rest] from the second; a gap is an error naming the file after it.
#[test]
fn a_series_of_segments_reads_as_the_whole_trace() {
    use gpuleak_format::checkpoint::segment;
    use gpuleak_format::series::{order, SeriesErrorKind};

    let file = whole();
    let t = Trace::new(&file).unwrap();
    let id = TraceId(0x5eed);
    let files = [
        segment(&t, Some(Seq(3)), Seq(5), 1, id).unwrap(),
        segment(&t, Some(Seq(5)), Seq(u64::MAX), 2, id).unwrap(),
        segment(&t, None, Seq(3), 0, id).unwrap(),
    ];
    let traces: Vec<Trace<'_>> = files.iter().map(|f| Trace::new(f).unwrap()).collect();
    let headers: Vec<Option<Segment>> = traces.iter().map(|t| t.segment()).collect();
    let read = |from: &[usize]| -> Vec<(u32, u64, &'static str)> {
        let mut out = Vec::new();
        for (k, &i) in from.iter().enumerate() {
            let records = if k == 0 {
                traces[i].records()
            } else {
                traces[i].records_past_checkpoint()
            };
            out.extend(
                records
                    .map(|e| e.unwrap())
                    .map(|e| (e.tid, e.record.seq.0, e.record.body.name())),
            );
        }
        out
    };
    let all = order(&headers).unwrap();
    assert_eq!(all, [2, 0, 1]);
    let want: Vec<(u32, u64, &str)> = t
        .records()
        .map(|e| e.unwrap())
        .map(|e| (e.tid, e.record.seq.0, e.record.body.name()))
        .collect();
    assert_eq!(read(&all), want, "from the first segment: the whole trace");
    let from_second = read(&order(&headers[..2]).unwrap());
    assert_eq!(from_second.iter().filter(|r| r.2 == "Checkpoint").count(), 1);
    assert_eq!(&from_second[from_second.len() - 4..], &want[want.len() - 4..]);
    // Segment 1 deleted: the series has a gap before segment 2.
    let gap = order(&[headers[2], headers[1]]).unwrap_err();
    assert_eq!(
        (gap.at, gap.kind),
        (1, SeriesErrorKind::Missing { expected: 1, found: 2 })
    );
    // A whole trace is no segment.
    assert_eq!(
        order(&[headers[2], None]).unwrap_err().kind,
        SeriesErrorKind::NotInSeries
    );
}
