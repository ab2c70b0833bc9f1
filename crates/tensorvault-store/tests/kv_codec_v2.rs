//! Codec v2 in the store: tensor kinds pick the layout of quantized tiers (KV keys per
//! channel, the sink token kept in f16), KV blocks carry their kind, age-based KV tiering
//! demotes old blocks in steps, and kinds survive a reopen.

use std::sync::Arc;

use half::f16;
use tensorvault_store::{
    BlockInfo, BufferBlockIO, Catalog, CollectionConfig, DType, DirStore, Durability, KvAgePolicy,
    KvCache, KvKind, KvSlot, ManualClock, MemMetaLog, StoreConfig, TensorKind, TensorStore, Tier,
    TierPolicy,
};

const HD: u32 = 64;

/// Key-like token `t`: channels with their own offsets, a few 8x larger (outlier
/// channels), values f16-exact.
fn key_token(t: u64) -> Vec<f16> {
    (0..HD)
        .map(|c| {
            let mag = if c % 9 == 0 { 8.0 } else { 1.0 };
            let v = (c as f32 - 30.0) * 0.2 + mag * ((t as f32) * 0.07 + c as f32).sin();
            f16::from_f32(v)
        })
        .collect()
}

fn rel_rmse(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum();
    let den: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum();
    (num / den).sqrt()
}

fn kv_store(clock: Arc<ManualClock>) -> TensorStore<Arc<ManualClock>, BufferBlockIO, MemMetaLog> {
    kv_store_with(clock, TierPolicy::default())
}

