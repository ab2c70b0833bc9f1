//! The JSON header: parsing with typed errors, and serialization byte-identical to the
//! reference writers.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};
use tensorvault_quant::affine_u8::AffineU8;
use tensorvault_quant::row_int4::ColumnNorm;

use crate::cvc::compression::Compression;
use crate::cvc::header_crc;
use crate::cvc::layout::{Framing, FORMAT};
use crate::cvc::pyjson::{self, Separators};
use crate::FormatError;

/// The parsed, validated header of a CVC file.
#[derive(Debug, Clone, PartialEq)]
pub struct CvcHeader {
    /// Which framing the file uses.
    pub framing: Framing,
    /// `(major, minor)` for v1.x files, `(0, 1)` for legacy v0 (as the reference reports it).
    pub version: (u16, u16),
    /// Total number of vectors (rows).
    pub num_vectors: u64,
    /// Values per vector.
    pub dimension: u64,
    /// The file-level (default) compression.
    pub compression: Compression,
    /// One entry per chunk, in file order.
    pub chunks: Vec<ChunkHeader>,
    /// Whether the file declares `mmap_optimized` (page-aligned chunk frames).
    pub mmap_optimized: bool,
    /// Top-level sections (from `pack_cvc_sections`), empty if none.
    pub sections: Vec<Section>,
    /// The header carries tensorvault's header checksum (`header_crc`): verified when
    /// parsed, written by [`CvcHeader::to_json`] (v1.0 only; the reference writes none).
    pub header_crc: bool,
}

/// One chunk's header entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkHeader {
    /// Rows in the chunk.
    pub rows: u64,
    /// The chunk's own compression (the file default when the entry has none).
    pub compression: Compression,
    /// `min` and `scale` as stored (int8 chunks only).
    pub int8: Option<Int8Params>,
    /// The column normalisation (`col_offset` / `col_scale`; int4 chunks only).
    pub int4: Option<Arc<ColumnNorm>>,
    /// Free-form chunk metadata (`chunk_metadata` in the reference API).
    pub metadata: Option<Value>,
    /// The sections that overlap this chunk (files from `pack_cvc_sections`).
    pub sections: Vec<ChunkSection>,
    /// Absolute offset of the chunk frame (`mmap_optimized` files).
    pub file_offset: Option<u64>,
}

/// The stored affine parameters of an int8 chunk, exactly as in the JSON.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Int8Params {
    /// `min` as stored.
    pub min: f64,
    /// `scale` as stored (f64 in legacy files, an exact f32 in v1.0 files).
    pub scale: f64,
    /// The f32 codec parameters the values decode with.
    pub codec: AffineU8,
}

/// A top-level section: a named row range.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// First row.
    pub start_index: u64,
    /// One past the last row.
    pub end_index: u64,
    /// The section's metadata object.
    pub metadata: Value,
}

/// A section's overlap with one chunk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkSection {
    /// End of the overlap, relative to the chunk's first row.
    pub end_in_chunk: u64,
    /// The section's metadata.
    pub metadata: Value,
    /// The section's end row (absolute).
    pub section_end: u64,
    /// The section's start row (absolute).
    pub section_start: u64,
    /// Start of the overlap, relative to the chunk's first row.
    pub start_in_chunk: u64,
}

impl ChunkHeader {
    /// Payload bytes this chunk must have for `dimension`, or `None` on overflow.
    #[must_use]
    pub fn payload_len(&self, dimension: u64) -> Option<u64> {
        self.rows
            .checked_mul(self.compression.row_bytes(dimension)?)
    }
}

/// Field-access helpers that turn a missing or mistyped key into a typed error.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    path: String,
    offset: u64,
}

impl<'a> Fields<'a> {
    fn missing(&self, key: &str) -> FormatError {
        FormatError::MissingField {
            format: FORMAT,
            field: self.field(key),
            offset: self.offset,
        }
    }

    fn invalid(&self, key: &str, reason: impl Into<String>) -> FormatError {
        FormatError::InvalidField {
            format: FORMAT,
            field: self.field(key),
            offset: self.offset,
            reason: reason.into(),
        }
    }

