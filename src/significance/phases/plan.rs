//! What the phases pass between them: the [`Plan`] of a test and the parts each phase makes
//! of it ([`FirstPart`], [`Union`], [`SecondPart`]), with their JSON form (its encoding in
//! `wire.rs`), and the errors a plan or part that does not fit is refused with.

use std::ops::Range;

use super::wire::{
    FirstWire, Fnv, PlanWire, SecondWire, UnionWire, WIRE_VERSION, check_version, decode,
    decode_all, encode, from_json, to_json,
};
use crate::episode::{Episode, MinerConfig};
use crate::event::EventStream;
use crate::significance::error::SignificanceError;
use crate::significance::surrogate::{SurrogateMethod, Trials};
use crate::significance::testing::{Correction, Sums};

/// What every phase of one test needs besides the recording and its mining configuration: the
/// test's settings, the recording's minimum count and the tested episodes with their counts
/// in the recording. Made by [`Tester::plan`].
///
/// [`Tester::plan`]: super::Tester::plan
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub(super) fingerprint: u64,
    pub(super) method: SurrogateMethod,
    pub(super) n_surrogates: usize,
    pub(super) alpha: f64,
    pub(super) correction: Correction,
    pub(super) seed: u64,
    pub(super) trials: Option<Trials>,
    pub(super) test_top: Option<usize>,
    /// The tested episodes are a watch list (fixed in advance), not chosen by their counts.
    pub(super) watch: bool,
    /// Only the significant episodes' tests are kept ([`SignificanceConfig::significant_only`]).
    ///
    /// [`SignificanceConfig::significant_only`]: crate::significance::SignificanceConfig::significant_only
    pub(super) significant_only: bool,
    pub(super) min_count: u64,
    /// Tested episodes and their counts in the recording, in report order (watch list: its
    /// order). `max-t`, `spectrum`: the frequent episodes of two or more nodes.
    pub(super) tested: Vec<(Episode, u64)>,
    /// Candidate counts made to build the plan (a watch list counted in the recording).
    pub(super) counted: u64,
    /// [`Plan::hash_parts`], computed once.
    pub(super) part: u64,
}

impl Plan {
    /// The plan with its part fingerprint computed.
    pub(super) fn sealed(mut self) -> Self {
        self.part = self.hash_parts();
        self
    }

    /// The number of surrogates `S`.
    #[must_use]
    pub fn n_surrogates(&self) -> usize {
        self.n_surrogates
    }

    /// The procedure.
    #[must_use]
    pub fn correction(&self) -> Correction {
        self.correction
    }

    /// The seed of the surrogates.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The tested episodes with their counts in the recording, in report order (shape
    /// `[tests]`).
    #[must_use]
    pub fn tested(&self) -> &[(Episode, u64)] {
        &self.tested
    }

    /// The passes over the surrogates: 2 for `max-t` (mine, then count the union) and for
    /// `spectrum` keeping only significant episodes (search, then count the significant
    /// ones), 1 otherwise.
    #[must_use]
    pub fn passes(&self) -> usize {
        match self.correction {
            Correction::MaxT => 2,
            Correction::Spectrum if self.significant_only => 2,
            _ => 1,
        }
    }

    /// Whether the first pass counts the tested episodes in each surrogate (their sums).
    pub(super) fn first_pass_sums(&self) -> bool {
        match self.correction {
            Correction::MaxT => false,
            Correction::Spectrum => !self.significant_only,
            _ => true,
        }
    }

    /// `0..S` cut into consecutive ranges of at most `size` surrogates (at least one range;
    /// `size` 0 is taken as 1).
    #[must_use]
    pub fn batches(&self, size: usize) -> Vec<Range<u64>> {
        let n = self.n_surrogates as u64;
        let size = size.max(1) as u64;
        (0..n.div_ceil(size))
            .map(|k| k * size..((k + 1) * size).min(n))
            .collect()
    }

