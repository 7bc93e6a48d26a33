//! NWB units tables (`synfire::ingest::nwb::read_units`): the input is the HDF5 file, mutated
//! by `synfire_fuzz::hdf5_mutate` (half the time in HDF5 metadata blocks). With
//! `RequireSorted` first, and `SortIfNeeded` when a unit is unsorted.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use synfire::event::Ordering;
use synfire::ingest::IngestError;
use synfire::ingest::nwb::read_units;
use synfire_fuzz::{Scratch, check_stream, hdf5_known_hang, hdf5_mutate};

fuzz_target!(|data: &[u8]| {
    if hdf5_known_hang(data) {
        return; // an upstream HDF5 hang, see hdf5_known_hang
    }
    let file = Scratch::file(data, "nwb");
    let units = match read_units(&file.path, Ordering::RequireSorted) {
        Err(IngestError::UnsortedUnit { .. }) => read_units(&file.path, Ordering::SortIfNeeded),
        other => other,
    };
    synfire_fuzz::debug(|| synfire_fuzz::outcome(&units));
    let Ok(units) = units else {
        return;
    };
    check_stream(&units.stream);
    assert_eq!(units.unit_ids.len(), units.stream.alphabet().len());
    assert_eq!(units.spikes_per_unit.len(), units.unit_ids.len());
    assert_eq!(
        units.spikes_per_unit.iter().sum::<u64>(),
        units.stream.len() as u64
    );
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    hdf5_mutate(data, size, max_size, seed)
});
