//! A small cudarc program with exactly one bug: every iteration of its loop keeps one
//! [`OUTPUT_BYTES`] device buffer that nothing ever frees, while the other buffers are freed.
//!
//! It prints one line per device allocation,
//! `alloc call=METHOD memory=device ptr=0x... size=N freed|leaked`, so that a test can match
//! each one with gpuleak's trace. On the simulated driver the pointers are the same in every
//! run, with or without the shim.

use cudarc::driver::{CudaContext, DevicePtr, DriverError};

/// Loop iterations, and so the number of leaked buffers.
const ITERATIONS: u8 = 3;
/// Size of the buffer each iteration leaks.
const OUTPUT_BYTES: usize = 1 << 20;
/// Size of the input buffer each iteration uploads, checks and frees.
const INPUT_BYTES: usize = 64 << 10;

fn main() -> Result<(), DriverError> {
    let ctx = CudaContext::new(0)?;
    println!("device {}", ctx.name()?);
    // A stream of its own: cudarc allocates with cuMemAllocAsync on it and tracks events.
    let stream = ctx.new_stream()?;
    // Results handed on as raw pointers: the bug is that nobody ever frees them.
    let mut results = Vec::new();
    for i in 1..=ITERATIONS {
        let pattern = vec![i; INPUT_BYTES];
        let input = stream.clone_htod(&pattern)?;
        let (input_ptr, read_record) = input.device_ptr(&stream);
        drop(read_record);
        println!("alloc call=CudaStream::clone_htod memory=device ptr={input_ptr:#x} size={INPUT_BYTES} freed");
        let back = stream.clone_dtoh(&input)?;
        assert!(
            back == pattern,
            "iteration {i}: the device returned other bytes than it was given"
        );

        let output = stream.alloc_zeros::<u8>(OUTPUT_BYTES)?;
        let output_ptr = output.leak();
        println!("alloc call=CudaStream::alloc_zeros memory=device ptr={output_ptr:#x} size={OUTPUT_BYTES} leaked");
        results.push(output_ptr);
        // `input` is dropped here: cudarc frees it with cuMemFreeAsync on `stream`.
    }
    stream.synchronize()?;
    println!("done: {} results kept", results.len());
    Ok(())
}
