//! SQLite's JSON1 functions as built-ins: `json_extract`, `json_valid`,
//! `json_type`, `json_array_length`, and the `->` and `->>` operators.
//!
//! - `scan.rs`: the scanner that checks JSON text and skips values.
//! - `path.rs`: following a JSON path through the text.
//!
//! Input is RFC 8259 text (TEXT, or BYTES read as UTF-8 text); the JSON5
//! extensions SQLite also accepts are refused as `malformed JSON`. Nothing
//! is parsed into a tree: a call scans the text once per path (an array
//! twice for `[#-N]`), skipping what the path does not need but checking
//! all of it, as SQLite does, and returns slices of it.

mod path;
mod scan;

use std::borrow::Cow;
use std::sync::Arc;

use super::rowwise::{MAX_RESULT_BYTES, RowFunction, too_large};
use super::{Arity, ScalarFunction};
use crate::value::{SqlType, Value};
use path::{Found, lookup, unescape_one};
use scan::Kind;

/// Every function of this module.
const FUNCTIONS: &[RowFunction] = &[
    RowFunction::new(
        "json_extract",
        Arity::AtLeast(2),
        SqlType::Any,
        json_extract,
    ),
    RowFunction::new(
        "json_valid",
        Arity::Range(1, 2),
        SqlType::Integer,
        json_valid,
    ),
    RowFunction::new("json_type", Arity::Range(1, 2), SqlType::Text, json_type),
    RowFunction::new(
        "json_array_length",
        Arity::Range(1, 2),
        SqlType::Integer,
        json_array_length,
    ),
];

/// The JSON built-in called `name` (lower-case), if any.
pub(super) fn builtin(name: &str) -> Option<Arc<dyn ScalarFunction>> {
    super::rowwise::lookup(FUNCTIONS, name)
}

/// The `->` operator (`long` false: the JSON text of the element) or `->>`
/// (`long` true: its SQL value), whose right side is a path, a bare key
/// (`'a'` is `'$.a'`) or an integer (`0` is `'$[0]'`, `-1` is `'$[#-1]'`).
pub(crate) fn arrow(long: bool) -> Arc<dyn ScalarFunction> {
    Arc::new(if long {
        RowFunction::new("->>", Arity::Exact(2), SqlType::Any, arrow_sql)
    } else {
        RowFunction::new("->", Arity::Exact(2), SqlType::Text, arrow_json)
    })
}

/// SQLite's message for malformed JSON text.
const MALFORMED: &str = "malformed JSON";

/// The JSON text of a function's first argument: text and bytes as they
/// are, a number as its text; `None` for NULL.
fn json_text(value: &Value) -> Option<Cow<'_, [u8]>> {
    match value {
        Value::Null => None,
        Value::Text(t) => Some(Cow::Borrowed(t.as_bytes())),
        Value::Bytes(b) => Some(Cow::Borrowed(b.as_ref())),
        other => Some(Cow::Owned(other.render().into_bytes())),
    }
}

/// A path argument as text, cut at its first NUL as SQLite reads it;
/// `None` for NULL.
fn path_text(value: &Value) -> Option<Cow<'_, str>> {
    let text = match value {
        Value::Null => return None,
        Value::Text(t) => Cow::Borrowed(&**t),
        Value::Bytes(b) => String::from_utf8_lossy(b),
        other => Cow::Owned(other.render()),
    };
    Some(match text.find('\0') {
        None => text,
        Some(end) => Cow::Owned(text[..end].to_string()),
    })
}

/// The result for a NULL path: NULL, but SQLite checks the text first.
fn null_path(text: &[u8]) -> Result<Value, String> {
    if scan::valid(text) {
        Ok(Value::Null)
    } else {
        Err(MALFORMED.to_string())
    }
}

/// SQLite's error for a path it cannot follow (`%Q` quoting).
fn path_error(path: &str, found: Found) -> String {
    match found {
        Found::TooDeep => "JSON path too deep".to_string(),
        _ => format!("bad JSON path: '{}'", path.replace('\'', "''")),
    }
}

