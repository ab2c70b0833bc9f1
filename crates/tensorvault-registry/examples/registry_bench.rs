//! Times the registry on the seed's full shapes (~322 MB f32): initialization (serial and
//! rayon), atomic save, load (mmap + validation, with and without checksum, and touching
//! every value) and a single-expert load. Prints one `name seconds GB/s` line per figure
//! (median of `REPS` runs). Usage: `registry_bench DIR [REPS]`; DIR must be empty scratch.
//!
//! `registry_bench --once OP CKPT` times one operation once on an existing checkpoint
//! directory and prints one line, for cold-cache runs (the caller evicts the file from the
//! page cache first, see `bench/registry/run.sh`). OP: `load` (mmap + validation),
//! `load-touch` (and read every value), `expert-touch` (expert 3's three tensors, read),
//! `load-verify` (verified: chunk digests on all cores), `load-verify-whole` (verified:
//! whole-file SHA-256, one core), `model-load-verify` (a model version directory,
//! verified by chunks), `model-load-verify-whole`.
//!
//! `registry_bench --model DIR REPS SRC` registers the safetensors checkpoint SRC (e.g.
//! all-MiniLM-L6-v2's model.safetensors) as version 1.0.0 of a model registry under DIR,
//! prints the version directory, then warm medians of its loads (prefixed `model`).

use std::path::PathBuf;
use std::time::Instant;

use tensorvault_registry::checkpoint::{load_checkpoint_dir, load_tensors, LoadOptions};
use tensorvault_registry::model_tensor::load_model_dir;
use tensorvault_registry::{
    write_checkpoint, FusionConfig, LoadedModel, LoadedWeights, ModelRegistry, Preset, SaveOptions,
    Verify, WeightInitializer,
};

fn median(mut f: impl FnMut() -> f64, reps: usize) -> f64 {
    let mut t: Vec<f64> = (0..reps).map(|_| f()).collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn touch(w: &LoadedWeights) -> f64 {
    w.named_tensors()
        .iter()
        .map(|(_, t)| t.data().iter().map(|&v| f64::from(v)).sum::<f64>())
        .sum()
}

const EXPERT: [&str; 3] = [
    "experts.3.input_proj.weight",
    "experts.3.hidden.weight",
    "experts.3.output_proj.weight",
];

fn expert_bytes(cfg: &FusionConfig) -> f64 {
    let (i, h, o) = (cfg.input_dim, cfg.expert_hidden_dim, cfg.expert_output_dim);
    (4 * (i * h + h * h + h * o)) as f64 / 1e9
}

fn load_full(ck: &std::path::Path, cfg: &FusionConfig, verify: bool) -> LoadedWeights {
    load_checkpoint_dir(
        ck,
        cfg,
        LoadOptions {
            strict: true,
            verify_checksum: verify,
            fallback: None,
        },
    )
    .unwrap()
}

fn load_expert_touch(ck: &std::path::Path) -> f64 {
    load_tensors(ck, &EXPERT)
        .unwrap()
        .iter()
        .map(|t| t.data().iter().map(|&v| f64::from(v)).sum::<f64>())
        .sum()
}

fn report(name: &str, s: f64, gb: f64) {
    println!("{name:28} {s:10.6} s {:8.2} GB/s", gb / s);
}

fn dir_bytes(dir: &std::path::Path) -> f64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".safetensors"))
        .map(|e| e.metadata().unwrap().len())
        .sum::<u64>() as f64
        / 1e9
}

fn model_touch(m: &LoadedModel) -> u64 {
    m.tensors()
        .values()
        .map(|t| t.bytes().iter().map(|&b| u64::from(b)).sum::<u64>())
        .sum()
}

/// `--model DIR REPS SRC`: register SRC, then warm medians of the model loads.
fn model(dir: &std::path::Path, reps: usize, src: &std::path::Path) {
    let reg = ModelRegistry::open(dir.join("mreg"), Preset::Any).unwrap();
    let t = Instant::now();
    let v = reg
        .save_from_path(
            src,
            SaveOptions {
                version: Some("1.0.0".into()),
                ..SaveOptions::default()
            },
        )
        .unwrap();
    let save_s = t.elapsed().as_secs_f64();
    let vdir = reg.version_dir(&v.version).unwrap();
    println!("version_dir {}", vdir.display());
    let gb = dir_bytes(&vdir);
    report("model save (copy+digests)", save_s, gb);
    for (name, mode, touch_all) in [
        ("model load (no verify)", Verify::None, false),
        ("model load +verify chunks", Verify::Chunks, false),
        ("model load +verify whole-file", Verify::Full, false),
        ("model load +verify chunks +touch", Verify::Chunks, true),
    ] {
        let s = median(
            || {
                let t = Instant::now();
                let m = load_model_dir(&vdir, mode).unwrap();
                if touch_all {
                    std::hint::black_box(model_touch(&m));
                }
                t.elapsed().as_secs_f64()
            },
            reps,
        );
        report(name, s, gb);
    }
}

