//! Stream-ordering findings ([`crate::streams`]) as report findings: a message that names the
//! calls and streams, and the stacks that explain it.
//!
//! The finding's `stack` is the stack of the call at fault when the shim captured it
//! (`GPULEAK_SYNC_STACKS`; frees with `GPULEAK_FREE_STACKS`), else the stack of the
//! allocation involved, else the creation stack of the stream or event. `allocation_stack`,
//! `first_free_stack` (the free, for a use after free) and `related_stacks` carry the others.

use gpuleak_format::{Api, GraphNode, StackId};

use crate::replay::Replay;
use crate::streams::{AllocInfo, Check, Created, Moment, NodeSite, Op, StreamFinding, StreamName};

use super::frames::Stacks;
use super::owner;
use super::{Finding, Frame, RelatedStack, Severity};

/// Every stream-ordering finding of a replay.
pub(super) fn findings(replay: &Replay, stacks: &mut Stacks<'_>) -> Vec<Finding> {
    replay.ordering.iter().map(|f| finding(f, replay, stacks)).collect()
}

fn stream(name: StreamName) -> String {
    match name {
        StreamName::Legacy => "the legacy default stream".into(),
        StreamName::PerThread(tid) => format!("the per-thread default stream of thread {tid}"),
        StreamName::Handle(h) => format!("stream {h:#x}"),
        StreamName::Host => "the host".into(),
    }
}

fn allocation(a: &AllocInfo) -> String {
    format!(
        "the {}-byte {} allocation at {:#x} (from {})",
        a.size,
        a.kind.name(),
        a.ptr,
        a.api
    )
}

fn on(op: &Op) -> String {
    match op.stream {
        StreamName::Host => op.api.to_string(),
        s => format!("{} on {}", op.api, stream(s)),
    }
}

/// [`on`], with the graph node at fault for a graph launch: "cuGraphLaunch on stream 0x5
/// (its memcpy node captured from cuMemcpyAsync)".
fn on_node(op: &Op, node: Option<&NodeSite>) -> String {
    match node {
        Some(n) => format!("{} (its {})", on(op), n.made_by()),
        None => on(op),
    }
}

/// A node of a launched graph, as a graph race names it: "the memcpy node captured from
/// cuMemcpyAsync", or, for a node the shim did not name (a child graph's, or an older
/// trace's), what its accesses say it is.
fn graph_node(node: Option<&NodeSite>, kernel: bool) -> String {
    match node {
        Some(n) => format!("the {}", n.made_by()),
        None if kernel => "a kernel node".into(),
        None => "a memcpy, memset or allocation node".into(),
    }
}

/// A free node of a launched graph: "the free node captured from cuMemFreeAsync", or "a free
/// node" when the shim did not name it.
fn free_node(node: Option<&NodeSite>) -> String {
    node.map_or_else(|| "a free node".into(), |n| format!("the {}", n.made_by()))
}

/// Whether a graph node is an allocation node.
fn allocates(node: Option<&NodeSite>) -> bool {
    node.is_some_and(|n| n.kind == GraphNode::MEM_ALLOC)
}

