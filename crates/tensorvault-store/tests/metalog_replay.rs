//! MetaLog replay and recovery: skip vs point-in-time on a corrupt middle record, torn
//! tails cut at every byte, trailing garbage, every single-bit flip of a small log, and
//! the append-before-replay rule. Every file case runs on `FileMetaLog`; the bit flips
//! also run on `MemMetaLog`, which holds the same bytes.

use std::path::Path;

use tensorvault_store::meta_log::layout::RECORD_LEN;
use tensorvault_store::{
    BlockKey, BlockMeta, CollectionConfig, DType, FileMetaLog, MemMetaLog, MetaLog, MetaRecord,
    ReconstructPolicy, RecoveryMode, ReplayStats, StoreErr, Tier,
};

const R: u64 = RECORD_LEN as u64;

fn meta(i: u32) -> BlockMeta {
    BlockMeta {
        key: BlockKey::new(u128::from(i % 3) << 64 | 0xabc, i),
        shape: [64, 64, 0, 0, 0, 0, 0, 0],
        shape_ndim: 2,
        dtype: DType::F32,
        tier: Tier::Tier1,
        bits: 8,
        scale: 0.5 + i as f32,
        zero_point: 0,
        created_at: u64::from(i),
        last_access_at: u64::from(i),
        access_count: 0,
        ema_access_rate: 0.0,
        access_window: 1,
        checksum: i.wrapping_mul(0x9e37_79b9),
        lineage_parent: 0,
        reconstruct: ReconstructPolicy::None,
        kind: tensorvault_store::TensorKind::Generic,
        tier_since: u64::from(i),
        data_offset: u64::from(i) * 4224,
        data_len: 4185,
        centre: None,
    }
}

/// `n` records cycling through the four types.
fn records(n: u32) -> Vec<MetaRecord> {
    (0..n)
        .map(|i| {
            let key = meta(i).key;
            match i % 4 {
                0 => MetaRecord::Create { meta: meta(i) },
                1 => MetaRecord::Access {
                    key,
                    last_access_at: u64::from(i) + 10,
                    access_count: i,
                    ema_access_rate: 0.25,
                    access_window: 0b1011,
                },
                2 => MetaRecord::Migrate {
                    key,
                    old_tier: Tier::Tier1,
                    new_tier: Tier::Tier3,
                    new_bits: 3,
                    new_scale: 2.0,
                    new_checksum: i,
                    new_data_offset: 1600 * u64::from(i),
                    new_data_len: 1577,
                    at: u64::from(i) + 20,
                },
                _ => MetaRecord::Delete { key },
            }
        })
        .collect()
}

fn write_log(path: &Path, recs: &[MetaRecord]) {
    let mut log = FileMetaLog::create(path, &CollectionConfig::default()).unwrap();
    log.append(recs).unwrap();
    log.sync().unwrap();
}

fn replay_all(log: &mut dyn MetaLog, mode: RecoveryMode) -> (Vec<MetaRecord>, ReplayStats) {
    let mut got = Vec::new();
    let stats = log
        .replay(mode, &mut |r| {
            got.push(r);
            Ok(())
        })
        .unwrap();
    (got, stats)
}

fn replay_file(path: &Path, mode: RecoveryMode) -> (Vec<MetaRecord>, ReplayStats) {
    let mut log = FileMetaLog::open(path).unwrap();
    replay_all(&mut log, mode)
}

const MODES: [RecoveryMode; 2] = [
    RecoveryMode::SkipAnyCorruptedRecords,
    RecoveryMode::PointInTime,
];

