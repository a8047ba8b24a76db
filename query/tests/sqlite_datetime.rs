//! Differential checks of the date and time functions (`date`, `time`,
//! `datetime`, `julianday`, `unixepoch`, `strftime`, `timediff`) against
//! SQLite: every input form, modifier and `strftime` conversion, over many
//! generated dates, must give SQLite's value and type.

mod support;

use ebb_query::Value;
use support::{Sqlite, ebb};

/// The functions that take a time value and modifiers, as expressions
/// with one placeholder per argument left to fill.
const FUNCTIONS: [&str; 6] = [
    "date",
    "time",
    "datetime",
    "julianday",
    "unixepoch",
    "strftime('%Y-%m-%d %H:%M:%f %J %s', ",
];

/// `f(?, ?, ...)` with `args` placeholders (`strftime` has its format).
fn call(function: &str, args: usize) -> String {
    let marks = vec!["?"; args].join(", ");
    if function.ends_with(", ") {
        format!("{function}{marks})")
    } else {
        format!("{function}({marks})")
    }
}

/// Text parameters.
fn texts(values: &[&str]) -> Vec<Value> {
    values.iter().map(|v| Value::text(*v)).collect()
}

/// A small deterministic generator (64-bit LCG), for spread-out samples.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 16
    }
}

#[test]
fn every_input_form_reads_as_in_sqlite() {
    let db = Sqlite::new();
    let mut values = texts(&[
        "2024-02-29",
        "2024-02-29 13:14",
        "2024-02-29 13:14:15",
        "2024-02-29 13:14:15.678",
        "2024-02-29T13:14:15.678",
        "2024-02-29T13:14",
        "2024-02-29TT13:14",
        "2024-02-29  \t13:14",
        "2024-02-29 13:14:15.6789012345",
        "2024-02-29 13:14:15.",
        "2024-02-29 13:14:15.9999",
        "2024-02-29 13:14:15.0005",
        "2024-02-29 13:14:15.0015",
        "2024-02-29 13:14:15.1235",
        "2024-02-29 13:14:5",
        "2024-02-29 13:1",
        "2024-02-29 13",
        "2024-02-29 ",
        " 2024-02-29",
        "2024-02-29T",
        "2024-02-29x",
        "13:14",
        "13:14:15",
        "13:14:15.5",
        "00:00",
        "24:00",
        "24:00:00",
        "24:00:01",
        "24:01",
        "25:00",
        "12:60",
        "12:59:60",
        "2024-12-31 24:00",
        "2024-02-28 24:00:00.000",
        "2023-02-28 24:00",
        "2024-02-30",
        "2023-02-29",
        "2024-04-31",
        "2024-02-31 10:00",
        "2024-13-01",
        "2024-00-10",
        "2024-01-00",
        "2024-01-32",
        "2024-1-1",
        "24-01-01",
        "0000-01-01",
        "0000-03-01 00:00:00",
        "-0001-01-01",
        "-4713-11-24 12:00",
        "-4713-11-24 11:59:59.999",
        "-4714-01-01",
        "1582-10-10",
        "1900-02-28",
        "1970-01-01",
        "9999-12-31 23:59:59.999",
        "9999-12-31 24:00",
        "10000-01-01",
        "2024-01-01 12:00Z",
        "2024-01-01 12:00z",
        "2024-01-01 12:00:00.5Z",
        "2024-01-01 12:00 Z ",
        "2024-01-01 12:00+05:30",
        "2024-01-01 12:00 -08:00",
        "2024-01-01 12:00-00:00",
        "2024-01-01 12:00+14:59",
        "2024-01-01 12:00+15:00",
        "2024-01-01 12:00+05",
        "2024-01-01 12:00+5:30",
        "2024-01-01 00:30+01:00",
        "9999-12-31 23:00-02:00",
        "0000-01-01 00:00+01:00",
        "12:00+02:00",
        "12:00Zx",
        "2460000.5",
        "2460000",
        " 2460000.5 ",
        "2460000.5x",
        "1e6",
        "1E6",
        ".5",
        "5.",
        "+5",
        "-1",
        "0",
        "5373484.5",
        "5373484.49999",
        "1700000000",
        "1e400",
        "-1e400",
        "1e-400",
        "12345678901234567890123",
        "0.000000000000000000000000001",
        "1e",
        "1e+",
        "-",
        ".",
        "",
        " ",
        "abc",
        "now x",
        "2024-01-01\0garbage",
    ]);
    values.extend([
        Value::Null,
        Value::Int(0),
        Value::Int(1),
        Value::Int(-1),
        Value::Int(2_460_000),
        Value::Int(5_373_484),
        Value::Int(5_373_485),
        Value::Int(1_700_000_000),
        Value::Int(i64::MAX),
        Value::Int(i64::MIN),
        Value::Float(2_460_000.25),
        Value::Float(2_460_000.123_456_789),
        Value::Float(0.5),
        Value::Float(-0.0),
        Value::Float(-1.5),
        Value::Float(5_373_484.499_999_9),
        Value::Float(5_373_484.5),
        Value::Float(1e300),
        Value::Float(f64::NAN),
        Value::Float(f64::INFINITY),
        Value::Bool(true),
        Value::Bool(false),
        Value::Bytes(b"2024-01-01 10:00".to_vec().into()),
        Value::Bytes(b"\xff\xfe".to_vec().into()),
    ]);
    for value in &values {
        for function in FUNCTIONS {
            db.check(&call(function, 1), std::slice::from_ref(value));
        }
    }
}

