//! The decoders `bench/quant/cpu_time/run.sh` times (see its README): `quant_cpu WHAT ITERS`.

use tensorvault_quant::levels::LevelSet;
use tensorvault_quant::row_int4::{row_bytes, ColumnNorm};
use tensorvault_quant::segment_rot::{self, ScaleRule, SegmentV3, V3Params};
use tensorvault_quant::segment_v4::{self, SegmentV4, V4Params};
use tensorvault_quant::segment_v2::{self, Axis, SegmentV2, V2Params};
use tensorvault_quant::segment_v5::{decode_any, encode_smallest, wrap, SegmentV5};
use tensorvault_quant::affine_u8::AffineU8;
use std::hint::black_box;

fn data(n: usize) -> Vec<f32> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    (0..n).map(|i| { s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        let u = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
        u * if i % 16 == 3 { 6.0 } else { 1.0 } }).collect()
}

/// Bell-shaped like post-RoPE keys and values (a sum of three uniforms), outlier channels.
fn kv_like(n: usize) -> Vec<f32> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    (0..n).map(|i| { let mut g = 0.0f32;
        for _ in 0..3 { s ^= s << 13; s ^= s >> 7; s ^= s << 17; g += (s >> 40) as f32 / (1u64 << 24) as f32; }
        let c = i % 64; (g - 1.5) * if c % 16 == 3 { 6.0 } else { 1.0 } + 0.05 * c as f32 }).collect()
}

/// The store's opt-in entropy-coded KV layouts of one 256-token x 64 block (block 0: the
/// sink token raw): `k4` codec 4 tier 3 keys (v2 4-bit per channel over 128, in v5),
/// `v5b` tier 2 v2 5-bit per channel (keys, and values without `ecsq_tier2`), `e4`
/// `kv_ecsq` tier 3 values (v3 rotated 4-bit uniform, 26/16 RMS), `e6` `ecsq_tier2`
/// values (v3 rotated 6-bit uniform, 16/16 RMS).
fn kv_inner(name: &str, x: &[f32]) -> Vec<u8> {
    let v2p = |bits| V2Params { bits, group_log2: 7, axis: Axis::Columns, width: 64, raw_rows: 1, clip_search: false };
    let v3p = |bits, n| V3Params { bits, levels: LevelSet::Uniform, block_log2: 6, rotate: true, seed: tensorvault_quant::layout::V3_DEFAULT_SEED, width: 64, raw_rows: 1, scale: ScaleRule::RmsTimes(n), wide_scales: false };
    match name {
        "k4" => segment_v2::encode(&v2p(4), x).unwrap(),
        "v5b" => segment_v2::encode(&v2p(5), x).unwrap(),
        "e4" => segment_rot::encode(&v3p(4, 26), x).unwrap(),
        "e6" => segment_rot::encode(&v3p(6, 16), x).unwrap(),
        // `e4` without the rotation (what the rotation costs).
        "e4u" => segment_rot::encode(&V3Params { rotate: false, ..v3p(4, 26) }, x).unwrap(),
        _ => panic!("unknown KV layout {name}"),
    }
}

