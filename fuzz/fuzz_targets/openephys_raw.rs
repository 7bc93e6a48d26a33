//! Open Ephys Event Broadcaster messages, raw binary mode
//! (`synfire::ingest::openephys::decode`): the input layout is `synfire_fuzz::OpenEphysInput`;
//! a body starting with `{` gets `2` (a raw spike header) instead, so every input reaches the
//! raw path.
#![no_main]

use libfuzzer_sys::fuzz_target;
use synfire::ingest::openephys::{Event, RAW_SPIKE, decode};
use synfire_fuzz::OpenEphysInput;

fuzz_target!(|data: &[u8]| {
    let Some(mut input) = OpenEphysInput::parse(data) else {
        return;
    };
    if let Some(body) = input.frames.get_mut(1)
        && body.first() == Some(&b'{')
    {
        body[0] = RAW_SPIKE;
    }
    let decoded = decode(&input.frames, input.key);
    synfire_fuzz::debug(|| format!("{decoded:?}"));
    if let Ok(Event::Spike { t_s, .. }) = decoded {
        assert!(t_s.is_finite() && t_s >= 0.0, "time {t_s}");
    }
});
