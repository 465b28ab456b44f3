//! Blocks handed on: a thread that exits with room left in its block gives the block back,
//! and the next thread that needs one continues it after a `Thread` record naming itself.
//! Without this, every thread that ever recorded costs a whole block of the file: a server
//! that starts a thread per request would fill the disk with blocks holding one record each.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use gpuleak_format::{BlockCursor, Seq, Thread, BLOCK_SIZE};

use super::state::{unmap, CURRENT_KEY};

/// At most this many blocks wait to be handed on; past it, a thread's block is left as it is.
const MAX_SPARES: usize = 64;
/// A block with less room than this is not worth handing on.
const MIN_ROOM: usize = 1024;

/// A block with room left, mapped, its cursor where its last thread stopped.
struct Spare {
    ptr: *mut u8,
    cursor: BlockCursor,
    key: u64,
}

/// The blocks that exited threads left, newest last.
struct Spares(Vec<Spare>);

// SAFETY: each block's pointer is used by one thread at a time: whoever holds the lock while
// it is in the list, then the thread that took it out.
unsafe impl Send for Spares {}

static SPARES: Mutex<Spares> = Mutex::new(Spares(Vec::new()));

/// Gives back a block whose thread is exiting; false if it was not taken (too full, too many
/// waiting, or the lock is busy), and the caller unmaps it.
pub fn give(ptr: *mut u8, cursor: BlockCursor, key: u64) -> bool {
    let current = CURRENT_KEY.load(Ordering::Acquire);
    if ptr.is_null() || BLOCK_SIZE.saturating_sub(cursor.pos) < MIN_ROOM || key != current {
        return false;
    }
    let Ok(mut spares) = SPARES.try_lock() else {
        return false;
    };
    // Blocks of another key are a forked parent's, or an earlier segment's: never written
    // again.
    spares.0.retain(|s| {
        if s.key != current {
            unmap(s.ptr);
        }
        s.key == current
    });
    if spares.0.len() >= MAX_SPARES {
        return false;
    }
    spares.0.push(Spare { ptr, cursor, key });
    true
}

/// A block to continue for thread `tid`, whose next record has `seq` (every record already in
/// the block must come before it, so that the block stays in order), with the `Thread` record
/// written; `None` when none fits.
pub fn take(tid: u32, seq: Seq, time_ns: u64, key: u64) -> Option<(*mut u8, BlockCursor)> {
    let mut spares = SPARES.try_lock().ok()?;
    let i = spares
        .0
        .iter()
        .rposition(|s| s.key == key && s.cursor.state.seq < seq.0)?;
    let Spare { ptr, mut cursor, .. } = spares.0.swap_remove(i);
    drop(spares);
    // SAFETY: a BLOCK_SIZE mapping of the trace that no other thread holds now (taken out of
    // the list under its lock).
    let block = unsafe { std::slice::from_raw_parts_mut(ptr, BLOCK_SIZE) };
    match cursor.append_fields(block, seq, time_ns, &Thread { tid }) {
        Ok(()) => Some((ptr, cursor)),
        Err(_) => {
            unmap(ptr);
            None
        }
    }
}
