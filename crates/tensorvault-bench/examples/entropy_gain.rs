//! Bits per value of real quantized codes before and after entropy coding (TQTC v5,
//! issue 23 item 3), block by block as the store lays them out.
//!
//! ```text
//! bench/quality/.venv/bin/python bench/quality/entropy_dump.py target/entropy-data
//! cargo run -p tensorvault-bench --release --example entropy_gain -- target/entropy-data
//! ```
//!
//! Inputs (`entropy_dump.py`): `kv_<text>.f32`, SmolLM2-135M's K/V cache as `[tensors,
//! tokens, 64]` (keys and values alternating), and `tokens.f32`, SmolLM2's token table
//! `[49152, 576]`, with `manifest.json`. Each KV tensor is cut into the KV collection's
//! blocks (`CollectionConfig::kv_cache(64)`: 256 tokens) and the token table into the
//! default 4096-value blocks; each block is encoded with the layout the store picks
//! (mirrored from `tensorvault-store`'s `codec::v2_layout` / `v3_layout`, which are not
//! public) and then wrapped with `segment_v5::encode_smallest`. Printed per set, codec and
//! tier: bits/value of the inner payloads, of the stored payloads with v5, the fixed slot
//! the store allocates today and a slot that follows the size (rounded to `slot_align`),
//! the share of blocks that entropy coding shrank, and wall-clock encode / decode cost per
//! value (one pass, not criterion: see `benches/entropy.rs` in tensorvault-quant).
//! The last column is the product's own figure: the same tensors put into an in-memory
//! `TensorStore` created with `entropy: true`, `stats().payload_bytes` of the tier per
//! value (it must equal the v5 column: the mirror and the store agree).

use std::path::Path;
use std::time::Instant;

use std::sync::Arc;
use tensorvault_quant::kind::{self as qkind, v3_block};
use tensorvault_quant::segment_rot;
use tensorvault_quant::segment_v2::{self, Axis, V2Params};
use tensorvault_quant::segment_v5::{decode_any, encode_smallest};
use tensorvault_quant::TensorKind;

use tensorvault_store::{
    BlockInfo, BufferBlockIO, Catalog, CollectionConfig, DType, Durability, ManualClock,
    MemMetaLog, StoreConfig, TensorStore, Tier, CODEC_V3,
};

type Err = Box<dyn std::error::Error>;

