//! Crafted `meta.log` files (issue 16, "Hostile inputs"): a record with a valid CRC-32C
//! is still only what a file says. Each case forges the log of a small real store and
//! checks that opening, listing and reading it gives a typed error or a bounded result:
//! never a panic, an abort or an allocation sized by a claimed shape or file length.
#![cfg(feature = "mmap")]

mod common;

use std::fs::OpenOptions;
use std::path::Path;

use tensorvault_store::meta_log::layout::RECORD_LEN;
use tensorvault_store::meta_log::{decode_record, encode_record};
use tensorvault_store::{Catalog, DType, DirStore, MetaRecord, StoreConfig, StoreErr, Tier};

const TENANT: &str = "t";
const COLL: &str = "c";

fn cfg() -> StoreConfig {
    common::store_config()
}

/// A store holding tensor `w`: 3 blocks of f32 at Tier0 (`BLOCK_ELEMS` elements each).
fn make_store(root: &Path) {
    let store = DirStore::open_path(root, TENANT, COLL, cfg(), true).unwrap();
    let n = 3 * common::BLOCK_ELEMS as usize;
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    store
        .put_tensor(
            "w",
            DType::F32,
            &[3, common::BLOCK_ELEMS],
            &data,
            tensorvault_store::Tier::Tier0,
        )
        .unwrap();
}

fn log_path(root: &Path) -> std::path::PathBuf {
    common::coll_dir(root, TENANT, COLL).join("meta.log")
}

/// Rewrites every Create record of `meta.log` with `shape`, re-sealing its CRC-32C.
fn forge_shapes(root: &Path, shape: &[u32]) -> usize {
    let path = log_path(root);
    let mut bytes = std::fs::read(&path).unwrap();
    let mut forged = 0;
    for at in (RECORD_LEN..bytes.len()).step_by(RECORD_LEN) {
        let rec: [u8; RECORD_LEN] = bytes[at..at + RECORD_LEN].try_into().unwrap();
        if let Ok(MetaRecord::Create { mut meta }) = decode_record(&rec, at as u64) {
            meta.shape = [0; 8];
            meta.shape[..shape.len()].copy_from_slice(shape);
            meta.shape_ndim = shape.len() as u8;
            bytes[at..at + RECORD_LEN]
                .copy_from_slice(&encode_record(&MetaRecord::Create { meta }));
            forged += 1;
        }
    }
    std::fs::write(&path, bytes).unwrap();
    forged
}

/// Shape `[2^32-1, 2^32-1]`: more than 2^32 blocks. Replay ignores the records (counted),
/// so the tensor is gone rather than read with an impossible size.
#[test]
fn create_with_a_shape_past_2_pow_32_blocks_is_ignored() {
    let tmp = common::scratch_dir("hostile-shape");
    make_store(tmp.path());
    assert_eq!(forge_shapes(tmp.path(), &[u32::MAX, u32::MAX]), 3);
    let store = DirStore::open_path(tmp.path(), TENANT, COLL, cfg(), false).unwrap();
    assert_eq!(store.stats().unwrap().replay_ignored, 3);
    assert!(store.tensors().unwrap().is_empty());
    assert!(matches!(
        store.get_tensor("w"),
        Err(StoreErr::TensorNotFound { .. })
    ));
}

/// Shape `[2^20, 2^16]` (2^36 elements, 256 GiB of f32, 2^28 blocks of 256): a legal
/// geometry, but the tensor's blocks are not there. `get_tensor` must say so before it
/// allocates, and listing must not walk 2^28 keys.
#[test]
fn create_with_a_huge_but_legal_shape_reads_as_incomplete() {
    let tmp = common::scratch_dir("hostile-big");
    make_store(tmp.path());
    forge_shapes(tmp.path(), &[1 << 20, 1 << 16]);
    let store = DirStore::open_path(tmp.path(), TENANT, COLL, cfg(), false).unwrap();
    let listed = store.tensors().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].blocks, 3);
    assert_eq!(listed[0].expected_blocks, 1 << 28);
    match store.get_tensor("w") {
        Err(
            e @ StoreErr::TensorIncomplete {
                present: 3,
                expected,
                ..
            },
        ) => {
            assert_eq!(expected, 1 << 28);
            assert!(e.is_corruption());
        }
        other => panic!("expected TensorIncomplete, got {other:?}"),
    }
}

/// Putting a tensor whose shape needs more than 2^32 blocks is refused up front: replay
/// would ignore its records, so acknowledging it would lose it.
#[test]
fn put_of_an_impossible_shape_is_refused() {
    let tmp = common::scratch_dir("hostile-put");
    let store = DirStore::open_path(tmp.path(), TENANT, COLL, cfg(), true).unwrap();
    let data = [0u8; 16];
    let e = store
        .put_block(
            tensorvault_store::BlockKey::new(7, 0),
            tensorvault_store::Tier::Tier0,
            &tensorvault_store::BlockInfo::new(DType::F32, &[u32::MAX, u32::MAX]),
            &data,
        )
        .unwrap_err();
    assert!(
        matches!(e, StoreErr::InvalidArgument { field: "shape", .. }),
        "{e:?}"
    );
}

