//! The super-block segment (TQTC version 4, `docs/formats/quant.md` §11): one run of `n`
//! values cut into super-blocks of `S = 2^s` values and those into groups of `g = 2^k`
//! values. Each super-block keeps two f16 units (a scale unit `d` and a min unit `m`);
//! each group keeps a `scale_bits`-bit scale code and a `min_bits`-bit min code against
//! them (GGUF k-quant style), so side data costs about `(scale_bits + min_bits) / g + 32 / S`
//! bits per value and groups of 16-32 fit a budget that u8 codes against per-segment
//! units (version 2) spend on groups of 64-128. Optionally every whole super-block is
//! rotated first by the seeded randomized Hadamard transform of [`crate::rotation`].
//!
//! ```
//! use tensorvault_quant::segment_v4::{encode, SegmentV4, V4Params};
//! let x: Vec<f32> = (0..1000).map(|i| ((i * 7919 % 113) as f32 - 56.0) * 0.01).collect();
//! let p = V4Params { bits: 4, group_log2: 5, super_log2: 8, scale_bits: 6, min_bits: 6,
//!                    rotate: false, seed: 0, clip_search: true };
//! let bytes = encode(&p, &x)?;
//! assert_eq!(bytes.len(), p.encoded_len(x.len())?);
//! let mut y = vec![0f32; x.len()];
//! SegmentV4::parse(&bytes)?.decode(&mut y)?;
//! assert!(x.iter().zip(&y).all(|(a, b)| (a - b).abs() < 0.05));
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use half::f16;

use crate::bitpack::{pack_unchecked, packed_len, unpack_unchecked};
use crate::error::{check_len, corrupt, segment_prefix};
use crate::layout::{
    BITS_OFFSET, MAGIC, MAGIC_OFFSET, MAX_BITS, MIN_BITS, V4_FLAGS_OFFSET, V4_FLAG_ROTATED,
    V4_GROUP_LOG2_OFFSET, V4_HEADER_LEN, V4_KNOWN_FLAGS, V4_MAX_GROUP_LOG2, V4_MAX_SIDE_BITS,
    V4_MAX_SUPER_LOG2, V4_MIN_BITS_OFFSET, V4_MIN_GROUP_LOG2, V4_MIN_SIDE_BITS, V4_RESERVED_OFFSET,
    V4_SCALE_BITS_OFFSET, V4_SEED_OFFSET, V4_SUPER_BYTES, V4_SUPER_LOG2_OFFSET, V4_VALUES_OFFSET,
    V4_VERSION, VERSION_OFFSET,
};
use crate::rotation::Rotation;
use crate::superblock::{fit, group_params, quantize, FitParams};
use crate::QuantError;

/// Encoder settings of a v4 segment (all but `clip_search` are stored in the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V4Params {
    /// Bits per value code, 2..=8.
    pub bits: u8,
    /// log2 of the group size, 2..=8.
    pub group_log2: u8,
    /// log2 of the super-block size, `group_log2..=10`.
    pub super_log2: u8,
    /// Bits of each group's scale code, 2..=8.
    pub scale_bits: u8,
    /// Bits of each group's min code, 2..=8.
    pub min_bits: u8,
    /// Rotate every whole super-block before quantizing.
    pub rotate: bool,
    /// Seed of the rotation's sign pattern.
    pub seed: u32,
    /// Search each group's clip range for the least squared error (encoder only).
    pub clip_search: bool,
}

/// The shape of a segment's regions, derived from its header fields.
#[derive(Clone, Copy, Debug)]
struct Regions {
    supers: usize,
    groups: usize,
    supers_end: usize,
    scales_end: usize,
    mins_end: usize,
    end: usize,
}

impl V4Params {
    /// Values per group.
    #[must_use]
    pub fn group(&self) -> usize {
        1usize << self.group_log2
    }

    /// Values per super-block.
    #[must_use]
    pub fn super_block(&self) -> usize {
        1usize << self.super_log2
    }