/// The message of a finding between two nodes of one graph launch.
fn inside_graph(f: &StreamFinding, alloc: &str) -> String {
    let launch = on(&f.op);
    let [this, other] = [0, 1].map(|i| f.nodes[i].as_ref());
    match f.check {
        Check::UnorderedFree => format!(
            "{launch} runs {}, which frees {alloc}, with no path to it from {}, which uses that \
             memory: every launch may free it while that node still runs; make the free node \
             depend on it (under stream capture: make the freeing stream wait for an event \
             recorded after that work)",
            free_node(this),
            graph_node(other, f.kernel_sides.1)
        ),
        Check::UseAfterFree => format!(
            "{launch} runs {}, which touches {:#x}, inside {alloc} already freed by {}: a path \
             in the graph leads from the free node to it, so every launch uses freed memory",
            graph_node(this, f.kernel_sides.0),
            f.ptr,
            free_node(other)
        ),
        _ if allocates(this) || allocates(other) => {
            let (user, alloc_node, kernel) = if allocates(this) {
                (other, this, f.kernel_sides.1)
            } else {
                (this, other, f.kernel_sides.0)
            };
            format!(
                "{launch} runs {}, which touches {:#x} in {alloc}, with no path between it and {}, \
                 which allocates that memory: every launch may use the memory before it is \
                 allocated; make the node depend on the allocation node (under stream capture: \
                 make its stream wait for an event recorded after the allocation)",
                graph_node(user, kernel),
                f.ptr,
                graph_node(alloc_node, false)
            )
        }
        _ => {
            let (this, other) = (graph_node(this, f.kernel_sides.0), graph_node(other, f.kernel_sides.1));
            let (writing, then) = if f.kernels_only() {
                (
                    "",
                    "a race if either kernel writes those bytes (the driver does not say which \
                     parameters a kernel writes), none if both only read them",
                )
            } else {
                (
                    if f.kernel_involved() {
                        ", at least one writing (a kernel is taken to write the memory it is given),"
                    } else {
                        ", at least one writing,"
                    },
                    "every launch may run them at once or in either order; make one depend on \
                     the other (under stream capture: make one stream wait for an event recorded \
                     after the other's work)",
                )
            };
            format!(
                "{launch} runs {other} and {this}, which touch {:#x} in {alloc}{writing} with no path \
                 between them in the graph: {then}",
                f.ptr
            )
        }
    }
}

/// For a stream or event leak whose creation was recorded without a stack (the default: stream
/// and event calls capture none), how to get it.
fn unrecorded_creation(f: &StreamFinding) -> &'static str {
    if f.op.stack == StackId::NONE {
        "; its creation stack was not recorded (GPULEAK_OBJECT_STACKS=1 records it)"
    } else {
        ""
    }
}

fn message(f: &StreamFinding) -> String {
    let alloc = f.allocation.as_ref().map(allocation).unwrap_or_default();
    let mut m = match (f.check, &f.other) {
        _ if f.inside_graph() => inside_graph(f, &alloc),
        (Check::UnorderedFree, Some(last)) => format!(
            "{} frees {alloc} with no ordering after its last use, {}: the memory can be reused \
             while that work still runs; record an event after the use and make the freeing stream \
             wait for it, or synchronize first",
            on_node(&f.op, f.nodes[0].as_ref()),
            on_node(last, f.nodes[1].as_ref())
        ),
        (Check::UseAfterFree, Some(free)) => format!(
            "{} touches {:#x}, inside {alloc} already freed by {}",
            on_node(&f.op, f.nodes[0].as_ref()),
            f.ptr,
            on_node(free, f.nodes[1].as_ref())
        ),
        (Check::CrossStreamRace, Some(other)) if f.kernels_only() => format!(
            "{} and the earlier {} touch {:#x} in {alloc} with no ordering between them (no event \
             wait, synchronization or legacy-stream edge): a race if either kernel writes those \
             bytes (the driver does not say which parameters a kernel writes), none if both only \
             read them, as streams that share a model's weights do",
            on_node(&f.op, f.nodes[0].as_ref()),
            on_node(other, f.nodes[1].as_ref()),
            f.ptr
        ),
        (Check::CrossStreamRace, Some(other)) => {
            let kernels = if f.kernel_involved() {
                " (a kernel is taken to write the memory it is given)"
            } else {
                ""
            };
            format!(
                "{} and the earlier {} touch {:#x} in {alloc}, at least one writing{kernels}, with \
                 no ordering between them (no event wait, synchronization or legacy-stream edge)",
                on_node(&f.op, f.nodes[0].as_ref()),
                on_node(other, f.nodes[1].as_ref()),
                f.ptr
            )
        }
        (Check::WaitOnUnrecordedEvent, _) => format!(
            "{} waits for event {:#x}, which was never recorded: the wait returns at once and \
             orders nothing",
            on_node(&f.op, f.nodes[0].as_ref()),
            f.created.map_or(0, |c| c.handle)
        ),
        (Check::StreamLeak, _) => format!(
            "{} created by {} was never destroyed{}",
            stream(f.op.stream),
            f.op.api,
            unrecorded_creation(f)
        ),
        (Check::EventLeak, _) => format!(
            "event {:#x} created by {} was never destroyed{}",
            f.ptr,
            f.op.api,
            unrecorded_creation(f)
        ),
        (Check::SemaphoreLeak, _) => format!(
            "external semaphore {:#x} imported by {} was never destroyed{}",
            f.ptr,
            f.op.api,
            unrecorded_creation(f)
        ),
        (Check::UnsynchronizedAtExit, _) => {
            let when = match f.moment {
                Some(Moment::Teardown(api)) => format!("before the context was torn down ({api})"),
                _ => "before exit".to_string(),
            };
            let last = match &f.allocation {
                Some(_) => format!("{} of {alloc}", f.op.api),
                None => f.op.api.to_string(),
            };
            format!(
                "work queued on {} was never waited for {when}; the last of it: {last}",
                stream(f.op.stream)
            )
        }
        _ => format!("{} on {:#x}", on_node(&f.op, f.nodes[0].as_ref()), f.ptr),
    };
    if f.count > 1 {
        let what = match f.check {
            Check::StreamLeak => "streams",
            Check::EventLeak => "events",
            Check::SemaphoreLeak => "semaphores",
            Check::UnsynchronizedAtExit => "streams",
            _ => "times",
        };
        m.push_str(&format!(" ({} {what})", f.count));
    }
    m
}

