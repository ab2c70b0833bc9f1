//! Checkpoint files: round trip, dtypes, corruption, interop with the Python fixture.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use tensorvault_registry::checkpoint::{
    checksum_of, load_checkpoint_dir, map_file, read_metadata, tensor_to_f32, LoadOptions,
    METADATA_FILE, WEIGHTS_FILE,
};
use tensorvault_registry::{
    verify_checkpoint, write_checkpoint, FusionConfig, LoadedWeights, RegistryError,
    WeightInitializer,
};

fn weights(seed: u64) -> LoadedWeights {
    WeightInitializer::new(seed)
        .init_all(&FusionConfig::tiny(), true)
        .unwrap()
}

fn saved(dir: &Path) -> (PathBuf, LoadedWeights) {
    let ck = dir.join("ck");
    let w = weights(1);
    write_checkpoint(&ck, &w, &FusionConfig::tiny()).unwrap();
    (ck, w)
}

fn opts(strict: bool) -> LoadOptions<'static> {
    LoadOptions {
        strict,
        verify_checksum: true,
        fallback: None,
    }
}

/// Rewrites the weights file and updates the metadata checksum to match, so the test
/// exercises the parser rather than the checksum.
fn resign(ck: &Path, bytes: &[u8]) {
    fs::write(ck.join(WEIGHTS_FILE), bytes).unwrap();
    let mut meta: serde_json::Value =
        serde_json::from_slice(&fs::read(ck.join(METADATA_FILE)).unwrap()).unwrap();
    meta["checksum"] = checksum_of(bytes).into();
    let (_, chunks) = tensorvault_registry::digest::digest_all(bytes);
    meta["chunks"] = serde_json::to_value(chunks).unwrap();
    fs::write(ck.join(METADATA_FILE), serde_json::to_vec(&meta).unwrap()).unwrap();
}

#[test]
fn round_trip_is_exact_and_zero_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let (ck, w) = saved(tmp.path());
    let meta = verify_checkpoint(&ck).unwrap();
    assert!(meta.version.checksum.starts_with("sha256:"));
    assert_eq!(meta.config, FusionConfig::tiny());
    let back = load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(true)).unwrap();
    for ((n1, a), (n2, b)) in w.named_tensors().iter().zip(back.named_tensors()) {
        assert_eq!(n1, &n2);
        assert_eq!(a.shape(), b.shape());
        assert_eq!(a.data(), b.data(), "{n1}");
        assert!(b.is_mapped(), "{n1} should be a zero-copy view");
    }
    // Dot-separated names, readable by any safetensors reader.
    let map = map_file(&ck.join(WEIGHTS_FILE)).unwrap();
    let st = SafeTensors::deserialize(&map).unwrap();
    assert!(st.tensor("experts.2.hidden.weight").is_ok());
    assert!(st.tensor("gating.linear.weight").is_ok());
    // No temporary directory is left behind.
    let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(left.len(), 1);
    // Destination exists -> refused.
    assert!(matches!(
        write_checkpoint(&ck, &w, &FusionConfig::tiny()),
        Err(RegistryError::VersionExists { .. })
    ));
}

#[test]
fn same_weights_same_file_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let w = weights(5);
    let sums: Vec<String> = (0..8)
        .map(|i| {
            write_checkpoint(&tmp.path().join(i.to_string()), &w, &FusionConfig::tiny())
                .unwrap()
                .checksum
        })
        .collect();
    assert!(sums.iter().all(|s| s == &sums[0]), "{sums:?}");
}

#[test]
fn flipped_byte_is_checksum_mismatch() {
    let tmp = tempfile::tempdir().unwrap();
    let (ck, _) = saved(tmp.path());
    let p = ck.join(WEIGHTS_FILE);
    let mut b = fs::read(&p).unwrap();
    let last = b.len() - 3;
    b[last] ^= 0x01;
    fs::write(&p, &b).unwrap();
    assert!(matches!(
        verify_checkpoint(&ck),
        Err(RegistryError::ChecksumMismatch { .. })
    ));
    // A verified load hashes the recorded chunks on all cores and names the damaged one.
    match load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(true)) {
        Err(RegistryError::ChunkChecksumMismatch { offset, end, .. }) => {
            assert_eq!((offset, end), (0, b.len() as u64));
        }
        other => panic!("expected ChunkChecksumMismatch, got {other:?}"),
    }
    // A checkpoint written before chunk digests existed: the whole-file checksum.
    let mpath = ck.join(METADATA_FILE);
    let mut meta: serde_json::Value = serde_json::from_slice(&fs::read(&mpath).unwrap()).unwrap();
    meta.as_object_mut().unwrap().remove("chunks");
    fs::write(&mpath, serde_json::to_vec(&meta).unwrap()).unwrap();
    assert!(matches!(
        load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(true)),
        Err(RegistryError::ChecksumMismatch { .. })
    ));
    b[last] ^= 0x01;
    fs::write(&p, &b).unwrap();
    load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(true)).unwrap();
}

