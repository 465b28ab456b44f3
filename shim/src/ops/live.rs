//! Live accounting, kept only while a feature needs it (budget, metrics, OOM summary,
//! `GPULEAK_LIVE`, `gpuleak_live_bytes`): a sharded map from pointer (or handle) to size,
//! device, kind and allocation stack, and per-device, per-kind atomic counters.
//!
//! Counted as "live" from the successful allocation to the successful free (a physical VMM
//! handle until its last `cuMemRelease`, one for its creation or import and one per
//! `cuMemRetainAllocationHandle`, whatever mappings remain; stream-ordered memory until
//! `cuMemFreeAsync` is called). A destroyed context drops its allocations; a primary context
//! reset drops every allocation of its device; a primary context release drops nothing (the
//! shim does not know whether it was the last reference). Frees of pointers allocated
//! before accounting was on are not counted.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use gpuleak_format::{Api, MemKind, StackId};

use crate::leaked::Leaked;

/// Why an allocation failed, for the metrics.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Failure {
    /// The driver said no.
    Driver = 0,
    /// `GPULEAK_LIMIT` said no.
    Budget = 1,
    /// `GPULEAK_FAIL` said no.
    Injected = 2,
}

/// Device slots: devices 0 to 15, then one for "unknown" (no current context, or a device
/// number past 15).
pub const SLOTS: usize = 17;
/// The slot of unknown devices.
pub const UNKNOWN: usize = SLOTS - 1;
/// Memory kinds, as numbered by the format.
pub const KINDS: usize = MemKind::ALL.len();

/// Counters by device slot and kind.
pub type Grid = [[AtomicU64; KINDS]; SLOTS];

#[allow(clippy::declare_interior_mutable_const)]
const GRID: Grid = [const { [const { AtomicU64::new(0) }; KINDS] }; SLOTS];

/// Live bytes by device slot and kind.
pub static LIVE_BYTES: Grid = GRID;
/// Live allocations by device slot and kind.
pub static LIVE_COUNT: Grid = GRID;
/// Successful allocations by device slot and kind.
pub static ALLOCS: Grid = GRID;
/// Successful frees by device slot and kind.
pub static FREES: Grid = GRID;
/// Failed allocations by kind and [`Failure`].
pub static FAILED: [[AtomicU64; 3]; KINDS] = [const { [const { AtomicU64::new(0) }; 3] }; KINDS];
/// Bytes counted against the budget, by device slot (reserved before the driver call).
pub static BUDGET_USED: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Live streams and events (created minus destroyed since accounting began).
pub static STREAMS: AtomicI64 = AtomicI64::new(0);
/// See [`STREAMS`].
pub static EVENTS: AtomicI64 = AtomicI64::new(0);
/// See [`STREAMS`] (memory pools created or imported).
pub static POOLS: AtomicI64 = AtomicI64::new(0);

/// Whether a kind is device memory: what the budget and `gpuleak_live_bytes` count (not
/// host memory, address reservations or other processes' IPC memory).
pub fn counts_toward_budget(kind: MemKind) -> bool {
    matches!(
        kind,
        MemKind::Device | MemKind::Managed | MemKind::Async | MemKind::VmmPhysical | MemKind::Array | MemKind::Graph
    )
}

/// The slot of a device number.
pub fn slot(device: i32) -> usize {
    if (0..UNKNOWN as i32).contains(&device) {
        device as usize
    } else {
        UNKNOWN
    }
}

/// Device memory live on a device (`device < 0`: on all devices).
pub fn device_bytes(device: i32) -> u64 {
    let sum = |s: usize| -> u64 {
        MemKind::ALL
            .iter()
            .filter(|k| counts_toward_budget(**k))
            .map(|&k| LIVE_BYTES[s][k as usize].load(Ordering::Relaxed))
            .sum()
    };
    if device < 0 {
        (0..SLOTS).map(sum).sum()
    } else {
        sum(slot(device))
    }
}

// ---------------------------------------------------------------------------------------
// Where an allocation is made: the calling thread's context and its device.

