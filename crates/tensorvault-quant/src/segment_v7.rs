//! The model-coded ECSQ segment (TQTC version 7): a run of values rotated in blocks,
//! quantized with one uniform mid-rise step for the whole run, and rANS-coded with
//! frequencies from a parametric model ([`crate::ecsq_model`]: a discretised zero-mean
//! Gaussian) whose one parameter per block, the block's RMS in steps on a log ladder,
//! is the block's side byte. No frequency table is stored. Byte layout:
//! `docs/formats/quant.md` §14.
//!
//! Why: a v5 envelope over ECSQ stores a `2^k`-entry table per segment, which at tier
//! budgets (4096 values) costs what a wider alphabet would buy; the rotation makes each
//! block close to Gaussian, so one byte per block describes it. [`encode_to_fit`] picks
//! the finest step on a fixed ladder whose segment fits a byte budget.
//!
//! ```
//! use tensorvault_quant::segment_v7::{decode, encode_to_fit, V7Params};
//! let x: Vec<f32> = (0..4096).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1e-3).collect();
//! let p = V7Params { bits: 7, block_log2: 10, seed: 7, lanes_log2: 2 };
//! let bytes = encode_to_fit(&p, &x, 2688)?.expect("fits");
//! assert!(bytes.len() <= 2688);
//! let mut y = Vec::new();
//! decode(&bytes, x.len(), &mut y)?;
//! assert_eq!(y.len(), x.len());
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use std::sync::Arc;

use crate::ecsq_model::{side_byte, table};
use crate::entropy_rans::{encode_wide, WideDecoder, WideTable};
use crate::error::{check_finite, corrupt, segment_prefix_bits};
use crate::layout::{
    MAGIC, V7_BLOCK_LOG2_OFFSET, V7_HEADER_LEN, V7_LANES_LOG2_OFFSET, V7_MAX_BITS,
    V7_MAX_BLOCK_LOG2, V7_MAX_LANES_LOG2, V7_MAX_MAGNITUDE_LOG2, V7_MAX_VALUES, V7_MIN_BITS,
    V7_MIN_BLOCK_LOG2, V7_RATE_MIN, V7_RATE_PER_OCTAVE, V7_RATE_RUNGS, V7_SEED_OFFSET,
    V7_STEP_OFFSET, V7_VALUES_OFFSET, V7_VERSION,
};
use crate::le::u32_at;
use crate::rotation::Rotation;
use crate::QuantError;

/// Settings of a v7 segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V7Params {
    /// Code width `k`, 2..=12 (`2^k` levels, clamped at the alphabet's ends).
    pub bits: u8,
    /// log2 of the rotation block, 2..=10 (a shorter last block is left unrotated).
    pub block_log2: u8,
    /// Seed of the rotation's sign pattern.
    pub seed: u32,
    /// log2 of the rANS lanes, 0..=3 (4 bytes of state each).
    pub lanes_log2: u8,
}

impl V7Params {
    fn check(&self) -> Result<(), QuantError> {
        let bad = |field, value: u8, reason| QuantError::InvalidParam {
            field,
            value: value.into(),
            reason,
        };
        if !(V7_MIN_BITS..=V7_MAX_BITS).contains(&self.bits) {
            return Err(bad("bits", self.bits, "must be in 2..=12"));
        }
        if !(V7_MIN_BLOCK_LOG2..=V7_MAX_BLOCK_LOG2).contains(&self.block_log2) {
            return Err(bad("block_log2", self.block_log2, "must be in 2..=10"));
        }
        if self.lanes_log2 > V7_MAX_LANES_LOG2 {
            return Err(bad("lanes_log2", self.lanes_log2, "must be in 0..=3"));
        }
        Ok(())
    }
}

/// Whether a step keeps every decoded value, and the inverse rotation's partial sums,
/// inside the f32 range: `step * 2^(k-1) * 2^ceil(b/2) < 2^126` (§14.4).
fn step_ok(step: f32, bits: u8, block_log2: u8) -> bool {
    let log2 = i32::from(bits) - 1 + (i32::from(block_log2) + 1) / 2;
    step.is_finite()
        && step > 0.0
        && f64::from(step) * 2f64.powi(log2) < 2f64.powi(V7_MAX_MAGNITUDE_LOG2)
}

/// The rotated run an encoder quantizes: `y` (whole blocks rotated, a shorter last block
/// as it is), each block's mean square, the largest magnitude.
struct Rotated {
    y: Vec<f32>,
    mean_sq: Vec<f64>,
    max_abs: f32,
}

