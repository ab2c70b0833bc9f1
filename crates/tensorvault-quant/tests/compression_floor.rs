//! ADR-018's compression floors (8-bit >= 3.9x, 7-bit >= 4.4x, 5-bit >= 6.2x, 3-bit >=
//! 10.3x vs f32, header included) with each width's default group size, on generated
//! data shaped like the store's workloads.

use tensorvault_quant::groupwise::QuantParams;
use tensorvault_quant::segment::{encode_frames, encode_tensor, Segment};

const FLOORS: [(u8, f64); 4] = [(8, 3.9), (7, 4.4), (5, 6.2), (3, 10.3)];

struct Rng(u64);
impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }
}

/// A KV-cache block: `tokens x head_dim` values with per-channel magnitudes (a few
/// outlier channels, as KIVI observes for keys). Successive frames are the same block a
/// time step later: strongly correlated (a small fresh component) with a slow drift.
fn kv_frames(frames: usize, tokens: usize, head_dim: usize, seed: u64) -> Vec<f32> {
    let mut r = Rng(seed);
    let chan: Vec<f32> = (0..head_dim)
        .map(|c| {
            if c % 37 == 5 {
                8.0
            } else {
                0.5 + r.uniform() as f32
            }
        })
        .collect();
    let base: Vec<f32> = (0..tokens * head_dim)
        .map(|i| chan[i % head_dim] * r.normal())
        .collect();
    let mut out = Vec::with_capacity(frames * base.len());
    for f in 0..frames {
        let drift = 1.0 + 0.002 * f as f32;
        out.extend(
            base.iter()
                .enumerate()
                .map(|(i, &b)| drift * (b + 0.02 * chan[i % head_dim] * r.normal())),
        );
    }
    out
}

/// A weight matrix row block: normal weights with rare large outliers.
fn weights(n: usize, seed: u64) -> Vec<f32> {
    let mut r = Rng(seed);
    (0..n)
        .map(|_| {
            let w = 0.02 * r.normal();
            if r.uniform() < 0.001 {
                w * 20.0
            } else {
                w
            }
        })
        .collect()
}

fn ratio(n_values: usize, bytes: usize) -> f64 {
    (n_values * 4) as f64 / bytes as f64
}

#[test]
fn one_16k_block_per_segment_meets_the_floors() {
    // ADR-018's default block: 16 KiB of f32 = 4096 values (32 tokens x 128 dims).
    let kv = kv_frames(1, 32, 128, 7);
    let w = weights(4096, 9);
    for (bits, floor) in FLOORS {
        let p = QuantParams::for_bits(bits).unwrap();
        for x in [&kv, &w] {
            let (b, _) = encode_tensor(&p, x).unwrap();
            let r = ratio(x.len(), b.len());
            assert!(
                r >= floor,
                "{bits}-bit: {r:.3}x < {floor}x ({} bytes)",
                b.len()
            );
            Segment::parse(&b).unwrap();
        }
    }
}

#[test]
fn large_tensors_and_streams_meet_the_floors() {
    let w = weights(1 << 18, 3);
    // 64 time steps of a 128-token x 128-dim KV block with slow drift: frames reuse scales.
    let kv = kv_frames(64, 128, 128, 11);
    for (bits, floor) in FLOORS {
        let p = QuantParams::for_bits(bits).unwrap();
        let (b, _) = encode_tensor(&p, &w).unwrap();
        assert!(
            ratio(w.len(), b.len()) >= floor,
            "{bits}-bit weights: {:.3}x",
            ratio(w.len(), b.len())
        );
        let (s, reports) = encode_frames(&p, &kv, 128 * 128, 0.10).unwrap();
        let reused = reports.iter().filter(|r| !r.new_scale_set).count();
        assert!(reused > 0, "{bits}-bit: no frame reused its scales");
        assert!(
            ratio(kv.len(), s.len()) >= floor,
            "{bits}-bit stream: {:.3}x",
            ratio(kv.len(), s.len())
        );
    }
}
