//! Stream-ordered memory pools' own lifetimes (`PoolCreate`, `PoolDestroy`): a pool created or
//! imported and never destroyed holds what it reserved until the process ends, and is a
//! `pool-leak` finding. Its `PoolUsage` samples say how much it reserved at most.
//!
//! A device's default pool is never created by the program and never reported. Allocations
//! still outstanding from a pool are leaks of their own (stream-ordered memory), whether the
//! pool was destroyed or not.

use std::collections::HashMap;

use gpuleak_format::{Api, PoolCreate, PoolDestroy, Seq, StackId};

/// A pool the program made and did not destroy, folded with others of the same call and stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolLeak {
    /// `cuMemPoolCreate` or `cuMemPoolImportFromShareableHandle`.
    pub api: Api,
    /// Runtime call that led to it (`cudaMemPoolCreate`), or `Api::NONE`.
    pub via: Api,
    /// The first pool's handle.
    pub pool: u64,
    /// Creation stack.
    pub stack: StackId,
    /// The first pool's location (`CUmemLocationType`; 0 for an import) and its id (the device
    /// ordinal for a device pool; -1 for an import).
    pub location_type: u32,
    /// See `location_type`.
    pub location: i32,
    /// The first pool's `maxSize` (0: no limit).
    pub max_size: u64,
    /// Pools folded in.
    pub count: u64,
    /// Of them, the ones the shim sampled (`PoolUsage`), and the most each was seen to
    /// reserve, summed.
    pub sampled: u64,
    /// See `sampled`.
    pub reserved_max: u64,
    /// The first pool's creation.
    pub seq: Seq,
    /// Its thread.
    pub tid: u32,
}

#[derive(Debug, Clone, Copy)]
struct LivePool {
    api: Api,
    via: Api,
    stack: StackId,
    location_type: u32,
    location: i32,
    max_size: u64,
    /// The most it was sampled to reserve.
    reserved_max: Option<u64>,
    seq: Seq,
    tid: u32,
}

/// Pools alive now, and those found never destroyed.
#[derive(Debug, Default)]
pub struct MemPools {
    live: HashMap<u64, LivePool>,
    leaks: Vec<PoolLeak>,
    index: HashMap<(Api, StackId), usize>,
}

impl MemPools {
    /// A successful or failed `PoolCreate` record; only a success with a handle makes a pool.
    pub fn create(&mut self, tid: u32, seq: Seq, c: &PoolCreate) {
        if !c.result.is_success() || c.pool == 0 {
            return;
        }
        let pool = LivePool {
            api: c.api,
            via: c.via,
            stack: c.stack,
            location_type: c.location_type,
            location: c.location,
            max_size: c.max_size,
            reserved_max: None,
            seq,
            tid,
        };
        // The same handle again with no destroy between: the trace missed it (the driver never
        // hands out a live pool's handle twice), so the old one counts as never destroyed.
        if let Some(old) = self.live.insert(c.pool, pool) {
            self.leak(c.pool, old);
        }
    }

    /// A `PoolDestroy` record (a failed one destroys nothing).
    pub fn destroy(&mut self, d: &PoolDestroy) {
        if d.result.is_success() {
            self.live.remove(&d.pool);
        }
    }

    /// A `PoolUsage` record: a sample of a pool, if the trace saw it made.
    pub fn usage(&mut self, pool: u64, reserved: u64) {
        if let Some(p) = self.live.get_mut(&pool) {
            p.reserved_max = Some(p.reserved_max.map_or(reserved, |r| r.max(reserved)));
        }
    }

    fn leak(&mut self, handle: u64, p: LivePool) {
        let (sampled, reserved) = p.reserved_max.map_or((0, 0), |r| (1, r));
        match self.index.get(&(p.api, p.stack)) {
            Some(&i) => {
                let l = &mut self.leaks[i];
                l.count += 1;
                l.sampled += sampled;
                l.reserved_max = l.reserved_max.saturating_add(reserved);
            }
            None => {
                self.index.insert((p.api, p.stack), self.leaks.len());
                self.leaks.push(PoolLeak {
                    api: p.api,
                    via: p.via,
                    pool: handle,
                    stack: p.stack,
                    location_type: p.location_type,
                    location: p.location,
                    max_size: p.max_size,
                    count: 1,
                    sampled,
                    reserved_max: reserved,
                    seq: p.seq,
                    tid: p.tid,
                });
            }
        }
    }

    /// Ends the replay: every pool still alive was never destroyed. Oldest creation first
    /// (by handle where creations share a sequence number, so that no hash order shows).
    pub fn finish(mut self) -> Vec<PoolLeak> {
        let mut live: Vec<(u64, LivePool)> = self.live.drain().collect();
        live.sort_by_key(|(h, p)| (p.seq, *h));
        for (h, p) in live {
            self.leak(h, p);
        }
        let mut leaks = self.leaks;
        leaks.sort_by_key(|l| (l.seq, l.pool));
        leaks
    }
}

#[cfg(test)]
mod tests {
    use gpuleak_format::CuResult;

    use super::*;

    #[test]
    fn pools_created_at_one_sequence_number_leak_in_handle_order() {
        let mut pools = MemPools::default();
        // Handles in an order no map keeps, one sequence number for all (a damaged or merged
        // trace), a site for each so that none fold.
        let handles: Vec<u64> = (0..40u64).map(|i| 0x1000 + ((i * 17) % 40) * 0x10).collect();
        for &pool in &handles {
            pools.create(
                1,
                Seq(9),
                &PoolCreate {
                    api: Api::cuMemPoolCreate,
                    via: Api::NONE,
                    result: CuResult::SUCCESS,
                    pool,
                    location_type: 1,
                    location: 0,
                    max_size: 0,
                    handle_types: 0,
                    stack: StackId(pool as u32),
                },
            );
        }
        let leaked: Vec<u64> = pools.finish().iter().map(|l| l.pool).collect();
        let mut sorted = handles;
        sorted.sort_unstable();
        assert_eq!(leaked, sorted);
    }
}