#[test]
fn truncated_file_is_typed_error() {
    let tmp = tempfile::tempdir().unwrap();
    let (ck, _) = saved(tmp.path());
    let b = fs::read(ck.join(WEIGHTS_FILE)).unwrap();
    for cut in [4, 100, b.len() / 2, b.len() - 1] {
        resign(&ck, &b[..cut]);
        let r = load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(true));
        // A cut short enough that the metadata's config no longer fits is reported as
        // such before the safetensors parser runs.
        assert!(
            matches!(
                r,
                Err(RegistryError::Safetensors { .. } | RegistryError::InvalidMetadata { .. })
            ),
            "cut {cut}: {r:?}"
        );
    }
}

#[test]
fn lying_header_offsets_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let (ck, _) = saved(tmp.path());
    let b = fs::read(ck.join(WEIGHTS_FILE)).unwrap();
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&b[8..8 + n]).unwrap();
    let offs = &mut header["gating.linear.bias"]["data_offsets"];
    let end = offs[1].as_u64().unwrap();
    offs[1] = (end + 4).into();
    let mut h = serde_json::to_vec(&header).unwrap();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&b[8 + n..]);
    resign(&ck, &out);
    let r = load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(true));
    assert!(matches!(r, Err(RegistryError::Safetensors { .. })), "{r:?}");
    // A header length beyond the file.
    let mut out = b.clone();
    out[..8].copy_from_slice(&(b.len() as u64 * 4).to_le_bytes());
    resign(&ck, &out);
    let r = load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(true));
    assert!(matches!(r, Err(RegistryError::Safetensors { .. })), "{r:?}");
}

