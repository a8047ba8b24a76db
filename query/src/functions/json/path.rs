//! SQLite's JSON paths (`$.a."b c"[2][#-1]`): finding the value a path
//! names while checking the whole text, one step at a time.

use super::scan::{Kind, MAX_DEPTH, Malformed, Scanner};

/// Where a path led.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// To the value at `start..end` of the text, of kind `kind`.
    Value {
        /// First byte.
        start: usize,
        /// One past the last byte.
        end: usize,
        /// What it is.
        kind: Kind,
    },
    /// Nowhere: a key or an index the text does not have.
    Missing,
    /// The path is malformed (SQLite's `bad JSON path`).
    BadPath,
    /// The path goes 1000 levels deep (SQLite's `JSON path too deep`).
    TooDeep,
}

/// The byte of `path` at `i`, 0 past its end (SQLite reads paths as C
/// strings).
#[inline]
fn at(path: &[u8], i: usize) -> u8 {
    path.get(i).copied().unwrap_or(0)
}

/// Follow `steps` (a path after its `$`) in `text`, checking all of `text`:
/// malformed text is an error whatever the path, as SQLite parses the text
/// before it looks anything up. Steps are read as they are reached, so a
/// malformed step after a missing one is not an error, as in SQLite.
pub(super) fn lookup(text: &[u8], steps: &[u8]) -> Result<Found, Malformed> {
    let mut scanner = Scanner::new(text);
    let found = follow(&mut scanner, steps)?;
    scanner.finish()?;
    Ok(found)
}

/// Follow `steps` from the value at the scanner; leaves the scanner just
/// after a value (the one found, or the container where the path ended).
fn follow(sc: &mut Scanner<'_>, path: &[u8]) -> Result<Found, Malformed> {
    let mut i = 0;
    let mut descents = 0;
    // Skip the value at the scanner and report `found`.
    let give_up = |sc: &mut Scanner<'_>, found: Found| sc.skip_value().map(|_| found);
    'step: loop {
        sc.ws();
        match at(path, i) {
            0 => {
                let start = sc.pos;
                let kind = sc.skip_value()?;
                return Ok(Found::Value {
                    start,
                    end: sc.pos,
                    kind,
                });
            }
            b'.' => {
                i += 1;
                let (key, raw, next) = if at(path, i) == b'"' {
                    let mut j = i + 1;
                    while at(path, j) != 0 && at(path, j) != b'"' {
                        if at(path, j) == b'\\' && at(path, j + 1) != 0 {
                            j += 1;
                        }
                        j += 1;
                    }
                    if at(path, j) == 0 {
                        return give_up(sc, Found::BadPath);
                    }
                    let key = &path[i + 1..j];
                    (key, !key.contains(&b'\\'), j + 1)
                } else {
                    let mut j = i;
                    while !matches!(at(path, j), 0 | b'.' | b'[') {
                        j += 1;
                    }
                    if j == i {
                        return give_up(sc, Found::BadPath);
                    }
                    (&path[i..j], true, j)
                };
                if sc.peek() != b'{' {
                    return give_up(sc, Found::Missing);
                }
                sc.open(true)?;
                sc.ws();
                if sc.peek() == b'}' {
                    sc.close();
                    return Ok(Found::Missing);
                }
                loop {
                    let (label, escaped) = sc.label()?;
                    if labels_equal(key, raw, label, !escaped) {
                        descents += 1;
                        if descents >= MAX_DEPTH {
                            return give_up(sc, Found::TooDeep);
                        }
                        i = next;
                        continue 'step;
                    }
                    sc.skip_value()?;
                    sc.ws();
                    match sc.peek() {
                        b',' => {
                            sc.pos += 1;
                            sc.ws();
                        }
                        b'}' => {
                            sc.close();
                            return Ok(Found::Missing);
                        }
                        _ => return Err(Malformed),
                    }
                }
            }
            b'[' => {
                if sc.peek() != b'[' {
                    return give_up(sc, Found::Missing);
                }
                let mut j = i + 1;
                let mut index: u64 = 0;
                while at(path, j).is_ascii_digit() {
                    if index < 0xffff_ffff {
                        index = index * 10 + u64::from(at(path, j) - b'0');
                    }
                    j += 1;
                }
                if j < i + 2 || at(path, j) != b']' {
                    if at(path, i + 1) != b'#' {
                        return give_up(sc, Found::BadPath);
                    }
                    index = sc.clone().count_elements()?;
                    j = i + 2;
                    if at(path, j) == b'-' && at(path, j + 1).is_ascii_digit() {
                        let mut back: u64 = 0;
                        j += 1;
                        while at(path, j).is_ascii_digit() {
                            if back < 0xffff_ffff {
                                back = back * 10 + u64::from(at(path, j) - b'0');
                            }
                            j += 1;
                        }
                        if back > index {
                            return give_up(sc, Found::Missing);
                        }
                        index -= back;
                    }
                    if at(path, j) != b']' {
                        return give_up(sc, Found::BadPath);
                    }
                }
                sc.open(false)?;
                sc.ws();
                if sc.peek() == b']' {
                    sc.close();
                    return Ok(Found::Missing);
                }
                loop {
                    if index == 0 {
                        descents += 1;
                        if descents >= MAX_DEPTH {
                            return give_up(sc, Found::TooDeep);
                        }
                        i = j + 1;
                        continue 'step;
                    }
                    index -= 1;
                    sc.skip_value()?;
                    sc.ws();
                    match sc.peek() {
                        b',' => sc.pos += 1,
                        b']' => {
                            sc.close();
                            return Ok(Found::Missing);
                        }
                        _ => return Err(Malformed),
                    }
                }
            }
            _ => return give_up(sc, Found::BadPath),
        }
    }
}

