//! Reading the value at a path out of a JSON document without building the
//! rest of it: one pass over the bytes validates the whole document (as a
//! full parse would) and notes where the value at the path lies; only that
//! value is then parsed (by serde_json) into a JSON value.

use std::ops::Range;

use serde_json::Value as Json;

use crate::path::Step;

/// Nesting deeper than this is refused, as serde_json refuses it.
const MAX_DEPTH: usize = 127;

/// The value at `steps` in `doc`: `None` when `doc` is not valid JSON (with
/// nothing but whitespace after it) or the path does not exist. Duplicate
/// keys resolve to the last one, as a full parse does.
#[inline]
pub fn extract(doc: &[u8], steps: &[Step]) -> Option<Json> {
    let found = locate(doc, steps)?;
    parse_value(&doc[found])
}

/// Where the value at `steps` lies in `doc`; `None` when `doc` is not
/// valid JSON or the path does not exist.
#[inline]
pub fn locate(doc: &[u8], steps: &[Step]) -> Option<Range<usize>> {
    // Positions must stay below the escape mark (a quarter of the address
    // space: a document that large cannot be in memory).
    assert!(
        doc.len() < ESCAPED,
        "a JSON document of {} bytes",
        doc.len()
    );
    let mut found = None;
    let at = value(doc, whitespace(doc, 0), 0, steps, &mut found);
    if at == INVALID || whitespace(doc, at) != doc.len() {
        return None;
    }
    found
}

/// A located value as JSON: plain integers and floats directly, anything
/// else through serde_json (so big numbers and strings convert exactly as a
/// full parse converts them).
#[inline]
fn parse_value(bytes: &[u8]) -> Option<Json> {
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    let plain = !digits.is_empty()
        && digits.len() <= 18
        && digits.iter().all(u8::is_ascii_digit)
        && (digits[0] != b'0' || digits.len() == 1);
    if plain && bytes != b"-0" {
        // At most 18 digits: fits an i64; serde_json gives the same number.
        let magnitude = digits
            .iter()
            .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
        let value = if bytes[0] == b'-' {
            -magnitude
        } else {
            magnitude
        };
        return Some(Json::from(value));
    }
    if let Some(x) = short_decimal(bytes) {
        return serde_json::Number::from_f64(x).map(Json::Number);
    }
    let fractional = matches!(bytes.first(), Some(b'-' | b'0'..=b'9'))
        && bytes.iter().any(|b| matches!(b, b'.' | b'e' | b'E'));
    if fractional
        && let Ok(text) = std::str::from_utf8(bytes)
        && let Ok(x) = text.parse::<f64>()
        && x.is_finite()
    {
        // A number with a fraction or an exponent is a float to serde_json
        // too; Rust's parser rounds it correctly (serde_json's default
        // parser can be one unit in the last place off on long mantissas).
        return serde_json::Number::from_f64(x).map(Json::Number);
    }
    serde_json::from_slice(bytes).ok()
}

fn is_space(byte: Option<u8>) -> bool {
    matches!(byte, Some(b' ' | b'\n' | b'\r' | b'\t'))
}

/// Where the bytes a string holds as they are (see [`special_bytes`]) end
/// from `from` on: the position of the first other byte, `None` when there
/// is none. Eight bytes at a time, the first other byte of a word found from
/// its bit mask (no loop over bytes: in the sandbox each loop pass costs an
/// interruption check, and a copy into a padded word costs a call).
#[inline]
fn plain_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let special = special_bytes(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        if special != 0 {
            return Some(at + (special.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let left = bytes.len().checked_sub(at).filter(|&left| left > 0)?;
    if let Some(last) = bytes
        .len()
        .checked_sub(8)
        .and_then(|start| bytes.get(start..))
    {
        // The last eight bytes, shifted so the `left` unread ones come
        // first and zeros (special too) fill the rest.
        let word = u64::from_le_bytes(last.try_into().expect("8 bytes")) >> (8 * (8 - left));
        let run = (special_bytes(word).trailing_zeros() / 8) as usize;
        return (run < left).then_some(at + run);
    }
    bytes[at..]
        .iter()
        .position(|&b| special_bytes(u64::from(b) | 0x2020_2020_2020_2000) != 0)
        .map(|run| at + run)
}

/// The high bit of every byte of `word` that a string cannot hold as it is
/// (below 0x20, at or above 0x80, `"` or `\`). Bytes above the first such
/// byte may be marked wrongly (borrows carry upwards); the lowest mark is
/// always right, and a word with no such byte has no mark.
#[inline]
fn special_bytes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    (word.wrapping_sub(ONES * 0x20) | word) & HIGHS
        | has_zero(word ^ (ONES * u64::from(b'"')))
        | has_zero(word ^ (ONES * u64::from(b'\\')))
}

/// A number written `-?D.F` (no exponent) with at most 15 digits in all,
/// read exactly: the digits as an integer below 2^53 divided by a power of
/// ten at most 10^15, both exact as floats, so the one rounding of the
/// division is the correct rounding (Clinger's fast path; what Rust's own
/// parser does first). `None` for anything else.
#[inline]
fn short_decimal(bytes: &[u8]) -> Option<f64> {
    const POWERS: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let (negative, digits) = match bytes.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, bytes),
    };
    let point = digits.iter().position(|&b| b == b'.')?;
    let (whole, fraction) = (&digits[..point], &digits[point + 1..]);
    if whole.is_empty() || fraction.is_empty() || whole.len() + fraction.len() > 15 {
        return None;
    }
    let mut mantissa = 0u64;
    for &digit in whole.iter().chain(fraction) {
        if !digit.is_ascii_digit() {
            return None;
        }
        mantissa = mantissa * 10 + u64::from(digit - b'0');
    }
    let x = mantissa as f64 / POWERS[fraction.len()];
    Some(if negative { -x } else { x })
}

