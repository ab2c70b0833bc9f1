//! Helpers shared by the CLI's end-to-end test binaries.
#![allow(dead_code, reason = "each test binary uses a subset of the helpers")]

use std::path::Path;
use std::process::{Command, Output};

/// Run `tensorvault -q ARGS...` and capture its output.
pub fn tv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .arg("-q")
        .args(args)
        .output()
        .expect("run tensorvault")
}

/// A path as `&str` for command-line arguments.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
