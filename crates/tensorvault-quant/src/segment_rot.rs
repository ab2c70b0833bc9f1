//! The rotated segment (TQTC version 3, `docs/formats/quant.md` §6): one run of `n`
//! values, optionally the first `raw_rows` rows of a `[rows, width]` layout kept as f16
//! (an attention-sink token), the rest cut into blocks of `b = 2^k` consecutive values.
//! Each block is rotated by a seeded randomized Hadamard transform ([`crate::rotation`]),
//! which leaves its values close to Gaussian, and quantized against fixed levels fitted to
//! N(0, 1) ([`crate::levels`]) times one log-coded scale byte per block. The decoder
//! looks each code up, scales it and undoes the rotation.
//!
//! ```
//! use tensorvault_quant::levels::LevelSet;
//! use tensorvault_quant::segment_rot::{encode, ScaleRule, SegmentV3, V3Params};
//! // 128 tokens x 64 channels, one rotation block per token, token 0 raw.
//! let x: Vec<f32> = (0..128 * 64).map(|i| ((i * 7919 % 113) as f32 - 56.0) * 0.01).collect();
//! let p = V3Params { bits: 3, levels: LevelSet::LloydMax, block_log2: 6, rotate: true,
//!                    seed: 7, width: 64, raw_rows: 1, scale: ScaleRule::Rms, wide_scales: false };
//! let bytes = encode(&p, &x)?;
//! assert_eq!(bytes.len(), p.encoded_len(x.len())?);
//! let mut y = vec![0f32; x.len()];
//! SegmentV3::parse(&bytes)?.decode(&mut y)?;
//! assert_eq!(y[..64], x[..64].iter().map(|&v| half::f16::from_f32(v).to_f32()).collect::<Vec<_>>()[..]);
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use crate::bitpack::{pack_unchecked, packed_len, unpack_unchecked};
use crate::error::{check_len, corrupt, segment_prefix};
use crate::layout::{
    BITS_OFFSET, MAGIC, MAGIC_OFFSET, MAX_BITS, MIN_BITS, V2_RAW_BYTES, V3_BLOCK_LOG2_OFFSET,
    V3_FLAGS_OFFSET, V3_FLAG_ROTATED, V3_FLAG_WIDE_SCALES, V3_HEADER_LEN, V3_KNOWN_FLAGS,
    V3_LEVELS_OFFSET, V3_MAX_BLOCK_LOG2, V3_MIN_BLOCK_LOG2, V3_RAW_ROWS_OFFSET, V3_RESERVED_OFFSET,
    V3_SCALE_BASE_OFFSET, V3_SCALE_CODE_BYTES, V3_SEED_OFFSET, V3_VALUES_OFFSET, V3_VERSION,
    V3_WIDE_SCALE_BYTES, V3_WIDTH_OFFSET, VERSION_OFFSET,
};
use crate::le::{u16_at, u32_at};
use crate::levels::{scale_code, scale_step, LevelSet, Quantizer};
use crate::rotation::Rotation;
use crate::QuantError;

/// How the encoder picks a block's scale (the format stores the scale, not the rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleRule {
    /// The block's RMS (the level tables are for unit variance).
    Rms,
    /// The block's max |value| over the table's largest level (nothing clips).
    Max,
    /// Codes from the RMS scale, then the stored scale re-picked so the decoded block
    /// keeps the rotated block's norm (`|y| / |T[codes]|`): inner products are not
    /// shrunk by the levels' pull towards zero (what nearest-neighbour recall needs).
    NormMatched,
    /// The block's RMS times `n / 16`. With `n > 16` the levels sit further apart than
    /// the table's MSE-optimal spacing, so fewer codes are used and the TQTC version 5
    /// envelope's rANS packs them into fewer bits than `bits`: entropy-coded scalar
    /// quantization, which beats Lloyd-Max codes at the same entropy-coded size
    /// (bench/RESULTS.md, "Session 11: kv-side"). `RmsTimes(16)` is `Rms`.
    RmsTimes(u8),
    /// The [`ScaleRule::Max`] scale, raised to at least `f32::from_bits(floor)`: every
    /// block whose values the floor does not clip shares one step (entropy-coded
    /// uniform levels at one step over the segment, which is what minimizes the error
    /// for an entropy-coded size), and a block with larger values keeps its own
    /// no-clip scale. [`crate::ecsq`] picks the floor so the v5 envelope fits a budget.
    MaxFloor(u32),
}