/// What the scanning functions return instead of a position when the
/// document is not valid JSON. Positions are returned by value, not kept in
/// a struct behind a reference: in the sandbox a field behind a reference
/// lives in linear memory, and every read of the next byte then waited on
/// two loads before its own (the struct's address, spilled, then the
/// field), where a value stays in a register.
const INVALID: usize = usize::MAX;

/// Set in the position a string returns when its contents hold escapes.
/// Positions stay far below it (a document fits in memory).
const ESCAPED: usize = 1 << (usize::BITS - 2);

/// The byte at `at`, if any.
#[inline(always)]
fn peek(bytes: &[u8], at: usize) -> Option<u8> {
    bytes.get(at).copied()
}

/// Past the whitespace at `at`.
#[inline(always)]
fn whitespace(bytes: &[u8], at: usize) -> usize {
    // Between tokens there is usually no space or one: checked without
    // entering a loop (each loop pass costs an interruption check in the
    // sandbox).
    if !is_space(peek(bytes, at)) {
        return at;
    }
    let mut at = at + 1;
    while is_space(peek(bytes, at)) {
        at += 1;
    }
    at
}

/// Past `byte` at `at`, or `INVALID`.
#[inline(always)]
fn expect(bytes: &[u8], at: usize, byte: u8) -> usize {
    if peek(bytes, at) == Some(byte) {
        at + 1
    } else {
        INVALID
    }
}

/// The value at `at`; with steps left, where the value at them lies goes
/// into `found` (left alone when the path does not exist). Past the value,
/// or `INVALID`.
fn value(
    bytes: &[u8],
    at: usize,
    depth: usize,
    steps: &[Step],
    found: &mut Option<Range<usize>>,
) -> usize {
    let Some((step, rest)) = steps.split_first() else {
        let end = skip_value(bytes, at, depth);
        if end != INVALID {
            *found = Some(at..end);
        }
        return end;
    };
    match (peek(bytes, at), step) {
        (Some(b'{'), Step::Key(key)) => find_in_object(bytes, at, depth, key, rest, found),
        (Some(b'['), Step::Index(index)) => find_in_array(bytes, at, depth, *index, rest, found),
        _ => skip_value(bytes, at, depth),
    }
}

/// Validate the value at `at`: past it, or `INVALID`.
fn skip_value(bytes: &[u8], at: usize, depth: usize) -> usize {
    match peek(bytes, at) {
        Some(b'{') => skip_object(bytes, at, depth),
        Some(b'[') => skip_array(bytes, at, depth),
        Some(b'"') => string_end(bytes, at),
        Some(b'-' | b'0'..=b'9') => number(bytes, at),
        Some(b't') => literal(bytes, at, b"true"),
        Some(b'f') => literal(bytes, at, b"false"),
        Some(b'n') => literal(bytes, at, b"null"),
        _ => INVALID,
    }
}

fn literal(bytes: &[u8], at: usize, word: &[u8]) -> usize {
    if bytes[at..].starts_with(word) {
        at + word.len()
    } else {
        INVALID
    }
}

