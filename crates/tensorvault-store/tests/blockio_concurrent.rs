//! Many readers and one writer on the same `BlockIO` at once: readers check every block
//! they read by content while the writer writes, rewrites, frees and grows the tiers
//! (forcing the mmap backend to remap under them). No timing is asserted.

mod blockio_common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use blockio_common::{backends_with, key, payload};
use tensorvault_store::{BlockIO, CollectionConfig, Tier};

const READERS: usize = 4;
const STABLE_PER_TIER: u64 = 50;

/// Payload length and seed of stable block `i` of `tier`.
fn stable(tier: Tier, i: u64, slot: u32) -> (u64, usize) {
    let seed = (tier as u64) << 32 | i;
    (seed, (seed as usize * 977) % (slot as usize + 1))
}

fn run(io: &dyn BlockIO, name: &str) {
    // Stable blocks: written first, never touched again, read by everyone.
    let mut stable_blocks = Vec::new();
    for tier in Tier::ALL {
        for i in 0..STABLE_PER_TIER {
            let (seed, len) = stable(tier, i, io.slot_len(tier));
            let (off, n) = io.write_block(tier, key(i), &payload(seed, len)).unwrap();
            stable_blocks.push((tier, off, n, seed));
        }
    }
    let done = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    std::thread::scope(|s| {
        for r in 0..READERS {
            let (stable_blocks, done, reads) = (&stable_blocks, &done, &reads);
            s.spawn(move || {
                let mut i = r * 7919;
                let mut mine = 0u64;
                // Keep reading until the writer is done, and at least a few thousand times.
                while !done.load(Ordering::Acquire) || mine < 2000 {
                    let (tier, off, n, seed) = stable_blocks[i % stable_blocks.len()];
                    let want = payload(seed, n as usize);
                    let mut ok = false;
                    io.with_block(tier, key(0), off, n, &mut |b| ok = b == &want[..])
                        .unwrap_or_else(|e| panic!("{name}: reader {r}: {e}"));
                    assert!(ok, "{name}: reader {r} saw wrong bytes for {tier} at {off}");
                    i = i.wrapping_mul(31).wrapping_add(17);
                    mine += 1;
                }
                reads.fetch_add(mine, Ordering::Relaxed);
            });
        }
        // The writer: churn through thousands of blocks, keeping a window of them live,
        // so tiers grow (and remap) many times and freed slots are reused.
        let mut window = std::collections::VecDeque::new();
        for j in 0..6000u64 {
            let tier = Tier::ALL[(j % 4) as usize];
            let len = (j as usize * 131) % io.slot_len(tier) as usize;
            let seed = 1 << 48 | j;
            let (off, n) = io.write_block(tier, key(j), &payload(seed, len)).unwrap();
            window.push_back((tier, off, n, seed));
            if j % 5 == 0 {
                io.rewrite_block(tier, off, &payload(seed, len)).unwrap();
            }
            if window.len() > 1500 || j % 3 == 0 {
                let (tier, off, n, seed) = window.pop_front().unwrap();
                let mut got = Vec::new();
                io.with_block(tier, key(j), off, n, &mut |b| got.extend_from_slice(b))
                    .unwrap();
                assert_eq!(got, payload(seed, n as usize), "{name}: writer's own block");
                io.free_block(tier, off).unwrap();
            }
            if j % 1000 == 999 {
                io.sync().unwrap();
            }
        }
        done.store(true, Ordering::Release);
    });
    assert!(reads.load(Ordering::Relaxed) >= (READERS as u64) * 2000);
    // Nothing the writer did disturbed the stable blocks.
    for &(tier, off, n, seed) in &stable_blocks {
        let mut got = Vec::new();
        io.with_block(tier, key(0), off, n, &mut |b| got.extend_from_slice(b))
            .unwrap();
        assert_eq!(got, payload(seed, n as usize));
    }
}

#[test]
fn readers_and_a_writer_share_every_backend() {
    for b in backends_with(CollectionConfig::default()) {
        run(b.io.as_ref(), b.name);
    }
}

#[test]
fn readers_and_a_writer_with_tiny_slots() {
    // Small slots: many more growth steps per byte written.
    for b in backends_with(CollectionConfig::with_block_elems(64)) {
        run(b.io.as_ref(), b.name);
    }
}
