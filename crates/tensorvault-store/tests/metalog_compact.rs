//! MetaLog compaction (snapshot + rename, generation, crash before the rename, failure
//! keeps the old log) and the byte equality of `MemMetaLog` with the file format.

use std::path::Path;
use std::sync::{Arc, Mutex};

use tensorvault_store::meta_log::layout::RECORD_LEN;
use tensorvault_store::meta_log::{decode_header, encode_header, encode_record};
use tensorvault_store::{
    BlockKey, BlockMeta, CollectionConfig, DType, FileMetaLog, MemMetaLog, MetaLog, MetaRecord,
    ReconstructPolicy, RecoveryMode,
};

fn create(i: u32) -> MetaRecord {
    MetaRecord::Create {
        meta: BlockMeta {
            key: BlockKey::new(0xfeed, i),
            shape: [1000, 0, 0, 0, 0, 0, 0, 0],
            shape_ndim: 1,
            dtype: DType::BF16,
            tier: tensorvault_store::Tier::Tier0,
            bits: 16,
            scale: 0.0,
            zero_point: 0,
            created_at: 7,
            last_access_at: 7,
            access_count: 0,
            ema_access_rate: 0.0,
            access_window: 1,
            checksum: i,
            lineage_parent: 3,
            reconstruct: ReconstructPolicy::None,
            kind: tensorvault_store::TensorKind::Generic,
            tier_since: 7,
            data_offset: u64::from(i) * 8192,
            data_len: 2000,
            centre: None,
        },
    }
}

fn access(i: u32) -> MetaRecord {
    MetaRecord::Access {
        key: BlockKey::new(0xfeed, i),
        last_access_at: 99,
        access_count: 4,
        ema_access_rate: 0.3,
        access_window: 0b111,
    }
}

fn replay(log: &mut dyn MetaLog) -> Vec<MetaRecord> {
    let mut got = Vec::new();
    let stats = log
        .replay(RecoveryMode::PointInTime, &mut |r| {
            got.push(r);
            Ok(())
        })
        .unwrap();
    assert_eq!(
        (stats.skipped_total, stats.truncated_bytes, stats.stopped_at),
        (0, 0, None)
    );
    got
}

fn reopen(path: &Path) -> (FileMetaLog, Vec<MetaRecord>) {
    let mut log = FileMetaLog::open(path).unwrap();
    let got = replay(&mut log);
    (log, got)
}

fn history() -> Vec<MetaRecord> {
    let mut h: Vec<_> = (0..10).map(create).collect();
    h.extend((0..10).map(access));
    h.extend((5..10).map(|i| MetaRecord::Delete {
        key: BlockKey::new(0xfeed, i),
    }));
    h
}

/// The live state after `history`: blocks 0..5 with their access stats.
fn snapshot() -> Vec<MetaRecord> {
    (0..5).flat_map(|i| [create(i), access(i)]).collect()
}

#[test]
fn compaction_replaces_the_log_and_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.log");
    let mut log = FileMetaLog::create(&path, &CollectionConfig::default()).unwrap();
    log.append(&history()).unwrap();
    log.sync().unwrap();
    assert_eq!(log.record_count(), 25);
    log.compact(&mut snapshot().into_iter()).unwrap();
    assert_eq!((log.generation(), log.record_count()), (1, 10));
    assert!(!dir.path().join("meta.log.compact").exists());
    // Appends after compaction go to the new file.
    log.append(&[create(20)]).unwrap();
    log.sync().unwrap();
    drop(log);
    let (mut log, got) = reopen(&path);
    assert_eq!(got, [snapshot(), vec![create(20)]].concat());
    assert_eq!(log.generation(), 1);
    assert_eq!(decode_header(&std::fs::read(&path).unwrap()).unwrap().1, 1);
    // A second compaction increments again; an empty snapshot is a header-only log.
    log.compact(&mut std::iter::empty()).unwrap();
    drop(log);
    let (log, got) = reopen(&path);
    assert!(got.is_empty());
    assert_eq!((log.generation(), log.record_count()), (2, 0));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), RECORD_LEN as u64);
}

#[test]
fn crash_before_rename_leaves_the_old_log_and_the_temp_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.log");
    let tmp = dir.path().join("meta.log.compact");
    let mut log = FileMetaLog::create(&path, &CollectionConfig::default()).unwrap();
    log.append(&history()).unwrap();
    log.sync().unwrap();
    let before = std::fs::read(&path).unwrap();
    drop(log);
    // What compaction had written when the process died before the rename: a complete
    // (or partial) generation-1 snapshot under the temp name.
    let mut temp = encode_header(&CollectionConfig::default(), 1).to_vec();
    for r in snapshot() {
        temp.extend_from_slice(&encode_record(&r));
    }
    for cut in [temp.len(), temp.len() - 50, 60] {
        std::fs::write(&tmp, &temp[..cut]).unwrap();
        let (mut log, got) = reopen(&path);
        assert!(!tmp.exists(), "leftover temp removed at open");
        assert_eq!(got, history(), "the old log is the log");
        assert_eq!(log.generation(), 0);
        assert_eq!(std::fs::read(&path).unwrap(), before);
        // The next compaction works and increments the generation.
        if cut == 60 {
            log.compact(&mut snapshot().into_iter()).unwrap();
            drop(log);
            let (log, got) = reopen(&path);
            assert_eq!(got, snapshot());
            assert_eq!(log.generation(), 1);
        }
    }
}

