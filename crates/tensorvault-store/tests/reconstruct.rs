//! Reconstruction policies under fault injection: corrupt `Delta` / `Factor` blocks heal
//! from their lineage and are repaired in place (logged, replayable, verify-clean);
//! without a usable lineage the read reports `Corruption`; chain depth and cycles fail
//! with typed errors. Runs on the in-memory backend and (feature `mmap`) on directory
//! stores.

#[cfg(feature = "mmap")]
use std::path::Path;
use std::sync::Arc;

use tensorvault_store::lineage::format::FILE_HEADER_LEN;
#[cfg(feature = "mmap")]
use tensorvault_store::{lineage::format::ENTRY_HEADER_LEN, DirStore};
use tensorvault_store::{
    BlockIO, BlockIndex, BlockInfo, BlockKey, BufferBlockIO, Catalog, Clock, CollectionConfig,
    DType, LineageConfig, LineageStore, ManualClock, MemMetaLog, MetaLog, ReconstructPolicy,
    StoreConfig, StoreErr, TensorStore, Tier,
};

type MemStore = TensorStore<Arc<ManualClock>, BufferBlockIO, MemMetaLog>;

const ELEMS: u32 = 256;

fn cfg() -> StoreConfig {
    StoreConfig {
        collection: CollectionConfig::with_block_elems(ELEMS),
        ..StoreConfig::default()
    }
}

