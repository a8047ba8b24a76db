//! Reading time values as SQLite's date.c does: `YYYY-MM-DD HH:MM:SS.SSS`
//! with an optional time zone, `HH:MM[:SS[.SSS]]`, `now`, and numbers
//! (`sqlite3AtoF`). Text is read as C reads a NUL-terminated string.

use super::calendar::{DateTime, days_of_month};

/// The byte at `i`, or NUL past the end (C string reads).
pub(super) fn at(z: &[u8], i: usize) -> u8 {
    z.get(i).copied().unwrap_or(0)
}

/// The text from `i` on (empty past the end).
pub(super) fn tail(z: &[u8], i: usize) -> &[u8] {
    z.get(i..).unwrap_or_default()
}

/// SQLite's `sqlite3Isspace`: space, tab, newline, vertical tab, form feed,
/// carriage return.
pub(super) fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// The text up to its first NUL, as C sees a string.
pub(super) fn c_str(z: &[u8]) -> &[u8] {
    z.iter().position(|&c| c == 0).map_or(z, |end| &z[..end])
}

/// SQLite's `getDigits`: read up to three fixed-width numbers described by
/// `format` (for each: digit count, minimum, maximum code `a`..`f`, and the
/// separator that must follow, or none for the last). Returns the values
/// and how many were read before the first mismatch.
pub(super) fn get_digits(z: &[u8], format: &[u8]) -> ([i32; 3], usize) {
    const MAX: [i32; 6] = [12, 14, 24, 31, 59, 14712];
    let mut values = [0; 3];
    let mut count = 0;
    let mut pos = 0;
    for spec in format.chunks(4) {
        let [width, min, max, ..] = *spec else {
            break;
        };
        let next = spec.get(3).copied().unwrap_or(0);
        let max = MAX[usize::from(max - b'a')];
        let mut value = 0;
        for _ in 0..width - b'0' {
            let c = at(z, pos);
            if !c.is_ascii_digit() {
                return (values, count);
            }
            value = value * 10 + i32::from(c - b'0');
            pos += 1;
        }
        if value < i32::from(min - b'0') || value > max || (next != 0 && next != at(z, pos)) {
            return (values, count);
        }
        values[count] = value;
        pos += 1;
        count += 1;
        if next == 0 {
            break;
        }
    }
    (values, count)
}

/// SQLite's `sqlite3AtoF` when it accepts the whole text (spaces around a
/// number allowed): the number, or `None`.
pub(super) fn atof(z: &[u8]) -> Option<f64> {
    const LIMIT: u64 = (u64::MAX - 9) / 10;
    let mut i = 0;
    while is_space(at(z, i)) {
        i += 1;
    }
    let negative = at(z, i) == b'-';
    if matches!(at(z, i), b'-' | b'+') {
        i += 1;
    }
    let mut mantissa: u64 = 0;
    let mut exponent: i32 = 0;
    let mut digits = false;
    while at(z, i).is_ascii_digit() {
        digits = true;
        mantissa = mantissa * 10 + u64::from(at(z, i) - b'0');
        i += 1;
        if mantissa >= LIMIT {
            while at(z, i).is_ascii_digit() {
                i += 1;
                exponent = exponent.saturating_add(1);
            }
            break;
        }
    }
    if at(z, i) == b'.' {
        i += 1;
        while at(z, i).is_ascii_digit() {
            digits = true;
            if mantissa < LIMIT {
                mantissa = mantissa * 10 + u64::from(at(z, i) - b'0');
                exponent -= 1;
            }
            i += 1;
        }
    }
    if !digits {
        return None;
    }
    if matches!(at(z, i), b'e' | b'E') {
        let mut j = i + 1;
        let sign = if at(z, j) == b'-' { -1 } else { 1 };
        if matches!(at(z, j), b'-' | b'+') {
            j += 1;
        }
        if at(z, j).is_ascii_digit() {
            let mut e: i32 = 0;
            while at(z, j).is_ascii_digit() {
                e = if e < 10000 {
                    e * 10 + i32::from(at(z, j) - b'0')
                } else {
                    10000
                };
                j += 1;
            }
            exponent = exponent.saturating_add(sign * e);
            i = j;
        }
    }
    while is_space(at(z, i)) {
        i += 1;
    }
    if i < z.len() {
        return None;
    }
    let value = if mantissa == 0 {
        0.0
    } else {
        format!("{mantissa}e{exponent}").parse::<f64>().ok()?
    };
    Some(if negative { -value } else { value })
}