/// Modifiers, each checked alone on every base value and in pairs.
const MODIFIERS: &[&str] = &[
    "+1 day",
    "-1 day",
    "1 day",
    "+1 days",
    "+1 DAYS",
    "+1 Day",
    "+1 days ",
    "  +1 days",
    "+1  days",
    "+1days",
    "+1.5 days",
    "-1.5 days",
    "+0.0000001 days",
    "+1e2 days",
    "+.5 days",
    "+5. days",
    "+0.5 hours",
    "-36 hours",
    "+90 minutes",
    "-0.5 minutes",
    "+30 seconds",
    "-30 seconds",
    "+1.2345 seconds",
    "+0.0005 seconds",
    "-0.0005 seconds",
    "+0.0004 seconds",
    "+1 month",
    "-1 month",
    "+13 months",
    "-25 months",
    "+1.5 months",
    "-1.5 months",
    "+0 months",
    "+1 year",
    "-1 year",
    "-4 years",
    "+0.5 years",
    "-2.25 years",
    "+100 years",
    "+1e18 days",
    "-1e18 days",
    "+1e400 days",
    "+5373484 days",
    "+5373485 days",
    "-5373484 days",
    "+464269060799 seconds",
    "+464270000000000 seconds",
    "+7737900000000 minutes",
    "+128970000000 hours",
    "+176545 months",
    "+176546 months",
    "-176545 months",
    "+14712 years",
    "+14713 years",
    "-14712 years",
    "+1 fortnight",
    "+1 s",
    "+1 secondss",
    "+1",
    "1",
    "-",
    "+",
    "",
    " ",
    "start of month",
    "start of year",
    "start of day",
    "START OF MONTH",
    "Start Of Year",
    "start of week",
    "start of",
    "start of day ",
    "end of month",
    "end of year",
    "end of day",
    "end of week",
    "weekday 0",
    "weekday 1",
    "weekday 2",
    "weekday 3",
    "weekday 4",
    "weekday 5",
    "weekday 6",
    "weekday 7",
    "weekday -1",
    "weekday -3",
    "weekday -0",
    "weekday 1.5",
    "weekday 2.0",
    "weekday  3",
    "weekday 3 ",
    "weekday",
    "WEEKDAY 4",
    "weekday 0x1",
    "unixepoch",
    "UNIXEPOCH",
    "julianday",
    "auto",
    "subsec",
    "subsecond",
    "SUBSEC",
    "localtime",
    "utc",
    "ceiling",
    "floor",
    "+0001-02-03",
    "-0001-02-03",
    "+0000-11-30",
    "+0000-12-00",
    "+0000-00-31",
    "0001-02-03",
    "+1-02-03",
    "+0001-02-03 04:05",
    "-0001-02-03 04:05:06.789",
    "+0001-02-03T04:05",
    "+0001-02-03 4:05",
    "+0001-02-03 04:05x",
    "+0001-02-03x",
    "+12345-01-01",
    "-12345-01-01",
    "+14712-00-00",
    "+14713-00-00",
    "+04:05",
    "-04:05:06",
    "+04:05:06.5",
    "04:05",
    "+24:00",
    "-24:00",
    "+24:01",
    "+1:30",
    "+12:00Z",
    "+12:00+01:00",
    "+00:00:00.0005",
    "nonsense",
];