    fn field(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn opt(&self, key: &str) -> Option<&'a Value> {
        self.obj.get(key)
    }

    fn req(&self, key: &str) -> Result<&'a Value, FormatError> {
        self.obj.get(key).ok_or_else(|| self.missing(key))
    }

    fn u64_of(&self, key: &str, v: &Value) -> Result<u64, FormatError> {
        v.as_u64().ok_or_else(|| {
            self.invalid(
                key,
                format!("expected a non-negative integer, found {}", kind(v)),
            )
        })
    }

    fn req_u64(&self, key: &str) -> Result<u64, FormatError> {
        self.u64_of(key, self.req(key)?)
    }

    fn opt_u64(&self, key: &str) -> Result<Option<u64>, FormatError> {
        self.opt(key).map(|v| self.u64_of(key, v)).transpose()
    }

    fn req_f64(&self, key: &str) -> Result<f64, FormatError> {
        let v = self.req(key)?;
        v.as_f64()
            .ok_or_else(|| self.invalid(key, format!("expected a number, found {}", kind(v))))
    }

    fn compression(
        &self,
        key: &str,
        default: Option<Compression>,
    ) -> Result<Compression, FormatError> {
        match (self.opt(key), default) {
            (None, Some(d)) => Ok(d),
            (None, None) => Err(self.missing(key)),
            (Some(Value::String(s)), _) => Compression::parse(s, self.field(key)),
            (Some(v), _) => Err(self.invalid(key, format!("expected a string, found {}", kind(v)))),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl CvcHeader {
    /// Parse and validate the JSON header bytes of a file whose JSON starts at
    /// `json_offset`. Checks field presence and types, compressions, int8 parameters
    /// (finite as f32) and that the chunk rows add up to `num_vectors`. Layout checks
    /// against the file size are the reader's.
    ///
    /// # Errors
    /// [`FormatError::InvalidJson`], [`FormatError::MissingField`],
    /// [`FormatError::InvalidField`], [`FormatError::UnsupportedCompression`],
    /// [`FormatError::CountMismatch`] (rows vs `num_vectors`).
    pub fn parse(
        json: &[u8],
        framing: Framing,
        version: (u16, u16),
        json_offset: u64,
    ) -> Result<Self, FormatError> {
        let nodes = pyjson::value_count(json);
        if nodes > crate::cvc::layout::MAX_HEADER_NODES {
            return Err(FormatError::InvalidField {
                format: FORMAT,
                field: "header".into(),
                offset: json_offset,
                reason: format!(
                    "{nodes} JSON values exceed the limit of {} (a header is parsed into a tree \
                     of ~100 bytes per value)",
                    crate::cvc::layout::MAX_HEADER_NODES
                ),
            });
        }
        let value: Value = serde_json::from_slice(json).map_err(|e| FormatError::InvalidJson {
            format: FORMAT,
            // Compact headers are a single line, so the column is the byte position.
            offset: json_offset + (e.column().saturating_sub(1) as u64),
            reason: e.to_string(),
        })?;
        let Value::Object(obj) = &value else {
            return Err(FormatError::InvalidJson {
                format: FORMAT,
                offset: json_offset,
                reason: format!("the header is {}, not an object", kind(&value)),
            });
        };
        let header_crc = match framing {
            Framing::V1 => {
                header_crc::verify(json, json_offset, obj.contains_key(header_crc::KEY))?
            }
            Framing::V0 => false,
        };
        let top = Fields {
            obj,
            path: String::new(),
            offset: json_offset,
        };
        let num_vectors = top.req_u64("num_vectors")?;
        let dimension = top.req_u64("dimension")?;
        if dimension == 0 {
            return Err(top.invalid("dimension", "must be at least 1"));
        }
        // One decoded row must be addressable: bounds every later `dimension * width`.
        if dimension
            .checked_mul(4)
            .and_then(|b| usize::try_from(b).ok())
            .is_none()
        {
            return Err(top.invalid(
                "dimension",
                format!("{dimension} values per row is too large"),
            ));
        }
        let compression = top.compression("compression", None)?;
        let Value::Array(raw_chunks) = top.req("chunks")? else {
            return Err(top.invalid("chunks", "expected an array"));
        };
        let mmap_optimized = match top.opt("mmap_optimized") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                return Err(top.invalid(
                    "mmap_optimized",
                    format!("expected a boolean, found {}", kind(v)),
                ))
            }
        };
        let sections = match top.opt("sections") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, s)| parse_section(s, i, json_offset))
                .collect::<Result<_, _>>()?,
            Some(v) => {
                return Err(top.invalid("sections", format!("expected an array, found {}", kind(v))))
            }
        };
        // Sections partition rows (`pack_cvc_sections` writes them in order, back to back).
        // Overlapping or repeated ones would let a small file make a section load write the
        // same rows any number of times; out-of-range ones name rows that do not exist.
        let mut prev_end = 0u64;
        for (i, sec) in sections.iter().enumerate() {
            if sec.start_index < prev_end {
                return Err(top.invalid(
                    &format!("sections[{i}].start_index"),
                    format!(
                        "start_index {} overlaps the previous section (ends at {prev_end}); \
                         sections must be in row order and must not overlap",
                        sec.start_index
                    ),
                ));
            }
            if sec.end_index > num_vectors {
                return Err(top.invalid(
                    &format!("sections[{i}].end_index"),
                    format!(
                        "end_index {} is past num_vectors {num_vectors}",
                        sec.end_index
                    ),
                ));
            }
            prev_end = sec.end_index;
        }

        let mut chunks = Vec::with_capacity(raw_chunks.len());
        let mut rows_total: u64 = 0;
        for (i, raw) in raw_chunks.iter().enumerate() {
            let path = format!("chunks[{i}]");
            let Value::Object(cobj) = raw else {
                return Err(top.invalid(&path, format!("expected an object, found {}", kind(raw))));
            };
            let f = Fields {
                obj: cobj,
                path,
                offset: json_offset,
            };
            let chunk = parse_chunk(&f, compression, dimension)?;
            rows_total = rows_total
                .checked_add(chunk.rows)
                .ok_or_else(|| f.invalid("rows", "sum of chunk rows overflows u64"))?;
            chunks.push(chunk);
        }
        if rows_total != num_vectors {
            return Err(FormatError::CountMismatch {
                format: FORMAT,
                what: "sum of chunk rows vs num_vectors".to_owned(),
                expected: num_vectors,
                found: rows_total,
            });
        }
        Ok(CvcHeader {
            framing,
            version,
            num_vectors,
            dimension,
            compression,
            chunks,
            mmap_optimized,
            sections,
            header_crc,
        })
    }

    /// Serialize the header as the reference writer would: sorted keys and compact
    /// separators for v1.0, insertion order and spaced separators for v0; then, for v1.0
    /// with `header_crc`, add the header checksum as the last member.
    ///
    /// # Errors
    /// [`FormatError::InvalidArgument`] if a metadata value cannot be serialized.
    pub fn to_json(&self) -> Result<Vec<u8>, FormatError> {
        let res = match self.framing {
            Framing::V1 => pyjson::to_vec(&self.to_sorted_value(), Separators::Compact),
            Framing::V0 => pyjson::to_vec(&V0Header::from(self), Separators::Spaced),
        };
        let mut json = res.map_err(|e| FormatError::InvalidArgument {
            name: "metadata",
            reason: e.to_string(),
        })?;
        if self.header_crc && self.framing == Framing::V1 {
            header_crc::seal(&mut json)?;
        }
        Ok(json)
    }

    fn to_sorted_value(&self) -> Value {
        let mut top = Map::new();
        let chunks = self
            .chunks
            .iter()
            .map(|c| Value::Object(c.to_sorted_map()))
            .collect();
        top.insert("chunks".into(), Value::Array(chunks));
        top.insert("compression".into(), self.compression.name().into());
        top.insert("dimension".into(), self.dimension.into());
        if self.mmap_optimized {
            top.insert("mmap_optimized".into(), true.into());
        }
        top.insert("num_vectors".into(), self.num_vectors.into());
        if !self.sections.is_empty() {
            let s = self
                .sections
                .iter()
                .map(|s| {
                    serde_json::json!({
                        "end_index": s.end_index,
                        "metadata": s.metadata,
                        "num_vectors": s.end_index - s.start_index,
                        "start_index": s.start_index,
                    })
                })
                .collect();
            top.insert("sections".into(), Value::Array(s));
        }
        Value::Object(top)
    }
}