/// Past the digits at `at`.
#[inline]
fn digits(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && bytes[at].is_ascii_digit() {
        at += 1;
    }
    at
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
#[inline]
fn number(bytes: &[u8], mut at: usize) -> usize {
    if peek(bytes, at) == Some(b'-') {
        at += 1;
    }
    match peek(bytes, at) {
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => at = digits(bytes, at + 1),
        _ => return INVALID,
    }
    if peek(bytes, at) == Some(b'.') {
        let end = digits(bytes, at + 1);
        if end == at + 1 {
            return INVALID;
        }
        at = end;
    }
    if let Some(b'e' | b'E') = peek(bytes, at) {
        at += 1;
        if let Some(b'+' | b'-') = peek(bytes, at) {
            at += 1;
        }
        let end = digits(bytes, at);
        if end == at {
            return INVALID;
        }
        at = end;
    }
    at
}

/// The string at `at` (its opening quote): past its closing quote, with
/// [`ESCAPED`] set when its contents hold escapes; or `INVALID`.
#[inline(always)]
fn string(bytes: &[u8], at: usize) -> usize {
    if peek(bytes, at) != Some(b'"') {
        return INVALID;
    }
    let start = at + 1;
    let mut at = start;
    let (mut escaped, mut ascii) = (false, true);
    loop {
        let Some(special) = plain_end(bytes, at) else {
            return INVALID;
        };
        let byte = bytes[special];
        at = special + 1;
        match byte {
            b'"' => break,
            b'\\' => {
                escaped = true;
                match peek(bytes, at) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => at += 1,
                    Some(b'u') => {
                        let Some(hex) = bytes.get(at + 1..at + 5) else {
                            return INVALID;
                        };
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return INVALID;
                        }
                        at += 5;
                    }
                    _ => return INVALID,
                }
            }
            0..=0x1f => return INVALID,
            0x80.. => ascii = false,
            _ => {}
        }
    }
    if !ascii && std::str::from_utf8(&bytes[start..at - 1]).is_err() {
        return INVALID;
    }
    if escaped { at | ESCAPED } else { at }
}

/// [`string`] without the [`ESCAPED`] mark: past the string, or `INVALID`.
#[inline(always)]
fn string_end(bytes: &[u8], at: usize) -> usize {
    let end = string(bytes, at);
    if end == INVALID {
        INVALID
    } else {
        end & !ESCAPED
    }
}

/// The object member key at `at`: past it, or `INVALID`; `matches` tells
/// whether it is `wanted`.
#[inline(always)]
fn key_is(bytes: &[u8], at: usize, wanted: &str, matches: &mut bool) -> usize {
    let end = string(bytes, at);
    if end == INVALID {
        return INVALID;
    }
    if end & ESCAPED == 0 {
        *matches = wanted.as_bytes() == &bytes[at + 1..end - 1];
        return end;
    }
    // Rare: unescape exactly as serde_json does (and refuse what it
    // refuses, such as lone surrogates).
    let end = end & !ESCAPED;
    match serde_json::from_slice::<String>(&bytes[at..end]) {
        Ok(key) => {
            *matches = key == wanted;
            end
        }
        Err(_) => INVALID,
    }
}

/// Past the `{` or `[` at `at` and the whitespace after it, one level
/// deeper; `None` past the nesting limit.
#[inline(always)]
fn enter(bytes: &[u8], at: usize, depth: usize) -> Option<(usize, usize)> {
    let depth = depth + 1;
    (depth <= MAX_DEPTH).then(|| (whitespace(bytes, at + 1), depth))
}

/// After a member or an element at `at`: past the `,` and the whitespace
/// after it (`Some(true)`), or at the closing `close` (`Some(false)`);
/// `None` for anything else.
#[inline(always)]
fn separator(bytes: &[u8], at: &mut usize, close: u8) -> Option<bool> {
    *at = whitespace(bytes, *at);
    match peek(bytes, *at) {
        Some(b',') => {
            *at = whitespace(bytes, *at + 1);
            Some(true)
        }
        Some(byte) if byte == close => Some(false),
        _ => None,
    }
}

/// An object member's `:` and the whitespace around it, from the end of its
/// key at `at`.
#[inline(always)]
fn colon(bytes: &[u8], at: usize) -> usize {
    let at = expect(bytes, whitespace(bytes, at), b':');
    if at == INVALID {
        return INVALID;
    }
    whitespace(bytes, at)
}

