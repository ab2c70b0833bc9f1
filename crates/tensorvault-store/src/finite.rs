//! The store's one policy on values a quantized tier cannot hold (issue 25 class 4):
//! NaN and ±infinity, and, for KV data kept as f16, values beyond f16's ±65504 (a cast
//! turns them into ±infinity).
//!
//! - **KV caches refuse them at the door.** [`crate::KvCache`] appends and the prefix
//!   cache's `store` check every value with [`check_kv_f16`] / [`first_not_f16`] and
//!   fail with [`StoreErr::NonFiniteKv`] naming the layer, head and token; nothing is
//!   written. A NaN in a KV cache is a model bug (an overflowed activation), and a
//!   cache that accepted it could never quantize the block holding it.
//! - **Generic tensors may hold them in Tier0.** Tier0 is lossless: NaN (payload
//!   included) and ±infinity are stored and read back bit-exact. A quantized tier
//!   cannot represent them: a put into Tiers 1-3 fails with
//!   [`StoreErr::NonFiniteBlock`] naming the block, the count and the first element.
//! - **Tiering never stops on them.** A block that cannot be encoded for the tier a
//!   migration wants (non-finite values, or a range whose scale overflows the codec) is
//!   *held*: it stays in its tier, the other blocks of the batch move, and the block is
//!   listed in [`crate::MaintainReport::held`] and counted in
//!   [`crate::StoreStats::held_blocks`]. A held block is left out of later planning until
//!   it is rewritten (the hold is keyed by the payload's checksum) or the store is
//!   reopened. Blocks written before this policy (a NaN appended to a KV cache by an
//!   older build) are held the same way.

use half::f16;

use crate::error::{Result, StoreErr};
use crate::types::{BlockKey, DType, Tier};

/// The largest finite f16 magnitude. An f32 beyond it becomes ±infinity (or rounds to
/// 65504 up to 65519.99) when cast: the KV policy refuses anything beyond it.
pub const F16_MAX: f32 = 65504.0;

/// Non-finite values found in a run of elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NonFinite {
    /// How many values are NaN or infinite.
    pub count: u64,
    /// Index of the first one.
    pub first: u64,
}

fn scan(mut bad: impl Iterator<Item = bool>) -> Option<NonFinite> {
    let first = bad.position(|b| b)? as u64;
    let count = 1 + bad.filter(|b| *b).count() as u64;
    Some(NonFinite { count, first })
}

/// The NaN and infinite values of `values`, if any.
#[must_use]
pub fn scan_f32(values: &[f32]) -> Option<NonFinite> {
    scan(values.iter().map(|v| !v.is_finite()))
}

/// The NaN and infinite values of `values`, if any.
#[must_use]
pub fn scan_f16(values: &[f16]) -> Option<NonFinite> {
    scan(values.iter().map(|v| !v.is_finite()))
}

/// The NaN and infinite values among little-endian elements of `dtype` (integers are
/// always finite; a trailing partial element is ignored).
#[must_use]
pub fn scan_elements(dtype: DType, bytes: &[u8]) -> Option<NonFinite> {
    match dtype {
        DType::F32 => scan(
            bytes
                .chunks_exact(4)
                .map(|c| !f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite()),
        ),
        DType::F16 => scan(
            bytes
                .chunks_exact(2)
                .map(|c| !f16::from_le_bytes([c[0], c[1]]).is_finite()),
        ),
        DType::BF16 => scan(
            bytes
                .chunks_exact(2)
                .map(|c| !half::bf16::from_le_bytes([c[0], c[1]]).is_finite()),
        ),
        _ => None,
    }
}

/// Index of the first value of `values` that does not survive a cast to f16 as a finite
/// value (NaN, infinite, or beyond ±[`F16_MAX`]).
#[must_use]
pub fn first_not_f16(values: &[f32]) -> Option<usize> {
    values
        .iter()
        .position(|v| !v.is_finite() || v.abs() > F16_MAX)
}

