//! Criterion benches for the CVC codecs: f16 and affine u8, both directions.

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tensorvault_quant::affine_u8::AffineU8;
use tensorvault_quant::float::{f16_bits_to_f32, f32_to_f16_bits};
use tensorvault_quant::row_int4::{row_bytes, ColumnNorm};

fn data(n: usize) -> Vec<f32> {
    // A cheap deterministic pseudo-normal-ish signal.
    let mut s = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let n = 300 * 768;
    let x = data(n);
    let mut g = c.benchmark_group("cvc_codecs");
    g.throughput(Throughput::Bytes((n * 4) as u64));
    let mut h = vec![0u16; n];
    g.bench_function("f32_to_f16", |b| {
        b.iter(|| f32_to_f16_bits(black_box(&x), &mut h).unwrap())
    });
    let mut y = vec![0f32; n];
    g.bench_function("f16_to_f32", |b| {
        b.iter(|| f16_bits_to_f32(black_box(&h), &mut y).unwrap())
    });
    let p = AffineU8::fit(&x).unwrap();
    let mut q = vec![0u8; n];
    g.bench_function("u8_fit", |b| {
        b.iter(|| AffineU8::fit(black_box(&x)).unwrap())
    });
    g.bench_function("u8_encode", |b| {
        b.iter(|| p.encode(black_box(&x), &mut q).unwrap())
    });
    g.bench_function("u8_decode", |b| {
        b.iter(|| p.decode(black_box(&q), &mut y).unwrap())
    });
    // CVC int4 (rows of 768: per-row (min, step), per-column mean/std), the same values:
    // compare with `u8_decode` per f32 written (both groups count f32 bytes out).
    let dim = 768;
    let cols = ColumnNorm::fit(&x, dim).unwrap();
    let mut p4 = vec![0u8; n / dim * row_bytes(dim).unwrap()];
    cols.encode_rows(&x, &mut p4).unwrap();
    g.bench_function("int4_decode_d768", |b| {
        b.iter(|| cols.decode_rows(black_box(&p4), &mut y).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
