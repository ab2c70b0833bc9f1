//! The KV-cache API (`tensorvault_store::kv`): appends into the Tier0 tail, reads of token
//! ranges from whatever tier each block is in, the pinned tail under `maintain` and
//! capacity eviction, names, shapes, reopen, and refused input.

use std::sync::Arc;

use half::f16;
use tensorvault_store::tiering::TierPolicy;
use tensorvault_store::{
    BufferBlockIO, Catalog, CollectionConfig, Durability, KvCache, KvKind, KvSlot, ManualClock,
    MemMetaLog, StoreConfig, StoreErr, TensorStore, Tier,
};

/// Head dimension of the small layout: 4 token positions of 8 values per block.
const HD: u32 = 8;
const TPB: u64 = 4;

type MemKv = KvCache<Arc<ManualClock>, BufferBlockIO, MemMetaLog>;

fn small_cfg() -> StoreConfig {
    let mut geo = CollectionConfig::with_block_elems(HD * TPB as u32);
    geo.tier0_elem_bytes = 2;
    StoreConfig {
        collection: geo,
        durability: Durability::Os,
        ..StoreConfig::default()
    }
}

fn mem_kv(clock: Arc<ManualClock>, cfg: StoreConfig, head_dim: u32) -> MemKv {
    let geo = cfg.collection;
    let store = TensorStore::open(
        "t",
        "kv",
        clock,
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap();
    KvCache::new(store, head_dim).unwrap()
}

/// Token `t` of tensor `salt`: `HD` distinct, f16-exact values.
fn token(salt: u32, t: u64) -> Vec<f16> {
    (0..HD)
        .map(|c| f16::from_f32(((salt * 131 + c * 7) as f32 * 0.37 + t as f32 * 0.11).sin() * 3.0))
        .collect()
}

fn tokens(salt: u32, range: std::ops::Range<u64>) -> Vec<f16> {
    range.flat_map(|t| token(salt, t)).collect()
}

const K00: KvSlot = KvSlot::new(0, 0, KvKind::Key);
const V00: KvSlot = KvSlot::new(0, 0, KvKind::Value);

#[test]
fn appends_read_back_exactly_across_block_boundaries() {
    let kv = mem_kv(Arc::new(ManualClock::new(1)), small_cfg(), HD);
    assert_eq!(kv.tokens_per_block(), TPB as u32);
    for t in 0..10 {
        assert_eq!(kv.append(K00, &token(1, t)).unwrap(), t + 1);
    }
    // A 7-token append finishes block 2 and fills block 3 and part of block 4.
    assert_eq!(kv.append(K00, &tokens(1, 10..17)).unwrap(), 17);
    assert_eq!(kv.tokens(K00).unwrap(), 17);
    assert_eq!(kv.tokens(V00).unwrap(), 0);
    for r in [0..17, 3..9, 16..17, 4..8, 0..1] {
        assert_eq!(
            kv.read(K00, r.clone()).unwrap(),
            tokens(1, r.clone()),
            "{r:?}"
        );
    }
    assert!(kv.read(K00, 5..5).unwrap().is_empty());
    // Five blocks, all in Tier0; each records the shape after the append that wrote it
    // last: sealed blocks keep their sealing append's shape, the tail has the current one.
    let store = kv.store();
    let shape = |b: u32| {
        store
            .meta(&kv.block_key(K00, b))
            .unwrap()
            .unwrap()
            .shape()
            .to_vec()
    };
    assert_eq!(shape(0), vec![4, HD]);
    assert_eq!(shape(1), vec![8, HD]);
    assert_eq!(shape(2), vec![17, HD]);
    assert_eq!(shape(4), vec![17, HD]);
    assert!(store.meta(&kv.block_key(K00, 5)).unwrap().is_none());
    assert_eq!(store.tier_counts().unwrap(), [5, 0, 0, 0]);
    // The partial tail (block 4) is the only pinned block.
    assert_eq!(store.pinned_blocks().unwrap(), vec![kv.block_key(K00, 4)]);
}

#[test]
fn a_long_append_writes_each_block_once_and_a_batch_is_one_write() {
    let kv = mem_kv(Arc::new(ManualClock::new(1)), small_cfg(), HD);
    kv.append(K00, &tokens(1, 0..10)).unwrap();
    assert_eq!(
        kv.store().stats().unwrap().writes,
        3,
        "blocks 0, 1 and the tail 2"
    );
    // The same slot twice in one batch: both appends apply, in order; the tail block is
    // written once.
    let a = tokens(1, 10..11);
    let b = tokens(1, 11..12);
    let c = tokens(2, 0..3);
    kv.append_batch(&[(K00, &a), (V00, &c), (K00, &b)]).unwrap();
    assert_eq!(kv.tokens(K00).unwrap(), 12);
    assert_eq!(kv.tokens(V00).unwrap(), 3);
    assert_eq!(kv.read(K00, 0..12).unwrap(), tokens(1, 0..12));
    assert_eq!(kv.read(V00, 0..3).unwrap(), tokens(2, 0..3));
    assert_eq!(kv.store().stats().unwrap().writes, 3 + 2);
    // 12 tokens is exactly 3 blocks: the last one is sealed, nothing of K00 is pinned.
    assert_eq!(
        kv.store().pinned_blocks().unwrap(),
        vec![kv.block_key(V00, 0)]
    );
}

#[test]
fn maintain_demotes_old_blocks_but_never_the_tail() {
    let clock = Arc::new(ManualClock::new(1));
    let cfg = StoreConfig {
        // Move as soon as the score says so: only the pin protects the tail. KV blocks
        // land in Tier0 raw and cool down: the policy lets Tier0 demote.
        tiering: TierPolicy {
            min_tier_age: 0,
            demote_tier0: true,
            ..TierPolicy::default()
        },
        ..small_cfg()
    };
    let kv = mem_kv(Arc::clone(&clock), cfg, HD);
    let mut max_abs = 0f32;
    for t in 0..64u64 {
        clock.advance(1);
        kv.append(K00, &token(1, t)).unwrap();
        max_abs = token(1, t)
            .iter()
            .fold(max_abs, |m, v| m.max(v.to_f32().abs()));
        // Attention reads the last 4 tokens every step.
        kv.read(K00, (t + 1).saturating_sub(4)..t + 1).unwrap();
        kv.store().maintain(64).unwrap();
        let n = t + 1;
        if n % TPB != 0 {
            let tail = kv.block_key(K00, (n / TPB) as u32);
            let m = kv.store().meta(&tail).unwrap().unwrap();
            assert_eq!(m.tier, Tier::Tier0, "tail {tail} at token {n}");
            assert_eq!(kv.store().pinned_blocks().unwrap(), vec![tail]);
        }
    }
    // Old blocks went down to Tier3 by themselves; the recent ones are still hot.
    let tier = |b: u32| {
        kv.store()
            .meta(&kv.block_key(K00, b))
            .unwrap()
            .unwrap()
            .tier
    };
    for b in 0..8 {
        assert_eq!(tier(b), Tier::Tier3, "block {b}");
    }
    assert_eq!(tier(15), Tier::Tier0);
    // A range over demoted blocks reads back dequantized: close, not exact. Symmetric
    // 3-bit codes are within half a step (max / 3 / 2) of the value.
    let got = kv.read(K00, 0..64).unwrap();
    let want = tokens(1, 0..64);
    let err = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g.to_f32() - w.to_f32()).abs())
        .fold(0f32, f32::max);
    assert!(
        err > 0.0 && err <= max_abs / 6.0 * 1.01 + 0.01,
        "{err} vs {max_abs}"
    );
    assert_eq!(
        &got[60 * HD as usize..],
        &want[60 * HD as usize..],
        "Tier0 exact"
    );
}

