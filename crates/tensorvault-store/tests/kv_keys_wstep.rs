//! Per-channel key steps (`CollectionConfig::kv_keys_wstep`, MetaLog header flags2 bit 2,
//! byte 78): with `kv_keys_ecsq`, the tier 2 key blocks that bit stores as TQTC version 8
//! are stored as TQTC version 9 (one step per channel) in the same budget; every other
//! block is stored exactly as with `kv_keys_ecsq` alone. The bit needs `kv_keys_ecsq`,
//! survives a reopen and a compaction, and builds that do not know it refuse the
//! collection.

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
use tensorvault_quant::segment_v9::SegmentV9;
use tensorvault_quant::QuantError;
use tensorvault_store::meta_log::layout::{
    HEADER_FLAG2_KV_KEYS_ECSQ, HEADER_FLAG2_KV_KEYS_WSTEP, HEADER_KNOWN_FLAGS2, H_FLAGS2,
};
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{BlockInfo, BlockKey, CollectionConfig, DType, StoreErr, TensorKind, Tier};

/// Codec v4 KV cache with entropy, `ecsq`, `ecsq_tier2` and `kv_keys_ecsq`; `on` sets
/// `kv_keys_wstep`; `extents` allocation.
fn geo(on: bool, extents: bool) -> CollectionConfig {
    CollectionConfig {
        entropy: true,
        kv_ecsq: true,
        kv_ecsq_tier2: true,
        kv_keys_ecsq: true,
        kv_keys_wstep: on,
        extents,
        ..CollectionConfig::kv_cache(HD).unwrap().with_codec_v4()
    }
}

/// The squared error of `y` against `x` (rows of [`HD`] channels), each channel's weighted
/// by the mean energy of its RoPE pair `(2i, 2i + 1)` in `x`.
fn pair_weighted_error(x: &[f32], y: &[f32]) -> f64 {
    let hd = HD as usize;
    let mut energy = vec![0f64; hd];
    let mut err = vec![0f64; hd];
    for (i, (a, b)) in x.iter().zip(y).enumerate() {
        energy[i % hd] += f64::from(*a) * f64::from(*a);
        err[i % hd] += (f64::from(*a) - f64::from(*b)).powi(2);
    }
    (0..hd)
        .map(|c| (energy[c & !1] + energy[c | 1]) * err[c])
        .sum()
}

fn reseal(mut h: [u8; 128], at: usize, v: u8) -> [u8; 128] {
    h[at] = v;
    resealed(h)
}

#[test]
fn tier_2_keys_are_v9_in_the_v8_budget() {
    let x = keys(768, 0); // three blocks of 256 tokens, the first with the sink row
    for extents in [false, true] {
        let (v8, v9) = (
            mem_store("c", geo(false, extents)),
            mem_store("c", geo(true, extents)),
        );
        let plain = mem_store(
            "c",
            CollectionConfig {
                kv_keys_ecsq: false,
                ..geo(false, extents)
            },
        );
        for s in [&v8, &v9, &plain] {
            s.put_tensor_with("k", &key_info(&[768, HD]), &bytes(&x), Tier::Tier2)
                .unwrap();
        }
        let n = 256 * 64;
        let (old, new, groups) = (
            payloads(&v8, "k"),
            payloads(&v9, "k"),
            payloads(&plain, "k"),
        );
        for (i, ((po, _), ((pn, bn), (pg, _)))) in
            old.iter().zip(new.iter().zip(&groups)).enumerate()
        {
            assert_eq!(po[q::VERSION_OFFSET], q::V8_VERSION, "block {i}");
            assert_eq!(
                (pn[q::VERSION_OFFSET], *bn),
                (q::V9_VERSION, 8),
                "block {i}"
            );
            let cap = budget(&geo(true, extents), n, pg.len());
            assert!(pn.len() <= cap, "block {i}: {} > {cap}", pn.len());
            // The rate control fills the same budget v8 fills.
            assert!(
                pn.len() + 64 > cap.min(n * 495 / 800),
                "block {i}: {}",
                pn.len()
            );
            let seg = SegmentV9::parse(pn).unwrap();
            assert_eq!((seg.width(), seg.raw_rows()), (64, usize::from(i == 0)));
            // The steps are shaped: the wide channels (every 13th) get coarser steps.
            let st = seg.steps();
            assert!(st[3] > st[4], "block {i}: {:?}", &st[..8]);
        }
        let y8 = floats(&v8.get_tensor("k").unwrap().data);
        let y9 = floats(&v9.get_tensor("k").unwrap().data);
        assert_eq!(&y9[..64], &x[..64], "the sink row stays f16");
        // Per-channel steps trade key MSE for the channels whose RoPE pairs carry the
        // most energy (what `q . dk` weighs, for queries aligned with the keys): the
        // error weighted by pair energy falls, the plain error stays small.
        let (e8, e9) = (rel_rmse(&x, &y8), rel_rmse(&x, &y9));
        assert!(e9 < 3.0 * e8 && e9 < 0.02, "{e9} vs {e8}");
        let (w8, w9) = (pair_weighted_error(&x, &y8), pair_weighted_error(&x, &y9));
        assert!(w9 < 0.9 * w8, "{w9} vs {w8}");
        let bpv = v9.stats().unwrap().payload_bytes[2] as f64 * 8.0 / x.len() as f64;
        assert!(bpv <= 4.96, "{bpv}");
    }
}

