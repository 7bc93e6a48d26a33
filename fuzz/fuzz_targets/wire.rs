//! synfire's wire format (`synfire::ingest::wire::decode`, `docs/wire-format.md`): one ZeroMQ
//! frame. A decoded message must encode back to a message that decodes to the same thing
//! (bit for bit, NaN samples included), and hold what the decoder promises.
#![no_main]

use libfuzzer_sys::fuzz_target;
use synfire::ingest::wire::{Message, decode, encode_end, encode_sensor, encode_spikes};

fuzz_target!(|data: &[u8]| {
    let decoded = decode(data);
    synfire_fuzz::debug(|| synfire_fuzz::outcome(&decoded));
    let Ok(message) = decoded else {
        return;
    };
    let again = match &message {
        Message::Spikes {
            session,
            first_seq,
            times,
            units,
        } => {
            assert_eq!(times.len(), units.len());
            assert!(times.iter().all(|t| t.is_finite() && *t >= 0.0));
            encode_spikes(*session, *first_seq, times, units)
        }
        Message::Sensor { session, frame } => {
            assert!(frame.channels > 0);
            assert_eq!(frame.values.len() % frame.channels, 0);
            assert!(frame.t0_s.is_finite() && frame.t0_s >= 0.0);
            assert!(frame.rate_hz.is_finite() && frame.rate_hz > 0.0);
            encode_sensor(*session, frame)
        }
        Message::End { session } => encode_end(*session, 0),
    };
    let back = decode(&again).expect("a re-encoded message decodes");
    // Debug prints every f64 exactly (NaN payloads aside, which bytes compare below).
    assert_eq!(format!("{message:?}"), format!("{back:?}"));
    if let (Message::Sensor { frame: a, .. }, Message::Sensor { frame: b, .. }) = (&message, &back)
    {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a.values), bits(&b.values));
    }
});
