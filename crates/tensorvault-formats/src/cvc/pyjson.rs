//! JSON output byte-identical to Python's `json.dumps`, which is what the reference
//! writes: `ensure_ascii=True` (every character outside `' '..='~'` escaped as `\uXXXX`,
//! lower-case hex, surrogate pairs above the BMP) and floats printed by Python's `repr`
//! (shortest round-trip digits; exponent form below 1e-4 and from 1e16 up, as `1e-07`,
//! `1.5e+16`; integral values as `1.0`).
//!
//! Two separator styles: v1.0 headers use `json.dumps(h, sort_keys=True,
//! separators=(",", ":"))`; legacy v0 headers use plain `json.dumps(h)`, i.e. `", "` and
//! `": "` with keys in insertion order. Key order is the caller's business (struct field
//! order, or `serde_json::Map`, which is sorted).

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

/// Separator style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Separators {
    /// `,` and `:` (v1.0 headers).
    Compact,
    /// `, ` and `: ` (Python's default; legacy v0 headers).
    Spaced,
}

/// A `serde_json` formatter that reproduces Python's `json.dumps`.
#[derive(Debug, Clone, Copy)]
pub struct PyFormatter {
    seps: Separators,
}

impl PyFormatter {
    /// A formatter with the given separators.
    #[must_use]
    pub fn new(seps: Separators) -> Self {
        PyFormatter { seps }
    }

    fn item_sep(self) -> &'static [u8] {
        match self.seps {
            Separators::Compact => b",",
            Separators::Spaced => b", ",
        }
    }
}

impl Formatter for PyFormatter {
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(py_float_repr(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(w, f64::from(value))
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if (' '..='~').contains(&c) {
                continue;
            }
            w.write_all(&fragment.as_bytes()[start..i])?;
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                write!(w, "\\u{u:04x}")?;
            }
            start = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[start..])
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(self.item_sep())
        }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(self.item_sep())
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        match self.seps {
            Separators::Compact => w.write_all(b":"),
            Separators::Spaced => w.write_all(b": "),
        }
    }
}

/// Serialize `value` as Python's `json.dumps` would.
///
/// # Errors
/// Whatever `serde_json` reports for the value (e.g. a non-string map key).
pub fn to_vec<T: Serialize + ?Sized>(value: &T, seps: Separators) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter::new(seps));
    value.serialize(&mut ser)?;
    Ok(out)
}

/// Python's `repr(float)` for a finite or non-finite double.
#[must_use]
pub fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, like Python's repr.
    let sci = format!("{:e}", x.abs());
    let (mant, exp) = sci
        .split_once('e')
        .expect("LowerExp always has an exponent");
    let exp: i32 = exp.parse().expect("LowerExp exponent is an integer");
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let decpt = exp + 1; // x = 0.DIGITS * 10^decpt
    let n = i32::try_from(digits.len()).expect("at most 17 digits");
    let body = if !(-4 < decpt && decpt <= 16) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{first}{frac}e{esign}{:02}", exp.abs())
    } else if decpt <= 0 {
        format!("0.{}{digits}", "0".repeat(decpt.unsigned_abs() as usize))
    } else if decpt >= n {
        format!("{digits}{}.0", "0".repeat((decpt - n) as usize))
    } else {
        let (int, frac) = digits.split_at(decpt as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (255.0, "255.0"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1e-7, "1e-07"),
            (1.5e-7, "1.5e-07"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789.125, "123456789.125"),
            (-4.55335807800293, "-4.55335807800293"),
            (7.843137805885192e-10, "7.843137805885192e-10"),
            (0.03611825779080391, "0.03611825779080391"),
            (1e300, "1e+300"),
            (-2.5e-300, "-2.5e-300"),
            (f64::from(f32::MAX), "3.4028234663852886e+38"),
        ];
        for &(x, want) in cases {
            assert_eq!(py_float_repr(x), want, "{x:e}");
        }
    }

    #[test]
    fn strings_are_ascii_escaped_like_python() {
        let v = serde_json::json!({"b": "fr\u{e9}\u{1F600}\u{7f}\"\\\n\u{1}", "a": [1, 2.0]});
        let out = String::from_utf8(to_vec(&v, Separators::Compact).unwrap()).unwrap();
        assert_eq!(
            out,
            r#"{"a":[1,2.0],"b":"fr\u00e9\ud83d\ude00\u007f\"\\\n\u0001"}"#
        );
        let spaced = String::from_utf8(to_vec(&v, Separators::Spaced).unwrap()).unwrap();
        assert_eq!(
            spaced,
            r#"{"a": [1, 2.0], "b": "fr\u00e9\ud83d\ude00\u007f\"\\\n\u0001"}"#
        );
    }
}

/// An upper bound of the number of JSON values in `json` without parsing it: 1 + the
/// opening brackets + the commas outside strings (every value but the first of a
/// container follows a comma; every container opens with a bracket; at most about twice
/// the true count). Linear, no
/// allocation; malformed input only makes the count meaningless, never the scan unsafe.
#[must_use]
pub fn value_count(json: &[u8]) -> u64 {
    let mut n = 1u64;
    let (mut in_str, mut escaped) = (false, false);
    for &b in json {
        if in_str {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_str = false;
            }
        } else {
            match b {
                b'"' => in_str = true,
                b'{' | b'[' | b',' => n += 1,
                _ => {}
            }
        }
    }
    n
}

#[cfg(test)]
mod value_count_tests {
    use super::value_count;

    #[test]
    fn counts_values_outside_strings() {
        // object, array, 1, 2, object, "x,y{\"" -> 6 values
        assert_eq!(value_count(br#"{"a":[1,2,{"b":"x,y{\""}]}"#), 6);
        assert_eq!(value_count(b"7"), 1);
        // 4 values, counted as 7: an upper bound (at most about twice the true count).
        assert_eq!(value_count(b"[[],[],{}]"), 7);
    }
}
