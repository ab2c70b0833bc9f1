//! Corruption suite (issue 5, "Reliability"): single bit flips at seeded random positions
//! in the files of a closed directory store, each followed by a reopen and a full check.
//!
//! The fixture is a small store (256-element blocks) with blocks in every tier, replaced,
//! migrated and deleted blocks (so tier files hold free slots and slot padding), two
//! named tensors and Access records in the log. Every trial restores the pristine files,
//! flips one bit and checks:
//!
//! - tier file, inside a live block's payload: `get_block` returns
//!   `StoreErr::Corruption` naming exactly that block (tier, offset, expected CRC),
//!   `verify()` reports exactly that block, `migrate_block` refuses to re-encode it,
//!   `get_tensor` of its tensor fails as corruption, every other block reads back
//!   bit-exact; anywhere else (slot padding, free slots): nothing changes at all;
//! - `meta.log` header: the open fails with a typed `BadHeader` error;
//! - a `meta.log` record: replay drops exactly that record. The reopened index equals a
//!   model replay of the pristine records without it (`SkipAnyCorruptedRecords`) or up
//!   to it (`PointInTime`), the replay statistics say so, blocks the lost record did not
//!   touch read back bit-exact, the others read as one of their earlier contents or
//!   report `Corruption`, and the store takes new writes that survive another reopen;
//! - `names.log`: a record flip loses at most that name, a header flip is `BadHeader`;
//!   blocks are unaffected.
//!
//! Nothing may panic. Default: 300 flips; `TV_STORE_LONG=1`: 5000. `TV_STORE_SEED`
//! overrides the seed (printed by the test).
#![cfg(feature = "mmap")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{block_data, long_mode, mix, seed_or, store_config, Rng, BLOCK_ELEMS};
use tensorvault_core::checksum::crc32c;
use tensorvault_store::meta_log::decode_record;
use tensorvault_store::meta_log::layout::RECORD_LEN;
use tensorvault_store::{
    BlockInfo, BlockKey, BlockMeta, DType, DirStore, MetaRecord, RecoveryMode, StoreConfig,
    StoreErr, Tier,
};

const TENANT: &str = "flip";
const COLL: &str = "c";
const NAMES: [&str; 2] = ["weights", "kv"];
const FILES: [&str; 6] = [
    "meta.log",
    "names.log",
    "tier0.dat",
    "tier1.dat",
    "tier2.dat",
    "tier3.dat",
];

/// The pristine store and everything known about it.
struct Fixture {
    /// File name -> bytes.
    files: BTreeMap<&'static str, Vec<u8>>,
    /// Live blocks as of close.
    metas: BTreeMap<BlockKey, BlockMeta>,
    /// What each live block reads back as.
    reference: BTreeMap<BlockKey, Vec<u8>>,
    /// Every content each key ever read back as (for blocks a lost log record revives).
    history: BTreeMap<BlockKey, Vec<Vec<u8>>>,
    /// The log's records, in order.
    records: Vec<MetaRecord>,
    /// Tensor id -> name of the named tensors.
    names: BTreeMap<u128, &'static str>,
}

fn cfg(recovery: RecoveryMode) -> StoreConfig {
    StoreConfig {
        recovery,
        ..store_config()
    }
}

fn open(root: &Path, recovery: RecoveryMode) -> tensorvault_store::Result<DirStore> {
    DirStore::open_path(root, TENANT, COLL, cfg(recovery), false)
}

fn dir_of(root: &Path) -> std::path::PathBuf {
    common::coll_dir(root, TENANT, COLL)
}

fn read_back(store: &DirStore, key: &BlockKey) -> tensorvault_store::Result<Vec<u8>> {
    let mut out = Vec::new();
    store.get_block(key, &mut out).map(|_| out)
}

