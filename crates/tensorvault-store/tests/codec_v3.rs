//! Codec v3 in the store: embeddings are stored as rotated segments (TQTC version 3),
//! every other kind keeps the v2 layout byte for byte, the codec survives a reopen, and
//! an unknown codec is refused.

mod mem;
use mem::{dir_store, mem_store, Mem};

use half::f16;
use tensorvault_store::{BlockInfo, CollectionConfig, DType, TensorKind, Tier, CODEC_V2, CODEC_V3};

const HD: u32 = 64;

/// A heavy-tailed pseudo-random value (Laplace-like) for index `i`, as real KV values
/// and embeddings are (smooth synthetic data is easy for min/max grids and tells nothing).
fn laplace(i: u64) -> f32 {
    let mut z = i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^= z >> 29;
    let u = ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64; // (0, 1)
    let l = if u < 0.5 {
        (2.0 * u).ln()
    } else {
        -(2.0 - 2.0 * u).ln()
    };
    l as f32
}

/// Value-like token `t`: Laplace values, a few channels 6x larger (outlier channels) and
/// per-channel offsets, f16-exact.
fn token(t: u64) -> Vec<f16> {
    (0..HD)
        .map(|c| {
            let mag = if c % 13 == 0 { 6.0 } else { 1.0 };
            let v = mag * laplace(t * u64::from(HD) + u64::from(c)) + 0.05 * c as f32;
            f16::from_f32(v)
        })
        .collect()
}

fn rel_rmse(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum();
    let den: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum();
    (num / den).sqrt()
}

fn store(geo: CollectionConfig) -> Mem {
    mem_store("c", geo)
}

fn kv(codec: u8) -> CollectionConfig {
    CollectionConfig {
        codec,
        ..CollectionConfig::kv_cache(HD).unwrap()
    }
}

fn f16_bytes(v: &[f16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f16s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect()
}

fn put_get(s: &Mem, name: &str, kind: TensorKind, vals: &[f16], tier: Tier) -> Vec<f32> {
    let shape = [(vals.len() as u32) / HD, HD];
    let info = BlockInfo::new(DType::F16, &shape).with_kind(kind);
    s.put_tensor_with(name, &info, &f16_bytes(vals), tier)
        .unwrap();
    f16s(&s.get_tensor(name).unwrap().data)
}

#[test]
fn kv_tensors_and_weights_are_stored_exactly_as_in_codec_v2() {
    // Rotated KV values were measured and not adopted (kind::v3_layout): codec v3 keeps
    // codec v2's bytes for every kind but embeddings.
    let vals: Vec<f16> = (0..512).flat_map(token).collect();
    let (v2, v3) = (store(kv(CODEC_V2)), store(kv(CODEC_V3)));
    for kind in [
        TensorKind::KvKey,
        TensorKind::KvValue,
        TensorKind::Weight,
        TensorKind::Generic,
    ] {
        for tier in [Tier::Tier1, Tier::Tier2, Tier::Tier3] {
            let a = put_get(&v2, "k", kind, &vals, tier);
            let b = put_get(&v3, "k", kind, &vals, tier);
            assert_eq!(a, b, "{kind} {tier:?}");
        }
    }
    let bytes = |s: &Mem| -> Vec<u32> { s.blocks().unwrap().iter().map(|m| m.checksum).collect() };
    assert_eq!(bytes(&v2), bytes(&v3), "identical payloads");
}

#[test]
fn embeddings_rotate_at_tier_3() {
    // 576-wide rows (SmolLM2's embeddings): nine rotation blocks of 64 per row.
    let width = 576u32;
    let rows = 40u32;
    let vals: Vec<f32> = (0..rows * width)
        .map(|i| {
            let spike = if i % width % 97 == 5 { 5.0 } else { 0.3 };
            spike * laplace(u64::from(i))
        })
        .collect();
    let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let shape = [rows, width];
    let info = BlockInfo::new(DType::F32, &shape).with_kind(TensorKind::Embedding);
    // The default 4096-value blocks do not hold whole 576-value rows: the 64-value
    // rotation blocks still line up with them.
    let s2 = store(CollectionConfig::default());
    let s3 = store(CollectionConfig {
        codec: CODEC_V3,
        ..CollectionConfig::default()
    });
    // Tier 3 rotates (f16 block scales fit its slot); tiers 1 and 2 keep v2's bytes.
    for tier in [Tier::Tier1, Tier::Tier2, Tier::Tier3] {
        let mut errs = Vec::new();
        for s in [&s2, &s3] {
            s.put_tensor_with("e", &info, &data, tier).unwrap();
            let back: Vec<f32> = s
                .get_tensor("e")
                .unwrap()
                .data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            errs.push(rel_rmse(&vals, &back));
        }
        assert!(
            errs[1] < errs[0],
            "{tier:?}: v3 {} vs v2 {}",
            errs[1],
            errs[0]
        );
    }
}

#[test]
fn codec_v3_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let geo = kv(CODEC_V3);
    let vals: Vec<f16> = (0..256).flat_map(token).collect();
    let shape = [256u32, HD];
    let info = BlockInfo::new(DType::F16, &shape).with_kind(TensorKind::Embedding);
    let first = {
        let s = dir_store(dir.path(), 1, geo, true);
        s.put_tensor_with("v", &info, &f16_bytes(&vals), Tier::Tier3)
            .unwrap();
        let d = s.get_tensor("v").unwrap().data;
        s.close().unwrap();
        d
    };
    let s = dir_store(dir.path(), 2, kv(CODEC_V2), false);
    assert_eq!(s.geometry().codec, CODEC_V3);
    assert_eq!(
        s.get_tensor("v").unwrap().data,
        first,
        "bit-identical reread"
    );
}

#[test]
fn unknown_codec_is_a_typed_error() {
    let geo = CollectionConfig {
        codec: 6,
        ..CollectionConfig::default()
    };
    let e = geo.validate().unwrap_err().to_string();
    assert!(e.contains("codec") && e.contains("1, 2, 3 or 4"), "{e}");
}
