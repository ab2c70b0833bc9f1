//! Model-coded ECSQ (TQTC v7) against the v5 ECSQ the store writes today, on real tensors,
//! at the tiers' byte budgets. Reads `.npy` files (little-endian f32, C order: one file per
//! tensor, as `bench/quality/v7_dump.py` writes them), cuts each tensor into the store's
//! 4096-value blocks (a short last block gets the budget in proportion, as the store's
//! `ecsq_budget` does), encodes every block with both codecs and prints, per tier, the
//! relative RMSE (`sqrt(sum e^2 / sum x^2)` over the whole set), the stored bits per value
//! and the encode and decode seconds. A block either codec cannot code (no rotation block
//! of at least 16 divides it, or nothing fits) is left out of both, and counted.
//!
//! `cargo run --release -p tensorvault-quant --example v7_vs_v5 -- LANES_LOG2 FILE.npy...`

use std::time::Instant;

mod common;
use common::{read_npy, Tally};

use tensorvault_quant::ecsq::{encode_to_fit as v5_fit, EcsqParams};
use tensorvault_quant::layout::V3_DEFAULT_SEED;
use tensorvault_quant::segment_v5::decode_any;
use tensorvault_quant::segment_v7::{decode as v7_decode, encode_to_fit as v7_fit, V7Params};

const BLOCK: usize = 4096;
/// Tier name, slot bytes per 4096 values, v5 code width (1 is today's tier-1 study
/// setting: the store codes tier 1 with v4), v7 code width.
const TIERS: [(&str, usize, u8, u8); 3] = [
    ("tier1", 4224, 8, 10),
    ("tier2", 2688, 6, 7),
    ("tier3", 1728, 5, 6),
];

/// The example's line for one codec.
fn line(t: &Tally) -> String {
    format!(
        "rel_rmse {:.4}%  b/v {:.4}  encode {:.2} s  decode {:.3} s ({:.0} MB/s)",
        t.rel_rmse_pct(),
        t.bits_per_value(),
        t.enc.as_secs_f64(),
        t.dec.as_secs_f64(),
        t.values as f64 * 4.0 / 1e6 / t.dec.as_secs_f64()
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (lanes, files) = args
        .split_first()
        .ok_or("usage: v7_vs_v5 LANES_LOG2 FILE.npy...")?;
    let lanes_log2: u8 = lanes.parse()?;
    let tensors: Vec<Vec<f32>> = files
        .iter()
        .map(|f| read_npy(f).map(|(_, v)| v))
        .collect::<Result<_, _>>()?;
    let total: usize = tensors.iter().map(Vec::len).sum();
    println!(
        "{} tensors, {total} values, lanes_log2 {lanes_log2}",
        tensors.len()
    );
    for (name, slot, v5_bits, v7_bits) in TIERS {
        let (mut t5, mut t7) = (Tally::default(), Tally::default());
        let mut skipped = 0usize;
        let (mut y5, mut y7) = (Vec::new(), Vec::new());
        for x in tensors.iter().flat_map(|t| t.chunks(BLOCK)) {
            let block_log2 = (x.len().trailing_zeros() as u8).min(10);
            let budget = slot * x.len() / BLOCK;
            if block_log2 < 4 {
                skipped += x.len();
                continue;
            }
            let p5 = EcsqParams {
                bits: v5_bits,
                block_log2,
                seed: V3_DEFAULT_SEED,
                rotate: true,
                lanes_log2,
            };
            let p7 = V7Params {
                bits: v7_bits,
                block_log2,
                seed: V3_DEFAULT_SEED,
                lanes_log2,
            };
            let t = Instant::now();
            let b5 = v5_fit(&p5, x, budget)?;
            t5.enc += t.elapsed();
            let t = Instant::now();
            let b7 = v7_fit(&p7, x, budget)?;
            t7.enc += t.elapsed();
            let (Some(b5), Some(b7)) = (b5, b7) else {
                skipped += x.len();
                continue;
            };
            let t = Instant::now();
            decode_any(&b5, x.len(), &mut y5)?;
            t5.dec += t.elapsed();
            let t = Instant::now();
            v7_decode(&b7, x.len(), &mut y7)?;
            t7.dec += t.elapsed();
            t5.add(x, &y5, b5.len());
            t7.add(x, &y7, b7.len());
        }
        println!("{name} slot {slot}: skipped {skipped} values");
        println!("  v5 ECSQ k={v5_bits:<2} {}", line(&t5));
        println!("  v7 model k={v7_bits:<2} {}", line(&t7));
    }
    Ok(())
}