fn mem_store() -> MemStore {
    let cfg = cfg();
    let geo = cfg.collection;
    TensorStore::open(
        "t",
        "c",
        Arc::new(ManualClock::new(100)),
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap()
}

#[cfg(feature = "mmap")]
fn dir_store(root: &Path) -> DirStore<Arc<ManualClock>> {
    DirStore::open_dir(root, "t", "c", Arc::new(ManualClock::new(100)), cfg(), true).unwrap()
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

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn max_abs(a: &[f32]) -> f32 {
    a.iter().map(|x| x.abs()).fold(0.0, f32::max)
}

/// Flip one byte in the middle of a block's slot, in place.
fn corrupt<C, B, M>(s: &TensorStore<C, B, M>, key: BlockKey)
where
    C: Clock,
    B: BlockIO,
    M: MetaLog,
{
    let m = s.meta(&key).unwrap().expect("block exists");
    let mut payload = vec![0u8; m.data_len as usize];
    s.block_io()
        .read_block(m.tier, key, m.data_offset, m.data_len, &mut payload)
        .unwrap();
    payload[m.data_len as usize / 2] ^= 0x5A;
    s.block_io()
        .rewrite_block(m.tier, m.data_offset, &payload)
        .unwrap();
}

fn delta_info(shape: &[u32], parent: u128) -> BlockInfo<'_> {
    BlockInfo {
        dtype: DType::F32,
        shape,
        lineage_parent: parent,
        reconstruct: ReconstructPolicy::Delta,
        kind: tensorvault_store::TensorKind::Generic,
    }
}

/// Put `base` and a child `child` of it; returns (base id, child id).
fn put_pair<C, B, M>(
    s: &TensorStore<C, B, M>,
    base: &[f32],
    child: &[f32],
    tier: Tier,
) -> (u128, u128)
where
    C: Clock,
    B: BlockIO,
    M: MetaLog,
{
    let shape = [base.len() as u32];
    let b = s
        .put_tensor("base", DType::F32, &shape, &f32_bytes(base), tier)
        .unwrap();
    let c = s
        .put_tensor_with(
            "child",
            &delta_info(&shape, b.tensor_id),
            &f32_bytes(child),
            tier,
        )
        .unwrap();
    (b.tensor_id, c.tensor_id)
}

fn read<C: Clock, B: BlockIO, M: MetaLog>(s: &TensorStore<C, B, M>, id: u128) -> Vec<f32> {
    f32_from(&s.get_tensor_by_id(id).unwrap().data)
}

/// Corrupt block 1 of the child, read it back, check the heal and the repair.
fn heal_and_check<C, B, M>(s: &TensorStore<C, B, M>, child: u128, bound: f32) -> Vec<f32>
where
    C: Clock,
    B: BlockIO,
    M: MetaLog,
{
    let before = read(s, child);
    let key = BlockKey::new(child, 1);
    let old = s.meta(&key).unwrap().unwrap();
    corrupt(s, key);
    assert_eq!(s.verify().unwrap().problems.len(), 1);
    let after = read(s, child);
    let err = max_abs_diff(&before, &after);
    assert!(err <= bound, "healed values off by {err} > {bound}");
    assert_eq!(s.repairs(), 1);
    // Repaired in place: same tier and slot, new checksum in the index; clean now.
    let new = s.meta(&key).unwrap().unwrap();
    assert_eq!((new.tier, new.data_offset), (old.tier, old.data_offset));
    assert_eq!(new.tier_since, old.tier_since);
    assert!(s.verify().unwrap().problems.is_empty());
    // A second read needs no repair and returns the same values.
    assert_eq!(read(s, child), after);
    assert_eq!(s.repairs(), 1);
    after
}

#[test]
fn sparse_delta_block_heals_exactly_in_tier0() {
    let s = mem_store();
    let base = wave(2 * ELEMS as usize, 0.3);
    let mut child = base.clone();
    for i in [3, 300, 301, 511] {
        child[i] += 0.25;
    }
    let (_, id) = put_pair(&s, &base, &child, Tier::Tier0);
    let st = s.lineage().stats().unwrap();
    assert_eq!(st.delta_entries, 2);
    // Block 0 has one change, block 1 three: sparse pairs, far below a dense delta.
    assert!(st.delta_bytes < 300, "{st:?}");
    // (child - base) + base is child up to one f32 rounding.
    let healed = heal_and_check(&s, id, 1e-6);
    assert!(max_abs_diff(&healed, &child) <= 1e-6);
}

#[test]
fn dense_delta_block_heals_within_the_delta_quantization_error() {
    let s = mem_store();
    let base = wave(2 * ELEMS as usize, 0.3);
    let child: Vec<f32> = base
        .iter()
        .enumerate()
        .map(|(i, b)| b * 1.01 + ((i as f32) * 1.7).cos() * 0.05)
        .collect();
    let (_, id) = put_pair(&s, &base, &child, Tier::Tier1);
    // Quantized (8-bit) delta: below the dense f32 size of 2 KiB for two blocks.
    let st = s.lineage().stats().unwrap();
    assert!(st.delta_bytes < 2 * 4 * ELEMS as u64 / 2, "{st:?}");
    // Error bound: half a delta step (max |delta| / 127 / 2) plus half a Tier1 step of
    // the re-encoded block (max |x| / 127 / 2), with 5% slack for f16 scales.
    let stored = read(&s, id);
    let delta_max = stored
        .iter()
        .zip(&base)
        .map(|(c, b)| (c - b).abs())
        .fold(0.0, f32::max);
    let bound = (delta_max / 127.0 / 2.0 + max_abs(&stored) / 127.0 / 2.0) * 1.05;
    heal_and_check(&s, id, bound);
}

#[test]
#[cfg(feature = "mmap")]
fn delta_repair_is_logged_replayable_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let base = wave(2 * ELEMS as usize, 1.1);
    let child: Vec<f32> = base.iter().map(|b| b + 0.125).collect();
    let (id, healed, index) = {
        let s = dir_store(dir.path());
        let (_, id) = put_pair(&s, &base, &child, Tier::Tier2);
        let bound = (0.125 / 127.0 / 2.0 + max_abs(&child) / 15.0 / 2.0) * 1.05;
        let healed = heal_and_check(&s, id, bound);
        s.flush().unwrap();
        (id, healed, s.blocks().unwrap())
    };
    assert!(dir.path().join("t/c/delta.dat").is_file());
    let s = dir_store(dir.path());
    // Replay applied the repair record: the same index, a clean store, the same values.
    assert_eq!(s.blocks().unwrap(), index);
    assert!(s.verify().unwrap().problems.is_empty());
    assert_eq!(read(&s, id), healed);
    assert_eq!(s.repairs(), 0);
    // The re-tagged entry still heals the repaired block a second time.
    corrupt(&s, BlockKey::new(id, 1));
    assert_eq!(read(&s, id), healed);
    assert_eq!(s.repairs(), 1);
}

