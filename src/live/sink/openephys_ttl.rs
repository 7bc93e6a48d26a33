//! `kind = "openephys_ttl"`: a TTL pulse in the Open Ephys GUI per occurrence of the detect
//! stages it names, on its own thread. The protocol, the thread and the options
//! ([`TtlConfig`]) live in [`crate::live::ttl`]; this file makes it a sink kind: an opened
//! TTL sink is a [`SignalSink`] the detect stages signal directly.

use super::{Opened, SignalSink, SinkConfig, SinkError};
use crate::live::config::section::ConfigError;
pub use crate::live::ttl::TtlConfig;
use crate::live::ttl::{TtlSender, TtlSink, TtlSummary};

impl SinkConfig for TtlConfig {
    const KIND: &'static str = "openephys_ttl";
    const ONLY_DETECT_STAGES: Option<&'static str> = Some("a TTL sink signals occurrences");

    fn stages(&self) -> Option<&[String]> {
        Some(&self.stages)
    }

    fn validate(&self) -> Vec<ConfigError> {
        TtlConfig::validate(self)
    }

    fn open(&self, name: &str, ctx: &zmq::Context) -> Result<Opened, SinkError> {
        TtlSink::spawn(name, self, ctx)
            .map(|t| Opened::Signals(Box::new(t)))
            .map_err(|e| SinkError {
                sink: name.into(),
                message: format!("cannot start its thread: {e}"),
            })
    }
}

impl SignalSink for TtlSink {
    fn sender(&self) -> TtlSender {
        self.sender.clone()
    }

    fn join(self: Box<Self>) -> TtlSummary {
        TtlSink::join(*self)
    }
}
