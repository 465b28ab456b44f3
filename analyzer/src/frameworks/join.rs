//! The join by address: each framework state laid over the driver's live allocations, and
//! the findings read from it (tensors left at exit, tensor growth, out of memory).

use std::collections::{BTreeMap, HashMap, HashSet};

use gpuleak_format::framework::BlockState;

use super::state::{Cover, DriverAlloc, PyFrame, State, Stats};
use crate::modules::{file_name, Modules};
use crate::owner::Pool;

/// Tensor sites shown per device.
pub const TOP_SITES: usize = 10;

/// Live tensors allocated at one Python line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSite {
    /// Bytes (the allocator's rounded block sizes).
    pub bytes: u64,
    /// Live tensors (blocks).
    pub tensors: u64,
    /// The stack of the first block, innermost first.
    pub frames: Vec<PyFrame>,
    /// Index in `frames` of the user's frame (the first outside the framework).
    pub user: usize,
}

impl TensorSite {
    /// `file:line` of the user's frame, or `unknown line`.
    pub fn line(&self) -> String {
        self.frames
            .get(self.user)
            .map_or_else(|| "an unknown line".to_string(), |f| format!("{}:{}", f.file, f.line))
    }
}

/// Device memory outside the framework, by owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outside {
    /// `NCCL`, `cuBLAS`, `cuDNN`, a framework's runtime (`XLA`, or `XLA (not its allocator)`
    /// in JAX's own view), or `the program`.
    pub owner: &'static str,
    /// Bytes.
    pub bytes: u64,
    /// Driver allocations.
    pub allocations: u64,
}

/// The memory outside the framework as one phrase: `NCCL 64.0 MiB, the program 2.0 MiB`, or
/// `nothing`.
pub fn outside_text(outside: &[Outside]) -> String {
    if outside.is_empty() {
        return "nothing".to_string();
    }
    outside
        .iter()
        .map(|o| format!("{} {}", o.owner, crate::run::human_bytes(o.bytes)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the framework held on one device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceView {
    /// Device ordinal.
    pub device: i32,
    /// Segments.
    pub segments: u64,
    /// Bytes in segments (`memory_reserved()`).
    pub reserved: u64,
    /// Live tensors (allocated blocks that are no library's workspace).
    pub tensors: u64,
    /// Bytes in every allocated block, tensors and workspaces (`memory_allocated()`).
    pub live_bytes: u64,
    /// Bytes the live tensors asked for (the rest of the tensors' bytes is rounding).
    pub requested_bytes: u64,
    /// Allocated blocks that a CUDA library was handed as its workspace (PyTorch's cuBLAS
    /// workspaces, kept for the life of the process): not tensors.
    pub workspaces: u64,
    /// Bytes in those blocks (part of `live_bytes`).
    pub workspace_bytes: u64,
    /// Bytes freed by the program but still in use by a stream.
    pub pending_free_bytes: u64,
    /// Bytes cached free.
    pub cached_free_bytes: u64,
    /// The largest cached free block.
    pub largest_free_block: u64,
    /// Segments with no driver allocation at their address in the trace (allocated before
    /// tracing began, or by a path the shim does not see).
    pub unmatched_segments: u64,
    /// Tensor sites, largest first (all of them; reports show [`TOP_SITES`]).
    pub sites: Vec<TensorSite>,
    /// The framework's own counters, when it wrote them.
    pub counters: Option<Stats>,
}

impl DeviceView {
    /// Bytes in live tensors: the allocated blocks but the libraries' workspaces.
    pub fn tensor_bytes(&self) -> u64 {
        self.live_bytes.saturating_sub(self.workspace_bytes)
    }
}

/// One framework state joined with the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameworkView {
    /// The framework (`torch`).
    pub framework: String,
    /// The state's number.
    pub state: u64,
    /// Why it was written.
    pub reason: String,
    /// The Snapshot record written with it (0: none).
    pub snapshot: u64,
    /// Per device.
    pub devices: Vec<DeviceView>,
    /// Device memory outside every segment, by owner, largest first.
    pub outside: Vec<Outside>,
}

/// The framework's name as people write it.
pub fn display_name(framework: &str) -> &str {
    match framework {
        "torch" => "PyTorch",
        "cupy" => "CuPy",
        "jax" => "JAX",
        other => other,
    }
}

/// What the framework calls the buffers of its allocator: PyTorch's tensors, CuPy's and JAX's
/// arrays.
pub fn item_name(framework: &str) -> &'static str {
    match framework {
        "cupy" | "jax" => "array",
        _ => "tensor",
    }
}

/// Whether a Python file belongs to a framework or to gpuleak (not the user's line).
fn is_framework_file(file: &str) -> bool {
    file.starts_with('<')
        || file
            .split('/')
            .rev()
            .skip(1)
            .any(|d| matches!(d, "torch" | "cupy" | "cupy_backends" | "jax" | "jaxlib" | "gpuleak"))
}

/// Whether a frame's file is Python source: PyTorch's C++ frames (`GPULEAK_TORCH_STACKS=all`)
/// name C++ sources or `??`.
fn is_python_file(file: &str) -> bool {
    file.ends_with(".py") || file.ends_with(".pyw") || file.starts_with('<')
}

/// The index of the user's frame: the first Python frame outside the framework, else the
/// first frame outside it, else the first.
pub fn user_frame(frames: &[PyFrame]) -> usize {
    frames
        .iter()
        .position(|f| is_python_file(&f.file) && !is_framework_file(&f.file))
        .or_else(|| frames.iter().position(|f| !is_framework_file(&f.file)))
        .unwrap_or(0)
}

/// Who made a driver allocation outside the framework: a CUDA library in its stack, else a
/// framework's runtime (`framework`'s own, outside its allocator: XLA's allocations for its
/// compiled programs), else the program.
fn owner_of(stack: &[u64], modules: &Modules, framework: &str) -> &'static str {
    for &a in stack {
        let Some(m) = modules.find(a) else { continue };
        let name = file_name(&m.path);
        if name.starts_with("libnccl") {
            return "NCCL";
        }
        if name.starts_with("libcublas") {
            return "cuBLAS";
        }
        if name.starts_with("libcudnn") {
            return "cuDNN";
        }
    }
    let Some(pool) = crate::owner::owner(stack, modules).and_then(crate::owner::pool_of) else {
        return "the program";
    };
    let own = Pool::of_framework(framework) == Some(pool);
    match (pool, own) {
        (Pool::Pytorch, false) => "PyTorch",
        (Pool::Pytorch, true) => "PyTorch (not its allocator)",
        (Pool::Xla, false) => "XLA",
        (Pool::Xla, true) => "XLA (not its allocator)",
        (Pool::Cupy, false) => "CuPy",
        (Pool::Cupy, true) => "CuPy (not its pool)",
        (Pool::Rmm, _) => "RMM",
    }
}

