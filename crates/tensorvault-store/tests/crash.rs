//! Crash suite (issue 5, "Reliability"): a writer child process is killed with SIGKILL
//! at random moments, the store is reopened and checked against a model of what the
//! child acknowledged.
//!
//! The child is this test binary itself, re-executed with `--exact crash_child --ignored`
//! and `TV_CRASH_CHILD=<root>`. It opens a directory store under
//! `Durability::EveryWrite` and loops over seeded operations (put_block, put_tensor,
//! migrate_block, delete_block, reads, compact). Before each state-changing call it
//! prints `TVC I <id> <op>` and after the call returned `TVC A <id>`, flushed. The parent
//! replays those lines into a model (expected tier, shape and decoded bytes per key, the
//! bytes coming from an in-memory [`Oracle`] store), kills the child, reopens and checks:
//!
//! - every acknowledged write reads back exactly (bit-exact in Tier0, the codec's decode
//!   of the same data in quantized tiers), acknowledged deletes stay deleted;
//! - the one operation in flight at the kill has, per key, either fully happened or not
//!   at all: no other content, no extra key, never a `Corruption` error;
//! - a migrated block lives in exactly one tier: every tier file has exactly as many
//!   live slots as the index has blocks in that tier (no leaked, no shared slot);
//! - replay skipped no record in the middle of the log, `verify()` is clean, no
//!   compaction temp file is left, tensors keep their names, whole tensors read back;
//! - the store accepts a new write (which the next round checks too).
//!
//! Default: 8 kills over three tests. `TV_STORE_LONG=1`: 240 kills. `TV_STORE_SEED`
//! overrides the seeds (each test prints its seed).
#![cfg(feature = "mmap")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{block_data, long_mode, mix, seed_or, store_config, Oracle, Rng, BLOCK_ELEMS};
use tensorvault_store::{
    tensor_id, BlockIO, BlockInfo, BlockKey, DType, DirStore, StoreConfig, StoreErr, Tier,
};