/// Build the fixture store with seeded operations.
fn build_fixture(seed: u64) -> Fixture {
    let tmp = common::scratch_dir("flip-build");
    let root = tmp.path();
    let mut rng = Rng::new(mix(seed ^ 0xF1F1));
    let mut history: BTreeMap<BlockKey, Vec<Vec<u8>>> = BTreeMap::new();
    let mut names = BTreeMap::new();
    {
        let store = DirStore::open_path(root, TENANT, COLL, cfg(RecoveryMode::default()), true)
            .expect("create the fixture store");
        let mut note = |store: &DirStore, key: BlockKey| {
            let b = read_back(store, &key).expect("fixture read");
            history.entry(key).or_default().push(b);
        };
        for step in 0..90u64 {
            let live: Vec<BlockKey> = store.blocks().unwrap().iter().map(|m| m.key).collect();
            let roll = rng.below(100);
            if roll < 50 || live.len() < 8 {
                let key = BlockKey::new(u128::from(rng.range(1, 6)), rng.below(6) as u32);
                let n = rng.range(1, u64::from(BLOCK_ELEMS));
                let data = block_data(mix(seed ^ step), n as usize);
                store
                    .put_block(
                        key,
                        rng.tier(),
                        &BlockInfo::new(DType::F32, &[n as u32]),
                        &data,
                    )
                    .unwrap();
                note(&store, key);
            } else if roll < 70 {
                let key = live[rng.below(live.len() as u64) as usize];
                let cur = store.meta(&key).unwrap().unwrap().tier;
                store.migrate_block(&key, rng.other_tier(cur)).unwrap();
                note(&store, key);
            } else if roll < 82 {
                let key = live[rng.below(live.len() as u64) as usize];
                assert!(store.delete_block(&key).unwrap());
            } else {
                for _ in 0..3 {
                    let key = live[rng.below(live.len() as u64) as usize];
                    read_back(&store, &key).unwrap();
                }
            }
        }
        for (i, name) in NAMES.iter().enumerate() {
            for version in 0..2u64 {
                let n = rng.range(u64::from(BLOCK_ELEMS) + 1, 4 * u64::from(BLOCK_ELEMS));
                let data = block_data(mix(seed ^ (1000 + 10 * i as u64 + version)), n as usize);
                let info = store
                    .put_tensor(name, DType::F32, &[n as u32], &data, rng.tier())
                    .unwrap();
                names.insert(info.tensor_id, *name);
                for b in 0..info.blocks as u32 {
                    note(&store, BlockKey::new(info.tensor_id, b));
                }
            }
        }
        store.close().unwrap();
    }
    let dir = dir_of(root);
    let files: BTreeMap<&'static str, Vec<u8>> = FILES
        .iter()
        .map(|f| (*f, std::fs::read(dir.join(f)).expect("read a store file")))
        .collect();
    let log = &files["meta.log"];
    assert_eq!(log.len() % RECORD_LEN, 0, "fixture log is whole records");
    let records = log[RECORD_LEN..]
        .chunks_exact(RECORD_LEN)
        .enumerate()
        .map(|(i, c)| {
            let mut b = [0u8; RECORD_LEN];
            b.copy_from_slice(c);
            decode_record(&b, ((i + 1) * RECORD_LEN) as u64).expect("pristine record")
        })
        .collect();
    let store = open(root, RecoveryMode::default()).unwrap();
    let metas: BTreeMap<BlockKey, BlockMeta> = store
        .blocks()
        .unwrap()
        .into_iter()
        .map(|m| (m.key, m))
        .collect();
    let reference = metas
        .keys()
        .map(|k| (*k, read_back(&store, k).expect("pristine read")))
        .collect();
    assert!(store.verify().unwrap().problems.is_empty());
    let counts = store.tier_counts().unwrap();
    assert!(
        counts.iter().all(|&c| c > 0),
        "fixture covers every tier: {counts:?}"
    );
    Fixture {
        files,
        metas,
        reference,
        history,
        records,
        names,
    }
}

/// The index a replay of `records` builds, leaving out record `lost` and, in point-in-time
/// mode, everything after it. Mirrors the engine's rules for records that no longer apply.
fn model_replay(
    records: &[MetaRecord],
    lost: usize,
    mode: RecoveryMode,
) -> BTreeMap<BlockKey, BlockMeta> {
    let mut idx: BTreeMap<BlockKey, BlockMeta> = BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        if i == lost {
            if mode == RecoveryMode::PointInTime {
                break;
            }
            continue;
        }
        match *r {
            MetaRecord::Create { meta } => {
                idx.insert(meta.key, meta);
            }
            MetaRecord::Access {
                key,
                last_access_at,
                access_count,
                ema_access_rate,
                access_window,
            } => {
                if let Some(m) = idx.get_mut(&key) {
                    m.last_access_at = last_access_at;
                    m.access_count = access_count;
                    m.ema_access_rate = ema_access_rate;
                    m.access_window = access_window;
                }
            }
            MetaRecord::Migrate {
                key,
                old_tier,
                new_tier,
                new_bits,
                new_scale,
                new_checksum,
                new_data_offset,
                new_data_len,
                at,
            } => {
                if let Some(m) = idx.get_mut(&key).filter(|m| m.tier == old_tier) {
                    m.tier = new_tier;
                    m.bits = new_bits;
                    m.scale = new_scale;
                    m.checksum = new_checksum;
                    m.data_offset = new_data_offset;
                    m.data_len = new_data_len;
                    m.tier_since = at;
                }
            }
            MetaRecord::Delete { key } => {
                idx.remove(&key);
            }
        }
    }
    idx
}

