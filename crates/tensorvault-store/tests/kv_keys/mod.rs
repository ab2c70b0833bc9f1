//! Shared by the channel-centred KV key suites (`kv_keys_ecsq.rs`, `kv_keys_wstep.rs`): the
//! head width, key-like tokens, a key block's `BlockInfo`, and the tier-2 byte budget of a
//! v8/v9 key block.

use tensorvault_store::config::KV_KEYS_ECSQ_CENTIBITS;
use tensorvault_store::{BlockInfo, CollectionConfig, DType, TensorKind, Tier};

use crate::values::bell_tokens;

/// Channels per head.
pub const HD: u32 = 64;

/// Key-like tokens: bell-shaped values on per-channel offsets (channel `c` at `0.3 c`,
/// every 13th channel six times wider), rounded to f16.
pub fn keys(n: u64, seed: u64) -> Vec<f32> {
    bell_tokens(n, HD, seed, 0.3)
}

/// The most bytes a v8 or v9 key block of `len` values may take next to its `plain`
/// encoding (the 5-bit groups) in a collection of geometry `g` at tier 2.
pub fn budget(g: &CollectionConfig, len: usize, plain: usize) -> usize {
    let keys = len * KV_KEYS_ECSQ_CENTIBITS as usize / 800;
    keys.max(plain).min(g.max_block_len(Tier::Tier2) as usize)
}

/// An f16 `kv_key` tensor of `shape`.
pub fn key_info(shape: &[u32; 2]) -> BlockInfo<'_> {
    BlockInfo::new(DType::F16, shape).with_kind(TensorKind::KvKey)
}
