//! The ADR-018 vocabulary: block identity, tiers, element types, reconstruction policy
//! and the per-block metadata with its access tracking.

use std::cmp::Ordering;

/// Maximum number of dimensions a tensor shape may have (ADR-018 section 3.7).
pub const MAX_NDIM: usize = 8;

/// The EMA smoothing factor of ADR-018 section 3.8.
pub const EMA_ALPHA: f32 = 0.1;

/// Derive a tensor's stable 128-bit id (ADR-018 section 3.1, option B):
/// `blake3(tenant || collection || logical_name || lineage_parent)` truncated to its
/// first 16 bytes, read little-endian.
///
/// To keep the concatenation unambiguous ("ab"+"c" vs "a"+"bc"), each string is fed as
/// its length (u64 LE) followed by its UTF-8 bytes; the parent is 16 bytes (u128 LE,
/// zero for a tensor without lineage). `docs/formats/store.md` states this byte by byte.
#[must_use]
pub fn tensor_id(tenant: &str, collection: &str, logical_name: &str, lineage_parent: u128) -> u128 {
    let mut h = blake3::Hasher::new();
    for s in [tenant, collection, logical_name] {
        h.update(&(s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    }
    h.update(&lineage_parent.to_le_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 16];
    first.copy_from_slice(&digest.as_bytes()[..16]);
    u128::from_le_bytes(first)
}

/// Unique identifier of one block: the tensor it belongs to and its index in it.
///
/// Ordered by `(tensor_id, block_index)`: every scan, the snapshot written by log
/// compaction and eviction tie-breaks use this order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BlockKey {
    /// 128-bit tensor identity, see [`tensor_id`].
    pub tensor_id: u128,
    /// Zero-based index of this block within the tensor's block sequence.
    pub block_index: u32,
}

impl BlockKey {
    /// A key from its parts.
    #[must_use]
    pub const fn new(tensor_id: u128, block_index: u32) -> Self {
        Self {
            tensor_id,
            block_index,
        }
    }

    /// The total-order key: tensor id first, then block index.
    #[must_use]
    pub const fn sort_key(&self) -> (u128, u32) {
        (self.tensor_id, self.block_index)
    }
}

impl Ord for BlockKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.sort_key().cmp(&other.sort_key())
    }
}

impl PartialOrd for BlockKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for BlockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}/{}", self.tensor_id, self.block_index)
    }
}

/// Storage tier: compression level and access latency.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
#[repr(u8)]
pub enum Tier {
    /// Raw f32/f16 (or the block's own dtype), bit-exact. Persisted in `tier0.dat`.
    Tier0 = 0,
    /// 8-bit groupwise quantized (hot).
    Tier1 = 1,
    /// 5-bit (default) or 7-bit groupwise quantized (warm).
    Tier2 = 2,
    /// 3-bit groupwise quantized (cold).
    Tier3 = 3,
}

impl Tier {
    /// Every tier, hottest first.
    pub const ALL: [Tier; 4] = [Tier::Tier0, Tier::Tier1, Tier::Tier2, Tier::Tier3];

    /// From the on-disk byte; `None` for values above 3.
    #[must_use]
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Tier::Tier0),
            1 => Some(Tier::Tier1),
            2 => Some(Tier::Tier2),
            3 => Some(Tier::Tier3),
            _ => None,
        }
    }

    /// Index 0..=3, for per-tier arrays.
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Whether blocks in this tier are quantized (every tier but Tier0).
    #[must_use]
    pub const fn is_quantized(self) -> bool {
        !matches!(self, Tier::Tier0)
    }

    /// The tier data file's name inside a collection directory (`tier0.dat` ...).
    #[must_use]
    pub const fn file_name(self) -> &'static str {
        match self {
            Tier::Tier0 => "tier0.dat",
            Tier::Tier1 => "tier1.dat",
            Tier::Tier2 => "tier2.dat",
            Tier::Tier3 => "tier3.dat",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tier{}", *self as u8)
    }
}

/// Element type of the original (unquantized) tensor: the workspace's one dtype
/// (`tensorvault-core`), whose tags are ADR-018 section 3.5's. The store keeps the five
/// in [`STORE_DTYPES`]; a write of another is refused with [`StoreErr::UnsupportedDType`].
///
/// [`StoreErr::UnsupportedDType`]: crate::StoreErr::UnsupportedDType
pub use tensorvault_core::DType;

/// The element types the store keeps (tags 0..=4 of a Create record's dtype byte).
pub const STORE_DTYPES: [DType; 5] = [DType::F32, DType::F16, DType::BF16, DType::I8, DType::U8];

