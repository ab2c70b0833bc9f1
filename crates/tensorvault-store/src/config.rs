//! Configuration: the collection geometry (persisted in the MetaLog header, fixed for a
//! collection's life) and the runtime options (chosen at every open).

use tensorvault_quant::layout as q;

use crate::error::{Result, StoreErr};
use crate::types::Tier;

/// Default raw block size: 16 KiB of f32 values (ADR-018 section 3.3).
pub const DEFAULT_BLOCK_ELEMS: u32 = 4096;
/// Raw block size of the KV-cache layout in bytes (ADR-018 section 3.3).
pub const KV_BLOCK_RAW_BYTES: u32 = 32 * 1024;
/// Default slot alignment in tier files (ARCHITECTURE.md section 7).
pub const DEFAULT_SLOT_ALIGN: u32 = 64;
/// Largest accepted block (elements); bounds every slot and every decode buffer.
pub const MAX_BLOCK_ELEMS: u32 = 1 << 22;

/// The geometry of one collection: how many elements a block holds and how each tier
/// encodes it. Written into the MetaLog header when the collection is created and read
/// back on every open, so slot sizes never change under existing data.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CollectionConfig {
    /// Elements per block (the last block of a tensor may hold fewer).
    pub block_elems: u32,
    /// Bytes per element reserved in a Tier0 slot: 4 (f32, default) or 2 (f16/bf16 only).
    pub tier0_elem_bytes: u8,
    /// Bit width of tiers 1, 2, 3 (defaults 8, 5, 3; tier 2 may be 7).
    pub tier_bits: [u8; 3],
    /// Group size of tiers 1, 2, 3 (defaults from `tensorvault_quant::layout::default_group_size`).
    pub group_size: [u32; 3],
    /// Slot alignment in bytes (power of two, >= 8).
    pub slot_align: u32,
}

impl Default for CollectionConfig {
    fn default() -> Self {
        Self::with_block_elems(DEFAULT_BLOCK_ELEMS)
    }
}

impl CollectionConfig {
    /// Defaults with `block_elems` elements per block.
    #[must_use]
    pub fn with_block_elems(block_elems: u32) -> Self {
        let bits = [8, 5, 3];
        Self {
            block_elems,
            tier0_elem_bytes: 4,
            tier_bits: bits,
            group_size: bits.map(|b| q::default_group_size(b) as u32),
            slot_align: DEFAULT_SLOT_ALIGN,
        }
    }

    /// The KV-cache layout of ADR-018 section 3.3: 32 KiB blocks of f16 whose element
    /// count is rounded down to a multiple of `head_dim`, so a block boundary is always a
    /// token-position boundary (head_dim 128 -> 16384 elements = 128 positions).
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] if `head_dim` is 0 or larger than a block.
    pub fn kv_cache(head_dim: u32) -> Result<Self> {
        let elems = KV_BLOCK_RAW_BYTES / 2;
        if head_dim == 0 || head_dim > elems {
            return Err(StoreErr::InvalidArgument {
                field: "head_dim",
                reason: format!("{head_dim} must be in 1..={elems}"),
            });
        }
        let mut c = Self::with_block_elems(elems / head_dim * head_dim);
        c.tier0_elem_bytes = 2;
        Ok(c)
    }

    /// Bit width of a quantized tier (`None` for Tier0).
    #[must_use]
    pub fn bits(&self, tier: Tier) -> Option<u8> {
        tier.index().checked_sub(1).map(|i| self.tier_bits[i])
    }

    /// Quantization parameters of a quantized tier (`None` for Tier0).
    ///
    /// # Errors
    /// [`StoreErr::Quant`] if the stored bits / group size are invalid (checked by
    /// [`CollectionConfig::validate`]).
    pub fn params(&self, tier: Tier) -> Result<Option<tensorvault_quant::groupwise::QuantParams>> {
        match tier.index().checked_sub(1) {
            None => Ok(None),
            Some(i) => Ok(Some(tensorvault_quant::groupwise::QuantParams::new(
                self.tier_bits[i],
                self.group_size[i] as usize,
            )?)),
        }
    }

    /// Payload bytes a full block needs in `tier`: raw bytes for Tier0, the length of a
    /// one-frame TQTC segment of `block_elems` values for quantized tiers.
    #[must_use]
    pub fn max_payload_len(&self, tier: Tier) -> u64 {
        let n = u64::from(self.block_elems);
        match tier.index().checked_sub(1) {
            None => n * u64::from(self.tier0_elem_bytes),
            Some(i) => {
                let k = u64::from(self.tier_bits[i]);
                let g = u64::from(self.group_size[i].max(1));
                let groups = n.div_ceil(g);
                q::HEADER_LEN as u64 + 1 + groups * q::SCALE_BYTES as u64 + (n * k).div_ceil(8)
            }
        }
    }

    /// Slot length of `tier`: the largest payload rounded up to `slot_align`.
    #[must_use]
    pub fn slot_len(&self, tier: Tier) -> u32 {
        let a = u64::from(self.slot_align.max(1));
        let len = self.max_payload_len(tier).div_ceil(a) * a;
        u32::try_from(len).unwrap_or(u32::MAX)
    }

    /// Check every field.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        let bad =
            |field: &'static str, reason: String| Err(StoreErr::InvalidArgument { field, reason });
        if self.block_elems == 0 || self.block_elems > MAX_BLOCK_ELEMS {
            return bad(
                "block_elems",
                format!("{} not in 1..={MAX_BLOCK_ELEMS}", self.block_elems),
            );
        }
        if !matches!(self.tier0_elem_bytes, 1 | 2 | 4) {
            return bad(
                "tier0_elem_bytes",
                format!("{} not 1, 2 or 4", self.tier0_elem_bytes),
            );
        }
        if !self.slot_align.is_power_of_two() || self.slot_align < 8 || self.slot_align > 1 << 20 {
            return bad(
                "slot_align",
                format!("{} is not a power of two in 8..=2^20", self.slot_align),
            );
        }
        for i in 0..3 {
            tensorvault_quant::groupwise::QuantParams::new(
                self.tier_bits[i],
                self.group_size[i] as usize,
            )
            .map_err(|e| StoreErr::InvalidArgument {
                field: "tier_bits/group_size",
                reason: format!("tier{}: {e}", i + 1),
            })?;
        }
        Ok(())
    }
}