/// The engine's rule for blocks a lost record leaves on one slot: of each group, the
/// first key whose checksum matches the slot's bytes keeps it (else the first key).
fn resolve_shared_slots(fx: &Fixture, idx: &mut BTreeMap<BlockKey, BlockMeta>) {
    let mut by_slot: BTreeMap<(Tier, u64), Vec<BlockKey>> = BTreeMap::new();
    for m in idx.values() {
        by_slot
            .entry((m.tier, m.data_offset))
            .or_default()
            .push(m.key);
    }
    for keys in by_slot.into_values().filter(|k| k.len() > 1) {
        let matches = |m: &BlockMeta| {
            let file = &fx.files[m.tier.file_name()];
            let (a, b) = (
                m.data_offset as usize,
                m.data_offset as usize + m.data_len as usize,
            );
            file.get(a..b).is_some_and(|p| crc32c(p) == m.checksum)
        };
        let keep = keys
            .iter()
            .copied()
            .find(|k| matches(&idx[k]))
            .unwrap_or(keys[0]);
        for k in keys.into_iter().filter(|k| *k != keep) {
            idx.remove(&k);
        }
    }
}

fn same_slot(a: &BlockMeta, b: &BlockMeta) -> bool {
    (a.tier, a.data_offset, a.data_len, a.checksum)
        == (b.tier, b.data_offset, b.data_len, b.checksum)
}

