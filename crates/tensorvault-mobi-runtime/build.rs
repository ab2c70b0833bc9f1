//! Sets `cfg(tv_avx512)` when the compiler has the AVX-512 intrinsics and target feature
//! (stable since Rust 1.89; the crate's MSRV, 1.86, builds without the AVX-512 gemm
//! kernel and uses the AVX2 one).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(tv_avx512)");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default();
    // "rustc 1.95.0 (59807616e 2026-04-14)" -> (1, 95)
    let mut parts = version
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if arch == "x86_64" && (major, minor) >= (1, 89) {
        println!("cargo:rustc-cfg=tv_avx512");
    }
}
