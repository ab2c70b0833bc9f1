//! Codec v4 layouts of `weight` and `embedding` tensors: TQTC version 4 segments
//! (`docs/formats/quant.md` §11, groups inside super-blocks with f16 units and small
//! scale/min codes, GGUF k-quant style) sized to the tier's slot.
//!
//! The slot of a tier is fixed by the collection's geometry (`CollectionConfig::slot_len`,
//! what the tier file allocates per block: 8.25 / 5.25 / 3.375 bits per value for the
//! default 4096-value blocks), and a v4 segment may use all of it;
//! v4's side data is cheap enough that the same bytes buy groups of 32-64 instead of
//! version 2's 64-128. [`choose`] picks, for the tier's bit width, the smallest group
//! whose side data fits, then the widest side codes, then the smallest super-block; every
//! super-block is rotated. Measured on all-MiniLM-L6-v2's 40 weight matrices
//! (bench/RESULTS.md, "Weights and embeddings at k-quant side data"): smaller groups beat
//! wider side codes (3 bits: groups of 32 with 5+4-bit codes 15.0% against groups of 64
//! with 6+6 16.8%), codes under 4 bits lose (groups of 16 with 2+2: 16.9%), and rotation
//! lowered the error of every layout tried (e.g. 15.03% -> 14.74%, 4.23% -> 4.11%).
//!
//! Embeddings are encoded with norm-matched super-block units ([`encoder`]): the same
//! layout and codes, each super-block's two f16 units scaled so it decodes with its
//! input's norm, which keeps nearest-neighbour rankings (inner products) from shrinking
//! by a factor that differs between super-blocks (bench/RESULTS.md, "Session 11:
//! quant-emb"). Weights keep the fitted units (least squared error).
//!
//! Collections with [`CollectionConfig::ecsq`] store these kinds at tiers 2 and 3 as
//! entropy-coded uniform levels under rate control instead ([`ecsq_params`],
//! [`encode_ecsq`]): a TQTC version 3 segment of rotated blocks of 1024 with one shared
//! step, wrapped in the version 5 envelope, the step searched so the stored bytes fit
//! the tier's slot (`tensorvault_quant::ecsq`). One step everywhere, paid for by the rANS
//! code lengths, is what minimizes the squared error for an entropy-coded size: on
//! all-MiniLM-L6-v2 it takes the weights' relative error from 4.11% (v4) to 3.67% at tier
//! 2 and from 14.7% to 13.0% at tier 3 in the same slots (bench/RESULTS.md, "Session 12:
//! quant-ecsq").
//!
//! With [`CollectionConfig::ecsq_model`] as well, these kinds are stored at tiers 1, 2
//! and 3 as model-coded ECSQ ([`ecsq_model_params`], [`encode_ecsq_model`]): a TQTC
//! version 7 segment (`tensorvault_quant::segment_v7`), the same rate control with no
//! stored frequency table (a Gaussian model, one side byte per rotation block) and
//! [`ECSQ_MODEL_BITS`] wide codes (bench/RESULTS.md, "Session 14: ecsq-model").

use tensorvault_quant::bitpack::packed_len;
use tensorvault_quant::ecsq::{self, EcsqParams};
use tensorvault_quant::layout as q;
use tensorvault_quant::segment_rot::SegmentV3;
use tensorvault_quant::segment_v4::{self, V4Encoder, V4Params};
use tensorvault_quant::segment_v5::{self, SegmentV5};
use tensorvault_quant::segment_v6;
use tensorvault_quant::segment_v7::{self, SegmentV7, V7Params};
use tensorvault_quant::QuantError;

use crate::config::{
    CollectionConfig, CODEC_V4, ECSQ_BITS, ECSQ_BLOCK_LOG2, ECSQ_LANES_LOG2, ECSQ_MODEL_BITS,
    ECSQ_ROTATE,
};
use crate::types::{TensorKind, Tier};