/// Encoder settings of a v3 segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V3Params {
    /// Bits per code, 2..=8.
    pub bits: u8,
    /// The level table the codes index.
    pub levels: LevelSet,
    /// log2 of the block size (rotation and scale), 2..=10.
    pub block_log2: u8,
    /// Rotate each block (clear: levels and scales only, for comparison).
    pub rotate: bool,
    /// Seed of the rotation's sign pattern.
    pub seed: u32,
    /// Values per row (>= 1); raw rows need `n % width == 0`.
    pub width: u16,
    /// Leading rows stored as f16 instead of quantized.
    pub raw_rows: u16,
    /// How block scales are chosen (encoder only).
    pub scale: ScaleRule,
    /// One f16 scale per block (2 bytes, ~0.05% precision) instead of one log-coded
    /// byte (4.4% steps).
    pub wide_scales: bool,
}

/// The shape of a segment's regions, derived from its header fields.
#[derive(Clone, Copy, Debug)]
struct Regions {
    raw_vals: usize,
    quant_vals: usize,
    blocks: usize,
    raw_end: usize,
    scales_end: usize,
    end: usize,
}

impl V3Params {
    /// Values per block.
    #[must_use]
    pub fn block(&self) -> usize {
        1usize << self.block_log2
    }

    fn scale_bytes(&self) -> usize {
        if self.wide_scales {
            V3_WIDE_SCALE_BYTES
        } else {
            V3_SCALE_CODE_BYTES
        }
    }

    /// Check the settings against `n` values and lay out the regions (errors name the
    /// header field a parser would blame).
    fn regions(&self, n: usize) -> Result<Regions, QuantError> {
        if !(MIN_BITS..=MAX_BITS).contains(&self.bits) {
            return Err(QuantError::InvalidBits { bits: self.bits });
        }
        if !(V3_MIN_BLOCK_LOG2..=V3_MAX_BLOCK_LOG2).contains(&self.block_log2) {
            return Err(corrupt(
                "block_log2",
                V3_BLOCK_LOG2_OFFSET,
                self.block_log2.into(),
                "must be in 2..=10",
            ));
        }
        if n == 0 || u32::try_from(n).is_err() {
            return Err(corrupt(
                "values",
                V3_VALUES_OFFSET,
                n as u64,
                "must be in 1..=2^32-1",
            ));
        }
        let width = usize::from(self.width);
        if width == 0 {
            return Err(corrupt("width", V3_WIDTH_OFFSET, 0, "must be >= 1"));
        }
        let raw_vals = usize::from(self.raw_rows) * width;
        if raw_vals > n {
            return Err(corrupt(
                "raw_rows",
                V3_RAW_ROWS_OFFSET,
                self.raw_rows.into(),
                "raw rows hold more values than the segment",
            ));
        }
        if self.raw_rows > 0 && !n.is_multiple_of(width) {
            return Err(corrupt(
                "width",
                V3_WIDTH_OFFSET,
                self.width.into(),
                "raw rows need whole rows",
            ));
        }
        let quant_vals = n - raw_vals;
        if !quant_vals.is_multiple_of(self.block()) {
            return Err(corrupt(
                "values",
                V3_VALUES_OFFSET,
                n as u64,
                "the quantized values are not a whole number of blocks",
            ));
        }
        let blocks = quant_vals / self.block();
        let raw_end = V3_HEADER_LEN + raw_vals * V2_RAW_BYTES;
        let scales_end = raw_end + blocks * self.scale_bytes();
        let end = scales_end + packed_len(quant_vals, self.bits);
        Ok(Regions {
            raw_vals,
            quant_vals,
            blocks,
            raw_end,
            scales_end,
            end,
        })
    }

