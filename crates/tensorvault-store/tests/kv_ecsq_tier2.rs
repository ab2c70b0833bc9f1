//! Entropy-coded levels for tier 2 KV values (`CollectionConfig::kv_ecsq_tier2`, MetaLog
//! header flags bit 4): a codec v4 KV cache with `kv_ecsq` (and so the entropy flag) stores
//! tier 2 values as 6-bit uniform codes on each token's rotated head, at the finest step of
//! `KV_ECSQ_TIER2_STEPS_SIXTEENTHS` whose version 5 envelope fits the tier's
//! `max_block_len` (a slot, or an extent of up to two slots); blocks that fit at none keep
//! the 5-bit per-channel groups. Keys, other tiers and collections without the bit are
//! stored exactly as before; the bit needs `kv_ecsq` and survives a reopen.

mod mem;
mod values;
use mem::{dir_store, mem_store, payloads, resealed};
use values::{bell_tokens, f16_bytes as bytes, f16_floats as floats, rel_rmse};

use half::f16;
use proptest::prelude::*;
use tensorvault_quant::layout as q;
use tensorvault_quant::segment_rot::SegmentV3;
use tensorvault_quant::segment_v5::SegmentV5;
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{BlockInfo, CollectionConfig, DType, TensorKind, Tier};

const HD: u32 = 64;

/// The test cache: bell-shaped values with small per-channel offsets.
fn tokens(n: u64, seed: u64) -> Vec<f32> {
    bell_tokens(n, HD, seed, 0.005)
}

/// Codec v4 KV cache with entropy and `kv_ecsq`; `tier2` sets bit 4; `extents` allocation.
fn geo(tier2: bool, extents: bool) -> CollectionConfig {
    CollectionConfig {
        entropy: true,
        kv_ecsq: true,
        kv_ecsq_tier2: tier2,
        extents,
        ..CollectionConfig::kv_cache(HD).unwrap().with_codec_v4()
    }
}

#[test]
fn tier_2_values_lose_less_within_the_slot_and_the_extent() {
    let x = tokens(768, 0); // three blocks of 256 tokens
    let data = bytes(&x);
    let info = BlockInfo::new(DType::F16, &[768, HD]).with_kind(TensorKind::KvValue);
    let mut err = Vec::new();
    for (tier2, extents) in [(false, false), (true, false), (true, true)] {
        let g = geo(tier2, extents);
        let s = mem_store("c", g);
        s.put_tensor_with("v", &info, &data, Tier::Tier2).unwrap();
        err.push(rel_rmse(&x, &floats(&s.get_tensor("v").unwrap().data)));
        let slot = u64::from(g.slot_len(Tier::Tier2));
        for (p, bits) in payloads(&s, "v") {
            // Bit 4: every block took the 6-bit entropy-coded levels, inside its cap.
            assert_eq!(bits, if tier2 { 6 } else { 5 });
            assert!(p.len() as u64 <= u64::from(g.max_block_len(Tier::Tier2)));
            if tier2 {
                assert_eq!(p[q::VERSION_OFFSET], q::V5_VERSION);
                let inner = SegmentV5::parse(&p).unwrap().inner(16384).unwrap();
                assert_eq!(SegmentV3::parse(&inner).unwrap().values(), 16384);
            }
            if !extents {
                assert!(p.len() as u64 <= slot, "{} > {slot}", p.len());
            }
        }
        // Within tier 2's budget of 5.25 bits per value (payload) on these values too.
        let bpv = s.stats().unwrap().payload_bytes[2] as f64 * 8.0 / x.len() as f64;
        assert!(bpv <= 5.6, "{bpv}");
    }
    // Slot: the step 1.25x the optimal one; extent: the optimal step (less error still).
    assert!(err[1] < 0.9 * err[0], "{err:?}");
    assert!(err[2] < err[1], "{err:?}");
}

