//! The seeded workload of the crash suites (SIGKILL in `crash.rs`, power cut in
//! `power_cut.rs`) and the model they check a reopened store against.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::common::{self, block_data, mix, store_config, Oracle, Rng, BLOCK_ELEMS};
use tensorvault_store::{tensor_id, BlockIO, BlockInfo, BlockKey, DType, DirStore, StoreErr, Tier};

pub const TENANT: &str = "crash";
pub const COLL: &str = "c";
/// Raw keys: tensor ids 1..=RAW_TENSORS, blocks 0..RAW_BLOCKS.
pub const RAW_TENSORS: u64 = 5;
pub const RAW_BLOCKS: u64 = 6;
/// Tensors written whole with put_tensor.
pub const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];
/// Tensor id of the canary block the parent writes after each reopen.
pub const CANARY: u128 = 0xC0FFEE;
/// Longest put_tensor, in elements (4 blocks, the last partial).
pub const MAX_TENSOR_ELEMS: u64 = 3 * BLOCK_ELEMS as u64 + 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Mixed,
    Migrate,
    Compact,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Mixed => "mixed",
            Mode::Migrate => "migrate",
            Mode::Compact => "compact",
        }
    }

    pub fn parse(s: &str) -> Self {
        match s {
            "mixed" => Mode::Mixed,
            "migrate" => Mode::Migrate,
            "compact" => Mode::Compact,
            other => panic!("unknown crash mode {other:?}"),
        }
    }
}

/// One state-changing operation of the child.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Put {
        key: BlockKey,
        tier: Tier,
        gen: u64,
        n: u64,
    },
    PutTensor {
        name: usize,
        tier: Tier,
        gen: u64,
        n: u64,
    },
    Migrate {
        key: BlockKey,
        tier: Tier,
    },
    Delete {
        key: BlockKey,
    },
    Compact,
}

impl Op {
    pub fn encode(&self) -> String {
        match self {
            Op::Put { key, tier, gen, n } => format!(
                "PUT {:x} {} {} {gen} {n}",
                key.tensor_id,
                key.block_index,
                tier.index()
            ),
            Op::PutTensor { name, tier, gen, n } => {
                format!("TPUT {name} {} {gen} {n}", tier.index())
            }
            Op::Migrate { key, tier } => format!(
                "MIG {:x} {} {}",
                key.tensor_id,
                key.block_index,
                tier.index()
            ),
            Op::Delete { key } => format!("DEL {:x} {}", key.tensor_id, key.block_index),
            Op::Compact => "COMPACT".into(),
        }
    }

    pub fn decode(words: &[&str]) -> Self {
        let num = |i: usize| -> u64 { words[i].parse().expect("number") };
        let key = || {
            BlockKey::new(
                u128::from_str_radix(words[1], 16).expect("hex tensor id"),
                words[2].parse().expect("block index"),
            )
        };
        let tier = |i: usize| Tier::ALL[num(i) as usize];
        match words[0] {
            "PUT" => Op::Put {
                key: key(),
                tier: tier(3),
                gen: num(4),
                n: num(5),
            },
            "TPUT" => Op::PutTensor {
                name: num(1) as usize,
                tier: tier(2),
                gen: num(3),
                n: num(4),
            },
            "MIG" => Op::Migrate {
                key: key(),
                tier: tier(3),
            },
            "DEL" => Op::Delete { key: key() },
            "COMPACT" => Op::Compact,
            other => panic!("unknown op {other:?}"),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Op::Put { .. } => "put_block",
            Op::PutTensor { .. } => "put_tensor",
            Op::Migrate { .. } => "migrate_block",
            Op::Delete { .. } => "delete_block",
            Op::Compact => "compact",
        }
    }
}

/// Content of one write: a function of the suite seed and the write's generation.
pub fn data_for(seed: u64, gen: u64, n: u64) -> Vec<u8> {
    block_data(mix(seed ^ mix(gen)), n as usize)
}

pub fn tensor_key(name: usize, block: u32) -> BlockKey {
    BlockKey::new(tensor_id(TENANT, COLL, NAMES[name], 0), block)
}

pub fn blocks_for(n: u64) -> u64 {
    n.div_ceil(u64::from(BLOCK_ELEMS))
}

/// What the workload does next.
pub enum Step {
    /// A state-changing operation.
    Write(Op),
    /// A read of this key (it feeds Access records into the log).
    Read(Option<BlockKey>),
}