    /// Check the settings against `n` values and lay out the regions (errors name the
    /// header field a parser would blame).
    fn regions(&self, n: usize) -> Result<Regions, QuantError> {
        if !(MIN_BITS..=MAX_BITS).contains(&self.bits) {
            return Err(QuantError::InvalidBits { bits: self.bits });
        }
        if !(V4_MIN_GROUP_LOG2..=V4_MAX_GROUP_LOG2).contains(&self.group_log2) {
            return Err(corrupt(
                "group_log2",
                V4_GROUP_LOG2_OFFSET,
                self.group_log2.into(),
                "must be in 2..=8",
            ));
        }
        if !(self.group_log2..=V4_MAX_SUPER_LOG2).contains(&self.super_log2) {
            return Err(corrupt(
                "super_log2",
                V4_SUPER_LOG2_OFFSET,
                self.super_log2.into(),
                "must be in group_log2..=10",
            ));
        }
        for (field, off, v) in [
            ("scale_bits", V4_SCALE_BITS_OFFSET, self.scale_bits),
            ("min_bits", V4_MIN_BITS_OFFSET, self.min_bits),
        ] {
            if !(V4_MIN_SIDE_BITS..=V4_MAX_SIDE_BITS).contains(&v) {
                return Err(corrupt(field, off, v.into(), "must be in 2..=8"));
            }
        }
        if n == 0 || u32::try_from(n).is_err() {
            return Err(corrupt(
                "values",
                V4_VALUES_OFFSET,
                n as u64,
                "must be in 1..=2^32-1",
            ));
        }
        // Super-blocks are whole groups, so the groups are ceil(n / g) whatever S is.
        let supers = n.div_ceil(self.super_block());
        let groups = n.div_ceil(self.group());
        let supers_end = V4_HEADER_LEN + supers * V4_SUPER_BYTES;
        let scales_end = supers_end + packed_len(groups, self.scale_bits);
        let mins_end = scales_end + packed_len(groups, self.min_bits);
        let end = mins_end + packed_len(n, self.bits);
        Ok(Regions {
            supers,
            groups,
            supers_end,
            scales_end,
            mins_end,
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
            .then(|| Rotation::new(self.seed, self.super_block()))
            .transpose()
    }
}

/// Encoder choices of a v4 segment that leave no trace in its header (any v4 decoder
/// reads the result; `docs/formats/quant.md` §11.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct V4Encoder {
    /// Norm-matched units: after each super-block's codes are chosen, scale its two
    /// units by `||y|| / ||y_decoded||` (f16, rounded to nearest), so the super-block
    /// decodes with the norm of its input. The fitted units shrink every super-block's
    /// reconstruction by a slightly different factor (the clip search trades range for
    /// error), which reorders nearest neighbours; measured on SmolLM2's token table at
    /// 3 bits, recall@10 0.802 -> 0.815 (bench/RESULTS.md, "Session 11: quant-emb").
    pub norm_match: bool,
}

/// The little-endian `u32` at `off` (the caller has checked the header's length).
fn le_u32(h: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([h[off], h[off + 1], h[off + 2], h[off + 3]])
}

/// Encode `x` as one v4 segment with the fitted units ([`encode_with`] with the
/// default [`V4Encoder`]).
///
/// # Errors
/// As [`encode_with`].
pub fn encode(p: &V4Params, x: &[f32]) -> Result<Vec<u8>, QuantError> {
    encode_with(p, V4Encoder::default(), x)
}

/// The f16 bits of the units `(d, m)` times `gain`, rounded to nearest, or `None` when
/// the gain is not a positive finite number or a product is not finite (the fitted units
/// are then kept: both or neither are scaled).
fn scaled_units(d: u16, m: u16, gain: f32) -> Option<(u16, u16)> {
    if !(gain.is_finite() && gain > 0.0) {
        return None;
    }
    let s = |u: u16| {
        let v = f16::from_f32(f16::from_bits(u).to_f32() * gain);
        v.is_finite().then_some(v.to_bits())
    };
    Some((s(d)?, s(m)?))
}

/// Encode `x` as one v4 segment with the encoder choices `enc`.
///
/// # Errors
/// [`QuantError::NonFinite`] for NaN or infinite values; [`QuantError::ScaleOverflow`]
/// for values whose rotation or units overflow (f16 units reach 65504 x the largest
/// code); [`QuantError::InvalidBits`] / [`QuantError::CorruptField`] for settings that
/// do not fit `x` (bit widths, group and super-block sizes).
pub fn encode_with(p: &V4Params, enc: V4Encoder, x: &[f32]) -> Result<Vec<u8>, QuantError> {
    let reg = p.regions(x.len())?;
    if let Some(index) = x.iter().position(|v| !v.is_finite()) {
        return Err(QuantError::NonFinite {
            index,
            value: x[index],
        });
    }
    let rot = p.rotation()?;
    let sb = p.super_block();
    let fp = FitParams {
        group: p.group(),
        bits: p.bits,
        scale_bits: p.scale_bits,
        min_bits: p.min_bits,
        clip_search: p.clip_search,
    };
    let mut out = vec![0u8; reg.end];
    out[MAGIC_OFFSET..MAGIC_OFFSET + MAGIC.len()].copy_from_slice(&MAGIC);
    out[VERSION_OFFSET] = V4_VERSION;
    out[BITS_OFFSET] = p.bits;
    out[V4_GROUP_LOG2_OFFSET] = p.group_log2;
    out[V4_SUPER_LOG2_OFFSET] = p.super_log2;
    out[V4_VALUES_OFFSET..V4_VALUES_OFFSET + 4].copy_from_slice(&(x.len() as u32).to_le_bytes());
    out[V4_SCALE_BITS_OFFSET] = p.scale_bits;
    out[V4_MIN_BITS_OFFSET] = p.min_bits;
    out[V4_FLAGS_OFFSET] = if p.rotate { V4_FLAG_ROTATED } else { 0 };
    out[V4_SEED_OFFSET..V4_SEED_OFFSET + 4].copy_from_slice(&p.seed.to_le_bytes());
    let mut scs = Vec::with_capacity(reg.groups);
    let mut mcs = Vec::with_capacity(reg.groups);
    let mut codes = vec![0u8; x.len()];
    let mut y = Vec::with_capacity(sb);
    for (si, (blk, cs)) in x.chunks(sb).zip(codes.chunks_mut(sb)).enumerate() {
        y.clear();
        y.extend_from_slice(blk);
        if let (Some(r), true) = (&rot, blk.len() == sb) {
            r.forward(&mut y);
        }
        let overflow = || QuantError::ScaleOverflow {
            group: si * (sb / p.group()),
            max_abs: blk.iter().fold(0f32, |m, v| m.max(v.abs())),
        };
        if y.iter().any(|v| !v.is_finite()) {
            return Err(overflow());
        }
        let f = fit(&y, fp).ok_or_else(overflow)?;
        let (d, m) = (f16::from_bits(f.d).to_f32(), f16::from_bits(f.m).to_f32());
        // Sums of squares of the input and of its decoding (f64: 1024 squares).
        let (mut want, mut got) = (0f64, 0f64);
        for ((g, c), &(sc, mc)) in y
            .chunks(p.group())
            .zip(cs.chunks_mut(p.group()))
            .zip(&f.codes)
        {
            let (gm, gs) = group_params(d, m, sc, mc);
            quantize(g, gm, gs, p.bits, c);
            if enc.norm_match {
                for (&v, &u) in g.iter().zip(c.iter()) {
                    let r = gm + gs * f32::from(u);
                    want += f64::from(v) * f64::from(v);
                    got += f64::from(r) * f64::from(r);
                }
            }
            scs.push(sc);
            mcs.push(mc);
        }
        let (du, mu) = if enc.norm_match && got > 0.0 {
            scaled_units(f.d, f.m, (want / got).sqrt() as f32).unwrap_or((f.d, f.m))
        } else {
            (f.d, f.m)
        };
        let off = V4_HEADER_LEN + si * V4_SUPER_BYTES;
        out[off..off + 2].copy_from_slice(&du.to_le_bytes());
        out[off + 2..off + 4].copy_from_slice(&mu.to_le_bytes());
    }
    pack_unchecked(&scs, p.scale_bits, &mut out[reg.supers_end..reg.scales_end]);
    pack_unchecked(&mcs, p.min_bits, &mut out[reg.scales_end..reg.mins_end]);
    pack_unchecked(&codes, p.bits, &mut out[reg.mins_end..reg.end]);
    Ok(out)
}

/// A validated v4 segment borrowed from its bytes.
#[derive(Clone, Copy, Debug)]
pub struct SegmentV4<'a> {
    bytes: &'a [u8],
    p: V4Params,
    n: usize,
    reg: Regions,
}

