//! Power cuts while a registry saves a version and hot-swaps to it (issue 15, item 1): the
//! version directory is written into a temporary sibling, fsynced and renamed in, and
//! `registry.json` is replaced atomically, all through `tensorvault_core::fsio`. For every
//! cut point and three loss models the disk image must open as a registry whose every
//! listed version verifies (whole-file SHA-256 and chunk digests) and whose active model
//! loads as the old version or the new one, bit for bit; once the save and the swap
//! returned, the new one.

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};
use tensorvault_core::fsio::power_cut::{Loss, PowerCut};
use tensorvault_registry::{ModelRegistry, Preset, SaveOptions};

fn model_file(path: &Path, seed: u8) -> BTreeMap<String, Vec<u8>> {
    let tensors: BTreeMap<String, (Vec<usize>, Vec<u8>)> =
        [("embed.weight", vec![32, 8]), ("layer.0.bias", vec![8])]
            .into_iter()
            .map(|(n, shape)| {
                let len: usize = shape.iter().product::<usize>() * 4;
                let bytes = (0..len)
                    .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                    .collect();
                (n.to_owned(), (shape, bytes))
            })
            .collect();
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, (s, b))| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
            )
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, &None).unwrap()).unwrap();
    tensors.into_iter().map(|(n, (_, b))| (n, b)).collect()
}

fn opts(v: &str) -> SaveOptions {
    SaveOptions {
        version: Some(v.into()),
        ..SaveOptions::default()
    }
}

#[test]
fn save_and_hot_swap_survive_a_power_cut_at_every_operation() {
    let src = tempfile::tempdir().unwrap();
    let (f1, f2) = (
        src.path().join("v1.safetensors"),
        src.path().join("v2.safetensors"),
    );
    let (m1, m2) = (model_file(&f1, 1), model_file(&f2, 2));
    let setup = |root: &Path| {
        let reg = ModelRegistry::open(root.join("reg"), Preset::Any).unwrap();
        reg.save_from_path(&f1, opts("1.0.0")).unwrap();
        reg.hot_swap_version("1.0.0").unwrap();
    };
    let work = |root: &Path| -> bool {
        let Ok(reg) = ModelRegistry::open(root.join("reg"), Preset::Any) else {
            return false;
        };
        reg.save_from_path(&f2, opts("2.0.0")).is_ok() && reg.hot_swap_version("2.0.0").is_ok()
    };
    let count = tempfile::tempdir().unwrap();
    setup(count.path());
    let (pc, guard) = PowerCut::start(count.path(), None, Loss::AllUnsynced).unwrap();
    assert!(work(count.path()), "the uncut save and swap failed");
    let ops = pc.ops();
    drop(guard);
    let mut points = 0;
    let mut new_active = 0;
    for loss in [Loss::AllUnsynced, Loss::Random { seed: 5 }, Loss::Nothing] {
        for cut in 0..=ops {
            let ctx = format!("cut after op {cut} of {ops}, {loss:?}");
            let dir = tempfile::tempdir().unwrap();
            setup(dir.path());
            let (pc, guard) = PowerCut::start(dir.path(), Some(cut), loss).unwrap();
            let done = work(dir.path());
            let image = pc.cut_now().unwrap();
            drop(guard);
            let after = tempfile::tempdir().unwrap();
            PowerCut::write_image(&image, after.path()).unwrap();
            let reg = ModelRegistry::open(after.path().join("reg"), Preset::Any)
                .unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
            let listed: Vec<String> = reg.list_versions().into_iter().map(|v| v.version).collect();
            assert!(listed.contains(&"1.0.0".to_owned()), "{ctx}: {listed:?}");
            for v in &listed {
                reg.verify_version(v)
                    .unwrap_or_else(|e| panic!("{ctx}: listed version {v} fails: {e}"));
            }
            let active = reg.load().unwrap_or_else(|e| panic!("{ctx}: load: {e}"));
            let want = match active.version.version.as_str() {
                "1.0.0" => &m1,
                "2.0.0" => &m2,
                other => panic!("{ctx}: active version {other}"),
            };
            if done {
                assert_eq!(active.version.version, "2.0.0", "{ctx}: the swap returned");
            }
            new_active += u64::from(active.version.version == "2.0.0");
            for (name, bytes) in want {
                let t = active
                    .get(name)
                    .unwrap_or_else(|| panic!("{ctx}: no {name}"));
                assert!(t.bytes() == bytes.as_slice(), "{ctx}: {name} differs");
            }
            points += 1;
        }
    }
    eprintln!(
        "registry: {points} cut points ({ops} file operations), new version active in {new_active}"
    );
}
