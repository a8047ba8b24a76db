//! SQLite's text and blob scalar functions: `instr`, `replace`, `trim`,
//! `ltrim`, `rtrim`, `hex`, `unhex`, `quote`, `typeof`, `char`, `unicode`,
//! `concat`, `concat_ws`, `printf` and `format`.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;

use super::rowwise::{MAX_RESULT_BYTES, RowFunction, too_large};
use super::{Arity, ScalarFunction, printf};
use crate::value::{SqlType, Value};

/// Every function of this module.
const FUNCTIONS: &[RowFunction] = &[
    RowFunction::new("instr", Arity::Exact(2), SqlType::Any, instr),
    RowFunction::new("replace", Arity::Exact(3), SqlType::Any, replace),
    RowFunction::new("trim", Arity::Range(1, 2), SqlType::Any, trim),
    RowFunction::new("ltrim", Arity::Range(1, 2), SqlType::Any, ltrim),
    RowFunction::new("rtrim", Arity::Range(1, 2), SqlType::Any, rtrim),
    RowFunction::new("hex", Arity::Exact(1), SqlType::Text, hex),
    RowFunction::new("unhex", Arity::Range(1, 2), SqlType::Any, unhex),
    RowFunction::new("quote", Arity::Exact(1), SqlType::Text, quote),
    RowFunction::new("typeof", Arity::Exact(1), SqlType::Text, type_of),
    RowFunction::new("char", Arity::AtLeast(0), SqlType::Text, char),
    RowFunction::new("unicode", Arity::Exact(1), SqlType::Any, unicode),
    RowFunction::new("concat", Arity::AtLeast(1), SqlType::Text, concat),
    RowFunction::new("concat_ws", Arity::AtLeast(2), SqlType::Any, concat_ws),
    RowFunction::new("printf", Arity::AtLeast(0), SqlType::Any, printf_function),
    RowFunction::new("format", Arity::AtLeast(0), SqlType::Any, printf_function),
];

/// The text built-in called `name` (lower-case), if any.
pub(super) fn builtin(name: &str) -> Option<Arc<dyn ScalarFunction>> {
    super::rowwise::lookup(FUNCTIONS, name)
}

/// The bytes of a value's text as SQLite's `sqlite3_value_text` gives them
/// (a blob's bytes as they are, a float through SQLite's own `%!.17g`);
/// `None` for NULL.
pub(super) fn text_bytes(value: &Value) -> Option<Cow<'_, [u8]>> {
    match value {
        Value::Null => None,
        Value::Text(t) => Some(Cow::Borrowed(t.as_bytes())),
        Value::Bytes(b) => Some(Cow::Borrowed(b.as_ref())),
        Value::Float(f) => Some(Cow::Owned(printf::float_text(*f))),
        other => Some(Cow::Owned(other.render().into_bytes())),
    }
}

