//! The object-store backend for the store's BlockIO conformance suite: `ObjectBlockIO`
//! of a fresh collection on `object_store`'s in-process `InMemory` store (no server, so
//! the suite runs in the default test run), in both block layouts; plus the suite's
//! payload and argument helpers, shared with the store crate's own backends.

#![allow(dead_code, reason = "the suite uses a subset of the shared helpers")]

#[path = "../../../tensorvault-store/tests/blockio_common/mod.rs"]
#[allow(
    unexpected_cfgs,
    reason = "the shared file gates its mmap backend on the store crate's `mmap` feature"
)]
mod shared;

use std::sync::Arc;

pub use shared::{invalid_field, key, payload, read};
use tensorvault_store::block_io::TierUsage;
use tensorvault_store::{BlockIO, BlockKey, CollectionConfig, ManualClock, StoreConfig, Tier};
use tensorvault_store_object::manifest::Layout;
use tensorvault_store_object::{open_store, ObjectLocation, ObjectOptions, ObjectTensorStore};

/// A backend under test (the fields the suite reads).
pub struct Backend {
    pub name: &'static str,
    pub io: Box<dyn BlockIO>,
    pub geometry: CollectionConfig,
    /// Always false here: slot numbers come from manifest reservations and are never
    /// handed out twice, the backend counts live blocks instead of tracking each slot,
    /// and a block object holds what was written (see the store's `blockio_common`).
    pub slot_files: bool,
}

/// The `ObjectBlockIO` of an open store, owned: the store (its runtime, manifest and
/// metadata log) lives as long as the backend under test. Nothing else touches the store,
/// so the suite sees the BlockIO alone.
struct StoreIo(ObjectTensorStore<ManualClock>);

impl BlockIO for StoreIo {
    fn slot_len(&self, tier: Tier) -> u32 {
        self.0.block_io().slot_len(tier)
    }
    fn write_block(
        &self,
        tier: Tier,
        key: BlockKey,
        src: &[u8],
    ) -> tensorvault_store::Result<(u64, u32)> {
        self.0.block_io().write_block(tier, key, src)
    }
    fn rewrite_block(&self, tier: Tier, offset: u64, src: &[u8]) -> tensorvault_store::Result<()> {
        self.0.block_io().rewrite_block(tier, offset, src)
    }
    fn with_block(
        &self,
        tier: Tier,
        key: BlockKey,
        offset: u64,
        len: u32,
        f: &mut dyn FnMut(&[u8]),
    ) -> tensorvault_store::Result<()> {
        self.0.block_io().with_block(tier, key, offset, len, f)
    }
    fn read_block(
        &self,
        tier: Tier,
        key: BlockKey,
        offset: u64,
        len: u32,
        dst: &mut [u8],
    ) -> tensorvault_store::Result<usize> {
        self.0.block_io().read_block(tier, key, offset, len, dst)
    }
    fn free_block(&self, tier: Tier, offset: u64) -> tensorvault_store::Result<()> {
        self.0.block_io().free_block(tier, offset)
    }
    fn reset_allocation(
        &self,
        live: &mut dyn Iterator<Item = (Tier, u64, u32)>,
    ) -> tensorvault_store::Result<()> {
        self.0.block_io().reset_allocation(live)
    }
    fn sync(&self) -> tensorvault_store::Result<()> {
        self.0.block_io().sync()
    }
    fn usage(&self, tier: Tier) -> TierUsage {
        self.0.block_io().usage(tier)
    }
}

fn object_backend(name: &'static str, layout: Layout, geometry: CollectionConfig) -> Backend {
    let mem: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let loc = ObjectLocation::parse("s3://conformance/tv").expect("location");
    let opts = ObjectOptions {
        create: true,
        layout,
        threads: 1,
        ..ObjectOptions::default()
    };
    let cfg = StoreConfig {
        collection: geometry,
        ..StoreConfig::default()
    };
    let store = open_store(mem, &loc, "t", "c", ManualClock::new(0), cfg, &opts)
        .expect("open a collection on InMemory");
    Backend {
        name,
        io: Box::new(StoreIo(store)),
        geometry,
        slot_files: false,
    }
}

/// The object backend in both layouts, fresh and empty, with `geometry`.
pub fn backends_with(geometry: CollectionConfig) -> Vec<Backend> {
    vec![
        object_backend("object/objects", Layout::Objects, geometry),
        object_backend("object/packs", Layout::Packs, geometry),
    ]
}

/// Both layouts with the default geometry (16 KiB blocks).
pub fn backends() -> Vec<Backend> {
    backends_with(CollectionConfig::default())
}
