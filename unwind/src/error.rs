//! Why a method could not be initialised.

use std::fmt;

use crate::Method;

/// Why [`init`](crate::init) could not use a method (see
/// [`init_fallback_reason`](crate::init_fallback_reason)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitError {
    /// The method is not implemented for this target architecture.
    Unsupported {
        /// The method asked for.
        method: Method,
    },
    /// `libunwind.so.8` or its `unw_backtrace` could not be loaded.
    LibUnwindMissing {
        /// What failed, with `dlerror()`'s explanation.
        detail: String,
    },
    /// A capture with the method disagreed with libgcc's `_Unwind_Backtrace` on the stack of
    /// the `init` call itself, so its results could not be trusted in this process.
    SelfTestFailed {
        /// The method tested.
        method: Method,
        /// The two captures.
        detail: String,
    },
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::Unsupported { method } => {
                write!(f, "stack capture method {method} is not available on this architecture")
            }
            InitError::LibUnwindMissing { detail } => write!(
                f,
                "cannot load libunwind ({detail}); install libunwind8 or use another method"
            ),
            InitError::SelfTestFailed { method, detail } => write!(
                f,
                "stack capture method {method} disagreed with libgcc's unwinder at start-up \
                 ({detail}); using a fallback"
            ),
        }
    }
}

impl std::error::Error for InitError {}
