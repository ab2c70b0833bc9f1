//! The channel-centred model-coded ECSQ segment with one step per channel (TQTC version
//! 9): TQTC version 8 ([`crate::segment_v8`]) plus one step code byte per channel. Channel
//! `c` quantizes its centred values with `step_c = f32(Δ * 2^(-(e_c mod 16)/16)) *
//! 2^-(e_c div 16)`, `Δ` the header's step (the coarsest channel's), the fraction taken
//! from a pinned f32 table ([`crate::layout::V9_STEP_FRACTION_BITS`]) so every decoder
//! computes the same bits; its side byte is its RMS about its mean in its own steps. Byte
//! layout: `docs/formats/quant.md` §16.
//!
//! Why: attention needs the logit error `q . dk`, not the keys' squared error, and the
//! logit error's variance per channel grows with the query energy of that channel's RoPE
//! pair. One step for the whole block (v8) minimises the keys' squared error; shaping the
//! step by the block's own key energy per RoPE pair, `step_c ∝ (w_c / geomean(w))^(-γ/2)`
//! with γ = 1, tracks the queries closely (numpy on SmolLM2, apache2 window 0, keys at
//! 4.95 b/v: logit error 1.035% -> 0.774%, bench/quality/kv_keys_wstep_study.py). The
//! energy of a RoPE pair (channels `2i`, `2i + 1`) is invariant under the rotation, so
//! the same pairing serves pre- and post-RoPE keys. No channel gets a step finer than it
//! needs to code its largest centred value unclamped (`max |y_c| / (2^(k-1) - 1)`):
//! finer steps would clamp and spend bits on nothing.
//!
//! ```
//! use tensorvault_quant::segment_v8::V8Params;
//! use tensorvault_quant::segment_v9::{decode, encode_to_fit};
//! let x: Vec<f32> = (0..256 * 64)
//!     .map(|i| (i % 64) as f32 * 0.25 + ((i * 7919 % 1013) as f32 - 506.0) * 1e-3)
//!     .collect();
//! let p = V8Params { bits: 8, width: 64, raw_rows: 1, lanes_log2: 2 };
//! let bytes = encode_to_fit(&p, &x, 10_240)?.expect("fits");
//! assert!(bytes.len() <= 10_240);
//! let mut y = Vec::new();
//! decode(&bytes, x.len(), &mut y)?;
//! assert_eq!(y.len(), x.len());
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use half::f16;

use crate::ecsq_model::side_byte;
use crate::layout::{
    V7_RATE_PER_OCTAVE, V7_RATE_RUNGS, V8_F16_BYTES, V9_STEP_CODES_PER_OCTAVE, V9_STEP_CODE_BYTES,
    V9_STEP_FRACTION_BITS, V9_VERSION,
};
use crate::segment_v7::step_at;
use crate::segment_v8::{
    bracket_and_bisect, centre, code_of, decode_channels, encode_stream, estimated_rung_by,
    parse_regions, step_ok, write_regions, Centred, Header, V8Params,
};
use crate::QuantError;

/// The region names of a v9 segment's truncation errors.
const V9_REGION_NAMES: [&str; 5] = [
    "v9 header",
    "v9 raw rows",
    "v9 means",
    "v9 side bytes",
    "v9 step codes",
];

/// Channel step of step code `e` under the coarsest step `delta`:
/// `f32(delta * 2^(-(e mod 16)/16)) * 2^-(e div 16)`, each product an IEEE f32 multiply
/// (round to nearest, ties to even); the second is exact while the result is normal.
#[must_use]
pub fn step_of(delta: f32, e: u8) -> f32 {
    let frac = f32::from_bits(V9_STEP_FRACTION_BITS[usize::from(e % V9_STEP_CODES_PER_OCTAVE)]);
    let octaves = u32::from(e / V9_STEP_CODES_PER_OCTAVE);
    // 2^-octaves, octaves <= 15: a normal f32 (biased exponent 112..=127).
    let pow2 = f32::from_bits((127 - octaves) << 23);
    (delta * frac) * pow2
}

/// Whether every channel step `delta` and `codes` give is a normal f32 (the smallest is
/// what [`step_of`] gives the largest code); `Some(i)` names the first code that does not.
fn first_subnormal(delta: f32, codes: &[u8]) -> Option<usize> {
    codes
        .iter()
        .position(|&e| step_of(delta, e) < f32::MIN_POSITIVE)
}