#[test]
fn replay_of_the_memory_log_after_a_repair_rebuilds_the_same_index() {
    let s = mem_store();
    let base = wave(2 * ELEMS as usize, 0.7);
    let child: Vec<f32> = base.iter().map(|b| b * 0.5).collect();
    let (_, id) = put_pair(&s, &base, &child, Tier::Tier3);
    heal_and_check(&s, id, 2.0 / 3.0);
    s.flush().unwrap();
    let bytes = s.with_log(MemMetaLog::to_bytes).unwrap();
    let mut log = MemMetaLog::from_bytes(bytes).unwrap();
    let geo = *s.geometry();
    let mut idx = BlockIndex::default();
    let mut repairs = 0;
    log.replay(Default::default(), &mut |rec| {
        if let tensorvault_store::MetaRecord::Migrate {
            old_tier, new_tier, ..
        } = rec
        {
            repairs += usize::from(old_tier == new_tier);
        }
        idx.apply(rec, &geo).unwrap();
        Ok(())
    })
    .unwrap();
    assert_eq!(repairs, 1, "one repair record (a same-tier Migrate)");
    assert_eq!(idx.sorted(), s.blocks().unwrap());
}

/// A rank-`r` matrix of `m x n` (row-major) with entries of order 1.
fn low_rank(m: usize, n: usize, r: usize) -> Vec<f32> {
    (0..m * n)
        .map(|x| {
            let (i, j) = ((x / n) as f32, (x % n) as f32);
            (0..r)
                .map(|k| {
                    let k = k as f32 + 1.0;
                    (i * 0.3 * k).sin() * (j * 0.17 * k + k).cos() / k
                })
                .sum()
        })
        .collect()
}

/// Seeded values in [-1, 1) with no structure (full rank).
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Frobenius norm of the best rank-`r` approximation's error (Eckart-Young).
fn truncation_error(v: &[f32], m: usize, n: usize, r: usize) -> f64 {
    let a = nalgebra::DMatrix::<f64>::from_fn(m, n, |i, j| f64::from(v[i * n + j]));
    let s = a.singular_values();
    let mut sv: Vec<f64> = s.iter().copied().collect();
    sv.sort_by(|x, y| y.total_cmp(x));
    sv.iter().skip(r).map(|x| x * x).sum::<f64>().sqrt()
}

#[test]
fn factor_block_heals_within_the_low_rank_error() {
    let s = mem_store();
    // Shape [32, 16]: each 256-element block is a 16 x 16 matrix (n = last dim).
    let shape = [32u32, 16];
    let info = BlockInfo {
        dtype: DType::F32,
        shape: &shape,
        lineage_parent: 0,
        reconstruct: ReconstructPolicy::Factor,
        kind: tensorvault_store::TensorKind::Generic,
    };
    // Rank 3 data, factors of rank 8 (the default): U * V reproduces it up to f32
    // rounding.
    let exact = low_rank(32, 16, 3);
    let t = s
        .put_tensor_with("exact", &info, &f32_bytes(&exact), Tier::Tier0)
        .unwrap();
    let st = s.lineage().stats().unwrap();
    assert_eq!(st.factor_entries, 2);
    heal_and_check(&s, t.tensor_id, 1e-4);

    // Full-rank data with rank-2 factors: the healed block's error is the truncation
    // error ||A - A_2||_F (Eckart-Young), stated per block as a Frobenius norm.
    s.lineage().set_config(LineageConfig {
        factor_rank: 2,
        ..LineageConfig::default()
    });
    let full = noise(512, 9);
    let t = s
        .put_tensor_with("full", &info, &f32_bytes(&full), Tier::Tier0)
        .unwrap();
    let key = BlockKey::new(t.tensor_id, 1);
    corrupt(&s, key);
    let mut out = Vec::new();
    s.get_block(&key, &mut out).unwrap();
    let got = f32_from(&out);
    let want = &full[256..];
    let fro = got
        .iter()
        .zip(want)
        .map(|(a, b)| f64::from(a - b).powi(2))
        .sum::<f64>()
        .sqrt();
    let bound = truncation_error(want, 16, 16, 2);
    assert!(bound > 0.1, "the data is not low rank: {bound}");
    assert!(
        (fro - bound).abs() <= 1e-3 * (1.0 + bound),
        "healed error {fro}, truncation error {bound}"
    );
    assert_eq!(s.repairs(), 2);
    assert!(s.verify().unwrap().problems.is_empty());
}

