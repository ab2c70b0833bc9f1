//! The v9 encoder on SmolLM2's real keys (`tests/fixtures/quality/smollm2_kv_L{0,15,19,29}.npy`:
//! 3 heads x 2 blocks of 256 tokens x 64 channels per layer, the sink row raw in block 0)
//! at budgets from 2.5 to 5.2 bits per value: prints, per block and budget, the segment's
//! length, FNV-1a hash and pair-energy-weighted squared error (each channel's error
//! weighted by its RoPE pair's energy: what the logit error `q . dk` sees when queries
//! follow the keys). Run it at two commits and diff the output to see which encodings an
//! encoder change moved, and whether their error rose or fell (review16 used it for the
//! step ceiling: bench/RESULTS.md "Session 16: review16").
//!
//! `cargo run --release -p tensorvault-quant --example v9_budget_sweep > OUT.txt`

use tensorvault_quant::segment_v8::V8Params;
use tensorvault_quant::segment_v9::{decode, encode_to_fit};

const BLOCK: usize = 256 * 64;

fn fixture_keys(layer: u32) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let path = format!(
        "{}/../../tests/fixtures/quality/smollm2_kv_L{layer}.npy",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path)?;
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let header = std::str::from_utf8(&bytes[10..10 + header_len])?;
    if !header.contains("'<f2'") || !header.contains("(2, 3, 512, 64)") {
        return Err(format!("{path}: unexpected header {header}").into());
    }
    Ok(bytes[10 + header_len..]
        .chunks_exact(2)
        .take(3 * 512 * 64)
        .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect())
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn weighted_error(x: &[f32], y: &[f32]) -> f64 {
    let mut energy = [0f64; 64];
    let mut err = [0f64; 64];
    for (j, (a, b)) in x.iter().zip(y).enumerate() {
        energy[j % 64] += f64::from(*a).powi(2);
        err[j % 64] += f64::from(a - b).powi(2);
    }
    (0..64)
        .map(|c| (energy[c & !1] + energy[c | 1]) * err[c])
        .sum()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for layer in [0, 15, 19, 29] {
        let k = fixture_keys(layer)?;
        for i in 0..6 {
            let x = &k[i * BLOCK..(i + 1) * BLOCK];
            let p = V8Params {
                bits: 8,
                width: 64,
                raw_rows: u16::from(i % 2 == 0),
                lanes_log2: 2,
            };
            for centibits in (250..=520).step_by(10) {
                let budget = BLOCK * centibits / 800;
                match encode_to_fit(&p, x, budget)? {
                    Some(b) => {
                        let mut y = Vec::new();
                        decode(&b, x.len(), &mut y)?;
                        println!(
                            "L{layer} block {i} cb {centibits}: {} bytes, {:016x}, weighted error {:.6e}",
                            b.len(),
                            fnv1a(&b),
                            weighted_error(x, &y)
                        );
                    }
                    None => println!("L{layer} block {i} cb {centibits}: none fits"),
                }
            }
        }
    }
    Ok(())
}