/// Draw the next step of `mode` for the store's current contents.
///
/// # Panics
/// If the store cannot list its blocks.
pub fn choose(store: &DirStore, rng: &mut Rng, mode: Mode, gen: u64) -> Result<Step, StoreErr> {
    let live: Vec<BlockKey> = store.blocks()?.iter().map(|m| m.key).collect();
    let roll = rng.below(100);
    let (p_put, p_tput, p_mig, p_del, p_compact) = match mode {
        Mode::Mixed => (35, 15, 20, 15, 3),
        Mode::Migrate => (12, 3, 75, 5, 0),
        Mode::Compact => (35, 15, 15, 10, 20),
    };
    let random_key = |rng: &mut Rng| {
        BlockKey::new(
            u128::from(rng.range(1, RAW_TENSORS)),
            rng.below(RAW_BLOCKS) as u32,
        )
    };
    let put = |rng: &mut Rng| Op::Put {
        key: random_key(rng),
        tier: rng.tier(),
        gen,
        n: rng.range(1, u64::from(BLOCK_ELEMS)),
    };
    let op = if roll < p_put || (live.is_empty() && roll < p_put + p_tput + p_mig) {
        put(rng)
    } else if roll < p_put + p_tput {
        Op::PutTensor {
            name: rng.below(NAMES.len() as u64) as usize,
            tier: rng.tier(),
            gen,
            n: rng.range(1, MAX_TENSOR_ELEMS),
        }
    } else if roll < p_put + p_tput + p_mig {
        let key = live[rng.below(live.len() as u64) as usize];
        let cur = store.meta(&key)?.expect("live").tier;
        Op::Migrate {
            key,
            tier: rng.other_tier(cur),
        }
    } else if roll < p_put + p_tput + p_mig + p_del {
        let key = if !live.is_empty() && rng.pct(80) {
            live[rng.below(live.len() as u64) as usize]
        } else {
            random_key(rng)
        };
        Op::Delete { key }
    } else if roll < p_put + p_tput + p_mig + p_del + p_compact {
        Op::Compact
    } else {
        return Ok(Step::Read(
            live.get(rng.below(live.len().max(1) as u64) as usize)
                .copied(),
        ));
    };
    Ok(Step::Write(op))
}

/// Carry out `op` (data derived from `seed`).
///
/// # Errors
/// The store's.
pub fn perform(store: &DirStore, op: &Op, seed: u64) -> Result<(), StoreErr> {
    match op {
        Op::Put { key, tier, gen, n } => {
            let data = data_for(seed, *gen, *n);
            let shape = [*n as u32];
            store.put_block(*key, *tier, &BlockInfo::new(DType::F32, &shape), &data)
        }
        Op::PutTensor { name, tier, gen, n } => {
            let data = data_for(seed, *gen, *n);
            store
                .put_tensor(NAMES[*name], DType::F32, &[*n as u32], &data, *tier)
                .map(|_| ())
        }
        Op::Migrate { key, tier } => store.migrate_block(key, *tier),
        Op::Delete { key } => store.delete_block(key).map(|_| ()),
        Op::Compact => store.compact(),
    }
}

// ----------------------------------------------------------------------------- model

/// What one key is expected to hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub tier: Tier,
    pub shape: Vec<u32>,
    /// What `get_block` returns.
    pub bytes: Vec<u8>,
    /// Generation of the write that created it (migration keeps it).
    pub origin: u64,
}

pub type Model = BTreeMap<BlockKey, Expect>;

/// The per-key effect of `op` applied to `model` (keys not listed are unchanged).
pub fn effect(
    model: &Model,
    op: &Op,
    seed: u64,
    oracle: &mut Oracle,
) -> Vec<(BlockKey, Option<Expect>)> {
    match op {
        Op::Put { key, tier, gen, n } => {
            let data = data_for(seed, *gen, *n);
            vec![(
                *key,
                Some(Expect {
                    tier: *tier,
                    shape: vec![*n as u32],
                    bytes: oracle.roundtrip(*tier, &data),
                    origin: *gen,
                }),
            )]
        }
        Op::PutTensor { name, tier, gen, n } => {
            let data = data_for(seed, *gen, *n);
            let step = BLOCK_ELEMS as usize * 4;
            let mut out: Vec<(BlockKey, Option<Expect>)> = data
                .chunks(step)
                .enumerate()
                .map(|(i, chunk)| {
                    (
                        tensor_key(*name, i as u32),
                        Some(Expect {
                            tier: *tier,
                            shape: vec![*n as u32],
                            bytes: oracle.roundtrip(*tier, chunk),
                            origin: *gen,
                        }),
                    )
                })
                .collect();
            // Blocks of a longer earlier version (as block 0 describes it) are deleted.
            let old = model
                .get(&tensor_key(*name, 0))
                .map_or(0, |e| blocks_for(u64::from(e.shape[0])));
            for i in blocks_for(*n)..old {
                out.push((tensor_key(*name, i as u32), None));
            }
            out
        }
        Op::Migrate { key, tier } => match model.get(key) {
            Some(cur) if cur.tier != *tier => vec![(
                *key,
                Some(Expect {
                    tier: *tier,
                    bytes: oracle.roundtrip(*tier, &cur.bytes),
                    ..cur.clone()
                }),
            )],
            _ => Vec::new(),
        },
        Op::Delete { key } => vec![(*key, None)],
        Op::Compact => Vec::new(),
    }
}

