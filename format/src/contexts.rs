//! Which contexts exist, and when one is torn down (taking its memory with it).

use std::collections::HashMap;

use crate::api::Api;
use crate::fields::Ctx;
use crate::record::{CtxCreate, CtxDestroy};

/// The device's primary context and how many times it is retained.
#[derive(Debug, Clone, Copy)]
struct Primary {
    ctx: Ctx,
    retains: u64,
}

/// Contexts in use, from `CtxCreate` and `CtxDestroy` records.
#[derive(Debug, Default)]
pub struct Contexts {
    device_of: HashMap<Ctx, i32>,
    primary: HashMap<i32, Primary>,
    /// The context created last and its device, while it is in `device_of`: asked at every
    /// allocation of a memory report, and found without hashing.
    newest: Option<(Ctx, i32)>,
}

impl Contexts {
    /// A context came into use (successful calls only).
    pub fn create(&mut self, r: &CtxCreate) {
        self.device_of.insert(r.ctx, r.device);
        self.newest = Some((r.ctx, r.device));
        if matches!(r.api, Api::cuDevicePrimaryCtxRetain) {
            let p = self
                .primary
                .entry(r.device)
                .or_insert(Primary { ctx: r.ctx, retains: 0 });
            p.ctx = r.ctx;
            p.retains += 1;
        }
    }

    /// A context destroyed, or a primary context released or reset (successful calls only):
    /// returns the context whose memory the driver has now freed, if any.
    ///
    /// `cuCtxDestroy` destroys its context; a primary context is torn down by a reset, or by
    /// the release that brings its retain count to zero (a release with no retain on record
    /// counts as the last one: the driver accepted it, so the context existed).
    pub fn destroy(&mut self, r: &CtxDestroy) -> Option<Ctx> {
        match r.api {
            Api::cuDevicePrimaryCtxRelease | Api::cuDevicePrimaryCtxRelease_v2 => {
                let device = self.device_for(r)?;
                let p = self.primary.get_mut(&device)?;
                p.retains = p.retains.saturating_sub(1);
                if p.retains > 0 {
                    return None;
                }
                let ctx = p.ctx;
                self.primary.remove(&device);
                self.forget(ctx);
                Some(ctx)
            }
            Api::cuDevicePrimaryCtxReset | Api::cuDevicePrimaryCtxReset_v2 => {
                // A reset frees everything in the context; the context handle and its retain
                // count stay, and the next use starts it afresh.
                let device = self.device_for(r)?;
                self.primary.get(&device).map(|p| p.ctx)
            }
            _ => {
                if r.ctx == Ctx(0) {
                    return None;
                }
                self.forget(r.ctx);
                self.primary.retain(|_, p| p.ctx != r.ctx);
                Some(r.ctx)
            }
        }
    }

    /// The device of a live context.
    #[inline]
    pub fn device(&self, ctx: Ctx) -> Option<i32> {
        // Asked at every allocation of a memory report; most programs allocate in the context
        // they made last.
        match self.newest {
            Some((c, device)) if c == ctx => Some(device),
            _ => self.device_of.get(&ctx).copied(),
        }
    }

    /// `ctx` is gone.
    fn forget(&mut self, ctx: Ctx) {
        self.device_of.remove(&ctx);
        if self.newest.is_some_and(|(c, _)| c == ctx) {
            self.newest = None;
        }
    }

    /// The device a device-level record names (its own field, else its context's device).
    fn device_for(&self, r: &CtxDestroy) -> Option<i32> {
        if r.device >= 0 {
            Some(r.device)
        } else {
            self.device_of.get(&r.ctx).copied()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::CuResult;

    fn create(ctx: u64, device: i32) -> CtxCreate {
        CtxCreate {
            api: Api::cuCtxCreate_v2,
            result: CuResult::SUCCESS,
            ctx: Ctx(ctx),
            device,
            flags: 0,
        }
    }

    #[test]
    fn a_context_names_its_device_alone_or_among_others_and_none_once_destroyed() {
        let mut c = Contexts::default();
        assert_eq!(c.device(Ctx(0x10)), None, "no context yet");
        c.create(&create(0x10, 3));
        assert_eq!(c.device(Ctx(0x10)), Some(3));
        assert_eq!(c.device(Ctx(0x20)), None, "another handle, one context known");
        c.create(&create(0x20, 5));
        assert_eq!((c.device(Ctx(0x10)), c.device(Ctx(0x20))), (Some(3), Some(5)));
        assert_eq!(c.device(Ctx(0x30)), None);
        let destroy = CtxDestroy {
            api: Api::cuCtxDestroy_v2,
            result: CuResult::SUCCESS,
            ctx: Ctx(0x10),
            device: -1,
        };
        assert_eq!(c.destroy(&destroy), Some(Ctx(0x10)));
        assert_eq!((c.device(Ctx(0x10)), c.device(Ctx(0x20))), (None, Some(5)));
    }

    /// The newest context is answered without the table: it must never outlive its context,
    /// nor keep an old device when its handle is made again.
    #[test]
    fn the_newest_context_is_forgotten_with_it_and_remade_with_its_new_device() {
        let mut c = Contexts::default();
        c.create(&create(0x10, 3));
        c.create(&create(0x20, 5));
        let destroy = |ctx| CtxDestroy {
            api: Api::cuCtxDestroy_v2,
            result: CuResult::SUCCESS,
            ctx: Ctx(ctx),
            device: -1,
        };
        assert_eq!(c.destroy(&destroy(0x20)), Some(Ctx(0x20)));
        assert_eq!((c.device(Ctx(0x10)), c.device(Ctx(0x20))), (Some(3), None));
        c.create(&create(0x20, 7));
        assert_eq!(c.device(Ctx(0x20)), Some(7), "the handle made again, on another device");
        c.create(&create(0x10, 9));
        assert_eq!((c.device(Ctx(0x10)), c.device(Ctx(0x20))), (Some(9), Some(7)));
        // A primary context released for the last time goes too.
        let retain = CtxCreate {
            api: Api::cuDevicePrimaryCtxRetain,
            ..create(0x30, 2)
        };
        c.create(&retain);
        assert_eq!(c.device(Ctx(0x30)), Some(2));
        let release = CtxDestroy {
            api: Api::cuDevicePrimaryCtxRelease_v2,
            device: 2,
            ..destroy(0x30)
        };
        assert_eq!(c.destroy(&release), Some(Ctx(0x30)));
        assert_eq!(c.device(Ctx(0x30)), None);
        assert_eq!((c.device(Ctx(0x10)), c.device(Ctx(0x20))), (Some(9), Some(7)));
    }
}