#[test]
fn create_replay_reopen_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.log");
    let recs = records(41);
    write_log(&path, &recs);
    assert!(
        FileMetaLog::create(&path, &CollectionConfig::default()).is_err(),
        "create must not clobber"
    );
    for mode in MODES {
        let mut log = FileMetaLog::open(&path).unwrap();
        assert_eq!(log.record_count(), 41);
        assert_eq!(log.collection(), CollectionConfig::default());
        let (got, stats) = replay_all(&mut log, mode);
        assert_eq!(got, recs);
        assert_eq!(
            stats,
            ReplayStats {
                applied: 41,
                ..ReplayStats::default()
            }
        );
    }
    // open_or_create opens the existing log and keeps its geometry.
    let log = FileMetaLog::open_or_create(&path, &CollectionConfig::with_block_elems(64)).unwrap();
    assert_eq!(log.collection(), CollectionConfig::default());
    let other = dir.path().join("other.log");
    let log = FileMetaLog::open_or_create(&other, &CollectionConfig::with_block_elems(64)).unwrap();
    assert_eq!(log.collection().block_elems, 64);
}

#[test]
fn append_before_replay_is_refused_and_visitor_errors_stop_replay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.log");
    write_log(&path, &records(4));
    let mut log = FileMetaLog::open(&path).unwrap();
    let err = log.append(&records(1)).unwrap_err();
    assert!(
        matches!(
            err,
            StoreErr::InvalidArgument {
                field: "append",
                ..
            }
        ),
        "{err}"
    );
    let mut seen = 0;
    let err = log
        .replay(RecoveryMode::SkipAnyCorruptedRecords, &mut |_| {
            seen += 1;
            if seen == 2 {
                Err(StoreErr::InvalidArgument {
                    field: "visit",
                    reason: "stop".into(),
                })
            } else {
                Ok(())
            }
        })
        .unwrap_err();
    assert!(matches!(
        err,
        StoreErr::InvalidArgument { field: "visit", .. }
    ));
    assert_eq!(seen, 2);
    assert!(
        log.append(&records(1)).is_err(),
        "a failed replay does not enable appends"
    );
    let mut mem = MemMetaLog::from_bytes(std::fs::read(&path).unwrap()).unwrap();
    assert!(mem.append(&records(1)).is_err());
    // Records that would not replay are refused before anything is written.
    let (_, _) = replay_all(&mut log, RecoveryMode::SkipAnyCorruptedRecords);
    let mut bad = meta(0);
    bad.scale = f32::NAN;
    let err = log
        .append(&[records(1)[0], MetaRecord::Create { meta: bad }])
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreErr::InvalidArgument {
                field: "record",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("create.scale"), "{err}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 128 + 4 * R);
}

#[test]
fn corrupt_middle_record_skip_vs_point_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(5);
    for mode in MODES {
        let path = dir.path().join(format!("{mode:?}.log"));
        write_log(&path, &recs);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[128 + 2 * 128 + 40] ^= 0x10; // inside record 2
        std::fs::write(&path, &bytes).unwrap();

        let mut log = FileMetaLog::open(&path).unwrap();
        let (got, stats) = replay_all(&mut log, mode);
        let extra = records(9)[8];
        log.append(&[extra]).unwrap();
        drop(log);
        match mode {
            RecoveryMode::SkipAnyCorruptedRecords => {
                let want = [&recs[..2], &recs[3..]].concat();
                assert_eq!(got, want);
                assert_eq!(stats.applied, 4);
                assert_eq!(stats.skipped_total, 1);
                assert_eq!(stats.skipped.len(), 1);
                assert_eq!(stats.skipped[0].0, 384);
                assert!(
                    stats.skipped[0].1.contains("crc32c"),
                    "{}",
                    stats.skipped[0].1
                );
                assert_eq!((stats.truncated_bytes, stats.stopped_at), (0, None));
                // The corrupt record stays (skipped again next time); the append follows.
                let (again, s2) = replay_file(&path, mode);
                assert_eq!(again, [&want[..], &[extra]].concat());
                assert_eq!(s2.skipped_total, 1);
            }
            RecoveryMode::PointInTime => {
                assert_eq!(got, recs[..2]);
                assert_eq!(stats.applied, 2);
                assert_eq!(stats.skipped_total, 0);
                assert_eq!(stats.stopped_at, Some(384));
                assert_eq!(stats.truncated_bytes, 3 * R);
                // Everything from the stop point was cut; the append landed there.
                assert_eq!(std::fs::metadata(&path).unwrap().len(), 128 + 3 * R);
                let (again, s2) = replay_file(&path, mode);
                assert_eq!(again, [&recs[..2], &[extra]].concat());
                assert_eq!(
                    s2,
                    ReplayStats {
                        applied: 3,
                        ..ReplayStats::default()
                    }
                );
            }
        }
    }
}

