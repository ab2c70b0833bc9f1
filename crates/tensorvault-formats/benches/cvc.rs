//! Criterion benches for CVC: pack into memory and load from memory, fp16 and int8,
//! 20,000 x 768 vectors (4 chunks), and fp16 pack/load of arrays made entirely of one
//! class of values (ordinary, zeros, f16 subnormals, infinities, NaNs with payloads), which
//! must all run at the speed of ordinary values. The side-by-side comparison with the
//! reference lives in `bench/cvc/run.sh`.

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tensorvault_formats::cvc::{pack_to_vec, Compression, CvcReader, PackOptions};

fn data(n: usize) -> Vec<f32> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let (rows, dim) = (20_000, 768);
    let x = data(rows * dim);
    let mut g = c.benchmark_group("cvc");
    g.throughput(Throughput::Bytes((rows * dim * 4) as u64));
    g.sample_size(20);
    for comp in [Compression::Fp16, Compression::Int8] {
        let opts = PackOptions {
            compression: comp,
            chunk_size: 5_000,
            ..PackOptions::default()
        };
        g.bench_function(format!("pack_{}", comp.name()), |b| {
            b.iter(|| pack_to_vec(black_box(&x), dim, &opts).unwrap())
        });
        let bytes = pack_to_vec(&x, dim, &opts).unwrap();
        let reader = CvcReader::from_source(bytes, "bench").unwrap();
        g.bench_function(format!("load_{}", comp.name()), |b| {
            b.iter(|| reader.load_all().unwrap())
        });
    }
    g.finish();
}

/// `n` values of one class, varied within it (signs, payloads, magnitudes).
fn class(name: &str, n: usize) -> Vec<f32> {
    let base = data(n);
    base.iter()
        .enumerate()
        .map(|(i, x)| {
            let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
            match name {
                "zeros" => sign * 0.0,
                // f16 subnormals: below 2^-14, above 2^-24.
                "subnormals" => sign * (1e-7 + x.abs() * 1e-5),
                "infinities" => sign * f32::INFINITY,
                // Signalling NaNs (the quiet bit clear) with payloads, as numpy keeps them.
                "nans" => f32::from_bits(0x7f80_2000 | ((i as u32 & 0x1fff) << 9)),
                "quiet_nans" => f32::from_bits(0x7fc0_0000 | ((i as u32 & 0x1fff) << 9)),
                _ => *x,
            }
        })
        .collect()
}

fn fp16_classes(c: &mut Criterion) {
    let (rows, dim) = (20_000, 768);
    let mut g = c.benchmark_group("cvc_fp16_classes");
    g.throughput(Throughput::Bytes((rows * dim * 4) as u64));
    g.sample_size(20);
    let opts = PackOptions {
        compression: Compression::Fp16,
        chunk_size: 5_000,
        ..PackOptions::default()
    };
    for name in [
        "ordinary",
        "zeros",
        "subnormals",
        "infinities",
        "nans",
        "quiet_nans",
    ] {
        let x = class(name, rows * dim);
        g.bench_function(format!("pack_{name}"), |b| {
            b.iter(|| pack_to_vec(black_box(&x), dim, &opts).unwrap())
        });
        let reader = CvcReader::from_source(pack_to_vec(&x, dim, &opts).unwrap(), "bench").unwrap();
        g.bench_function(format!("load_{name}"), |b| {
            b.iter(|| reader.load_all().unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench, fp16_classes);
criterion_main!(benches);