/// The object at `at`: each member's key read (and compared with `wanted`,
/// when given), then its value read by `member(at, depth, matches)`, which
/// returns past it. Past the object, or `INVALID`. Inlined into each form,
/// so each runs its own loop.
#[inline(always)]
fn object(
    bytes: &[u8],
    at: usize,
    depth: usize,
    wanted: Option<&str>,
    mut member: impl FnMut(usize, usize, bool) -> usize,
) -> usize {
    let Some((mut at, depth)) = enter(bytes, at, depth) else {
        return INVALID;
    };
    if peek(bytes, at) == Some(b'}') {
        return at + 1;
    }
    loop {
        let mut matches = false;
        at = match wanted {
            Some(key) => key_is(bytes, at, key, &mut matches),
            None => string_end(bytes, at),
        };
        if at == INVALID {
            return INVALID;
        }
        at = colon(bytes, at);
        if at == INVALID {
            return INVALID;
        }
        at = member(at, depth, matches);
        if at == INVALID {
            return INVALID;
        }
        match separator(bytes, &mut at, b'}') {
            Some(true) => {}
            Some(false) => return at + 1,
            None => return INVALID,
        }
    }
}

/// The array at `at`: each element read by `element(at, depth, position)`,
/// which returns past it. Past the array, or `INVALID`.
#[inline(always)]
fn array(
    bytes: &[u8],
    at: usize,
    depth: usize,
    mut element: impl FnMut(usize, usize, usize) -> usize,
) -> usize {
    let Some((mut at, depth)) = enter(bytes, at, depth) else {
        return INVALID;
    };
    if peek(bytes, at) == Some(b']') {
        return at + 1;
    }
    let mut position = 0;
    loop {
        at = element(at, depth, position);
        if at == INVALID {
            return INVALID;
        }
        position += 1;
        match separator(bytes, &mut at, b']') {
            Some(true) => {}
            Some(false) => return at + 1,
            None => return INVALID,
        }
    }
}

/// Validate the object at `at`: past it, or `INVALID`.
fn skip_object(bytes: &[u8], at: usize, depth: usize) -> usize {
    object(bytes, at, depth, None, |at, depth, _| {
        skip_value(bytes, at, depth)
    })
}

/// The object at `at`, where the value at `key` (and the `rest` of the
/// steps after it) lies going into `found`: the last member with that key
/// decides, as a full parse keeps the last. Past the object, or `INVALID`.
fn find_in_object(
    bytes: &[u8],
    at: usize,
    depth: usize,
    key: &str,
    rest: &[Step],
    found: &mut Option<Range<usize>>,
) -> usize {
    object(bytes, at, depth, Some(key), |at, depth, matches| {
        if matches {
            // A later member with the key replaces what an earlier found.
            *found = None;
            value(bytes, at, depth, rest, found)
        } else {
            skip_value(bytes, at, depth)
        }
    })
}

/// Validate the array at `at`: past it, or `INVALID`.
fn skip_array(bytes: &[u8], at: usize, depth: usize) -> usize {
    array(bytes, at, depth, |at, depth, _| {
        skip_value(bytes, at, depth)
    })
}

