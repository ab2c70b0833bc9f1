//! Extent allocation (MetaLog header flags bit 1, `docs/formats/store.md` "Extent
//! allocation"): blocks take `roundup(data_len, slot_align)` bytes, replay refuses
//! impossible extents with typed defects, open resolves overlaps and lost extents, and a
//! random sequence of puts, deletes and migrations reads back after a reopen with no
//! byte live for two blocks.
#![cfg(feature = "mmap")]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tensorvault_store::meta_log::layout::RECORD_LEN;
use tensorvault_store::meta_log::{decode_record, encode_record};
use tensorvault_store::{
    BlockIO, BlockInfo, BlockKey, BlockMeta, BufferBlockIO, CollectionConfig, DType, DirStore,
    MetaRecord, StoreConfig, StoreErr, Tier, EXTENT_CAP_SLOTS,
};

const TENANT: &str = "t";
const COLL: &str = "c";
const ELEMS: u32 = common::BLOCK_ELEMS;

fn config(extents: bool) -> StoreConfig {
    StoreConfig {
        collection: CollectionConfig {
            extents,
            ..CollectionConfig::with_block_elems(ELEMS)
        },
        ..common::store_config()
    }
}

fn open(root: &Path, extents: bool) -> DirStore {
    DirStore::open_path(root, TENANT, COLL, config(extents), true).unwrap()
}

/// Block `i` of tensor `id`: `n` f32 values of a seeded pattern.
fn put(s: &DirStore, id: u128, i: u32, tier: Tier, n: u32, seed: u64) -> Vec<u8> {
    let data = common::block_data(seed, n as usize);
    let shape = [i * ELEMS + n];
    s.put_block(
        BlockKey::new(id, i),
        tier,
        &BlockInfo::new(DType::F32, &shape),
        &data,
    )
    .unwrap();
    data
}

fn log_path(root: &Path) -> PathBuf {
    common::coll_dir(root, TENANT, COLL).join("meta.log")
}

/// Each tier's live bytes equal the extents of the index's blocks (nothing leaked or
/// shared), and no two blocks' extents overlap.
fn assert_exact_occupancy(s: &DirStore) {
    let mut by_tier: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for m in s.blocks().unwrap() {
        let unit = u64::from(s.block_io().usage(m.tier).alloc_unit);
        let len = u64::from(m.data_len).div_ceil(unit) * unit;
        by_tier
            .entry(m.tier.index())
            .or_default()
            .push((m.data_offset, len));
    }
    for t in Tier::ALL {
        let mut v = by_tier.remove(&t.index()).unwrap_or_default();
        v.sort_unstable();
        for w in v.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "{t}: {w:?} overlap");
        }
        let taken: u64 = v.iter().map(|e| e.1).sum();
        assert_eq!(s.block_io().usage(t).live_bytes, taken, "{t}");
    }
}

#[test]
fn extents_follow_the_payload_and_survive_a_reopen() {
    let tmp = common::scratch_dir("extents-basic");
    let geo = config(true).collection;
    let slot3 = u64::from(geo.slot_len(Tier::Tier3));
    let mut want = BTreeMap::new();
    {
        let s = open(tmp.path(), true);
        assert!(s.geometry().extents);
        // Partial blocks: payloads far shorter than the worst-case slot.
        for (i, n) in [(0u32, 40u32), (1, 100), (2, ELEMS), (3, 7)] {
            want.insert(i, put(&s, 1, i, Tier::Tier3, n, u64::from(i)));
        }
        let metas = s.blocks().unwrap();
        let offsets: Vec<u64> = metas.iter().map(|m| m.data_offset).collect();
        assert!(
            offsets.iter().any(|o| o % slot3 != 0),
            "extents pack tighter than slots: {offsets:?}"
        );
        let u = s.block_io().usage(Tier::Tier3);
        assert_eq!(u.alloc_unit, geo.slot_align);
        assert!(u.live_bytes < 4 * slot3, "{u:?}");
        let payload: u64 = metas.iter().map(|m| u64::from(m.data_len)).sum();
        assert!(u.live_bytes >= payload);
        assert_eq!(s.stats().unwrap().payload_bytes[3], payload);
        assert_exact_occupancy(&s);
        // A delete and a migration free extents; a new block fits the hole.
        assert!(s.delete_block(&BlockKey::new(1, 1)).unwrap());
        want.remove(&1);
        s.migrate_block(&BlockKey::new(1, 3), Tier::Tier1).unwrap();
        want.insert(5, put(&s, 1, 5, Tier::Tier3, 50, 5));
        assert_exact_occupancy(&s);
    }
    let s = open(tmp.path(), false);
    assert!(s.geometry().extents, "the flag is in the header");
    assert_exact_occupancy(&s);
    let r = s.verify().unwrap();
    assert_eq!(r.defects(), 0, "{:?}", r.problems);
    let mut buf = Vec::new();
    for (i, data) in &want {
        let m = s.get_block(&BlockKey::new(1, *i), &mut buf).unwrap();
        assert_eq!(buf.len(), data.len(), "block {i} in {}", m.tier);
    }
}

