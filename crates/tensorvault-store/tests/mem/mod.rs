//! Stores for the codec suites (`codec_v3.rs`, `codec_v4_weights.rs`, `ecsq.rs`, `entropy.rs`,
//! `kv_ecsq.rs`, `kv_rope.rs`): in memory (buffer blocks, in-memory MetaLog and catalog, a
//! manual clock at 1), or in a directory for the reopen tests; OS durability; and header
//! records re-sealed after a test edits them.

use std::path::Path;
use std::sync::Arc;

use tensorvault_core::checksum::crc32c;
use tensorvault_store::meta_log::layout::{CRC_OFFSET, PAD_OFFSET, RECORD_LEN};
use tensorvault_store::{
    BufferBlockIO, Catalog, CollectionConfig, DirStore, Durability, ManualClock, MemMetaLog,
    StoreConfig, TensorStore,
};

/// The store [`mem_store`] opens.
pub type Mem = TensorStore<Arc<ManualClock>, BufferBlockIO, MemMetaLog>;

/// Opens collection `t/<collection>` with geometry `geo` in memory.
pub fn mem_store(collection: &str, geo: CollectionConfig) -> Mem {
    let cfg = StoreConfig {
        collection: geo,
        durability: Durability::Os,
        ..StoreConfig::default()
    };
    TensorStore::open(
        "t",
        collection,
        Arc::new(ManualClock::new(1)),
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap()
}

/// Opens (or with `create`, creates) collection `t/c` under `root` with the clock at
/// `tick`; `geo` is the geometry a new collection gets (an existing one keeps its header's).
#[allow(
    dead_code,
    reason = "not every suite that includes this module reopens a directory"
)]
pub fn dir_store(
    root: &Path,
    tick: u64,
    geo: CollectionConfig,
    create: bool,
) -> DirStore<ManualClock> {
    let cfg = StoreConfig {
        collection: geo,
        durability: Durability::Os,
        ..StoreConfig::default()
    };
    DirStore::open_dir(root, "t", "c", ManualClock::new(tick), cfg, create).unwrap()
}

/// The stored payloads of tensor `name` (block order) and their BlockMeta bit widths.
#[allow(
    dead_code,
    reason = "not every suite that includes this module reads payloads"
)]
pub fn payloads(s: &Mem, name: &str) -> Vec<(Vec<u8>, u8)> {
    let id = s.tensor_id_of(name);
    let mut metas: Vec<_> = s
        .blocks()
        .unwrap()
        .into_iter()
        .filter(|m| m.key.tensor_id == id)
        .collect();
    metas.sort_by_key(|m| m.key.block_index);
    metas
        .iter()
        .map(|m| {
            let mut out = Vec::new();
            s.get_payload(&m.key, &mut out).unwrap();
            (out, m.bits)
        })
        .collect()
}

/// `h`, a MetaLog header record (as `encode_header` gives it), with its CRC32C recomputed:
/// a test that edits a field then sees that field's check fail, not the CRC's.
#[allow(
    dead_code,
    reason = "not every suite that includes this module crafts headers"
)]
pub fn resealed(mut h: [u8; RECORD_LEN]) -> [u8; RECORD_LEN] {
    let crc = crc32c(&h[..CRC_OFFSET]);
    h[CRC_OFFSET..PAD_OFFSET].copy_from_slice(&crc.to_le_bytes());
    h
}