/// The context and device of the calling thread.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    /// Current context (0: none or unknown).
    pub ctx: u64,
    /// Its device (-1: unknown).
    pub device: i32,
}

/// Bumped when a context is destroyed: per-thread (context, device) caches start over.
static CTX_GENERATION: AtomicU64 = AtomicU64::new(1);

thread_local! {
    // (generation, context, device) of this thread's last lookup; const, no destructor.
    static PLACE_CACHE: Cell<(u64, u64, i32)> = const { Cell::new((0, 0, -1)) };
}

impl Place {
    const UNKNOWN: Place = Place { ctx: 0, device: -1 };

    /// The calling thread's place if `wanted`, asked of the driver's getters
    /// `cuCtxGetCurrent` and `cuCtxGetDevice` (which change no state the program sees),
    /// the device cached per thread and context.
    pub fn here_if(wanted: bool) -> Place {
        if !wanted {
            return Place::UNKNOWN;
        }
        type GetCurrent = unsafe extern "C" fn(*mut *mut libc::c_void) -> u32;
        type GetDevice = unsafe extern "C" fn(*mut i32) -> u32;
        let Some(get_ctx) = crate::dlsym::driver_fn(crate::dlsym::Getter::cuCtxGetCurrent) else {
            return Place::UNKNOWN;
        };
        // SAFETY: the driver's cuCtxGetCurrent, found by name; it writes one pointer.
        let get_ctx: GetCurrent = unsafe { std::mem::transmute::<usize, GetCurrent>(get_ctx) };
        let mut ctx = std::ptr::null_mut();
        // SAFETY: `ctx` is a valid out-pointer.
        if unsafe { get_ctx(&mut ctx) } != 0 || ctx.is_null() {
            return Place::UNKNOWN;
        }
        let ctx = ctx as u64;
        let generation = CTX_GENERATION.load(Ordering::Acquire);
        if let Ok((g, c, d)) = PLACE_CACHE.try_with(Cell::get) {
            if g == generation && c == ctx {
                return Place { ctx, device: d };
            }
        }
        let mut device = -1;
        if let Some(get_dev) = crate::dlsym::driver_fn(crate::dlsym::Getter::cuCtxGetDevice) {
            // SAFETY: the driver's cuCtxGetDevice, found by name; it writes one int.
            let get_dev: GetDevice = unsafe { std::mem::transmute::<usize, GetDevice>(get_dev) };
            let mut d = -1;
            // SAFETY: `d` is a valid out-pointer.
            if unsafe { get_dev(&mut d) } == 0 {
                device = d;
            }
        }
        let _ = PLACE_CACHE.try_with(|c| c.set((generation, ctx, device)));
        Place { ctx, device }
    }
}

// ---------------------------------------------------------------------------------------
// The budget.

/// Reserves `size` bytes of `device`'s budget; false (and nothing reserved) if that would
/// pass `limit`. Exact under concurrency: the reservation is one atomic add.
pub fn reserve(device: i32, size: u64, limit: u64) -> bool {
    let used = &BUDGET_USED[slot(device)];
    let before = used.fetch_add(size, Ordering::AcqRel);
    if before.saturating_add(size) > limit {
        used.fetch_sub(size, Ordering::AcqRel);
        return false;
    }
    true
}

/// Counts `size` bytes against `device`'s budget without a check: memory that a call the
/// budget cannot refuse allocated (a graph launch).
pub fn charge(device: i32, size: u64) {
    BUDGET_USED[slot(device)].fetch_add(size, Ordering::AcqRel);
}

/// Gives back a reservation.
pub fn unreserve(device: i32, size: u64) {
    BUDGET_USED[slot(device)].fetch_sub(size, Ordering::AcqRel);
}

// ---------------------------------------------------------------------------------------
// Windows: what the allocations made since `gpuleak_window_begin` add up to (the pytest
// plugin opens one per test). Upper bounds of what the analyzer finds between two snapshots
// taken at the same points: a site can only have grown by bytes allocated in the window and
// still live, and the live bytes can only have risen above their start by bytes allocated in
// the window. Counters reset with relaxed care: an allocation racing with the reset may be
// counted in either window.

