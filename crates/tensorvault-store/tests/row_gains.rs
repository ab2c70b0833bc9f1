//! Per-row gains for embeddings (`CollectionConfig::row_gains`, MetaLog header flags bit
//! 6): every quantized block of an `embedding` tensor in a codec v4 collection is a TQTC
//! version 6 envelope whose gains make each row's decoding an unbiased inner-product
//! estimate (`<x, x̂> = |x|^2`), around what the collection writes otherwise (v4, or
//! ECSQ with the `ecsq` flag) in the same slots. Other kinds and collections without the
//! flag are stored as before; the flag needs codec v4 and survives a reopen; migration
//! equals a direct put.

mod mem;
mod values;

use mem::{dir_store, mem_store, resealed};
use values::{assert_migrated_equals_direct, f32_bytes as bytes, f32_floats as floats, rel_rmse};

use tensorvault_quant::layout::{V4_VERSION, V5_VERSION, V6_VERSION, VERSION_OFFSET};
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{BlockInfo, BlockKey, CollectionConfig, DType, TensorKind, Tier};

const WIDTH: usize = 576;

/// Unit-norm rows of `WIDTH` sharing a common direction (as a token-embedding table:
/// a large mean component plus a per-row part with tails).
fn table(rows: usize) -> Vec<f32> {
    values::embedding_rows(rows, WIDTH, 0, 6.0)
}

fn geo(row_gains: bool, ecsq: bool) -> CollectionConfig {
    CollectionConfig {
        entropy: ecsq,
        ecsq,
        row_gains,
        ..CollectionConfig::default().with_codec_v4()
    }
}

/// Mean over rows of |<x, y> / |x|^2 - 1|: how far each row's inner product with
/// itself is scaled by the codec.
fn mean_row_bias(x: &[f32], y: &[f32]) -> f64 {
    let rows = x.len() / WIDTH;
    (0..rows)
        .map(|r| {
            let (a, b) = (&x[r * WIDTH..][..WIDTH], &y[r * WIDTH..][..WIDTH]);
            let xx: f64 = a.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            let xy: f64 = a
                .iter()
                .zip(b)
                .map(|(&u, &v)| f64::from(u) * f64::from(v))
                .sum();
            (xy / xx - 1.0).abs()
        })
        .sum::<f64>()
        / rows as f64
}

#[test]
fn rows_become_unbiased_in_the_same_slots() {
    let x = table(64); // 9 blocks of 4096 (the last one short)
    let data = bytes(&x);
    let info = BlockInfo::new(DType::F32, &[64, WIDTH as u32]).with_kind(TensorKind::Embedding);
    for (ecsq, tiers) in [
        (false, &[Tier::Tier1, Tier::Tier2, Tier::Tier3][..]),
        (true, &[Tier::Tier2, Tier::Tier3][..]),
    ] {
        for &tier in tiers {
            let (plain, gains) = (
                mem_store("c", geo(false, ecsq)),
                mem_store("c", geo(true, ecsq)),
            );
            for s in [&plain, &gains] {
                s.put_tensor_with("e", &info, &data, tier).unwrap();
            }
            let yp = floats(&plain.get_tensor("e").unwrap().data);
            let yg = floats(&gains.get_tensor("e").unwrap().data);
            let (bp, bg) = (mean_row_bias(&x, &yp), mean_row_bias(&x, &yg));
            // Gain codes are 2^-11 apart: the bias left is the rounding of the gain.
            assert!(
                bg < 3e-4,
                "ecsq {ecsq} {tier:?}: bias {bg} (without gains {bp})"
            );
            // At tiers 2 and 3 the codes' own bias is many gain steps; at tier 1 (8-bit
            // codes) it is about one, so the gains cannot do better than their rounding.
            if tier != Tier::Tier1 {
                assert!(bg < bp / 3.0, "ecsq {ecsq} {tier:?}: bias {bg} vs {bp}");
            }
            // The gains cost a little error (fewer bytes for the inner segment), not more.
            let (ep, eg) = (rel_rmse(&x, &yp), rel_rmse(&x, &yg));
            assert!(eg < ep * 1.1, "ecsq {ecsq} {tier:?}: error {eg} vs {ep}");
            // Every block within the tier's slot.
            let slot = geo(true, ecsq).slot_len(tier) as u64;
            let st = gains.stats().unwrap();
            assert!(st.payload_bytes[tier as usize] <= slot * 9, "{st:?}");
            // Block 1 starts 64 values into a row; its payload is a v6 envelope.
            let mut p = Vec::new();
            gains
                .get_payload(&BlockKey::new(gains.tensor_id_of("e"), 1), &mut p)
                .unwrap();
            assert_eq!(p[VERSION_OFFSET], V6_VERSION);
            // ECSQ (with entropy) wraps a v5 envelope; without the flags, the v4 layout.
            let inner = if ecsq { V5_VERSION } else { V4_VERSION };
            assert_eq!(p[10], inner, "ecsq {ecsq} {tier:?}");
            assert_eq!(&p[16..20], &[64, 2, 64, 0], "width 576, first 64");
        }
    }
}

