//! Study driver for rate-controlled entropy-coded uniform levels ([`tensorvault_quant::ecsq`])
//! on real tensors: reads raw little-endian f32 values, cuts them into the store's
//! 4096-value blocks, encodes each with `encode_to_fit` against the slot, writes the
//! decoded values (zeros for a block that does not fit) and prints one JSON line
//! (payload bits/value, blocks that did not fit, encode seconds).
//!
//! `cargo run --release -p tensorvault-quant --example ecsq_sweep -- IN.f32 OUT.f32 SLOT BITS BLOCK_LOG2 ROTATE LANES_LOG2`

use tensorvault_quant::ecsq::{encode_to_fit, EcsqParams};
use tensorvault_quant::layout::V3_DEFAULT_SEED;
use tensorvault_quant::segment_v5::decode_any;

const BLOCK: usize = 4096;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 8 {
        return Err("usage: ecsq_sweep IN OUT SLOT BITS BLOCK_LOG2 ROTATE(0|1) LANES_LOG2".into());
    }
    let x: Vec<f32> = std::fs::read(&a[1])?
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let slot: usize = a[3].parse()?;
    let p = EcsqParams {
        bits: a[4].parse()?,
        block_log2: a[5].parse()?,
        seed: V3_DEFAULT_SEED,
        rotate: a[6] == "1",
        lanes_log2: a[7].parse()?,
    };
    let mut out = vec![0f32; x.len()];
    let (mut total, mut missed) = (0usize, 0usize);
    let t0 = std::time::Instant::now();
    let mut dec = Vec::new();
    for (blk, o) in x.chunks(BLOCK).zip(out.chunks_mut(BLOCK)) {
        match encode_to_fit(&p, blk, slot)? {
            Some(bytes) => {
                total += bytes.len();
                decode_any(&bytes, blk.len(), &mut dec)?;
                o.copy_from_slice(&dec);
            }
            None => missed += 1,
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let bytes: Vec<u8> = out.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&a[2], bytes)?;
    println!(
        "{{\"bits_per_value\": {:.4}, \"blocks\": {}, \"missed\": {missed}, \"seconds\": {secs:.2}}}",
        total as f64 * 8.0 / x.len() as f64,
        x.len().div_ceil(BLOCK)
    );
    Ok(())
}
