//! MetaLog record and header encoding: round trips (property test and extreme values)
//! and one crafted record per decode rejection.

use proptest::prelude::*;
use tensorvault_core::checksum::crc32c;
use tensorvault_store::meta_log::layout::*;
use tensorvault_store::meta_log::{decode_header, decode_record, encode_header, encode_record};
use tensorvault_store::types::MAX_NDIM;
use tensorvault_store::{
    BlockKey, BlockMeta, CollectionConfig, DType, MetaRecord, ReconstructPolicy, StoreErr, Tier,
};

fn create_meta() -> BlockMeta {
    BlockMeta {
        key: BlockKey::new(0x0123_4567_89ab_cdef_0011_2233_4455_6677, 42),
        shape: [3, 4096, 7, 0, 0, 0, 0, 0],
        shape_ndim: 3,
        dtype: DType::F16,
        tier: Tier::Tier2,
        bits: 5,
        scale: 0.125,
        zero_point: 0,
        created_at: 1000,
        last_access_at: 1000,
        access_count: 0,
        ema_access_rate: 0.0,
        access_window: 1,
        checksum: 0xdead_beef,
        lineage_parent: 77,
        reconstruct: ReconstructPolicy::Delta,
        kind: tensorvault_store::TensorKind::Generic,
        tier_since: 1005,
        data_offset: 4224 * 9,
        data_len: 3000,
        centre: None,
    }
}

/// What decode returns for an encoded record: Create loses its access statistics.
fn normalized(r: MetaRecord) -> MetaRecord {
    match r {
        MetaRecord::Create { mut meta } => {
            meta.last_access_at = meta.created_at;
            meta.access_count = 0;
            meta.ema_access_rate = 0.0;
            meta.access_window = 1;
            MetaRecord::Create { meta }
        }
        other => other,
    }
}

/// Compare records bit-exactly (f32 fields by their bits, so -0.0 != 0.0).
fn assert_same(a: &MetaRecord, b: &MetaRecord) {
    assert_eq!(a, b);
    assert_eq!(encode_record(a), encode_record(b));
    let bits = |r: &MetaRecord| match r {
        MetaRecord::Create { meta } => (meta.scale.to_bits(), meta.ema_access_rate.to_bits()),
        MetaRecord::Access {
            ema_access_rate, ..
        } => (0, ema_access_rate.to_bits()),
        MetaRecord::Migrate { new_scale, .. } => (new_scale.to_bits(), 0),
        MetaRecord::Delete { .. } => (0, 0),
    };
    assert_eq!(bits(a), bits(b));
}

fn tier() -> impl Strategy<Value = Tier> {
    (0u8..4).prop_map(|v| Tier::from_u8(v).unwrap())
}
fn finite_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        any::<f32>().prop_filter("finite", |v| v.is_finite()),
        Just(f32::MAX),
        Just(f32::MIN),
        Just(f32::MIN_POSITIVE),
        Just(-0.0f32),
        Just(1e-45f32),
    ]
}
fn key() -> impl Strategy<Value = BlockKey> {
    prop_oneof![
        (any::<u128>(), any::<u32>()).prop_map(|(t, b)| BlockKey::new(t, b)),
        Just(BlockKey::new(u128::MAX, u32::MAX)),
        Just(BlockKey::new(0, 0)),
    ]
}