/// The store dtype of a Create record's dtype byte; `None` for unknown tags and for
/// dtypes the store does not keep.
#[must_use]
pub fn store_dtype(tag: u8) -> Option<DType> {
    DType::from_tag(tag).filter(|d| STORE_DTYPES.contains(d))
}

/// What a tensor holds (one byte in each block's Create record): defined in
/// `tensorvault-quant`, whose [`tensorvault_quant::kind::v2_layout`] turns it into codec
/// settings for the store's tiers and `quant eval` alike.
pub use tensorvault_quant::kind::TensorKind;

/// How a block's full-precision data can be rebuilt if its slot is corrupt.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
#[repr(u8)]
pub enum ReconstructPolicy {
    /// Self-contained: a corrupt block is lost (`Corruption`).
    #[default]
    None = 0,
    /// Lineage parent + a stored delta.
    Delta = 1,
    /// Low-rank factors U * V.
    Factor = 2,
}

impl ReconstructPolicy {
    /// From the on-disk byte; `None` for unknown values.
    #[must_use]
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(ReconstructPolicy::None),
            1 => Some(ReconstructPolicy::Delta),
            2 => Some(ReconstructPolicy::Factor),
            _ => None,
        }
    }
}

/// Complete metadata of one block: everything needed to locate, decode, verify and
/// score it (ADR-018 section 3.7), plus where its payload lives.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct BlockMeta {
    /// Identity.
    pub key: BlockKey,
    /// The whole tensor's shape (`shape[..shape_ndim]`; the rest is 0).
    pub shape: [u32; MAX_NDIM],
    /// Number of valid entries in `shape`.
    pub shape_ndim: u8,
    /// Element type of the original tensor.
    pub dtype: DType,
    /// Current tier.
    pub tier: Tier,
    /// Bit width of the stored payload (3/5/7/8, or 8 x dtype size for Tier0).
    pub bits: u8,
    /// Largest group scale of the payload (0 for Tier0).
    pub scale: f32,
    /// Zero point (always 0: the codec is symmetric).
    pub zero_point: i16,
    /// Tick at which the block was created.
    pub created_at: u64,
    /// Tick of the most recent access.
    pub last_access_at: u64,
    /// Accesses since creation.
    pub access_count: u32,
    /// EMA of the access rate (accesses per tick).
    pub ema_access_rate: f32,
    /// Bit i set: accessed at tick `last_access_at - i`.
    pub access_window: u64,
    /// CRC32C of the stored payload bytes (`data_len` bytes at `data_offset`).
    pub checksum: u32,
    /// Tensor id of the lineage parent (0: none).
    pub lineage_parent: u128,
    /// Reconstruction policy.
    pub reconstruct: ReconstructPolicy,
    /// What the tensor holds (selects the codec settings of quantized tiers).
    pub kind: TensorKind,
    /// Tick at which the block entered its current tier (`tier_age = now - tier_since`).
    pub tier_since: u64,
    /// Byte offset of the payload's slot in the tier file.
    pub data_offset: u64,
    /// Payload length in bytes (<= the tier's slot length).
    pub data_len: u32,
    /// For a block of a centred embedding tensor (`CollectionConfig::centre`): the
    /// fingerprint (CRC32C of the side record's payload) of the mean row its quantized
    /// payloads are coded against; `None` otherwise. Fixed at creation: migrations
    /// re-centre with the same mean (Tier0 payloads hold the original values).
    pub centre: Option<u32>,
}

impl BlockMeta {
    /// The valid part of the shape.
    #[must_use]
    pub fn shape(&self) -> &[u32] {
        &self.shape[..usize::from(self.shape_ndim).min(MAX_NDIM)]
    }

    /// Ticks spent in the current tier at `now` (saturating).
    #[must_use]
    pub fn tier_age(&self, now: u64) -> u64 {
        now.saturating_sub(self.tier_since)
    }

    /// The access statistics (and creation tick) that scoring reads.
    #[must_use]
    pub(crate) fn access_stats(&self) -> AccessStats {
        AccessStats {
            created_at: self.created_at,
            last_access_at: self.last_access_at,
            access_window: self.access_window,
            access_count: self.access_count,
            ema_access_rate: self.ema_access_rate,
        }
    }

    fn set_access_stats(&mut self, a: AccessStats) {
        self.last_access_at = a.last_access_at;
        self.access_window = a.access_window;
        self.access_count = a.access_count;
        self.ema_access_rate = a.ema_access_rate;
    }

    /// Age the window by the elapsed ticks, set bit 0, count the access and update the
    /// EMA as ADR-018 section 3.8 defines it (see [`AccessStats::record_access`] for the
    /// two deliberate differences from the ADR's code).
    pub fn record_access(&mut self, now: u64) {
        let mut a = self.access_stats();
        a.record_access(now);
        self.set_access_stats(a);
    }

