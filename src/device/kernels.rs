//! Kernel sources embedded in the binary, compiled by NVRTC for each device's architecture and
//! cached: once per process (per file and arch) and on disk, keyed by source hash, arch and
//! driver version, so a second run skips NVRTC.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};

use crate::device::DeviceError;

/// One `.cu` file from `kernels/`.
#[derive(Clone, Copy, Debug)]
pub struct KernelFile {
    /// File name, e.g. `episodes.cu`.
    pub name: &'static str,
    /// Its source text.
    pub source: &'static str,
}

/// Frequent-episode counting: `episodes_preelim_n{N}` and `episodes_ptpe_n{N}`, N = 1..=16.
pub const EPISODES: KernelFile = KernelFile {
    name: "episodes.cu",
    source: include_str!("../../kernels/episodes.cu"),
};

/// Motif discovery: MK (reference distances, permutation, offset sweep, remaining-work count)
/// and the exact matrix profile.
pub const MOTIF: KernelFile = KernelFile {
    name: "motif.cu",
    source: include_str!("../../kernels/motif.cu"),
};

/// Soft-DTW: batched values and gradients (one warp per pair) and the tiled long pair.
pub const SOFTDTW: KernelFile = KernelFile {
    name: "softdtw.cu",
    source: include_str!("../../kernels/softdtw.cu"),
};

/// SING similarity search: lower bounds of the iSAX array's active chunks, compacted.
pub const SEARCH: KernelFile = KernelFile {
    name: "search.cu",
    source: include_str!("../../kernels/search.cu"),
};

/// Shapelet discovery: window statistics, the distance dynamic program with the split scan
/// (persistent warps), and the contender selection.
pub const SHAPELET: KernelFile = KernelFile {
    name: "shapelet.cu",
    source: include_str!("../../kernels/shapelet.cu"),
};

/// Every kernel file embedded in the library (a test checks it against `kernels/*.cu`).
#[cfg(test)]
const ALL: &[KernelFile] = &[EPISODES, MOTIF, SOFTDTW, SEARCH, SHAPELET];

/// The longest episode the GPU kernels count (`SYNFIRE_MAX_GPU_NODES` in `episodes.cu`).
pub const MAX_GPU_NODES: usize = 16;

/// Completion times an MTPE segment tuple records (`SYNFIRE_MTPE_RECORDED`,
/// `episode::mtpe::RECORDED`).
pub const MTPE_RECORDED: usize = 4;

/// The sentinel a PTPE thread writes when a per-state list would overflow
/// (`SYNFIRE_COUNT_OVERFLOW`): the host recounts that candidate on the CPU.
pub const COUNT_OVERFLOW: u32 = u32::MAX;

type Cache = Mutex<HashMap<(&'static str, String), Arc<String>>>;

fn process_cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn source_hash(file: &KernelFile) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    file.source.hash(&mut h);
    h.finish()
}

/// The on-disk cache directory: `$SYNFIRE_KERNEL_CACHE`, else `$XDG_CACHE_HOME/synfire/kernels`,
/// else `$HOME/.cache/synfire/kernels`.
#[must_use]
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SYNFIRE_KERNEL_CACHE") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("synfire/kernels"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/synfire/kernels"))
}

/// PTX of `file` for a device of compute capability `cc` under driver `driver_version`.
///
/// # Errors
/// [`DeviceError::Nvrtc`] with NVRTC's log when the source does not compile.
pub fn ptx_for(
    file: &KernelFile,
    cc: (i32, i32),
    driver_version: i32,
) -> Result<Arc<String>, DeviceError> {
    let arch = format!("compute_{}{}", cc.0, cc.1);
    let key = (file.name, arch.clone());
    let mut cache = process_cache()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(ptx) = cache.get(&key) {
        return Ok(ptx.clone());
    }
    let stem = file.name.trim_end_matches(".cu");
    let disk = cache_dir().map(|d| {
        d.join(format!(
            "{stem}-{arch}-drv{driver_version}-{:016x}.ptx",
            source_hash(file)
        ))
    });
    if let Some(path) = &disk
        && let Ok(text) = std::fs::read_to_string(path)
    {
        tracing::debug!(path = %path.display(), "Loaded cached PTX.");
        let ptx = Arc::new(text);
        cache.insert(key, ptx.clone());
        return Ok(ptx);
    }
    let started = Instant::now();
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        name: Some(file.name.into()),
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(file.source, opts).map_err(|e| nvrtc_error(file, &arch, e))?;
    let text = ptx.to_src();
    tracing::debug!(kernel = file.name, arch = %arch, seconds = started.elapsed().as_secs_f64(), "Compiled kernel with NVRTC.");
    if let Some(path) = &disk {
        let write = || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let tmp = path.with_extension(format!("ptx.tmp{}", std::process::id()));
            std::fs::write(&tmp, &text)?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            tracing::debug!(path = %path.display(), error = %e, "Could not cache PTX on disk.");
        }
    }
    let ptx = Arc::new(text);
    cache.insert(key, ptx.clone());
    Ok(ptx)
}

fn nvrtc_error(file: &KernelFile, arch: &str, e: CompileError) -> DeviceError {
    let (message, log) = match &e {
        CompileError::CompileError { nvrtc, log, .. } => {
            (nvrtc.to_string(), log.to_string_lossy().into_owned())
        }
        other => (other.to_string(), String::new()),
    };
    DeviceError::Nvrtc {
        kernel: file.name,
        arch: arch.to_owned(),
        message,
        log,
    }
}

#[cfg(test)]
mod tests {
    use super::ALL;

    /// Every `kernels/*.cu` file is embedded, and every embedded text is that file's.
    #[test]
    fn every_kernel_file_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cu"))
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = ALL.iter().map(|k| k.name.to_owned()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
        for k in ALL {
            let text = std::fs::read_to_string(dir.join(k.name)).unwrap();
            assert_eq!(text, k.source, "{}", k.name);
        }
    }
}