#[test]
fn other_tiers_and_kinds_are_stored_as_with_kv_keys_ecsq_alone() {
    let (v8, v9) = (
        mem_store("c", geo(false, false)),
        mem_store("c", geo(true, false)),
    );
    let x = keys(300, 7);
    for (kind, tier) in [
        (TensorKind::KvKey, Tier::Tier1),
        (TensorKind::KvValue, Tier::Tier2),
        (TensorKind::KvValue, Tier::Tier3),
        (TensorKind::Generic, Tier::Tier2),
    ] {
        let info = BlockInfo::new(DType::F16, &[300, HD]).with_kind(kind);
        for s in [&v8, &v9] {
            s.put_tensor_with("t", &info, &bytes(&x), tier).unwrap();
        }
        assert_eq!(payloads(&v8, "t"), payloads(&v9, "t"), "{kind} {tier:?}");
    }
    // Rows of 48 channels keep the groups, as they do without the bit.
    let info = BlockInfo::new(DType::F16, &[400, 48]).with_kind(TensorKind::KvKey);
    let x = bell_tokens(400, 48, 3, 0.3);
    for s in [&v8, &v9] {
        s.put_tensor_with("r", &info, &bytes(&x), Tier::Tier2)
            .unwrap();
    }
    assert_eq!(payloads(&v8, "r"), payloads(&v9, "r"));
}

#[test]
fn tier_3_keys_are_v9_within_the_4_bit_envelope() {
    let x = keys(768, 30);
    let (v8, v9) = (
        mem_store("c", geo(false, true)),
        mem_store("c", geo(true, true)),
    );
    for s in [&v8, &v9] {
        s.put_tensor_with("k", &key_info(&[768, HD]), &bytes(&x), Tier::Tier3)
            .unwrap();
    }
    // Without bit 2, tier 3 keys are the 4-bit groups (v8 is tier 2 only).
    let (old, new) = (payloads(&v8, "k"), payloads(&v9, "k"));
    for (i, ((po, bo), (pn, bn))) in old.iter().zip(&new).enumerate() {
        assert_ne!(po[q::VERSION_OFFSET], q::V8_VERSION, "block {i}");
        assert_eq!(
            (pn[q::VERSION_OFFSET], *bo, *bn),
            (q::V9_VERSION, 4, 8),
            "block {i}"
        );
        assert!(
            pn.len() <= po.len(),
            "block {i}: {} > {}",
            pn.len(),
            po.len()
        );
    }
    let y8 = floats(&v8.get_tensor("k").unwrap().data);
    let y9 = floats(&v9.get_tensor("k").unwrap().data);
    let (w8, w9) = (pair_weighted_error(&x, &y8), pair_weighted_error(&x, &y9));
    assert!(w9 < 0.9 * w8, "{w9} vs {w8}");
    let bpv = |s: &mem::Mem| s.stats().unwrap().payload_bytes[3] as f64 * 8.0 / x.len() as f64;
    assert!(bpv(&v9) <= bpv(&v8), "{} > {}", bpv(&v9), bpv(&v8));
}

