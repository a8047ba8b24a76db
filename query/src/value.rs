//! SQL values and their SQLite-compatible comparison, conversion and
//! arithmetic rules.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

/// A SQL value. Booleans are their own type but compare and compute as the
/// integers 0 and 1, as in SQLite.
#[derive(Debug, Clone)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// TRUE or FALSE.
    Bool(bool),
    /// 64-bit signed integer.
    Int(i64),
    /// 64-bit float.
    Float(f64),
    /// UTF-8 text.
    Text(Arc<str>),
    /// Raw bytes.
    Bytes(Bytes),
}

/// Static type of a column or expression, for result headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlType {
    /// Only NULL.
    Null,
    /// `boolean`.
    Boolean,
    /// `integer`.
    Integer,
    /// `float`.
    Float,
    /// `text`.
    Text,
    /// `bytes`.
    Bytes,
    /// Not known before evaluation.
    Any,
}

impl SqlType {
    /// The name used in result headers.
    pub fn name(self) -> &'static str {
        match self {
            SqlType::Null => "null",
            SqlType::Boolean => "boolean",
            SqlType::Integer => "integer",
            SqlType::Float => "float",
            SqlType::Text => "text",
            SqlType::Bytes => "bytes",
            SqlType::Any => "any",
        }
    }
}

impl PartialEq for Value {
    /// Structural equality (NULL equals NULL): for grouping and tests, not SQL `=`.
    fn eq(&self, other: &Self) -> bool {
        self.total_cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl std::hash::Hash for Value {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Value::Null => 0u8.hash(state),
            // Numbers that compare equal hash equally: hash integral values as integers.
            Value::Bool(b) => (1u8, i64::from(*b)).hash(state),
            Value::Int(i) => (1u8, *i).hash(state),
            Value::Float(f) => {
                if f.fract() == 0.0 && *f >= i64::MIN as f64 && *f < i64::MAX as f64 {
                    (1u8, *f as i64).hash(state)
                } else {
                    (2u8, f.to_bits()).hash(state)
                }
            }
            Value::Text(t) => (3u8, t.as_bytes()).hash(state),
            Value::Bytes(b) => (4u8, b.as_ref()).hash(state),
        }
    }
}

fn class(value: &Value) -> u8 {
    match value {
        Value::Null => 0,
        Value::Bool(_) | Value::Int(_) | Value::Float(_) => 1,
        Value::Text(_) => 2,
        Value::Bytes(_) => 3,
    }
}

