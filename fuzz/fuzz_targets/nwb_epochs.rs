//! NWB `TimeIntervals` tables (`synfire::ingest::nwb::epochs`): `/intervals/epochs` by the
//! tags `wake`/`sleep` (the fixtures' and seeds' tags) and by `*`. The input is the HDF5 file,
//! mutated by `synfire_fuzz::hdf5_mutate`. Accepted epochs must be sorted, disjoint intervals.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use synfire::ingest::nwb::epochs;
use synfire_fuzz::{Scratch, hdf5_known_hang, hdf5_mutate};

fuzz_target!(|data: &[u8]| {
    if hdf5_known_hang(data) {
        return; // an upstream HDF5 hang, see hdf5_known_hang
    }
    let file = Scratch::file(data, "nwb");
    let tagged = ["wake".to_owned(), "sleep".to_owned()];
    let every = ["*".to_owned()];
    for tags in [&tagged[..], &every[..]] {
        let read = epochs(&file.path, "epochs", tags);
        synfire_fuzz::debug(|| format!("{tags:?}: {}", synfire_fuzz::outcome(&read)));
        if let Ok(e) = read {
            assert!(!e.is_empty());
            assert!(
                e.iter()
                    .all(|(a, b)| a.is_finite() && b.is_finite() && a <= b)
            );
            assert!(e.windows(2).all(|w| w[0].1 < w[1].0), "not disjoint: {e:?}");
        }
    }
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    hdf5_mutate(data, size, max_size, seed)
});
