//! Rate-controlled entropy-coded levels for weights and embeddings
//! (`CollectionConfig::ecsq`, MetaLog header flags bit 3): at tiers 2 and 3 a codec v4
//! collection with the entropy flag stores `weight` and `embedding` tensors as rotated
//! uniform levels with one shared step, wrapped in the TQTC version 5 envelope, the step
//! chosen so each block fits the tier's slot. Tier 1, other kinds and collections
//! without the flag are stored as before; the flag needs codec v4 with entropy and
//! survives a reopen; the bytes are deterministic.

mod mem;
mod values;
use mem::{dir_store, mem_store, resealed};
use values::{assert_migrated_equals_direct, f32_bytes as bytes, f32_floats as floats, rel_rmse};

use tensorvault_quant::layout::{V3_VERSION, V5_VERSION, VERSION_OFFSET};
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{BlockInfo, BlockKey, CollectionConfig, DType, TensorKind, Tier};

/// Pseudo-random "weights": Laplace-distributed rows of 384 whose scales span 1/8..8
/// (trained matrices mix rows of very different energy; one shared step spends the bits
/// where the energy is, where per-group codes spend the same bits on every group).
fn weights(n: usize) -> Vec<f32> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|i| {
            let row = 2f64.powi(((i / 384) % 7) as i32 - 3);
            let u = next() - 0.5;
            let laplace = -u.signum() * (1.0 - 2.0 * u.abs()).max(1e-12).ln();
            (0.03 * row * laplace) as f32
        })
        .collect()
}

fn geo(ecsq: bool) -> CollectionConfig {
    CollectionConfig {
        entropy: true,
        ecsq,
        ..CollectionConfig::default().with_codec_v4()
    }
}

#[test]
fn tiers_2_and_3_lose_less_in_the_same_slots() {
    let x = weights(44 * 384); // four whole blocks and a short last one (512 values)
    let data = bytes(&x);
    for kind in [TensorKind::Weight, TensorKind::Embedding] {
        let shape = [x.len() as u32 / 384, 384];
        let info = BlockInfo::new(DType::F32, &shape).with_kind(kind);
        for tier in [Tier::Tier2, Tier::Tier3] {
            let (v4, ecsq) = (mem_store("c", geo(false)), mem_store("c", geo(true)));
            for s in [&v4, &ecsq] {
                s.put_tensor_with("w", &info, &data, tier).unwrap();
            }
            let e_v4 = rel_rmse(&x, &floats(&v4.get_tensor("w").unwrap().data));
            let e_ecsq = rel_rmse(&x, &floats(&ecsq.get_tensor("w").unwrap().data));
            assert!(e_ecsq < 0.97 * e_v4, "{kind} {tier:?}: {e_ecsq} vs {e_v4}");
            // Every block within the tier's slot (in proportion for the short one).
            let slot = geo(true).slot_len(tier) as u64;
            let paid = ecsq.stats().unwrap().payload_bytes[tier as usize];
            assert!(
                paid * 4096 <= slot * x.len() as u64,
                "{paid} for {}",
                x.len()
            );
            // Spent: within 2% of the budget.
            assert!(paid * 4096 * 100 >= slot * x.len() as u64 * 98, "{paid}");
        }
    }
}

#[test]
fn the_payload_is_a_v5_envelope_of_a_uniform_v3_segment_and_deterministic() {
    let x = weights(4096);
    let info = BlockInfo::new(DType::F32, &[4096]).with_kind(TensorKind::Weight);
    let (a, b) = (mem_store("c", geo(true)), mem_store("c", geo(true)));
    for s in [&a, &b] {
        s.put_tensor_with("w", &info, &bytes(&x), Tier::Tier3)
            .unwrap();
    }
    let (mut pa, mut pb) = (Vec::new(), Vec::new());
    a.get_payload(&BlockKey::new(a.tensor_id_of("w"), 0), &mut pa)
        .unwrap();
    b.get_payload(&BlockKey::new(b.tensor_id_of("w"), 0), &mut pb)
        .unwrap();
    assert_eq!(pa, pb);
    assert_eq!(pa[VERSION_OFFSET], V5_VERSION);
    assert_eq!(pa[10], V3_VERSION); // inner_version
    assert_eq!(pa[11], tensorvault_store::ECSQ_LANES_LOG2); // one rANS lane
    assert_eq!(pa[9], tensorvault_store::ECSQ_BITS[1]);
}

#[test]
fn tier_1_other_kinds_and_no_flag_are_stored_as_before() {
    let x = weights(2 * 4096);
    let data = bytes(&x);
    let (v4, ecsq) = (mem_store("c", geo(false)), mem_store("c", geo(true)));
    for (kind, tier) in [
        (TensorKind::Weight, Tier::Tier1),
        (TensorKind::Embedding, Tier::Tier1),
        (TensorKind::Generic, Tier::Tier3),
        (TensorKind::Generic, Tier::Tier2),
    ] {
        let shape = [x.len() as u32];
        let info = BlockInfo::new(DType::F32, &shape).with_kind(kind);
        for s in [&v4, &ecsq] {
            s.put_tensor_with("t", &info, &data, tier).unwrap();
        }
        assert_eq!(
            v4.get_tensor("t").unwrap().data,
            ecsq.get_tensor("t").unwrap().data,
            "{kind} {tier:?}"
        );
    }
}

#[test]
fn migration_to_tier_3_uses_the_rate_controlled_levels() {
    let x = weights(4096);
    let info = BlockInfo::new(DType::F32, &[4096]).with_kind(TensorKind::Weight);
    assert_migrated_equals_direct(geo(true), "w", &info, &bytes(&x), Tier::Tier3);
}

#[test]
fn the_flag_needs_codec_4_with_entropy() {
    for bad in [
        CollectionConfig {
            entropy: false,
            ..geo(true)
        },
        CollectionConfig {
            ecsq: true,
            entropy: true,
            ..CollectionConfig::default()
        },
    ] {
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("ecsq"), "{e}");
    }
    geo(true).validate().unwrap();
}

#[test]
fn the_flag_is_header_bit_3_and_survives_a_reopen() {
    let h = encode_header(&geo(true), 0);
    assert_eq!(h[49], 0b1001);
    assert!(decode_header(&h).unwrap().0.ecsq);
    assert!(
        !decode_header(&encode_header(&geo(false), 0))
            .unwrap()
            .0
            .ecsq
    );
    // Bit 3 in a codec 2 collection: refused naming the flag and byte 49.
    let mut h = encode_header(
        &CollectionConfig {
            entropy: true,
            ..CollectionConfig::default()
        },
        0,
    );
    h[49] |= 0b1000;
    h = resealed(h);
    let e = decode_header(&h).unwrap_err().to_string();
    assert!(e.contains("ecsq") && e.contains("49"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let x = weights(4096);
    let info = BlockInfo::new(DType::F32, &[4096]).with_kind(TensorKind::Embedding);
    let first = {
        let s = dir_store(dir.path(), 1, geo(true), true);
        s.put_tensor_with("e", &info, &bytes(&x), Tier::Tier2)
            .unwrap();
        let d = s.get_tensor("e").unwrap().data;
        s.close().unwrap();
        d
    };
    // Reopened with options that say otherwise: the header decides.
    let s = dir_store(dir.path(), 2, geo(false), false);
    assert!(s.geometry().ecsq);
    assert_eq!(s.get_tensor("e").unwrap().data, first);
    s.put_tensor_with("f", &info, &bytes(&x), Tier::Tier2)
        .unwrap();
    assert_eq!(s.get_tensor("f").unwrap().data, first);
}
