//! Soft-DTW batches on a GPU (`kernels/softdtw.cu` through [`crate::device::softdtw`]), with
//! the CPU reference's API and validation, and a device choice.
//!
//! The GPU computes in f32 from f32 inputs (the cost, the soft-min's `exp2`/`log2`) and
//! accumulates `R` in f32 for values and in f64 for gradients (see the kernel file's header).
//! Against the f64 CPU reference, values agree within 1e-4 relative and gradients within 1e-3
//! of the gradient's largest entry, for γ from 0.01 to 10 (tests/softdtw_gpu.rs checks this).
//! Gradients of all pairs are summed with f32 atomics, so their last bits vary between runs.
//!
//! `DeviceChoice::Auto` uses the GPU when one is usable, else the CPU with one log line.
//! Gradient pairs too long for the per-warp scratch ([`crate::device::softdtw::MAX_WARP_SCRATCH`])
//! run on the CPU, logged.

use std::sync::Arc;

use super::batch::{all_length_pairs, check_paired, check_sets, rows};
use super::divergence::combine;
use super::{
    Barycenter, BarycenterOptions, Gradient, Measure, Options, PairwiseGradient, Series,
    SoftDtwError,
};
use crate::device::softdtw::{
    MAX_WARP_SCRATCH, PairMode, SeriesSet, SoftDtwBatch, SoftDtwOutput, gradient_scratch,
};
use crate::device::{DeviceError, DeviceTarget, GpuWorker};

fn device_error(e: DeviceError) -> SoftDtwError {
    SoftDtwError::Device {
        message: e.to_string(),
    }
}

/// Packs a set for the kernels (f32, concatenated). Errors name a value beyond f32's range.
fn set_of(series: &[Series], name: &str) -> Result<SeriesSet, SoftDtwError> {
    let mut values = Vec::with_capacity(series.iter().map(|s| s.values.len()).sum());
    let mut offsets = Vec::with_capacity(series.len() + 1);
    offsets.push(0u32);
    for (i, s) in series.iter().enumerate() {
        for (k, &v) in s.values.iter().enumerate() {
            let f = v as f32;
            if !f.is_finite() {
                return Err(SoftDtwError::Device {
                    message: format!(
                        "{name}[{i}]: time step {}, channel {} = {v} does not fit f32",
                        k / s.dims.max(1),
                        k % s.dims.max(1)
                    ),
                });
            }
            values.push(f);
        }
        let end = u64::from(*offsets.last().unwrap_or(&0)) + s.len() as u64;
        offsets.push(u32::try_from(end).map_err(|_| SoftDtwError::Device {
            message: format!("{name}: more than 2^32 - 1 time steps in all"),
        })?);
    }
    Ok(SeriesSet { values, offsets })
}

/// The worker for `device`, or `None` for the CPU (`Auto` without a GPU: see
/// [`crate::device::resolve`]), on its GPU: a [`DeviceTarget`] names it (`target.gpu`, a CUDA
/// ordinal), a plain [`DeviceChoice`](crate::device::DeviceChoice) takes the first GPU. The worker is the process's shared
/// one for that GPU, locked while held: drop it before asking for it again.
///
/// # Errors
/// [`SoftDtwError::Device`] when the choice is `Gpu` and that GPU is not usable.
pub fn worker_on(
    device: impl Into<DeviceTarget>,
) -> Result<Option<crate::device::SharedWorker>, SoftDtwError> {
    let target: DeviceTarget = device.into();
    target
        .resolve("soft-DTW", crate::device::shared_worker)
        .map_err(device_error)
}

/// [`super::barycenter()`] on `w`: the objective's values and gradients by
/// [`paired_gradient`] (f32: gradients within 1e-3 of the f64 reference, so the optimisation
/// may stop at a slightly different point); the start (mean or medoid) on the CPU.
///
/// # Units
/// Every series `N_k × D`; the result `L × D` with `L` the length of the start.
///
/// # Errors
/// As [`super::barycenter()`], plus [`SoftDtwError::Device`] when the GPU fails.
pub fn barycenter(
    w: &GpuWorker,
    set: &[Series],
    opts: &BarycenterOptions,
) -> Result<Barycenter, SoftDtwError> {
    let paired =
        |a: &[Series], b: &[Series]| paired_gradient(w, a, b, &opts.soft, Measure::SoftDtw);
    super::barycenter::barycenter_with(set, opts, Some(&paired))
}

fn dims_of(a: &[Series], b: &[Series]) -> usize {
    a.first().or(b.first()).map_or(1, |s| s.dims)
}