    /// The settings the surrogates are made with, to compare against a [`Tester`]'s.
    ///
    /// [`Tester`]: super::Tester
    pub(super) fn surrogate_key(&self) -> (String, u64, Option<Vec<(f64, f64)>>) {
        (
            self.method.to_string(),
            self.seed,
            self.trials.as_ref().map(|t| t.as_slice().to_vec()),
        )
    }

    /// The fingerprint every part of this plan carries.
    pub(super) fn part_fingerprint(&self) -> u64 {
        self.part
    }

    /// The recording's and configuration's fingerprint hashed with the plan's settings and
    /// tested episodes.
    fn hash_parts(&self) -> u64 {
        let mut h = Fnv::new();
        h.u64(self.fingerprint);
        h.bytes(self.method.to_string().as_bytes());
        h.u64(self.n_surrogates as u64);
        h.u64(self.alpha.to_bits());
        h.bytes(self.correction.name().as_bytes());
        h.u64(self.seed);
        for &(a, b) in self.trials.as_ref().map_or(&[][..], Trials::as_slice) {
            h.u64(a.to_bits());
            h.u64(b.to_bits());
        }
        h.u64(self.min_count);
        if self.significant_only {
            h.bytes(b"significant-only");
        }
        for (e, c) in &self.tested {
            h.episode(e);
            h.u64(*c);
        }
        h.finish()
    }

    /// The plan in its JSON form (module documentation); `config` is the mining configuration
    /// its episodes' intervals are indices into.
    ///
    /// # Errors
    /// [`SignificanceError::Config`] when a tested episode has an interval that is not one of
    /// `config`'s (a watch list with other intervals cannot be split).
    pub fn to_json(&self, config: &MinerConfig) -> Result<String, SignificanceError> {
        let wire = PlanWire {
            version: WIRE_VERSION,
            fingerprint: self.fingerprint,
            method: self.method.to_string(),
            n_surrogates: self.n_surrogates,
            alpha: self.alpha,
            correction: self.correction,
            seed: self.seed,
            trials: self.trials.as_ref().map(|t| t.as_slice().to_vec()),
            test_top: self.test_top,
            watch: self.watch,
            significant_only: self.significant_only,
            min_count: self.min_count,
            tested: self
                .tested
                .iter()
                .map(|(e, c)| Ok((encode(e, &config.intervals)?, *c)))
                .collect::<Result<_, SignificanceError>>()?,
            counted: self.counted,
        };
        to_json(&wire, "plan")
    }

    /// A plan from its JSON form, for `stream` mined with `config` (the recording and
    /// configuration it was made for).
    ///
    /// # Errors
    /// [`SignificanceError::Config`] naming what is wrong: not a plan, another version, an
    /// episode outside the recording's units or the configuration's intervals, a setting out
    /// of range; [`SignificanceError::Surrogate`] for a bad method or trials.
    pub fn from_json(
        text: &str,
        stream: &EventStream,
        config: &MinerConfig,
    ) -> Result<Self, SignificanceError> {
        let w: PlanWire = from_json(text, "plan")?;
        check_version(w.version, "plan")?;
        let method: SurrogateMethod = w.method.parse()?;
        let trials = w.trials.map(Trials::new).transpose()?;
        check_settings(w.n_surrogates, w.alpha)?;
        let units = stream.alphabet().len();
        let tested = w
            .tested
            .iter()
            .map(|(code, c)| Ok((decode(code, units, &config.intervals)?, *c)))
            .collect::<Result<Vec<_>, SignificanceError>>()?;
        Ok(Self {
            fingerprint: w.fingerprint,
            method,
            n_surrogates: w.n_surrogates,
            alpha: w.alpha,
            correction: w.correction,
            seed: w.seed,
            trials,
            test_top: w.test_top,
            watch: w.watch,
            significant_only: w.significant_only,
            min_count: w.min_count,
            tested,
            counted: w.counted,
            part: 0,
        }
        .sealed())
    }
}

