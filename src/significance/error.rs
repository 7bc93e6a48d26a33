//! The error of a significance test that could not run.

use super::surrogate::SurrogateError;
use crate::episode::MineError;

/// A significance test that could not run.
#[derive(Debug, thiserror::Error)]
pub enum SignificanceError {
    /// A setting out of range, naming the option.
    #[error("{0}")]
    Config(String),
    /// The surrogates could not be made.
    #[error(transparent)]
    Surrogate(#[from] SurrogateError),
    /// Mining or counting a surrogate failed.
    #[error("mining a surrogate: {0}")]
    Mine(#[from] MineError),
    /// Counting failed.
    #[error("counting on a surrogate: {0}")]
    Count(#[from] crate::episode::CountError),
    /// The caller's cancel flag ([`super::phases::Tester::cancel_on`]) was set (Ctrl-C in Python):
    /// the test stopped at its next surrogate (or its next batch of candidates while mining
    /// one) and returns nothing.
    #[error("the significance test was cancelled")]
    Cancelled,
    /// The GPU demanded for the surrogates could not be used.
    #[error("surrogates on the GPU: {0}")]
    Device(#[from] crate::device::DeviceError),
}
