//! Kernel sources embedded in the binary, compiled by NVRTC to a CUBIN for each device's
//! architecture (no JIT by the driver) and cached: once per process and on disk, keyed by
//! variant, source hash, arch and driver version, so a second run skips NVRTC. `episodes.cu`
//! is compiled as one program per episode size, in parallel ([`prepare`]).
//!
//! The helpers the files share live in `kernels/common.cuh` ([`COMMON`]); a file includes it
//! with `#include "common.cuh"`, a line that [`KernelFile::text`] replaces by the header's
//! text before NVRTC sees the source (NVRTC is given no include path), so the header enters
//! every cache key of the files that include it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::device::DeviceError;

/// One `.cu` file from `kernels/`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernelFile {
    /// File name, e.g. `episodes.cu`.
    pub name: &'static str,
    /// Its source text, as in `kernels/` (with its `#include "common.cuh"` line, if any).
    pub source: &'static str,
}

/// `kernels/common.cuh`: the helpers the kernel files share (the `synfire_u64` type, the f64
/// infinities, `synfire_item_of`).
pub(crate) const COMMON: &str = include_str!("../../kernels/common.cuh");

/// The line by which a kernel file includes [`COMMON`].
const COMMON_INCLUDE: &str = "#include \"common.cuh\"";

impl KernelFile {
    /// The text NVRTC compiles: [`KernelFile::source`] with its `#include "common.cuh"` line
    /// replaced by `common` (the header's text), between `#line` directives so that NVRTC's
    /// messages name the header's and the file's own lines.
    fn text(&self, source: &str, common: &str) -> String {
        let mut out = String::with_capacity(source.len() + common.len() + 64);
        for (i, line) in source.split_inclusive('\n').enumerate() {
            if line.trim_end() == COMMON_INCLUDE {
                out.push_str("#line 1 \"common.cuh\"\n");
                out.push_str(common);
                if !common.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&format!("#line {} \"{}\"\n", i + 2, self.name));
            } else {
                out.push_str(line);
            }
        }
        out
    }
}

/// Frequent-episode counting: `episodes_preelim_n{N}` and `episodes_ptpe_n{N}`, N = 1..=16.
pub(crate) const EPISODES: KernelFile = KernelFile {
    name: "episodes.cu",
    source: include_str!("../../kernels/episodes.cu"),
};

/// Motif discovery: MK (reference distances, permutation, offset sweep, remaining-work count)
/// and the exact matrix profile.
pub(crate) const MOTIF: KernelFile = KernelFile {
    name: "motif.cu",
    source: include_str!("../../kernels/motif.cu"),
};

/// Soft-DTW: batched values and gradients (one warp per pair) and the tiled long pair.
pub(crate) const SOFTDTW: KernelFile = KernelFile {
    name: "softdtw.cu",
    source: include_str!("../../kernels/softdtw.cu"),
};

/// SING similarity search: lower bounds of the iSAX array's active chunks, compacted.
pub(crate) const SEARCH: KernelFile = KernelFile {
    name: "search.cu",
    source: include_str!("../../kernels/search.cu"),
};

/// Shapelet discovery: window statistics, the distance dynamic program with the split scan
/// (persistent warps), and the contender selection.
pub(crate) const SHAPELET: KernelFile = KernelFile {
    name: "shapelet.cu",
    source: include_str!("../../kernels/shapelet.cu"),
};

/// Surrogates generated on the device (dithering, train shifting), bit for bit the host's.
pub(crate) const SURROGATES: KernelFile = KernelFile {
    name: "surrogates.cu",
    source: include_str!("../../kernels/surrogates.cu"),
};

/// The threshold search's join bounds (`significance::spectrum`), bit for bit the host's.
pub(crate) const BOUNDS: KernelFile = KernelFile {
    name: "bounds.cu",
    source: include_str!("../../kernels/bounds.cu"),
};

/// Exact counts from occurrence ends (`episode::ends`), count for count the host's.
pub(crate) const ENDS: KernelFile = KernelFile {
    name: "ends.cu",
    source: include_str!("../../kernels/ends.cu"),
};

