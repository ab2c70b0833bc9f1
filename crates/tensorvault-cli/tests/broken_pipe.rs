//! A reader that goes away (`tensorvault ... | head`) ends the output quietly: exit 141
//! (128 + SIGPIPE) and no panic report on standard error.

use std::os::fd::FromRawFd;
use std::process::{Command, Stdio};

#[cfg(unix)]
#[test]
fn a_closed_stdout_is_the_end_of_the_output_not_a_panic() {
    let fixture = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cvc/d_mixed_fp16_int8.cvc");
    // A pipe whose read end is closed before the command writes: every write fails
    // with EPIPE (the reader is gone before the child prints anything).
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe() fills two fresh descriptors, each owned by exactly one File below.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: fds[0] is the pipe's read end, owned by nothing else; closed here.
    drop(unsafe { std::fs::File::from_raw_fd(fds[0]) });
    // SAFETY: fds[1] is the pipe's write end, owned by nothing else.
    let writer = unsafe { std::fs::File::from_raw_fd(fds[1]) };
    let out = Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .args(["cvc", "inspect", fixture.to_str().unwrap(), "--json"])
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
}
