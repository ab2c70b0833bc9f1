//! Wide rANS lanes (`CollectionConfig::wide_lanes`, MetaLog header flags2 bit 1): a
//! collection with the entropy flag writes the version 5 envelopes of KV and generic
//! tensors with 64 lanes (`tensorvault_quant::layout::V5_WIDE_LANES_LOG2`), which decode
//! to exactly the values the 4-lane envelopes give; weights keep 4 lanes; the flag needs
//! the entropy flag, is byte 78 bit 1 of the header and survives a reopen, and a header
//! with a flags2 bit this build does not know is refused naming `flags2` and offset 78.

mod mem;
mod values;
use mem::{dir_store, mem_store, resealed};
use values::{bell_tokens, f16_bytes as bytes, f16_floats as floats, rel_rmse};

use tensorvault_quant::layout as q;
use tensorvault_quant::segment_v5::SegmentV5;
use tensorvault_store::meta_log::layout::H_FLAGS2;
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{BlockInfo, CollectionConfig, DType, StoreErr, TensorKind, Tier};

const HD: u32 = 64;

/// The KV layouts a collection may entropy-code: codec 2 with entropy, codec 4 with
/// entropy, with `kv_ecsq`, with `kv_ecsq` and `kv_ecsq_tier2`.
fn kv_geos(wide: bool) -> Vec<(&'static str, CollectionConfig)> {
    let kv = CollectionConfig::kv_cache(HD).unwrap();
    let v4 = kv.with_codec_v4();
    let g = |entropy, kv_ecsq, tier2, base: CollectionConfig| CollectionConfig {
        entropy,
        kv_ecsq,
        kv_ecsq_tier2: tier2,
        wide_lanes: wide,
        ..base
    };
    vec![
        ("codec 2", g(true, false, false, kv)),
        ("codec 4", g(true, false, false, v4)),
        ("kv_ecsq", g(true, true, false, v4)),
        ("kv_ecsq_tier2", g(true, true, true, v4)),
    ]
}

/// The stored payloads of tensor `name`, in block order.
fn payloads(s: &mem::Mem, name: &str) -> Vec<Vec<u8>> {
    mem::payloads(s, name).into_iter().map(|(p, _)| p).collect()
}

/// The lane count exponents of the version 5 envelopes among `payloads`.
fn envelope_lanes(payloads: &[Vec<u8>]) -> Vec<u8> {
    payloads
        .iter()
        .filter(|p| p.get(q::VERSION_OFFSET) == Some(&q::V5_VERSION))
        .map(|p| {
            SegmentV5::parse(p).unwrap();
            p[q::V5_LANES_LOG2_OFFSET]
        })
        .collect()
}

#[test]
fn every_kv_layout_and_tier_reads_the_same_values_with_64_lanes() {
    let x = bell_tokens(600, HD, 3, 0.005); // two whole blocks and a partial one
    let data = bytes(&x);
    for ((name, narrow), (_, wide)) in kv_geos(false).into_iter().zip(kv_geos(true)) {
        for kind in [TensorKind::KvKey, TensorKind::KvValue] {
            let info = BlockInfo::new(DType::F16, &[600, HD]).with_kind(kind);
            for tier in [Tier::Tier0, Tier::Tier1, Tier::Tier2, Tier::Tier3] {
                let (a, b) = (mem_store("c", narrow), mem_store("c", wide));
                a.put_tensor_with("t", &info, &data, tier).unwrap();
                b.put_tensor_with("t", &info, &data, tier).unwrap();
                let (pa, pb) = (payloads(&a, "t"), payloads(&b, "t"));
                let (la, lb) = (envelope_lanes(&pa), envelope_lanes(&pb));
                let what = format!("{name} {kind:?} {tier:?}");
                assert!(la.iter().all(|&l| l == q::V5_DEFAULT_LANES_LOG2), "{what}");
                // Rate-controlled tier 2 values keep 4 lanes where 64 do not fit the
                // slot at the step 4 lanes fit (never a coarser step); all else is 64.
                let rated = name == "kv_ecsq_tier2" && kind == TensorKind::KvValue;
                let wide_ok = |l: &u8| {
                    *l == q::V5_WIDE_LANES_LOG2
                        || (rated && tier == Tier::Tier2 && *l == q::V5_DEFAULT_LANES_LOG2)
                };
                assert!(lb.iter().all(wide_ok), "{what}: {lb:?}");
                // Tiers 2 and 3 entropy-code every whole block; tiers 0 and 1 never.
                let coded = matches!(tier, Tier::Tier2 | Tier::Tier3);
                assert_eq!(lb.len() >= 2, coded, "{what}: {lb:?}");
                let (ya, yb) = (
                    a.get_tensor("t").unwrap().data,
                    b.get_tensor("t").unwrap().data,
                );
                // The very same values (the rate-controlled ones at the same step).
                assert_eq!(ya, yb, "{what}");
                assert!(rel_rmse(&x, &floats(&yb)) < 0.5, "{what}");
                for p in &pb {
                    assert!(
                        p.len() as u64 <= u64::from(wide.max_block_len(tier)),
                        "{what}"
                    );
                }
            }
        }
    }
}

