//! Model-coded ECSQ (`CollectionConfig::ecsq_model`, MetaLog header flags bit 7): weight
//! and embedding blocks at tiers 1 to 3 of a codec v4 `ecsq` collection are TQTC version
//! 7 segments (10 / 7 / 6-bit codes, rANS frequencies from a Gaussian model), inside the
//! version 6 row-gain envelope with `row_gains`, in the same slots. The flag needs
//! `ecsq`, is header bit 7, survives a reopen, and lowers the error against the v5 ECSQ
//! at tiers 2 and 3 (and against v4 at tier 1); migration equals a direct put.

mod mem;
mod values;

use mem::{dir_store, mem_store, resealed};
use values::{assert_migrated_equals_direct, f32_bytes as bytes, f32_floats as floats, rel_rmse};

use tensorvault_quant::layout::{V6_VERSION, V7_VERSION, VERSION_OFFSET};
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{BlockInfo, BlockKey, CollectionConfig, DType, TensorKind, Tier};

const WIDTH: usize = 576;
const TIERS: [Tier; 3] = [Tier::Tier1, Tier::Tier2, Tier::Tier3];

/// Unit-norm rows of `WIDTH` with a shared direction and heavy-ish tails.
fn table(rows: usize) -> Vec<f32> {
    values::embedding_rows(rows, WIDTH, 0, 6.0)
}

fn geo(model: bool, row_gains: bool) -> CollectionConfig {
    CollectionConfig {
        entropy: true,
        ecsq: true,
        ecsq_model: model,
        row_gains,
        ..CollectionConfig::default().with_codec_v4()
    }
}

#[test]
fn embeddings_round_trip_through_every_tier_as_v7() {
    let x = table(64); // 9 blocks of 4096, the last one short (3840 values)
    let data = bytes(&x);
    let info = BlockInfo::new(DType::F32, &[64, WIDTH as u32]).with_kind(TensorKind::Embedding);
    for row_gains in [false, true] {
        for tier in TIERS {
            let (before, model) = (
                mem_store("c", geo(false, row_gains)),
                mem_store("c", geo(true, row_gains)),
            );
            for s in [&before, &model] {
                s.put_tensor_with("e", &info, &data, tier).unwrap();
            }
            let yb = floats(&before.get_tensor("e").unwrap().data);
            let ym = floats(&model.get_tensor("e").unwrap().data);
            assert_eq!(ym.len(), x.len());
            let (eb, em) = (rel_rmse(&x, &yb), rel_rmse(&x, &ym));
            assert!(
                em < eb,
                "gains {row_gains} {tier:?}: v7 {em} vs before {eb}"
            );
            // Every block within the tier's slot.
            let slot = u64::from(geo(true, row_gains).slot_len(tier));
            let st = model.stats().unwrap();
            assert!(st.payload_bytes[tier as usize] <= slot * 9, "{st:?}");
            for block in [0u32, 1, 8] {
                let mut p = Vec::new();
                model
                    .get_payload(&BlockKey::new(model.tensor_id_of("e"), block), &mut p)
                    .unwrap();
                if row_gains {
                    assert_eq!(p[VERSION_OFFSET], V6_VERSION);
                    assert_eq!(p[10], V7_VERSION, "inner version, {tier:?}");
                } else {
                    assert_eq!(p[VERSION_OFFSET], V7_VERSION, "{tier:?} block {block}");
                }
                let k = [10u8, 7, 6][tier as usize - 1];
                assert_eq!(p[9], k, "code width, {tier:?}");
            }
        }
    }
}

#[test]
fn weights_use_it_and_other_kinds_do_not() {
    let x = table(16);
    let data = bytes(&x);
    let (before, model) = (
        mem_store("c", geo(false, false)),
        mem_store("c", geo(true, false)),
    );
    for (kind, tier, v7) in [
        (TensorKind::Weight, Tier::Tier1, true),
        (TensorKind::Weight, Tier::Tier3, true),
        (TensorKind::Generic, Tier::Tier2, false),
        (TensorKind::Embedding, Tier::Tier0, false),
    ] {
        let info = BlockInfo::new(DType::F32, &[16, WIDTH as u32]).with_kind(kind);
        for s in [&before, &model] {
            s.put_tensor_with("t", &info, &data, tier).unwrap();
        }
        let (a, b) = (
            before.get_tensor("t").unwrap().data,
            model.get_tensor("t").unwrap().data,
        );
        let mut p = Vec::new();
        model
            .get_payload(&BlockKey::new(model.tensor_id_of("t"), 0), &mut p)
            .unwrap();
        if v7 {
            assert_eq!(p[VERSION_OFFSET], V7_VERSION, "{kind} {tier:?}");
        } else {
            assert_eq!(a, b, "{kind} {tier:?}");
        }
    }
}

#[test]
fn migration_equals_a_direct_put() {
    let x = table(8);
    let info = BlockInfo::new(DType::F32, &[8, WIDTH as u32]).with_kind(TensorKind::Embedding);
    assert_migrated_equals_direct(geo(true, true), "e", &info, &bytes(&x), Tier::Tier3);
    assert_migrated_equals_direct(geo(true, false), "e", &info, &bytes(&x), Tier::Tier1);
}

