//! The operator table: every operator has a consistent spec, the fixture models pass it,
//! the spec document is generated from it, and each kind of bad operator in a crafted
//! file is refused with a typed error naming the operator, the parameter and the offset.

use tensorvault_core::checksum::crc32;
use tensorvault_formats::mobi::ops::{self, check_model, spec, Allowed, ParamDefault, ParamKind};
use tensorvault_formats::mobi::{
    models, DataType, Header, MobiError, Model, ModelBuilder, Operator, OperatorType, ParamValue,
};

fn reseal(b: &mut [u8]) {
    b[8..12].fill(0);
    let h = crc32(&b[..32]);
    b[8..12].copy_from_slice(&h.to_le_bytes());
    let n = b.len() - 4;
    let f = crc32(&b[..n]);
    b[n..].copy_from_slice(&f.to_le_bytes());
}

fn first_op(b: &[u8]) -> usize {
    // v2: the operator count is a varint (one byte for < 128 operators).
    Header::parse(b).unwrap().graph_offset as usize + 1
}

/// x[1,4] -> FC(w[2,4], b[2]) -> FC(w2[3,2], b2[3]) -> Softmax{axis} -> y.
fn two_layers() -> Model {
    let mut b = ModelBuilder::new("two").framework_version(1);
    let x = b.input("x", DataType::F32, &[1, 4]);
    let w = b.constant_f32(&[2, 4], &[0.5; 8]).unwrap();
    let bias = b.constant_f32(&[2], &[0.1, -0.1]).unwrap();
    let w2 = b.constant_f32(&[3, 2], &[0.25; 6]).unwrap();
    let bias2 = b.constant_f32(&[3], &[0.0; 3]).unwrap();
    let y = b.op(OperatorType::FullyConnected, &[x, w, bias], vec![]);
    let y = b.op(OperatorType::FullyConnected, &[y, w2, bias2], vec![]);
    let z = b.op(
        OperatorType::Softmax,
        &[y],
        vec![("axis".into(), ParamValue::Int(-1))],
    );
    b.output("y", DataType::F32, &[1, 3], z);
    b.build().unwrap()
}

/// Offsets of the three operators in the v2 graph section: the operator count (one
/// varint byte), then per operator varints (ids < 128 take one byte each): FC is code,
/// 3, three ids, 1, one id, 0 params (8 bytes); Softmax is code, 1, id, 1, id, 1 param,
/// then key length, "axis", tag, zigzag -1.
fn op_offsets(b: &[u8]) -> [usize; 3] {
    let o = first_op(b);
    let offs = [o, o + 8, o + 16];
    assert_eq!(
        [b[offs[0]], b[offs[1]], b[offs[2]]],
        [2, 2, 9],
        "graph layout changed: FullyConnected, FullyConnected, Softmax codes expected"
    );
    offs
}

/// Overwrite a one-byte varint id.
fn put_id(b: &mut [u8], at: usize, v: u32) {
    assert!(v < 128 && b[at] < 128);
    b[at] = v as u8;
}

#[test]
fn every_operator_has_a_consistent_spec() {
    for &op in OperatorType::ALL {
        let s = spec(op);
        assert_eq!(s.op, op);
        assert!(
            s.min_inputs <= s.max_inputs && s.min_outputs <= s.max_outputs,
            "{op:?}"
        );
        assert!(s.min_outputs >= 1 && !s.inputs.is_empty(), "{op:?}");
        assert!(!s.semantics.is_empty(), "{op:?}");
        for p in s.params {
            assert!(p.since >= 1 && p.since <= s.version, "{op:?}.{}", p.key);
            let default = match p.default {
                ParamDefault::Int(v) => Some(ParamValue::Int(v)),
                ParamDefault::Float(v) => Some(ParamValue::Float(v)),
                ParamDefault::Str(v) => Some(ParamValue::Str(v.into())),
                ParamDefault::Ints(v) => Some(ParamValue::Ints(v.to_vec())),
                ParamDefault::Required | ParamDefault::Derived(_) => None,
            };
            if let Some(d) = default {
                assert_eq!(ParamKind::of(&d), p.kind, "{op:?}.{}", p.key);
                assert!(p.allowed.admits(&d), "{op:?}.{} default not allowed", p.key);
            }
        }
    }
    assert!(OperatorType::ALL.len() >= 80);
}

