//! `docs/tutorial.md` runs as written: its `sh` blocks, in order, in a scratch folder holding a
//! link to `fixtures/`, with the built `synfire` first on `PATH`. Each picture and table it
//! promises exists and holds what it says.

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The fenced `sh` blocks of a markdown text, in order.
fn sh_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```sh") => current = Some(String::new()),
            (Some(_), l) if l.starts_with("```") => blocks.push(current.take().unwrap()),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

#[test]
fn the_tutorial_runs_as_written() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("docs/tutorial.md")).unwrap();
    let blocks = sh_blocks(&text);
    assert!(blocks.len() >= 5, "{} sh blocks", blocks.len());
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        Path::new(ROOT).join("fixtures"),
        dir.path().join("fixtures"),
    )
    .unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_synfire")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (i, block) in blocks.iter().enumerate() {
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", block])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env_remove("SYNFIRE_LOG")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "block {i} failed:\n{block}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // What the page promises.
    for picture in ["levels.png", "significance.png", "raster.png"] {
        let bytes = std::fs::read(dir.path().join(picture)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{picture}");
    }
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("significant.json")).unwrap(),
    )
    .unwrap();
    let pairs: Vec<&serde_json::Value> = doc["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["labels"].as_array().unwrap().len() == 2)
        .collect();
    assert!(!pairs.is_empty(), "some pairs are significant");
    assert!(pairs.iter().all(|e| e["significant"] == true));
    let top = std::fs::read_to_string(dir.path().join("top.txt")).unwrap();
    assert_eq!(top.lines().count(), 3);
    let rows = std::fs::read_to_string(dir.path().join("occurrences.csv")).unwrap();
    let expected: u64 = pairs.iter().map(|e| 2 * e["count"].as_u64().unwrap()).sum();
    assert_eq!(
        rows.lines().count() as u64 - 1,
        expected,
        "two rows per pair occurrence"
    );
    assert!(dir.path().join("results.nwb").is_file());
}