/// A 64 GiB sparse `meta.log` (the record count its length claims is 2^29): open replays
/// it without reserving an index for 2^29 entries and without decoding the hole record by
/// record; the real records before the hole survive.
#[test]
fn sparse_64_gib_log_opens_with_bounded_work() {
    let tmp = common::scratch_dir("hostile-sparse");
    make_store(tmp.path());
    let path = log_path(tmp.path());
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(64 << 30).unwrap();
    drop(f);
    let store = DirStore::open_path(tmp.path(), TENANT, COLL, cfg(), false).unwrap();
    let t = store.get_tensor("w").unwrap();
    assert_eq!(t.data.len(), 3 * common::BLOCK_ELEMS as usize * 4);
    assert_eq!(t.data[4..8], 1f32.to_le_bytes());
}

/// Path escape (issue 16): a tenant directory, a collection directory or a file inside a
/// collection that is a symbolic link to a place outside the root is refused, and nothing
/// is created or written through it.
#[test]
fn symlinks_out_of_the_root_are_refused() {
    use std::os::unix::fs::symlink;
    let tmp = common::scratch_dir("hostile-link");
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let listing = |p: &Path| std::fs::read_dir(p).unwrap().count();

    // A linked tenant: open with create must not make `outside/c`.
    symlink(&outside, root.join("t")).unwrap();
    let e = open_err(&root, true);
    assert!(matches!(e, StoreErr::SymlinkRefused { .. }), "{e:?}");
    assert_eq!(listing(&outside), 0);
    assert!(tensorvault_store::fs::list_collections(&root)
        .unwrap()
        .is_empty());
    std::fs::remove_file(root.join("t")).unwrap();

    // A linked collection directory.
    std::fs::create_dir_all(root.join("t")).unwrap();
    symlink(&outside, root.join("t").join("c")).unwrap();
    let e = open_err(&root, true);
    assert!(matches!(e, StoreErr::SymlinkRefused { .. }), "{e:?}");
    assert_eq!(listing(&outside), 0);
    std::fs::remove_file(root.join("t").join("c")).unwrap();

    // A linked tier file in a real collection.
    make_store(&root);
    let tier0 = common::coll_dir(&root, TENANT, COLL).join("tier0.dat");
    let victim = outside.join("victim");
    std::fs::write(&victim, b"user data").unwrap();
    std::fs::remove_file(&tier0).unwrap();
    symlink(&victim, &tier0).unwrap();
    let e = open_err(&root, false);
    match e {
        StoreErr::SymlinkRefused { path } => assert_eq!(path, tier0),
        other => panic!("expected SymlinkRefused, got {other:?}"),
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"user data");
}

fn open_err(root: &Path, create: bool) -> StoreErr {
    match DirStore::open_path(root, TENANT, COLL, cfg(), create) {
        Ok(_) => panic!("open of {} succeeded", root.display()),
        Err(e) => e,
    }
}

/// Deleting `LOCK` while a store is open used to let a second opener in, whose
/// acknowledged writes the first could then overwrite (issue 16). The collection
/// directory's own lock still holds.
#[test]
fn deleting_the_lock_file_does_not_admit_a_second_writer() {
    let tmp = common::scratch_dir("hostile-lock");
    make_store(tmp.path());
    let a = DirStore::open_path(tmp.path(), TENANT, COLL, cfg(), false).unwrap();
    let lock = common::coll_dir(tmp.path(), TENANT, COLL).join("LOCK");
    std::fs::remove_file(&lock).unwrap();
    let e = open_err(tmp.path(), false);
    assert!(matches!(e, StoreErr::Locked { .. }), "{e:?}");
    drop(a);
    // Once the first store is closed, the collection opens again.
    DirStore::open_path(tmp.path(), TENANT, COLL, cfg(), false).unwrap();
}

/// An emptied tier file used to make its blocks vanish while `verify` found nothing wrong
/// (issue 16): every block lost that way is a verify problem naming block, tier and offset.
#[test]
fn emptied_tier_file_blocks_are_reported_by_verify() {
    let tmp = common::scratch_dir("hostile-empty");
    make_store(tmp.path());
    let tier0 = common::coll_dir(tmp.path(), TENANT, COLL).join("tier0.dat");
    std::fs::write(&tier0, b"").unwrap();
    let store = DirStore::open_path(tmp.path(), TENANT, COLL, cfg(), false).unwrap();
    let report = store.verify().unwrap();
    assert_eq!(report.problems.len(), 3, "{:?}", report.problems);
    for (i, p) in report.problems.iter().enumerate() {
        assert_eq!(p.key.block_index, i as u32);
        assert_eq!(p.tier, tensorvault_store::Tier::Tier0);
        assert_eq!(p.tensor.as_deref(), Some("w"));
        assert!(p.error.contains("beyond the end"), "{}", p.error);
    }
}