/// Every kernel file embedded in the library (a test checks it against `kernels/*.cu`).
#[cfg(test)]
const ALL: &[KernelFile] = &[
    EPISODES, MOTIF, SOFTDTW, SEARCH, SHAPELET, SURROGATES, BOUNDS, ENDS,
];

/// The longest episode the GPU kernels count (`SYNFIRE_MAX_GPU_NODES` in `episodes.cu`).
pub const MAX_GPU_NODES: usize = 16;

/// Completion times an MTPE segment tuple records (`SYNFIRE_MTPE_RECORDED`,
/// `episode::mtpe::RECORDED`).
pub(crate) const MTPE_RECORDED: usize = 4;

/// The sentinel a PTPE thread writes when a per-state list would overflow
/// (`SYNFIRE_COUNT_OVERFLOW`): the host recounts that candidate on the CPU.
pub(crate) const COUNT_OVERFLOW: u32 = u32::MAX;

/// A compiled kernel program: a CUBIN for the device's exact architecture, loaded without any
/// JIT compilation by the driver.
pub(crate) type Image = Arc<Vec<u8>>;

/// (file, variant, architecture) → the image, once compiled or read. Each entry has its own
/// lock, held while it is compiled, so two threads that want the same image (the background
/// compile of the next episode size and the count that needs it) compile it once.
type Cache = Mutex<HashMap<(&'static str, u32, String), Arc<Mutex<Option<Image>>>>>;

fn process_cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn source_hash(source: &str, extra_options: &[String]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    source.hash(&mut h);
    extra_options.hash(&mut h);
    h.finish()
}

/// The text NVRTC compiles for `file` ([`KernelFile::text`]): the embedded source and
/// [`COMMON`], or, for kernel development, `$SYNFIRE_KERNEL_SOURCES/<name>` (and
/// `$SYNFIRE_KERNEL_SOURCES/common.cuh`) when that variable names a directory holding the file
/// (a warning says so, so that a tuned variant is never mistaken for the shipped kernel; one
/// binary can then time two versions of a kernel side by side).
///
/// # Errors
/// [`DeviceError::Nvrtc`] when an override file exists but cannot be read.
fn kernel_source(file: &KernelFile) -> Result<String, DeviceError> {
    let Some(dir) = std::env::var_os("SYNFIRE_KERNEL_SOURCES") else {
        return Ok(file.text(file.source, COMMON));
    };
    let dir = PathBuf::from(dir);
    let read = |name: &str, embedded: &'static str| {
        let path = dir.join(name);
        if !path.exists() {
            return Ok(std::borrow::Cow::Borrowed(embedded));
        }
        tracing::warn!(path = %path.display(), "Kernel source overridden by SYNFIRE_KERNEL_SOURCES.");
        std::fs::read_to_string(&path)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| DeviceError::Nvrtc {
                kernel: file.name,
                arch: String::new(),
                message: format!("cannot read {}: {e}", path.display()),
                log: String::new(),
            })
    };
    let source = read(file.name, file.source)?;
    let common = if source.lines().any(|l| l.trim_end() == COMMON_INCLUDE) {
        read("common.cuh", COMMON)?
    } else {
        std::borrow::Cow::Borrowed(COMMON)
    };
    Ok(file.text(&source, &common))
}

/// Extra NVRTC options from `$SYNFIRE_NVRTC_OPTIONS` (whitespace-separated, e.g.
/// `-maxrregcount=128`), for kernel tuning; they are part of the cache key.
fn extra_options() -> Vec<String> {
    std::env::var("SYNFIRE_NVRTC_OPTIONS")
        .map(|v| v.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The on-disk cache directory: `$SYNFIRE_KERNEL_CACHE`, else `$XDG_CACHE_HOME/synfire/kernels`,
/// else `$HOME/.cache/synfire/kernels`.
#[must_use]
pub(crate) fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SYNFIRE_KERNEL_CACHE") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("synfire/kernels"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/synfire/kernels"))
}

