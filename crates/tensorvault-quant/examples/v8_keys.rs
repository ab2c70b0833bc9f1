//! Channel-centred model-coded keys (TQTC v8) against the segment the store writes for a
//! tier-2 KV key block today, on real keys, at today's byte length. Reads `.npy` files
//! of keys (little-endian f32, C order, shape `[heads, tokens, head_dim]`, one file per
//! layer, as `bench/quality/kv_keys_v8.py` writes them), cuts each head into the KV
//! store's blocks of `BLOCK_TOKENS` tokens (the first token of block 0 kept as f16, the
//! attention sink), and codes every block twice:
//!
//! - today: the 5-bit per-channel groups of 128 tokens (`kind::v2_layout` for `kv_key`,
//!   TQTC v2) in the v5 rANS envelope where that is shorter, exactly what a codec-4 KV
//!   cache with `entropy` stores at tier 2;
//! - v8: `segment_v8::encode_to_fit` with `BITS`-bit codes into at most today's length
//!   (with `--centibits C`: the store's `kv_keys_ecsq` budget, the larger of `C / 100`
//!   bits per value and today's length);
//! - v9 (session 16): `segment_v9::encode_to_fit_gamma` (one step per channel, shaped by
//!   the block's RoPE-pair key energy to the power `-GAMMA / 2`, `--gamma`, default 1) in
//!   the same budget as v8.
//!
//! Prints the keys' relative RMSE (`sqrt(sum e^2 / sum x^2)`) and the stored bits per
//! value of each, and writes the decodings next to the inputs' names in `OUT_DIR`
//! (`NAME.today.npy`, `NAME.v8.npy`, `NAME.v9.npy`) for the script to score the
//! attention logits.
//!
//! `cargo run --release -p tensorvault-quant --example v8_keys -- [--today-bits B] [--centibits C] [--gamma G] BITS LANES_LOG2 OUT_DIR FILE.npy...`
//! (`--today-bits 4`: today's tier-3 keys, 4-bit groups, instead of tier 2's 5-bit ones).

use std::time::Instant;

mod common;
use common::{read_npy, Tally};

use tensorvault_quant::kind::{v2_layout, TensorKind};
use tensorvault_quant::segment_v2::encode as v2_encode;
use tensorvault_quant::segment_v5::{decode_any, encode_smallest};
use tensorvault_quant::segment_v8::SegmentV8;
use tensorvault_quant::segment_v8::{decode as v8_decode, encode_to_fit as v8_fit, V8Params};
use tensorvault_quant::segment_v9::{
    decode as v9_decode, encode_to_fit_gamma as v9_fit, SegmentV9,
};

/// Tokens per KV block (the store's KV layout: 32 KiB of f16 at head_dim 64).
const BLOCK_TOKENS: usize = 256;
/// Today's tier-2 keys: bits and group size (`V4_KV_KEY_BITS`, `V4_KV_KEY_GROUP`; tier 3
/// takes 4 bits in the same groups).
const TODAY_BITS: u8 = 5;
const TODAY_GROUP: u32 = 128;

/// `[heads, tokens, head_dim]` from a `.npy` header's `'shape': (a, b, c)`.
fn shape3(header: &str) -> Result<[usize; 3], Box<dyn std::error::Error>> {
    let s = header.split("'shape': (").nth(1).ok_or("no shape")?;
    let dims: Vec<usize> = s
        .split(')')
        .next()
        .ok_or("no shape")?
        .split(',')
        .filter(|d| !d.trim().is_empty())
        .map(|d| d.trim().parse())
        .collect::<Result<_, _>>()?;
    match dims[..] {
        [h, t, d] => Ok([h, t, d]),
        _ => Err(format!("want a 3-D array, got {dims:?}").into()),
    }
}

fn write_npy(path: &std::path::Path, shape: [usize; 3], v: &[f32]) -> std::io::Result<()> {
    let mut h = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}, {}), }}",
        shape[0], shape[1], shape[2]
    );
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(path, out)
}

