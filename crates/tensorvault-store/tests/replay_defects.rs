//! Issue 25 class 3: `verify` vouches only for what replay used. A metalog record with a
//! valid CRC-32C that replay cannot use (an impossible slot or shape, a block that is not
//! live) is a defect with its log offset and why, and a tensor that lost blocks to such
//! records (block 0 included) is incomplete for `tensors()` and `get_tensor` alike.
#![cfg(feature = "mmap")]

mod common;

use std::path::{Path, PathBuf};

use tensorvault_store::meta_log::layout::RECORD_LEN;
use tensorvault_store::meta_log::{decode_record, encode_record};
use tensorvault_store::{BlockKey, BlockMeta, DType, DirStore, MetaRecord, StoreErr, Tier};

const TENANT: &str = "t";
const COLL: &str = "c";

/// A store holding tensor `w`: 3 blocks of f32 at Tier0.
fn make_store(root: &Path) {
    let store = DirStore::open_path(root, TENANT, COLL, common::store_config(), true).unwrap();
    let n = 3 * common::BLOCK_ELEMS as usize;
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    store
        .put_tensor(
            "w",
            DType::F32,
            &[3, common::BLOCK_ELEMS],
            &data,
            Tier::Tier0,
        )
        .unwrap();
}

fn log_path(root: &Path) -> PathBuf {
    common::coll_dir(root, TENANT, COLL).join("meta.log")
}

fn open(root: &Path) -> DirStore {
    DirStore::open_path(root, TENANT, COLL, common::store_config(), false).unwrap()
}

/// Rewrites block `block`'s Create records with `edit`, re-sealing the CRC; returns the
/// offset of the (last) record rewritten.
fn forge_create(root: &Path, block: u32, edit: impl Fn(&mut BlockMeta)) -> u64 {
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

/// The store lists `w` as incomplete (2 of 3 blocks) and reading it says so too.
fn incomplete_everywhere(s: &DirStore) {
    let listed = s.tensors().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name.as_deref(), Some("w"));
    assert_eq!((listed[0].blocks, listed[0].expected_blocks), (2, 3));
    match s.get_tensor("w") {
        Err(
            e @ StoreErr::TensorIncomplete {
                present: 2,
                expected: 3,
                ..
            },
        ) => {
            assert!(e.is_corruption());
        }
        other => panic!("expected TensorIncomplete, got {other:?}"),
    }
}

#[test]
fn an_impossible_slot_is_a_defect_with_its_offset() {
    for block in [1u32, 0] {
        let tmp = common::scratch_dir("defect-slot");
        make_store(tmp.path());
        let at = forge_create(tmp.path(), block, |m| m.data_len = 1 << 30);
        let s = open(tmp.path());
        let r = s.verify().unwrap();
        assert_eq!(r.replay_defects_total, 1);
        assert_eq!(r.defects(), 1);
        let d = &r.replay_defects[0];
        assert_eq!(d.log_offset, Some(at));
        assert_eq!(
            (d.record, d.key),
            ("create", BlockKey::new(d.key.tensor_id, block))
        );
        assert!(
            d.reason.starts_with("impossible slot: data_len 1073741824"),
            "{}",
            d.reason
        );
        // Block 0 too: listed as incomplete, read as incomplete (not "not found").
        incomplete_everywhere(&s);
    }
}

#[test]
fn an_impossible_shape_on_one_block_is_a_defect() {
    let tmp = common::scratch_dir("defect-shape");
    make_store(tmp.path());
    let at = forge_create(tmp.path(), 0, |m| {
        m.shape = [0; 8];
        m.shape[..2].copy_from_slice(&[u32::MAX, u32::MAX]);
    });
    let s = open(tmp.path());
    let r = s.verify().unwrap();
    assert_eq!(r.replay_defects_total, 1);
    assert_eq!(r.replay_defects[0].log_offset, Some(at));
    assert!(r.replay_defects[0].reason.starts_with("impossible shape: "));
    incomplete_everywhere(&s);
}

#[test]
fn a_record_for_a_block_that_is_not_live_is_a_defect() {
    let tmp = common::scratch_dir("defect-unknown");
    make_store(tmp.path());
    let path = log_path(tmp.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() as u64;
    bytes.extend_from_slice(&encode_record(&MetaRecord::Delete {
        key: BlockKey::new(0xfeed, 4),
    }));
    std::fs::write(&path, bytes).unwrap();
    let s = open(tmp.path());
    let r = s.verify().unwrap();
    assert!(r.problems.is_empty());
    assert_eq!(r.replay_defects_total, 1);
    let d = &r.replay_defects[0];
    assert_eq!(
        (d.log_offset, d.record, d.key, d.reason.as_str()),
        (
            Some(at),
            "delete",
            BlockKey::new(0xfeed, 4),
            "names a block that is not live"
        )
    );
    // The tensor itself is intact.
    assert_eq!(s.get_tensor("w").unwrap().data.len(), 3 * 256 * 4);
}

#[test]
fn a_block_past_its_tier_file_is_lost_and_the_tensor_incomplete() {
    let tmp = common::scratch_dir("defect-lost");
    make_store(tmp.path());
    // Cut tier0.dat at the start of the last slot (whichever block holds it).
    let last = open(tmp.path())
        .blocks()
        .unwrap()
        .iter()
        .map(|m| m.data_offset)
        .max()
        .unwrap();
    let tier = common::coll_dir(tmp.path(), TENANT, COLL).join("tier0.dat");
    let f = std::fs::OpenOptions::new().write(true).open(&tier).unwrap();
    f.set_len(last).unwrap();
    drop(f);
    let s = open(tmp.path());
    let r = s.verify().unwrap();
    assert_eq!(r.problems.len(), 1);
    assert!(
        r.problems[0].error.starts_with("lost: "),
        "{}",
        r.problems[0].error
    );
    assert_eq!(r.defects(), 1);
    incomplete_everywhere(&s);
}

#[test]
fn an_untouched_store_has_no_defects() {
    let tmp = common::scratch_dir("defect-none");
    make_store(tmp.path());
    let s = open(tmp.path());
    let r = s.verify().unwrap();
    assert_eq!((r.defects(), r.replay_defects_total, r.checked), (0, 0, 3));
}
