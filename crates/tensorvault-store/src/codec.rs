//! Block payload encoding per tier: Tier0 keeps the caller's element bytes; quantized
//! tiers hold one TQTC segment (docs/formats/quant.md) of the values converted to f32:
//! a single-frame version 1 segment in codec v1 collections, a version 2 segment laid
//! out by the tensor's kind in codec v2 collections ([`v2_layout`]); in codec v3
//! collections a version 3 (rotated) segment where [`v3_layout`] picks one, else the v2
//! layout. Codec v4 collections store `weight` and `embedding` tensors as version 4
//! (super-block) segments sized to the tier's slot ([`crate::codec_weights`]), 3-bit KV
//! values rotated per token, and KV keys at their own bit widths and group sizes when
//! the collection sets them ([`CollectionConfig::bits_for`]); with
//! [`CollectionConfig::kv_ecsq`], those values at one more bit of wider-spaced uniform
//! levels (entropy-coded levels); with [`CollectionConfig::kv_ecsq_tier2`], tier 2's
//! KV values as well ([`tier2_ecsq_layout`]).
//! Collections with the entropy flag keep each such segment wrapped in a TQTC
//! version 5 envelope (lossless rANS over its codes) when that is shorter; with
//! [`CollectionConfig::ecsq`], weights and embeddings at tiers 2 and 3 are entropy-coded
//! uniform levels sized to the slot ([`crate::codec_weights::encode_ecsq`]).

use tensorvault_quant::groupwise::QuantParams;
use tensorvault_quant::kind;
use tensorvault_quant::layout as q;
use tensorvault_quant::segment::{self, Segment};
use tensorvault_quant::segment_rot::{self, SegmentV3, V3Params};
use tensorvault_quant::segment_v2::{self, Axis, SegmentV2, V2Params};
use tensorvault_quant::segment_v4::SegmentV4;
use tensorvault_quant::segment_v5::{self, SegmentV5};
use tensorvault_quant::segment_v6;
use tensorvault_quant::QuantError;

use crate::config::{CollectionConfig, CODEC_V1, CODEC_V3, CODEC_V4};
use crate::error::{Result, StoreErr};
use crate::types::{DType, TensorKind, Tier};

/// Where a block sits in its tensor: what [`v2_layout`] needs besides the geometry.
#[derive(Clone, Copy, Debug)]
pub struct BlockPlace<'a> {
    /// What the tensor holds.
    pub kind: TensorKind,
    /// The whole tensor's shape.
    pub shape: &'a [u32],
    /// The block's index in the tensor.
    pub block_index: u32,
    /// Values in this block.
    pub len: usize,
}

/// The codec v2 settings of a block in `tier` (a quantized tier of a codec v2
/// collection): [`tensorvault_quant::kind::v2_layout`] for the tensor's kind, with rows =
/// the tensor's last dimension when the block holds whole rows, and the first row kept
/// as f16 (attention sink) in block 0 of KV kinds when the collection's `sink_values`
/// allows a row.
///
/// A layout whose segment would not fit the tier's slot (e.g. per-channel groups over a
/// block of fewer than `g` tokens, which needs more groups than the slot holds) falls
/// back to flat groups without raw rows, which always fits.
#[must_use]
pub fn v2_layout(geo: &CollectionConfig, tier: Tier, place: &BlockPlace<'_>) -> V2Params {
    let bits = geo.bits_for(tier, place.kind).unwrap_or(8);
    let g = geo.group_size_for(tier, place.kind).unwrap_or(64).max(1);
    let layout = |width: Option<u32>, sink: bool| {
        kind::v2_layout(place.kind, bits, g, width, sink).unwrap_or(V2Params {
            // The collection's geometry was validated on open (bits 2..=8, v2 group
            // sizes); this keeps the function total for a config built by hand.
            bits,
            group_log2: g.trailing_zeros() as u8,
            axis: Axis::Flat,
            width: 1,
            raw_rows: 0,
            clip_search: false,
        })
    };
    let flat = layout(None, false);
    // Whole rows: the block starts on a row boundary and holds whole rows.
    let width = place.shape.last().copied().unwrap_or(0);
    let start = u64::from(place.block_index) * u64::from(geo.block_elems);
    let rows_ok = width > 0
        && start % u64::from(width) == 0
        && place.len.is_multiple_of(width as usize)
        && u16::try_from(width).is_ok();
    if !rows_ok {
        return flat;
    }
    let sink = place.block_index == 0 && u32::from(geo.sink_values) >= width;
    let want = layout(Some(width), sink);
    let fits = want
        .encoded_len(place.len)
        .is_ok_and(|len| len as u64 <= geo.max_payload_len(tier));
    if fits {
        want
    } else {
        flat
    }
}