/// The current window's number (0: no window open yet).
static WINDOW: AtomicU32 = AtomicU32::new(0);
/// Allocations made in the window.
static WINDOW_ALLOCS: AtomicU64 = AtomicU64::new(0);
/// Bytes allocated in the window.
static WINDOW_BYTES: AtomicU64 = AtomicU64::new(0);
/// Bytes allocated in the window and live now (signed: a free racing with the reset).
static WINDOW_LIVE: AtomicI64 = AtomicI64::new(0);
/// The highest [`WINDOW_LIVE`] has been.
static WINDOW_PEAK: AtomicU64 = AtomicU64::new(0);
/// Past this many live bytes of the window, a snapshot is due ([`window_watch_due`]); then
/// a quarter more than the live bytes that passed it.
static WINDOW_WATCH: AtomicU64 = AtomicU64::new(u64::MAX);
/// Set when the window's live bytes passed [`WINDOW_WATCH`]; cleared by the snapshot.
static WINDOW_WATCH_HIT: AtomicBool = AtomicBool::new(false);
/// The id of the latest snapshot written for the watch (0: none).
static WINDOW_WATCH_ID: AtomicU64 = AtomicU64::new(0);

fn window_reset(watch: u64) {
    WINDOW_ALLOCS.store(0, Ordering::Relaxed);
    WINDOW_BYTES.store(0, Ordering::Relaxed);
    WINDOW_LIVE.store(0, Ordering::Relaxed);
    WINDOW_PEAK.store(0, Ordering::Relaxed);
    WINDOW_WATCH_HIT.store(false, Ordering::Relaxed);
    WINDOW_WATCH_ID.store(0, Ordering::Relaxed);
    WINDOW_WATCH.store(if watch == 0 { u64::MAX } else { watch }, Ordering::Release);
}

/// Opens a new window (closing the last): its counters start at 0. `watch`: the live bytes
/// of the window past which the allocation that passes them writes a snapshot, and again each
/// time they pass a quarter more than the last (0: never). The latest snapshot's live bytes
/// are then within a fifth of the window's highest.
pub fn window_begin(watch: u64) {
    window_reset(watch);
    let mut n = WINDOW.load(Ordering::Acquire).wrapping_add(1);
    if n == 0 {
        n = 1;
    }
    WINDOW.store(n, Ordering::Release);
}

/// Counts an allocation in the open window; the window number to keep in its entry.
fn window_added(size: u64) -> u32 {
    let w = WINDOW.load(Ordering::Acquire);
    if w == 0 {
        return 0;
    }
    WINDOW_ALLOCS.fetch_add(1, Ordering::Relaxed);
    WINDOW_BYTES.fetch_add(size, Ordering::Relaxed);
    let size = i64::try_from(size).unwrap_or(i64::MAX);
    let live = WINDOW_LIVE
        .fetch_add(size, Ordering::AcqRel)
        .saturating_add(size)
        .max(0) as u64;
    WINDOW_PEAK.fetch_max(live, Ordering::AcqRel);
    let watch = WINDOW_WATCH.load(Ordering::Acquire);
    if live > watch {
        // One thread claims the crossing; the next snapshot waits for a quarter more.
        let next = live.saturating_add(live / 4);
        if WINDOW_WATCH
            .compare_exchange(watch, next, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            WINDOW_WATCH_HIT.store(true, Ordering::Release);
        }
    }
    w
}

/// Whether the window's watch was just passed and its snapshot is to be written.
pub fn window_watch_due() -> bool {
    WINDOW_WATCH_HIT.load(Ordering::Relaxed) && WINDOW_WATCH_HIT.swap(false, Ordering::AcqRel)
}

/// Keeps the id of the snapshot written for the watch (0: none was written).
pub fn window_watched(id: u64) {
    if id != 0 {
        WINDOW_WATCH_ID.store(id, Ordering::Release);
    }
}

