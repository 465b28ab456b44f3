//! Fault injection (`GPULEAK_FAIL`): each rule counts the calls of one exact entry point
//! with an atomic counter (exact under any number of threads) and fails the chosen ones.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use gpuleak_format::Api;

use crate::config::{FaultRule, Nth, MAX_FAULT_RULES};

static RULES: OnceLock<Vec<FaultRule>> = OnceLock::new();
static CALLS: [AtomicU64; MAX_FAULT_RULES] = [const { AtomicU64::new(0) }; MAX_FAULT_RULES];

/// Sets the rules (once, at start-up).
pub fn set_rules(rules: &[FaultRule]) {
    let _ = RULES.set(rules.iter().copied().take(MAX_FAULT_RULES).collect());
}

/// Counts a call of `api` in every rule naming it; the error to return if a rule picks this
/// call (the first rule that does).
pub fn hit(api: Api) -> Option<u32> {
    let rules = RULES.get()?;
    let mut error = None;
    for (rule, calls) in rules.iter().zip(&CALLS) {
        if rule.api != api {
            continue;
        }
        let n = calls.fetch_add(1, Ordering::AcqRel) + 1;
        let chosen = match rule.nth {
            Nth::At(k) => n == k,
            Nth::Every(k) => n % k == 0,
        };
        if chosen && error.is_none() {
            error = Some(rule.error);
        }
    }
    error
}

/// In a forked child: counting starts over (the child is a new process for its trace).
pub fn forget_in_child() {
    for c in &CALLS {
        c.store(0, Ordering::Relaxed);
    }
}