fn run(
    w: &GpuWorker,
    a: &[Series],
    b: &[Series],
    opts: &Options,
    mode: PairMode,
    gradient: bool,
) -> Result<SoftDtwOutput, SoftDtwError> {
    let job = SoftDtwBatch {
        a: set_of(a, "a")?,
        b: set_of(b, "b")?,
        dims: dims_of(a, b),
        mode,
        gamma: opts.gamma,
        band: opts.band,
        gradient,
    };
    let out = w
        .softdtw_batch(Arc::new(job))
        .wait()
        .map_err(device_error)?;
    if let Some(p) = out.values.iter().position(|v| !v.is_finite()) {
        let (i, j) = match mode {
            PairMode::AllPairs => (p / b.len().max(1), p % b.len().max(1)),
            PairMode::Paired => (p, p),
        };
        return Err(SoftDtwError::Overflow {
            input: format!("(a[{i}], b[{j}]) on the GPU (f32)"),
        });
    }
    Ok(out)
}

/// Splits concatenated f32 values back into one `Vec<f64>` per series.
fn split(values: &[f32], series: &[Series]) -> Vec<Vec<f64>> {
    let mut out = Vec::with_capacity(series.len());
    let mut at = 0;
    for s in series {
        let n = s.values.len();
        out.push(values[at..at + n].iter().map(|&v| f64::from(v)).collect());
        at += n;
    }
    out
}

/// Divergences from the values of all pairs and the self values of each set.
fn combine_rows(values: &mut [Vec<f64>], sa: &[f64], sb: &[f64]) {
    for (row, &xx) in values.iter_mut().zip(sa) {
        for (v, &yy) in row.iter_mut().zip(sb) {
            *v = combine(*v, xx, yy);
        }
    }
}

/// [`super::pairwise`] on a GPU worker.
///
/// # Errors
/// As [`super::pairwise`], plus [`SoftDtwError::Device`].
pub fn pairwise(
    w: &GpuWorker,
    a: &[Series],
    b: &[Series],
    opts: &Options,
    measure: Measure,
) -> Result<Vec<Vec<f64>>, SoftDtwError> {
    check_sets(a, b, opts, all_length_pairs(a, b))?;
    let out = run(w, a, b, opts, PairMode::AllPairs, false)?;
    let mut rows = rows(&out.values, a.len(), b.len());
    if measure == Measure::Divergence {
        let sa = run(w, a, a, opts, PairMode::Paired, false)?.values;
        let sb = run(w, b, b, opts, PairMode::Paired, false)?.values;
        combine_rows(&mut rows, &sa, &sb);
    }
    Ok(rows)
}

/// [`super::paired`] on a GPU worker.
///
/// # Errors
/// As [`super::paired`], plus [`SoftDtwError::Device`].
pub fn paired(
    w: &GpuWorker,
    a: &[Series],
    b: &[Series],
    opts: &Options,
    measure: Measure,
) -> Result<Vec<f64>, SoftDtwError> {
    check_paired(a, b, opts)?;
    let mut v = run(w, a, b, opts, PairMode::Paired, false)?.values;
    if measure == Measure::Divergence {
        let sa = run(w, a, a, opts, PairMode::Paired, false)?.values;
        let sb = run(w, b, b, opts, PairMode::Paired, false)?.values;
        for (i, x) in v.iter_mut().enumerate() {
            *x = combine(*x, sa[i], sb[i]);
        }
    }
    Ok(v)
}

/// True when a GPU gradient of these sets fits the per-warp scratch.
fn gradient_fits(a: &[Series], b: &[Series]) -> bool {
    let n = a.iter().map(Series::len).max().unwrap_or(0);
    let m = b.iter().map(Series::len).max().unwrap_or(0);
    gradient_scratch(n.max(m), n.max(m), dims_of(a, b)) <= MAX_WARP_SCRATCH
}

/// Self values and gradients `∇_s sdtw(s, s)` of a set on the GPU.
fn self_terms(
    w: &GpuWorker,
    set: &[Series],
    opts: &Options,
) -> Result<(Vec<f64>, Vec<Vec<f64>>), SoftDtwError> {
    let out = run(w, set, set, opts, PairMode::Paired, true)?;
    let ga = split(&out.grad_a, set);
    let gb = split(&out.grad_b, set);
    let grads = ga
        .into_iter()
        .zip(gb)
        .map(|(x, y)| x.iter().zip(&y).map(|(p, q)| p + q).collect())
        .collect();
    Ok((out.values, grads))
}