/// The open window's counters: allocations, bytes allocated, bytes allocated and still live,
/// the highest of those, the latest watch snapshot's id (0: none).
pub fn window_stats() -> [u64; 5] {
    [
        WINDOW_ALLOCS.load(Ordering::Acquire),
        WINDOW_BYTES.load(Ordering::Acquire),
        WINDOW_LIVE.load(Ordering::Acquire).max(0) as u64,
        WINDOW_PEAK.load(Ordering::Acquire),
        WINDOW_WATCH_ID.load(Ordering::Acquire),
    ]
}

// ---------------------------------------------------------------------------------------
// The live map.

/// One live allocation.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// Bytes asked for.
    pub size: u64,
    /// Context it was made in.
    pub ctx: u64,
    /// Allocation stack.
    pub stack: StackId,
    /// Device slot.
    pub slot: u8,
    /// Memory kind.
    pub kind: MemKind,
    /// Counted against the budget.
    pub reserved: bool,
    /// References a VMM handle's releases (an IPC mapping's closes, an imported pool
    /// pointer's frees) must drop before it is gone (1 for the others).
    pub holds: u32,
    /// The window it was allocated in ([`window_begin`]; 0: none).
    pub window: u32,
}

/// What [`take`] took out before a free went to the driver.
#[derive(Clone, Copy, Debug)]
pub enum Taken {
    /// Nothing known at that address.
    Nothing,
    /// The whole entry: the free ends it.
    Entry(Entry),
    /// One reference of a VMM handle that keeps others.
    Reference,
}

/// Multiply-xorshift over the key's words (keys are addresses, not attacker-chosen).
#[derive(Default)]
pub struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31);
    }
}

/// (namespace, pointer or handle): addresses and handles of different families never
/// collide.
type Key = (u8, u64);
type Shard = Mutex<HashMap<Key, Entry, BuildHasherDefault<Mix>>>;

const SHARDS: usize = 64;

/// The live map.
pub struct Table {
    shards: Vec<Shard>,
}

static TABLE: Leaked<Table> = Leaked::new();

/// The live map, created at first use (after a fork, a fresh one).
pub fn table() -> &'static Table {
    TABLE.make_once(|| Table {
        shards: (0..SHARDS).map(|_| Mutex::new(HashMap::default())).collect(),
    })
}

impl Table {
    fn shard(&self, key: Key) -> std::sync::MutexGuard<'_, HashMap<Key, Entry, BuildHasherDefault<Mix>>> {
        let h = (key.1 >> 8).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let shard = &self.shards[(h >> 58) as usize % SHARDS];
        shard.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls `f` on every live entry, one shard locked at a time.
    pub fn for_each(&self, mut f: impl FnMut(u64, &Entry)) {
        for s in &self.shards {
            let map = s.lock().unwrap_or_else(|p| p.into_inner());
            for (&(_, ptr), e) in map.iter() {
                f(ptr, e);
            }
        }
    }

    fn remove_where(&self, pred: impl Fn(&Entry) -> bool) {
        for s in &self.shards {
            let mut map = s.lock().unwrap_or_else(|p| p.into_inner());
            map.retain(|_, e| {
                if pred(e) {
                    gone(e, false);
                    false
                } else {
                    true
                }
            });
        }
    }
}

/// In a forked child: the parent's accounting is not the child's (its trace starts empty).
/// Only atomic stores: a shard lock may have been held by a parent thread that is gone.
pub fn forget_in_child() {
    TABLE.forget();
    for grid in [&LIVE_BYTES, &LIVE_COUNT, &ALLOCS, &FREES] {
        for row in grid.iter() {
            for c in row {
                c.store(0, Ordering::Relaxed);
            }
        }
    }
    for row in &FAILED {
        for c in row {
            c.store(0, Ordering::Relaxed);
        }
    }
    for c in &BUDGET_USED {
        c.store(0, Ordering::Relaxed);
    }
    STREAMS.store(0, Ordering::Relaxed);
    EVENTS.store(0, Ordering::Relaxed);
    POOLS.store(0, Ordering::Relaxed);
    CTX_GENERATION.fetch_add(1, Ordering::AcqRel);
    // The parent's window is not the child's: the child counts nothing until it opens one.
    WINDOW.store(0, Ordering::Release);
    window_reset(u64::MAX);
}