/// The example's line for one codec.
fn line(t: &Tally) -> String {
    format!(
        "K rel_rmse {:.4}%  b/v {:.4}  encode {:.2} s  decode {:.3} s",
        t.rel_rmse_pct(),
        t.bits_per_value(),
        t.enc.as_secs_f64(),
        t.dec.as_secs_f64(),
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let (mut today_bits, mut centibits, mut gamma) = (TODAY_BITS, None::<usize>, 1.0f64);
    while args.len() >= 2 && args[0].starts_with("--") {
        match args[0].as_str() {
            "--today-bits" => today_bits = args[1].parse()?,
            "--centibits" => centibits = Some(args[1].parse()?),
            "--gamma" => gamma = args[1].parse()?,
            other => return Err(format!("unknown option {other}").into()),
        }
        args.drain(..2);
    }
    let [bits, lanes, out_dir, files @ ..] = &args[..] else {
        return Err("usage: v8_keys [--today-bits B] [--centibits C] [--gamma G] BITS LANES_LOG2 OUT_DIR FILE.npy...".into());
    };
    let (bits, lanes_log2): (u8, u8) = (bits.parse()?, lanes.parse()?);
    let out_dir = std::path::Path::new(out_dir);
    let (mut today, mut v8, mut v9) = (Tally::default(), Tally::default(), Tally::default());
    let (mut fallbacks, mut fallbacks9) = (0usize, 0usize);
    // Distinct side bytes (model tables) per coded block, summed: v8, v9.
    let (mut tables8, mut tables9, mut coded8, mut coded9) = (0usize, 0usize, 0usize, 0usize);
    let distinct = |sides: &[u8]| {
        let mut seen = [false; 256];
        sides.iter().for_each(|&j| seen[usize::from(j)] = true);
        seen.iter().filter(|&&b| b).count()
    };
    let (mut y_today, mut y_v8, mut y_v9) = (Vec::new(), Vec::new(), Vec::new());
    for f in files {
        let (header, x) = read_npy(f)?;
        let shape = shape3(&header)?;
        let [heads, tokens, hd] = shape;
        let width = u16::try_from(hd)?;
        let (mut out_today, mut out_v8) = (vec![0f32; x.len()], vec![0f32; x.len()]);
        let mut out_v9 = vec![0f32; x.len()];
        for h in 0..heads {
            for t0 in (0..tokens).step_by(BLOCK_TOKENS) {
                let rows = BLOCK_TOKENS.min(tokens - t0);
                let at = (h * tokens + t0) * hd;
                let blk = &x[at..at + rows * hd];
                let sink = t0 == 0 && rows > 1;
                let p2 = v2_layout(
                    TensorKind::KvKey,
                    today_bits,
                    TODAY_GROUP,
                    Some(u32::from(width)),
                    sink,
                )?;
                let t = Instant::now();
                let b_today = encode_smallest(v2_encode(&p2, blk)?)?;
                today.enc += t.elapsed();
                let p8 = V8Params {
                    bits,
                    width,
                    raw_rows: u16::from(sink),
                    lanes_log2,
                };
                let budget =
                    centibits.map_or(b_today.len(), |c| (blk.len() * c / 800).max(b_today.len()));
                let t = Instant::now();
                let b_v8 = v8_fit(&p8, blk, budget)?;
                v8.enc += t.elapsed();
                let t = Instant::now();
                decode_any(&b_today, blk.len(), &mut y_today)?;
                today.dec += t.elapsed();
                today.add(blk, &y_today, b_today.len());
                out_today[at..at + blk.len()].copy_from_slice(&y_today);
                let t = Instant::now();
                let b_v9 = v9_fit(&p8, blk, budget, gamma)?;
                v9.enc += t.elapsed();
                if let Some(b_v9) = b_v9 {
                    tables9 += distinct(SegmentV9::parse(&b_v9)?.sides());
                    coded9 += 1;
                    let t = Instant::now();
                    v9_decode(&b_v9, blk.len(), &mut y_v9)?;
                    v9.dec += t.elapsed();
                    v9.add(blk, &y_v9, b_v9.len());
                    out_v9[at..at + blk.len()].copy_from_slice(&y_v9);
                } else {
                    fallbacks9 += 1;
                    v9.add(blk, &y_today, b_today.len());
                    out_v9[at..at + blk.len()].copy_from_slice(&y_today);
                }
                let Some(b_v8) = b_v8 else {
                    // Nothing fits: the store keeps today's segment.
                    fallbacks += 1;
                    v8.add(blk, &y_today, b_today.len());
                    out_v8[at..at + blk.len()].copy_from_slice(&y_today);
                    continue;
                };
                tables8 += distinct(SegmentV8::parse(&b_v8)?.sides());
                coded8 += 1;
                let t = Instant::now();
                v8_decode(&b_v8, blk.len(), &mut y_v8)?;
                v8.dec += t.elapsed();
                v8.add(blk, &y_v8, b_v8.len());
                out_v8[at..at + blk.len()].copy_from_slice(&y_v8);
            }
        }
        let stem = std::path::Path::new(f)
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or("file name")?;
        write_npy(
            &out_dir.join(format!("{stem}.today.npy")),
            shape,
            &out_today,
        )?;
        write_npy(&out_dir.join(format!("{stem}.v8.npy")), shape, &out_v8)?;
        write_npy(&out_dir.join(format!("{stem}.v9.npy")), shape, &out_v9)?;
    }
    println!("{} files, {} values", files.len(), today.values);
    println!(
        "  today ({today_bits}-bit groups of {TODAY_GROUP}, v5 envelope): {}",
        line(&today)
    );
    println!(
        "  v8 k={bits} lanes 2^{lanes_log2}, in the budget: {}  (blocks kept as today: {fallbacks})",
        line(&v8)
    );
    println!(
        "  v9 k={bits} gamma {gamma}, in the same budget: {}  (blocks kept as today: {fallbacks9})",
        line(&v9)
    );
    println!(
        "  distinct model tables per block: v8 {:.1}, v9 {:.1}",
        tables8 as f64 / coded8.max(1) as f64,
        tables9 as f64 / coded9.max(1) as f64
    );
    Ok(())
}
