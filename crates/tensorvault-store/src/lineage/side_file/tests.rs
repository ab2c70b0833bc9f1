//! Unit tests of `side_file.rs`.

use super::*;

fn tag(t: u64) -> EntryTag {
    EntryTag {
        block_created_at: t,
        ..EntryTag::default()
    }
}

#[test]
fn latest_entry_wins_and_survives_a_rescan() {
    let mut f = SideFile::in_memory(SideKind::Delta);
    let k = BlockKey::new(7, 1);
    f.append(k, EntryKind::DeltaSparse, tag(1), &[1, 2, 3])
        .unwrap();
    f.append(k, EntryKind::DeltaSparse, tag(2), &[4, 5])
        .unwrap();
    f.append(BlockKey::new(8, 0), EntryKind::DeltaQuant, tag(3), &[9])
        .unwrap();
    let bytes = f.mem_bytes().to_vec();
    let g = SideFile::from_bytes(SideKind::Delta, bytes).unwrap();
    let (h, p) = g.read_entry(&k).unwrap().unwrap();
    assert_eq!((h.tag.block_created_at, p), (2, vec![4, 5]));
    assert_eq!(g.entries(), 2);
    assert_eq!(g.garbage(), entry_size(3));
    assert!(SideFile::from_bytes(SideKind::Factor, f.mem_bytes().to_vec()).is_err());
    assert!(f.append(k, EntryKind::Factor, tag(4), &[]).is_err());
}

#[test]
fn bad_entries_are_skipped_and_a_torn_tail_cut() {
    let mut f = SideFile::in_memory(SideKind::Delta);
    for i in 0..4u32 {
        f.append(
            BlockKey::new(1, i),
            EntryKind::DeltaSparse,
            tag(u64::from(i)),
            &[i as u8; 20],
        )
        .unwrap();
    }
    let mut bytes = f.mem_bytes().to_vec();
    let e = entry_size(20) as usize;
    // Entry 1: payload flipped. Entry 2: header flipped. Entry 3: torn.
    bytes[FILE_HEADER_LEN + e + ENTRY_HEADER_LEN + 3] ^= 1;
    bytes[FILE_HEADER_LEN + 2 * e + 9] ^= 1;
    bytes.truncate(FILE_HEADER_LEN + 3 * e + 30);
    let g = SideFile::from_bytes(SideKind::Delta, bytes).unwrap();
    assert_eq!(g.entries(), 1);
    assert!(g.get(&BlockKey::new(1, 0)).is_some());
    let s = g.scan_stats();
    assert_eq!(s.skipped_entries, 1);
    assert_eq!(s.truncated_bytes, (2 * e + 30) as u64);
    assert_eq!(g.len(), (FILE_HEADER_LEN + e) as u64);
    assert_eq!(g.mem_bytes().len(), FILE_HEADER_LEN + e);
}

#[test]
fn rewrite_keeps_only_live_entries() {
    let mut f = SideFile::in_memory(SideKind::Factor);
    for round in 0..3u64 {
        for i in 0..3u32 {
            f.append(
                BlockKey::new(2, i),
                EntryKind::Factor,
                tag(round),
                &[round as u8; 9],
            )
            .unwrap();
        }
    }
    assert!(f.garbage() > 0);
    f.rewrite(&|k, _| k.block_index != 1).unwrap();
    assert_eq!(f.garbage(), 0);
    assert_eq!(f.entries(), 2);
    assert_eq!(f.len(), (FILE_HEADER_LEN as u64) + 2 * entry_size(9));
    let g = SideFile::from_bytes(SideKind::Factor, f.mem_bytes().to_vec()).unwrap();
    let (h, p) = g.read_entry(&BlockKey::new(2, 2)).unwrap().unwrap();
    assert_eq!((h.tag.block_created_at, p), (2, vec![2; 9]));
    assert!(g.get(&BlockKey::new(2, 1)).is_none());
}