/// The CUBIN of `file` for a device of compute capability `cc` under driver `driver_version`.
/// `variant` 0 is the whole file; `variant` n > 0 compiles it with `-DSYNFIRE_ONLY_N=n`
/// (`episodes.cu`: only the kernels for episodes of n nodes), a program of its own.
///
/// NVRTC compiles straight to the device's `sm_XY`, so loading needs no JIT by the driver
/// (a PTX module of `episodes.cu` took the driver 34 s to load on an H100 the first time).
/// Images are cached per process and on disk ([`cache_dir`]), keyed by variant, source hash,
/// architecture and driver version (the source hashed is the one compiled, [`COMMON`] included
/// where the file includes it). For kernel development, `$SYNFIRE_KERNEL_SOURCES` (a
/// directory of `.cu` files, and `common.cuh`, replacing the embedded ones) and `$SYNFIRE_NVRTC_OPTIONS` (extra
/// NVRTC options) change what is compiled; both enter the hash.
///
/// # Errors
/// [`DeviceError::Nvrtc`] with NVRTC's log when the source does not compile.
pub(crate) fn image_for(
    file: &KernelFile,
    variant: u32,
    cc: (i32, i32),
    driver_version: i32,
) -> Result<Image, DeviceError> {
    let arch = format!("sm_{}{}", cc.0, cc.1);
    let key = (file.name, variant, arch.clone());
    let entry = process_cache()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(key)
        .or_default()
        .clone();
    let mut entry = entry
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(image) = entry.as_ref() {
        return Ok(image.clone());
    }
    let source = kernel_source(file)?;
    let extra = extra_options();
    let stem = file.name.trim_end_matches(".cu");
    let disk = cache_dir().map(|d| {
        d.join(format!(
            "{stem}-v{variant}-{arch}-drv{driver_version}-{:016x}.cubin",
            source_hash(&source, &extra)
        ))
    });
    let image = match disk.as_deref().and_then(|p| std::fs::read(p).ok()) {
        Some(bytes) if !bytes.is_empty() => {
            tracing::debug!(kernel = file.name, variant, "Loaded cached CUBIN.");
            Arc::new(bytes)
        }
        _ => {
            let started = Instant::now();
            let mut options = vec![
                format!("--gpu-architecture={arch}"),
                "--std=c++17".to_owned(),
            ];
            if variant > 0 {
                options.push(format!("-DSYNFIRE_ONLY_N={variant}"));
            }
            options.extend(extra);
            let bytes = compile_cubin(file.name, &source, &options).map_err(|(message, log)| {
                DeviceError::Nvrtc {
                    kernel: file.name,
                    arch: arch.clone(),
                    message,
                    log,
                }
            })?;
            tracing::debug!(
                kernel = file.name,
                variant,
                arch = %arch,
                seconds = started.elapsed().as_secs_f64(),
                "Compiled kernel with NVRTC."
            );
            if let Some(path) = &disk {
                let write = || -> std::io::Result<()> {
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    let tmp = path.with_extension(format!("cubin.tmp{}", std::process::id()));
                    std::fs::write(&tmp, &bytes)?;
                    std::fs::rename(&tmp, path)
                };
                if let Err(e) = write() {
                    tracing::debug!(path = %path.display(), error = %e, "Could not cache the CUBIN on disk.");
                }
            }
            Arc::new(bytes)
        }
    };
    *entry = Some(image.clone());
    Ok(image)
}

