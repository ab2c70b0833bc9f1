//! The engine end to end: write/read/migrate/delete on both backends, replay equality,
//! corruption detection, capacity limits, compaction.

use std::sync::Arc;

use tensorvault_store::{
    BlockIO, BlockInfo, BlockKey, BufferBlockIO, Catalog, CollectionConfig, DType, ManualClock,
    MemMetaLog, MetaLog, StoreConfig, StoreErr, TensorStore, Tier,
};
#[cfg(feature = "mmap")]
use tensorvault_store::{DirStore, Durability};

type MemStore = TensorStore<Arc<ManualClock>, BufferBlockIO, MemMetaLog>;

fn mem_store(clock: Arc<ManualClock>, cfg: StoreConfig) -> MemStore {
    let geo = cfg.collection;
    TensorStore::open(
        "t",
        "c",
        clock,
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap()
}

fn small_cfg() -> StoreConfig {
    StoreConfig {
        collection: CollectionConfig::with_block_elems(256),
        ..StoreConfig::default()
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_from(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn wave(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32) * 0.37 + seed).sin() * 2.0)
        .collect()
}

#[test]
fn every_tier_round_trips_within_its_error_bound() {
    let s = mem_store(Arc::new(ManualClock::new(1)), small_cfg());
    let vals = wave(256, 0.5);
    let data = f32_bytes(&vals);
    let shape = [256u32];
    let mut out = Vec::new();
    // Largest |x| is ~2; symmetric k-bit step = 2 / (2^(k-1) - 1), error <= step / 2.
    for (i, (tier, bound)) in [
        (Tier::Tier0, 0.0),
        (Tier::Tier1, 0.0080),
        (Tier::Tier2, 0.0670),
        (Tier::Tier3, 0.34),
    ]
    .into_iter()
    .enumerate()
    {
        let key = BlockKey::new(7, i as u32);
        s.put_block(key, tier, &BlockInfo::new(DType::F32, &shape), &data)
            .unwrap();
        let m = s.get_block(&key, &mut out).unwrap();
        assert_eq!(m.tier, tier);
        let back = f32_from(&out);
        assert_eq!(back.len(), 256);
        let err = vals
            .iter()
            .zip(&back)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(err <= bound, "{tier}: max error {err} > {bound}");
        if tier == Tier::Tier0 {
            assert_eq!(out, data, "Tier0 is bit-exact");
        }
    }
    assert_eq!(s.tier_counts().unwrap(), [1, 1, 1, 1]);
}

#[test]
fn migration_moves_slots_and_keeps_values_close() {
    let s = mem_store(Arc::new(ManualClock::new(1)), small_cfg());
    let vals = wave(200, 1.0);
    let key = BlockKey::new(1, 0);
    s.put_block(
        key,
        Tier::Tier0,
        &BlockInfo::new(DType::F32, &[200]),
        &f32_bytes(&vals),
    )
    .unwrap();
    s.clock().advance(5);
    s.migrate_block(&key, Tier::Tier3).unwrap();
    let m = s.meta(&key).unwrap().unwrap();
    assert_eq!((m.tier, m.bits, m.tier_since), (Tier::Tier3, 3, 6));
    assert_eq!(
        s.block_io().usage(Tier::Tier0).free_slots,
        1,
        "old slot freed"
    );
    let mut out = Vec::new();
    s.get_block(&key, &mut out).unwrap();
    let t3 = f32_from(&out);
    // Promotion re-encodes what Tier3 holds: precision lost on demotion stays lost.
    s.migrate_block(&key, Tier::Tier1).unwrap();
    s.get_block(&key, &mut out).unwrap();
    let t1 = f32_from(&out);
    for (a, b) in t3.iter().zip(&t1) {
        assert!((a - b).abs() <= 0.01, "{a} vs {b}");
    }
    assert_eq!(s.tier_counts().unwrap(), [0, 1, 0, 0]);
}

#[test]
fn missing_blocks_bad_input_and_capacity_are_typed_errors() {
    let mut cfg = small_cfg();
    cfg.max_blocks_per_tier = [2, usize::MAX, usize::MAX, usize::MAX];
    let s = mem_store(Arc::new(ManualClock::new(1)), cfg);
    let mut out = Vec::new();
    let k = BlockKey::new(9, 9);
    assert!(matches!(
        s.get_block(&k, &mut out),
        Err(StoreErr::NotFound { .. })
    ));
    assert!(matches!(
        s.migrate_block(&k, Tier::Tier1),
        Err(StoreErr::NotFound { .. })
    ));
    assert!(!s.delete_block(&k).unwrap());
    let info = BlockInfo::new(DType::F32, &[300]);
    // More elements than a block holds.
    let too_big = f32_bytes(&wave(257, 0.0));
    assert!(matches!(
        s.put_block(k, Tier::Tier0, &info, &too_big),
        Err(StoreErr::InvalidArgument { field: "data", .. })
    ));
    // Not a whole number of elements.
    assert!(s.put_block(k, Tier::Tier0, &info, &[0u8; 7]).is_err());
    // A dtype the store does not keep (core's f64, i16): refused by name, nothing written.
    for dtype in [DType::F64, DType::I16] {
        assert!(matches!(
            s.put_block(k, Tier::Tier0, &BlockInfo::new(dtype, &[1]), &[0u8; 8]),
            Err(StoreErr::UnsupportedDType { dtype: d }) if d == dtype
        ));
        assert!(matches!(
            s.put_tensor("f64", dtype, &[1], &[0u8; 8], Tier::Tier0),
            Err(StoreErr::UnsupportedDType { .. })
        ));
    }
    assert!(s.meta(&k).unwrap().is_none());
    // Non-finite values cannot be quantized.
    let nan = f32_bytes(&[1.0, f32::NAN]);
    assert!(matches!(
        s.put_block(k, Tier::Tier1, &info, &nan),
        Err(StoreErr::NonFiniteBlock { count: 1, .. })
    ));
    // Capacity: a full tier evicts its coldest block one tier down ("eviction triggers").
    let d = f32_bytes(&wave(10, 0.0));
    s.put_block(BlockKey::new(1, 0), Tier::Tier0, &info, &d)
        .unwrap();
    s.clock().advance(1);
    s.put_block(BlockKey::new(1, 1), Tier::Tier0, &info, &d)
        .unwrap();
    s.get_block(&BlockKey::new(1, 1), &mut out).unwrap(); // 1/1 is now the hotter one
    s.clock().advance(1);
    // Replacing a live block does not need room.
    s.put_block(BlockKey::new(1, 1), Tier::Tier0, &info, &d)
        .unwrap();
    assert_eq!(s.tier_counts().unwrap(), [2, 0, 0, 0]);
    s.put_block(BlockKey::new(1, 2), Tier::Tier0, &info, &d)
        .unwrap();
    assert_eq!(s.tier_counts().unwrap(), [2, 1, 0, 0]);
    assert_eq!(
        s.meta(&BlockKey::new(1, 0)).unwrap().unwrap().tier,
        Tier::Tier1,
        "coldest evicted"
    );
    // The coldest tier cannot evict: filling it is an error.
    let mut cfg = small_cfg();
    cfg.max_blocks_per_tier = [usize::MAX, usize::MAX, usize::MAX, 1];
    let s = mem_store(Arc::new(ManualClock::new(1)), cfg);
    s.put_block(BlockKey::new(2, 0), Tier::Tier3, &info, &d)
        .unwrap();
    assert!(matches!(
        s.put_block(BlockKey::new(2, 1), Tier::Tier3, &info, &d),
        Err(StoreErr::CapacityExceeded {
            tier: Tier::Tier3,
            ..
        })
    ));
    s.put_block(BlockKey::new(2, 1), Tier::Tier2, &info, &d)
        .unwrap();
    assert!(matches!(
        s.migrate_block(&BlockKey::new(2, 1), Tier::Tier3),
        Err(StoreErr::CapacityExceeded { .. })
    ));
}

#[cfg(feature = "mmap")]
#[test]
fn corruption_in_a_slot_is_reported_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_cfg();
    let vals = wave(1000, 0.1);
    {
        let s = DirStore::open_path(dir.path(), "acme", "emb", cfg.clone(), true).unwrap();
        s.put_tensor("w", DType::F32, &[10, 100], &f32_bytes(&vals), Tier::Tier1)
            .unwrap();
        s.close().unwrap();
    }
    let tier1 = dir.path().join("acme/emb/tier1.dat");
    let mut b = std::fs::read(&tier1).unwrap();
    let slot = cfg.collection.slot_len(Tier::Tier1) as usize;
    b[slot + 100] ^= 0x04; // inside block 1's payload
    std::fs::write(&tier1, &b).unwrap();
    let s = DirStore::open_path(dir.path(), "acme", "emb", cfg, false).unwrap();
    let e = s.get_tensor("w").unwrap_err();
    assert!(e.is_corruption(), "{e}");
    assert!(
        matches!(
            e,
            StoreErr::Corruption {
                tier: Tier::Tier1,
                ..
            }
        ),
        "{e}"
    );
    let r = s.verify().unwrap();
    assert_eq!(r.checked, 4);
    assert_eq!(r.problems.len(), 1);
    assert_eq!(r.problems[0].key.block_index, 1);
    assert_eq!(r.problems[0].tensor.as_deref(), Some("w"));
    assert_eq!(s.stats().unwrap().checksum_failures, 2);
}