#[test]
fn wrong_shape_is_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let (ck, _) = saved(tmp.path());
    let other = FusionConfig {
        expert_output_dim: 9,
        ..FusionConfig::tiny()
    };
    let r = load_checkpoint_dir(&ck, &other, opts(false));
    match r {
        Err(RegistryError::ShapeMismatch {
            name,
            expected,
            found,
        }) => {
            assert_eq!(name, "experts.0.output_proj.weight");
            assert_eq!(expected, vec![16, 9]);
            assert_eq!(found, vec![16, 8]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn missing_metadata_is_typed_error() {
    let tmp = tempfile::tempdir().unwrap();
    let (ck, _) = saved(tmp.path());
    fs::remove_file(ck.join(METADATA_FILE)).unwrap();
    assert!(matches!(
        verify_checkpoint(&ck),
        Err(RegistryError::MissingMetadata { .. })
    ));
    assert!(matches!(
        read_metadata(&ck),
        Err(RegistryError::MissingMetadata { .. })
    ));
}

/// Writes a checkpoint whose tensors are stored as `dtype`, optionally dropping one tensor
/// and adding an extra one.
fn write_custom(ck: &Path, w: &LoadedWeights, dtype: Dtype, drop: Option<&str>, extra: bool) {
    fs::create_dir_all(ck).unwrap();
    let mut bufs: Vec<(String, Vec<u8>, Vec<usize>)> = Vec::new();
    for (name, t) in w.named_tensors() {
        if Some(name.as_str()) == drop {
            continue;
        }
        let bytes: Vec<u8> = match dtype {
            Dtype::F16 => t
                .data()
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect(),
            Dtype::BF16 => t
                .data()
                .iter()
                .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
                .collect(),
            _ => t.data().iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        bufs.push((name, bytes, t.shape().to_vec()));
    }
    if extra {
        bufs.push(("extra.weight".into(), vec![0; 8], vec![2]));
    }
    let views: Vec<(String, TensorView<'_>)> = bufs
        .iter()
        .map(|(n, b, s)| {
            let dt = if n == "extra.weight" {
                Dtype::F32
            } else {
                dtype
            };
            (n.clone(), TensorView::new(dt, s.clone(), b).unwrap())
        })
        .collect();
    let bytes = safetensors::serialize(views, &None).unwrap();
    fs::write(ck.join(WEIGHTS_FILE), &bytes).unwrap();
    let meta = serde_json::json!({
        "format": "tensorvault-registry-checkpoint",
        "format_version": 1,
        "version": "1.0.0",
        "source_id": "test",
        "created_at": "2026-01-01T00:00:00Z",
        "checksum": checksum_of(&bytes),
        "metrics": null,
        "config": FusionConfig::tiny(),
    });
    fs::write(ck.join(METADATA_FILE), serde_json::to_vec(&meta).unwrap()).unwrap();
}

#[test]
fn f16_and_bf16_checkpoints_load() {
    let tmp = tempfile::tempdir().unwrap();
    let w = weights(3);
    for (dt, rel) in [(Dtype::F16, 1e-3f32), (Dtype::BF16, 8e-3)] {
        let ck = tmp.path().join(format!("{dt:?}"));
        write_custom(&ck, &w, dt, None, false);
        let back = load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(true)).unwrap();
        for ((n, a), (_, b)) in w.named_tensors().iter().zip(back.named_tensors()) {
            for (x, y) in a.data().iter().zip(b.data()) {
                assert!(
                    (x - y).abs() <= rel * x.abs() + 1e-6,
                    "{dt:?} {n}: {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn strict_and_non_strict_missing_and_extra() {
    let tmp = tempfile::tempdir().unwrap();
    let w = weights(4);
    let ck = tmp.path().join("partial");
    write_custom(&ck, &w, Dtype::F32, Some("experts.1.hidden.weight"), true);
    let r = load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(true));
    assert!(
        matches!(r, Err(RegistryError::UnexpectedTensor { ref name, .. }) if name == "extra.weight")
    );
    let r = load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(false));
    assert!(
        matches!(r, Err(RegistryError::MissingTensor { ref name, .. }) if name == "experts.1.hidden.weight")
    );
    let init = WeightInitializer::new(99);
    let back = load_checkpoint_dir(
        &ck,
        &FusionConfig::tiny(),
        LoadOptions {
            strict: false,
            verify_checksum: true,
            fallback: Some(&init),
        },
    )
    .unwrap();
    assert_eq!(back.filled_by_fallback, vec!["experts.1.hidden.weight"]);
    assert_eq!(
        back.experts[1].hidden.data(),
        init.initialize_named("experts.1.hidden.weight", &[16, 16])
            .unwrap()
            .data()
    );
    assert_eq!(back.output.data(), w.output.data());
}

#[test]
fn python_fixture_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/safetensors");
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("fixture.json")).unwrap()).unwrap();
    let map = map_file(&dir.join("fixture.safetensors")).unwrap();
    assert_eq!(
        checksum_of(&map),
        format!("sha256:{}", manifest["file_sha256"].as_str().unwrap())
    );
    let st = SafeTensors::deserialize(&map).unwrap();
    let mut seen = HashMap::new();
    for t in manifest["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let view = st.tensor(name).unwrap();
        let shape: Vec<usize> = serde_json::from_value(t["shape"].clone()).unwrap();
        assert_eq!(view.shape(), shape.as_slice(), "{name}");
        let r = tensor_to_f32(name, &view, &map);
        if t["dtype"] == "I8" {
            assert!(matches!(r, Err(RegistryError::UnsupportedDtype { .. })));
            continue;
        }
        let got = r.unwrap();
        assert_eq!(got.shape(), shape.as_slice());
        for (i, want) in t["first_values"].as_array().unwrap().iter().enumerate() {
            match want.as_f64() {
                Some(w) => assert_eq!(f64::from(got.data()[i]), w, "{name}[{i}]"),
                None => assert!(got.data()[i].is_nan(), "{name}[{i}]"),
            }
        }
        let sum: f64 = got
            .data()
            .iter()
            .filter(|v| v.is_finite())
            .map(|&v| f64::from(v))
            .sum();
        let want = t["sum_f64_finite"].as_f64().unwrap();
        assert!(
            (sum - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{name}: {sum} vs {want}"
        );
        seen.insert(name.to_owned(), got.is_mapped());
    }
    assert_eq!(seen.len(), 8);
    // F32 tensors are zero-copy (data starts at 752, 4-aligned); f16/bf16 are widened.
    assert!(seen["embed.weight"]);
    assert!(!seen["layers.0.attn.q_proj.weight"]);
    let sp = st.tensor("special.bf16").unwrap();
    let v = tensor_to_f32("special.bf16", &sp, &map).unwrap();
    assert_eq!(v.data()[4], f32::INFINITY);
    assert_eq!(v.data()[7], f32::from_bits(0x0001_0000));
}

/// `config.num_experts = 2e9` in `metadata.json` (no checksum covers it) used to make a
/// load build 6e9 tensor names and abort after 3 GB (issue 16). A config must describe no
/// more values than the weights file holds.
#[test]
fn metadata_config_larger_than_the_weights_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (ck, _) = saved(tmp.path());
    let mpath = ck.join(METADATA_FILE);
    let pristine = fs::read(&mpath).unwrap();
    for (field, value) in [
        ("num_experts", serde_json::json!(2_000_000_000u64)),
        ("input_dim", serde_json::json!(1u64 << 40)),
        ("expert_hidden_dim", serde_json::json!(u64::MAX)),
    ] {
        let mut m: serde_json::Value = serde_json::from_slice(&pristine).unwrap();
        m["config"][field] = value;
        fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
        for e in [
            read_metadata(&ck).unwrap_err(),
            load_checkpoint_dir(&ck, &FusionConfig::tiny(), opts(true)).unwrap_err(),
        ] {
            assert!(
                matches!(
                    &e,
                    RegistryError::InvalidMetadata {
                        field: "config",
                        ..
                    }
                ),
                "{field}: {e:?}"
            );
        }
    }
    // Without a weights file only the expert count is bounded.
    let mut m: serde_json::Value = serde_json::from_slice(&pristine).unwrap();
    m["config"]["num_experts"] = serde_json::json!(2_000_000_000u64);
    fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
    fs::remove_file(ck.join(WEIGHTS_FILE)).unwrap();
    assert!(matches!(
        read_metadata(&ck),
        Err(RegistryError::InvalidMetadata {
            field: "config",
            ..
        })
    ));
}