impl ChunkHeader {
    fn to_sorted_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("compression".into(), self.compression.name().into());
        if let Some(off) = self.file_offset {
            m.insert("file_offset".into(), off.into());
        }
        if let Some(meta) = &self.metadata {
            m.insert("metadata".into(), meta.clone());
        }
        if let Some(p) = &self.int8 {
            m.insert("min".into(), p.min.into());
            m.insert("scale".into(), p.scale.into());
        }
        if let Some(c) = &self.int4 {
            m.insert("col_offset".into(), int4_cols::encode(c.offset()).into());
            m.insert("col_scale".into(), int4_cols::encode(c.scale()).into());
        }
        m.insert("rows".into(), self.rows.into());
        if !self.sections.is_empty() {
            let s = serde_json::to_value(&self.sections).expect("sections serialize");
            m.insert("sections".into(), s);
        }
        m
    }
}

/// The legacy header in decompressed 0.1.0's key order (Python dict insertion order;
/// nested metadata objects come out with sorted keys, a documented difference).
#[derive(Serialize)]
struct V0Header<'a> {
    num_vectors: u64,
    dimension: u64,
    compression: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    sections: Vec<V0Section<'a>>,
    chunks: Vec<V0Chunk<'a>>,
}

#[derive(Serialize)]
struct V0Section<'a> {
    start_index: u64,
    end_index: u64,
    num_vectors: u64,
    metadata: &'a Value,
}

