//! Readers do not wait for writers (issue 26 item 4): a snapshot open takes no lock, sees
//! what the writer committed before it opened, reads it, and never writes.
#![cfg(feature = "mmap")]

use tensorvault_store::{CollectionConfig, DType, DirStore, StoreConfig, StoreErr, Tier};

fn cfg() -> StoreConfig {
    StoreConfig {
        collection: CollectionConfig::with_block_elems(256),
        ..StoreConfig::default()
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn listing(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_snapshot_reads_while_a_writer_holds_the_collection_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let vals: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.1).sin()).collect();
    let w = DirStore::open_path(tmp.path(), "t", "c", cfg(), true).unwrap();
    w.put_tensor("x", DType::F32, &[1000], &f32_bytes(&vals), Tier::Tier0)
        .unwrap();
    // The writer stays open: the snapshot opens at once, with no lock.
    let t = std::time::Instant::now();
    let r = DirStore::open_path_snapshot(tmp.path(), "t", "c", cfg()).unwrap();
    assert!(t.elapsed() < std::time::Duration::from_secs(2));
    let got = r.get_tensor("x").unwrap();
    assert_eq!(got.data, f32_bytes(&vals), "tier 0 read through pread");
    assert_eq!(r.tensors().unwrap().len(), 1);
    // The writer goes on; the snapshot keeps what it saw at its open.
    w.put_tensor("y", DType::F32, &[10], &f32_bytes(&vals[..10]), Tier::Tier1)
        .unwrap();
    assert_eq!(r.tensors().unwrap().len(), 1);
    assert!(matches!(
        r.get_tensor("y"),
        Err(StoreErr::TensorNotFound { .. })
    ));
    // A new snapshot sees the new tensor.
    let r2 = DirStore::open_path_snapshot(tmp.path(), "t", "c", cfg()).unwrap();
    assert_eq!(r2.tensors().unwrap().len(), 2);
    // Writes through a snapshot fail and change no file.
    let dir = tmp.path().join("t").join("c");
    let before = listing(&dir);
    assert!(r2
        .put_tensor("z", DType::F32, &[1], &f32_bytes(&[1.0]), Tier::Tier0)
        .is_err());
    assert!(r2.delete_tensor("x").is_err());
    drop((r, r2));
    assert_eq!(listing(&dir), before, "a snapshot reader never writes");
    // The writer is unaffected and still alone: a second writer is refused.
    assert!(matches!(
        DirStore::open_path(tmp.path(), "t", "c", cfg(), false),
        Err(StoreErr::Locked { .. })
    ));
    w.close().unwrap();
}

#[test]
fn a_snapshot_survives_a_writer_that_cuts_the_tier_files() {
    let tmp = tempfile::tempdir().unwrap();
    let vals: Vec<f32> = (0..256 * 200).map(|i| (i as f32 * 0.01).cos()).collect();
    let w = DirStore::open_path(tmp.path(), "t", "c", cfg(), true).unwrap();
    w.put_tensor("x", DType::F32, &[200, 256], &f32_bytes(&vals), Tier::Tier0)
        .unwrap();
    let r = DirStore::open_path_snapshot(tmp.path(), "t", "c", cfg()).unwrap();
    // The writer deletes the tensor: its tier file is cut to (nearly) nothing.
    assert_eq!(w.delete_tensor("x").unwrap(), 200);
    let tier0 = tmp.path().join("t/c").join(Tier::Tier0.file_name());
    assert!(std::fs::metadata(&tier0).unwrap().len() < 200 * 1024);
    // The snapshot's read of the vanished slots is an error, not a fault.
    let Err(e) = r.get_tensor("x") else {
        panic!("the blocks are gone")
    };
    assert!(!matches!(e, StoreErr::TensorNotFound { .. }), "{e}");
    w.close().unwrap();
}

#[test]
fn a_missing_collection_is_not_created_by_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    match DirStore::open_path_snapshot(tmp.path(), "t", "c", cfg()) {
        Err(e @ StoreErr::CollectionNotFound { .. }) => {
            assert!(e.to_string().starts_with("no such collection t/c"), "{e}");
        }
        other => panic!("expected CollectionNotFound, got {:?}", other.map(|_| ())),
    }
    assert!(matches!(
        DirStore::open_path(tmp.path(), "t", "c", cfg(), false),
        Err(StoreErr::CollectionNotFound { .. })
    ));
    assert!(!tmp.path().join("t").exists());
}

#[test]
fn put_tensor_reports_progress_up_to_the_whole_tensor() {
    use std::sync::{Arc, Mutex};
    let tmp = tempfile::tempdir().unwrap();
    let s = DirStore::open_path(tmp.path(), "t", "p", cfg(), true).unwrap();
    // 256-value blocks, 512 blocks per batch: 1300 blocks report after 512, 1024, end.
    let vals: Vec<f32> = (0..256 * 1300).map(|i| i as f32).collect();
    let data = f32_bytes(&vals);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let p: tensorvault_core::progress::ProgressFn =
        Arc::new(move |done, total| sink.lock().unwrap().push((done, total)));
    let info = tensorvault_store::BlockInfo::new(DType::F32, &[1300, 256]);
    s.put_tensor_progress("x", &info, &data, Tier::Tier0, Some(&p))
        .unwrap();
    let total = data.len() as u64;
    let block = 256 * 4;
    assert_eq!(
        *seen.lock().unwrap(),
        [(512 * block, total), (1024 * block, total), (total, total)]
    );
    s.close().unwrap();
}

#[test]
fn the_directory_builder_opens_every_mode() {
    use tensorvault_store::{DirStoreBuilder, OpenMode};
    let tmp = tempfile::tempdir().unwrap();
    let open = |mode| {
        DirStoreBuilder::new(tmp.path(), "t", "b")
            .config(cfg())
            .mode(mode)
            .open()
    };
    // Nothing there yet: only Create makes it.
    assert!(matches!(
        open(OpenMode::Write),
        Err(StoreErr::CollectionNotFound { .. })
    ));
    let w = open(OpenMode::Create).unwrap();
    w.put_tensor("x", DType::F32, &[1], &f32_bytes(&[2.5]), Tier::Tier0)
        .unwrap();
    // A shared reader that will not wait is refused while the writer is open; a
    // snapshot is not.
    let wait = std::time::Duration::ZERO;
    assert!(matches!(
        open(OpenMode::Shared { wait }),
        Err(StoreErr::Locked { .. })
    ));
    let snap = open(OpenMode::Snapshot).unwrap();
    assert_eq!(snap.get_tensor("x").unwrap().data, f32_bytes(&[2.5]));
    w.close().unwrap();
    let shared = open(OpenMode::Shared { wait }).unwrap();
    assert_eq!(shared.tensors().unwrap().len(), 1);
    drop(shared);
    open(OpenMode::Write).unwrap().close().unwrap();
}
