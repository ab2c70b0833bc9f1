//! Tier 2 KV keys as channel-centred model-coded ECSQ ([`CollectionConfig::kv_keys_ecsq`],
//! MetaLog header flags2 bit 0; `docs/formats/store.md`, "Codec 4, KV kinds"): a
//! `kv_key` block that starts on a row and holds whole rows of a power-of-two head is
//! stored as a TQTC version 8 segment (`tensorvault_quant::segment_v8`,
//! `docs/formats/quant.md` §15) when one fits into the byte length of the segment the
//! block gets without the flag. The sink row (the first token of block 0, where the
//! collection's `sink_values` allows a row) stays f16, as in that segment.

use tensorvault_quant::segment_v8::{encode_to_fit, SegmentV8, V8Params};
use tensorvault_quant::QuantError;

use crate::codec::{BlockPlace, Encoded};
use crate::config::{CollectionConfig, CODEC_V4, KV_KEYS_ECSQ_BITS, KV_KEYS_ECSQ_LANES_LOG2};
use crate::error::Result;
use crate::types::{TensorKind, Tier};

/// The v8 settings of a block in `tier`, or `None` when the block is not coded as v8:
/// another collection, tier or kind; a block that does not start on a row or hold whole
/// rows; a head that is not a power of two in 16..=1024 channels; a block with no row
/// after the sink row.
#[must_use]
pub fn kv_keys_params(
    geo: &CollectionConfig,
    tier: Tier,
    place: &BlockPlace<'_>,
) -> Option<V8Params> {
    if !geo.kv_keys_ecsq
        || geo.codec != CODEC_V4
        || tier != Tier::Tier2
        || place.kind != TensorKind::KvKey
    {
        return None;
    }
    let width = place.shape.last().copied()?;
    let w16 = u16::try_from(width)
        .ok()
        .filter(|w| w.is_power_of_two() && (16..=1024).contains(w))?;
    let start = u64::from(place.block_index) * u64::from(geo.block_elems);
    if start % u64::from(width) != 0 || !place.len.is_multiple_of(width as usize) {
        return None;
    }
    let rows = place.len / width as usize;
    let sink = place.block_index == 0 && u32::from(geo.sink_values) >= width;
    let raw_rows = u16::from(sink);
    (rows > usize::from(raw_rows)).then_some(V8Params {
        bits: KV_KEYS_ECSQ_BITS,
        width: w16,
        raw_rows,
        lanes_log2: KV_KEYS_ECSQ_LANES_LOG2,
    })
}

/// `plain`, the block's encoding without the flag, or the block's v8 segment when
/// [`kv_keys_params`] applies and one fits in `plain`'s length (the step as the
/// reported scale). A block whose channel mean or sink value f16 cannot hold keeps
/// `plain`.
///
/// # Errors
/// [`crate::StoreErr::Quant`] for a v8 encoding error other than an f16 range error
/// (which cannot happen for settings [`kv_keys_params`] gives and values `plain` was
/// encoded from).
pub fn encode_kv_keys(
    geo: &CollectionConfig,
    tier: Tier,
    place: &BlockPlace<'_>,
    values: &[f32],
    plain: Encoded,
) -> Result<Encoded> {
    let Some(p) = kv_keys_params(geo, tier, place) else {
        return Ok(plain);
    };
    match encode_to_fit(&p, values, plain.bytes.len()) {
        Ok(Some(bytes)) => {
            let scale = SegmentV8::parse(&bytes).map_or(0.0, |s| s.step());
            Ok(Encoded {
                bytes,
                bits: p.bits,
                scale,
            })
        }
        Ok(None) | Err(QuantError::OutOfRange { .. }) => Ok(plain),
        Err(e) => Err(e.into()),
    }
}
