//! The channel-centred model-coded ECSQ segment (TQTC version 8): a block of `rows x w`
//! values (row-major: one row per token, `w` channels, a power of two 16..=1024) coded
//! channel by channel. Optional leading rows are kept as f16 (the attention sink); of the
//! other rows each channel's mean is removed (stored as f16), every centred value is
//! quantized with one uniform mid-rise step for the whole block, and the codes are
//! rANS-coded with TQTC version 7's model tables ([`crate::ecsq_model`]): each channel's
//! codes under a discretised Gaussian whose standard deviation, the channel's RMS about
//! its mean in steps, is the channel's side byte. No frequency table is stored. Byte
//! layout: `docs/formats/quant.md` §15.
//!
//! Why: KV keys (before RoPE) sit on large per-channel offsets with per-channel spreads;
//! per-channel min/max groups pay for both with fixed-width codes. Removing the offset
//! and pricing each channel by its own spread lets one step serve the whole block at
//! the rate the data needs (numpy on SmolLM2's keys: attention-logit error 0.99% against
//! 1.73% for 5-bit groups at 5 bits per value, bench/RESULTS.md "Session 14: lead, tier-2
//! keys"). [`encode_to_fit`] picks the finest step on v7's ladder whose segment fits a
//! byte budget.
//!
//! ```
//! use tensorvault_quant::segment_v8::{decode, encode_to_fit, V8Params};
//! // 256 tokens x 64 channels, each channel on its own offset; token 0 kept raw.
//! let x: Vec<f32> = (0..256 * 64)
//!     .map(|i| (i % 64) as f32 * 0.25 + ((i * 7919 % 1013) as f32 - 506.0) * 1e-3)
//!     .collect();
//! let p = V8Params { bits: 10, width: 64, raw_rows: 1, lanes_log2: 2 };
//! let bytes = encode_to_fit(&p, &x, 10_240)?.expect("fits");
//! assert!(bytes.len() <= 10_240);
//! let mut y = Vec::new();
//! decode(&bytes, x.len(), &mut y)?;
//! assert_eq!(y.len(), x.len());
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use std::sync::Arc;

use half::f16;

use crate::ecsq_model::{side_byte, table};
use crate::entropy_rans::{encode_wide, WideDecoder, WideTable};
use crate::error::{check_finite, corrupt, segment_prefix_bits};
use crate::layout::{
    MAGIC, V7_RATE_MIN, V7_RATE_RUNGS, V8_F16_BYTES, V8_HEADER_LEN, V8_LANES_LOG2_OFFSET,
    V8_MAX_BITS, V8_MAX_LANES_LOG2, V8_MAX_MAGNITUDE_LOG2, V8_MAX_VALUES, V8_MAX_WIDTH_LOG2,
    V8_MIN_BITS, V8_MIN_WIDTH_LOG2, V8_RAW_ROWS_OFFSET, V8_STEP_OFFSET, V8_VALUES_OFFSET,
    V8_VERSION, V8_WIDTH_LOG2_OFFSET,
};
use crate::le::{f32_at, u16_at, u32_at};
use crate::segment_v7::step_at;
use crate::QuantError;

/// Settings of a v8 segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V8Params {
    /// Code width `k`, 2..=12 (`2^k` levels, clamped at the alphabet's ends).
    pub bits: u8,
    /// Values per row (channels): a power of two, 16..=1024.
    pub width: u16,
    /// Leading rows kept as f16 (fewer than the block's rows).
    pub raw_rows: u16,
    /// log2 of the rANS lanes, 0..=3 (4 bytes of state each).
    pub lanes_log2: u8,
}