/// The codec v3 rotated layout of a block in `tier`, if
/// [`tensorvault_quant::kind::v3_layout`] rotates this kind at this tier's bits. Rows are
/// the tensor's last dimension; the rotation block `b` divides it, so a block that starts
/// on a multiple of `b` and holds a whole number of `b`-runs is rotated whether or not
/// it holds whole rows (a 4096-value block of 576-wide embeddings is 64 runs of 64). The
/// first row is kept as f16 in block 0 of KV kinds, as in [`v2_layout`], when the block
/// holds whole rows. `None` (the v2 layout is used) for other collections, other kinds,
/// blocks not aligned to `b`, and a segment (with its f16 block scales) that would not
/// fit the tier's slot: with the default geometry, rows whose block is 64 values (576
/// wide) are rotated at tier 3 only, rows with blocks of 128 or more (384 wide) at every
/// tier.
#[must_use]
pub fn v3_layout(geo: &CollectionConfig, tier: Tier, place: &BlockPlace<'_>) -> Option<V3Params> {
    if !matches!(geo.codec, CODEC_V3 | CODEC_V4) {
        return None;
    }
    let bits = geo.bits_for(tier, place.kind)?;
    let width = place.shape.last().copied().filter(|&w| w > 0)?;
    let b = 1u64 << kind::v3_block(width)?;
    let start = u64::from(place.block_index) * u64::from(geo.block_elems);
    if start % b != 0 || !(place.len as u64).is_multiple_of(b) {
        return None;
    }
    let whole_rows = start % u64::from(width) == 0 && place.len.is_multiple_of(width as usize);
    let sink = place.block_index == 0 && u32::from(geo.sink_values) >= width;
    let fits = |p: &V3Params| {
        p.encoded_len(place.len)
            .is_ok_and(|len| len as u64 <= geo.max_payload_len(tier))
    };
    // Entropy-coded levels where the slot holds them, else codec v4's Lloyd-Max values.
    let ecsq = geo
        .kv_ecsq
        .then(|| v4_kv_values(geo, place.kind, bits, width, whole_rows, sink, true))
        .flatten()
        .filter(fits);
    let p = match ecsq
        .or_else(|| v4_kv_values(geo, place.kind, bits, width, whole_rows, sink, false))
    {
        Some(p) => p,
        None => kind::v3_layout(place.kind, bits, Some(width), whole_rows, sink)?,
    };
    // Only with f16 scales (where the slot has room: tier 3's groups of 64 leave two
    // bytes per 64 values): norm-matched scales coded on the byte grid (4.4% steps) cost
    // more than the rotation gains (recall 0.965 -> 0.879 at 8 bits on the token table).
    fits(&p).then_some(p)
}

/// Codec v4's layout of KV values at 3 bits and fewer: each token's head (a power-of-two
/// `width` of 16..=1024 values) rotated by the seeded randomized Hadamard transform and
/// coded with Lloyd-Max levels and one byte-coded RMS scale per token, the sink row
/// kept as f16 (TQTC version 3, `docs/formats/quant.md` §10). Measured on SmolLM2-135M
/// with keys stored before RoPE at 4 bits (bench/RESULTS.md, "Quality per bit, round
/// 4"): where values became the larger error, rotated values took the perplexity change
/// from +6.1% (v2 groups of 64 per token) to +4.5% (numpy, compound). `None` for other
/// kinds, codecs, widths and bit widths (the v2 / v3 choices apply). With `ecsq`
/// ([`CollectionConfig::kv_ecsq`]) the codes are `bits + 1` wide, uniform levels
/// [`crate::config::KV_ECSQ_STEP_SIXTEENTHS`]/16 of the token's RMS apart: entropy-coded
/// scalar quantization (numpy on SmolLM2: 15.5% relative RMSE at 3.11 entropy-coded
/// bits/value against 18.3% at 2.98 for Lloyd-Max codes); where that segment does not
/// fit the tier's slot, [`v3_layout`] uses the Lloyd-Max codes.
#[allow(clippy::too_many_arguments)]
fn v4_kv_values(
    geo: &CollectionConfig,
    kind: TensorKind,
    bits: u8,
    width: u32,
    whole_rows: bool,
    sink: bool,
    ecsq: bool,
) -> Option<V3Params> {
    if geo.codec != CODEC_V4 || kind != TensorKind::KvValue || bits > 3 || !whole_rows {
        return None;
    }
    let block_log2 = kind::v3_block(width).filter(|&b| 1u32 << b == width)?;
    let w16 = u16::try_from(width).ok()?;
    // Entropy-coded levels: one more bit of uniform levels, spaced wider than the
    // MSE-optimal step so that the v5 envelope packs them to about the Lloyd-Max size.
    let (bits, levels, scale) = if ecsq {
        (
            bits + 1,
            tensorvault_quant::levels::LevelSet::Uniform,
            segment_rot::ScaleRule::RmsTimes(crate::config::KV_ECSQ_STEP_SIXTEENTHS),
        )
    } else {
        (
            bits,
            tensorvault_quant::levels::LevelSet::LloydMax,
            segment_rot::ScaleRule::Rms,
        )
    };
    Some(V3Params {
        bits,
        levels,
        block_log2,
        rotate: true,
        seed: q::V3_DEFAULT_SEED,
        width: if sink { w16 } else { 1 },
        raw_rows: u16::from(sink),
        scale,
        wide_scales: false,
    })
}