/// Check KV values `[tokens, head_dim]` (row-major) that will be stored from token
/// position `first_token` of (`layer`, `head`)'s keys or values (`field`: `keys` or
/// `values`).
///
/// # Errors
/// [`StoreErr::NonFiniteKv`] naming the token position of the first NaN or infinite
/// value.
pub fn check_kv_f16(
    field: &'static str,
    layer: u32,
    head: u32,
    first_token: u64,
    head_dim: usize,
    values: &[f16],
) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(StoreErr::NonFiniteKv {
            field,
            layer,
            head,
            token: first_token + (i / head_dim.max(1)) as u64,
        }),
    }
}

/// Why a block was held in its tier by a migration (see the module docs).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HoldReason {
    /// The block holds NaN or infinite values (`first`: an element index of the whole
    /// tensor, row-major).
    NonFinite(NonFinite),
    /// The codec refused the values for another reason (e.g. a range whose scale
    /// overflows the codec's f16 scales).
    Codec(tensorvault_quant::QuantError),
}

impl std::fmt::Display for HoldReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HoldReason::NonFinite(n) => write!(
                f,
                "{} non-finite values (first at tensor element {})",
                n.count, n.first
            ),
            HoldReason::Codec(e) => write!(f, "cannot be quantized: {e}"),
        }
    }
}

/// A block a migration left where it was, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldBlock {
    /// The block.
    pub key: BlockKey,
    /// The tier it stays in.
    pub tier: Tier,
    /// The tier the migration wanted.
    pub target: Tier,
    /// Why it could not be encoded there.
    pub reason: HoldReason,
}

impl HeldBlock {
    /// The held block of a refused encode, if `e` is such a refusal.
    pub(crate) fn from_err(key: BlockKey, tier: Tier, target: Tier, e: &StoreErr) -> Option<Self> {
        let reason = match e {
            StoreErr::NonFiniteBlock { count, first, .. } => HoldReason::NonFinite(NonFinite {
                count: *count,
                first: *first,
            }),
            StoreErr::Quant(q) => HoldReason::Codec(q.clone()),
            _ => return None,
        };
        Some(Self {
            key,
            tier,
            target,
            reason,
        })
    }

    /// Count of non-finite values (0 for a codec refusal).
    #[must_use]
    pub fn non_finite(&self) -> u64 {
        match &self.reason {
            HoldReason::NonFinite(n) => n.count,
            HoldReason::Codec(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_count_and_locate() {
        assert_eq!(scan_f32(&[1.0, 2.0]), None);
        assert_eq!(
            scan_f32(&[1.0, f32::NAN, 2.0, f32::INFINITY, f32::NEG_INFINITY]),
            Some(NonFinite { count: 3, first: 1 })
        );
        let h = [f16::ONE, f16::INFINITY, f16::NAN];
        assert_eq!(scan_f16(&h), Some(NonFinite { count: 2, first: 1 }));
        let bytes: Vec<u8> = h.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            scan_elements(DType::F16, &bytes),
            Some(NonFinite { count: 2, first: 1 })
        );
        let f: Vec<u8> = [0.5f32, f32::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            scan_elements(DType::F32, &f),
            Some(NonFinite { count: 1, first: 1 })
        );
        let b = half::bf16::NAN.to_le_bytes();
        assert_eq!(
            scan_elements(DType::BF16, &b),
            Some(NonFinite { count: 1, first: 0 })
        );
        assert_eq!(scan_elements(DType::I8, &[0xff; 4]), None);
    }

    #[test]
    fn f16_range_is_the_kv_limit() {
        assert_eq!(first_not_f16(&[0.0, -F16_MAX, F16_MAX]), None);
        assert_eq!(first_not_f16(&[1.0, 65504.01, 0.0]), Some(1));
        assert_eq!(first_not_f16(&[-70000.0]), Some(0));
        assert_eq!(first_not_f16(&[0.0, f32::NAN]), Some(1));
        assert!(!f16::from_f32(70000.0).is_finite());
    }

    #[test]
    fn kv_check_names_the_token() {
        let mut v = vec![f16::ZERO; 12];
        assert!(check_kv_f16("values", 1, 2, 10, 4, &v).is_ok());
        v[9] = f16::NAN; // row 2
        assert!(matches!(
            check_kv_f16("keys", 1, 2, 10, 4, &v),
            Err(StoreErr::NonFiniteKv {
                field: "keys",
                layer: 1,
                head: 2,
                token: 12
            })
        ));
    }
}
