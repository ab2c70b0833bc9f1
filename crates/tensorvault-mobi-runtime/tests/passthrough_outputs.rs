//! A graph output that no operator computes, a constant passed through unchanged (as ONNX
//! graphs may have), is returned as it is next to computed outputs. (A graph input cannot
//! be a graph output: the format refuses it.)

use tensorvault_formats::mobi::{DataType, ModelBuilder, OperatorType as Op};
use tensorvault_mobi_runtime::{Session, Tensor};

fn session() -> Session {
    let mut b = ModelBuilder::new("passthrough");
    let x = b.input("x", DataType::F32, &[2, 3]);
    let c = b.constant_f32(&[3], &[0.5, -1.5, 2.5]).unwrap();
    let r = b.op(Op::Relu, &[x], vec![]);
    b.output("relu", DataType::F32, &[2, 3], r);
    b.output("table", DataType::F32, &[3], c);
    Session::new(&b.build().unwrap()).unwrap()
}

#[test]
fn constants_can_be_graph_outputs() {
    let s = session();
    let xs = [-1.0, 2.0, -3.0, 4.0, 5.0, -6.0];
    let x = Tensor::f32(vec![2, 3], xs.to_vec()).unwrap();
    for _ in 0..2 {
        let out = s.run(&[("x", x.clone())]).unwrap();
        let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["relu", "table"]);
        assert_eq!(out[0].1.as_f32().unwrap(), &[0.0, 2.0, 0.0, 4.0, 5.0, 0.0]);
        assert_eq!(out[1].1.shape, vec![3]);
        assert_eq!(out[1].1.as_f32().unwrap(), &[0.5, -1.5, 2.5]);
    }
}