/// Encoder policy: side bytes are written on every `SIDE_GRID`-th rung of the model's
/// ladder (a quarter octave of standard deviation instead of a sixteenth). Per-channel
/// steps spread the channels' RMS-in-steps over more rungs than v8's single step (on
/// SmolLM2's keys 36 distinct tables per block against v8's 26), and decoding switches
/// tables per channel: on the quarter-octave grid a block names about 16, and decodes
/// faster than v8 (apache2 @0, 540 blocks: 0.137 s on every rung, 0.084 s on the grid,
/// v8 0.09-0.10 s) at the same logit error (0.804% -> 0.806%; bench/RESULTS.md "Session
/// 16: kv-wstep"). Any side byte is valid in the format.
const SIDE_GRID: u16 = 4;

/// The side byte on the [`SIDE_GRID`] rungs nearest the RMS-in-steps `r`.
fn side_on_grid(r: f64) -> u8 {
    let j = u16::from(side_byte(r));
    // The largest grid rung is 252: the result stays below 256.
    (((j + SIDE_GRID / 2) / SIDE_GRID) * SIDE_GRID).min(255 / SIDE_GRID * SIDE_GRID) as u8
}

/// Encode the centred block with coarsest step `delta` and step codes `codes` (checked).
fn encode_at(p: &V8Params, c: &Centred, delta: f32, codes: &[u8]) -> Vec<u8> {
    let half = 1i32 << (p.bits - 1);
    let rows = c.reg.coded_rows;
    let mut syms = Vec::with_capacity(c.v.len());
    let mut sides = Vec::with_capacity(codes.len());
    for (ch, &e) in codes.iter().enumerate() {
        let step = step_of(delta, e);
        syms.extend(
            c.v[ch * rows..(ch + 1) * rows]
                .iter()
                .map(|&v| code_of(v, step, half)),
        );
        sides.push(side_on_grid(c.mean_sq[ch].sqrt() / f64::from(step)));
    }
    let mut out = write_regions(p, c, V9_VERSION, delta, &sides, codes);
    encode_stream(p, rows, &syms, &sides, &mut out);
    out
}

/// Encode `x` (row-major, rows of `p.width` values) with coarsest step `delta` and one
/// step code per channel (not searched).
///
/// # Errors
/// As [`crate::segment_v8::encode`]; [`QuantError::LengthMismatch`] when `codes` does not
/// hold one code per channel; [`QuantError::InvalidParam`] `step code` when a code gives
/// a step below the smallest normal f32.
pub fn encode(p: &V8Params, x: &[f32], delta: f32, codes: &[u8]) -> Result<Vec<u8>, QuantError> {
    let c = centre(p, x, V9_STEP_CODE_BYTES)?;
    if !step_ok(delta, p.bits) {
        return Err(QuantError::InvalidParam {
            field: "step",
            value: delta.into(),
            reason: "must be finite, positive and below 2^(126 - (k-1))",
        });
    }
    if codes.len() != c.reg.width {
        return Err(QuantError::LengthMismatch {
            what: "v9 step codes (one per channel)",
            input: codes.len(),
            output: c.reg.width,
        });
    }
    if let Some(i) = first_subnormal(delta, codes) {
        return Err(QuantError::InvalidParam {
            field: "step code",
            value: codes[i].into(),
            reason: "gives a channel step below the smallest normal f32",
        });
    }
    Ok(encode_at(p, &c, delta, codes))
}

/// Which channels rotate together under RoPE (encoder policy: the energy of a pair is
/// what shapes the steps; a decoder never needs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopePairs {
    /// Channels `2i` and `2i + 1` (GPT-J, llama.cpp on GGUF's permuted weights; the
    /// store's `RopePairing::Interleaved`).
    Adjacent,
    /// Channels `i` and `i + w / 2` (GPT-NeoX, Hugging Face Llama; `RopePairing::Neox`).
    Halves,
}

