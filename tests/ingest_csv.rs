//! tdminer CSV reader/writer: bit-exact round trips, header handling, and every error case.

use std::path::Path;

use proptest::prelude::*;
use synfire::event::{Alphabet, EventStream, EventType, Ordering};
use synfire::ingest::csv::{parse_csv, read_csv, write_csv};
use synfire::ingest::{IngestError, read_spikes};
use tempfile::TempDir;

fn parse(text: &str, ordering: Ordering) -> Result<EventStream, IngestError> {
    parse_csv(text.as_bytes(), "input.csv", ordering)
}

/// `(label, time)` pairs of a stream, in order.
fn events(s: &EventStream) -> Vec<(String, f64)> {
    s.iter()
        .map(|(t, ty)| (s.alphabet().label(ty).to_owned(), t))
        .collect()
}

/// The events by (time, label): what two readers of the same spikes agree on (equal times
/// are ordered by type id, and ids depend on the reader: CSV first appearance, NWB
/// `/units/id`).
fn events_by_label(s: &EventStream) -> Vec<(String, f64)> {
    let mut e = events(s);
    e.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    e
}

/// Parses `text`, expects an [`IngestError::Csv`] on `line`, and returns its message.
fn csv_error(text: &str, ordering: Ordering, line: usize) -> String {
    let err = parse(text, ordering).expect_err("malformed CSV must be refused");
    let msg = err.to_string();
    match err {
        IngestError::Csv { line: got, .. } => assert_eq!(got, line, "{msg}"),
        other => panic!("expected a Csv error, got {other:?}"),
    }
    assert!(
        msg.starts_with(&format!("input.csv: line {line}: ")),
        "{msg}"
    );
    msg
}

fn time_strategy() -> impl Strategy<Value = f64> {
    prop_oneof![
        0.0f64..=1e4,
        // Full-mantissa values spread over many magnitudes, folded into [0, 1e4].
        prop::num::f64::NORMAL.prop_map(|x| x.abs() % 1e4),
        prop::num::f64::SUBNORMAL.prop_map(f64::abs),
        Just(0.0),
        Just(1e4),
        // Multiples of a 30 kHz clock tick, the common case for sorted spikes.
        (0u32..300_000_000).prop_map(|k| f64::from(k) / 30_000.0),
    ]
}

fn label_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9_.:-]{1,8}",
        (0u32..1000).prop_map(|n| n.to_string()),
        // Interior spaces, '#' and non-ASCII are fine as long as not leading/trailing.
        "[a-z]{1,3}[ #é][a-z]{1,3}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn write_then_parse_is_bit_exact(
        raw in prop::collection::vec((label_strategy(), time_strategy()), 1..200),
    ) {
        let mut raw = raw;
        raw.sort_by(|a, b| a.1.total_cmp(&b.1));
        let mut alphabet = Alphabet::new();
        let types: Vec<EventType> = raw.iter().map(|(l, _)| alphabet.intern(l)).collect();
        let times: Vec<f64> = raw.iter().map(|(_, t)| *t).collect();
        let stream = EventStream::new(times, types, alphabet, Ordering::RequireSorted).unwrap();

        let mut out = Vec::new();
        write_csv(&mut out, &stream).unwrap();
        let back = parse_csv(out.as_slice(), "roundtrip.csv", Ordering::RequireSorted).unwrap();

        let bits = |s: &EventStream| s.times().iter().map(|t| t.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&back), bits(&stream));
        raw.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        prop_assert_eq!(events_by_label(&back).into_iter().map(|e| e.0).collect::<Vec<_>>(),
                        raw.iter().map(|e| e.0.clone()).collect::<Vec<_>>());
        prop_assert_eq!(events(&back), events(&stream));
        // Labels are interned in order of first appearance, as written.
        prop_assert_eq!(back.alphabet(), stream.alphabet());
    }
}

