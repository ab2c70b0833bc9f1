//! Decode time of hostile TQTC v7 segments (review14): 2^20 values in 4-value rotation
//! blocks whose side bytes cycle through all 256 values, at `k` = 12 and 11. Reports the
//! median of 5 decodes on one thread, and with two threads decoding the k = 12 and k = 11
//! segments at once (their 512 distinct tables evict each other from the shared cache of
//! 256), against an ordinary segment (4096-value run, 1024-value blocks, k = 10) scaled to
//! the same value count.
//!
//! `cargo run --release -p tensorvault-quant --example v7_hostile`

use std::time::Instant;

use tensorvault_quant::ecsq_model::sigma_of;
use tensorvault_quant::segment_v7::{decode, encode, V7Params};

const N: usize = 1 << 20;

fn hostile(bits: u8) -> Vec<u8> {
    let step = 1e-3f32;
    // Block i's values are +-step * sigma(i mod 256): its RMS picks side byte i mod 256.
    let x: Vec<f32> = (0..N)
        .map(|i| {
            let s = step * sigma_of((i / 4 % 256) as u8) as f32;
            if (i * 7 + i / 3) % 2 == 0 {
                s
            } else {
                -s
            }
        })
        .collect();
    let p = V7Params {
        bits,
        block_log2: 2,
        seed: 1,
        lanes_log2: 0,
    };
    encode(&p, &x, step).expect("encodes")
}

fn median_ms(f: &mut dyn FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..5)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[2]
}

fn main() {
    let (a, b) = (hostile(12), hostile(11));
    let sides = |s: &[u8]| {
        let seg = tensorvault_quant::segment_v7::SegmentV7::parse(s).unwrap();
        let mut d = seg.sides().to_vec();
        d.sort_unstable();
        d.dedup();
        d.len()
    };
    println!(
        "hostile segments: {} / {} bytes, {} / {} distinct side bytes",
        a.len(),
        b.len(),
        sides(&a),
        sides(&b)
    );
    let mut y = Vec::new();
    let one = median_ms(&mut || decode(&a, N, &mut y).unwrap());
    let two = median_ms(&mut || {
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut y = Vec::new();
                decode(&a, N, &mut y).unwrap();
            });
            s.spawn(|| {
                let mut y = Vec::new();
                decode(&b, N, &mut y).unwrap();
            });
        });
    });
    let x: Vec<f32> = (0..4096)
        .map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1e-3)
        .collect();
    let p = V7Params {
        bits: 10,
        block_log2: 10,
        seed: 1,
        lanes_log2: 0,
    };
    let plain = encode(&p, &x, 2e-3).unwrap();
    let base = median_ms(&mut || {
        for _ in 0..N / 4096 {
            decode(&plain, 4096, &mut y).unwrap();
        }
    });
    println!("ordinary: {base:.1} ms per 2^20 values");
    println!("hostile k=12, one thread: {one:.1} ms ({:.1}x)", one / base);
    println!(
        "hostile k=12 and k=11 on two threads at once: {two:.1} ms ({:.1}x)",
        two / base
    );
}
