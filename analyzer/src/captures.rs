//! Which streams are capturing, following a capture across streams: the format crate's
//! [`gpuleak_format::captures`], which the analyzer's models and the checkpoint compactor
//! share.

pub use gpuleak_format::captures::{Captures, EXTERNAL};
