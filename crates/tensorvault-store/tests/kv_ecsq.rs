//! Entropy-coded levels for KV values (`CollectionConfig::kv_ecsq`, MetaLog header flags
//! bit 2): at tier 3 a codec v4 KV cache with the entropy flag stores values as 4-bit
//! uniform codes spaced wider than the MSE-optimal step, which the TQTC version 5
//! envelope packs to about the size of codec v4's 3-bit Lloyd-Max codes with less error.
//! Keys, other tiers, and collections without the flag are stored as before; the flag
//! needs codec v4 with entropy and survives a reopen.

mod mem;
mod values;
use mem::{dir_store, mem_store, resealed};
use values::{
    assert_migrated_equals_direct, bell_tokens, f16_bytes as bytes, f16_floats as floats, rel_rmse,
};

use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{BlockInfo, CollectionConfig, DType, TensorKind, Tier};

const HD: u32 = 64;

/// The test cache: bell-shaped values with per-channel offsets.
fn tokens(n: u64) -> Vec<f32> {
    bell_tokens(n, HD, 0, 0.05)
}

fn geo(ecsq: bool) -> CollectionConfig {
    CollectionConfig {
        entropy: true,
        kv_ecsq: ecsq,
        ..CollectionConfig::kv_cache(HD).unwrap().with_codec_v4()
    }
}

#[test]
fn tier_3_values_lose_less_at_about_the_same_payload() {
    let x = tokens(768); // three blocks of 256 tokens
    let data = bytes(&x);
    let info = BlockInfo::new(DType::F16, &[768, HD]).with_kind(TensorKind::KvValue);
    let (lm, ecsq) = (mem_store("c", geo(false)), mem_store("c", geo(true)));
    for s in [&lm, &ecsq] {
        s.put_tensor_with("v", &info, &data, Tier::Tier3).unwrap();
    }
    let e_lm = rel_rmse(&x, &floats(&lm.get_tensor("v").unwrap().data));
    let e_ecsq = rel_rmse(&x, &floats(&ecsq.get_tensor("v").unwrap().data));
    let (p_lm, p_ecsq) = (
        lm.stats().unwrap().payload_bytes[3],
        ecsq.stats().unwrap().payload_bytes[3],
    );
    assert!(e_ecsq < 0.9 * e_lm, "{e_ecsq} vs {e_lm}");
    assert!(p_ecsq * 100 <= p_lm * 106, "{p_ecsq} vs {p_lm}");
    // Same slot: the 4-bit value segment fits the slot the 4-bit keys size.
    assert_eq!(
        geo(true).slot_len(Tier::Tier3),
        geo(false).slot_len(Tier::Tier3)
    );
}

#[test]
fn keys_and_other_tiers_are_stored_as_without_the_flag() {
    let x = tokens(300);
    let data = bytes(&x);
    let (lm, ecsq) = (mem_store("c", geo(false)), mem_store("c", geo(true)));
    for (kind, tier) in [
        (TensorKind::KvKey, Tier::Tier3),
        (TensorKind::KvValue, Tier::Tier2),
        (TensorKind::KvValue, Tier::Tier1),
        (TensorKind::Generic, Tier::Tier3),
    ] {
        let info = BlockInfo::new(DType::F16, &[300, HD]).with_kind(kind);
        for s in [&lm, &ecsq] {
            s.put_tensor_with("t", &info, &data, tier).unwrap();
        }
        assert_eq!(
            lm.get_tensor("t").unwrap().data,
            ecsq.get_tensor("t").unwrap().data,
            "{kind} {tier:?}"
        );
        let t = tier as usize;
        assert_eq!(
            lm.stats().unwrap().payload_bytes[t],
            ecsq.stats().unwrap().payload_bytes[t],
            "{kind} {tier:?}"
        );
    }
}

#[test]
fn migration_to_tier_3_uses_the_entropy_coded_levels() {
    let x = tokens(512);
    let info = BlockInfo::new(DType::F16, &[512, HD]).with_kind(TensorKind::KvValue);
    assert_migrated_equals_direct(geo(true), "v", &info, &bytes(&x), Tier::Tier3);
}

#[test]
fn the_flag_needs_codec_4_with_entropy() {
    for bad in [
        CollectionConfig {
            entropy: false,
            ..geo(true)
        },
        CollectionConfig {
            kv_ecsq: true,
            entropy: true,
            ..CollectionConfig::kv_cache(HD).unwrap()
        },
    ] {
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("kv_ecsq"), "{e}");
    }
    geo(true).validate().unwrap();
}

#[test]
fn the_flag_is_header_bit_2_and_survives_a_reopen() {
    let h = encode_header(&geo(true), 0);
    assert_eq!(h[49], 0b101);
    assert!(decode_header(&h).unwrap().0.kv_ecsq);
    assert!(
        !decode_header(&encode_header(&geo(false), 0))
            .unwrap()
            .0
            .kv_ecsq
    );
    // Bit 2 in a codec 2 collection: refused naming the flag and byte 49.
    let mut h = encode_header(
        &CollectionConfig {
            entropy: true,
            ..CollectionConfig::kv_cache(HD).unwrap()
        },
        0,
    );
    h[49] |= 0b100;
    h = resealed(h);
    let e = decode_header(&h).unwrap_err().to_string();
    assert!(e.contains("kv_ecsq") && e.contains("49"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let x = tokens(256);
    let info = BlockInfo::new(DType::F16, &[256, HD]).with_kind(TensorKind::KvValue);
    let first = {
        let s = dir_store(dir.path(), 1, geo(true), true);
        s.put_tensor_with("v", &info, &bytes(&x), Tier::Tier3)
            .unwrap();
        let d = s.get_tensor("v").unwrap().data;
        s.close().unwrap();
        d
    };
    // Reopened with options that say otherwise: the header decides.
    let s = dir_store(dir.path(), 2, geo(false), false);
    assert!(s.geometry().kv_ecsq);
    assert_eq!(s.get_tensor("v").unwrap().data, first);
    s.put_tensor_with("w", &info, &bytes(&x), Tier::Tier3)
        .unwrap();
    assert_eq!(s.get_tensor("w").unwrap().data, first);
}
