//! [`Searcher`]: one index queried on the CPU, with GPU lower bounds (SING, one query at a
//! time) or in GPU batches, as `--device` asks; the one place that picks a path and falls
//! back from a failed GPU.

use super::SearchError;
use super::batch::{BatchAnswer, GpuBatch, SeriesOnDevice};
use super::bounds::LowerBounds;
use super::collection::normalize_query;
use super::gpu::GpuLowerBounds;
use super::index::Index;
use super::query::{QueryAnswer, QueryOptions};
use crate::device::{DeviceChoice, DeviceTarget};

/// Queries one index on the CPU, with GPU lower bounds or in GPU batches, as `--device` asks.
pub struct Searcher<'a> {
    index: &'a Index,
    gpu: Option<GpuLowerBounds<'a>>,
    batch: Option<GpuBatch<'a>>,
    ordinal: Option<usize>,
    required: bool,
    options: QueryOptions,
}

impl std::fmt::Debug for Searcher<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Searcher")
            .field("device", &self.device())
            .field("options", &self.options)
            .finish()
    }
}

impl<'a> Searcher<'a> {
    /// A searcher of `index` on `device` (a [`DeviceChoice`], or a [`DeviceTarget`] naming
    /// the GPU: `target.gpu`, a CUDA ordinal; `None` and a plain choice: the first GPU): `Cpu`
    /// (workers compute every bound), `Gpu` (the GPU produces bounds; an error without one),
    /// `Auto` (the GPU when one is usable, else the CPU with one log line). The GPU gets the
    /// iSAX array here (once).
    ///
    /// # Errors
    /// [`SearchError::Device`] for `Gpu` without a usable GPU, or with a GPU ordinal that does
    /// not exist.
    pub fn new(
        index: &'a Index,
        device: impl Into<DeviceTarget>,
        options: QueryOptions,
    ) -> Result<Self, SearchError> {
        let target: DeviceTarget = device.into();
        let gpu = target.resolve("similarity search", |gpu| GpuLowerBounds::new(index, gpu))?;
        Ok(Self {
            index,
            gpu,
            batch: None,
            ordinal: target.gpu,
            required: target.choice == DeviceChoice::Gpu,
            options,
        })
    }

    /// `"gpu"` when GPU lower bounds are in use, else `"cpu"`.
    #[must_use]
    pub fn device(&self) -> &'static str {
        if self.gpu.is_some() { "gpu" } else { "cpu" }
    }

    /// The index searched.
    #[must_use]
    pub fn index(&self) -> &'a Index {
        self.index
    }

    /// Exact k-NN of raw query number `number` (named in errors).
    ///
    /// # Errors
    /// As [`Index::knn`] (naming `number`), and [`SearchError::Device`] when the GPU fails
    /// and was demanded (with `Auto` a failure logs once and later queries use the CPU).
    pub fn knn(
        &mut self,
        number: usize,
        query: &[f64],
        k: usize,
    ) -> Result<QueryAnswer, SearchError> {
        let q = normalize_query(number, query, self.index.len)?;
        self.knn_normalized(&q, k)
    }

    /// Readies the GPU for [`Searcher::query_batch`] (uploads the index's PAA array and, when
    /// they fit, its series: 4 bytes per sample, e.g. 10.2 GB for 10^7 series of 256), so the
    /// first batch does not pay for it. Does nothing on the CPU or when already done.
    ///
    /// # Errors
    /// [`SearchError::Device`] when the upload fails and the GPU was demanded (with `Auto` a
    /// failure logs once and batches run on the CPU).
    pub fn prepare_batch(&mut self) -> Result<(), SearchError> {
        if self.gpu.is_none() || self.batch.is_some() {
            return Ok(());
        }
        match GpuBatch::new(self.index, self.ordinal, SeriesOnDevice::Exact) {
            Ok(b) => {
                self.batch = Some(b);
                Ok(())
            }
            Err(e) => self.gpu_failed(e),
        }
    }

    fn gpu_failed(&mut self, e: SearchError) -> Result<(), SearchError> {
        if self.required {
            return Err(e);
        }
        tracing::warn!(error = %e, "GPU batches failed; searching on the CPU from now on.");
        self.gpu = None;
        self.batch = None;
        Ok(())
    }

    /// Exact k-NN of each z-normalised query of `qs` (each of the index's length), answered
    /// together ([`super::batch`]): on the GPU by the PAA filter and exact refinement over the
    /// whole collection, on the CPU by SING per query with the queries in parallel. The
    /// answers, in query order, are the same as [`Searcher::knn_normalized`]'s, ids and
    /// distances.
    ///
    /// # Errors
    /// [`SearchError::ZeroK`], [`SearchError::Input`] naming a query of the wrong length, and
    /// [`SearchError::Device`] when the GPU fails and was demanded.
    pub fn query_batch(&mut self, qs: &[Vec<f32>], k: usize) -> Result<BatchAnswer, SearchError> {
        self.prepare_batch()?;
        if let Some(b) = &self.batch {
            match b.knn_batch(qs, k, &self.options) {
                Ok(a) => return Ok(a),
                Err(e @ SearchError::Device(_)) => self.gpu_failed(e)?,
                Err(e) => return Err(e),
            }
        }
        self.index.knn_batch_cpu(qs, k, &self.options)
    }

    /// Exact k-NN of a z-normalised query.
    ///
    /// # Errors
    /// As [`Searcher::knn`].
    pub fn knn_normalized(&mut self, q: &[f32], k: usize) -> Result<QueryAnswer, SearchError> {
        let producer = self.gpu.as_ref().map(|g| g as &dyn LowerBounds);
        let answer = self.index.knn_normalized(q, k, &self.options, producer)?;
        if let Some(e) = &answer.producer_error {
            if self.required {
                return Err(SearchError::Device(e.clone()));
            }
            tracing::warn!(error = %e, "GPU lower bounds failed; searching on the CPU from now on.");
            self.gpu = None;
            self.batch = None;
        }
        Ok(answer)
    }
}