/// [`super::pairwise_gradient`] on a GPU worker (sets too long for the GPU scratch go to the
/// CPU, logged).
///
/// # Errors
/// As [`super::pairwise_gradient`], plus [`SoftDtwError::Device`].
pub fn pairwise_gradient(
    w: &GpuWorker,
    a: &[Series],
    b: &[Series],
    opts: &Options,
    measure: Measure,
) -> Result<PairwiseGradient, SoftDtwError> {
    if !gradient_fits(a, b) {
        tracing::info!("Soft-DTW gradient pairs too long for the GPU scratch; on the CPU.");
        return super::pairwise_gradient(a, b, opts, measure);
    }
    check_sets(a, b, opts, all_length_pairs(a, b))?;
    let out = run(w, a, b, opts, PairMode::AllPairs, true)?;
    let mut values = rows(&out.values, a.len(), b.len());
    let mut grad_a = split(&out.grad_a, a);
    let mut grad_b = split(&out.grad_b, b);
    if measure == Measure::Divergence {
        let (sa, ga_self) = self_terms(w, a, opts)?;
        let (sb, gb_self) = self_terms(w, b, opts)?;
        combine_rows(&mut values, &sa, &sb);
        let (ka, kb) = (-0.5 * b.len() as f64, -0.5 * a.len() as f64);
        for (g, s) in grad_a.iter_mut().zip(&ga_self) {
            g.iter_mut().zip(s).for_each(|(x, y)| *x += ka * y);
        }
        for (g, s) in grad_b.iter_mut().zip(&gb_self) {
            g.iter_mut().zip(s).for_each(|(x, y)| *x += kb * y);
        }
    }
    Ok(PairwiseGradient {
        values,
        grad_a,
        grad_b,
    })
}

/// [`super::paired_gradient`] on a GPU worker (too-long pairs on the CPU, logged).
///
/// # Errors
/// As [`super::paired_gradient`], plus [`SoftDtwError::Device`].
pub fn paired_gradient(
    w: &GpuWorker,
    a: &[Series],
    b: &[Series],
    opts: &Options,
    measure: Measure,
) -> Result<Vec<Gradient>, SoftDtwError> {
    if !gradient_fits(a, b) {
        tracing::info!("Soft-DTW gradient pairs too long for the GPU scratch; on the CPU.");
        return super::paired_gradient(a, b, opts, measure);
    }
    check_paired(a, b, opts)?;
    let out = run(w, a, b, opts, PairMode::Paired, true)?;
    let dx = split(&out.grad_a, a);
    let dy = split(&out.grad_b, b);
    let mut g: Vec<Gradient> = out
        .values
        .iter()
        .zip(dx)
        .zip(dy)
        .map(|((&value, dx), dy)| Gradient { value, dx, dy })
        .collect();
    if measure == Measure::Divergence {
        let (sa, ga_self) = self_terms(w, a, opts)?;
        let (sb, gb_self) = self_terms(w, b, opts)?;
        for (i, gi) in g.iter_mut().enumerate() {
            gi.value = combine(gi.value, sa[i], sb[i]);
            gi.dx
                .iter_mut()
                .zip(&ga_self[i])
                .for_each(|(x, y)| *x -= 0.5 * y);
            gi.dy
                .iter_mut()
                .zip(&gb_self[i])
                .for_each(|(x, y)| *x -= 0.5 * y);
        }
    }
    Ok(g)
}

/// The soft-DTW value of one pair of any length on the GPU, tiled (memory `O(N + M)`).
/// Returns `(value, kernel milliseconds)`.
///
/// # Errors
/// As [`super::value`], plus [`SoftDtwError::Device`] and [`SoftDtwError::Overflow`].
pub fn value_long(
    w: &GpuWorker,
    x: &Series,
    y: &Series,
    opts: &Options,
) -> Result<(f64, f64), SoftDtwError> {
    super::check_pair(x, y, opts, &|| "x".into(), &|| "y".into())?;
    let xs = set_of(std::slice::from_ref(x), "x")?.values;
    let ys = set_of(std::slice::from_ref(y), "y")?.values;
    let (v, ms) = w
        .softdtw_long(Arc::new(xs), Arc::new(ys), x.dims, opts.gamma, opts.band)
        .wait()
        .map_err(device_error)?;
    if !v.is_finite() {
        return Err(SoftDtwError::Overflow {
            input: "(x, y) on the GPU (f32)".into(),
        });
    }
    Ok((v, ms))
}
