//! Lossless entropy coding of k-bit codes: a static frequency table per run of codes and
//! interleaved rANS streams ([`crate::entropy_rans`]). The format is section 12 of
//! `docs/formats/quant.md`; the segment envelope that uses it is [`crate::segment_v5`].
//!
//! A table holds one frequency per symbol of the `2^k`-symbol alphabet, quantized so they
//! sum to exactly `2^prob_bits` (`prob_bits <= 12`), each symbol that occurs getting at
//! least 1. It is stored as `2^k` LEB128 varints of at most two bytes. The encoder picks
//! the precision that minimizes the estimated table plus stream size.
//!
//! ```
//! use tensorvault_quant::entropy::{decode_codes, encode_codes};
//! let codes: Vec<u8> = (0..4096u32).map(|i| [3u8, 4, 3, 2, 4, 3, 5, 3][(i % 8) as usize]).collect();
//! let coded = encode_codes(&codes, 3, 2)?;
//! assert!(coded.bytes.len() < codes.len() * 3 / 8); // fewer bytes than 3-bit packing
//! let mut back = vec![0u8; codes.len()];
//! decode_codes(&coded.bytes, 0, 3, coded.prob_bits, 2, &mut back)?;
//! assert_eq!(back, codes);
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::entropy_rans;
use crate::entropy_rans_wide::{self, Kernel};
use crate::error::corrupt;
use crate::layout::{MAX_BITS, MIN_BITS, V5_MAX_FREQ_BYTES, V5_MAX_LANES_LOG2, V5_MAX_PROB_BITS};
use crate::QuantError;

/// A run of codes entropy-coded: the frequency table then the rANS stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coded {
    /// Precision of the table (its frequencies sum to `2^prob_bits`).
    pub prob_bits: u8,
    /// The table (`2^bits` varints) followed by the stream.
    pub bytes: Vec<u8>,
}

/// The quantized frequencies of one run: `freqs.len() == 2^bits`, summing to
/// `2^prob_bits`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreqTable {
    /// Precision: the frequencies sum to `2^prob_bits`.
    pub prob_bits: u8,
    /// One frequency per symbol.
    pub freqs: Vec<u16>,
}

impl FreqTable {
    /// Bytes of the stored table.
    #[must_use]
    pub fn stored_len(&self) -> usize {
        self.freqs.iter().map(|&f| varint_len(f)).sum()
    }

    fn write(&self, out: &mut Vec<u8>) {
        for &f in &self.freqs {
            if f < 0x80 {
                out.push(f as u8);
            } else {
                out.push(0x80 | (f & 0x7F) as u8);
                out.push((f >> 7) as u8);
            }
        }
    }

    /// Read a table of `2^bits` frequencies at precision `prob_bits` from the start of
    /// `bytes`; `base` is the offset of `bytes[0]` in the segment (for errors) and
    /// `present` the segment's length. Returns the table and the bytes it took.
    ///
    /// # Errors
    /// [`QuantError::Truncated`] (`frequency table`) if `bytes` ends inside it;
    /// [`QuantError::CorruptField`] `frequency` (a varint longer than two bytes or a
    /// frequency above `2^prob_bits`, at its offset) or `frequency sum` (the total is not
    /// `2^prob_bits`, at the table's offset).
    pub fn parse(
        bytes: &[u8],
        base: usize,
        present: usize,
        bits: u8,
        prob_bits: u8,
    ) -> Result<(Self, usize), QuantError> {
        let symbols = 1usize << bits;
        let total = 1u32 << prob_bits;
        let mut freqs = Vec::with_capacity(symbols);
        let mut pos = 0usize;
        let mut sum = 0u32;
        for _ in 0..symbols {
            let at = base + pos;
            let Some(&b0) = bytes.get(pos) else {
                return Err(truncated_table(base, at, present));
            };
            let f = if b0 < 0x80 {
                pos += 1;
                u32::from(b0)
            } else {
                let Some(&b1) = bytes.get(pos + 1) else {
                    return Err(truncated_table(base, at + 1, present));
                };
                if b1 >= 0x80 {
                    return Err(corrupt(
                        "frequency",
                        at + 1,
                        b1.into(),
                        "a frequency takes at most two varint bytes",
                    ));
                }
                pos += V5_MAX_FREQ_BYTES;
                u32::from(b0 & 0x7F) | u32::from(b1) << 7
            };
            if f > total {
                return Err(corrupt("frequency", at, f.into(), "exceeds 2^prob_bits"));
            }
            sum += f; // <= 256 * 4096: no overflow
            freqs.push(f as u16);
        }
        if sum != total {
            return Err(corrupt(
                "frequency sum",
                base,
                sum.into(),
                "the frequencies must sum to 2^prob_bits",
            ));
        }
        Ok((Self { prob_bits, freqs }, pos))
    }
}