    /// Exact byte length of the segment [`encode`] writes for `n` values.
    ///
    /// # Errors
    /// As [`encode`] for invalid settings.
    pub fn encoded_len(&self, n: usize) -> Result<usize, QuantError> {
        Ok(self.regions(n)?.end)
    }

    fn rotation(&self) -> Result<Option<Rotation>, QuantError> {
        self.rotate
            .then(|| Rotation::new(self.seed, self.block()))
            .transpose()
    }
}

/// The largest multiplier of `scale_base` a scale field can hold: `step(255)` for a
/// byte, f16's largest finite value for a wide scale.
fn max_step(wide: bool) -> f32 {
    if wide {
        half::f16::MAX.to_f32()
    } else {
        scale_step(u8::MAX)
    }
}

/// Whether the largest magnitude a code can decode to, `base * max step * max level`
/// (times `sqrt(b)` after the inverse rotation), is finite.
fn reach_is_finite(base: f32, q_max: f32, block: usize, wide: bool) -> bool {
    (base * max_step(wide) * q_max * (block as f32).sqrt()).is_finite()
}

/// The stored multiplier of `scale_base` for a wanted scale `s`: a wide scale is
/// `f16(s / base)` (nearest even; base is the largest wanted scale, so <= 1), a byte is
/// [`scale_code`]. Returns the field's bytes and the scale the decoder will use.
fn code_scale(s: f32, base: f32, wide: bool) -> ([u8; 2], f32) {
    if wide {
        let h = if base > 0.0 && s > 0.0 {
            half::f16::from_f32(s / base)
        } else {
            half::f16::ZERO
        };
        (h.to_bits().to_le_bytes(), base * h.to_f32())
    } else {
        let c = scale_code(s, base);
        ([c, 0], base * scale_step(c))
    }
}