/// The setting that records the stacks of calls of `api`, if one does: `GPULEAK_SYNC_STACKS`
/// for copies, memsets and kernel and graph launches, `GPULEAK_FREE_STACKS` for frees.
fn stack_setting(api: Api) -> Option<&'static str> {
    let name = api.name()?;
    if name.starts_with("cuMemFree") {
        Some("GPULEAK_FREE_STACKS")
    } else if ["cuMemcpy", "cuMemset", "cuLaunchKernel", "cuGraphLaunch"]
        .iter()
        .any(|p| name.starts_with(p))
    {
        Some("GPULEAK_SYNC_STACKS")
    } else {
        None
    }
}

/// What to add to the message of a finding whose calls have no stack of their own: which
/// setting records them.
fn missing_stacks_hint(f: &StreamFinding) -> Option<String> {
    // A race inside a graph is one launch's: its stack helps only where a node is unnamed
    // (the nodes' own stacks are always recorded).
    let other = match f.check {
        _ if f.inside_graph() && f.nodes.iter().all(Option::is_some) => return None,
        _ if f.inside_graph() => None,
        _ => f.other.as_ref(),
    };
    // A graph launch's call whose node is named has that node's stack.
    let calls: Vec<&Op> = [(Some(&f.op), &f.nodes[0]), (other, &f.nodes[1])]
        .into_iter()
        .filter_map(|(o, node)| o.filter(|o| o.stack == StackId::NONE && node.is_none()))
        .collect();
    let mut settings: Vec<&str> = calls.iter().filter_map(|o| stack_setting(o.api)).collect();
    settings.sort_unstable();
    settings.dedup();
    let setting = settings
        .iter()
        .map(|s| format!("{s}=1"))
        .collect::<Vec<_>>()
        .join(" and ");
    match (calls.len(), settings.len()) {
        (_, 0) => None,
        (1, _) => Some(format!("; the call's stack was not recorded ({setting} records it)")),
        (_, 1) => Some(format!(
            "; the calls' stacks were not recorded ({setting} records them)"
        )),
        _ => Some(format!("; the calls' stacks were not recorded ({setting} record them)")),
    }
}