/// Text from bytes SQLite would return as text; bytes that are not UTF-8
/// (from a blob) become U+FFFD, as a UTF-8 reader of SQLite's result sees.
fn text_value(bytes: Vec<u8>) -> Value {
    match String::from_utf8(bytes) {
        Ok(text) => Value::text(text),
        Err(e) => Value::text(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

/// Whether `b` continues a UTF-8 character.
fn continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// SQLite's `sqlite3Utf8Read` at `*i`: one character's code point, lenient
/// as SQLite is (overlong forms and surrogates read as U+FFFD).
fn utf8_read(z: &[u8], i: &mut usize) -> u32 {
    let mut c = u32::from(z[*i]);
    *i += 1;
    if c >= 0xc0 {
        c = match c {
            0xc0..=0xdf => c & 0x1f,
            0xe0..=0xef => c & 0x0f,
            0xf0..=0xf7 => c & 0x07,
            0xf8..=0xfb => c & 0x03,
            0xfc..=0xfd => c & 0x01,
            _ => 0,
        };
        while *i < z.len() && continuation(z[*i]) {
            c = (c << 6).wrapping_add(u32::from(z[*i] & 0x3f));
            *i += 1;
        }
        if c < 0x80 || (c & 0xFFFF_F800) == 0xD800 {
            c = 0xFFFD;
        }
    }
    c
}

/// `instr(X, Y)`: 1 + the characters (bytes, when both are blobs) of X
/// before the first Y; 0 when absent, 1 for an empty Y.
fn instr(args: &[&Value]) -> Result<Value, String> {
    let (Some(haystack), Some(needle)) = (text_bytes(args[0]), text_bytes(args[1])) else {
        return Ok(Value::Null);
    };
    if needle.is_empty() {
        return Ok(Value::Int(1));
    }
    let is_text = !matches!((args[0], args[1]), (Value::Bytes(_), Value::Bytes(_)));
    let mut position = 1;
    let mut at = 0;
    while needle.len() <= haystack.len() - at {
        if haystack[at..].starts_with(&needle) {
            return Ok(Value::Int(position));
        }
        position += 1;
        at += 1;
        while is_text && at < haystack.len() && continuation(haystack[at]) {
            at += 1;
        }
    }
    Ok(Value::Int(0))
}

/// `replace(X, Y, Z)`: X with every Y replaced by Z, left to right; X as
/// text when Y is empty.
fn replace(args: &[&Value]) -> Result<Value, String> {
    let Some(text) = text_bytes(args[0]) else {
        return Ok(Value::Null);
    };
    let Some(pattern) = text_bytes(args[1]) else {
        return Ok(Value::Null);
    };
    // SQLite reads the pattern as a C string: one starting with NUL is empty.
    if pattern.first().is_none_or(|b| *b == 0) {
        return Ok(text_value(text.into_owned()));
    }
    let Some(with) = text_bytes(args[2]) else {
        return Ok(Value::Null);
    };
    let mut matches = 0usize;
    let mut at = 0;
    while at + pattern.len() <= text.len() {
        if text[at..].starts_with(&pattern) {
            matches += 1;
            at += pattern.len();
        } else {
            at += 1;
        }
    }
    let needed =
        (text.len() - matches * pattern.len()).saturating_add(matches.saturating_mul(with.len()));
    if needed > MAX_RESULT_BYTES {
        return Err(too_large(needed));
    }
    let mut out = Vec::with_capacity(needed);
    let mut at = 0;
    while at + pattern.len() <= text.len() {
        if text[at..].starts_with(&pattern) {
            out.extend_from_slice(&with);
            at += pattern.len();
        } else {
            out.push(text[at]);
            at += 1;
        }
    }
    out.extend_from_slice(&text[at..]);
    Ok(text_value(out))
}

/// `trim`, `ltrim`, `rtrim` from the left (1), the right (2) or both (3):
/// the characters of the second argument (a space when absent) removed.
fn trim_sides(args: &[&Value], sides: u8) -> Result<Value, String> {
    let Some(text) = text_bytes(args[0]) else {
        return Ok(Value::Null);
    };
    let set: Vec<&[u8]> = match args.get(1) {
        None => vec![b" "],
        Some(chars) => {
            let Some(chars) = text_bytes(chars) else {
                return Ok(Value::Null);
            };
            // As a C string, split into UTF-8 characters.
            let end = chars.iter().position(|b| *b == 0).unwrap_or(chars.len());
            let chars = &chars[..end];
            let mut set = Vec::new();
            let mut i = 0;
            while i < end {
                let start = i;
                i += 1;
                if chars[start] >= 0xc0 {
                    while i < end && continuation(chars[i]) {
                        i += 1;
                    }
                }
                set.push(&chars[start..i]);
            }
            return Ok(text_value(trim_set(&text, &set, sides).to_vec()));
        }
    };
    Ok(text_value(trim_set(&text, &set, sides).to_vec()))
}

/// `text` without the leading (`sides & 1`) and trailing (`sides & 2`)
/// members of `set`.
fn trim_set<'a>(text: &'a [u8], set: &[&[u8]], sides: u8) -> &'a [u8] {
    let mut text = text;
    if set.is_empty() {
        return text;
    }
    if sides & 1 != 0 {
        while let Some(c) = set.iter().find(|c| text.starts_with(c)) {
            text = &text[c.len()..];
            if text.is_empty() {
                break;
            }
        }
    }
    if sides & 2 != 0 {
        while let Some(c) = set.iter().find(|c| text.ends_with(c)) {
            text = &text[..text.len() - c.len()];
            if text.is_empty() {
                break;
            }
        }
    }
    text
}

/// `trim(X [, Y])`.
fn trim(args: &[&Value]) -> Result<Value, String> {
    trim_sides(args, 3)
}

/// `ltrim(X [, Y])`.
fn ltrim(args: &[&Value]) -> Result<Value, String> {
    trim_sides(args, 1)
}

/// `rtrim(X [, Y])`.
fn rtrim(args: &[&Value]) -> Result<Value, String> {
    trim_sides(args, 2)
}

/// Upper-case hexadecimal digits.
const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// `hex(X)`: the upper-case hexadecimal of X's bytes (its text's, for
/// numbers and text); '' for NULL.
fn hex(args: &[&Value]) -> Result<Value, String> {
    let bytes = text_bytes(args[0]).unwrap_or_default();
    let needed = bytes.len().saturating_mul(2);
    if needed > MAX_RESULT_BYTES {
        return Err(too_large(needed));
    }
    let mut out = String::with_capacity(needed);
    for b in bytes.iter() {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    Ok(Value::text(out))
}

/// The value of a hexadecimal digit.
fn hex_value(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).map(|d| d as u8)
}

/// `unhex(X [, Y])`: the blob X's hexadecimal pairs spell, characters of
/// Y allowed between pairs; NULL when anything else is in the way.
fn unhex(args: &[&Value]) -> Result<Value, String> {
    let Some(hex) = text_bytes(args[0]) else {
        return Ok(Value::Null);
    };
    let pass: Cow<'_, [u8]> = match args.get(1) {
        None => Cow::Borrowed(b""),
        Some(v) => match text_bytes(v) {
            Some(pass) => pass,
            None => return Ok(Value::Null),
        },
    };
    // SQLite reads X as a C string.
    let hex = &hex[..hex.iter().position(|b| *b == 0).unwrap_or(hex.len())];
    let passes = |ch: u32| {
        let mut i = 0;
        while i < pass.len() {
            if utf8_read(&pass, &mut i) == ch {
                return true;
            }
        }
        false
    };
    let mut out = Vec::with_capacity(hex.len() / 2);
    let mut i = 0;
    while i < hex.len() {
        let Some(high) = hex_value(hex[i]) else {
            if !passes(utf8_read(hex, &mut i)) {
                return Ok(Value::Null);
            }
            continue;
        };
        let Some(low) = hex.get(i + 1).and_then(|b| hex_value(*b)) else {
            return Ok(Value::Null);
        };
        out.push(high << 4 | low);
        i += 2;
    }
    Ok(Value::Bytes(Bytes::from(out)))
}

