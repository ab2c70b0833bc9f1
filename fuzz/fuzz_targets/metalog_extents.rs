//! Fuzz the open of an extent-allocated collection (MetaLog header flags bit 1): arbitrary
//! bytes become the records of a `meta.log` whose header is valid and whose record CRCs
//! are recomputed, so replay's extent checks (alignment, cap) and the open's allocation
//! reset (overlaps, extents past the tier's end) see every kind of offset and length.
//! The open must never panic; when it succeeds, no byte of a tier is live for two blocks,
//! each tier's live bytes are exactly its blocks' extents, `verify` runs, and the store
//! accepts a put and a delete.
//!
//! The first input byte picks the tier buffers' length (in KiB, 0..=63) and whether the
//! collection is entropy-coded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_core::checksum::crc32c;
use tensorvault_store::meta_log::encode_header;
use tensorvault_store::meta_log::layout::{CRC_OFFSET, PAD_OFFSET, RECORD_LEN};
use tensorvault_store::{
    BlockIO, BlockInfo, BlockKey, BufferBlockIO, Catalog, CollectionConfig, DType, Durability,
    ManualClock, MemMetaLog, StoreConfig, TensorStore, Tier,
};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let geo = CollectionConfig {
        extents: true,
        entropy: pick & 0x40 != 0,
        ..CollectionConfig::with_block_elems(256)
    };
    let mut bytes = encode_header(&geo, 0).to_vec();
    for chunk in rest.chunks_exact(RECORD_LEN).take(256) {
        let mut rec = chunk.to_vec();
        let crc = crc32c(&rec[..CRC_OFFSET]);
        rec[CRC_OFFSET..PAD_OFFSET].copy_from_slice(&crc.to_le_bytes());
        rec[PAD_OFFSET..].fill(0);
        bytes.extend_from_slice(&rec);
    }
    let Ok(log) = MemMetaLog::from_bytes(bytes) else {
        return;
    };
    let tier_len = usize::from(pick & 0x3f) * 1024;
    let io = BufferBlockIO::from_tiers([(); 4].map(|()| vec![0u8; tier_len]), &geo);
    let cfg = StoreConfig {
        collection: geo,
        durability: Durability::Os,
        ..StoreConfig::default()
    };
    let Ok(store) = TensorStore::open(
        "t",
        "c",
        ManualClock::new(1),
        io,
        log,
        Catalog::in_memory(),
        cfg,
    ) else {
        return;
    };
    let check = |store: &TensorStore<ManualClock, BufferBlockIO, MemMetaLog>| {
        let mut spans: [Vec<(u64, u64)>; 4] = Default::default();
        for m in store.blocks().expect("blocks") {
            let a = u64::from(geo.slot_align);
            assert!(m.data_offset % a == 0, "unaligned live extent");
            assert!(m.data_len >= 1 && m.data_len <= geo.max_block_len(m.tier));
            let len = u64::from(m.data_len).div_ceil(a) * a;
            spans[m.tier.index()].push((m.data_offset, len));
        }
        for t in Tier::ALL {
            let v = &mut spans[t.index()];
            v.sort_unstable();
            for w in v.windows(2) {
                assert!(w[0].0 + w[0].1 <= w[1].0, "two live blocks share bytes");
            }
            let taken: u64 = v.iter().map(|s| s.1).sum();
            assert_eq!(store.block_io().usage(t).live_bytes, taken);
        }
    };
    check(&store);
    store.verify().expect("verify of an opened store");
    let vals: Vec<u8> = (0..100u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let key = BlockKey::new(0xF0F0, 0);
    if store
        .put_block(key, Tier::Tier3, &BlockInfo::new(DType::F32, &[100]), &vals)
        .is_ok()
    {
        check(&store);
        assert!(store.delete_block(&key).expect("delete"));
    }
    check(&store);
});