#[test]
#[cfg(feature = "mmap")]
fn factor_repair_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let shape = [16u32, 16];
    let info = BlockInfo {
        dtype: DType::F16,
        shape: &shape,
        lineage_parent: 0,
        reconstruct: ReconstructPolicy::Factor,
        kind: tensorvault_store::TensorKind::Generic,
    };
    let vals = low_rank(16, 16, 2);
    let data: Vec<u8> = vals
        .iter()
        .flat_map(|v| half::f16::from_f32(*v).to_bits().to_le_bytes())
        .collect();
    let (id, healed) = {
        let s = dir_store(dir.path());
        let t = s.put_tensor_with("f", &info, &data, Tier::Tier1).unwrap();
        let key = BlockKey::new(t.tensor_id, 0);
        let mut before = Vec::new();
        s.get_block(&key, &mut before).unwrap();
        corrupt(&s, key);
        let mut after = Vec::new();
        s.get_block(&key, &mut after).unwrap();
        assert_eq!(s.repairs(), 1);
        // f16 elements, Tier1: within one Tier1 step of what was stored.
        let step = max_abs(&vals) / 127.0;
        let dec = |b: &[u8]| -> Vec<f32> {
            b.chunks_exact(2)
                .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect()
        };
        assert!(max_abs_diff(&dec(&before), &dec(&after)) <= step);
        (t.tensor_id, after)
    };
    assert!(dir.path().join("t/c/factor.dat").is_file());
    let s = dir_store(dir.path());
    assert!(s.verify().unwrap().problems.is_empty());
    let mut again = Vec::new();
    s.get_block(&BlockKey::new(id, 0), &mut again).unwrap();
    assert_eq!(again, healed);
    assert_eq!(s.repairs(), 0);
}

fn expect_corruption(r: tensorvault_store::Result<BlockKey>, key: BlockKey) {
    match r {
        Err(StoreErr::Corruption { key: k, .. }) => assert_eq!(k, key),
        other => panic!("expected Corruption of {key}, got {other:?}"),
    }
}

fn get<C: Clock, B: BlockIO, M: MetaLog>(
    s: &TensorStore<C, B, M>,
    key: BlockKey,
) -> tensorvault_store::Result<BlockKey> {
    s.get_block(&key, &mut Vec::new()).map(|m| m.key)
}

#[test]
#[cfg(feature = "mmap")]
fn corrupt_block_and_corrupt_delta_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir_store(dir.path());
    let base = wave(ELEMS as usize, 0.2);
    let child: Vec<f32> = base.iter().map(|b| b - 0.5).collect();
    let (_, id) = put_pair(&s, &base, &child, Tier::Tier1);
    let key = BlockKey::new(id, 0);
    corrupt(&s, key);
    // The one entry's payload starts right after the file and entry headers.
    let path = dir.path().join("t/c/delta.dat");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[FILE_HEADER_LEN + ENTRY_HEADER_LEN + 7] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    expect_corruption(get(&s, key), key);
    assert!(s.get_tensor_by_id(id).unwrap_err().is_corruption());
    assert_eq!(s.repairs(), 0);
    assert_eq!(s.verify().unwrap().problems.len(), 1);
    // A damaged entry header: the same.
    bytes[FILE_HEADER_LEN + ENTRY_HEADER_LEN + 7] ^= 0x01;
    bytes[FILE_HEADER_LEN + 10] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    expect_corruption(get(&s, key), key);
    drop(s);
    // Reopen: the scan skips the bad entry; still Corruption, nothing panics.
    let s = dir_store(dir.path());
    assert_eq!(s.lineage().stats().unwrap().delta_entries, 0);
    expect_corruption(get(&s, key), key);
}

#[test]
fn no_usable_lineage_is_corruption() {
    let base = wave(ELEMS as usize, 0.4);
    let child: Vec<f32> = base.iter().map(|b| b * 2.0).collect();

    // Parent deleted.
    let s = mem_store();
    let (_, id) = put_pair(&s, &base, &child, Tier::Tier0);
    s.delete_tensor("base").unwrap();
    let key = BlockKey::new(id, 0);
    corrupt(&s, key);
    expect_corruption(get(&s, key), key);

    // Parent replaced by another version after the delta was taken.
    let s = mem_store();
    let (_, id) = put_pair(&s, &base, &child, Tier::Tier0);
    s.clock().advance(1);
    s.put_tensor(
        "base",
        DType::F32,
        &[ELEMS],
        &f32_bytes(&child),
        Tier::Tier0,
    )
    .unwrap();
    let key = BlockKey::new(id, 0);
    corrupt(&s, key);
    expect_corruption(get(&s, key), key);

    // Parent corrupt and self-contained (policy None).
    let s = mem_store();
    let (pid, id) = put_pair(&s, &base, &child, Tier::Tier0);
    corrupt(&s, BlockKey::new(pid, 0));
    let key = BlockKey::new(id, 0);
    corrupt(&s, key);
    expect_corruption(get(&s, key), key);

    // Lineage files lost (an in-memory host that did not persist them).
    let s = mem_store();
    let (_, id) = put_pair(&s, &base, &child, Tier::Tier0);
    let s = s.with_lineage_store(LineageStore::in_memory());
    let key = BlockKey::new(id, 0);
    corrupt(&s, key);
    expect_corruption(get(&s, key), key);
    assert_eq!(s.repairs(), 0);

    // A block without a policy never heals.
    let s = mem_store();
    let (pid, _) = put_pair(&s, &base, &child, Tier::Tier0);
    let key = BlockKey::new(pid, 0);
    corrupt(&s, key);
    expect_corruption(get(&s, key), key);
}

