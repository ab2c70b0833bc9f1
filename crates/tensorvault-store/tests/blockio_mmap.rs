//! `MmapBlockIO` specifics: files on disk, reopen, torn growth, growth under load.

#![cfg(feature = "mmap")]

mod blockio_common;

use blockio_common::{key, payload, read};
use tensorvault_store::{BlockIO, CollectionConfig, MmapBlockIO, StoreErr, Tier};

#[test]
fn reopen_sees_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let g = CollectionConfig::default();
    let mut live = Vec::new();
    {
        let io = MmapBlockIO::open(dir.path(), &g).unwrap();
        for t in Tier::ALL {
            assert!(dir.path().join(t.file_name()).exists());
            assert_eq!(io.tier_path(t), dir.path().join(t.file_name()));
        }
        for i in 0..40u64 {
            let tier = Tier::ALL[(i % 4) as usize];
            let data = payload(i, (i as usize * 131) % io.slot_len(tier) as usize);
            let (off, len) = io.write_block(tier, key(i), &data).unwrap();
            live.push((tier, off, len, data));
        }
        // Free every third block, as deletes would.
        for (tier, off, ..) in live.iter().step_by(3) {
            io.free_block(*tier, *off).unwrap();
        }
        live = live
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 0)
            .map(|(_, x)| x)
            .collect();
        io.sync().unwrap();
    }
    let io = MmapBlockIO::open(dir.path(), &g).unwrap();
    assert_eq!(io.dir(), dir.path());
    // Before the reset every slot is free; after it exactly the live ones are used.
    io.reset_allocation(&mut live.iter().map(|(t, off, ..)| (*t, *off, 1)))
        .unwrap();
    for (tier, off, len, data) in &live {
        assert_eq!(
            &read(&io, *tier, *off, *len).unwrap(),
            data,
            "{tier} at {off}"
        );
    }
    for t in Tier::ALL {
        let u = io.usage(t);
        let n = live.iter().filter(|(tt, ..)| *tt == t).count() as u64;
        assert_eq!(u.slots - u.free_slots, n, "{t}");
        assert_eq!(u.bytes % u64::from(u.slot_len), 0);
    }
    // Slot 0 of tier0 was freed (block 0): the next tier0 write takes it.
    assert_eq!(
        io.write_block(Tier::Tier0, key(99), &[1, 2, 3]).unwrap().0,
        0
    );
}

#[test]
fn torn_file_counts_whole_slots_only() {
    let dir = tempfile::tempdir().unwrap();
    let g = CollectionConfig::default();
    let s = u64::from(g.slot_len(Tier::Tier3));
    // Two whole slots and half of a third, as a crash mid-growth might leave.
    let mut bytes = payload(1, (2 * s + s / 2) as usize);
    bytes[0] = 0xAB;
    std::fs::write(dir.path().join(Tier::Tier3.file_name()), &bytes).unwrap();
    let io = MmapBlockIO::open(dir.path(), &g).unwrap();
    let u = io.usage(Tier::Tier3);
    assert_eq!((u.slots, u.free_slots, u.bytes), (2, 2, 2 * s + s / 2));
    assert!(matches!(
        read(&io, Tier::Tier3, 2 * s, 1),
        Err(StoreErr::NotFound { .. })
    ));
    // A live slot in the torn part: the tier is extended, the surviving bytes kept and
    // the rest zero-filled.
    io.reset_allocation(&mut [(Tier::Tier3, 0, 1), (Tier::Tier3, 2 * s, 1)].into_iter())
        .unwrap();
    let got = read(&io, Tier::Tier3, 2 * s, s as u32).unwrap();
    assert_eq!(&got[..(s / 2) as usize], &bytes[(2 * s) as usize..]);
    assert!(got[(s / 2) as usize..].iter().all(|&b| b == 0));
    assert_eq!(read(&io, Tier::Tier3, 0, 1).unwrap(), vec![0xAB]);
    // The free slot between them is used next, then the tier grows past the end.
    assert_eq!(io.write_block(Tier::Tier3, key(1), &[9]).unwrap().0, s);
    assert_eq!(io.write_block(Tier::Tier3, key(2), &[9]).unwrap().0, 3 * s);
    io.sync().unwrap();
    let len = std::fs::metadata(io.tier_path(Tier::Tier3)).unwrap().len();
    assert_eq!(len % s, 0, "growth rounds the file to whole slots");
}