/// The entropy-coded layout of KV values at tier 2 ([`CollectionConfig::kv_ecsq_tier2`]):
/// each token's head (a power-of-two `width` of 16..=1024 values) rotated by the seeded
/// randomized Hadamard transform, [`crate::config::KV_ECSQ_TIER2_BITS`]-bit uniform codes
/// spaced `step`/16 of the table's step times the token's RMS (one log-coded scale byte
/// per token), the sink row kept as f16: a TQTC version 3 segment (`docs/formats/quant.md`
/// §10) that is only stored inside the version 5 envelope, and only where that fits the
/// tier's [`CollectionConfig::max_block_len`] ([`encode_for_tier`] tries each of
/// [`crate::config::KV_ECSQ_TIER2_STEPS_SIXTEENTHS`]; where none fits, the block keeps
/// the v2 per-channel groups).
/// `None` for other tiers, kinds, collections and widths, and for blocks that do not hold
/// whole rows.
#[must_use]
pub fn tier2_ecsq_layout(
    geo: &CollectionConfig,
    tier: Tier,
    place: &BlockPlace<'_>,
    step: u8,
) -> Option<V3Params> {
    if !geo.kv_ecsq_tier2 || tier != Tier::Tier2 || place.kind != TensorKind::KvValue {
        return None;
    }
    let width = place.shape.last().copied().filter(|&w| w > 0)?;
    let block_log2 = kind::v3_block(width).filter(|&b| 1u32 << b == width)?;
    let w16 = u16::try_from(width).ok()?;
    let start = u64::from(place.block_index) * u64::from(geo.block_elems);
    if start % u64::from(width) != 0 || !place.len.is_multiple_of(width as usize) {
        return None;
    }
    let sink = place.block_index == 0 && u32::from(geo.sink_values) >= width;
    Some(V3Params {
        bits: crate::config::KV_ECSQ_TIER2_BITS,
        levels: tensorvault_quant::levels::LevelSet::Uniform,
        block_log2,
        rotate: true,
        seed: q::V3_DEFAULT_SEED,
        width: if sink { w16 } else { 1 },
        raw_rows: u16::from(sink),
        scale: segment_rot::ScaleRule::RmsTimes(step),
        wide_scales: false,
    })
}

/// Quantize f32 values for a quantized `tier` of `geo`: a version 1 segment in a codec
/// v1 collection, a version 4 segment for weight and embedding tensors in a codec v4
/// collection ([`crate::codec_weights::v4_layout`]), a version 3 segment where
/// [`v3_layout`] picks one (codec v3), a version 2 segment laid out by [`v2_layout`]
/// otherwise; in a collection with the entropy flag, at tiers 2 and 3, that v2/v3/v4
/// segment wrapped in a version 5 envelope when that is shorter (the scale reported is
/// the inner segment's). Where [`tier2_ecsq_layout`] applies, its envelope when that fits
/// [`CollectionConfig::max_block_len`].
///
/// # Errors
/// [`StoreErr::Quant`] (non-finite values, scale overflow); [`StoreErr::InvalidArgument`]
/// for Tier0.
pub fn encode_for_tier(
    geo: &CollectionConfig,
    tier: Tier,
    place: &BlockPlace<'_>,
    values: &[f32],
) -> Result<Encoded> {
    encode_for_tier_against(geo, tier, place, values, values)
}

