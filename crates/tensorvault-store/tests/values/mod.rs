//! Values and measures shared by the codec suites (`ecsq.rs`, `kv_ecsq.rs`,
//! `kv_ecsq_tier2.rs`, the embedding suites): a bell-shaped KV cache, embedding-like rows, f16 / f32 byte conversions, relative
//! RMSE, and the check that a block written at a tier and one migrated there are equal.

#![allow(
    dead_code,
    reason = "each suite that includes this module uses its own subset"
)]

use half::f16;
use tensorvault_store::{BlockInfo, CollectionConfig, Tier};

use crate::mem::mem_store;

/// `n` tokens of `hd` bell-shaped pseudo-random values (a sum of three uniforms), every
/// 13th channel six times larger and channel `c` offset by `slope * c`; rounded to f16.
/// After the per-token rotation close to Gaussian, as real KV values are. `seed` shifts
/// the sequence.
pub fn bell_tokens(n: u64, hd: u32, seed: u64, slope: f32) -> Vec<f32> {
    (0..n * u64::from(hd))
        .map(|i| {
            let mut z = (i + seed)
                .wrapping_add(1)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut acc = 0.0f32;
            for _ in 0..3 {
                z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z ^= z >> 29;
                acc += (z >> 40) as f32 / (1u64 << 24) as f32;
            }
            let c = i % u64::from(hd);
            let mag = if c % 13 == 0 { 6.0 } else { 1.0 };
            f16::from_f32(mag * (acc - 1.5) + slope * c as f32).to_f32()
        })
        .collect()
}

/// 256 tokens of `hd` values at the edge of f16's range, f16-exact: 2% at the top of
/// the range (channel `c` tops out at `65504 - 97 c`), the rest spread over +-that top. A
/// lossy decoding of these may land past 65504 by part of a step.
pub fn f16_edge_tokens(hd: u32) -> Vec<f32> {
    let hd = hd as usize;
    let mut s = 0x9E37_79B9u32;
    (0..256 * hd)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let top = 65504.0 - (i % hd) as f32 * 97.0;
            let v = (s & 0xFFFF) as f32 / 65535.0;
            f16::from_f32(if v > 0.98 { top } else { (v * 2.0 - 1.0) * top }).to_f32()
        })
        .collect()
}

/// Little-endian f16 bytes of `v`.
pub fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| f16::from_f32(x).to_le_bytes())
        .collect()
}

/// The values of little-endian f16 bytes.
pub fn f16_floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect()
}

/// Little-endian f32 bytes of `v`.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The values of little-endian f32 bytes.
pub fn f32_floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `||x - y|| / ||x||`.
pub fn rel_rmse(x: &[f32], y: &[f32]) -> f64 {
    let (mut e, mut n) = (0f64, 0f64);
    for (a, b) in x.iter().zip(y) {
        e += f64::from(a - b).powi(2);
        n += f64::from(*a).powi(2);
    }
    (e / n).sqrt()
}

/// Puts `data` as tensor `name` at `tier` in one store and at tier 0 then migrated to
/// `tier` in another (same geometry), and asserts both read back the same bytes.
pub fn assert_migrated_equals_direct(
    geo: CollectionConfig,
    name: &str,
    info: &BlockInfo,
    data: &[u8],
    tier: Tier,
) {
    let (direct, migrated) = (mem_store("c", geo), mem_store("c", geo));
    direct.put_tensor_with(name, info, data, tier).unwrap();
    migrated
        .put_tensor_with(name, info, data, Tier::Tier0)
        .unwrap();
    migrated.migrate_tensor(name, tier).unwrap();
    assert_eq!(
        direct.get_tensor(name).unwrap().data,
        migrated.get_tensor(name).unwrap().data
    );
}

/// Unit-norm rows of `width` sharing a common row (as a token-embedding table: a large
/// mean component plus a per-row part with tails of scale `tail`), from `seed`; the
/// embedding suites (`row_gains.rs`, `ecsq_model.rs`, `centre.rs`) share it.
#[must_use]
pub fn embedding_rows(rows: usize, width: usize, seed: u64, tail: f64) -> Vec<f32> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let mean: Vec<f64> = (0..width).map(|_| next()).collect();
    let mut out = Vec::with_capacity(rows * width);
    for _ in 0..rows {
        let r: Vec<f64> = mean.iter().map(|m| m + next().powi(3) * tail).collect();
        let n = r.iter().map(|v| v * v).sum::<f64>().sqrt();
        out.extend(r.iter().map(|v| (v / n) as f32));
    }
    out
}
