//! The memory budget of a mining run (issue 45): how many bytes a run may hold before it stops
//! a level, and what the process holds now.
//!
//! A dense recording at the usual settings can have tens of millions of frequent episodes at
//! level 4 (a 253-unit Kilosort4 session of 90 s: 2.7 million at level 3, killed by the
//! operating system at 24 GB in level 4). The miner ([`super::miner`]) therefore checks,
//! after each batch of candidates, the process's resident memory plus what the level's end
//! still needs (its frequent episodes are cloned once for the next level's joins) against
//! the budget; a level that would pass it is stopped, the finished levels are returned, marked
//! truncated ([`super::StopReason::MemoryBudget`]) with a threshold that would fit.
//!
//! The default budget ([`MemoryBudget::Auto`]) is what the process holds when the run starts
//! plus [`AUTO_FRACTION`] of the memory available then: the smaller of the kernel's `MemAvailable` and the room left under the
//! cgroup's `memory.max` (a container's or a batch job's limit). Where neither can be read
//! (not Linux), `Auto` is no budget, said once in the log.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The fraction of the available memory that [`MemoryBudget::Auto`] allows a run: a third,
/// which leaves room for the report that is written after mining (its text or JSON) and for
/// whatever else the machine runs.
pub const AUTO_FRACTION: f64 = 1.0 / 3.0;

/// How much memory a mining run may hold (`--memory-budget`, `memory_budget`).
///
/// A ceiling on the process's resident memory. Written `auto` (the default: what the process
/// holds when the run starts plus [`AUTO_FRACTION`] of the available memory), `off` (no
/// budget), or a size in bytes with an optional binary unit: `8G`, `8GiB`, `512M`, `1.5T`,
/// `2000000000` (`K`, `M`, `G`, `T` are powers of 1024). In JSON and TOML also a plain number
/// of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum MemoryBudget {
    /// What the process holds when the run starts plus [`AUTO_FRACTION`] of the memory
    /// available then.
    #[default]
    Auto,
    /// No budget: the run may use whatever the machine gives it.
    Off,
    /// At most this many bytes.
    Bytes(u64),
}

impl MemoryBudget {
    /// The budget in bytes, a ceiling on the process's resident memory: `Auto` resolved
    /// against this machine now (what the process holds now plus [`AUTO_FRACTION`] of
    /// [`available_bytes`]), `None` for `Off` or where the available memory cannot be read.
    #[must_use]
    pub fn resolve(self) -> Option<u64> {
        match self {
            Self::Off => None,
            Self::Bytes(b) => Some(b),
            Self::Auto => available_bytes().map(|a| {
                resident_bytes()
                    .unwrap_or(0)
                    .saturating_add((a as f64 * AUTO_FRACTION) as u64)
            }),
        }
    }
}

impl fmt::Display for MemoryBudget {
    /// `auto`, `off`, or the size as `format_bytes` writes it (which reads back exactly only
    /// for whole MiB; the JSON form writes bytes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Off => f.write_str("off"),
            Self::Bytes(b) => f.write_str(&format_bytes(*b)),
        }
    }
}

/// A budget that cannot be read, with what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("memory budget `{text}`: {why}")]
pub struct MemoryBudgetError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub why: String,
}

impl FromStr for MemoryBudget {
    type Err = MemoryBudgetError;

    /// Parses `auto`, `off`, or a size (`8G`, `8GiB`, `512M`, `1.5T`, `2000000000`).
    ///
    /// # Errors
    /// [`MemoryBudgetError`] for anything else, a zero or negative size, or one above 2⁶⁴ bytes.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let bad = |why: &str| MemoryBudgetError {
            text: s.to_owned(),
            why: why.to_owned(),
        };
        match text.to_ascii_lowercase().as_str() {
            "auto" => return Ok(Self::Auto),
            "off" | "none" => return Ok(Self::Off),
            _ => {}
        }
        let lower = text.to_ascii_lowercase();
        let digits_end = lower
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(lower.len());
        let (number, unit) = lower.split_at(digits_end);
        let value: f64 = number
            .parse()
            .map_err(|_| bad("expected `auto`, `off` or a size such as `8G` or `512M`"))?;
        let scale: f64 = match unit.trim() {
            "" | "b" => 1.0,
            "k" | "kb" | "kib" => 1024.0,
            "m" | "mb" | "mib" => 1024.0 * 1024.0,
            "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
            "t" | "tb" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            _ => return Err(bad("unknown unit (use K, M, G or T, powers of 1024)")),
        };
        let bytes = value * scale;
        if !(bytes.is_finite() && bytes >= 1.0) {
            return Err(bad("must be at least one byte"));
        }
        if bytes >= u64::MAX as f64 {
            return Err(bad("larger than 2^64 bytes"));
        }
        Ok(Self::Bytes(bytes as u64))
    }
}