#[test]
fn files_grow_in_steps_not_per_write() {
    let dir = tempfile::tempdir().unwrap();
    let g = CollectionConfig::default();
    let io = MmapBlockIO::open(dir.path(), &g).unwrap();
    let path = io.tier_path(Tier::Tier0).to_path_buf();
    let s = u64::from(io.slot_len(Tier::Tier0));
    let mut lengths = std::collections::BTreeSet::new();
    for i in 0..1000u64 {
        io.write_block(Tier::Tier0, key(i), &payload(i, 64))
            .unwrap();
        lengths.insert(std::fs::metadata(&path).unwrap().len());
    }
    // 64 slots first, then +1/8 per step: a few dozen sizes for 1000 writes, not 1000.
    assert!(
        lengths.len() < 30,
        "{} distinct file lengths",
        lengths.len()
    );
    assert!(lengths.iter().all(|l| l % s == 0));
    assert_eq!(*lengths.iter().next().unwrap(), 64 * s);
    for i in (0..1000u64).step_by(37) {
        assert_eq!(read(&io, Tier::Tier0, i * s, 64).unwrap(), payload(i, 64));
    }
}

#[test]
fn open_errors_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir");
    match MmapBlockIO::open(&missing, &CollectionConfig::default()) {
        Err(StoreErr::Io { op, path, .. }) => {
            assert_eq!(op, "open");
            assert!(path.starts_with(&missing));
        }
        other => panic!("expected Io, got {other:?}"),
    }
    let bad = CollectionConfig {
        slot_align: 3,
        ..CollectionConfig::default()
    };
    assert!(matches!(
        MmapBlockIO::open(dir.path(), &bad),
        Err(StoreErr::InvalidArgument {
            field: "slot_align",
            ..
        })
    ));
}

#[test]
fn writes_are_visible_through_the_mapping_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let io = MmapBlockIO::open(dir.path(), &CollectionConfig::default()).unwrap();
    let t = Tier::Tier2;
    let (off, len) = io.write_block(t, key(0), &payload(5, 300)).unwrap();
    assert_eq!(read(&io, t, off, len).unwrap(), payload(5, 300));
    io.rewrite_block(t, off, &payload(6, 300)).unwrap();
    assert_eq!(read(&io, t, off, len).unwrap(), payload(6, 300));
    // And the file holds them (pwrite, not a private mapping).
    let on_disk = std::fs::read(io.tier_path(t)).unwrap();
    assert_eq!(
        &on_disk[off as usize..(off + u64::from(len)) as usize],
        &payload(6, 300)[..]
    );
}

#[test]
fn freed_slots_give_their_disk_space_back() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let io = MmapBlockIO::open(dir.path(), &CollectionConfig::default()).unwrap();
    let slot = io.slot_len(Tier::Tier0) as usize; // 16 KiB: whole pages
    let offs: Vec<u64> = (0..32u64)
        .map(|i| {
            io.write_block(Tier::Tier0, key(i), &payload(i, slot))
                .unwrap()
                .0
        })
        .collect();
    io.sync().unwrap();
    let path = dir.path().join(Tier::Tier0.file_name());
    let used = || std::fs::metadata(&path).unwrap().blocks() * 512;
    let full = used();
    assert!(full >= 32 * slot as u64, "{full}");
    for off in &offs[..24] {
        io.free_block(Tier::Tier0, *off).unwrap();
    }
    let after = used();
    // ext4, xfs, btrfs and tmpfs punch holes (a file system that cannot would keep the
    // bytes, and this test would say so).
    assert!(
        after <= full - 24 * slot as u64,
        "{after} of {full} bytes still allocated"
    );
    // The live slots still read back; a freed slot is reused.
    for (i, off) in offs.iter().enumerate().skip(24) {
        assert_eq!(
            read(&io, Tier::Tier0, *off, slot as u32).unwrap(),
            payload(i as u64, slot)
        );
    }
    let (reused, _) = io
        .write_block(Tier::Tier0, key(99), &payload(99, slot))
        .unwrap();
    assert!(offs[..24].contains(&reused));
    assert_eq!(
        read(&io, Tier::Tier0, reused, slot as u32).unwrap(),
        payload(99, slot)
    );
}