/// A snapshot reader of an extent collection, opened while the writer holds it, reads
/// every block and writes nothing (tier files and log keep their bytes).
#[test]
fn a_snapshot_reads_extents_and_writes_nothing() {
    let tmp = common::scratch_dir("extents-snapshot");
    let w = open(tmp.path(), true);
    let mut want = BTreeMap::new();
    for i in 0..6u32 {
        let tier = Tier::ALL[(i % 4) as usize];
        want.insert(i, (tier, put(&w, 3, i, tier, 30 + 40 * i, u64::from(i))));
    }
    w.delete_block(&BlockKey::new(3, 2)).unwrap();
    want.remove(&2);
    let dir = common::coll_dir(tmp.path(), TENANT, COLL);
    let files = || -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = files();
    let snap = DirStore::open_path_snapshot(tmp.path(), TENANT, COLL, config(true)).unwrap();
    assert!(snap.geometry().extents);
    let mut buf = Vec::new();
    for (i, (tier, data)) in &want {
        let m = snap.get_block(&BlockKey::new(3, *i), &mut buf).unwrap();
        assert_eq!(m.tier, *tier);
        assert_eq!(buf.len(), data.len());
        if *tier == Tier::Tier0 {
            assert_eq!(&buf, data, "Tier0 is bit-exact");
        }
    }
    assert!(snap.meta(&BlockKey::new(3, 2)).unwrap().is_none());
    drop(snap);
    assert!(files() == before, "the snapshot changed a file");
    drop(w);
}

#[test]
fn a_block_may_exceed_the_worst_case_slot_up_to_the_cap() {
    let geo = CollectionConfig {
        extents: true,
        ..CollectionConfig::with_block_elems(ELEMS)
    };
    let slot = geo.slot_len(Tier::Tier2);
    let cap = geo.max_block_len(Tier::Tier2);
    assert_eq!(u64::from(cap), EXTENT_CAP_SLOTS * u64::from(slot));
    assert_eq!(geo.max_block_len(Tier::Tier0), geo.slot_len(Tier::Tier0));
    let io = BufferBlockIO::new(&geo);
    assert_eq!(io.max_block_len(Tier::Tier2), cap);
    let big = vec![7u8; slot as usize + 10];
    let (off, len) = io
        .write_block(Tier::Tier2, BlockKey::new(1, 0), &big)
        .unwrap();
    assert_eq!(len as usize, big.len());
    let mut out = vec![0; big.len()];
    io.read_block(Tier::Tier2, BlockKey::new(1, 0), off, len, &mut out)
        .unwrap();
    assert_eq!(out, big);
    let e = io
        .write_block(Tier::Tier2, BlockKey::new(1, 1), &vec![0; cap as usize + 1])
        .unwrap_err();
    assert!(
        matches!(
            e,
            StoreErr::CapacityExceeded {
                tier: Tier::Tier2,
                ..
            }
        ),
        "{e}"
    );
    // The next block starts right after the extent, not a slot later.
    let (next, _) = io
        .write_block(Tier::Tier2, BlockKey::new(1, 2), &[1])
        .unwrap();
    let a = u64::from(geo.slot_align);
    assert_eq!(next, off + (big.len() as u64).div_ceil(a) * a);
    // Slot collections keep their slot bound.
    let slots = BufferBlockIO::new(&CollectionConfig::with_block_elems(ELEMS));
    assert!(slots
        .write_block(Tier::Tier2, BlockKey::new(1, 0), &big)
        .is_err());
}

/// A store of three Tier3 blocks of tensor 1, as extents.
fn three_blocks(root: &Path) {
    let s = open(root, true);
    for i in 0..3 {
        put(&s, 1, i, Tier::Tier3, 100 + 50 * i, u64::from(i));
    }
}

