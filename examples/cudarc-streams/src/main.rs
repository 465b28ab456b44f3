//! One device buffer used on two cudarc streams: zeroed on the stream that allocates it,
//! then overwritten from the host and read back on a second stream.
//!
//! By default cudarc's event tracking orders the second stream after the first (it records an
//! event after each use of a buffer and makes the next stream wait for it): correct, and
//! gpuleak must report no stream-ordering finding. With the argument `untracked` the program
//! turns the tracking off first (`CudaContext::disable_event_tracking`, an `unsafe` promise
//! to order the streams itself) and then breaks that promise: the upload on the second
//! stream races with the zeroing on the first, which is exactly one `cross-stream-race`.
//! Everything else is done correctly (the second stream is waited for before the buffer is
//! freed on the first, both streams are synchronized at the end).

use cudarc::driver::{CudaContext, DriverError};

/// Elements in the buffer.
const LEN: usize = 4096;

fn main() -> Result<(), DriverError> {
    let untracked = std::env::args().nth(1).as_deref() == Some("untracked");
    let ctx = CudaContext::new(0)?;
    if untracked {
        // SAFETY: cudarc's contract is that the program orders its streams itself: no use on
        // another stream before the allocating stream's work is done, no concurrent writes, no
        // free before other streams' uses are done. The upload below breaks the first two on
        // purpose. The simulated driver this example runs on does every operation at once, when
        // it is enqueued, so the streams never overlap and nothing is corrupted; on a GPU only
        // device memory could be, which the assert below checks. Host memory is not at
        // stake: the frees wait as the contract asks.
        unsafe { ctx.disable_event_tracking() };
    }
    let first = ctx.new_stream()?;
    let second = ctx.new_stream()?;
    let mut buffer = first.alloc_zeros::<u32>(LEN)?;
    let data: Vec<u32> = (0..LEN as u32).collect();
    second.memcpy_htod(&data, &mut buffer)?;
    let back = second.clone_dtoh(&buffer)?;
    assert!(back == data, "the device returned other values than it was given");
    // The buffer is freed on `first`: wait for `second`'s use of it first.
    second.synchronize()?;
    drop(buffer);
    first.synchronize()?;
    println!(
        "{} elements, event tracking {}",
        back.len(),
        if untracked { "off" } else { "on" }
    );
    Ok(())
}
