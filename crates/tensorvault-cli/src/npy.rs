//! `.npy` input (memory-mapped, f32/f64/f16, converted to f32 in row batches) and
//! output (a header written by `npyz`, then raw little-endian f32 rows streamed after it).

use std::io::Write;
use std::path::Path;

use npyz::DType;

use crate::error::CliError;
use crate::npy_header::read_header;

/// Element type of an input array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NpyElem {
    /// `<f4`
    F32,
    /// `<f8`
    F64,
    /// `<f2`
    F16,
}

impl NpyElem {
    fn size(self) -> usize {
        match self {
            NpyElem::F32 => 4,
            NpyElem::F64 => 8,
            NpyElem::F16 => 2,
        }
    }
}

/// A 2-D, C-order float array in a `.npy` file, memory-mapped.
pub struct NpyInput {
    map: memmap2::Mmap,
    path: String,
    data_offset: usize,
    /// Rows.
    pub rows: u64,
    /// Columns (the vector dimension).
    pub dim: u64,
    /// Element type.
    pub elem: NpyElem,
}

impl NpyInput {
    /// Open and validate an input array.
    ///
    /// # Errors
    /// [`CliError::Npy`] for anything but a complete 2-D C-order little-endian float
    /// array; I/O errors.
    pub fn open(path: &Path) -> Result<Self, CliError> {
        let name = path.display().to_string();
        let bad = |reason: String| CliError::Npy {
            path: name.clone(),
            reason,
        };
        let mut file = CliError::open_regular(path)?;
        let header = read_header(&mut file, &name)?;
        let data_offset = header.data_offset;
        let elem = match header.descr.replace('=', "<").as_str() {
            "<f4" => NpyElem::F32,
            "<f8" => NpyElem::F64,
            "<f2" => NpyElem::F16,
            other => {
                return Err(bad(format!(
                    "dtype {other} is not a little-endian float16, float32 or float64 array"
                )))
            }
        };
        if header.fortran_order {
            return Err(bad(
                "Fortran-order arrays are not supported; save with np.ascontiguousarray".into(),
            ));
        }
        let (rows, dim) = match *header.shape.as_slice() {
            [r, d] => (r, d),
            ref s => {
                return Err(bad(format!(
                    "expected a 2-D array (vectors x dimension), shape is {s:?}"
                )))
            }
        };
        if dim == 0 {
            return Err(bad("dimension is 0".into()));
        }
        let data_len = rows
            .checked_mul(dim)
            .and_then(|n| n.checked_mul(elem.size() as u64))
            .ok_or_else(|| bad(format!("shape ({rows}, {dim}) overflows")))?;
        let file_len = file.metadata().map_err(CliError::io("stat", &name))?.len();
        if data_offset
            .checked_add(data_len)
            .is_none_or(|end| end > file_len)
        {
            return Err(bad(format!(
                "truncated: shape ({rows}, {dim}) needs {data_len} data bytes after offset {data_offset}, file has {file_len} bytes"
            )));
        }
        // SAFETY: read-only map of a file this process does not modify; a concurrent
        // truncation by another process is outside the tool's contract (as for any mmap
        // reader), and the length was checked above.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(CliError::io("mmap", &name))?;
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(NpyInput {
            map,
            path: name,
            data_offset: data_offset as usize,
            rows,
            dim,
            elem,
        })
    }

