//! The one table of stage kinds, read by the pipeline loader. A new kind is one module of
//! `live::stage` and one row here (`docs/adding-a-stage.md`).

use super::{StageKind, detect, episodes, motif, rate, search, shapelet, softdtw, summary};

/// Every stage kind. A new kind is one module of `live::stage` and one row here.
pub static KINDS: &[StageKind] = &[
    StageKind::of::<episodes::EpisodesConfig>(),
    StageKind::of::<summary::SummaryConfig>(),
    StageKind::of::<motif::MotifStageConfig>(),
    StageKind::of::<search::SearchStageConfig>(),
    StageKind::of::<softdtw::SoftDtwStageConfig>(),
    StageKind::of::<shapelet::ShapeletStageConfig>(),
    StageKind::of::<rate::RateConfig>(),
    StageKind::on_spikes::<detect::DetectConfig>(),
];
