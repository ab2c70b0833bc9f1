//! Time MetaLog replay of 1M records (issue 5 target: <= 150 ms; ADR-018: < 500 ms).
//!
//! `cargo run --release -p tensorvault-store --example metalog_replay [N] [DIR]`
//!
//! Writes N (default 1,000,000) records of all four types to `DIR/meta.log` (a temp dir
//! by default), then replays the file with a warm page cache several times and prints
//! the min and median, for the file log and for the same bytes in a `MemMetaLog`.

use std::time::{Duration, Instant};

use tensorvault_store::{
    BlockKey, BlockMeta, CollectionConfig, DType, FileMetaLog, MemMetaLog, MetaLog, MetaRecord,
    ReconstructPolicy, RecoveryMode, Tier,
};

fn record(i: u64) -> MetaRecord {
    let key = BlockKey::new(u128::from(i / 16) * 0x9e37_79b9_7f4a_7c15, (i % 16) as u32);
    match i % 8 {
        0..=3 => MetaRecord::Create {
            meta: BlockMeta {
                key,
                shape: [1024, 1024, 0, 0, 0, 0, 0, 0],
                shape_ndim: 2,
                dtype: DType::F32,
                tier: Tier::Tier1,
                bits: 8,
                scale: 0.01,
                zero_point: 0,
                created_at: i,
                last_access_at: i,
                access_count: 0,
                ema_access_rate: 0.0,
                access_window: 1,
                checksum: i as u32,
                lineage_parent: 0,
                reconstruct: ReconstructPolicy::None,
                kind: tensorvault_store::TensorKind::Generic,
                tier_since: i,
                data_offset: i * 4224,
                data_len: 4185,
                centre: None,
            },
        },
        4 | 5 => MetaRecord::Access {
            key,
            last_access_at: i,
            access_count: 3,
            ema_access_rate: 0.2,
            access_window: 0b101,
        },
        6 => MetaRecord::Migrate {
            key,
            old_tier: Tier::Tier1,
            new_tier: Tier::Tier3,
            new_bits: 3,
            new_scale: 0.5,
            new_checksum: 1,
            new_data_offset: i * 1600,
            new_data_len: 1577,
            at: i,
        },
        _ => MetaRecord::Delete { key },
    }
}

fn summarize(name: &str, mut t: Vec<Duration>, n: u64) {
    t.sort();
    let min = t[0];
    let med = t[t.len() / 2];
    println!(
        "{name:<28} min {:>7.1} ms  median {:>7.1} ms  ({:.0} M records/s at the median)",
        min.as_secs_f64() * 1e3,
        med.as_secs_f64() * 1e3,
        n as f64 / med.as_secs_f64() / 1e6
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let tmp;
    let dir = match args.next() {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let path = dir.join("meta.log");
    let _ = std::fs::remove_file(&path);
    let mut log = FileMetaLog::create(&path, &CollectionConfig::default())?;
    let batch: Vec<MetaRecord> = (0..n).map(record).collect();
    let t = Instant::now();
    for b in batch.chunks(4096) {
        log.append(b)?;
    }
    log.sync()?;
    println!(
        "wrote {n} records ({} MB) in {:.1} ms",
        log.len_bytes() >> 20,
        t.elapsed().as_secs_f64() * 1e3
    );
    drop(log);

    for mode in [
        RecoveryMode::SkipAnyCorruptedRecords,
        RecoveryMode::PointInTime,
    ] {
        let mut times = Vec::new();
        for _ in 0..9 {
            let t = Instant::now();
            let mut log = FileMetaLog::open(&path)?;
            let mut count = 0u64;
            let stats = log.replay(mode, &mut |r| {
                count += u64::from(matches!(r, MetaRecord::Create { .. }));
                Ok(())
            })?;
            times.push(t.elapsed());
            assert_eq!(stats.applied, n);
            std::hint::black_box(count);
        }
        summarize(&format!("file open+replay {mode:?}"), times, n);
    }

    let bytes = std::fs::read(&path)?;
    let mut times = Vec::new();
    for _ in 0..9 {
        let mut mem = MemMetaLog::from_bytes(bytes.clone())?;
        let t = Instant::now();
        let stats = mem.replay(RecoveryMode::SkipAnyCorruptedRecords, &mut |r| {
            std::hint::black_box(r);
            Ok(())
        })?;
        times.push(t.elapsed());
        assert_eq!(stats.applied, n);
    }
    summarize("mem replay", times, n);
    Ok(())
}
