//! Framework states (kinds 70 to 76) and library workspaces (kind 79) in a checkpoint: each
//! framework's last complete state is kept whole, with the states still being written; older
//! ones are dropped and counted. The latest workspace record of each address is kept.

use gpuleak_format::checkpoint::Compactor;
use gpuleak_format::*;

fn record(seq: u64, body: Body<'static>) -> Record<'static> {
    Record {
        seq: Seq(seq),
        time_ns: seq,
        body,
    }
}

/// The records of state `id` of `framework` from `seq` on: begin, a segment, its blocks,
/// frames, stats and (`end`) its end.
fn state(seq: &mut u64, id: u64, framework: &'static str, end: bool) -> Vec<Record<'static>> {
    let mut bodies: Vec<Body<'static>> = vec![
        FrameworkState {
            id,
            layout: framework::LAYOUT,
            framework: framework.into(),
            reason: "snapshot".into(),
            snapshot: 0,
        }
        .into(),
        FrameworkSegment {
            state: id,
            device: 0,
            address: 0x7000_0000,
            size: 2 << 20,
            stream: 0,
            pool: 0,
        }
        .into(),
        FrameworkBlocks {
            state: id,
            segment: 0x7000_0000,
            blocks: Addrs(vec![0, 512, 500, 1, 1].into()),
        }
        .into(),
        FrameworkFrames {
            id: 1,
            state: id,
            names: vec!["train.py".into(), "step".into()],
            lines: Addrs(vec![7].into()),
        }
        .into(),
        FrameworkStats {
            state: id,
            device: 0,
            allocated: 512,
            reserved: 2 << 20,
            peak_reserved: 2 << 20,
        }
        .into(),
    ];
    if end {
        bodies.push(
            FrameworkEnd {
                state: id,
                segments: 1,
                blocks: 1,
            }
            .into(),
        );
    }
    bodies
        .into_iter()
        .map(|b| {
            *seq += 1;
            record(*seq, b)
        })
        .collect()
}

/// The kept records' (kind, state) pairs.
fn kept_states(c: Compactor) -> (Vec<(u8, u64)>, Checkpoint<'static>) {
    let done = c.finish(1);
    let kept = done
        .records()
        .into_iter()
        .map(|(_, r)| {
            // A state's own record names it `id`; the others, `state`.
            let (mut id, mut state) = (0, None);
            r.body.visit(&mut |name, v| match (name, v) {
                ("id", Value::U(s)) => id = s,
                ("state", Value::U(s)) => state = Some(s),
                _ => {}
            });
            (r.body.kind(), state.unwrap_or(id))
        })
        .collect();
    (kept, done.checkpoint)
}

#[test]
fn the_last_complete_state_of_each_framework_and_the_one_being_written_are_kept() {
    let mut seq = 0;
    let mut records = Vec::new();
    records.extend(state(&mut seq, 1, "torch", true));
    records.extend(state(&mut seq, 2, "cupy", true));
    records.extend(state(&mut seq, 3, "torch", true));
    records.extend(state(&mut seq, 4, "torch", false));
    let mut c = Compactor::new();
    for r in &records {
        c.add(7, r);
    }
    let (kept, checkpoint) = kept_states(c);
    let states: Vec<u64> = kept.iter().map(|k| k.1).collect();
    // cupy's only state, torch's last complete one, and torch's unfinished one.
    assert_eq!(kept.len(), 6 + 6 + 5, "{kept:?}");
    assert!(states.iter().all(|&s| s == 2 || s == 3 || s == 4), "{states:?}");
    // torch's first state was dropped and counted, record by record.
    assert_eq!(checkpoint.dropped, 6);
    assert_eq!((checkpoint.kept, checkpoint.dropped), (17, 6));
}

#[test]
fn a_newer_complete_state_drops_an_unfinished_older_one_and_strays_are_counted() {
    let mut seq = 0;
    let mut records = state(&mut seq, 1, "torch", false);
    records.extend(state(&mut seq, 2, "torch", true));
    // A record naming a state never begun in this history.
    seq += 1;
    records.push(record(
        seq,
        FrameworkEnd {
            state: 9,
            segments: 0,
            blocks: 0,
        }
        .into(),
    ));
    let mut c = Compactor::new();
    for r in &records {
        c.add(7, r);
    }
    let (kept, checkpoint) = kept_states(c);
    assert!(kept.iter().all(|k| k.1 == 2) && kept.len() == 6, "{kept:?}");
    assert_eq!(checkpoint.dropped, 5 + 1);
}

/// A library's workspace (kind 79): the latest record of each address is kept, however old,
/// so that a framework state after the cut still finds its workspaces; the earlier record of
/// an address is dropped and counted.
#[test]
fn the_latest_workspace_record_of_each_address_is_kept() {
    let ws = |seq, ptr, size| {
        record(
            seq,
            LibWorkspace {
                library: LibWorkspace::CUBLAS,
                ptr,
                size,
            }
            .into(),
        )
    };
    let mut c = Compactor::with_recent_frees(0);
    for r in [ws(1, 0x7000_0000, 32), ws(2, 0x7100_0000, 16), ws(3, 0x7000_0000, 64)] {
        c.add(3, &r);
    }
    let done = c.finish(1);
    let mut kept: Vec<(u64, u64)> = done
        .records()
        .into_iter()
        .filter_map(|(_, r)| match r.body {
            Body::LibWorkspace(w) => Some((w.ptr, w.size)),
            _ => None,
        })
        .collect();
    kept.sort_unstable();
    assert_eq!(kept, vec![(0x7000_0000, 64), (0x7100_0000, 16)]);
    assert_eq!(done.checkpoint.dropped, 1);
}
