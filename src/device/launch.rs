//! What every domain's device jobs share around their launches: the grid shapes, kernel timing
//! with CUDA events, the conversions of driver errors and of sizes to the kernels' 32-bit
//! arguments, and [`kernel_args!`], which declares a kernel's typed launch wrapper (its
//! argument list written once, in the `.cu` signature's order). The wrappers themselves stay
//! with the domain files, next to the jobs that launch them.

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaEvent, CudaSlice, CudaStream, DriverError, LaunchArgs, LaunchConfig, PushKernelArg,
};

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

/// A null device pointer, for a kernel's optional buffer (an `Option<&CudaSlice>` argument of
/// a [`kernel_args!`] wrapper that is `None`).
static NULL_POINTER: u64 = 0;

/// One kernel argument as a [`kernel_args!`] wrapper pushes it: a buffer the kernel reads
/// (`&CudaSlice<T>`) or writes (`&mut CudaSlice<T>`), an optional buffer (`Option<&CudaSlice<T>>`,
/// a null pointer when `None`), or a scalar by reference (`&u32`, `&i32`, `&u64`, `&f64`).
pub(crate) trait KernelArg<'a> {
    /// Pushes the argument onto `b`.
    fn push(self, b: &mut LaunchArgs<'a>);
}

impl<'a, T> KernelArg<'a> for &'a CudaSlice<T> {
    fn push(self, b: &mut LaunchArgs<'a>) {
        b.arg(self);
    }
}

impl<'a, T> KernelArg<'a> for &'a mut CudaSlice<T> {
    fn push(self, b: &mut LaunchArgs<'a>) {
        b.arg(self);
    }
}

impl<'a, T> KernelArg<'a> for Option<&'a CudaSlice<T>> {
    fn push(self, b: &mut LaunchArgs<'a>) {
        match self {
            Some(slice) => b.arg(slice),
            None => b.arg(&NULL_POINTER),
        };
    }
}

macro_rules! scalar_kernel_arg {
    ($($t:ty),+) => {
        $(
            impl<'a> KernelArg<'a> for &'a $t {
                fn push(self, b: &mut LaunchArgs<'a>) {
                    b.arg(self);
                }
            }
        )+
    };
}
scalar_kernel_arg!(u32, i32, u64, f64);

/// Declares the typed launch wrapper of one kernel signature: a struct whose fields are the
/// kernel's parameters, in the order of its `.cu` signature (which the struct's documentation
/// quotes), and an `unsafe fn launch(self, stream, function, config)` that pushes them in that
/// order ([`KernelArg`]) and launches.
///
/// The argument list is thereby written once: the struct literal at a launch names every
/// parameter, and the order pushed is the signature's by construction. `launch` stays
/// `unsafe`: its caller states (`// SAFETY:`) that every buffer is as long as the kernel reads
/// and writes for the launch's threads.
macro_rules! kernel_args {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident<$a:lifetime> {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name<$a> {
            $( $(#[$fmeta])* pub(super) $field: $ty, )+
        }

        impl<$a> $name<$a> {
            /// The parameter names in the order pushed (tests compare them with the `.cu`
            /// signature, [`kernel_params`](crate::device::launch::kernel_params)).
            #[cfg(test)]
            pub(super) const PARAMS: &'static [&'static str] = &[$(stringify!($field)),+];

            /// Launches `function` (a kernel of the signature this struct documents) on
            /// `stream` under `config` with these arguments, pushed in the field order.
            ///
            /// # Safety
            /// `function` has the signature the struct documents, and every buffer is as long
            /// as the kernel reads and writes for `config`'s threads.
            ///
            /// # Errors
            /// `DeviceError::Driver` of `cuLaunchKernel`.
            $vis unsafe fn launch(
                self,
                stream: &::cudarc::driver::CudaStream,
                function: &::cudarc::driver::CudaFunction,
                config: ::cudarc::driver::LaunchConfig,
            ) -> Result<(), $crate::device::DeviceError> {
                use $crate::device::launch::KernelArg;
                let Self { $($field),+ } = self;
                let mut b = stream.launch_builder(function);
                $( KernelArg::push($field, &mut b); )+
                // SAFETY: the arguments are pushed in the declared order, the kernel's
                // signature (the struct's documentation); the caller guarantees the function
                // and the buffers' lengths (`# Safety` above).
                unsafe { b.launch(config) }
                    .map(drop)
                    .map_err($crate::device::launch::drv("cuLaunchKernel"))
            }
        }
    };
}
pub(crate) use kernel_args;

/// The parameter names of kernel `name` in `source` (a `.cu` file's text), in order: what a
/// [`kernel_args!`] wrapper's fields must be. The signature is the text between `name(` and
/// its closing parenthesis (macro line continuations and `__restrict__` ignored); each
/// parameter's name is its last word.
///
/// # Panics
/// When `source` has no `name(`.
#[cfg(test)]
pub(crate) fn kernel_params(source: &str, name: &str) -> Vec<String> {
    let at = source
        .find(&format!("{name}("))
        .unwrap_or_else(|| panic!("no kernel {name}"))
        + name.len()
        + 1;
    let end = at + source[at..].find(')').expect("a closing parenthesis");
    source[at..end]
        .replace('\\', " ")
        .split(',')
        .map(|p| {
            p.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .rfind(|w| !w.is_empty())
                .expect("a parameter name")
                .to_owned()
        })
        .collect()
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
