//! The groups of records of live allocations: made, joined and released as the analyzer's
//! model makes, retains and frees allocations.

use super::history::memory_device;
use super::{Compactor, Group};
use crate::api::Api;
use crate::fields::{Ctx, MemKind};
use crate::record::{Alloc, Checkpoint, Free, Record};
use crate::space::{is_owned_memory, Space};
use crate::vmm::Mapping;

impl Compactor {
    /// A context torn down: its allocations are kept for good, with the teardown.
    pub(super) fn teardown(&mut self, ctx: Ctx) {
        let gone: Vec<(Space, u64)> = self
            .live
            .iter()
            .filter(|(_, g)| g.ctx == ctx)
            .map(|(k, _)| *k)
            .collect();
        for key in gone {
            if let Some(g) = self.live.remove(&key) {
                if key.0 == Space::Physical {
                    self.mappings.forget_handle(key.1);
                }
                self.history_release(&g);
                self.permanent.extend(g.seqs);
            }
        }
    }

    pub(super) fn alloc(&mut self, tid: u32, record: &Record<'_>, a: &Alloc) {
        let class = |flags| (record.body.kind(), a.api.0, flags);
        if !a.result.is_success() {
            if a.api.mem_kind().is_some_and(is_owned_memory) && a.api != Api::cuMemRetainAllocationHandle {
                self.history.event();
            }
            return self.count(class(Checkpoint::FAILED));
        }
        if a.api == Api::cuMemRetainAllocationHandle {
            let seq = self.keep(tid, record, 0);
            match self.live.get_mut(&(Space::Physical, a.ptr.0)) {
                Some(g) => {
                    g.holds += 1;
                    g.seqs.push(seq);
                }
                None => self.release(seq),
            }
            return;
        }
        let Some(kind) = a.api.mem_kind() else {
            return self.count(class(0));
        };
        if kind == MemKind::Graph || (kind == MemKind::Async && self.captures.is_capturing(&a.stream.0)) {
            self.graph_nodes.insert(a.ptr.0);
            return self.keep_for_good(tid, record);
        }
        let key = (Space::of(kind), a.ptr.0);
        let again = match kind {
            MemKind::VmmImport | MemKind::Multicast => self.live.contains_key(&key),
            MemKind::Ipc | MemKind::PoolImport => self.live.get(&key).is_some_and(|g| g.kind == Some(kind)),
            _ => false,
        };
        if again {
            let seq = self.keep(tid, record, Checkpoint::AGAIN);
            if let Some(g) = self.live.get_mut(&key) {
                g.holds += 1;
                g.seqs.push(seq);
            }
            return;
        }
        if let Some(old) = self.live.remove(&key) {
            // The analyzer forgets it: the new allocation counts a missed free.
            self.count((record.body.kind(), Api::NONE.0, Checkpoint::REPLACED));
            self.dropped_total -= 1;
            self.history_release(&old);
            self.release_group(old);
        }
        self.forget_recent(key);
        let seq = self.keep(tid, record, 0);
        let group = Group {
            seqs: vec![seq],
            kind: Some(kind),
            ctx: a.ctx,
            holds: 1,
            mappings: 0,
            bytes: if is_owned_memory(kind) { a.size } else { 0 },
            stack: a.stack,
            api: a.api,
            device: memory_device(kind, a.api, a.aux, self.contexts.device(a.ctx)),
        };
        self.history.event();
        if is_owned_memory(kind) {
            self.history
                .change(group.stack, group.api, group.device, i128::from(group.bytes), 0);
        }
        self.live.insert(key, group);
    }

    pub(super) fn free(&mut self, tid: u32, record: &Record<'_>, f: &Free) {
        let ok = f.result.is_success();
        let class = |flags| (record.body.kind(), f.api.0, flags);
        let kind = f.api.mem_kind();
        if kind == Some(MemKind::Async) && self.captures.is_capturing(&f.stream.0) {
            return self.count(class(Checkpoint::CAPTURED));
        }
        let Some(kind) = kind.filter(|_| f.ptr.0 != 0) else {
            return self.count(class(if ok { 0 } else { Checkpoint::FAILED }));
        };
        let space = Space::of(kind);
        let key = (space, f.ptr.0);
        if ok && space == Space::Device && self.graph_memory.contains(&f.ptr.0) {
            // Memory a kept graph launch allocated: its free is kept with it.
            return self.keep_for_good(tid, record);
        }
        match self.live.get_mut(&key) {
            Some(g) if ok && g.holds > 0 => {
                g.holds -= 1;
                let released = g.holds == 0 && !(space == Space::Physical && g.mappings > 0);
                let seq = self.keep(tid, record, 0);
                if let Some(g) = self.live.get_mut(&key) {
                    g.seqs.push(seq);
                }
                if released {
                    self.released(key);
                }
            }
            // A bad free (of memory released but still mapped), or a failed one.
            Some(_) => self.count(class(if ok { 0 } else { Checkpoint::FAILED })),
            None => {
                let graph_free = ok
                    && space == Space::Device
                    && !self.recent_groups.contains_key(&key)
                    && self.graph_nodes.contains(&f.ptr.0);
                let flags = match (ok, graph_free) {
                    (false, _) => Checkpoint::FAILED,
                    (true, true) => Checkpoint::GRAPH_FREE,
                    (true, false) => 0,
                };
                self.count(class(flags));
            }
        }
    }

    /// A mapping is gone: a released handle with no mapping left is freed.
    pub(super) fn unmapped(&mut self, gone: Mapping) {
        let key = (Space::Physical, gone.handle);
        let Some(g) = self.live.get_mut(&key) else { return };
        g.mappings = g.mappings.saturating_sub(1);
        if g.holds == 0 && g.mappings == 0 {
            self.released(key);
        }
    }

    /// The allocation at `key` is gone: its group joins the recently released ones.
    pub(super) fn released(&mut self, key: (Space, u64)) {
        let Some(g) = self.live.remove(&key) else { return };
        self.history_release(&g);
        if self.recent_capacity == 0 {
            return self.release_group(g);
        }
        let generation = self.recent_generation;
        self.recent_generation += 1;
        if let Some((_, old)) = self.recent_groups.insert(key, (generation, g)) {
            self.release_group(old);
        }
        self.recent.push_back((key, generation));
        while self.recent.len() > self.recent_capacity {
            let Some((old, old_generation)) = self.recent.pop_front() else {
                break;
            };
            if self.recent_groups.get(&old).is_some_and(|(g, _)| *g == old_generation) {
                if let Some((_, g)) = self.recent_groups.remove(&old) {
                    self.release_group(g);
                }
            }
        }
    }

    /// The history sees a group's memory go (a release, a teardown, a missed free).
    fn history_release(&mut self, g: &Group) {
        self.history.event();
        if g.kind.is_some_and(is_owned_memory) {
            let born = g.seqs.first().copied().unwrap_or(0);
            self.history
                .change(g.stack, g.api, g.device, -i128::from(g.bytes), born);
        }
    }

    /// `key` holds a live allocation again: the one released there is forgotten.
    pub(super) fn forget_recent(&mut self, key: (Space, u64)) {
        if let Some((_, g)) = self.recent_groups.remove(&key) {
            self.release_group(g);
        }
    }
}