/// Compare an integer with a float exactly (no precision loss for large i64).
fn cmp_int_float(i: i64, f: f64) -> Ordering {
    if f.is_nan() {
        return Ordering::Greater;
    }
    if f >= 9.223_372_036_854_776e18 {
        return Ordering::Less;
    }
    if f < -9.223_372_036_854_776e18 {
        return Ordering::Greater;
    }
    let truncated = f.trunc() as i64;
    match i.cmp(&truncated) {
        Ordering::Equal => {
            let fraction = f - f.trunc();
            if fraction > 0.0 {
                Ordering::Less
            } else if fraction < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        other => other,
    }
}

impl Value {
    /// Text from a string.
    pub fn text(s: impl Into<Arc<str>>) -> Value {
        Value::Text(s.into())
    }

    /// Whether this is NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The value's type.
    pub(crate) fn sql_type(&self) -> SqlType {
        match self {
            Value::Null => SqlType::Null,
            Value::Bool(_) => SqlType::Boolean,
            Value::Int(_) => SqlType::Integer,
            Value::Float(_) => SqlType::Float,
            Value::Text(_) => SqlType::Text,
            Value::Bytes(_) => SqlType::Bytes,
        }
    }

    /// SQLite's total order: NULL < numbers < text < bytes; numbers
    /// numerically, text and bytes by their bytes.
    pub fn total_cmp(&self, other: &Value) -> Ordering {
        use Value::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Text(a), Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Bytes(a), Bytes(b)) => a.as_ref().cmp(b.as_ref()),
            (Float(a), Float(b)) => a
                .partial_cmp(b)
                .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan())),
            (Float(f), other) if class(other) == 1 => {
                cmp_int_float(other.as_i64_exact(), *f).reverse()
            }
            (this, Float(f)) if class(this) == 1 => cmp_int_float(this.as_i64_exact(), *f),
            (a, b) if class(a) == 1 && class(b) == 1 => a.as_i64_exact().cmp(&b.as_i64_exact()),
            (a, b) => class(a).cmp(&class(b)),
        }
    }

    /// SQL comparison: `None` (NULL) when either side is NULL.
    pub(crate) fn sql_cmp(&self, other: &Value) -> Option<Ordering> {
        if self.is_null() || other.is_null() {
            None
        } else {
            Some(self.total_cmp(other))
        }
    }

    fn as_i64_exact(&self) -> i64 {
        match self {
            Value::Bool(b) => i64::from(*b),
            Value::Int(i) => *i,
            _ => 0,
        }
    }

    /// Truthiness for WHERE and HAVING: NULL is unknown (`None`); numbers are
    /// true when non-zero; text and bytes by their numeric prefix, as in SQLite.
    pub fn truth(&self) -> Option<bool> {
        match self {
            Value::Null => None,
            Value::Bool(b) => Some(*b),
            Value::Int(i) => Some(*i != 0),
            Value::Float(f) => Some(*f != 0.0),
            Value::Text(_) | Value::Bytes(_) => Some(match self.to_numeric() {
                Value::Int(i) => i != 0,
                Value::Float(f) => f != 0.0,
                _ => false,
            }),
        }
    }

    /// Numeric value as SQLite converts it: booleans to 0/1, text and bytes
    /// by their longest numeric prefix (0 when there is none). NULL stays NULL.
    pub(crate) fn to_numeric(&self) -> Value {
        match self {
            Value::Null => Value::Null,
            Value::Bool(b) => Value::Int(i64::from(*b)),
            Value::Int(i) => Value::Int(*i),
            Value::Float(f) => Value::Float(*f),
            Value::Text(t) => parse_numeric_prefix(t),
            Value::Bytes(b) => parse_numeric_prefix(&String::from_utf8_lossy(b)),
        }
    }

    /// The value as SQLite reads an integer from it (`CAST(x AS INTEGER)`,
    /// the operands of `%`): a float truncated and saturated, text and bytes
    /// by their integer prefix after leading spaces (`'1e3'` is 1), saturated
    /// at the i64 range; NULL and anything without digits is 0.
    pub(crate) fn to_integer(&self) -> i64 {
        match self {
            Value::Null => 0,
            Value::Bool(b) => i64::from(*b),
            Value::Int(i) => *i,
            // `as` saturates and reads NaN as 0, as SQLite does.
            Value::Float(f) => *f as i64,
            Value::Text(t) => integer_prefix(t.as_bytes()),
            Value::Bytes(b) => integer_prefix(b),
        }
    }

    /// Text as SQLite renders it (`CAST(x AS TEXT)`); NULL stays NULL.
    pub(crate) fn to_text(&self) -> Value {
        match self {
            Value::Null => Value::Null,
            Value::Text(_) => self.clone(),
            Value::Bytes(b) => Value::text(String::from_utf8_lossy(b).into_owned()),
            other => Value::text(other.render()),
        }
    }

    /// Bytes (`CAST(x AS BLOB)`); NULL stays NULL.
    pub(crate) fn to_bytes(&self) -> Value {
        match self {
            Value::Null => Value::Null,
            Value::Bytes(_) => self.clone(),
            Value::Text(t) => Value::Bytes(Bytes::copy_from_slice(t.as_bytes())),
            other => Value::Bytes(Bytes::from(other.render().into_bytes())),
        }
    }

    /// The text form of a non-NULL scalar (SQLite's formatting of floats).
    pub fn render(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Bool(b) => i64::from(*b).to_string(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => format_float(*f),
            Value::Text(t) => t.to_string(),
            Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        }
    }
}

