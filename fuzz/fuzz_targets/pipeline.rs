//! The pipeline loader (`synfire::PipelineConfig::parse`): TOML text, both validation
//! phases. Run from the repository root (as `tools/fuzz.sh` does) so that the seeds' fixture
//! paths (archives, templates, training sets) exist and phase 2 reads them.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use synfire::PipelineConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = PipelineConfig::parse(text, Path::new("fuzz.toml"));
    synfire_fuzz::debug(|| synfire_fuzz::outcome(&parsed));
    if let Err(e) = parsed {
        assert!(!e.errors.is_empty(), "an error without a message");
        let _ = e.to_string();
    }
});
