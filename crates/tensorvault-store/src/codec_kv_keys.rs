//! Tier 2 KV keys as channel-centred model-coded ECSQ ([`CollectionConfig::kv_keys_ecsq`],
//! MetaLog header flags2 bit 0; `docs/formats/store.md`, "Codec 4, KV kinds"): a
//! `kv_key` block that starts on a row and holds whole rows of a power-of-two head is
//! stored as a TQTC version 8 segment (`tensorvault_quant::segment_v8`,
//! `docs/formats/quant.md` §15) when one fits into its budget ([`kv_keys_budget`]: the
//! larger of `KV_KEYS_ECSQ_CENTIBITS` / 100 bits per value and the byte length of the
//! segment the block gets without the flag). The sink row (the first token of block 0, where the
//! collection's `sink_values` allows a row) stays f16, as in that segment. With
//! [`CollectionConfig::kv_keys_wstep`] (flags2 bit 2) the same blocks, in the same budget,
//! are TQTC version 9 segments instead (`tensorvault_quant::segment_v9`, §16: one step per
//! channel shaped by the block's RoPE-pair key energy), and so are tier 3 key blocks that
//! qualify the same way, within the bytes of their 4-bit key envelope.

use tensorvault_quant::segment_v8::{encode_to_fit, SegmentV8, V8Params};
use tensorvault_quant::segment_v9::{self, RopePairs, SegmentV9};
use tensorvault_quant::QuantError;

use crate::config::{
    CollectionConfig, CODEC_V4, KV_KEYS_ECSQ_BITS, KV_KEYS_ECSQ_CENTIBITS, KV_KEYS_ECSQ_LANES_LOG2,
};
use crate::error::Result;
use crate::finite::{first_not_f16, F16_MAX};
use crate::rope::RopePairing;
use crate::types::{TensorKind, Tier};

/// The v8 settings of block `block_index` (`len` values) of a tensor of `kind` and
/// `shape` in `tier`, or `None` when the block is not coded as v8: another collection,
/// tier or kind; a block that does not start on a row or hold whole rows; a head that is
/// not a power of two in 16..=1024 channels; a block with no row after the sink row.
/// Tier 2 with `kv_keys_ecsq`; with `kv_keys_wstep` tier 3 as well (as v9, in the bytes of
/// the block's 4-bit key envelope: [`kv_keys_budget`]).
#[must_use]
pub fn kv_keys_params(
    geo: &CollectionConfig,
    tier: Tier,
    kind: TensorKind,
    shape: &[u32],
    block_index: u32,
    len: usize,
) -> Option<V8Params> {
    let tier_ok = tier == Tier::Tier2 || (tier == Tier::Tier3 && geo.kv_keys_wstep);
    if !geo.kv_keys_ecsq || geo.codec != CODEC_V4 || !tier_ok || kind != TensorKind::KvKey {
        return None;
    }
    let width = shape.last().copied()?;
    let w16 = u16::try_from(width)
        .ok()
        .filter(|w| w.is_power_of_two() && (16..=1024).contains(w))?;
    let start = u64::from(block_index) * u64::from(geo.block_elems);
    if start % u64::from(width) != 0 || !len.is_multiple_of(width as usize) {
        return None;
    }
    let rows = len / width as usize;
    let sink = block_index == 0 && u32::from(geo.sink_values) >= width;
    let raw_rows = u16::from(sink);
    (rows > usize::from(raw_rows)).then_some(V8Params {
        bits: KV_KEYS_ECSQ_BITS,
        width: w16,
        raw_rows,
        lanes_log2: KV_KEYS_ECSQ_LANES_LOG2,
    })
}

/// How a v9 key block's encoder pairs channels (`None`: the collection stores v8 keys):
/// halves `(i, i + w/2)` for a collection whose keys are stored under NeoX RoPE, else
/// adjacent channels `(2i, 2i + 1)` (interleaved RoPE, and keys stored after RoPE, whose
/// pairing the store does not know: llama.cpp's GGUF layout is adjacent).
#[must_use]
pub fn wstep_pairs(geo: &CollectionConfig) -> Option<RopePairs> {
    geo.kv_keys_wstep.then(|| match geo.rope {
        Some(r) if r.pairing == RopePairing::Neox => RopePairs::Halves,
        _ => RopePairs::Adjacent,
    })
}

/// The byte budget of a v8 key block of `len` values in `tier` whose encoding without the
/// flag takes `plain_len` bytes: at tier 2 the larger of `KV_KEYS_ECSQ_CENTIBITS / 100`
/// bits per value (rounded down to whole bytes) and `plain_len`; at tier 3 (v9 only)
/// `plain_len` (tier 3 sits at its 3.5 b/v edge: never more than the 4-bit groups); at
/// most the tier's `max_block_len` (a slot, or the extent cap).
#[must_use]
pub fn kv_keys_budget(geo: &CollectionConfig, tier: Tier, len: usize, plain_len: usize) -> usize {
    let keys = if tier == Tier::Tier2 {
        len as u64 * KV_KEYS_ECSQ_CENTIBITS / 800
    } else {
        0
    };
    let cap = u64::from(geo.max_block_len(tier));
    usize::try_from(keys.max(plain_len as u64).min(cap)).unwrap_or(usize::MAX)
}