const CHILD_ENV: &str = "TV_CRASH_CHILD";
const TENANT: &str = "crash";
const COLL: &str = "c";
/// Raw keys: tensor ids 1..=RAW_TENSORS, blocks 0..RAW_BLOCKS.
const RAW_TENSORS: u64 = 5;
const RAW_BLOCKS: u64 = 6;
/// Tensors written whole with put_tensor.
const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];
/// Tensor id of the canary block the parent writes after each reopen.
const CANARY: u128 = 0xC0FFEE;
/// Longest put_tensor, in elements (4 blocks, the last partial).
const MAX_TENSOR_ELEMS: u64 = 3 * BLOCK_ELEMS as u64 + 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Mixed,
    Migrate,
    Compact,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Mixed => "mixed",
            Mode::Migrate => "migrate",
            Mode::Compact => "compact",
        }
    }

    fn parse(s: &str) -> Self {
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
enum Op {
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
    fn encode(&self) -> String {
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

    fn decode(words: &[&str]) -> Self {
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

    fn kind(&self) -> &'static str {
        match self {
            Op::Put { .. } => "put_block",
            Op::PutTensor { .. } => "put_tensor",
            Op::Migrate { .. } => "migrate_block",
            Op::Delete { .. } => "delete_block",
            Op::Compact => "compact",
        }
    }
}

/// The protocol part of a child's stdout line (after `TVC `), if it is one.
fn tvc(line: &str) -> Option<&str> {
    line.find("TVC ").map(|i| &line[i + 4..])
}

/// Content of one write: a function of the suite seed and the write's generation.
fn data_for(seed: u64, gen: u64, n: u64) -> Vec<u8> {
    block_data(mix(seed ^ mix(gen)), n as usize)
}

fn tensor_key(name: usize, block: u32) -> BlockKey {
    BlockKey::new(tensor_id(TENANT, COLL, NAMES[name], 0), block)
}

fn blocks_for(n: u64) -> u64 {
    n.div_ceil(u64::from(BLOCK_ELEMS))
}

fn child_config() -> StoreConfig {
    store_config()
}

// ------------------------------------------------------------------------------ child

/// Entry point of the writer child; does nothing unless `TV_CRASH_CHILD` is set.
#[test]
#[ignore = "the crash suite's writer child process; run by the crash tests"]
fn crash_child() {
    let Ok(root) = std::env::var(CHILD_ENV) else {
        return;
    };
    let env_u64 = |k: &str| -> u64 {
        std::env::var(k)
            .unwrap_or_else(|_| panic!("{k} not set"))
            .parse()
            .unwrap_or_else(|_| panic!("{k} is not a number"))
    };
    let seed = env_u64("TV_CRASH_SEED");
    let run = env_u64("TV_CRASH_RUN");
    let mode = Mode::parse(&std::env::var("TV_CRASH_MODE").expect("TV_CRASH_MODE"));
    let mut rng = Rng::new(mix(seed ^ mix(run.wrapping_add(0xC4A5))));
    let store = DirStore::open_path(Path::new(&root), TENANT, COLL, child_config(), true)
        .expect("child: open the store");
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut say = |line: String| {
        // A closed pipe means the parent is gone: stop.
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            std::process::exit(3);
        }
    };
    // libtest prints "test crash_child ... " without a newline: start a fresh line.
    say("\nTVC READY".into());
    let mut buf = Vec::new();
    // Bounded only as a guard against a parent that never kills.
    for id in 1..=2_000_000u64 {
        let gen = (run << 32) | id;
        let live: Vec<BlockKey> = store
            .blocks()
            .expect("child: list blocks")
            .iter()
            .map(|m| m.key)
            .collect();
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
            put(&mut rng)
        } else if roll < p_put + p_tput {
            Op::PutTensor {
                name: rng.below(NAMES.len() as u64) as usize,
                tier: rng.tier(),
                gen,
                n: rng.range(1, MAX_TENSOR_ELEMS),
            }
        } else if roll < p_put + p_tput + p_mig {
            let key = live[rng.below(live.len() as u64) as usize];
            let cur = store.meta(&key).expect("child: meta").expect("live").tier;
            Op::Migrate {
                key,
                tier: rng.other_tier(cur),
            }
        } else if roll < p_put + p_tput + p_mig + p_del {
            let key = if !live.is_empty() && rng.pct(80) {
                live[rng.below(live.len() as u64) as usize]
            } else {
                random_key(&mut rng)
            };
            Op::Delete { key }
        } else if roll < p_put + p_tput + p_mig + p_del + p_compact {
            Op::Compact
        } else {
            // A read (no state change, but it feeds Access records into the log).
            if let Some(&key) = live.get(rng.below(live.len().max(1) as u64) as usize) {
                store.get_block(&key, &mut buf).expect("child: read");
            }
            continue;
        };
        say(format!("TVC I {id} {}", op.encode()));
        match &op {
            Op::Put { key, tier, gen, n } => {
                let data = data_for(seed, *gen, *n);
                let shape = [*n as u32];
                store
                    .put_block(*key, *tier, &BlockInfo::new(DType::F32, &shape), &data)
                    .expect("child: put_block");
            }
            Op::PutTensor { name, tier, gen, n } => {
                let data = data_for(seed, *gen, *n);
                store
                    .put_tensor(NAMES[*name], DType::F32, &[*n as u32], &data, *tier)
                    .expect("child: put_tensor");
            }
            Op::Migrate { key, tier } => store
                .migrate_block(key, *tier)
                .expect("child: migrate_block"),
            Op::Delete { key } => {
                store.delete_block(key).expect("child: delete_block");
            }
            Op::Compact => store.compact().expect("child: compact"),
        }
        say(format!("TVC A {id}"));
    }
}

// ----------------------------------------------------------------------------- model