/// Rewrite block `block`'s Create with `edit`, re-sealing its CRC; its log offset.
fn forge(root: &Path, block: u32, edit: impl Fn(&mut BlockMeta)) -> u64 {
    let path = log_path(root);
    let mut bytes = std::fs::read(&path).unwrap();
    let mut at_forged = None;
    for at in (RECORD_LEN..bytes.len()).step_by(RECORD_LEN) {
        let rec: [u8; RECORD_LEN] = bytes[at..at + RECORD_LEN].try_into().unwrap();
        if let Ok(MetaRecord::Create { mut meta }) = decode_record(&rec, at as u64) {
            if meta.key.block_index == block {
                edit(&mut meta);
                bytes[at..at + RECORD_LEN]
                    .copy_from_slice(&encode_record(&MetaRecord::Create { meta }));
                at_forged = Some(at as u64);
            }
        }
    }
    std::fs::write(&path, bytes).unwrap();
    at_forged.expect("a Create of that block")
}

fn meta_of(root: &Path, block: u32) -> BlockMeta {
    open(root, false)
        .meta(&BlockKey::new(1, block))
        .unwrap()
        .unwrap()
}

#[test]
fn a_misaligned_extent_is_a_typed_defect_naming_data_offset() {
    let tmp = common::scratch_dir("extents-misaligned");
    three_blocks(tmp.path());
    let at = forge(tmp.path(), 1, |m| m.data_offset += 8);
    let s = open(tmp.path(), false);
    let r = s.verify().unwrap();
    assert_eq!(r.replay_defects_total, 1);
    let d = &r.replay_defects[0];
    assert_eq!(d.log_offset, Some(at));
    assert!(
        d.reason.starts_with("impossible extent: data_offset ")
            && d.reason.contains("is not a multiple of 64"),
        "{}",
        d.reason
    );
    assert!(s.meta(&BlockKey::new(1, 1)).unwrap().is_none());
}

#[test]
fn a_length_above_the_cap_is_a_typed_defect_naming_data_len() {
    let tmp = common::scratch_dir("extents-cap");
    three_blocks(tmp.path());
    let cap = config(true).collection.max_block_len(Tier::Tier3);
    let at = forge(tmp.path(), 2, |m| m.data_len = cap + 1);
    let s = open(tmp.path(), false);
    let r = s.verify().unwrap();
    assert_eq!(r.replay_defects_total, 1);
    let d = &r.replay_defects[0];
    assert_eq!(d.log_offset, Some(at));
    assert_eq!(
        d.reason,
        format!(
            "impossible extent: data_len {} not in 1..={cap} for tier3",
            cap + 1
        )
    );
}

#[test]
fn an_extent_past_the_file_is_dropped_as_lost() {
    let tmp = common::scratch_dir("extents-past");
    three_blocks(tmp.path());
    forge(tmp.path(), 0, |m| m.data_offset = 1 << 30);
    let s = open(tmp.path(), false);
    let r = s.verify().unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    let p = &r.problems[0];
    assert_eq!((p.key, p.offset), (BlockKey::new(1, 0), 1 << 30));
    assert!(p.error.contains("lies beyond the end"), "{}", p.error);
    // Nothing was allocated up to the forged offset.
    assert!(s.block_io().usage(Tier::Tier3).bytes < 1 << 20);
    assert_exact_occupancy(&s);
}

#[test]
fn an_overlapping_extent_is_dropped_naming_the_offsets() {
    let tmp = common::scratch_dir("extents-overlap");
    three_blocks(tmp.path());
    let m0 = meta_of(tmp.path(), 0);
    let m1 = meta_of(tmp.path(), 1);
    assert!(m0.data_offset < m1.data_offset);
    // Block 1 now claims bytes inside block 0's extent, with its own (wrong) checksum.
    let inside = m0.data_offset + 64;
    forge(tmp.path(), 1, |m| m.data_offset = inside);
    let s = open(tmp.path(), false);
    let r = s.verify().unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    let p = &r.problems[0];
    assert_eq!((p.key, p.offset), (BlockKey::new(1, 1), inside));
    assert!(
        p.error.contains(&format!(
            "the extent at data_offset {inside} overlaps the live extent at {}",
            m0.data_offset
        )),
        "{}",
        p.error
    );
    // Block 0 (whose checksum matches its bytes) keeps its extent and reads back.
    let mut buf = Vec::new();
    s.get_block(&BlockKey::new(1, 0), &mut buf).unwrap();
    assert_exact_occupancy(&s);
}

#[test]
fn an_old_build_refuses_the_flag_and_codec_v1_cannot_take_it() {
    let geo = CollectionConfig {
        extents: true,
        ..CollectionConfig::default()
    };
    let h = tensorvault_store::meta_log::encode_header(&geo, 0);
    assert_eq!(h[49], 0b10, "flags bit 1 at offset 49");
    assert!(
        tensorvault_store::meta_log::decode_header(&h)
            .unwrap()
            .0
            .extents
    );
    let v1 = CollectionConfig {
        extents: true,
        ..CollectionConfig::codec_v1(4096)
    };
    let e = v1.validate().unwrap_err().to_string();
    assert!(e.contains("extents"), "{e}");
}