/// [`encode_for_tier`] of a centred block: `values` less the tensor's mean row are coded,
/// and where the block gets a row-gain envelope its gains are computed against
/// `reference`, the original values (`codec_weights::encode_with_gains_against`). With
/// `reference == values` this is [`encode_for_tier`].
///
/// # Errors
/// As [`encode_for_tier`].
pub fn encode_for_tier_against(
    geo: &CollectionConfig,
    tier: Tier,
    place: &BlockPlace<'_>,
    values: &[f32],
    reference: &[f32],
) -> Result<Encoded> {
    if geo.codec == CODEC_V1 {
        let Some(p) = geo.params(tier)? else {
            return Err(StoreErr::InvalidArgument {
                field: "tier",
                reason: "Tier0 is not quantized".into(),
            });
        };
        return encode_quantized(&p, values);
    }
    if let Some(at) =
        crate::codec_weights::row_gain_place(geo, tier, place.kind, place.shape, place.block_index)
    {
        if let Some((bytes, bits, scale)) = crate::codec_weights::encode_with_gains_against(
            geo, tier, place.kind, at, values, reference,
        )? {
            return Ok(Encoded { bytes, bits, scale });
        }
    }
    if let Some(p) = crate::codec_weights::ecsq_model_params(geo, tier, place.kind, place.len) {
        let budget = crate::codec_weights::ecsq_budget(geo, tier, place.len);
        if let Some((bytes, scale)) = crate::codec_weights::encode_ecsq_model(&p, values, budget)? {
            return Ok(Encoded {
                bytes,
                bits: p.bits,
                scale,
            });
        }
    }
    if let Some(p) = crate::codec_weights::ecsq_params(geo, tier, place.kind, place.len) {
        if let Some((bytes, scale)) = crate::codec_weights::encode_ecsq(geo, tier, &p, values)? {
            return Ok(Encoded {
                bytes,
                bits: p.bits,
                scale,
            });
        }
    }
    for step in crate::config::KV_ECSQ_TIER2_STEPS_SIXTEENTHS {
        let Some(p) = tier2_ecsq_layout(geo, tier, place, step) else {
            break;
        };
        let inner = segment_rot::encode(&p, values)?;
        let scale = SegmentV3::parse(&inner).map(|s| s.max_scale());
        let cap = u64::from(geo.max_block_len(tier));
        // With wide lanes, a step whose 64-lane envelope does not fit keeps its 4-lane
        // one when that fits: the same step (and error) as without the flag, decoded by
        // the scalar lanes; wide lanes never cost these values a coarser step.
        let lanes = v5_lanes_log2(geo, place.kind);
        let mut tries = vec![lanes];
        if lanes != q::V5_DEFAULT_LANES_LOG2 {
            tries.push(q::V5_DEFAULT_LANES_LOG2);
        }
        for lanes in tries {
            let bytes = segment_v5::encode_smallest_with(inner.clone(), lanes)?;
            if bytes.len() as u64 <= cap {
                return Ok(Encoded {
                    bytes,
                    bits: p.bits,
                    scale: scale.unwrap_or(0.0),
                });
            }
        }
    }
    // (segment bytes, bit width, largest group scale as the segment reports it)
    let (bytes, bits, scale) =
        if let Some(p) = crate::codec_weights::v4_layout(geo, tier, place.kind, place.len) {
            let bytes = crate::codec_weights::encode(&p, place.kind, values)?;
            let scale = SegmentV4::parse(&bytes).map(|s| s.max_scale());
            (bytes, p.bits, scale)
        } else if let Some(p) = v3_layout(geo, tier, place) {
            let bytes = segment_rot::encode(&p, values)?;
            let scale = SegmentV3::parse(&bytes).map(|s| s.max_scale());
            (bytes, p.bits, scale)
        } else {
            let p = v2_layout(geo, tier, place);
            let bytes = segment_v2::encode(&p, values)?;
            let scale = SegmentV2::parse(&bytes).map(|s| s.max_scale());
            (bytes, p.bits, scale)
        };
    let mut enc = Encoded {
        bytes,
        bits,
        scale: scale.unwrap_or(0.0),
    };
    // Tier 1 stays unwrapped: its 8-bit codes save 0.1-0.2 bits/value (1-2.5%) while
    // decoding the hottest blocks would cost ~5x the v2 decode (bench/RESULTS.md,
    // "Entropy coding of the codes").
    if geo.entropy && tier != Tier::Tier1 {
        enc.bytes = segment_v5::encode_smallest_with(enc.bytes, v5_lanes_log2(geo, place.kind))?;
    }
    // With `kv_keys_ecsq`, tier 2 keys as v8 where one fits in the larger of that
    // segment's length and the keys' budget.
    let (kind, shape, index) = (place.kind, place.shape, place.block_index);
    if let Some(p) = crate::codec_kv_keys::kv_keys_params(geo, tier, kind, shape, index, place.len)
    {
        let budget = crate::codec_kv_keys::kv_keys_budget(geo, tier, place.len, enc.bytes.len());
        let wstep = crate::codec_kv_keys::wstep_pairs(geo);
        if let Some((bytes, scale)) =
            crate::codec_kv_keys::encode_kv_keys(&p, values, budget, wstep)?
        {
            return Ok(Encoded {
                bytes,
                bits: p.bits,
                scale,
            });
        }
    }
    Ok(enc)
}