/// The encoder's per-channel shape: each channel's step relative to the others
/// (`rel_c = (w_c / geomean(w))^(-gamma / 2)`, `w_c` the mean square of the channel's RoPE
/// pair `2i, 2i + 1` including its mean), its anti-clamp floor `max |y_c| / (2^(k-1) -
/// 1)` and its ceiling `max |y_c|`.
///
/// The ceiling (review16): a step coarser than the channel's largest centred value codes
/// every value as the sign of its offset (one bit, whatever the step) and decodes it at
/// `± step / 2`, so a coarser step only adds error. Without it a RoPE pair of little or
/// no energy (a constant or all-zero pair: `rel` up to 10^6) wanted a step a million
/// times the others': its values decoded thousands away from their inputs (all-zero
/// channels of a SmolLM2 key block read back as ±3694), and `Δ` so large that every
/// other channel's code clamped at 255 (one step for all: the shaping lost).
struct Shape {
    rel: Vec<f64>,
    floor: Vec<f64>,
    ceil: Vec<f64>,
}

fn shape(p: &V8Params, c: &Centred, gamma: f64, pairs: RopePairs) -> Shape {
    let width = c.reg.width;
    let rows = c.reg.coded_rows;
    let energy: Vec<f64> = (0..width)
        .map(|ch| {
            let m = f64::from(f16::from_bits(c.means[ch]).to_f32());
            c.mean_sq[ch] + m * m
        })
        .collect();
    // Width is a power of two >= 16: channels pair up either way.
    let w: Vec<f64> = (0..width)
        .map(|ch| match pairs {
            RopePairs::Adjacent => energy[ch & !1] + energy[ch | 1],
            RopePairs::Halves => energy[ch % (width / 2)] + energy[ch % (width / 2) + width / 2],
        })
        .collect();
    let top = w.iter().copied().fold(0f64, f64::max);
    let rel = if top > 0.0 && top.is_finite() {
        let w: Vec<f64> = w.iter().map(|&v| v.max(1e-12 * top)).collect();
        let log_gm = w.iter().map(|v| v.ln()).sum::<f64>() / width as f64;
        w.iter()
            .map(|&v| ((v.ln() - log_gm) * (-gamma / 2.0)).exp())
            .collect()
    } else {
        vec![1.0; width]
    };
    let levels = f64::from((1i32 << (p.bits - 1)) - 1);
    let ceil: Vec<f64> = (0..width)
        .map(|ch| {
            let top = c.v[ch * rows..(ch + 1) * rows]
                .iter()
                .fold(0f32, |m, v| m.max(v.abs()));
            f64::from(top)
        })
        .collect();
    let floor = ceil.iter().map(|&t| t / levels).collect();
    Shape { rel, floor, ceil }
}

impl Shape {
    /// The step channel `ch` wants at base step `s`: `s * rel_c` within the channel's
    /// floor and ceiling (the floor wins: it is at most the ceiling), at least the
    /// smallest normal f32.
    fn want(&self, ch: usize, s: f64) -> f64 {
        (s * self.rel[ch])
            .min(self.ceil[ch])
            .max(self.floor[ch])
            .max(f64::from(f32::MIN_POSITIVE))
    }
}

/// The coarsest step and step codes at base step `s`: channel `c` wants `s * rel_c`
/// within `floor_c ..= ceil_c` ([`Shape::want`]); `Δ` is the largest; each code is the nearest sixteenth of an octave below
/// `Δ`, clamped to 0..=255, then made coarser while its step falls below the channel's
/// floor or the smallest normal f32.
fn codes_at(sh: &Shape, s: f64) -> (f32, Vec<u8>) {
    let want: Vec<f64> = (0..sh.rel.len()).map(|ch| sh.want(ch, s)).collect();
    let delta = want.iter().copied().fold(0f64, f64::max) as f32;
    let per_octave = f64::from(V9_STEP_CODES_PER_OCTAVE);
    let codes = want
        .iter()
        .zip(&sh.floor)
        .map(|(&d, &f)| {
            let e = (per_octave * (f64::from(delta) / d).log2()).round();
            // In 0..=255 after the clamp: the cast is exact.
            let mut e = e.clamp(0.0, 255.0) as u8;
            while e > 0 && {
                let st = step_of(delta, e);
                f64::from(st) < f || st < f32::MIN_POSITIVE
            } {
                e -= 1;
            }
            e
        })
        .collect();
    (delta, codes)
}

/// [`encode_to_fit_with`] with γ = 1 (the store's setting) and adjacent RoPE pairs.
///
/// # Errors
/// As [`encode_to_fit_with`].
pub fn encode_to_fit(
    p: &V8Params,
    x: &[f32],
    max_len: usize,
) -> Result<Option<Vec<u8>>, QuantError> {
    encode_to_fit_with(p, x, max_len, 1.0, RopePairs::Adjacent)
}