#[cfg(feature = "mmap")]
#[test]
fn tensors_round_trip_through_reopen_and_shrink() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small_cfg();
    let vals = wave(1000, 0.3);
    {
        let s = DirStore::open_path(dir.path(), "acme", "emb", cfg.clone(), true).unwrap();
        let info = s
            .put_tensor("big", DType::F32, &[1000], &f32_bytes(&vals), Tier::Tier0)
            .unwrap();
        assert_eq!((info.blocks, info.expected_blocks), (4, 4));
        let h: Vec<u8> = vals[..300]
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect();
        s.put_tensor("half", DType::F16, &[3, 100], &h, Tier::Tier0)
            .unwrap();
        // Re-put "big" shorter: its stale blocks go away.
        s.put_tensor(
            "big",
            DType::F32,
            &[300],
            &f32_bytes(&vals[..300]),
            Tier::Tier2,
        )
        .unwrap();
    }
    let s = DirStore::open_path(dir.path(), "acme", "emb", cfg, false).unwrap();
    let t = s.tensors().unwrap();
    let names: Vec<_> = t.iter().map(|i| i.name.clone().unwrap()).collect();
    assert_eq!(names, ["big", "half"]);
    assert_eq!(t[0].blocks, 2);
    assert_eq!(t[0].tier_blocks, [0, 0, 2, 0]);
    let big = s.get_tensor("big").unwrap();
    assert_eq!(big.info.shape, [300]);
    assert_eq!(big.data.len(), 1200);
    let half_t = s.get_tensor("half").unwrap();
    let want: Vec<u8> = vals[..300]
        .iter()
        .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
        .collect();
    assert_eq!(half_t.data, want, "f16 at Tier0 is bit-exact");
    assert!(matches!(
        s.get_tensor("nope"),
        Err(StoreErr::TensorNotFound { .. })
    ));
    assert_eq!(s.delete_tensor("half").unwrap(), 2);
    assert!(s.get_tensor("half").is_err());
}