/// The first pass over a range of surrogates ([`Tester::first_pass`]; the module
/// documentation says what each procedure keeps).
///
/// [`Tester::first_pass`]: super::Tester::first_pass
#[derive(Clone, Debug, PartialEq)]
pub struct FirstPart {
    pub(super) fingerprint: u64,
    pub(super) range: Range<u64>,
    /// `max-t`: the distinct episodes the range's surrogates made frequent, in order of first
    /// appearance (surrogate order, then each one's mining order).
    pub(super) episodes: Vec<Episode>,
    /// `max-t`: per surrogate of the range, its frequent episodes of two or more nodes as
    /// (index into `episodes`, count). Shape `[range.len()]`.
    pub(super) selections: Vec<Vec<(u32, u64)>>,
    /// `spectrum`: per surrogate of the range, the largest count among its frequent episodes
    /// of each size (index: the size, 0 and 1 unused). Shape `[range.len()][max_level + 1]`.
    pub(super) max_by_size: Vec<Vec<u64>>,
    /// `spectrum` and per-episode procedures: the tested episodes' sums over the range.
    pub(super) sums: Sums,
    pub(super) counted: u64,
}

impl FirstPart {
    /// The surrogates this part covers.
    #[must_use]
    pub fn range(&self) -> Range<u64> {
        self.range.clone()
    }

    /// The part in its JSON form (module documentation).
    ///
    /// # Errors
    /// [`SignificanceError::Config`] when an episode has an interval that is not one of
    /// `config`'s.
    pub fn to_json(&self, config: &MinerConfig) -> Result<String, SignificanceError> {
        let wire = FirstWire {
            version: WIRE_VERSION,
            fingerprint: self.fingerprint,
            range: (self.range.start, self.range.end),
            episodes: self
                .episodes
                .iter()
                .map(|e| encode(e, &config.intervals))
                .collect::<Result<_, _>>()?,
            selections: self
                .selections
                .iter()
                .map(|sel| sel.iter().copied().unzip())
                .collect(),
            max_by_size: self.max_by_size.clone(),
            sums: self.sums.clone(),
            counted: self.counted,
        };
        to_json(&wire, "first-pass part")
    }

    /// A part from its JSON form, for `stream` mined with `config`.
    ///
    /// # Errors
    /// [`SignificanceError::Config`] naming what is wrong (as [`Plan::from_json`]), or a
    /// selection that names an episode the part does not hold.
    pub fn from_json(
        text: &str,
        stream: &EventStream,
        config: &MinerConfig,
    ) -> Result<Self, SignificanceError> {
        let w: FirstWire = from_json(text, "first-pass part")?;
        check_version(w.version, "first-pass part")?;
        let episodes = decode_all(&w.episodes, stream, config)?;
        let mut selections = Vec::with_capacity(w.selections.len());
        for (ids, counts) in w.selections {
            if ids.len() != counts.len() || ids.iter().any(|&i| i as usize >= episodes.len()) {
                return Err(bad_part(
                    "first-pass part",
                    "a selection names an episode the part does not hold",
                ));
            }
            selections.push(ids.into_iter().zip(counts).collect());
        }
        if !w.sums.consistent() {
            return Err(bad_part("first-pass part", "its sums differ in length"));
        }
        Ok(Self {
            fingerprint: w.fingerprint,
            range: w.range.0..w.range.1,
            episodes,
            selections,
            max_by_size: w.max_by_size,
            sums: w.sums,
            counted: w.counted,
        })
    }
}

/// `max-t` between the passes: `U`, the union of every dataset's frequent episodes (the
/// recording's tested episodes first, then the surrogates' in surrogate order), and their
/// counts in the recording ([`Tester::union`]).
///
/// [`Tester::union`]: super::Tester::union
#[derive(Clone, Debug, PartialEq)]
pub struct Union {
    pub(super) fingerprint: u64,
    pub(super) episodes: Vec<Episode>,
    /// `c(e, X₀)` for every `e` of `U`. Shape `[U]`.
    pub(super) recording: Vec<u64>,
    pub(super) counted: u64,
}

impl Union {
    /// The number of episodes in `U`.
    #[must_use]
    pub fn len(&self) -> usize {
        self.episodes.len()
    }

    /// True when no dataset had a frequent episode of two or more nodes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }

    /// The union in its JSON form (module documentation).
    ///
    /// # Errors
    /// [`SignificanceError::Config`] when an episode has an interval that is not one of
    /// `config`'s.
    pub fn to_json(&self, config: &MinerConfig) -> Result<String, SignificanceError> {
        let wire = UnionWire {
            version: WIRE_VERSION,
            fingerprint: self.fingerprint,
            episodes: self
                .episodes
                .iter()
                .map(|e| encode(e, &config.intervals))
                .collect::<Result<_, _>>()?,
            recording: self.recording.clone(),
            counted: self.counted,
        };
        to_json(&wire, "union")
    }

    /// A union from its JSON form, for `stream` mined with `config`.
    ///
    /// # Errors
    /// [`SignificanceError::Config`] naming what is wrong (as [`Plan::from_json`]).
    pub fn from_json(
        text: &str,
        stream: &EventStream,
        config: &MinerConfig,
    ) -> Result<Self, SignificanceError> {
        let w: UnionWire = from_json(text, "union")?;
        check_version(w.version, "union")?;
        let episodes = decode_all(&w.episodes, stream, config)?;
        if w.recording.len() != episodes.len() {
            return Err(bad_part(
                "union",
                "it holds a different number of counts than episodes",
            ));
        }
        Ok(Self {
            fingerprint: w.fingerprint,
            episodes,
            recording: w.recording,
            counted: w.counted,
        })
    }
}

/// `max-t`'s second pass over a range of surrogates: every episode of `U` counted in each,
/// summed ([`Tester::second_pass`]).
///
/// [`Tester::second_pass`]: super::Tester::second_pass
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecondPart {
    pub(super) fingerprint: u64,
    pub(super) range: Range<u64>,
    /// Per episode of `U`.
    pub(super) sums: Sums,
    pub(super) counted: u64,
}

impl SecondPart {
    /// The surrogates this part covers.
    #[must_use]
    pub fn range(&self) -> Range<u64> {
        self.range.clone()
    }

    /// The part in its JSON form (module documentation).
    ///
    /// # Errors
    /// Never in practice (integers only); [`SignificanceError::Config`] if serialisation
    /// fails.
    pub fn to_json(&self) -> Result<String, SignificanceError> {
        let wire = SecondWire {
            version: WIRE_VERSION,
            fingerprint: self.fingerprint,
            range: (self.range.start, self.range.end),
            sums: self.sums.clone(),
            counted: self.counted,
        };
        to_json(&wire, "second-pass part")
    }

    /// A part from its JSON form.
    ///
    /// # Errors
    /// [`SignificanceError::Config`] naming what is wrong.
    pub fn from_json(text: &str) -> Result<Self, SignificanceError> {
        let w: SecondWire = from_json(text, "second-pass part")?;
        check_version(w.version, "second-pass part")?;
        if !w.sums.consistent() {
            return Err(bad_part("second-pass part", "its sums differ in length"));
        }
        Ok(Self {
            fingerprint: w.fingerprint,
            range: w.range.0..w.range.1,
            sums: w.sums,
            counted: w.counted,
        })
    }
}

/// The error for a union or second pass asked of a one-pass plan.
pub(super) fn one_pass(plan: &Plan) -> SignificanceError {
    SignificanceError::Config(format!(
        "this {} test has one pass: there is no union or second pass",
        plan.correction
    ))
}

pub(super) fn check_settings(n_surrogates: usize, alpha: f64) -> Result<(), SignificanceError> {
    if n_surrogates == 0 {
        return Err(SignificanceError::Config(
            "`--n-surrogates` must be at least 1".into(),
        ));
    }
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(SignificanceError::Config(format!(
            "`--alpha` must be in (0, 1), got {alpha}"
        )));
    }
    Ok(())
}

pub(super) fn bad_part(what: &str, why: &str) -> SignificanceError {
    SignificanceError::Config(format!("the {what} is malformed: {why}"))
}

pub(super) fn other_test(what: &str) -> SignificanceError {
    SignificanceError::Config(format!(
        "a {what} was made for another recording, mining configuration or test"
    ))
}
