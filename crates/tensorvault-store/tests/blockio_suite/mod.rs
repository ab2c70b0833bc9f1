//! The BlockIO contract: round trips, slot reuse, free-list rebuild, bounds, and a
//! model-checked random op sequence, run against every backend that
//! `crate::blockio_common::backends_with` makes. The including test binary decides which:
//! this crate's `tests/blockio_conformance.rs` (`BufferBlockIO`, `MmapBlockIO`), and
//! `tensorvault-store-object`'s (`ObjectBlockIO` over an in-process object store), which
//! includes this file by path and brings its own `blockio_common` with the same helpers.

use std::collections::{BTreeMap, BTreeSet};

use crate::blockio_common::{backends, backends_with, invalid_field, key, payload, read};
use proptest::prelude::*;
use tensorvault_store::{CollectionConfig, StoreErr, Tier};

#[test]
fn round_trip_in_every_tier() {
    for b in backends() {
        let io = b.io.as_ref();
        for tier in Tier::ALL {
            let slot = io.slot_len(tier);
            assert_eq!(slot, b.geometry.slot_len(tier), "{}", b.name);
            let lens = [
                slot as usize,
                0,
                1,
                slot as usize / 2 + 3,
                slot as usize - 1,
            ];
            let mut written = Vec::new();
            for (i, &len) in lens.iter().enumerate() {
                let data = payload(i as u64 * 7 + tier as u64, len);
                let (off, n) = io.write_block(tier, key(i as u64), &data).unwrap();
                assert_eq!(
                    off,
                    i as u64 * u64::from(slot),
                    "{}: sequential slots",
                    b.name
                );
                assert_eq!(n as usize, len);
                written.push((off, data));
            }
            for (off, data) in &written {
                assert_eq!(
                    &read(io, tier, *off, data.len() as u32).unwrap(),
                    data,
                    "{} {tier}",
                    b.name
                );
                let mut dst = vec![0u8; data.len() + 5];
                let n = io
                    .read_block(tier, key(0), *off, data.len() as u32, &mut dst)
                    .unwrap();
                assert_eq!(&dst[..n], &data[..]);
            }
            let u = io.usage(tier);
            assert_eq!(u.slot_len, slot);
            assert!(u.slots >= lens.len() as u64);
            assert_eq!(
                u.slots - u.free_slots,
                lens.len() as u64,
                "{}: live slots",
                b.name
            );
            assert!(u.bytes >= u.slots * u64::from(slot));
        }
        io.sync().unwrap();
    }
}

#[test]
fn tiers_are_sized_per_tier() {
    for b in backends() {
        let s0 = b.io.slot_len(Tier::Tier0);
        let s3 = b.io.slot_len(Tier::Tier3);
        // Codec v2, 3 bits in groups of 64: 32 + 128 + 1536 = 1696 -> 1728.
        assert_eq!((s0, s3), (16384, 1728), "{}", b.name);
        for i in 0..4 {
            b.io.write_block(Tier::Tier3, key(i), &payload(i, 1696))
                .unwrap();
        }
        // Four 3-bit blocks take 4 x 1728 bytes of slots, not 4 x 16 KiB.
        let u = b.io.usage(Tier::Tier3);
        assert_eq!(u.slots - u.free_slots, 4);
        assert_eq!(u.slot_len, 1728);
    }
}

#[test]
fn freed_slots_are_reused_lowest_first() {
    for b in backends() {
        let io = b.io.as_ref();
        let t = Tier::Tier1;
        let s = u64::from(io.slot_len(t));
        for i in 0..6 {
            assert_eq!(
                io.write_block(t, key(i), &payload(i, 100)).unwrap().0,
                i * s
            );
        }
        io.free_block(t, 4 * s).unwrap();
        io.free_block(t, s).unwrap();
        io.free_block(t, 3 * s).unwrap();
        let next: Vec<u64> = (0..4)
            .map(|i| {
                io.write_block(t, key(10 + i), &payload(10 + i, 9))
                    .unwrap()
                    .0
                    / s
            })
            .collect();
        if b.slot_files {
            assert_eq!(next, vec![1, 3, 4, 6], "{}", b.name);
            // Reused slots hold the new bytes.
            assert_eq!(read(io, t, s, 9).unwrap(), payload(10, 9));
        } else {
            // Never reused: new numbers after every number handed out.
            assert_eq!(next, vec![6, 7, 8, 9], "{}", b.name);
            assert_eq!(read(io, t, 6 * s, 9).unwrap(), payload(10, 9));
        }
        assert_eq!(read(io, t, 2 * s, 100).unwrap(), payload(2, 100));
    }
}