#[cfg(feature = "mmap")]
#[test]
fn a_second_writer_cannot_open_the_same_collection() {
    let dir = tempfile::tempdir().unwrap();
    let a = DirStore::open_path(dir.path(), "t", "c", small_cfg(), true).unwrap();
    let e = DirStore::open_path(dir.path(), "t", "c", small_cfg(), false)
        .err()
        .unwrap();
    assert!(matches!(e, StoreErr::Locked { .. }), "{e:?}");
    // In the same process the message says so (flock cannot tell).
    assert!(
        e.to_string()
            .contains("already open for writing in this process"),
        "{e}"
    );
    // Released with the store: the next writer opens.
    drop(a);
    DirStore::open_path(dir.path(), "t", "c", small_cfg(), false).unwrap();
    assert!(matches!(
        DirStore::open_path(dir.path(), "..", "c", small_cfg(), true),
        Err(StoreErr::InvalidName {
            field: "tenant",
            ..
        })
    ));
}

#[cfg(feature = "mmap")]
#[test]
fn compaction_keeps_the_index_and_shrinks_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(100));
    let mut cfg = small_cfg();
    cfg.durability = Durability::Os;
    cfg.access_flush_every = 4;
    let before;
    {
        let s = DirStore::open_dir(dir.path(), "t", "c", clock.clone(), cfg.clone(), true).unwrap();
        let d = f32_bytes(&wave(256, 0.0));
        let info = BlockInfo::new(DType::F32, &[256]);
        let mut out = Vec::new();
        for round in 0..20u32 {
            for b in 0..8u32 {
                s.put_block(BlockKey::new(u128::from(b), 0), Tier::Tier1, &info, &d)
                    .unwrap();
                clock.advance(1);
                s.get_block(&BlockKey::new(u128::from(b), 0), &mut out)
                    .unwrap();
            }
            if round % 3 == 0 {
                s.migrate_block(&BlockKey::new(3, 0), Tier::Tier3).unwrap();
            }
        }
        s.delete_block(&BlockKey::new(5, 0)).unwrap();
        s.flush().unwrap();
        let records = s.log_records().unwrap();
        s.compact().unwrap();
        assert!(
            s.log_records().unwrap() < records / 5,
            "{} -> {}",
            records,
            s.log_records().unwrap()
        );
        before = s.blocks().unwrap();
        // The log keeps working after compaction.
        s.put_block(BlockKey::new(99, 0), Tier::Tier0, &info, &d)
            .unwrap();
    }
    let s = DirStore::open_dir(dir.path(), "t", "c", clock, cfg, false).unwrap();
    let mut after = s.blocks().unwrap();
    after.retain(|m| m.key.tensor_id != 99);
    assert_eq!(after, before);
    assert_eq!(s.blocks().unwrap().len(), 8);
}

