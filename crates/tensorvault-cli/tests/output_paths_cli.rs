//! Issue 25 class 5, a sibling of "errors that point the wrong way": an output that cannot
//! be created (its directory is missing) is reported under the path the user gave, never
//! under the temporary name the atomic writer would have used and never created.

mod common;
use common::{ok, s, tv, write_npy};

#[test]
fn outputs_in_a_missing_directory_name_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("v.npy");
    let vals: Vec<f32> = (0..64).map(|i| i as f32).collect();
    write_npy(&npy, &[4, 16], &vals);
    let cvc = dir.path().join("v.cvc");
    ok(&tv(&["cvc", "pack", s(&npy), s(&cvc)]));
    let root = dir.path().join("root");
    ok(&tv(&["store", "put", s(&root), "t", "c", "x", s(&npy)]));
    let missing = dir.path().join("missing");
    let cases: [(Vec<&str>, std::path::PathBuf); 4] = [
        (vec!["cvc", "load", s(&cvc)], missing.join("o.npy")),
        (vec!["cvc", "pack", s(&npy)], missing.join("o.cvc")),
        (vec!["cgeb", "pack", s(&npy)], missing.join("o")),
        (
            vec!["store", "get", s(&root), "t", "c", "x"],
            missing.join("o.npy"),
        ),
    ];
    for (mut args, out) in cases {
        let out_s = out.to_str().unwrap().to_owned();
        args.push(&out_s);
        let o = tv(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        // cgeb pack writes OUT.cgeb first.
        let named = if args[0] == "cgeb" {
            out.with_extension("cgeb")
        } else {
            out.clone()
        };
        assert_eq!(
            err.trim_end(),
            format!(
                "error: create temporary file for {}: No such file or directory (os error 2)",
                named.display()
            ),
            "{args:?}"
        );
        assert!(!err.contains("/.o."), "a temporary name: {err}");
    }
}