/// Encode `x` as one v3 segment.
///
/// # Errors
/// [`QuantError::NonFinite`] for NaN or infinite values; [`QuantError::OutOfRange`] for
/// a raw-row value beyond f16's range; [`QuantError::ScaleOverflow`] for values whose
/// rotation or scales overflow f32; [`QuantError::InvalidBits`] /
/// [`QuantError::CorruptField`] for settings that do not fit `x`.
pub fn encode(p: &V3Params, x: &[f32]) -> Result<Vec<u8>, QuantError> {
    let reg = p.regions(x.len())?;
    crate::error::check_finite(x)?;
    let quant = Quantizer::new(p.levels, p.bits).ok_or(QuantError::InvalidBits { bits: p.bits })?;
    let rot = p.rotation()?;
    let (raw, q) = x.split_at(reg.raw_vals);
    let b = p.block();
    // Rotated values and each block's wanted scale.
    let mut y = q.to_vec();
    let mut want = Vec::with_capacity(reg.blocks);
    for (bi, blk) in y.chunks_exact_mut(b).enumerate() {
        if let Some(r) = &rot {
            r.forward(blk);
        }
        let s = match p.scale {
            ScaleRule::Rms => rms(blk),
            ScaleRule::RmsTimes(n) => rms(blk) * f32::from(n) / 16.0,
            ScaleRule::Max => blk.iter().fold(0f32, |m, v| m.max(v.abs())) / quant.max_level(),
            ScaleRule::MaxFloor(floor) => (blk.iter().fold(0f32, |m, v| m.max(v.abs()))
                / quant.max_level())
            .max(f32::from_bits(floor)),
            ScaleRule::NormMatched => {
                // Codes against the exact RMS scale, then the scale that keeps the norm.
                let r = rms(blk);
                let inv = if r > 0.0 { 1.0 / r } else { 0.0 };
                let lv = quant.levels();
                let (mut dot, mut ll) = (0f64, 0f64);
                for &v in blk.iter() {
                    let l = f64::from(lv[usize::from(quant.code(v * inv))]);
                    ll += l * l;
                    dot += f64::from(v) * f64::from(v);
                }
                if ll > 0.0 {
                    (dot / ll).sqrt() as f32
                } else {
                    0.0
                }
            }
        };
        if !s.is_finite() || blk.iter().any(|v| !v.is_finite()) {
            let max_abs = q[bi * b..(bi + 1) * b]
                .iter()
                .fold(0f32, |m, v| m.max(v.abs()));
            return Err(QuantError::ScaleOverflow { group: bi, max_abs });
        }
        want.push(s);
    }
    let smax = want.iter().fold(0f32, |m, &s| m.max(s));
    let base = if smax <= 0.0 {
        0.0
    } else if p.wide_scales {
        smax
    } else {
        smax / scale_step(u8::MAX)
    };
    if !base.is_finite() || !reach_is_finite(base, quant.max_level(), b, p.wide_scales) {
        let max_abs = q.iter().fold(0f32, |m, v| m.max(v.abs()));
        return Err(QuantError::ScaleOverflow { group: 0, max_abs });
    }
    let mut out = vec![0u8; reg.end];
    out[MAGIC_OFFSET..MAGIC_OFFSET + MAGIC.len()].copy_from_slice(&MAGIC);
    out[VERSION_OFFSET] = V3_VERSION;
    out[BITS_OFFSET] = p.bits;
    out[V3_LEVELS_OFFSET] = p.levels.byte();
    out[V3_BLOCK_LOG2_OFFSET] = p.block_log2;
    out[V3_VALUES_OFFSET..V3_VALUES_OFFSET + 4].copy_from_slice(&(x.len() as u32).to_le_bytes());
    out[V3_WIDTH_OFFSET..V3_WIDTH_OFFSET + 2].copy_from_slice(&p.width.to_le_bytes());
    out[V3_RAW_ROWS_OFFSET..V3_RAW_ROWS_OFFSET + 2].copy_from_slice(&p.raw_rows.to_le_bytes());
    out[V3_SEED_OFFSET..V3_SEED_OFFSET + 4].copy_from_slice(&p.seed.to_le_bytes());
    out[V3_SCALE_BASE_OFFSET..V3_SCALE_BASE_OFFSET + 4]
        .copy_from_slice(&base.to_bits().to_le_bytes());
    out[V3_FLAGS_OFFSET] = if p.rotate { V3_FLAG_ROTATED } else { 0 }
        | if p.wide_scales {
            V3_FLAG_WIDE_SCALES
        } else {
            0
        };
    for (i, (d, &v)) in out[V3_HEADER_LEN..reg.raw_end]
        .chunks_exact_mut(V2_RAW_BYTES)
        .zip(raw)
        .enumerate()
    {
        let h = half::f16::from_f32(v);
        if h.is_infinite() {
            return Err(QuantError::OutOfRange {
                index: i,
                value: v,
                target: "f16 (raw row)",
            });
        }
        d.copy_from_slice(&h.to_bits().to_le_bytes());
    }
    let mut codes = vec![0u8; reg.quant_vals];
    let sb = p.scale_bytes();
    for ((blk, cs), (sc, &s)) in y.chunks_exact(b).zip(codes.chunks_exact_mut(b)).zip(
        out[reg.raw_end..reg.scales_end]
            .chunks_exact_mut(sb)
            .zip(&want),
    ) {
        let (field, stored) = code_scale(s, base, p.wide_scales);
        sc.copy_from_slice(&field[..sb]);
        // Norm-matched scales code against the block's RMS (the stored scale only
        // rescales the levels); the other rules against the stored scale.
        let code_scale = if p.scale == ScaleRule::NormMatched {
            rms(blk)
        } else {
            stored
        };
        let inv = if code_scale > 0.0 {
            1.0 / code_scale
        } else {
            0.0
        };
        quant.codes(blk, inv, cs);
    }
    pack_unchecked(&codes, p.bits, &mut out[reg.scales_end..reg.end]);
    Ok(out)
}

