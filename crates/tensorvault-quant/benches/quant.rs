//! Criterion benches for the groupwise codec: quantize+pack and unpack+dequantize per
//! width at its default group size, plus the segment parse + single-frame decode; and the
//! v2 segment's encode and parse + decode per layout (one 16384-value block, as the
//! store's KV layout holds: 256 tokens x 64 channels).

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

mod common;

use common::kv_like;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tensorvault_quant::groupwise::{decode, encode, QuantParams};
use tensorvault_quant::levels::LevelSet;
use tensorvault_quant::rotation::{fwht, fwht_scalar, Rotation};
use tensorvault_quant::segment::{encode_tensor, Segment};
use tensorvault_quant::segment_rot::{self, ScaleRule, SegmentV3, V3Params};
use tensorvault_quant::segment_v2::{self, Axis, SegmentV2, V2Params};
use tensorvault_quant::segment_v4::{self, SegmentV4, V4Params};

fn data(n: usize) -> Vec<f32> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            u * (0.5 + (i % 1024) as f32 / 1024.0)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let n = 1 << 20;
    let x = data(n);
    let mut g = c.benchmark_group("groupwise");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    for bits in [3u8, 5, 7, 8] {
        let p = QuantParams::for_bits(bits).unwrap();
        let mut scales = vec![0u16; p.groups(n)];
        let mut packed = vec![0u8; p.packed_len(n)];
        let mut y = vec![0f32; n];
        g.bench_function(format!("quantize_{bits}bit_g{}", p.group_size()), |b| {
            b.iter(|| encode(&p, black_box(&x), &mut scales, &mut packed).unwrap())
        });
        g.bench_function(format!("dequantize_{bits}bit_g{}", p.group_size()), |b| {
            b.iter(|| decode(&p, black_box(&scales), &packed, &mut y).unwrap())
        });
    }
    let p = QuantParams::for_bits(3).unwrap();
    let (seg, _) = encode_tensor(&p, &x).unwrap();
    let mut y = vec![0f32; n];
    g.bench_function("segment_parse_decode_3bit", |b| {
        b.iter(|| {
            Segment::parse(black_box(&seg))
                .unwrap()
                .decode_frame(0, &mut y)
                .unwrap()
        })
    });
    g.finish();
}

fn bench_v2(c: &mut Criterion) {
    let n = 16384;
    let x = data(n);
    let mut g = c.benchmark_group("segment_v2");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    let layouts = [
        ("flat", Axis::Flat, 0u16, false),
        ("columns_sink", Axis::Columns, 1, false),
        ("flat_clip_search", Axis::Flat, 0, true),
    ];
    for bits in [3u8, 5, 8] {
        for (name, axis, raw_rows, clip_search) in layouts {
            let p = V2Params {
                bits,
                group_log2: if bits == 3 { 6 } else { 7 },
                axis,
                width: 64,
                raw_rows,
                clip_search,
            };
            let seg = segment_v2::encode(&p, &x).unwrap();
            let mut y = vec![0f32; n];
            g.bench_function(format!("encode_{bits}bit_{name}"), |b| {
                b.iter(|| segment_v2::encode(&p, black_box(&x)).unwrap())
            });
            if !clip_search {
                g.bench_function(format!("parse_decode_{bits}bit_{name}"), |b| {
                    b.iter(|| {
                        SegmentV2::parse(black_box(&seg))
                            .unwrap()
                            .decode(&mut y)
                            .unwrap()
                    })
                });
            }
        }
    }
    g.finish();
}

