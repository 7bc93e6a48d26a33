//! `kind = "zmq_pub"`: each result as one ZeroMQ PUB message of two frames, the stage name
//! (the topic, so a subscriber picks the stages it shows) and the JSON object.
//!
//! ```toml
//! [sinks.pub]
//! kind = "zmq_pub"
//! endpoint = "tcp://127.0.0.1:5560"
//! mode = "bind"            # default; or "connect"
//! stages = ["episodes"]    # default: every stage
//! ```

use std::io;

use serde::Deserialize;

use super::{LineWriter, Opened, Sink, SinkConfig, SinkError};
use crate::live::config::section::{ConfigError, SocketMode};

/// `[sinks.<name>]` with `kind = "zmq_pub"`.
#[derive(Clone, Debug, Deserialize)]
pub struct ZmqPubConfig {
    /// Endpoint, e.g. `tcp://127.0.0.1:5560`.
    pub endpoint: String,
    /// `bind` (default) or `connect`.
    pub mode: Option<SocketMode>,
    /// Stages whose results it publishes (default: all).
    pub stages: Option<Vec<String>>,
}

impl SinkConfig for ZmqPubConfig {
    const KIND: &'static str = "zmq_pub";

    fn stages(&self) -> Option<&[String]> {
        self.stages.as_deref()
    }

    fn validate(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        if !self.endpoint.contains("://") {
            errors.push(ConfigError::new(
                "endpoint",
                format!(
                    "`{}` is not a ZeroMQ endpoint like `tcp://127.0.0.1:5560`",
                    self.endpoint
                ),
            ));
        }
        errors
    }

    fn open(&self, name: &str, ctx: &zmq::Context) -> Result<Opened, SinkError> {
        sink(
            name,
            ctx,
            &self.endpoint,
            self.mode != Some(SocketMode::Connect),
            self.stages.clone(),
        )
        .map(Opened::Lines)
    }
}

/// A ZeroMQ PUB sink named `name` on `endpoint` (bound, or connected when `bind` is false),
/// taking the results of `stages` (`None`: all).
///
/// # Errors
/// [`SinkError`] naming the endpoint.
pub fn sink(
    name: &str,
    ctx: &zmq::Context,
    endpoint: &str,
    bind: bool,
    stages: Option<Vec<String>>,
) -> Result<Sink, SinkError> {
    let err = |m: String| SinkError {
        sink: name.into(),
        message: format!("endpoint `{endpoint}`: {m}"),
    };
    let s = ctx
        .socket(zmq::PUB)
        .map_err(|e| err(format!("cannot create a PUB socket: {e}")))?;
    s.set_linger(1000)
        .map_err(|e| err(format!("cannot set options: {e}")))?;
    if bind {
        s.bind(endpoint)
            .map_err(|e| err(format!("cannot bind: {e}")))?;
    } else {
        s.connect(endpoint)
            .map_err(|e| err(format!("cannot connect: {e}")))?;
    }
    Ok(Sink::custom(name, stages, Box::new(Publisher(s))))
}

/// A PUB socket: topic = stage name.
struct Publisher(zmq::Socket);

impl LineWriter for Publisher {
    fn write_line(&mut self, stage: &str, json: &str) -> io::Result<()> {
        self.0
            .send_multipart([stage.as_bytes(), json.as_bytes()], 0)
            .map_err(io::Error::other)
    }
}