#[test]
fn reset_allocation_rebuilds_exactly_the_free_list() {
    for b in backends() {
        let io = b.io.as_ref();
        let s0 = u64::from(io.slot_len(Tier::Tier0));
        let s2 = u64::from(io.slot_len(Tier::Tier2));
        for i in 0..8 {
            io.write_block(Tier::Tier0, key(i), &payload(i, 64))
                .unwrap();
            io.write_block(Tier::Tier2, key(i), &payload(100 + i, 64))
                .unwrap();
        }
        let before0 = io.usage(Tier::Tier0).slots;
        let live = [
            (Tier::Tier0, 0, 64),
            (Tier::Tier0, 2 * s0, 64),
            (Tier::Tier0, 5 * s0, 64),
            (Tier::Tier2, 7 * s2, 64),
        ];
        io.reset_allocation(&mut live.into_iter()).unwrap();
        if !b.slot_files {
            // Counted, not rebuilt: the live blocks stay readable and new numbers follow
            // every number handed out.
            assert_eq!(
                io.usage(Tier::Tier0).slots - io.usage(Tier::Tier0).free_slots,
                3
            );
            assert_eq!(read(io, Tier::Tier0, 5 * s0, 64).unwrap(), payload(5, 64));
            assert_eq!(io.write_block(Tier::Tier0, key(9), &[1]).unwrap().0, 8 * s0);
            assert_eq!(io.write_block(Tier::Tier2, key(9), &[1]).unwrap().0, 8 * s2);
            continue;
        }
        let u0 = io.usage(Tier::Tier0);
        assert_eq!(u0.slots, before0, "{}: reset never shrinks", b.name);
        assert_eq!(u0.slots - u0.free_slots, 3);
        let u2 = io.usage(Tier::Tier2);
        assert_eq!(u2.slots - u2.free_slots, 1);
        assert_eq!(
            io.usage(Tier::Tier1).free_slots,
            io.usage(Tier::Tier1).slots
        );
        // Live data untouched; the free slots come back lowest first.
        assert_eq!(read(io, Tier::Tier0, 5 * s0, 64).unwrap(), payload(5, 64));
        let got: Vec<u64> = (0..5)
            .map(|i| io.write_block(Tier::Tier0, key(i), &[1]).unwrap().0 / s0)
            .collect();
        assert_eq!(got, vec![1, 3, 4, 6, 7], "{}", b.name);
        let got: Vec<u64> = (0..2)
            .map(|i| io.write_block(Tier::Tier2, key(i), &[1]).unwrap().0 / s2)
            .collect();
        assert_eq!(got, vec![0, 1]);
        // A live slot at a freed position is no longer free: freeing it works once.
        io.reset_allocation(&mut [(Tier::Tier0, 3 * s0, 1)].into_iter())
            .unwrap();
        io.free_block(Tier::Tier0, 3 * s0).unwrap();
        assert_eq!(invalid_field(io.free_block(Tier::Tier0, 3 * s0)), "offset");
        // An empty live set frees everything.
        io.reset_allocation(&mut std::iter::empty()).unwrap();
        for t in Tier::ALL {
            let u = io.usage(t);
            assert_eq!(u.free_slots, u.slots, "{} {t}", b.name);
        }
    }
}

