//! Criterion benches for the entropy-coded segment (TQTC v5, issue 23 items 3 and 7):
//! wrapping a segment (unpack, count, table, rANS encode), decoding its codes alone per
//! lane count, and decoding the whole v5 segment to f32 next to the v2/v3 segment it
//! wraps. One 16384-value block (256 tokens x 64 channels, the store's KV block) of
//! Gaussian-like data with outlier channels; throughput counts f32 output bytes, so the
//! figures compare with the v2 decode bar (8 GiB/s).

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

mod common;

use common::kv_like;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tensorvault_quant::levels::LevelSet;
use tensorvault_quant::segment_rot::{self, ScaleRule, V3Params};
use tensorvault_quant::segment_v2::{self, Axis, V2Params};
use tensorvault_quant::segment_v5::{decode_any, wrap, SegmentV5};

fn bench(c: &mut Criterion) {
    let n = 256 * 64;
    let x = kv_like(n);
    let mut g = c.benchmark_group("entropy");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    let mut segs: Vec<(String, Vec<u8>)> = Vec::new();
    for (bits, axis, glog) in [
        (3u8, Axis::Flat, 6u8),
        (3, Axis::Columns, 8),
        (5, Axis::Columns, 7),
        (8, Axis::Columns, 7),
    ] {
        let p = V2Params {
            bits,
            group_log2: glog,
            axis,
            width: 64,
            raw_rows: 1,
            clip_search: false,
        };
        let axis_name = if axis == Axis::Flat { "flat" } else { "cols" };
        segs.push((
            format!("v2_{bits}bit_{axis_name}"),
            segment_v2::encode(&p, &x).unwrap(),
        ));
    }
    let p3 = V3Params {
        bits: 3,
        levels: LevelSet::LloydMax,
        block_log2: 6,
        rotate: true,
        seed: 0x5456_5133,
        width: 64,
        raw_rows: 1,
        scale: ScaleRule::Rms,
        wide_scales: false,
    };
    segs.push(("v3_3bit".into(), segment_rot::encode(&p3, &x).unwrap()));
    let mut out = Vec::with_capacity(n);
    for (name, inner) in &segs {
        let Some(env) = wrap(inner, 2).unwrap() else {
            eprintln!(
                "{name}: entropy coding does not shrink it ({} bytes)",
                inner.len()
            );
            continue;
        };
        eprintln!(
            "{name}: {} -> {} bytes ({:.3} -> {:.3} bits/value)",
            inner.len(),
            env.len(),
            inner.len() as f64 * 8.0 / n as f64,
            env.len() as f64 * 8.0 / n as f64
        );
        g.bench_function(format!("wrap_{name}"), |b| {
            b.iter(|| wrap(black_box(inner), 2).unwrap())
        });
        g.bench_function(format!("decode_inner_{name}"), |b| {
            b.iter(|| decode_any(black_box(inner), n, &mut out).unwrap())
        });
        g.bench_function(format!("decode_v5_{name}"), |b| {
            b.iter(|| decode_any(black_box(&env), n, &mut out).unwrap())
        });
    }
    // The codes alone, per lane count (3-bit per-channel keys).
    let inner = &segs[1].1;
    let mut codes = vec![0u8; n - 64];
    for lanes in 0..=3u8 {
        let env = wrap(inner, lanes).unwrap().unwrap();
        let seg = SegmentV5::parse(&env).unwrap();
        g.bench_function(format!("decode_codes_3bit_cols_{}lanes", 1 << lanes), |b| {
            b.iter(|| seg.decode_codes(black_box(&mut codes)).unwrap())
        });
    }
    g.finish();
    bench_wide(c, &x);
}

/// The codes of one 16384-value KV block decoded by the 4-lane scalar loop (what the
/// store writes by default) against 16 / 32 / 64 lanes on the vector decoder (AVX-512 or
/// AVX2, whichever the CPU has: the label says) and on the portable loop. Layouts: `k4`
/// codec 4 tier 3 keys (v2 4-bit per channel over 128 tokens), `v5b` tier 2 (v2 5-bit),
/// `e4` `kv_ecsq` tier 3 values (v3 rotated 4-bit uniform, 26/16 RMS).
fn bench_wide(c: &mut Criterion, x: &[f32]) {
    use tensorvault_quant::entropy::{decode_codes_portable, wide_kernel};
    use tensorvault_quant::layout::{
        BITS_OFFSET, V5_HEADER_LEN, V5_PROB_BITS_OFFSET, V5_SIDE_LEN_OFFSET,
    };
    let n = x.len();
    let mut g = c.benchmark_group("rans_wide");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    let v2p = |bits| V2Params {
        bits,
        group_log2: 7,
        axis: Axis::Columns,
        width: 64,
        raw_rows: 1,
        clip_search: false,
    };
    let e4 = V3Params {
        bits: 4,
        levels: LevelSet::Uniform,
        block_log2: 6,
        rotate: true,
        seed: tensorvault_quant::layout::V3_DEFAULT_SEED,
        width: 64,
        raw_rows: 1,
        scale: ScaleRule::RmsTimes(26),
        wide_scales: false,
    };
    let kernel = wide_kernel();
    let layouts = [
        ("k4", segment_v2::encode(&v2p(4), x).unwrap()),
        ("v5b", segment_v2::encode(&v2p(5), x).unwrap()),
        ("e4", segment_rot::encode(&e4, x).unwrap()),
    ];
    for (name, inner) in &layouts {
        for lanes_log2 in [2u8, 4, 5, 6] {
            let lanes = 1 << lanes_log2;
            let env = wrap(inner, lanes_log2).unwrap().unwrap();
            let seg = SegmentV5::parse(&env).unwrap();
            eprintln!("{name} {lanes} lanes: {} bytes", env.len());
            let mut codes = vec![0u8; seg.codes()];
            let path = if lanes_log2 <= 3 { "scalar" } else { kernel };
            g.bench_function(format!("codes_{name}_{lanes}lanes_{path}"), |b| {
                b.iter(|| seg.decode_codes(black_box(&mut codes)).unwrap())
            });
            if lanes_log2 == 5 {
                // The portable loop over the same stream (no vector units).
                let side = &env[V5_SIDE_LEN_OFFSET..V5_SIDE_LEN_OFFSET + 4];
                let side = u32::from_le_bytes(side.try_into().unwrap()) as usize;
                let (bits, prob_bits) = (env[BITS_OFFSET], env[V5_PROB_BITS_OFFSET]);
                let table_at = V5_HEADER_LEN + side;
                g.bench_function(format!("codes_{name}_{lanes}lanes_portable"), |b| {
                    b.iter(|| {
                        decode_codes_portable(
                            black_box(&env[table_at..]),
                            table_at,
                            bits,
                            prob_bits,
                            lanes_log2,
                            &mut codes,
                        )
                        .unwrap()
                    })
                });
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