impl<'a> SegmentV4<'a> {
    /// Validate `bytes` as one complete v4 segment.
    ///
    /// # Errors
    /// [`QuantError::Truncated`], [`QuantError::BadMagic`],
    /// [`QuantError::UnsupportedVersion`], [`QuantError::CorruptField`] (bits, group and
    /// super-block sizes, side-code widths, values, flags, reserved byte),
    /// [`QuantError::CorruptScale`] (a super-block unit that is NaN, infinite, or a
    /// negative scale unit), [`QuantError::TrailingBytes`].
    pub fn parse(bytes: &'a [u8]) -> Result<Self, QuantError> {
        let present = bytes.len();
        let (h, bits) = segment_prefix(bytes, "v4 header", V4_HEADER_LEN, V4_VERSION)?;
        let flags = h[V4_FLAGS_OFFSET];
        if flags & !V4_KNOWN_FLAGS != 0 {
            return Err(corrupt(
                "flags",
                V4_FLAGS_OFFSET,
                flags.into(),
                "unknown flag bits set",
            ));
        }
        if h[V4_RESERVED_OFFSET] != 0 {
            return Err(corrupt(
                "reserved",
                V4_RESERVED_OFFSET,
                h[V4_RESERVED_OFFSET].into(),
                "must be 0",
            ));
        }
        let n = le_u32(h, V4_VALUES_OFFSET) as usize;
        let p = V4Params {
            bits,
            group_log2: h[V4_GROUP_LOG2_OFFSET],
            super_log2: h[V4_SUPER_LOG2_OFFSET],
            scale_bits: h[V4_SCALE_BITS_OFFSET],
            min_bits: h[V4_MIN_BITS_OFFSET],
            rotate: flags & V4_FLAG_ROTATED != 0,
            seed: le_u32(h, V4_SEED_OFFSET),
            clip_search: false,
        };
        // Sizes come from the header alone and are bounded by u32 values times at most
        // 8 bits, so nothing here allocates before the length check below.
        let reg = p.regions(n)?;
        if present < reg.end {
            let what = if present < reg.supers_end {
                "super-block units"
            } else if present < reg.mins_end {
                "group codes"
            } else {
                "value codes"
            };
            return Err(QuantError::Truncated {
                what,
                offset: V4_HEADER_LEN as u64,
                end: reg.end as u64,
                present,
            });
        }
        if present > reg.end {
            return Err(QuantError::TrailingBytes {
                expected: reg.end as u64,
                present,
            });
        }
        for (si, u) in bytes[V4_HEADER_LEN..reg.supers_end]
            .chunks_exact(V4_SUPER_BYTES)
            .enumerate()
        {
            let off = V4_HEADER_LEN + si * V4_SUPER_BYTES;
            let d = u16::from_le_bytes([u[0], u[1]]);
            let m = u16::from_le_bytes([u[2], u[3]]);
            let df = f16::from_bits(d);
            if !df.is_finite() || df.to_f32() < 0.0 {
                return Err(QuantError::CorruptScale {
                    index: 2 * si,
                    offset: off,
                    bits: d,
                    reason: "scale unit must be finite and >= 0",
                });
            }
            if !f16::from_bits(m).is_finite() {
                return Err(QuantError::CorruptScale {
                    index: 2 * si + 1,
                    offset: off + 2,
                    bits: m,
                    reason: "min unit must be finite",
                });
            }
        }
        Ok(Self { bytes, p, n, reg })
    }

