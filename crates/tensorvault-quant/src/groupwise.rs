//! Groupwise symmetric k-bit quantization (k = 2..=8) with one f16 scale per group.
//!
//! A frame of `n` values is cut into groups of `g` consecutive values (`g` a power of two
//! in 16..=1024; the last group may be shorter). Per group, with `B = 2^(k-1)`:
//!
//! * [`Levels::Symmetric`] (default): `s = f16_up(max|x| / (B-1))`, codes
//!   `q = clamp(round_half_away(x * (1/s)), -(B-1), B-1)`.
//! * [`Levels::Full`] (gguf Q4_0 style): `m` = the first value with the largest
//!   magnitude, `s = f16_up(m / -B)` (signed), `q = clamp(round_half_away(x * (1/s)), -B, B-1)`.
//!
//! `f16_up` rounds to the nearest f16 and then, if that lost magnitude, steps one f16 up
//! in magnitude, so the group's extreme never overshoots the top level. A zero group has
//! `s = 0` and all codes 0. Codes are stored as `u = q + B` (so `0 ..= 2^k - 1`) and bit
//! packed ([`crate::bitpack`]); decoding is `x' = s * (u - B)`. Every value whose code was
//! not clamped satisfies `|x - x'| <= s/2`; in symmetric mode a freshly fitted group never
//! clamps. Spec: `docs/formats/quant.md`.
//!
//! ```
//! use tensorvault_quant::groupwise::{decode, encode, QuantParams};
//! let x: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin()).collect();
//! let p = QuantParams::new(5, 64)?;
//! let mut scales = vec![0u16; p.groups(x.len())];
//! let mut packed = vec![0u8; p.packed_len(x.len())];
//! encode(&p, &x, &mut scales, &mut packed)?;
//! let mut y = vec![0f32; x.len()];
//! decode(&p, &scales, &packed, &mut y)?;
//! assert!(x.iter().zip(&y).all(|(a, b)| (a - b).abs() <= 1.0 / 15.0 / 2.0 + 1e-6));
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use half::f16;

use crate::bitpack::{self, check_bits};
use crate::error::check_len;
use crate::layout::{self, MAX_GROUP_LOG2, MAX_GROUP_SIZE, MIN_GROUP_LOG2};
use crate::QuantError;

/// Which code levels a group uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Levels {
    /// `±(2^(k-1) - 1)`, scale `max|x| / (2^(k-1) - 1)` (never clamps a fitted group).
    #[default]
    Symmetric,
    /// `-2^(k-1) ..= 2^(k-1) - 1` with a signed scale `m / -2^(k-1)` (gguf's Q4_0 rule):
    /// one more level, but values of the opposite sign near `|m|` are clamped.
    Full,
}

/// Bit width, group size and level convention of a groupwise quantizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuantParams {
    bits: u8,
    group_log2: u8,
    levels: Levels,
}

/// What clamping did to one encoded frame.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ClampStats {
    /// Values whose rounded code fell outside the levels and was clamped.
    pub clamped: u64,
    /// The largest `|x - x'|` among the clamped values (0 when none).
    pub max_clamp_error: f32,
}

impl ClampStats {
    /// Merge another frame's statistics into these.
    pub fn add(&mut self, other: ClampStats) {
        self.clamped += other.clamped;
        self.max_clamp_error = self.max_clamp_error.max(other.max_clamp_error);
    }
}

impl QuantParams {
    /// Symmetric quantizer with `bits` bits and `group_size` values per scale.
    ///
    /// # Errors
    /// [`QuantError::InvalidBits`] outside 2..=8; [`QuantError::InvalidGroupSize`] for a
    /// group size that is 0, not a power of two, or outside 16..=1024.
    pub fn new(bits: u8, group_size: usize) -> Result<Self, QuantError> {
        check_bits(bits)?;
        let log2 = group_size.trailing_zeros();
        if !group_size.is_power_of_two()
            || !(u32::from(MIN_GROUP_LOG2)..=u32::from(MAX_GROUP_LOG2)).contains(&log2)
        {
            return Err(QuantError::InvalidGroupSize { group_size });
        }
        Ok(QuantParams {
            bits,
            group_log2: log2 as u8,
            levels: Levels::Symmetric,
        })
    }

    /// Symmetric quantizer with the width's default group size
    /// ([`layout::default_group_size`]).
    ///
    /// # Errors
    /// [`QuantError::InvalidBits`] outside 2..=8.
    pub fn for_bits(bits: u8) -> Result<Self, QuantError> {
        check_bits(bits)?;
        Self::new(bits, layout::default_group_size(bits))
    }

