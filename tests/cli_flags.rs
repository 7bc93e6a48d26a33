//! Flags declared once (`src/cli/args.rs`) and flattened into several commands: each command's
//! `--help` lists them with the same text and the same default, so that a copy declared again
//! in one command, which could drift from the others, fails here.

mod common;
use common::synfire;
use std::collections::BTreeMap;

/// The flags of `SignificanceArgs` (`mine`, `batch`).
const SIGNIFICANCE: [&str; 8] = [
    "--surrogates",
    "--n-surrogates",
    "--sample-split",
    "--alpha",
    "--correction",
    "--seed",
    "--test-top",
    "--significant-only",
];

/// The flags of `ReaderArgs` (every command that reads a spike recording).
const READER: [&str; 8] = [
    "--sort",
    "--units",
    "--unit-key",
    "--time-column",
    "--unit-column",
    "--unit-label",
    "--epochs",
    "--epochs-table",
];

/// One flag as `--help` lists it: its text (whitespace collapsed, no trailing period, no
/// `[default: …]`) and its default.
#[derive(Debug, PartialEq)]
struct Listed {
    text: String,
    default: Option<String>,
}

/// Every `--flag` of `synfire <command> --help`, by name. Reads both of clap's layouts: the
/// text beside the flag (short help) or on the lines below it (long help).
fn help(command: &[&str]) -> BTreeMap<String, Listed> {
    let mut args: Vec<&str> = command.to_vec();
    args.push("--help");
    let out = synfire(&args);
    assert!(out.status.success(), "synfire {command:?} --help failed");
    let text = String::from_utf8(out.stdout).expect("UTF-8 help");
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        // A flag's line: `-o, --output <PATH>  text` or `--flag <VALUE>` (its text below).
        let flag_start = if (2..=6).contains(&indent) && trimmed.starts_with('-') {
            let spec = trimmed.split("  ").next().unwrap_or_default();
            spec.split([',', ' '])
                .find(|w| w.starts_with("--"))
                .map(|name| (name.to_owned(), trimmed[spec.len()..].to_owned()))
        } else {
            None
        };
        match flag_start {
            Some((name, rest)) => entries.push((name, rest)),
            None => {
                if let Some((_, body)) = entries.last_mut() {
                    body.push(' ');
                    body.push_str(trimmed);
                }
            }
        }
    }
    entries
        .into_iter()
        .map(|(name, body)| {
            let mut body = body.split_whitespace().collect::<Vec<_>>().join(" ");
            let mut default = None;
            if let Some(at) = body.find("[default: ") {
                let end = at + body[at..].find(']').expect("a closed `[default: …]`");
                default = Some(body[at + "[default: ".len()..end].to_owned());
                body.replace_range(at..=end, "");
            }
            let text = body.trim().trim_end_matches('.').trim().to_owned();
            (name, Listed { text, default })
        })
        .collect()
}

/// `flags` as `command` lists them, each one required.
fn listed<'a>(
    all: &'a BTreeMap<String, Listed>,
    command: &[&str],
    flags: &[&str],
) -> Vec<(&'a str, &'a Listed)> {
    flags
        .iter()
        .map(|f| {
            let (name, l) = all
                .get_key_value(*f)
                .unwrap_or_else(|| panic!("`synfire {}` does not list `{f}`", command.join(" ")));
            (name.as_str(), l)
        })
        .collect()
}

#[test]
fn every_command_that_tests_significance_lists_its_flags_alike() {
    let mine = help(&["mine"]);
    let reference = listed(&mine, &["mine"], &SIGNIFICANCE);
    for (flag, l) in &reference {
        assert!(!l.text.is_empty(), "`synfire mine {flag}` has no help text");
    }
    // `batch` flattens the same `SignificanceArgs`: the same text and default for each.
    let batch = help(&["batch"]);
    for ((flag, expect), (_, got)) in
        reference
            .iter()
            .zip(listed(&batch, &["batch"], &SIGNIFICANCE))
    {
        assert_eq!(*expect, got, "`synfire batch {flag}` differs from `mine`'s");
    }
    // The benchmarks flatten `SurrogateArgs` (and `bench significance` `SignificantOnlyArg`)
    // with the documented variation `SurrogateArgs::bench_defaults`: a method by default and
    // their own number of surrogates; the same text.
    for (command, flags, n_surrogates) in [
        (
            &["bench", "power"][..],
            &["--surrogates", "--n-surrogates", "--sample-split"][..],
            "99",
        ),
        (
            &["bench", "significance"],
            &[
                "--surrogates",
                "--n-surrogates",
                "--sample-split",
                "--significant-only",
            ],
            "1000",
        ),
        // `bench session` flattens the whole `SignificanceArgs`.
        (&["bench", "session"], &SIGNIFICANCE[..], "1000"),
    ] {
        let bench = help(command);
        for (flag, got) in listed(&bench, command, flags) {
            let expect = &mine[flag];
            assert_eq!(
                expect.text,
                got.text,
                "`synfire {} {flag}`'s help differs from `mine`'s",
                command.join(" ")
            );
            let default = match flag {
                "--surrogates" => Some("dither:0.015"),
                "--n-surrogates" => Some(n_surrogates),
                _ => expect.default.as_deref(),
            };
            assert_eq!(
                got.default.as_deref(),
                default,
                "`synfire {} {flag}`'s default",
                command.join(" ")
            );
        }
    }
}

#[test]
fn every_command_that_reads_a_recording_lists_the_reader_flags_alike() {
    let mine = help(&["mine"]);
    let reference = listed(&mine, &["mine"], &READER);
    for command in [&["batch"][..], &["count"], &["plot", "raster"]] {
        let other = help(command);
        for ((flag, expect), (_, got)) in reference.iter().zip(listed(&other, command, &READER)) {
            assert_eq!(
                *expect,
                got,
                "`synfire {} {flag}` differs from `mine`'s",
                command.join(" ")
            );
        }
    }
    // `count` and `plot raster` read a phy folder's rate from the same `--sample-rate-hz`.
    assert_eq!(
        help(&["count"])["--sample-rate-hz"],
        help(&["plot", "raster"])["--sample-rate-hz"]
    );
}
