//! Entropy-coded uniform levels under rate control (ECSQ): a run of values coded as a
//! TQTC version 3 segment with uniform levels (`docs/formats/quant.md` §10) wrapped in
//! the version 5 envelope (§12), with the step chosen so the stored bytes fit a budget.
//! No new format: any v5/v3 decoder reads what this writes.
//!
//! A fixed-rate quantizer spends the same bits on every value and pays for heavy tails
//! with range; an entropy-coded uniform quantizer with one step everywhere spends bits
//! where the values are (the rANS coder of the envelope pays for the tails in code
//! length) and, at high rate, sits within 0.25 bit of the rate-distortion bound. One
//! step for every block of the run is what minimizes the squared error for a given
//! entropy-coded size, so [`encode_to_fit`] uses [`ScaleRule::MaxFloor`]: each rotated
//! block's scale is the shared floor `F`, or the block's own no-clip scale where `F`
//! would clip it. `F` is searched on a fixed ladder ([`floor_at`]) for the finest step
//! whose envelope fits `max_len`: deterministic (same input, same bytes), and exact
//! (a candidate fits when its stored length does; the search decides a candidate by
//! proven bounds on the v5 envelope's length, [`segment_v5::wrap_len_bounds`], and
//! rANS-codes only those the bounds leave open, with the same outcome as coding all).
//!
//! ```
//! use tensorvault_quant::ecsq::{encode_to_fit, EcsqParams};
//! use tensorvault_quant::segment_v5::decode_any;
//! let x: Vec<f32> = (0..4096).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1e-3).collect();
//! let p = EcsqParams { bits: 6, block_log2: 10, seed: 7, rotate: true, lanes_log2: 2 };
//! let bytes = encode_to_fit(&p, &x, 2688)?.expect("fits");
//! assert!(bytes.len() <= 2688);
//! let mut y = Vec::new();
//! decode_any(&bytes, x.len(), &mut y)?;
//! assert_eq!(y.len(), x.len());
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use crate::levels::LevelSet;
use crate::rotation::Rotation;
use crate::segment_rot::{self, ScaleRule, V3Params};
use crate::segment_v5;
use crate::QuantError;

/// Steps of the floor ladder per octave (the floor halves every `LADDER_STEPS` rungs).
pub const LADDER_STEPS: i32 = 64;
/// Lowest rung: the floor at `2^4` times the no-clip scale of the largest block (codes
/// concentrate on a few levels; coarser is never needed to fit a v3 segment's side data).
pub const LADDER_MIN: i32 = -4 * LADDER_STEPS;
/// Highest rung: the floor at `2^-20` of that scale (finer than any block's no-clip scale
/// for data with less than ~120 dB between blocks; there every block is at its own).
pub const LADDER_MAX: i32 = 20 * LADDER_STEPS;

/// Settings of a rate-controlled segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcsqParams {
    /// Width of the codes, 2..=8 (the alphabet of the rANS coder: `2^bits` levels).
    pub bits: u8,
    /// log2 of the rotation block, 2..=10.
    pub block_log2: u8,
    /// Seed of the rotation's sign pattern.
    pub seed: u32,
    /// Rotate each block (a rotation makes every block close to Gaussian, the
    /// distribution with the most entropy for its variance; without it heavy tails stay,
    /// which the rANS code lengths pay for, but one large value raises its block's step).
    pub rotate: bool,
    /// log2 of the v5 envelope's rANS lanes, 0..=6: each lane costs 4 bytes of state
    /// (0.008 bits per value in a 4096-value block) and buys decode parallelism.
    pub lanes_log2: u8,
}

impl EcsqParams {
    /// The v3 settings of one candidate (scale floor `floor`): uniform levels, byte
    /// scales, no raw rows.
    #[must_use]
    pub fn v3(&self, floor: f32) -> V3Params {
        V3Params {
            bits: self.bits,
            levels: LevelSet::Uniform,
            block_log2: self.block_log2,
            rotate: self.rotate,
            seed: self.seed,
            width: 1,
            raw_rows: 0,
            scale: ScaleRule::MaxFloor(floor.to_bits()),
            wide_scales: false,
        }
    }
}

/// The floor at rung `t` of the ladder over `top` (the largest block's no-clip scale):
/// `top * (1 - (t mod 64) / 128) * 2^-(t div 64)` (Euclidean division), every operation
/// an exact or correctly rounded f32 operation, strictly decreasing in `t` for `top > 0`.
#[must_use]
pub fn floor_at(top: f32, t: i32) -> f32 {
    let e = t.div_euclid(LADDER_STEPS);
    let i = t.rem_euclid(LADDER_STEPS);
    let mant = 1.0 - i as f32 / (2 * LADDER_STEPS) as f32;
    top * mant * 2f32.powi(-e)
}