fn base_values() -> Vec<Value> {
    let mut bases = texts(&[
        "2024-01-31",
        "2024-02-29 13:14:15.678",
        "2023-12-31 23:59:59",
        "2024-03-31 00:00:00",
        "2024-05-31 12:00",
        "2023-01-29",
        "2024-02-31",
        "12:30:45",
        "24:00",
        "0000-01-01",
        "-0001-06-15 12:00",
        "9999-12-31",
        "1700000000",
        "2460000.5",
        "2024-06-01 12:00+02:00",
        "2024-06-01 12:00Z",
    ]);
    bases.extend([
        Value::Int(1_700_000_000),
        Value::Float(1_700_000_000.5),
        Value::Float(2_460_000.5),
        Value::Int(0),
        Value::Float(-86_400.5),
        Value::Int(253_402_300_799),
        Value::Int(253_402_300_800),
        Value::Int(-210_866_760_000),
        Value::Int(-210_866_760_001),
        Value::Int(5_373_484),
        Value::Int(5_373_485),
    ]);
    bases
}

#[test]
fn each_modifier_acts_as_in_sqlite() {
    let db = Sqlite::new();
    let bases = base_values();
    let functions = ["unixepoch", "strftime('%F %T %f %s %J', "];
    for base in &bases {
        for modifier in MODIFIERS.iter().filter(|m| zone_free(&db, m)) {
            let params = [base.clone(), Value::text(*modifier)];
            for function in functions {
                db.check(&call(function, 2), &params);
            }
        }
    }
}

#[test]
fn pairs_of_modifiers_act_as_in_sqlite() {
    let db = Sqlite::new();
    let bases = [
        Value::text("2024-01-31 10:20:30.456"),
        Value::text("2023-02-28"),
        Value::Int(1_700_000_000),
        Value::Float(2_460_000.75),
    ];
    let chosen = [
        "+1 month",
        "-1 month",
        "+1 year",
        "+1.5 months",
        "floor",
        "ceiling",
        "start of month",
        "start of day",
        "end of month",
        "weekday 0",
        "weekday -1",
        "unixepoch",
        "julianday",
        "auto",
        "subsec",
        "localtime",
        "utc",
        "+1 day",
        "-12:00",
        "+0001-01-31",
        "+5373485 days",
        "-1e18 days",
        "+14712 years",
    ];
    let chosen: Vec<&str> = chosen.into_iter().filter(|m| zone_free(&db, m)).collect();
    for base in &bases {
        for &first in &chosen {
            for &second in &chosen {
                let params = [base.clone(), Value::text(first), Value::text(second)];
                db.check("strftime('%F %T %f %s', ?, ?, ?)", &params);
                db.check("unixepoch(?, ?, ?)", &params);
            }
        }
    }
    // Many modifiers in one call; month-end overflow handled then floored.
    for (expr, values) in [
        (
            "date(?, '+1 month', '+1 month', '+1 month', 'floor')",
            texts(&["2024-01-31"]),
        ),
        (
            "date(?, '+1 month', 'floor', '+1 month', 'ceiling')",
            texts(&["2024-01-31"]),
        ),
        (
            "datetime(?, 'unixepoch', 'start of year', '+6 months', 'weekday 1', '+09:30')",
            vec![Value::Int(1_700_000_000)],
        ),
        (
            "datetime(?, '+1e18 days', '+1e18 days', '+1e18 days', '+1e18 days', '+1e18 days', '+1e18 days', '+1e18 days', '+1e18 days', '+1e18 days', '+1e18 days')",
            texts(&["2024-01-01"]),
        ),
        (
            "datetime(?, '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds', '+464269060799 seconds')",
            texts(&["2024-01-01"]),
        ),
        (
            "datetime(?, '+14712 years', '+14712 years', '-14712 years', '-14712 years')",
            texts(&["2024-01-01"]),
        ),
    ] {
        db.check(expr, &values);
    }
}

