//! The MetaLog header's second flags byte (`flags2`, byte 78; `docs/formats/store.md`,
//! "Header"): where it is, that collections written before it (byte 78 zero) read and
//! re-encode unchanged, and that a bit this build does not know is refused at open,
//! naming `flags2` and offset 78, both by `decode_header` and by a directory store.

mod common;

use tensorvault_core::checksum::crc32c;
use tensorvault_store::kv::{RopePairing, RopeSpec};
use tensorvault_store::meta_log::layout::{
    CRC_OFFSET, HEADER_FLAGS2_NAMES, HEADER_KNOWN_FLAGS2, H_FLAGS, H_FLAGS2, H_RESERVED,
    H_ROPE_THETA, PAD_OFFSET, RECORD_LEN,
};
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{CollectionConfig, DirStore, StoreConfig, StoreErr};

fn reseal(mut h: [u8; RECORD_LEN], at: usize, v: u8) -> [u8; RECORD_LEN] {
    h[at] = v;
    let crc = crc32c(&h[..CRC_OFFSET]);
    h[CRC_OFFSET..PAD_OFFSET].copy_from_slice(&crc.to_le_bytes());
    h
}

fn refused(r: tensorvault_store::Result<impl std::fmt::Debug>, field: &str, at: usize) -> String {
    match r {
        Err(StoreErr::BadHeader {
            field: f, offset, ..
        }) if f == field && offset == at as u64 => {
            format!("{}", r.unwrap_err())
        }
        other => panic!("expected BadHeader {field} at {at}, got {other:?}"),
    }
}

/// A session-14 KV cache header (codec 4, entropy, extents, kv_ecsq, kv_ecsq_tier2,
/// RoPE): every flag byte 49 can hold for a KV cache, and the bytes before and after 78.
fn session14_kv() -> CollectionConfig {
    CollectionConfig {
        entropy: true,
        extents: true,
        kv_ecsq: true,
        kv_ecsq_tier2: true,
        rope: Some(RopeSpec::new(100_000.0, 64, RopePairing::Neox).unwrap()),
        ..CollectionConfig::kv_cache_tokens(64, 256)
            .unwrap()
            .with_codec_v4()
    }
}

#[test]
fn flags2_is_byte_78_right_after_rope_theta() {
    assert_eq!(H_FLAGS, 49);
    assert_eq!(H_FLAGS2, H_ROPE_THETA + 8);
    assert_eq!(H_FLAGS2, 78);
    assert_eq!(H_RESERVED, 79);
    assert_eq!(
        u32::from(HEADER_KNOWN_FLAGS2),
        (1u32 << HEADER_FLAGS2_NAMES.len()) - 1
    );
}

#[test]
fn headers_written_before_flags2_read_and_reencode_unchanged() {
    // The bytes a session-14 build wrote for this collection (byte 78 was reserved and
    // zero); pinned, so a change to the header writer shows up here.
    let c = session14_kv();
    let h = encode_header(&c, 3);
    assert_eq!(h[H_FLAGS2], 0);
    assert!(h[H_FLAGS2..CRC_OFFSET].iter().all(|&b| b == 0));
    let pinned: Vec<u8> = SESSION14_KV_HEADER
        .iter()
        .flat_map(|row| row.split(' '))
        .map(|x| u8::from_str_radix(x, 16).unwrap())
        .collect();
    assert_eq!(&h[..], &pinned[..], "header bytes changed");
    assert_eq!(decode_header(&h).unwrap(), (c, 3));
    // Default (codec 2) and codec 1 headers too.
    for c in [
        CollectionConfig::default(),
        CollectionConfig::codec_v1(4096),
        CollectionConfig::kv_cache(64).unwrap(),
    ] {
        let h = encode_header(&c, 0);
        assert_eq!(h[H_FLAGS2], 0);
        let (back, generation) = decode_header(&h).unwrap();
        assert_eq!((back, generation), (c, 0));
        assert_eq!(encode_header(&back, 0), h);
    }
}

/// The 128 header bytes a session-14 build wrote for [`session14_kv`] at generation 3
/// (flags 0x17 at byte 49, RoPE theta at 70..78, byte 78 zero).
const SESSION14_KV_HEADER: [&str; 8] = [
    "54 56 4d 45 54 4c 4f 47 02 00 00 00 80 00 00 00",
    "00 40 00 00 02 08 05 03 80 00 00 00 80 00 00 00",
    "40 00 00 00 40 00 00 00 03 00 00 00 00 00 00 00",
    "04 17 40 00 08 05 04 01 40 00 80 00 00 00 80 00",
    "00 00 80 00 00 00 00 00 00 00 00 6a f8 40 00 00",
    "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
    "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
    "00 00 00 00 00 00 00 00 56 88 f7 88 00 00 00 00",
];

/// The bits of a flags byte outside `known`.
fn unknown_bits(known: u8) -> impl Iterator<Item = u8> {
    (0..8).filter(move |b| known & (1 << b) == 0)
}

#[test]
fn unknown_flags2_bits_are_refused_naming_the_byte() {
    let h = encode_header(&session14_kv(), 0);
    for bit in unknown_bits(HEADER_KNOWN_FLAGS2) {
        let msg = refused(decode_header(&reseal(h, H_FLAGS2, 1 << bit)), "flags2", 78);
        assert!(msg.contains("unknown flags2 bits"), "{msg}");
    }
    // A version 1 header reserves byte 78 with the rest of 48..120.
    let v1 = encode_header(&CollectionConfig::codec_v1(4096), 0);
    refused(decode_header(&reseal(v1, H_FLAGS2, 1)), "reserved", 78);
    // The byte after it stays reserved.
    refused(decode_header(&reseal(h, H_RESERVED, 1)), "reserved", 79);
}

#[test]
fn a_directory_store_with_an_unknown_flags2_bit_does_not_open() {
    let Some(bit) = unknown_bits(HEADER_KNOWN_FLAGS2).next() else {
        return;
    };
    let tmp = common::scratch_dir("flags2");
    let cfg = StoreConfig {
        collection: session14_kv(),
        ..StoreConfig::default()
    };
    drop(DirStore::open_path(tmp.path(), "t", "c", cfg.clone(), true).unwrap());
    let log = common::coll_dir(tmp.path(), "t", "c").join("meta.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let mut h = [0u8; RECORD_LEN];
    h.copy_from_slice(&bytes[..RECORD_LEN]);
    bytes[..RECORD_LEN].copy_from_slice(&reseal(h, H_FLAGS2, 1 << bit));
    std::fs::write(&log, &bytes).unwrap();
    for writable in [false, true] {
        let r = DirStore::open_path(tmp.path(), "t", "c", cfg.clone(), writable);
        refused(r.map(|_| ()), "flags2", 78);
    }
    // Refusing wrote nothing.
    assert_eq!(std::fs::read(&log).unwrap(), bytes);
}