fn truncated_table(base: usize, at: usize, present: usize) -> QuantError {
    QuantError::Truncated {
        what: "frequency table",
        offset: base as u64,
        end: at as u64 + 1,
        present,
    }
}

fn varint_len(f: u16) -> usize {
    if f < 0x80 {
        1
    } else {
        V5_MAX_FREQ_BYTES
    }
}

/// Symbol counts of `codes` over the `2^bits` alphabet.
///
/// # Errors
/// [`QuantError::InvalidBits`] for `bits` outside 2..=8; [`QuantError::CodeOutOfRange`]
/// for a code `>= 2^bits`.
pub fn histogram(codes: &[u8], bits: u8) -> Result<Vec<u64>, QuantError> {
    check_bits(bits)?;
    // Four tables, one per code of each run of four: runs of equal codes do not wait on
    // the previous increment of the same counter.
    let mut h = [[0u64; 256]; 4];
    let mut runs = codes.chunks_exact(4);
    for r in &mut runs {
        h[0][usize::from(r[0])] += 1;
        h[1][usize::from(r[1])] += 1;
        h[2][usize::from(r[2])] += 1;
        h[3][usize::from(r[3])] += 1;
    }
    for &c in runs.remainder() {
        h[0][usize::from(c)] += 1;
    }
    let symbols = 1usize << bits;
    // A code past the alphabet was counted above it: only then look for the first one.
    if h.iter().any(|t| t[symbols..].iter().any(|&n| n > 0)) {
        if let Some(index) = codes.iter().position(|&c| usize::from(c) >= symbols) {
            return Err(QuantError::CodeOutOfRange {
                index,
                code: codes[index],
                bits,
            });
        }
    }
    Ok((0..symbols)
        .map(|s| h[0][s] + h[1][s] + h[2][s] + h[3][s])
        .collect())
}

fn check_bits(bits: u8) -> Result<(), QuantError> {
    if (MIN_BITS..=MAX_BITS).contains(&bits) {
        Ok(())
    } else {
        Err(QuantError::InvalidBits { bits })
    }
}

/// Quantize `counts` to frequencies summing to `2^prob_bits`, every symbol that occurs
/// getting at least 1. `None` when more symbols occur than `2^prob_bits` slots, or none
/// does.
#[must_use]
pub fn quantize(counts: &[u64], prob_bits: u8) -> Option<FreqTable> {
    let total: u64 = counts.iter().sum();
    let target = 1i64 << prob_bits;
    let present = counts.iter().filter(|&&c| c > 0).count() as i64;
    if total == 0 || present > target || prob_bits > V5_MAX_PROB_BITS {
        return None;
    }
    let mut f: Vec<i64> = counts
        .iter()
        .map(|&c| {
            if c == 0 {
                0
            } else {
                // Nearest to the exact share, at least 1 (u128: no overflow).
                let share = (u128::from(c) * (target as u128) * 2 + u128::from(total))
                    / (2 * u128::from(total));
                (share as i64).max(1)
            }
        })
        .collect();
    let mut diff = target - f.iter().sum::<i64>();
    // Fix the rounding: each step moves one unit where it costs the fewest bits (give to
    // the largest count per unit, take from the smallest count per unit with f > 1; ties
    // go to the lowest symbol). The sign of `diff` never changes, and a step changes only
    // the picked symbol's ratio, so a heap gives the same picks as a scan per step.
    let sign = diff.signum();
    let key = |s: usize, f: &[i64]| {
        let r = ratio(counts[s], f[s]);
        Cand {
            key: if sign > 0 { r } else { -r },
            sym: s,
        }
    };
    let eligible = |s: usize, f: &[i64]| if sign > 0 { counts[s] > 0 } else { f[s] > 1 };
    let mut heap: BinaryHeap<Cand> = (0..f.len())
        .filter(|&s| eligible(s, &f))
        .map(|s| key(s, &f))
        .collect();
    while diff != 0 {
        let s = heap.pop()?.sym; // never empty for present <= target; `?` keeps it total
        f[s] += sign;
        diff -= sign;
        if eligible(s, &f) {
            heap.push(key(s, &f));
        }
    }
    Some(FreqTable {
        prob_bits,
        freqs: f.iter().map(|&v| v as u16).collect(),
    })
}

/// A heap entry: the largest key first, the lowest symbol among equal keys.
struct Cand {
    key: f64,
    sym: usize,
}

impl PartialEq for Cand {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}

impl Eq for Cand {}

impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Cand {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key.total_cmp(&o.key).then(o.sym.cmp(&self.sym))
    }
}

