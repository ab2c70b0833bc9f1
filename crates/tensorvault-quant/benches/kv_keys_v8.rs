//! Criterion benches for channel-centred model-coded keys (TQTC v8, issue 23 items 6 and
//! 7): one 16384-value tier-2 key block (256 tokens x 64 channels, the store's KV block,
//! the sink row raw) coded as the store codes it without `kv_keys_ecsq` (5-bit
//! per-channel groups of 128 tokens in the v5 envelope) and as v8 fitted into that
//! segment's length: encode (v8: the rate control) and decode. Throughput counts f32
//! values in (encode) or out (decode), so the figures compare with item 7's bars.
//! Session 16: the same block as TQTC v9 (one step per channel) in v8's budget.

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

mod common;

use common::kv_like;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tensorvault_quant::kind::{v2_layout, TensorKind};
use tensorvault_quant::segment_v2;
use tensorvault_quant::segment_v5::{decode_any, encode_smallest};
use tensorvault_quant::segment_v8::{decode as v8_decode, encode_to_fit, V8Params};
use tensorvault_quant::segment_v9::{decode as v9_decode, encode_to_fit as v9_fit};

fn bench(c: &mut Criterion) {
    let n = 256 * 64;
    let x = kv_like(n);
    let mut g = c.benchmark_group("kv_keys_v8");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    let p2 = v2_layout(TensorKind::KvKey, 5, 128, Some(64), true).unwrap();
    let today = || encode_smallest(segment_v2::encode(&p2, &x).unwrap()).unwrap();
    let t = today();
    let p8 = V8Params {
        bits: 8,
        width: 64,
        raw_rows: 1,
        lanes_log2: 2,
    };
    let v8 = encode_to_fit(&p8, &x, t.len()).unwrap().unwrap();
    let v9 = v9_fit(&p8, &x, t.len()).unwrap().unwrap();
    eprintln!(
        "today {} bytes ({:.3} b/v), v8 {} bytes ({:.3} b/v), v9 {} bytes ({:.3} b/v)",
        t.len(),
        t.len() as f64 * 8.0 / n as f64,
        v8.len(),
        v8.len() as f64 * 8.0 / n as f64,
        v9.len(),
        v9.len() as f64 * 8.0 / n as f64
    );
    g.bench_function("encode_today_5bit_groups_v5", |b| {
        b.iter(|| black_box(today()))
    });
    g.bench_function("encode_v8_to_fit", |b| {
        b.iter(|| encode_to_fit(&p8, black_box(&x), t.len()).unwrap())
    });
    g.bench_function("encode_v9_to_fit", |b| {
        b.iter(|| v9_fit(&p8, black_box(&x), t.len()).unwrap())
    });
    let mut out = Vec::with_capacity(n);
    g.bench_function("decode_today_5bit_groups_v5", |b| {
        b.iter(|| decode_any(black_box(&t), n, &mut out).unwrap())
    });
    g.bench_function("decode_v8", |b| {
        b.iter(|| v8_decode(black_box(&v8), n, &mut out).unwrap())
    });
    g.bench_function("decode_v9", |b| {
        b.iter(|| v9_decode(black_box(&v9), n, &mut out).unwrap())
    });
    g.finish();
    hostile(c);
}

/// A crafted segment's worst case for the model-table cache (review15): 1024 channels of
/// two rows naming all 256 side bytes at `k` bits (4.5 KB, 2048 values). Decoding one
/// builds or looks up 256 tables; alternating a 12-bit and an 11-bit one (512 tables, the
/// cache keeps 256) rebuilds all 256 on every decode.
fn hostile(c: &mut Criterion) {
    let seg = |k: u8| {
        let w = 1024usize;
        let x: Vec<f32> = (0..2 * w)
            .map(|i| {
                let amp = 2f32.powf(((i % w % 256) as f32 - 64.0) / 16.0) * 0.01;
                if i < w {
                    amp
                } else {
                    -amp
                }
            })
            .collect();
        let p = V8Params {
            bits: k,
            width: 1024,
            raw_rows: 0,
            lanes_log2: 0,
        };
        tensorvault_quant::segment_v8::encode(&p, &x, 0.01).unwrap()
    };
    let (a, b) = (seg(12), seg(11));
    let mut g = c.benchmark_group("kv_keys_v8_hostile_sides");
    g.throughput(Throughput::Bytes(a.len() as u64));
    let mut out = Vec::new();
    g.bench_function("decode_256_sides_cached", |bn| {
        bn.iter(|| v8_decode(black_box(&a), 2048, &mut out).unwrap())
    });
    g.bench_function("decode_256_sides_thrashed_pair", |bn| {
        bn.iter(|| {
            v8_decode(black_box(&a), 2048, &mut out).unwrap();
            v8_decode(black_box(&b), 2048, &mut out).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