#[test]
fn month_and_year_arithmetic_over_many_dates() {
    let db = Sqlite::new();
    let modifiers = [
        "+1 month",
        "-1 month",
        "+1 year",
        "-1 year",
        "+2.5 months",
        "+1 month', 'floor",
        "start of month', '+1 month', '-1 day",
        "end of month",
        "weekday 4",
    ];
    let mut rng = Lcg(7);
    for _ in 0..300 {
        let year = 1 + rng.next() % 9998;
        let month = 1 + rng.next() % 12;
        let day = 25 + rng.next() % 7;
        let date = format!("{year:04}-{month:02}-{day:02}");
        for modifier in modifiers {
            db.check(&format!("date(?, '{modifier}')"), &texts(&[&date]));
        }
    }
}

#[test]
fn every_strftime_conversion_agrees() {
    let db = Sqlite::new();
    let all = "%d|%e|%f|%F|%G|%g|%H|%I|%j|%J|%k|%l|%m|%M|%p|%P|%R|%s|%S|%T|%u|%U|%V|%w|%W|%Y|%%";
    let mut dates = texts(&[
        "2024-02-29 00:00:00",
        "2024-02-29 00:59:59.999",
        "2024-02-29 11:59:59",
        "2024-02-29 12:00:00",
        "2024-02-29 12:30:00",
        "2024-02-29 13:14:15.678",
        "2024-02-29 23:59:59.999",
        "2024-02-29 24:00",
        "0000-01-01 00:00:00",
        "0000-12-31 12:00:00",
        "-0044-03-15 12:00:00",
        "-4713-11-24 12:00:00",
        "-4713-11-24 12:00:00.001",
        "9999-12-31 23:59:59.999",
        "1970-01-01 00:00:00",
        "1969-12-31 23:59:59.5",
        "12:00:00.0005",
        "12:00:01.0005",
        "12:00:59.9995",
        "12:34:56.7894",
        "2024-01-01 00:01:24.375",
    ]);
    dates.extend([
        Value::Float(0.0),
        Value::Float(0.000_001),
        Value::Float(0.000_1),
        Value::Float(1.0 / 3.0),
        Value::Float(2_460_000.000_976_562_5),
        Value::Float(5_373_484.499_999),
    ]);
    for date in &dates {
        db.check(&format!("strftime('{all}', ?)"), std::slice::from_ref(date));
        db.check(
            &format!("strftime('{all}', ?, 'subsec')"),
            std::slice::from_ref(date),
        );
    }
    // Every hour for %H %I %k %l %p %P, every weekday for %u %w.
    for hour in 0..24 {
        let date = format!("2024-03-{:02} {hour:02}:05:06", 1 + hour % 7);
        db.check(
            "strftime('%H %I %k %l %p %P %u %w %U %W', ?)",
            &texts(&[&date]),
        );
    }
    // Formats that are not all conversions.
    for format in [
        "",
        "plain",
        "%",
        "abc%",
        "%x",
        "%E",
        "%%%",
        "%%Y",
        "%Y%",
        "é%Yé",
        "%é",
        "%Y\0%x",
        "100%% %Y-%m",
    ] {
        db.check("strftime(?, '2024-05-06 07:08:09')", &texts(&[format]));
    }
    db.check("strftime(?, '2024-05-06')", &[Value::Null]);
    db.check("strftime(?, '2024-05-06')", &[Value::Int(123)]);
    db.check("strftime(?, '2024-05-06')", &[Value::Float(1.5)]);
    db.check("strftime('%Y', ?)", &[Value::Null]);
    db.check("strftime('%Y', '2024-05-06', ?)", &[Value::Null]);
    db.check("strftime()", &[]);
    let long = "%Y-%m-%d %J ".repeat(10_000);
    db.check("strftime(?, '2024-05-06 07:08:09.123')", &texts(&[&long]));
}

