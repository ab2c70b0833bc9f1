//! Many processes on one prefix-cache root (issue 24 item 3): a second process loads what
//! the first stored (while both stay open), two writer processes storing one prefix store
//! it once, a writer killed mid-store leaves a reader that was open all along with whole
//! chunks only, a reader process keeps loading exact KV while a writer process stores,
//! and a reader never waits for a writer that holds the lock (a writer waits, bounded).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use half::f16;
use tensorvault_store::prefix::{collection_name, KvData, PrefixConfig, TENANT};
use tensorvault_store::{DirStore, PrefixCache, StoreConfig, StoreErr};

const L: u32 = 3;
const H: u32 = 2;
const D: u32 = 16;
const CHUNK: u32 = 8;
const ROLE: &str = "TV_PFX_ROLE";
const ROOT: &str = "TV_PFX_ROOT";
const ARG: &str = "TV_PFX_ARG";

/// Prompt `salt`: the first 32 tokens are common to every prompt.
fn prompt(salt: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| if i < 32 { i } else { i * 31 + salt * 1009 })
        .collect()
}

/// KV that depends on every token up to each position (as a model's does), so a chunk's
/// values differ after a different prefix.
fn kv(tokens: &[u32]) -> (Vec<Vec<f16>>, Vec<Vec<f16>>) {
    let mut acc = Vec::with_capacity(tokens.len());
    let mut h = 0u32;
    for &t in tokens {
        h = h.wrapping_mul(2_654_435_761).wrapping_add(t);
        acc.push(h);
    }
    let mk = |kind: u32| {
        (0..L)
            .map(|l| {
                let mut v = Vec::new();
                for hd in 0..H {
                    for &a in &acc {
                        v.extend((0..D).map(|d| {
                            let x = (a ^ (kind << 30) ^ (l << 20) ^ (hd << 10) ^ d) % 4093;
                            f16::from_f32(x as f32 / 256.0 - 8.0)
                        }));
                    }
                }
                v
            })
            .collect::<Vec<_>>()
    };
    (mk(0), mk(1))
}

fn cfg(read_only: bool) -> PrefixConfig {
    PrefixConfig {
        chunk_tokens: CHUNK,
        read_only,
        ..PrefixConfig::default()
    }
}

fn open(root: &Path, read_only: bool) -> PrefixCache {
    PrefixCache::open(root, "procs", L, H, D, cfg(read_only)).unwrap()
}

fn store(c: &PrefixCache, t: &[u32]) -> u64 {
    let (k, v) = kv(t);
    let kd: Vec<KvData> = k.iter().map(|x| KvData::F16(x)).collect();
    let vd: Vec<KvData> = v.iter().map(|x| KvData::F16(x)).collect();
    c.store(t, &kd, &vd).unwrap()
}

/// Load `t` and check every value against what was stored; returns the tokens loaded.
fn load_exact(c: &PrefixCache, t: &[u32]) -> usize {
    let got = c.load(t, None).unwrap();
    let (k, v) = kv(&t[..got.tokens]);
    assert!(
        got.keys == k && got.values == v,
        "wrong KV for {} tokens",
        got.tokens
    );
    got.tokens
}

fn wait_for(path: &Path, what: &str) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "{what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The child processes' entry point; the role comes from the environment.
#[test]
#[ignore = "run in child processes by the tests of this file"]
fn child() {
    let (Ok(role), Ok(root)) = (std::env::var(ROLE), std::env::var(ROOT)) else {
        return;
    };
    let root = PathBuf::from(root);
    let arg: u32 = std::env::var(ARG)
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    match role.as_str() {
        "store-one" => {
            let c = open(&root, false);
            store(&c, &prompt(arg, 64));
            c.close().unwrap();
        }
        "race" => {
            // Both racers encode, wait for the start line, then store the same prompt.
            let c = open(&root, false);
            std::fs::write(root.join(format!("ready{arg}")), "").unwrap();
            wait_for(&root.join("go"), "no start signal");
            let added = store(&c, &prompt(7, 256));
            c.close().unwrap();
            std::fs::write(root.join(format!("added{arg}")), added.to_string()).unwrap();
        }
        "store-forever" => {
            let c = open(&root, false);
            for salt in 0u32.. {
                store(&c, &prompt(salt, 96));
                std::fs::write(root.join("progress.tmp"), salt.to_string()).unwrap();
                std::fs::rename(root.join("progress.tmp"), root.join("progress")).unwrap();
            }
        }
        "store-n" => {
            let c = open(&root, false);
            for salt in 0..arg {
                store(&c, &prompt(salt, 96));
            }
            c.close().unwrap();
        }
        "read-until" => {
            // Load every prompt until all `arg` are whole; every value is checked.
            let c = open(&root, true);
            let start = Instant::now();
            let mut loads = 0u64;
            loop {
                let mut whole = 0;
                for salt in 0..arg {
                    let t = prompt(salt, 96);
                    if load_exact(&c, &t) == 96 {
                        whole += 1;
                    }
                    loads += 1;
                }
                if whole == arg {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(120), "never saw all");
            }
            assert_eq!(c.stats().unwrap().damaged_chunks, 0);
            std::fs::write(root.join("reader-loads"), loads.to_string()).unwrap();
        }
        other => panic!("unknown role {other}"),
    }
}