#[test]
fn failed_compaction_keeps_the_old_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.log");
    let mut log = FileMetaLog::create(&path, &CollectionConfig::default()).unwrap();
    log.append(&history()).unwrap();
    let before = std::fs::read(&path).unwrap();
    // A snapshot with a record that would not replay fails midway.
    let MetaRecord::Create { meta } = create(1) else {
        unreachable!()
    };
    let bad = MetaRecord::Create {
        meta: BlockMeta {
            scale: f32::INFINITY,
            ..meta
        },
    };
    let err = log.compact(&mut [create(0), bad].into_iter()).unwrap_err();
    assert!(err.to_string().contains("create.scale"), "{err}");
    assert!(
        !dir.path().join("meta.log.compact").exists(),
        "temp removed on error"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(log.generation(), 0);
    // The old log still takes appends.
    log.append(&[create(30)]).unwrap();
    drop(log);
    let (_, got) = reopen(&path);
    assert_eq!(got, [history(), vec![create(30)]].concat());

    let mut mem = MemMetaLog::new(CollectionConfig::default());
    mem.append(&history()).unwrap();
    let before = mem.to_bytes();
    assert!(mem.compact(&mut [bad].into_iter()).is_err());
    assert_eq!((mem.to_bytes(), mem.generation()), (before, 0));
}

#[test]
fn mem_log_bytes_equal_the_file_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.log");
    let cfg = CollectionConfig::kv_cache(128).unwrap();
    let mut file = FileMetaLog::create(&path, &cfg).unwrap();
    let persisted = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&persisted);
    let mut mem = MemMetaLog::try_new(cfg)
        .unwrap()
        .with_persist_hook(move |b: &[u8]| *sink.lock().unwrap() = b.to_vec());
    for log in [&mut file as &mut dyn MetaLog, &mut mem] {
        log.append(&history()).unwrap();
        log.sync().unwrap();
    }
    assert_eq!(mem.to_bytes(), std::fs::read(&path).unwrap());
    assert_eq!(
        *persisted.lock().unwrap(),
        mem.to_bytes(),
        "sync hands the whole log to the hook"
    );
    assert_eq!(mem.record_count(), file.record_count());
    for log in [&mut file as &mut dyn MetaLog, &mut mem] {
        log.compact(&mut snapshot().into_iter()).unwrap();
        log.append(&[access(2)]).unwrap();
        log.sync().unwrap();
    }
    assert_eq!(mem.to_bytes(), std::fs::read(&path).unwrap());
    assert_eq!(*persisted.lock().unwrap(), mem.to_bytes());
    assert_eq!(mem.collection(), cfg);

    // A host reloads the persisted bytes; and the file's bytes load as a MemMetaLog.
    let mut back = MemMetaLog::from_bytes(persisted.lock().unwrap().clone()).unwrap();
    assert_eq!((back.collection(), back.generation()), (cfg, 1));
    assert_eq!(replay(&mut back), [snapshot(), vec![access(2)]].concat());
    let mut from_file = MemMetaLog::from_bytes(std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(replay(&mut from_file), replay(&mut back));
    // And the other way: mem bytes written to disk open as a file log.
    let p2 = dir.path().join("from_mem.log");
    std::fs::write(&p2, mem.as_bytes()).unwrap();
    assert_eq!(reopen(&p2).1, [snapshot(), vec![access(2)]].concat());
}

#[test]
fn mem_replay_cuts_a_torn_tail_and_persists_it() {
    let mut mem = MemMetaLog::new(CollectionConfig::default());
    mem.append(&history()).unwrap();
    let mut bytes = mem.to_bytes();
    bytes.truncate(bytes.len() - 5);
    let calls = Arc::new(Mutex::new(0usize));
    let c = Arc::clone(&calls);
    let mut torn = MemMetaLog::from_bytes(bytes).unwrap();
    torn.set_persist_hook(move |b: &[u8]| {
        assert_eq!(b.len() % RECORD_LEN, 0);
        *c.lock().unwrap() += 1;
    });
    let mut got = Vec::new();
    let stats = torn
        .replay(RecoveryMode::SkipAnyCorruptedRecords, &mut |r| {
            got.push(r);
            Ok(())
        })
        .unwrap();
    assert_eq!(got, history()[..24]);
    assert_eq!(stats.truncated_bytes, RECORD_LEN as u64 - 5);
    assert_eq!(*calls.lock().unwrap(), 1);
    torn.append(&[create(40)]).unwrap();
    assert_eq!(torn.record_count(), 25);
    assert!(MemMetaLog::try_new(CollectionConfig::with_block_elems(0)).is_err());
    assert!(FileMetaLog::create(
        tempfile::tempdir().unwrap().path().join("x.log"),
        &CollectionConfig::with_block_elems(0)
    )
    .is_err());
}
