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
mod workload;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{long_mode, mix, seed_or, store_config, Oracle, Rng};
use tensorvault_store::DirStore;
use workload::{
    apply, check_after_kill, choose, effect, perform, Mode, Model, Op, Step, Tally, COLL, TENANT,
};

const CHILD_ENV: &str = "TV_CRASH_CHILD";

/// The protocol part of a child's stdout line (after `TVC `), if it is one.
fn tvc(line: &str) -> Option<&str> {
    line.find("TVC ").map(|i| &line[i + 4..])
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
    let store = DirStore::open_path(Path::new(&root), TENANT, COLL, store_config(), true)
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
        let op = match choose(&store, &mut rng, mode, gen).expect("child: choose") {
            Step::Write(op) => op,
            Step::Read(key) => {
                if let Some(key) = key {
                    store.get_block(&key, &mut buf).expect("child: read");
                }
                continue;
            }
        };
        say(format!("TVC I {id} {}", op.encode()));
        perform(&store, &op, seed).unwrap_or_else(|e| panic!("child: {}: {e}", op.kind()));
        say(format!("TVC A {id}"));
    }
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
        .env(
            "TV_STORE_EXTENTS",
            if common::extents_on() { "1" } else { "0" },
        )
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
    let dir = common::scratch_dir(&format!(
        "crash-{}{}",
        mode.name(),
        if common::extents_on() { "-ext" } else { "" }
    ));
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

/// The extent allocator under SIGKILL (kills between payload and record, record and
/// fsync, and during frees fall where they fall): nothing acknowledged is lost and no
/// byte is live for two blocks (`check_after_kill` compares each tier's live bytes with
/// the extents of the index's blocks).
#[test]
fn sigkill_with_extents_loses_nothing_and_shares_no_extent() {
    common::with_extents(|| {
        crash_loop(Mode::Mixed, 0xC0DE_0011, kills(4, 120));
        crash_loop(Mode::Migrate, 0xC0DE_0012, kills(3, 60));
    });
}