/// `quote(X)`: X as an SQL literal: text in quotes (up to a NUL), blobs
/// as `X'..'`, floats with 17 significant digits, `NULL`.
fn quote(args: &[&Value]) -> Result<Value, String> {
    Ok(match args[0] {
        Value::Null => Value::text("NULL"),
        Value::Bool(b) => Value::text(i64::from(*b).to_string()),
        Value::Int(i) => Value::text(i.to_string()),
        Value::Float(f) => text_value(printf::format(b"%!0.17g", &[&Value::Float(*f)])?),
        Value::Text(_) => text_value(printf::format(b"%Q", &[args[0]])?),
        Value::Bytes(b) => {
            let needed = b.len().saturating_mul(2).saturating_add(3);
            if needed > MAX_RESULT_BYTES {
                return Err(too_large(needed));
            }
            let mut out = String::with_capacity(needed);
            out.push_str("X'");
            for byte in b.iter() {
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
            }
            out.push('\'');
            Value::text(out)
        }
    })
}

/// `typeof(X)`: SQLite's storage class name (booleans are integers).
fn type_of(args: &[&Value]) -> Result<Value, String> {
    Ok(Value::text(match args[0] {
        Value::Null => "null",
        Value::Bool(_) | Value::Int(_) => "integer",
        Value::Float(_) => "real",
        Value::Text(_) => "text",
        Value::Bytes(_) => "blob",
    }))
}