impl V8Params {
    fn check(&self) -> Result<(), QuantError> {
        let bad = |field, value: u16, reason| QuantError::InvalidParam {
            field,
            value: value.into(),
            reason,
        };
        if !(V8_MIN_BITS..=V8_MAX_BITS).contains(&self.bits) {
            return Err(bad("bits", self.bits.into(), "must be in 2..=12"));
        }
        let widths = (1u16 << V8_MIN_WIDTH_LOG2)..=(1u16 << V8_MAX_WIDTH_LOG2);
        if !self.width.is_power_of_two() || !widths.contains(&self.width) {
            return Err(bad(
                "width",
                self.width,
                "must be a power of two in 16..=1024",
            ));
        }
        if self.lanes_log2 > V8_MAX_LANES_LOG2 {
            return Err(bad(
                "lanes_log2",
                self.lanes_log2.into(),
                "must be in 0..=3",
            ));
        }
        Ok(())
    }
}

/// Where each region of a segment of `n` values starts and ends (shared with TQTC
/// version 9, whose step codes sit between the side bytes and the stream).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Regions {
    pub(crate) width: usize,
    pub(crate) raw_rows: usize,
    /// Rows after the raw ones (at least one).
    pub(crate) coded_rows: usize,
    pub(crate) raw_end: usize,
    pub(crate) means_end: usize,
    pub(crate) sides_end: usize,
    /// Where the rANS stream starts: `sides_end` plus `codes_per_channel * width`.
    pub(crate) stream: usize,
}

/// The regions of `n` values in rows of `width` with `raw_rows` raw rows and
/// `codes_per_channel` bytes per channel after the side bytes (0 for v8), or why not:
/// `(field, reason)`.
pub(crate) fn regions(
    n: usize,
    width: usize,
    raw_rows: usize,
    codes_per_channel: usize,
) -> Result<Regions, (&'static str, &'static str)> {
    if n == 0 || n > V8_MAX_VALUES || !n.is_multiple_of(width) {
        return Err((
            "values",
            "must be in 1..=2^20 and a multiple of the row width",
        ));
    }
    let rows = n / width;
    if raw_rows >= rows {
        return Err(("raw_rows", "must be below the number of rows"));
    }
    // n <= 2^20: no overflow anywhere below.
    let raw_end = V8_HEADER_LEN + raw_rows * width * V8_F16_BYTES;
    let means_end = raw_end + width * V8_F16_BYTES;
    let sides_end = means_end + width;
    Ok(Regions {
        width,
        raw_rows,
        coded_rows: rows - raw_rows,
        raw_end,
        means_end,
        sides_end,
        stream: sides_end + codes_per_channel * width,
    })
}

/// Whether `step` keeps every decoded value inside the f32 range:
/// `step * 2^(k-1) < 2^126` (§15.4).
pub(crate) fn step_ok(step: f32, bits: u8) -> bool {
    step.is_finite()
        && step > 0.0
        && f64::from(step) * 2f64.powi(i32::from(bits) - 1) < 2f64.powi(V8_MAX_MAGNITUDE_LOG2)
}

/// What an encoder quantizes: the raw rows' and means' f16 bits, the centred values in
/// symbol order (channel-major), each channel's mean square, the largest magnitude.
pub(crate) struct Centred {
    pub(crate) raw: Vec<u16>,
    pub(crate) means: Vec<u16>,
    pub(crate) v: Vec<f32>,
    pub(crate) mean_sq: Vec<f64>,
    pub(crate) max_abs: f32,
    pub(crate) reg: Regions,
}