#[test]
fn free_slots_at_the_end_are_truncated_away() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let io = MmapBlockIO::open(dir.path(), &CollectionConfig::default()).unwrap();
    // Tier 1 slots (4224 B) are not page multiples: punching alone would keep pages.
    let slot = io.slot_len(Tier::Tier1) as usize;
    let n = 400u64;
    let offs: Vec<u64> = (0..n)
        .map(|i| {
            io.write_block(Tier::Tier1, key(i), &payload(i, slot))
                .unwrap()
                .0
        })
        .collect();
    io.sync().unwrap();
    let path = dir.path().join(Tier::Tier1.file_name());
    let meta = || std::fs::metadata(&path).unwrap();
    assert!(meta().len() >= n * slot as u64);
    // Free the upper half: the file shrinks to the live half plus one growth step.
    for off in &offs[200..] {
        io.free_block(Tier::Tier1, *off).unwrap();
    }
    assert!(meta().len() <= (200 + 64) * slot as u64, "{}", meta().len());
    for (i, off) in offs.iter().enumerate().take(200) {
        assert_eq!(
            read(&io, Tier::Tier1, *off, slot as u32).unwrap(),
            payload(i as u64, slot)
        );
    }
    // Free everything: an empty tier takes no bytes at all.
    for off in &offs[..200] {
        io.free_block(Tier::Tier1, *off).unwrap();
    }
    assert_eq!(meta().len(), 0);
    assert_eq!(meta().blocks(), 0);
    assert_eq!(io.usage(Tier::Tier1).slots, 0);
    // It grows again and reads back.
    let (off, _) = io
        .write_block(Tier::Tier1, key(7), &payload(7, slot))
        .unwrap();
    assert_eq!(off, 0);
    assert_eq!(
        read(&io, Tier::Tier1, off, slot as u32).unwrap(),
        payload(7, slot)
    );
}

/// A snapshot reader sampled the tier file's length, then a writer grew the file and
/// logged blocks in the new slots before the reader replayed its log: the replay's
/// `reset_allocation` names slots past the length the snapshot saw. The file covers them
/// (the writer grows before it logs), so the snapshot takes them and reads their bytes; a
/// slot past the file's end is still refused (a snapshot never grows a file).
#[test]
fn a_snapshot_takes_slots_the_writer_grew_after_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let g = CollectionConfig::default();
    let writer = MmapBlockIO::open(dir.path(), &g).unwrap();
    let first = writer
        .write_block(Tier::Tier0, key(0), &payload(0, 100))
        .unwrap();
    writer.sync().unwrap();
    let snap = MmapBlockIO::open_snapshot(dir.path(), &g).unwrap();
    let seen = snap.usage(Tier::Tier0).slots;
    // The writer grows the file well past what the snapshot saw.
    let mut live = vec![(first.0, first.1, payload(0, 100))];
    for i in 1..(seen + 40) {
        let data = payload(i, 64);
        let (off, len) = writer.write_block(Tier::Tier0, key(i), &data).unwrap();
        live.push((off, len, data));
    }
    writer.sync().unwrap();
    let last = live.iter().map(|(off, ..)| *off).max().unwrap();
    assert!(last / u64::from(snap.slot_len(Tier::Tier0)) >= seen);
    snap.reset_allocation(&mut live.iter().map(|(off, ..)| (Tier::Tier0, *off, 1)))
        .unwrap();
    for (off, len, data) in &live {
        assert_eq!(
            &read(&snap, Tier::Tier0, *off, *len).unwrap(),
            data,
            "at {off}"
        );
    }
    // A slot the file does not cover: refused, and the file is not grown.
    let file_len = std::fs::metadata(snap.tier_path(Tier::Tier0))
        .unwrap()
        .len();
    let beyond = file_len + 1000 * u64::from(snap.slot_len(Tier::Tier0));
    let e = snap
        .reset_allocation(&mut std::iter::once((Tier::Tier0, beyond, 1)))
        .unwrap_err();
    assert!(
        matches!(e, StoreErr::NotWritable { op: "grow", .. }),
        "{e:?}"
    );
    assert_eq!(
        std::fs::metadata(snap.tier_path(Tier::Tier0))
            .unwrap()
            .len(),
        file_len
    );
}