/// `char(X, ...)`: the characters with these code points (U+FFFD for
/// those out of range; NULL reads as 0).
fn char(args: &[&Value]) -> Result<Value, String> {
    let needed = args.len().saturating_mul(4);
    if needed > MAX_RESULT_BYTES {
        return Err(too_large(needed));
    }
    let mut out = Vec::with_capacity(needed);
    for arg in args {
        let x = arg.to_integer();
        let c = if (0..=0x10ffff).contains(&x) {
            x as u32
        } else {
            0xfffd
        };
        // Encoded by hand, as SQLite does: surrogates too.
        if c < 0x80 {
            out.push(c as u8);
        } else if c < 0x800 {
            out.extend_from_slice(&[0xc0 | (c >> 6) as u8, 0x80 | (c & 0x3f) as u8]);
        } else if c < 0x10000 {
            out.extend_from_slice(&[
                0xe0 | (c >> 12) as u8,
                0x80 | ((c >> 6) & 0x3f) as u8,
                0x80 | (c & 0x3f) as u8,
            ]);
        } else {
            out.extend_from_slice(&[
                0xf0 | (c >> 18) as u8,
                0x80 | ((c >> 12) & 0x3f) as u8,
                0x80 | ((c >> 6) & 0x3f) as u8,
                0x80 | (c & 0x3f) as u8,
            ]);
        }
    }
    Ok(text_value(out))
}

/// `unicode(X)`: the code point of X's first character; NULL for NULL or
/// empty text.
fn unicode(args: &[&Value]) -> Result<Value, String> {
    match text_bytes(args[0]) {
        Some(text) if text.first().is_some_and(|b| *b != 0) => {
            let mut i = 0;
            Ok(Value::Int(i64::from(utf8_read(&text, &mut i))))
        }
        _ => Ok(Value::Null),
    }
}

/// The non-NULL values' text joined by `separator`, within the size limit.
fn join(values: &[&Value], separator: &[u8]) -> Result<Value, String> {
    let parts: Vec<Cow<'_, [u8]>> = values.iter().filter_map(|v| text_bytes(v)).collect();
    let needed = parts.iter().map(|p| p.len()).sum::<usize>().saturating_add(
        separator
            .len()
            .saturating_mul(parts.len().saturating_sub(1)),
    );
    if needed > MAX_RESULT_BYTES {
        return Err(too_large(needed));
    }
    let mut out = Vec::with_capacity(needed);
    for (k, part) in parts.iter().enumerate() {
        if k > 0 {
            out.extend_from_slice(separator);
        }
        out.extend_from_slice(part);
    }
    Ok(text_value(out))
}

/// `concat(X, ...)`: the non-NULL arguments' text, concatenated.
fn concat(args: &[&Value]) -> Result<Value, String> {
    join(args, b"")
}

/// `concat_ws(SEP, X, ...)`: the non-NULL arguments after the first, joined
/// by it; NULL when the separator is NULL.
fn concat_ws(args: &[&Value]) -> Result<Value, String> {
    match text_bytes(args[0]) {
        None => Ok(Value::Null),
        Some(separator) => join(&args[1..], &separator),
    }
}

/// `printf(FORMAT, ...)` and `format(FORMAT, ...)`: NULL without a format.
fn printf_function(args: &[&Value]) -> Result<Value, String> {
    match args.first().and_then(|f| text_bytes(f)) {
        None => Ok(Value::Null),
        Some(format) => Ok(text_value(printf::format(&format, &args[1..])?)),
    }
}