#[test]
fn generic_tensors_go_wide_and_weights_keep_four_lanes() {
    let g = |wide_lanes| CollectionConfig {
        entropy: true,
        wide_lanes,
        ..CollectionConfig::default()
    };
    let n = 3 * g(true).block_elems as usize;
    let x = bell_tokens(n as u64 / 64, 64, 5, 0.0);
    let data = bytes(&x);
    let (narrow, wide) = (mem_store("c", g(false)), mem_store("c", g(true)));
    for (name, kind) in [("g", TensorKind::Generic), ("w", TensorKind::Weight)] {
        let shape = [(n / 64) as u32, 64];
        let info = BlockInfo::new(DType::F16, &shape).with_kind(kind);
        for tier in [Tier::Tier2, Tier::Tier3] {
            narrow.put_tensor_with(name, &info, &data, tier).unwrap();
            wide.put_tensor_with(name, &info, &data, tier).unwrap();
            let lanes = envelope_lanes(&payloads(&wide, name));
            let want = if kind == TensorKind::Weight {
                q::V5_DEFAULT_LANES_LOG2
            } else {
                q::V5_WIDE_LANES_LOG2
            };
            assert!(
                !lanes.is_empty() && lanes.iter().all(|&l| l == want),
                "{name} {tier:?}: {lanes:?}"
            );
            assert_eq!(
                wide.get_tensor(name).unwrap().data,
                narrow.get_tensor(name).unwrap().data,
                "{name} {tier:?}"
            );
        }
    }
}

#[test]
fn wide_lanes_need_the_entropy_flag() {
    for base in [
        CollectionConfig::default(),
        CollectionConfig::kv_cache(HD).unwrap().with_codec_v4(),
    ] {
        let g = CollectionConfig {
            wide_lanes: true,
            ..base
        };
        match g.validate() {
            Err(StoreErr::InvalidArgument { field, .. }) => assert_eq!(field, "wide_lanes"),
            other => panic!("{other:?}"),
        }
        assert!(CollectionConfig { entropy: true, ..g }.validate().is_ok());
    }
}

#[test]
fn the_flag_is_flags2_bit_1_and_survives_a_reopen() {
    let (_, wide) = kv_geos(true).remove(2);
    let (_, narrow) = kv_geos(false).remove(2);
    let h = encode_header(&wide, 0);
    assert_eq!(H_FLAGS2, 78);
    assert_eq!(h[H_FLAGS2], 0b10);
    assert_eq!(encode_header(&narrow, 0)[H_FLAGS2], 0);
    assert_eq!(decode_header(&h).unwrap().0, wide);
    // A crafted header with bit 1 but no entropy flag is refused naming the field.
    let mut no_entropy = encode_header(&wide, 0);
    no_entropy[49] &= !0b101; // entropy and kv_ecsq (which needs entropy)
    let e = decode_header(&resealed(no_entropy))
        .unwrap_err()
        .to_string();
    assert!(e.contains("wide_lanes") && e.contains("78"), "{e}");
    // Bits this build does not know (a later session's) are refused at offset 78, as a
    // build before flags2 refuses bit 1 (its byte 78 was reserved). Bit 2 is
    // `kv_keys_wstep` since session 16 (tests/kv_keys_wstep.rs).
    for bit in 3..8 {
        let mut later = encode_header(&wide, 0);
        later[H_FLAGS2] |= 1 << bit;
        match decode_header(&resealed(later)) {
            Err(StoreErr::BadHeader { field, offset, .. }) => {
                assert_eq!((field, offset), ("flags2", 78), "bit {bit}");
            }
            other => panic!("bit {bit}: {other:?}"),
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let x = bell_tokens(256, HD, 9, 0.005);
    let info = BlockInfo::new(DType::F16, &[256, HD]).with_kind(TensorKind::KvKey);
    let first = {
        let s = dir_store(dir.path(), 1, wide, true);
        s.put_tensor_with("k", &info, &bytes(&x), Tier::Tier3)
            .unwrap();
        let d = s.get_tensor("k").unwrap().data;
        s.close().unwrap();
        d
    };
    // Reopened with options that say otherwise: the header decides.
    let s = dir_store(dir.path(), 2, narrow, false);
    assert!(s.geometry().wide_lanes);
    assert_eq!(s.get_tensor("k").unwrap().data, first);
}