/// The namespace of an allocation or free API's pointers.
fn namespace(api: Api) -> u8 {
    match api.mem_kind() {
        Some(
            MemKind::Device
            | MemKind::Managed
            | MemKind::Async
            | MemKind::Ipc
            | MemKind::PoolImport
            | MemKind::Graph
            | MemKind::ExternalBuffer,
        )
        | None => 0,
        Some(MemKind::Host) => 1,
        Some(MemKind::HostRegistered) => 2,
        Some(MemKind::VmmReserve) => 3,
        Some(MemKind::VmmPhysical | MemKind::VmmImport | MemKind::Multicast) => 4,
        Some(MemKind::Array | MemKind::ExternalArray) => 5,
        Some(MemKind::External) => 6,
    }
}

/// A successful allocation.
pub fn added(api: Api, kind: MemKind, ptr: u64, size: u64, place: Place, stack: StackId, reserved: bool) {
    // This process's own export imported back names a handle it holds: one more reference.
    if matches!(kind, MemKind::VmmImport | MemKind::Multicast) && retained(api, ptr) {
        return;
    }
    let key = (namespace(api), ptr);
    // An IPC handle opened again (a pool pointer imported again) maps at the address it is
    // already mapped at, one more reference that needs its own close (free).
    if matches!(kind, MemKind::Ipc | MemKind::PoolImport) {
        let mut shard = table().shard(key);
        if let Some(e) = shard.get_mut(&key).filter(|e| e.kind == kind) {
            e.holds = e.holds.saturating_add(1);
            return;
        }
    }
    let s = slot(place.device);
    let k = kind as usize;
    ALLOCS[s][k].fetch_add(1, Ordering::Relaxed);
    LIVE_COUNT[s][k].fetch_add(1, Ordering::Relaxed);
    LIVE_BYTES[s][k].fetch_add(size, Ordering::Relaxed);
    let entry = Entry {
        size,
        ctx: place.ctx,
        stack,
        slot: s as u8,
        kind,
        reserved,
        holds: 1,
        window: window_added(size),
    };
    let old = table().shard(key).insert(key, entry);
    if let Some(old) = old {
        // The driver handed out an address we thought live: its free was not seen (made
        // before accounting began, or by a path the shim does not intercept).
        gone(&old, false);
    }
}

/// One more reference to a live VMM handle (`cuMemRetainAllocationHandle`); false if the
/// handle is not live.
pub fn retained(api: Api, handle: u64) -> bool {
    let key = (namespace(api), handle);
    let mut shard = table().shard(key);
    let Some(e) = shard.get_mut(&key) else { return false };
    e.holds = e.holds.saturating_add(1);
    true
}

/// Takes a pointer's entry out (or one reference of a handle held more than once) before its
/// free is passed to the driver.
pub fn take(api: Api, ptr: u64) -> Taken {
    let key = (namespace(api), ptr);
    let mut shard = table().shard(key);
    match shard.get_mut(&key) {
        None => Taken::Nothing,
        Some(e) if e.holds > 1 => {
            e.holds -= 1;
            Taken::Reference
        }
        Some(_) => shard.remove(&key).map_or(Taken::Nothing, Taken::Entry),
    }
}

/// After the free: counts it, or puts back what was taken if the driver refused.
pub fn freed(api: Api, ptr: u64, taken: Taken, ok: bool) {
    let key = (namespace(api), ptr);
    match taken {
        Taken::Nothing => {}
        Taken::Entry(e) if ok => gone(&e, true),
        Taken::Entry(e) => {
            table().shard(key).insert(key, e);
        }
        Taken::Reference if ok => {}
        Taken::Reference => {
            retained(api, ptr);
        }
    }
}

