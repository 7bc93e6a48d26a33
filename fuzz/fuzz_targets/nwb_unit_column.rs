//! Columns of NWB units tables (`synfire::ingest::nwb::unit_column`): `location` and `group`
//! (strings in the fixtures), `electrode_group` (object references in the fixtures: refused),
//! `depth` (floats) and `shank` (integers in the seeds). The input is the HDF5 file, mutated
//! by `synfire_fuzz::hdf5_mutate`.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use synfire::ingest::nwb::unit_column;
use synfire_fuzz::{Scratch, hdf5_known_hang, hdf5_mutate};

fuzz_target!(|data: &[u8]| {
    if hdf5_known_hang(data) {
        return; // an upstream HDF5 hang, see hdf5_known_hang
    }
    let file = Scratch::file(data, "nwb");
    for column in ["location", "group", "electrode_group", "depth", "shank"] {
        let values = unit_column(&file.path, column);
        synfire_fuzz::debug(|| format!("{column}: {}", synfire_fuzz::outcome(&values)));
    }
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    hdf5_mutate(data, size, max_size, seed)
});