/// The rotated segment on one 16384-value block (256 tokens x 64): KV values at 3, 5 and
/// 8 bits, with and without the rotation (what the rotation costs), and the transform
/// alone.
fn bench_v3(c: &mut Criterion) {
    let n = 16384;
    let x = data(n);
    let mut g = c.benchmark_group("segment_v3");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    for bits in [3u8, 5, 8] {
        for (name, rotate) in [("rotated", true), ("unrotated", false)] {
            let p = V3Params {
                bits,
                levels: LevelSet::LloydMax,
                block_log2: 6,
                rotate,
                seed: 1,
                width: 64,
                raw_rows: 1,
                scale: ScaleRule::Rms,
                wide_scales: false,
            };
            let seg = segment_rot::encode(&p, &x).unwrap();
            let mut y = vec![0f32; n];
            g.bench_function(format!("encode_{bits}bit_{name}"), |b| {
                b.iter(|| segment_rot::encode(&p, black_box(&x)).unwrap())
            });
            g.bench_function(format!("parse_decode_{bits}bit_{name}"), |b| {
                b.iter(|| {
                    SegmentV3::parse(black_box(&seg))
                        .unwrap()
                        .decode(&mut y)
                        .unwrap()
                })
            });
        }
    }
    // The transform alone over the 16384 values in blocks of 64: the runtime-selected
    // path (AVX2 where the CPU has it) next to the scalar loop (the "before").
    let mut y = x.clone();
    g.bench_function("fwht_b64_dispatched", |b| {
        b.iter(|| {
            for blk in y.chunks_exact_mut(64) {
                fwht(black_box(blk));
            }
        })
    });
    g.bench_function("fwht_b64_scalar", |b| {
        b.iter(|| {
            for blk in y.chunks_exact_mut(64) {
                fwht_scalar(black_box(blk));
            }
        })
    });
    let r = Rotation::new(1, 64).unwrap();
    let mut y = x.clone();
    g.bench_function("rotate_forward_b64", |b| {
        b.iter(|| {
            for blk in y.chunks_exact_mut(64) {
                r.forward(black_box(blk));
            }
        })
    });
    g.finish();
}

/// The super-block segment on one 4096-value block (the store's default block) with the
/// layouts codec v4 picks for weights at tiers 1/2/3 (groups of 64, 64, 32; rotated; the
/// clip search on, as the store encodes weights), rotated (as the store writes) and not
/// (what the rotation costs).
fn bench_v4(c: &mut Criterion) {
    let n = 4096;
    let x = data(n);
    let mut g = c.benchmark_group("segment_v4");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    let layouts = [(8u8, 6u8, 6u8, 5u8), (5, 6, 6, 5), (3, 5, 5, 4)];
    for ((bits, group_log2, scale_bits, min_bits), rotate) in
        layouts.into_iter().flat_map(|l| [(l, true), (l, false)])
    {
        let p = V4Params {
            bits,
            group_log2,
            super_log2: 10,
            scale_bits,
            min_bits,
            rotate,
            seed: 1,
            clip_search: true,
        };
        let seg = segment_v4::encode(&p, &x).unwrap();
        let mut y = vec![0f32; n];
        let rot = if rotate { "rotated" } else { "unrotated" };
        let name = format!("{bits}bit_g{}_{rot}", p.group());
        g.bench_function(format!("encode_{name}"), |b| {
            b.iter(|| segment_v4::encode(&p, black_box(&x)).unwrap())
        });
        if rotate {
            // What codec 4 does for embeddings: the same fit, then norm-matched units.
            let nm = segment_v4::V4Encoder { norm_match: true };
            g.bench_function(format!("encode_{name}_norm_matched"), |b| {
                b.iter(|| segment_v4::encode_with(&p, nm, black_box(&x)).unwrap())
            });
        }
        g.bench_function(format!("parse_decode_{name}"), |b| {
            b.iter(|| {
                SegmentV4::parse(black_box(&seg))
                    .unwrap()
                    .decode(&mut y)
                    .unwrap()
            })
        });
    }
    g.finish();
}