#[test]
fn put_needs_an_existing_parent_block() {
    let s = mem_store();
    let shape = [ELEMS];
    let data = f32_bytes(&wave(ELEMS as usize, 0.0));
    let e = s
        .put_tensor_with("orphan", &delta_info(&shape, 0), &data, Tier::Tier0)
        .unwrap_err();
    assert!(
        matches!(
            e,
            StoreErr::InvalidArgument {
                field: "lineage_parent",
                ..
            }
        ),
        "{e}"
    );
    let e = s
        .put_tensor_with("orphan", &delta_info(&shape, 12345), &data, Tier::Tier0)
        .unwrap_err();
    assert!(
        matches!(
            e,
            StoreErr::InvalidArgument {
                field: "lineage_parent",
                ..
            }
        ),
        "{e}"
    );
    // A parent with a shorter block.
    let p = s
        .put_tensor(
            "short",
            DType::F32,
            &[10],
            &f32_bytes(&[1.0; 10]),
            Tier::Tier0,
        )
        .unwrap();
    let e = s
        .put_tensor_with(
            "child",
            &delta_info(&shape, p.tensor_id),
            &data,
            Tier::Tier0,
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            StoreErr::InvalidArgument {
                field: "lineage_parent",
                ..
            }
        ),
        "{e}"
    );
}

/// `n` Delta tensors chained on a root; returns their ids, root first.
fn chain(s: &MemStore, n: usize) -> Vec<u128> {
    let shape = [ELEMS];
    let mut vals = wave(ELEMS as usize, 0.1);
    let root = s
        .put_tensor("root", DType::F32, &shape, &f32_bytes(&vals), Tier::Tier0)
        .unwrap();
    let mut ids = vec![root.tensor_id];
    for i in 0..n {
        vals[i % ELEMS as usize] += 1.0;
        let t = s
            .put_tensor_with(
                &format!("link{i}"),
                &delta_info(&shape, *ids.last().unwrap()),
                &f32_bytes(&vals),
                Tier::Tier0,
            )
            .unwrap();
        ids.push(t.tensor_id);
    }
    ids
}

#[test]
fn corrupt_chains_heal_up_to_the_depth_limit() {
    // Three corrupt links on an intact root: all healed, each repaired.
    let s = mem_store();
    let ids = chain(&s, 3);
    let want: Vec<Vec<f32>> = ids.iter().map(|id| read(&s, *id)).collect();
    for id in &ids[1..] {
        corrupt(&s, BlockKey::new(*id, 0));
    }
    assert_eq!(read(&s, ids[3]), want[3]);
    assert_eq!(s.repairs(), 3);
    assert!(s.verify().unwrap().problems.is_empty());
    assert_eq!(read(&s, ids[2]), want[2]);

    // Ten corrupt links: healing the last needs 9 corrupt ancestors rebuilt, above the
    // default limit of 8.
    let s = mem_store();
    let ids = chain(&s, 10);
    let want = read(&s, ids[10]);
    for id in &ids[1..] {
        corrupt(&s, BlockKey::new(*id, 0));
    }
    let last = BlockKey::new(ids[10], 0);
    match get(&s, last) {
        Err(e @ StoreErr::LineageTooDeep { limit: 8, .. }) => assert!(e.is_corruption()),
        other => panic!("expected LineageTooDeep, got {other:?}"),
    }
    assert_eq!(
        s.repairs(),
        0,
        "nothing is repaired when the chain is refused"
    );
    s.lineage().set_config(LineageConfig {
        max_chain_depth: 9,
        ..LineageConfig::default()
    });
    assert_eq!(read(&s, ids[10]), want);
    assert_eq!(s.repairs(), 10);
}