/// What one key is expected to hold.
#[derive(Clone, Debug, PartialEq)]
struct Expect {
    tier: Tier,
    shape: Vec<u32>,
    /// What `get_block` returns.
    bytes: Vec<u8>,
    /// Generation of the write that created it (migration keeps it).
    origin: u64,
}

type Model = BTreeMap<BlockKey, Expect>;

/// The per-key effect of `op` applied to `model` (keys not listed are unchanged).
fn effect(
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

fn apply(model: &mut Model, changes: Vec<(BlockKey, Option<Expect>)>) {
    for (k, v) in changes {
        match v {
            Some(e) => model.insert(k, e),
            None => model.remove(&k),
        };
    }
}

/// Counters reported at the end of a test.
#[derive(Default, Debug)]
struct Tally {
    kills: u64,
    acked_ops: u64,
    in_flight: BTreeMap<&'static str, u64>,
    in_flight_applied: u64,
    killed_before_ready: u64,
}

/// Replay the child's lines into `model`; returns the operation in flight at the kill.
fn absorb(
    lines: &[String],
    model: &mut Model,
    seed: u64,
    oracle: &mut Oracle,
    tally: &mut Tally,
    ctx: &str,
) -> Option<Op> {
    let mut pending: Option<(u64, Op)> = None;
    for line in lines {
        let Some(rest) = tvc(line) else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        match words[0] {
            "READY" => {}
            "I" => {
                assert!(
                    pending.is_none(),
                    "{ctx}: intent {rest:?} while {pending:?} is unacknowledged"
                );
                pending = Some((words[1].parse().expect("id"), Op::decode(&words[2..])));
            }
            "A" => {
                let id: u64 = words[1].parse().expect("id");
                let (pid, op) = pending
                    .take()
                    .unwrap_or_else(|| panic!("{ctx}: ack {id} without intent"));
                assert_eq!(pid, id, "{ctx}: ack for the wrong operation");
                let ch = effect(model, &op, seed, oracle);
                apply(model, ch);
                tally.acked_ops += 1;
            }
            other => panic!("{ctx}: unexpected child line {other:?}"),
        }
    }
    pending.map(|(_, op)| op)
}

/// What the store holds for `key`: `None` if absent; panics on any other error.
fn observe(store: &DirStore, key: &BlockKey, ctx: &str) -> Option<Expect> {
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

fn same(obs: &Option<Expect>, want: Option<&Expect>) -> bool {
    match (obs, want) {
        (None, None) => true,
        (Some(o), Some(w)) => o.tier == w.tier && o.shape == w.shape && o.bytes == w.bytes,
        _ => false,
    }
}

fn describe(e: Option<&Expect>) -> String {
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
fn check_after_kill(
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
    let store = DirStore::open_path(root, TENANT, COLL, child_config(), true)
        .unwrap_or_else(|e| panic!("{ctx}: reopen after kill: {e}"));
    let (replay, _) = store.replay_stats();
    assert_eq!(
        replay.skipped_total, 0,
        "{ctx}: replay skipped records in the middle of the log: {:?}",
        replay.skipped
    );
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
    // Exactly one tier holds each block: live slots per tier == index count per tier.
    let counts = store.tier_counts().expect("tier counts");
    for t in Tier::ALL {
        let u = store.block_io().usage(t);
        assert_eq!(
            u.slots - u.free_slots,
            counts[t.index()] as u64,
            "{ctx}: {t} has {} live slots for {} blocks (leaked or shared slots)",
            u.slots - u.free_slots,
            counts[t.index()]
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

/// Run one child until killed; returns its stdout lines.
fn run_child(
    root: &Path,
    seed: u64,
    run: u64,
    mode: Mode,
    rng: &mut Rng,
    tally: &mut Tally,
    ctx: &str,
) -> Vec<String> {
    let exe = std::env::current_exe().expect("current_exe");
    let err_path = root.join(format!("child-{run}.stderr"));
    let err_file = std::fs::File::create(&err_path).expect("stderr file");
    let mut child = Command::new(exe)
        .args([
            "crash_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, root)
        .env("TV_CRASH_SEED", seed.to_string())
        .env("TV_CRASH_RUN", run.to_string())
        .env("TV_CRASH_MODE", mode.name())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(err_file))
        .spawn()
        .expect("spawn the writer child");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let child_stderr = || std::fs::read_to_string(&err_path).unwrap_or_default();
    // Usually kill a random time after the child is ready; sometimes during its start
    // (open, replay, torn-tail cut).
    if rng.pct(15) {
        std::thread::sleep(Duration::from_micros(rng.below(40_000)));
    } else {
        // Generous bound so a wedged child fails the test instead of hanging it.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) => {
                    let ready = tvc(&l) == Some("READY");
                    lines.push(l);
                    if ready {
                        break;
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "{ctx}: child never became ready; stderr:\n{}",
                        child_stderr()
                    );
                }
            }
        }
        std::thread::sleep(Duration::from_micros(rng.below(60_000)));
    }
    let exited_on_its_own = child.try_wait().expect("try_wait");
    if let Some(status) = exited_on_its_own {
        panic!(
            "{ctx}: child exited on its own ({status}) before the kill; stderr:\n{}",
            child_stderr()
        );
    }
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("wait for the child");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        // The child may have died of something else just before the kill.
        assert!(
            status.signal() == Some(9),
            "{ctx}: child ended with {status}, not SIGKILL; stderr:\n{}",
            child_stderr()
        );
    }
    let _ = status;
    reader.join().expect("reader thread");
    lines.extend(rx.try_iter());
    if !lines.iter().any(|l| tvc(l) == Some("READY")) {
        tally.killed_before_ready += 1;
    }
    let _ = std::fs::remove_file(&err_path);
    lines
}

/// Kill the child `kills` times in `mode`, checking the store after each kill.
fn crash_loop(mode: Mode, default_seed: u64, kills: u64) {
    let seed = seed_or(default_seed);
    eprintln!(
        "crash suite {}: seed {seed:#x} (set TV_STORE_SEED to reproduce), {kills} kills",
        mode.name()
    );
    let dir = common::scratch_dir(&format!("crash-{}", mode.name()));
    let root = dir.path();
    let mut rng = Rng::new(mix(seed ^ 0x5EED));
    let mut oracle = Oracle::new();
    let mut model = Model::new();
    let mut tally = Tally::default();
    for run in 0..kills {
        let ctx = format!("{} seed {seed:#x} kill {run}", mode.name());
        let lines = run_child(root, seed, run, mode, &mut rng, &mut tally, &ctx);
        tally.kills += 1;
        let pending = absorb(&lines, &mut model, seed, &mut oracle, &mut tally, &ctx);
        if let Some(op) = &pending {
            *tally.in_flight.entry(op.kind()).or_default() += 1;
        }
        check_after_kill(
            root,
            &mut model,
            pending.as_ref(),
            seed,
            run,
            &mut oracle,
            &mut tally,
            &ctx,
        );
    }
    eprintln!(
        "crash suite {}: {tally:?}, {} live blocks at the end",
        mode.name(),
        model.len()
    );
    assert_eq!(tally.kills, kills);
}

fn kills(default: u64, long: u64) -> u64 {
    if long_mode() {
        long
    } else {
        default
    }
}

#[test]
fn sigkill_during_mixed_writes_loses_nothing_acknowledged() {
    crash_loop(Mode::Mixed, 0xC0DE_0001, kills(5, 120));
}

#[test]
fn sigkill_during_migration_leaves_each_block_in_exactly_one_tier() {
    crash_loop(Mode::Migrate, 0xC0DE_0002, kills(3, 60));
}

#[test]
fn sigkill_during_compaction_keeps_the_log_whole() {
    crash_loop(Mode::Compact, 0xC0DE_0003, kills(3, 60));
}