/// Check `p` and `x`, keep the raw rows as f16 and centre every channel on its f16 mean,
/// with `codes_per_channel` step-code bytes per channel in the regions (0 for v8).
pub(crate) fn centre(
    p: &V8Params,
    x: &[f32],
    codes_per_channel: usize,
) -> Result<Centred, QuantError> {
    p.check()?;
    let width = usize::from(p.width);
    let reg = regions(x.len(), width, usize::from(p.raw_rows), codes_per_channel).map_err(
        |(field, reason)| QuantError::InvalidParam {
            field,
            value: x.len() as f64,
            reason,
        },
    )?;
    check_finite(x)?;
    let (raw_x, coded) = x.split_at(reg.raw_rows * width);
    let mut raw = Vec::with_capacity(raw_x.len());
    for (index, &v) in raw_x.iter().enumerate() {
        let h = f16::from_f32(v);
        if h.is_infinite() {
            return Err(QuantError::OutOfRange {
                index,
                value: v,
                target: "f16 (raw row)",
            });
        }
        raw.push(h.to_bits());
    }
    let rows = reg.coded_rows;
    let mut means = Vec::with_capacity(width);
    let mut v = vec![0f32; rows * width];
    let mut mean_sq = Vec::with_capacity(width);
    let mut max_abs = 0f32;
    for c in 0..width {
        let sum: f64 = coded
            .iter()
            .skip(c)
            .step_by(width)
            .map(|&a| f64::from(a))
            .sum();
        let mean = sum / rows as f64;
        let h = f16::from_f64(mean);
        if h.is_infinite() {
            return Err(QuantError::OutOfRange {
                index: c,
                value: mean as f32,
                target: "f16 (channel mean)",
            });
        }
        means.push(h.to_bits());
        let m = h.to_f32();
        let run = &mut v[c * rows..(c + 1) * rows];
        let mut ss = 0f64;
        for (d, &a) in run.iter_mut().zip(coded.iter().skip(c).step_by(width)) {
            // |m| <= 65504: a - m stays finite for every finite a.
            *d = a - m;
            ss += f64::from(*d) * f64::from(*d);
            max_abs = max_abs.max(d.abs());
        }
        mean_sq.push(ss / rows as f64);
    }
    Ok(Centred {
        raw,
        means,
        v,
        mean_sq,
        max_abs,
        reg,
    })
}

/// The code of `v` at `step`: `clamp(floor(v / step), -2^(k-1), 2^(k-1) - 1) + 2^(k-1)`.
#[inline]
pub(crate) fn code_of(v: f32, step: f32, half: i32) -> u16 {
    let q = (v / step).floor();
    // Clamped in f32 first: a float-to-int cast saturates, but the clamp says what is meant.
    let q = q.clamp(-(half as f32), (half - 1) as f32) as i32;
    (q + half) as u16
}

/// Encode the centred block at `step` (not searched): the segment bytes.
fn encode_at(p: &V8Params, c: &Centred, step: f32) -> Vec<u8> {
    let half = 1i32 << (p.bits - 1);
    let codes: Vec<u16> = c.v.iter().map(|&v| code_of(v, step, half)).collect();
    let sides: Vec<u8> = c
        .mean_sq
        .iter()
        .map(|&ms| side_byte(ms.sqrt() / f64::from(step)))
        .collect();
    let mut out = write_regions(p, c, V8_VERSION, step, &sides, &[]);
    encode_stream(p, c.reg.coded_rows, &codes, &sides, &mut out);
    out
}

/// The header, raw rows, means, side bytes and `step_codes` (empty for v8) of a segment
/// of version `version` whose header step field is `step`.
pub(crate) fn write_regions(
    p: &V8Params,
    c: &Centred,
    version: u8,
    step: f32,
    sides: &[u8],
    step_codes: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(c.reg.stream + c.v.len() * 2);
    out.extend_from_slice(&MAGIC);
    out.push(version);
    out.push(p.bits);
    // width is a checked power of two in 16..=1024.
    out.push(p.width.trailing_zeros() as u8);
    out.push(p.lanes_log2);
    // n <= 2^20 (centre checked it).
    out.extend_from_slice(&((c.v.len() + c.raw.len()) as u32).to_le_bytes());
    out.extend_from_slice(&step.to_le_bytes());
    out.extend_from_slice(&p.raw_rows.to_le_bytes());
    for h in c.raw.iter().chain(&c.means) {
        out.extend_from_slice(&h.to_le_bytes());
    }
    out.extend_from_slice(sides);
    out.extend_from_slice(step_codes);
    out
}

/// Append the rANS stream of `codes` (channel-major, `rows` per channel), each channel
/// under the model table of its side byte.
pub(crate) fn encode_stream(
    p: &V8Params,
    rows: usize,
    codes: &[u16],
    sides: &[u8],
    out: &mut Vec<u8>,
) {
    let owned: Vec<_> = sides.iter().map(|&j| table(p.bits, j)).collect();
    let tables: Vec<&WideTable> = owned.iter().map(|t| &**t).collect();
    encode_wide(codes, rows, &tables, p.lanes_log2, out);
}