#[derive(Clone, Debug)]
enum Op {
    Put { id: u8, n: u16, tier: u8 },
    Delete { id: u8 },
    Migrate { id: u8, tier: u8 },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..12, 1u16..=ELEMS as u16, 0u8..4).prop_map(|(id, n, tier)| Op::Put { id, n, tier }),
        2 => (0u8..12).prop_map(|id| Op::Delete { id }),
        2 => (0u8..12, 0u8..4).prop_map(|(id, tier)| Op::Migrate { id, tier }),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random puts (mixed sizes and tiers), deletes and migrations against a model of
    /// which block lives where with how many values; after every reopen and at the end
    /// the store holds exactly the model's blocks, each reads back its length, and no
    /// byte is live for two blocks.
    #[test]
    fn random_sequences_match_the_model_after_reopen(ops in prop::collection::vec(op(), 1..40)) {
        let tmp = common::scratch_dir("extents-prop");
        let mut model: BTreeMap<u8, (Tier, u16)> = BTreeMap::new();
        let mut s = open(tmp.path(), true);
        for (step, o) in ops.iter().enumerate() {
            match *o {
                Op::Put { id, n, tier } => {
                    let tier = Tier::ALL[usize::from(tier)];
                    put(&s, 7, u32::from(id), tier, u32::from(n), step as u64);
                    model.insert(id, (tier, n));
                }
                Op::Delete { id } => {
                    let had = s.delete_block(&BlockKey::new(7, u32::from(id))).unwrap();
                    prop_assert_eq!(had, model.remove(&id).is_some());
                }
                Op::Migrate { id, tier } => {
                    let tier = Tier::ALL[usize::from(tier)];
                    let r = s.migrate_block(&BlockKey::new(7, u32::from(id)), tier);
                    match model.get_mut(&id) {
                        Some(e) => {
                            r.unwrap();
                            e.0 = tier;
                        }
                        None => {
                            let not_found = matches!(r, Err(StoreErr::NotFound { .. }));
                            prop_assert!(not_found, "migrate of a missing block: {:?}", r);
                        }
                    }
                }
                Op::Reopen => {
                    drop(s);
                    s = open(tmp.path(), false);
                }
            }
            assert_exact_occupancy(&s);
        }
        drop(s);
        let s = open(tmp.path(), false);
        assert_exact_occupancy(&s);
        let blocks = s.blocks().unwrap();
        prop_assert_eq!(blocks.len(), model.len());
        let mut buf = Vec::new();
        for (id, (tier, n)) in &model {
            let m = s.get_block(&BlockKey::new(7, u32::from(*id)), &mut buf).unwrap();
            prop_assert_eq!(m.tier, *tier);
            prop_assert_eq!(buf.len(), usize::from(*n) * 4);
        }
        prop_assert_eq!(s.verify().unwrap().defects(), 0);
    }
}

/// Freed neighbouring extents give back the pages they share: 3000-byte extents straddle
/// page boundaries, so only the coalesced run's punching returns those pages.
#[test]
fn freed_extents_give_back_the_pages_they_share() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let geo = CollectionConfig {
        extents: true,
        ..CollectionConfig::default()
    };
    let io = tensorvault_store::MmapBlockIO::open(dir.path(), &geo).unwrap();
    let t = Tier::Tier2;
    let len = 2000usize; // 2048-byte extents: two per page, none holds a whole page
    assert!(len as u32 <= io.max_block_len(t));
    let offs: Vec<u64> = (0..200u32)
        .map(|i| {
            io.write_block(t, BlockKey::new(1, i), &vec![i as u8 | 1; len])
                .unwrap()
                .0
        })
        .collect();
    io.sync().unwrap();
    let path = dir.path().join(t.file_name());
    let used = || std::fs::metadata(&path).unwrap().blocks() * 512;
    let full = used();
    assert!(full >= 200 * 2048, "{full}");
    // Free every block but the last: the run they form is punched page by page.
    for off in &offs[..199] {
        io.free_block(t, *off).unwrap();
    }
    let after = used();
    assert!(
        after <= full - 190 * 2048,
        "{after} of {full} bytes still allocated"
    );
    let mut out = vec![0; len];
    io.read_block(t, BlockKey::new(1, 199), offs[199], len as u32, &mut out)
        .unwrap();
    assert_eq!(out, vec![199u8 | 1; len], "the live extent keeps its bytes");
}
