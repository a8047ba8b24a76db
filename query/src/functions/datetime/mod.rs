//! SQLite's date and time functions: `date`, `time`, `datetime`,
//! `julianday`, `unixepoch`, `strftime` and `timediff`, ported from
//! SQLite 3.54's date.c (a Julian day number in milliseconds inside).
//!
//! - `calendar.rs`: [`calendar::DateTime`] and its conversions.
//! - `parse.rs`: reading time values.
//! - `modifier.rs`: the modifiers.
//!
//! Fractions in results are formatted by SQLite's printf (`../printf.rs`).
//!
//! Differences from SQLite: local time is UTC (`localtime` and `utc` act
//! as SQLite's do in a UTC zone), and `now` reads the system clock at
//! each call rather than once per statement.

mod calendar;
mod modifier;
mod parse;

use std::fmt::Write;
use std::sync::Arc;

use super::rowwise::{MAX_RESULT_BYTES, RowFunction, too_large};
use super::{Arity, ScalarFunction};
use crate::value::{SqlType, Value};
use calendar::{DAY_MS, DateTime, UNIX_EPOCH_JD_MS};

/// Every function of this module.
const FUNCTIONS: &[RowFunction] = &[
    RowFunction::new("date", Arity::AtLeast(0), SqlType::Text, date),
    RowFunction::new("time", Arity::AtLeast(0), SqlType::Text, time),
    RowFunction::new("datetime", Arity::AtLeast(0), SqlType::Text, datetime),
    RowFunction::new("julianday", Arity::AtLeast(0), SqlType::Float, julianday),
    RowFunction::new("unixepoch", Arity::AtLeast(0), SqlType::Any, unixepoch),
    RowFunction::new("strftime", Arity::AtLeast(0), SqlType::Text, strftime),
    RowFunction::new("timediff", Arity::Exact(2), SqlType::Text, timediff),
];

/// The date and time built-in called `name` (lower-case), if any.
pub(super) fn builtin(name: &str) -> Option<Arc<dyn ScalarFunction>> {
    super::rowwise::lookup(FUNCTIONS, name)
}

/// A SQL value as C reads it with `sqlite3_value_text`: NULL is `None`,
/// numbers are rendered, and the text ends at its first NUL.
fn text_of(value: &Value) -> Option<std::borrow::Cow<'_, [u8]>> {
    use std::borrow::Cow;
    match value {
        Value::Null => None,
        Value::Text(t) => Some(Cow::Borrowed(parse::c_str(t.as_bytes()))),
        Value::Bytes(b) => Some(Cow::Borrowed(parse::c_str(b))),
        other => Some(Cow::Owned(other.render().into_bytes())),
    }
}

/// The time value and modifiers in `args` (`isDate`): `None` when any is
/// invalid or the result is out of range. No arguments means `now`.
fn is_date(args: &[&Value]) -> Option<DateTime> {
    let mut p = DateTime::default();
    let Some(first) = args.first() else {
        return (!p.set_to_current()).then_some(p);
    };
    match first {
        Value::Bool(b) => parse::set_raw_date_number(&mut p, f64::from(u8::from(*b))),
        Value::Int(i) => parse::set_raw_date_number(&mut p, *i as f64),
        Value::Float(f) => parse::set_raw_date_number(&mut p, *f),
        other => {
            if parse::parse_date_or_time(&text_of(other)?, &mut p) {
                return None;
            }
        }
    }
    for (idx, arg) in args.iter().enumerate().skip(1) {
        if modifier::apply(&text_of(arg)?, &mut p, idx) {
            return None;
        }
    }
    p.compute_jd();
    if p.is_error || !calendar::valid_julian_day(p.jd) {
        return None;
    }
    if args.len() == 1 && p.valid_ymd && p.day > 28 {
        // Normalise an overflowing day: 2023-02-31 is 2023-03-03.
        p.valid_ymd = false;
    }
    Some(p)
}

/// `YYYY-MM-DD`, with a `-` before a negative year.
fn push_date(out: &mut String, p: &DateTime) {
    let y = p.year.unsigned_abs();
    let sign = if p.year < 0 { "-" } else { "" };
    let _ = write!(
        out,
        "{sign}{}{}{}{}-{}{}-{}{}",
        y / 1000 % 10,
        y / 100 % 10,
        y / 10 % 10,
        y % 10,
        p.month / 10 % 10,
        p.month % 10,
        p.day / 10 % 10,
        p.day % 10
    );
}

/// `HH:MM:SS`, or `HH:MM:SS.SSS` with `subsec`.
fn push_time(out: &mut String, p: &DateTime) {
    let _ = write!(
        out,
        "{}{}:{}{}:",
        p.hour / 10 % 10,
        p.hour % 10,
        p.minute / 10 % 10,
        p.minute % 10
    );
    if p.use_subsec {
        let s = calendar::c_i32(1000.0 * p.second + 0.5);
        let _ = write!(
            out,
            "{}{}.{}{}{}",
            s / 10000 % 10,
            s / 1000 % 10,
            s / 100 % 10,
            s / 10 % 10,
            s % 10
        );
    } else {
        let s = calendar::c_i32(p.second);
        let _ = write!(out, "{}{}", s / 10 % 10, s % 10);
    }
}

