//! Tensors inside the frameworks' caching allocators (PyTorch first), joined with the driver's
//! view by address.
//!
//! The Python package writes each allocator state it reads (PyTorch's
//! `torch.cuda.memory._snapshot()`) as records 70 to 76 ([`gpuleak_format::framework`]); the
//! replay gathers the complete ones with the driver allocations live at their end
//! ([`state`]); [`join`] splits each segment into live tensors by Python line, blocks freed
//! but in use by a stream, and cached free memory, and names the device memory outside every
//! segment by owner. The report's findings (`tensor-leak`, `tensor-growth`, `framework-oom`)
//! are read from those views.
//!
//! ```
//! use gpuleak_analyzer::frameworks::{join, States};
//! use gpuleak_format::*;
//!
//! let mut states = States::default();
//! let state = FrameworkState { id: 1, layout: 1, framework: "torch".into(), reason: "exit".into(), snapshot: 0 };
//! assert_eq!(states.apply(&state.into()), None);
//! let segment = FrameworkSegment { state: 1, device: 0, address: 0x1000, size: 4096, stream: 0, pool: 1 };
//! states.apply(&segment.into());
//! let end = FrameworkEnd { state: 1, segments: 1, blocks: 0 };
//! assert_eq!(states.apply(&end.into()), Some(1));
//! states.complete(1, 9, Vec::new());
//! let view = join::view(&states.complete[0], &Default::default(), &Default::default());
//! assert_eq!(view.devices[0].reserved, 4096);
//! ```

pub mod join;
pub mod state;

pub use join::{FrameworkView, TensorSite};
pub use state::{DriverAlloc, PyFrame, State, States};
