//! Automatic tier migration: blocks move by their access pattern, deterministically.

use std::sync::Arc;

use tensorvault_store::tiering::{Move, Reason};
#[cfg(feature = "mmap")]
use tensorvault_store::DirStore;
use tensorvault_store::{
    BlockInfo, BlockKey, BufferBlockIO, Catalog, CollectionConfig, DType, Durability, ManualClock,
    MemMetaLog, StoreConfig, TensorStore, Tier,
};

type MemStore = TensorStore<Arc<ManualClock>, BufferBlockIO, MemMetaLog>;

fn cfg() -> StoreConfig {
    StoreConfig {
        collection: CollectionConfig::with_block_elems(64),
        durability: Durability::Os,
        access_flush_every: 16,
        ..StoreConfig::default()
    }
}

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

fn data(seed: u32) -> Vec<u8> {
    (0..64)
        .flat_map(|i| (((i + seed) as f32) * 0.1).sin().to_le_bytes())
        .collect()
}

/// 32 blocks start in Tier2; blocks 0..8 are read every tick, 8..16 every 20 ticks, the
/// rest never. Runs `maintain` every 10 ticks for 300 ticks. Returns every move and the
/// final index.
fn run_workload(store: &MemStore) -> (Vec<Move>, Vec<tensorvault_store::BlockMeta>) {
    let info = BlockInfo::new(DType::F32, &[64]);
    for b in 0..32u32 {
        store
            .put_block(BlockKey::new(7, b), Tier::Tier2, &info, &data(b))
            .unwrap();
    }
    let mut moves = Vec::new();
    let mut out = Vec::new();
    for tick in 1..=300u64 {
        store.clock().advance(1);
        for b in 0..8u32 {
            store.get_block(&BlockKey::new(7, b), &mut out).unwrap();
        }
        if tick % 20 == 0 {
            for b in 8..16u32 {
                store.get_block(&BlockKey::new(7, b), &mut out).unwrap();
            }
        }
        if tick % 10 == 0 {
            moves.extend(store.maintain(64).unwrap().moves);
        }
    }
    (moves, store.blocks().unwrap())
}

#[test]
fn blocks_move_by_access_pattern_and_runs_are_identical() {
    let a = mem_store(Arc::new(ManualClock::new(1)), cfg());
    let (moves_a, final_a) = run_workload(&a);
    let b = mem_store(Arc::new(ManualClock::new(1)), cfg());
    let (moves_b, final_b) = run_workload(&b);
    assert_eq!(moves_a, moves_b, "same accesses, same migrations");
    assert_eq!(final_a, final_b, "same accesses, same final index");
    let tier_of = |i: u32| {
        final_a
            .iter()
            .find(|m| m.key == BlockKey::new(7, i))
            .unwrap()
            .tier
    };
    for b in 0..8 {
        assert_eq!(tier_of(b), Tier::Tier1, "hot block {b} promoted");
    }
    for b in 16..32 {
        assert_eq!(tier_of(b), Tier::Tier3, "never-read block {b} demoted");
    }
    assert!(moves_a.iter().any(|m| m.reason == Reason::Hot));
    assert!(moves_a.iter().any(|m| m.reason == Reason::Cold));
    // Hysteresis + minimum tier age: no block ping-pongs between two tiers every step.
    for b in 0..32u32 {
        let n = moves_a.iter().filter(|m| m.key.block_index == b).count();
        assert!(n <= 3, "block {b} moved {n} times");
    }
    // Every block still reads back after its moves.
    let mut out = Vec::new();
    for m in &final_a {
        a.get_block(&m.key, &mut out).unwrap();
    }
}

#[test]
fn budget_limits_each_step_and_defers_the_rest() {
    let s = mem_store(Arc::new(ManualClock::new(1)), cfg());
    let info = BlockInfo::new(DType::F32, &[64]);
    for b in 0..20u32 {
        s.put_block(BlockKey::new(1, b), Tier::Tier1, &info, &data(b))
            .unwrap();
    }
    s.clock().advance(1000);
    let r = s.maintain(5).unwrap();
    assert_eq!(r.moves.len(), 5);
    assert_eq!(r.deferred, 15);
    assert_eq!(r.scored, 20);
    // Coldest first, ties by key: all scores are equal, so keys 0..5 go first.
    let keys: Vec<u32> = r.moves.iter().map(|m| m.key.block_index).collect();
    assert_eq!(keys, [0, 1, 2, 3, 4]);
    assert_eq!(s.tier_counts().unwrap(), [0, 15, 5, 0]);
}

#[cfg(feature = "mmap")]
#[test]
fn lowering_a_capacity_limit_evicts_the_coldest_on_the_next_step() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1));
    {
        let s = DirStore::open_dir(dir.path(), "t", "c", clock.clone(), cfg(), true).unwrap();
        let info = BlockInfo::new(DType::F32, &[64]);
        for b in 0..12u32 {
            s.put_block(BlockKey::new(3, b), Tier::Tier1, &info, &data(b))
                .unwrap();
        }
        let mut out = Vec::new();
        for _ in 0..5 {
            clock.advance(1);
            for b in 6..12u32 {
                s.get_block(&BlockKey::new(3, b), &mut out).unwrap();
            }
        }
    }
    let mut c = cfg();
    c.max_blocks_per_tier = [usize::MAX, 6, usize::MAX, usize::MAX];
    // Thresholds that never fire, so only capacity moves blocks.
    c.tiering.demote_threshold = f32::MIN;
    c.tiering.promote_threshold = f32::MAX;
    let s = DirStore::open_dir(dir.path(), "t", "c", clock, c, false).unwrap();
    let r = s.maintain(100).unwrap();
    assert_eq!(r.count(Reason::Capacity), 6);
    let mut evicted: Vec<u32> = r.moves.iter().map(|m| m.key.block_index).collect();
    evicted.sort_unstable();
    assert_eq!(evicted, [0, 1, 2, 3, 4, 5], "the never-read blocks go");
    assert_eq!(s.tier_counts().unwrap(), [0, 6, 6, 0]);
}

#[cfg(feature = "threads")]
#[test]
fn background_maintainer_moves_blocks_and_stops_cleanly() {
    use std::time::Duration;
    let clock = Arc::new(ManualClock::new(1));
    let s = Arc::new(mem_store(clock.clone(), cfg()));
    let info = BlockInfo::new(DType::F32, &[64]);
    for b in 0..10u32 {
        s.put_block(BlockKey::new(5, b), Tier::Tier1, &info, &data(b))
            .unwrap();
    }
    clock.advance(500);
    let m = tensorvault_store::Maintainer::start(Arc::clone(&s), Duration::from_millis(5), 100)
        .unwrap();
    // Wait (bounded) until the thread has demoted every block twice (tier1 -> 2 -> 3).
    for _ in 0..2000 {
        if s.tier_counts().unwrap()[3] == 10 {
            break;
        }
        clock.advance(10);
        std::thread::sleep(Duration::from_millis(2));
    }
    let totals = m.stop();
    assert_eq!(s.tier_counts().unwrap(), [0, 0, 0, 10]);
    assert!(
        totals.steps >= 2 && totals.moves == 20 && totals.errors == 0,
        "{totals:?}"
    );
}
