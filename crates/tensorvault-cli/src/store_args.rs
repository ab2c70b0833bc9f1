//! Command-line arguments shared by the store subcommands (and `quant eval --kind`):
//! `store put`'s arguments, durability and tensor kind.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::error::CliError;
use tensorvault_store::{Durability, TensorKind, Tier};

/// Tier-file allocation of a new collection on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AllocationArg {
    /// One worst-case slot per block.
    Slot,
    /// A payload-sized extent per block (MetaLog flag bit 1).
    Extent,
}

/// Durability on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DurabilityArg {
    /// fsync data and log before each write returns (survives power loss).
    EveryWrite,
    /// Let the OS write back (survives kill -9, not power loss).
    Os,
}

impl DurabilityArg {
    /// The store's durability.
    #[must_use]
    pub fn durability(self) -> Durability {
        match self {
            DurabilityArg::EveryWrite => Durability::EveryWrite,
            DurabilityArg::Os => Durability::Os,
        }
    }
}

/// What a tensor holds, on the command line (picks the quantized tiers' codec layout).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KindArg {
    /// Anything else: groups along the values, min/max ranges (the fastest encode).
    Generic,
    /// Attention keys [tokens, head_dim]: groups per channel over tokens, first token f16.
    #[value(name = "kv_key")]
    KvKey,
    /// Attention values [tokens, head_dim]: per channel at >= 5 bits, along each token
    /// below, first token f16.
    #[value(name = "kv_value")]
    KvValue,
    /// Weight matrices: groups along rows, clip search.
    Weight,
    /// Embedding vectors [n, dim]: groups along each vector, clip search.
    Embedding,
}

impl KindArg {
    /// The store's kind.
    #[must_use]
    pub fn kind(self) -> TensorKind {
        match self {
            KindArg::Generic => TensorKind::Generic,
            KindArg::KvKey => TensorKind::KvKey,
            KindArg::KvValue => TensorKind::KvValue,
            KindArg::Weight => TensorKind::Weight,
            KindArg::Embedding => TensorKind::Embedding,
        }
    }
}

