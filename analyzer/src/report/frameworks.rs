//! The frameworks' part of a report: the latest allocator state of each framework joined with
//! the driver ([`crate::frameworks::join`]), and the findings read from the states.
//!
//! - `tensor-leak` (error): tensors still allocated at the framework's state at exit, one
//!   finding per Python line. Cached free memory is never a leak, nor is a block that a CUDA
//!   library was handed as its workspace (PyTorch's cuBLAS workspaces, record 79).
//! - `tensor-growth` (warning): a line whose live tensor bytes rose at least twice and never
//!   fell over three or more states written while the program ran (snapshots, checks, tests).
//! - `framework-oom` (error): the framework ran out of memory; what its live tensors, its
//!   cache and the memory outside it held then.

use std::collections::HashMap;

use gpuleak_format::Api;

use super::owner::Pool;
use super::{Extra, Finding, Frame, Severity};
use crate::frameworks::join::{self, display_name, FrameworkView, TensorSite};
use crate::frameworks::{PyFrame, State};
use crate::model::LeakReplay;
use crate::run::human_bytes as h;

/// The pool whose memory a framework's segments are.
pub fn pool_of(framework: &str) -> Option<Pool> {
    Pool::of_framework(framework)
}

/// A framework stack as report frames, the user's frame marked.
pub fn frames(frames: &[PyFrame], user: usize) -> Vec<Frame> {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            // PyTorch's C++ frames without debug information name no file (`??`, line 0).
            let known = !f.file.is_empty() && f.file != "??";
            Frame {
                function: Some(f.function.clone()),
                file: known.then(|| f.file.clone()),
                line: known.then_some(f.line),
                module: None,
                address: 0,
                inlined: false,
                user: i == user,
            }
        })
        .collect()
}

/// The latest complete state of each framework, joined with the driver.
pub fn views(replay: &LeakReplay) -> Vec<FrameworkView> {
    let mut latest: Vec<&State> = Vec::new();
    for s in replay.frameworks.complete.iter().filter(|s| s.oom.is_none()) {
        match latest.iter_mut().find(|l| l.framework == s.framework) {
            Some(l) => *l = s,
            None => latest.push(s),
        }
    }
    latest
        .into_iter()
        .map(|s| join::view(s, &replay.modules, &replay.stacks))
        .collect()
}

fn finding(check: &'static str, severity: Severity, message: String, site: Option<&TensorSite>, seq: u64) -> Finding {
    Finding {
        check,
        severity,
        message,
        stack: site.map_or_else(Vec::new, |s| frames(&s.frames, s.user)),
        stack_role: None,
        count: 1,
        api: Api::NONE,
        ptr: 0,
        result: 0,
        allocation_stack: None,
        first_free_stack: None,
        related: Vec::new(),
        extra: Vec::new(),
        seq,
    }
}

/// Every framework finding of the trace.
pub fn findings(replay: &LeakReplay) -> Vec<Finding> {
    let mut out = Vec::new();
    let states = &replay.frameworks.complete;
    let view_of = |s: &State| join::view(s, &replay.modules, &replay.stacks);

    // Tensors left at exit: the latest state written at exit, per framework.
    let mut at_exit: Vec<&State> = Vec::new();
    for s in states.iter().filter(|s| s.reason == "exit" && s.oom.is_none()) {
        at_exit.retain(|e| e.framework != s.framework);
        at_exit.push(s);
    }
    for s in at_exit {
        let v = view_of(s);
        let name = display_name(&v.framework);
        let item = join::item_name(&v.framework);
        for d in &v.devices {
            for site in &d.sites {
                let mut f = finding(
                    "tensor-leak",
                    Severity::Error,
                    format!(
                        "{} in {} {name} {item}{} allocated at {} still allocated at exit (device {})",
                        h(site.bytes),
                        site.tensors,
                        if site.tensors == 1 { "" } else { "s" },
                        site.line(),
                        d.device
                    ),
                    Some(site),
                    s.seq,
                );
                f.count = site.tensors;
                f.extra = vec![
                    ("framework", Extra::S(v.framework.clone())),
                    ("device", Extra::S(d.device.to_string())),
                    ("bytes", Extra::U(site.bytes)),
                    ("tensors", Extra::U(site.tensors)),
                ];
                out.push(f);
            }
        }
    }

    out.extend(growth(states, &view_of));

    for s in states.iter().filter(|s| s.oom.is_some()) {
        let Some(oom) = s.oom else { continue };
        let v = view_of(s);
        let name = display_name(&v.framework);
        let item = join::item_name(&v.framework);
        let d = v
            .devices
            .iter()
            .find(|d| d.device == oom.device)
            .cloned()
            .unwrap_or_default();
        let top = d.sites.first();
        let fits = if d.largest_free_block >= oom.requested {
            "large enough for the request"
        } else {
            "too small for the request"
        };
        let outside = join::outside_text(&v.outside);
        let mut f = finding(
            "framework-oom",
            Severity::Error,
            format!(
                "{name} ran out of memory on device {} asking for {}: {} in {} live {item}s{}, {} cached free \
                 (largest free block {}, {fits}), {} free on the device; outside {name}: {outside}",
                oom.device,
                h(oom.requested),
                h(d.tensor_bytes()),
                d.tensors,
                top.map_or_else(String::new, |t| format!(" (most at {}: {})", t.line(), h(t.bytes))),
                h(d.cached_free_bytes),
                h(d.largest_free_block),
                h(oom.device_free),
            ),
            top,
            s.seq,
        );
        f.extra = vec![
            ("framework", Extra::S(v.framework.clone())),
            ("requested", Extra::U(oom.requested)),
            ("live_bytes", Extra::U(d.live_bytes)),
            ("workspace_bytes", Extra::U(d.workspace_bytes)),
            ("cached_free_bytes", Extra::U(d.cached_free_bytes)),
            ("largest_free_block", Extra::U(d.largest_free_block)),
            ("device_free", Extra::U(oom.device_free)),
        ];
        out.push(f);
    }
    out
}

