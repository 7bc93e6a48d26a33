//! Open Ephys Event Broadcaster messages, JSON mode (`synfire::ingest::openephys::decode`):
//! the input layout is `synfire_fuzz::OpenEphysInput`; the body is made to start with `{`
//! (the decoder's JSON test), so every input reaches the JSON path.
#![no_main]

use libfuzzer_sys::fuzz_target;
use synfire::ingest::openephys::{Event, decode};
use synfire_fuzz::OpenEphysInput;

fuzz_target!(|data: &[u8]| {
    let Some(mut input) = OpenEphysInput::parse(data) else {
        return;
    };
    if let Some(body) = input.frames.get_mut(1)
        && body.first() != Some(&b'{')
    {
        body.insert(0, b'{');
    }
    let decoded = decode(&input.frames, input.key);
    synfire_fuzz::debug(|| format!("{decoded:?}"));
    if let Ok(Event::Spike { t_s, .. }) = decoded {
        assert!(t_s.is_finite() && t_s >= 0.0, "time {t_s}");
    }
});