#[test]
fn the_flag_needs_ecsq() {
    let bad = CollectionConfig {
        ecsq_model: true,
        ..CollectionConfig::default().with_codec_v4()
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("ecsq_model"), "{e}");
    geo(true, false).validate().unwrap();
}

#[test]
fn the_flag_is_header_bit_7_and_survives_a_reopen() {
    let h = encode_header(&geo(true, false), 0);
    assert_eq!(h[49] & 0x80, 0x80);
    assert_eq!(h[49] & 0x7F, encode_header(&geo(false, false), 0)[49]);
    assert!(decode_header(&h).unwrap().0.ecsq_model);
    assert!(
        !decode_header(&encode_header(&geo(false, false), 0))
            .unwrap()
            .0
            .ecsq_model
    );
    // Bit 7 without ecsq: refused naming the flag and byte 49.
    let mut h = encode_header(&CollectionConfig::default().with_codec_v4(), 0);
    h[49] |= 0x80;
    h = resealed(h);
    let e = decode_header(&h).unwrap_err().to_string();
    assert!(e.contains("ecsq_model") && e.contains("49"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let x = table(8);
    let info = BlockInfo::new(DType::F32, &[8, WIDTH as u32]).with_kind(TensorKind::Embedding);
    let first = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("e", &info, &bytes(&x), Tier::Tier2)
            .unwrap();
        let d = s.get_tensor("e").unwrap().data;
        s.close().unwrap();
        d
    };
    // Reopened with options that say otherwise: the header decides.
    let s = dir_store(dir.path(), 2, geo(false, false), false);
    assert!(s.geometry().ecsq_model);
    assert_eq!(s.get_tensor("e").unwrap().data, first);
    s.put_tensor_with("f", &info, &bytes(&x), Tier::Tier2)
        .unwrap();
    assert_eq!(s.get_tensor("f").unwrap().data, first);
}

#[test]
fn a_corrupt_v7_payload_is_a_typed_error_not_a_panic() {
    let x = table(8);
    let info = BlockInfo::new(DType::F32, &[8, WIDTH as u32]).with_kind(TensorKind::Embedding);
    let s = mem_store("c", geo(true, false));
    s.put_tensor_with("e", &info, &bytes(&x), Tier::Tier2)
        .unwrap();
    let key = BlockKey::new(s.tensor_id_of("e"), 0);
    let mut p = Vec::new();
    s.get_payload(&key, &mut p).unwrap();
    assert_eq!(p[VERSION_OFFSET], V7_VERSION);
    // The segment's parser (what the store's read path calls for version 7), on the stored
    // bytes with a bad field: bits, block_log2, lanes_log2, values, step.
    for (off, v) in [(9usize, 13u8), (10, 11), (11, 4), (16, 0), (23, 0x7F)] {
        let mut b = p.clone();
        b[off] = v;
        if off == 16 {
            b[17..20].fill(0);
        }
        if off == 23 {
            b[20..23].fill(0xFF); // a NaN step
        }
        let mut out = Vec::new();
        let e = tensorvault_quant::segment_v7::decode(&b, 4096, &mut out).unwrap_err();
        let at = if off == 23 { 20 } else { off };
        assert!(
            matches!(e, tensorvault_quant::QuantError::CorruptField { offset, .. } if offset == at),
            "{e:?}"
        );
    }
    // The caller's bound (the store's block_elems) is checked before anything is allocated.
    let mut out = Vec::new();
    assert!(tensorvault_quant::segment_v7::decode(&p, 4095, &mut out).is_err());
    // A truncated payload.
    assert!(tensorvault_quant::segment_v7::decode(&p[..p.len() - 2], 4096, &mut out).is_err());
}

/// Pinned payload of block 1 of the test table at tier 2 (v7 alone): the header (version,
/// width, block, lanes, seed, n), its length and a CRC32C of the whole payload, so any
/// change to what the encoder writes (the model tables, the rate control) shows.
#[test]
fn golden_payload() {
    let x = table(16);
    let info = BlockInfo::new(DType::F32, &[16, WIDTH as u32]).with_kind(TensorKind::Embedding);
    let s = mem_store("c", geo(true, false));
    s.put_tensor_with("e", &info, &bytes(&x), Tier::Tier2)
        .unwrap();
    let mut p = Vec::new();
    s.get_payload(&BlockKey::new(s.tensor_id_of("e"), 1), &mut p)
        .unwrap();
    let head = &p[..20];
    let crc = crc32c::crc32c(&p);
    assert_eq!(
        (head, p.len(), crc),
        (&GOLDEN_HEAD[..], 2684, 0xf379_e92c),
        "{head:?} {} {crc:#x}",
        p.len()
    );
}

const GOLDEN_HEAD: [u8; 20] = [
    0x54, 0x51, 0x54, 0x43, 0x0d, 0x0a, 0x1a, 0x0a, // magic
    7, 7, 10, 0, // version 7, 7-bit codes, rotation blocks of 1024, one lane
    0x33, 0x51, 0x56, 0x54, // seed V3_DEFAULT_SEED
    0, 16, 0, 0, // n = 4096
];
