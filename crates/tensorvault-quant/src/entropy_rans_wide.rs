//! The interleaved rANS decoder for 16, 32 and 64 lanes (`lanes_log2` 4..=6,
//! `docs/formats/quant.md` §12.2): the same stream layout as 1 to 8 lanes (symbol `i` on
//! lane `i % N`, one shared word stream in the order the decoder consumes it).
//!
//! Whole rounds of `N` symbols run on the CPU's vector units where it has them
//! ([`crate::entropy_rans_simd`]: AVX-512 with 16 lanes per vector, else AVX2 with 8),
//! several independent vectors per round so their table gathers overlap, while at least
//! `2 N` stream bytes remain (a round reads at most `N` words, so no vector load can pass
//! the end). The rest, and every stream on other CPUs, runs the portable loop
//! ([`crate::entropy_rans::step`] per symbol, lanes in an array). The vector rounds
//! compute exactly the portable loop's states, words and symbols, and every error (a
//! truncated stream, trailing words, a wrong final state) is raised by the shared code
//! after them, so both paths return the same symbols and the same typed errors for every
//! stream (tested both ways, and by the `quant_rans_wide` fuzz target).

use crate::entropy_rans::{checked_table, finish, read_states, step, truncated, DecEntry};
use crate::entropy_rans_simd::decode_rounds;
pub(crate) use crate::entropy_rans_simd::Kernel;
use crate::layout::{RANS_STATE_BYTES, V5_MAX_LANES_LOG2};
use crate::QuantError;

/// Most lanes a stream may have (`2^V5_MAX_LANES_LOG2`).
const MAX_LANES: usize = 1 << V5_MAX_LANES_LOG2;

/// Decode `out.len()` symbols of a stream of `2^lanes_log2` lanes (4..=6) that starts at
/// segment offset `base`, with the frequencies `freqs` (summing to `2^prob_bits`: the
/// table parser checks it, and so does this function).
///
/// # Errors
/// As [`decode`], and [`QuantError::CorruptField`] `frequency sum`.
pub(crate) fn decode_freqs(
    stream: &[u8],
    base: usize,
    freqs: &[u16],
    prob_bits: u8,
    lanes_log2: u8,
    kernel: Kernel,
    out: &mut [u8],
) -> Result<(), QuantError> {
    let table = checked_table(freqs, prob_bits, base)?;
    decode(stream, base, &table, prob_bits, lanes_log2, kernel, out)
}

/// Decode `out.len()` symbols of a stream of `2^lanes_log2` lanes (4..=6) that starts at
/// segment offset `base`; `table` has exactly `2^prob_bits` entries (the caller checks).
/// `kernel` says which vector units the whole rounds may use.
///
/// # Errors
/// As [`crate::entropy_rans::decode`]: [`QuantError::CorruptField`] (`rans stream`,
/// `rans state`, `rans final state`), [`QuantError::Truncated`] (`rans states`, `rans
/// stream`), [`QuantError::TrailingBytes`].
pub(crate) fn decode(
    stream: &[u8],
    base: usize,
    table: &[DecEntry],
    prob_bits: u8,
    lanes_log2: u8,
    kernel: Kernel,
    out: &mut [u8],
) -> Result<(), QuantError> {
    // The portable rounds go 8 lanes at a time: narrower streams belong to
    // `entropy_rans::decode` (every caller dispatches on `lanes_log2` first).
    debug_assert!(
        lanes_log2 >= 4,
        "wide decode of a {lanes_log2}-bit lane count"
    );
    let lanes = 1usize << lanes_log2.min(V5_MAX_LANES_LOG2);
    let present = base + stream.len();
    let mut states = [0u32; MAX_LANES];
    let x = &mut states[..lanes];
    let words = read_states(stream, base, x)?;
    let words_at = base + lanes * RANS_STATE_BYTES;
    let mut pos = 0usize;
    let done = decode_rounds(kernel, x, table, prob_bits, words, &mut pos, out);
    // `table` has 2^prob_bits entries, so `slot & mask` indexes it. The vector rounds
    // stop on a round boundary, so the rest starts on lane 0: whole rounds 8 lanes at a
    // time with their states in locals, then the partial round.
    let mask = (1u32 << prob_bits) - 1;
    let mut rounds = out[done..].chunks_exact_mut(lanes);
    for round in &mut rounds {
        for (xs, os) in x.chunks_exact_mut(8).zip(round.chunks_exact_mut(8)) {
            let mut g = [0u32; 8];
            g.copy_from_slice(xs);
            let r = g.iter_mut().zip(os.iter_mut()).try_for_each(|(s, o)| {
                *o = step(s, table, mask, prob_bits, words, &mut pos)?;
                Some(())
            });
            xs.copy_from_slice(&g);
            r.ok_or_else(|| truncated(words_at, pos, present))?;
        }
    }
    for (o, s) in rounds.into_remainder().iter_mut().zip(x.iter_mut()) {
        *o = step(s, table, mask, prob_bits, words, &mut pos)
            .ok_or_else(|| truncated(words_at, pos, present))?;
    }
    finish(x, base, pos, words.len(), present)
}

#[cfg(test)]
#[path = "entropy_rans_wide_tests.rs"]
mod tests;