#[test]
fn parses_labels_times_comments_blank_lines_and_crlf() {
    let text = "# recorded 2024\n\nA,0.5\r\n  B , 0.75 \n# mid comment\n   \nA,1e0\nunit 7,2\n";
    let s = parse(text, Ordering::RequireSorted).unwrap();
    assert_eq!(
        events(&s),
        vec![
            ("A".into(), 0.5),
            ("B".into(), 0.75),
            ("A".into(), 1.0),
            ("unit 7".into(), 2.0)
        ]
    );
    assert_eq!(
        s.alphabet().labels(),
        &["A", "B", "unit 7"].map(String::from)
    );
}

#[test]
fn a_header_line_is_skipped_only_first() {
    for text in [
        "label,time\nA,0.5\nB,1\n",
        "# comment first\n\nneuron , time_s\nA,0.5\nB,1\n",
        "A,time\nA,0.5\nB,1\n",
    ] {
        let s = parse(text, Ordering::RequireSorted).unwrap();
        assert_eq!(
            events(&s),
            vec![("A".into(), 0.5), ("B".into(), 1.0)],
            "{text:?}"
        );
    }
    // A non-number on a later line is an error, not a header.
    let msg = csv_error("A,0.5\nlabel,time\n", Ordering::RequireSorted, 2);
    assert!(msg.contains("`time` is not a number"), "{msg}");
    // The first line is a data line when its time parses.
    let s = parse("7,0\n8,1\n", Ordering::RequireSorted).unwrap();
    assert_eq!(s.alphabet().labels(), &["7", "8"].map(String::from));
}

#[test]
fn wrong_field_count_names_the_line() {
    let msg = csv_error("A,0.1\nB,0.2,extra\n", Ordering::RequireSorted, 2);
    assert!(
        msg.contains("expected 2") && msg.contains("found 3"),
        "{msg}"
    );
    let msg = csv_error("A,0.1\n\n# c\nB\n", Ordering::RequireSorted, 4);
    assert!(msg.contains("found 1"), "{msg}");
    // Even a would-be header must have two fields.
    csv_error("label;time\nA,0.1\n", Ordering::RequireSorted, 1);
}

#[test]
fn empty_label_names_the_line() {
    let msg = csv_error("A,0.1\n ,0.2\n", Ordering::RequireSorted, 2);
    assert!(msg.contains("label") && msg.contains("empty"), "{msg}");
    csv_error(",0.2\n", Ordering::RequireSorted, 1);
}

#[test]
fn unparsable_time_names_the_line() {
    let msg = csv_error("A,0.1\nB,0.2s\n", Ordering::RequireSorted, 2);
    assert!(msg.contains("`0.2s` is not a number"), "{msg}");
    csv_error("A,0.1\nB,\n", Ordering::RequireSorted, 2);
    csv_error("A,0.1\nB,0x10\n", Ordering::RequireSorted, 2);
}

#[test]
fn non_finite_and_negative_times_name_the_line() {
    for (bad, what) in [
        ("NaN", "not finite"),
        ("inf", "not finite"),
        ("-inf", "not finite"),
    ] {
        let msg = csv_error(&format!("A,0.1\n\nB,{bad}\n"), Ordering::SortIfNeeded, 3);
        assert!(msg.contains(what), "{msg}");
    }
    let msg = csv_error("A,0.1\nB,-0.25\n", Ordering::SortIfNeeded, 2);
    assert!(msg.contains("negative") && msg.contains("-0.25"), "{msg}");
    // Even on the first line (a parsable time is never a header).
    csv_error("A,nan\n", Ordering::SortIfNeeded, 1);
}

#[test]
fn unsorted_input_is_refused_or_sorted() {
    let text = "A,0.5\nB,0.7\n# c\nC,0.6\nA,0.6\n";
    let msg = csv_error(text, Ordering::RequireSorted, 4);
    assert!(
        msg.contains("0.6") && msg.contains("0.7") && msg.contains("line 2"),
        "{msg}"
    );
    assert!(msg.contains("--sort"), "{msg}");

    let s = parse(text, Ordering::SortIfNeeded).unwrap();
    // Equal times in type order (A, the first label seen, before C).
    assert_eq!(
        events(&s),
        vec![
            ("A".into(), 0.5),
            ("A".into(), 0.6),
            ("C".into(), 0.6),
            ("B".into(), 0.7)
        ]
    );
    // Equal times are sorted already.
    assert!(parse("A,1\nB,1\n", Ordering::RequireSorted).is_ok());
}

