//! The features' switches and settings: what the hooks and every part of [`super`] read.
//! The settings are read by [`super::flags`] at the first intercepted call, which sets them
//! here; the parts read them from here, below the start-up that needs them all.

use std::sync::atomic::AtomicU32;
use std::sync::OnceLock;

use crate::config;

/// Keep the live map and the counters.
pub const LIVE: u32 = 1;
/// Fault rules are set.
pub const FAULTS: u32 = 1 << 1;
/// A budget is set.
pub const BUDGET: u32 = 1 << 2;
/// A snapshot was asked for (by the signal handler or the period) and is not written yet.
pub const SNAPSHOT_DUE: u32 = 1 << 3;
/// In a forked child: the background thread must be started again.
pub const RESTART: u32 = 1 << 4;
/// Settings not read yet.
pub(super) const UNINIT: u32 = 1 << 31;

/// The features on, as bits; 0 when everything is off (the hot paths test only that).
pub static FLAGS: AtomicU32 = AtomicU32::new(UNINIT);

/// The settings, once read.
pub(super) static SETTINGS: OnceLock<config::Ops> = OnceLock::new();

/// The settings (defaults before the first intercepted call).
pub fn settings() -> &'static config::Ops {
    SETTINGS.get_or_init(config::Ops::default)
}