/// Format a float as SQLite (3.54) does, with `printf("%!.17g")`: 17
/// significant digits, or fewer when fewer read back as the same float and
/// the 17 end in `000` or `999` (so `0.1` is `0.1` but `1.0 / 3` is
/// `0.33333333333333332`); trailing zeros dropped but one decimal kept; the
/// exponent form (`1.0e+17`, `2.5e-05`) below 1e-4 and from 1e17 on.
pub(crate) fn format_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Inf".into() } else { "-Inf".into() };
    }
    if f == 0.0 {
        return "0.0".into();
    }
    let sign = if f < 0.0 { "-" } else { "" };
    let (digits, point) = significant_digits(f.abs());
    let exponent = point - 1;
    if !(-4..=16).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let rest = if rest.is_empty() { "0" } else { rest };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}.{rest}e{exponent_sign}{:02}", exponent.abs());
    }
    if exponent < 0 {
        let zeros = "0".repeat((-exponent - 1) as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let whole = point as usize;
    if digits.len() > whole {
        format!("{sign}{}.{}", &digits[..whole], &digits[whole..])
    } else {
        format!("{sign}{digits:0<whole$}.0")
    }
}

/// The significant digits SQLite's `sqlite3FpDecode` keeps for `r > 0` at
/// 17 digits of precision, without trailing zeros, and the position of the
/// decimal point (`r` is `0.DIGITS * 10^point`).
fn significant_digits(r: f64) -> (String, i32) {
    // SQLite scales the 64-bit mantissa by a power of ten estimated from the
    // binary exponent, which leaves 18 digits, or 19 when the estimate falls
    // short; the digits it rounds at depend on which.
    let bits = r.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let binary_exponent = if biased == 0 {
        -1074 - (bits & ((1 << 52) - 1)).leading_zeros() as i32
    } else {
        biased - 1086
    };
    let scale = 17 - (((binary_exponent + 63) * 78913) >> 18);
    let magnitude: i32 = format!("{r:e}")
        .split_once('e')
        .and_then(|(_, x)| x.parse().ok())
        .expect("{:e} writes an exponent");
    let count = (magnitude + 1 + scale).clamp(18, 19) as usize;
    let scientific = format!("{r:.*e}", count - 1);
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} writes an exponent");
    let mut z: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    let mut point = exponent.parse::<i32>().expect("a decimal exponent") + 1;
    let n = z.len() as i32;
    // Whether the first `len` digits, plus `add`, read back as `r`.
    let reads_back = |z: &[u8], len: usize, add: u64| {
        let head: u64 = z[..len].iter().fold(0, |v, d| v * 10 + u64::from(d - b'0'));
        format!("{}e{}", head + add, point - len as i32).parse::<f64>() == Ok(r)
    };
    let mut keep = 17;
    if z[15] == b'9' && z[14] == b'9' {
        let nines = z[..15].iter().rev().take_while(|d| **d == b'9').count();
        let len = 15 - nines;
        let shorter = if len == 0 {
            format!("1e{}", point).parse::<f64>() == Ok(r)
        } else {
            reads_back(&z, len, 1)
        };
        if shorter {
            keep = len + 1;
        }
    } else if point >= n || z[13..16] == *b"000" {
        let zeros = z[..13].iter().rev().take_while(|d| **d == b'0').count();
        let len = 13 - zeros;
        if reads_back(&z, len, 0) {
            keep = len + 1;
        }
    }
    let round_up = z[keep] >= b'5';
    z.truncate(keep);
    if round_up {
        let mut i = keep;
        loop {
            if i == 0 {
                z.insert(0, b'1');
                point += 1;
                break;
            }
            i -= 1;
            if z[i] == b'9' {
                z[i] = b'0';
            } else {
                z[i] += 1;
                break;
            }
        }
    }
    while z.last() == Some(&b'0') {
        z.pop();
    }
    (String::from_utf8(z).expect("ASCII digits"), point)
}