fn gone(e: &Entry, count_free: bool) {
    if e.window != 0 && e.window == WINDOW.load(Ordering::Acquire) {
        WINDOW_LIVE.fetch_sub(i64::try_from(e.size).unwrap_or(i64::MAX), Ordering::AcqRel);
    }
    let (s, k) = (usize::from(e.slot), e.kind as usize);
    if count_free {
        FREES[s][k].fetch_add(1, Ordering::Relaxed);
    }
    LIVE_COUNT[s][k].fetch_sub(1, Ordering::Relaxed);
    LIVE_BYTES[s][k].fetch_sub(e.size, Ordering::Relaxed);
    if e.reserved {
        BUDGET_USED[s].fetch_sub(e.size, Ordering::AcqRel);
    }
}

/// A failed allocation.
pub fn failed(kind: MemKind, why: Failure) {
    FAILED[kind as usize][why as usize].fetch_add(1, Ordering::Relaxed);
}

/// A successful stream, event or context call that changes what is live.
#[derive(Clone, Copy, Debug)]
pub enum ObjectChange {
    /// A stream was created.
    StreamCreated,
    /// A stream was destroyed.
    StreamDestroyed,
    /// An event was created.
    EventCreated,
    /// An event was destroyed.
    EventDestroyed,
    /// A memory pool was created or imported.
    PoolCreated,
    /// A memory pool was destroyed.
    PoolDestroyed,
    /// A context was destroyed, with the memory made in it.
    ContextDestroyed(u64),
    /// A device's primary context was reset, with all the memory made in it.
    DeviceReset(i32),
}

/// Applies an object change.
pub fn object(change: ObjectChange) {
    match change {
        ObjectChange::StreamCreated => {
            STREAMS.fetch_add(1, Ordering::Relaxed);
        }
        ObjectChange::StreamDestroyed => {
            STREAMS.fetch_sub(1, Ordering::Relaxed);
        }
        ObjectChange::EventCreated => {
            EVENTS.fetch_add(1, Ordering::Relaxed);
        }
        ObjectChange::EventDestroyed => {
            EVENTS.fetch_sub(1, Ordering::Relaxed);
        }
        ObjectChange::PoolCreated => {
            POOLS.fetch_add(1, Ordering::Relaxed);
        }
        ObjectChange::PoolDestroyed => {
            POOLS.fetch_sub(1, Ordering::Relaxed);
        }
        ObjectChange::ContextDestroyed(ctx) => {
            CTX_GENERATION.fetch_add(1, Ordering::AcqRel);
            table().remove_where(|e| e.ctx == ctx && ctx != 0);
        }
        ObjectChange::DeviceReset(device) => {
            CTX_GENERATION.fetch_add(1, Ordering::AcqRel);
            let s = slot(device) as u8;
            table().remove_where(|e| e.slot == s);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Sites: live bytes per allocation stack.

/// Live bytes and allocations of one stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SiteTotal {
    /// Bytes.
    pub bytes: u64,
    /// Allocations.
    pub count: u64,
}

/// Live device memory per stack (on one device slot, or all with `None`), largest first.
pub fn sites(slot: Option<usize>) -> Vec<(StackId, SiteTotal)> {
    let mut by: HashMap<u32, SiteTotal> = HashMap::new();
    table().for_each(|_, e| {
        if counts_toward_budget(e.kind) && slot.is_none_or(|s| s == usize::from(e.slot)) {
            let t = by.entry(e.stack.0).or_default();
            t.bytes += e.size;
            t.count += 1;
        }
    });
    let mut v: Vec<(StackId, SiteTotal)> = by.into_iter().map(|(id, t)| (StackId(id), t)).collect();
    v.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0 .0.cmp(&b.0 .0)));
    v
}

/// Bytes as a short human string (`1.5 GiB`; [`gpuleak_format::size::Bytes`]).
pub fn human(bytes: u64) -> String {
    gpuleak_format::size::Bytes(bytes).to_string()
}

