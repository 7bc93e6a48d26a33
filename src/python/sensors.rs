//! The sensor stages for Python: soft-DTW values and gradients, barycenters, the SING index and
//! the shapelet tree, numpy in and out. Series arrive flattened (`[len × dims]`, time-major,
//! `float64`) with their channel count; the Python layer (`python/synfire/sensors.py`) shapes
//! them. Long calls (soft-DTW batches, barycenters, SING builds, shapelet training) run on a
//! thread of their own with the GIL released and answer Ctrl-C ([`super::interrupt`]); short
//! ones (queries, predictions) release the GIL.

use std::path::PathBuf;

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::SynfireError;
use crate::device::{DeviceChoice, DeviceTarget};
use crate::series::Series;

/// Runs `work` on a thread of its own with the GIL released, answering Ctrl-C at once
/// ([`super::interrupt::interruptible`]; the work has no cancellation hook, so an interrupted
/// call's work runs to its end on its thread and its result is dropped).
fn run<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> PyResult<T> + Send + 'static,
) -> PyResult<T> {
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    super::interrupt::interruptible(py, &cancel, |_| Ok(()), work)
}

/// `auto`, `cpu` or `gpu`, or a `ValueError` naming `device`.
fn choice(device: &str) -> PyResult<DeviceChoice> {
    serde_json::from_value(serde_json::json!(device))
        .map_err(|_| PyValueError::new_err(format!("device: `{device}` is not auto, cpu or gpu")))
}

/// The series of `arrays` (each flattened `[len × dims]`), named `name[i]` in errors.
fn series_of(
    name: &str,
    arrays: &[PyReadonlyArray1<'_, f64>],
    dims: usize,
) -> PyResult<Vec<Series>> {
    if dims == 0 {
        return Err(PyValueError::new_err(format!("{name}: zero channels")));
    }
    arrays
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let values = a
                .as_slice()
                .map_err(|e| PyValueError::new_err(format!("{name}[{i}]: {e}")))?
                .to_vec();
            if values.len() % dims != 0 {
                return Err(PyValueError::new_err(format!(
                    "{name}[{i}]: {} values are not a whole number of {dims}-channel time steps",
                    values.len()
                )));
            }
            Ok(Series { dims, values })
        })
        .collect()
}

/// A library error as a Python exception: device failures `SynfireError`, the rest
/// `ValueError` (bad input), with the library's message.
fn py_err(device: bool, e: impl std::fmt::Display) -> PyErr {
    if device {
        SynfireError::new_err(e.to_string())
    } else {
        PyValueError::new_err(e.to_string())
    }
}

fn softdtw_err(e: crate::softdtw::SoftDtwError) -> PyErr {
    let device = matches!(e, crate::softdtw::SoftDtwError::Device { .. });
    py_err(device, e)
}

/// Soft-DTW of every pair of `a` and `b` (Cuturi & Blondel 2017; `divergence`: Blondel et al.
/// 2021): the values `[len(a), len(b)]` and, with `gradient`, the gradient of the sum of all
/// values with respect to each series of `a` and of `b` (flattened like the inputs).
#[pyfunction]
#[pyo3(signature = (a, b, dims, gamma, band = None, divergence = false, gradient = false, device = "auto"))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(super) fn softdtw<'py>(
    py: Python<'py>,
    a: Vec<PyReadonlyArray1<'py, f64>>,
    b: Vec<PyReadonlyArray1<'py, f64>>,
    dims: usize,
    gamma: f64,
    band: Option<usize>,
    divergence: bool,
    gradient: bool,
    device: &str,
) -> PyResult<(
    Bound<'py, PyArray2<f64>>,
    Option<(
        Vec<Bound<'py, PyArray1<f64>>>,
        Vec<Bound<'py, PyArray1<f64>>>,
    )>,
)> {
    use crate::softdtw::{Measure, Options, gpu};
    let a = series_of("a", &a, dims)?;
    let b = series_of("b", &b, dims)?;
    let opts = Options {
        band,
        ..Options::new(gamma)
    };
    let measure = if divergence {
        Measure::Divergence
    } else {
        Measure::SoftDtw
    };
    let target: DeviceTarget = choice(device)?.into();
    let (a_len, b_len) = (a.len(), b.len());
    let (values, grads) = run(py, move || {
        (|| -> Result<_, crate::softdtw::SoftDtwError> {
            let worker = gpu::worker_on(target)?;
            Ok(match (&worker, gradient) {
                (None, true) => {
                    let g = crate::softdtw::pairwise_gradient(&a, &b, &opts, measure)?;
                    (g.values, Some((g.grad_a, g.grad_b)))
                }
                (None, false) => (crate::softdtw::pairwise(&a, &b, &opts, measure)?, None),
                (Some(w), true) => {
                    let g = gpu::pairwise_gradient(w, &a, &b, &opts, measure)?;
                    (g.values, Some((g.grad_a, g.grad_b)))
                }
                (Some(w), false) => (gpu::pairwise(w, &a, &b, &opts, measure)?, None),
            })
        })()
        .map_err(softdtw_err)
    })?;
    let values = if values.is_empty() || values[0].is_empty() {
        numpy::PyArray2::zeros(py, [a_len, b_len], false)
    } else {
        PyArray2::from_vec2(py, &values).map_err(|e| PyValueError::new_err(e.to_string()))?
    };
    let arrays = |g: Vec<Vec<f64>>| g.into_iter().map(|v| v.into_pyarray(py)).collect();
    Ok((values, grads.map(|(ga, gb)| (arrays(ga), arrays(gb)))))
}