#[test]
fn iso_weeks_and_day_numbers_around_each_new_year() {
    let db = Sqlite::new();
    for year in (1600..=2100).step_by(7).chain([0, 1, 4, 9998, 9999]) {
        for offset in -8..=8 {
            let params = [Value::text(format!("{year:04}-01-01")), Value::Int(offset)];
            db.check(
                "strftime('%Y %G %g %V %U %W %j %u %w', ?, ? || ' days')",
                &params,
            );
        }
    }
    // Every day of two years, one leap.
    for day in 0..731 {
        let params = [Value::text("2023-01-01"), Value::Int(day)];
        db.check(
            "strftime('%F %G %V %U %W %j %u %w', ?, ? || ' days')",
            &params,
        );
    }
}

#[test]
fn leap_years_and_year_boundaries() {
    let db = Sqlite::new();
    for year in [1600, 1700, 1800, 1900, 2000, 2023, 2024, 2100, 2400] {
        for date in [
            format!("{year}-02-28"),
            format!("{year}-02-29"),
            format!("{year}-03-01"),
            format!("{year}-12-31 23:59:59.999"),
        ] {
            for expr in [
                "date(?, '+1 day')",
                "date(?, '+1 year')",
                "date(?, '-1 year')",
                "date(?, '+1 year', 'floor')",
                "julianday(?)",
                "strftime('%j', ?)",
                "datetime(?, '+1 second')",
            ] {
                db.check(expr, &texts(&[&date]));
            }
        }
    }
}

#[test]
fn numbers_as_julian_days_and_unix_seconds() {
    let db = Sqlite::new();
    let mut rng = Lcg(42);
    let mut numbers = vec![
        Value::Float(0.0),
        Value::Float(-0.5),
        Value::Float(1e-9),
        Value::Float(5_373_484.499_999_9),
        Value::Int(-210_866_760_000),
        Value::Int(253_402_300_799),
        Value::Float(253_402_300_799.999),
        Value::Float(253_402_300_800.0),
    ];
    for _ in 0..120 {
        let jd = (rng.next() % 5_373_484_000_000) as f64 / 1e6;
        numbers.push(Value::Float(jd));
        let seconds = (rng.next() % 4_000_000_000_000) as i64 - 100_000_000_000;
        numbers.push(Value::Int(seconds));
        numbers.push(Value::Float(seconds as f64 / 1000.0));
    }
    for number in &numbers {
        let params = std::slice::from_ref(number);
        for expr in [
            "datetime(?)",
            "julianday(?)",
            "strftime('%J', ?)",
            "datetime(?, 'unixepoch')",
            "datetime(?, 'unixepoch', 'subsec')",
            "unixepoch(?, 'unixepoch', 'subsec')",
            "datetime(?, 'auto')",
            "julianday(?, 'auto')",
            "unixepoch(?, 'julianday')",
            "datetime(?, '+1 day', 'unixepoch')",
        ] {
            db.check(expr, params);
        }
    }
}