/// When writes reach stable storage.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Durability {
    /// fsync data and log before every write returns: an acknowledged write survives
    /// kill -9 and power loss.
    #[default]
    EveryWrite,
    /// fsync after every N writes (and on flush / close): a crash loses at most the
    /// last N-1 acknowledged writes, never corrupts older ones.
    EveryN(u32),
    /// Never fsync explicitly; the OS decides (kill -9 still loses nothing already
    /// written to the page cache; power loss may).
    Os,
}

/// How replay treats corrupt MetaLog records. Named after RocksDB's `WALRecoveryMode`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum RecoveryMode {
    /// ADR-018's default (RocksDB `kSkipAnyCorruptedRecords`): a record with a bad CRC
    /// is skipped with a warning and replay goes on; a torn tail is truncated.
    #[default]
    SkipAnyCorruptedRecords,
    /// Strict (RocksDB `kPointInTimeRecovery`): replay stops at the first corrupt
    /// record; the store opens at that consistent point and the log is truncated there
    /// before the next append.
    PointInTime,
}

/// Runtime options, chosen at every open.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Geometry used when the collection is created (ignored when it exists: the
    /// persisted geometry wins).
    pub collection: CollectionConfig,
    /// Write durability.
    pub durability: Durability,
    /// Replay behaviour on corrupt records.
    pub recovery: RecoveryMode,
    /// Append the accumulated Access records every N reads (0: only on flush/close).
    pub access_flush_every: u32,
    /// Blocks allowed per tier (`usize::MAX`: unlimited).
    pub max_blocks_per_tier: [usize; 4],
    /// Compact the log on open when it holds more than this many records per live block
    /// (0: never automatically).
    pub compact_ratio: u32,
    /// Thresholds of the automatic migration scheduler ([`crate::TensorStore::maintain`]).
    pub tiering: crate::tiering::TierPolicy,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            collection: CollectionConfig::default(),
            durability: Durability::EveryWrite,
            recovery: RecoveryMode::SkipAnyCorruptedRecords,
            access_flush_every: 1024,
            max_blocks_per_tier: [usize::MAX; 4],
            compact_ratio: 0,
            tiering: crate::tiering::TierPolicy::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_sized_per_tier() {
        let c = CollectionConfig::default();
        c.validate().unwrap();
        assert_eq!(c.slot_len(Tier::Tier0), 16384);
        // 3-bit g512: 24 + 1 + 16 + 1536 = 1577 -> 1600 at 64-byte alignment.
        assert_eq!(c.max_payload_len(Tier::Tier3), 1577);
        assert_eq!(c.slot_len(Tier::Tier3), 1600);
        assert!(f64::from(c.slot_len(Tier::Tier0)) / f64::from(c.slot_len(Tier::Tier3)) > 10.0);
        // 8-bit g128: 24 + 1 + 64 + 4096 = 4185 -> 4224.
        assert_eq!(c.slot_len(Tier::Tier1), 4224);
    }

    #[test]
    fn kv_layout_aligns_to_head_dim() {
        let c = CollectionConfig::kv_cache(128).unwrap();
        assert_eq!(c.block_elems, 16384);
        assert_eq!(c.slot_len(Tier::Tier0), 32768);
        let c = CollectionConfig::kv_cache(96).unwrap();
        assert_eq!(c.block_elems % 96, 0);
        assert!(c.block_elems <= 16384 && c.block_elems > 16384 - 96);
        assert!(CollectionConfig::kv_cache(0).is_err());
    }

    #[test]
    fn validate_names_the_field() {
        let c = CollectionConfig {
            slot_align: 48,
            ..CollectionConfig::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("slot_align"), "{e}");
    }
}