/// Joins `state` with the driver allocations live at its end.
pub fn view(state: &State, modules: &Modules, stacks: &HashMap<gpuleak_format::StackId, Vec<u64>>) -> FrameworkView {
    let mut devices: BTreeMap<i32, DeviceView> = BTreeMap::new();
    let mut sites: BTreeMap<i32, HashMap<(String, u32, String), TensorSite>> = BTreeMap::new();
    // Where the driver has memory: allocations, and each mapping of a VMM handle (an
    // expandable segment of PyTorch begins where one of its handles is mapped).
    let driver: HashSet<u64> = state.driver.iter().filter_map(DriverAlloc::address).collect();
    for seg in &state.segments {
        let d = devices.entry(seg.device).or_insert_with(|| DeviceView {
            device: seg.device,
            ..DeviceView::default()
        });
        d.segments += 1;
        d.reserved = d.reserved.saturating_add(seg.size);
        if !driver.contains(&seg.address) {
            d.unmatched_segments += 1;
        }
        for b in &seg.blocks {
            match b.state {
                BlockState::Allocated if state.workspaces.contains_key(&seg.address.wrapping_add(b.offset)) => {
                    d.workspaces += 1;
                    d.workspace_bytes = d.workspace_bytes.saturating_add(b.size);
                    d.live_bytes = d.live_bytes.saturating_add(b.size);
                }
                BlockState::Allocated => {
                    d.tensors += 1;
                    d.live_bytes = d.live_bytes.saturating_add(b.size);
                    d.requested_bytes = d.requested_bytes.saturating_add(b.requested);
                    let frames = state.frames.get(&b.frames).cloned().unwrap_or_default();
                    let user = user_frame(&frames);
                    let key = frames
                        .get(user)
                        .map_or_else(Default::default, |f| (f.file.clone(), f.line, f.function.clone()));
                    let site = sites.entry(seg.device).or_default().entry(key).or_insert(TensorSite {
                        bytes: 0,
                        tensors: 0,
                        frames,
                        user,
                    });
                    site.bytes = site.bytes.saturating_add(b.size);
                    site.tensors += 1;
                }
                BlockState::PendingFree => d.pending_free_bytes = d.pending_free_bytes.saturating_add(b.size),
                BlockState::Inactive => {
                    d.cached_free_bytes = d.cached_free_bytes.saturating_add(b.size);
                    d.largest_free_block = d.largest_free_block.max(b.size);
                }
            }
        }
    }
    for s in &state.stats {
        devices
            .entry(s.device)
            .or_insert_with(|| DeviceView {
                device: s.device,
                ..DeviceView::default()
            })
            .counters = Some(*s);
    }
    for (device, by_line) in sites {
        if let Some(d) = devices.get_mut(&device) {
            let mut list: Vec<TensorSite> = by_line.into_values().collect();
            list.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.line().cmp(&b.line())));
            d.sites = list;
        }
    }
    let cover = Cover::of(&state.segments);
    let in_segment = |ptr: u64| cover.contains(ptr);
    // A handle with a mapping inside a segment is the framework's, wherever else it is
    // mapped; a handle outside counts its memory once, however many mappings it has.
    let inside: HashSet<u64> = state
        .driver
        .iter()
        .filter(|a| a.address().is_some_and(in_segment))
        .filter_map(|a| a.handle.map(|h| h.id))
        .collect();
    let mut counted: HashSet<u64> = HashSet::new();
    let mut outside: BTreeMap<&'static str, Outside> = BTreeMap::new();
    for a in &state.driver {
        let bytes = match a.handle {
            Some(h) if inside.contains(&h.id) || !counted.insert(h.id) => continue,
            Some(h) => h.bytes,
            None if in_segment(a.ptr) => continue,
            None => a.size,
        };
        let owner = owner_of(
            stacks.get(&a.stack).map_or(&[], Vec::as_slice),
            modules,
            &state.framework,
        );
        let o = outside.entry(owner).or_insert(Outside {
            owner,
            bytes: 0,
            allocations: 0,
        });
        o.bytes = o.bytes.saturating_add(bytes);
        o.allocations += 1;
    }
    let mut outside: Vec<Outside> = outside.into_values().collect();
    outside.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.owner.cmp(b.owner)));
    FrameworkView {
        framework: state.framework.clone(),
        state: state.id,
        reason: state.reason.clone(),
        snapshot: state.snapshot,
        devices: devices.into_values().collect(),
        outside,
    }
}