#[test]
fn unix_milliseconds_convert_with_millisecond_precision() {
    let db = Sqlite::new();
    let mut rng = Lcg(1);
    let mut millis: Vec<i64> = vec![
        0,
        1,
        999,
        1000,
        1_700_000_000_000,
        1_700_000_000_001,
        1_700_000_000_999,
        1_709_210_096_789,
        -1,
        -999,
        -1001,
        253_402_300_799_999,
        253_402_300_800_000,
        i64::MAX,
    ];
    for _ in 0..400 {
        millis.push((rng.next() % 4_102_444_800_000) as i64);
    }
    for ms in millis {
        let params = [Value::Int(ms)];
        for expr in [
            "datetime(? / 1000, 'unixepoch')",
            "date(? / 1000, 'unixepoch')",
            "strftime('%Y-%m-%d %H:%M:%f', ? / 1000.0, 'unixepoch')",
            "datetime(? / 1000.0, 'unixepoch', 'subsec')",
            "unixepoch(? / 1000.0, 'unixepoch', 'subsec')",
            "strftime('%s', ? / 1000.0, 'unixepoch', 'subsec')",
            "julianday(? / 1000.0, 'unixepoch')",
        ] {
            db.check(expr, &params);
        }
    }
    // The recipes give the millisecond exactly.
    assert_eq!(
        ebb(
            "strftime('%Y-%m-%d %H:%M:%f', ? / 1000.0, 'unixepoch')",
            &[Value::Int(1_709_210_096_789)]
        ),
        Ok(Value::text("2024-02-29 12:34:56.789"))
    );
    assert_eq!(
        ebb(
            "datetime(? / 1000, 'unixepoch')",
            &[Value::Int(1_709_210_096_789)]
        ),
        Ok(Value::text("2024-02-29 12:34:56"))
    );
}

#[test]
fn fractional_seconds_round_as_in_sqlite() {
    let db = Sqlite::new();
    let mut rng = Lcg(3);
    for _ in 0..400 {
        let second = rng.next() % 60;
        let digits = 1 + rng.next() % 6;
        let fraction = rng.next() % 10u64.pow(digits as u32);
        let time = format!(
            "2024-07-08 09:10:{second:02}.{fraction:0width$}",
            width = digits as usize
        );
        let params = texts(&[&time]);
        db.check("strftime('%f %S %s', ?)", &params);
        db.check("datetime(?, 'subsec')", &params);
        db.check("julianday(?)", &params);
        db.check("unixepoch(?, 'subsec')", &params);
        db.check("strftime('%f', ?, '+0.0005 seconds')", &params);
    }
}

#[test]
fn result_types_are_sqlites() {
    let db = Sqlite::new();
    for expr in [
        "julianday('2024-01-01')",
        "unixepoch('2024-01-01')",
        "unixepoch('2024-01-01', 'subsec')",
        "unixepoch('2024-01-01 00:00:00.5', 'subsecond')",
        "date('2024-01-01')",
        "time('2024-01-01')",
        "datetime('2024-01-01')",
        "strftime('%s', '2024-01-01')",
        "julianday(NULL)",
        "date('2024-01-01', NULL)",
        "date('2024-01-01', 5)",
        "date('2024-01-01', 1.5)",
        "date('2024-01-01', '+1 day', 'nonsense')",
    ] {
        db.check(expr, &[]);
    }
    assert_eq!(
        ebb("unixepoch('2024-01-01')", &[]),
        Ok(Value::Int(1_704_067_200))
    );
    assert_eq!(
        ebb("julianday('2000-01-01 12:00')", &[]),
        Ok(Value::Float(2_451_545.0))
    );
}