fn main() {
    let what = std::env::args().nth(1).unwrap();
    let iters: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let n = 16384;
    let x = data(n);
    let mut y = vec![0f32; n];
    match what.as_str() {
        "u8" | "int4" => {
            let n = 300 * 768; let x = data(n); let mut y = vec![0f32; n];
            if what == "u8" {
                let p = AffineU8::fit(&x).unwrap(); let mut q = vec![0u8; n]; p.encode(&x, &mut q).unwrap();
                for _ in 0..iters { p.decode(black_box(&q), &mut y).unwrap(); }
            } else {
                let c = ColumnNorm::fit(&x, 768).unwrap(); let mut q = vec![0u8; n / 768 * row_bytes(768).unwrap()];
                c.encode_rows(&x, &mut q).unwrap();
                for _ in 0..iters { c.decode_rows(black_box(&q), &mut y).unwrap(); }
            }
        }
        "v2" => {
            let p = V2Params { bits: 3, group_log2: 6, axis: Axis::Flat, width: 64, raw_rows: 1, clip_search: false };
            let b = segment_v2::encode(&p, &x).unwrap();
            for _ in 0..iters { SegmentV2::parse(black_box(&b)).unwrap().decode(&mut y).unwrap(); }
        }
        w if w.starts_with("v3r") || w.starts_with("v3u") => {
            let bits: u8 = w[3..].parse().unwrap();
            let p = V3Params { bits, levels: LevelSet::LloydMax, block_log2: 6, rotate: w.starts_with("v3r"), seed: 7, width: 64, raw_rows: 1, scale: ScaleRule::Rms, wide_scales: false };
            let b = segment_rot::encode(&p, &x).unwrap();
            for _ in 0..iters { SegmentV3::parse(black_box(&b)).unwrap().decode(&mut y).unwrap(); }
        }
        w if w.starts_with("v4r") || w.starts_with("v4u") => {
            let bits: u8 = w[3..].parse().unwrap();
            let gl = if bits == 3 { 5 } else { 6 };
            let x = &x[..4096]; let mut y = vec![0f32; 4096];
            let p = V4Params { bits, group_log2: gl, super_log2: 10, scale_bits: 6, min_bits: 6, rotate: w.starts_with("v4r"), seed: 7, clip_search: false };
            let b = segment_v4::encode(&p, x).unwrap();
            for _ in 0..iters * 4 { SegmentV4::parse(black_box(&b)).unwrap().decode(&mut y).unwrap(); }
        }
        "rans" => {
            let p = V2Params { bits: 3, group_log2: 8, axis: Axis::Columns, width: 64, raw_rows: 1, clip_search: false };
            let inner = segment_v2::encode(&p, &x).unwrap();
            let env = wrap(&inner, 2).unwrap().unwrap();
            let seg = SegmentV5::parse(&env).unwrap();
            let mut codes = vec![0u8; n - 64];
            for _ in 0..iters { seg.decode_codes(black_box(&mut codes)).unwrap(); }
        }
        // Whole put (encode + envelope) and get (parse + decode) of a KV block.
        w if w.starts_with("kvenc_") => {
            let x = kv_like(n);
            for _ in 0..iters { black_box(encode_smallest(kv_inner(&w[6..], black_box(&x))).unwrap()); }
        }
        // The stored bytes of each layout over 64 blocks of different data (FNV-1a), to
        // check that a faster encoder writes the same bytes as before.
        w if w.starts_with("kvbytes_") => {
            let mut h = 0xcbf2_9ce4_8422_2325u64;
            for b in 0..64u32 {
                let x: Vec<f32> = kv_like(n + 64 * b as usize)[64 * b as usize..].iter().map(|v| v * (1.0 + b as f32 * 0.1)).collect();
                for byte in encode_smallest(kv_inner(&w[8..], &x)).unwrap() { h = (h ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3); }
            }
            println!("{w} {h:016x}");
        }
        // The inner segment alone, without the envelope (what the rANS stream costs).
        w if w.starts_with("kvinner_") => {
            let x = kv_like(n);
            let inner = kv_inner(&w[8..], &x);
            let mut y = Vec::with_capacity(n);
            for _ in 0..iters { decode_any(black_box(&inner), n, &mut y).unwrap(); }
        }
        // `kvdecwN_L` / `kvencwN_L` / `ranswN_L`: get, put and the codes alone of layout
        // `L` with 2^N rANS lanes (N = 2 is what the store writes; 4..=6 the wide-lane
        // vector decoder, session 15; a build before it refuses N > 3).
        w if w.starts_with("kvdecw") || w.starts_with("kvencw") || w.starts_with("ransw") => {
            let (head, layout) = w.split_once('_').unwrap();
            let lanes_log2: u8 = head[head.len() - 1..].parse().unwrap();
            let x = kv_like(n);
            let inner = kv_inner(layout, &x);
            let env = wrap(&inner, lanes_log2).unwrap().unwrap();
            let mut y = Vec::with_capacity(n);
            if w.starts_with("kvdecw") {
                for _ in 0..iters { decode_any(black_box(&env), n, &mut y).unwrap(); }
            } else if w.starts_with("kvencw") {
                for _ in 0..iters {
                    let inner = kv_inner(layout, black_box(&x));
                    black_box(wrap(&inner, lanes_log2).unwrap().unwrap_or(inner));
                }
            } else {
                let seg = SegmentV5::parse(&env).unwrap();
                let mut codes = vec![0u8; seg.codes()];
                for _ in 0..iters { seg.decode_codes(black_box(&mut codes)).unwrap(); }
            }
        }
        w if w.starts_with("kvdec_") => {
            let x = kv_like(n);
            let env = encode_smallest(kv_inner(&w[6..], &x)).unwrap();
            assert_eq!(env[8], 5, "the envelope must be kept");
            let mut y = Vec::with_capacity(n);
            for _ in 0..iters { decode_any(black_box(&env), n, &mut y).unwrap(); }
        }
        _ => panic!(),
    }
}