    /// The input's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Rows `[start, end)` as f32, either borrowed from the map or converted into `buf`.
    pub fn rows_f32<'a>(&'a self, start: u64, end: u64, buf: &'a mut Vec<f32>) -> &'a [f32] {
        let sz = self.elem.size();
        let lo = self.data_offset + (start * self.dim) as usize * sz;
        let hi = self.data_offset + (end * self.dim) as usize * sz;
        let bytes = &self.map[lo..hi];
        match self.elem {
            NpyElem::F32 => match bytemuck::try_cast_slice::<u8, f32>(bytes) {
                Ok(v) if cfg!(target_endian = "little") => v,
                _ => {
                    buf.clear();
                    buf.extend(
                        bytes
                            .chunks_exact(4)
                            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                    );
                    buf
                }
            },
            NpyElem::F64 => {
                buf.clear();
                #[allow(
                    clippy::cast_possible_truncation,
                    reason = "f64 input is stored as f32, like numpy's astype"
                )]
                buf.extend(
                    bytes
                        .chunks_exact(8)
                        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32),
                );
                buf
            }
            NpyElem::F16 => {
                // numpy-exact widening (NaN payloads kept, not quieted).
                let halves: Vec<u16> = bytes
                    .chunks_exact(2)
                    .map(|b| u16::from_le_bytes([b[0], b[1]]))
                    .collect();
                buf.clear();
                buf.resize(halves.len(), 0.0);
                tensorvault_quant::float::f16_bits_to_f32(&halves, buf).expect("equal lengths");
                buf
            }
        }
    }

    /// Tell the kernel the rows before `end` will not be read again, so the resident set
    /// stays bounded while a large input streams through.
    pub fn release(&self, end: u64) {
        let hi = self.data_offset + (end * self.dim) as usize * self.elem.size();
        let hi = hi - hi % 4096;
        if hi > 0 {
            // SAFETY: the map is a read-only shared file mapping; discarding its pages only
            // makes later reads fetch them from the file again, they cannot change.
            let _ = unsafe {
                self.map
                    .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, 0, hi)
            };
        }
    }
}

/// The `.npy` header bytes for a C-order little-endian f32 array of `shape`.
///
/// `npyz` writes the header when its writer starts; rows are then streamed as raw bytes
/// (exactly what `npyz` would write for `<f4`), so large outputs need no per-element calls.
///
/// # Errors
/// The writer's I/O error (none for a `Vec`).
pub fn f32_header(shape: &[u64]) -> std::io::Result<Vec<u8>> {
    use npyz::WriterBuilder;
    let mut buf = Vec::new();
    let writer = npyz::WriteOptions::<f32>::new()
        .dtype(DType::Plain("<f4".parse().expect("valid type string")))
        .shape(shape)
        .writer(&mut buf)
        .begin_nd()?;
    // Dropping the writer before any element is pushed leaves exactly the header in
    // `buf` (its shape check runs on drop and its error is ignored there by design).
    drop(writer);
    Ok(buf)
}

/// Write f32 values as little-endian bytes.
///
/// # Errors
/// The writer's I/O error.
pub fn write_f32s<W: Write>(w: &mut W, values: &[f32]) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        w.write_all(bytemuck::cast_slice(values))
    } else {
        values
            .iter()
            .try_for_each(|v| w.write_all(&v.to_le_bytes()))
    }
}