#[derive(Serialize)]
struct V0Chunk<'a> {
    rows: u64,
    compression: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scale: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    sections: Vec<V0ChunkSection<'a>>,
}

#[derive(Serialize)]
struct V0ChunkSection<'a> {
    metadata: &'a Value,
    start_in_chunk: u64,
    end_in_chunk: u64,
    section_start: u64,
    section_end: u64,
}

impl<'a> From<&'a CvcHeader> for V0Header<'a> {
    fn from(h: &'a CvcHeader) -> Self {
        V0Header {
            num_vectors: h.num_vectors,
            dimension: h.dimension,
            compression: h.compression.name(),
            sections: h
                .sections
                .iter()
                .map(|s| V0Section {
                    start_index: s.start_index,
                    end_index: s.end_index,
                    num_vectors: s.end_index - s.start_index,
                    metadata: &s.metadata,
                })
                .collect(),
            chunks: h
                .chunks
                .iter()
                .map(|c| V0Chunk {
                    rows: c.rows,
                    compression: c.compression.name(),
                    min: c.int8.map(|p| p.min),
                    scale: c.int8.map(|p| p.scale),
                    metadata: c.metadata.as_ref(),
                    sections: c
                        .sections
                        .iter()
                        .map(|cs| V0ChunkSection {
                            metadata: &cs.metadata,
                            start_in_chunk: cs.start_in_chunk,
                            end_in_chunk: cs.end_in_chunk,
                            section_start: cs.section_start,
                            section_end: cs.section_end,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

fn parse_chunk(
    f: &Fields<'_>,
    default: Compression,
    dimension: u64,
) -> Result<ChunkHeader, FormatError> {
    let rows = f.req_u64("rows")?;
    let compression = f.compression("compression", Some(default))?;
    let int8 = if compression == Compression::Int8 {
        let min = f.req_f64("min")?;
        let scale = f.req_f64("scale")?;
        let codec = AffineU8::from_stored(min, scale).map_err(|e| {
            let key = match &e {
                tensorvault_quant::QuantError::InvalidParam { field, .. } => *field,
                _ => "min",
            };
            f.invalid(key, e.to_string())
        })?;
        Some(Int8Params { min, scale, codec })
    } else {
        None
    };
    let int4 = if compression == Compression::Int4 {
        let col = |key: &str| -> Result<Vec<f32>, FormatError> {
            match f.req(key)? {
                Value::String(s) => int4_cols::decode(s, dimension).map_err(|e| f.invalid(key, e)),
                v => Err(f.invalid(key, format!("expected a base64 string, found {}", kind(v)))),
            }
        };
        let cols = ColumnNorm::from_parts(col("col_offset")?, col("col_scale")?).map_err(|e| {
            let key = match &e {
                tensorvault_quant::QuantError::InvalidParam { field, .. } => *field,
                _ => "col_offset",
            };
            f.invalid(key, e.to_string())
        })?;
        Some(Arc::new(cols))
    } else {
        None
    };
    let sections = match f.opt("sections") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(j, s)| parse_chunk_section(f, s, j))
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err(f.invalid("sections", format!("expected an array, found {}", kind(v))))
        }
    };
    Ok(ChunkHeader {
        rows,
        compression,
        int8,
        int4,
        metadata: f.opt("metadata").cloned(),
        sections,
        file_offset: f.opt_u64("file_offset")?,
    })
}

fn parse_chunk_section(f: &Fields<'_>, v: &Value, j: usize) -> Result<ChunkSection, FormatError> {
    let path = format!("{}.sections[{j}]", f.path);
    let Value::Object(obj) = v else {
        return Err(f.invalid(&format!("sections[{j}]"), "expected an object"));
    };
    let s = Fields {
        obj,
        path,
        offset: f.offset,
    };
    let cs = ChunkSection {
        end_in_chunk: s.req_u64("end_in_chunk")?,
        metadata: s.opt("metadata").cloned().unwrap_or(Value::Null),
        section_end: s.req_u64("section_end")?,
        section_start: s.req_u64("section_start")?,
        start_in_chunk: s.req_u64("start_in_chunk")?,
    };
    if cs.start_in_chunk > cs.end_in_chunk || cs.section_start > cs.section_end {
        return Err(s.invalid("start_in_chunk", "section range is reversed"));
    }
    Ok(cs)
}

fn parse_section(v: &Value, i: usize, offset: u64) -> Result<Section, FormatError> {
    let path = format!("sections[{i}]");
    let Value::Object(obj) = v else {
        return Err(FormatError::InvalidField {
            format: FORMAT,
            field: path,
            offset,
            reason: "expected an object".into(),
        });
    };
    let s = Fields { obj, path, offset };
    let start_index = s.req_u64("start_index")?;
    let end_index = s.req_u64("end_index")?;
    if end_index < start_index {
        return Err(s.invalid("end_index", "end_index is before start_index"));
    }
    Ok(Section {
        start_index,
        end_index,
        metadata: s.opt("metadata").cloned().unwrap_or(Value::Null),
    })
}

/// The int4 column parameters in the JSON: base64 (standard alphabet, padded) of `dim`
/// little-endian f32 values.
mod int4_cols {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;

    pub(super) fn encode(values: &[f32]) -> String {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        STANDARD.encode(bytes)
    }

    /// Decode, checking the string's length against `dimension` before decoding (so the
    /// buffer is sized by the string the header holds, never by the claimed dimension).
    pub(super) fn decode(s: &str, dimension: u64) -> Result<Vec<f32>, String> {
        let expected = dimension
            .checked_mul(4)
            .map(|b| b.div_ceil(3).saturating_mul(4));
        if expected != Some(s.len() as u64) {
            return Err(format!(
                "{} base64 characters do not hold {dimension} f32 values",
                s.len()
            ));
        }
        let bytes = STANDARD
            .decode(s)
            .map_err(|e| format!("invalid base64: {e}"))?;
        if bytes.len() as u64 != dimension.saturating_mul(4) {
            return Err(format!(
                "{} bytes do not hold {dimension} f32 values",
                bytes.len()
            ));
        }
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}
