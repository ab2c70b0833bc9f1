//! BlockIO micro-benchmarks on `MmapBlockIO` in a temporary directory (fsync off):
//! `write_block` of a full Tier0 slot (16 KiB) and a full Tier3 slot (1600 B), and the
//! warm read path `with_block` + CRC32C of 16 KiB, alone and from 2 threads; a churn of
//! mixed-size Tier3 blocks with slot and with extent allocation.
//!
//! `cargo bench -p tensorvault-store --bench blockio`

// criterion_group! generates an undocumented `pub fn benches`.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tensorvault_store::{BlockIO, BlockKey, CollectionConfig, MmapBlockIO, Tier};

fn payload(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Write a block, then free it: the steady state of a store that reuses slots
/// (the next write lands in the same slot, so the file does not grow without bound).
fn bench_write(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let g = CollectionConfig::default();
    let io = MmapBlockIO::open(dir.path(), &g).unwrap();
    let mut group = c.benchmark_group("blockio_mmap/write_block");
    for (tier, name) in [(Tier::Tier0, "tier0_16KiB"), (Tier::Tier3, "tier3_1600B")] {
        let len = io.slot_len(tier) as usize;
        let src = payload(len, 1);
        // A few live blocks first, so the measured slot is not slot 0 of an empty file.
        for i in 0..16 {
            io.write_block(tier, BlockKey::new(1, i), &src).unwrap();
        }
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let (off, _) = io
                    .write_block(tier, BlockKey::new(2, 0), black_box(&src))
                    .unwrap();
                io.free_block(tier, off).unwrap();
                off
            });
        });
        // Appending to fresh slots (growth path included), for comparison.
        group.bench_function(format!("{name}_append"), |b| {
            let mut offs = Vec::new();
            b.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    offs.push(
                        io.write_block(tier, BlockKey::new(3, 0), black_box(&src))
                            .unwrap()
                            .0,
                    );
                }
                let e = t.elapsed();
                for off in offs.drain(..) {
                    io.free_block(tier, off).unwrap();
                }
                e
            });
        });
    }
    group.finish();
}

/// The allocator on a churn of mixed sizes, slots against extents: 2048 live Tier3 blocks
/// of 75-100% of the worst-case slot (what entropy coding leaves), each iteration
/// replacing one at random (write the new payload, free the old one), as a migration or
/// a tail rewrite does.
fn bench_churn(c: &mut Criterion) {
    let mut group = c.benchmark_group("blockio_mmap/churn_tier3_mixed");
    for extents in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let g = CollectionConfig {
            extents,
            ..CollectionConfig::default()
        };
        let io = MmapBlockIO::open(dir.path(), &g).unwrap();
        let slot = io.slot_len(Tier::Tier3) as usize;
        let lens: Vec<usize> = (0..4096)
            .map(|i| slot * (75 + (i * 37) % 26) / 100)
            .collect();
        let src = payload(slot, 7);
        let mut live: Vec<u64> = (0..2048u32)
            .map(|i| {
                io.write_block(Tier::Tier3, BlockKey::new(1, i), &src[..lens[i as usize]])
                    .unwrap()
                    .0
            })
            .collect();
        let mut i = 0usize;
        group.throughput(Throughput::Elements(1));
        group.bench_function(if extents { "extent" } else { "slot" }, |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                let victim = (i * 7919) % live.len();
                let len = lens[i % lens.len()];
                let (off, _) = io
                    .write_block(Tier::Tier3, BlockKey::new(2, 0), black_box(&src[..len]))
                    .unwrap();
                io.free_block(Tier::Tier3, live[victim]).unwrap();
                live[victim] = off;
            });
        });
    }
    group.finish();
}

fn bench_read(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let g = CollectionConfig::default();
    let io = MmapBlockIO::open(dir.path(), &g).unwrap();
    let n = 256u32;
    let len = io.slot_len(Tier::Tier0);
    let blocks: Vec<u64> = (0..n)
        .map(|i| {
            io.write_block(
                Tier::Tier0,
                BlockKey::new(1, i),
                &payload(len as usize, i as u8),
            )
            .unwrap()
            .0
        })
        .collect();
    // Warm: touch every block once.
    for &off in &blocks {
        io.with_block(Tier::Tier0, BlockKey::new(1, 0), off, len, &mut |b| {
            black_box(crc32c::crc32c(b));
        })
        .unwrap();
    }
    let mut group = c.benchmark_group("blockio_mmap/read_16KiB");
    group.throughput(Throughput::Bytes(u64::from(len)));
    let key = BlockKey::new(1, 0);
    let mut i = 0usize;
    group.bench_function("with_block_only", |b| {
        b.iter(|| {
            i = (i + 97) % blocks.len();
            let mut first = 0u8;
            io.with_block(Tier::Tier0, key, blocks[i], len, &mut |b| first = b[0])
                .unwrap();
            first
        });
    });
    group.bench_function("with_block_crc32c", |b| {
        b.iter(|| {
            i = (i + 97) % blocks.len();
            let mut crc = 0;
            io.with_block(Tier::Tier0, key, blocks[i], len, &mut |b| {
                crc = crc32c::crc32c(b)
            })
            .unwrap();
            crc
        });
    });
    group.bench_function("crc32c_only", |b| {
        let buf = payload(len as usize, 3);
        b.iter(|| crc32c::crc32c(black_box(&buf)));
    });
    group.bench_function("read_block_copy", |b| {
        let mut dst = vec![0u8; len as usize];
        b.iter(|| {
            i = (i + 97) % blocks.len();
            io.read_block(Tier::Tier0, key, blocks[i], len, &mut dst)
                .unwrap()
        });
    });
    // Two threads reading at once: time per read on one thread while another reads too.
    group.bench_function("with_block_crc32c_2_threads", |b| {
        b.iter_custom(|iters| {
            let per = |start: usize| {
                let mut j = start;
                let t = Instant::now();
                for _ in 0..iters {
                    j = (j + 97) % blocks.len();
                    let mut crc = 0;
                    io.with_block(Tier::Tier0, key, blocks[j], len, &mut |b| {
                        crc = crc32c::crc32c(b)
                    })
                    .unwrap();
                    black_box(crc);
                }
                t.elapsed()
            };
            std::thread::scope(|s| {
                let other = s.spawn(|| per(1));
                let mine = per(0);
                let theirs: Duration = other.join().unwrap();
                mine.max(theirs)
            })
        });
    });
    group.finish();
}

criterion_group!(benches, bench_write, bench_churn, bench_read);
criterion_main!(benches);