/// A time zone suffix: spaces, then `[+-]HH:MM` or `Z`, then spaces to the
/// end (`parseTimezone`). Returns true on a syntax error.
fn parse_timezone(z: &[u8], p: &mut DateTime) -> bool {
    let mut i = 0;
    while is_space(at(z, i)) {
        i += 1;
    }
    p.tz = 0;
    let sign = match at(z, i) {
        b'-' => -1,
        b'+' => 1,
        b'Z' | b'z' => {
            p.is_local = false;
            p.is_utc = true;
            i += 1;
            while is_space(at(z, i)) {
                i += 1;
            }
            return at(z, i) != 0;
        }
        c => return c != 0,
    };
    i += 1;
    let ([hours, minutes, _], n) = get_digits(tail(z, i), b"20b:20e");
    if n != 2 {
        return true;
    }
    i += 5;
    p.tz = sign * (minutes + hours * 60);
    if p.tz == 0 {
        p.is_local = false;
        p.is_utc = true;
    }
    while is_space(at(z, i)) {
        i += 1;
    }
    at(z, i) != 0
}

/// `HH:MM`, `HH:MM:SS` or `HH:MM:SS.FFF...` and an optional time zone
/// (`parseHhMmSs`). Returns true on a syntax error.
pub(super) fn parse_hhmmss(z: &[u8], p: &mut DateTime) -> bool {
    let ([h, m, _], n) = get_digits(z, b"20c:20e");
    if n != 2 {
        return true;
    }
    let mut i = 5;
    let mut s = 0;
    let mut fraction = 0.0;
    if at(z, i) == b':' {
        i += 1;
        let ([seconds, _, _], n) = get_digits(tail(z, i), b"20e");
        if n != 1 {
            return true;
        }
        s = seconds;
        i += 2;
        if at(z, i) == b'.' && at(z, i + 1).is_ascii_digit() {
            let mut scale = 1.0;
            i += 1;
            while at(z, i).is_ascii_digit() {
                fraction = fraction * 10.0 + f64::from(at(z, i) - b'0');
                scale *= 10.0;
                i += 1;
            }
            fraction /= scale;
            if fraction > 0.999 {
                fraction = 0.999;
            }
        }
    }
    if h == 24 && (m != 0 || s != 0 || fraction != 0.0) {
        return true;
    }
    p.valid_jd = false;
    p.raw_s = false;
    p.valid_hms = true;
    p.hour = h;
    p.minute = m;
    p.second = f64::from(s) + fraction;
    parse_timezone(tail(z, i), p)
}

/// `[-]YYYY-MM-DD` followed by spaces or `T`s and an optional time
/// (`parseYyyyMmDd`). Returns true on a syntax error.
fn parse_yyyymmdd(z: &[u8], p: &mut DateTime) -> bool {
    let negative = at(z, 0) == b'-';
    let z = if negative { tail(z, 1) } else { z };
    let ([y, mut m, mut d], n) = get_digits(z, b"40f-21a-21d");
    if n != 3 {
        return true;
    }
    let mut y = y;
    let mut i = 10;
    while is_space(at(z, i)) || at(z, i) == b'T' {
        i += 1;
    }
    if !parse_hhmmss(tail(z, i), p) {
        if p.hour == 24 {
            let max = days_of_month(y, m);
            p.hour = 0;
            d += 1;
            if d > max {
                d -= max;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    } else if at(z, i) == 0 {
        p.valid_hms = false;
    } else {
        return true;
    }
    p.valid_jd = false;
    p.valid_ymd = true;
    p.year = if negative { -y } else { y };
    p.month = m;
    p.day = d;
    p.compute_floor();
    if p.tz != 0 {
        p.compute_jd();
    }
    false
}

/// A number as a time value: a Julian day when in range, and kept raw for
/// the `unixepoch` and `auto` modifiers (`setRawDateNumber`).
pub(super) fn set_raw_date_number(p: &mut DateTime, r: f64) {
    p.second = r;
    p.raw_s = true;
    if (0.0..5_373_484.5).contains(&r) {
        p.jd = (r * 86_400_000.0 + 0.5) as i64;
        p.valid_jd = true;
    }
}

/// A time value given as text (`parseDateOrTime`). Returns true when it is
/// not one.
pub(super) fn parse_date_or_time(z: &[u8], p: &mut DateTime) -> bool {
    if !parse_yyyymmdd(z, p) || !parse_hhmmss(z, p) {
        false
    } else if z.eq_ignore_ascii_case(b"now") {
        p.set_to_current()
    } else if let Some(r) = atof(z) {
        set_raw_date_number(p, r);
        false
    } else if z.eq_ignore_ascii_case(b"subsec") || z.eq_ignore_ascii_case(b"subsecond") {
        p.use_subsec = true;
        p.set_to_current()
    } else {
        true
    }
}
