//! CSV spike files (`synfire::ingest::csv::parse_csv_columns`), in memory: the input layout
//! is `synfire_fuzz::CsvInput` (ordering and column names, then the text). An accepted input
//! must give a valid stream, and `write_csv` of it (when it can write the labels) must read
//! back to the same events.
#![no_main]

use libfuzzer_sys::fuzz_target;
use synfire::event::Ordering;
use synfire::ingest::csv::{parse_csv, parse_csv_columns, write_csv};
use synfire_fuzz::{CsvInput, check_stream, labelled_events};

fuzz_target!(|data: &[u8]| {
    let Some(input) = CsvInput::parse(data) else {
        return;
    };
    let parsed = parse_csv_columns(input.text, "fuzz.csv", input.ordering, &input.columns);
    synfire_fuzz::debug(|| synfire_fuzz::outcome(&parsed));
    let Ok(stream) = parsed else {
        return;
    };
    check_stream(&stream);
    let mut written = Vec::new();
    if write_csv(&mut written, &stream).is_err() {
        return; // a label that cannot be written back (documented)
    }
    let back = parse_csv(&written[..], "written.csv", Ordering::SortIfNeeded)
        .unwrap_or_else(|e| panic!("write_csv's output is refused: {e}"));
    assert_eq!(labelled_events(&stream), labelled_events(&back));
});