fn ratio(count: u64, f: i64) -> f64 {
    count as f64 / f as f64
}

/// Estimated bytes of the table plus the stream (without the flushed states) for
/// `counts` coded with `t`.
#[must_use]
pub fn estimated_len(counts: &[u64], t: &FreqTable) -> f64 {
    let pb = f64::from(t.prob_bits);
    let bits: f64 = counts
        .iter()
        .zip(&t.freqs)
        .filter(|(&c, _)| c > 0)
        .map(|(&c, &f)| c as f64 * (pb - f64::from(f).log2()))
        .sum();
    t.stored_len() as f64 + bits / 8.0
}

/// The table for `counts` whose estimated table plus stream size is smallest over every
/// precision from 1 to 12 bits. `None` when no code occurs.
#[must_use]
pub fn best_table(counts: &[u64]) -> Option<FreqTable> {
    (1..=V5_MAX_PROB_BITS)
        .filter_map(|pb| quantize(counts, pb))
        .min_by(|a, b| estimated_len(counts, a).total_cmp(&estimated_len(counts, b)))
}

/// Bounds `(lo, hi)` on the bytes [`encode_with`] writes (table, lane states and stream
/// words) for `n` codes of histogram `counts` under `t` with `2^lanes_log2` lanes, without
/// coding them (an encoder that only needs to know whether a candidate fits a budget).
///
/// Why they hold (`docs/formats/quant.md` §12.2's coder, one lane; lanes add up): with
/// `Φ = 16 W + log2 x` (`W` words written, `x` the state), `Φ` starts at 16 and ends in
/// `[16 W + 16, 16 W + 32)`. Coding a symbol of frequency `f` moves `log2 x` by
/// `p - log2 f` (its information) plus at most `log2(1 + f / x_r)` and at least
/// `log2(1 - (f - 1) / x_r)`, where the state before coding `x_r >= min(2^16, f 2^(16-p))`,
/// so `f / x_r <= 2^(p-16)`; a renormalization loses less than `-log2(1 - 2^(p-16))`
/// (it happens at `x >= 2^(32-p) f`). Hence, with `I` the codes' information and
/// `e = -log2(1 - 2^(p-16))`, `(I - n e - 16 N) / (16 + e) < W <= (I + n log2(1 + 2^(p-16))) / 16`.
#[must_use]
pub fn coded_len_bounds(counts: &[u64], t: &FreqTable, lanes_log2: u8) -> (usize, usize) {
    let pb = f64::from(t.prob_bits);
    let n: u64 = counts.iter().sum();
    let info: f64 = counts
        .iter()
        .zip(&t.freqs)
        .filter(|(&c, _)| c > 0)
        .map(|(&c, &f)| c as f64 * (pb - f64::from(f).log2()))
        .sum();
    let lanes = 1u64 << lanes_log2.min(crate::layout::V5_MAX_LANES_LOG2);
    let r = 2f64.powf(pb - 16.0);
    let (e_lo, e_hi) = (-(1.0 - r).log2(), (1.0 + r).log2());
    // Slack for the f64 sum (|error| far below one bit for n < 2^32).
    let slack = 1.0 + 1e-9 * n as f64 * (pb + 1.0);
    let w_lo = ((info - n as f64 * e_lo - 16.0 * lanes as f64 - slack) / (16.0 + e_lo))
        .floor()
        .max(0.0);
    let w_hi = ((info + n as f64 * e_hi + slack) / 16.0).floor().max(0.0);
    let fixed = t.stored_len() + lanes as usize * crate::layout::RANS_STATE_BYTES;
    let word = crate::layout::RANS_WORD_BYTES;
    (fixed + w_lo as usize * word, fixed + w_hi as usize * word)
}

/// Entropy-code `codes` (each `< 2^bits`) with `2^lanes_log2` interleaved rANS lanes and
/// the table [`best_table`] picks.
///
/// # Errors
/// [`QuantError::InvalidBits`], [`QuantError::CodeOutOfRange`];
/// [`QuantError::InvalidParam`] for `lanes_log2 > 6` or an empty `codes`.
pub fn encode_codes(codes: &[u8], bits: u8, lanes_log2: u8) -> Result<Coded, QuantError> {
    let counts = histogram(codes, bits)?;
    check_lanes(lanes_log2)?;
    let Some(table) = best_table(&counts) else {
        return Err(QuantError::InvalidParam {
            field: "codes",
            value: 0.0,
            reason: "there is nothing to entropy-code",
        });
    };
    Ok(encode_with(codes, &table, lanes_log2))
}