fn read_f32(path: &Path) -> Result<Vec<f32>, Err> {
    let b = std::fs::read(path)?;
    Ok(b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// `codec::v2_layout` of tensorvault-store, for a tensor of rows of `width`.
fn v2_params(
    geo: &CollectionConfig,
    tier: Tier,
    kind: TensorKind,
    width: u32,
    block: u32,
    len: usize,
) -> V2Params {
    let bits = geo.bits(tier).unwrap_or(8);
    let g = geo.group_size(tier).unwrap_or(64).max(1);
    let layout = |w: Option<u32>, sink: bool| {
        qkind::v2_layout(kind, bits, g, w, sink).unwrap_or(V2Params {
            bits,
            group_log2: g.trailing_zeros() as u8,
            axis: Axis::Flat,
            width: 1,
            raw_rows: 0,
            clip_search: false,
        })
    };
    let flat = layout(None, false);
    let start = u64::from(block) * u64::from(geo.block_elems);
    let rows_ok = start % u64::from(width) == 0
        && len.is_multiple_of(width as usize)
        && u16::try_from(width).is_ok();
    if !rows_ok {
        return flat;
    }
    let sink = block == 0 && u32::from(geo.sink_values) >= width;
    let want = layout(Some(width), sink);
    if want
        .encoded_len(len)
        .is_ok_and(|l| l as u64 <= geo.max_payload_len(tier))
    {
        want
    } else {
        flat
    }
}

/// The block's payload as the store writes it (codec v3 rotates embeddings where
/// `codec::v3_layout` says so).
fn encode_block(
    geo: &CollectionConfig,
    tier: Tier,
    kind: TensorKind,
    width: u32,
    block: u32,
    x: &[f32],
) -> Result<Vec<u8>, Err> {
    if geo.codec == CODEC_V3 {
        if let (Some(bits), Some(blog)) = (geo.bits(tier), v3_block(width)) {
            let b = 1u64 << blog;
            let start = u64::from(block) * u64::from(geo.block_elems);
            if start % b == 0 && (x.len() as u64).is_multiple_of(b) {
                let whole = start % u64::from(width) == 0 && x.len().is_multiple_of(width as usize);
                let sink = block == 0 && u32::from(geo.sink_values) >= width;
                if let Some(p) = qkind::v3_layout(kind, bits, Some(width), whole, sink) {
                    if p.encoded_len(x.len())
                        .is_ok_and(|l| l as u64 <= geo.max_payload_len(tier))
                    {
                        return Ok(segment_rot::encode(&p, x)?);
                    }
                }
            }
        }
    }
    Ok(segment_v2::encode(
        &v2_params(geo, tier, kind, width, block, x.len()),
        x,
    )?)
}

#[derive(Default)]
struct Tally {
    values: u64,
    inner: u64,
    stored: u64,
    slot_fixed: u64,
    slot_follow: u64,
    store_payload: u64,
    blocks: u64,
    wrapped: u64,
    enc_s: f64,
    dec_inner_s: f64,
    dec_v5_s: f64,
}

impl Tally {
    fn row(&self, label: &str) {
        let bv = |b: u64| b as f64 * 8.0 / self.values as f64;
        let ns = |s: f64| s * 1e9 / self.values as f64;
        println!(
            "| {label} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {}/{} | {:.2} | {:.2} | {:.2} | {:.3} |",
            bv(self.inner),
            bv(self.stored),
            bv(self.inner) - bv(self.stored),
            bv(self.slot_fixed),
            bv(self.slot_follow),
            self.wrapped,
            self.blocks,
            ns(self.enc_s),
            ns(self.dec_inner_s),
            ns(self.dec_v5_s),
            bv(self.store_payload),
        );
    }
}

fn run(
    geo: &CollectionConfig,
    tier: Tier,
    tensors: &[(TensorKind, &[f32])],
    width: u32,
) -> Result<Tally, Err> {
    let mut t = Tally::default();
    let be = geo.block_elems as usize;
    let align = u64::from(geo.slot_align);
    let mut out = Vec::new();
    for &(kind, x) in tensors {
        for (bi, blk) in x.chunks(be).enumerate() {
            let inner = encode_block(geo, tier, kind, width, bi as u32, blk)?;
            let t0 = Instant::now();
            let stored = encode_smallest(inner.clone())?;
            t.enc_s += t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            decode_any(&inner, be, &mut out)?;
            t.dec_inner_s += t1.elapsed().as_secs_f64();
            let want: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
            let t2 = Instant::now();
            decode_any(&stored, be, &mut out)?;
            t.dec_v5_s += t2.elapsed().as_secs_f64();
            assert!(
                out.iter().map(|v| v.to_bits()).eq(want),
                "v5 must be lossless"
            );
            t.values += blk.len() as u64;
            t.inner += inner.len() as u64;
            t.stored += stored.len() as u64;
            t.slot_fixed += u64::from(geo.slot_len(tier));
            t.slot_follow += (stored.len() as u64).div_ceil(align) * align;
            t.blocks += 1;
            t.wrapped += u64::from(stored.len() < inner.len());
        }
    }
    t.store_payload = through_store(geo, tier, tensors, width, true)?;
    Ok(t)
}

/// Put every tensor (`[len / width, width]`, f16 when the collection's Tier0 is f16, as
/// a KV cache is) into an in-memory store created with (or without) the entropy flag;
/// the tier's `payload_bytes`.
fn through_store(
    geo: &CollectionConfig,
    tier: Tier,
    tensors: &[(TensorKind, &[f32])],
    width: u32,
    entropy: bool,
) -> Result<u64, Err> {
    let geo = CollectionConfig { entropy, ..*geo };
    let cfg = StoreConfig {
        collection: geo,
        durability: Durability::Os,
        ..StoreConfig::default()
    };
    let s = TensorStore::open(
        "t",
        "c",
        Arc::new(ManualClock::new(1)),
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )?;
    for (i, &(kind, x)) in tensors.iter().enumerate() {
        let shape = [(x.len() / width as usize) as u32, width];
        let (dtype, bytes): (DType, Vec<u8>) = if geo.tier0_elem_bytes == 2 {
            (
                DType::F16,
                x.iter()
                    .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                    .collect(),
            )
        } else {
            (DType::F32, x.iter().flat_map(|v| v.to_le_bytes()).collect())
        };
        let info = BlockInfo::new(dtype, &shape).with_kind(kind);
        s.put_tensor_with(&format!("t{i}"), &info, &bytes, tier)?;
    }
    Ok(s.stats()?.payload_bytes[tier as usize])
}

fn main() -> Result<(), Err> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: entropy_gain DATA_DIR")?;
    let dir = Path::new(&dir);
    let man: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json"))?)?;
    println!("| set, codec, tier | inner b/v | v5 b/v | saved | fixed slot b/v | size-following slot b/v | blocks coded | encode ns/v | decode inner ns/v | decode v5 ns/v | store payload_bytes b/v |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let tiers = [Tier::Tier1, Tier::Tier2, Tier::Tier3];
    if let Some(kv) = man["kv"].as_object() {
        let geo = CollectionConfig::kv_cache(64)?;
        for (text, shape) in kv {
            let shape: Vec<usize> = shape
                .as_array()
                .ok_or("shape")?
                .iter()
                .filter_map(|v| v.as_u64())
                .map(|v| v as usize)
                .collect();
            let x = read_f32(&dir.join(format!("kv_{text}.f32")))?;
            let per = shape[1] * shape[2];
            for (kind, name) in [(TensorKind::KvKey, "K"), (TensorKind::KvValue, "V")] {
                let skip = usize::from(kind == TensorKind::KvValue);
                let tensors: Vec<(TensorKind, &[f32])> = x
                    .chunks(per)
                    .skip(skip)
                    .step_by(2)
                    .map(|c| (kind, c))
                    .collect();
                for tier in tiers {
                    run(&geo, tier, &tensors, 64)?
                        .row(&format!("KV {name} {text}, codec 2, tier {}", tier as u8));
                }
            }
        }
    }
    // kv-tier3's codec 4 KV layout (keys at their own widths, 4 bits at tier 3; values
    // rotated at 3 bits), through the store only: payload bits/value without and with
    // the entropy flag, keys and values together.
    if let Some(kv) = man["kv"].as_object() {
        let geo = CollectionConfig::kv_cache(64)?.with_codec_v4();
        println!();
        println!("| KV codec 4 (with_codec_v4), text, tier | K b/v | K entropy | V b/v | V entropy | K+V b/v | K+V entropy | fixed slot b/v |");
        println!("|---|---|---|---|---|---|---|---|");
        for (text, shape) in kv {
            let shape: Vec<usize> = shape
                .as_array()
                .ok_or("shape")?
                .iter()
                .filter_map(|v| v.as_u64())
                .map(|v| v as usize)
                .collect();
            let x = read_f32(&dir.join(format!("kv_{text}.f32")))?;
            let per = shape[1] * shape[2];
            let half = (x.len() / 2) as f64;
            let ks: Vec<(TensorKind, &[f32])> = x
                .chunks(per)
                .step_by(2)
                .map(|c| (TensorKind::KvKey, c))
                .collect();
            let vs: Vec<(TensorKind, &[f32])> = x
                .chunks(per)
                .skip(1)
                .step_by(2)
                .map(|c| (TensorKind::KvValue, c))
                .collect();
            for tier in tiers {
                let bv = |b: u64, n: f64| b as f64 * 8.0 / n;
                let (k0, k1) = (
                    through_store(&geo, tier, &ks, 64, false)?,
                    through_store(&geo, tier, &ks, 64, true)?,
                );
                let (v0, v1) = (
                    through_store(&geo, tier, &vs, 64, false)?,
                    through_store(&geo, tier, &vs, 64, true)?,
                );
                let blocks = (ks.len() + vs.len()) as u64
                    * (per as u64).div_ceil(u64::from(geo.block_elems));
                println!(
                    "| {text}, tier {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    tier as u8,
                    bv(k0, half),
                    bv(k1, half),
                    bv(v0, half),
                    bv(v1, half),
                    bv(k0 + v0, 2.0 * half),
                    bv(k1 + v1, 2.0 * half),
                    bv(blocks * u64::from(geo.slot_len(tier)), 2.0 * half),
                );
            }
        }
        println!();
    }
    if let Some(shape) = man["tokens"].as_array() {
        let width = shape
            .get(1)
            .and_then(|v| v.as_u64())
            .ok_or("tokens shape")? as u32;
        let x = read_f32(&dir.join("tokens.f32"))?;
        for codec in [2u8, 3] {
            let geo = CollectionConfig {
                codec,
                ..CollectionConfig::default()
            };
            for tier in tiers {
                run(&geo, tier, &[(TensorKind::Embedding, &x)], width)?
                    .row(&format!("token table, codec {codec}, tier {}", tier as u8));
            }
        }
    }
    Ok(())
}