/// Arguments of `store put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    /// Store root directory (created if missing), or s3://bucket/prefix (feature s3).
    pub root: PathBuf,
    /// Tenant name: ASCII letters, digits, '.', '_', '-'.
    pub tenant: String,
    /// Collection name: ASCII letters, digits, '.', '_', '-'.
    pub collection: String,
    /// Tensor name (1-100 bytes).
    pub name: String,
    /// Input .npy file.
    pub input: PathBuf,
    /// Tier: 0 raw (bit-exact, the default), 1 8-bit, 2 5-bit, 3 3-bit (lossy: pick
    /// one explicitly; `quant eval --kind` shows the error each would give).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub tier: u8,
    /// What the tensor holds: quantized tiers lay their groups out by it (KV keys per
    /// channel, values and embeddings per vector, weights per row).
    #[arg(long, value_enum, default_value_t = KindArg::Generic)]
    pub kind: KindArg,
    /// Elements per block for a NEW collection (default 4096 = 16 KiB of f32).
    #[arg(long)]
    pub block_elems: Option<u32>,
    /// Create a NEW collection with the KV-cache layout: 32 KiB f16 blocks aligned to
    /// this head dimension.
    #[arg(long, conflicts_with = "block_elems")]
    pub kv_head_dim: Option<u32>,
    /// Create a NEW collection that keeps tier 2 and 3 blocks entropy-coded (TQTC v5,
    /// lossless rANS over the codes: the same values in fewer bytes; reads decode it
    /// ~5x slower than plain codes). An existing collection keeps its own setting.
    #[arg(long)]
    pub entropy: bool,
    /// Allocation of a NEW collection's tier files: `slot` (every block takes a
    /// worst-case slot) or `extent` (a block takes its payload rounded up to --slot-align, so
    /// entropy-coded and short blocks take less disk; builds before it refuse such a
    /// collection). An existing collection keeps its own.
    #[arg(long, value_enum, default_value_t = AllocationArg::Slot)]
    pub allocation: AllocationArg,
    /// Byte alignment of a NEW collection's slots and extents: a power of two in
    /// 8..=1048576 (default 64). With `--allocation extent` each block's payload is rounded
    /// up to it on disk, so a smaller unit wastes less (16: ~0.004 bits per value of a
    /// 16384-value KV block instead of ~0.016). An existing collection keeps its own.
    #[arg(long)]
    pub slot_align: Option<u32>,
    /// With --kv-head-dim: create the NEW collection as a codec 4 KV cache (keys at
    /// 8 / 5 / 4 bits) with entropy coding and tier 3 values in entropy-coded levels
    /// (4-bit uniform codes spaced wider than the optimal step, packed to about the size
    /// of 3-bit codes with less error; Python `KvCache(codec=4, entropy=True, ecsq=True)`).
    #[arg(long, requires = "kv_head_dim")]
    pub kv_ecsq: bool,
    /// Create the NEW collection as codec 4 with entropy coding and weight/embedding
    /// tensors at tiers 2 and 3 in entropy-coded uniform levels, the step searched per
    /// block to fill the tier's slot (less error than codec 4's super-blocks in the same
    /// bytes; Python `Store(codec=4, entropy=True, ecsq=True)`).
    #[arg(long, conflicts_with = "kv_head_dim")]
    pub ecsq: bool,
    /// With --kv-ecsq: tier 2 values in entropy-coded levels too (6-bit uniform codes on
    /// each token's rotated head, the finest step whose rANS-coded block fits the slot or
    /// extent: 3.1-3.8% value error instead of 4.6% within tier 2's 5.25 bits/value;
    /// Python `KvCache(..., ecsq=True, ecsq_tier2=True)`).
    #[arg(long, requires = "kv_ecsq")]
    pub kv_ecsq_tier2: bool,
    /// With --kv-head-dim: create the NEW collection as a codec 4 KV cache with entropy
    /// coding whose tier 2 key blocks are channel-centred model-coded ECSQ (TQTC v8: each
    /// channel's mean removed, one step per block, each channel priced by its spread),
    /// fitted into 4.95 bits/value or the bytes the 5-bit key groups would take if more,
    /// inside tier 2's 5.25 bits/value;
    /// combines with --kv-ecsq; MetaLog header flags2 bit 0, which builds before it
    /// refuse; Python `KvCache(..., codec=4, entropy=True, keys_ecsq=True)`).
    #[arg(long, requires = "kv_head_dim")]
    pub kv_keys_ecsq: bool,
    /// With --kv-keys-ecsq: store those tier 2 key blocks as TQTC v9 instead of v8, in the
    /// same bytes, and tier 3 key blocks as v9 within the bytes of their 4-bit groups: one
    /// step per channel, shaped by the block's own key energy of each RoPE pair (finer
    /// steps where queries look hardest), never finer than a channel's largest value needs;
    /// about 25% less attention-logit error at the same size (MetaLog header
    /// flags2 bit 2, which builds before it refuse; Python `KvCache(..., keys_ecsq=True,
    /// keys_wstep=True)`).
    #[arg(long, requires = "kv_keys_ecsq")]
    pub kv_keys_wstep: bool,
    /// Create the NEW collection as codec 4 with one gain per row in every quantized
    /// block of an `embedding` tensor (TQTC version 6: each row's decoding becomes an
    /// unbiased inner-product estimate, which keeps nearest-neighbour recall; same
    /// slots; combines with --ecsq; Python `Store(codec=4, row_gains=True)`).
    #[arg(long, conflicts_with = "kv_head_dim")]
    pub row_gains: bool,
    /// With --ecsq: weight and embedding tensors at tiers 1, 2 and 3 as model-coded ECSQ
    /// (TQTC version 7: rANS frequencies from a Gaussian model, one byte per rotation block
    /// instead of a stored table; 10 / 7 / 6-bit codes; less error in the same slots;
    /// combines with --row-gains; Python `Store(..., ecsq=True, ecsq_model=True)`).
    #[arg(long, requires = "ecsq")]
    pub ecsq_model: bool,
    /// With --row-gains: store 2-D `embedding` tensors centred on their column mean
    /// (kept as the tensor's side record and added back on every read; row gains against
    /// the original rows): less error and better recall in the same slots (MetaLog
    /// flags bit 5; Python `Store(codec=4, row_gains=True, centre=True)`).
    #[arg(long, requires = "row_gains")]
    pub centre: bool,
    /// With entropy coding (--entropy, --kv-ecsq or --ecsq): write the entropy-coded
    /// blocks of KV and generic tensors with 64 interleaved rANS lanes instead of 4, which
    /// reads decode with AVX-512 / AVX2 ~3x faster (a whole KV block read 1.7-2.2x; same
    /// values, ~180 more bytes per 16384-value block; MetaLog flags2 bit 1: builds before
    /// session 15 refuse the collection; Python `Store(..., entropy=True, wide_lanes=True)`).
    /// An existing collection keeps its own setting.
    #[arg(long)]
    pub wide_lanes: bool,
    /// Write durability.
    #[arg(long, value_enum, default_value_t = DurabilityArg::EveryWrite)]
    pub durability: DurabilityArg,
    /// Saturate float64 values beyond float32's range to ±3.4e38 (float64 input is
    /// stored as float32); without it such a value is refused, naming its element.
    #[arg(long)]
    pub clip: bool,
}

/// A tier number from the command line (clap has checked the range 0..=3).
#[must_use]
pub fn tier_of(t: u8) -> Tier {
    Tier::from_u8(t).unwrap_or(Tier::Tier1)
}

/// TENANT and COLLECTION given together or not at all.
///
/// # Errors
/// [`CliError::Usage`] for only one of them.
pub fn pair(
    tenant: Option<String>,
    collection: Option<String>,
) -> Result<Option<(String, String)>, CliError> {
    match (tenant, collection) {
        (Some(t), Some(c)) => Ok(Some((t, c))),
        (None, None) => Ok(None),
        _ => Err(CliError::Usage {
            arg: "TENANT COLLECTION",
            reason: "give both or neither".into(),
        }),
    }
}