fn check_lanes(lanes_log2: u8) -> Result<(), QuantError> {
    if lanes_log2 > V5_MAX_LANES_LOG2 {
        return Err(QuantError::InvalidParam {
            field: "lanes_log2",
            value: lanes_log2.into(),
            reason: "at most 6 (64 lanes)",
        });
    }
    Ok(())
}

/// Code `codes` with a given table (every code must have a nonzero frequency).
pub(crate) fn encode_with(codes: &[u8], table: &FreqTable, lanes_log2: u8) -> Coded {
    let mut bytes = Vec::with_capacity(table.stored_len() + codes.len());
    table.write(&mut bytes);
    entropy_rans::encode(codes, &table.freqs, table.prob_bits, lanes_log2, &mut bytes);
    Coded {
        prob_bits: table.prob_bits,
        bytes,
    }
}

/// Decode `out.len()` codes from `bytes` (a table of `2^bits` frequencies at
/// `prob_bits`, then the stream of `2^lanes_log2` lanes running to the end of `bytes`).
/// `base` is the offset of `bytes` in its segment (errors name segment offsets).
///
/// # Errors
/// [`QuantError::InvalidBits`], [`QuantError::InvalidParam`] (`lanes_log2 > 6`,
/// `prob_bits > 12`); the table's errors ([`FreqTable::parse`]); the stream's:
/// [`QuantError::Truncated`] (`rans states` / `rans stream`), [`QuantError::CorruptField`]
/// (`rans stream` of odd length, `rans state` out of range, `rans final state` not back
/// at its start), [`QuantError::TrailingBytes`] (words left after the last symbol).
pub fn decode_codes(
    bytes: &[u8],
    base: usize,
    bits: u8,
    prob_bits: u8,
    lanes_log2: u8,
    out: &mut [u8],
) -> Result<(), QuantError> {
    decode_codes_with(bytes, base, bits, prob_bits, lanes_log2, Kernel::Best, out)
}

/// [`decode_codes`] with the portable decoder only (no vector rounds for 16 to 64 lanes):
/// the same codes and the same errors for every input, slower. For differential tests
/// and fuzzing of the vector decoder.
///
/// # Errors
/// As [`decode_codes`].
pub fn decode_codes_portable(
    bytes: &[u8],
    base: usize,
    bits: u8,
    prob_bits: u8,
    lanes_log2: u8,
    out: &mut [u8],
) -> Result<(), QuantError> {
    decode_codes_with(
        bytes,
        base,
        bits,
        prob_bits,
        lanes_log2,
        Kernel::Portable,
        out,
    )
}

/// [`decode_codes`] with the AVX2 kernel for 16 to 64 lanes even where the CPU has
/// AVX-512 (the portable loop where it has no AVX2): the same codes and the same errors
/// for every input. For differential fuzzing of both vector kernels on one machine
/// (`quant_rans_wide`).
///
/// # Errors
/// As [`decode_codes`].
#[doc(hidden)]
pub fn decode_codes_avx2(
    bytes: &[u8],
    base: usize,
    bits: u8,
    prob_bits: u8,
    lanes_log2: u8,
    out: &mut [u8],
) -> Result<(), QuantError> {
    decode_codes_with(bytes, base, bits, prob_bits, lanes_log2, Kernel::Avx2, out)
}

fn decode_codes_with(
    bytes: &[u8],
    base: usize,
    bits: u8,
    prob_bits: u8,
    lanes_log2: u8,
    kernel: Kernel,
    out: &mut [u8],
) -> Result<(), QuantError> {
    check_bits(bits)?;
    check_lanes(lanes_log2)?;
    if prob_bits > V5_MAX_PROB_BITS {
        return Err(QuantError::InvalidParam {
            field: "prob_bits",
            value: prob_bits.into(),
            reason: "at most 12",
        });
    }
    let present = base + bytes.len();
    let (table, used) = FreqTable::parse(bytes, base, present, bits, prob_bits)?;
    let stream = &bytes[used..];
    if lanes_log2 <= entropy_rans::NARROW_MAX_LANES_LOG2 {
        return entropy_rans::decode(
            stream,
            base + used,
            &table.freqs,
            prob_bits,
            lanes_log2,
            out,
        );
    }
    entropy_rans_wide::decode_freqs(
        stream,
        base + used,
        &table.freqs,
        prob_bits,
        lanes_log2,
        kernel,
        out,
    )
}

/// Which vector kernel decodes 16 to 64 lanes on this CPU: `"avx512"`, `"avx2"` or
/// `"portable"` (for benchmark labels).
#[must_use]
pub fn wide_kernel() -> &'static str {
    crate::entropy_rans_simd::kernel()
}

#[cfg(test)]
#[path = "entropy_tests.rs"]
mod tests;