/// The array at `at`, where the value at `index` (and the `rest` of the
/// steps after it) lies going into `found`. Past the array, or `INVALID`.
fn find_in_array(
    bytes: &[u8],
    at: usize,
    depth: usize,
    index: usize,
    rest: &[Step],
    found: &mut Option<Range<usize>>,
) -> usize {
    array(bytes, at, depth, |at, depth, position| {
        if position == index {
            value(bytes, at, depth, rest, found)
        } else {
            skip_value(bytes, at, depth)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::{lookup, parse};

    const DOCS: [&str; 6] = [
        r#"{"a":{"b":"text","n":42,"x":2.5,"t":true,"z":null},"items":[{"name":"first"},{"name":"second","tags":["p","q"]}]}"#,
        r#"{"a": 1, "a": 2}"#,
        r#"{"esc\"aped": {"k\u00e9y": [1, [2, 3]]}, "s": "\u2603"}"#,
        r#"[10, {"a": [20, 30]}, "x"]"#,
        r#"  "just a string"  "#,
        r#"{"deep": {"er": {"est": {"v": [0, 1, 2, 3, 4, 5, {"w": -1e3}]}}}}"#,
    ];

    const PATHS: [&str; 14] = [
        "$",
        "$.a",
        "$.a.b",
        "$.a.n",
        "$.a.z",
        "$.a.missing",
        "$.items[1].tags[0]",
        "$.items[5]",
        r#"$["esc\"aped"]["kéy"][1][0]"#,
        "$.s",
        "$[1].a[1]",
        "$[2]",
        "$.deep.er.est.v[6].w",
        "$[0].x",
    ];

    #[test]
    fn the_walk_finds_what_a_full_parse_finds() {
        for doc in DOCS {
            let tree: Json = serde_json::from_str(doc).unwrap();
            for path in PATHS {
                let steps = parse(path).unwrap();
                assert_eq!(
                    extract(doc.as_bytes(), &steps),
                    lookup(&tree, &steps).cloned(),
                    "{path} in {doc}"
                );
            }
        }
    }

    #[test]
    fn invalid_documents_give_nothing_even_past_the_value() {
        let steps = parse("$.a").unwrap();
        for bad in [
            r#"{"a": 1, "b": }"#,
            r#"{"a": 1} trailing"#,
            r#"{"a": 1"#,
            "{not json",
            "",
        ] {
            assert_eq!(extract(bad.as_bytes(), &steps), None, "{bad}");
        }
        assert_eq!(extract(b"\xff\xfe", &steps), None);
    }

    /// What a full parse gives: the document as a tree, then the lookup.
    fn full(doc: &[u8], path: &str) -> Option<Json> {
        let tree: Json = serde_json::from_slice(doc).ok()?;
        lookup(&tree, &parse(path).unwrap()).cloned()
    }

    #[test]
    fn numbers_strings_and_literals_read_as_a_full_parse_reads_them() {
        let docs = [
            r#"{"v": -0}"#,
            r#"{"v": 0}"#,
            r#"{"v": -12}"#,
            r#"{"v": 123456789012345678}"#,
            r#"{"v": 12345678901234567890}"#,
            r#"{"v": 123456789012345678901234}"#,
            r#"{"v": 1.0}"#,
            r#"{"v": 1e2}"#,
            r#"{"v": -2.5E-3}"#,
            r#"{"v": "a\nb\u00e9\ud83d\ude00"}"#,
            r#"{"v": "é☃"}"#,
            r#"{"v": [true, false, null]}"#,
            "{\"v\"\t:\r\n1 }",
        ];
        for doc in docs {
            for path in ["$.v", "$.v[1]", "$"] {
                assert_eq!(
                    extract(doc.as_bytes(), &parse(path).unwrap()),
                    full(doc.as_bytes(), path),
                    "{path} in {doc}"
                );
            }
        }
    }

    #[test]
    fn short_decimals_read_as_rusts_parser_reads_them() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..50_000 {
            let whole_len = 1 + rng.below(10) as usize;
            let fraction_len = 1 + rng.below(15 - whole_len as u64) as usize;
            let mut text = String::new();
            if rng.below(2) == 0 {
                text.push('-');
            }
            for i in 0..whole_len + fraction_len {
                if i == whole_len {
                    text.push('.');
                }
                text.push(char::from(b'0' + rng.below(10) as u8));
            }
            let expected: f64 = text.parse().unwrap();
            let got = short_decimal(text.as_bytes()).expect(&text);
            assert_eq!(got.to_bits(), expected.to_bits(), "{text}");
        }
        for (text, expected) in [
            ("-0.0", Some(-0.0f64)),
            ("0.1", Some(0.1)),
            ("999999999999.999", Some(999_999_999_999.999)),
            ("1.000000000000000", None),
            ("1", None),
            ("1.", None),
            ("1e5", None),
            ("1.5e5", None),
        ] {
            assert_eq!(
                short_decimal(text.as_bytes()).map(f64::to_bits),
                expected.map(f64::to_bits),
                "{text}"
            );
        }
    }

    #[test]
    fn what_is_not_json_gives_nothing() {
        let steps = parse("$.a").unwrap();
        for bad in [
            r#"{"a": 01}"#,
            r#"{"a": 1.}"#,
            r#"{"a": .5}"#,
            r#"{"a": 1e}"#,
            r#"{"a": -}"#,
            r#"{"a": tru}"#,
            r#"{"a": 1,}"#,
            r#"{"a": [1,]}"#,
            r#"{"a" 1}"#,
            r#"{a: 1}"#,
            r#"{"a": "x\q"}"#,
            r#"{"a": "\u12"}"#,
            "{\"a\": \"tab\there\"}",
            r#"{"a": 1, "b": [}"#,
        ] {
            assert_eq!(extract(bad.as_bytes(), &steps), None, "{bad}");
            assert!(
                serde_json::from_str::<Json>(bad).is_err(),
                "{bad} is not JSON"
            );
        }
        // Invalid UTF-8 in a string the path does not reach.
        assert_eq!(extract(b"{\"a\": 1, \"b\": \"\xff\"}", &steps), None);
    }

    /// The bytes a string holds as they are: printable ASCII but `"` and
    /// `\`.
    const PLAIN: [bool; 256] = {
        let mut plain = [false; 256];
        let mut byte = 0x20;
        while byte < 0x80 {
            plain[byte] = byte != b'"' as usize && byte != b'\\' as usize;
            byte += 1;
        }
        plain
    };

    #[test]
    fn plain_runs_stop_at_the_first_byte_a_string_cannot_hold_as_is() {
        for len in 0..40 {
            for special in [b'"', b'\\', 0x00, 0x1f, 0x7f, 0x80, 0xff] {
                for at in 0..=len {
                    let mut bytes = vec![b'a'; len];
                    bytes.insert(at, special);
                    bytes.extend_from_slice(b"\"\x01");
                    let naive = bytes.iter().position(|&b| !PLAIN[usize::from(b)]);
                    assert_eq!(plain_end(&bytes, 0), naive, "{special:#x} at {at} of {len}");
                }
            }
            assert_eq!(plain_end(&vec![b'z'; len], 0), None);
        }
    }

    #[test]
    fn plain_runs_of_random_bytes_match_a_byte_by_byte_search() {
        // Several special bytes in one word: borrows carry upwards, only
        // the first special byte may count.
        let alphabet = [
            b'a', b'~', 0x7f, b' ', b'"', b'\\', 0x00, 0x1f, 0x20, 0x80, 0xff,
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let len = rng.below(24) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect();
            for from in 0..=len {
                let naive = bytes[from..]
                    .iter()
                    .position(|&b| !PLAIN[usize::from(b)])
                    .map(|run| from + run);
                assert_eq!(plain_end(&bytes, from), naive, "{bytes:x?} from {from}");
            }
        }
    }

    #[test]
    fn nesting_is_limited_as_serde_json_limits_it() {
        for depth in [126, 127, 128, 200] {
            let doc = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            assert_eq!(
                extract(doc.as_bytes(), &parse("$").unwrap()).is_some(),
                serde_json::from_str::<Json>(&doc).is_ok(),
                "depth {depth}"
            );
        }
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    fn random_json(rng: &mut Rng, depth: u32) -> Json {
        match rng.below(if depth > 3 { 5 } else { 8 }) {
            0 => Json::Null,
            1 => Json::Bool(rng.below(2) == 1),
            2 => Json::from(rng.below(2000) as i64 - 1000),
            3 => Json::from((rng.below(100_000) as f64 - 50_000.0) / 64.0),
            4 => Json::from(["a", "é", "q\"uote", "", "\u{1F600}"][rng.below(5) as usize]),
            5 | 6 => Json::Object(
                (0..rng.below(4))
                    .map(|_| {
                        let key = ["a", "b", "n", "a.b", "k\"ey"][rng.below(5) as usize];
                        (key.to_string(), random_json(rng, depth + 1))
                    })
                    .collect(),
            ),
            _ => Json::Array(
                (0..rng.below(4))
                    .map(|_| random_json(rng, depth + 1))
                    .collect(),
            ),
        }
    }

    #[test]
    fn random_and_damaged_documents_match_a_full_parse() {
        let paths = [
            "$",
            "$.a",
            "$.b",
            "$.n",
            "$.a.b",
            "$[0]",
            "$[1].a",
            "$.a[2]",
            r#"$["a.b"]"#,
            r#"$["k\"ey"].n"#,
        ];
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for case in 0..4000 {
            let mut doc = if rng.below(2) == 0 {
                serde_json::to_vec(&random_json(&mut rng, 0)).unwrap()
            } else {
                serde_json::to_vec_pretty(&random_json(&mut rng, 0)).unwrap()
            };
            // Damage a third of them: cut, or change one byte.
            match rng.below(6) {
                0 => doc.truncate(rng.below(doc.len() as u64 + 1) as usize),
                1 if !doc.is_empty() => {
                    let at = rng.below(doc.len() as u64) as usize;
                    doc[at] = b"{}[],:\"\\ 0-.eatnx"[rng.below(17) as usize];
                }
                _ => {}
            }
            for path in paths {
                assert_eq!(
                    extract(&doc, &parse(path).unwrap()),
                    full(&doc, path),
                    "case {case}: {path} in {}",
                    String::from_utf8_lossy(&doc)
                );
            }
        }
    }
}