/// One float as SQLite's printf formats it (`%.3f`, `%06.3f`, `%.16g`): the
/// date and time functions format their fractions with it.
fn float_text(format: &[u8], x: f64) -> String {
    // These formats build a few dozen bytes: never over the size limit.
    let text = super::printf::format(format, &[&Value::Float(x)]).unwrap_or_default();
    String::from_utf8_lossy(&text).into_owned()
}

/// `date(time, modifier...)`: `YYYY-MM-DD`.
fn date(args: &[&Value]) -> Result<Value, String> {
    Ok(render(args, true, false))
}

/// `time(time, modifier...)`: `HH:MM:SS`.
fn time(args: &[&Value]) -> Result<Value, String> {
    Ok(render(args, false, true))
}

/// `datetime(time, modifier...)`: `YYYY-MM-DD HH:MM:SS`.
fn datetime(args: &[&Value]) -> Result<Value, String> {
    Ok(render(args, true, true))
}

/// The time value of `args` with its date, its time or both as text;
/// NULL when the input is not a time.
fn render(args: &[&Value], with_date: bool, with_time: bool) -> Value {
    let Some(mut p) = is_date(args) else {
        return Value::Null;
    };
    let mut out = String::new();
    if with_date {
        p.compute_ymd();
        push_date(&mut out, &p);
    }
    if with_time {
        p.compute_hms();
        if with_date {
            out.push(' ');
        }
        push_time(&mut out, &p);
    }
    Value::text(out)
}

/// `julianday(time, modifier...)`: the Julian day number, a float.
fn julianday(args: &[&Value]) -> Result<Value, String> {
    Ok(is_date(args).map_or(Value::Null, |p| Value::Float(p.jd as f64 / 86_400_000.0)))
}

/// `unixepoch(time, modifier...)`: Unix seconds, an integer, or a float
/// with milliseconds after `subsec`.
fn unixepoch(args: &[&Value]) -> Result<Value, String> {
    Ok(is_date(args).map_or(Value::Null, |p| {
        if p.use_subsec {
            Value::Float((p.jd - UNIX_EPOCH_JD_MS) as f64 / 1000.0)
        } else {
            Value::Int(p.jd / 1000 - UNIX_EPOCH_JD_MS / 1000)
        }
    }))
}

/// Days from January 1 of the same year to `p` (`daysAfterJan01`).
fn days_after_jan01(p: &DateTime) -> i64 {
    let mut jan01 = *p;
    jan01.valid_jd = false;
    jan01.month = 1;
    jan01.day = 1;
    jan01.compute_jd();
    (p.jd.wrapping_sub(jan01.jd).wrapping_add(43_200_000)) / DAY_MS
}

/// Days since Monday, 0 to 6 (`daysAfterMonday`).
fn days_after_monday(p: &DateTime) -> i64 {
    (p.jd.wrapping_add(43_200_000) / DAY_MS) % 7
}

/// Days since Sunday, 0 to 6 (`daysAfterSunday`).
fn days_after_sunday(p: &DateTime) -> i64 {
    (p.jd.wrapping_add(129_600_000) / DAY_MS) % 7
}

/// The Thursday of `p`'s ISO week, with its date computed.
fn iso_thursday(p: &DateTime) -> DateTime {
    let mut y = *p;
    y.jd = y.jd.wrapping_add((3 - days_after_monday(p)) * DAY_MS);
    y.valid_ymd = false;
    y.compute_ymd();
    y
}

/// `strftime(format, time, modifier...)`: `format` with its `%`
/// conversions replaced; NULL for an unknown conversion.
fn strftime(args: &[&Value]) -> Result<Value, String> {
    let Some((format, rest)) = args.split_first() else {
        return Ok(Value::Null);
    };
    let Some(format) = text_of(format) else {
        return Ok(Value::Null);
    };
    let Some(mut x) = is_date(rest) else {
        return Ok(Value::Null);
    };
    x.compute_jd();
    x.compute_ymd_hms();
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < format.len() {
        let Some(next) = format[i..].iter().position(|&c| c == b'%') else {
            out.extend_from_slice(&format[i..]);
            break;
        };
        out.extend_from_slice(&format[i..i + next]);
        i += next + 1;
        let Some(piece) = conversion(parse::at(&format, i), &x) else {
            return Ok(Value::Null);
        };
        out.extend_from_slice(piece.as_bytes());
        i += 1;
        if out.len() > MAX_RESULT_BYTES {
            return Err(too_large(out.len()));
        }
    }
    Ok(Value::text(String::from_utf8_lossy(&out).into_owned()))
}