#[test]
fn fixture_models_pass_the_table() {
    check_model(&models::lenet5(1).unwrap()).unwrap();
    check_model(&models::cifar10_cnn(1).unwrap()).unwrap();
    check_model(&two_layers()).unwrap();
}

#[test]
fn required_version_follows_the_parameters_set() {
    let mut o = Operator {
        op: OperatorType::Conv2D,
        inputs: vec![0, 1],
        outputs: vec![2],
        params: vec![("stride".into(), ParamValue::Ints(vec![1, 1]))],
    };
    assert_eq!(ops::required_version(&o), 1);
    o.params.push(("group".into(), ParamValue::Int(1)));
    assert_eq!(ops::required_version(&o), 2);
    assert_eq!(spec(OperatorType::Conv2D).version, 2);
}

#[test]
fn unknown_keys_strict_for_producers_ignored_in_v1_v2_files() {
    let mut m = two_layers();
    m.operators[2]
        .params
        .push(("note".into(), ParamValue::Str("free".into())));
    let e = check_model(&m).unwrap_err();
    assert!(
        matches!(e, MobiError::UnknownParam { index: 2, op: "Softmax", ref key, .. } if key == "note")
    );
    // Files of format versions 1 and 2 keep free annotations (both golden fixtures
    // carry some); the writer's read-back follows the file's version.
    let b = m.to_bytes().unwrap();
    assert_eq!(Model::from_bytes(&b).unwrap(), m);
    let ops_only = |v| {
        let mut p = Vec::new();
        ops::check_operators(&m, &[], v, &mut p);
        p
    };
    assert!(ops_only(2).is_empty());
    assert!(matches!(
        ops_only(ops::STRICT_KEYS_FROM_VERSION).as_slice(),
        [MobiError::UnknownParam { index: 2, .. }]
    ));
}

#[test]
fn crafted_arity() {
    let mut b = two_layers().to_bytes().unwrap();
    let o = op_offsets(&b)[2];
    b[o] = OperatorType::Add.code() as u8;
    reseal(&mut b);
    let e = Model::from_bytes(&b).unwrap_err();
    assert!(
        matches!(e, MobiError::OperatorArity { index: 2, op: "Add", what: "inputs", count: 1, min: 2, max: 2, offset } if offset == o as u64),
        "{e:?}"
    );
}