/// Encode `x` (row-major, rows of `p.width` values) with quantizer step `step`.
///
/// # Errors
/// [`QuantError::InvalidParam`] for settings out of range, a length that is not a
/// multiple of the width in 1..=2^20 or leaves no row after the raw rows, or a step that
/// is not finite and positive or would let decoded values leave the f32 range;
/// [`QuantError::NonFinite`] for NaN or infinite values; [`QuantError::OutOfRange`] for
/// a raw-row value or a channel mean beyond f16's range.
pub fn encode(p: &V8Params, x: &[f32], step: f32) -> Result<Vec<u8>, QuantError> {
    let c = centre(p, x, 0)?;
    if !step_ok(step, p.bits) {
        return Err(QuantError::InvalidParam {
            field: "step",
            value: step.into(),
            reason: "must be finite, positive and below 2^(126 - (k-1))",
        });
    }
    Ok(encode_at(p, &c, step))
}

/// Squared error of quantizing the centred values at `step` (clamped codes included).
fn squared_error(c: &Centred, step: f32, half: i32) -> f64 {
    c.v.iter()
        .map(|&v| {
            let q = i32::from(code_of(v, step, half)) - half;
            let e = f64::from(v) - (f64::from(q) + 0.5) * f64::from(step);
            e * e
        })
        .sum()
}

/// The finest rung in `1..=V7_RATE_RUNGS` whose segment an entropy estimate puts within
/// `max_len` bytes: each channel costs about `max(1, log2(rms / step) + 2.05)` bits per
/// value (a Gaussian's entropy at that step; at least the one bit a mid-rise code pays),
/// plus the fixed regions and the lane states. Only where the search starts: the length
/// itself is always measured.
fn estimated_rung(p: &V8Params, c: &Centred, s0: f32, max_len: usize) -> i32 {
    let step = |t| f64::from(step_at(s0, t));
    estimated_rung_by(p, c, max_len, |t, _| step(t))
}