/// Readers share a collection (issue 16: readers took the exclusive lock, so `ls` and
/// `verify` were refused while another reader ran): any number of shared opens at once, a
/// writer is kept out while they hold it, and a shared store cannot write.
#[test]
fn readers_share_the_collection_and_cannot_write() {
    let tmp = common::scratch_dir("hostile-shared");
    make_store(tmp.path());
    let r1 = DirStore::open_path_shared(tmp.path(), TENANT, COLL, cfg()).unwrap();
    let r2 = DirStore::open_path_shared(tmp.path(), TENANT, COLL, cfg()).unwrap();
    assert_eq!(
        r1.get_tensor("w").unwrap().data,
        r2.get_tensor("w").unwrap().data
    );
    assert!(r2.verify().unwrap().problems.is_empty());
    assert!(matches!(
        open_err(tmp.path(), false),
        StoreErr::Locked { waited, .. } if waited.contains("waited")
    ));
    let e = r1
        .put_tensor(
            "z",
            DType::F32,
            &[1],
            &[0u8; 4],
            tensorvault_store::Tier::Tier0,
        )
        .unwrap_err();
    assert!(matches!(e, StoreErr::Io { .. }), "{e:?}");
    drop((r1, r2));
    // The refused write left nothing behind: the writer sees only "w".
    let w = DirStore::open_path(tmp.path(), TENANT, COLL, cfg(), false).unwrap();
    let names: Vec<_> = w
        .tensors()
        .unwrap()
        .into_iter()
        .filter_map(|t| t.name)
        .collect();
    assert_eq!(names, ["w"]);
}

/// A valid-CRC names.log record that gives an existing tensor another tensor's name used
/// to make `ls` list two tensors with one name. Ids derive from names: such a record is
/// rejected at open, counted as a skipped catalog record (verify reports it), and the
/// genuine names stand, whichever record came last.
#[test]
fn forged_names_log_records_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..16u32).flat_map(|v| (v as f32).to_le_bytes()).collect();
    let (id_a, id_b);
    {
        let s = DirStore::open_path(dir.path(), "t", "c", cfg(), true).unwrap();
        id_a = s
            .put_tensor("a", DType::F32, &[16], &data, Tier::Tier0)
            .unwrap()
            .tensor_id;
        id_b = s
            .put_tensor("b", DType::F32, &[16], &data, Tier::Tier0)
            .unwrap()
            .tensor_id;
        s.close().unwrap();
    }
    {
        // Forge: b is "a", and a is "zzz" (appended after the genuine records).
        let mut cat = Catalog::open(&dir.path().join("t/c/names.log")).unwrap();
        cat.insert(id_b, "a", true).unwrap();
        cat.insert(id_a, "zzz", true).unwrap();
    }
    let s = DirStore::open_path(dir.path(), "t", "c", cfg(), false).unwrap();
    let mut names: Vec<(u128, String)> = s
        .tensors()
        .unwrap()
        .into_iter()
        .map(|t| (t.tensor_id, t.name.unwrap_or_default()))
        .collect();
    names.sort();
    let mut want = vec![(id_a, "a".to_owned()), (id_b, "b".to_owned())];
    want.sort();
    assert_eq!(names, want);
    assert_eq!(s.verify().unwrap().catalog_skipped, 2);
    assert_eq!(s.get_tensor("a").unwrap().info.tensor_id, id_a);
}

/// A writer arriving while readers list or verify the collection waits for them
/// (`StoreConfig::lock_wait`) instead of failing at once; another writer is not waited for.
#[test]
fn a_writer_waits_for_readers_but_not_for_a_writer() {
    let tmp = common::scratch_dir("hostile-wait");
    make_store(tmp.path());
    let reader = DirStore::open_path_shared(tmp.path(), TENANT, COLL, cfg()).unwrap();
    let root = tmp.path().to_owned();
    let writer = std::thread::spawn(move || {
        let cfg = StoreConfig {
            lock_wait: std::time::Duration::from_secs(20),
            ..cfg()
        };
        let t = std::time::Instant::now();
        let w = DirStore::open_path(&root, TENANT, COLL, cfg, false).unwrap();
        (t.elapsed(), w)
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(reader);
    let (waited, w) = writer.join().unwrap();
    assert!(
        waited >= std::time::Duration::from_millis(250),
        "{waited:?}"
    );
    // A second writer fails at once, naming the holder (this process: flock alone
    // would blame another one).
    let t = std::time::Instant::now();
    match DirStore::open_path(tmp.path(), TENANT, COLL, cfg(), false) {
        Err(StoreErr::Locked { held, waited, .. }) => {
            assert!(
                held.starts_with("already open for writing in this process"),
                "{held}"
            );
            assert!(waited.is_empty());
        }
        other => panic!("expected Locked, got {:?}", other.map(|_| ())),
    }
    assert!(t.elapsed() < std::time::Duration::from_millis(150));
    drop(w);
}