#[test]
fn torn_tail_cut_at_every_byte_of_the_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(6);
    let path = dir.path().join("full.log");
    write_log(&path, &recs);
    let full = std::fs::read(&path).unwrap();
    let extra = records(8)[7];
    for mode in MODES {
        for keep in 0..RECORD_LEN {
            let path = dir.path().join("torn.log");
            let len = 128 + 5 * RECORD_LEN + keep;
            std::fs::write(&path, &full[..len]).unwrap();
            let mut log = FileMetaLog::open(&path).unwrap();
            let (got, stats) = replay_all(&mut log, mode);
            assert_eq!(got, recs[..5], "keep {keep}");
            assert_eq!(stats.truncated_bytes, keep as u64);
            assert_eq!(
                (stats.skipped_total, stats.stopped_at),
                (0, None),
                "a partial record is not corruption"
            );
            // Replay leaves the file as it is (reading never writes); the first append
            // cuts the tail.
            assert_eq!(std::fs::metadata(&path).unwrap().len(), len as u64);
            log.append(&[extra]).unwrap();
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 128 + 6 * R);
            log.sync().unwrap();
            drop(log);
            let (again, s2) = replay_file(&path, mode);
            assert_eq!(again, [&recs[..5], &[extra]].concat(), "keep {keep}");
            assert_eq!(s2.truncated_bytes, 0);
        }
    }
}

#[test]
fn trailing_garbage_is_cut_in_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(7);
    let extra = records(4)[1];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for mode in MODES {
        for extra_len in [1usize, 64, 127, 128, 129, 300, 1000, 4096] {
            let path = dir.path().join("g.log");
            let _ = std::fs::remove_file(&path);
            write_log(&path, &recs);
            let mut bytes = std::fs::read(&path).unwrap();
            let garbage: Vec<u8> = (0..extra_len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            bytes.extend_from_slice(&garbage);
            // Zeros too: a crash can leave a hole of zeros at the end.
            bytes.extend(std::iter::repeat_n(0u8, extra_len));
            std::fs::write(&path, &bytes).unwrap();
            let mut log = FileMetaLog::open(&path).unwrap();
            let (got, stats) = replay_all(&mut log, mode);
            assert_eq!(got, recs, "{mode:?} +{extra_len}");
            assert_eq!(stats.truncated_bytes, 2 * extra_len as u64);
            assert_eq!(stats.skipped_total, 0, "a trailing run is cut, not skipped");
            log.append(&[extra]).unwrap();
            drop(log);
            let (again, s2) = replay_file(&path, mode);
            assert_eq!(again, [&recs[..], &[extra]].concat());
            assert_eq!(
                s2,
                ReplayStats {
                    applied: 8,
                    ..ReplayStats::default()
                }
            );
        }
    }
}

/// Check one replay of a log whose bit `bit` (of the record area) was flipped.
fn check_flip(
    got: &[MetaRecord],
    stats: &ReplayStats,
    recs: &[MetaRecord],
    bit: usize,
    mode: RecoveryMode,
) {
    let rec = bit / 8 / RECORD_LEN;
    let offset = 128 + (rec * RECORD_LEN) as u64;
    let last = rec == recs.len() - 1;
    match mode {
        RecoveryMode::SkipAnyCorruptedRecords => {
            let want: Vec<_> = recs
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != rec)
                .map(|(_, r)| *r)
                .collect();
            assert_eq!(got, want, "bit {bit}");
            if last {
                assert_eq!(
                    (stats.skipped_total, stats.truncated_bytes),
                    (0, R),
                    "bit {bit}"
                );
            } else {
                assert_eq!(stats.skipped_total, 1, "bit {bit}");
                assert_eq!(stats.skipped[0].0, offset);
            }
        }
        RecoveryMode::PointInTime => {
            assert_eq!(got, &recs[..rec], "bit {bit}");
            assert_eq!(stats.stopped_at, Some(offset));
            assert_eq!(stats.truncated_bytes, (recs.len() - rec) as u64 * R);
        }
    }
}

