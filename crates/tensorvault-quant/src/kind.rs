//! What a tensor holds, and the codec v2 layout that follows from it: the one place that
//! decides which axis groups run along, the group size and whether the encoder searches
//! clip ranges per kind of tensor. The temporal store's quantized tiers and
//! `tensorvault quant eval` both call [`v2_layout`], so what `quant eval` reports is what
//! the store writes.
//!
//! ```
//! use tensorvault_quant::kind::{v2_layout, TensorKind};
//! use tensorvault_quant::segment_v2::Axis;
//! let kind: TensorKind = "kv_key".parse()?;
//! let p = v2_layout(kind, 3, 64, Some(128), true)?;
//! assert_eq!((p.axis, p.width, p.raw_rows, p.clip_search), (Axis::Columns, 128, 1, false));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::str::FromStr;

use crate::levels::LevelSet;
use crate::segment_rot::{ScaleRule, V3Params};
use crate::segment_v2::{Axis, V2Params};
use crate::QuantError;

/// What a tensor holds: each quantized tier picks its codec settings from it (codec v2;
/// the v1 codec encodes every kind alike). Stored as one byte (the discriminant) by the
/// temporal store.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
#[repr(u8)]
pub enum TensorKind {
    /// Anything else: groups along the values, min/max ranges (the fastest encode).
    #[default]
    Generic = 0,
    /// Attention keys, `[tokens, head_dim]`: groups per channel over tokens, no clipping,
    /// the first token (attention sink) kept as f16 where the caller allows it.
    KvKey = 1,
    /// Attention values, `[tokens, head_dim]`: per channel at 5 bits and more, along each
    /// token below; no clipping, the first token kept as f16 like keys.
    KvValue = 2,
    /// Weight matrices: groups along rows, clip search.
    Weight = 3,
    /// Embedding vectors: groups along each vector, clip search.
    Embedding = 4,
}

impl TensorKind {
    /// Every kind, in tag order.
    pub const ALL: [TensorKind; 5] = [
        TensorKind::Generic,
        TensorKind::KvKey,
        TensorKind::KvValue,
        TensorKind::Weight,
        TensorKind::Embedding,
    ];

    /// From the on-disk byte; `None` for unknown tags.
    #[must_use]
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(TensorKind::Generic),
            1 => Some(TensorKind::KvKey),
            2 => Some(TensorKind::KvValue),
            3 => Some(TensorKind::Weight),
            4 => Some(TensorKind::Embedding),
            _ => None,
        }
    }

    /// The name used by the CLI and Python (`generic`, `kv_key`, `kv_value`, `weight`,
    /// `embedding`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            TensorKind::Generic => "generic",
            TensorKind::KvKey => "kv_key",
            TensorKind::KvValue => "kv_value",
            TensorKind::Weight => "weight",
            TensorKind::Embedding => "embedding",
        }
    }

    /// The kind named `name` (see [`TensorKind::name`]); `None` for unknown names.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether this is a KV-cache kind (keys or values), whose first token may be kept
    /// raw as the attention sink.
    #[must_use]
    pub const fn is_kv(self) -> bool {
        matches!(self, TensorKind::KvKey | TensorKind::KvValue)
    }
}

impl fmt::Display for TensorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tensor kind name that is not one of [`TensorKind::name`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown tensor kind {name:?} (expected generic, kv_key, kv_value, weight or embedding)")]
pub struct UnknownKind {
    /// The rejected name.
    pub name: String,
}

impl FromStr for TensorKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| UnknownKind { name: s.to_owned() })
    }
}

/// Default group size of a codec v2 group at `bits`: 128 values at 5 bits and more, 64
/// below (what the store's default tiers 8 / 5 / 3 bits use).
#[must_use]
pub const fn v2_default_group_size(bits: u8) -> u32 {
    if bits >= 5 {
        128
    } else {
        64
    }
}