/// [`encode_to_fit_with`] with adjacent RoPE pairs.
///
/// # Errors
/// As [`encode_to_fit_with`].
pub fn encode_to_fit_gamma(
    p: &V8Params,
    x: &[f32],
    max_len: usize,
    gamma: f64,
) -> Result<Option<Vec<u8>>, QuantError> {
    encode_to_fit_with(p, x, max_len, gamma, RopePairs::Adjacent)
}

/// Encode `x` within `max_len` bytes with per-channel steps shaped by the block's RoPE-pair
/// energy (pairs as `pairs` says) to the power `-gamma / 2` (0 gives one step, as v8, plus
/// the floors). The base
/// step walks TQTC version 7's rate ladder ([`crate::segment_v7::step_at`]) up from rung 0,
/// where every channel sits at its anti-clamp floor (no finer step codes anything
/// better): rung 0 when it fits, else a fitting rung whose next finer rung does not
/// (bracketed from an entropy estimate, then bisected). `Ok(None)` when not even the
/// coarsest rung fits. Deterministic: the same input gives the same bytes.
///
/// # Errors
/// As [`crate::segment_v8::encode`] (but for the step, which this picks);
/// [`QuantError::InvalidParam`] `gamma` when it is not finite.
pub fn encode_to_fit_with(
    p: &V8Params,
    x: &[f32],
    max_len: usize,
    gamma: f64,
    pairs: RopePairs,
) -> Result<Option<Vec<u8>>, QuantError> {
    if !gamma.is_finite() {
        return Err(QuantError::InvalidParam {
            field: "gamma",
            value: gamma,
            reason: "must be finite",
        });
    }
    let c = centre(p, x, V9_STEP_CODE_BYTES)?;
    if max_len < c.reg.stream {
        return Ok(None);
    }
    let sh = shape(p, &c, gamma, pairs);
    // Rung 0: the largest base step at which every channel still sits at its floor.
    let s0 = sh
        .floor
        .iter()
        .zip(&sh.rel)
        .filter(|(&f, _)| f > 0.0)
        .map(|(&f, &r)| f / r)
        .fold(f64::INFINITY, f64::min);
    let s0 = if s0.is_finite() {
        (s0 as f32).max(f32::MIN_POSITIVE)
    } else {
        f32::MIN_POSITIVE
    };
    // The ladder goes at least V7_RATE_RUNGS rungs up, and on to the base step at which
    // every channel sits at its ceiling (nothing changes above it): a channel of tiny
    // values (floor / rel far below the others') starts the ladder lower than 24 octaves
    // under the others' useful steps (review16: such blocks found no fitting rung).
    let s_top = sh
        .ceil
        .iter()
        .zip(&sh.rel)
        .filter(|(&t, _)| t > 0.0)
        .map(|(&t, &r)| t / r)
        .fold(0f64, f64::max);
    let octaves = (s_top / f64::from(s0)).log2();
    let top = if octaves.is_finite() && octaves > 0.0 {
        // A finite f64 ratio is below 2^2100: at most 67,200 rungs, within i32 (and `as`
        // saturates). Rungs whose f32 step overflows do not fit (`step_ok`).
        V7_RATE_RUNGS.max((octaves * f64::from(V7_RATE_PER_OCTAVE)).ceil() as i32 + 1)
    } else {
        V7_RATE_RUNGS
    };
    let try_rung = |t: i32| -> Option<Vec<u8>> {
        let (delta, codes) = codes_at(&sh, f64::from(step_at(s0, t)));
        if !step_ok(delta, p.bits) {
            return None;
        }
        let bytes = encode_at(p, &c, delta, &codes);
        (bytes.len() <= max_len).then_some(bytes)
    };
    if let Some(b) = try_rung(0) {
        return Ok(Some(b));
    }
    let t0 = estimated_rung_by(p, &c, max_len, |t, ch| {
        sh.want(ch, f64::from(step_at(s0, t)))
    });
    Ok(bracket_and_bisect(t0.min(top), top, try_rung))
}

