//! Typed errors of the device layer.

/// A failure of the GPU path. Each variant says which call or kernel failed; callers fall back
/// to the CPU counters and log it, never returning a wrong count.
#[derive(Debug, Clone, thiserror::Error)]
#[must_use]
pub enum DeviceError {
    /// `libcuda` or NVRTC could not be loaded: no NVIDIA driver on this host.
    #[error("no CUDA driver: libcuda or libnvrtc could not be loaded")]
    NoDriver,
    /// The driver reports no device.
    #[error("the CUDA driver reports no GPU")]
    NoDevices,
    /// A requested ordinal does not exist.
    #[error("GPU {ordinal} requested, but this host has {count} GPU(s) (`--gpus`)")]
    InvalidOrdinal {
        /// The requested ordinal.
        ordinal: usize,
        /// GPUs present.
        count: usize,
    },
    /// A driver call failed.
    #[error("CUDA driver call {call} failed: {message}")]
    Driver {
        /// The driver function or operation.
        call: &'static str,
        /// The driver's error text.
        message: String,
    },
    /// NVRTC rejected a kernel source; `log` is NVRTC's compile log.
    #[error("NVRTC could not compile {kernel} for {arch}: {message}\n{log}")]
    Nvrtc {
        /// Kernel file, e.g. `episodes.cu`.
        kernel: &'static str,
        /// Target, e.g. `sm_90`.
        arch: String,
        /// NVRTC's status.
        message: String,
        /// NVRTC's log.
        log: String,
    },
    /// Loading a compiled module or one of its functions failed.
    #[error("loading {what} failed: {message}")]
    Load {
        /// Module or function name.
        what: String,
        /// The driver's error text.
        message: String,
    },
    /// The device thread is gone (it panicked or was shut down).
    #[error("GPU worker {0} is not running")]
    WorkerGone(String),
    /// A job the device layer does not support (e.g. an episode longer than the kernels take).
    #[error("unsupported GPU job: {0}")]
    Unsupported(String),
}

impl DeviceError {
    pub(crate) fn driver(call: &'static str, e: impl std::fmt::Display) -> Self {
        Self::Driver {
            call,
            message: e.to_string(),
        }
    }
}
