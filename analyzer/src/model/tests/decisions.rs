//! What the leak model reports to its observer ([`crate::decision`]): each decision once and
//! in order, the memory facts only when they are wanted, and nothing for a call that changes
//! no memory.

use super::*;

/// Every decision, written out.
#[derive(Default)]
struct Seen {
    wants: bool,
    decisions: Vec<String>,
}

impl Observer for Seen {
    fn wants_memory(&self) -> bool {
        self.wants
    }

    fn decided(&mut self, decision: Decision<'_>) {
        self.decisions.push(match decision {
            Decision::Allocated {
                allocation: a,
                device,
                pool,
            } => format!("allocated {:#x} {} bytes on {device} pool {pool}", a.ptr.0, a.size),
            Decision::Freed { allocation: a, device } => format!("freed {:#x} on {device}", a.ptr.0),
            Decision::Failed { size, device, .. } => format!("failed {size} bytes on {device}"),
            Decision::Mapped { device, bytes } => format!("mapped {bytes} on {device}"),
            Decision::History { .. } => "history".into(),
            Decision::Teardown { api } => format!("teardown {api}"),
        });
    }
}

/// A context on device 3: an allocation freed, then freed again (a bad free: no decision); a
/// failed allocation; a VMM handle released while mapped (alive until the unmap); an
/// allocation left to the context's teardown.
fn decisions(wants: bool) -> Vec<String> {
    let mut s = Script::default();
    s.push(CtxCreate {
        api: Api::cuCtxCreate_v2,
        result: CuResult::SUCCESS,
        ctx: CTX,
        device: 3,
        flags: 0,
    })
    .alloc(Api::cuMemAlloc_v2, 0x1000, 100, 1)
    .free(Api::cuMemFree_v2, 0x1000)
    .free(Api::cuMemFree_v2, 0x1000)
    .push(Alloc {
        api: Api::cuMemAlloc_v2,
        via: Api::NONE,
        result: CuResult(2),
        ctx: CTX,
        stream: Stream(0),
        ptr: Ptr(0),
        size: 1 << 40,
        stack: StackId(2),
        aux: 0,
    })
    .alloc(Api::cuMemCreate, 0x55, 4096, 3)
    .map(0x6000_0000, 4096, 0x55)
    .free(Api::cuMemRelease, 0x55)
    .unmap(0x6000_0000, 4096)
    .alloc(Api::cuMemAlloc_v2, 0x2000, 300, 4)
    .destroy(Api::cuCtxDestroy_v2, CTX, 3);
    let mut model = Model::new();
    let mut seen = Seen {
        wants,
        ..Seen::default()
    };
    for r in &s.records {
        model.apply_observed(7, r, &mut seen);
    }
    seen.decisions
}

#[test]
fn the_model_reports_each_decision_once_in_order() {
    assert_eq!(
        decisions(true),
        [
            "allocated 0x1000 100 bytes on 3 pool false",
            "freed 0x1000 on 3",
            "failed 1099511627776 bytes on 3",
            "allocated 0x55 4096 bytes on 3 pool false",
            "mapped 4096 on 3",
            "mapped -4096 on 3",
            "freed 0x55 on 3",
            "allocated 0x2000 300 bytes on 3 pool false",
            "teardown cuCtxDestroy_v2",
            "freed 0x2000 on 3",
        ]
    );
}

/// Its twin: the same decisions without the memory facts when the observer does not want them.
#[test]
fn an_observer_that_wants_no_memory_facts_gets_the_same_decisions_without_them() {
    let without: Vec<String> = decisions(true).iter().map(|d| d.replace(" on 3", " on 0")).collect();
    assert_eq!(decisions(false), without);
}

/// Addresses 0x1000 to 0x1000 + 39 * 0x100, in an order no map keeps.
fn shuffled_addresses() -> Vec<u64> {
    (0..40u64).map(|i| 0x1000 + ((i * 17) % 40) * 0x100).collect()
}

/// Records all at one sequence number (a damaged or merged trace).
fn at_one_seq(s: &mut Script) {
    for r in &mut s.records {
        r.seq = Seq(9);
    }
}

#[test]
fn a_teardown_frees_allocations_made_at_one_sequence_number_in_address_order() {
    let mut s = Script::default();
    s.ctx(Api::cuCtxCreate_v2, CTX);
    for ptr in shuffled_addresses() {
        s.alloc(Api::cuMemAlloc_v2, ptr, 256, 1);
    }
    at_one_seq(&mut s);
    s.destroy(Api::cuCtxDestroy_v2, CTX, 0);
    let mut model = Model::new();
    let mut seen = Seen {
        wants: true,
        ..Seen::default()
    };
    for r in &s.records {
        model.apply_observed(7, r, &mut seen);
    }
    let freed: Vec<&String> = seen.decisions.iter().filter(|d| d.starts_with("freed")).collect();
    let mut sorted = shuffled_addresses();
    sorted.sort_unstable();
    let expected: Vec<String> = sorted.iter().map(|p| format!("freed {p:#x} on 0")).collect();
    assert_eq!(freed, expected.iter().collect::<Vec<_>>());
}

#[test]
fn a_leak_group_made_at_one_sequence_number_shows_its_lowest_address() {
    let mut s = Script::default();
    for ptr in shuffled_addresses() {
        s.alloc(Api::cuMemAlloc_v2, ptr, 256, 1);
    }
    at_one_seq(&mut s);
    let r = s.run();
    assert_eq!(r.leaks.len(), 1);
    assert_eq!(r.leaks[0].allocations, 40);
    assert_eq!(r.leaks[0].first.ptr, Ptr(0x1000));
}

#[test]
fn leak_groups_alike_in_bytes_and_first_sequence_number_are_listed_by_stack() {
    let mut s = Script::default();
    // Stacks in an order no map keeps, one allocation each, all of one size.
    let stacks: Vec<u32> = (0..40u32).map(|i| 100 + (i * 17) % 40).collect();
    for (i, &stack) in stacks.iter().enumerate() {
        s.alloc(Api::cuMemAlloc_v2, 0x1000 + i as u64 * 0x100, 256, stack);
    }
    at_one_seq(&mut s);
    let listed: Vec<u32> = s.run().leaks.iter().map(|l| l.stack.0).collect();
    let mut sorted = stacks;
    sorted.sort_unstable();
    assert_eq!(listed, sorted);
}