/// Follow a `$` path: the value found, `None` when missing; the error for
/// malformed text or a bad path.
fn find(text: &[u8], path: &str) -> Result<Option<(usize, usize, Kind)>, String> {
    let Some(steps) = path.strip_prefix('$') else {
        // SQLite checks the text before the path.
        return if scan::valid(text) {
            Err(path_error(path, Found::BadPath))
        } else {
            Err(MALFORMED.to_string())
        };
    };
    match lookup(text, steps.as_bytes()).map_err(|_| MALFORMED.to_string())? {
        Found::Value { start, end, kind } => Ok(Some((start, end, kind))),
        Found::Missing => Ok(None),
        other => Err(path_error(path, other)),
    }
}

/// Text of bytes of the input: borrowed slices of TEXT are UTF-8; BYTES
/// that are not are read lossily.
fn to_str(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// The JSON text of a value (`start..end` of `text`), minified as SQLite
/// prints it: whitespace outside strings dropped, all else as written.
fn minified(text: &[u8], start: usize, end: usize) -> Cow<'_, [u8]> {
    let span = &text[start..end];
    // Built only once whitespace outside a string turns up.
    let mut out: Option<Vec<u8>> = None;
    let (mut i, mut copied) = (0, 0);
    while i < span.len() {
        match span[i] {
            b'"' => {
                // Skip the whole string: its whitespace stays.
                i += 1;
                while i < span.len() && span[i] != b'"' {
                    i += if span[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' => {
                let out = out.get_or_insert_with(|| Vec::with_capacity(span.len()));
                out.extend_from_slice(&span[copied..i]);
                i += 1;
                copied = i;
            }
            _ => i += 1,
        }
    }
    match out {
        None => Cow::Borrowed(span),
        Some(mut out) => {
            out.extend_from_slice(&span[copied.min(span.len())..]);
            Cow::Owned(out)
        }
    }
}

/// The content of a JSON string with its escapes decoded. A lone surrogate
/// (`\ud800` unpaired) becomes U+FFFD, where SQLite writes its CESU-8
/// bytes (not UTF-8).
fn unescape(content: &[u8]) -> String {
    let mut out = String::with_capacity(content.len());
    let mut i = 0;
    while i < content.len() {
        let run = content[i..]
            .iter()
            .position(|&b| b == b'\\')
            .map_or(content.len(), |p| i + p);
        out.push_str(&to_str(&content[i..run]));
        if run >= content.len() {
            break;
        }
        let (code, len) = unescape_one(&content[run..]);
        // SQLite drops what decodes to its invalid character (JSON5 only).
        if code != path::INVALID_CHAR {
            out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
        }
        i = run + len.max(1);
    }
    out
}

/// The SQL value of the JSON value at `start..end` of `text`: SQLite's
/// `jsonReturnFromBlob`.
fn sql_value(text: &[u8], start: usize, end: usize, kind: Kind) -> Value {
    let span = &text[start..end];
    match kind {
        Kind::Null => Value::Null,
        Kind::True => Value::Int(1),
        Kind::False => Value::Int(0),
        Kind::Integer => {
            // ASCII digits: the scanner checked the number.
            let digits = std::str::from_utf8(span).unwrap_or("0");
            match digits.parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_) => Value::Float(digits.parse::<f64>().unwrap_or(0.0)),
            }
        }
        Kind::Real => Value::Float(
            std::str::from_utf8(span)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(0.0),
        ),
        Kind::Text => {
            let content = &span[1..span.len().saturating_sub(1).max(1)];
            if content.contains(&b'\\') {
                Value::text(unescape(content))
            } else {
                Value::text(to_str(content))
            }
        }
        Kind::Array | Kind::Object => Value::text(to_str(&minified(text, start, end))),
    }
}

