//! The reference runtime for MOBI models: every operator of the op table
//! (`tensorvault_formats::mobi::ops`, specified in `docs/formats/mobi.md`), any batch
//! size, f32 compute. f32 weights are used in place (a model from `Model::open` keeps
//! them in the file's memory map: [`Session::mapped_bytes`]); quantized and fp16
//! weights are dequantized once when the [`Session`] is prepared (through
//! `ConstantTensor::to_f32`, the format's single dequantization path).
//! FullyConnected, MatMul and Conv2D use the crate's own packed sgemm ([`gemm`]: AVX2 + FMA
//! micro-kernel, weights packed once); Conv2D is im2col + sgemm (1x1
//! convolutions a direct sgemm, small planes one sgemm for the whole batch), depthwise
//! convolution a polyphase kernel of contiguous taps (AVX2 when the CPU has it). A Relu
//! or Clip (ReLU6) right after a Conv2D, DepthwiseConv2D or FullyConnected that only it
//! reads is fused into that operator's output loop, and the buffers of freed values are
//! reused by later operators and runs. A graph that is per-image along the batch axis
//! ([`Session::per_image`], the rule decided from its operators when the session is
//! prepared) runs a batch in slices of images whose largest activation fits
//! [`Limits::sub_batch_elements`] (a cache budget), with bitwise the results of one run.
//!
//! Nothing a crafted model or input asks for is allocated before it is checked against
//! [`Limits::max_elements`]; shape problems inside the graph are typed errors naming the
//! operator index and the value id.
//!
//! ```
//! use tensorvault_formats::mobi::models;
//! use tensorvault_mobi_runtime::{Session, Tensor};
//! let model = models::lenet5(1)?;
//! let session = Session::new(&model)?;
//! let image = Tensor::f32(vec![2, 1, 28, 28], vec![0.5; 2 * 28 * 28])?; // batch of 2
//! let out = session.run(&[("image", image)])?;
//! assert_eq!(out[0].0, "probabilities");
//! assert_eq!(out[0].1.shape, vec![2, 10]);
//! # Ok::<(), tensorvault_mobi_runtime::RuntimeError>(())
//! ```

mod error;
mod ops;
mod session;
mod sub_batch;
mod tensor;

pub use error::RuntimeError;
pub use ops::gemm;
pub use session::{takes_integers, ConstantMemory, Limits, Session};
pub use tensor::{numel, Data, SharedF32, Tensor};