/// The soft-DTW barycenter of `set` (Cuturi & Blondel 2017, §4, Eq. 4; L-BFGS): the series
/// (flattened `[L × dims]`) and a dict `objective`, `iterations`, `stop`, `gradient_norm`,
/// `medoid`.
#[pyfunction]
#[pyo3(signature = (set, dims, gamma, band = None, weights = None, init = "auto", max_iterations = 100, device = "auto"))]
#[allow(clippy::too_many_arguments)]
pub(super) fn barycenter<'py>(
    py: Python<'py>,
    set: Vec<PyReadonlyArray1<'py, f64>>,
    dims: usize,
    gamma: f64,
    band: Option<usize>,
    weights: Option<Vec<f64>>,
    init: &str,
    max_iterations: usize,
    device: &str,
) -> PyResult<(Bound<'py, PyArray1<f64>>, Bound<'py, PyDict>)> {
    use crate::softdtw::{BarycenterOptions, Init, gpu};
    let set = series_of("set", &set, dims)?;
    let mut opts = BarycenterOptions::new(gamma);
    opts.soft.band = band;
    opts.weights = weights;
    opts.max_iterations = max_iterations;
    opts.init = match init {
        "auto" => Init::Auto,
        "mean" => Init::Mean,
        "medoid" => Init::Medoid,
        other => {
            return Err(PyValueError::new_err(format!(
                "init: `{other}` is not auto, mean or medoid"
            )));
        }
    };
    let target: DeviceTarget = choice(device)?.into();
    let result = run(py, move || {
        gpu::worker_on(target)
            .and_then(|worker| match &worker {
                Some(w) => gpu::barycenter(w, &set, &opts),
                None => crate::softdtw::barycenter(&set, &opts),
            })
            .map_err(softdtw_err)
    })?;
    let info = PyDict::new(py);
    info.set_item("objective", result.objective)?;
    info.set_item("iterations", result.iterations)?;
    info.set_item(
        "stop",
        serde_json::to_value(result.stop)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned)),
    )?;
    info.set_item("gradient_norm", result.gradient_norm)?;
    info.set_item("medoid", result.medoid)?;
    Ok((result.series.values.into_pyarray(py), info))
}

/// Neighbour ids and distances.
type Neighbours<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<f64>>);
type BatchNeighbours<'py> = (Bound<'py, PyArray2<u32>>, Bound<'py, PyArray2<f64>>);

/// A SING similarity-search index (Peng, Fatourou & Palpanas; iSAX tree, exact k-NN under the
/// z-normalised Euclidean distance) over equal-length series.
#[pyclass(module = "synfire._synfire")]
pub struct SingIndex {
    inner: crate::search::Index,
}

fn search_err(e: crate::search::SearchError) -> PyErr {
    let device = matches!(e, crate::search::SearchError::Device(_));
    py_err(device, e)
}

#[pymethods]
impl SingIndex {
    /// Builds the index of `series` (each `[len]`, all one length; ids `0..n`).
    #[staticmethod]
    #[pyo3(signature = (series, leaf_capacity = 1024))]
    fn build(
        py: Python<'_>,
        series: Vec<PyReadonlyArray1<'_, f64>>,
        leaf_capacity: usize,
    ) -> PyResult<Self> {
        let rows: Vec<Vec<f64>> = series
            .iter()
            .enumerate()
            .map(|(i, a)| {
                a.as_slice()
                    .map(<[f64]>::to_vec)
                    .map_err(|e| PyValueError::new_err(format!("series[{i}]: {e}")))
            })
            .collect::<PyResult<_>>()?;
        let inner = run(py, move || {
            crate::search::Collection::from_series("series", &rows)
                .and_then(|c| {
                    crate::search::Index::build(&c, crate::search::BuildOptions { leaf_capacity })
                })
                .map_err(search_err)
        })?;
        Ok(Self { inner })
    }