/// SQLite's `sqlite3Atoi64`: optional spaces and sign, then digits up to the
/// first non-digit, saturated at the i64 range.
fn integer_prefix(text: &[u8]) -> i64 {
    let mut rest = text;
    while let [b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c', tail @ ..] = rest {
        rest = tail;
    }
    let negative = rest.first() == Some(&b'-');
    if let [b'-' | b'+', tail @ ..] = rest {
        rest = tail;
    }
    let mut magnitude: i128 = 0;
    for digit in rest.iter().take_while(|b| b.is_ascii_digit()) {
        magnitude = (magnitude * 10 + i128::from(digit - b'0')).min(1 << 64);
    }
    let value = if negative { -magnitude } else { magnitude };
    value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// The longest numeric prefix of `text` after leading spaces, as SQLite's
/// text-to-number conversion reads it.
fn parse_numeric_prefix(text: &str) -> Value {
    let trimmed = text.trim_start();
    let bytes = trimmed.as_bytes();
    let mut end = 0;
    if end < bytes.len() && (bytes[end] == b'+' || bytes[end] == b'-') {
        end += 1;
    }
    let digits_start = end;
    while end < bytes.len() && bytes[end].is_ascii_digit() {
        end += 1;
    }
    let mut is_float = false;
    let mut mantissa_digits = end - digits_start;
    if end < bytes.len() && bytes[end] == b'.' {
        let mut frac_end = end + 1;
        while frac_end < bytes.len() && bytes[frac_end].is_ascii_digit() {
            frac_end += 1;
        }
        mantissa_digits += frac_end - end - 1;
        if mantissa_digits > 0 {
            is_float = true;
            end = frac_end;
        }
    }
    if mantissa_digits == 0 {
        return Value::Int(0);
    }
    if end < bytes.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
        let mut exp_end = end + 1;
        if exp_end < bytes.len() && (bytes[exp_end] == b'+' || bytes[exp_end] == b'-') {
            exp_end += 1;
        }
        let exp_digits = exp_end;
        while exp_end < bytes.len() && bytes[exp_end].is_ascii_digit() {
            exp_end += 1;
        }
        if exp_end > exp_digits {
            is_float = true;
            end = exp_end;
        }
    }
    let number = &trimmed[..end];
    if !is_float && let Ok(i) = number.parse::<i64>() {
        return Value::Int(i);
    }
    number.parse::<f64>().map_or(Value::Int(0), Value::Float)
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::Bool(b) => f.write_str(if *b { "TRUE" } else { "FALSE" }),
            Value::Text(t) => write!(f, "'{}'", t.replace('\'', "''")),
            Value::Bytes(b) => {
                f.write_str("X'")?;
                for byte in b.iter() {
                    write!(f, "{byte:02X}")?;
                }
                f.write_str("'")
            }
            other => f.write_str(&other.render()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_total_order() {
        let ordered = [
            Value::Null,
            Value::Int(-5),
            Value::Float(1.5),
            Value::Int(2),
            Value::text("10"),
            Value::text("9"),
            Value::Bytes(Bytes::from_static(b"\x00")),
        ];
        for pair in ordered.windows(2) {
            assert_eq!(pair[0].total_cmp(&pair[1]), Ordering::Less, "{pair:?}");
        }
        assert_eq!(Value::Int(2).total_cmp(&Value::Float(2.0)), Ordering::Equal);
        assert_eq!(Value::Bool(true).total_cmp(&Value::Int(1)), Ordering::Equal);
        assert_eq!(
            Value::Int(i64::MAX).total_cmp(&Value::Float(9.3e18)),
            Ordering::Less
        );
        assert_eq!(Value::Int(1).sql_cmp(&Value::Null), None);
    }

    #[test]
    fn integers_are_read_as_sqlite_casts_them() {
        for (text, int) in [
            ("1e3", 1),
            (" 12ab", 12),
            ("-1.9", -1),
            ("+7", 7),
            ("", 0),
            ("x1", 0),
            ("9223372036854775808", i64::MAX),
            ("-9223372036854775809", i64::MIN),
            ("-9223372036854775808", i64::MIN),
            ("99999999999999999999999", i64::MAX),
        ] {
            assert_eq!(Value::text(text).to_integer(), int, "{text:?}");
        }
        assert_eq!(Value::Float(1e300).to_integer(), i64::MAX);
        assert_eq!(Value::Float(-2.9).to_integer(), -2);
    }

    #[test]
    fn numeric_prefixes_follow_sqlite() {
        assert_eq!(Value::text("12abc").to_numeric(), Value::Int(12));
        assert_eq!(Value::text("  -3.5e2x").to_numeric(), Value::Float(-350.0));
        assert_eq!(Value::text("abc").to_numeric(), Value::Int(0));
        assert_eq!(Value::text(".5").to_numeric(), Value::Float(0.5));
        assert_eq!(Value::text("1e").to_numeric(), Value::Int(1));
        assert_eq!(
            Value::Bytes(Bytes::from_static(b"42")).to_numeric(),
            Value::Int(42)
        );
    }

    #[test]
    fn floats_render_like_sqlite() {
        assert_eq!(format_float(2.0), "2.0");
        assert_eq!(format_float(0.1), "0.1");
        for (f, text) in [
            (1.0 / 3.0, "0.33333333333333332"),
            (0.1 + 0.2, "0.30000000000000004"),
            (49.47, "49.47"),
            (1e308, "1.0e+308"),
            (-1e308, "-1.0e+308"),
            (1e16, "10000000000000000.0"),
            (1e17, "1.0e+17"),
            (i64::MAX as f64, "9.2233720368547758e+18"),
            (i64::MIN as f64, "-9.2233720368547758e+18"),
            (0.0001, "0.0001"),
            (0.00001, "1.0e-05"),
            (2.5e-5, "2.5e-05"),
            (123.456, "123.456"),
            (100.0, "100.0"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (5e-324, "4.9406564584124654e-324"),
            (-0.0, "0.0"),
        ] {
            assert_eq!(format_float(f), text, "{f:e}");
        }
        assert_eq!(Value::Float(2.5).to_text(), Value::text("2.5"));
    }
}
