//! The error type of `tensorvault-quant`.

/// Errors raised by the codecs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantError {
    /// An input value is NaN or infinite where the codec needs finite values.
    #[error("value at index {index} is not finite ({value})")]
    NonFinite {
        /// Index of the first offending value in the input slice.
        index: usize,
        /// The value.
        value: f32,
    },
    /// Input and output slices disagree in length.
    #[error("{what}: input has {input} elements but output has room for {output}")]
    LengthMismatch {
        /// Which operation.
        what: &'static str,
        /// Input element count.
        input: usize,
        /// Output element count.
        output: usize,
    },
    /// Codec parameters (e.g. a stored `min` or `scale`) are unusable.
    #[error("invalid parameter {field} = {value}: {reason}")]
    InvalidParam {
        /// The parameter name.
        field: &'static str,
        /// Its value.
        value: f64,
        /// Why it is rejected.
        reason: &'static str,
    },
}

pub(crate) fn check_len(what: &'static str, input: usize, output: usize) -> Result<(), QuantError> {
    if input == output {
        Ok(())
    } else {
        Err(QuantError::LengthMismatch {
            what,
            input,
            output,
        })
    }
}