/// One line for a view: "PyTorch holds 12.3 GiB on device 0: 9.1 GiB in 41,012 live tensors
/// (top lines ...), 3.2 GiB cached free (largest free block 180 MiB); outside PyTorch: ...".
pub fn summary_line(v: &FrameworkView) -> String {
    use crate::run::human_bytes as h;
    let name = display_name(&v.framework);
    let item = item_name(&v.framework);
    let mut parts = Vec::new();
    for d in &v.devices {
        let top: Vec<String> = d
            .sites
            .iter()
            .take(3)
            .map(|s| format!("{} {}", s.line(), h(s.bytes)))
            .collect();
        let top = if top.is_empty() {
            String::new()
        } else {
            format!(" (top lines: {})", top.join(", "))
        };
        let pending = if d.pending_free_bytes > 0 {
            format!(", {} freed but in use by a stream", h(d.pending_free_bytes))
        } else {
            String::new()
        };
        let tensors = format!(
            "{} in {} live {item}{}{top}",
            h(d.tensor_bytes()),
            d.tensors,
            if d.tensors == 1 { "" } else { "s" },
        );
        // With workspaces, what is allocated is split in two: the program's tensors and the
        // libraries' workspaces, which are not leaks.
        let allocated = if d.workspaces == 0 {
            format!("{tensors},")
        } else {
            format!(
                "{} allocated: {tensors}, {} in {} cuBLAS workspace{};",
                h(d.live_bytes),
                h(d.workspace_bytes),
                d.workspaces,
                if d.workspaces == 1 { "" } else { "s" },
            )
        };
        parts.push(format!(
            "{name} holds {} on device {}: {allocated} {} cached free (largest free block {}){pending}",
            h(d.reserved),
            d.device,
            h(d.cached_free_bytes),
            h(d.largest_free_block),
        ));
    }
    if parts.is_empty() {
        parts.push(format!("{name} holds no memory"));
    }
    format!("{}; outside {name}: {}", parts.join("; "), outside_text(&v.outside))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_outside_is_named_by_library_then_by_framework_runtime_then_the_program() {
        let modules = Modules::of_paths(&[
            (0x1000, "/lib/libcuda.so.1"),
            (0x2000, "/venv/nvidia/cudnn/lib/libcudnn_graph.so.9"),
            (0x3000, "/venv/jax_plugins/xla_cuda12/xla_cuda_plugin.so"),
            (0x4000, "/venv/cupy/_core/core.so"),
            (0x5000, "/usr/bin/python3"),
        ]);
        let cases = [
            (&[0x1010, 0x2010, 0x3010, 0x5010][..], "jax", "cuDNN"),
            (&[0x1010, 0x3010, 0x5010][..], "jax", "XLA (not its allocator)"),
            (&[0x1010, 0x3010, 0x5010][..], "torch", "XLA"),
            (&[0x1010, 0x4010, 0x5010][..], "cupy", "CuPy (not its pool)"),
            (&[0x1010, 0x4010][..], "jax", "CuPy"),
            (&[0x1010, 0x5010][..], "jax", "the program"),
            (&[][..], "torch", "the program"),
        ];
        for (stack, framework, owner) in cases {
            assert_eq!(
                owner_of(stack, &modules, framework),
                owner,
                "{stack:x?} in {framework}'s view"
            );
        }
    }
}