fn restore(fx: &Fixture, root: &Path) {
    let dir = dir_of(root);
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(dir.join("meta.log.compact"));
    for (name, bytes) in &fx.files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

fn flip(root: &Path, file: &str, pos: u64, bit: u32) {
    let path = dir_of(root).join(file);
    let mut b = std::fs::read(&path).unwrap();
    b[pos as usize] ^= 1 << bit;
    std::fs::write(&path, b).unwrap();
}

fn index_of(store: &DirStore) -> BTreeMap<BlockKey, BlockMeta> {
    store
        .blocks()
        .unwrap()
        .into_iter()
        .map(|m| (m.key, m))
        .collect()
}

#[derive(Default, Debug)]
struct Tally {
    payload: u64,
    tier_elsewhere: u64,
    log_header: u64,
    log_skip: u64,
    log_point_in_time: u64,
    log_tail: u64,
    log_changed_blocks: u64,
    names: u64,
}

/// A flip in a tier file.
fn tier_trial(fx: &Fixture, root: &Path, rng: &mut Rng, tally: &mut Tally, ctx: &str) {
    let tiers: Vec<(Tier, u64)> = Tier::ALL
        .iter()
        .map(|t| (*t, fx.files[t.file_name()].len() as u64))
        .filter(|(_, len)| *len > 0)
        .collect();
    let total: u64 = tiers.iter().map(|(_, l)| l).sum();
    // Half the time aim at a live payload (tier files are mostly free slots).
    let mut pos = if rng.pct(60) {
        let metas: Vec<&BlockMeta> = fx.metas.values().collect();
        let m = metas[rng.below(metas.len() as u64) as usize];
        let before: u64 = tiers
            .iter()
            .take_while(|(t, _)| *t != m.tier)
            .map(|(_, l)| l)
            .sum();
        before + m.data_offset + rng.below(u64::from(m.data_len))
    } else {
        rng.below(total)
    };
    let (tier, _) = *tiers
        .iter()
        .find(|(_, l)| {
            if pos < *l {
                true
            } else {
                pos -= l;
                false
            }
        })
        .unwrap();
    let bit = rng.below(8) as u32;
    let ctx = format!("{ctx}: {} byte {pos} bit {bit}", tier.file_name());
    flip(root, tier.file_name(), pos, bit);
    let victim = fx
        .metas
        .values()
        .find(|m| {
            m.tier == tier && pos >= m.data_offset && pos < m.data_offset + u64::from(m.data_len)
        })
        .copied();
    let store = open(root, RecoveryMode::default()).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
    assert!(index_of(&store) == fx.metas, "{ctx}: index changed");
    let report = store.verify().unwrap();
    match &victim {
        Some(v) => {
            tally.payload += 1;
            assert_eq!(report.problems.len(), 1, "{ctx}: {:?}", report.problems);
            let p = &report.problems[0];
            assert_eq!(
                (p.key, p.tier, p.offset),
                (v.key, v.tier, v.data_offset),
                "{ctx}"
            );
        }
        None => {
            tally.tier_elsewhere += 1;
            assert!(report.problems.is_empty(), "{ctx}: {:?}", report.problems);
        }
    }
    for (k, m) in &fx.metas {
        let got = read_back(&store, k);
        if victim.is_some_and(|v| v.key == *k) {
            match got {
                Err(StoreErr::Corruption {
                    key,
                    tier,
                    offset,
                    expected,
                    actual,
                }) => {
                    assert_eq!(
                        (key, tier, offset, expected),
                        (*k, m.tier, m.data_offset, m.checksum),
                        "{ctx}"
                    );
                    assert_ne!(actual, expected, "{ctx}");
                }
                other => panic!(
                    "{ctx}: corrupt block {k} read as {:?}",
                    other.map(|b| b.len())
                ),
            }
        } else {
            let b = got.unwrap_or_else(|e| panic!("{ctx}: block {k}: {e}"));
            assert!(
                b == fx.reference[k],
                "{ctx}: block {k} reads back different bytes"
            );
        }
    }
    if let Some(v) = victim {
        let err = store
            .migrate_block(&v.key, rng.other_tier(v.tier))
            .expect_err("migrating a corrupt block must fail");
        assert!(
            matches!(err, StoreErr::Corruption { .. }),
            "{ctx}: migrate: {err}"
        );
        assert!(
            index_of(&store)[&v.key] == v,
            "{ctx}: failed migration changed the block"
        );
        if let Some(name) = fx.names.get(&v.key.tensor_id) {
            let err = store
                .get_tensor(name)
                .expect_err("a corrupt tensor must fail");
            assert!(err.is_corruption(), "{ctx}: get_tensor: {err}");
        }
        assert!(store.stats().unwrap().checksum_failures >= 1, "{ctx}");
    }
}

/// A flip in `meta.log`.
fn log_trial(fx: &Fixture, root: &Path, rng: &mut Rng, tally: &mut Tally, ctx: &str) {
    let len = fx.files["meta.log"].len() as u64;
    // The header is 1 record in ~200: aim at it now and then.
    let pos = if rng.pct(5) {
        rng.below(RECORD_LEN as u64)
    } else {
        rng.below(len)
    };
    let bit = rng.below(8) as u32;
    let mode = if rng.pct(50) {
        RecoveryMode::SkipAnyCorruptedRecords
    } else {
        RecoveryMode::PointInTime
    };
    let ctx = format!("{ctx}: meta.log byte {pos} bit {bit} ({mode:?})");
    flip(root, "meta.log", pos, bit);
    let rec = pos / RECORD_LEN as u64;
    if rec == 0 {
        tally.log_header += 1;
        match open(root, mode) {
            Err(StoreErr::BadHeader { .. }) => return,
            Err(e) => panic!("{ctx}: header flip gave {e}, not BadHeader"),
            Ok(_) => panic!("{ctx}: a store with a corrupt log header opened"),
        }
    }
    let lost = (rec - 1) as usize;
    let last = lost + 1 == fx.records.len();
    let lost_at = rec * RECORD_LEN as u64;
    let store = open(root, mode).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
    let (stats, _) = store.replay_stats();
    match mode {
        RecoveryMode::PointInTime => {
            tally.log_point_in_time += 1;
            assert_eq!(stats.stopped_at, Some(lost_at), "{ctx}: {stats:?}");
            assert_eq!(stats.truncated_bytes, len - lost_at, "{ctx}: {stats:?}");
        }
        _ if last => {
            tally.log_tail += 1;
            assert_eq!(stats.skipped_total, 0, "{ctx}: {stats:?}");
            assert_eq!(stats.truncated_bytes, RECORD_LEN as u64, "{ctx}: {stats:?}");
        }
        _ => {
            tally.log_skip += 1;
            assert_eq!(stats.skipped_total, 1, "{ctx}: {stats:?}");
            assert_eq!(
                stats.skipped.first().map(|s| s.0),
                Some(lost_at),
                "{ctx}: {stats:?}"
            );
            assert_eq!(stats.truncated_bytes, 0, "{ctx}: {stats:?}");
        }
    }
    let mut want = model_replay(&fx.records, lost, mode);
    resolve_shared_slots(fx, &mut want);
    let got = index_of(&store);
    if got != want {
        let keys: BTreeSet<&BlockKey> = got.keys().chain(want.keys()).collect();
        let diff: Vec<String> = keys
            .into_iter()
            .filter(|k| got.get(k) != want.get(k))
            .map(|k| format!("{k}: got {:?}\n   want {:?}", got.get(k), want.get(k)))
            .collect();
        panic!(
            "{ctx}: lost record {lost} ({:?}) but the index differs from the model:\n{}",
            fx.records[lost],
            diff.join("\n")
        );
    }
    let mut changed = BTreeSet::new();
    for (k, m) in &want {
        let got = read_back(&store, k);
        if fx.metas.get(k).is_some_and(|p| same_slot(p, m)) {
            let b = got.unwrap_or_else(|e| panic!("{ctx}: untouched block {k}: {e}"));
            assert!(
                b == fx.reference[k],
                "{ctx}: untouched block {k} reads different bytes"
            );
        } else {
            changed.insert(*k);
            match got {
                Ok(b) => assert!(
                    fx.history.get(k).is_some_and(|h| h.contains(&b)),
                    "{ctx}: block {k} revived by the lost record reads bytes it never held"
                ),
                Err(StoreErr::Corruption { .. }) => {}
                Err(e) => panic!("{ctx}: block {k} revived by the lost record: {e}"),
            }
        }
    }
    if !changed.is_empty() {
        tally.log_changed_blocks += 1;
    }
    let report = store.verify().unwrap();
    for p in &report.problems {
        assert!(
            changed.contains(&p.key),
            "{ctx}: verify reports untouched block {}",
            p.key
        );
    }
    // New writes land after the cut (or after the skipped record) and replay.
    if rng.pct(30) {
        let key = BlockKey::new(0xBEEF, rng.below(4) as u32);
        let data = block_data(rng.next_u64(), 100);
        let tier = rng.tier();
        store
            .put_block(key, tier, &BlockInfo::new(DType::F32, &[100]), &data)
            .unwrap_or_else(|e| panic!("{ctx}: write after recovery: {e}"));
        let want_bytes = read_back(&store, &key).unwrap();
        drop(store);
        let store = open(root, mode).unwrap_or_else(|e| panic!("{ctx}: second open: {e}"));
        assert!(
            read_back(&store, &key).ok() == Some(want_bytes),
            "{ctx}: write after recovery lost on reopen"
        );
        let again = index_of(&store);
        for (k, m) in &want {
            assert!(
                again.get(k).is_some_and(|a| same_slot(a, m)),
                "{ctx}: block {k} changed on the second open"
            );
        }
        assert_eq!(
            again.len(),
            want.len() + usize::from(!want.contains_key(&key)),
            "{ctx}"
        );
    }
}

/// A flip in `names.log`.
fn names_trial(fx: &Fixture, root: &Path, rng: &mut Rng, tally: &mut Tally, ctx: &str) {
    tally.names += 1;
    let len = fx.files["names.log"].len() as u64;
    let pos = rng.below(len);
    let bit = rng.below(8) as u32;
    let ctx = format!("{ctx}: names.log byte {pos} bit {bit}");
    flip(root, "names.log", pos, bit);
    let store = match open(root, RecoveryMode::default()) {
        Err(StoreErr::BadHeader { .. }) if pos < RECORD_LEN as u64 => return,
        Err(e) => panic!("{ctx}: open: {e}"),
        Ok(_) if pos < RECORD_LEN as u64 => panic!("{ctx}: corrupt names header accepted"),
        Ok(s) => s,
    };
    assert!(index_of(&store) == fx.metas, "{ctx}: index changed");
    for k in fx.metas.keys() {
        let b = read_back(&store, k).unwrap_or_else(|e| panic!("{ctx}: block {k}: {e}"));
        assert!(b == fx.reference[k], "{ctx}: block {k}");
    }
    let infos = store.tensors().unwrap();
    let mut lost = 0;
    for (id, name) in &fx.names {
        let info = infos
            .iter()
            .find(|t| t.tensor_id == *id)
            .expect("tensor listed");
        match info.name.as_deref() {
            Some(n) => assert_eq!(n, *name, "{ctx}"),
            None => lost += 1,
        }
    }
    assert!(lost <= 1, "{ctx}: one flipped record lost {lost} names");
}

#[test]
fn single_bit_flips_are_detected_and_contained() {
    let seed = seed_or(0xF11B_0005);
    let flips = if long_mode() { 5000 } else { 300 };
    eprintln!("corruption suite: seed {seed:#x} (set TV_STORE_SEED to reproduce), {flips} flips");
    let fx = build_fixture(seed);
    eprintln!(
        "fixture: {} live blocks, {} log records, files {:?}",
        fx.metas.len(),
        fx.records.len(),
        fx.files
            .iter()
            .map(|(n, b)| (*n, b.len()))
            .collect::<Vec<_>>()
    );
    let tmp = common::scratch_dir("flip");
    let root = tmp.path();
    let mut rng = Rng::new(mix(seed ^ 0xF11B));
    let mut tally = Tally::default();
    for i in 0..flips {
        restore(&fx, root);
        let ctx = format!("seed {seed:#x} flip {i}");
        match rng.below(100) {
            0..=49 => tier_trial(&fx, root, &mut rng, &mut tally, &ctx),
            50..=91 => log_trial(&fx, root, &mut rng, &mut tally, &ctx),
            _ => names_trial(&fx, root, &mut rng, &mut tally, &ctx),
        }
    }
    eprintln!("corruption suite: {tally:?}");
    assert!(tally.payload > 0 && tally.tier_elsewhere > 0 && tally.log_header > 0);
    assert!(tally.log_skip > 0 && tally.log_point_in_time > 0 && tally.names > 0);
}

/// Regression: a lost Delete record revives a block whose slot was reused by another
/// block. The store must still open (it used to fail with "slot listed twice"), the
/// slot's real occupant must read back, and the revived block must not share its slot.
#[test]
fn lost_delete_of_a_reused_slot_still_opens() {
    let tmp = common::scratch_dir("flip-reuse");
    let root = tmp.path();
    let shape = [64u32];
    let (a, b) = (BlockKey::new(1, 0), BlockKey::new(2, 0));
    let data_b = block_data(2, 64);
    {
        let s =
            DirStore::open_path(root, TENANT, COLL, cfg(RecoveryMode::default()), true).unwrap();
        let info = BlockInfo::new(DType::F32, &shape);
        s.put_block(a, Tier::Tier0, &info, &block_data(1, 64))
            .unwrap();
        let slot = s.meta(&a).unwrap().unwrap().data_offset;
        assert!(s.delete_block(&a).unwrap());
        s.put_block(b, Tier::Tier0, &info, &data_b).unwrap();
        assert_eq!(
            s.meta(&b).unwrap().unwrap().data_offset,
            slot,
            "slot reused"
        );
        s.close().unwrap();
    }
    let log = std::fs::read(dir_of(root).join("meta.log")).unwrap();
    let delete_at = (1..log.len() / RECORD_LEN)
        .find(|&i| {
            let mut r = [0u8; RECORD_LEN];
            r.copy_from_slice(&log[i * RECORD_LEN..(i + 1) * RECORD_LEN]);
            matches!(decode_record(&r, 0), Ok(MetaRecord::Delete { .. }))
        })
        .expect("a Delete record");
    flip(root, "meta.log", (delete_at * RECORD_LEN + 30) as u64, 3);
    let s = open(root, RecoveryMode::default()).expect("open after a lost Delete record");
    assert_eq!(s.replay_stats().0.skipped_total, 1);
    assert!(
        s.meta(&a).unwrap().is_none(),
        "the revived block lost the slot"
    );
    assert_eq!(read_back(&s, &b).unwrap(), data_b);
    assert!(s.verify().unwrap().problems.is_empty());
    // The slot stays B's: a new write must not overwrite it.
    let info = BlockInfo::new(DType::F32, &shape);
    s.put_block(BlockKey::new(3, 0), Tier::Tier0, &info, &block_data(3, 64))
        .unwrap();
    assert_eq!(read_back(&s, &b).unwrap(), data_b);
}