#[test]
fn timediff_agrees() {
    let db = Sqlite::new();
    let values = [
        "2024-03-31",
        "2024-02-29 12:00:00.5",
        "2023-01-31 23:59:59.999",
        "2024-01-01",
        "0000-01-01",
        "9999-12-31 23:59:59.999",
        "2460000.5",
        "12:00",
        "nonsense",
    ];
    for a in values {
        for b in values {
            db.check("timediff(?, ?)", &texts(&[a, b]));
        }
    }
    db.check("timediff(NULL, '2024-01-01')", &[]);
    db.check(
        "timediff(?, ?)",
        &[Value::Float(2_460_000.25), Value::Int(2_450_000)],
    );
}

#[test]
fn now_reads_the_clock() {
    let db = Sqlite::new();
    let clock = |expr: &str| match ebb(expr, &[]) {
        Ok(Value::Int(ours)) => match db.eval(expr, &[]) {
            Ok(Value::Int(theirs)) => (ours, theirs),
            other => panic!("SQLite {expr}: {other:?}"),
        },
        other => panic!("ebb {expr}: {other:?}"),
    };
    for expr in ["unixepoch('now')", "unixepoch()", "unixepoch('NOW')"] {
        let (ours, theirs) = clock(expr);
        assert!((ours - theirs).abs() <= 2, "{expr}: {ours} vs {theirs}");
    }
    let Ok(Value::Float(ours)) = ebb("unixepoch('subsec')", &[]) else {
        panic!("unixepoch('subsec') is a float");
    };
    let Ok(Value::Float(theirs)) = db.eval("unixepoch('subsec')", &[]) else {
        panic!("SQLite's unixepoch('subsec') is a float");
    };
    assert!((ours - theirs).abs() <= 2.0);
    for expr in [
        "date()",
        "time()",
        "datetime()",
        "datetime('now', 'subsec')",
    ] {
        let Ok(Value::Text(text)) = ebb(expr, &[]) else {
            panic!("{expr} is text");
        };
        let Ok(Value::Text(theirs)) = db.eval(expr, &[]) else {
            panic!("SQLite's {expr} is text");
        };
        assert_eq!(text.len(), theirs.len(), "{expr}");
    }
    assert!(matches!(ebb("julianday()", &[]), Ok(Value::Float(_))));
}

#[test]
fn out_of_range_work_is_bounded() {
    let db = Sqlite::new();
    let huge = "9".repeat(100_000);
    db.check("datetime(?)", &texts(&[&huge]));
    db.check("datetime('2024-01-01', ? || ' days')", &texts(&[&huge]));
    db.check(
        "datetime('2024-01-01 12:00:00.' || ?)",
        &texts(&[&"1".repeat(400)]),
    );
    db.check(
        "strftime('%Y', ?)",
        &texts(&[&"2024-01-01 ".repeat(10_000)]),
    );
}

#[test]
fn random_text_reads_as_in_sqlite() {
    let db = Sqlite::new();
    let pieces = [
        "0",
        "1",
        "2",
        "9",
        "12",
        "24",
        "59",
        "60",
        "2024",
        "-",
        "+",
        ":",
        ".",
        " ",
        "T",
        "Z",
        "z",
        "e",
        "5",
        "days",
        "months",
        "years",
        "hours",
        "seconds",
        "start of ",
        "month",
        "weekday ",
        "unixepoch",
        "auto",
        "floor",
        "-01-31",
        "2024-02-29",
        "12:30:45.5",
        "+05:00",
        "1e3",
        "0.5",
        "13",
        "31",
        "00",
    ];
    let mut rng = Lcg(9);
    let make = |rng: &mut Lcg| {
        let k = 1 + rng.next() % 6;
        (0..k)
            .map(|_| pieces[(rng.next() % pieces.len() as u64) as usize])
            .collect::<String>()
    };
    for _ in 0..800 {
        let a = make(&mut rng);
        let b = make(&mut rng);
        let c = make(&mut rng);
        db.check("strftime('%F %T %f %s %J %G %V %j', ?)", &texts(&[&a]));
        db.check(
            "strftime('%F %T %f %s %J', ?, ?)",
            &texts(&["2024-01-31 12:00:00.5", &b]),
        );
        db.check("strftime('%F %T %f %s %J', ?, ?, ?)", &texts(&[&a, &b, &c]));
        db.check("timediff(?, ?)", &texts(&[&a, &b]));
    }
}

