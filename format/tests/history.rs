//! A checkpoint's history of live bytes (record kind 69): it follows growth at its site and
//! the peak through dropped history, stays bounded however many sites and events, and a
//! compactor fed an earlier checkpoint goes on with its history as if it had seen the whole run.

use gpuleak_format::checkpoint::history::{HISTORY_POINTS, HISTORY_SITES};
use gpuleak_format::checkpoint::{write_blocks, Compacted, Compactor};
use gpuleak_format::*;

const MIB: u64 = 1 << 20;
const HISTORY: StackId = StackId(1);
const SCRATCH: StackId = StackId(2);

fn alloc(seq: u64, ptr: u64, size: u64, stack: StackId) -> Record<'static> {
    Record {
        seq: Seq(seq),
        time_ns: seq * 1000,
        body: Alloc {
            api: Api::cuMemAlloc_v2,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            ctx: Ctx(1),
            stream: Stream(0),
            ptr: Ptr(ptr),
            size,
            stack,
            aux: 0,
        }
        .into(),
    }
}

fn free(seq: u64, ptr: u64) -> Record<'static> {
    Record {
        seq: Seq(seq),
        time_ns: seq * 1000,
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

/// `steps` steps of: a 64 KiB scratch buffer made, one more 1 MiB buffer kept, the scratch freed;
/// then (`teardown`) every kept buffer freed.
fn staircase(steps: u64, teardown: bool) -> Vec<Record<'static>> {
    let mut out = Vec::new();
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        seq
    };
    for step in 0..steps {
        out.push(alloc(next(), 0x9000_0000, 64 << 10, SCRATCH));
        out.push(alloc(next(), 0x1_0000_0000 + step * MIB, MIB, HISTORY));
        out.push(free(next(), 0x9000_0000));
    }
    if teardown {
        for step in 0..steps {
            out.push(free(next(), 0x1_0000_0000 + step * MIB));
        }
    }
    out
}

fn compact<'a>(records: impl IntoIterator<Item = &'a Record<'a>>) -> Compacted {
    let mut c = Compactor::new();
    for r in records {
        c.add(7, r);
    }
    c.finish(1)
}

fn series(done: &Compacted, series: u64, key: u64) -> &SiteHistory<'static> {
    done.history
        .iter()
        .find(|h| h.series == series && h.key == key)
        .unwrap_or_else(|| panic!("no series {series} {key}: {:#?}", done.history))
}

/// Lowest value of each point of a series' triples.
fn floors(h: &SiteHistory<'_>) -> Vec<u64> {
    h.points.0.chunks_exact(3).map(|t| t[0]).collect()
}

#[test]
fn the_history_follows_a_staircase_at_its_site_and_the_process_peak() {
    let records = staircase(1000, true);
    let done = compact(&records);
    let axis = series(&done, SiteHistory::AXIS, 0);
    assert_eq!(
        axis.high,
        1000 * MIB + (64 << 10),
        "the peak: every step kept, and one scratch"
    );
    assert_eq!(axis.events, 4000, "three records a step, then the frees");
    assert!(axis.points.0.len() as u64 <= 2 * HISTORY_POINTS);
    let site = series(&done, SiteHistory::SITE, u64::from(HISTORY.0));
    assert_eq!(site.high, 1000 * MIB);
    assert_eq!(&site.totals.0[..3], [1000, 1000, 1000 * MIB]);
    assert_eq!(site.totals.0[3], 1000 * MIB, "its live bytes at the process's peak");
    let f = floors(site);
    assert!(f.len() as u64 <= HISTORY_POINTS && f.len() > 64, "{}", f.len());
    // The floor rises through the staircase, then everything is freed.
    let top = f.iter().position(|&v| v == *f.iter().max().unwrap()).unwrap();
    assert!(f[..=top].windows(2).all(|w| w[0] <= w[1]) && top * 4 > f.len() * 3 / 2);
    assert_eq!(site.points.0.last(), Some(&0));
    // The scratch site never holds more than one buffer; the rest holds nothing.
    let scratch = series(&done, SiteHistory::SITE, u64::from(SCRATCH.0));
    assert_eq!(scratch.high, 64 << 10);
    assert!(floors(scratch).iter().all(|&v| v == 0));
    let rest = series(&done, SiteHistory::REST, 0);
    assert_eq!(rest.high, 0);
    // One device, never named by a context record.
    let device = series(&done, SiteHistory::DEVICE, (-2i64) as u64);
    assert_eq!(device.high, axis.high);
    // The stacks the history names are kept with it (none are in this trace: nothing to keep).
    assert!(done.records().is_empty() || done.records().iter().all(|(_, r)| r.body.kind() != Stack::KIND));
}

