//! Core latencies of the temporal tensor store (issue 5), 16 KiB blocks (4096 f32):
//! put / get / index lookup / CRC32C / migration, with redb's put and get on the same
//! blocks for comparison. The side-by-side table with percentiles, throughput, replay
//! and memory is `examples/store_bench.rs` (`bench/store/run.sh`).
//!
//! `cargo bench -p tensorvault-bench --bench store`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use redb::{ReadableDatabase, TableDefinition};
use tensorvault_store::{BlockInfo, BlockKey, DType, DirStore, Durability, StoreConfig, Tier};

const ELEMS: usize = 4096;
/// Distinct blocks the benches cycle over (a 32 MiB working set).
const KEYS: usize = 2048;
const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("blocks");

fn block(seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..ELEMS)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1).to_le_bytes()
        })
        .collect()
}

fn key(i: usize) -> BlockKey {
    BlockKey::new(
        0x51ab_1e00 + (i / 64) as u128 * 0x9e37_79b9_7f4a_7c15,
        (i % 64) as u32,
    )
}

fn rkey(i: usize) -> [u8; 20] {
    let k = key(i);
    let mut b = [0u8; 20];
    b[..16].copy_from_slice(&k.tensor_id.to_be_bytes());
    b[16..].copy_from_slice(&k.block_index.to_be_bytes());
    b
}

fn open(dir: &Path, coll: &str, durability: Durability) -> DirStore {
    let cfg = StoreConfig {
        durability,
        ..StoreConfig::default()
    };
    DirStore::open_path(dir, "bench", coll, cfg, true).expect("open store")
}

/// A pseudo-random walk over the key set (so gets miss the CPU caches as in real use).
fn walk(i: &mut usize) -> usize {
    *i = (*i + 1237) % KEYS;
    *i
}

fn benches(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data: Vec<Vec<u8>> = (0..KEYS as u64).map(block).collect();
    let shape = [ELEMS as u32];
    let info = BlockInfo::new(DType::F32, &shape);

    let mut g = c.benchmark_group("store_16k");
    g.throughput(Throughput::Bytes((ELEMS * 4) as u64))
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);

    g.bench_function("crc32c", |b| {
        let mut i = 0;
        b.iter(|| tensorvault_core::checksum::crc32c(black_box(&data[walk(&mut i)])));
    });

    // Tier0 store, fsync off, every key written once.
    let s0 = open(tmp.path(), "t0", Durability::Os);
    for (i, d) in data.iter().enumerate() {
        s0.put_block(key(i), Tier::Tier0, &info, d).expect("put");
    }
    g.bench_function("put_block_tier0_overwrite_fsync_off", |b| {
        let mut i = 0;
        b.iter(|| {
            let k = walk(&mut i);
            s0.put_block(key(k), Tier::Tier0, &info, &data[k])
                .expect("put");
        });
    });
    g.bench_function("get_block_tier0_warm", |b| {
        let mut out = Vec::with_capacity(ELEMS * 4);
        let mut i = 0;
        b.iter(|| {
            s0.get_block(&key(walk(&mut i)), &mut out).expect("get");
            black_box(&out);
        });
    });
    g.bench_function("meta_lookup", |b| {
        let mut i = 0;
        b.iter(|| black_box(s0.meta(&key(walk(&mut i))).expect("meta")));
    });

    // Tier1 store: get (dequantize) and migration Tier1 -> Tier3.
    let s1 = open(tmp.path(), "t1", Durability::Os);
    for (i, d) in data.iter().enumerate() {
        s1.put_block(key(i), Tier::Tier1, &info, d).expect("put");
    }
    g.bench_function("put_block_tier1_overwrite_fsync_off", |b| {
        let mut i = 0;
        b.iter(|| {
            let k = walk(&mut i);
            s1.put_block(key(k), Tier::Tier1, &info, &data[k])
                .expect("put");
        });
    });
    g.bench_function("get_block_tier1_warm", |b| {
        let mut out = Vec::with_capacity(ELEMS * 4);
        let mut i = 0;
        b.iter(|| {
            s1.get_block(&key(walk(&mut i)), &mut out).expect("get");
            black_box(&out);
        });
    });
    g.bench_function("migrate_tier1_to_tier3", |b| {
        let mut i = 0;
        b.iter_custom(|iters| {
            let mut t = Duration::ZERO;
            for _ in 0..iters {
                let k = walk(&mut i);
                s1.put_block(key(k), Tier::Tier1, &info, &data[k])
                    .expect("put");
                let t0 = Instant::now();
                s1.migrate_block(&key(k), Tier::Tier3).expect("migrate");
                t += t0.elapsed();
            }
            t
        });
    });

    // redb, same blocks, one write transaction per put (durability None = no fsync).
    let db = redb::Database::create(tmp.path().join("redb.db")).expect("redb");
    {
        let tx = db.begin_write().expect("txn");
        {
            let mut t = tx.open_table(TABLE).expect("table");
            for (i, d) in data.iter().enumerate() {
                t.insert(&rkey(i)[..], &d[..]).expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
    g.bench_function("redb_put_overwrite_durability_none", |b| {
        let mut i = 0;
        b.iter(|| {
            let k = walk(&mut i);
            let mut tx = db.begin_write().expect("txn");
            tx.set_durability(redb::Durability::None)
                .expect("durability");
            {
                let mut t = tx.open_table(TABLE).expect("table");
                t.insert(&rkey(k)[..], &data[k][..]).expect("insert");
            }
            tx.commit().expect("commit");
        });
    });
    g.bench_function("redb_get_warm_txn_per_get", |b| {
        let mut out = Vec::with_capacity(ELEMS * 4);
        let mut i = 0;
        b.iter(|| {
            let rx = db.begin_read().expect("txn");
            let t = rx.open_table(TABLE).expect("table");
            let v = t
                .get(&rkey(walk(&mut i))[..])
                .expect("get")
                .expect("present");
            out.clear();
            out.extend_from_slice(v.value());
            black_box(&out);
        });
    });
    g.bench_function("redb_get_warm_one_txn", |b| {
        let rx = db.begin_read().expect("txn");
        let t = rx.open_table(TABLE).expect("table");
        let mut out = Vec::with_capacity(ELEMS * 4);
        let mut i = 0;
        b.iter(|| {
            let v = t
                .get(&rkey(walk(&mut i))[..])
                .expect("get")
                .expect("present");
            out.clear();
            out.extend_from_slice(v.value());
            black_box(&out);
        });
    });
    g.finish();
    drop((s0, s1, db));
}

criterion_group!(store, benches);
criterion_main!(store);