/// The RMS of a block (accumulated in f64).
fn rms(blk: &[f32]) -> f32 {
    let ss: f64 = blk.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    (ss / blk.len().max(1) as f64).sqrt() as f32
}

/// Where a decode takes the codes from.
#[derive(Clone, Copy)]
enum Codes<'b> {
    /// The segment's packed codes.
    Packed(&'b [u8]),
    /// One code per byte (a version 5 envelope's decoded stream).
    Bytes(&'b [u8]),
}

/// A validated v3 segment borrowed from its bytes.
#[derive(Clone, Debug)]
pub struct SegmentV3<'a> {
    bytes: &'a [u8],
    p: V3Params,
    n: usize,
    base: f32,
    reg: Regions,
}

impl<'a> SegmentV3<'a> {
    /// Validate `bytes` as one complete v3 segment.
    ///
    /// # Errors
    /// [`QuantError::Truncated`], [`QuantError::BadMagic`],
    /// [`QuantError::UnsupportedVersion`], [`QuantError::CorruptField`] (bits, levels,
    /// block size, values, width, raw rows, scale base, flags, reserved),
    /// [`QuantError::TrailingBytes`], [`QuantError::CorruptScale`] (a wide scale that is
    /// not a finite f16 >= 0).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, QuantError> {
        Self::parse_to(bytes, true)
    }

    /// Validate `head` as a v3 segment without its packed codes: the header, raw rows
    /// and block scales, exactly (what a version 5 envelope keeps). Decode it with
    /// [`Self::decode_codes`].
    ///
    /// # Errors
    /// As [`Self::parse`], the region after the block scales left out.
    pub(crate) fn parse_head(head: &'a [u8]) -> Result<Self, QuantError> {
        Self::parse_to(head, false)
    }

    /// [`Self::parse`] (`with_codes`) or [`Self::parse_head`].
    fn parse_to(bytes: &'a [u8], with_codes: bool) -> Result<Self, QuantError> {
        let present = bytes.len();
        let (h, bits) = segment_prefix(bytes, "v3 header", V3_HEADER_LEN, V3_VERSION)?;
        let Some(levels) = LevelSet::from_byte(h[V3_LEVELS_OFFSET]) else {
            return Err(corrupt(
                "levels",
                V3_LEVELS_OFFSET,
                h[V3_LEVELS_OFFSET].into(),
                "must be 0 (Lloyd-Max) or 1 (uniform)",
            ));
        };
        let flags = h[V3_FLAGS_OFFSET];
        if flags & !V3_KNOWN_FLAGS != 0 {
            return Err(corrupt(
                "flags",
                V3_FLAGS_OFFSET,
                flags.into(),
                "unknown flag bits set",
            ));
        }
        if let Some(i) = (V3_RESERVED_OFFSET..V3_HEADER_LEN).find(|&i| h[i] != 0) {
            return Err(corrupt("reserved", i, h[i].into(), "must be zero"));
        }
        let n = u32_at(h, V3_VALUES_OFFSET) as usize;
        let p = V3Params {
            bits,
            levels,
            block_log2: h[V3_BLOCK_LOG2_OFFSET],
            rotate: flags & V3_FLAG_ROTATED != 0,
            seed: u32_at(h, V3_SEED_OFFSET),
            width: u16_at(h, V3_WIDTH_OFFSET),
            raw_rows: u16_at(h, V3_RAW_ROWS_OFFSET),
            scale: ScaleRule::Rms,
            wide_scales: flags & V3_FLAG_WIDE_SCALES != 0,
        };
        let reg = p.regions(n)?;
        let base = f32::from_bits(u32_at(h, V3_SCALE_BASE_OFFSET));
        let q_max = levels.table(bits).and_then(|t| t.last()).copied();
        let reach_ok = q_max.is_some_and(|m| reach_is_finite(base, m, p.block(), p.wide_scales));
        if !(base.is_finite() && base >= 0.0 && reach_ok) {
            return Err(corrupt(
                "scale_base",
                V3_SCALE_BASE_OFFSET,
                base.to_bits().into(),
                "must be finite, >= 0 and decode within the f32 range",
            ));
        }
        let end = if with_codes { reg.end } else { reg.scales_end };
        if present < end {
            let what = if present < reg.raw_end {
                "raw rows"
            } else if present < reg.scales_end {
                "block scales"
            } else {
                "codes"
            };
            return Err(QuantError::Truncated {
                what,
                offset: V3_HEADER_LEN as u64,
                end: end as u64,
                present,
            });
        }
        if present > end {
            return Err(QuantError::TrailingBytes {
                expected: end as u64,
                present,
            });
        }
        if p.wide_scales {
            // A wide scale must be a finite f16 >= 0 (the reach check above bounds it).
            let scales = &bytes[reg.raw_end..reg.scales_end];
            for (index, c) in scales.chunks_exact(V3_WIDE_SCALE_BYTES).enumerate() {
                let bits = u16::from_le_bytes([c[0], c[1]]);
                let h = half::f16::from_bits(bits);
                if !h.is_finite() || h.is_sign_negative() && bits != 0x8000 {
                    return Err(QuantError::CorruptScale {
                        index,
                        offset: reg.raw_end + index * V3_WIDE_SCALE_BYTES,
                        bits,
                        reason: "a wide block scale must be a finite f16 >= 0",
                    });
                }
            }
        }
        Ok(Self {
            bytes,
            p,
            n,
            base,
            reg,
        })
    }

    /// Number of values.
    #[must_use]
    pub fn values(&self) -> usize {
        self.n
    }

    /// The segment's settings (`scale` is always [`ScaleRule::Rms`]: it is not stored).
    #[must_use]
    pub fn params(&self) -> V3Params {
        self.p
    }

    /// The scale of each block, in order, as the decoder uses it.
    fn scales(&self) -> impl Iterator<Item = f32> + '_ {
        let wide = self.p.wide_scales;
        self.bytes[self.reg.raw_end..self.reg.scales_end]
            .chunks_exact(self.p.scale_bytes())
            .map(move |c| {
                if wide {
                    self.base * half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32()
                } else {
                    self.base * scale_step(c[0])
                }
            })
    }

    /// The largest block scale (0 when every block is zero).
    #[must_use]
    pub fn max_scale(&self) -> f32 {
        self.scales().fold(0f32, f32::max)
    }

    /// Decode every value into `out` (exactly [`SegmentV3::values`] long).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] if `out` has the wrong length.
    pub fn decode(&self, out: &mut [f32]) -> Result<(), QuantError> {
        self.decode_with(out, true)
    }

    /// [`Self::decode`], with the fused AVX2 path allowed (`simd`, where the CPU has it)
    /// or not (the scalar reference it must match bit for bit).
    pub(crate) fn decode_with(&self, out: &mut [f32], simd: bool) -> Result<(), QuantError> {
        let Some(packed) = self.bytes.get(self.reg.scales_end..self.reg.end) else {
            // Only a head (`parse_head`) lacks its codes.
            return Err(QuantError::Truncated {
                what: "codes",
                offset: self.reg.scales_end as u64,
                end: self.reg.end as u64,
                present: self.bytes.len(),
            });
        };
        self.decode_from(Codes::Packed(packed), out, simd)
    }

    /// Number of quantized values (the codes): the values after the raw rows.
    pub(crate) fn quantized(&self) -> usize {
        self.reg.quant_vals
    }

    /// Decode every value into `out` (exactly [`SegmentV3::values`] long) from the
    /// quantized values' codes, one per byte ([`Self::quantized`] of them, each below
    /// `2^bits`): the same values as [`Self::decode`], without packed codes.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] if `codes` or `out` has the wrong length.
    pub(crate) fn decode_codes(&self, codes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
        self.decode_codes_with(codes, out, true)
    }

    /// [`Self::decode_codes`], with the fused AVX2 path allowed or not.
    pub(crate) fn decode_codes_with(
        &self,
        codes: &[u8],
        out: &mut [f32],
        simd: bool,
    ) -> Result<(), QuantError> {
        check_len("v3 segment codes", self.reg.quant_vals, codes.len())?;
        self.decode_from(Codes::Bytes(codes), out, simd)
    }

    /// Decode from packed codes (checked against the header by `parse`) or from code
    /// bytes (checked by the caller: `quant_vals` of them).
    fn decode_from(&self, codes: Codes<'_>, out: &mut [f32], simd: bool) -> Result<(), QuantError> {
        check_len("v3 segment decode", self.n, out.len())?;
        let b = self.bytes;
        let (raw_out, q_out) = out.split_at_mut(self.reg.raw_vals);
        for (o, c) in raw_out
            .iter_mut()
            .zip(b[V3_HEADER_LEN..self.reg.raw_end].chunks_exact(V2_RAW_BYTES))
        {
            *o = half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
        }
        if self.reg.quant_vals == 0 {
            return Ok(());
        }
        // Both were validated by `parse` (bits 2..=8, block 4..=1024).
        let levels = self.p.levels.table(self.p.bits).unwrap_or(&[]);
        // A 256-entry table: any u8 code indexes it without a bounds check.
        let mut lut = [0f32; 256];
        lut[..levels.len()].copy_from_slice(levels);
        let block = self.p.block();
        // The same value as `Rotation::norm` (the scalar path's), without building the
        // rotation's sign table.
        let norm = if self.p.rotate {
            crate::rotation::norm_of(block)
        } else {
            1.0
        };
        #[cfg(target_arch = "x86_64")]
        if simd && block >= 8 && crate::rot_decode_avx2::available() {
            let signs = self
                .p
                .rotate
                .then(|| crate::rot_decode_avx2::Signs::new(self.p.seed, block));
            for (k, (o, sc)) in q_out.chunks_exact_mut(block).zip(self.scales()).enumerate() {
                // SAFETY: AVX2 was detected; bits are 2..=8 and the block a power of two
                // in 8..=1024 (validated by `parse`), `k * block` is a multiple of 8;
                // packed codes hold all `quant_vals` codes (their length was checked
                // against the header by `parse`), code bytes are `quant_vals` long
                // (checked by `decode_codes_with`).
                unsafe {
                    match codes {
                        Codes::Packed(packed) => crate::rot_decode_avx2::v3_block::<false>(
                            packed,
                            self.p.bits,
                            k * block,
                            &lut,
                            sc * norm,
                            signs.as_ref(),
                            o,
                        ),
                        Codes::Bytes(bytes) => crate::rot_decode_avx2::v3_block::<true>(
                            bytes,
                            self.p.bits,
                            k * block,
                            &lut,
                            sc * norm,
                            signs.as_ref(),
                            o,
                        ),
                    }
                }
            }
            return Ok(());
        }
        let rot = self.p.rotation()?;
        let unpacked;
        let codes = match codes {
            Codes::Packed(packed) => {
                let mut c = vec![0u8; self.reg.quant_vals];
                unpack_unchecked(packed, self.p.bits, &mut c);
                unpacked = c;
                &unpacked[..]
            }
            Codes::Bytes(bytes) => bytes,
        };
        for ((o, c), sc) in q_out
            .chunks_exact_mut(block)
            .zip(codes.chunks_exact(block))
            .zip(self.scales())
        {
            let s = sc * norm;
            for (o, &u) in o.iter_mut().zip(c) {
                *o = s * lut[usize::from(u)];
            }
            if let Some(r) = &rot {
                r.inverse_prescaled(o);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "segment_rot_tests.rs"]
mod tests;