#[test]
fn random_modifier_chains_agree() {
    let db = Sqlite::new();
    let mut rng = Lcg(5);
    let units = [
        "day", "days", "hour", "hours", "minute", "minutes", "second", "seconds", "month",
        "months", "year", "years",
    ];
    let named: Vec<&str> = [
        "start of month",
        "start of year",
        "start of day",
        "end of month",
        "end of year",
        "end of day",
        "weekday 0",
        "weekday 3",
        "weekday -2",
        "floor",
        "ceiling",
        "subsec",
        "localtime",
        "utc",
        "unixepoch",
        "auto",
        "julianday",
    ]
    .into_iter()
    .filter(|m| zone_free(&db, m))
    .collect();
    let mut answered = 0;
    let rounds = 800;
    for _ in 0..rounds {
        let base = match rng.next() % 5 {
            0 => Value::Float((rng.next() % 6_000_000_000_000) as f64 / 1e6 - 100_000.0),
            1 => Value::Int((rng.next() % 300_000_000_000) as i64 - 50_000_000_000),
            2 => {
                Value::Float((rng.next() % 300_000_000_000_000) as f64 / 1000.0 - 50_000_000_000.0)
            }
            _ => Value::text(format!(
                "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}",
                rng.next() % 10000,
                1 + rng.next() % 12,
                1 + rng.next() % 31,
                rng.next() % 24,
                rng.next() % 60,
                rng.next() % 60,
                rng.next() % 1000
            )),
        };
        let make = |rng: &mut Lcg| -> String {
            let sign = if rng.next().is_multiple_of(2) {
                '+'
            } else {
                '-'
            };
            match rng.next() % 5 {
                0 => named[(rng.next() % named.len() as u64) as usize].to_string(),
                1 => format!(
                    "{sign}{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}",
                    rng.next() % 30,
                    rng.next() % 12,
                    rng.next() % 31,
                    rng.next() % 24,
                    rng.next() % 60,
                    rng.next() % 60,
                    rng.next() % 1000
                ),
                2 => format!("{sign}{:02}:{:02}", rng.next() % 25, rng.next() % 60),
                _ => {
                    let magnitude = 10f64.powi((rng.next() % 12) as i32);
                    let number = (rng.next() % 1_000_000) as f64 / 1_000_000.0 * magnitude;
                    let unit = units[(rng.next() % units.len() as u64) as usize];
                    format!("{sign}{number} {unit}")
                }
            }
        };
        let mut params = vec![base];
        for _ in 0..1 + rng.next() % 3 {
            params.push(Value::text(make(&mut rng)));
        }
        let marks = vec!["?"; params.len()].join(", ");
        let expr = format!("strftime('%F %T %f %s %J %G %V %j %U %W', {marks})");
        if !matches!(ebb(&expr, &params), Ok(Value::Null)) {
            answered += 1;
        }
        db.check(&expr, &params);
        db.check(&format!("julianday({marks})"), &params);
        db.check(&format!("unixepoch({marks})"), &params);
    }
    assert!(
        answered * 4 > rounds,
        "only {answered} of {rounds} not NULL"
    );
}

/// Whether modifier `m` can be compared with SQLite here: `localtime` and
/// `utc` only when SQLite's local zone is UTC, as ebb's is.
fn zone_free(db: &Sqlite, m: &str) -> bool {
    let zoned = m.contains("localtime") || m.contains("utc");
    !zoned
        || ["2024-01-15 12:00:00", "2024-07-15 12:00:00"]
            .iter()
            .all(|t| db.eval("datetime(?, 'localtime')", &texts(&[t])) == Ok(Value::text(*t)))
}