fn spawn(root: &Path, role: &str, arg: u32) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(ROOT, root)
        .env(ARG, arg.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn ok(mut ch: Child, what: &str) {
    assert!(ch.wait().unwrap().success(), "{what} failed");
}

#[test]
fn a_second_process_loads_what_the_first_stored_while_both_are_open() {
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path(), false);
    let r = open(dir.path(), true);
    let t = prompt(3, 64);
    assert_eq!((w.lookup(&t).unwrap(), r.lookup(&t).unwrap()), (0, 0));
    ok(spawn(dir.path(), "store-one", 3), "the storing process");
    // Both handles were open before the other process stored: each sees it now.
    assert_eq!(w.lookup(&t).unwrap(), 64);
    assert_eq!(load_exact(&r, &t), 64);
    assert_eq!(load_exact(&w, &t), 64);
    // Nothing left to store: no commit, no lock.
    assert_eq!(store(&w, &t), 0);
    w.close().unwrap();
    let counts = open(dir.path(), true).model_counts().unwrap();
    assert_eq!(counts.get("stored_chunks"), Some(8), "the child's commit");
    assert!(counts.get("hit_chunks").unwrap() >= 16, "{counts:?}");
}

#[test]
fn two_writer_processes_storing_one_prefix_store_it_once() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), false)); // create the model's collection
    let kids: Vec<Child> = (0..2).map(|i| spawn(dir.path(), "race", i)).collect();
    for i in 0..2 {
        wait_for(
            &dir.path().join(format!("ready{i}")),
            "a racer did not start",
        );
    }
    std::fs::write(dir.path().join("go"), "").unwrap();
    for k in kids {
        ok(k, "a racing writer");
    }
    let added: u64 = (0..2)
        .map(|i| {
            std::fs::read_to_string(dir.path().join(format!("added{i}")))
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(added, 256, "every chunk written by exactly one process");
    let c = open(dir.path(), true);
    let s = c.stats().unwrap();
    assert_eq!(s.chunks, 32);
    // One tensor per chunk, each complete: nothing written twice.
    let st = c.tensor_store().unwrap();
    assert_eq!(st.tensors().unwrap().len(), 32);
    assert_eq!(st.blocks().unwrap().len(), 32 * 2 * (L * H) as usize);
    assert_eq!(load_exact(&c, &prompt(7, 256)), 256);
    assert_eq!(c.model_counts().unwrap().get("stored_chunks"), Some(32));
}

#[test]
fn a_writer_killed_mid_store_leaves_an_open_reader_only_whole_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let survivor = open(dir.path(), false);
    let reader = open(dir.path(), true);
    for round in 0..3u64 {
        let _ = std::fs::remove_file(dir.path().join("progress"));
        let mut child = spawn(dir.path(), "store-forever", 0);
        wait_for(&dir.path().join("progress"), "the writer made no progress");
        // Keep reading while it writes, then kill it at a different moment each round.
        let until = Instant::now() + Duration::from_millis(20 + round * 25);
        while Instant::now() < until {
            load_exact(&reader, &prompt(0, 96));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let done: u32 = std::fs::read_to_string(dir.path().join("progress"))
            .unwrap()
            .parse()
            .unwrap();
        for salt in 0..=done + 1 {
            let t = prompt(salt, 96);
            let r = load_exact(&reader, &t);
            let s = load_exact(&survivor, &t);
            if salt <= done {
                assert_eq!((r, s), (96, 96), "round {round}: prompt {salt} was stored");
            }
        }
        let v = reader.verify().unwrap();
        assert!(v.damaged.is_empty(), "round {round}: {v:?}");
        // The survivor's next commit deletes the killed writer's unfinished chunk.
        store(&survivor, &prompt(1000 + round as u32, 96));
        let st = survivor.tensor_store().unwrap();
        let whole = survivor.stats().unwrap().chunks as usize;
        assert_eq!(st.tensors().unwrap().len(), whole, "no partial chunk left");
        assert!(survivor.verify().unwrap().damaged.is_empty());
    }
    assert_eq!(reader.stats().unwrap().damaged_chunks, 0);
}

#[test]
fn a_reader_process_loads_exact_kv_while_a_writer_process_stores() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), false));
    let n = 40;
    let reader = spawn(dir.path(), "read-until", n);
    let writer = spawn(dir.path(), "store-n", n);
    ok(writer, "the writer");
    ok(reader, "the reader");
    let loads: u64 = std::fs::read_to_string(dir.path().join("reader-loads"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(loads >= u64::from(n));
}

#[test]
fn readers_never_wait_for_a_writer_and_a_writer_waits_a_bounded_time() {
    let dir = tempfile::tempdir().unwrap();
    let t = prompt(1, 48);
    let mut pc = cfg(false);
    pc.store.lock_wait = Duration::from_millis(300);
    let w = PrefixCache::open(dir.path(), "procs", L, H, D, pc).unwrap();
    store(&w, &t);
    let r = open(dir.path(), true);
    // Another writer holds the collection (as a long commit would).
    let held = DirStore::open_path(
        dir.path(),
        TENANT,
        &collection_name("procs"),
        StoreConfig::default(),
        false,
    )
    .unwrap();
    let start = Instant::now();
    assert_eq!(load_exact(&r, &t), 48);
    assert_eq!(load_exact(&w, &t), 48);
    assert_eq!(store(&w, &t), 0, "nothing new: no lock needed");
    assert!(
        start.elapsed() < Duration::from_millis(250),
        "a reader waited"
    );
    let u = prompt(2, 48); // shares its first 32 tokens with t
    let (k, v) = kv(&u);
    let kd: Vec<KvData> = k.iter().map(|x| KvData::F16(x)).collect();
    let vd: Vec<KvData> = v.iter().map(|x| KvData::F16(x)).collect();
    let e = w.store(&u, &kd, &vd).unwrap_err();
    assert!(matches!(e, StoreErr::Locked { .. }), "{e}");
    assert!(e.to_string().contains("waited"), "{e}");
    drop(held);
    assert_eq!(w.store(&u, &kd, &vd).unwrap(), 16);
    assert_eq!(load_exact(&r, &u), 48);
}
