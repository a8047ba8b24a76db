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
    let mut scanner = Scanner {
        bytes: doc,
        at: 0,
        depth: 0,
    };
    scanner.whitespace();
    let found = scanner.value(steps).ok()?;
    scanner.whitespace();
    if scanner.at != doc.len() {
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

/// The document is not valid JSON.
struct Invalid;

/// One pass over a document.
struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn whitespace(&mut self) {
        // Between tokens there is usually no space or one: checked without
        // entering a loop (each loop pass costs an interruption check in
        // the sandbox).
        if !is_space(self.peek()) {
            return;
        }
        self.at += 1;
        while is_space(self.peek()) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), Invalid> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(Invalid)
        }
    }

    /// The value here; with steps left, where the value at them lies.
    fn value(&mut self, steps: &[Step]) -> Result<Option<Range<usize>>, Invalid> {
        let Some((step, rest)) = steps.split_first() else {
            let start = self.at;
            self.skip_value()?;
            return Ok(Some(start..self.at));
        };
        match self.peek() {
            Some(b'{') => self.object(Some((step, rest))),
            Some(b'[') => self.array(Some((step, rest))),
            _ => self.skip_value().map(|()| None),
        }
    }

    /// Validate one value and move past it.
    fn skip_value(&mut self) -> Result<(), Invalid> {
        match self.peek().ok_or(Invalid)? {
            b'{' => self.object(None).map(drop),
            b'[' => self.array(None).map(drop),
            b'"' => self.string().map(drop),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => Err(Invalid),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Invalid> {
        if self.bytes[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(())
        } else {
            Err(Invalid)
        }
    }

    #[inline]
    fn digits(&mut self) -> usize {
        // On locals: the loop then keeps `at` in a register in the sandbox.
        let (bytes, start) = (self.bytes, self.at);
        let mut at = start;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            at += 1;
        }
        self.at = at;
        at - start
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    #[inline]
    fn number(&mut self) -> Result<(), Invalid> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(Invalid),
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(Invalid);
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(Invalid);
            }
        }
        Ok(())
    }

    /// A string; its raw contents (between the quotes) and whether they
    /// hold escapes.
    #[inline(always)]
    fn string(&mut self) -> Result<(Range<usize>, bool), Invalid> {
        self.expect(b'"')?;
        let start = self.at;
        let (mut escaped, mut ascii) = (false, true);
        loop {
            self.at = plain_end(self.bytes, self.at).ok_or(Invalid)?;
            let byte = self.bytes[self.at];
            self.at += 1;
            match byte {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    match self.peek().ok_or(Invalid)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 1,
                        b'u' => {
                            let hex = self.bytes.get(self.at + 1..self.at + 5).ok_or(Invalid)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return Err(Invalid);
                            }
                            self.at += 5;
                        }
                        _ => return Err(Invalid),
                    }
                }
                0..=0x1f => return Err(Invalid),
                0x80.. => ascii = false,
                _ => {}
            }
        }
        let contents = start..self.at - 1;
        if !ascii && std::str::from_utf8(&self.bytes[contents.clone()]).is_err() {
            return Err(Invalid);
        }
        Ok((contents, escaped))
    }

    /// An object member's key, compared with `wanted`.
    fn key_is(&mut self, wanted: Option<&str>) -> Result<bool, Invalid> {
        let quoted_start = self.at;
        let (contents, escaped) = self.string()?;
        if escaped {
            // Rare: unescape exactly as serde_json does (and refuse what it
            // refuses, such as lone surrogates).
            let key: String =
                serde_json::from_slice(&self.bytes[quoted_start..self.at]).map_err(|_| Invalid)?;
            return Ok(wanted == Some(key.as_str()));
        }
        Ok(wanted.is_some_and(|key| key.as_bytes() == &self.bytes[contents]))
    }

    fn enter(&mut self) -> Result<(), Invalid> {
        self.depth += 1;
        self.at += 1;
        if self.depth > MAX_DEPTH {
            return Err(Invalid);
        }
        self.whitespace();
        Ok(())
    }

    /// An object; with a step, where the value at it (and the steps after
    /// it) lies in the last member with the wanted key.
    fn object(&mut self, step: Option<(&Step, &[Step])>) -> Result<Option<Range<usize>>, Invalid> {
        self.enter()?;
        let (wanted, rest) = match step {
            Some((Step::Key(key), rest)) => (Some(key.as_str()), rest),
            _ => (None, &[][..]),
        };
        let mut found = None;
        if self.peek() == Some(b'}') {
            self.at += 1;
            self.depth -= 1;
            return Ok(None);
        }
        loop {
            let matches = self.key_is(wanted)?;
            self.whitespace();
            self.expect(b':')?;
            self.whitespace();
            if matches {
                found = self.value(rest)?;
            } else {
                self.skip_value()?;
            }
            self.whitespace();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.whitespace();
                }
                Some(b'}') => break,
                _ => return Err(Invalid),
            }
        }
        self.at += 1;
        self.depth -= 1;
        Ok(found)
    }

    /// An array; with a step, where the value at it (and the steps after
    /// it) lies.
    fn array(&mut self, step: Option<(&Step, &[Step])>) -> Result<Option<Range<usize>>, Invalid> {
        self.enter()?;
        let (wanted, rest) = match step {
            Some((Step::Index(index), rest)) => (Some(*index), rest),
            _ => (None, &[][..]),
        };
        let mut found = None;
        if self.peek() == Some(b']') {
            self.at += 1;
            self.depth -= 1;
            return Ok(None);
        }
        let mut position = 0;
        loop {
            if Some(position) == wanted {
                found = self.value(rest)?;
            } else {
                self.skip_value()?;
            }
            position += 1;
            self.whitespace();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.whitespace();
                }
                Some(b']') => break,
                _ => return Err(Invalid),
            }
        }
        self.at += 1;
        self.depth -= 1;
        Ok(found)
    }
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