#[test]
fn keys_and_other_tiers_are_stored_as_without_the_bit() {
    let x = tokens(300, 7);
    let data = bytes(&x);
    let (before, after) = (
        mem_store("c", geo(false, false)),
        mem_store("c", geo(true, false)),
    );
    for (kind, tier) in [
        (TensorKind::KvKey, Tier::Tier2),
        (TensorKind::KvValue, Tier::Tier1),
        (TensorKind::KvValue, Tier::Tier3),
        (TensorKind::Generic, Tier::Tier2),
        (TensorKind::KvKey, Tier::Tier3),
    ] {
        let info = BlockInfo::new(DType::F16, &[300, HD]).with_kind(kind);
        for s in [&before, &after] {
            s.put_tensor_with("t", &info, &data, tier).unwrap();
        }
        assert_eq!(
            payloads(&before, "t"),
            payloads(&after, "t"),
            "{kind} {tier:?}"
        );
    }
}

#[test]
fn a_block_that_fits_at_no_step_keeps_the_groups() {
    // Tier 2 at 4 bits: its slot holds no 6-bit entropy-coded block of these values.
    let narrow = |tier2| CollectionConfig {
        tier_bits: [8, 4, 3],
        key_bits: [8, 4, 4],
        ..geo(tier2, false)
    };
    let x = tokens(256, 3);
    let info = BlockInfo::new(DType::F16, &[256, HD]).with_kind(TensorKind::KvValue);
    let (before, after) = (mem_store("c", narrow(false)), mem_store("c", narrow(true)));
    for s in [&before, &after] {
        s.put_tensor_with("v", &info, &bytes(&x), Tier::Tier2)
            .unwrap();
    }
    assert_eq!(payloads(&before, "v"), payloads(&after, "v"));
    assert_eq!(payloads(&after, "v")[0].1, 4);
}

#[test]
fn migration_to_tier_2_uses_the_entropy_coded_levels() {
    let x = tokens(512, 5);
    let info = BlockInfo::new(DType::F16, &[512, HD]).with_kind(TensorKind::KvValue);
    let (direct, migrated) = (
        mem_store("c", geo(true, true)),
        mem_store("c", geo(true, true)),
    );
    direct
        .put_tensor_with("v", &info, &bytes(&x), Tier::Tier2)
        .unwrap();
    migrated
        .put_tensor_with("v", &info, &bytes(&x), Tier::Tier0)
        .unwrap();
    migrated.migrate_tensor("v", Tier::Tier2).unwrap();
    assert_eq!(payloads(&direct, "v"), payloads(&migrated, "v"));
}

/// Pinned bytes of one tier 2 block (a sink token and 15 more): the layout is an encoder
/// choice over TQTC v3 in a v5 envelope, and this pins it (docs/formats/store.md,
/// "Entropy-coded KV value levels").
#[test]
fn golden_tier_2_value_block() {
    let x = tokens(16, 11);
    let info = BlockInfo::new(DType::F16, &[16, HD]).with_kind(TensorKind::KvValue);
    let s = mem_store("c", geo(true, false));
    s.put_tensor_with("v", &info, &bytes(&x), Tier::Tier2)
        .unwrap();
    let p = payloads(&s, "v");
    let (payload, bits) = &p[0];
    assert_eq!(*bits, 6);
    let inner = SegmentV5::parse(payload).unwrap().inner(16384).unwrap();
    // v3 header: version 3, 6-bit uniform codes, blocks of 64, rotated, one raw row of 64.
    assert_eq!(inner[q::VERSION_OFFSET], q::V3_VERSION);
    assert_eq!(
        (payload.len(), crc32c::crc32c(payload)),
        (GOLDEN_LEN, GOLDEN_CRC),
        "payload {:02x?}",
        payload
    );
    assert_eq!(
        (inner.len(), crc32c::crc32c(&inner)),
        (GOLDEN_INNER_LEN, GOLDEN_INNER_CRC)
    );
}

const GOLDEN_LEN: usize = 888;
const GOLDEN_CRC: u32 = 3_981_843_350;
const GOLDEN_INNER_LEN: usize = 895;
const GOLDEN_INNER_CRC: u32 = 77_813_510;