#[test]
fn capacity_eviction_takes_sealed_blocks_not_tails() {
    let mut cfg = small_cfg();
    // Room for the two tails and nothing else.
    cfg.max_blocks_per_tier = [2, usize::MAX, usize::MAX, usize::MAX];
    let clock = Arc::new(ManualClock::new(1));
    let kv = mem_kv(Arc::clone(&clock), cfg, HD);
    // V00 gets a token every third step only: its tail sits in Tier0 outside the
    // batches that fill Tier0, with the lowest score of all (a rewrite starts a block's
    // statistics afresh), and must still not be evicted.
    for t in 0..22u64 {
        clock.advance(1);
        kv.append(K00, &token(1, t)).unwrap();
        if t % 3 == 0 {
            kv.append(V00, &token(2, t / 3)).unwrap();
        }
        let store = kv.store();
        let counts = store.tier_counts().unwrap();
        assert!(counts[0] <= 2, "{counts:?}");
        for slot in [K00, V00] {
            let n = kv.tokens(slot).unwrap();
            if !n.is_multiple_of(TPB) {
                let m = store
                    .meta(&kv.block_key(slot, (n / TPB) as u32))
                    .unwrap()
                    .unwrap();
                assert_eq!(m.tier, Tier::Tier0, "{slot} tail at {n}");
            }
        }
    }
    assert_eq!(kv.read(K00, 20..22).unwrap(), tokens(1, 20..22));
    // V00's sealed blocks were evicted to Tier1: 8-bit close (half a step of 3 / 127).
    let err = kv
        .read(V00, 0..8)
        .unwrap()
        .iter()
        .zip(&tokens(2, 0..8))
        .map(|(g, w)| (g.to_f32() - w.to_f32()).abs())
        .fold(0f32, f32::max);
    assert!(err <= 3.0 / 127.0 / 2.0 + 0.005, "{err}");
    assert_eq!(kv.store().blocks().unwrap().len(), 6 + 2);
    assert!(
        kv.store().tier_counts().unwrap()[1] >= 4,
        "sealed blocks evicted"
    );
}

