//! Times the registry on the seed's full shapes (~322 MB f32): initialization (serial and
//! rayon), atomic save, load (mmap + validation, with and without checksum, and touching
//! every value) and a single-expert load. Prints one `name seconds GB/s` line per figure
//! (median of `REPS` runs). Usage: `registry_bench DIR [REPS]`; DIR must be empty scratch.

use std::path::PathBuf;
use std::time::Instant;

use tensorvault_registry::checkpoint::{load_checkpoint_dir, load_tensors, LoadOptions};
use tensorvault_registry::{write_checkpoint, FusionConfig, LoadedWeights, WeightInitializer};

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

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: registry_bench DIR [REPS]"));
    let reps: usize = args.next().map_or(5, |s| s.parse().expect("REPS"));
    let cfg = FusionConfig::default();
    let gb = cfg.total_bytes() as f64 / 1e9;
    let init = WeightInitializer::new(42);
    let report =
        |name: &str, s: f64, bytes: f64| println!("{name:28} {s:8.4} s {:7.2} GB/s", bytes / s);

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
        ("load +sha256 checksum", true, false),
    ] {
        let s = median(
            || {
                let t = Instant::now();
                let w = load_checkpoint_dir(
                    &ck,
                    &cfg,
                    LoadOptions {
                        strict: true,
                        verify_checksum: verify,
                        fallback: None,
                    },
                )
                .unwrap();
                if touch_all {
                    std::hint::black_box(touch(&w));
                }
                t.elapsed().as_secs_f64()
            },
            reps,
        );
        report(name, s, gb);
    }
    let names = [
        "experts.3.input_proj.weight",
        "experts.3.hidden.weight",
        "experts.3.output_proj.weight",
    ];
    let ebytes = 4.0 * (8320.0 * 1024.0 + 1024.0 * 1024.0 + 1024.0 * 192.0) / 1e9;
    let s = median(
        || {
            let t = Instant::now();
            let ts = load_tensors(&ck, &names).unwrap();
            std::hint::black_box(
                ts.iter()
                    .map(|t| t.data().iter().map(|&v| f64::from(v)).sum::<f64>())
                    .sum::<f64>(),
            );
            t.elapsed().as_secs_f64()
        },
        reps,
    );
    report("single expert +touch", s, ebytes);
}