fn rotate(p: &V7Params, x: &[f32]) -> Result<Rotated, QuantError> {
    p.check()?;
    if x.is_empty() || x.len() > V7_MAX_VALUES {
        return Err(QuantError::InvalidParam {
            field: "values",
            value: x.len() as f64,
            reason: "a v7 segment holds 1..=2^20 values",
        });
    }
    check_finite(x)?;
    let block = 1usize << p.block_log2;
    let rot = Rotation::new(p.seed, block)?;
    let mut y = x.to_vec();
    let mut mean_sq = Vec::with_capacity(x.len().div_ceil(block));
    let mut max_abs = 0f32;
    for (bi, blk) in y.chunks_mut(block).enumerate() {
        if blk.len() == block {
            rot.forward(blk);
        }
        let m = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        if !m.is_finite() {
            return Err(QuantError::ScaleOverflow {
                group: bi,
                max_abs: m,
            });
        }
        max_abs = max_abs.max(m);
        let ss: f64 = blk.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        mean_sq.push(ss / blk.len() as f64);
    }
    Ok(Rotated {
        y,
        mean_sq,
        max_abs,
    })
}

/// The code of `v` at `step`: `clamp(floor(v / step), -2^(k-1), 2^(k-1) - 1) + 2^(k-1)`.
#[inline]
fn code_of(v: f32, step: f32, half: i32) -> u16 {
    let q = (v / step).floor();
    // Clamped in f32 first: a float-to-int cast saturates, but the clamp says what is meant.
    let q = q.clamp(-(half as f32), (half - 1) as f32) as i32;
    (q + half) as u16
}

/// Encode `x` with step `step` (not searched): the segment bytes.
fn encode_at(p: &V7Params, r: &Rotated, step: f32) -> Vec<u8> {
    let block = 1usize << p.block_log2;
    let half = 1i32 << (p.bits - 1);
    let codes: Vec<u16> = r.y.iter().map(|&v| code_of(v, step, half)).collect();
    let sides: Vec<u8> = r
        .mean_sq
        .iter()
        .map(|&ms| side_byte(ms.sqrt() / f64::from(step)))
        .collect();
    let owned: Vec<_> = sides.iter().map(|&j| table(p.bits, j)).collect();
    let tables: Vec<&WideTable> = owned.iter().map(|t| &**t).collect();
    let mut out = Vec::with_capacity(V7_HEADER_LEN + sides.len() + r.y.len() * 2);
    out.extend_from_slice(&MAGIC);
    out.push(V7_VERSION);
    out.push(p.bits);
    out.push(p.block_log2);
    out.push(p.lanes_log2);
    out.extend_from_slice(&p.seed.to_le_bytes());
    // n <= 2^20 (rotate checked it).
    out.extend_from_slice(&(r.y.len() as u32).to_le_bytes());
    out.extend_from_slice(&step.to_le_bytes());
    out.extend_from_slice(&sides);
    encode_wide(&codes, block, &tables, p.lanes_log2, &mut out);
    out
}

/// Encode `x` with quantizer step `step`.
///
/// # Errors
/// [`QuantError::InvalidParam`] for settings out of range, an empty or over-long `x`
/// (1..=2^20 values) or a step that is not finite and positive or would let decoded
/// values leave the f32 range; [`QuantError::NonFinite`] for NaN or infinite values;
/// [`QuantError::ScaleOverflow`] when a rotated block leaves the f32 range.
pub fn encode(p: &V7Params, x: &[f32], step: f32) -> Result<Vec<u8>, QuantError> {
    let r = rotate(p, x)?;
    if !step_ok(step, p.bits, p.block_log2) {
        return Err(QuantError::InvalidParam {
            field: "step",
            value: step.into(),
            reason: "must be finite, positive and below 2^(126 - (k-1) - ceil(b/2))",
        });
    }
    Ok(encode_at(p, &r, step))
}

/// The step at rung `t` of the rate ladder over the clamp-free step `s0`:
/// `s0 * (1 + (t mod 32) / 32) * 2^(t div 32)`, strictly increasing in `t`.
#[must_use]
pub fn step_at(s0: f32, t: i32) -> f32 {
    let e = t.div_euclid(V7_RATE_PER_OCTAVE);
    let i = t.rem_euclid(V7_RATE_PER_OCTAVE);
    s0 * (1.0 + i as f32 / V7_RATE_PER_OCTAVE as f32) * 2f32.powi(e)
}

