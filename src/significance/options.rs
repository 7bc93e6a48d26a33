//! [`SignificanceOptions`]: every option of a significance test, declared once, typed, with
//! its default, and checked in one place ([`SignificanceOptions::config`]). They compose with
//! the mining options as [`MineOptions`] (`episode::MiningOptions` whose `significance` slot
//! holds them): the document `synfire mine`'s flags describe, an episodes stage's
//! `[stages.<name>]` table with its `[stages.<name>.significance]`, and the JSON options the
//! Python package and `synfire batch` hand the extension (serialised from this type, never
//! written by hand).
//!
//! The surrogate method and the procedure are parsed when the options are read (an unknown
//! one is an error of that field); [`SignificanceOptions::config`] checks the values (`S ≥ 1`,
//! `α` in (0, 1), the sample split) and returns every invalid one at once.

use std::fmt::Display;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::surrogate::{SurrogateMethod, Trials};
use super::testing::{Correction, SignificanceConfig, check_sample_split};
use crate::episode::{Episode, MiningOptions, OptionError};

/// Surrogates of a significance test of a whole recording when none is given: `synfire mine
/// --n-surrogates` and `synfire batch --n-surrogates` (their clap default),
/// [`SignificanceOptions::new`], and Python's `synfire.mine(significance={...})` without
/// `n_surrogates` (through `synfire._synfire.defaults()`).
pub const DEFAULT_N_SURROGATES: usize = 200;

/// Surrogates per window of a pipeline's episodes stage when none is given (the serde default
/// of [`SignificanceOptions::n_surrogates`]): 19, the fewest with which a `max-t` p-value
/// reaches 0.05, `1 / (19 + 1)`, since every window is tested.
pub const DEFAULT_WINDOW_SURROGATES: usize = 19;

/// Level α of a significance test when none is given (`--alpha`, every caller).
pub const DEFAULT_ALPHA: f64 = 0.05;

/// Multiple-testing procedure when none is given (`--correction`, every caller):
/// significance-guided mining ([`Correction::Guided`], [`super::guided`]).
pub const DEFAULT_CORRECTION: Correction = Correction::Guided;

/// Seed of the surrogates when none is given (`--seed`, every caller).
pub const DEFAULT_SEED: u64 = 0;

fn default_window_surrogates() -> usize {
    DEFAULT_WINDOW_SURROGATES
}

fn default_alpha() -> f64 {
    DEFAULT_ALPHA
}

fn default_correction() -> Correction {
    DEFAULT_CORRECTION
}

fn default_seed() -> u64 {
    DEFAULT_SEED
}

/// Every option of `synfire mine` with its significance test: the mining options
/// ([`MiningOptions`]) with [`SignificanceOptions`] in their `significance` slot. The type an
/// episodes stage's table, the Python package's options JSON and `synfire batch` read and
/// write (one flat document: `{"intervals_s": …, "min_count": …, "significance": {…}}`).
pub type MineOptions = MiningOptions<SignificanceOptions>;

/// A significance test of mined episodes, as options: what `synfire mine --surrogates …`
/// (`--n-surrogates`, `--alpha`, `--correction`, `--seed`, `--test-top`,
/// `--significant-only`, `--sample-split`) takes, the `[stages.<name>.significance]` table of
/// an episodes stage, and the `significance=` dict of `synfire.mine`. Serialised as read
/// (`surrogates` as its text `METHOD:Δ[:d]`, `correction` by its name).
///
/// Read from a document, a missing `n_surrogates` is a window's
/// [`DEFAULT_WINDOW_SURROGATES`] (a pipeline tests every window); `synfire mine`, `synfire
/// batch` and Python fill in [`DEFAULT_N_SURROGATES`] instead.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct SignificanceOptions {
    /// How surrogates are made, `METHOD[:Δ[:d]]` as `--surrogates` (e.g. `"dither:0.015"`;
    /// [`SurrogateMethod`]).
    #[serde(deserialize_with = "from_text", serialize_with = "as_text")]
    pub surrogates: SurrogateMethod,
    /// Number of surrogates `S` (≥ 1; read from a document without it: 19, the fewest with
    /// which a `max-t` p-value reaches 0.05, `1 / (19 + 1)`).
    #[serde(default = "default_window_surrogates")]
    pub n_surrogates: usize,
    /// Level α, in (0, 1) (default 0.05).
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// The procedure: `guided` (default), `max-t`, `spectrum`, `fdr-bh`, `holm`,
    /// `bonferroni` or `none` ([`Correction`]).
    #[serde(default = "default_correction", deserialize_with = "from_text")]
    pub correction: Correction,
    /// Seed of the surrogates (default 0).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Per-episode procedures: test the N most frequent episodes (with `sample_split`: the
    /// family's size).
    #[serde(default)]
    pub test_top: Option<usize>,
    /// Keep only the significant episodes in the result (default false).
    #[serde(default)]
    pub significant_only: bool,
    /// `max-t` by sample splitting: select the tested family on this leading fraction of the
    /// recording's span (in (0, 1)) and test it on the rest, as `--sample-split`
    /// ([`super::sample_split`]). Absent: the family is selected by mining every surrogate.
    #[serde(default)]
    pub sample_split: Option<f64>,
}

/// A field read from its text by `FromStr` (the parse error as the field's error).
fn from_text<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    let text = String::deserialize(d)?;
    text.parse().map_err(serde::de::Error::custom)
}