    /// The EMA access rate aged to `now`: no access for `idle = now - last_access_at`
    /// ticks means at most one per `idle` ticks, so `min(ema, 1 / idle)`. A block read at
    /// its usual rate keeps its EMA; one whose reads stopped cools down.
    #[must_use]
    pub fn rate_at(&self, now: u64) -> f32 {
        self.access_stats().rate_at(now)
    }

    /// Number of ticks (of the last 64) in which the block was accessed.
    #[must_use]
    pub fn recent_access_density(&self) -> u32 {
        self.access_window.count_ones()
    }

    /// ADR-018's migration score: higher is hotter (see [`AccessStats::migration_score`]).
    #[must_use]
    pub fn migration_score(&self, now: u64) -> f32 {
        self.access_stats().migration_score(now)
    }
}

/// A block's creation tick and access statistics: what reads change and what scoring
/// reads. The index keeps one per block (`crate::index`); [`BlockMeta`] exposes them as
/// its public fields.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) struct AccessStats {
    /// Tick at which the block was created.
    pub created_at: u64,
    /// Tick of the most recent access.
    pub last_access_at: u64,
    /// Bit i set: accessed at tick `last_access_at - i`.
    pub access_window: u64,
    /// Accesses since creation.
    pub access_count: u32,
    /// EMA of the access rate (accesses per tick).
    pub ema_access_rate: f32,
}

impl AccessStats {
    /// Age the window by the elapsed ticks, set bit 0, count the access and update the
    /// EMA as ADR-018 section 3.8 defines it.
    ///
    /// One deliberate difference: the ADR's code shifts the window *right*
    /// (`window >> elapsed`), which contradicts its own definition ("bit i set if
    /// accessed at tick now - i", the diagram with bit 0 = now, bit 1 = now-1) and would
    /// keep the density at 1 forever, making Appendix B's "60/64" impossible. We shift
    /// left, which is what the definition says.
    ///
    /// A second one: the EMA is updated from the rate aged to `now`
    /// ([`AccessStats::rate_at`]), not from the rate as of the previous access, so a block
    /// that was hot long ago and is read once again is not hot again (its old EMA would
    /// otherwise survive any idle time and dominate the update).
    pub fn record_access(&mut self, now: u64) {
        let prior = self.rate_at(now);
        let elapsed = now.saturating_sub(self.last_access_at);
        if elapsed > 0 {
            if elapsed >= 64 {
                self.access_window = 1;
            } else {
                self.access_window = (self.access_window << elapsed) | 1;
            }
        } else {
            self.access_window |= 1;
        }
        self.last_access_at = now;
        self.access_count = self.access_count.saturating_add(1);
        let dt = elapsed.max(1) as f32;
        let instantaneous = 1.0 / dt;
        self.ema_access_rate = EMA_ALPHA * instantaneous + (1.0 - EMA_ALPHA) * prior;
    }

    /// The EMA access rate aged to `now` (see [`BlockMeta::rate_at`]).
    #[must_use]
    pub fn rate_at(&self, now: u64) -> f32 {
        let idle = now.saturating_sub(self.last_access_at);
        if idle > 0 {
            self.ema_access_rate.min(1.0 / idle as f32)
        } else {
            self.ema_access_rate
        }
    }

    /// ADR-018's migration score: higher is hotter.
    /// `0.7 * ema * 1000 + 0.3 * (density / 64) * 1000 / sqrt(max(now - created_at, 1))`.
    ///
    /// The statistics are aged to `now` first, which the ADR's formula leaves out: the
    /// window and the EMA only change on an access, so a block that was hot once would
    /// keep its score forever and never be demoted. Here the window is shifted by the
    /// ticks since the last access (its definition, "bit i = accessed at now - i") and
    /// the rate is [`AccessStats::rate_at`] `now`. A block accessed at its usual rate
    /// scores as before; one whose accesses stopped falls below the default demote
    /// threshold (32) some 25-40 ticks after its last access (`700 / idle` plus a fading
    /// density term), however hot it was.
    #[must_use]
    pub fn migration_score(&self, now: u64) -> f32 {
        let age = (now.saturating_sub(self.created_at)).max(1) as f32;
        let idle = now.saturating_sub(self.last_access_at);
        let window = if idle >= 64 {
            0
        } else {
            self.access_window << idle
        };
        let density = window.count_ones() as f32 / 64.0;
        0.7 * self.rate_at(now) * 1000.0 + 0.3 * density * 1000.0 / age.sqrt()
    }
}

#[cfg(test)]
mod tests;