/// `json_extract(json, path, ...)`: with one path the SQL value found
/// (NULL when missing), with several a JSON array of the JSON texts found
/// (`null` for each missing).
fn json_extract(args: &[&Value]) -> Result<Value, String> {
    let Some(text) = json_text(args[0]) else {
        return Ok(Value::Null);
    };
    let paths = &args[1..];
    if let [path] = paths {
        let Some(path) = path_text(path) else {
            return null_path(&text);
        };
        return Ok(match find(&text, &path)? {
            Some((start, end, kind)) => sql_value(&text, start, end, kind),
            None => Value::Null,
        });
    }
    let mut out: Vec<u8> = vec![b'['];
    for (n, path) in paths.iter().enumerate() {
        let Some(path) = path_text(path) else {
            return null_path(&text);
        };
        if n > 0 {
            out.push(b',');
        }
        match find(&text, &path)? {
            Some((start, end, _)) => {
                let json = minified(&text, start, end);
                if out.len() + json.len() + 1 > MAX_RESULT_BYTES {
                    return Err(too_large(out.len() + json.len() + 1));
                }
                out.extend_from_slice(&json);
            }
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b']');
    Ok(Value::text(to_str(&out)))
}

/// Follow the right side of `->` or `->>`: a `$` path, or SQLite's
/// abbreviations (an integer `n` is `$[n]`, or `$[#n]` when negative; a
/// label of letters, digits and `_` is `$.label`; `[...]` is `$[...]`;
/// anything else is the quoted key `$."..."`).
fn find_arrow(text: &[u8], right: &Value) -> Result<Option<(usize, usize, Kind)>, String> {
    let Some(path) = path_text(right) else {
        return null_path(text).map(|_| None);
    };
    if path.starts_with('$') {
        return find(text, &path);
    }
    let p = path.as_bytes();
    let parts: [&[u8]; 3] = match right {
        Value::Int(_) | Value::Bool(_) if p.first() == Some(&b'-') => [b"[#", p, b"]"],
        Value::Int(_) | Value::Bool(_) => [b"[", p, b"]"],
        _ if p.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') => [b".", p, b""],
        _ if p.len() >= 3 && p[0] == b'[' && p[p.len() - 1] == b']' => [b"", p, b""],
        _ => [b".\"", p, b"\""],
    };
    // Build the path on the stack when it is short, as it nearly always is.
    let mut buffer = [0u8; 64];
    let len: usize = parts.iter().map(|part| part.len()).sum();
    let owned: Vec<u8>;
    let steps: &[u8] = if len <= buffer.len() {
        let mut at = 0;
        for part in parts {
            buffer[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        &buffer[..len]
    } else {
        owned = parts.concat();
        &owned
    };
    match lookup(text, steps).map_err(|_| MALFORMED.to_string())? {
        Found::Value { start, end, kind } => Ok(Some((start, end, kind))),
        Found::Missing => Ok(None),
        other => Err(path_error(&path, other)),
    }
}

/// `json -> path`: the JSON text of the element (NULL when missing).
fn arrow_json(args: &[&Value]) -> Result<Value, String> {
    let Some(text) = json_text(args[0]) else {
        return Ok(Value::Null);
    };
    Ok(match find_arrow(&text, args[1])? {
        Some((start, end, _)) => Value::text(to_str(&minified(&text, start, end))),
        None => Value::Null,
    })
}

/// `json ->> path`: the SQL value of the element (NULL when missing).
fn arrow_sql(args: &[&Value]) -> Result<Value, String> {
    let Some(text) = json_text(args[0]) else {
        return Ok(Value::Null);
    };
    Ok(match find_arrow(&text, args[1])? {
        Some((start, end, kind)) => sql_value(&text, start, end, kind),
        None => Value::Null,
    })
}

/// `json_valid(json [, flags])`: 1 when `json` is RFC 8259 text, else 0;
/// NULL for NULL. Flags as SQLite (1 to 15); JSON5 (flag 2) and JSONB
/// (flags 4 and 8) are not recognised, so only RFC 8259 text is valid.
fn json_valid(args: &[&Value]) -> Result<Value, String> {
    let mut flags = 1;
    if let Some(f) = args.get(1) {
        let f = f.to_integer();
        if !(1..=15).contains(&f) {
            return Err("FLAGS parameter to json_valid() must be between 1 and 15".to_string());
        }
        flags = f;
    }
    let Some(text) = json_text(args[0]) else {
        return Ok(Value::Null);
    };
    Ok(Value::Int(i64::from(flags & 3 != 0 && scan::valid(&text))))
}

/// The element `args[1]` (a path; the whole text when absent) names in
/// the document `args[0]`, as what [`find`] answers with the document's
/// text: `Ok(None)` for a NULL document, or a NULL path over valid text.
#[allow(clippy::type_complexity)]
fn element<'a>(
    args: &[&'a Value],
) -> Result<Option<(Cow<'a, [u8]>, Option<(usize, usize, Kind)>)>, String> {
    let Some(text) = json_text(args[0]) else {
        return Ok(None);
    };
    let path = match args.get(1) {
        None => Cow::Borrowed("$"),
        Some(path) => match path_text(path) {
            Some(path) => path,
            None => return null_path(&text).map(|_| None),
        },
    };
    let found = find(&text, &path)?;
    Ok(Some((text, found)))
}

/// `json_type(json [, path])`: the kind of the value at `path` (the whole
/// text by default) as text; NULL when missing.
fn json_type(args: &[&Value]) -> Result<Value, String> {
    Ok(match element(args)? {
        Some((_, Some((_, _, kind)))) => Value::text(kind.name()),
        _ => Value::Null,
    })
}

/// `json_array_length(json [, path])`: how many elements the array at
/// `path` has (0 when it is not an array); NULL when missing.
fn json_array_length(args: &[&Value]) -> Result<Value, String> {
    Ok(match element(args)? {
        Some((text, Some((start, end, Kind::Array)))) => {
            let mut scanner = scan::Scanner::new(&text[start..end]);
            Value::Int(
                scanner
                    .count_elements()
                    .map_err(|_| MALFORMED.to_string())? as i64,
            )
        }
        Some((_, Some(_))) => Value::Int(0),
        _ => Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Call a row function of this module on `args`.
    fn call(function: &Arc<dyn ScalarFunction>, args: &[Value]) -> Result<Value, String> {
        let columns: Vec<Vec<Value>> = args.iter().map(|a| vec![a.clone()]).collect();
        function
            .call(&columns, 1)
            .map(|mut rows| rows.pop().unwrap_or(Value::Null))
            .map_err(|e| e.message)
    }

    fn text(s: &str) -> Value {
        Value::text(s)
    }

    #[test]
    fn extracting_a_key_scans_without_copying() {
        // Not timed: the fast path of json_extract(value, '$.name') on a
        // small object borrows the text and copies only the result.
        let object = r#"{"id":12345,"name":"Ada Lovelace","tags":["math","poetry"],"active":true,"score":99.5}"#;
        let found = lookup(object.as_bytes(), b".name");
        let Ok(Found::Value { start, end, kind }) = found else {
            panic!("{found:?}");
        };
        assert_eq!(
            (&object[start..end], kind),
            (r#""Ada Lovelace""#, Kind::Text)
        );
        assert!(matches!(
            minified(object.as_bytes(), start, end),
            Cow::Borrowed(_)
        ));
        let extract = builtin("json_extract").expect("json_extract");
        assert_eq!(
            call(&extract, &[text(object), text("$.name")]),
            Ok(text("Ada Lovelace"))
        );
        assert_eq!(
            call(&extract, &[text(object), text("$.tags")]),
            Ok(text(r#"["math","poetry"]"#))
        );
        assert_eq!(
            call(
                &extract,
                &[text(object), text("$.tags"), text("$.nope"), text("$.id")]
            ),
            Ok(text(r#"[["math","poetry"],null,12345]"#))
        );
    }

    #[test]
    fn minifying_keeps_strings_as_written() {
        let json = br#" [ 1 , "a b\" c" , { "k" : "\u00e9" } ] "#;
        let start = 1;
        let end = json.len() - 1;
        assert_eq!(
            &*minified(json, start, end),
            br#"[1,"a b\" c",{"k":"\u00e9"}]"#
        );
    }

    #[test]
    fn unknown_names_are_not_json_functions() {
        assert!(builtin("json_extract").is_some());
        assert!(builtin("json").is_none());
        assert!(builtin("json_set").is_none());
    }
}
