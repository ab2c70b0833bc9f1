//! Layout study driver for TQTC v4 (+ v5 envelope) on real tensors: reads raw
//! little-endian f32 values, cuts them into blocks (the store's 4096 values), encodes
//! each block with the first candidate layout whose segment (entropy-coded when asked)
//! fits the slot, writes the decoded values, prints one JSON line (bits/value, blocks
//! per candidate).
//!
//! `cargo run --release -p tensorvault-quant --example v4_sweep -- IN.f32 OUT.f32 SLOT
//! ENTROPY(0|1) BITS,G_LOG2,S_LOG2,SC_BITS,MIN_BITS,ROT,NORM_MATCH,CLIP [MORE ...]`

use tensorvault_quant::layout::V4_DEFAULT_SEED;
use tensorvault_quant::segment_v4::{encode_with, SegmentV4, V4Encoder, V4Params};
use tensorvault_quant::segment_v5::{encode_smallest, SegmentV5};

const BLOCK: usize = 4096;

fn parse(spec: &str) -> Result<(V4Params, V4Encoder), Box<dyn std::error::Error>> {
    let f: Vec<u8> = spec.split(',').map(str::parse).collect::<Result<_, _>>()?;
    let [bits, group_log2, super_log2, scale_bits, min_bits, rot, nm, clip] = f[..] else {
        return Err(format!("bad spec {spec}").into());
    };
    let enc = V4Encoder {
        norm_match: nm != 0,
    };
    Ok((
        V4Params {
            bits,
            group_log2,
            super_log2,
            scale_bits,
            min_bits,
            rotate: rot != 0,
            seed: V4_DEFAULT_SEED,
            clip_search: clip != 0,
        },
        enc,
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 6 {
        return Err("usage: v4_sweep IN OUT SLOT ENTROPY SPEC...".into());
    }
    let x: Vec<f32> = std::fs::read(&a[1])?
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let slot: usize = a[3].parse()?;
    let entropy = a[4] == "1";
    let cands: Vec<(V4Params, V4Encoder)> =
        a[5..].iter().map(|s| parse(s)).collect::<Result<_, _>>()?;
    let mut out = vec![0f32; x.len()];
    let mut used = vec![0usize; cands.len() + 1];
    let (mut total, mut inner_total) = (0usize, 0usize);
    for (blk, o) in x.chunks(BLOCK).zip(out.chunks_mut(BLOCK)) {
        let mut pick = None;
        for (ci, (p, e)) in cands.iter().enumerate() {
            let inner = encode_with(p, *e, blk)?;
            let il = inner.len();
            let bytes = if entropy {
                encode_smallest(inner)?
            } else {
                inner
            };
            if bytes.len() <= slot || ci + 1 == cands.len() {
                pick = Some((ci, bytes, il));
                break;
            }
        }
        let (ci, bytes, il) = pick.ok_or("no candidate")?;
        used[ci] += 1;
        if ci + 1 == cands.len() && bytes.len() > slot {
            used[cands.len()] += 1;
        }
        total += bytes.len();
        inner_total += il;
        if bytes[8] == 5 {
            let inner = SegmentV5::parse(&bytes)?.inner(BLOCK)?;
            SegmentV4::parse(&inner)?.decode(o)?;
        } else {
            SegmentV4::parse(&bytes)?.decode(o)?;
        }
    }
    let raw: Vec<u8> = out.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&a[2], raw)?;
    println!(
        "{{\"bits\": {:.4}, \"inner_bits\": {:.4}, \"used\": {:?}}}",
        total as f64 * 8.0 / x.len() as f64,
        inner_total as f64 * 8.0 / x.len() as f64,
        used
    );
    Ok(())
}