/// Read a whole C-order array of any shape (up to 8 dimensions) for the store:
/// float32, float16, int8, uint8 as they are; float64 converted to float32 (a finite
/// value beyond float32's range refused, or saturated when `clip`).
///
/// # Errors
/// [`CliError::Npy`] for other dtypes, Fortran order, a truncated file, more than 8
/// dimensions or a float64 value float32 cannot hold (without `clip`); I/O errors.
pub fn read_tensor(
    path: &Path,
    clip: bool,
) -> Result<(tensorvault_store::DType, Vec<u64>, Vec<u8>), CliError> {
    use std::io::Read;
    use tensorvault_store::DType as S;
    let name = path.display().to_string();
    let bad = |reason: String| CliError::Npy {
        path: name.clone(),
        reason,
    };
    let mut file = CliError::open_regular(path)?;
    let header = read_header(&mut file, &name)?;
    let data_offset = header.data_offset;
    let descr = header.descr.replace('=', "<");
    let (dtype, src_size) = match descr.as_str() {
        "<f4" => (S::F32, 4),
        "<f8" => (S::F32, 8),
        "<f2" => (S::F16, 2),
        "|i1" | "<i1" => (S::I8, 1),
        "|u1" | "<u1" => (S::U8, 1),
        other => {
            return Err(bad(format!(
                "dtype {other} is not float32/float16/float64/int8/uint8"
            )))
        }
    };
    if header.fortran_order {
        return Err(bad(
            "Fortran-order arrays are not supported; save with np.ascontiguousarray".into(),
        ));
    }
    let shape = header.shape;
    if shape.is_empty() || shape.len() > 8 {
        return Err(bad(format!(
            "shape {shape:?}: the store takes 1 to 8 dimensions"
        )));
    }
    let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    let len = n
        .and_then(|n| n.checked_mul(src_size))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    let file_len = file.metadata().map_err(CliError::io("stat", &name))?.len();
    if data_offset.checked_add(len) != Some(file_len) {
        return Err(bad(format!(
            "shape {shape:?} needs {len} data bytes after offset {data_offset}, file has {file_len} bytes"
        )));
    }
    if len == 0 {
        return Err(bad("the array is empty".into()));
    }
    // The length was checked against the file size above, so this allocation is bounded
    // by what is really on disk.
    let mut data = vec![0u8; len as usize];
    file.read_exact(&mut data)
        .map_err(CliError::io("read", &name))?;
    if src_size == 8 {
        // float64 is stored as float32: a finite value beyond float32's range would
        // become an infinity, so it is refused (or saturated with --clip). NaN and
        // infinities stay what they are.
        let max = f64::from(f32::MAX);
        let mut out = Vec::with_capacity(data.len() / 2);
        for (i, c) in data.chunks_exact(8).enumerate() {
            let mut v = f64::from_le_bytes(c.try_into().expect("8 bytes"));
            if v.is_finite() && v.abs() > max {
                if !clip {
                    return Err(bad(format!(
                        "element {i} = {v:e} is beyond float32's range ±{max:e}: it would be \
                         stored as infinity; pass --clip to saturate such values"
                    )));
                }
                v = v.clamp(-max, max);
            }
            #[allow(
                clippy::cast_possible_truncation,
                reason = "f64 input is stored as f32, like numpy's astype"
            )]
            out.extend_from_slice(&(v as f32).to_le_bytes());
        }
        data = out;
    }
    Ok((dtype, shape, data))
}

/// Write `data` (little-endian elements of `dtype`) as a C-order .npy file of `shape`,
/// atomically. bf16 is written as float32 (numpy has no bfloat16).
///
/// # Errors
/// I/O errors.
pub fn write_tensor(
    path: &Path,
    dtype: tensorvault_store::DType,
    shape: &[u64],
    data: &[u8],
) -> Result<(), CliError> {
    use npyz::WriterBuilder;
    use tensorvault_store::DType as S;
    let name = path.display().to_string();
    fn header<T: npyz::AutoSerialize>(descr: &str, shape: &[u64]) -> std::io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        let w = npyz::WriteOptions::<T>::new()
            .dtype(DType::Plain(descr.parse().expect("valid type string")))
            .shape(shape)
            .writer(&mut buf)
            .begin_nd()?;
        drop(w);
        Ok(buf)
    }
    let (header, body): (std::io::Result<Vec<u8>>, std::borrow::Cow<'_, [u8]>) = match dtype {
        S::F32 => (header::<f32>("<f4", shape), data.into()),
        S::F16 => (header::<half::f16>("<f2", shape), data.into()),
        S::I8 => (header::<i8>("|i1", shape), data.into()),
        S::U8 => (header::<u8>("|u1", shape), data.into()),
        S::BF16 => (
            header::<f32>("<f4", shape),
            data.chunks_exact(2)
                .flat_map(|c| {
                    half::bf16::from_le_bytes([c[0], c[1]])
                        .to_f32()
                        .to_le_bytes()
                })
                .collect::<Vec<u8>>()
                .into(),
        ),
        other => {
            let reason = format!("dtype {other} has no .npy writer (f32, f16, bf16, i8, u8 only)");
            return Err(CliError::Npy { path: name, reason });
        }
    };
    let mut bytes = header.map_err(CliError::io("encode header", &name))?;
    bytes.extend_from_slice(&body);
    tensorvault_core::atomic::write_atomic(path, &bytes)?;
    Ok(())
}