#[test]
fn crafted_param_type_and_value() {
    let mut b = two_layers().to_bytes().unwrap();
    let o = op_offsets(&b)[2];
    // Softmax's key "axis" (an int) renamed to "beta" (a float parameter).
    let key_at = o + 7; // code, 1, x, 1, y, 1 param, key length
    assert_eq!(&b[key_at..key_at + 4], b"axis");
    b[key_at..key_at + 4].copy_from_slice(b"beta");
    reseal(&mut b);
    let e = Model::from_bytes(&b).unwrap_err();
    assert!(
        matches!(e, MobiError::ParamType { index: 2, key: "beta", expected: "float", found: "int", offset, .. } if offset == o as u64),
        "{e:?}"
    );
    // Gelu's `approximate` must be "none" or "tanh".
    let mut m = two_layers();
    m.operators[2] = Operator {
        op: OperatorType::Gelu,
        params: vec![("approximate".into(), ParamValue::Str("fast".into()))],
        ..m.operators[2].clone()
    };
    let e = check_model(&m).unwrap_err();
    assert!(
        matches!(
            e,
            MobiError::ParamValue {
                index: 2,
                key: "approximate",
                allowed: Allowed::Strs(_),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("\"fast\""), "{e}");
    // The writer validates what it writes, so it refuses the same model.
    let w = m.to_bytes().unwrap_err();
    assert!(
        matches!(w, MobiError::ParamValue { index: 2, key: "approximate", offset, .. } if offset > 0),
        "{w:?}"
    );
}

#[test]
fn crafted_non_constant_weights() {
    let mut b = two_layers().to_bytes().unwrap();
    let o = op_offsets(&b)[0];
    put_id(&mut b, o + 3, 0); // W := the graph input
    reseal(&mut b);
    let e = Model::from_bytes(&b).unwrap_err();
    assert!(
        matches!(e, MobiError::NonConstantInput { index: 0, op: "FullyConnected", input: "W", id: 0, offset } if offset == o as u64),
        "{e:?}"
    );
}

#[test]
fn crafted_weight_rank_and_bias_length() {
    let m = two_layers();
    let (w, bias) = (m.operators[0].inputs[1], m.operators[0].inputs[2]);
    let bias2 = m.operators[1].inputs[2];
    let good = m.to_bytes().unwrap();
    let o = op_offsets(&good)[0];
    // Swap W and B of the first layer: W has rank 1.
    let mut b = good.clone();
    put_id(&mut b, o + 3, bias);
    put_id(&mut b, o + 4, w);
    reseal(&mut b);
    let e = Model::from_bytes(&b).unwrap_err();
    assert!(
        matches!(e, MobiError::ConstantRank { index: 0, input: "W", rank: 1, expected: 2, offset, .. } if offset == o as u64),
        "{e:?}"
    );
    // The second layer's bias (3) on the first layer (2 outputs).
    let mut b = good;
    put_id(&mut b, o + 4, bias2);
    reseal(&mut b);
    let e = Model::from_bytes(&b).unwrap_err();
    assert!(
        matches!(
            e,
            MobiError::ConstantDim {
                index: 0,
                input: "B",
                axis: 0,
                found: 3,
                expected: 2,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn missing_required_and_conflicting_params() {
    let mut m = two_layers();
    m.operators[2] = Operator {
        op: OperatorType::Concat,
        params: vec![],
        ..m.operators[2].clone()
    };
    assert!(matches!(
        check_model(&m).unwrap_err(),
        MobiError::MissingParam {
            index: 2,
            op: "Concat",
            key: "axis",
            ..
        }
    ));
    m.operators[2] = Operator {
        op: OperatorType::Reshape,
        params: vec![],
        ..m.operators[2].clone()
    };
    assert!(matches!(
        check_model(&m).unwrap_err(),
        MobiError::ParamConflict {
            index: 2,
            key: "shape",
            ..
        }
    ));
    m.operators[2].params = vec![("shape".into(), ParamValue::Ints(vec![-1, -1]))];
    assert!(matches!(
        check_model(&m).unwrap_err(),
        MobiError::ParamConflict {
            index: 2,
            key: "shape",
            rule: "at most one -1",
            ..
        }
    ));
    m.operators[2] = Operator {
        op: OperatorType::Slice,
        params: vec![
            ("starts".into(), ParamValue::Ints(vec![0])),
            ("ends".into(), ParamValue::Ints(vec![1])),
            ("steps".into(), ParamValue::Ints(vec![0])),
        ],
        ..m.operators[2].clone()
    };
    assert!(matches!(
        check_model(&m).unwrap_err(),
        MobiError::ParamConflict {
            index: 2,
            key: "steps",
            rule: "non-zero",
            ..
        }
    ));
}

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/formats/mobi.md");

/// The per-operator reference of docs/formats/mobi.md, rendered from the table.
fn render() -> String {
    let mut s = String::new();
    for &op in OperatorType::ALL {
        let sp = spec(op);
        s.push_str(&format!(
            "#### {} (code {}, op version {})\n\n{}\n\n",
            op.name(),
            op.code(),
            sp.version,
            sp.semantics
        ));
        let max = if sp.max_inputs == u16::MAX {
            "any".to_string()
        } else {
            sp.max_inputs.to_string()
        };
        let inputs: Vec<String> = sp
            .inputs
            .iter()
            .map(|i| format!("`{}` ({:?})", i.name, i.kind))
            .collect();
        s.push_str(&format!(
            "Inputs {}..{max}: {}{}. Outputs: {}..{}.\n\n",
            sp.min_inputs,
            inputs.join(", "),
            if sp.max_inputs as usize > sp.inputs.len() {
                ", repeated"
            } else {
                ""
            },
            sp.min_outputs,
            if sp.max_outputs == u16::MAX {
                "any".to_string()
            } else {
                sp.max_outputs.to_string()
            },
        ));
        if !sp.params.is_empty() {
            s.push_str(
                "| Key | Type | Default | Allowed | Since | Meaning |\n|---|---|---|---|---|---|\n",
            );
            for p in sp.params {
                s.push_str(&format!(
                    "| `{}` | {} | {} | {} | {} | {} |\n",
                    p.key,
                    p.kind.name(),
                    p.default,
                    p.allowed,
                    p.since,
                    p.doc.replace('|', "\\|")
                ));
            }
            s.push('\n');
        }
    }
    s
}

#[test]
fn spec_document_matches_the_table() {
    let doc = std::fs::read_to_string(DOC).unwrap();
    let begin = "<!-- BEGIN generated operator reference -->\n";
    let end = "<!-- END generated operator reference -->";
    let (Some(a), Some(z)) = (doc.find(begin), doc.find(end)) else {
        panic!("docs/formats/mobi.md lacks the generated operator reference markers");
    };
    let now = render();
    if std::env::var("UPDATE_FIXTURES").as_deref() == Ok("1") {
        let new = format!("{}{begin}\n{now}{}", &doc[..a], &doc[z..]);
        std::fs::write(DOC, new).unwrap();
        return;
    }
    let have = &doc[a + begin.len()..z];
    assert_eq!(
        have.trim(),
        now.trim(),
        "docs/formats/mobi.md is out of date: UPDATE_FIXTURES=1 cargo test -p tensorvault-formats --test mobi_ops"
    );
    for &op in OperatorType::ALL {
        assert!(have.contains(&format!("#### {} (code", op.name())));
    }
}

/// x[1,1,2,2] -> Resize(params) -> y, written (v2 keeps unknown keys as annotations, so
/// a key one byte away from a real one survives the writer's validation).
fn resize_file(params: Vec<(&str, ParamValue)>) -> Vec<u8> {
    let mut b = ModelBuilder::new("resize").framework_version(1);
    let x = b.input("x", DataType::F32, &[1, 1, 2, 2]);
    let params = params.into_iter().map(|(k, v)| (k.into(), v)).collect();
    let y = b.op(OperatorType::Resize, &[x], params);
    b.output("y", DataType::F32, &[1, 1, 4, 4], y);
    b.build().unwrap().to_bytes().unwrap()
}

/// Rename the parameter key `from` to `to` (same length) in a file and reseal it.
fn rename_key(b: &mut [u8], from: &[u8], to: &[u8]) {
    let at = b
        .windows(from.len())
        .position(|w| w == from)
        .expect("key present");
    b[at..at + to.len()].copy_from_slice(to);
    reseal(b);
}

#[test]
fn crafted_resize_parameters() {
    let scales = || ("scales", ParamValue::Floats(vec![1.0, 1.0, 2.0, 2.0]));
    let good = resize_file(vec![scales()]);
    let o = first_op(&good) as u64;
    assert_eq!(
        Model::from_bytes(&good).unwrap().operators[0].op,
        OperatorType::Resize
    );
    let conflict = |b: &[u8], want: &str| {
        let e = Model::from_bytes(b).unwrap_err();
        assert!(
            matches!(&e, MobiError::ParamConflict { index: 0, op: "Resize", key, offset, .. } if *key == want && *offset == o),
            "{e:?}"
        );
    };
    // Neither scales nor sizes.
    let mut b = good.clone();
    rename_key(&mut b, b"scales", b"scalez");
    conflict(&b, "scales");
    // sizes of another length than scales.
    let mut b = resize_file(vec![scales(), ("sizeZ", ParamValue::Ints(vec![4, 4, 4]))]);
    rename_key(&mut b, b"sizeZ", b"sizes");
    conflict(&b, "sizes");
    // roi with 3 values for 4 axes.
    let mut b = resize_file(vec![scales(), ("roZ", ParamValue::Floats(vec![0.0; 3]))]);
    rename_key(&mut b, b"roZ", b"roi");
    conflict(&b, "roi");
    // Antialiasing in nearest mode.
    let mut b = resize_file(vec![scales(), ("antialiaZ", ParamValue::Int(1))]);
    rename_key(&mut b, b"antialiaZ", b"antialias");
    conflict(&b, "antialias");
    // A scale of 0.
    let mut b = resize_file(vec![
        ("sizes", ParamValue::Ints(vec![1, 1, 4, 4])),
        ("scaleZ", ParamValue::Floats(vec![1.0, 0.0, 2.0, 2.0])),
    ]);
    rename_key(&mut b, b"scaleZ", b"scales");
    let e = Model::from_bytes(&b).unwrap_err();
    assert!(
        matches!(&e, MobiError::ParamValue { index: 0, key: "scales", allowed: Allowed::PositiveFloats, offset, .. } if *offset == o),
        "{e:?}"
    );
    // An unknown mode, and a mode of the wrong type.
    let mut b = resize_file(vec![scales(), ("modZ", ParamValue::Str("area".into()))]);
    rename_key(&mut b, b"modZ", b"mode");
    let e = Model::from_bytes(&b).unwrap_err();
    assert!(
        matches!(&e, MobiError::ParamValue { index: 0, key: "mode", offset, .. } if *offset == o),
        "{e:?}"
    );
    let mut b = resize_file(vec![scales(), ("modZ", ParamValue::Int(1))]);
    rename_key(&mut b, b"modZ", b"mode");
    let e = Model::from_bytes(&b).unwrap_err();
    assert!(
        matches!(&e, MobiError::ParamType { index: 0, key: "mode", expected: "string", found: "int", offset, .. } if *offset == o),
        "{e:?}"
    );
}

/// x[1,4,2,2] -> ConvTranspose2D(W, B) -> y, written and read back.
fn conv_transpose_file(w_shape: &[u64], b_len: u64, group: i64) -> Result<Model, MobiError> {
    let mut b = ModelBuilder::new("convt").framework_version(1);
    let x = b.input("x", DataType::F32, &[1, 4, 2, 2]);
    let n = w_shape.iter().product::<u64>() as usize;
    let w = b.constant_f32(w_shape, &vec![0.5; n]).unwrap();
    let bias = b
        .constant_f32(&[b_len], &vec![0.0; b_len as usize])
        .unwrap();
    let y = b.op(
        OperatorType::ConvTranspose2D,
        &[x, w, bias],
        vec![("group".into(), ParamValue::Int(group))],
    );
    b.output("y", DataType::F32, &[1, 6, 2, 2], y);
    let m = b.build()?;
    Model::from_bytes(&m.to_bytes()?)
}

#[test]
fn conv_transpose_weight_checks() {
    // W [C=4, M/group=3, 1, 1], group 2: M = 6.
    assert!(conv_transpose_file(&[4, 3, 1, 1], 6, 2).is_ok());
    let e = conv_transpose_file(&[4, 3, 1], 6, 2).unwrap_err();
    assert!(
        matches!(
            e,
            MobiError::ConstantRank {
                index: 0,
                op: "ConvTranspose2D",
                input: "W",
                rank: 3,
                expected: 4,
                ..
            }
        ),
        "{e:?}"
    );
    let e = conv_transpose_file(&[4, 3, 1, 1], 3, 2).unwrap_err();
    assert!(
        matches!(
            e,
            MobiError::ConstantDim {
                index: 0,
                input: "B",
                found: 3,
                expected: 6,
                ..
            }
        ),
        "{e:?}"
    );
    let e = conv_transpose_file(&[4, 3, 1, 1], 9, 3).unwrap_err();
    assert!(
        matches!(
            e,
            MobiError::ParamConflict {
                index: 0,
                key: "group",
                ..
            }
        ),
        "{e:?}"
    );
}