/// The codec v2 settings for values of `kind` at `bits` with groups of `group_size`:
///
/// * `kv_key`: groups per channel (the columns axis) over `group_size` tokens, no clip;
/// * `kv_value`: per channel like keys at 5 bits and more, along the tokens below
///   (measured on SmolLM2-135M's cache, bench/RESULTS.md issue 14: per-channel values cut
///   the 5-bit perplexity change from +1.62% / +0.87% to +1.17% / +0.60%, while at 3 bits
///   per-token groups were better, +10.2% / +11.7% against +14.6% / +13.0%), no clip;
/// * `weight`, `embedding`: groups along rows with the error-minimising clip search
///   (about 25x the encode work: worth it for data written once);
/// * `generic`: groups along rows, min/max ranges (fast encode).
///
/// `width` is the row length when the values are whole rows of a `[rows, width]` layout
/// (`None` or a width beyond `u16`: flat groups, no raw rows). `sink` keeps the first row
/// as f16 for the KV kinds (the attention-sink token; ignored for other kinds).
///
/// # Errors
/// [`QuantError::InvalidBits`] outside 2..=8; [`QuantError::InvalidGroupSize`] if
/// `group_size` is not a power of two in 4..=1024.
pub fn v2_layout(
    kind: TensorKind,
    bits: u8,
    group_size: u32,
    width: Option<u32>,
    sink: bool,
) -> Result<V2Params, QuantError> {
    if !(crate::layout::MIN_BITS..=crate::layout::MAX_BITS).contains(&bits) {
        return Err(QuantError::InvalidBits { bits });
    }
    let log2 = group_size.trailing_zeros();
    let log2_ok = (u32::from(crate::layout::V2_MIN_GROUP_LOG2)
        ..=u32::from(crate::layout::V2_MAX_GROUP_LOG2))
        .contains(&log2);
    if !group_size.is_power_of_two() || !log2_ok {
        return Err(QuantError::InvalidGroupSize {
            group_size: group_size as usize,
        });
    }
    let rows = width.and_then(|w| u16::try_from(w).ok()).filter(|&w| w > 0);
    let columns = match kind {
        TensorKind::KvKey => true,
        TensorKind::KvValue => bits >= 5,
        _ => false,
    };
    Ok(V2Params {
        bits,
        group_log2: log2 as u8,
        axis: if columns && rows.is_some() {
            Axis::Columns
        } else {
            Axis::Flat
        },
        width: rows.unwrap_or(1),
        raw_rows: u16::from(kind.is_kv() && sink && rows.is_some()),
        clip_search: matches!(kind, TensorKind::Weight | TensorKind::Embedding),
    })
}

/// The rotation block of rows of `width` values: the largest power of two that divides
/// `width`, at most 1024 (`None` below 16: too little side-data saving to rotate). A
/// row of 576 (SmolLM2's embeddings) is rotated as nine blocks of 64; a KV head of 64 as
/// one block.
#[must_use]
pub fn v3_block(width: u32) -> Option<u8> {
    if width == 0 {
        return None;
    }
    let log2 = width
        .trailing_zeros()
        .min(u32::from(crate::layout::V3_MAX_BLOCK_LOG2));
    (log2 >= 4).then_some(log2 as u8)
}

