//! The modifiers of SQLite's date and time functions (`parseModifier`):
//! `NNN days` and the other units, `±YYYY-MM-DD HH:MM:SS.SSS`, `start of`,
//! `end of`, `weekday N`, `unixepoch`, `julianday`, `auto`, `subsec`,
//! `ceiling`, `floor`, `localtime` and `utc` (local time is UTC).

use super::calendar::{DAY_MS, DateTime, UNIX_EPOCH_JD_MS, c_i64};
use super::parse::{at, atof, get_digits, is_space, parse_hhmmss, tail};

/// A unit of `NNN unit` modifiers: name, largest magnitude allowed (as C's
/// `float` table holds it) and seconds per unit.
struct Unit {
    name: &'static [u8],
    limit: f32,
    seconds: f32,
}

/// SQLite's `aXformType`.
const UNITS: [Unit; 6] = [
    Unit {
        name: b"second",
        limit: 4.6427e14,
        seconds: 1.0,
    },
    Unit {
        name: b"minute",
        limit: 7.7379e12,
        seconds: 60.0,
    },
    Unit {
        name: b"hour",
        limit: 1.2897e11,
        seconds: 3600.0,
    },
    Unit {
        name: b"day",
        limit: 5_373_485.0,
        seconds: 86400.0,
    },
    Unit {
        name: b"month",
        limit: 176_546.0,
        seconds: 2_592_000.0,
    },
    Unit {
        name: b"year",
        limit: 14713.0,
        seconds: 31_536_000.0,
    },
];

/// Whether `z` is, ignoring ASCII case, `word`.
fn is(z: &[u8], word: &str) -> bool {
    z.eq_ignore_ascii_case(word.as_bytes())
}