#[test]
fn reset_allocation_extends_the_tier_with_zeros() {
    for b in backends() {
        let io = b.io.as_ref();
        let t = Tier::Tier3;
        let s = u64::from(io.slot_len(t));
        io.write_block(t, key(0), &payload(0, s as usize)).unwrap();
        let far = 300 * s;
        assert!(
            matches!(read(io, t, far, 10), Err(StoreErr::NotFound { .. })),
            "{}",
            b.name
        );
        if !b.slot_files {
            // Only numbers this backend handed out can be live.
            assert_eq!(
                invalid_field(io.reset_allocation(&mut [(t, 0, 1), (t, far, 1)].into_iter())),
                "live",
                "{}",
                b.name
            );
            continue;
        }
        io.reset_allocation(&mut [(t, 0, 1), (t, far, 1)].into_iter())
            .unwrap();
        let u = io.usage(t);
        assert!(u.slots >= 301, "{}: {u:?}", b.name);
        assert_eq!(u.slots - u.free_slots, 2);
        assert_eq!(
            read(io, t, far, s as u32).unwrap(),
            vec![0u8; s as usize],
            "{}",
            b.name
        );
        assert_eq!(read(io, t, 0, s as u32).unwrap(), payload(0, s as usize));
        // The next writes fill the hole below the far slot, lowest first.
        assert_eq!(io.write_block(t, key(1), &[7]).unwrap().0, s);
    }
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    for b in backends() {
        let io = b.io.as_ref();
        let t = Tier::Tier1;
        let s = io.slot_len(t);
        let s64 = u64::from(s);
        let (off, _) = io.write_block(t, key(0), &payload(0, 10)).unwrap();
        // Not a slot start, or longer than a slot.
        assert_eq!(
            invalid_field(read(io, t, off + 1, 4)),
            "offset",
            "{}",
            b.name
        );
        assert_eq!(invalid_field(read(io, t, off, s + 1)), "len", "{}", b.name);
        assert_eq!(invalid_field(read(io, t, u64::MAX, 1)), "offset");
        assert_eq!(
            invalid_field(read(io, t, u64::MAX - u64::MAX % s64, s)),
            "offset"
        );
        // Slot starts past the end: not found.
        for far in [s64 * 1000, s64 * 1_000_000] {
            match read(io, t, far, 1) {
                Err(StoreErr::NotFound { tier: Some(tt), .. }) => assert_eq!(tt, t),
                other => panic!("{}: expected NotFound, got {other:?}", b.name),
            }
        }
        // Full-slot reads of the last slot stay inside (slot files: a slot holds its
        // padding too; block objects hold what was written); a short dst is refused.
        if b.slot_files {
            assert_eq!(read(io, t, off, s).unwrap().len(), s as usize);
        }
        let mut small = [0u8; 3];
        assert_eq!(
            invalid_field(io.read_block(t, key(0), off, 10, &mut small)),
            "dst"
        );
        // Writes that do not fit.
        assert!(matches!(
            io.write_block(t, key(1), &vec![0; s as usize + 1]),
            Err(StoreErr::CapacityExceeded { tier, .. }) if tier == t
        ));
        assert_eq!(
            invalid_field(io.rewrite_block(t, off, &vec![0; s as usize + 1])),
            "src"
        );
        assert_eq!(invalid_field(io.rewrite_block(t, off + 8, &[1])), "offset");
        assert_eq!(
            invalid_field(io.rewrite_block(t, s64 * 1000, &[1])),
            "offset"
        );
        // Frees.
        assert_eq!(invalid_field(io.free_block(t, off + 64)), "offset");
        assert_eq!(invalid_field(io.free_block(t, s64 * 1000)), "offset");
        io.free_block(t, off).unwrap();
        if b.slot_files {
            assert_eq!(
                invalid_field(io.free_block(t, off)),
                "offset",
                "double free"
            );
            assert_eq!(
                invalid_field(io.rewrite_block(t, off, &[1])),
                "offset",
                "rewrite of a free slot"
            );
        }
        // A bad live set is refused before anything changes.
        let (off, _) = io.write_block(t, key(2), &[5]).unwrap();
        let before = io.usage(t);
        assert_eq!(
            invalid_field(io.reset_allocation(&mut [(t, 0, 1), (Tier::Tier0, 3, 1)].into_iter())),
            "live"
        );
        if b.slot_files {
            assert_eq!(
                invalid_field(io.reset_allocation(&mut [(t, 0, 1), (t, 0, 1)].into_iter())),
                "live"
            );
        }
        assert_eq!(
            invalid_field(io.reset_allocation(&mut [(t, 1 << 50, 1)].into_iter())),
            "live"
        );
        assert_eq!(io.usage(t), before);
        assert_eq!(read(io, t, off, 1).unwrap(), vec![5]);
    }
}

#[test]
fn rewrite_replaces_a_live_block_in_place() {
    for b in backends() {
        let io = b.io.as_ref();
        let t = Tier::Tier0;
        let (a, _) = io.write_block(t, key(0), &payload(1, 1000)).unwrap();
        let (c, _) = io.write_block(t, key(1), &payload(2, 1000)).unwrap();
        io.rewrite_block(t, a, &payload(3, 1000)).unwrap();
        assert_eq!(
            read(io, t, a, 1000).unwrap(),
            payload(3, 1000),
            "{}",
            b.name
        );
        assert_eq!(read(io, t, c, 1000).unwrap(), payload(2, 1000));
        let u = io.usage(t);
        assert_eq!(u.slots - u.free_slots, 2);
        io.sync().unwrap();
    }
}

