//! What every domain's device jobs share around their launches: the grid shapes, kernel timing
//! with CUDA events, and the conversions of driver errors and of sizes to the kernels' 32-bit
//! arguments. The launches themselves (argument lists and their `// SAFETY:` notes) stay
//! with the domain files, next to the kernels they match.

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream, DriverError, LaunchConfig};

use super::DeviceError;

/// A one-dimensional grid of exactly `blocks` blocks of `block` threads, no dynamic shared
/// memory.
pub(crate) fn blocks(blocks: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A one-dimensional grid of blocks of `block` threads covering `threads` threads (at least one
/// block), no dynamic shared memory: the kernels' threads past the end return first.
pub(crate) fn cover(threads: u32, block: u32) -> LaunchConfig {
    blocks(threads.div_ceil(block).max(1), block)
}

/// [`cover`] with `rows` blocks in the grid's second dimension.
pub(crate) fn cover_rows(threads: u32, rows: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (threads.div_ceil(block).max(1), rows, 1),
        ..cover(threads, block)
    }
}

/// Kernel time on one stream, measured with CUDA events: [`Timer::start`] records an event
/// before the launches, [`Timer::stop`] one after them, and [`Timed::ms`] reads the time
/// between them once a download (which synchronises the stream) has passed the second.
#[derive(Debug)]
pub(crate) struct Timer {
    start: CudaEvent,
}

/// The two events of a [`Timer`].
#[derive(Debug)]
pub(crate) struct Timed {
    start: CudaEvent,
    end: CudaEvent,
}

impl Timer {
    /// Records the start event on `stream`.
    pub(crate) fn start(stream: &CudaStream) -> Result<Self, DeviceError> {
        Ok(Self {
            start: record(stream)?,
        })
    }

    /// Records the end event on `stream`.
    pub(crate) fn stop(self, stream: &CudaStream) -> Result<Timed, DeviceError> {
        Ok(Timed {
            start: self.start,
            end: record(stream)?,
        })
    }
}

impl Timed {
    /// Milliseconds between the two events (call after the stream passed the end event).
    pub(crate) fn ms(&self) -> Result<f32, DeviceError> {
        self.start
            .elapsed_ms(&self.end)
            .map_err(drv("cuEventElapsedTime"))
    }
}

fn record(stream: &CudaStream) -> Result<CudaEvent, DeviceError> {
    stream
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(drv("cuEventRecord"))
}

/// Maps a failure of driver call `call` to [`DeviceError::Driver`].
pub(crate) fn drv(call: &'static str) -> impl Fn(DriverError) -> DeviceError {
    move |e| DeviceError::driver(call, e)
}

/// `v` as a kernel's `u32` argument, or [`DeviceError::Unsupported`] naming `what`.
pub(crate) fn u32_of(what: &str, v: usize) -> Result<u32, DeviceError> {
    u32::try_from(v)
        .map_err(|_| DeviceError::Unsupported(format!("{what} = {v} (at most 2^32 - 1)")))
}

#[cfg(test)]
mod tests {
    use super::{blocks, cover, cover_rows};

    #[test]
    fn grids_cover_their_threads() {
        assert_eq!(cover(1, 128).grid_dim, (1, 1, 1));
        assert_eq!(cover(128, 128).grid_dim, (1, 1, 1));
        assert_eq!(cover(129, 128).grid_dim, (2, 1, 1));
        assert_eq!(cover(0, 256).grid_dim, (1, 1, 1));
        assert_eq!(cover(300, 256).block_dim, (256, 1, 1));
        assert_eq!(cover_rows(300, 7, 128).grid_dim, (3, 7, 1));
        assert_eq!(blocks(5, 32).grid_dim, (5, 1, 1));
        assert_eq!(blocks(5, 32).shared_mem_bytes, 0);
    }
}