#[test]
fn lineage_cycles_are_detected() {
    let s = mem_store();
    let shape = [ELEMS];
    let (a, b) = (BlockKey::new(0xA, 0), BlockKey::new(0xB, 0));
    let va = f32_bytes(&wave(ELEMS as usize, 0.0));
    let vb = f32_bytes(&wave(ELEMS as usize, 1.0));
    s.put_block(b, Tier::Tier0, &BlockInfo::new(DType::F32, &shape), &vb)
        .unwrap();
    s.put_block(a, Tier::Tier0, &delta_info(&shape, 0xB), &va)
        .unwrap();
    // Same tick: b's replacement keeps the created_at a's delta was taken against (a
    // later replacement would make a's delta stale, and its repair refused).
    s.put_block(b, Tier::Tier0, &delta_info(&shape, 0xA), &vb)
        .unwrap();
    // One of the two corrupt: it heals from the other.
    corrupt(&s, a);
    assert_eq!(get(&s, a).unwrap(), a);
    assert_eq!(s.repairs(), 1);
    // Both corrupt: a -> b -> a.
    corrupt(&s, a);
    corrupt(&s, b);
    match get(&s, a) {
        Err(StoreErr::LineageCycle { key, tensor_id }) => {
            assert_eq!((key, tensor_id), (b, 0xA));
        }
        other => panic!("expected LineageCycle, got {other:?}"),
    }
    // A block that is its own parent.
    let c = BlockKey::new(0xC, 0);
    s.put_block(c, Tier::Tier0, &delta_info(&shape, 0xB), &va)
        .unwrap_err(); // b is corrupt and cannot be healed: the put is refused
    s.put_block(c, Tier::Tier0, &BlockInfo::new(DType::F32, &shape), &va)
        .unwrap();
    s.put_block(c, Tier::Tier0, &delta_info(&shape, 0xC), &va)
        .unwrap();
    corrupt(&s, c);
    assert!(matches!(get(&s, c), Err(StoreErr::LineageCycle { .. })));
}

#[test]
fn lineage_garbage_is_reclaimed() {
    let s = mem_store();
    let base = wave(ELEMS as usize, 0.5);
    let mut child = base.clone();
    let (_, id) = put_pair(&s, &base, &child, Tier::Tier1);
    let shape = [ELEMS];
    let pid = s.tensor_id_of("base");
    for i in 0..20 {
        child[i] += 0.5;
        s.put_tensor_with(
            "child",
            &delta_info(&shape, pid),
            &f32_bytes(&child),
            Tier::Tier1,
        )
        .unwrap();
        let st = s.lineage().stats().unwrap();
        assert_eq!(st.delta_entries, 1);
        assert!(st.delta_garbage <= st.delta_bytes / 2, "{st:?}");
    }
    // The latest delta is the one used (an older one would be off by 0.5 somewhere).
    let want = read(&s, id);
    corrupt(&s, BlockKey::new(id, 0));
    assert!(max_abs_diff(&read(&s, id), &want) < 0.05);
    // Deleted blocks' entries go at compaction.
    // (`delete_tensor` looks names up without lineage: delete the child's block by key.)
    assert!(s.delete_block(&BlockKey::new(id, 0)).unwrap());
    s.compact().unwrap();
    let st = s.lineage().stats().unwrap();
    assert_eq!((st.delta_entries, st.delta_garbage), (0, 0));
    assert_eq!(st.delta_bytes, FILE_HEADER_LEN as u64);
}

#[test]
fn in_memory_lineage_round_trips_through_its_hook() {
    let s = mem_store();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    s.lineage()
        .set_persist_hook(tensorvault_store::lineage::SideKind::Delta, move |b| {
            *sink.lock().unwrap() = b.to_vec();
        })
        .unwrap();
    let base = wave(ELEMS as usize, 0.5);
    let child: Vec<f32> = base.iter().map(|b| b + 1.0).collect();
    let (_, id) = put_pair(&s, &base, &child, Tier::Tier0);
    s.flush().unwrap();
    let persisted = seen.lock().unwrap().clone();
    assert_eq!(
        persisted,
        s.lineage()
            .to_bytes(tensorvault_store::lineage::SideKind::Delta)
            .unwrap()
    );
    // A host restoring the bytes gets a working lineage back.
    let restored = LineageStore::from_bytes(persisted, Vec::new()).unwrap();
    assert_eq!(restored.stats().unwrap().delta_entries, 1);
    let s = s.with_lineage_store(restored);
    let want = read(&s, id);
    corrupt(&s, BlockKey::new(id, 0));
    // A constant delta of 1.0 is quantized: within half an 8-bit step.
    assert!(max_abs_diff(&read(&s, id), &want) <= 1.0 / 127.0 / 2.0 * 1.05);
    assert_eq!(s.repairs(), 1);
    assert!(LineageStore::from_bytes(vec![1, 2, 3], Vec::new()).is_err());
}

