//! Cost of one tiering step on a large index (issue 6 "Performance"): scoring every block
//! and building the plan (eviction heap, hysteresis) for N blocks, then migration
//! throughput. In memory (BufferBlockIO + MemMetaLog), small blocks so 1M fit in RAM.
//!
//! `cargo run --release -p tensorvault-store --example maintain_bench -- [BLOCKS] [ROUNDS]`

use std::sync::Arc;
use std::time::Instant;

use tensorvault_store::{
    BufferBlockIO, Catalog, CollectionConfig, DType, Durability, ManualClock, MemMetaLog,
    StoreConfig, TensorStore, Tier,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let blocks: usize = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let elems = 64u32;
    let cfg = StoreConfig {
        collection: CollectionConfig::with_block_elems(elems),
        durability: Durability::Os,
        access_flush_every: 0,
        ..StoreConfig::default()
    };
    let geo = cfg.collection;
    let clock = Arc::new(ManualClock::new(1));
    let s = TensorStore::open(
        "bench",
        "maintain",
        clock.clone(),
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )?;
    let t = Instant::now();
    let per_tensor = 4096usize;
    let data: Vec<u8> = (0..per_tensor * elems as usize)
        .flat_map(|i| ((i as f32) * 0.01).sin().to_le_bytes())
        .collect();
    for i in 0..blocks.div_ceil(per_tensor) {
        let n = per_tensor.min(blocks - i * per_tensor);
        let shape = [(n as u32) * elems];
        s.put_tensor(
            &format!("t{i}"),
            DType::F32,
            &shape,
            &data[..n * elems as usize * 4],
            Tier::Tier1,
        )?;
    }
    println!(
        "built {blocks} Tier1 blocks of {elems} values in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // Everything is cold by now: a plan-only step (budget 0) scores and plans all blocks.
    clock.advance(1000);
    let mut plan_ms = Vec::new();
    for _ in 0..rounds {
        let r = s.maintain(0)?;
        plan_ms.push(r.plan_nanos as f64 / 1e6);
        assert_eq!(r.scored, blocks);
    }
    plan_ms.sort_by(f64::total_cmp);
    println!(
        "score + plan of {blocks} blocks (budget 0): median {:.1} ms, min {:.1} ms over {rounds} rounds",
        plan_ms[rounds / 2],
        plan_ms[0]
    );
    let moves = 20_000.min(blocks);
    let t = Instant::now();
    let r = s.maintain(moves)?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "maintain({moves}): {} moves (tier1 -> tier2) in {:.2} s = {:.0} blocks/s, {:.1} us per move incl. planning",
        r.moves.len(),
        secs,
        r.moves.len() as f64 / secs,
        secs * 1e6 / r.moves.len().max(1) as f64
    );
    Ok(())
}