/// Whether `z` starts with `prefix`, ignoring ASCII case.
fn starts(z: &[u8], prefix: &str) -> bool {
    z.len() >= prefix.len() && z[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Normalise `p.month` to 1..=12, carrying into `p.year`.
fn carry_months(p: &mut DateTime) {
    let x = if p.month > 0 {
        (p.month - 1) / 12
    } else {
        (p.month - 12) / 12
    };
    p.year += x;
    p.month -= x * 12;
}

/// A raw number read as Unix seconds, when in range (`autoAdjustDate`).
fn auto_adjust(p: &mut DateTime) {
    if !p.raw_s || p.valid_jd {
        p.raw_s = false;
    } else if p.second >= -210_866_760_000.0 && p.second <= 253_402_300_799.0 {
        let r = p.second * 1000.0 + UNIX_EPOCH_JD_MS as f64;
        p.clear_ymd_hms_tz();
        p.jd = c_i64(r + 0.5);
        p.valid_jd = true;
        p.raw_s = false;
    }
}

/// Apply modifier `z` (argument `idx`, 1 for the first modifier) to `p`.
/// Returns true when the modifier is not valid here: the result is NULL.
pub(super) fn apply(z: &[u8], p: &mut DateTime, idx: usize) -> bool {
    match at(z, 0).to_ascii_lowercase() {
        b'a' if is(z, "auto") => {
            if idx > 1 {
                return true;
            }
            auto_adjust(p);
            false
        }
        b'c' if is(z, "ceiling") => {
            p.compute_jd();
            p.clear_ymd_hms_tz();
            p.n_floor = 0;
            false
        }
        b'e' if starts(z, "end of ") => end_of(tail(z, 7), p),
        b'f' if is(z, "floor") => {
            p.compute_jd();
            p.jd = p.jd.wrapping_sub(i64::from(p.n_floor) * DAY_MS);
            p.clear_ymd_hms_tz();
            false
        }
        b'j' if is(z, "julianday") => {
            if idx > 1 || !(p.valid_jd && p.raw_s) {
                return true;
            }
            p.raw_s = false;
            false
        }
        b'l' if is(z, "localtime") => {
            if !p.is_local {
                p.shift_to_localtime();
            }
            p.is_utc = false;
            p.is_local = true;
            false
        }
        b'u' if is(z, "unixepoch") && p.raw_s => {
            if idx > 1 {
                return true;
            }
            let r = p.second * 1000.0 + UNIX_EPOCH_JD_MS as f64;
            if !(0.0..464_269_060_800_000.0).contains(&r) {
                return true;
            }
            p.clear_ymd_hms_tz();
            p.jd = (r + 0.5) as i64;
            p.valid_jd = true;
            p.raw_s = false;
            false
        }
        b'u' if is(z, "utc") => {
            if !p.is_utc {
                to_utc(p);
            }
            false
        }
        b'w' => weekday(z, p),
        b's' if starts(z, "start of ") => start_of(tail(z, 9), p),
        b's' if is(z, "subsec") || is(z, "subsecond") => {
            p.use_subsec = true;
            false
        }
        b'+' | b'-' | b'0'..=b'9' => shift(z, p),
        _ => true,
    }
}

/// `utc`: local time back to UTC, by SQLite's guess-and-correct loop over
/// [`DateTime::shift_to_localtime`].
fn to_utc(p: &mut DateTime) {
    p.compute_jd();
    let original = p.jd;
    let mut guess = original;
    let mut error: i64 = 0;
    let mut count = 0;
    loop {
        guess = guess.wrapping_sub(error);
        let mut local = DateTime {
            jd: guess,
            valid_jd: true,
            ..DateTime::default()
        };
        local.shift_to_localtime();
        local.compute_jd();
        error = local.jd.wrapping_sub(original);
        let again = error != 0 && count < 3;
        count += 1;
        if !again {
            break;
        }
    }
    *p = DateTime {
        jd: guess,
        valid_jd: true,
        is_utc: true,
        ..DateTime::default()
    };
}

/// `weekday N`: forward (or, with a `-`, backward) to weekday N.
fn weekday(z: &[u8], p: &mut DateTime) -> bool {
    if !starts(z, "weekday ") {
        return true;
    }
    let Some(r) = atof(tail(z, 8)) else {
        return true;
    };
    if !(-6.0..=6.0).contains(&r) || (r != 0.0 && r.fract() != 0.0) {
        return true;
    }
    let n = (r as i64).abs();
    p.compute_ymd_hms();
    p.tz = 0;
    p.valid_jd = false;
    p.compute_jd();
    let mut weekday = (p.jd.wrapping_add(129_600_000) / DAY_MS) % 7;
    if weekday != n {
        if weekday > n {
            weekday -= 7;
        }
        p.jd = p.jd.wrapping_add((n - weekday) * DAY_MS);
        if tail(z, 8).contains(&b'-') {
            p.jd = p.jd.wrapping_sub(7 * DAY_MS);
        }
    }
    p.clear_ymd_hms_tz();
    false
}

/// `start of day`, `start of month`, `start of year` (`rest` follows
/// `start of `).
fn start_of(rest: &[u8], p: &mut DateTime) -> bool {
    if !p.valid_jd && !p.valid_ymd && !p.valid_hms {
        return true;
    }
    p.compute_ymd();
    p.valid_hms = true;
    p.hour = 0;
    p.minute = 0;
    p.second = 0.0;
    p.raw_s = false;
    p.tz = 0;
    p.valid_jd = false;
    if is(rest, "month") {
        p.day = 1;
    } else if is(rest, "year") {
        p.month = 1;
        p.day = 1;
    } else if !is(rest, "day") {
        return true;
    }
    false
}

/// `end of day`, `end of month`, `end of year`: the last millisecond.
fn end_of(rest: &[u8], p: &mut DateTime) -> bool {
    if !p.valid_jd && !p.valid_ymd && !p.valid_hms {
        return true;
    }
    p.compute_ymd();
    p.valid_hms = true;
    p.hour = 23;
    p.minute = 59;
    p.second = 59.999;
    p.raw_s = false;
    p.tz = 0;
    p.valid_jd = false;
    if is(rest, "month") {
        p.day = 1;
        p.month += 1;
        if p.month > 12 {
            p.year += 1;
            p.month = 1;
        }
        p.compute_floor();
        p.compute_jd();
        p.jd = p.jd.wrapping_sub((i64::from(p.n_floor) + 1) * DAY_MS);
        p.clear_ymd_hms_tz();
    } else if is(rest, "year") {
        p.month = 12;
        p.day = 31;
    } else if !is(rest, "day") {
        return true;
    }
    false
}

/// The modifiers that start with a number: `±YYYY-MM-DD[ HH:MM[:SS.SSS]]`,
/// `±HH:MM[:SS.SSS]` and `NNN unit`.
fn shift(z: &[u8], p: &mut DateTime) -> bool {
    let sign = at(z, 0);
    let mut n = 1;
    while at(z, n) != 0 {
        let c = at(z, n);
        if c == b':' || is_space(c) {
            break;
        }
        if c == b'-'
            && ((n == 5 && get_digits(tail(z, 1), b"40f").1 == 1)
                || (n == 6 && get_digits(tail(z, 1), b"50f").1 == 1))
        {
            break;
        }
        n += 1;
    }
    let Some(mut r) = atof(&z[..n]) else {
        return true;
    };
    let mut time = z;
    let mut time_at = n;
    if at(z, n) == b'-' {
        // ±YYYY-MM-DD: years, months (0 to 11) and days (0 to 30).
        if sign != b'+' && sign != b'-' {
            return true;
        }
        let format: &[u8] = if n == 5 {
            b"40f-20a-20d"
        } else {
            b"50f-20a-20d"
        };
        let ([y, m, d], count) = get_digits(tail(z, 1), format);
        if count != 3 || m >= 12 || d >= 31 {
            return true;
        }
        let z = if n == 6 { tail(z, 1) } else { z };
        p.compute_ymd_hms();
        p.valid_jd = false;
        let days = if sign == b'-' {
            p.year -= y;
            p.month -= m;
            -d
        } else {
            p.year += y;
            p.month += m;
            d
        };
        carry_months(p);
        p.compute_floor();
        p.compute_jd();
        p.valid_hms = false;
        p.valid_ymd = false;
        p.jd = p.jd.wrapping_add(i64::from(days) * DAY_MS);
        if at(z, 11) == 0 {
            return false;
        }
        if is_space(at(z, 11)) && get_digits(tail(z, 12), b"20c:20e").1 == 2 {
            time = tail(z, 12);
            time_at = 2;
        } else {
            return true;
        }
    }
    if at(time, time_at) == b':' {
        // ±HH:MM[:SS.SSS]: a time of day added or subtracted.
        let time = if at(time, 0).is_ascii_digit() {
            time
        } else {
            tail(time, 1)
        };
        let mut tx = DateTime::default();
        if parse_hhmmss(time, &mut tx) {
            return true;
        }
        tx.compute_jd();
        tx.jd = tx.jd.wrapping_sub(43_200_000);
        let day = tx.jd / DAY_MS;
        tx.jd = tx.jd.wrapping_sub(day.wrapping_mul(DAY_MS));
        if sign == b'-' {
            tx.jd = tx.jd.wrapping_neg();
        }
        p.compute_jd();
        p.clear_ymd_hms_tz();
        p.jd = p.jd.wrapping_add(tx.jd);
        return false;
    }
    // NNN unit.
    let mut rest = tail(z, n);
    while is_space(at(rest, 0)) {
        rest = tail(rest, 1);
    }
    let mut len = rest.len();
    if !(3..=10).contains(&len) {
        return true;
    }
    if rest[len - 1].eq_ignore_ascii_case(&b's') {
        len -= 1;
    }
    let rest = &rest[..len];
    p.compute_jd();
    let rounder = if r < 0.0 { -0.5 } else { 0.5 };
    p.n_floor = 0;
    let mut failed = true;
    for (i, unit) in UNITS.iter().enumerate() {
        let limit = f64::from(unit.limit);
        if !rest.eq_ignore_ascii_case(unit.name) || r <= -limit || r >= limit {
            continue;
        }
        if i == 4 || i == 5 {
            // Months and years move the calendar, then the fraction adds
            // 30 or 365 days per unit.
            p.compute_ymd_hms();
            let whole = r as i32;
            if i == 4 {
                p.month += whole;
                carry_months(p);
            } else {
                p.year += whole;
            }
            p.compute_floor();
            p.valid_jd = false;
            r -= f64::from(whole);
        }
        p.compute_jd();
        p.jd =
            p.jd.wrapping_add(c_i64(r * 1000.0 * f64::from(unit.seconds) + rounder));
        failed = false;
        break;
    }
    p.clear_ymd_hms_tz();
    failed
}