/// Repair latency of one 16 KiB block (4096 f32, Tier0, sparse delta), median of 50,
/// with fsync on every write and with `Durability::Os`. Run with
/// `cargo test --release -p tensorvault-store --test reconstruct -- --nocapture`.
#[test]
#[cfg(feature = "mmap")]
fn repair_latency_of_a_16k_block() {
    for durability in [
        tensorvault_store::Durability::EveryWrite,
        tensorvault_store::Durability::Os,
    ] {
        repair_latency(durability);
    }
}

#[cfg(feature = "mmap")]
fn repair_latency(durability: tensorvault_store::Durability) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        durability,
        ..StoreConfig::default() // 4096-element blocks
    };
    let s = DirStore::open_dir(
        dir.path(),
        "t",
        "c",
        Arc::new(ManualClock::new(1)),
        cfg,
        true,
    )
    .unwrap();
    let base = wave(4096, 0.1);
    let mut child = base.clone();
    child[7] = 3.0;
    let shape = [4096u32];
    let b = s
        .put_tensor("base", DType::F32, &shape, &f32_bytes(&base), Tier::Tier0)
        .unwrap();
    let c = s
        .put_tensor_with(
            "child",
            &delta_info(&shape, b.tensor_id),
            &f32_bytes(&child),
            Tier::Tier0,
        )
        .unwrap();
    let key = BlockKey::new(c.tensor_id, 0);
    let mut out = Vec::new();
    let mut times = Vec::new();
    for _ in 0..50 {
        corrupt(&s, key);
        let t = std::time::Instant::now();
        s.get_block(&key, &mut out).unwrap();
        times.push(t.elapsed());
    }
    assert_eq!(s.repairs(), 50);
    assert_eq!(f32_from(&out), child);
    times.sort();
    println!(
        "repair of a 16 KiB Delta block ({durability:?}): p50 {:?}, p90 {:?}",
        times[25], times[45]
    );
}

/// Compaction at open (`compact_ratio`) cleans the directory's lineage side files too: it
/// used to run while an in-memory placeholder lineage store was installed, so delta.dat
/// kept every dead entry.
#[cfg(feature = "mmap")]
#[test]
fn compaction_at_open_cleans_the_lineage_files() {
    let dir = tempfile::tempdir().unwrap();
    let delta = dir.path().join("t").join("c").join("delta.dat");
    let child_id;
    {
        let s = dir_store(dir.path());
        let base = wave(ELEMS as usize, 0.5);
        let mut child = base.clone();
        child_id = put_pair(&s, &base, &child, Tier::Tier1).1;
        let pid = s.tensor_id_of("base");
        for i in 0..10 {
            child[i] += 0.5;
            s.put_tensor_with(
                "child",
                &delta_info(&[ELEMS], pid),
                &f32_bytes(&child),
                Tier::Tier1,
            )
            .unwrap();
        }
        assert!(s.delete_block(&BlockKey::new(child_id, 0)).unwrap());
        s.close().unwrap();
    }
    let before = std::fs::metadata(&delta).unwrap().len();
    assert!(before > FILE_HEADER_LEN as u64, "{before}");
    let cfg = StoreConfig {
        compact_ratio: 1,
        ..cfg()
    };
    let s = DirStore::open_dir(
        dir.path(),
        "t",
        "c",
        Arc::new(ManualClock::new(200)),
        cfg,
        false,
    )
    .unwrap();
    let st = s.lineage().stats().unwrap();
    assert_eq!((st.delta_entries, st.delta_garbage), (0, 0), "{st:?}");
    drop(s);
    assert_eq!(
        std::fs::metadata(&delta).unwrap().len(),
        FILE_HEADER_LEN as u64
    );
}