fn kv_store_with(
    clock: Arc<ManualClock>,
    tiering: TierPolicy,
) -> TensorStore<Arc<ManualClock>, BufferBlockIO, MemMetaLog> {
    let geo = CollectionConfig::kv_cache(HD).unwrap();
    let cfg = StoreConfig {
        collection: geo,
        durability: Durability::Os,
        tiering,
        ..StoreConfig::default()
    };
    TensorStore::open(
        "t",
        "kv",
        clock,
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap()
}

fn f16_bytes(v: &[f16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn to_f32(v: &[f16]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

#[test]
fn kinds_pick_the_layout_and_keys_per_channel_win() {
    let clock = Arc::new(ManualClock::new(1));
    let s = kv_store(clock);
    let tokens = 1024u64;
    let vals: Vec<f16> = (0..tokens).flat_map(key_token).collect();
    let data = f16_bytes(&vals);
    let shape = [tokens as u32, HD];
    let mut err = Vec::new();
    for (name, kind) in [("g", TensorKind::Generic), ("k", TensorKind::KvKey)] {
        let info = BlockInfo::new(DType::F16, &shape).with_kind(kind);
        s.put_tensor_with(name, &info, &data, Tier::Tier3).unwrap();
        let back = s.get_tensor(name).unwrap().data;
        let back: Vec<f16> = back
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]))
            .collect();
        // The sink token (row 0) is exact for KV keys.
        if kind == TensorKind::KvKey {
            assert_eq!(back[..HD as usize], vals[..HD as usize]);
        }
        err.push(rel_rmse(&to_f32(&vals), &to_f32(&back)));
        assert!(s
            .blocks()
            .unwrap()
            .iter()
            .filter(|m| m.key.tensor_id == s.tensor_id_of(name))
            .all(|m| m.kind == kind && m.tier == Tier::Tier3));
    }
    assert!(
        err[1] < err[0] * 0.6,
        "per-channel {} vs generic {}",
        err[1],
        err[0]
    );
    assert!(err[1] < 0.08, "3-bit per-channel keys: {}", err[1]);
}

#[test]
fn age_tiering_demotes_old_blocks_in_steps() {
    let clock = Arc::new(ManualClock::new(1));
    let kv = KvCache::new(kv_store(clock), HD).unwrap();
    let tpb = u64::from(kv.tokens_per_block()); // 256
    let slot_k = KvSlot::new(0, 0, KvKind::Key);
    let slot_v = KvSlot::new(0, 0, KvKind::Value);
    let total = 5 * tpb + 10; // five sealed blocks and a partial tail
    let keys: Vec<f16> = (0..total).flat_map(key_token).collect();
    let values: Vec<f16> = (0..total).flat_map(|t| key_token(t + 999)).collect();
    for chunk in 0..total.div_ceil(64) {
        let r = (chunk * 64) as usize * HD as usize
            ..((chunk + 1) * 64).min(total) as usize * HD as usize;
        kv.append_batch(&[(slot_k, &keys[r.clone()]), (slot_v, &values[r])])
            .unwrap();
    }
    let policy = KvAgePolicy {
        tier0_tokens: tpb,
        tier1_tokens: 0,
        tier2_tokens: 2 * tpb,
    };
    let moved = kv.demote_by_age(&policy).unwrap();
    // Per slot: block 4 (age 10) stays raw, blocks 2-3 go to tier 2, blocks 0-1 to tier 3.
    assert_eq!(moved, [0, 0, 4, 4]);
    let id = kv.tensor_id(slot_k);
    let tiers: Vec<Tier> = (0..6)
        .map(|b| {
            kv.store()
                .meta(&kv.block_key(slot_k, b))
                .unwrap()
                .unwrap()
                .tier
        })
        .collect();
    assert_eq!(
        tiers,
        [
            Tier::Tier3,
            Tier::Tier3,
            Tier::Tier2,
            Tier::Tier2,
            Tier::Tier0,
            Tier::Tier0
        ]
    );
    assert!(kv
        .store()
        .blocks()
        .unwrap()
        .iter()
        .filter(|m| m.key.tensor_id == id)
        .all(|m| m.kind == TensorKind::KvKey));
    // Idempotent: nothing moves twice.
    assert_eq!(kv.demote_by_age(&policy).unwrap(), [0; 4]);
    // Reads: the sink and the recent window exact, old blocks close.
    let back = kv.read(slot_k, 0..total).unwrap();
    let hd = HD as usize;
    assert_eq!(back[..hd], keys[..hd]);
    let recent = (4 * tpb) as usize * hd;
    assert_eq!(back[recent..], keys[recent..]);
    let old = rel_rmse(
        &to_f32(&keys[hd..2 * tpb as usize * hd]),
        &to_f32(&back[hd..2 * tpb as usize * hd]),
    );
    assert!(old < 0.08, "tier-3 keys: {old}");
    let mid = 2 * tpb as usize * hd..4 * tpb as usize * hd;
    let e2 = rel_rmse(&to_f32(&keys[mid.clone()]), &to_f32(&back[mid]));
    assert!(e2 < 0.02, "tier-2 keys: {e2}");
}

/// A decode under an age policy: every block is read at every step (as attention does),
/// then one tiering step (the age policy, then the store's access-based `maintain`, as
/// Python's `KvCache.maintain` runs them). Returns how many promotions `maintain` made and
/// the keys read after the last step.
fn decode_with_age_tiers(tiering: TierPolicy) -> (usize, Vec<f16>, Vec<f16>) {
    let clock = Arc::new(ManualClock::new(1));
    let kv = KvCache::new(kv_store_with(clock.clone(), tiering), HD).unwrap();
    let tpb = u64::from(kv.tokens_per_block());
    let slot = KvSlot::new(0, 0, KvKind::Key);
    let total = 6 * tpb;
    let keys: Vec<f16> = (0..total).flat_map(key_token).collect();
    let policy = KvAgePolicy {
        tier0_tokens: tpb,
        tier1_tokens: 0,
        tier2_tokens: tpb,
    };
    let hd = HD as usize;
    let mut promoted = 0;
    let mut first = None;
    let step = 64;
    for t in (0..total).step_by(step as usize) {
        kv.append(slot, &keys[t as usize * hd..(t + step) as usize * hd])
            .unwrap();
        // Attention reads the whole cache many times per tick (every layer, every head).
        for _ in 0..4 {
            kv.read(slot, 0..t + step).unwrap();
        }
        kv.demote_by_age(&policy).unwrap();
        let r = kv.store().maintain(1024).unwrap();
        promoted += r.moves.iter().filter(|m| m.to < m.from).count();
        clock.advance(1);
        if t + step == 4 * tpb {
            // Block 0 is at tier 3 from here on under the age policy.
            first = Some(kv.read(slot, 0..tpb).unwrap());
        }
    }
    // Keep decoding (reading) without appending: the age policy has nothing to do.
    for _ in 0..200 {
        kv.read(slot, 0..total).unwrap();
        kv.demote_by_age(&policy).unwrap();
        let r = kv.store().maintain(1024).unwrap();
        promoted += r.moves.iter().filter(|m| m.to < m.from).count();
        clock.advance(1);
    }
    kv.demote_by_age(&policy).unwrap();
    (promoted, first.unwrap(), kv.read(slot, 0..tpb).unwrap())
}

#[test]
fn age_tiering_is_not_undone_by_access_promotion() {
    // Session 16: Python's KvCache.maintain ran the store's access-based step after the
    // age policy with promotion on; attention makes every block hot, so blocks went
    // 3 -> 2 -> 3, each round trip re-encoding decoded values.
    let (promoted, before, after) = decode_with_age_tiers(TierPolicy::default());
    assert!(promoted > 0, "the default policy promotes hot KV blocks");
    assert_ne!(
        before, after,
        "and a promoted, re-demoted block has re-encoded keys"
    );
    let (promoted, before, after) =
        decode_with_age_tiers(KvAgePolicy::store_tiering(TierPolicy::default()));
    assert_eq!(promoted, 0);
    assert_eq!(
        before, after,
        "a tier-3 block reads the same after 200 more steps"
    );
}

#[test]
fn kinds_and_the_codec_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let geo = CollectionConfig::kv_cache(HD).unwrap();
    let cfg = || StoreConfig {
        collection: geo,
        durability: Durability::Os,
        ..StoreConfig::default()
    };
    let vals: Vec<f16> = (0..512).flat_map(key_token).collect();
    let shape = [512u32, HD];
    {
        let s = DirStore::open_dir(dir.path(), "t", "c", ManualClock::new(1), cfg(), true).unwrap();
        let info = BlockInfo::new(DType::F16, &shape).with_kind(TensorKind::KvValue);
        s.put_tensor_with("v", &info, &f16_bytes(&vals), Tier::Tier2)
            .unwrap();
        s.close().unwrap();
    }
    // A different geometry asked for at reopen is ignored: the persisted one wins.
    let other = StoreConfig {
        collection: CollectionConfig::codec_v1(4096),
        ..cfg()
    };
    let s = DirStore::open_dir(dir.path(), "t", "c", ManualClock::new(2), other, false).unwrap();
    assert_eq!(*s.geometry(), geo);
    assert!(s
        .blocks()
        .unwrap()
        .iter()
        .all(|m| m.kind == TensorKind::KvValue));
    let back = s.get_tensor("v").unwrap().data;
    let back: Vec<f16> = back
        .chunks_exact(2)
        .map(|b| f16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(back[..HD as usize], vals[..HD as usize], "sink token exact");
    let e = rel_rmse(&to_f32(&vals), &to_f32(&back));
    // Flat groups of 128 over 8x outlier channels: about half a 31-level step of 16.
    assert!(e < 0.06, "5-bit values: {e}");
}