/// The block's v8 segment (v9 with `wstep`, its channels paired as [`wstep_pairs`] says:
/// [`CollectionConfig::kv_keys_wstep`]) with
/// settings `p` ([`kv_keys_params`]) in at most `max_len` bytes ([`kv_keys_budget`]), and
/// its (coarsest) step; `None` when none fits, or when a channel mean or sink value is
/// past f16's range (the block then keeps its encoding without the flag).
///
/// # Errors
/// [`crate::StoreErr::Quant`] for any other v8/v9 encoding error (none can happen for
/// settings [`kv_keys_params`] gives and finite values).
pub fn encode_kv_keys(
    p: &V8Params,
    values: &[f32],
    max_len: usize,
    wstep: Option<RopePairs>,
) -> Result<Option<(Vec<u8>, f32)>> {
    let fitted = if let Some(pairs) = wstep {
        segment_v9::encode_to_fit_with(p, values, max_len, 1.0, pairs)
    } else {
        encode_to_fit(p, values, max_len)
    };
    match fitted {
        Ok(Some(bytes)) => {
            let step = if wstep.is_some() {
                SegmentV9::parse(&bytes).map_or(0.0, |s| s.delta())
            } else {
                SegmentV8::parse(&bytes).map_or(0.0, |s| s.step())
            };
            if !decodes_within_f16(&bytes, values, step, wstep.is_some()) {
                return Ok(None);
            }
            Ok(Some((bytes, step)))
        }
        Ok(None) | Err(QuantError::OutOfRange { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Whether every value of the v8 (v9 with `wstep`: `step` its coarsest step, which bounds
/// every channel's) segment `bytes` (encoded from `values` with `step`)
/// decodes within f16's ±[`F16_MAX`]. A mid-rise reconstruction `mean + (q + 1/2) step`
/// of a value near 65504 can pass it by up to half a step (at a step coarser than the
/// clamp-free one, which the budget forces on wide, high-entropy channels), and the f16
/// KV read would return ±infinity: such a block keeps its encoding without the bit. The
/// decode runs only when `3 max|x| + step` reaches 65504, far above what can overflow
/// (an unclamped value decodes within `step / 2` of its input, a clamped one between its
/// input and its channel's f16 mean, so every `|decoded| <= max|x| (1 + 2^-10) + step /
/// 2` up to f32 rounding), so ordinary keys never pay for it. [`check_v8_f16`] refuses what this never writes.
fn decodes_within_f16(bytes: &[u8], values: &[f32], step: f32, wstep: bool) -> bool {
    let top = values.iter().fold(0f32, |m, v| m.max(v.abs()));
    if f64::from(top) * 3.0 + f64::from(step) < f64::from(F16_MAX) {
        return true;
    }
    let mut y = Vec::new();
    if wstep {
        segment_v9::decode(bytes, values.len(), &mut y).is_ok() && check_v9_f16(&y).is_ok()
    } else {
        tensorvault_quant::segment_v8::decode(bytes, values.len(), &mut y).is_ok()
            && check_v8_f16(&y).is_ok()
    }
}

/// The first value of a decoded v8 key block beyond f16's ±[`F16_MAX`] (the store never
/// writes one: [`encode_kv_keys`] keeps such a block in its encoding without the bit), as
/// [`QuantError::OutOfRange`] naming its index. The read path calls it on every v8
/// payload so a crafted one is a typed error, never an infinite f16 key.
///
/// # Errors
/// [`QuantError::OutOfRange`] with target `f16 (v8 key block)`.
pub fn check_v8_f16(values: &[f32]) -> std::result::Result<(), QuantError> {
    check_f16(values, "f16 (v8 key block)")
}

/// [`check_v8_f16`] for a decoded v9 key block (the read path calls it on every v9
/// payload).
///
/// # Errors
/// [`QuantError::OutOfRange`] with target `f16 (v9 key block)`.
pub fn check_v9_f16(values: &[f32]) -> std::result::Result<(), QuantError> {
    check_f16(values, "f16 (v9 key block)")
}

fn check_f16(values: &[f32], target: &'static str) -> std::result::Result<(), QuantError> {
    match first_not_f16(values) {
        None => Ok(()),
        Some(index) => Err(QuantError::OutOfRange {
            index,
            value: values[index],
            target,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::RopeSpec;

    #[test]
    fn wstep_pairs_follow_the_collections_rope_layout() {
        let base = CollectionConfig {
            entropy: true,
            kv_keys_ecsq: true,
            ..CollectionConfig::kv_cache(64).unwrap().with_codec_v4()
        };
        assert_eq!(wstep_pairs(&base), None);
        let on = CollectionConfig {
            kv_keys_wstep: true,
            ..base
        };
        assert_eq!(wstep_pairs(&on), Some(RopePairs::Adjacent));
        for (pairing, want) in [
            (RopePairing::Neox, RopePairs::Halves),
            (RopePairing::Interleaved, RopePairs::Adjacent),
        ] {
            let g = CollectionConfig {
                rope: Some(RopeSpec::new(10_000.0, 64, pairing).unwrap()),
                ..on
            };
            assert_eq!(wstep_pairs(&g), Some(want), "{pairing:?}");
        }
    }
}