/// Prints who holds the memory after an out-of-memory failure: one screen on stderr, in
/// one write.
pub fn print_oom_summary(api: Api, size: u64, device: i32, why: Failure) {
    let s = slot(device);
    let dev_name = if s == UNKNOWN {
        "an unknown device".to_string()
    } else {
        format!("device {s}")
    };
    let cause = match why {
        Failure::Driver => "the driver is out of memory".to_string(),
        Failure::Budget => format!(
            "over the GPULEAK_LIMIT budget of {}",
            human(super::settings::settings().limit.unwrap_or(0))
        ),
        Failure::Injected => "injected by GPULEAK_FAIL".to_string(),
    };
    let mut lines = vec![format!(
        "out of memory: {api} of {} on {dev_name} failed ({cause})",
        human(size)
    )];
    let sites = sites(Some(s));
    let total: u64 = sites.iter().map(|(_, t)| t.bytes).sum();
    let count: u64 = sites.iter().map(|(_, t)| t.count).sum();
    lines.push(format!(
        "{} live on {dev_name} in {count} allocations ({} on all devices); top sites by live bytes:",
        human(total),
        human(device_bytes(-1))
    ));
    const SHOWN: usize = 10;
    for (stack, t) in sites.iter().take(SHOWN) {
        lines.push(format!(
            "  {:>10} in {:>5} allocations  {} (stack {})",
            human(t.bytes),
            t.count,
            super::sites::label(*stack),
            stack.0
        ));
    }
    if sites.len() > SHOWN {
        let rest: u64 = sites[SHOWN..].iter().map(|(_, t)| t.bytes).sum();
        lines.push(format!("  ... and {} more sites, {}", sites.len() - SHOWN, human(rest)));
    }
    let mut text = String::new();
    for l in lines {
        text.push_str("gpuleak: ");
        text.push_str(&l);
        text.push('\n');
    }
    crate::sys::write(2, text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPC handle opened twice (a pool pointer imported twice) is one mapping with two
    /// references: live until the second close (free), and never counted as this process's
    /// device memory.
    #[test]
    fn memory_mapped_twice_at_one_address_is_live_until_its_last_release() {
        let place = Place { ctx: 0x5cf0, device: 0 };
        let cases = [
            (
                Api::cuIpcOpenMemHandle_v2,
                Api::cuIpcCloseMemHandle,
                MemKind::Ipc,
                0x5800_0000_0000,
            ),
            (
                Api::cuMemPoolImportPointer,
                Api::cuMemFreeAsync,
                MemKind::PoolImport,
                0x5800_0010_0000,
            ),
        ];
        for (open, close, kind, ptr) in cases {
            let live = || LIVE_COUNT[slot(0)][kind as usize].load(Ordering::Relaxed);
            let bytes = || LIVE_BYTES[slot(0)][kind as usize].load(Ordering::Relaxed);
            added(open, kind, ptr, 4096, place, StackId(1), false);
            added(open, kind, ptr, 4096, place, StackId(2), false);
            assert_eq!((live(), bytes()), (1, 4096), "{open}");
            assert!(!counts_toward_budget(kind), "{open}");
            let t = take(close, ptr);
            freed(close, ptr, t, true);
            assert_eq!(live(), 1, "{open}: one reference left");
            // A close the driver refused leaves the reference in place.
            let t = take(close, ptr);
            freed(close, ptr, t, false);
            assert_eq!(live(), 1, "{open}");
            let t = take(close, ptr);
            freed(close, ptr, t, true);
            assert_eq!((live(), bytes()), (0, 0), "{open}");
            assert!(matches!(take(close, ptr), Taken::Nothing), "{open}");
        }
        // Device memory at an address thought live is a new allocation (the old one's free
        // was missed), never a second reference.
        let ptr = 0x7000_0000_0000;
        added(Api::cuMemAlloc_v2, MemKind::Device, ptr, 512, place, StackId(3), false);
        added(
            Api::cuMemPoolImportPointer,
            MemKind::PoolImport,
            ptr,
            4096,
            place,
            StackId(4),
            false,
        );
        let t = take(Api::cuMemFree_v2, ptr);
        assert!(matches!(t, Taken::Entry(e) if e.kind == MemKind::PoolImport && e.holds == 1));
        freed(Api::cuMemFree_v2, ptr, t, true);
    }
}