/// The largest block's no-clip scale: max |rotated value| over the level table's largest
/// level (0 for an all-zero run).
fn top_scale(p: &EcsqParams, x: &[f32]) -> Result<f32, QuantError> {
    let rot = p
        .rotate
        .then(|| Rotation::new(p.seed, 1usize << p.block_log2))
        .transpose()?;
    let q = crate::levels::Quantizer::new(LevelSet::Uniform, p.bits)
        .ok_or(QuantError::InvalidBits { bits: p.bits })?;
    let mut buf = vec![0f32; 1usize << p.block_log2];
    let mut top = 0f32;
    for blk in x.chunks_exact(buf.len()) {
        buf.copy_from_slice(blk);
        if let Some(r) = &rot {
            r.forward(&mut buf);
        }
        top = buf.iter().fold(top, |m, v| m.max(v.abs()));
    }
    Ok(top / q.max_level())
}

/// Encode `x` as the v5 envelope (`2^lanes_log2` lanes) of a uniform-level v3 segment
/// (or the v3 segment itself where the envelope is not shorter) of at most `max_len` bytes, with the finest floor
/// on the ladder that fits; every block at its own no-clip scale when that fits.
/// `Ok(None)` when not even the coarsest rung fits (the caller keeps another layout).
///
/// # Errors
/// As [`segment_rot::encode`]: [`QuantError::NonFinite`] for NaN or infinite values,
/// [`QuantError::ScaleOverflow`], [`QuantError::InvalidBits`] /
/// [`QuantError::CorruptField`] for settings that do not fit `x` (its length must be a
/// whole number of rotation blocks); [`QuantError::InvalidParam`] for `lanes_log2 > 6`.
pub fn encode_to_fit(
    p: &EcsqParams,
    x: &[f32],
    max_len: usize,
) -> Result<Option<Vec<u8>>, QuantError> {
    // Validates the settings and the values (NaN, length) before the search.
    let finest = encode_with(&p.v3(0.0), p.lanes_log2, x)?;
    if finest.len() <= max_len {
        return Ok(Some(finest));
    }
    let top = top_scale(p, x)?;
    if top <= 0.0 {
        return Ok(None);
    }
    // The v3 segment of every candidate has `finest`'s length when `finest` is the v3
    // segment itself, else it is longer than `max_len` too; either way a candidate fits
    // only as an envelope of at most `max_len` bytes, so bounds on the envelope's length
    // decide most candidates without rANS-coding them (same decisions, same bytes).
    let fits = |t: i32| -> Result<bool, QuantError> {
        let inner = segment_rot::encode(&p.v3(floor_at(top, t)), x)?;
        if inner.len() <= max_len {
            return Ok(true);
        }
        match segment_v5::wrap_len_bounds(&inner, p.lanes_log2)? {
            Some((lo, _)) if lo > max_len => Ok(false),
            Some((_, hi)) if hi <= max_len && hi < inner.len() => Ok(true),
            _ => Ok(encode_inner(inner, p.lanes_log2)?.len() <= max_len),
        }
    };
    if !fits(LADDER_MIN)? {
        return Ok(None);
    }
    // Invariant: rung `lo` fits, rung `hi` does not (the length is not strictly monotone
    // in the floor: this finds one boundary, deterministically).
    let (mut lo, mut hi) = (LADDER_MIN, LADDER_MAX + 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Some(encode_with(
        &p.v3(floor_at(top, lo)),
        p.lanes_log2,
        x,
    )?))
}

/// One candidate: the v3 segment, then its v5 envelope with `lanes_log2` when shorter.
fn encode_with(v3: &V3Params, lanes_log2: u8, x: &[f32]) -> Result<Vec<u8>, QuantError> {
    encode_inner(segment_rot::encode(v3, x)?, lanes_log2)
}

/// `inner`'s v5 envelope with `lanes_log2` lanes when shorter, else `inner`.
fn encode_inner(inner: Vec<u8>, lanes_log2: u8) -> Result<Vec<u8>, QuantError> {
    Ok(match segment_v5::wrap(&inner, lanes_log2)? {
        Some(env) => env,
        None => inner,
    })
}

#[cfg(test)]
#[path = "ecsq_tests.rs"]
mod tests;