/// The rANS lanes of the version 5 envelopes [`encode_for_tier`] writes for `kind`: 64
/// for KV and generic tensors in a `wide_lanes` collection (decoded with vector units),
/// else 4. Weights and embeddings reach this path only as v4 segments (their ECSQ
/// encoders choose their own lanes), and keep 4.
#[must_use]
pub fn v5_lanes_log2(geo: &CollectionConfig, kind: TensorKind) -> u8 {
    let wide_kind = matches!(
        kind,
        TensorKind::Generic | TensorKind::KvKey | TensorKind::KvValue
    );
    if geo.wide_lanes && wide_kind {
        q::V5_WIDE_LANES_LOG2
    } else {
        q::V5_DEFAULT_LANES_LOG2
    }
}

/// Convert little-endian element bytes of `dtype` to f32.
///
/// # Errors
/// [`StoreErr::InvalidArgument`] if `src` is not a whole number of elements;
/// [`StoreErr::UnsupportedDType`] for a dtype outside [`crate::types::STORE_DTYPES`].
pub fn to_f32(dtype: DType, src: &[u8], dst: &mut Vec<f32>) -> Result<()> {
    let size = dtype.size();
    if !src.len().is_multiple_of(size) {
        return Err(StoreErr::InvalidArgument {
            field: "data",
            reason: format!(
                "{} bytes is not a whole number of {dtype} elements",
                src.len()
            ),
        });
    }
    dst.clear();
    dst.reserve(src.len() / size);
    match dtype {
        DType::F32 => dst.extend(
            src.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        ),
        DType::F16 => dst.extend(
            src.chunks_exact(2)
                .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32()),
        ),
        DType::BF16 => dst.extend(
            src.chunks_exact(2)
                .map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32()),
        ),
        DType::I8 => dst.extend(src.iter().map(|&b| f32::from(b as i8))),
        DType::U8 => dst.extend(src.iter().map(|&b| f32::from(b))),
        other => return Err(StoreErr::UnsupportedDType { dtype: other }),
    }
    Ok(())
}

/// Convert f32 values to little-endian element bytes of `dtype` (appended to `dst`):
/// floats round to nearest even, integers round half away from zero and saturate.
///
/// A finite value past the largest finite f16 / bf16 saturates to it (+-65504 for f16)
/// instead of rounding to infinity: a lossy decoding of a value near the limit can land
/// past it by part of a step, and a finite tensor must read back finite. Infinities and
/// NaN (which no lossy codec decodes to) convert as they are.
///
/// # Errors
/// [`StoreErr::UnsupportedDType`] for a dtype outside [`crate::types::STORE_DTYPES`]
/// (nothing is appended).
pub fn from_f32(dtype: DType, src: &[f32], dst: &mut Vec<u8>) -> Result<()> {
    // Fixed-size chunks of a pre-sized tail (not one `extend_from_slice` per element,
    // which re-checks the capacity every time and does not vectorize).
    let start = dst.len();
    match dtype {
        DType::F32 => {
            dst.resize(start + src.len() * 4, 0);
            for (d, v) in dst[start..].chunks_exact_mut(4).zip(src) {
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
        DType::F16 => {
            let f16_max = half::f16::MAX.to_f32();
            dst.resize(start + src.len() * 2, 0);
            for (d, v) in dst[start..].chunks_exact_mut(2).zip(src) {
                let v = if v.is_finite() {
                    v.clamp(-f16_max, f16_max)
                } else {
                    *v
                };
                d.copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes());
            }
        }
        DType::BF16 => {
            let bf16_max = half::bf16::MAX.to_f32();
            dst.resize(start + src.len() * 2, 0);
            for (d, v) in dst[start..].chunks_exact_mut(2).zip(src) {
                let v = if v.is_finite() {
                    v.clamp(-bf16_max, bf16_max)
                } else {
                    *v
                };
                d.copy_from_slice(&half::bf16::from_f32(v).to_bits().to_le_bytes());
            }
        }
        // `as` saturates and maps NaN to 0.
        DType::I8 => dst.extend(src.iter().map(|v| (v.round() as i8) as u8)),
        DType::U8 => dst.extend(src.iter().map(|v| v.round() as u8)),
        other => return Err(StoreErr::UnsupportedDType { dtype: other }),
    }
    Ok(())
}

/// One encoded payload and the metadata the index keeps about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// The payload bytes written to the slot.
    pub bytes: Vec<u8>,
    /// Bit width recorded in BlockMeta.
    pub bits: u8,
    /// Largest group scale (0 for raw payloads).
    pub scale: f32,
}

