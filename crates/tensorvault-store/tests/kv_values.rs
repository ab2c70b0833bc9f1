//! Values a quantized tier cannot hold (issue 25 class 4, `tensorvault_store::finite`):
//! KV appends refuse NaN and infinity naming the token; a block that holds them anyway
//! (written behind the cache's back, or a generic tensor in Tier0) is held in its tier by
//! `maintain`, age demotion and capacity evictions, reported, and never stops the others
//! from moving.

use std::sync::Arc;

use half::f16;
use tensorvault_store::finite::{HoldReason, NonFinite};
use tensorvault_store::tiering::TierPolicy;
use tensorvault_store::{
    BlockInfo, BlockKey, BufferBlockIO, Catalog, CollectionConfig, DType, Durability, KvAgePolicy,
    KvCache, KvKind, KvSlot, ManualClock, MemMetaLog, StoreConfig, StoreErr, TensorKind,
    TensorStore, Tier,
};

const HD: u32 = 8;
const TPB: u64 = 4;
const K00: KvSlot = KvSlot::new(0, 0, KvKind::Key);
const V00: KvSlot = KvSlot::new(0, 0, KvKind::Value);

type MemStore = TensorStore<Arc<ManualClock>, BufferBlockIO, MemMetaLog>;
type MemKv = KvCache<Arc<ManualClock>, BufferBlockIO, MemMetaLog>;

/// Tiering that moves on score alone, Tier0 included.
fn eager() -> TierPolicy {
    TierPolicy {
        min_tier_age: 0,
        demote_tier0: true,
        ..TierPolicy::default()
    }
}

fn store(clock: &Arc<ManualClock>, geo: CollectionConfig, limits: [usize; 4]) -> MemStore {
    let cfg = StoreConfig {
        collection: geo,
        durability: Durability::Os,
        tiering: eager(),
        max_blocks_per_tier: limits,
        ..StoreConfig::default()
    };
    TensorStore::open(
        "t",
        "c",
        Arc::clone(clock),
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap()
}

/// A KV cache of 4-token blocks, the first token kept in f16 (the attention sink).
fn kv(clock: &Arc<ManualClock>) -> MemKv {
    let mut geo = CollectionConfig::with_block_elems(HD * TPB as u32);
    geo.tier0_elem_bytes = 2;
    geo.sink_values = HD as u16;
    KvCache::new(store(clock, geo, [usize::MAX; 4]), HD).unwrap()
}

fn tokens(salt: u32, range: std::ops::Range<u64>) -> Vec<f16> {
    range
        .flat_map(|t| {
            (0..HD).map(move |c| f16::from_f32(((salt * 31 + c * 7) as f32 + t as f32 * 0.3).sin()))
        })
        .collect()
}

/// Rewrite sealed block `b` of `slot` (as an older build could have stored it) with
/// `bad` at value `at`.
fn poison(kv: &MemKv, slot: KvSlot, b: u32, at: usize, bad: f16) {
    let key = kv.block_key(slot, b);
    let meta = kv.store().meta(&key).unwrap().unwrap();
    let mut v = kv
        .read(slot, u64::from(b) * TPB..u64::from(b + 1) * TPB)
        .unwrap();
    v[at] = bad;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let info = BlockInfo::new(DType::F16, meta.shape()).with_kind(slot.kind.tensor_kind());
    kv.store()
        .put_block(key, Tier::Tier0, &info, &bytes)
        .unwrap();
}

fn tier(kv: &MemKv, slot: KvSlot, b: u32) -> Tier {
    kv.store()
        .meta(&kv.block_key(slot, b))
        .unwrap()
        .unwrap()
        .tier
}

#[test]
fn a_nan_block_is_held_and_every_other_block_still_demotes() {
    let clock = Arc::new(ManualClock::new(1));
    let kv = kv(&clock);
    kv.append_batch(&[(K00, &tokens(1, 0..40)), (V00, &tokens(2, 0..40))])
        .unwrap();
    poison(&kv, K00, 3, 5, f16::NAN);
    // The attention sink (block 0's first token, kept f16 in quantized tiers) too.
    poison(&kv, V00, 0, 2, f16::INFINITY);
    clock.advance(1000);
    let mut held = Vec::new();
    for _ in 0..4 {
        let r = kv.store().maintain(1024).unwrap();
        held = r.held;
    }
    let k3 = kv.block_key(K00, 3);
    let v0 = kv.block_key(V00, 0);
    assert_eq!(held.len(), 2, "{held:?}");
    let by_key = |k: BlockKey| held.iter().find(|h| h.key == k).unwrap();
    assert_eq!(by_key(k3).tier, Tier::Tier0);
    assert_eq!(by_key(k3).target, Tier::Tier1);
    assert_eq!(
        by_key(k3).reason,
        HoldReason::NonFinite(NonFinite {
            count: 1,
            first: 3 * TPB * u64::from(HD) + 5
        })
    );
    assert_eq!(by_key(v0).non_finite(), 1);
    for b in 0..10 {
        let want = |bad| if bad { Tier::Tier0 } else { Tier::Tier3 };
        assert_eq!(tier(&kv, K00, b), want(b == 3), "k block {b}");
        assert_eq!(tier(&kv, V00, b), want(b == 0), "v block {b}");
    }
    assert_eq!(kv.store().stats().unwrap().held_blocks, 2);
    // Held blocks are left out of planning: the next step plans nothing for them and
    // still reports them.
    let r = kv.store().maintain(1024).unwrap();
    assert!(r.moves.is_empty(), "{:?}", r.moves);
    assert_eq!(r.held, held);
    assert!(kv.store().plan_maintain(1024).unwrap().moves.is_empty());
    // Rewritten with finite values, the block is tiered again.
    poison(&kv, K00, 3, 5, f16::ONE);
    assert_eq!(kv.store().held_blocks().unwrap().len(), 1);
    clock.advance(1000);
    let r = kv.store().maintain(1024).unwrap();
    assert!(r.moves.iter().any(|m| m.key == k3), "{:?}", r.moves);
    // Moving it on purpose says why it cannot go.
    assert!(matches!(
        kv.store().migrate_block(&v0, Tier::Tier2),
        Err(StoreErr::NonFiniteBlock { key, tier: Tier::Tier2, count: 1, first: 2 }) if key == v0
    ));
}

#[test]
fn age_demotion_holds_the_bad_block_and_moves_the_rest() {
    let clock = Arc::new(ManualClock::new(1));
    let kv = kv(&clock);
    kv.append(K00, &tokens(1, 0..40)).unwrap();
    poison(&kv, K00, 0, 0, f16::NEG_INFINITY); // the sink token
    let policy = KvAgePolicy {
        tier0_tokens: 8,
        tier1_tokens: 8,
        tier2_tokens: 8,
    };
    let moved = kv.demote_by_age(&policy).unwrap();
    assert_eq!(moved, [0, 2, 2, 3], "blocks 1-7 move, block 0 is held");
    assert_eq!(tier(&kv, K00, 0), Tier::Tier0);
    assert_eq!(tier(&kv, K00, 1), Tier::Tier3);
    let held = kv.store().held_blocks().unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].key, kv.block_key(K00, 0));
    assert_eq!(held[0].target, Tier::Tier3);
    // Held blocks are not read again by the next step.
    assert_eq!(kv.demote_by_age(&policy).unwrap(), [0; 4]);
}