#[test]
fn names_are_catalogued_and_parse_back() {
    let kv = mem_kv(Arc::new(ManualClock::new(1)), small_cfg(), HD);
    let slots = [
        KvSlot::new(0, 1, KvKind::Key),
        KvSlot::new(12, 3, KvKind::Value),
        KvSlot::new(0, 0, KvKind::Value),
    ];
    for s in slots {
        kv.append(s, &token(0, 0)).unwrap();
    }
    let names: Vec<String> = kv
        .store()
        .tensors()
        .unwrap()
        .into_iter()
        .map(|t| t.name.unwrap())
        .collect();
    assert_eq!(names, ["L0.H0.v", "L0.H1.k", "L12.H3.v"]);
    let mut sorted = slots.to_vec();
    sorted.sort();
    assert_eq!(kv.slots().unwrap(), sorted);
    for s in slots {
        assert_eq!(KvSlot::parse(&s.name()), Some(s));
        assert_eq!(kv.tensor_id(s), kv.store().tensor_id_of(&s.name()));
    }
    for bad in [
        "L01.H0.k", "L0.H0.x", "L0.H0", "weights", "L-1.H0.k", "L0.H+1.v",
    ] {
        assert_eq!(KvSlot::parse(bad), None, "{bad}");
    }
}

#[test]
fn peek_reads_without_counting_an_access() {
    let kv = mem_kv(Arc::new(ManualClock::new(1)), small_cfg(), HD);
    kv.append(K00, &tokens(1, 0..6)).unwrap();
    let key = kv.block_key(K00, 1);
    let mut out = Vec::new();
    let m = kv.peek_block(K00, 1, &mut out).unwrap();
    assert_eq!(out, tokens(1, 4..6));
    assert_eq!(m.tier, Tier::Tier0);
    assert_eq!(kv.store().meta(&key).unwrap().unwrap().access_count, 0);
    kv.read(K00, 4..5).unwrap();
    assert_eq!(kv.store().meta(&key).unwrap().unwrap().access_count, 1);
    assert!(matches!(
        kv.peek_block(K00, 2, &mut out),
        Err(StoreErr::NotFound { .. })
    ));
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let kv = mem_kv(Arc::new(ManualClock::new(1)), small_cfg(), HD);
    kv.append(K00, &tokens(1, 0..2)).unwrap();
    let bad = |e: StoreErr, field: &str| match e {
        StoreErr::InvalidArgument { field: f, .. } => assert_eq!(f, field),
        other => panic!("expected InvalidArgument({field}), got {other}"),
    };
    bad(kv.append(K00, &[]).unwrap_err(), "values");
    bad(kv.append(K00, &token(1, 2)[..5]).unwrap_err(), "values");
    // One bad item fails the whole batch: the good one is not applied either.
    let good = token(2, 0);
    let half_token = &token(1, 2)[..3];
    bad(
        kv.append_batch(&[(V00, &good), (K00, half_token)])
            .unwrap_err(),
        "values",
    );
    assert_eq!(kv.tokens(V00).unwrap(), 0);
    assert_eq!(kv.tokens(K00).unwrap(), 2);
    assert_eq!(kv.store().blocks().unwrap().len(), 1);
    // Ranges past the end, reversed, or of an empty slot.
    bad(kv.read(K00, 0..3).unwrap_err(), "range");
    #[allow(clippy::reversed_empty_ranges)] // reason: the refused input under test
    let reversed = 2..1;
    bad(kv.read(K00, reversed).unwrap_err(), "range");
    bad(kv.read(V00, 0..1).unwrap_err(), "range");
    assert!(kv.read(V00, 0..0).unwrap().is_empty());
    // A head dimension of 0 or one that does not divide the block.
    let err = KvCache::new(kv.into_store(), 3).err().unwrap();
    bad(err, "head_dim");
    let cfg = small_cfg();
    let geo = cfg.collection;
    let zero = TensorStore::open(
        "t",
        "c",
        ManualClock::new(1),
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap();
    bad(KvCache::new(zero, 0).err().unwrap(), "head_dim");
}

#[cfg(feature = "mmap")]
#[test]
fn reopen_finds_tokens_tails_and_pins() {
    use tensorvault_store::{BlockKey, DirStore};
    let dir = tempfile::tempdir().unwrap();
    let cfg = || StoreConfig {
        collection: CollectionConfig::kv_cache(128).unwrap(),
        durability: Durability::EveryN(64),
        ..StoreConfig::default()
    };
    let open = || DirStore::open_dir(dir.path(), "t", "kv", ManualClock::new(1), cfg(), true);
    let hd = 128usize;
    let tok = |salt: u32, t: u64| -> Vec<f16> {
        (0..hd)
            .map(|c| {
                f16::from_f32(((salt as usize * 977 + c) as f32 * 0.01 + t as f32 * 0.3).cos())
            })
            .collect()
    };
    let many =
        |salt: u32, r: std::ops::Range<u64>| -> Vec<f16> { r.flat_map(|t| tok(salt, t)).collect() };
    {
        let kv = KvCache::new(open().unwrap(), 128).unwrap();
        assert_eq!(kv.tokens_per_block(), 128);
        kv.append(K00, &many(1, 0..200)).unwrap();
        kv.append(V00, &many(2, 0..128)).unwrap();
        kv.into_store().close().unwrap();
    }
    let kv = KvCache::new(open().unwrap(), 128).unwrap();
    assert_eq!(kv.tokens(K00).unwrap(), 200);
    assert_eq!(kv.tokens(V00).unwrap(), 128);
    assert_eq!(kv.slots().unwrap(), vec![K00, V00]);
    // K00's partial tail (block 1) is pinned again; V00 ended on a block boundary.
    assert_eq!(
        kv.store().pinned_blocks().unwrap(),
        vec![kv.block_key(K00, 1)]
    );
    // Appends continue where they stopped.
    kv.append(K00, &many(1, 200..300)).unwrap();
    kv.append(V00, &tok(2, 128)).unwrap();
    assert_eq!(kv.read(K00, 0..300).unwrap(), many(1, 0..300));
    assert_eq!(kv.read(V00, 100..129).unwrap(), many(2, 100..129));
    assert_eq!(
        kv.store()
            .meta(&BlockKey::new(kv.tensor_id(K00), 2))
            .unwrap()
            .unwrap()
            .shape(),
        &[300, 128]
    );
    // A cache of another head dimension refuses the stored tensors.
    let store = kv.into_store();
    drop(store);
    let err = KvCache::new(open().unwrap(), 64).err().unwrap();
    assert!(err.to_string().contains("head_dim 128"), "{err}");
}