/// A v9 segment whose header, raw rows, means, side bytes and step codes are validated
/// (the stream is checked as it is decoded).
#[derive(Clone, Debug)]
pub struct SegmentV9<'a> {
    head: Header,
    steps: Vec<f32>,
    bytes: &'a [u8],
}

impl<'a> SegmentV9<'a> {
    /// Validate `bytes` as a v9 segment up to its rANS stream.
    ///
    /// # Errors
    /// [`QuantError::Truncated`] (`v9 header`, `v9 raw rows`, `v9 means`, `v9 side bytes`,
    /// `v9 step codes`), [`QuantError::BadMagic`], [`QuantError::UnsupportedVersion`],
    /// [`QuantError::CorruptField`] (`bits`, `width_log2`, `lanes_log2`, `values`, `step`,
    /// `raw_rows`, `raw value`, `mean`, `step code`: one whose step is below the smallest
    /// normal f32), each at its offset.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, QuantError> {
        let head = parse_regions(bytes, V9_VERSION, &V9_REGION_NAMES, V9_STEP_CODE_BYTES)?;
        let codes = &bytes[head.reg.sides_end..head.reg.stream];
        if let Some(i) = first_subnormal(head.step, codes) {
            return Err(QuantError::CorruptField {
                field: "step code",
                offset: head.reg.sides_end + i,
                value: codes[i].into(),
                reason: "gives a channel step below the smallest normal f32",
            });
        }
        let steps = codes.iter().map(|&e| step_of(head.step, e)).collect();
        Ok(Self { head, steps, bytes })
    }

    /// Number of values.
    #[must_use]
    pub fn values(&self) -> usize {
        self.head.n
    }

    /// Values per row (channels).
    #[must_use]
    pub fn width(&self) -> usize {
        self.head.reg.width
    }

    /// Leading rows kept as f16.
    #[must_use]
    pub fn raw_rows(&self) -> usize {
        self.head.reg.raw_rows
    }

    /// Code width `k`.
    #[must_use]
    pub fn bits(&self) -> u8 {
        self.head.bits
    }

    /// The coarsest step `Δ` (the header's step field, at byte 16).
    #[must_use]
    pub fn delta(&self) -> f32 {
        self.head.step
    }

    /// The side bytes, one per channel.
    #[must_use]
    pub fn sides(&self) -> &'a [u8] {
        &self.bytes[self.head.reg.means_end..self.head.reg.sides_end]
    }

    /// The step codes, one per channel.
    #[must_use]
    pub fn step_codes(&self) -> &'a [u8] {
        &self.bytes[self.head.reg.sides_end..self.head.reg.stream]
    }

    /// Each channel's step ([`step_of`] its code).
    #[must_use]
    pub fn steps(&self) -> &[f32] {
        &self.steps
    }

    /// Channel `c`'s mean (`c` below [`SegmentV9::width`]), `None` past the last channel.
    #[must_use]
    pub fn mean(&self, c: usize) -> Option<f32> {
        (c < self.head.reg.width).then(|| {
            let off = self.head.reg.raw_end + c * V8_F16_BYTES;
            f16::from_bits(u16::from_le_bytes([self.bytes[off], self.bytes[off + 1]])).to_f32()
        })
    }

    /// Decode into `dst` (resized to [`SegmentV9::values`], which must be at most
    /// `max_values`), row-major: the raw rows as stored, then value `(r, c)` of the coded
    /// rows from its code `s` as `mean_c + (s - 2^(k-1) + 1/2) * step_c`, in f32.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] when the segment holds more than `max_values`
    /// values; the stream's errors ([`QuantError::Truncated`] `rans states` / `rans
    /// stream`, [`QuantError::CorruptField`] `rans stream` / `rans state` / `rans final
    /// state`, [`QuantError::TrailingBytes`]).
    pub fn decode(&self, max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
        let steps = &self.steps;
        decode_channels(
            self.bytes,
            &self.head,
            max_values,
            "v9 values (must be at most the values the caller expects)",
            dst,
            |c| steps[c],
        )
    }
}

/// Parse and decode a v9 segment into `dst` ([`SegmentV9::parse`], [`SegmentV9::decode`]).
///
/// # Errors
/// As those two.
pub fn decode(bytes: &[u8], max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
    SegmentV9::parse(bytes)?.decode(max_values, dst)
}

#[cfg(test)]
#[path = "segment_v9_tests.rs"]
mod tests;