/// Group sizes tried, smallest (most precise) first.
const GROUPS_LOG2: [u8; 4] = [4, 5, 6, 7];
/// `(scale_bits, min_bits)` tried for each group size, widest first (k-quants use 6 + 6;
/// below 4 + 4 the codes cost more error than a larger group does).
const SIDE_BITS: [(u8, u8); 5] = [(6, 6), (6, 5), (5, 5), (5, 4), (4, 4)];
/// Super-block sizes tried for each side width, smallest (most local units) first.
const SUPERS_LOG2: [u8; 3] = [8, 9, 10];

/// Whether codec v4 stores `kind` as a v4 segment.
#[must_use]
pub fn uses_v4(kind: TensorKind) -> bool {
    matches!(kind, TensorKind::Weight | TensorKind::Embedding)
}

/// The v4 layout of `n` values at `bits` bits whose segment is at most `max_len` bytes:
/// the first fit in the order groups (small first) x side bits (wide first) x
/// super-blocks (small first); `None` when not even the cheapest fits.
#[must_use]
pub fn choose(bits: u8, n: usize, max_len: u64) -> Option<V4Params> {
    for group_log2 in GROUPS_LOG2 {
        for (scale_bits, min_bits) in SIDE_BITS {
            for super_log2 in SUPERS_LOG2 {
                let p = V4Params {
                    bits,
                    group_log2,
                    super_log2,
                    scale_bits,
                    min_bits,
                    rotate: true,
                    seed: q::V4_DEFAULT_SEED,
                    clip_search: true,
                };
                if p.encoded_len(n).is_ok_and(|len| len as u64 <= max_len) {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// The codec v4 layout of a block of `len` values of a `kind` tensor in a quantized
/// `tier`, for weight and embedding tensors of codec v4 collections (`None` otherwise: other kinds keep their codec v3
/// layouts). The layout depends only on the tier and the block's length, so every
/// block of a tier has the same side data; a short last block gets the layout of its own
/// length (never worse than a full block's).
#[must_use]
pub fn v4_layout(
    geo: &CollectionConfig,
    tier: Tier,
    kind: TensorKind,
    len: usize,
) -> Option<V4Params> {
    if geo.codec != CODEC_V4 || !uses_v4(kind) {
        return None;
    }
    let bits = geo.bits(tier)?;
    choose(bits, len, u64::from(geo.slot_len(tier)))
}

/// The encoder choices codec v4 uses for a `kind` tensor: norm-matched units for
/// embeddings (ranked by inner products), the fitted units otherwise.
#[must_use]
pub fn encoder(kind: TensorKind) -> V4Encoder {
    V4Encoder {
        norm_match: kind == TensorKind::Embedding,
    }
}

/// Encode one block of a `kind` tensor with the v4 layout `p` ([`v4_layout`]) and the
/// kind's encoder choices ([`encoder`]).
///
/// # Errors
/// As [`segment_v4::encode_with`]: non-finite values, scale overflow.
pub fn encode(p: &V4Params, kind: TensorKind, values: &[f32]) -> Result<Vec<u8>, QuantError> {
    segment_v4::encode_with(p, encoder(kind), values)
}

/// Smallest rotation block an [`CollectionConfig::ecsq`] segment uses (a block of values
/// with no power-of-two factor of at least this keeps the v4 layout).
const ECSQ_MIN_BLOCK_LOG2: u8 = 4;

/// The rate-controlled layout of a block of `len` values of a `kind` tensor in `tier`, for
/// weight and embedding tensors at tiers 2 and 3 of [`CollectionConfig::ecsq`]
/// collections (`None` otherwise, and for a length with no power-of-two factor of at
/// least 16): [`ECSQ_BITS`] wide codes, rotation blocks of `2^ECSQ_BLOCK_LOG2` or the
/// largest power of two dividing `len`.
#[must_use]
pub fn ecsq_params(
    geo: &CollectionConfig,
    tier: Tier,
    kind: TensorKind,
    len: usize,
) -> Option<EcsqParams> {
    if !(geo.ecsq && geo.codec == CODEC_V4 && uses_v4(kind)) || len == 0 {
        return None;
    }
    let bits = match tier {
        Tier::Tier2 => ECSQ_BITS[0],
        Tier::Tier3 => ECSQ_BITS[1],
        _ => return None,
    };
    let block_log2 = ecsq_block_log2(len)?;
    Some(EcsqParams {
        bits,
        block_log2,
        seed: q::V3_DEFAULT_SEED,
        rotate: ECSQ_ROTATE,
        lanes_log2: ECSQ_LANES_LOG2,
    })
}

/// The rotation block (log2) of an ECSQ layout for `len > 0` values: `ECSQ_BLOCK_LOG2`
/// or the largest power of two dividing `len`, `None` below `2^ECSQ_MIN_BLOCK_LOG2`
/// (shared by [`ecsq_params`] and [`ecsq_model_params`]).
fn ecsq_block_log2(len: usize) -> Option<u8> {
    let block_log2 = (len.trailing_zeros() as u8).min(ECSQ_BLOCK_LOG2);
    (block_log2 >= ECSQ_MIN_BLOCK_LOG2).then_some(block_log2)
}

/// The bytes a block of `len` values may take in `tier`: the tier's slot, in proportion
/// for a short last block (so its bits per value are the tier's).
#[must_use]
pub fn ecsq_budget(geo: &CollectionConfig, tier: Tier, len: usize) -> usize {
    let slot = u64::from(geo.slot_len(tier));
    let n = u64::from(geo.block_elems.max(1));
    let len = (len as u64).min(n);
    usize::try_from(slot * len / n).unwrap_or(usize::MAX)
}

/// Encode one block with the rate-controlled layout `p` ([`ecsq_params`]) in at most
/// [`ecsq_budget`] bytes, with the largest block scale of its v3 segment (what the index
/// records): `Ok(None)` when even the coarsest step does not fit (the caller keeps the
/// v4 layout).
///
/// # Errors
/// As [`ecsq::encode_to_fit`]: non-finite values, scale overflow.
pub fn encode_ecsq(
    geo: &CollectionConfig,
    tier: Tier,
    p: &EcsqParams,
    values: &[f32],
) -> Result<Option<(Vec<u8>, f32)>, QuantError> {
    let Some(bytes) = ecsq::encode_to_fit(p, values, ecsq_budget(geo, tier, values.len()))? else {
        return Ok(None);
    };
    let scale = inner_max_scale(&bytes, values.len())?;
    Ok(Some((bytes, scale)))
}

/// The model-coded ECSQ layout (TQTC version 7) of a block of `len` values of a `kind`
/// tensor in `tier`, for weight and embedding tensors at tiers 1 to 3 of
/// [`CollectionConfig::ecsq_model`] collections (`None` otherwise, and for a length with
/// no power-of-two factor of at least 16, as [`ecsq_params`]): [`ECSQ_MODEL_BITS`] wide
/// codes, rotation blocks of `2^ECSQ_BLOCK_LOG2` or the largest power of two dividing
/// `len`, [`ECSQ_LANES_LOG2`] lanes.
#[must_use]
pub fn ecsq_model_params(
    geo: &CollectionConfig,
    tier: Tier,
    kind: TensorKind,
    len: usize,
) -> Option<V7Params> {
    if !(geo.ecsq_model && geo.ecsq && geo.codec == CODEC_V4 && uses_v4(kind)) || len == 0 {
        return None;
    }
    let bits = *ECSQ_MODEL_BITS.get(tier.index().checked_sub(1)?)?;
    let block_log2 = ecsq_block_log2(len)?;
    Some(V7Params {
        bits,
        block_log2,
        seed: q::V3_DEFAULT_SEED,
        lanes_log2: ECSQ_LANES_LOG2,
    })
}

/// Encode one block as model-coded ECSQ with the layout `p` ([`ecsq_model_params`]) in at
/// most `max_len` bytes, with its step (what the index records as the block's scale):
/// `Ok(None)` when even the coarsest step does not fit (the caller keeps another layout).
///
/// # Errors
/// As [`segment_v7::encode_to_fit`]: non-finite values, scale overflow.
pub fn encode_ecsq_model(
    p: &V7Params,
    values: &[f32],
    max_len: usize,
) -> Result<Option<(Vec<u8>, f32)>, QuantError> {
    let Some(bytes) = segment_v7::encode_to_fit(p, values, max_len)? else {
        return Ok(None);
    };
    let step = SegmentV7::parse(&bytes)?.step();
    Ok(Some((bytes, step)))
}

/// Where a block of an `embedding` tensor sits in its rows, for a
/// [`CollectionConfig::row_gains`] collection at a quantized tier: `(row width, position
/// of the block's first value in its row)`. `None` for other kinds, collections, Tier0,
/// and rows wider than 65535 values (the envelope's u16 width).
#[must_use]
pub fn row_gain_place(
    geo: &CollectionConfig,
    tier: Tier,
    kind: TensorKind,
    shape: &[u32],
    block_index: u32,
) -> Option<(u16, u16)> {
    if !(geo.row_gains && geo.codec == CODEC_V4 && kind == TensorKind::Embedding)
        || tier == Tier::Tier0
    {
        return None;
    }
    let width = shape.last().copied().filter(|&w| w > 0)?;
    let start = u64::from(block_index) * u64::from(geo.block_elems);
    let first = start % u64::from(width);
    Some((u16::try_from(width).ok()?, u16::try_from(first).ok()?))
}

/// Encode one block of an embedding tensor as a TQTC version 6 row-gain envelope
/// ([`row_gain_place`] gives `width` and `first`): the inner segment is what the
/// collection writes for the block otherwise (ECSQ at tiers 2 and 3 with
/// [`CollectionConfig::ecsq`], else the v4 layout, wrapped in the v5 envelope at tiers 2
/// and 3 with [`CollectionConfig::entropy`] when shorter), fitted to `max_len` (the
/// tier's slot, or [`ecsq_budget`] for ECSQ) less the envelope's bytes. `Ok(None)` when no
/// inner layout fits (the caller writes the block without gains); otherwise the bytes,
/// the inner segment's bit width and its largest scale (what the index records).
///
/// For a centred block (`CollectionConfig::centre`) `values` are the block's values less
/// the tensor's mean row (what the segment codes) and `reference` the original values,
/// against which the gains are computed (`tensorvault_quant::segment_v6::wrap_against`:
/// `<x, m + g c_hat> = |x|^2`); otherwise `reference` is `values`.
///
/// # Errors
/// The inner encoders' errors (non-finite values, scale overflow); an empty block; a
/// `reference` of another length.
pub fn encode_with_gains_against(
    geo: &CollectionConfig,
    tier: Tier,
    kind: TensorKind,
    (width, first): (u16, u16),
    values: &[f32],
    reference: &[f32],
) -> Result<Option<(Vec<u8>, u8, f32)>, QuantError> {
    let extra = segment_v6::envelope_len(values.len(), width, first)?;
    let inner = if let Some(p) = ecsq_model_params(geo, tier, kind, values.len()) {
        match ecsq_budget(geo, tier, values.len()).checked_sub(extra) {
            Some(b) => segment_v7::encode_to_fit(&p, values, b)?.map(|bytes| (bytes, p.bits)),
            None => None,
        }
    } else if let Some(p) = ecsq_params(geo, tier, kind, values.len()) {
        let budget = ecsq_budget(geo, tier, values.len());
        match budget.checked_sub(extra) {
            Some(b) => ecsq::encode_to_fit(&p, values, b)?.map(|bytes| (bytes, p.bits)),
            None => None,
        }
    } else {
        None
    };
    let inner = match inner {
        Some(found) => Some(found),
        None => {
            let slot = u64::from(geo.slot_len(tier));
            let Some(bits) = geo.bits(tier) else {
                return Ok(None);
            };
            match slot
                .checked_sub(extra as u64)
                .and_then(|b| choose(bits, values.len(), b))
            {
                Some(p) => {
                    let mut bytes = encode(&p, kind, values)?;
                    if geo.entropy && tier != Tier::Tier1 {
                        bytes = segment_v5::encode_smallest(bytes)?;
                    }
                    Some((bytes, p.bits))
                }
                None => None,
            }
        }
    };
    let Some((inner, bits)) = inner else {
        return Ok(None);
    };
    let scale = inner_max_scale(&inner, values.len())?;
    let bytes = segment_v6::wrap_against(&inner, reference, values, width, first)?;
    Ok(Some((bytes, bits, scale)))
}

/// The largest block or group scale of a v3 / v4 segment, or of the one a v5 envelope
/// wraps (what the index records). The scales are side bytes, which an envelope keeps
/// verbatim: its inner segment is rebuilt with zero codes instead of decoding the rANS
/// stream (a quarter of an ECSQ block's put time), which gives the same scales.
fn inner_max_scale(bytes: &[u8], n: usize) -> Result<f32, QuantError> {
    if bytes.get(q::VERSION_OFFSET) == Some(&q::V7_VERSION) {
        // One step for the whole block: the scale the index records.
        return Ok(SegmentV7::parse(bytes)?.step());
    }
    if bytes.get(q::VERSION_OFFSET) == Some(&q::V5_VERSION) {
        let env = SegmentV5::parse(bytes)?;
        if env.codes() > n {
            return Err(QuantError::LengthMismatch {
                what: "v5 codes (must be at most the block's values)",
                input: env.codes(),
                output: n,
            });
        }
        let side_len = bytes
            .get(q::V5_SIDE_LEN_OFFSET..q::V5_SIDE_LEN_OFFSET + 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        // `parse` checked the side bytes are present.
        let side = &bytes[q::V5_HEADER_LEN..q::V5_HEADER_LEN + side_len];
        let mut inner = Vec::with_capacity(q::V5_INNER_SKIP + side.len() + n);
        inner.extend_from_slice(&q::MAGIC);
        inner.push(env.inner_version());
        inner.push(env.bits());
        inner.extend_from_slice(side);
        inner.resize(inner.len() + packed_len(env.codes(), env.bits()), 0);
        return inner_max_scale(&inner, n);
    }
    if bytes.get(q::VERSION_OFFSET) == Some(&q::V4_VERSION) {
        return Ok(segment_v4::SegmentV4::parse(bytes)?.max_scale());
    }
    Ok(SegmentV3::parse(bytes)?.max_scale())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_slots_get_the_measured_layouts() {
        let geo = CollectionConfig {
            codec: CODEC_V4,
            ..CollectionConfig::default()
        };
        let pick = |tier| {
            let p = choose(geo.bits(tier).unwrap(), 4096, u64::from(geo.slot_len(tier))).unwrap();
            (p.bits, p.group(), p.super_block(), p.scale_bits, p.min_bits)
        };
        // 8.25 / 5.25 / 3.375 bits per value: groups of 64 (6+5-bit codes over
        // super-blocks of 1024) at 8 and 5 bits, groups of 32 (5+4) at 3 bits.
        assert_eq!(pick(Tier::Tier1), (8, 64, 1024, 6, 5));
        assert_eq!(pick(Tier::Tier2), (5, 64, 1024, 6, 5));
        assert_eq!(pick(Tier::Tier3), (3, 32, 1024, 5, 4));
        for tier in [Tier::Tier1, Tier::Tier2, Tier::Tier3] {
            let p = choose(geo.bits(tier).unwrap(), 4096, u64::from(geo.slot_len(tier))).unwrap();
            assert!(p.encoded_len(4096).unwrap() as u64 <= u64::from(geo.slot_len(tier)));
            assert!(p.rotate);
        }
        // A slot with room for Q4_K-like side data gets it.
        let wide = choose(4, 256, 24 + 4 + 12 + 128).unwrap();
        assert_eq!((wide.group(), wide.scale_bits, wide.min_bits), (32, 6, 6));
        // Nothing fits a slot smaller than the codes.
        assert_eq!(choose(3, 4096, 1536), None);
    }

    #[test]
    fn only_weights_and_embeddings_in_codec_v4() {
        let v4 = CollectionConfig {
            codec: CODEC_V4,
            ..CollectionConfig::default()
        };
        let v3 = CollectionConfig {
            codec: crate::config::CODEC_V3,
            ..v4
        };
        for kind in TensorKind::ALL {
            let want = matches!(kind, TensorKind::Weight | TensorKind::Embedding);
            assert_eq!(
                v4_layout(&v4, Tier::Tier2, kind, 4096).is_some(),
                want,
                "{kind}"
            );
            assert!(v4_layout(&v3, Tier::Tier2, kind, 4096).is_none(), "{kind}");
            assert!(v4_layout(&v4, Tier::Tier0, kind, 4096).is_none(), "{kind}");
        }
    }

    #[test]
    fn the_recorded_scale_is_the_decoded_segments() {
        let geo = CollectionConfig {
            codec: CODEC_V4,
            entropy: true,
            ecsq: true,
            ..CollectionConfig::default()
        };
        let x: Vec<f32> = (0..4096)
            .map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1e-3 * (1.0 + (i / 512) as f32))
            .collect();
        for tier in [Tier::Tier2, Tier::Tier3] {
            let p = ecsq_params(&geo, tier, TensorKind::Weight, x.len()).unwrap();
            let (bytes, scale) = encode_ecsq(&geo, tier, &p, &x).unwrap().unwrap();
            assert_eq!(bytes[q::VERSION_OFFSET], q::V5_VERSION);
            let inner = SegmentV5::parse(&bytes).unwrap().inner(x.len()).unwrap();
            let want = SegmentV3::parse(&inner).unwrap().max_scale();
            assert!(want > 0.0);
            assert_eq!(scale.to_bits(), want.to_bits(), "{tier:?}");
        }
        // A v5 envelope claiming more codes than the block holds is refused.
        let p = ecsq_params(&geo, Tier::Tier3, TensorKind::Weight, x.len()).unwrap();
        let (bytes, _) = encode_ecsq(&geo, Tier::Tier3, &p, &x).unwrap().unwrap();
        assert!(matches!(
            inner_max_scale(&bytes, 1024),
            Err(QuantError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn ecsq_params_follow_the_flag_tier_kind_and_length() {
        let on = CollectionConfig {
            codec: CODEC_V4,
            entropy: true,
            ecsq: true,
            ..CollectionConfig::default()
        };
        let off = CollectionConfig { ecsq: false, ..on };
        let p = |geo: &CollectionConfig, tier, kind, len| {
            ecsq_params(geo, tier, kind, len).map(|p| (p.bits, p.block_log2))
        };
        let w = TensorKind::Weight;
        assert_eq!(p(&on, Tier::Tier2, w, 4096), Some((6, 10)));
        assert_eq!(
            p(&on, Tier::Tier3, TensorKind::Embedding, 4096),
            Some((5, 10))
        );
        // Short blocks: the largest power of two dividing the length, at least 16.
        assert_eq!(p(&on, Tier::Tier3, w, 4000), Some((5, 5)));
        assert_eq!(p(&on, Tier::Tier3, w, 1000), None);
        assert_eq!(p(&on, Tier::Tier3, w, 0), None);
        for (geo, tier, kind) in [
            (&on, Tier::Tier1, w),
            (&on, Tier::Tier0, w),
            (&on, Tier::Tier3, TensorKind::Generic),
            (&on, Tier::Tier3, TensorKind::KvValue),
            (&off, Tier::Tier3, w),
        ] {
            assert_eq!(p(geo, tier, kind, 4096), None, "{tier:?} {kind}");
        }
        // The budget is the slot, in proportion for a short block.
        assert_eq!(ecsq_budget(&on, Tier::Tier2, 4096), 2688);
        assert_eq!(ecsq_budget(&on, Tier::Tier2, 1024), 672);
    }
}