fn finding(f: &StreamFinding, replay: &Replay, stacks: &mut Stacks<'_>) -> Finding {
    let mut stack_of = |id: StackId| -> Option<Vec<Frame>> {
        replay
            .stacks
            .get(&id)
            .filter(|_| id != StackId::NONE)
            .map(|a| stacks.frames(a))
    };
    let own = stack_of(f.op.stack);
    let allocation_stack = f.allocation.and_then(|a| stack_of(a.stack));
    let created: Option<(&'static str, Created)> = f.created.map(|c| {
        let role = match f.check {
            Check::EventLeak | Check::WaitOnUnrecordedEvent => "event created at",
            Check::SemaphoreLeak => "semaphore imported at",
            _ => "stream created at",
        };
        (role, c)
    });
    let creation_stack = created.and_then(|(role, c)| stack_of(c.stack).map(|s| (role, s)));
    let mut related = Vec::new();
    let mut first_free_stack = None;
    // (A finding inside a graph has one call, the launch, on both sides.)
    if let Some(other) = f.other.as_ref().filter(|_| !f.inside_graph()) {
        if let Some(s) = stack_of(other.stack) {
            match f.check {
                Check::UseAfterFree => first_free_stack = Some(s),
                Check::UnorderedFree => related.push(RelatedStack {
                    role: "last used at",
                    stack: s,
                }),
                _ => related.push(RelatedStack {
                    role: "other access at",
                    stack: s,
                }),
            }
        }
    }
    // Where the graph nodes at fault were captured or added: the call's own when it has no
    // stack of its own (a graph launch's, by default), else among the related stacks.
    let node_role = |n: &NodeSite, other: bool| match (n.captured(), other) {
        (true, false) => "graph node captured at",
        (false, false) => "graph node added at",
        (true, true) => "other graph node captured at",
        (false, true) => "other graph node added at",
    };
    let mut own = own;
    let mut own_role = None;
    if let Some(n) = &f.nodes[0] {
        if let Some(s) = stack_of(n.stack) {
            let role = node_role(n, false);
            if own.is_none() {
                own = Some(s);
                own_role = Some(role);
            } else {
                related.push(RelatedStack { role, stack: s });
            }
        }
    }
    if let Some(n) = &f.nodes[1] {
        if let Some(s) = stack_of(n.stack) {
            // The free node of a use after free is the free, when the launch has no stack.
            if f.check == Check::UseAfterFree && first_free_stack.is_none() {
                first_free_stack = Some(s);
            } else {
                related.push(RelatedStack {
                    role: node_role(n, true),
                    stack: s,
                });
            }
        }
    }
    let is_leak = matches!(f.check, Check::StreamLeak | Check::EventLeak | Check::SemaphoreLeak);
    let (stack, stack_role) = match (own, &allocation_stack, &creation_stack) {
        (Some(s), _, _) => {
            if !is_leak {
                if let Some((role, c)) = &creation_stack {
                    related.push(RelatedStack { role, stack: c.clone() });
                }
            }
            (s, own_role)
        }
        (None, Some(a), _) => {
            if let Some((role, c)) = &creation_stack {
                related.push(RelatedStack { role, stack: c.clone() });
            }
            (a.clone(), Some("allocated at"))
        }
        (None, None, Some((role, c))) => (c.clone(), Some(*role)),
        (None, None, None) => (Vec::new(), None),
    };
    let mut message = message(f);
    if !is_leak {
        message.extend(missing_stacks_hint(f));
    }
    let mut severity = if f.is_error() {
        Severity::Error
    } else {
        Severity::Warning
    };
    // Streams and events a caching allocator or framework creates are kept for the life of
    // the process on purpose (PyTorch's stream pool): a note, as memory held by a pool is.
    if is_leak {
        let frames: &[u64] = replay.stacks.get(&f.op.stack).map_or(&[], Vec::as_slice);
        let note = if f.op.stack == StackId::NONE && f.check != Check::SemaphoreLeak {
            owner::framework_keeping_objects(&replay.modules)
        } else {
            owner::kept_for_life(frames, &replay.modules, "streams and events")
        };
        if let Some(note) = note {
            message.push_str(&note);
            severity = Severity::Note;
        }
    }
    Finding {
        check: f.check.name(),
        severity,
        message,
        stack,
        stack_role,
        count: f.count,
        api: f.op.api,
        ptr: f.ptr,
        result: 0,
        allocation_stack,
        first_free_stack,
        related,
        extra: Vec::new(),
        seq: f.op.seq.0,
    }
}