/// The codec v3 settings for values of `kind` at `bits` in a tensor whose rows hold
/// `width` values, or `None` when codec v3 keeps the v2 layout ([`v2_layout`]) for them:
///
/// * `embedding`: rotated in power-of-two sub-blocks of the row ([`v3_block`]),
///   Lloyd-Max levels, norm-matched f16 block scales (the store uses this only where the
///   segment fits the tier's slot: with the default geometry tier 3 for blocks of 64,
///   every tier for blocks of 128 or more);
/// * `kv_key`, `kv_value`, `weight`, `generic`: `None`. Measured on SmolLM2-135M's cache
///   over two held-out texts at 3 bits (bench/RESULTS.md, "Quality per bit, round 3"):
///   values rotated per token with Lloyd-Max levels cut their error from 20.6-20.8% to
///   18.2-18.3% but moved perplexity by -0.14 and +1.37 points (+13.86% -> +13.72%,
///   +16.37% -> +17.74%): not better, so values keep v2's groups; keys rotated per token
///   instead of per-channel groups over tokens (KVQuant's layout for post-RoPE keys) went
///   from +14-16% to +38-48%. Weights keep the clip-searched v2 groups.
///
/// A block of `b` values never straddles two rows (`b` divides `width`), so a run of
/// values that starts on a multiple of `b` can be rotated whether or not it holds whole
/// rows; `whole_rows` says whether it does (a raw sink row, for KV kinds, needs it).
/// Widths beyond `u16` are rotated without a raw row.
#[must_use]
pub fn v3_layout(
    kind: TensorKind,
    bits: u8,
    width: Option<u32>,
    whole_rows: bool,
    sink: bool,
) -> Option<V3Params> {
    let width = width?;
    let block_log2 = v3_block(width)?;
    let rotate = kind == TensorKind::Embedding;
    let w16 = u16::try_from(width).ok().filter(|_| whole_rows);
    let raw_rows = u16::from(kind.is_kv() && sink && w16.is_some());
    (rotate && (crate::layout::MIN_BITS..=crate::layout::MAX_BITS).contains(&bits)).then(|| {
        V3Params {
            bits,
            levels: LevelSet::LloydMax,
            block_log2,
            rotate: true,
            seed: crate::layout::V3_DEFAULT_SEED,
            width: if raw_rows > 0 { w16.unwrap_or(1) } else { 1 },
            raw_rows,
            scale: ScaleRule::NormMatched,
            wide_scales: true,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_fail() {
        for k in TensorKind::ALL {
            assert_eq!(k.name().parse::<TensorKind>(), Ok(k));
            assert_eq!(TensorKind::from_u8(k as u8), Some(k));
            assert_eq!(k.to_string(), k.name());
        }
        let e = "kv-key".parse::<TensorKind>().unwrap_err();
        assert_eq!(e.name, "kv-key");
        assert!(e.to_string().contains("kv_key"), "{e}");
        assert_eq!(TensorKind::from_u8(5), None);
    }

    #[test]
    fn layout_per_kind() {
        let l = |k, bits, w, sink| v2_layout(k, bits, 64, w, sink).unwrap();
        let keys = l(TensorKind::KvKey, 3, Some(64), true);
        assert_eq!(
            (keys.axis, keys.raw_rows, keys.clip_search),
            (Axis::Columns, 1, false)
        );
        assert_eq!(l(TensorKind::KvValue, 3, Some(64), true).axis, Axis::Flat);
        assert_eq!(
            l(TensorKind::KvValue, 5, Some(64), false).axis,
            Axis::Columns
        );
        assert_eq!(l(TensorKind::KvValue, 5, Some(64), false).raw_rows, 0);
        let w = l(TensorKind::Weight, 3, Some(64), true);
        assert_eq!((w.axis, w.raw_rows, w.clip_search), (Axis::Flat, 0, true));
        assert!(l(TensorKind::Embedding, 8, None, false).clip_search);
        assert!(!l(TensorKind::Generic, 8, None, false).clip_search);
        // No rows (or rows too wide for the format): flat, no sink row.
        let flat = l(TensorKind::KvKey, 3, Some(70_000), true);
        assert_eq!((flat.axis, flat.width, flat.raw_rows), (Axis::Flat, 1, 0));
        assert_eq!(l(TensorKind::KvKey, 3, None, true).axis, Axis::Flat);
        assert_eq!(keys.group_log2, 6);
    }

    #[test]
    fn v3_choices() {
        assert_eq!(v3_block(64), Some(6));
        assert_eq!(v3_block(576), Some(6));
        assert_eq!(v3_block(384), Some(7));
        assert_eq!(v3_block(4096), Some(10));
        assert_eq!(v3_block(24), None);
        assert_eq!(v3_block(0), None);
        for kind in [
            TensorKind::KvKey,
            TensorKind::KvValue,
            TensorKind::Weight,
            TensorKind::Generic,
        ] {
            assert!(v3_layout(kind, 3, Some(64), true, true).is_none(), "{kind}");
        }
        let e = v3_layout(TensorKind::Embedding, 8, Some(576), false, true).unwrap();
        assert_eq!((e.block_log2, e.raw_rows, e.width), (6, 0, 1));
        let e3 = v3_layout(TensorKind::Embedding, 3, Some(384), true, true).unwrap();
        assert_eq!(
            (e3.block_log2, e3.raw_rows, e3.levels),
            (7, 0, LevelSet::LloydMax)
        );
        assert!(v3_layout(TensorKind::Embedding, 3, None, true, false).is_none());
        assert!(v3_layout(TensorKind::Embedding, 3, Some(24), true, false).is_none());
        let wide = v3_layout(TensorKind::Embedding, 3, Some(1 << 17), true, false).unwrap();
        assert_eq!((wide.block_log2, wide.raw_rows, wide.width), (10, 0, 1));
    }

    #[test]
    fn layout_rejects_bad_bits_and_groups() {
        assert_eq!(
            v2_layout(TensorKind::Generic, 9, 64, None, false),
            Err(QuantError::InvalidBits { bits: 9 })
        );
        for g in [0, 2, 48, 2048] {
            assert_eq!(
                v2_layout(TensorKind::Generic, 4, g, None, false),
                Err(QuantError::InvalidGroupSize {
                    group_size: g as usize
                }),
                "{g}"
            );
        }
        assert_eq!(v2_default_group_size(8), 128);
        assert_eq!(v2_default_group_size(3), 64);
    }
}
