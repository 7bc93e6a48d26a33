//! Significance of mined episodes: surrogates of the recording ([`surrogate`]), generated with
//! counter-based random numbers ([`philox`]) so that the CPU and the GPU make the same ones,
//! and the tests that compare the recording's counts with the surrogates' ([`testing`]).

mod engine;
mod error;
pub mod philox;
pub mod surrogate;
pub mod testing;

pub use surrogate::{SurrogateError, SurrogateMethod, Surrogates, Trials};
pub use testing::{
    Correction, EpisodeTest, Listing, SignificanceConfig, SignificanceError, SignificanceResult,
    TestStats, listing, test_episodes, test_episodes_on, test_episodes_with_gpu,
};