#[test]
fn other_kinds_and_no_flag_are_stored_as_before() {
    let x = table(16);
    let data = bytes(&x);
    let (plain, gains) = (
        mem_store("c", geo(false, true)),
        mem_store("c", geo(true, true)),
    );
    for (kind, tier) in [
        (TensorKind::Weight, Tier::Tier1),
        (TensorKind::Weight, Tier::Tier3),
        (TensorKind::Generic, Tier::Tier2),
        (TensorKind::Embedding, Tier::Tier0),
    ] {
        let info = BlockInfo::new(DType::F32, &[16, WIDTH as u32]).with_kind(kind);
        for s in [&plain, &gains] {
            s.put_tensor_with("t", &info, &data, tier).unwrap();
        }
        assert_eq!(
            plain.get_tensor("t").unwrap().data,
            gains.get_tensor("t").unwrap().data,
            "{kind} {tier:?}"
        );
    }
}

#[test]
fn migration_equals_a_direct_put() {
    let x = table(8);
    let info = BlockInfo::new(DType::F32, &[8, WIDTH as u32]).with_kind(TensorKind::Embedding);
    assert_migrated_equals_direct(geo(true, true), "e", &info, &bytes(&x), Tier::Tier3);
    assert_migrated_equals_direct(geo(true, false), "e", &info, &bytes(&x), Tier::Tier2);
}

#[test]
fn the_flag_needs_codec_4() {
    let bad = CollectionConfig {
        row_gains: true,
        ..CollectionConfig::default()
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("row_gains"), "{e}");
    geo(true, false).validate().unwrap();
}

#[test]
fn the_flag_is_header_bit_6_and_survives_a_reopen() {
    let h = encode_header(&geo(true, false), 0);
    assert_eq!(h[49], 0b100_0000);
    assert!(decode_header(&h).unwrap().0.row_gains);
    assert!(
        !decode_header(&encode_header(&geo(false, false), 0))
            .unwrap()
            .0
            .row_gains
    );
    // Bit 6 in a codec 2 collection: refused naming the flag and byte 49.
    let mut h = encode_header(&CollectionConfig::default(), 0);
    h[49] |= 0b100_0000;
    h = resealed(h);
    let e = decode_header(&h).unwrap_err().to_string();
    assert!(e.contains("row_gains") && e.contains("49"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let x = table(8);
    let info = BlockInfo::new(DType::F32, &[8, WIDTH as u32]).with_kind(TensorKind::Embedding);
    let first = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("e", &info, &bytes(&x), Tier::Tier3)
            .unwrap();
        let d = s.get_tensor("e").unwrap().data;
        s.close().unwrap();
        d
    };
    // Reopened with options that say otherwise: the header decides.
    let s = dir_store(dir.path(), 2, geo(false, false), false);
    assert!(s.geometry().row_gains);
    assert_eq!(s.get_tensor("e").unwrap().data, first);
    s.put_tensor_with("f", &info, &bytes(&x), Tier::Tier3)
        .unwrap();
    assert_eq!(s.get_tensor("f").unwrap().data, first);
}

#[test]
fn a_corrupt_gain_envelope_is_a_typed_error_not_a_panic() {
    let x = table(8);
    let info = BlockInfo::new(DType::F32, &[8, WIDTH as u32]).with_kind(TensorKind::Embedding);
    let s = mem_store("c", geo(true, false));
    s.put_tensor_with("e", &info, &bytes(&x), Tier::Tier3)
        .unwrap();
    let key = BlockKey::new(s.tensor_id_of("e"), 0);
    let mut p = Vec::new();
    s.get_payload(&key, &mut p).unwrap();
    // The envelope's parser (what the store's read path calls for version 6), on the
    // stored bytes with a bad field.
    for (off, v) in [(10usize, 6u8), (11, 1), (16, 0)] {
        let mut b = p.clone();
        b[off] = v;
        if off == 16 {
            b[17] = 0;
        }
        let mut out = Vec::new();
        let e = tensorvault_quant::segment_v6::decode(&b, 4096, &mut out).unwrap_err();
        assert!(
            matches!(e, tensorvault_quant::QuantError::CorruptField { offset, .. } if offset == off),
            "{e:?}"
        );
    }
}

/// Pinned payload of block 1 (it starts 64 values into a row) of the test table at tier 3
/// with `ecsq`: the envelope header, the gain codes, and a CRC32C of the whole payload
/// (the inner ECSQ envelope included), so any change to what the encoder writes shows.
#[test]
fn golden_payload() {
    let x = table(16);
    let info = BlockInfo::new(DType::F32, &[16, WIDTH as u32]).with_kind(TensorKind::Embedding);
    let s = mem_store("c", geo(true, true));
    s.put_tensor_with("e", &info, &bytes(&x), Tier::Tier3)
        .unwrap();
    let mut p = Vec::new();
    s.get_payload(&BlockKey::new(s.tensor_id_of("e"), 1), &mut p)
        .unwrap();
    let head = &p[..20 + 8];
    let crc = crc32c::crc32c(&p);
    assert_eq!(
        (head, p.len(), crc),
        (&GOLDEN_HEAD[..], 2169, 0x0516_04c6),
        "{head:?} {} {crc:#x}",
        p.len()
    );
}

const GOLDEN_HEAD: [u8; 28] = [
    0x54, 0x51, 0x54, 0x43, 0x0d, 0x0a, 0x1a, 0x0a, // magic
    6, 5, 5, 0, // version 6, 5-bit codes, inner version 5 (the ECSQ envelope), reserved
    0, 16, 0, 0, // n = 4096
    64, 2, // width = 576
    64, 0, // first = 64 (block 1 starts 4096 = 7 * 576 + 64 values in)
    124, 119, 136, 135, 128, 124, 126, 129, // gain codes of the 8 row parts
];
