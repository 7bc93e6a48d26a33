//! NWB `TimeSeries` (`synfire::ingest::nwb::read_timeseries`): the fixture's
//! `/acquisition/CompassDirection/rz` (timestamps) and the seeds' `/acquisition/regular`
//! (`starting_time` with `rate`, 2-D data). The input is the HDF5 file, mutated by
//! `synfire_fuzz::hdf5_mutate`. An accepted series must have one timestamp per sample and
//! whole samples, and `frame` over all of it must work.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use synfire::ingest::nwb::{SeriesTime, read_timeseries};
use synfire_fuzz::{Scratch, hdf5_known_hang, hdf5_mutate};

fuzz_target!(|data: &[u8]| {
    if hdf5_known_hang(data) {
        return; // an upstream HDF5 hang, see hdf5_known_hang
    }
    let file = Scratch::file(data, "nwb");
    for series in ["/acquisition/CompassDirection/rz", "/acquisition/regular"] {
        let read = read_timeseries(&file.path, series);
        synfire_fuzz::debug(|| format!("{series}: {}", synfire_fuzz::outcome(&read)));
        let Ok(ts) = read else {
            continue;
        };
        assert!(ts.channels > 0);
        assert_eq!(ts.values.len(), ts.samples() * ts.channels);
        assert!(ts.samples() > 0);
        match &ts.time {
            SeriesTime::Timestamps(t) => {
                assert_eq!(t.len(), ts.samples());
                assert!(t.iter().all(|x| x.is_finite() && *x >= 0.0));
                assert!(t.windows(2).all(|w| w[0] <= w[1]));
            }
            SeriesTime::Regular { start_s, rate_hz } => {
                assert!(start_s.is_finite() && *start_s >= 0.0);
                assert!(rate_hz.is_finite() && *rate_hz > 0.0);
            }
        }
        let frame = ts.frame(0..ts.samples());
        assert_eq!(frame.values.len(), ts.values.len());
    }
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    hdf5_mutate(data, size, max_size, seed)
});
