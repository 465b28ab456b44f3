//! `pool-leak` findings: stream-ordered memory pools created or imported and never destroyed
//! ([`crate::model::PoolLeak`]).

use gpuleak_format::Api;

use crate::model::{LeakReplay, PoolLeak};
use crate::run::human_bytes;

use super::frames::Stacks;
use super::owner;
use super::{Extra, Finding, Severity};

/// Every pool never destroyed, oldest first.
pub(super) fn findings(replay: &LeakReplay, stacks: &mut Stacks<'_>) -> Vec<Finding> {
    replay.pool_leaks.iter().map(|p| finding(p, replay, stacks)).collect()
}

fn place(p: &PoolLeak) -> String {
    match p.location_type {
        0 => String::new(),
        1 => format!(" on device {}", p.location),
        2 => " in host memory".into(),
        3 => format!(" in host memory of NUMA node {}", p.location),
        4 => " in host memory of the calling thread's NUMA node".into(),
        t => format!(" at location type {t}, id {}", p.location),
    }
}

fn message(p: &PoolLeak) -> String {
    let imported = p.api == Api::cuMemPoolImportFromShareableHandle;
    let via = if p.via == Api::NONE {
        String::new()
    } else {
        format!(" (through {})", p.via)
    };
    let what = if imported { "imported" } else { "created" };
    let mut m = format!(
        "memory pool {:#x} {what} by {}{via}{} was never destroyed",
        p.pool,
        p.api,
        place(p)
    );
    if p.count > 1 {
        m.push_str(&format!(" ({} pools from this stack)", p.count));
    }
    if imported {
        m.push_str(
            "; its memory is the exporting process's, but the import holds the pool until \
             cuMemPoolDestroy",
        );
        return m;
    }
    let (they, them) = if p.count > 1 { ("they", "them") } else { ("it", "it") };
    if p.sampled == 0 {
        m.push_str(&format!(
            "; what {they} reserved was never sampled (no sampled stream-ordered call used {them})"
        ));
    } else {
        let of = if p.sampled < p.count {
            format!(" ({} of them sampled)", p.sampled)
        } else {
            String::new()
        };
        m.push_str(&format!(
            "; {they} reserved up to {} of memory while sampled{of}, which a pool keeps (down to its \
             release threshold) until it is destroyed",
            human_bytes(p.reserved_max)
        ));
    }
    m
}

fn finding(p: &PoolLeak, replay: &LeakReplay, stacks: &mut Stacks<'_>) -> Finding {
    let frames: &[u64] = replay.stacks.get(&p.stack).map_or(&[], Vec::as_slice);
    let stack = if frames.is_empty() {
        Vec::new()
    } else {
        stacks.frames(frames)
    };
    let mut message = message(p);
    let mut severity = Severity::Warning;
    // A pool a caching allocator or framework makes is kept for the life of the process on
    // purpose, as its streams are: a note.
    if let Some(note) = owner::kept_for_life(frames, &replay.modules, "pools") {
        message.push_str(&note);
        severity = Severity::Note;
    }
    Finding {
        check: "pool-leak",
        severity,
        message,
        stack,
        stack_role: None,
        count: p.count,
        api: p.api,
        ptr: p.pool,
        result: 0,
        allocation_stack: None,
        first_free_stack: None,
        related: Vec::new(),
        extra: vec![
            ("pools", Extra::U(p.count)),
            ("sampled_pools", Extra::U(p.sampled)),
            (
                "reserved_bytes_max",
                if p.sampled == 0 {
                    Extra::Null
                } else {
                    Extra::U(p.reserved_max)
                },
            ),
            ("max_size", Extra::U(p.max_size)),
        ],
        seq: p.seq.0,
    }
}