/// Quantize f32 values into a one-frame segment with `p`.
///
/// # Errors
/// [`StoreErr::Quant`] (non-finite values, scale overflow).
pub fn encode_quantized(p: &QuantParams, values: &[f32]) -> Result<Encoded> {
    let (bytes, _clamp) = segment::encode_tensor(p, values)?;
    let scale = max_scale(&bytes, p.groups(values.len()));
    Ok(Encoded {
        bytes,
        bits: p.bits(),
        scale,
    })
}

/// Largest f16 group scale of a freshly encoded one-frame segment.
fn max_scale(seg: &[u8], groups: usize) -> f32 {
    let start = q::BITMAP_OFFSET + 1; // one frame: a one-byte bitmap
    seg.get(start..start + groups * q::SCALE_BYTES)
        .map(|s| {
            s.chunks_exact(2)
                .map(|c| {
                    half::f16::from_bits(u16::from_le_bytes([c[0], c[1]]))
                        .to_f32()
                        .abs()
                })
                .fold(0.0f32, f32::max)
        })
        .unwrap_or(0.0)
}

/// Decode a quantized payload into f32 values (`dst` is resized to the segment's length).
/// Any segment version (1 to 8) is accepted, whatever the collection's codec.
///
/// # Errors
/// The codec's error if the payload is not one valid single-frame segment or holds more
/// than `max_elems` values.
pub fn decode_quantized(
    payload: &[u8],
    max_elems: usize,
    dst: &mut Vec<f32>,
) -> Result<(), QuantError> {
    if payload.get(q::VERSION_OFFSET) == Some(&q::V6_VERSION) {
        // Row gains over a v2..v5 segment (never another v6), at most `max_elems` values.
        return segment_v6::decode(payload, max_elems, dst);
    }
    if payload.get(q::VERSION_OFFSET) == Some(&q::V8_VERSION) {
        // Channel-centred keys: at most `max_elems` values, bounded before allocating,
        // each within f16's range (what the writer guarantees: a crafted step or mean
        // must not become an infinite f16 key).
        tensorvault_quant::segment_v8::decode(payload, max_elems, dst)?;
        return crate::codec_kv_keys::check_v8_f16(dst);
    }
    if payload.get(q::VERSION_OFFSET) == Some(&q::V9_VERSION) {
        // Keys with per-channel steps: bounded and checked as v8.
        tensorvault_quant::segment_v9::decode(payload, max_elems, dst)?;
        return crate::codec_kv_keys::check_v9_f16(dst);
    }
    if payload.get(q::VERSION_OFFSET) == Some(&q::V7_VERSION) {
        // Model-coded ECSQ: at most `max_elems` values, bounded before allocating.
        return tensorvault_quant::segment_v7::decode(payload, max_elems, dst);
    }
    if payload.get(q::VERSION_OFFSET) == Some(&q::V5_VERSION) {
        // The envelope holds a v2, v3 or v4 segment (never another v5) of at most
        // `max_elems` values, checked as that segment and decoded from its codes.
        return SegmentV5::parse(payload)?.decode(max_elems, dst);
    }
    let sized = |n: usize, dst: &mut Vec<f32>| {
        if n > max_elems {
            return Err(QuantError::LengthMismatch {
                what: "block segment (must hold at most block_elems values)",
                input: n,
                output: max_elems,
            });
        }
        dst.clear();
        dst.resize(n, 0.0);
        Ok(())
    };
    match payload.get(q::VERSION_OFFSET).copied() {
        Some(q::V4_VERSION) => {
            let seg = SegmentV4::parse(payload)?;
            sized(seg.values(), dst)?;
            return seg.decode(dst);
        }
        Some(q::V3_VERSION) => {
            let seg = SegmentV3::parse(payload)?;
            sized(seg.values(), dst)?;
            return seg.decode(dst);
        }
        Some(q::V2_VERSION) => {
            let seg = SegmentV2::parse(payload)?;
            sized(seg.values(), dst)?;
            return seg.decode(dst);
        }
        _ => {}
    }
    let seg = Segment::parse(payload)?;
    let n = seg.values_per_frame();
    if seg.frame_count() != 1 || n > max_elems {
        return Err(QuantError::LengthMismatch {
            what: "block segment (must be one frame of at most block_elems values)",
            input: seg.frame_count().saturating_mul(n),
            output: max_elems,
        });
    }
    dst.clear();
    dst.resize(n, 0.0);
    seg.decode_all(dst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_conversions_round_trip() {
        for dt in [DType::F32, DType::F16, DType::BF16, DType::I8, DType::U8] {
            let vals: Vec<f32> = (0..50).map(|i| (i as f32) - 10.0).collect();
            let mut bytes = Vec::new();
            from_f32(dt, &vals, &mut bytes).unwrap();
            assert_eq!(bytes.len(), vals.len() * dt.size());
            let mut back = Vec::new();
            to_f32(dt, &bytes, &mut back).unwrap();
            for (a, b) in vals.iter().zip(&back) {
                let want = if dt == DType::U8 { a.max(0.0) } else { *a };
                assert_eq!(*b, want, "{dt}");
            }
        }
        assert!(to_f32(DType::F32, &[0; 3], &mut Vec::new()).is_err());
        for dt in [DType::I16, DType::F64] {
            let mut bytes = Vec::new();
            assert!(matches!(
                from_f32(dt, &[1.0], &mut bytes),
                Err(StoreErr::UnsupportedDType { dtype }) if dtype == dt
            ));
            assert!(bytes.is_empty());
            assert!(matches!(
                to_f32(dt, &[0; 8], &mut Vec::new()),
                Err(StoreErr::UnsupportedDType { .. })
            ));
        }
    }

    #[test]
    fn f16_and_bf16_saturate_finite_values_and_keep_inf_and_nan() {
        let src = [
            65504.0f32,
            65519.0,
            65520.0,
            7.0e4,
            -1.0e9,
            f32::INFINITY,
            f32::NAN,
            1.5,
        ];
        let mut out = Vec::new();
        from_f32(DType::F16, &src, &mut out).unwrap();
        let y: Vec<half::f16> = out
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]))
            .collect();
        let m = half::f16::MAX;
        assert_eq!(&y[..5], &[m, m, m, m, half::f16::MIN]);
        assert_eq!(y[5], half::f16::INFINITY);
        assert!(y[6].is_nan());
        assert_eq!(y[7], half::f16::from_f32(1.5));
        out.clear();
        from_f32(DType::BF16, &[f32::MAX, -f32::MAX, f32::INFINITY], &mut out).unwrap();
        let b: Vec<half::bf16> = out
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(b, [half::bf16::MAX, half::bf16::MIN, half::bf16::INFINITY]);
    }

    #[test]
    fn quantized_round_trip_reports_scale() {
        let p = QuantParams::for_bits(3).unwrap();
        let vals: Vec<f32> = (0..4096).map(|i| ((i as f32) * 0.01).sin()).collect();
        let e = encode_quantized(&p, &vals).unwrap();
        assert_eq!(e.bits, 3);
        assert_eq!(e.bytes.len(), 1577);
        // max |x| ~ 1.0 over 3 levels: scale ~ 1/3.
        assert!((e.scale - 1.0 / 3.0).abs() < 0.01, "{}", e.scale);
        let mut out = Vec::new();
        decode_quantized(&e.bytes, 4096, &mut out).unwrap();
        assert_eq!(out.len(), 4096);
        for (a, b) in vals.iter().zip(&out) {
            assert!((a - b).abs() <= e.scale / 2.0 + 1e-6);
        }
        assert!(decode_quantized(&e.bytes, 100, &mut out).is_err());
    }

    #[test]
    fn v8_and_v9_refuse_the_same_decodings_past_f16_and_read_the_rest_anywhere() {
        // review16: reads of f16/bf16 now saturate (`from_f32`), but a v8 or v9 payload
        // that decodes past ±65504 stays a typed error in both versions: the writer never
        // stores one (`encode_kv_keys` keeps such a block in its plain encoding), so it is
        // crafted or corrupt, and saturating it would hand out plausible wrong keys.
        // Payloads within range decode to the codec's values wherever they are found.
        use tensorvault_quant::segment_v8::{self, V8Params};
        use tensorvault_quant::segment_v9;
        let p = V8Params {
            bits: 8,
            width: 64,
            raw_rows: 1,
            lanes_log2: 2,
        };
        let x: Vec<f32> = (0..64 * 64)
            .map(|i| ((i % 64) as f32 - 32.0) * 0.5 + ((i * 7919 % 101) as f32 - 50.0) * 0.02)
            .collect();
        let v8 = segment_v8::encode(&p, &x, 0.01).unwrap();
        let v9 = segment_v9::encode(&p, &x, 0.01, &[0; 64]).unwrap();
        for (honest, version) in [(&v8, q::V8_VERSION), (&v9, q::V9_VERSION)] {
            let mut a = Vec::new();
            let mut b = Vec::new();
            decode_quantized(honest, x.len(), &mut a).unwrap();
            match version {
                q::V8_VERSION => segment_v8::decode(honest, x.len(), &mut b).unwrap(),
                _ => segment_v9::decode(honest, x.len(), &mut b).unwrap(),
            }
            assert_eq!(a, b);
            // Step codes 0: v9 decodes exactly as v8 at Δ.
            assert_eq!(a.len(), x.len());
            for (step, ok) in [(60.0f32, true), (1.0e4, false)] {
                let mut big = honest.clone();
                let at = q::V8_STEP_OFFSET;
                big[at..at + 4].copy_from_slice(&step.to_le_bytes());
                let mut y = Vec::new();
                let r = decode_quantized(&big, x.len(), &mut y);
                assert_eq!(r.is_ok(), ok, "v{version} step {step}: {r:?}");
                if let Err(e) = r {
                    let QuantError::OutOfRange {
                        index,
                        value,
                        target,
                    } = e
                    else {
                        panic!("v{version}: {e:?}");
                    };
                    assert!(value.abs() > 65504.0 && index >= 64, "{index} {value}");
                    assert!(
                        target.contains(&format!("v{version} key block")),
                        "{target}"
                    );
                }
            }
        }
        // The same crafted step refused at the same value in both.
        let first = |b: &[u8]| {
            let mut big = b.to_vec();
            big[q::V8_STEP_OFFSET..q::V8_STEP_OFFSET + 4].copy_from_slice(&1.0e4f32.to_le_bytes());
            match decode_quantized(&big, x.len(), &mut Vec::new()) {
                Err(QuantError::OutOfRange { index, value, .. }) => (index, value),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(first(&v8), first(&v9));
    }

    #[test]
    fn a_v8_block_decoding_past_f16_is_a_typed_error() {
        // review15: a v8 segment is valid while its values stay finite f32 (step * 2^(k-1)
        // < 2^126), but a KV read returns the block as f16, where a value past 65504 is
        // infinite. The store never writes such a block; a crafted one (a valid checksum
        // over a larger step) is refused naming the first such value.
        use tensorvault_quant::segment_v8::{encode, V8Params};
        let p = V8Params {
            bits: 8,
            width: 64,
            raw_rows: 1,
            lanes_log2: 2,
        };
        let x: Vec<f32> = (0..64 * 64)
            .map(|i| ((i % 64) as f32 - 32.0) * 0.5 + ((i * 7919 % 101) as f32 - 50.0) * 0.02)
            .collect();
        let honest = encode(&p, &x, 0.01).unwrap();
        let mut out = Vec::new();
        decode_quantized(&honest, x.len(), &mut out).unwrap();
        assert!(out.iter().all(|v| v.abs() <= 100.0));
        let mut big = honest.clone();
        let at = q::V8_STEP_OFFSET;
        big[at..at + 4].copy_from_slice(&1.0e4f32.to_le_bytes());
        let mut y = Vec::new();
        tensorvault_quant::segment_v8::decode(&big, x.len(), &mut y).unwrap();
        let first = y.iter().position(|v| v.abs() > 65504.0).unwrap();
        assert!(first >= 64 && y.iter().all(|v| v.is_finite()));
        match decode_quantized(&big, x.len(), &mut y) {
            Err(QuantError::OutOfRange {
                index,
                value,
                target,
            }) => {
                assert_eq!(index, first);
                assert!(
                    value.abs() > 65504.0 && target.contains("f16"),
                    "{value} {target}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