/// Squared error of quantizing the rotated run at `step` (clamped codes included), in the
/// rotated domain (the rotation is orthonormal: the same up to rounding).
fn squared_error(r: &Rotated, step: f32, half: i32) -> f64 {
    r.y.iter()
        .map(|&v| {
            let q = i32::from(code_of(v, step, half)) - half;
            let e = f64::from(v) - (f64::from(q) + 0.5) * f64::from(step);
            e * e
        })
        .sum()
}

/// Encode `x` within `max_len` bytes on the rate ladder ([`step_at`]; rung 0 is the
/// clamp-free step `max |rotated value| / 2^(k-1)`, at least the smallest normal f32).
/// When rung 0 does not fit: the finest fitting rung above it (a binary search; the
/// length is not strictly monotone in the step, so this finds one boundary). When it
/// fits: rungs below 0, which clamp the largest values (the model prices them in its end
/// symbols), are taken one at a time while the squared error keeps falling and the
/// segment still fits, down to `V7_RATE_MIN` (three octaves finer). `Ok(None)` when not
/// even the coarsest rung fits. Deterministic: the same input gives the same bytes.
///
/// # Errors
/// As [`encode`] (but for the step, which this picks).
pub fn encode_to_fit(
    p: &V7Params,
    x: &[f32],
    max_len: usize,
) -> Result<Option<Vec<u8>>, QuantError> {
    let r = rotate(p, x)?;
    let half = 1i32 << (p.bits - 1);
    let s0 = (r.max_abs / half as f32).max(f32::MIN_POSITIVE);
    let try_rung = |t: i32| -> Option<Vec<u8>> {
        let step = step_at(s0, t);
        if !step_ok(step, p.bits, p.block_log2) {
            return None;
        }
        let bytes = encode_at(p, &r, step);
        (bytes.len() <= max_len).then_some(bytes)
    };
    if let Some(mut best) = try_rung(0) {
        let mut err = squared_error(&r, step_at(s0, 0), half);
        for t in (V7_RATE_MIN..0).rev() {
            let e = squared_error(&r, step_at(s0, t), half);
            if e >= err {
                break;
            }
            let Some(b) = try_rung(t) else {
                break;
            };
            (best, err) = (b, e);
        }
        return Ok(Some(best));
    }
    let Some(mut best) = try_rung(V7_RATE_RUNGS) else {
        return Ok(None);
    };
    // Invariant: rung `lo` does not fit, rung `hi` does (`best` is its segment).
    let (mut lo, mut hi) = (0, V7_RATE_RUNGS);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match try_rung(mid) {
            Some(b) => {
                hi = mid;
                best = b;
            }
            None => lo = mid,
        }
    }
    Ok(Some(best))
}

/// A v7 segment whose header is validated and whose side bytes are present (the stream
/// is checked as it is decoded).
#[derive(Clone, Debug)]
pub struct SegmentV7<'a> {
    bits: u8,
    block_log2: u8,
    lanes_log2: u8,
    seed: u32,
    n: usize,
    step: f32,
    sides: &'a [u8],
    stream: &'a [u8],
}

