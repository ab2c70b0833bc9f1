//! An in-memory `TensorStore` for the codec suites (`codec_v3.rs`, `codec_v4_weights.rs`,
//! `entropy.rs`, `kv_rope.rs`): buffer blocks, in-memory MetaLog and catalog, a manual
//! clock at 1, OS durability.

use std::sync::Arc;

use tensorvault_store::{
    BufferBlockIO, Catalog, CollectionConfig, Durability, ManualClock, MemMetaLog, StoreConfig,
    TensorStore,
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
