//! Channel-centred model-coded KV keys (`CollectionConfig::kv_keys_ecsq`, MetaLog header
//! flags2 bit 0, byte 78): a codec v4 KV cache with the entropy flag stores a tier 2
//! `kv_key` block that holds whole rows of a power-of-two head as a TQTC version 8
//! segment fitted into its budget (the larger of `KV_KEYS_ECSQ_CENTIBITS` / 100 bits per
//! value and the length of the segment the block gets without the bit, at most the tier's
//! cap); every other block, kind and tier is stored exactly as without the bit. The bit needs codec v4 and entropy, survives a reopen, and builds
//! that do not know it refuse the collection.

mod kv_keys;
mod mem;
mod values;
use kv_keys::{budget, key_info, keys, HD};
use mem::{dir_store, mem_store, payloads, resealed};
use values::{
    assert_migrated_equals_direct, bell_tokens, f16_bytes as bytes, f16_edge_tokens,
    f16_floats as floats, rel_rmse,
};

use half::f16;
use proptest::prelude::*;
use tensorvault_quant::layout as q;
use tensorvault_quant::segment_v8::SegmentV8;
use tensorvault_store::meta_log::layout::{HEADER_FLAG2_KV_KEYS_ECSQ, H_FLAGS, H_FLAGS2};
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{BlockInfo, BlockKey, CollectionConfig, DType, StoreErr, TensorKind, Tier};

/// Codec v4 KV cache with entropy, `ecsq` and `ecsq_tier2` (session 13's best tier 2);
/// `on` sets `kv_keys_ecsq`; `extents` allocation.
fn geo(on: bool, extents: bool) -> CollectionConfig {
    CollectionConfig {
        entropy: true,
        kv_ecsq: true,
        kv_ecsq_tier2: true,
        kv_keys_ecsq: on,
        extents,
        ..CollectionConfig::kv_cache(HD).unwrap().with_codec_v4()
    }
}

#[test]
fn tier_2_keys_lose_less_within_their_budget() {
    let x = keys(768, 0); // three blocks of 256 tokens, the first with the sink row
    for extents in [false, true] {
        let (before, after) = (
            mem_store("c", geo(false, extents)),
            mem_store("c", geo(true, extents)),
        );
        for s in [&before, &after] {
            s.put_tensor_with("k", &key_info(&[768, HD]), &bytes(&x), Tier::Tier2)
                .unwrap();
        }
        let (old, new) = (payloads(&before, "k"), payloads(&after, "k"));
        for (i, ((po, bo), (pn, bn))) in old.iter().zip(&new).enumerate() {
            assert_eq!((*bo, *bn), (5, 8), "block {i}");
            assert_eq!(pn[q::VERSION_OFFSET], q::V8_VERSION, "block {i}");
            let n = 256 * 64;
            let cap = budget(&geo(true, extents), n, po.len());
            assert!(pn.len() <= cap, "block {i}: {} > {cap}", pn.len());
            // The budget, not the groups' length, is what the rate control fills.
            assert!(
                pn.len() + 64 > cap.min(n * 495 / 800),
                "block {i}: {}",
                pn.len()
            );
            let seg = SegmentV8::parse(pn).unwrap();
            assert_eq!((seg.width(), seg.raw_rows()), (64, usize::from(i == 0)));
        }
        let y_old = floats(&before.get_tensor("k").unwrap().data);
        let y_new = floats(&after.get_tensor("k").unwrap().data);
        // The sink row is the same f16 either way.
        assert_eq!(&y_old[..64], &x[..64]);
        assert_eq!(&y_new[..64], &x[..64]);
        let (e_old, e_new) = (rel_rmse(&x, &y_old), rel_rmse(&x, &y_new));
        assert!(e_new < 0.8 * e_old, "{e_new} vs {e_old}");
        // Keys at about 4.95 b/v, inside the tier's 5.25.
        let bpv = after.stats().unwrap().payload_bytes[2] as f64 * 8.0 / x.len() as f64;
        assert!(bpv <= 4.96, "{bpv}");
    }
}