/// The text of one `strftime` conversion, `None` for an unknown one.
fn conversion(c: u8, x: &DateTime) -> Option<String> {
    let twelve = || match x.hour {
        h if h > 12 => h - 12,
        0 => 12,
        h => h,
    };
    Some(match c {
        b'd' => format!("{:02}", x.day),
        b'e' => format!("{:2}", x.day),
        b'f' => float_text(b"%06.3f", if x.second > 59.999 { 59.999 } else { x.second }),
        b'F' => format!("{:04}-{:02}-{:02}", x.year, x.month, x.day),
        b'G' => format!("{:04}", iso_thursday(x).year),
        b'g' => format!("{:02}", iso_thursday(x).year % 100),
        b'H' => format!("{:02}", x.hour),
        b'k' => format!("{:2}", x.hour),
        b'I' => format!("{:02}", twelve()),
        b'l' => format!("{:2}", twelve()),
        b'j' => format!("{:03}", days_after_jan01(x) + 1),
        b'J' => float_text(b"%.16g", x.jd as f64 / 86_400_000.0),
        b'm' => format!("{:02}", x.month),
        b'M' => format!("{:02}", x.minute),
        b'p' => (if x.hour >= 12 { "PM" } else { "AM" }).into(),
        b'P' => (if x.hour >= 12 { "pm" } else { "am" }).into(),
        b'R' => format!("{:02}:{:02}", x.hour, x.minute),
        b's' if x.use_subsec => float_text(b"%.3f", (x.jd - UNIX_EPOCH_JD_MS) as f64 / 1000.0),
        b's' => (x.jd / 1000 - UNIX_EPOCH_JD_MS / 1000).to_string(),
        b'S' => format!("{:02}", calendar::c_i32(x.second)),
        b'T' => format!(
            "{:02}:{:02}:{:02}",
            x.hour,
            x.minute,
            calendar::c_i32(x.second)
        ),
        b'u' => match days_after_sunday(x) {
            0 => "7".into(),
            d => d.to_string(),
        },
        b'w' => days_after_sunday(x).to_string(),
        b'U' => format!(
            "{:02}",
            (days_after_jan01(x) - days_after_sunday(x) + 7) / 7
        ),
        b'V' => format!("{:02}", days_after_jan01(&iso_thursday(x)) / 7 + 1),
        b'W' => format!(
            "{:02}",
            (days_after_jan01(x) - days_after_monday(x) + 7) / 7
        ),
        b'Y' => format!("{:04}", x.year),
        b'%' => "%".into(),
        _ => return None,
    })
}

/// `timediff(a, b)`: the time to add to `b` to reach `a`, as
/// `±YYYY-MM-DD HH:MM:SS.SSS`.
fn timediff(args: &[&Value]) -> Result<Value, String> {
    let (Some(mut d1), Some(mut d2)) = (
        args.first().and_then(|a| is_date(&[*a])),
        args.get(1).and_then(|b| is_date(&[*b])),
    ) else {
        return Ok(Value::Null);
    };
    d1.compute_ymd_hms();
    d2.compute_ymd_hms();
    let recompute = |d: &mut DateTime| {
        d.valid_jd = false;
        d.compute_jd();
    };
    // `d2` is moved toward `d1` by whole years and months; `later` says
    // which way (SQLite's two mirrored branches, as one).
    let later = d1.jd >= d2.jd;
    let sign = if later { '+' } else { '-' };
    let mut y = if later {
        d1.year - d2.year
    } else {
        d2.year - d1.year
    };
    if y != 0 {
        d2.year = d1.year;
        recompute(&mut d2);
    }
    let mut m = if later {
        d1.month - d2.month
    } else {
        d2.month - d1.month
    };
    if m < 0 {
        y -= 1;
        m += 12;
    }
    if m != 0 {
        d2.month = d1.month;
        recompute(&mut d2);
    }
    // At most a few passes: `d2` starts within a month of `d1`.
    let mut guard = 0;
    while if later { d1.jd < d2.jd } else { d1.jd > d2.jd } {
        guard += 1;
        if guard > 48 {
            return Ok(Value::Null);
        }
        m -= 1;
        if m < 0 {
            m = 11;
            y -= 1;
        }
        if later {
            d2.month -= 1;
            if d2.month < 1 {
                d2.month = 12;
                d2.year -= 1;
            }
        } else {
            d2.month += 1;
            if d2.month > 12 {
                d2.month = 1;
                d2.year += 1;
            }
        }
        recompute(&mut d2);
    }
    d1.jd = if later {
        d1.jd.wrapping_sub(d2.jd)
    } else {
        d2.jd.wrapping_sub(d1.jd)
    };
    d1.jd = d1.jd.wrapping_add(148_699_540_800_000);
    d1.clear_ymd_hms_tz();
    d1.compute_ymd_hms();
    Ok(Value::text(format!(
        "{sign}{y:04}-{m:02}-{:02} {:02}:{:02}:{}",
        d1.day - 1,
        d1.hour,
        d1.minute,
        float_text(b"%06.3f", d1.second)
    )))
}
