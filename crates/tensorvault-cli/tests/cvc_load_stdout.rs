//! `cvc load` streams in batches (issue 17): the file it writes and the array it sends to
//! standard output (`-`) hold the same bytes, for whole and partial loads, with the
//! summary on standard error.

mod common;
use common::{s, tv};

#[test]
fn load_to_stdout_equals_load_to_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cvc/vectors_1000x768_f32.npy");
    for comp in ["fp16", "int8", "bf16"] {
        let cvc = dir.path().join(format!("{comp}.cvc"));
        let r = tv(&[
            "cvc",
            "pack",
            s(&input),
            s(&cvc),
            "--compression",
            comp,
            "--chunk-size",
            "300",
        ]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        for extra in [
            &[][..],
            &["--rows", "250:701"][..],
            &["--chunks", "2,0"][..],
        ] {
            let file = dir.path().join("out.npy");
            let mut args = vec!["cvc", "load", s(&cvc), s(&file)];
            args.extend_from_slice(extra);
            let r = tv(&args);
            assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
            let mut args = vec!["cvc", "load", s(&cvc), "-", "--json"];
            args.extend_from_slice(extra);
            let piped = tv(&args);
            assert!(
                piped.status.success(),
                "{}",
                String::from_utf8_lossy(&piped.stderr)
            );
            assert_eq!(
                piped.stdout,
                std::fs::read(&file).unwrap(),
                "{comp} {extra:?}"
            );
            let summary: serde_json::Value = serde_json::from_slice(&piped.stderr).unwrap();
            assert_eq!(summary["output"], "standard output");
        }
    }
}