#[test]
fn other_tiers_kinds_and_shapes_are_stored_as_without_the_bit() {
    let (before, after) = (
        mem_store("c", geo(false, false)),
        mem_store("c", geo(true, false)),
    );
    let x = keys(300, 7);
    for (kind, tier) in [
        (TensorKind::KvKey, Tier::Tier0),
        (TensorKind::KvKey, Tier::Tier1),
        (TensorKind::KvKey, Tier::Tier3),
        (TensorKind::KvValue, Tier::Tier2),
        (TensorKind::Generic, Tier::Tier2),
    ] {
        let info = BlockInfo::new(DType::F16, &[300, HD]).with_kind(kind);
        for s in [&before, &after] {
            s.put_tensor_with("t", &info, &bytes(&x), tier).unwrap();
        }
        assert_eq!(
            payloads(&before, "t"),
            payloads(&after, "t"),
            "{kind} {tier:?}"
        );
    }
    // Rows of 48 channels (not a power of two) and a 1-D tensor (no rows) keep the groups.
    for shape in [&[400u32, 48][..], &[19_200u32][..]] {
        let info = BlockInfo::new(DType::F16, shape).with_kind(TensorKind::KvKey);
        let x = bell_tokens(400, 48, 3, 0.3);
        for s in [&before, &after] {
            s.put_tensor_with("r", &info, &bytes(&x), Tier::Tier2)
                .unwrap();
        }
        assert_eq!(payloads(&before, "r"), payloads(&after, "r"), "{shape:?}");
    }
    // A one-token tensor: block 0 is only its sink row, nothing to code as v8.
    let x = keys(1, 2);
    for s in [&before, &after] {
        s.put_tensor_with("one", &key_info(&[1, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
    }
    assert_eq!(payloads(&before, "one"), payloads(&after, "one"));
}

#[test]
fn keys_past_f16_keep_the_groups() {
    // f32 keys whose channel 5 sits at 1e6 in the second block (no sink row there): no
    // f16 mean holds it, so that block keeps the per-channel groups (which code the range
    // in f32 units); the first block is v8.
    let x: Vec<f32> = keys(512, 4)
        .iter()
        .enumerate()
        .map(|(i, v)| {
            if i >= 256 * 64 && i % 64 == 5 {
                1.0e6 + v
            } else {
                *v
            }
        })
        .collect();
    let info = BlockInfo::new(DType::F32, &[512, HD]).with_kind(TensorKind::KvKey);
    let data: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let (before, after) = (
        mem_store("c", geo(false, false)),
        mem_store("c", geo(true, false)),
    );
    for s in [&before, &after] {
        s.put_tensor_with("k", &info, &data, Tier::Tier2).unwrap();
    }
    let (old, new) = (payloads(&before, "k"), payloads(&after, "k"));
    assert_eq!(new[0].0[q::VERSION_OFFSET], q::V8_VERSION);
    assert_eq!(old[1], new[1]);
}

#[test]
fn migration_tier_1_to_2_to_3_re_encodes() {
    let x = keys(512, 5);
    let g = geo(true, true);
    for tier in [Tier::Tier1, Tier::Tier2, Tier::Tier3] {
        assert_migrated_equals_direct(g, "k", &key_info(&[512, HD]), &bytes(&x), tier);
    }
    // Tier 1 -> 2 -> 3 -> 2 in one store: each migration re-encodes what it reads at the
    // new tier's layout (v8 at tier 2 only), and the keys stay close to the input.
    let walk = mem_store("c", g);
    walk.put_tensor_with("k", &key_info(&[512, HD]), &bytes(&x), Tier::Tier1)
        .unwrap();
    for (tier, bound) in [
        (Tier::Tier2, 0.02),
        (Tier::Tier3, 0.08),
        (Tier::Tier2, 0.08),
    ] {
        walk.migrate_tensor("k", tier).unwrap();
        let versions: Vec<u8> = payloads(&walk, "k")
            .iter()
            .map(|(p, _)| p[q::VERSION_OFFSET])
            .collect();
        if tier == Tier::Tier2 {
            assert_eq!(versions, [q::V8_VERSION; 2]);
        } else {
            assert!(!versions.contains(&q::V8_VERSION), "{versions:?}");
        }
        let e = rel_rmse(&x, &floats(&walk.get_tensor("k").unwrap().data));
        assert!(e < bound, "{tier:?}: {e}");
    }
}

#[test]
fn the_bit_needs_codec_4_and_entropy() {
    for bad in [
        CollectionConfig {
            entropy: false,
            kv_ecsq: false,
            kv_ecsq_tier2: false,
            ..geo(true, false)
        },
        CollectionConfig {
            kv_keys_ecsq: true,
            ..CollectionConfig::kv_cache(HD).unwrap()
        },
    ] {
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("kv_keys_ecsq"), "{e}");
    }
    geo(true, false).validate().unwrap();
    CollectionConfig {
        kv_ecsq: false,
        kv_ecsq_tier2: false,
        ..geo(true, false)
    }
    .validate()
    .unwrap();
}

#[test]
fn the_bit_is_flags2_bit_0_and_survives_a_reopen() {
    let h = encode_header(&geo(true, false), 0);
    assert_eq!(h[H_FLAGS2], HEADER_FLAG2_KV_KEYS_ECSQ);
    assert_eq!(H_FLAGS2, 78);
    assert!(decode_header(&h).unwrap().0.kv_keys_ecsq);
    assert_eq!(encode_header(&geo(false, false), 0)[H_FLAGS2], 0);
    // Crafted: the bit without the entropy flag (and the KV bits that need it) is refused
    // naming the bit and byte 78.
    let mut no_entropy = h;
    no_entropy[H_FLAGS] = 0;
    match decode_header(&resealed(no_entropy)) {
        Err(StoreErr::BadHeader { field, offset, .. }) => {
            assert_eq!((field, offset), ("kv_keys_ecsq", 78));
        }
        other => panic!("{other:?}"),
    }
    // Codec 2 with the bit: refused the same way.
    let mut codec2 = encode_header(&CollectionConfig::kv_cache(HD).unwrap(), 0);
    codec2[H_FLAGS2] = HEADER_FLAG2_KV_KEYS_ECSQ;
    match decode_header(&resealed(codec2)) {
        Err(StoreErr::BadHeader { field, offset, .. }) => {
            assert_eq!((field, offset), ("kv_keys_ecsq", 78));
        }
        other => panic!("{other:?}"),
    }

    let dir = tempfile::tempdir().unwrap();
    let x = keys(512, 9);
    let first = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("k", &key_info(&[512, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
        let d = s.get_tensor("k").unwrap().data;
        s.close().unwrap();
        d
    };
    // Reopened (log replayed) with options that say otherwise: the header decides.
    let s = dir_store(dir.path(), 2, geo(false, false), false);
    assert!(s.geometry().kv_keys_ecsq);
    assert_eq!(s.get_tensor("k").unwrap().data, first);
    s.put_tensor_with("k2", &key_info(&[512, HD]), &bytes(&x), Tier::Tier2)
        .unwrap();
    assert_eq!(s.get_tensor("k2").unwrap().data, first);
    s.verify().unwrap();
}

#[test]
fn the_bit_combines_with_wide_lanes() {
    // flags2 bits 0 and 1 together: byte 78 is 0b11; keys are v8 within their budget,
    // which with 64-lane envelopes can be the (longer) wide envelope's length.
    let both = CollectionConfig {
        wide_lanes: true,
        ..geo(true, true)
    };
    let h = encode_header(&both, 0);
    assert_eq!(h[H_FLAGS2], 0b11);
    assert_eq!(decode_header(&h).unwrap().0, both);
    let x = keys(512, 12);
    let (plain, with) = (
        mem_store(
            "c",
            CollectionConfig {
                kv_keys_ecsq: false,
                ..both
            },
        ),
        mem_store("c", both),
    );
    for s in [&plain, &with] {
        s.put_tensor_with("k", &key_info(&[512, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
    }
    for ((po, _), (pn, _)) in payloads(&plain, "k").iter().zip(&payloads(&with, "k")) {
        assert_eq!(pn[q::VERSION_OFFSET], q::V8_VERSION);
        assert!(pn.len() <= budget(&both, 256 * 64, po.len()));
    }
    let y = floats(&with.get_tensor("k").unwrap().data);
    let y0 = floats(&plain.get_tensor("k").unwrap().data);
    assert!(rel_rmse(&x, &y) < 0.8 * rel_rmse(&x, &y0));
}

#[test]
fn a_corrupt_v8_payload_is_a_typed_error_not_a_panic() {
    let x = keys(256, 8);
    let s = mem_store("c", geo(true, false));
    s.put_tensor_with("k", &key_info(&[256, HD]), &bytes(&x), Tier::Tier2)
        .unwrap();
    let key = BlockKey::new(s.tensor_id_of("k"), 0);
    let mut p = Vec::new();
    s.get_payload(&key, &mut p).unwrap();
    assert_eq!(p[q::VERSION_OFFSET], q::V8_VERSION);
    // The segment's decoder (what the store's read path calls for version 8) on the
    // stored bytes with a bad field: bits, width, lanes, values, raw rows, a mean.
    let mean0 = q::V8_HEADER_LEN + 64 * 2;
    for (off, v, at) in [
        (q::V8_BITS_OFFSET, vec![13u8], q::V8_BITS_OFFSET),
        (q::V8_WIDTH_LOG2_OFFSET, vec![11], q::V8_WIDTH_LOG2_OFFSET),
        (q::V8_LANES_LOG2_OFFSET, vec![4], q::V8_LANES_LOG2_OFFSET),
        (
            q::V8_VALUES_OFFSET,
            100u32.to_le_bytes().to_vec(),
            q::V8_VALUES_OFFSET,
        ),
        (
            q::V8_RAW_ROWS_OFFSET,
            256u16.to_le_bytes().to_vec(),
            q::V8_RAW_ROWS_OFFSET,
        ),
        (
            mean0 + 6,
            f16::NAN.to_bits().to_le_bytes().to_vec(),
            mean0 + 6,
        ),
    ] {
        let mut b = p.clone();
        b[off..off + v.len()].copy_from_slice(&v);
        let mut out = Vec::new();
        let e = tensorvault_quant::segment_v8::decode(&b, 16384, &mut out).unwrap_err();
        assert!(
            matches!(e, tensorvault_quant::QuantError::CorruptField { offset, .. } if offset == at),
            "{e:?}"
        );
    }
    // The store's bound (block_elems) is checked before anything is allocated.
    let mut out = Vec::new();
    assert!(tensorvault_quant::segment_v8::decode(&p, 16383, &mut out).is_err());
    assert!(tensorvault_quant::segment_v8::decode(&p[..p.len() - 2], 16384, &mut out).is_err());
}

#[test]
fn a_corrupt_block_on_disk_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let x = keys(256, 10);
    {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("k", &key_info(&[256, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
        s.close().unwrap();
    }
    let tier2 = std::fs::read_dir(dir.path().join("t").join("c"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains("tier2"))
        })
        .expect("a tier 2 data file");
    let mut b = std::fs::read(&tier2).unwrap();
    // Inside the first mean: a valid checksum would be needed to reach the decoder.
    b[q::V8_HEADER_LEN + 64 * 2 + 1] ^= 0x7C;
    std::fs::write(&tier2, &b).unwrap();
    let s = dir_store(dir.path(), 2, geo(true, false), false);
    let e = s.get_tensor("k").unwrap_err();
    assert!(matches!(e, StoreErr::Corruption { .. }), "{e:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Any token count and scale: the tier 2 round trip keeps the shape, stays finite,
    /// never takes more than its budget, and stays close to the input.
    #[test]
    fn tier_2_round_trip(n in 1u64..700, seed in 0u64..1_000_000, scale in 0.01f32..100.0, extents: bool) {
        let x: Vec<f32> = keys(n, seed)
            .iter()
            .map(|v| f16::from_f32(v * scale).to_f32())
            .collect();
        let (before, after) = (mem_store("c", geo(false, extents)), mem_store("c", geo(true, extents)));
        for s in [&before, &after] {
            s.put_tensor_with("k", &key_info(&[n as u32, HD]), &bytes(&x), Tier::Tier2).unwrap();
        }
        let y = floats(&after.get_tensor("k").unwrap().data);
        prop_assert_eq!(y.len(), x.len());
        prop_assert!(y.iter().all(|v| v.is_finite()));
        prop_assert!(rel_rmse(&x, &y) < 0.05, "{}", rel_rmse(&x, &y));
        let g = geo(true, extents);
        let rows = (0..n).step_by(256).map(|t| (n - t).min(256) as usize * HD as usize);
        for (((po, _), (pn, _)), len) in payloads(&before, "k").iter().zip(&payloads(&after, "k")).zip(rows) {
            prop_assert!(pn.len() <= budget(&g, len, po.len()));
        }
    }
}

#[test]
fn keys_at_the_edge_of_f16_keep_the_groups() {
    // review15: a v8 reconstruction `mean + (q + 1/2) step` of a key near 65504 passed
    // f16's range by up to half a step, and the f16 read returned inf for 5% of these
    // keys (version 8 was written). Such a block now keeps its encoding without the bit
    // (the same bytes as a collection without it).
    let x = f16_edge_tokens(HD);
    let (before, after) = (
        mem_store("c", geo(false, false)),
        mem_store("c", geo(true, false)),
    );
    for s in [&before, &after] {
        s.put_tensor_with("k", &key_info(&[256, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
    }
    let (old, new) = (payloads(&before, "k"), payloads(&after, "k"));
    assert_ne!(new[0].0[q::VERSION_OFFSET], q::V8_VERSION);
    assert_eq!(old, new);
    // Keys a little inside the range (a quarter of it) are v8 and read back finite.
    let quarter: Vec<f32> = x.iter().map(|v| f16::from_f32(v * 0.25).to_f32()).collect();
    let st = mem_store("c", geo(true, false));
    st.put_tensor_with("k", &key_info(&[256, HD]), &bytes(&quarter), Tier::Tier2)
        .unwrap();
    assert_eq!(payloads(&st, "k")[0].0[q::VERSION_OFFSET], q::V8_VERSION);
    let y = floats(&st.get_tensor("k").unwrap().data);
    assert!(y.iter().all(|v| v.is_finite()));
}

#[test]
fn compaction_keeps_byte_78_and_the_v8_blocks() {
    // review15: the log a compaction rewrites starts with a header re-encoded from the
    // collection's geometry: byte 78 must come back with both bits, and a reopen must
    // read the same v8 keys.
    let both = CollectionConfig {
        wide_lanes: true,
        ..geo(true, false)
    };
    let dir = tempfile::tempdir().unwrap();
    let x = keys(512, 21);
    let log = dir.path().join("t").join("c").join("meta.log");
    let first = {
        let s = dir_store(dir.path(), 1, both, true);
        s.put_tensor_with("k", &key_info(&[512, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
        s.put_tensor_with("gone", &key_info(&[512, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
        s.delete_tensor("gone").unwrap();
        let before = std::fs::read(&log).unwrap().len();
        s.compact().unwrap();
        assert!(
            std::fs::read(&log).unwrap().len() < before,
            "compaction dropped nothing"
        );
        let d = s.get_tensor("k").unwrap().data;
        s.close().unwrap();
        d
    };
    let h = std::fs::read(&log).unwrap();
    assert_eq!(h[H_FLAGS2], 0b11);
    let s = dir_store(dir.path(), 2, geo(false, false), false);
    assert_eq!(s.geometry(), &both);
    assert_eq!(s.get_tensor("k").unwrap().data, first);
    for m in s.blocks().unwrap() {
        let mut p = Vec::new();
        s.get_payload(&m.key, &mut p).unwrap();
        assert_eq!(p[q::VERSION_OFFSET], q::V8_VERSION, "{:?}", m.key);
    }
    s.verify().unwrap();
}

#[test]
fn a_tier_2_file_cut_inside_a_v8_block_is_a_typed_error() {
    // review15: a crash that leaves the tier 2 data file shorter than a v8 block's record
    // says (the write never reached the disk) makes a read of that block a typed error,
    // never a panic or a short decode; blocks before the cut still read.
    let dir = tempfile::tempdir().unwrap();
    let x = keys(512, 22);
    let want = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("k", &key_info(&[512, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
        let mut metas = s.blocks().unwrap();
        metas.sort_by_key(|m| m.key.block_index);
        let mut first = Vec::new();
        s.get_block(&metas[0].key, &mut first).unwrap();
        s.close().unwrap();
        (metas, first)
    };
    let (metas, first) = want;
    let last = metas.iter().max_by_key(|m| m.data_offset).unwrap();
    let tier2 = std::fs::read_dir(dir.path().join("t").join("c"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains("tier2"))
        })
        .expect("a tier 2 data file");
    let cut = last.data_offset + u64::from(last.data_len) / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&tier2)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let s = dir_store(dir.path(), 2, geo(true, false), false);
    let mut out = Vec::new();
    let e = s.get_block(&last.key, &mut out).unwrap_err();
    // Opening drops the record whose payload the file does not hold (crash recovery),
    // or a read finds it cut: either way a typed error.
    assert!(
        e.is_corruption() || matches!(e, StoreErr::NotFound { .. }),
        "{e:?}"
    );
    if last.key != metas[0].key {
        s.get_block(&metas[0].key, &mut out).unwrap();
        assert_eq!(out, first);
    }
    let e = s.get_tensor("k").unwrap_err();
    assert!(
        e.is_corruption() || matches!(e, StoreErr::NotFound { .. }),
        "{e:?}"
    );
}