    /// Loads an index saved by `save` (or `synfire search build`).
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py
            .detach(|| crate::search::Index::load(&path))
            .map_err(search_err)?;
        Ok(Self { inner })
    }

    /// Saves the index to the folder `path`.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.save(&path)).map_err(search_err)
    }

    /// Number of series.
    fn __len__(&self) -> usize {
        self.inner.count()
    }

    /// Length of each series, samples.
    #[getter]
    fn series_length(&self) -> usize {
        self.inner.series_len()
    }

    /// The exact `k` nearest series of `q` (`[len]`, z-normalised here): their ids and
    /// Euclidean distances, nearest first (ties: smallest id).
    #[pyo3(signature = (q, k = 1, device = "auto"))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        q: PyReadonlyArray1<'py, f64>,
        k: usize,
        device: &str,
    ) -> PyResult<Neighbours<'py>> {
        let q = q
            .as_slice()
            .map_err(|e| PyValueError::new_err(format!("q: {e}")))?
            .to_vec();
        let choice = choice(device)?;
        let answer = py
            .detach(|| {
                let mut searcher = crate::search::Searcher::new(
                    &self.inner,
                    choice,
                    crate::search::QueryOptions::default(),
                )?;
                searcher.knn(0, &q, k)
            })
            .map_err(search_err)?;
        let ids: Vec<u32> = answer.neighbors.iter().map(|n| n.id).collect();
        let d: Vec<f64> = answer.neighbors.iter().map(|n| n.distance).collect();
        Ok((ids.into_pyarray(py), d.into_pyarray(py)))
    }

    /// The exact `k` nearest series of each row of `qs` (`[B, len]`, each z-normalised
    /// here), answered together (`Searcher::query_batch`): ids `[B, min(k, count)]` and
    /// distances of the same shape, nearest first (ties: smallest id).
    #[pyo3(signature = (qs, k = 1, device = "auto"))]
    fn query_batch<'py>(
        &self,
        py: Python<'py>,
        qs: PyReadonlyArray2<'py, f64>,
        k: usize,
        device: &str,
    ) -> PyResult<BatchNeighbours<'py>> {
        let qs = qs.as_array();
        let rows: Vec<Vec<f64>> = qs.rows().into_iter().map(|r| r.to_vec()).collect();
        let choice = choice(device)?;
        let len = self.inner.series_len();
        let answers = py
            .detach(|| {
                let normalized = rows
                    .iter()
                    .enumerate()
                    .map(|(i, q)| crate::search::collection::normalize_query(i, q, len))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut searcher = crate::search::Searcher::new(
                    &self.inner,
                    choice,
                    crate::search::QueryOptions::default(),
                )?;
                searcher.query_batch(&normalized, k)
            })
            .map_err(search_err)?;
        let width = k.min(self.inner.count());
        let b = answers.answers.len();
        let mut ids = Vec::with_capacity(b * width);
        let mut d = Vec::with_capacity(b * width);
        for a in &answers.answers {
            ids.extend(a.neighbors.iter().map(|n| n.id));
            d.extend(a.neighbors.iter().map(|n| n.distance));
        }
        let shape = |v: Vec<u32>| numpy::ndarray::Array2::from_shape_vec((b, width), v);
        let ids = shape(ids).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let d = numpy::ndarray::Array2::from_shape_vec((b, width), d)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok((ids.into_pyarray(py), d.into_pyarray(py)))
    }
}

fn shapelet_err(e: crate::shapelet::ShapeletError) -> PyErr {
    let device = matches!(e, crate::shapelet::ShapeletError::Device(_));
    py_err(device, e)
}

/// Trains a shapelet tree (Ye & Keogh 2009, logical shapelets of Mueen et al. 2011) on
/// `series` (each `[len]`, one length) with `labels`; returns the model as JSON (the
/// `synfire shapelet --save-model` format).
#[pyfunction]
#[pyo3(signature = (series, labels, min_length, max_length, step = 1, max_terms = 1, max_depth = None, device = "auto"))]
#[allow(clippy::too_many_arguments)]
pub(super) fn shapelet_fit(
    py: Python<'_>,
    series: Vec<Vec<f64>>,
    labels: Vec<String>,
    min_length: usize,
    max_length: usize,
    step: usize,
    max_terms: usize,
    max_depth: Option<usize>,
    device: &str,
) -> PyResult<String> {
    let cfg = crate::shapelet::ShapeletConfig {
        min_length,
        max_length,
        step,
        max_terms,
        max_depth,
    };
    let choice = choice(device)?;
    let (tree, _) = run(py, move || {
        crate::shapelet::TrainingSet::new(&series, &labels, "X")
            .and_then(|set| crate::shapelet::train(&set, &cfg, choice))
            .map_err(shapelet_err)
    })?;
    serde_json::to_string(&tree).map_err(|e| SynfireError::new_err(e.to_string()))
}

/// The class labels a model (JSON, from [`shapelet_fit`]) gives `series`.
#[pyfunction]
pub(super) fn shapelet_predict(
    py: Python<'_>,
    model: &str,
    series: Vec<Vec<f64>>,
) -> PyResult<Vec<String>> {
    let tree: crate::shapelet::ShapeletTree =
        serde_json::from_str(model).map_err(|e| PyValueError::new_err(format!("model: {e}")))?;
    let classes = py
        .detach(|| tree.predict(&series, "X"))
        .map_err(shapelet_err)?;
    Ok(classes
        .into_iter()
        .map(|c| tree.classes[c].clone())
        .collect())
}

/// Adds this file's functions and classes to the module.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(softdtw, m)?)?;
    m.add_function(wrap_pyfunction!(barycenter, m)?)?;
    m.add_function(wrap_pyfunction!(shapelet_fit, m)?)?;
    m.add_function(wrap_pyfunction!(shapelet_predict, m)?)?;
    m.add_class::<SingIndex>()?;
    Ok(())
}
