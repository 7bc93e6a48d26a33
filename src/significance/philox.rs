//! Philox4x32-10, the counter-based random number generator of Salmon, Moraes, Dror & Shaw,
//! "Parallel Random Numbers: As Easy as 1, 2, 3" (SC '11; the Random123 library, also cuRAND's
//! `curand_Philox4x32_10`).
//!
//! A draw is a pure function of a 128-bit counter and a 64-bit key: no state is carried from
//! one draw to the next, so a surrogate's spike `i` of unit `u` gets the same numbers whichever
//! thread, core or GPU computes it, in whatever order. The surrogates
//! ([`super::surrogate`]) address their draws as `counter = [i, u, s, tag]` (spike, unit,
//! surrogate, purpose) under `key = seed`; a GPU kernel that computes the same function from
//! the same counters generates the same surrogate bit for bit.
//!
//! This is our own code (about 30 lines) rather than a crate's because the device kernels must
//! compute exactly the same function and no maintained Rust crate provides it; the tests pin
//! it to Random123's published known-answer vectors (`kat_vectors`, `philox4x32 10`).

/// Round multipliers (Random123 `PHILOX_M4x32_0`, `PHILOX_M4x32_1`).
const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
/// Key increments per round: the golden ratio and √3 − 1 (Random123 `PHILOX_W32_0/1`).
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

#[inline]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = u64::from(a) * u64::from(b);
    ((p >> 32) as u32, p as u32)
}

/// Philox4x32 with 10 rounds: four 32-bit words from `counter` under `key`.
#[inline]
#[must_use]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let (hi0, lo0) = mulhilo(M0, c[0]);
        let (hi1, lo1) = mulhilo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The key of a 64-bit seed: its low and high words.
#[must_use]
pub fn key_of(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

/// A double in `[0, 1)` with 53 random bits from two words (`hi` first):
/// `((hi << 32 | lo) >> 11) · 2⁻⁵³`. Exact in f64, the same on any IEEE-754 machine.
#[inline]
#[must_use]
pub fn unit_f64(hi: u32, lo: u32) -> f64 {
    let bits = ((u64::from(hi) << 32) | u64::from(lo)) >> 11;
    bits as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Two doubles in `[0, 1)` from one Philox block: words (0, 1) and (2, 3).
#[inline]
#[must_use]
pub fn uniform_pair(counter: [u32; 4], key: [u32; 2]) -> [f64; 2] {
    let w = philox4x32_10(counter, key);
    [unit_f64(w[0], w[1]), unit_f64(w[2], w[3])]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's `kat_vectors`, the three `philox4x32 10` lines: counter, key, output.
    #[test]
    fn known_answers_of_random123() {
        let cases = [
            (
                [0, 0, 0, 0],
                [0, 0],
                [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
            ),
            (
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0],
                [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
            ),
        ];
        for (counter, key, expected) in cases {
            assert_eq!(
                philox4x32_10(counter, key),
                expected,
                "{counter:x?} {key:x?}"
            );
        }
    }

    #[test]
    fn uniforms_lie_in_the_unit_interval_and_look_uniform() {
        assert_eq!(unit_f64(0, 0), 0.0);
        assert!(unit_f64(u32::MAX, u32::MAX) < 1.0);
        let key = key_of(7);
        let n = 100_000u32;
        let mut bins = [0u32; 10];
        for i in 0..n / 2 {
            for u in uniform_pair([i, 1, 2, 3], key) {
                assert!((0.0..1.0).contains(&u));
                bins[(u * 10.0) as usize] += 1;
            }
        }
        // Each decile holds 10,000 ± 5 standard deviations (σ = 94.9).
        for b in bins {
            assert!((9_525..=10_475).contains(&b), "{bins:?}");
        }
    }
}