#[test]
fn the_bit_needs_kv_ecsq() {
    let bad = CollectionConfig {
        kv_ecsq: false,
        ..geo(true, false)
    };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("kv_ecsq_tier2"), "{e}");
    geo(true, false).validate().unwrap();
}

#[test]
fn the_bit_is_header_bit_4_and_survives_a_reopen() {
    let h = encode_header(&geo(true, false), 0);
    assert_eq!(h[49], 0b1_0101);
    assert!(decode_header(&h).unwrap().0.kv_ecsq_tier2);
    assert!(
        !decode_header(&encode_header(&geo(false, false), 0))
            .unwrap()
            .0
            .kv_ecsq_tier2
    );
    // Crafted headers: bit 4 without bit 2 (kv_ecsq), and bits 4 + 2 without entropy,
    // are refused naming the field and byte 49.
    let mut no_ecsq = encode_header(&geo(true, false), 0);
    no_ecsq[49] &= !0b100;
    let e = decode_header(&resealed(no_ecsq)).unwrap_err().to_string();
    assert!(e.contains("kv_ecsq_tier2") && e.contains("49"), "{e}");
    let mut no_entropy = encode_header(&geo(true, false), 0);
    no_entropy[49] &= !0b1;
    let e = decode_header(&resealed(no_entropy))
        .unwrap_err()
        .to_string();
    assert!(e.contains("kv_ecsq") && e.contains("49"), "{e}");
    // Bit 7 (ecsq_model) needs bit 3 (ecsq), which a KV cache does not set.
    let mut bit7 = encode_header(&geo(true, false), 0);
    bit7[49] |= 0b1000_0000;
    let e = decode_header(&resealed(bit7)).unwrap_err().to_string();
    assert!(e.contains("ecsq_model") && e.contains("49"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let x = tokens(256, 9);
    let info = BlockInfo::new(DType::F16, &[256, HD]).with_kind(TensorKind::KvValue);
    let first = {
        let s = dir_store(dir.path(), 1, geo(true, false), true);
        s.put_tensor_with("v", &info, &bytes(&x), Tier::Tier2)
            .unwrap();
        let d = s.get_tensor("v").unwrap().data;
        s.close().unwrap();
        d
    };
    // Reopened with options that say otherwise: the header decides.
    let s = dir_store(dir.path(), 2, geo(false, false), false);
    assert!(s.geometry().kv_ecsq_tier2);
    assert_eq!(s.get_tensor("v").unwrap().data, first);
    s.put_tensor_with("w", &info, &bytes(&x), Tier::Tier2)
        .unwrap();
    assert_eq!(s.get_tensor("w").unwrap().data, first);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Any token count and values: the tier 2 round trip keeps the shape, stays finite,
    /// within the block cap, and close to the input (relative error under 10% of the
    /// tensor's RMS: 6-bit levels at most 1.25x the optimal step).
    #[test]
    fn tier_2_round_trip(n in 1u64..600, seed in 0u64..1_000_000, scale in 0.01f32..100.0, extents: bool) {
        let x: Vec<f32> = tokens(n, seed)
            .iter()
            .map(|v| f16::from_f32(v * scale).to_f32())
            .collect();
        let shape = [n as u32, HD];
        let info = BlockInfo::new(DType::F16, &shape).with_kind(TensorKind::KvValue);
        let s = mem_store("c", geo(true, extents));
        s.put_tensor_with("v", &info, &bytes(&x), Tier::Tier2).unwrap();
        let y = floats(&s.get_tensor("v").unwrap().data);
        prop_assert_eq!(y.len(), x.len());
        prop_assert!(y.iter().all(|v| v.is_finite()));
        prop_assert!(rel_rmse(&x, &y) < 0.10, "{}", rel_rmse(&x, &y));
        let cap = geo(true, extents).max_block_len(Tier::Tier2) as usize;
        for (p, _) in payloads(&s, "v") {
            prop_assert!(p.len() <= cap);
        }
    }
}
