//! CGEB vs serde_json, bincode and rkyv on the seed's 1536-dim fused embedding (8 expert
//! weights, top-2): size per embedding, encode and decode time; plus CGEB zero-copy
//! decode (hash verification off and on) and batch-file random `get(i)` and sequential
//! scan. `bench/cgeb/run.sh` runs it and prints the table.

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tensorvault_formats::cgeb::{
    BatchBinaryEncoder, BatchReader, BatchReaderOptions, EmbeddingBinaryCodec, FusedEmbedding,
};

/// The peers' view of the same record (serde for JSON and bincode, rkyv derive).
#[derive(
    serde::Serialize, serde::Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
struct Peer {
    vector: Vec<f32>,
    expert_weights: [f32; 8],
    selected_experts: [u8; 2],
    pipeline_latency_us: u64,
    content_hash: u64,
}

fn embedding(seed: u64) -> FusedEmbedding {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut f = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let vector = (0..1536).map(|_| f() * 0.05).collect();
    let w: Vec<f32> = (0..8).map(|_| f() + 0.5).collect();
    let mut e = FusedEmbedding::new(vector, w, vec![3, 5]);
    e.pipeline_latency_us = 1234;
    e
}

fn bench(c: &mut Criterion) {
    let e = embedding(1);
    let peer = Peer {
        vector: e.vector.clone(),
        expert_weights: e.expert_weights.clone().try_into().unwrap(),
        selected_experts: [3, 5],
        pipeline_latency_us: 1234,
        content_hash: 0,
    };
    let codec = EmbeddingBinaryCodec::new();
    let json = serde_json::to_vec(&peer).unwrap();
    let bin = bincode::serialize(&peer).unwrap();
    let rk = rkyv::to_bytes::<rkyv::rancor::Error>(&peer).unwrap();
    let cg = codec.encode(&e).unwrap();
    println!(
        "SIZE serde_json={} bincode={} rkyv={} cgeb={}",
        json.len(),
        bin.len(),
        rk.len(),
        cg.len()
    );

    let mut g = c.benchmark_group("cgeb_format");
    g.sample_size(30);
    g.warm_up_time(std::time::Duration::from_millis(500));
    g.measurement_time(std::time::Duration::from_secs(2));
    g.bench_function("serde_json/encode", |b| {
        b.iter(|| serde_json::to_vec(black_box(&peer)).unwrap())
    });
    g.bench_function("serde_json/decode", |b| {
        b.iter(|| serde_json::from_slice::<Peer>(black_box(&json)).unwrap())
    });
    g.bench_function("bincode/encode", |b| {
        b.iter(|| bincode::serialize(black_box(&peer)).unwrap())
    });
    g.bench_function("bincode/decode", |b| {
        b.iter(|| bincode::deserialize::<Peer>(black_box(&bin)).unwrap())
    });
    g.bench_function("rkyv/encode", |b| {
        b.iter(|| rkyv::to_bytes::<rkyv::rancor::Error>(black_box(&peer)).unwrap())
    });
    g.bench_function("rkyv/access_validated", |b| {
        b.iter(|| {
            rkyv::access::<ArchivedPeer, rkyv::rancor::Error>(black_box(&rk))
                .unwrap()
                .vector
                .len()
        })
    });
    g.bench_function("rkyv/decode_owned", |b| {
        b.iter(|| {
            let a = rkyv::access::<ArchivedPeer, rkyv::rancor::Error>(black_box(&rk)).unwrap();
            rkyv::deserialize::<Peer, rkyv::rancor::Error>(a).unwrap()
        })
    });
    g.bench_function("cgeb/encode", |b| {
        b.iter(|| codec.encode(black_box(&e)).unwrap())
    });
    let mut buf = vec![0u8; cg.len()];
    g.bench_function("cgeb/encode_to_buffer", |b| {
        b.iter(|| codec.encode_to_buffer(black_box(&e), &mut buf).unwrap())
    });
    let nohash = codec.with_verify_hash(false);
    g.bench_function("cgeb/decode_owned_nohash", |b| {
        b.iter(|| nohash.decode(black_box(&cg)).unwrap())
    });
    g.bench_function("cgeb/decode_owned_hash", |b| {
        b.iter(|| codec.decode(black_box(&cg)).unwrap())
    });
    g.bench_function("cgeb/zero_copy_nohash", |b| {
        b.iter(|| {
            nohash
                .decode_zero_copy(black_box(&cg))
                .unwrap()
                .content_hash()
        })
    });
    g.bench_function("cgeb/zero_copy_hash", |b| {
        b.iter(|| {
            codec
                .decode_zero_copy(black_box(&cg))
                .unwrap()
                .content_hash()
        })
    });
    let le = codec.with_le_payload(true);
    let cg_le = le.encode(&e).unwrap();
    g.bench_function("cgeb/decode_owned_le_nohash", |b| {
        b.iter(|| nohash.decode(black_box(&cg_le)).unwrap())
    });
    g.finish();

    // Batch file: 4000 records at 4096 alignment (32 MB), warm page cache.
    let n = 4000usize;
    let dir = tempfile::tempdir().unwrap();
    let mut enc = BatchBinaryEncoder::with_capacity(n);
    for i in 0..n {
        enc.push(&embedding(i as u64)).unwrap();
    }
    enc.write_gds_file(&dir.path().join("b")).unwrap();
    let mut g = c.benchmark_group("cgeb_batch");
    g.sample_size(20);
    g.warm_up_time(std::time::Duration::from_millis(500));
    g.measurement_time(std::time::Duration::from_secs(2));
    for (name, verify) in [("nohash", false), ("hash", true)] {
        let r = BatchReader::open_with(
            &dir.path().join("b"),
            BatchReaderOptions {
                verify_data_hash: true,
                verify_records: verify,
            },
        )
        .unwrap();
        let order: Vec<usize> = {
            let mut s = 0x1234_5678u64;
            (0..1000)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    (s % n as u64) as usize
                })
                .collect()
        };
        g.throughput(Throughput::Elements(order.len() as u64));
        g.bench_function(format!("random_get_1000/{name}"), |b| {
            b.iter(|| {
                let mut acc = 0f32;
                for &i in &order {
                    acc += r.get(i).unwrap().vector().get(7).unwrap();
                }
                acc
            })
        });
        g.throughput(Throughput::Bytes(r.data().len() as u64));
        let mut row = vec![0f32; 1536];
        g.bench_function(format!("scan_copy_f32/{name}"), |b| {
            b.iter(|| {
                let mut acc = 0f32;
                for rec in r.iter() {
                    rec.unwrap().vector().copy_to_slice(&mut row);
                    acc += row[1535];
                }
                acc
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