    /// The same quantizer with another level convention.
    #[must_use]
    pub fn with_levels(self, levels: Levels) -> Self {
        QuantParams { levels, ..self }
    }

    /// Bits per code.
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// Values per scale.
    pub fn group_size(&self) -> usize {
        1 << self.group_log2
    }

    pub(crate) fn group_log2(&self) -> u8 {
        self.group_log2
    }

    /// The level convention.
    pub fn levels(&self) -> Levels {
        self.levels
    }

    /// `2^(k-1)`: the code offset (`u = q + bias`).
    pub fn bias(&self) -> i32 {
        1 << (self.bits - 1)
    }

    /// Largest code level `2^(k-1) - 1`.
    pub fn qmax(&self) -> i32 {
        self.bias() - 1
    }

    /// Smallest code level: `-qmax` (symmetric) or `-2^(k-1)` (full).
    pub fn qmin(&self) -> i32 {
        match self.levels {
            Levels::Symmetric => -self.qmax(),
            Levels::Full => -self.bias(),
        }
    }

    /// Number of groups (= scales) for `n` values.
    pub fn groups(&self, n: usize) -> usize {
        n.div_ceil(self.group_size())
    }

    /// Packed code bytes for `n` values.
    pub fn packed_len(&self, n: usize) -> usize {
        bitpack::packed_len(n, self.bits)
    }

    /// Storage cost per value with one scale per group: `bits + 16 / group_size`.
    pub fn bits_per_value(&self) -> f64 {
        f64::from(self.bits) + 16.0 / self.group_size() as f64
    }

    fn group_bytes(&self) -> usize {
        self.group_size() * usize::from(self.bits) / 8
    }
}

/// Largest magnitude of each group (as f32 bits, which order like the magnitudes), and
/// the first non-finite value as an error.
pub(crate) fn group_max_abs(p: &QuantParams, x: &[f32], out: &mut [f32]) -> Result<(), QuantError> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked at run time just above.
        return unsafe { group_max_abs_avx2(p, x, out) };
    }
    group_max_abs_body(p, x, out)
}

/// The same code compiled for AVX2 (results are identical: no fast-math, no FMA).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn group_max_abs_avx2(p: &QuantParams, x: &[f32], out: &mut [f32]) -> Result<(), QuantError> {
    group_max_abs_body(p, x, out)
}

#[inline(always)]
fn group_max_abs_body(p: &QuantParams, x: &[f32], out: &mut [f32]) -> Result<(), QuantError> {
    for (k, (chunk, o)) in x.chunks(p.group_size()).zip(out.iter_mut()).enumerate() {
        // Integer max over the magnitude bits: branch-free, vectorises, and NaN/Inf
        // (exponent all ones) come out as >= 0x7f80_0000.
        let m = chunk
            .iter()
            .fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff));
        if m >= 0x7f80_0000 {
            let i = chunk.iter().position(|v| !v.is_finite()).unwrap_or(0);
            return Err(QuantError::NonFinite {
                index: k * p.group_size() + i,
                value: chunk[i],
            });
        }
        *o = f32::from_bits(m);
    }
    Ok(())
}

/// The nearest f16 to `v`, stepped one unit up in magnitude if rounding lost magnitude.
fn f16_up(v: f32) -> u16 {
    let h = f16::from_f32(v);
    if h.to_f32().abs() < v.abs() {
        h.to_bits() + 1
    } else {
        h.to_bits()
    }
}

/// Fit one scale per group to `x`, given the groups' max magnitudes.
pub(crate) fn fit_from_max(
    p: &QuantParams,
    x: &[f32],
    max_abs: &[f32],
    scales: &mut [u16],
) -> Result<(), QuantError> {
    let gs = p.group_size();
    for (k, (&m, s)) in max_abs.iter().zip(scales.iter_mut()).enumerate() {
        let v = match p.levels {
            Levels::Symmetric => m / p.qmax() as f32,
            Levels::Full => {
                // The first value of largest magnitude, keeping its sign.
                let chunk = &x[k * gs..((k + 1) * gs).min(x.len())];
                let e = chunk.iter().copied().find(|v| v.abs() == m).unwrap_or(0.0);
                e / -(p.bias() as f32)
            }
        };
        // A zero group stores +0 whatever the sign of its zeros.
        let h = if m == 0.0 { 0 } else { f16_up(v) };
        if h & 0x7fff >= 0x7c00 {
            return Err(QuantError::ScaleOverflow {
                group: k,
                max_abs: m,
            });
        }
        *s = h;
    }
    Ok(())
}

