//! `synfire batch`: the binary checks the options and the sessions file before any work,
//! names a missing interpreter, package or Ray with how to install it, and hands the options
//! to `PYTHON -m synfire.cluster batch` as the JSON `synfire.mine` passes the extension. Fake
//! interpreters (shell scripts) stand in for Python here; the run on a real Ray cluster is
//! `python/tests/test_cluster.py`.

mod common;
use common::synfire;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

/// A fake interpreter: answers the probe (`-c …`) with `probe_says` on standard output, and
/// for the run writes its arguments, one per line, to `args.txt` beside it and exits with
/// `exit`.
fn fake_python(dir: &Path, probe_says: &str, exit: i32) -> PathBuf {
    let path = dir.join("python");
    let log = dir.join("args.txt");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nif [ \"$1\" = \"-c\" ]; then echo '{probe_says}'; exit 0; fi\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{}'\nexit {exit}\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn sessions_file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("sessions.txt");
    std::fs::write(&path, text).unwrap();
    path
}

fn batch(sessions: &Path, python: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "batch".to_owned(),
        sessions.display().to_string(),
        "--python".to_owned(),
        python.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    synfire(&args)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_options_are_named_before_python_runs() {
    let dir = TempDir::new().unwrap();
    let python = fake_python(dir.path(), "", 0);
    let sessions = sessions_file(dir.path(), "a.nwb\n");
    for (extra, expect) in [
        (vec!["--intervals", "(0.5,0.1]"], "--intervals"),
        (
            vec!["--intervals", "(0,0.005]", "--max-level", "0"],
            "--max-level",
        ),
        (
            vec!["--intervals", "(0,0.005]", "--surrogates", "wobble:1"],
            "--surrogates",
        ),
        (
            vec!["--intervals", "(0,0.005]", "--surrogates", "trial-shift:1"],
            "trial-shift",
        ),
        (
            vec![
                "--intervals",
                "(0,0.005]",
                "--surrogates",
                "dither",
                "--correction",
                "max-z",
            ],
            "--correction",
        ),
        (
            vec![
                "--intervals",
                "(0,0.005]",
                "--surrogates",
                "dither",
                "--surrogate-batch",
                "0",
            ],
            "--surrogate-batch",
        ),
        (
            vec!["--intervals", "(0,0.005]", "--unit-key", "serial"],
            "--unit-key",
        ),
        (
            vec!["--intervals", "(0,0.005]", "--workers", "0"],
            "--workers",
        ),
        (
            vec![
                "--intervals",
                "(0,0.005]",
                "--surrogates",
                "dither",
                "--sample-split",
                "1",
            ],
            "`--sample-split`: the fraction must be strictly between 0 and 1",
        ),
        (
            vec![
                "--intervals",
                "(0,0.005]",
                "--surrogates",
                "dither",
                "--correction",
                "holm",
                "--sample-split",
                "0.5",
            ],
            "`--sample-split`: works with the `guided` and `max-t` corrections only",
        ),
    ] {
        let out = batch(&sessions, &python, &extra);
        assert!(!out.status.success(), "{extra:?} accepted");
        assert!(stderr(&out).contains(expect), "{extra:?}: {}", stderr(&out));
        assert!(
            !dir.path().join("args.txt").exists(),
            "{extra:?}: Python ran"
        );
    }
}

#[test]
fn a_missing_or_empty_sessions_file_is_named() {
    let dir = TempDir::new().unwrap();
    let python = fake_python(dir.path(), "", 0);
    let out = batch(
        &dir.path().join("none.txt"),
        &python,
        &["--intervals", "(0,0.005]"],
    );
    assert!(stderr(&out).contains("none.txt"), "{}", stderr(&out));
    let empty = sessions_file(dir.path(), "# nothing yet\n\n");
    let out = batch(&empty, &python, &["--intervals", "(0,0.005]"]);
    assert!(
        stderr(&out).contains("lists no session"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("args.txt").exists());
}

#[test]
fn a_missing_interpreter_package_or_ray_is_named_with_how_to_install_it() {
    let dir = TempDir::new().unwrap();
    let sessions = sessions_file(dir.path(), "a.nwb\n");
    let out = batch(
        &sessions,
        &dir.path().join("no-such-python"),
        &["--intervals", "(0,0.005]"],
    );
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(text.contains("no-such-python` was not found"), "{text}");
    assert!(
        text.contains("pip install 'synfire-mining[cluster]'"),
        "{text}"
    );
    let python = fake_python(dir.path(), "synfire ray", 0);
    let text = stderr(&batch(&sessions, &python, &["--intervals", "(0,0.005]"]));
    assert!(
        text.contains("the Python package `synfire` is not installed"),
        "{text}"
    );
    assert!(text.contains("-m pip install synfire-mining"), "{text}");
    assert!(text.contains("Ray is not installed"), "{text}");
    assert!(text.contains("-m pip install 'ray>=2.9,<3'"), "{text}");
    // Another project's `synfire` (the package index's distribution of that name).
    let python = fake_python(dir.path(), "synfire._synfire", 0);
    let text = stderr(&batch(&sessions, &python, &["--intervals", "(0,0.005]"]));
    assert!(text.contains("is not this project's"), "{text}");
    assert!(text.contains("-m pip uninstall synfire"), "{text}");
    let python = fake_python(dir.path(), "synfire.cluster", 0);
    let text = stderr(&batch(&sessions, &python, &["--intervals", "(0,0.005]"]));
    assert!(text.contains("has no `synfire.cluster`"), "{text}");
    assert!(!dir.path().join("args.txt").exists());
}

#[test]
fn the_options_reach_python_as_the_json_synfire_mine_passes() {
    let dir = TempDir::new().unwrap();
    let python = fake_python(dir.path(), "", 0);
    let sessions = sessions_file(dir.path(), "a.nwb\n# skipped\ns3://bucket/b.nwb\n");
    let out = batch(
        &sessions,
        &python,
        &[
            "--intervals",
            "(0,0.005],[0,0.001]",
            "--min-count",
            "200",
            "--max-level",
            "3",
            "--device",
            "cpu",
            "--surrogates",
            "dither:0.015",
            "--n-surrogates",
            "9",
            "--seed",
            "3",
            "--surrogate-batch",
            "4",
            "--units",
            "good,mua",
            "--cluster",
            "10.0.0.1:6379",
            "--workers",
            "2",
            "--output-dir",
            "out",
            "-q",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let args: Vec<String> = std::fs::read_to_string(dir.path().join("args.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(args[..3], ["-m", "synfire.cluster", "batch"]);
    assert_eq!(args[3], sessions.display().to_string());
    let value = |flag: &str| {
        let i = args.iter().position(|a| a == flag).expect(flag);
        args[i + 1].clone()
    };
    let options: Value = serde_json::from_str(&value("--options-json")).unwrap();
    assert_eq!(
        options["intervals_s"],
        serde_json::json!(["(0,0.005]", "[0,0.001]"])
    );
    assert_eq!(options["min_count"], 200);
    assert_eq!(options["max_level"], 3);
    assert_eq!(options["device"], "cpu");
    assert_eq!(options["support_per"], "events");
    assert_eq!(options["significance"]["surrogates"], "dither:0.015");
    assert_eq!(options["significance"]["n_surrogates"], 9);
    assert_eq!(options["significance"]["seed"], 3);
    assert_eq!(
        options["significance"]["correction"],
        synfire::significance::options::DEFAULT_CORRECTION.name()
    );
    let reader: Value = serde_json::from_str(&value("--reader-json")).unwrap();
    assert_eq!(reader["units"], serde_json::json!(["good", "mua"]));
    assert_eq!(value("--cluster"), "10.0.0.1:6379");
    assert_eq!(value("--workers"), "2");
    assert_eq!(value("--surrogate-batch"), "4");
    assert_eq!(value("--output-dir"), "out");
    assert_eq!(value("--outputs"), "nwb,json");
    assert!(args.contains(&"--quiet".to_owned()));
    // The Python side's failure (some session failed) is the command's.
    let failing = fake_python(dir.path(), "", 1);
    let out = batch(&sessions, &failing, &["--intervals", "(0,0.005]"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("some sessions failed"),
        "{}",
        stderr(&out)
    );
}
