//! Which allocation stacks belong to a known caching allocator, by the module that owns them
//! (the memory pass shows their memory as reserved by a pool).

use std::collections::HashMap;

use gpuleak_format::StackId;

use super::Modules;
use crate::owner;

/// Answers per stack, worked out once.
#[derive(Debug, Default)]
pub struct Pools {
    known: crate::hash::HashMap<StackId, bool>,
    /// The stack asked last and its answer: asked at every allocation of a memory report,
    /// most often for the same stack as the one before.
    last: Option<(StackId, bool)>,
}

impl Pools {
    /// Whether `stack`'s owner module is a caching allocator (PyTorch, XLA, CuPy, RMM).
    #[inline]
    pub fn is_pool(&mut self, stack: StackId, stacks: &HashMap<StackId, Vec<u64>>, modules: &Modules) -> bool {
        match self.last {
            Some((last, pool)) if last == stack => pool,
            _ => self.work_out(stack, stacks, modules),
        }
    }

    /// [`Pools::is_pool`] for another stack than the one asked last, out of line.
    #[cold]
    #[inline(never)]
    fn work_out(&mut self, stack: StackId, stacks: &HashMap<StackId, Vec<u64>>, modules: &Modules) -> bool {
        let pool = *self.known.entry(stack).or_insert_with(|| {
            let frames = stacks.get(&stack).map_or(&[][..], Vec::as_slice);
            owner::owner(frames, modules).and_then(owner::pool_of).is_some()
        });
        self.last = Some((stack, pool));
        pool
    }
}