#[test]
fn input_without_events_is_refused() {
    for text in [
        "",
        "\n\n",
        "# only a comment\n",
        "label,time\n",
        "label,time\n# c\n\n",
    ] {
        let err = parse(text, Ordering::RequireSorted).unwrap_err();
        assert!(
            matches!(err, IngestError::NoEvents { .. }),
            "{text:?}: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with("input.csv: ") && msg.contains("no events"),
            "{msg}"
        );
    }
}

#[test]
fn invalid_utf8_names_the_line() {
    let bytes = b"A,0.1\nB\xff,0.2\n";
    let err = parse_csv(&bytes[..], "bin.csv", Ordering::RequireSorted).unwrap_err();
    assert!(matches!(err, IngestError::Csv { line: 2, .. }), "{err:?}");
    assert!(err.to_string().starts_with("bin.csv: line 2: "), "{err}");
}

#[test]
fn times_parse_with_the_f64_parser_not_f32() {
    // 100.000001 and 100.000002 are distinct f64 values but round to the same f32
    // (the f32 spacing near 100 is 7.6e-6).
    let s = parse("A,100.000001\nB,100.000002\n", Ordering::RequireSorted).unwrap();
    assert_eq!(s.times(), &[100.000001, 100.000002]);
    assert_ne!(s.times()[0], s.times()[1]);
    assert_eq!(s.times()[0] as f32, s.times()[1] as f32);
}

#[test]
fn read_csv_and_read_spikes_name_the_file() {
    let dir = TempDir::new().unwrap();
    let good = dir.path().join("good.txt");
    std::fs::write(&good, "x,1\ny,2\n").unwrap();
    let a = read_csv(&good, Ordering::RequireSorted).unwrap();
    let b = read_spikes(&good, Ordering::RequireSorted).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 2);

    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "x,1\ny,oops\n").unwrap();
    let msg = read_spikes(&bad, Ordering::RequireSorted)
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        format!(
            "{}: line 2: time `oops` is not a number (expected seconds, e.g. `0.0125`)",
            bad.display()
        )
    );

    let absent = dir.path().join("absent.csv");
    let err = read_csv(&absent, Ordering::RequireSorted).unwrap_err();
    assert!(matches!(err, IngestError::Io { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&absent.display().to_string()),
        "{err}"
    );

    let other = Path::new("spikes.mat");
    let msg = read_spikes(other, Ordering::RequireSorted)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("spikes.mat") && msg.contains(".csv") && msg.contains(".nwb"),
        "{msg}"
    );
}

#[test]
fn write_csv_output_format_and_bad_labels() {
    let alphabet = Alphabet::from_labels(["A", "n 2"]).unwrap();
    let s = EventStream::new(
        vec![0.1, 0.1 + 0.2, 1e-7, 3.0],
        [0, 1, 0, 1].map(EventType).to_vec(),
        alphabet,
        Ordering::SortIfNeeded,
    )
    .unwrap();
    let mut out = Vec::new();
    write_csv(&mut out, &s).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "A,0.0000001\nA,0.1\nn 2,0.30000000000000004\nn 2,3\n"
    );

    for bad in ["a,b", " pad", "#x", "two\nlines"] {
        let alphabet = Alphabet::from_labels([bad]).unwrap();
        let s = EventStream::new(
            vec![1.0],
            vec![EventType(0)],
            alphabet,
            Ordering::RequireSorted,
        )
        .unwrap();
        let err = write_csv(Vec::new(), &s).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{bad:?}");
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
    }
}

#[test]
fn nwb_fixture_survives_csv_round_trip() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/spikes/A8604-211122/A8604-211122.nwb");
    let stream = read_spikes(&path, Ordering::RequireSorted).unwrap();
    let mut out = Vec::new();
    write_csv(&mut out, &stream).unwrap();
    let back = parse_csv(out.as_slice(), "fixture.csv", Ordering::RequireSorted).unwrap();
    assert_eq!(events_by_label(&back), events_by_label(&stream));
    let bits = |s: &EventStream| s.times().iter().map(|t| t.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&back), bits(&stream));
}

