//! Concurrency of the prefix cache: threads of one process storing the same prefix store
//! it once while other threads look it up and load it; several processes read one model's
//! cache at once through read-only opens.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};

use half::f16;
use tensorvault_store::prefix::{KvData, PrefixConfig};
use tensorvault_store::PrefixCache;

const L: u32 = 3;
const H: u32 = 2;
const D: u32 = 16;
const CHUNK: u32 = 8;
const READER_ENV: &str = "TV_PREFIX_READER_ROOT";

fn prompt(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| i * 7 + 3).collect()
}

fn kv(tokens: &[u32]) -> (Vec<Vec<f16>>, Vec<Vec<f16>>) {
    let mk = |kind: u32| {
        (0..L)
            .map(|l| {
                let mut v = Vec::new();
                for h in 0..H {
                    for (p, &t) in tokens.iter().enumerate() {
                        v.extend((0..D).map(|d| {
                            f16::from_f32(
                                (kind * 97 + l * 31 + h * 7 + d + t) as f32 / 64.0 + p as f32,
                            )
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

#[test]
fn threads_storing_one_prefix_store_it_once_while_others_read() {
    let dir = tempfile::tempdir().unwrap();
    let c = Arc::new(PrefixCache::open(dir.path(), "m", L, H, D, cfg(false)).unwrap());
    let t = Arc::new(prompt(256));
    let writers = 4;
    let readers = 3;
    let go = Arc::new(Barrier::new(writers + readers));
    let mut handles = Vec::new();
    for _ in 0..writers {
        let (c, t, go) = (c.clone(), t.clone(), go.clone());
        handles.push(std::thread::spawn(move || {
            let (k, v) = kv(&t);
            let kd: Vec<KvData> = k.iter().map(|x| KvData::F16(x)).collect();
            let vd: Vec<KvData> = v.iter().map(|x| KvData::F16(x)).collect();
            go.wait();
            c.store(&t, &kd, &vd).unwrap()
        }));
    }
    for _ in 0..readers {
        let (c, t, go) = (c.clone(), t.clone(), go.clone());
        handles.push(std::thread::spawn(move || {
            go.wait();
            let mut seen = 0;
            while seen < t.len() {
                let got = c.load(&t, None).unwrap();
                assert!(got.tokens >= seen, "a stored prefix never shrinks here");
                let (k, v) = kv(&t[..got.tokens]);
                assert_eq!((got.keys, got.values), (k, v));
                seen = got.tokens;
            }
            0
        }));
    }
    let stored: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(stored, 256, "every chunk written by exactly one writer");
    let s = c.stats().unwrap();
    assert_eq!((s.chunks, s.stored_chunks), (32, 32));
}

/// A reader process: load the prompt through a read-only open and check every value.
#[test]
#[ignore = "run by several_processes_read_one_cache_at_once in child processes"]
fn reader_child() {
    let Ok(root) = std::env::var(READER_ENV) else {
        return;
    };
    let c = PrefixCache::open(Path::new(&root), "m", L, H, D, cfg(true)).unwrap();
    let t = prompt(200);
    for _ in 0..50 {
        let got = c.load(&t, None).unwrap();
        assert_eq!(got.tokens, 200 / CHUNK as usize * CHUNK as usize);
        let (k, v) = kv(&t[..got.tokens]);
        assert_eq!((got.keys, got.values), (k, v));
    }
}

#[test]
fn several_processes_read_one_cache_at_once() {
    let dir = tempfile::tempdir().unwrap();
    {
        let c = PrefixCache::open(dir.path(), "m", L, H, D, cfg(false)).unwrap();
        let t = prompt(200);
        let (k, v) = kv(&t);
        let kd: Vec<KvData> = k.iter().map(|x| KvData::F16(x)).collect();
        let vd: Vec<KvData> = v.iter().map(|x| KvData::F16(x)).collect();
        assert_eq!(c.store(&t, &kd, &vd).unwrap(), 200);
        c.close().unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&exe)
                .args(["--ignored", "--exact", "reader_child", "--test-threads=1"])
                .env(READER_ENV, dir.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut ch in children {
        assert!(ch.wait().unwrap().success(), "a reader process failed");
    }
}