#[test]
fn appends_refuse_nan_and_infinity_naming_the_token() {
    let clock = Arc::new(ManualClock::new(1));
    let kv = kv(&clock);
    kv.append(K00, &tokens(1, 0..6)).unwrap();
    // An f32 beyond 65504 cast to f16 is infinite.
    for bad in [f16::NAN, f16::INFINITY, f16::from_f32(70000.0)] {
        let mut v = tokens(1, 6..9);
        v[HD as usize + 3] = bad; // token 7
        assert!(
            matches!(
                kv.append(K00, &v),
                Err(StoreErr::NonFiniteKv {
                    field: "keys",
                    layer: 0,
                    head: 0,
                    token: 7
                })
            ),
            "{bad}"
        );
    }
    // All or nothing: a bad value in the batch's second append to V00 (its tokens 2..4
    // after the first item's 0..2) leaves every slot as it was.
    let mut bad = tokens(2, 2..4);
    bad[HD as usize] = f16::NAN;
    let r = kv.append_batch(&[
        (K00, &tokens(1, 6..7)),
        (V00, &tokens(2, 0..2)),
        (V00, &bad),
    ]);
    assert!(matches!(
        r,
        Err(StoreErr::NonFiniteKv {
            field: "values",
            token: 3,
            ..
        })
    ));
    assert_eq!(kv.tokens(K00).unwrap(), 6);
    assert_eq!(kv.tokens(V00).unwrap(), 0);
    assert_eq!(kv.read(K00, 0..6).unwrap(), tokens(1, 0..6));
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn generic_tensors_keep_nan_in_tier0_and_quantized_tiers_refuse_it() {
    let clock = Arc::new(ManualClock::new(1));
    let s = store(
        &clock,
        CollectionConfig::with_block_elems(32),
        [usize::MAX; 4],
    );
    let mut v: Vec<f32> = (0..100).map(|i| (i as f32 * 0.1).cos()).collect();
    let payload_nan = f32::from_bits(0x7fc0_1234);
    v[70] = payload_nan;
    v[75] = f32::NEG_INFINITY;
    let bytes = f32_bytes(&v);
    // Tier0 is lossless: the NaN's payload comes back bit for bit.
    s.put_tensor("x", DType::F32, &[100], &bytes, Tier::Tier0)
        .unwrap();
    assert_eq!(s.get_tensor("x").unwrap().data, bytes);
    // A quantized tier names the block, the count and the first element of the tensor.
    let id = s.tensor_id_of("q");
    assert!(matches!(
        s.put_tensor("q", DType::F32, &[100], &bytes, Tier::Tier2),
        Err(StoreErr::NonFiniteBlock { key, tier: Tier::Tier2, count: 2, first: 70 })
            if key == BlockKey::new(id, 2)
    ));
    // Tiering holds block 2 of "x" and demotes its other blocks and other tensors.
    s.put_tensor("y", DType::F32, &[64], &f32_bytes(&[0.5; 64]), Tier::Tier0)
        .unwrap();
    clock.advance(1000);
    // A dry run can ask, without writing or holding anything.
    let x = s.tensor_id_of("x");
    let h = s
        .would_hold(&BlockKey::new(x, 2), Tier::Tier3)
        .unwrap()
        .unwrap();
    assert_eq!(
        (h.tier, h.target, h.non_finite()),
        (Tier::Tier0, Tier::Tier3, 2)
    );
    assert_eq!(
        s.would_hold(&BlockKey::new(x, 1), Tier::Tier3).unwrap(),
        None
    );
    assert_eq!(
        s.would_hold(&BlockKey::new(x, 2), Tier::Tier0).unwrap(),
        None
    );
    assert!(s.held_blocks().unwrap().is_empty());
    let r = s.maintain(1024).unwrap();
    assert_eq!(r.held.len(), 1);
    assert_eq!(r.held[0].key, BlockKey::new(x, 2));
    assert_eq!(
        r.held[0].reason,
        HoldReason::NonFinite(NonFinite {
            count: 2,
            first: 70
        })
    );
    assert_eq!(r.moves.len(), 5, "x blocks 0, 1, 3 and y blocks 0, 1");
    assert_eq!(s.tier_counts().unwrap(), [1, 5, 0, 0]);
    assert_eq!(s.stats().unwrap().held_blocks, 1);
}

#[test]
fn capacity_eviction_passes_over_a_block_it_cannot_encode() {
    let clock = Arc::new(ManualClock::new(1));
    let s = store(
        &clock,
        CollectionConfig::with_block_elems(16),
        [3, usize::MAX, usize::MAX, usize::MAX],
    );
    let mut bad = vec![1.0f32; 16];
    bad[4] = f32::NAN;
    s.put_tensor("bad", DType::F32, &[16], &f32_bytes(&bad), Tier::Tier0)
        .unwrap();
    for name in ["a", "b"] {
        clock.advance(1);
        s.put_tensor(name, DType::F32, &[16], &f32_bytes(&[2.0; 16]), Tier::Tier0)
            .unwrap();
        s.get_tensor(name).unwrap();
    }
    clock.advance(1);
    // Tier0 is full; its coldest block ("bad") cannot be quantized, so the next coldest
    // ("a") makes room.
    s.put_tensor("c", DType::F32, &[16], &f32_bytes(&[3.0; 16]), Tier::Tier0)
        .unwrap();
    let tier_of = |n: &str| {
        s.meta(&BlockKey::new(s.tensor_id_of(n), 0))
            .unwrap()
            .unwrap()
            .tier
    };
    assert_eq!(tier_of("bad"), Tier::Tier0);
    assert_eq!(tier_of("a"), Tier::Tier1);
    assert_eq!(tier_of("c"), Tier::Tier0);
    assert_eq!(s.held_blocks().unwrap().len(), 1);
    // KV-kind info round trip: the hold does not depend on the kind.
    let info = BlockInfo::new(DType::F32, &[16]).with_kind(TensorKind::KvKey);
    let key = BlockKey::new(s.tensor_id_of("bad"), 0);
    assert!(matches!(
        s.put_block(key, Tier::Tier1, &info, &f32_bytes(&bad)),
        Err(StoreErr::NonFiniteBlock {
            count: 1,
            first: 4,
            ..
        })
    ));
}

#[test]
fn pinning_a_block_that_does_not_exist_says_no() {
    let clock = Arc::new(ManualClock::new(1));
    let kv = kv(&clock);
    kv.append(K00, &tokens(1, 0..6)).unwrap(); // blocks 0 and 1 (the pinned tail)
    assert!(kv.pin(K00, 0).unwrap());
    assert!(!kv.pin(K00, 0).unwrap());
    assert!(!kv.pin(K00, 1).unwrap(), "the tail is pinned already");
    for (slot, b) in [(K00, 2), (V00, 0)] {
        assert!(matches!(
            kv.pin(slot, b),
            Err(StoreErr::NotFound { key, tier: None }) if key == kv.block_key(slot, b)
        ));
        assert!(!kv.unpin(slot, b).unwrap());
    }
    assert!(kv.unpin(K00, 0).unwrap());
    assert_eq!(
        kv.store().pinned_blocks().unwrap(),
        vec![kv.block_key(K00, 1)]
    );
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    const BAD: [f32; 3] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Whatever blocks hold non-finite values, one maintain step moves every other
        /// block, holds exactly those (with their counts), and Tier0 keeps their bytes.
        #[test]
        fn maintain_holds_exactly_the_non_finite_blocks(
            blocks in proptest::collection::vec(
                (proptest::collection::vec(-1e6f32..1e6, 16),
                 proptest::collection::vec((0usize..16, 0usize..3), 0..4)),
                1..10,
            )
        ) {
            let clock = Arc::new(ManualClock::new(1));
            let s = store(&clock, CollectionConfig::with_block_elems(16), [usize::MAX; 4]);
            let mut want_held = Vec::new();
            let mut values = Vec::new();
            for (b, (mut v, bad)) in blocks.into_iter().enumerate() {
                for (i, which) in &bad {
                    v[*i] = BAD[*which];
                }
                if let Some(first) = v.iter().position(|x| !x.is_finite()) {
                    let count = v.iter().filter(|x| !x.is_finite()).count() as u64;
                    want_held.push((b as u32, count, (b * 16 + first) as u64));
                }
                values.extend(v);
            }
            let n = values.len() as u32;
            s.put_tensor("x", DType::F32, &[n], &f32_bytes(&values), Tier::Tier0).unwrap();
            clock.advance(1000);
            let r = s.maintain(1024).unwrap();
            let got: Vec<(u32, u64, u64)> = r
                .held
                .iter()
                .map(|h| match h.reason {
                    HoldReason::NonFinite(NonFinite { count, first }) => {
                        (h.key.block_index, count, first)
                    }
                    _ => panic!("{h:?}"),
                })
                .collect();
            prop_assert_eq!(&got, &want_held);
            let blocks = (n / 16) as usize;
            prop_assert_eq!(r.moves.len(), blocks - want_held.len());
            prop_assert_eq!(s.tier_counts().unwrap(), [want_held.len(), blocks - want_held.len(), 0, 0]);
            let id = s.tensor_id_of("x");
            let mut out = Vec::new();
            for (b, ..) in &want_held {
                s.get_block(&BlockKey::new(id, *b), &mut out).unwrap();
                let lo = *b as usize * 16;
                prop_assert_eq!(&out[..], &f32_bytes(&values[lo..lo + 16])[..]);
            }
        }
    }
}

#[cfg(feature = "threads")]
#[test]
fn the_background_maintainer_keeps_tiering_around_a_nan_block() {
    use std::time::Duration;
    let clock = Arc::new(ManualClock::new(1));
    let s = Arc::new(store(
        &clock,
        CollectionConfig::with_block_elems(16),
        [usize::MAX; 4],
    ));
    let mut v: Vec<f32> = (0..64).map(|i| i as f32).collect();
    v[40] = f32::NAN; // block 2
    s.put_tensor("x", DType::F32, &[64], &f32_bytes(&v), Tier::Tier0)
        .unwrap();
    clock.advance(1000);
    let m = tensorvault_store::Maintainer::start(Arc::clone(&s), Duration::from_millis(5), 100)
        .unwrap();
    for _ in 0..2000 {
        if s.tier_counts().unwrap()[3] == 3 {
            break;
        }
        clock.advance(10);
        std::thread::sleep(Duration::from_millis(2));
    }
    let totals = m.stop();
    assert_eq!(s.tier_counts().unwrap(), [1, 0, 0, 3]);
    assert!(
        totals.errors == 0 && totals.moves == 9 && totals.held == 1,
        "{totals:?}"
    );
}