#[test]
fn columns_are_found_by_header_name_or_given() {
    // The case: `spike_time_s,cluster_id`, time first.
    let text = "spike_time_s,cluster_id\n0.5,7\n0.75,3\n1.0,7\n";
    let s = parse(text, Ordering::RequireSorted).unwrap();
    assert_eq!(
        events(&s),
        [("7".into(), 0.5), ("3".into(), 0.75), ("7".into(), 1.0)]
    );
    // Extra columns are ignored; named columns are case-insensitive.
    let text = "Amplitude,Unit,Depth,Time\n3.1,a,100,0.1\n2.0,b,200,0.2\n";
    let s = parse(text, Ordering::RequireSorted).unwrap();
    assert_eq!(events(&s), [("a".into(), 0.1), ("b".into(), 0.2)]);
    // Given names win over the guesses.
    let text = "t,t_alt,who\n5.0,0.1,x\n6.0,0.2,y\n";
    let columns = synfire::ingest::csv::Columns {
        time: Some("t_alt".into()),
        unit: Some("who".into()),
    };
    let s = synfire::ingest::csv::parse_csv_columns(
        text.as_bytes(),
        "input.csv",
        Ordering::RequireSorted,
        &columns,
    )
    .unwrap();
    assert_eq!(events(&s), [("x".into(), 0.1), ("y".into(), 0.2)]);
    // A named column that is absent, and a header that names nothing.
    let missing = synfire::ingest::csv::Columns {
        time: Some("seconds_since".into()),
        unit: None,
    };
    let err = synfire::ingest::csv::parse_csv_columns(
        text.as_bytes(),
        "input.csv",
        Ordering::RequireSorted,
        &missing,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("line 1") && err.contains("seconds_since"),
        "{err}"
    );
    let m = csv_error("foo,bar,baz\n1,2,3\n", Ordering::RequireSorted, 1);
    assert!(
        m.contains("--unit-column") && m.contains("--time-column"),
        "{m}"
    );
    // Rows with fewer fields than the header.
    let m = csv_error(
        "unit,time,depth\na,0.1,3\nb,0.2\n",
        Ordering::RequireSorted,
        3,
    );
    assert!(m.contains("3 comma-separated fields"), "{m}");
}

#[test]
fn swapped_columns_are_an_error_not_a_silent_success() {
    // Spike times in the label column: as many labels as events.
    let mut text = String::from("time_s_of_spike,unit\n");
    let mut labels_as_times = String::new();
    for i in 0..400 {
        let t = f64::from(i) * 0.01;
        let unit = i % 5;
        text.push_str(&format!("{t},{unit}\n"));
        labels_as_times.push_str(&format!("{t},{unit}\n"));
    }
    // A header the reader cannot place: tdminer reading (label, time) of `t,unit` rows.
    let err = parse(&labels_as_times, Ordering::SortIfNeeded).unwrap_err();
    assert!(matches!(err, IngestError::SwappedColumns { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("400 distinct unit labels") || msg.contains("distinct integer"),
        "{msg}"
    );
    assert!(msg.contains("--unit-column"), "{msg}");
    // The same file read with its columns named is fine.
    let columns = synfire::ingest::csv::Columns {
        time: Some("time_s_of_spike".into()),
        unit: Some("unit".into()),
    };
    let s = synfire::ingest::csv::parse_csv_columns(
        text.as_bytes(),
        "input.csv",
        Ordering::RequireSorted,
        &columns,
    )
    .unwrap();
    assert_eq!(s.len(), 400);
    assert_eq!(s.alphabet().len(), 5);
    // One of two columns named is enough.
    let s = parse(&text, Ordering::RequireSorted).unwrap();
    assert_eq!(s.alphabet().len(), 5);
}

#[test]
fn long_lines_are_cut_in_errors() {
    let long = format!("a,{}\n", "9".repeat(8192) + "x");
    let err = parse(&long, Ordering::RequireSorted)
        .unwrap_err()
        .to_string();
    assert!(err.len() < 400, "{} bytes: {}", err.len(), &err[..200]);
}