/// SQLite's `JSON_INVALID_CHAR`: what an escape that means nothing decodes to.
pub(super) const INVALID_CHAR: u32 = 0x99999;

/// SQLite's `jsonHexToInt` of one hex digit (lenient: any byte maps to 0..16).
fn hex_digit(h: u8) -> u32 {
    let h = u32::from(h);
    (h + 9 * (1 & (h >> 6))) & 0xf
}

/// The 4 hex digits at the start of `z` (lenient, as SQLite's `jsonHexToInt4`).
fn hex4(z: &[u8]) -> u32 {
    z.iter().take(4).fold(0, |v, &h| (v << 4) | hex_digit(h))
}

/// Decode one escape at the start of `z` (`\` first) as SQLite's
/// `jsonUnescapeOneChar` does for RFC 8259 and the simple JSON5 escapes:
/// the code point (a lone surrogate stays one) and the bytes read.
pub(super) fn unescape_one(z: &[u8]) -> (u32, usize) {
    let n = z.len();
    if n < 2 {
        return (INVALID_CHAR, n);
    }
    match z[1] {
        b'u' => {
            if n < 6 {
                return (INVALID_CHAR, n);
            }
            let v = hex4(&z[2..6]);
            if v & 0xfc00 == 0xd800 && n >= 12 && z[6] == b'\\' && z[7] == b'u' {
                let low = hex4(&z[8..12]);
                if low & 0xfc00 == 0xdc00 {
                    return (((v & 0x3ff) << 10) + (low & 0x3ff) + 0x10000, 12);
                }
            }
            (v, 6)
        }
        b'b' => (0x08, 2),
        b'f' => (0x0c, 2),
        b'n' => (u32::from(b'\n'), 2),
        b'r' => (u32::from(b'\r'), 2),
        b't' => (u32::from(b'\t'), 2),
        b'v' => (0x0b, 2),
        b'0' => (
            if n > 2 && z[2].is_ascii_digit() {
                INVALID_CHAR
            } else {
                0
            },
            2,
        ),
        c @ (b'\'' | b'"' | b'/' | b'\\') => (u32::from(c), 2),
        b'x' if n >= 4 => ((hex_digit(z[2]) << 4) | hex_digit(z[3]), 4),
        b'x' => (INVALID_CHAR, n),
        _ => (INVALID_CHAR, 2),
    }
}

/// The next character of a label at the start of `z` (`raw`: escapes are
/// literal text), SQLite's way: 0 at the end, a UTF-8 sequence decoded
/// leniently; and the bytes read.
fn next_char(z: &[u8], raw: bool) -> (u32, usize) {
    match z.first() {
        None => (0, 0),
        Some(b'\\') if !raw => unescape_one(z),
        Some(&c) if c >= 0xc0 => {
            let mut v = u32::from(c)
                & if c >= 0xf0 {
                    0x07
                } else if c >= 0xe0 {
                    0x0f
                } else {
                    0x1f
                };
            let mut len = 1;
            while len < z.len() && len < 4 && z[len] & 0xc0 == 0x80 {
                v = (v << 6) | u32::from(z[len] & 0x3f);
                len += 1;
            }
            (v, len)
        }
        Some(&c) => (u32::from(c), 1),
    }
}

/// Whether a path key and an object label name the same key, SQLite's
/// `jsonLabelCompare`: byte equality when neither has escapes, else
/// character by character with escapes decoded (ending at the first NUL).
fn labels_equal(key: &[u8], key_raw: bool, label: &[u8], label_raw: bool) -> bool {
    if key_raw && label_raw {
        return key == label;
    }
    let (mut left, mut right) = (key, label);
    loop {
        let (a, n) = next_char(left, key_raw);
        let (b, m) = next_char(right, label_raw);
        if a != b {
            return false;
        }
        if a == 0 {
            return true;
        }
        left = &left[n.min(left.len())..];
        right = &right[m.min(right.len())..];
    }
}