/// Quantize `x` with the given scales into packed codes; every input is trusted (finite
/// values, finite scales, exact lengths).
pub(crate) fn quantize_trusted(
    p: &QuantParams,
    x: &[f32],
    scales: &[u16],
    packed: &mut [u8],
) -> ClampStats {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked at run time just above.
        return unsafe { quantize_avx2(p, x, scales, packed) };
    }
    quantize_baseline(p, x, scales, packed)
}

/// The kernel compiled for the baseline target (SSE2 on x86-64); public to tests so the
/// AVX2 build can be compared against it.
pub(crate) fn quantize_baseline(
    p: &QuantParams,
    x: &[f32],
    scales: &[u16],
    packed: &mut [u8],
) -> ClampStats {
    quantize_body(p, x, scales, packed)
}

/// The same kernel compiled for AVX2 (results are identical: no fast-math, no FMA).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn quantize_avx2(p: &QuantParams, x: &[f32], scales: &[u16], packed: &mut [u8]) -> ClampStats {
    quantize_body(p, x, scales, packed)
}

#[inline(always)]
fn quantize_body(p: &QuantParams, x: &[f32], scales: &[u16], packed: &mut [u8]) -> ClampStats {
    let (qmin, qmax, bias) = (p.qmin(), p.qmax(), p.bias());
    let (lo, hi) = (qmin as f32 - 1.0, qmax as f32 + 1.0);
    let mut stats = ClampStats::default();
    let mut buf = [0u8; MAX_GROUP_SIZE];
    let chunks = x
        .chunks(p.group_size())
        .zip(packed.chunks_mut(p.group_bytes()));
    for ((chunk, out), &sb) in chunks.zip(scales) {
        let s = f16::from_bits(sb).to_f32();
        let inv = if s == 0.0 { 0.0 } else { 1.0 / s };
        let codes = &mut buf[..chunk.len()];
        let mut clamped = 0u32;
        for (v, c) in chunk.iter().zip(codes.iter_mut()) {
            // Clamping first keeps the integer conversion in range and cannot change a
            // result that is clamped afterwards anyway.
            let y = (v * inv).clamp(lo, hi);
            let t = y as i32;
            let f = y - t as f32;
            let r = t + i32::from(f >= 0.5) - i32::from(f <= -0.5);
            let q = r.clamp(qmin, qmax);
            clamped += u32::from(r != q);
            *c = (q + bias) as u8;
        }
        if clamped != 0 {
            stats.clamped += u64::from(clamped);
            for (v, &c) in chunk.iter().zip(codes.iter()) {
                let e = (v - s * (i32::from(c) - bias) as f32).abs();
                if e > s.abs() * 0.5 {
                    stats.max_clamp_error = stats.max_clamp_error.max(e);
                }
            }
        }
        bitpack::pack_unchecked(codes, p.bits, out);
    }
    stats
}

/// Unpack and dequantize; lengths trusted, scales may be anything.
pub(crate) fn dequantize_trusted<I: IntoIterator<Item = u16>>(
    p: &QuantParams,
    scales: I,
    packed: &[u8],
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked at run time just above.
        return unsafe { dequantize_avx2(p, scales, packed, out) };
    }
    dequantize_body(p, scales, packed, out);
}

/// The same kernel compiled for AVX2 (results are identical: no fast-math, no FMA).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dequantize_avx2<I: IntoIterator<Item = u16>>(
    p: &QuantParams,
    scales: I,
    packed: &[u8],
    out: &mut [f32],
) {
    dequantize_body(p, scales, packed, out);
}

#[inline(always)]
fn dequantize_body<I: IntoIterator<Item = u16>>(
    p: &QuantParams,
    scales: I,
    packed: &[u8],
    out: &mut [f32],
) {
    let bias = p.bias() as f32;
    let mut buf = [0u8; MAX_GROUP_SIZE];
    let chunks = out
        .chunks_mut(p.group_size())
        .zip(packed.chunks(p.group_bytes()));
    for ((chunk, src), sb) in chunks.zip(scales) {
        let s = f16::from_bits(sb).to_f32();
        let codes = &mut buf[..chunk.len()];
        bitpack::unpack_unchecked(src, p.bits, codes);
        for (o, &c) in chunk.iter_mut().zip(codes.iter()) {
            *o = (f32::from(c) - bias) * s;
        }
    }
}