pub fn apply(model: &mut Model, changes: Vec<(BlockKey, Option<Expect>)>) {
    for (k, v) in changes {
        match v {
            Some(e) => model.insert(k, e),
            None => model.remove(&k),
        };
    }
}

/// Counters reported at the end of a test.
#[derive(Default, Debug)]
pub struct Tally {
    pub kills: u64,
    pub acked_ops: u64,
    pub in_flight: BTreeMap<&'static str, u64>,
    pub in_flight_applied: u64,
    pub killed_before_ready: u64,
    /// Power-cut suite: bytes of the log the acknowledged operations covered (records
    /// skipped beyond them are lost sectors of the unacknowledged tail).
    pub acked_log_bytes: Option<u64>,
    /// Records replay skipped in unacknowledged tails.
    pub lost_tail_records: u64,
    /// Records open ignored (including blocks of an unfinished last commit rolled back).
    pub ignored_at_open: u64,
}

/// What the store holds for `key`: `None` if absent; panics on any other error.
pub fn observe(store: &DirStore, key: &BlockKey, ctx: &str) -> Option<Expect> {
    let mut out = Vec::new();
    match store.get_block(key, &mut out) {
        Ok(m) => Some(Expect {
            tier: m.tier,
            shape: m.shape().to_vec(),
            bytes: out,
            origin: 0,
        }),
        Err(StoreErr::NotFound { .. }) => None,
        Err(e) => panic!("{ctx}: block {key}: {e}"),
    }
}

pub fn same(obs: &Option<Expect>, want: Option<&Expect>) -> bool {
    match (obs, want) {
        (None, None) => true,
        (Some(o), Some(w)) => o.tier == w.tier && o.shape == w.shape && o.bytes == w.bytes,
        _ => false,
    }
}