impl Serialize for MemoryBudget {
    /// `"auto"`, `"off"`, or the number of bytes.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::Off => s.serialize_str("off"),
            Self::Bytes(b) => s.serialize_u64(*b),
        }
    }
}

impl<'de> Deserialize<'de> for MemoryBudget {
    /// A number of bytes, or the text forms of [`MemoryBudget::from_str`].
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Bytes(u64),
            Text(String),
        }
        match Form::deserialize(d)? {
            Form::Bytes(0) => Err(serde::de::Error::custom(
                "memory budget must be at least one byte",
            )),
            Form::Bytes(b) => Ok(Self::Bytes(b)),
            Form::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// `bytes` for people: `7.9 GiB`, `512.0 MiB`, `812 B`.
#[must_use]
pub(crate) fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The memory this process may still take, bytes: the smaller of `MemAvailable`
/// (`/proc/meminfo`) and, under a cgroup v2 limit, `memory.max − memory.current`
/// (`/sys/fs/cgroup`). `None` where neither can be read.
#[must_use]
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| meminfo_field(&text, "MemAvailable:"));
    let cgroup = cgroup_room();
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A `kB` field of `/proc/meminfo`, in bytes.
fn meminfo_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib.saturating_mul(1024))
}

/// `memory.max − memory.current` of this process's cgroup (v2), if it has a limit.
fn cgroup_room() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // cgroup v2: one line `0::/path`.
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let max = std::fs::read_to_string(dir.join("memory.max")).ok()?;
    let max: u64 = max.trim().parse().ok()?; // "max" (no limit) does not parse
    let current: u64 = std::fs::read_to_string(dir.join("memory.current"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(max.saturating_sub(current))
}

/// The resident memory of this process now, bytes (`VmRSS` of `/proc/self/status`). `None`
/// where it cannot be read (not Linux).
#[must_use]
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    meminfo_field(&status, "VmRSS:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!("8G".parse(), Ok(MemoryBudget::Bytes(8 << 30)));
        assert_eq!("8GiB".parse(), Ok(MemoryBudget::Bytes(8 << 30)));
        assert_eq!("512m".parse(), Ok(MemoryBudget::Bytes(512 << 20)));
        assert_eq!("1.5T".parse(), Ok(MemoryBudget::Bytes(3 << 39)));
        assert_eq!("2000000000".parse(), Ok(MemoryBudget::Bytes(2_000_000_000)));
        assert_eq!("auto".parse(), Ok(MemoryBudget::Auto));
        assert_eq!("OFF".parse(), Ok(MemoryBudget::Off));
        for bad in ["", "0", "-1G", "8X", "G", "1e30T", "nan"] {
            let e = bad.parse::<MemoryBudget>().unwrap_err();
            assert_eq!(e.text, bad, "{e}");
        }
    }

    #[test]
    fn json_takes_bytes_or_text() {
        let b: MemoryBudget = serde_json::from_str("1048576").unwrap();
        assert_eq!(b, MemoryBudget::Bytes(1 << 20));
        let b: MemoryBudget = serde_json::from_str("\"4G\"").unwrap();
        assert_eq!(b, MemoryBudget::Bytes(4 << 30));
        assert!(serde_json::from_str::<MemoryBudget>("0").is_err());
        assert_eq!(serde_json::to_string(&MemoryBudget::Bytes(5)).unwrap(), "5");
        assert_eq!(
            serde_json::to_string(&MemoryBudget::Auto).unwrap(),
            "\"auto\""
        );
    }

    #[test]
    fn this_machine_reports_its_memory() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let rss = resident_bytes().expect("statm on Linux");
        let avail = available_bytes().expect("meminfo on Linux");
        assert!(rss > 1 << 20, "a test process holds more than 1 MiB: {rss}");
        assert!(avail > 1 << 20, "{avail}");
        let auto = MemoryBudget::Auto.resolve().unwrap();
        assert!(
            auto >= avail / 4 && auto <= avail + rss * 2,
            "{auto} of {avail}, {rss} resident"
        );
    }

    #[test]
    fn bytes_format_for_people() {
        assert_eq!(format_bytes(812), "812 B");
        assert_eq!(format_bytes(8 << 30), "8.0 GiB");
        assert_eq!(format_bytes(3 << 19), "1.5 MiB");
    }
}