#[test]
fn every_single_bit_flip_drops_at_most_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.log");
    let recs = records(6);
    write_log(&path, &recs);
    let clean = std::fs::read(&path).unwrap();
    let flip_path = dir.path().join("flip.log");
    for bit in 0..clean.len() * 8 {
        let mut bytes = clean.clone();
        bytes[bit / 8] ^= 1 << (bit % 8);
        if bit < RECORD_LEN * 8 {
            assert!(
                matches!(
                    MemMetaLog::from_bytes(bytes.clone()),
                    Err(StoreErr::BadHeader { .. })
                ),
                "header bit {bit}"
            );
            if bit % 3 == 0 {
                std::fs::write(&flip_path, &bytes).unwrap();
                let err = FileMetaLog::open(&flip_path).unwrap_err();
                assert!(
                    matches!(err, StoreErr::BadHeader { .. }),
                    "header bit {bit}: {err}"
                );
            }
            continue;
        }
        let rbit = bit - RECORD_LEN * 8;
        for mode in MODES {
            let mut mem = MemMetaLog::from_bytes(bytes.clone()).unwrap();
            let (got, stats) = replay_all(&mut mem, mode);
            check_flip(&got, &stats, &recs, rbit, mode);
            // The file log on a sample of the flips (each costs a few syscalls).
            if rbit.is_multiple_of(5) {
                std::fs::write(&flip_path, &bytes).unwrap();
                let (got_f, stats_f) = replay_file(&flip_path, mode);
                assert_eq!((got_f, stats_f), (got, stats), "file vs mem, bit {bit}");
                // Replay of a file does not write it: the flip stays for verify to see,
                // and the memory log's cut is a prefix of it.
                let on_disk = std::fs::read(&flip_path).unwrap();
                assert_eq!(on_disk, bytes, "replay wrote the file, bit {bit}");
                assert!(on_disk.starts_with(&mem.to_bytes()), "same cut, bit {bit}");
            }
        }
    }
}

#[test]
fn skipped_entries_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.log");
    let recs = records(1200);
    write_log(&path, &recs);
    let mut bytes = std::fs::read(&path).unwrap();
    for i in 0..1100 {
        bytes[128 + i * RECORD_LEN + 5] ^= 0xff;
    }
    std::fs::write(&path, &bytes).unwrap();
    let (got, stats) = replay_file(&path, RecoveryMode::SkipAnyCorruptedRecords);
    assert_eq!(got, recs[1100..]);
    assert_eq!(stats.skipped_total, 1100);
    assert_eq!(stats.skipped.len(), 1024);
    assert_eq!(stats.skipped[1023].0, 128 + 1023 * R);
    assert_eq!(stats.truncated_bytes, 0);
}

#[test]
fn large_log_replays_across_chunk_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.log");
    // More than one replay chunk, with a corrupt record on a chunk boundary and a torn tail.
    let recs = records(3000);
    write_log(&path, &recs);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[128 + 512 * RECORD_LEN] ^= 0x01;
    bytes.extend_from_slice(&[7; 77]);
    std::fs::write(&path, &bytes).unwrap();
    let (got, stats) = replay_file(&path, RecoveryMode::SkipAnyCorruptedRecords);
    assert_eq!(got.len(), 2999);
    assert_eq!(got[..512], recs[..512]);
    assert_eq!(got[512..], recs[513..]);
    assert_eq!(stats.skipped[0].0, 128 + 512 * R);
    assert_eq!(stats.truncated_bytes, 77);
}