/// A tensor site across states: its device and line.
type SiteKey = (i32, String);
/// Its bytes at each state, and the site as last seen.
type Series = (Vec<u64>, TensorSite);

/// States a site must be seen in before its growth is a finding.
const GROWTH_STATES: usize = 3;

/// Lines whose live tensor bytes rose at least twice and never fell, over the states of one
/// framework written while it ran (snapshots, checks, tests: neither the exit state nor
/// out-of-memory ones, a moment inside an allocation).
fn growth(states: &[State], view_of: &dyn Fn(&State) -> FrameworkView) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut frameworks: Vec<&str> = states.iter().map(|s| s.framework.as_str()).collect();
    frameworks.dedup();
    frameworks.sort_unstable();
    frameworks.dedup();
    for fw in frameworks {
        // The exit state is judged by `tensor-leak`; a program may well clear what it grew
        // before it ends.
        let list: Vec<&State> = states
            .iter()
            .filter(|s| s.framework == fw && s.oom.is_none() && s.reason != "exit")
            .collect();
        if list.len() < GROWTH_STATES {
            continue;
        }
        // (device, line) -> bytes at each state, and the site as last seen.
        let mut series: HashMap<SiteKey, Series> = HashMap::new();
        for (i, s) in list.iter().enumerate() {
            for d in view_of(s).devices {
                for site in d.sites {
                    let e = series
                        .entry((d.device, site.line()))
                        .or_insert_with(|| (vec![0; list.len()], site.clone()));
                    e.0[i] = site.bytes;
                    e.1 = site;
                }
            }
        }
        let mut grown: Vec<(SiteKey, Series)> = series
            .into_iter()
            .filter(|(_, (bytes, _))| {
                let rises = bytes.windows(2).filter(|w| w[1] > w[0]).count();
                let falls = bytes.windows(2).any(|w| w[1] < w[0]);
                rises >= 2 && !falls
            })
            .collect();
        grown.sort_by(|a, b| {
            let delta = |x: &Vec<u64>| x.last().copied().unwrap_or(0) - x.first().copied().unwrap_or(0);
            delta(&b.1 .0).cmp(&delta(&a.1 .0)).then(a.0.cmp(&b.0))
        });
        let seq = list.last().map_or(0, |s| s.seq);
        for ((device, line), (bytes, site)) in grown {
            let (first, last) = (bytes[0], bytes[bytes.len() - 1]);
            let mut f = finding(
                "tensor-growth",
                Severity::Warning,
                format!(
                    "live {} {}s allocated at {line} grew over {} states, from {} to {} (device {device})",
                    display_name(fw),
                    join::item_name(fw),
                    bytes.len(),
                    h(first),
                    h(last)
                ),
                Some(&site),
                seq,
            );
            f.extra = vec![
                ("framework", Extra::S(fw.to_string())),
                ("first_bytes", Extra::U(first)),
                ("last_bytes", Extra::U(last)),
                ("states", Extra::U(bytes.len() as u64)),
            ];
            out.push(f);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frameworks::States;
    use crate::model::LeakReplay;
    use gpuleak_format::{
        Addrs, Body, FrameworkBlocks, FrameworkEnd, FrameworkFrames, FrameworkSegment, FrameworkState, LibWorkspace,
    };

    /// Four snapshot states in which one more 1 MiB block is live at `train.py:7` each time
    /// (a workspace per new stream, when `recorded`), in a segment at 0x100_0000.
    fn states(recorded: bool) -> States {
        let mut states = States::default();
        for id in 1..=4u64 {
            if recorded {
                let ptr = 0x100_0000 + (id - 1) * (1 << 20);
                let ws = LibWorkspace {
                    library: LibWorkspace::CUBLAS,
                    ptr,
                    size: 1 << 20,
                };
                states.apply(&Body::from(ws));
            }
            let bodies: Vec<Body<'static>> = vec![
                FrameworkState {
                    id,
                    layout: 1,
                    framework: "torch".into(),
                    reason: "snapshot".into(),
                    snapshot: id,
                }
                .into(),
                FrameworkSegment {
                    state: id,
                    device: 0,
                    address: 0x100_0000,
                    size: 8 << 20,
                    stream: 0,
                    pool: 0,
                }
                .into(),
                FrameworkFrames {
                    id: 1,
                    state: id,
                    names: vec!["train.py".into(), "step".into()],
                    lines: Addrs(vec![7].into()),
                }
                .into(),
                FrameworkBlocks {
                    state: id,
                    segment: 0x100_0000,
                    blocks: Addrs(
                        (0..id)
                            .flat_map(|i| [i << 20, 1 << 20, 1 << 20, 1, 1])
                            .collect::<Vec<u64>>()
                            .into(),
                    ),
                }
                .into(),
            ];
            for b in &bodies {
                states.apply(b);
            }
            let end = FrameworkEnd {
                state: id,
                segments: 1,
                blocks: id as u32,
            };
            assert_eq!(states.apply(&end.into()), Some(id));
            states.complete(id, id * 10, Vec::new());
        }
        states
    }

    /// An out-of-memory state: its live tensors leave the workspace out (`live_bytes` keeps
    /// it, as PyTorch's `memory_allocated()` does).
    #[test]
    fn framework_oom_counts_live_tensors_without_workspaces() {
        use gpuleak_format::FrameworkOom;

        let mut states = states(true);
        let oom = FrameworkOom {
            state: 4,
            device: 0,
            requested: 8 << 20,
            device_allocated: 8 << 20,
            device_free: 0,
        };
        // State 5, written for the OOM: the workspace at 0x100_0000 and a 1 MiB tensor at
        // 0x140_0000, where no workspace was recorded.
        let mut replay = LeakReplay::default();
        let begin = FrameworkState {
            id: 5,
            layout: 1,
            framework: "torch".into(),
            reason: "oom".into(),
            snapshot: 0,
        };
        states.apply(&begin.into());
        let seg = FrameworkSegment {
            state: 5,
            device: 0,
            address: 0x100_0000,
            size: 8 << 20,
            stream: 0,
            pool: 0,
        };
        states.apply(&seg.into());
        let blocks = FrameworkBlocks {
            state: 5,
            segment: 0x100_0000,
            blocks: Addrs(vec![0, 1 << 20, 1 << 20, 1, 0, 4 << 20, 1 << 20, 1 << 20, 1, 0].into()),
        };
        states.apply(&blocks.into());
        states.apply(&FrameworkOom { state: 5, ..oom }.into());
        let end = FrameworkEnd {
            state: 5,
            segments: 1,
            blocks: 2,
        };
        assert_eq!(states.apply(&end.into()), Some(5));
        states.complete(5, 60, Vec::new());
        replay.frameworks = states;
        let found = findings(&replay);
        let oom: Vec<&Finding> = found.iter().filter(|f| f.check == "framework-oom").collect();
        assert_eq!(oom.len(), 1, "{found:?}");
        assert!(
            oom[0].message.contains("asking for 8.0 MiB: 1.0 MiB in 1 live tensors"),
            "{}",
            oom[0].message
        );
    }

    /// Workspaces that pile up at one line (a new stream's each) are no `tensor-growth`;
    /// tensors that do are.
    #[test]
    fn workspaces_that_pile_up_at_a_line_are_no_tensor_growth_and_tensors_are() {
        let view_of = |s: &State| join::view(s, &Default::default(), &Default::default());
        let grown = growth(&states(false).complete, &view_of);
        assert_eq!(grown.len(), 1, "{grown:?}");
        assert!(grown[0].message.contains("train.py:7"), "{}", grown[0].message);
        assert_eq!(growth(&states(true).complete, &view_of), Vec::new());
    }
}