impl<'a> SegmentV7<'a> {
    /// Validate the header of `bytes` as a v7 segment and check its side bytes are
    /// present.
    ///
    /// # Errors
    /// [`QuantError::Truncated`] (`v7 header`, `v7 side bytes`), [`QuantError::BadMagic`],
    /// [`QuantError::UnsupportedVersion`], [`QuantError::CorruptField`] (`bits`,
    /// `block_log2`, `lanes_log2`, `values`, `step`).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, QuantError> {
        let present = bytes.len();
        let (h, bits) = segment_prefix_bits(
            bytes,
            "v7 header",
            V7_HEADER_LEN,
            V7_VERSION,
            (V7_MIN_BITS, V7_MAX_BITS),
            "must be in 2..=12",
        )?;
        let block_log2 = h[V7_BLOCK_LOG2_OFFSET];
        if !(V7_MIN_BLOCK_LOG2..=V7_MAX_BLOCK_LOG2).contains(&block_log2) {
            return Err(corrupt(
                "block_log2",
                V7_BLOCK_LOG2_OFFSET,
                block_log2.into(),
                "must be in 2..=10",
            ));
        }
        let lanes_log2 = h[V7_LANES_LOG2_OFFSET];
        if lanes_log2 > V7_MAX_LANES_LOG2 {
            return Err(corrupt(
                "lanes_log2",
                V7_LANES_LOG2_OFFSET,
                lanes_log2.into(),
                "must be in 0..=3 (1 to 8 lanes)",
            ));
        }
        let seed = u32_at(h, V7_SEED_OFFSET);
        let n = u32_at(h, V7_VALUES_OFFSET) as usize;
        if n == 0 || n > V7_MAX_VALUES {
            return Err(corrupt(
                "values",
                V7_VALUES_OFFSET,
                n as u64,
                "must be in 1..=2^20",
            ));
        }
        let step = f32::from_bits(u32_at(h, V7_STEP_OFFSET));
        if !step_ok(step, bits, block_log2) {
            return Err(corrupt(
                "step",
                V7_STEP_OFFSET,
                step.to_bits().into(),
                "must be finite, positive and below 2^(126 - (k-1) - ceil(b/2))",
            ));
        }
        let blocks = n.div_ceil(1usize << block_log2);
        let sides_end = V7_HEADER_LEN + blocks;
        let Some(sides) = bytes.get(V7_HEADER_LEN..sides_end) else {
            return Err(QuantError::Truncated {
                what: "v7 side bytes",
                offset: V7_HEADER_LEN as u64,
                end: sides_end as u64,
                present,
            });
        };
        Ok(Self {
            bits,
            block_log2,
            lanes_log2,
            seed,
            n,
            step,
            sides,
            stream: &bytes[sides_end..],
        })
    }

    /// Number of values.
    #[must_use]
    pub fn values(&self) -> usize {
        self.n
    }

    /// Code width `k`.
    #[must_use]
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// The quantizer step.
    #[must_use]
    pub fn step(&self) -> f32 {
        self.step
    }

    /// The side bytes, one per rotation block.
    #[must_use]
    pub fn sides(&self) -> &'a [u8] {
        self.sides
    }

    /// Decode into `dst` (resized to [`SegmentV7::values`], which must be at most
    /// `max_values`): per block, code `s` decodes to `(s - 2^(k-1) + 1/2) * c` with
    /// `c = f32(step * f32(1/sqrt(2^b)))` for a whole block, then the inverse rotation
    /// (FWHT, signs); a shorter last block decodes to `(s - 2^(k-1) + 1/2) * step`.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] when the segment holds more than `max_values`
    /// values; the stream's errors ([`QuantError::Truncated`] `rans states` / `rans
    /// stream`, [`QuantError::CorruptField`] `rans stream` / `rans state` / `rans final
    /// state`, [`QuantError::TrailingBytes`]).
    pub fn decode(&self, max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
        if self.n > max_values {
            return Err(QuantError::LengthMismatch {
                what: "v7 values (must be at most the values the caller expects)",
                input: self.n,
                output: max_values,
            });
        }
        let block = 1usize << self.block_log2;
        let rot = Rotation::new(self.seed, block)?;
        let whole = self.step * rot.norm();
        let half = 1i32 << (self.bits - 1);
        let base = V7_HEADER_LEN + self.sides.len();
        let mut dec = WideDecoder::new(self.stream, base, self.lanes_log2)?;
        dst.clear();
        dst.resize(self.n, 0.0);
        let mut codes = [0u16; 1 << V7_MAX_BLOCK_LOG2];
        // The tables this segment uses, looked up in the shared cache once per side byte:
        // a hostile segment of 2^18 four-value blocks would otherwise take the cache's
        // lock and scan it 2^18 times, and under another thread's evictions rebuild a
        // table per block. At most 256 builds per segment.
        let mut memo: [Option<Arc<WideTable>>; 256] = std::array::from_fn(|_| None);
        for (blk, &j) in dst.chunks_mut(block).zip(self.sides) {
            let codes = &mut codes[..blk.len()];
            let t = memo[usize::from(j)].get_or_insert_with(|| table(self.bits, j));
            dec.decode(t, codes)?;
            let c = if blk.len() == block { whole } else { self.step };
            for (v, &s) in blk.iter_mut().zip(codes.iter()) {
                // |s - half| <= 2^11: exact in f32, as is the + 1/2.
                *v = ((i32::from(s) - half) as f32 + 0.5) * c;
            }
            if blk.len() == block {
                rot.inverse_prescaled(blk);
            }
        }
        dec.finish()
    }
}

/// Parse and decode a v7 segment into `dst` ([`SegmentV7::parse`], [`SegmentV7::decode`]).
///
/// # Errors
/// As those two.
pub fn decode(bytes: &[u8], max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
    SegmentV7::parse(bytes)?.decode(max_values, dst)
}

#[cfg(test)]
#[path = "segment_v7_tests.rs"]
mod tests;
