//! One cold-cache CVC load per process, for `bench/cvc/cold.sh`.
//!
//! ```text
//! cargo run --release -p tensorvault-formats --example cvc_cold -- FILE MODE
//! ```
//!
//! MODE is `mmap` (`CvcReader::open_mmap` + `load_all`), `pread` (`CvcReader::open` +
//! `load_all`), `read` (a plain sequential `read` of the file in 8 MiB blocks, the
//! baseline) or `read_fill` (the same read, plus filling a fresh buffer of the decoded
//! size block by block: the least memory work any load has to do). Prints one JSON line:
//! seconds from open to loaded, file bytes, output bytes.

use std::io::Read;
use std::time::Instant;

use tensorvault_core::AlignedBuf;
use tensorvault_formats::cvc::CvcReader;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(mode)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: cvc_cold FILE mmap|pread|read");
        std::process::exit(2);
    };
    let file_bytes = std::fs::metadata(path).expect("stat").len();
    let t = Instant::now();
    let out_bytes = match mode.as_str() {
        "mmap" => {
            let t = CvcReader::open_mmap(path)
                .expect("open")
                .load_all()
                .expect("load");
            std::hint::black_box(&t);
            t.as_slice::<f32>().expect("f32").len() * 4
        }
        "pread" => {
            let t = CvcReader::open(path)
                .expect("open")
                .load_all()
                .expect("load");
            std::hint::black_box(&t);
            t.as_slice::<f32>().expect("f32").len() * 4
        }
        "read" => {
            let mut f = std::fs::File::open(path).expect("open");
            let mut buf = vec![0u8; 8 << 20];
            let mut n = 0usize;
            loop {
                let k = f.read(&mut buf).expect("read");
                if k == 0 {
                    break;
                }
                n += k;
                std::hint::black_box(&buf);
            }
            n
        }
        "read_fill" => {
            let width = CvcReader::open(path)
                .expect("open")
                .header()
                .compression
                .row_bytes(1)
                .expect("one value") as usize;
            let mut f = std::fs::File::open(path).expect("open");
            let mut buf = vec![0u8; 8 << 20];
            let mut out = AlignedBuf::<f32>::zeroed(file_bytes as usize / width);
            let mut pos = 0usize;
            loop {
                let k = f.read(&mut buf).expect("read");
                if k == 0 {
                    break;
                }
                let vals = out.as_mut_slice();
                let end = (pos + k / width).min(vals.len());
                vals[pos..end].fill(f32::from(buf[0]));
                pos = end;
            }
            std::hint::black_box(&out);
            out.len() * 4
        }
        other => {
            eprintln!("unknown mode {other}");
            std::process::exit(2);
        }
    };
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{{\"mode\":\"{mode}\",\"seconds\":{secs:.6},\"file_bytes\":{file_bytes},\"out_bytes\":{out_bytes},\"file_gb_per_s\":{:.3}}}",
        file_bytes as f64 / secs / 1e9
    );
}