#[test]
fn a_compactor_fed_a_checkpoint_goes_on_with_its_history() {
    let records = staircase(700, true);
    let (first, later) = records.split_at(1500);
    // A rotation after record 1500, then one after record 2500, against one after 2500 only.
    let earlier = compact(first);
    let mut blocks = Vec::new();
    write_blocks(&earlier, &mut blocks);
    let mut file = vec![0u8; HEADER_SIZE];
    FileHeader {
        version: FORMAT_VERSION,
        block_size: BLOCK_SIZE as u32,
        pid: 9,
        start_unix_ns: 5,
    }
    .write((&mut file[..]).try_into().unwrap());
    file.extend_from_slice(&blocks);
    let trace = Trace::new(&file).unwrap();
    let mut c = Compactor::new();
    let mut histories = 0;
    for e in trace.records() {
        let e = e.unwrap();
        histories += usize::from(e.record.body.kind() == SiteHistory::KIND);
        c.add(e.tid, &e.record);
    }
    assert_eq!(
        histories,
        earlier.history.len(),
        "every history record is in the blocks"
    );
    for r in &later[..1000] {
        c.add(7, r);
    }
    let continued = c.finish(2);
    let whole = compact(&records[..2500]);
    assert_eq!(continued.history, whole.history);
    assert_eq!(series(&whole, SiteHistory::AXIS, 0).high, 700 * MIB + (64 << 10));
}

#[test]
fn the_history_is_bounded_and_keeps_the_site_that_grows() {
    // 500 sites of 4 KiB each, then one site that grows by 1 MiB a step.
    let mut records = Vec::new();
    for i in 0..500u64 {
        records.push(alloc(i + 1, 0x10_0000 * (i + 1), 4096, StackId(100 + i as u32)));
    }
    for step in 0..200u64 {
        records.push(alloc(1000 + step, 0x1_0000_0000 + step * MIB, MIB, StackId(9999)));
    }
    let done = compact(&records);
    let sites: Vec<&SiteHistory<'_>> = done.history.iter().filter(|h| h.series == SiteHistory::SITE).collect();
    assert_eq!(sites.len(), HISTORY_SITES);
    assert!(done.history.len() <= HISTORY_SITES + 3);
    for h in &done.history {
        assert!(h.points.0.len() as u64 <= 3 * HISTORY_POINTS);
        let mut buf = vec![0u8; BLOCK_SIZE];
        let r = Record {
            seq: Seq(1),
            time_ns: 1,
            body: h.clone().into(),
        };
        let n = r.encode(&mut BlockState::default(), &mut buf).unwrap();
        assert!(n < 8 * 1024, "{n} bytes");
    }
    let grown = series(&done, SiteHistory::SITE, 9999);
    assert_eq!(grown.first, 0, "it held nothing before: its past is known, zero");
    assert_eq!(grown.high, 200 * MIB);
    // What the 436 sites never followed and the one the growing site replaced hold is the rest's.
    let rest = series(&done, SiteHistory::REST, 0);
    assert_eq!(*rest.points.0.last().unwrap(), (500 - 64 + 1) * 4096);
}

#[test]
fn a_history_record_of_impossible_size_is_ignored() {
    let axis = SiteHistory {
        series: SiteHistory::AXIS,
        key: 0,
        api: Api::NONE,
        events: u64::MAX,
        width: 1,
        first: 0,
        high: 1 << 40,
        high_seq: 1,
        high_time_ns: 1,
        totals: Addrs(Vec::new().into()),
        points: Addrs(vec![1, 1].into()),
    };
    let mut c = Compactor::new();
    for (seq, body) in [
        (1, Body::SiteHistory(Box::new(axis.clone()))),
        (
            1,
            Body::SiteHistory(Box::new(SiteHistory {
                series: SiteHistory::SITE,
                key: 1,
                first: u64::MAX,
                ..axis
            })),
        ),
    ] {
        c.add(
            0,
            &Record {
                seq: Seq(seq),
                time_ns: 1,
                body,
            },
        );
    }
    for r in staircase(3, false) {
        c.add(
            7,
            &Record {
                seq: Seq(r.seq.0 + 1),
                ..r
            },
        );
    }
    let done = c.finish(1);
    let axis = series(&done, SiteHistory::AXIS, 0);
    assert_eq!((axis.events, axis.high), (9, 3 * MIB + (64 << 10)));
}
