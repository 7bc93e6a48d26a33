//! NumPy `.npy` arrays (through the `npyz` crate), widened to `f64`.

use std::path::Path;

use npyz::{DType, Order, TypeChar};

use super::SeriesError;

/// An n-dimensional array of `f64` in C (row-major) order.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// Sizes of the dimensions, outermost first; their product is `data.len()`.
    pub shape: Vec<usize>,
    /// The values, row-major.
    pub data: Vec<f64>,
}

/// Reads a `.npy` file of `float32`/`float64` or integer elements (either byte order, C or
/// Fortran order) as an [`Array`] in C order.
///
/// # Errors
/// [`SeriesError::Io`] if the file cannot be opened; [`SeriesError::Npy`] if it is not a
/// `.npy` array or its elements are not real numbers (complex, bool, strings, records).
pub fn read(path: &Path) -> Result<Array, SeriesError> {
    let bad = |message: String| SeriesError::Npy {
        path: path.into(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|source| SeriesError::Io {
        path: path.into(),
        source,
    })?;
    let npy = npyz::NpyFile::new(std::io::BufReader::new(file)).map_err(|e| bad(e.to_string()))?;
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| bad(format!("dimension {d} is too large"))))
        .collect::<Result<_, _>>()?;
    let order = npy.order();
    let DType::Plain(ts) = npy.dtype() else {
        return Err(bad(format!(
            "dtype {} is not a plain number type",
            npy.dtype().descr()
        )));
    };
    let read_err = |e: std::io::Error| bad(e.to_string());
    let data: Vec<f64> = match (ts.type_char(), ts.size_field()) {
        (TypeChar::Float, 8) => npy.into_vec::<f64>().map_err(read_err)?,
        (TypeChar::Float, 4) => widen(npy.into_vec::<f32>().map_err(read_err)?),
        (TypeChar::Int, 1) => widen(npy.into_vec::<i8>().map_err(read_err)?),
        (TypeChar::Int, 2) => widen(npy.into_vec::<i16>().map_err(read_err)?),
        (TypeChar::Int, 4) => widen(npy.into_vec::<i32>().map_err(read_err)?),
        (TypeChar::Int, 8) => npy
            .into_vec::<i64>()
            .map_err(read_err)?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        (TypeChar::Uint, 1) => widen(npy.into_vec::<u8>().map_err(read_err)?),
        (TypeChar::Uint, 2) => widen(npy.into_vec::<u16>().map_err(read_err)?),
        (TypeChar::Uint, 4) => widen(npy.into_vec::<u32>().map_err(read_err)?),
        (TypeChar::Uint, 8) => npy
            .into_vec::<u64>()
            .map_err(read_err)?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        _ => {
            return Err(bad(format!(
                "dtype `{ts}` is not supported (float32, float64 or an integer type is)"
            )));
        }
    };
    let data = match order {
        Order::C => data,
        Order::Fortran => fortran_to_c(&shape, &data),
    };
    Ok(Array { shape, data })
}

fn widen<T: Into<f64>>(v: Vec<T>) -> Vec<f64> {
    v.into_iter().map(Into::into).collect()
}

/// Reorders column-major data of `shape` into row-major order.
fn fortran_to_c(shape: &[usize], data: &[f64]) -> Vec<f64> {
    let n = data.len();
    let mut out = vec![0.0; n];
    let mut index = vec![0usize; shape.len()];
    for value in out.iter_mut() {
        // `index` walks C order; its Fortran offset has the first dimension fastest.
        let mut offset = 0;
        let mut stride = 1;
        for (i, &d) in index.iter().zip(shape) {
            offset += i * stride;
            stride *= d;
        }
        *value = data[offset];
        for (i, &d) in index.iter_mut().zip(shape).rev() {
            *i += 1;
            if *i < d {
                break;
            }
            *i = 0;
        }
    }
    out
}

/// Writes `data` of `shape` as a C-order `float64` `.npy` file (for tests and tools).
///
/// # Errors
/// [`SeriesError::Io`] if the file cannot be written; [`SeriesError::BadShape`] if the shape
/// does not match the data.
pub fn write_f64(path: &Path, shape: &[usize], data: &[f64]) -> Result<(), SeriesError> {
    if shape.iter().product::<usize>() != data.len() {
        return Err(SeriesError::BadShape {
            input: path.display().to_string(),
            shape: shape.to_vec(),
            expected: format!("{} values", data.len()),
        });
    }
    let io = |source| SeriesError::Io {
        path: path.into(),
        source,
    };
    let file = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    let shape64: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    use npyz::WriterBuilder;
    let mut writer = npyz::WriteOptions::<f64>::new()
        .default_dtype()
        .shape(&shape64)
        .writer(file)
        .begin_nd()
        .map_err(io)?;
    writer.extend(data.iter().copied()).map_err(io)?;
    writer.finish().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_fortran_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        write_f64(&p, &[2, 3], &[1., 2., 3., 4., 5., 6.]).unwrap();
        let a = read(&p).unwrap();
        assert_eq!(a.shape, [2, 3]);
        assert_eq!(a.data, [1., 2., 3., 4., 5., 6.]);
        // Column-major [[1,2,3],[4,5,6]] is stored 1,4,2,5,3,6.
        assert_eq!(
            fortran_to_c(&[2, 3], &[1., 4., 2., 5., 3., 6.]),
            [1., 2., 3., 4., 5., 6.]
        );
    }

    #[test]
    fn not_npy_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.npy");
        std::fs::write(&p, b"hello").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("b.npy") && e.contains(".npy"), "{e}");
    }
}
