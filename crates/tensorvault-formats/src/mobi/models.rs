//! Real architectures as fixture models, with deterministic weights (He-uniform weights,
//! PyTorch-style uniform biases, from a SplitMix64 stream seeded per model).
//!
//! * [`lenet5`]: LeNet-5 for MNIST (1x28x28, conv1 padded by 2): 61,706 parameters.
//! * [`cifar10_cnn`]: the TensorFlow CIFAR-10 tutorial CNN (3x32x32): 122,570 parameters.

use super::builder::{ModelBuilder, Value};
use super::error::MobiError;
use super::types::{DataType, Model, OperatorType as Op, ParamValue};

/// Parameter count of [`lenet5`].
pub const LENET5_PARAMS: u64 = 61_706;
/// Parameter count of [`cifar10_cnn`].
pub const CIFAR10_PARAMS: u64 = 122_570;

struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // 24 random bits -> [0, 1).
        (z >> 40) as f32 / (1u64 << 24) as f32
    }

    fn uniform(&mut self, n: usize, bound: f32) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next_f32() * 2.0 - 1.0) * bound)
            .collect()
    }
}

fn ints(v: &[i64]) -> ParamValue {
    ParamValue::Ints(v.to_vec())
}

struct Net {
    b: ModelBuilder,
    rng: Rng,
}

impl Net {
    fn weights(&mut self, shape: &[u64], fan_in: u64) -> Result<(Value, Value), MobiError> {
        let n: u64 = shape.iter().product();
        let w = self.rng.uniform(n as usize, (6.0 / fan_in as f32).sqrt());
        let bias = self
            .rng
            .uniform(shape[0] as usize, 1.0 / (fan_in as f32).sqrt());
        Ok((
            self.b.constant_f32(shape, &w)?,
            self.b.constant_f32(&shape[..1], &bias)?,
        ))
    }

    fn conv_relu(
        &mut self,
        x: Value,
        out_c: u64,
        in_c: u64,
        k: u64,
        pad: i64,
    ) -> Result<Value, MobiError> {
        let (w, bias) = self.weights(&[out_c, in_c, k, k], in_c * k * k)?;
        let params = vec![
            ("stride".to_string(), ints(&[1, 1])),
            ("padding".to_string(), ints(&[pad, pad, pad, pad])),
            ("dilation".to_string(), ints(&[1, 1])),
            ("layout".to_string(), ParamValue::Str("NCHW".into())),
        ];
        let y = self.b.op(Op::Conv2D, &[x, w, bias], params);
        Ok(self.b.op(Op::Relu, &[y], vec![]))
    }

    fn max_pool(&mut self, x: Value) -> Value {
        let params = vec![
            ("kernel".to_string(), ints(&[2, 2])),
            ("stride".to_string(), ints(&[2, 2])),
        ];
        self.b.op(Op::MaxPool2D, &[x], params)
    }

    fn dense(&mut self, x: Value, out: u64, inp: u64, relu: bool) -> Result<Value, MobiError> {
        let (w, bias) = self.weights(&[out, inp], inp)?;
        let y = self.b.op(Op::FullyConnected, &[x, w, bias], vec![]);
        Ok(if relu {
            self.b.op(Op::Relu, &[y], vec![])
        } else {
            y
        })
    }

    fn head(&mut self, x: Value) -> Value {
        let params = vec![
            ("axis".to_string(), ParamValue::Int(-1)),
            ("beta".to_string(), ParamValue::Float(1.0)),
        ];
        self.b.op(Op::Softmax, &[x], params)
    }

    fn flatten(&mut self, x: Value) -> Value {
        self.b.op(
            Op::Flatten,
            &[x],
            vec![("axis".to_string(), ParamValue::Int(1))],
        )
    }
}

/// LeNet-5 for MNIST: conv 6@5x5 (pad 2), relu, maxpool, conv 16@5x5, relu, maxpool,
/// flatten, fc 120, relu, fc 84, relu, fc 10, softmax. 61,706 parameters (246,824 bytes
/// as f32).
///
/// # Errors
/// None in practice (the shapes are fixed); the builder's errors are passed through.
pub fn lenet5(seed: u64) -> Result<Model, MobiError> {
    let mut n = Net {
        b: ModelBuilder::new("lenet5-mnist").framework_version(1),
        rng: Rng(seed),
    };
    let x = n.b.input("image", DataType::F32, &[1, 1, 28, 28]);
    let y = n.conv_relu(x, 6, 1, 5, 2)?;
    let y = n.max_pool(y);
    let y = n.conv_relu(y, 16, 6, 5, 0)?;
    let y = n.max_pool(y);
    let y = n.flatten(y);
    let y = n.dense(y, 120, 400, true)?;
    let y = n.dense(y, 84, 120, true)?;
    let y = n.dense(y, 10, 84, false)?;
    let y = n.head(y);
    n.b.output("probabilities", DataType::F32, &[1, 10], y);
    n.b.build()
}

/// The CIFAR-10 CNN of the TensorFlow tutorial: conv 32@3x3, relu, maxpool, conv 64@3x3,
/// relu, maxpool, conv 64@3x3, relu, flatten (1024), fc 64, relu, fc 10, softmax. 122,570 parameters (490,280 bytes as f32).
///
/// # Errors
/// None in practice (the shapes are fixed); the builder's errors are passed through.
pub fn cifar10_cnn(seed: u64) -> Result<Model, MobiError> {
    let mut n = Net {
        b: ModelBuilder::new("cifar10-cnn").framework_version(1),
        rng: Rng(seed),
    };
    let x = n.b.input("image", DataType::F32, &[1, 3, 32, 32]);
    let y = n.conv_relu(x, 32, 3, 3, 0)?;
    let y = n.max_pool(y);
    let y = n.conv_relu(y, 64, 32, 3, 0)?;
    let y = n.max_pool(y);
    let y = n.conv_relu(y, 64, 64, 3, 0)?;
    let y = n.flatten(y);
    let y = n.dense(y, 64, 1024, true)?;
    let y = n.dense(y, 10, 64, false)?;
    let y = n.head(y);
    n.b.output("probabilities", DataType::F32, &[1, 10], y);
    n.b.build()
}