/// The store's `ecsq` blocks (one 4096-value block, rotation blocks of 1024): the
/// rate-controlled encoder at the tier 2 and tier 3 slots, and `decode_any` of its
/// output (v5 envelope of a uniform-level v3 segment), with 1 rANS lane (the store's)
/// and 4 (the envelope's default).
fn bench_ecsq(c: &mut Criterion) {
    use tensorvault_quant::ecsq::{encode_to_fit, EcsqParams};
    use tensorvault_quant::segment_v5::decode_any;
    let n = 4096;
    let x = data(n);
    let mut g = c.benchmark_group("ecsq");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    for ((bits, slot), lanes_log2) in [(6u8, 2688usize), (5, 1728)]
        .into_iter()
        .flat_map(|t| [(t, 0u8), (t, 2)])
    {
        let p = EcsqParams {
            bits,
            block_log2: 10,
            seed: 0x5456_5133,
            rotate: true,
            lanes_log2,
        };
        let seg = encode_to_fit(&p, &x, slot).unwrap().unwrap();
        let mut y = Vec::with_capacity(n);
        let name = format!("{bits}bit_slot{slot}_lanes{}", 1 << lanes_log2);
        g.bench_function(format!("encode_{name}"), |b| {
            b.iter(|| encode_to_fit(&p, black_box(&x), slot).unwrap())
        });
        g.bench_function(format!("decode_{name}"), |b| {
            b.iter(|| decode_any(black_box(&seg), n, &mut y).unwrap())
        });
    }
    g.finish();
}

/// The store's opt-in entropy-coded KV paths on one block (256 tokens x 64, block 0: the
/// sink token raw), whole put and get: `encode_*` is the inner segment's encode plus the
/// v5 envelope (`encode_smallest`), `parse_decode_*` is `decode_any` of the envelope,
/// `inner_decode_*` the same segment without the envelope (what the rANS stream costs),
/// `wrap_*` the envelope alone; `*_{16,32,64}lanes` the envelope with that many rANS
/// lanes (the vector decoder). Layouts: `v2_4bit_cols` codec 4 tier 3 keys (per channel
/// over 128 tokens), `v2_5bit_cols` tier 2 keys (and values without `ecsq_tier2`),
/// `v3_4bit_uniform_rotated` `kv_ecsq` tier 3 values (26/16 RMS), the same unrotated
/// (what the rotation costs), `v3_6bit_uniform_rotated` `ecsq_tier2` values (16/16 RMS).
fn bench_kv_v5(c: &mut Criterion) {
    use tensorvault_quant::segment_v5::{decode_any, encode_smallest, wrap};
    let n = 256 * 64;
    let x = kv_like(n);
    let mut g = c.benchmark_group("kv_v5");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    let v2p = |bits| V2Params {
        bits,
        group_log2: 7,
        axis: Axis::Columns,
        width: 64,
        raw_rows: 1,
        clip_search: false,
    };
    let v3p = |bits, step, rotate| V3Params {
        bits,
        levels: LevelSet::Uniform,
        block_log2: 6,
        rotate,
        seed: tensorvault_quant::layout::V3_DEFAULT_SEED,
        width: 64,
        raw_rows: 1,
        scale: ScaleRule::RmsTimes(step),
        wide_scales: false,
    };
    type Enc = Box<dyn Fn(&[f32]) -> Vec<u8>>;
    let layouts: [(&str, Enc); 5] = [
        (
            "v2_4bit_cols",
            Box::new(move |x| segment_v2::encode(&v2p(4), x).unwrap()),
        ),
        (
            "v2_5bit_cols",
            Box::new(move |x| segment_v2::encode(&v2p(5), x).unwrap()),
        ),
        (
            "v3_4bit_uniform_rotated",
            Box::new(move |x| segment_rot::encode(&v3p(4, 26, true), x).unwrap()),
        ),
        (
            "v3_4bit_uniform_unrotated",
            Box::new(move |x| segment_rot::encode(&v3p(4, 26, false), x).unwrap()),
        ),
        (
            "v3_6bit_uniform_rotated",
            Box::new(move |x| segment_rot::encode(&v3p(6, 16, true), x).unwrap()),
        ),
    ];
    let mut y = Vec::with_capacity(n);
    for (name, enc) in &layouts {
        let inner = enc(&x);
        let env = encode_smallest(inner.clone()).unwrap();
        assert!(env.len() < inner.len(), "{name}: the envelope must be kept");
        g.bench_function(format!("encode_{name}"), |b| {
            b.iter(|| encode_smallest(enc(black_box(&x))).unwrap())
        });
        g.bench_function(format!("wrap_{name}"), |b| {
            b.iter(|| wrap(black_box(&inner), 2).unwrap())
        });
        g.bench_function(format!("parse_decode_{name}"), |b| {
            b.iter(|| decode_any(black_box(&env), n, &mut y).unwrap())
        });
        g.bench_function(format!("inner_decode_{name}"), |b| {
            b.iter(|| decode_any(black_box(&inner), n, &mut y).unwrap())
        });
        // The same envelope with 16 to 64 lanes (the vector decoder; `wide_lanes`).
        for lanes_log2 in 4..=6u8 {
            let lanes = 1 << lanes_log2;
            let Some(wide) = wrap(&inner, lanes_log2).unwrap() else {
                continue;
            };
            g.bench_function(format!("parse_decode_{name}_{lanes}lanes"), |b| {
                b.iter(|| decode_any(black_box(&wide), n, &mut y).unwrap())
            });
            g.bench_function(format!("wrap_{name}_{lanes}lanes"), |b| {
                b.iter(|| wrap(black_box(&inner), lanes_log2).unwrap())
            });
        }
    }
    g.finish();
}