/// Compiles the images of `variants` of `file` that are not cached yet, in parallel (one
/// NVRTC program per thread; NVRTC is thread-safe across programs), so a first run on a fresh
/// host waits for the slowest variant rather than for all of them in turn.
///
/// # Errors
/// The first [`DeviceError::Nvrtc`] of any variant.
pub(crate) fn prepare(
    file: &KernelFile,
    variants: &[u32],
    cc: (i32, i32),
    driver_version: i32,
) -> Result<(), DeviceError> {
    let started = Instant::now();
    let results: Vec<Result<Image, DeviceError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = variants
            .iter()
            .map(|&v| scope.spawn(move || image_for(file, v, cc, driver_version)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(DeviceError::Nvrtc {
                        kernel: file.name,
                        arch: format!("sm_{}{}", cc.0, cc.1),
                        message: "the compiling thread panicked".into(),
                        log: String::new(),
                    })
                })
            })
            .collect()
    });
    tracing::debug!(
        kernel = file.name,
        variants = variants.len(),
        seconds = started.elapsed().as_secs_f64(),
        "Kernel images ready."
    );
    results.into_iter().try_for_each(|r| r.map(drop))
}

/// NVRTC: `source` (named `name`) with `options` to a CUBIN; on failure NVRTC's status and log.
fn compile_cubin(
    name: &str,
    source: &str,
    options: &[String],
) -> Result<Vec<u8>, (String, String)> {
    use cudarc::nvrtc::{result, sys};
    let src = std::ffi::CString::new(source).map_err(|e| (e.to_string(), String::new()))?;
    let name = std::ffi::CString::new(name).map_err(|e| (e.to_string(), String::new()))?;
    let prog =
        result::create_program(&src, Some(&name)).map_err(|e| (e.to_string(), String::new()))?;
    let log = |prog| {
        // SAFETY: `prog` was created above and is destroyed only at the end of this function.
        unsafe { result::get_program_log(prog) }
            .map(|raw| {
                let bytes: Vec<u8> = raw
                    .iter()
                    .map(|&c| c as u8)
                    .take_while(|&b| b != 0)
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .unwrap_or_default()
    };
    // SAFETY: `prog` is a live program from `create_program`; the buffer has the size NVRTC
    // reports for the CUBIN; `prog` is destroyed once, after its last use.
    let out = unsafe {
        match result::compile_program(prog, options) {
            Err(e) => Err((e.to_string(), log(prog))),
            Ok(()) => {
                let mut size = 0usize;
                let status = sys::nvrtcGetCUBINSize(prog, &raw mut size).result();
                match status {
                    Err(e) => Err((e.to_string(), log(prog))),
                    Ok(()) => {
                        let mut buf = vec![0u8; size];
                        sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast())
                            .result()
                            .map(|()| buf)
                            .map_err(|e| (e.to_string(), log(prog)))
                    }
                }
            }
        }
    };
    // SAFETY: as above; this is the program's only destruction.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

#[cfg(test)]
mod tests {
    use super::{ALL, COMMON, COMMON_INCLUDE, source_hash};

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
        let common = std::fs::read_to_string(dir.join("common.cuh")).unwrap();
        assert_eq!(common, COMMON);
    }

    /// The compiled text has the header in place of its include line, between `#line`
    /// directives that keep the file's own line numbers, and its hash (the disk cache's key)
    /// changes with the header's text.
    #[test]
    fn the_common_header_is_inlined_and_keyed() {
        let mut including = 0;
        for k in ALL {
            let text = k.text(k.source, COMMON);
            assert!(!text.contains(COMMON_INCLUDE), "{}", k.name);
            if !k.source.contains(COMMON_INCLUDE) {
                assert_eq!(text, k.source, "{}", k.name);
                continue;
            }
            including += 1;
            assert!(text.contains(COMMON), "{}", k.name);
            let at = k
                .source
                .lines()
                .position(|l| l.trim_end() == COMMON_INCLUDE)
                .unwrap();
            let marker = format!("#line {} \"{}\"", at + 2, k.name);
            let lines: Vec<&str> = text.lines().collect();
            let m = lines.iter().position(|l| *l == marker).unwrap();
            let rest: Vec<&str> = k.source.lines().skip(at + 1).collect();
            assert_eq!(lines[m + 1..], rest[..], "{}", k.name);
            let other = k.text(k.source, &format!("{COMMON}// changed\n"));
            assert_ne!(
                source_hash(&text, &[]),
                source_hash(&other, &[]),
                "{}",
                k.name
            );
        }
        assert!(including >= 5, "{including} files include common.cuh");
    }
}