pub fn describe(e: Option<&Expect>) -> String {
    match e {
        None => "absent".into(),
        Some(e) => format!(
            "{} shape {:?}, {} bytes, first f32 {:?}",
            e.tier,
            e.shape,
            e.bytes.len(),
            e.bytes
                .get(..4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        ),
    }
}

/// Reopen the store after a kill and check it against the model (adopting, per key,
/// the outcome of the in-flight operation). Then write the canary and close.
#[allow(clippy::too_many_arguments)]
pub fn check_after_kill(
    root: &Path,
    model: &mut Model,
    pending: Option<&Op>,
    seed: u64,
    run: u64,
    oracle: &mut Oracle,
    tally: &mut Tally,
    ctx: &str,
) {
    let alternatives: BTreeMap<BlockKey, Option<Expect>> = match pending {
        Some(op) => effect(model, op, seed, oracle).into_iter().collect(),
        None => BTreeMap::new(),
    };
    let store = DirStore::open_path(root, TENANT, COLL, store_config(), true)
        .unwrap_or_else(|e| panic!("{ctx}: reopen after kill: {e}"));
    let (replay, ignored) = store.replay_stats();
    tally.ignored_at_open += ignored;
    match tally.acked_log_bytes {
        // SIGKILL: the page cache keeps every write, so no record is ever lost.
        None => assert_eq!(
            replay.skipped_total, 0,
            "{ctx}: replay skipped records in the middle of the log: {:?}",
            replay.skipped
        ),
        // Power cut: sectors of the unacknowledged tail may never have reached the disk
        // (they read as zeros) while later ones did; replay skips them. Never inside the
        // acknowledged prefix.
        Some(acked) => {
            assert!(
                replay.skipped.iter().all(|(off, _)| *off >= acked),
                "{ctx}: replay skipped records inside the acknowledged {acked} bytes of the log: {:?}",
                replay.skipped
            );
            tally.lost_tail_records += replay.skipped_total;
        }
    }
    let compact_tmp = common::coll_dir(root, TENANT, COLL).join("meta.log.compact");
    assert!(
        !compact_tmp.exists(),
        "{ctx}: a compaction temp file survived the reopen"
    );
    let live: BTreeSet<BlockKey> = store
        .blocks()
        .expect("blocks")
        .iter()
        .map(|m| m.key)
        .collect();
    let keys: BTreeSet<BlockKey> = live
        .iter()
        .chain(model.keys())
        .chain(alternatives.keys())
        .copied()
        .collect();
    let mut applied = false;
    for key in keys {
        let obs = observe(&store, &key, ctx);
        if same(&obs, model.get(&key)) {
            continue;
        }
        match alternatives.get(&key) {
            Some(alt) if same(&obs, alt.as_ref()) => {
                applied = true;
                match alt {
                    Some(e) => model.insert(key, e.clone()),
                    None => model.remove(&key),
                };
            }
            alt => panic!(
                "{ctx}: block {key} reads as {}, acknowledged state {}, in-flight {:?} would give {}",
                describe(obs.as_ref()),
                describe(model.get(&key)),
                pending.map(Op::kind),
                alt.map_or("no change".into(), |a| describe(a.as_ref())),
            ),
        }
    }
    if applied {
        tally.in_flight_applied += 1;
    }
    // Exactly one tier holds each block: the bytes live per tier (slots or extents) are
    // exactly those the index's blocks take (no leaked, no shared slot or extent).
    let counts = store.tier_counts().expect("tier counts");
    let mut taken = [0u64; 4];
    for m in store.blocks().expect("blocks") {
        let unit = u64::from(store.block_io().usage(m.tier).alloc_unit);
        taken[m.tier.index()] += u64::from(m.data_len).div_ceil(unit) * unit;
    }
    for t in Tier::ALL {
        let u = store.block_io().usage(t);
        assert_eq!(
            u.live_bytes,
            taken[t.index()],
            "{ctx}: {t} has {} live bytes for {} blocks taking {} (leaked or shared)",
            u.live_bytes,
            counts[t.index()],
            taken[t.index()]
        );
    }
    let report = store.verify().expect("verify");
    assert!(
        report.problems.is_empty(),
        "{ctx}: verify reports {:?}",
        report.problems
    );
    assert_eq!(report.checked, model.len() as u64, "{ctx}: verify count");
    // Names survive; whole tensors whose blocks all come from one put read back.
    let infos = store.tensors().expect("tensors");
    for (i, name) in NAMES.iter().enumerate() {
        let Some(first) = model.get(&tensor_key(i, 0)) else {
            continue;
        };
        let id = tensor_key(i, 0).tensor_id;
        let info = infos.iter().find(|t| t.tensor_id == id);
        assert_eq!(
            info.and_then(|t| t.name.as_deref()),
            Some(*name),
            "{ctx}: tensor {name} lost its name"
        );
        let nb = blocks_for(u64::from(first.shape[0])) as u32;
        let parts: Vec<&Expect> = (0..nb)
            .filter_map(|b| model.get(&tensor_key(i, b)))
            .filter(|e| e.origin == first.origin)
            .collect();
        if parts.len() == nb as usize {
            let t = store
                .get_tensor(name)
                .unwrap_or_else(|e| panic!("{ctx}: get_tensor({name}): {e}"));
            let want: Vec<u8> = parts.iter().flat_map(|e| e.bytes.iter().copied()).collect();
            assert!(t.data == want, "{ctx}: get_tensor({name}) differs");
        }
    }
    // The store accepts new writes; the next round checks this one too.
    let key = BlockKey::new(CANARY, (run % 8) as u32);
    let tier = Tier::ALL[(run % 4) as usize];
    let gen = u64::MAX - run;
    let n = 1 + run % u64::from(BLOCK_ELEMS);
    let op = Op::Put { key, tier, gen, n };
    let data = data_for(seed, gen, n);
    store
        .put_block(key, tier, &BlockInfo::new(DType::F32, &[n as u32]), &data)
        .unwrap_or_else(|e| panic!("{ctx}: write after reopen: {e}"));
    let ch = effect(model, &op, seed, oracle);
    apply(model, ch);
    assert!(
        same(&observe(&store, &key, ctx), model.get(&key)),
        "{ctx}: canary reads back wrong"
    );
    store
        .close()
        .unwrap_or_else(|e| panic!("{ctx}: close: {e}"));
}