fn record() -> impl Strategy<Value = MetaRecord> {
    let create = (
        key(),
        (0usize..=MAX_NDIM, proptest::array::uniform8(any::<u32>())),
        (0u8..5, tier(), 1u8..=32, finite_f32(), any::<i16>()),
        (
            any::<u64>(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            any::<u128>(),
            0u8..3,
            any::<u64>(),
        ),
        (any::<u64>(), any::<u32>(), finite_f32(), any::<u64>()),
    )
        .prop_map(
            |(key, (ndim, mut shape), (dt, tier, bits, scale, zp), c, acc)| {
                for s in &mut shape[ndim..] {
                    *s = 0;
                }
                let (created_at, data_offset, data_len, checksum, lineage_parent, rc, tier_since) =
                    c;
                MetaRecord::Create {
                    meta: BlockMeta {
                        key,
                        shape,
                        shape_ndim: ndim as u8,
                        dtype: DType::from_tag(dt).unwrap(),
                        tier,
                        bits,
                        scale,
                        zero_point: zp,
                        created_at,
                        // Not stored: decode normalizes them.
                        last_access_at: acc.0,
                        access_count: acc.1,
                        ema_access_rate: acc.2,
                        access_window: acc.3,
                        checksum,
                        lineage_parent,
                        reconstruct: ReconstructPolicy::from_u8(rc).unwrap(),
                        kind: tensorvault_store::TensorKind::Generic,
                        tier_since,
                        data_offset,
                        data_len,
                        // Both states of bytes 113..118 round-trip.
                        centre: (data_len % 2 == 0).then_some(checksum ^ 0x5a5a_5a5a),
                    },
                }
            },
        );
    let access = (
        key(),
        any::<u64>(),
        any::<u32>(),
        finite_f32(),
        any::<u64>(),
    )
        .prop_map(|(key, l, c, e, w)| MetaRecord::Access {
            key,
            last_access_at: l,
            access_count: c,
            ema_access_rate: e,
            access_window: w,
        });
    let migrate = (
        key(),
        tier(),
        tier(),
        1u8..=32,
        finite_f32(),
        (any::<u32>(), any::<u64>(), any::<u32>(), any::<u64>()),
    )
        .prop_map(
            |(key, old_tier, new_tier, new_bits, new_scale, (ck, off, len, at))| {
                MetaRecord::Migrate {
                    key,
                    old_tier,
                    new_tier,
                    new_bits,
                    new_scale,
                    new_checksum: ck,
                    new_data_offset: off,
                    new_data_len: len,
                    at,
                }
            },
        );
    let delete = key().prop_map(|key| MetaRecord::Delete { key });
    prop_oneof![create, access, migrate, delete]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_record_round_trips(r in record(), offset in any::<u64>()) {
        let b = encode_record(&r);
        prop_assert_eq!(&b[PAD_OFFSET..], &[0u8; 4][..]);
        prop_assert_eq!(u32::from_le_bytes(b[CRC_OFFSET..PAD_OFFSET].try_into().unwrap()), crc32c(&b[..CRC_OFFSET]));
        let d = decode_record(&b, offset).unwrap();
        assert_same(&d, &normalized(r));
        prop_assert_eq!(d.key(), r.key());
    }

    #[test]
    fn header_round_trips(gen in any::<u64>(), elems in 1u32..=(1 << 22), t2 in prop_oneof![Just(5u8), Just(7u8)]) {
        let mut c = CollectionConfig::with_block_elems(elems);
        c.tier_bits[1] = t2;
        c.group_size[1] = 64;
        let b = encode_header(&c, gen);
        prop_assert_eq!(decode_header(&b).unwrap(), (c, gen));
    }
}

#[test]
fn extreme_values_round_trip() {
    let mut m = create_meta();
    m.key = BlockKey::new(u128::MAX, u32::MAX);
    m.shape = [u32::MAX; MAX_NDIM];
    m.shape_ndim = MAX_NDIM as u8;
    m.bits = 32;
    m.scale = f32::MAX;
    m.zero_point = i16::MIN;
    m.created_at = u64::MAX;
    m.last_access_at = u64::MAX;
    m.tier_since = u64::MAX;
    m.data_offset = u64::MAX;
    m.data_len = u32::MAX;
    m.checksum = u32::MAX;
    m.lineage_parent = u128::MAX;
    m.reconstruct = ReconstructPolicy::Factor;
    m.tier = Tier::Tier3;
    m.dtype = DType::U8;
    let r = MetaRecord::Create { meta: m };
    assert_same(&decode_record(&encode_record(&r), 0).unwrap(), &r);
    let r = MetaRecord::Access {
        key: m.key,
        last_access_at: u64::MAX,
        access_count: u32::MAX,
        ema_access_rate: f32::MIN,
        access_window: u64::MAX,
    };
    assert_same(&decode_record(&encode_record(&r), u64::MAX).unwrap(), &r);
    let r = MetaRecord::Migrate {
        key: BlockKey::new(0, 0),
        old_tier: Tier::Tier0,
        new_tier: Tier::Tier3,
        new_bits: 1,
        new_scale: -0.0,
        new_checksum: 0,
        new_data_offset: u64::MAX,
        new_data_len: u32::MAX,
        at: u64::MAX,
    };
    assert_same(&decode_record(&encode_record(&r), 128).unwrap(), &r);
}

#[test]
fn create_pins_the_documented_offsets() {
    let m = create_meta();
    let b = encode_record(&MetaRecord::Create { meta: m });
    assert_eq!(b[0], 0);
    assert_eq!(&b[1..17], &m.key.tensor_id.to_le_bytes());
    assert_eq!(&b[17..21], &42u32.to_le_bytes());
    assert_eq!((b[21], b[22], b[23]), (1, 2, 5));
    assert_eq!(&b[24..28], &0.125f32.to_le_bytes());
    assert_eq!(&b[30..38], &1000u64.to_le_bytes());
    assert_eq!(&b[38..46], &(4224u64 * 9).to_le_bytes());
    assert_eq!(&b[46..50], &3000u32.to_le_bytes());
    assert_eq!(&b[50..54], &0xdead_beefu32.to_le_bytes());
    assert_eq!(&b[54..70], &77u128.to_le_bytes());
    assert_eq!((b[70], b[71]), (1, 3));
    assert_eq!(&b[72..76], &3u32.to_le_bytes());
    assert_eq!(&b[76..80], &4096u32.to_le_bytes());
    assert_eq!(&b[104..112], &1005u64.to_le_bytes());
    assert_eq!(b[112], 0, "kind: generic");
    assert!(b[113..120].iter().all(|&x| x == 0));
    let kv = BlockMeta {
        kind: tensorvault_store::TensorKind::KvValue,
        ..m
    };
    assert_eq!(encode_record(&MetaRecord::Create { meta: kv })[112], 2);
    let v1 = encode_header(&CollectionConfig::codec_v1(4096), 3);
    assert_eq!(&v1[8..12], &1u32.to_le_bytes());
    assert!(v1[48..120].iter().all(|&x| x == 0));
    assert_eq!(
        decode_header(&v1).unwrap().0,
        CollectionConfig::codec_v1(4096)
    );
    let kvh = encode_header(&CollectionConfig::kv_cache(64).unwrap(), 3);
    assert_eq!((kvh[48], kvh[49]), (2, 0));
    assert_eq!(&kvh[50..52], &64u16.to_le_bytes());
    let h = encode_header(&CollectionConfig::default(), 3);
    assert_eq!(&h[..8], b"TVMETLOG");
    assert_eq!(&h[8..12], &2u32.to_le_bytes());
    assert_eq!(&h[12..16], &128u32.to_le_bytes());
    assert_eq!(&h[16..20], &4096u32.to_le_bytes());
    assert_eq!(h[20], 4);
    assert_eq!(&h[21..24], &[8, 5, 3]);
    assert_eq!(&h[36..40], &64u32.to_le_bytes());
    assert_eq!(&h[40..48], &3u64.to_le_bytes());
}

/// Set bytes of an encoded record and fix its CRC, so only the field check can fail.
fn crafted(r: &MetaRecord, edits: &[(usize, &[u8])]) -> [u8; RECORD_LEN] {
    let mut b = encode_record(r);
    for (at, v) in edits {
        b[*at..*at + v.len()].copy_from_slice(v);
    }
    let crc = crc32c(&b[..CRC_OFFSET]);
    b[CRC_OFFSET..PAD_OFFSET].copy_from_slice(&crc.to_le_bytes());
    b
}

fn rejected(b: &[u8; RECORD_LEN], want: &str) {
    match decode_record(b, 4096) {
        Err(StoreErr::InvalidRecord { offset, reason }) => {
            assert_eq!(offset, 4096);
            assert!(
                reason.contains(want),
                "reason {reason:?} does not name {want:?}"
            );
        }
        other => panic!("expected InvalidRecord naming {want}, got {other:?}"),
    }
}

#[test]
fn every_decode_rejection() {
    let create = MetaRecord::Create {
        meta: create_meta(),
    };
    let key = BlockKey::new(5, 6);
    let access = MetaRecord::Access {
        key,
        last_access_at: 1,
        access_count: 1,
        ema_access_rate: 0.1,
        access_window: 1,
    };
    let migrate = MetaRecord::Migrate {
        key,
        old_tier: Tier::Tier1,
        new_tier: Tier::Tier3,
        new_bits: 3,
        new_scale: 1.0,
        new_checksum: 9,
        new_data_offset: 0,
        new_data_len: 10,
        at: 3,
    };
    let delete = MetaRecord::Delete { key };

    // CRC: a changed payload byte, and a changed CRC byte.
    let mut b = encode_record(&create);
    b[30] ^= 1;
    rejected(&b, "crc32c");
    let mut b = encode_record(&delete);
    b[CRC_OFFSET] ^= 0x80;
    rejected(&b, "crc32c");
    // Padding (outside the CRC).
    let mut b = encode_record(&access);
    b[126] = 1;
    rejected(&b, "padding byte 126");
    // Record type.
    rejected(&crafted(&delete, &[(R_TYPE, &[4])]), "record_type 4");
    rejected(&crafted(&delete, &[(R_TYPE, &[0xff])]), "record_type 255");
    // Create fields.
    rejected(&crafted(&create, &[(C_DTYPE, &[5])]), "create.dtype 5");
    rejected(&crafted(&create, &[(C_TIER, &[4])]), "create.tier 4");
    rejected(&crafted(&create, &[(C_BITS, &[0])]), "create.bits 0");
    rejected(&crafted(&create, &[(C_BITS, &[33])]), "create.bits 33");
    rejected(
        &crafted(&create, &[(C_SCALE, &f32::NAN.to_le_bytes())]),
        "create.scale",
    );
    rejected(
        &crafted(&create, &[(C_SCALE, &f32::INFINITY.to_le_bytes())]),
        "create.scale",
    );
    rejected(
        &crafted(&create, &[(C_RECONSTRUCT, &[3])]),
        "create.reconstruct 3",
    );
    rejected(&crafted(&create, &[(C_NDIM, &[9])]), "create.ndim 9");
    rejected(
        &crafted(&create, &[(C_SHAPE + 4 * 3, &[1, 0, 0, 0])]),
        "create.shape[3]",
    );
    rejected(
        &crafted(&create, &[(C_SHAPE + 4 * 7, &[0, 0, 0, 1])]),
        "create.shape[7]",
    );
    rejected(&crafted(&create, &[(C_KIND, &[5])]), "create.kind 5");
    rejected(
        &crafted(&create, &[(C_RESERVED, &[1])]),
        "create reserved byte 118",
    );
    // Bytes 113..118 (centred embedding tensors): a flag of 0 or 1, a fingerprint only
    // with the flag.
    rejected(&crafted(&create, &[(C_CENTRE, &[2])]), "create.centre 2");
    rejected(
        &crafted(&create, &[(C_CENTRE_FP, &[1])]),
        "create.centre_fp",
    );
    rejected(
        &crafted(&create, &[(CRC_OFFSET - 1, &[1])]),
        "create reserved byte 119",
    );
    // Access fields.
    rejected(
        &crafted(&access, &[(A_EMA, &f32::NEG_INFINITY.to_le_bytes())]),
        "access.ema_access_rate",
    );
    rejected(
        &crafted(&access, &[(A_EMA, &f32::NAN.to_le_bytes())]),
        "access.ema_access_rate",
    );
    rejected(
        &crafted(&access, &[(A_RESERVED, &[1])]),
        "access reserved byte 45",
    );
    // Migrate fields.
    rejected(
        &crafted(&migrate, &[(M_OLD_TIER, &[7])]),
        "migrate.old_tier 7",
    );
    rejected(
        &crafted(&migrate, &[(M_NEW_TIER, &[4])]),
        "migrate.new_tier 4",
    );
    rejected(
        &crafted(&migrate, &[(M_NEW_BITS, &[0])]),
        "migrate.new_bits 0",
    );
    rejected(
        &crafted(&migrate, &[(M_NEW_SCALE, &f32::NAN.to_le_bytes())]),
        "migrate.new_scale",
    );
    rejected(
        &crafted(&migrate, &[(M_RESERVED, &[1])]),
        "migrate reserved byte 52",
    );
    // Delete: everything after the key is reserved.
    rejected(
        &crafted(&delete, &[(D_RESERVED, &[1])]),
        "delete reserved byte 21",
    );
    rejected(
        &crafted(&delete, &[(100, &[1])]),
        "delete reserved byte 100",
    );
    // A record of all zeros (a hole left by a crash) is not a valid Create.
    rejected(&[0u8; RECORD_LEN], "crc32c");
}

fn header_rejected(b: &[u8], field: &str, at: u64) {
    match decode_header(b) {
        Err(StoreErr::BadHeader {
            file,
            field: f,
            offset,
            ..
        }) => {
            assert_eq!(file, "meta.log");
            assert_eq!((f, offset), (field, at), "wrong field/offset");
        }
        other => panic!("expected BadHeader {field}, got {other:?}"),
    }
}

fn reseal(mut h: [u8; RECORD_LEN], at: usize, v: &[u8]) -> [u8; RECORD_LEN] {
    h[at..at + v.len()].copy_from_slice(v);
    let crc = crc32c(&h[..CRC_OFFSET]);
    h[CRC_OFFSET..PAD_OFFSET].copy_from_slice(&crc.to_le_bytes());
    h
}

#[test]
fn every_header_rejection() {
    let h = encode_header(&CollectionConfig::default(), 0);
    header_rejected(&h[..127], "length", 0);
    header_rejected(&[], "length", 0);
    header_rejected(&reseal(h, H_MAGIC, b"TVMETLOX"), "magic", 0);
    header_rejected(&reseal(h, H_VERSION, &3u32.to_le_bytes()), "version", 8);
    header_rejected(&reseal(h, H_CODEC, &[6]), "codec", H_CODEC as u64);
    // Byte 49 is the flags byte: an unknown bit is refused as `flags`; bit 7
    // (ecsq_model) without bit 3 (ecsq) is refused naming the flag, at the same byte.
    header_rejected(
        &reseal(h, H_CODEC + 1, &[0x80]),
        "ecsq_model",
        (H_CODEC + 1) as u64,
    );
    header_rejected(
        &reseal(h, H_SINK_VALUES, &5000u16.to_le_bytes()),
        "sink_values",
        H_SINK_VALUES as u64,
    );
    // A version 1 header reserves the codec bytes.
    let v1 = encode_header(&CollectionConfig::codec_v1(4096), 0);
    header_rejected(&reseal(v1, H_CODEC, &[2]), "reserved", H_CODEC as u64);
    header_rejected(
        &reseal(h, H_RECORD_LEN, &64u32.to_le_bytes()),
        "record_len",
        12,
    );
    let mut bad = h;
    bad[H_GENERATION] ^= 1;
    header_rejected(&bad, "crc32c", 120);
    let mut bad = h;
    bad[127] = 9;
    header_rejected(&bad, "padding", 127);
    header_rejected(
        &reseal(h, H_RESERVED + 3, &[1]),
        "reserved",
        (H_RESERVED + 3) as u64,
    );
    header_rejected(
        &reseal(h, H_BLOCK_ELEMS, &0u32.to_le_bytes()),
        "block_elems",
        16,
    );
    header_rejected(&reseal(h, H_TIER0_ELEM_BYTES, &[3]), "tier0_elem_bytes", 20);
    header_rejected(
        &reseal(h, H_TIER_BITS + 1, &[9]),
        "tier_bits/group_size",
        21,
    );
    header_rejected(
        &reseal(h, H_GROUP_SIZE, &0u32.to_le_bytes()),
        "tier_bits/group_size",
        21,
    );
    header_rejected(
        &reseal(h, H_SLOT_ALIGN, &48u32.to_le_bytes()),
        "slot_align",
        36,
    );
    // Longer input: only the first 128 bytes matter.
    let mut long = h.to_vec();
    long.extend_from_slice(&[0xAB; 300]);
    assert_eq!(decode_header(&long).unwrap().1, 0);
}