    /// Number of values.
    #[must_use]
    pub fn values(&self) -> usize {
        self.n
    }

    /// The segment's settings (`clip_search` is always false: it is not stored).
    #[must_use]
    pub fn params(&self) -> V4Params {
        self.p
    }

    /// Number of super-blocks.
    #[must_use]
    pub fn super_blocks(&self) -> usize {
        self.reg.supers
    }

    fn units(&self, si: usize) -> (f32, f32) {
        let off = V4_HEADER_LEN + si * V4_SUPER_BYTES;
        let b = &self.bytes[off..off + V4_SUPER_BYTES];
        (
            f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32(),
            f16::from_bits(u16::from_le_bytes([b[2], b[3]])).to_f32(),
        )
    }

    /// The largest group scale (0 when every group is constant).
    #[must_use]
    pub fn max_scale(&self) -> f32 {
        let top = f32::from((1u16 << self.p.scale_bits) - 1);
        (0..self.reg.supers).fold(0f32, |a, si| a.max(self.units(si).0 * top))
    }

    /// Decode every value into `out` (exactly [`SegmentV4::values`] long).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] if `out` has the wrong length.
    pub fn decode(&self, out: &mut [f32]) -> Result<(), QuantError> {
        self.decode_with(out, true)
    }

    /// [`Self::decode`], with the fused AVX2 path allowed (`simd`, where the CPU has it)
    /// or not (the scalar reference it must match bit for bit).
    pub(crate) fn decode_with(&self, out: &mut [f32], simd: bool) -> Result<(), QuantError> {
        check_len("v4 segment decode", self.n, out.len())?;
        let (p, reg, b) = (&self.p, &self.reg, self.bytes);
        let mut scs = vec![0u8; reg.groups];
        let mut mcs = vec![0u8; reg.groups];
        unpack_unchecked(&b[reg.supers_end..reg.scales_end], p.scale_bits, &mut scs);
        unpack_unchecked(&b[reg.scales_end..reg.mins_end], p.min_bits, &mut mcs);
        let (g, sb) = (p.group(), p.super_block());
        let per_super = sb / g;
        let packed = &b[reg.mins_end..reg.end];
        #[cfg(target_arch = "x86_64")]
        if simd && p.rotate && sb >= 8 && crate::rot_decode_avx2::available() {
            // Rotated only: unrotated 8-bit super-blocks decoded faster by the scalar
            // loop (a byte copy, then one vectorized affine) in the same bench run.
            let signs = Some(crate::rot_decode_avx2::Signs::new(p.seed, sb));
            let norm = crate::rotation::norm_of(sb);
            let mut params = vec![(0f32, 0f32); per_super];
            for (si, o) in out.chunks_mut(sb).enumerate() {
                if o.len() < sb {
                    // The last, partial super-block (never rotated): the scalar loop.
                    let (d, m) = self.units(si);
                    let mut codes = vec![0u8; o.len()];
                    // It starts on a whole byte (si * sb is a multiple of 8) and runs to the end.
                    unpack_unchecked(
                        &packed[si * sb * usize::from(p.bits) / 8..],
                        p.bits,
                        &mut codes,
                    );
                    for (gi, (og, cg)) in o.chunks_mut(g).zip(codes.chunks(g)).enumerate() {
                        let k = si * per_super + gi;
                        let (gm, gs) = group_params(d, m, scs[k], mcs[k]);
                        for (v, &u) in og.iter_mut().zip(cg) {
                            *v = gm + gs * f32::from(u);
                        }
                    }
                    break;
                }
                let (d, m) = self.units(si);
                let k0 = si * per_super;
                for (pm, (&sc, &mc)) in params
                    .iter_mut()
                    .zip(scs[k0..k0 + per_super].iter().zip(&mcs[k0..k0 + per_super]))
                {
                    *pm = group_params(d, m, sc, mc);
                }
                // SAFETY: AVX2 was detected; bits are 2..=8, the group a power of two >= 4
                // dividing the super-block (a power of two in 8..=1024), all
                // validated by `parse`; `si * sb` is a multiple of 8; `params` holds one
                // pair per group; `packed` holds all `n` codes (checked by `parse`).
                unsafe {
                    crate::rot_decode_avx2::v4_super(
                        packed,
                        p.bits,
                        si * sb,
                        g,
                        &params,
                        signs.as_ref().map(|s| (norm, s)),
                        o,
                    );
                }
            }
            return Ok(());
        }
        let rot = p.rotation()?;
        let mut codes = vec![0u8; self.n];
        unpack_unchecked(packed, p.bits, &mut codes);
        for (si, (o, c)) in out.chunks_mut(sb).zip(codes.chunks(sb)).enumerate() {
            let (d, m) = self.units(si);
            for (gi, (og, cg)) in o.chunks_mut(g).zip(c.chunks(g)).enumerate() {
                let k = si * per_super + gi;
                let (gm, gs) = group_params(d, m, scs[k], mcs[k]);
                for (v, &u) in og.iter_mut().zip(cg) {
                    *v = gm + gs * f32::from(u);
                }
            }
            if let (Some(r), true) = (&rot, o.len() == sb) {
                r.inverse(o);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "segment_v4_tests.rs"]
mod tests;