/// `--once OP CKPT`: one timed operation (for cold-cache runs).
fn once(op: &str, ck: &std::path::Path) {
    let cfg = FusionConfig::default();
    let gb = cfg.total_bytes() as f64 / 1e9;
    let t = Instant::now();
    let (name, bytes) = match op {
        "load-verify" => {
            std::hint::black_box(load_full(ck, &cfg, true));
            ("load +verify chunks", gb)
        }
        "load-verify-whole" => {
            std::hint::black_box(load_model_dir(ck, Verify::Full).unwrap());
            ("load +verify whole-file", gb)
        }
        "model-load-verify" => {
            std::hint::black_box(load_model_dir(ck, Verify::Chunks).unwrap());
            ("model load +verify chunks", dir_bytes(ck))
        }
        "model-load-verify-whole" => {
            std::hint::black_box(load_model_dir(ck, Verify::Full).unwrap());
            ("model load +verify whole-file", dir_bytes(ck))
        }
        "load" => {
            std::hint::black_box(load_full(ck, &cfg, false));
            ("load mmap+validate", gb)
        }
        "load-touch" => {
            std::hint::black_box(touch(&load_full(ck, &cfg, false)));
            ("load +touch all values", gb)
        }
        "expert-touch" => {
            std::hint::black_box(load_expert_touch(ck));
            ("single expert +touch", expert_bytes(&cfg))
        }
        other => panic!("unknown OP {other:?}: load | load-touch | expert-touch"),
    };
    report(name, t.elapsed().as_secs_f64(), bytes);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let first = args
        .next()
        .expect("usage: registry_bench DIR [REPS] | registry_bench --once OP CKPT");
    if first == "--once" {
        let op = args.next().expect("--once OP CKPT");
        let ck = PathBuf::from(args.next().expect("--once OP CKPT"));
        return once(&op, &ck);
    }
    if first == "--model" {
        let dir = PathBuf::from(args.next().expect("--model DIR REPS SRC"));
        let reps: usize = args.next().map_or(5, |s| s.parse().expect("REPS"));
        let src = PathBuf::from(args.next().expect("--model DIR REPS SRC"));
        return model(&dir, reps, &src);
    }
    let dir = PathBuf::from(first);
    let reps: usize = args.next().map_or(5, |s| s.parse().expect("REPS"));
    let cfg = FusionConfig::default();
    let gb = cfg.total_bytes() as f64 / 1e9;
    let init = WeightInitializer::new(42);

    for (name, par) in [("init serial", false), ("init rayon", true)] {
        let s = median(
            || {
                let t = Instant::now();
                std::hint::black_box(init.init_all(&cfg, par).unwrap());
                t.elapsed().as_secs_f64()
            },
            reps,
        );
        report(name, s, gb);
    }
    let w = init.init_all(&cfg, true).unwrap();
    // Each rep replaces the previous checkpoint (as Python's save_file overwrites its file).
    let s = median(
        || {
            let ck = dir.join("ck_save");
            let _ = std::fs::remove_dir_all(&ck);
            let t = Instant::now();
            write_checkpoint(&ck, &w, &cfg).unwrap();
            t.elapsed().as_secs_f64()
        },
        reps,
    );
    report("save (atomic, fsync)", s, gb);
    let _ = std::fs::remove_dir_all(dir.join("ck_save"));
    let ck = dir.join("ck1");
    write_checkpoint(&ck, &w, &cfg).unwrap();
    for (name, verify, touch_all) in [
        ("load mmap+validate", false, false),
        ("load +touch all values", false, true),
        ("load +verify chunks", true, false),
    ] {
        let s = median(
            || {
                let t = Instant::now();
                let w = load_full(&ck, &cfg, verify);
                if touch_all {
                    std::hint::black_box(touch(&w));
                }
                t.elapsed().as_secs_f64()
            },
            reps,
        );
        report(name, s, gb);
    }
    let s = median(
        || {
            let t = Instant::now();
            std::hint::black_box(load_model_dir(&ck, Verify::Full).unwrap());
            t.elapsed().as_secs_f64()
        },
        reps,
    );
    report("load +verify whole-file", s, gb);
    let s = median(
        || {
            let t = Instant::now();
            std::hint::black_box(load_expert_touch(&ck));
            t.elapsed().as_secs_f64()
        },
        reps,
    );
    report("single expert +touch", s, expert_bytes(&cfg));
}