#[cfg(feature = "mmap")]
mod replay {
    use super::*;
    use proptest::prelude::*;

    /// One operation of the replay property test.
    #[derive(Clone, Debug)]
    enum Op {
        Put(u8, u8, u8),
        Get(u8),
        Migrate(u8, u8),
        Delete(u8),
        Tick(u8),
        Flush,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..12, 0u8..4, any::<u8>()).prop_map(|(k, t, s)| Op::Put(k, t, s)),
            4 => (0u8..12).prop_map(Op::Get),
            2 => (0u8..12, 0u8..4).prop_map(|(k, t)| Op::Migrate(k, t)),
            1 => (0u8..12).prop_map(Op::Delete),
            2 => (1u8..100).prop_map(Op::Tick),
            1 => Just(Op::Flush),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Reopening rebuilds exactly the index that existed before close, for random
        /// sequences of create / access / migrate / delete on both backends' log formats.
        #[test]
        fn replay_rebuilds_the_exact_index(ops in proptest::collection::vec(op(), 1..60), every in 0u32..5) {
            let dir = tempfile::tempdir().unwrap();
            let clock = Arc::new(ManualClock::new(1));
            let cfg = StoreConfig {
                collection: CollectionConfig::with_block_elems(64),
                durability: Durability::Os,
                access_flush_every: every,
                ..StoreConfig::default()
            };
            let before;
            {
                let s = DirStore::open_dir(dir.path(), "t", "c", clock.clone(), cfg.clone(), true).unwrap();
                let mut out = Vec::new();
                for op in &ops {
                    let key = |k: &u8| BlockKey::new(u128::from(*k) << 64 | 5, u32::from(*k % 3));
                    match op {
                        Op::Put(k, t, seed) => {
                            let d = f32_bytes(&wave(1 + usize::from(*seed) % 64, f32::from(*seed)));
                            s.put_block(key(k), Tier::ALL[usize::from(*t)], &BlockInfo::new(DType::F32, &[64, 1]), &d).unwrap();
                        }
                        Op::Get(k) => { let _ = s.get_block(&key(k), &mut out); }
                        Op::Migrate(k, t) => { let _ = s.migrate_block(&key(k), Tier::ALL[usize::from(*t)]); }
                        Op::Delete(k) => { s.delete_block(&key(k)).unwrap(); }
                        Op::Tick(n) => clock.advance(u64::from(*n)),
                        Op::Flush => s.flush().unwrap(),
                    }
                }
                before = s.blocks().unwrap();
            }
            let s = DirStore::open_dir(dir.path(), "t", "c", clock, cfg, false).unwrap();
            prop_assert_eq!(s.blocks().unwrap(), before);
            // Every block still reads back.
            let mut out = Vec::new();
            for m in s.blocks().unwrap() {
                s.get_block(&m.key, &mut out).unwrap();
            }
        }
    }
}

#[test]
fn memory_backends_reopen_from_their_persisted_bytes() {
    let clock = Arc::new(ManualClock::new(1));
    let cfg = small_cfg();
    let geo = cfg.collection;
    let s = mem_store(clock.clone(), cfg.clone());
    let d = f32_bytes(&wave(256, 2.0));
    s.put_tensor("x", DType::F32, &[2, 128], &d, Tier::Tier2)
        .unwrap();
    s.flush().unwrap();
    let before = s.blocks().unwrap();
    let tiers = Tier::ALL.map(|t| s.block_io().with_tier_data(t, <[u8]>::to_vec));
    let log_bytes = s
        .with_log(|l| {
            assert_eq!(l.collection(), geo);
            l.to_bytes()
        })
        .unwrap();
    drop(s);
    let s2: MemStore = TensorStore::open(
        "t",
        "c",
        clock,
        BufferBlockIO::from_tiers(tiers, &geo),
        MemMetaLog::from_bytes(log_bytes).unwrap(),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap();
    assert_eq!(s2.blocks().unwrap(), before);
    let t = s2.get_tensor_by_id(s2.tensor_id_of("x")).unwrap();
    assert_eq!(t.info.shape, [2, 128]);
}