/// Check stored scales: finite, and non-negative unless `levels` is [`Levels::Full`].
/// `offset` is the byte offset of `scales[0]` for the error.
pub(crate) fn check_scales(
    levels: Levels,
    scales: impl Iterator<Item = u16>,
    offset: usize,
) -> Result<(), QuantError> {
    for (index, bits) in scales.enumerate() {
        let reason = if bits & 0x7fff >= 0x7c00 {
            "not finite"
        } else if levels == Levels::Symmetric && bits & 0x8000 != 0 && bits != 0x8000 {
            "negative in a symmetric segment"
        } else {
            continue;
        };
        return Err(QuantError::CorruptScale {
            index,
            offset: offset + index * layout::SCALE_BYTES,
            bits,
            reason,
        });
    }
    Ok(())
}

/// Fit scales to `x` and quantize it: `scales` must hold [`QuantParams::groups`] and
/// `packed` [`QuantParams::packed_len`] entries for `x.len()` values.
///
/// # Errors
/// [`QuantError::LengthMismatch`] for wrong output lengths, [`QuantError::NonFinite`]
/// naming the first NaN/Inf input, [`QuantError::ScaleOverflow`] when a group's scale
/// exceeds the f16 range.
pub fn encode(
    p: &QuantParams,
    x: &[f32],
    scales: &mut [u16],
    packed: &mut [u8],
) -> Result<ClampStats, QuantError> {
    check_len("groupwise encode (scales)", p.groups(x.len()), scales.len())?;
    check_len(
        "groupwise encode (packed bytes)",
        p.packed_len(x.len()),
        packed.len(),
    )?;
    let mut max_abs = vec![0f32; scales.len()];
    group_max_abs(p, x, &mut max_abs)?;
    fit_from_max(p, x, &max_abs, scales)?;
    Ok(quantize_trusted(p, x, scales, packed))
}

/// Quantize `x` with scales fitted elsewhere (e.g. a previous frame's), counting clamps.
///
/// # Errors
/// [`QuantError::LengthMismatch`] for wrong lengths, [`QuantError::NonFinite`] for a
/// NaN/Inf input, [`QuantError::CorruptScale`] for a non-finite (or, symmetric, negative)
/// scale.
pub fn encode_with_scales(
    p: &QuantParams,
    x: &[f32],
    scales: &[u16],
    packed: &mut [u8],
) -> Result<ClampStats, QuantError> {
    check_len("groupwise encode (scales)", p.groups(x.len()), scales.len())?;
    check_len(
        "groupwise encode (packed bytes)",
        p.packed_len(x.len()),
        packed.len(),
    )?;
    check_scales(p.levels, scales.iter().copied(), 0)?;
    let mut max_abs = vec![0f32; scales.len()];
    group_max_abs(p, x, &mut max_abs)?;
    Ok(quantize_trusted(p, x, scales, packed))
}

/// Dequantize packed codes into `out` (`x' = s * (u - 2^(k-1))`).
///
/// # Errors
/// [`QuantError::LengthMismatch`] for wrong lengths, [`QuantError::CorruptScale`] for a
/// non-finite (or, symmetric, negative) scale.
pub fn decode(
    p: &QuantParams,
    scales: &[u16],
    packed: &[u8],
    out: &mut [f32],
) -> Result<(), QuantError> {
    check_len(
        "groupwise decode (scales)",
        p.groups(out.len()),
        scales.len(),
    )?;
    check_len(
        "groupwise decode (packed bytes)",
        p.packed_len(out.len()),
        packed.len(),
    )?;
    check_scales(p.levels, scales.iter().copied(), 0)?;
    dequantize_trusted(p, scales.iter().copied(), packed, out);
    Ok(())
}

/// Scalar reference of one value's code (for tests and the spec): what `encode` stores.
pub fn reference_code(p: &QuantParams, x: f32, scale_bits: u16) -> u8 {
    let s = f16::from_bits(scale_bits).to_f32();
    let inv = if s == 0.0 { 0.0 } else { 1.0 / s };
    let y = x * inv;
    // f64 holds y exactly; round() on f64 is round-half-away-from-zero.
    let r = f64::from(y)
        .round()
        .clamp(f64::from(p.qmin()), f64::from(p.qmax())) as i32;
    (r + p.bias()) as u8
}

#[cfg(test)]
#[path = "groupwise_tests.rs"]
pub(crate) mod tests;