/// Model-coded ECSQ (TQTC v7) against the v5 ECSQ on one 4096-value block at the tiers'
/// slots (4224 / 2688 / 1728 bytes; v5 8 / 6 / 5-bit codes, v7 10 / 7 / 6), 1 and 4 rANS
/// lanes: the rate-controlled encode and the decode. `derive_table_*` is what a decode
/// would pay per rotation block without the model-table cache (one table's derivation).
fn bench_ecsq_model(c: &mut Criterion) {
    use std::time::Duration;
    use tensorvault_quant::ecsq::{encode_to_fit as v5_fit, EcsqParams};
    use tensorvault_quant::ecsq_model::derive_frequencies;
    use tensorvault_quant::segment_v5::decode_any;
    use tensorvault_quant::segment_v7::{decode as v7_decode, encode_to_fit as v7_fit, V7Params};
    let n = 4096;
    let x = data(n);
    let mut g = c.benchmark_group("ecsq_model");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(2));
    let seed = tensorvault_quant::layout::V3_DEFAULT_SEED;
    for ((tier, slot, b5, b7), lanes_log2) in
        [(1, 4224usize, 8u8, 10u8), (2, 2688, 6, 7), (3, 1728, 5, 6)]
            .into_iter()
            .flat_map(|t| [(t, 0u8), (t, 2)])
    {
        let p5 = EcsqParams {
            bits: b5,
            block_log2: 10,
            seed,
            rotate: true,
            lanes_log2,
        };
        let p7 = V7Params {
            bits: b7,
            block_log2: 10,
            seed,
            lanes_log2,
        };
        let s5 = v5_fit(&p5, &x, slot).unwrap().unwrap();
        let s7 = v7_fit(&p7, &x, slot).unwrap().unwrap();
        let mut y = Vec::with_capacity(n);
        let lanes = 1 << lanes_log2;
        g.bench_function(format!("encode_v5_tier{tier}_{b5}bit_lanes{lanes}"), |b| {
            b.iter(|| v5_fit(&p5, black_box(&x), slot).unwrap())
        });
        g.bench_function(format!("encode_v7_tier{tier}_{b7}bit_lanes{lanes}"), |b| {
            b.iter(|| v7_fit(&p7, black_box(&x), slot).unwrap())
        });
        g.bench_function(format!("decode_v5_tier{tier}_{b5}bit_lanes{lanes}"), |b| {
            b.iter(|| decode_any(black_box(&s5), n, &mut y).unwrap())
        });
        g.bench_function(format!("decode_v7_tier{tier}_{b7}bit_lanes{lanes}"), |b| {
            b.iter(|| v7_decode(black_box(&s7), n, &mut y).unwrap())
        });
    }
    for k in [6u8, 7, 10] {
        g.bench_function(format!("derive_table_{k}bit"), |b| {
            b.iter(|| derive_frequencies(black_box(k), black_box(90)).unwrap())
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    bench,
    bench_v2,
    bench_v3,
    bench_v4,
    bench_ecsq,
    bench_ecsq_model,
    bench_kv_v5
);
criterion_main!(benches);
