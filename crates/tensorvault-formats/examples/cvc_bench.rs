//! Throughput of CVC pack and load on one f32 `.npy` array, printed as JSON lines so
//! `bench/cvc/run.sh` can set them beside the reference (`decompressed`) and numpy.
//!
//! ```text
//! cargo run --release -p tensorvault-formats --example cvc_bench -- INPUT.npy WORKDIR [REPEATS]
//! ```
//!
//! Every figure is the median of REPEATS runs (default 5), in GB/s of f32 data
//! (input for pack, output for load), the unit the reference's figures use.

use std::path::PathBuf;
use std::time::Instant;

use tensorvault_core::AlignedBuf;
use tensorvault_formats::cvc::{pack, pack_to_vec, Compression, CvcReader, PackOptions};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time<T>(repeats: usize, mut f: impl FnMut() -> T) -> f64 {
    median(
        (0..repeats)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let input = PathBuf::from(
        args.get(1)
            .expect("usage: cvc_bench INPUT.npy WORKDIR [REPEATS]"),
    );
    let dir = PathBuf::from(
        args.get(2)
            .expect("usage: cvc_bench INPUT.npy WORKDIR [REPEATS]"),
    );
    let repeats: usize = args
        .get(3)
        .map_or(5, |s| s.parse().expect("REPEATS is a number"));
    let bytes = std::fs::read(&input).expect("read input");
    let npy = npyz::NpyFile::new(&bytes[..]).expect("an .npy file");
    let shape = npy.shape().to_vec();
    let data: Vec<f32> = npy.into_vec().expect("float32 data");
    let (rows, dim) = (shape[0] as usize, shape[1] as usize);
    let gb = (rows * dim * 4) as f64 / 1e9;
    let emit = |name: &str, secs: f64| {
        println!("{{\"impl\":\"tensorvault\",\"op\":\"{name}\",\"seconds\":{secs:.6},\"gb_per_s\":{:.3}}}", gb / secs);
    };

    // Baseline: a plain copy of the decoded bytes into a fresh buffer (page faults included,
    // as a load's output buffer has them too).
    emit(
        "memcpy_fresh",
        time(repeats, || AlignedBuf::from_slice(&data)),
    );

    for comp in [Compression::Fp16, Compression::Int8] {
        let opts = PackOptions {
            compression: comp,
            ..PackOptions::default()
        };
        let path = dir.join(format!("tv_{}.cvc", comp.name()));
        emit(
            &format!("pack_{}_file", comp.name()),
            time(repeats, || pack(&path, &data, dim, &opts).expect("pack")),
        );
        let nosync = PackOptions {
            sync: false,
            ..opts.clone()
        };
        emit(
            &format!("pack_{}_file_nosync", comp.name()),
            time(repeats, || pack(&path, &data, dim, &nosync).expect("pack")),
        );
        emit(
            &format!("pack_{}_memory", comp.name()),
            time(repeats, || pack_to_vec(&data, dim, &opts).expect("pack")),
        );
        let reader = CvcReader::open_mmap(&path).expect("open");
        emit(
            &format!("load_{}_mmap", comp.name()),
            time(repeats, || reader.load_all().expect("load")),
        );
        let reader = CvcReader::open(&path).expect("open");
        emit(
            &format!("load_{}_pread", comp.name()),
            time(repeats, || reader.load_all().expect("load")),
        );
        emit(
            &format!("open_and_load_{}", comp.name()),
            time(repeats, || {
                CvcReader::open_mmap(&path)
                    .expect("open")
                    .load_all()
                    .expect("load")
            }),
        );
    }
}