/// [`estimated_rung`] with channel `c`'s step at rung `t` given by `step_of(t, c)`.
pub(crate) fn estimated_rung_by(
    p: &V8Params,
    c: &Centred,
    max_len: usize,
    step_of: impl Fn(i32, usize) -> f64,
) -> i32 {
    let rows = c.reg.coded_rows as f64;
    let fixed = c.reg.stream + (4usize << p.lanes_log2);
    let fits = |t: i32| {
        let bits: f64 = c
            .mean_sq
            .iter()
            .enumerate()
            .map(|(ch, &ms)| {
                let step = step_of(t, ch);
                rows * (0.5 * (ms / (step * step)).log2() + 2.05).max(1.0)
            })
            .sum();
        fixed as f64 + bits / 8.0 <= max_len as f64
    };
    let (mut lo, mut hi) = (0, V7_RATE_RUNGS);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// Encode `x` within `max_len` bytes on TQTC version 7's rate ladder
/// ([`crate::segment_v7::step_at`]; rung 0 is the clamp-free step `max |centred value| /
/// 2^(k-1)`, at least the smallest normal f32). When rung 0 does not fit: a fitting rung
/// above it whose next finer rung does not fit (bracketed from an entropy estimate by
/// probes at doubling distances, then bisected; the length is not strictly monotone in
/// the step, so this finds one boundary). When it fits: finer rungs, which clamp the largest
/// values, one at a time while the squared error keeps falling and the segment still
/// fits, down to three octaves finer. `Ok(None)` when not even the coarsest rung fits.
/// Deterministic: the same input gives the same bytes.
///
/// # Errors
/// As [`encode`] (but for the step, which this picks).
pub fn encode_to_fit(
    p: &V8Params,
    x: &[f32],
    max_len: usize,
) -> Result<Option<Vec<u8>>, QuantError> {
    let c = centre(p, x, 0)?;
    // Below the fixed regions nothing fits; saves encoding every rung.
    if max_len < c.reg.sides_end {
        return Ok(None);
    }
    let half = 1i32 << (p.bits - 1);
    let s0 = (c.max_abs / half as f32).max(f32::MIN_POSITIVE);
    let try_rung = |t: i32| -> Option<Vec<u8>> {
        let step = step_at(s0, t);
        if !step_ok(step, p.bits) {
            return None;
        }
        let bytes = encode_at(p, &c, step);
        (bytes.len() <= max_len).then_some(bytes)
    };
    if let Some(mut best) = try_rung(0) {
        let mut err = squared_error(&c, step_at(s0, 0), half);
        for t in (V7_RATE_MIN..0).rev() {
            let e = squared_error(&c, step_at(s0, t), half);
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
    let t0 = estimated_rung(p, &c, s0, max_len);
    Ok(bracket_and_bisect(t0, V7_RATE_RUNGS, try_rung))
}

/// The segment of a fitting rung in `1..=top` (`V7_RATE_RUNGS` for v8) whose next finer
/// rung does not fit (rung 0 is known not to fit), `None` when not even the coarsest
/// fits: a boundary bracketed around rung `t0` (an entropy estimate, at most `top`) by
/// probes at doubling distances, then bisected: about five encodes where a bisection of
/// the whole ladder takes eleven.
pub(crate) fn bracket_and_bisect(
    t0: i32,
    top: i32,
    try_rung: impl Fn(i32) -> Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    // Invariant once bracketed: rung `lo` does not fit, rung `hi` does (`best` is its
    // segment).
    let (mut lo, mut hi, mut best) = if let Some(b) = try_rung(t0) {
        let (mut lo, mut hi, mut best, mut d) = (0, t0, b, 1);
        while hi - d > lo {
            match try_rung(hi - d) {
                Some(b) => {
                    (hi, best) = (hi - d, b);
                    d *= 2;
                }
                None => lo = hi - d,
            }
        }
        (lo, hi, best)
    } else {
        let (mut lo, mut d) = (t0, 1);
        loop {
            let t = (lo + d).min(top);
            match try_rung(t) {
                Some(b) => break (lo, t, b),
                None if t >= top => return None,
                None => {
                    lo = t;
                    d *= 2;
                }
            }
        }
    };
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
    Some(best)
}

/// The region names of a v8 segment's truncation errors (header, raw rows, means, side
/// bytes, step codes: v8 has none).
const V8_REGION_NAMES: [&str; 5] = [
    "v8 header",
    "v8 raw rows",
    "v8 means",
    "v8 side bytes",
    "v8 step codes",
];

/// A validated header and the regions it implies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    pub(crate) bits: u8,
    pub(crate) lanes_log2: u8,
    pub(crate) n: usize,
    pub(crate) step: f32,
    pub(crate) reg: Regions,
}

/// Validate `bytes` as a segment of `version` (v8's header and regions, then
/// `codes_per_channel` bytes per channel) up to its rANS stream: header fields, every
/// region present (`names`: header, raw rows, means, side bytes, step codes), raw rows and
/// means finite.
pub(crate) fn parse_regions(
    bytes: &[u8],
    version: u8,
    names: &[&'static str; 5],
    codes_per_channel: usize,
) -> Result<Header, QuantError> {
    let present = bytes.len();
    let (h, bits) = segment_prefix_bits(
        bytes,
        names[0],
        V8_HEADER_LEN,
        version,
        (V8_MIN_BITS, V8_MAX_BITS),
        "must be in 2..=12",
    )?;
    let width_log2 = h[V8_WIDTH_LOG2_OFFSET];
    if !(V8_MIN_WIDTH_LOG2..=V8_MAX_WIDTH_LOG2).contains(&width_log2) {
        return Err(corrupt(
            "width_log2",
            V8_WIDTH_LOG2_OFFSET,
            width_log2.into(),
            "must be in 4..=10 (16 to 1024 channels)",
        ));
    }
    let lanes_log2 = h[V8_LANES_LOG2_OFFSET];
    if lanes_log2 > V8_MAX_LANES_LOG2 {
        return Err(corrupt(
            "lanes_log2",
            V8_LANES_LOG2_OFFSET,
            lanes_log2.into(),
            "must be in 0..=3 (1 to 8 lanes)",
        ));
    }
    let n = u32_at(h, V8_VALUES_OFFSET) as usize;
    let step = f32_at(h, V8_STEP_OFFSET);
    let raw_rows = usize::from(u16_at(h, V8_RAW_ROWS_OFFSET));
    let reg = regions(n, 1usize << width_log2, raw_rows, codes_per_channel).map_err(
        |(field, reason)| {
            if field == "values" {
                corrupt(field, V8_VALUES_OFFSET, n as u64, reason)
            } else {
                corrupt(field, V8_RAW_ROWS_OFFSET, raw_rows as u64, reason)
            }
        },
    )?;
    if !step_ok(step, bits) {
        return Err(corrupt(
            "step",
            V8_STEP_OFFSET,
            step.to_bits().into(),
            "must be finite, positive and below 2^(126 - (k-1))",
        ));
    }
    for (what, start, end) in [
        (names[1], V8_HEADER_LEN, reg.raw_end),
        (names[2], reg.raw_end, reg.means_end),
        (names[3], reg.means_end, reg.sides_end),
        (names[4], reg.sides_end, reg.stream),
    ] {
        if present < end {
            return Err(QuantError::Truncated {
                what,
                offset: start as u64,
                end: end as u64,
                present,
            });
        }
    }
    for (field, start, end) in [
        ("raw value", V8_HEADER_LEN, reg.raw_end),
        ("mean", reg.raw_end, reg.means_end),
    ] {
        if let Some(off) = (start..end)
            .step_by(V8_F16_BYTES)
            .find(|&o| !f16_at(bytes, o).is_finite())
        {
            return Err(corrupt(
                field,
                off,
                f16_at(bytes, off).to_bits().into(),
                "must be a finite f16",
            ));
        }
    }
    Ok(Header {
        bits,
        lanes_log2,
        n,
        step,
        reg,
    })
}

/// A v8 segment whose header, raw rows, means and side bytes are validated (the stream
/// is checked as it is decoded).
#[derive(Clone, Debug)]
pub struct SegmentV8<'a> {
    bits: u8,
    lanes_log2: u8,
    n: usize,
    step: f32,
    reg: Regions,
    bytes: &'a [u8],
}

/// The f16 at `b[off..off + 2]` (a region `parse` bounded).
pub(crate) fn f16_at(b: &[u8], off: usize) -> f16 {
    f16::from_bits(u16_at(b, off))
}

impl<'a> SegmentV8<'a> {
    /// Validate `bytes` as a v8 segment up to its rANS stream: header, raw rows (finite),
    /// channel means (finite) and side bytes present.
    ///
    /// # Errors
    /// [`QuantError::Truncated`] (`v8 header`, `v8 raw rows`, `v8 means`, `v8 side
    /// bytes`), [`QuantError::BadMagic`], [`QuantError::UnsupportedVersion`],
    /// [`QuantError::CorruptField`] (`bits`, `width_log2`, `lanes_log2`, `values`, `step`,
    /// `raw_rows`, `raw value`, `mean`), each at its offset.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, QuantError> {
        let h = parse_regions(bytes, V8_VERSION, &V8_REGION_NAMES, 0)?;
        Ok(Self {
            bits: h.bits,
            lanes_log2: h.lanes_log2,
            n: h.n,
            step: h.step,
            reg: h.reg,
            bytes,
        })
    }

    /// Number of values.
    #[must_use]
    pub fn values(&self) -> usize {
        self.n
    }

    /// Values per row (channels).
    #[must_use]
    pub fn width(&self) -> usize {
        self.reg.width
    }

    /// Leading rows kept as f16.
    #[must_use]
    pub fn raw_rows(&self) -> usize {
        self.reg.raw_rows
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

    /// The side bytes, one per channel.
    #[must_use]
    pub fn sides(&self) -> &'a [u8] {
        &self.bytes[self.reg.means_end..self.reg.sides_end]
    }

    /// Channel `c`'s mean (`c` below [`SegmentV8::width`]), `None` past the last channel.
    #[must_use]
    pub fn mean(&self, c: usize) -> Option<f32> {
        (c < self.reg.width)
            .then(|| f16_at(self.bytes, self.reg.raw_end + c * V8_F16_BYTES).to_f32())
    }

    /// Decode into `dst` (resized to [`SegmentV8::values`], which must be at most
    /// `max_values`), row-major: the raw rows as stored, then value `(r, c)` of the coded
    /// rows from its code `s` as `mean_c + (s - 2^(k-1) + 1/2) * step`, in f32.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] when the segment holds more than `max_values`
    /// values; the stream's errors ([`QuantError::Truncated`] `rans states` / `rans
    /// stream`, [`QuantError::CorruptField`] `rans stream` / `rans state` / `rans final
    /// state`, [`QuantError::TrailingBytes`]).
    pub fn decode(&self, max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
        let h = Header {
            bits: self.bits,
            lanes_log2: self.lanes_log2,
            n: self.n,
            step: self.step,
            reg: self.reg,
        };
        let step = self.step;
        decode_channels(
            self.bytes,
            &h,
            max_values,
            "v8 values (must be at most the values the caller expects)",
            dst,
            |_| step,
        )
    }
}

/// Decode the segment `bytes` (validated by [`parse_regions`] into `h`) into `dst`
/// (resized to `h.n`, at most `max_values`, else [`QuantError::LengthMismatch`] `what`):
/// the raw rows as stored, then value `(r, c)` of the coded rows from its code `s` as
/// `mean_c + (s - 2^(k-1) + 1/2) * step_of(c)`, in f32.
pub(crate) fn decode_channels(
    bytes: &[u8],
    h: &Header,
    max_values: usize,
    what: &'static str,
    dst: &mut Vec<f32>,
    step_of: impl Fn(usize) -> f32,
) -> Result<(), QuantError> {
    if h.n > max_values {
        return Err(QuantError::LengthMismatch {
            what,
            input: h.n,
            output: max_values,
        });
    }
    let reg = h.reg;
    let mut dec = WideDecoder::new(&bytes[reg.stream..], reg.stream, h.lanes_log2)?;
    dst.clear();
    dst.resize(h.n, 0.0);
    let (raw_out, coded_out) = dst.split_at_mut(reg.raw_rows * reg.width);
    for (o, c) in raw_out
        .iter_mut()
        .zip(bytes[V8_HEADER_LEN..reg.raw_end].chunks_exact(V8_F16_BYTES))
    {
        *o = f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
    }
    let half = 1i32 << (h.bits - 1);
    let mut codes = vec![0u16; reg.coded_rows];
    // The tables this segment uses, looked up in the shared cache once per side byte
    // (as v7 does): at most 256 lookups and builds per segment, whatever it claims.
    let mut memo: [Option<Arc<WideTable>>; 256] = std::array::from_fn(|_| None);
    for (c, &j) in bytes[reg.means_end..reg.sides_end].iter().enumerate() {
        let t = memo[usize::from(j)].get_or_insert_with(|| table(h.bits, j));
        dec.decode(t, &mut codes)?;
        // Finite (parse checked it), |m| <= 65504.
        let m = f16_at(bytes, reg.raw_end + c * V8_F16_BYTES).to_f32();
        let step = step_of(c);
        for (o, &s) in coded_out.iter_mut().skip(c).step_by(reg.width).zip(&codes) {
            // |s - half| <= 2^11: exact in f32, as is the + 1/2.
            *o = m + ((i32::from(s) - half) as f32 + 0.5) * step;
        }
    }
    dec.finish()
}

/// Parse and decode a v8 segment into `dst` ([`SegmentV8::parse`], [`SegmentV8::decode`]).
///
/// # Errors
/// As those two.
pub fn decode(bytes: &[u8], max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
    SegmentV8::parse(bytes)?.decode(max_values, dst)
}

#[cfg(test)]
#[path = "segment_v8_tests.rs"]
mod tests;