/// A field written as its `Display` text (which its `FromStr` reads back to the same value).
fn as_text<S: Serializer, T: Display>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

impl SignificanceOptions {
    /// A test against `surrogates` with every other option at `synfire mine`'s default
    /// ([`DEFAULT_N_SURROGATES`], [`DEFAULT_ALPHA`], [`DEFAULT_CORRECTION`],
    /// [`DEFAULT_SEED`]).
    #[must_use]
    pub fn new(surrogates: SurrogateMethod) -> Self {
        Self {
            surrogates,
            n_surrogates: DEFAULT_N_SURROGATES,
            alpha: DEFAULT_ALPHA,
            correction: DEFAULT_CORRECTION,
            seed: DEFAULT_SEED,
            test_top: None,
            significant_only: false,
            sample_split: None,
        }
    }

    /// The test as the library runs it, unchecked ([`Self::config`] checks): `watch` and
    /// `trials` are what `synfire mine` read from its `--watch` and `--trials` files (`None`
    /// elsewhere).
    #[must_use]
    pub fn test(&self, watch: Option<Vec<Episode>>, trials: Option<Trials>) -> SignificanceConfig {
        SignificanceConfig {
            method: self.surrogates.clone(),
            n_surrogates: self.n_surrogates,
            alpha: self.alpha,
            correction: self.correction,
            seed: self.seed,
            test_top: self.test_top,
            watch,
            trials,
            significant_only: self.significant_only,
            sample_split: self.sample_split,
        }
    }

    /// The test these options describe where no trials are given (an episodes stage's
    /// window, `synfire batch`, Python), every option checked.
    ///
    /// # Errors
    /// Every invalid option ([`OptionError`] naming it as in the document): `trial-shift` (no
    /// trials), no surrogates, `alpha` outside (0, 1), a `sample_split` outside (0, 1) or with
    /// a procedure or method it does not take ([`check_sample_split`]).
    pub fn config(&self) -> Result<SignificanceConfig, Vec<OptionError>> {
        let mut errors = Vec::new();
        let mut err = |field: &str, message: String| {
            errors.push(OptionError {
                field: field.to_owned(),
                message,
            });
        };
        if matches!(self.surrogates, SurrogateMethod::TrialShift { .. }) {
            err(
                "surrogates",
                "`trial-shift` needs trials, which a window does not have".to_owned(),
            );
        }
        if self.n_surrogates == 0 {
            err("n_surrogates", "must be at least 1".to_owned());
        }
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            err("alpha", format!("must be in (0, 1), got {}", self.alpha));
        }
        if let Some(f) = self.sample_split {
            for e in check_sample_split(f, Some(self.correction), Some(&self.surrogates)) {
                err("sample_split", e);
            }
        }
        if errors.is_empty() {
            Ok(self.test(None, None))
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        DEFAULT_N_SURROGATES, DEFAULT_WINDOW_SURROGATES, MineOptions, SignificanceOptions,
    };
    use crate::episode::{Interval, MiningOptions};
    use crate::significance::{Correction, SurrogateMethod};

    #[test]
    fn options_read_typed_and_serialise_to_what_reads_back() {
        let doc = r#"{"intervals_s": [[0, 0.005]], "min_count": 3,
            "significance": {"surrogates": "isi-dither:0.02", "correction": "max-t"}}"#;
        let options: MineOptions = serde_json::from_str(doc).unwrap();
        let sig = options.significance.clone().unwrap();
        assert_eq!(
            sig.surrogates,
            SurrogateMethod::IsiDither {
                delta_s: 0.02,
                dead_time_s: 0.002
            }
        );
        assert_eq!(sig.correction, Correction::MaxT);
        assert_eq!(sig.n_surrogates, DEFAULT_WINDOW_SURROGATES);
        let text = serde_json::to_string(&options).unwrap();
        let again: MineOptions = serde_json::from_str(&text).unwrap();
        assert_eq!(again, options);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["significance"]["surrogates"], "isi-dither:0.02:0.002");
        assert_eq!(value["significance"]["correction"], "max-t");
        assert_eq!(value["min_count"], 3);
        // Plain mining options take no test.
        let plain = MiningOptions::new(&[Interval::new(0.0, 0.005).unwrap()]);
        assert!(serde_json::to_value(&plain).unwrap()["significance"].is_null());
    }

    #[test]
    fn a_bad_method_or_procedure_is_an_error_of_its_field_and_values_are_all_checked() {
        let e = serde_json::from_str::<SignificanceOptions>(r#"{"surrogates": "jitter"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown surrogate method `jitter`"), "{e}");
        let e = serde_json::from_str::<SignificanceOptions>(
            r#"{"surrogates": "dither", "correction": "max-z"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown correction `max-z`"), "{e}");
        let mut o = SignificanceOptions::new(SurrogateMethod::TrialShift { delta_s: 0.01 });
        assert_eq!(o.n_surrogates, DEFAULT_N_SURROGATES);
        o.n_surrogates = 0;
        o.alpha = 1.5;
        o.sample_split = Some(2.0);
        let fields: Vec<String> = o
            .config()
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                "surrogates",
                "n_surrogates",
                "alpha",
                "sample_split",
                "sample_split"
            ]
        );
        let good = SignificanceOptions::new(SurrogateMethod::Dither { delta_s: 0.015 });
        let config = good.config().unwrap();
        assert_eq!(config.n_surrogates, DEFAULT_N_SURROGATES);
        assert_eq!(config.correction, Correction::Guided);
    }
}
