//! Open Ephys binary recordings (`synfire::ingest::openephys_binary::read_openephys_binary`):
//! the input layout is `synfire_fuzz::OebinInput` (options, then `structure.oebin` and the
//! spike `.npy` arrays of two GUI 0.6 electrode folders and one GUI 0.5 spike group as
//! length-prefixed files), written to a scratch recording folder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use synfire::ingest::openephys_binary::read_openephys_binary;
use synfire_fuzz::{OebinInput, Scratch, check_stream};

fuzz_target!(|data: &[u8]| {
    let Some(input) = OebinInput::parse(data) else {
        return;
    };
    let dir = Scratch::folder(&input.files);
    let read = read_openephys_binary(&dir.path, &input.options);
    synfire_fuzz::debug(|| synfire_fuzz::outcome(&read));
    let Ok(rec) = read else {
        return;
    };
    check_stream(&rec.stream);
    let kept: usize = rec.units.iter().filter(|u| u.kept).map(|u| u.spikes).sum();
    let dropped: usize = rec.units.iter().filter(|u| !u.kept).map(|u| u.spikes).sum();
    assert_eq!(kept, rec.stream.len());
    assert_eq!(dropped, rec.dropped_spikes);
    assert!(rec.units.iter().all(|u| u.sorted_id >= 0));
});
