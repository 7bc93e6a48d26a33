//! GPU lower bounds for SING queries: a [`LowerBounds`] producer that runs
//! `kernels/search.cu` on the process-wide device thread ([`crate::device::shared_worker`]).
//!
//! The index's leaf-ordered iSAX array (16 bytes per series: 160 MB for 10^7 series) is
//! uploaded once, when the producer is made, and stays on the GPU, tagged with the index; a
//! query uploads only its bound table (32 KiB) and its active ranges, and gets back, chunk by
//! chunk, the positions and bounds of the series the BSF of the moment does not prune.

use std::sync::Arc;

use super::SearchError;
use super::bounds::{Candidate, ChunkBoard, ChunkPlan, LowerBounds};
use super::index::Index;
use crate::device::DeviceError;
use crate::device::search::LowerBoundJob;

/// The GPU lower-bound producer of one index.
#[derive(Debug)]
pub struct GpuLowerBounds<'a> {
    index: &'a Index,
    ordinal: Option<usize>,
}

impl<'a> GpuLowerBounds<'a> {
    /// Starts (or reuses) the device thread of GPU `ordinal` (`None`: the first GPU) and
    /// uploads `index`'s iSAX array unless the GPU holds it already.
    ///
    /// # Errors
    /// [`SearchError::Device`]: no driver or GPU, or a failed upload.
    pub fn new(index: &'a Index, ordinal: Option<usize>) -> Result<Self, SearchError> {
        let me = Self { index, ordinal };
        drop(me.ensure_loaded()?);
        Ok(me)
    }

    fn ensure_loaded(&self) -> Result<crate::device::SharedWorker, DeviceError> {
        let worker = crate::device::shared_worker(self.ordinal)?;
        if worker.search_tag().wait()? != Some(self.index.tag()) {
            let bytes: Vec<u8> = bytemuck::cast_slice(self.index.sax()).to_vec();
            worker
                .search_load(self.index.tag(), Arc::new(bytes))
                .wait()?;
            tracing::debug!(
                bytes = self.index.sax_bytes(),
                "Uploaded the iSAX array to the GPU."
            );
        }
        Ok(worker)
    }
}

impl LowerBounds for GpuLowerBounds<'_> {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn produce(&self, plan: &Arc<ChunkPlan>, board: &Arc<ChunkBoard>) -> Result<u64, DeviceError> {
        let worker = self.ensure_loaded()?;
        let (b1, b2) = (board.clone(), board.clone());
        let job = LowerBoundJob {
            tag: self.index.tag(),
            table: plan.table.as_slice().to_vec(),
            starts: plan.starts.clone(),
            prefix: plan.prefix.clone(),
            chunk_len: plan.chunk_len,
            threshold: Box::new(move || (!b1.stopped()).then(|| b1.bsf_sq())),
            publish: Box::new(move |c, pos, lb| {
                b2.publish(
                    c,
                    pos.into_iter()
                        .zip(lb)
                        .map(|(pos, lb_sq)| Candidate { pos, lb_sq })
                        .collect(),
                );
            }),
        };
        let report = worker.search_lower_bounds(job).wait()?;
        Ok(report.lower_bounds)
    }
}