#[test]
fn migration_tier_1_to_2_to_3_to_2_re_encodes() {
    let x = keys(512, 5);
    let g = geo(true, true);
    for tier in [Tier::Tier1, Tier::Tier2, Tier::Tier3] {
        assert_migrated_equals_direct(g, "k", &key_info(&[512, HD]), &bytes(&x), tier);
    }
    let walk = mem_store("c", g);
    walk.put_tensor_with("k", &key_info(&[512, HD]), &bytes(&x), Tier::Tier1)
        .unwrap();
    for (tier, bound) in [
        (Tier::Tier2, 0.03),
        (Tier::Tier3, 0.08),
        (Tier::Tier2, 0.08),
    ] {
        walk.migrate_tensor("k", tier).unwrap();
        let versions: Vec<u8> = payloads(&walk, "k")
            .iter()
            .map(|(p, _)| p[q::VERSION_OFFSET])
            .collect();
        // v9 at tiers 2 and 3 (tier 3 within the 4-bit envelope's bytes).
        assert_eq!(versions, [q::V9_VERSION; 2], "{tier:?}");
        let e = rel_rmse(&x, &floats(&walk.get_tensor("k").unwrap().data));
        assert!(e < bound, "{tier:?}: {e}");
    }
}

#[test]
fn the_bit_needs_kv_keys_ecsq_and_is_refused_at_byte_78_without_it() {
    let bad = CollectionConfig {
        kv_keys_ecsq: false,
        ..geo(true, false)
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("kv_keys_wstep"), "{e}");
    geo(true, false).validate().unwrap();

    let h = encode_header(&geo(true, false), 0);
    assert_eq!(H_FLAGS2, 78);
    assert_eq!(
        h[H_FLAGS2],
        HEADER_FLAG2_KV_KEYS_ECSQ | HEADER_FLAG2_KV_KEYS_WSTEP
    );
    assert_eq!(HEADER_FLAG2_KV_KEYS_WSTEP, 1 << 2);
    assert!(decode_header(&h).unwrap().0.kv_keys_wstep);
    // Crafted: bit 2 without bit 0 is refused naming the bit and byte 78.
    match decode_header(&reseal(h, H_FLAGS2, HEADER_FLAG2_KV_KEYS_WSTEP)) {
        Err(StoreErr::BadHeader { field, offset, .. }) => {
            assert_eq!((field, offset), ("kv_keys_wstep", 78));
        }
        other => panic!("{other:?}"),
    }
    // A build that knows bits 0..=2 refuses bit 3 (as a build before this one refuses bit 2).
    assert_eq!(HEADER_KNOWN_FLAGS2 & (1 << 3), 0);
    match decode_header(&reseal(h, H_FLAGS2, h[H_FLAGS2] | 1 << 3)) {
        Err(StoreErr::BadHeader { field, offset, .. }) => {
            assert_eq!((field, offset), ("flags2", 78));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_bit_survives_a_reopen_with_log_replay() {
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
    // Reopened with options that say otherwise: the header decides.
    let s = dir_store(dir.path(), 2, geo(false, false), false);
    assert!(s.geometry().kv_keys_wstep);
    assert_eq!(s.get_tensor("k").unwrap().data, first);
    s.put_tensor_with("k2", &key_info(&[512, HD]), &bytes(&x), Tier::Tier2)
        .unwrap();
    assert_eq!(s.get_tensor("k2").unwrap().data, first);
    s.verify().unwrap();
}

#[test]
fn compaction_keeps_byte_78_and_the_v9_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let x = keys(512, 21);
    let log = dir.path().join("t").join("c").join("meta.log");
    let first = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("k", &key_info(&[512, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
        s.put_tensor_with("gone", &key_info(&[512, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
        s.delete_tensor("gone").unwrap();
        let before = std::fs::read(&log).unwrap().len();
        s.compact().unwrap();
        assert!(std::fs::read(&log).unwrap().len() < before);
        let d = s.get_tensor("k").unwrap().data;
        s.close().unwrap();
        d
    };
    assert_eq!(std::fs::read(&log).unwrap()[H_FLAGS2], 0b101);
    let s = dir_store(dir.path(), 2, geo(false, false), false);
    assert_eq!(s.geometry(), &geo(true, false));
    assert_eq!(s.get_tensor("k").unwrap().data, first);
    for m in s.blocks().unwrap() {
        let mut p = Vec::new();
        s.get_payload(&m.key, &mut p).unwrap();
        assert_eq!(p[q::VERSION_OFFSET], q::V9_VERSION, "{:?}", m.key);
    }
    s.verify().unwrap();
}

#[test]
fn a_corrupt_v9_payload_is_a_typed_error() {
    let x = keys(256, 8);
    let s = mem_store("c", geo(true, false));
    s.put_tensor_with("k", &key_info(&[256, HD]), &bytes(&x), Tier::Tier2)
        .unwrap();
    let key = BlockKey::new(s.tensor_id_of("k"), 0);
    let mut p = Vec::new();
    s.get_payload(&key, &mut p).unwrap();
    assert_eq!(p[q::VERSION_OFFSET], q::V9_VERSION);
    let codes = q::V8_HEADER_LEN + 64 * 2 + 64 * 2 + 64;
    let mean0 = q::V8_HEADER_LEN + 64 * 2;
    // A tiny coarsest step with the finest code: that channel's step is not a normal f32.
    let mut tiny = p.clone();
    tiny[q::V8_STEP_OFFSET..q::V8_STEP_OFFSET + 4].copy_from_slice(&1e-36f32.to_le_bytes());
    tiny[codes + 9] = 255;
    for (b, at) in [
        (tiny, codes + 9),
        (
            {
                let mut b = p.clone();
                b[q::V8_BITS_OFFSET] = 13;
                b
            },
            q::V8_BITS_OFFSET,
        ),
        (
            {
                let mut b = p.clone();
                b[mean0 + 6..mean0 + 8].copy_from_slice(&f16::NAN.to_bits().to_le_bytes());
                b
            },
            mean0 + 6,
        ),
    ] {
        let mut out = Vec::new();
        let e = tensorvault_quant::segment_v9::decode(&b, 16384, &mut out).unwrap_err();
        assert!(
            matches!(e, QuantError::CorruptField { offset, .. } if offset == at),
            "{e:?}"
        );
    }
    let mut out = Vec::new();
    assert!(tensorvault_quant::segment_v9::decode(&p, 16383, &mut out).is_err());
    // Cut inside the step codes.
    let e = tensorvault_quant::segment_v9::decode(&p[..codes + 10], 16384, &mut out).unwrap_err();
    assert!(
        matches!(
            e,
            QuantError::Truncated {
                what: "v9 step codes",
                ..
            }
        ),
        "{e:?}"
    );
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
    // A step code: the block's checksum catches it before the decoder sees it.
    b[q::V8_HEADER_LEN + 64 * 2 + 64 * 2 + 64 + 3] ^= 0x5A;
    std::fs::write(&tier2, &b).unwrap();
    let s = dir_store(dir.path(), 2, geo(true, false), false);
    let e = s.get_tensor("k").unwrap_err();
    assert!(matches!(e, StoreErr::Corruption { .. }), "{e:?}");
}

#[test]
fn keys_at_the_edge_of_f16_keep_the_groups() {
    // As v8 (review15): a block whose reconstruction would pass f16's range keeps its
    // encoding without the key bits.
    let x = f16_edge_tokens(HD);
    let plain = mem_store(
        "c",
        CollectionConfig {
            kv_keys_ecsq: false,
            ..geo(false, false)
        },
    );
    let with = mem_store("c", geo(true, false));
    for st in [&plain, &with] {
        st.put_tensor_with("k", &key_info(&[256, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
    }
    let y = floats(&with.get_tensor("k").unwrap().data);
    assert!(y.iter().all(|v| v.is_finite()));
    let (old, new) = (payloads(&plain, "k"), payloads(&with, "k"));
    if new[0].0[q::VERSION_OFFSET] != q::V9_VERSION {
        assert_eq!(old, new);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Any token count and scale: the tier 2 round trip keeps the shape, stays finite,
    /// never takes more than the budget, and stays close to the input.
    #[test]
    fn tier_2_round_trip(n in 1u64..700, seed in 0u64..1_000_000, scale in 0.01f32..100.0, extents: bool) {
        let x: Vec<f32> = keys(n, seed)
            .iter()
            .map(|v| f16::from_f32(v * scale).to_f32())
            .collect();
        let plain = mem_store("c", CollectionConfig { kv_keys_ecsq: false, ..geo(false, extents) });
        let with = mem_store("c", geo(true, extents));
        for s in [&plain, &with] {
            s.put_tensor_with("k", &key_info(&[n as u32, HD]), &bytes(&x), Tier::Tier2).unwrap();
        }
        let y = floats(&with.get_tensor("k").unwrap().data);
        prop_assert_eq!(y.len(), x.len());
        prop_assert!(y.iter().all(|v| v.is_finite()));
        prop_assert!(rel_rmse(&x, &y) < 0.05, "{}", rel_rmse(&x, &y));
        let g = geo(true, extents);
        let rows = (0..n).step_by(256).map(|t| (n - t).min(256) as usize * HD as usize);
        for (((pg, _), (pn, _)), len) in payloads(&plain, "k").iter().zip(&payloads(&with, "k")).zip(rows) {
            prop_assert!(pn.len() <= budget(&g, len, pg.len()));
        }
    }
}

#[test]
fn a_tier_2_file_cut_inside_a_v9_block_is_a_typed_error() {
    // review16, as review15 for v8: a crash that leaves the tier 2 data file shorter than
    // a v9 block's record says makes a read of that block a typed error, never a panic or
    // a short decode; the block before the cut still reads as it did.
    let dir = tempfile::tempdir().unwrap();
    let x = keys(512, 23);
    let (metas, first) = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("k", &key_info(&[512, HD]), &bytes(&x), Tier::Tier2)
            .unwrap();
        let mut metas = s.blocks().unwrap();
        metas.sort_by_key(|m| m.key.block_index);
        let mut first = Vec::new();
        s.get_block(&metas[0].key, &mut first).unwrap();
        for m in &metas {
            let mut p = Vec::new();
            s.get_payload(&m.key, &mut p).unwrap();
            assert_eq!(p[q::VERSION_OFFSET], q::V9_VERSION, "{:?}", m.key);
        }
        s.close().unwrap();
        (metas, first)
    };
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
    // Inside the step codes of the last block.
    let cut = last.data_offset + (q::V8_HEADER_LEN + 64 * 5) as u64;
    assert!(cut < last.data_offset + u64::from(last.data_len));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&tier2)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let s = dir_store(dir.path(), 2, geo(true, false), false);
    let mut out = Vec::new();
    let e = s.get_block(&last.key, &mut out).unwrap_err();
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

#[test]
fn a_dead_key_pair_reads_back_as_stored_at_tiers_2_and_3() {
    // review16: a RoPE pair that is zero in every token (pruned or padded channels) had
    // the encoder want a step ~10^6 times the others'; the stored zeros read back as
    // hundreds (±Δ/2) in a block whose keys are a few units. Now they read back within
    // a hair of zero and the block is still v9.
    let mut x = keys(512, 31);
    for t in 0..512 {
        x[t * HD as usize] = 0.0;
        x[t * HD as usize + 1] = 0.0;
    }
    let top = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    for tier in [Tier::Tier2, Tier::Tier3] {
        let s = mem_store("c", geo(true, false));
        s.put_tensor_with("k", &key_info(&[512, HD]), &bytes(&x), tier)
            .unwrap();
        for (p, _) in payloads(&s, "k") {
            assert_eq!(p[q::VERSION_OFFSET], q::V9_VERSION, "{tier:?}");
        }
        let y = floats(&s.get_tensor("k").unwrap().data);
        for t in 0..512 {
            for c in 0..2 {
                let v = y[t * HD as usize + c];
                assert!(
                    v.abs() <= 1e-3 * top,
                    "{tier:?}: token {t} channel {c}: {v}"
                );
            }
        }
        assert!(rel_rmse(&x, &y) < 0.08, "{tier:?}: {}", rel_rmse(&x, &y));
    }
}