#[test]
fn small_geometry_many_slots() {
    // 64-element blocks: tiny slots, so growth and remapping happen many times over.
    let g = CollectionConfig::with_block_elems(64);
    for b in backends_with(g) {
        let io = b.io.as_ref();
        let t = Tier::Tier0;
        let s = u64::from(io.slot_len(t));
        assert_eq!(s, 256);
        let n = 20_000u64;
        for i in 0..n {
            let (off, _) = io.write_block(t, key(i), &payload(i, 40)).unwrap();
            assert_eq!(off, i * s);
        }
        for i in (0..n).step_by(97) {
            assert_eq!(
                read(io, t, i * s, 40).unwrap(),
                payload(i, 40),
                "{} block {i}",
                b.name
            );
        }
        let u = io.usage(t);
        assert_eq!(u.slots - u.free_slots, n);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write(u8, u16),
    Free(u8, u16),
    Rewrite(u8, u16),
    Reset(Vec<u16>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..4, any::<u16>()).prop_map(|(t, n)| Op::Write(t, n)),
        3 => (0u8..4, any::<u16>()).prop_map(|(t, n)| Op::Free(t, n)),
        1 => (0u8..4, any::<u16>()).prop_map(|(t, n)| Op::Rewrite(t, n)),
        1 => proptest::collection::vec(any::<u16>(), 0..8).prop_map(Op::Reset),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random writes / frees / rewrites / resets agree with a model: each write lands in
    /// the lowest free slot (or, where slots are never reused, after every slot handed
    /// out), every live block reads back its bytes.
    #[test]
    fn random_ops_match_a_model(ops in proptest::collection::vec(op(), 1..80)) {
        let g = CollectionConfig::with_block_elems(256);
        for b in backends_with(g) {
            let io = b.io.as_ref();
            // Per tier: live slot index -> payload; slots known to exist.
            let mut live: [BTreeMap<u64, Vec<u8>>; 4] = Default::default();
            let mut handed_out = [0u64; 4];
            let mut seq = 0u64;
            for op in &ops {
                seq += 1;
                match op {
                    Op::Write(t, n) => {
                        let tier = Tier::ALL[usize::from(*t)];
                        let s = u64::from(io.slot_len(tier));
                        let len = usize::from(*n) % (s as usize + 1);
                        let data = payload(seq, len);
                        let (off, got) = io.write_block(tier, key(seq), &data).unwrap();
                        let m = &mut live[tier.index()];
                        let lowest = if b.slot_files {
                            let lowest = (0..).find(|i| !m.contains_key(i)).unwrap();
                            prop_assert_eq!(off, lowest * s, "{}", b.name);
                            lowest
                        } else {
                            // A number after every number handed out (packs may start
                            // the next pack after a reset).
                            prop_assert!(off % s == 0 && off / s >= handed_out[tier.index()],
                                "{}: {} reused (next {})", b.name, off / s, handed_out[tier.index()]);
                            off / s
                        };
                        handed_out[tier.index()] = handed_out[tier.index()].max(lowest + 1);
                        prop_assert_eq!(got as usize, len);
                        m.insert(lowest, data);
                    }
                    Op::Free(t, n) | Op::Rewrite(t, n) => {
                        let tier = Tier::ALL[usize::from(*t)];
                        let s = u64::from(io.slot_len(tier));
                        let m = &mut live[tier.index()];
                        let Some(&slot) = m.keys().nth(usize::from(*n) % m.len().max(1)) else { continue };
                        if matches!(op, Op::Free(..)) {
                            io.free_block(tier, slot * s).unwrap();
                            m.remove(&slot);
                        } else {
                            let data = payload(seq, usize::from(*n) % 64);
                            io.rewrite_block(tier, slot * s, &data).unwrap();
                            m.insert(slot, data);
                        }
                    }
                    Op::Reset(keep) => {
                        // Keep a subset of the live blocks, as a replay would.
                        let mut entries = Vec::new();
                        for tier in Tier::ALL {
                            let s = u64::from(io.slot_len(tier));
                            let m = &mut live[tier.index()];
                            let chosen: BTreeSet<u64> = m.keys().copied()
                                .filter(|k| keep.iter().any(|&x| u64::from(x) % 3 == k % 3))
                                .collect();
                            m.retain(|k, _| chosen.contains(k));
                            entries.extend(chosen.iter().map(|&k| (tier, k * s, 1)));
                        }
                        io.reset_allocation(&mut entries.into_iter()).unwrap();
                    }
                }
            }
            for tier in Tier::ALL {
                let s = u64::from(io.slot_len(tier));
                if b.slot_files {
                    let u = io.usage(tier);
                    prop_assert_eq!(u.slots - u.free_slots, live[tier.index()].len() as u64);
                }
                for (slot, data) in &live[tier.index()] {
                    prop_assert_eq!(&read(io, tier, slot * s, data.len() as u32).unwrap(), data);
                }
            }
        }
    }
}
