//! Differential tests of SQLite's core scalar functions (`abs`, `round`,
//! `sign`, scalar `min`/`max`, `instr`, `replace`, `trim`, `hex`, `unhex`,
//! `quote`, `typeof`, `char`, `unicode`, `concat`, `concat_ws`, `printf`)
//! against rusqlite's bundled SQLite: same value, same type, or both fail.

mod support;

use bytes::Bytes;
use ebb_query::{Arity, Builtins, FunctionRegistry, Value};
use support::{Sqlite, ebb};

fn text(s: &str) -> Value {
    Value::text(s)
}

fn blob(b: &[u8]) -> Value {
    Value::Bytes(Bytes::copy_from_slice(b))
}

/// Values of every type and the awkward cases: NULL, zeros, i64 bounds,
/// negative zero, halves, huge and tiny floats, infinities, numeric and
/// non-numeric text, unicode, quotes and control characters, blobs.
fn values() -> Vec<Value> {
    vec![
        Value::Null,
        Value::Bool(true),
        Value::Bool(false),
        Value::Int(0),
        Value::Int(1),
        Value::Int(-1),
        Value::Int(42),
        Value::Int(-42),
        Value::Int(1234567),
        Value::Int(i64::MAX),
        Value::Int(i64::MIN),
        Value::Float(0.0),
        Value::Float(-0.0),
        Value::Float(0.5),
        Value::Float(-0.5),
        Value::Float(1.5),
        Value::Float(2.5),
        Value::Float(-2.5),
        Value::Float(0.1),
        Value::Float(2.675),
        Value::Float(0.125),
        Value::Float(1.0 / 3.0),
        Value::Float(123.456),
        Value::Float(-123.456),
        Value::Float(99.995),
        Value::Float(1e16),
        Value::Float(1e20),
        Value::Float(-1e20),
        Value::Float(4503599627370497.0),
        Value::Float(i64::MAX as f64),
        Value::Float(1e300),
        Value::Float(1e-300),
        Value::Float(1e-5),
        Value::Float(5e-324),
        Value::Float(f64::MAX),
        Value::Float(f64::INFINITY),
        Value::Float(f64::NEG_INFINITY),
        text(""),
        text(" "),
        text("abc"),
        text("12"),
        text(" 12 "),
        text("-3.5"),
        text("1e3"),
        text("12abc"),
        text("0x10"),
        text(".5"),
        text("5."),
        text("1e"),
        text("-"),
        text("9223372036854775808"),
        text("héllo wörld"),
        text("日本語"),
        text("😀x"),
        text("it's"),
        text("a\"b"),
        text("a\\b\n\tc\u{1}"),
        text("  padded  "),
        text("ab\0cd"),
        blob(b""),
        blob(&[0x00, 0xff]),
        blob(b"abc"),
        blob(b"12"),
        blob(b"a'b"),
        blob("é".as_bytes()),
    ]
}

/// A shorter list for functions of two arguments.
fn few() -> Vec<Value> {
    vec![
        Value::Null,
        Value::Bool(true),
        Value::Int(0),
        Value::Int(2),
        Value::Int(-7),
        Value::Int(i64::MIN),
        Value::Float(2.0),
        Value::Float(-0.0),
        Value::Float(2.5),
        Value::Float(1e300),
        text(""),
        text("a"),
        text("b"),
        text("2"),
        text("ab"),
        text("é"),
        text(" x "),
        blob(b""),
        blob(b"a"),
        blob(&[0xff]),
    ]
}

#[test]
fn unary_functions_agree_on_every_value() {
    let db = Sqlite::new();
    let functions = [
        "abs(?)",
        "round(?)",
        "sign(?)",
        "hex(?)",
        "unhex(?)",
        "quote(?)",
        "typeof(?)",
        "char(?)",
        "unicode(?)",
        "trim(?)",
        "ltrim(?)",
        "rtrim(?)",
        "concat(?)",
        "concat(?, ?)",
        "printf(?)",
        "format(?)",
        "length(quote(?))",
        "typeof(abs(?))",
        "typeof(round(?))",
    ];
    for value in values() {
        for function in functions {
            let params = vec![value.clone(); function.matches('?').count()];
            db.check(function, &params);
        }
    }
}

#[test]
fn binary_functions_agree_on_pairs() {
    let db = Sqlite::new();
    let functions = [
        "round(?, ?)",
        "instr(?, ?)",
        "min(?, ?)",
        "max(?, ?)",
        "trim(?, ?)",
        "ltrim(?, ?)",
        "rtrim(?, ?)",
        "unhex(?, ?)",
        "concat(?, ?)",
        "concat_ws(?, ?)",
        "concat_ws(?, 'x', ?, NULL, 'y')",
        "replace('abcabc', ?, ?)",
        "replace(?, ?, 'Z')",
        "replace(?, 'a', ?)",
        "char(?, ?)",
        "printf('%s|%d', ?, ?)",
    ];
    let few = few();
    for a in &few {
        for b in &few {
            for function in functions {
                db.check(function, &[a.clone(), b.clone()]);
            }
        }
    }
    for a in values() {
        for b in [Value::Int(2), text("a"), text("é"), Value::Null] {
            for function in functions {
                db.check(function, &[a.clone(), b.clone()]);
                db.check(function, &[b.clone(), a.clone()]);
            }
        }
    }
}

#[test]
fn abs_and_sign() {
    let db = Sqlite::new();
    for expr in [
        "abs(-3)",
        "abs(3)",
        "abs(-3.5)",
        "abs(-0.0)",
        "abs(NULL)",
        "abs('abc')",
        "abs('-12')",
        "abs(' -12.5x')",
        "abs(X'2D35')",
        "abs(-9223372036854775808)",
        "abs(-9223372036854775807)",
        "abs(9223372036854775807)",
        "abs(TRUE)",
        "abs()",
        "abs(1, 2)",
        "sign(-5)",
        "sign(0)",
        "sign(0.0)",
        "sign(-0.0)",
        "sign(7.5)",
        "sign('-3')",
        "sign(' 4 ')",
        "sign('4x')",
        "sign('abc')",
        "sign('')",
        "sign(X'31')",
        "sign(NULL)",
        "sign('1e400')",
        "sign('+.5')",
        "sign('-.e3')",
        "sign()",
    ] {
        db.check(expr, &[]);
    }
    db.check("abs(?)", &[Value::Int(i64::MIN)]);
    assert!(ebb("abs(?)", &[Value::Int(i64::MIN)]).is_err_and(|e| e.contains("integer overflow")));
}

#[test]
fn round_matches_sqlite_rounding() {
    let db = Sqlite::new();
    let digits = [
        Value::Null,
        Value::Int(0),
        Value::Int(1),
        Value::Int(2),
        Value::Int(3),
        Value::Int(5),
        Value::Int(10),
        Value::Int(15),
        Value::Int(16),
        Value::Int(17),
        Value::Int(20),
        Value::Int(30),
        Value::Int(31),
        Value::Int(-1),
        Value::Int(-5),
        Value::Int(i64::MAX),
        Value::Int(i64::MIN),
        Value::Float(2.7),
        text("2"),
        text("x"),
        blob(b"1"),
    ];
    for value in values() {
        for n in &digits {
            db.check("round(?, ?)", &[value.clone(), n.clone()]);
        }
    }
    let halves = [
        0.5,
        1.5,
        2.5,
        -0.5,
        -1.5,
        0.05,
        0.15,
        0.25,
        0.35,
        1.005,
        1.015,
        1.025,
        2.345,
        2.355,
        1234.5678,
        0.045,
        8.875,
        1e-7,
        123_456_789.987_654_3,
        4503599627370495.5,
        0.49999999999999994,
    ];
    for h in halves {
        for n in 0..8 {
            db.check("round(?, ?)", &[Value::Float(h), Value::Int(n)]);
            db.check("round(?, ?)", &[Value::Float(-h), Value::Int(n)]);
        }
    }
    for expr in [
        "round(2.5)",
        "round(-2.5)",
        "round(1.23456, 3)",
        "round()",
        "round(1, 2, 3)",
    ] {
        db.check(expr, &[]);
    }
}

#[test]
fn scalar_min_and_max() {
    let db = Sqlite::new();
    for expr in [
        "min(1, 2)",
        "max(1, 2)",
        "min(1, 1.0)",
        "max(1, 1.0)",
        "min(1.0, 1)",
        "max(1.0, 1)",
        "min(3, 'a', X'00')",
        "max(3, 'a', X'00')",
        "min(2, NULL, 1)",
        "max(NULL, 1)",
        "min('b', 'a', 'c')",
        "max('b', 'a', 'c')",
        "min(TRUE, 2)",
        "max(TRUE, 0)",
        "min(-0.0, 0)",
        "max(9223372036854775807, 9.3e18)",
        "min(X'01', X'0100')",
        "max(1, 2, 3, 4, 5, 4, 3)",
    ] {
        db.check(expr, &[]);
    }
}

#[test]
fn text_functions_on_literals() {
    let db = Sqlite::new();
    for expr in [
        "instr('hello', 'l')",
        "instr('hello', 'lo')",
        "instr('hello', 'z')",
        "instr('hello', '')",
        "instr('', '')",
        "instr('', 'a')",
        "instr('héllo', 'l')",
        "instr('日本語日本', '本')",
        "instr(X'0102030203', X'0203')",
        "instr(X'C3A96C', 'l')",
        "instr('aé', X'C3A9')",
        "instr(12345, 34)",
        "instr(1.5, '.')",
        "instr(NULL, 'a')",
        "instr('a', NULL)",
        "instr('a')",
        "replace('hello world', 'o', '0')",
        "replace('aaaa', 'aa', 'b')",
        "replace('aaa', 'a', 'aa')",
        "replace('abc', '', 'x')",
        "replace('abc', 'b', '')",
        "replace(12321, 2, 9)",
        "replace(1.5, '.', ',')",
        "replace(X'616263', 'b', 'B')",
        "replace('héllo', 'é', 'e')",
        "replace(NULL, 'a', 'b')",
        "replace('a', NULL, 'b')",
        "replace('a', 'a', NULL)",
        "replace('', 'a', NULL)",
        "replace('a', '', NULL)",
        "replace('a', 'b')",
        "trim('  a  ')",
        "ltrim('  a  ')",
        "rtrim('  a  ')",
        "trim('xxaxx', 'x')",
        "trim('xyaxy', 'yx')",
        "ltrim('éèaé', 'é')",
        "rtrim('123.4500', '0')",
        "trim('abc', '')",
        "trim('', 'a')",
        "trim(NULL)",
        "trim('a', NULL)",
        "trim(12300, 0)",
        "trim(X'20612020')",
        "trim('a', 'b', 'c')",
        "trim()",
        "trim(' a ')",
        "hex('abc')",
        "hex(X'00ff10')",
        "hex(12)",
        "hex(-1.5)",
        "hex('é')",
        "hex('')",
        "hex(NULL)",
        "hex()",
        "unhex('616263')",
        "unhex('6162 63')",
        "unhex('61 62 63', ' ')",
        "unhex('6 162', ' ')",
        "unhex('61-62', '-')",
        "unhex('61é62', 'é')",
        "unhex('abc')",
        "unhex('ABCDEF')",
        "unhex('')",
        "unhex('zz')",
        "unhex(NULL)",
        "unhex('61', NULL)",
        "unhex(1234)",
        "unhex('61 ', ' ')",
        "unhex(' 61', ' ')",
        "quote('it''s')",
        "quote(1)",
        "quote(-1.5)",
        "quote(0.1)",
        "quote(1e300)",
        "quote(1e999)",
        "quote(-1e999)",
        "quote(X'00ff')",
        "quote(X'')",
        "quote(NULL)",
        "quote('')",
        "quote(TRUE)",
        "typeof(1)",
        "typeof(1.0)",
        "typeof('a')",
        "typeof(X'00')",
        "typeof(NULL)",
        "typeof(TRUE)",
        "typeof(1 = 1)",
        "char(72, 105)",
        "char()",
        "char(NULL)",
        "char(233, 26085, 128512)",
        "char(-1)",
        "char(1114111)",
        "char(1114112)",
        "char(55296)",
        "char(65.9)",
        "char('66')",
        "unicode('A')",
        "unicode('é')",
        "unicode('😀')",
        "unicode('')",
        "unicode(NULL)",
        "unicode(5)",
        "unicode(X'C3')",
        "unicode(X'FF')",
        "unicode(X'E0808F')",
        "concat('a', 'b')",
        "concat('a', NULL, 'b')",
        "concat(NULL)",
        "concat(NULL, NULL)",
        "concat(1, 2.5, X'41')",
        "concat()",
        "concat_ws(',', 'a', 'b')",
        "concat_ws(',', 'a', NULL, 'b')",
        "concat_ws(',', NULL, NULL)",
        "concat_ws(NULL, 'a', 'b')",
        "concat_ws('', 'a', 'b')",
        "concat_ws(',', 'a', X'', 'b')",
        "concat_ws(',', 'a', '', 'b')",
        "concat_ws(', ', 1, 2.5)",
        "concat_ws(',')",
        "concat_ws(',', 'a')",
    ] {
        db.check(expr, &[]);
    }
}

/// Every conversion and flag SQLite's printf knows in SQL.
const FORMATS: &[&str] = &[
    "%d", "%i", "%u", "%5d", "%-5d|", "%05d", "%+d", "% d", "%+05d", "%,d", "%,015d", "%.3d",
    "%8.3d", "%-+8d|", "%lld", "%ld", "%l", "%x", "%#x", "%X", "%#X", "%o", "%#o", "%#010x",
    "%08X", "%r", "%5r", "%p", "%#p", "%f", "%.2f", "%.0f", "%#.0f", "%10.3f", "%-10.3f|",
    "%010.3f", "%+.1f", "% .1f", "%!.3f", "%!f", "%,f", "%,.2f", "%.20f", "%!.20f", "%.15f", "%e",
    "%.3e", "%E", "%.0e", "%#.0e", "%012.4e", "%+e", "%!e", "%!.20e", "%g", "%G", "%#g", "%!g",
    "%.3g", "%.20g", "%!.20g", "%!.17g", "%!0.17g", "%10.4g", "%.0g", "%#.3G", "%c", "%5c",
    "%-5c|", "%.3c", "%5.3c", "%-5.3c|", "%!5c", "%s", "%.2s", "%!.2s", "%10s", "%-10s|", "%!10s",
    "%.0s", "%z", "%q", "%Q", "%w", "%#q", "%#Q", "%.3q", "%!.2Q", "%10Q", "%j", "%J", "%5J",
    "%-6J|", "%.2J", "%!.2j", "%%", "%5%", "%n", "%T", "%S", "%y", "a%", "%", "%-", "%.", "%5",
    "x%sy%dz", "%s %s %s",
];

#[test]
fn printf_agrees_on_every_conversion_and_value() {
    let db = Sqlite::new();
    for format in FORMATS {
        db.check("printf(?)", &[text(format)]);
        for value in values() {
            db.check("printf(?, ?)", &[text(format), value.clone()]);
        }
    }
}

#[test]
fn printf_star_width_and_precision() {
    let db = Sqlite::new();
    let numbers = [
        Value::Int(-10),
        Value::Int(-1),
        Value::Int(0),
        Value::Int(3),
        Value::Int(12),
        Value::Null,
        text("4"),
        Value::Float(5.9),
        Value::Int(-2147483648),
        Value::Int(4294967301),
    ];
    for format in [
        "%*d|", "%.*f|", "%*.*f|", "%-*s|", "%.*s|", "%*c|", "%.*c|", "%*.*e|", "%*Q|", "%*J|",
    ] {
        for width in &numbers {
            for value in [
                Value::Float(3.25159),
                text("héllo"),
                Value::Int(-42),
                Value::Null,
            ] {
                db.check(
                    "printf(?, ?, ?)",
                    &[text(format), width.clone(), value.clone()],
                );
                db.check(
                    "printf(?, ?, ?, ?)",
                    &[text(format), width.clone(), width.clone(), value],
                );
            }
        }
    }
}

#[test]
fn printf_on_literals() {
    let db = Sqlite::new();
    for expr in [
        "printf()",
        "printf(NULL)",
        "printf(NULL, 1)",
        "printf('%d')",
        "printf('%s')",
        "printf('%f')",
        "printf('%c')",
        "printf('%Q')",
        "printf('%q')",
        "printf('%J')",
        "printf('%d %d', 1)",
        "printf('no conversions', 1, 2)",
        "printf('%s and %s', 'a')",
        "printf(12)",
        "printf(1.5)",
        "printf(X'256400', 5)",
        "format('%d-%s', 5, 'x')",
        "printf('%5.2f%%', 12.345)",
        "printf('%,d', -1234567)",
        "printf('%,d', -9223372036854775808)",
        "printf('%d', -9223372036854775808)",
        "printf('%x', -1)",
        "printf('%o', -1)",
        "printf('%u', -1)",
        "printf('%#o', 0)",
        "printf('%#x', 0)",
        "printf('%.3c', 'é')",
        "printf('%.100000c', 'a') = printf('%.100000c', 'a')",
        "printf('%099d', 1)",
        "printf('%.50d', 1)",
        "printf('%.50f', 1.0/3)",
        "printf('%!.50f', 1.0/3)",
        "printf('%.30e', 1e300)",
        "printf('%f', 1e308)",
        "printf('%,f', 1e20)",
        "printf('%.2f', 0.005)",
        "printf('%.2f', 0.015)",
        "printf('%.2f', 2.675)",
        "printf('%.1f', 0.25)",
        "printf('%.0f', 0.5)",
        "printf('%.0f', 1.5)",
        "printf('%.0f', 2.5)",
        "printf('%#.2f', -0.001)",
        "printf('%.2f', -0.001)",
        "printf('%+#.2f', -0.001)",
        "printf('%g', 100000)",
        "printf('%g', 1000000)",
        "printf('%g', 0.0001)",
        "printf('%g', 0.00001)",
        "printf('%#g', 1)",
        "printf('%!g', 1)",
        "printf('%!.0g', 1)",
        "printf('%f', '1e3')",
        "printf('%d', '1e3')",
        "printf('%d', 2.9)",
        "printf('%d', -2.9)",
        "printf('%d', 1e300)",
        "printf('%s', 1e300)",
        "printf('%s', 0.1)",
        "printf('%020.5f', -1e999)",
        "printf('%020.5f', 1e999)",
        "printf('%+f', 1e999)",
        "printf('% e', 1e999)",
        "printf('%10f|', -1e999)",
        "printf('%.3s', '日本語日本')",
        "printf('%!.3s', '日本語日本')",
        "printf('%!8s|', '日本')",
        "printf('%8s|', '日本')",
        "printf('%!-8s|', '日本')",
        "printf('%q', 'it''s')",
        "printf('%Q', 'it''s')",
        "printf('%w', 'a\"b')",
        "printf('%#Q', 'a' || char(10) || 'b\\c')",
        "printf('%#q', 'a' || char(10) || 'b\\c')",
        "printf('%#Q', 'ab\\c')",
        "printf('%J', 'a\"b\\c' || char(8, 9, 10, 12, 13, 1, 31))",
        "printf('%j', 'tab' || char(9))",
        "printf('%!.2J', 'éèà')",
        "printf('%.2J', 'éèà')",
        "printf('%10J|', NULL)",
        "printf('%-10j|', 'é')",
        "printf('%!10j|', 'é')",
    ] {
        db.check(expr, &[]);
    }
}

#[test]
fn planner_routes_every_function() {
    let db = Sqlite::new();
    for (expr, want) in [
        ("abs(-2)", Value::Int(2)),
        ("round(2.5)", Value::Float(3.0)),
        ("sign(-2)", Value::Int(-1)),
        ("min(3, 1, 2)", Value::Int(1)),
        ("max(3, 1, 2)", Value::Int(3)),
        ("instr('abc', 'c')", Value::Int(3)),
        ("replace('abc', 'b', 'x')", text("axc")),
        ("trim(' a ')", text("a")),
        ("ltrim(' a ')", text("a ")),
        ("rtrim(' a ')", text(" a")),
        ("hex('a')", text("61")),
        ("unhex('61')", blob(b"a")),
        ("quote('a')", text("'a'")),
        ("typeof(1.5)", text("real")),
        ("char(97)", text("a")),
        ("unicode('a')", Value::Int(97)),
        ("concat('a', 1)", text("a1")),
        ("concat_ws('-', 'a', 1)", text("a-1")),
        ("printf('%05.1f', 2.25)", text("002.3")),
        ("format('%s!', 'hi')", text("hi!")),
    ] {
        assert_eq!(ebb(expr, &[]), Ok(want), "{expr}");
        db.check(expr, &[]);
    }
}

#[test]
fn functions_are_registered_with_sqlite_arities() {
    let registry = Builtins;
    for (name, arity) in [
        ("abs", Arity::Exact(1)),
        ("round", Arity::Range(1, 2)),
        ("sign", Arity::Exact(1)),
        ("min", Arity::AtLeast(2)),
        ("max", Arity::AtLeast(2)),
        ("instr", Arity::Exact(2)),
        ("replace", Arity::Exact(3)),
        ("trim", Arity::Range(1, 2)),
        ("ltrim", Arity::Range(1, 2)),
        ("rtrim", Arity::Range(1, 2)),
        ("hex", Arity::Exact(1)),
        ("unhex", Arity::Range(1, 2)),
        ("quote", Arity::Exact(1)),
        ("typeof", Arity::Exact(1)),
        ("char", Arity::AtLeast(0)),
        ("unicode", Arity::Exact(1)),
        ("concat", Arity::AtLeast(1)),
        ("concat_ws", Arity::AtLeast(2)),
        ("printf", Arity::AtLeast(0)),
        ("format", Arity::AtLeast(0)),
    ] {
        let function = registry
            .scalar(None, name)
            .expect("built-ins never refuse a name")
            .unwrap_or_else(|| panic!("{name} is registered"));
        assert_eq!((function.name(), function.arity()), (name, arity));
    }
    let min = registry.scalar(None, "min").unwrap().unwrap();
    let rows = min
        .call(
            &[
                vec![Value::Int(3), Value::Null],
                vec![Value::Float(2.5), Value::Int(1)],
            ],
            2,
        )
        .unwrap();
    assert_eq!(rows, vec![Value::Float(2.5), Value::Null]);
}

#[test]
fn results_over_the_size_limit_are_errors() {
    for expr in [
        "printf('%*d', 100000000, 1)",
        "printf('%.*f', 100000000, 1.5)",
        "printf('%.*d', 100000000, 1)",
        "printf('%.*c', 100000000, 'x')",
        "printf('%*s', 2000000000, 'x')",
        "printf('%2000000000J', 'x')",
        "printf('%,.*d', 100000000, 1)",
        "replace(printf('%.*c', 5000000, 'a'), 'a', 'bbbb')",
        "hex(printf('%.*c', 9000000, 'a'))",
        "quote(CAST(printf('%.*c', 9000000, 'a') AS BLOB))",
        "quote(printf('%.*c', 9000000, ''''))",
        "printf('%q', printf('%.*c', 9000000, ''''))",
        "concat(printf('%.*c', 9000000, 'a'), printf('%.*c', 9000000, 'a'))",
        "concat_ws(printf('%.*c', 9000000, 'a'), 1, 2, 3)",
    ] {
        let answer = ebb(expr, &[]);
        assert!(
            answer.as_ref().is_err_and(|e| e.contains("over the limit")),
            "{expr}: {answer:?}"
        );
    }
    // Standard SQL's TRIM syntax, which SQLite lacks, reaches the same functions.
    for (expr, want) in [
        ("TRIM(BOTH 'x' FROM 'xxaxx')", "a"),
        ("TRIM(LEADING 'x' FROM 'xxaxx')", "axx"),
        ("TRIM(TRAILING 'x' FROM 'xxaxx')", "xxa"),
    ] {
        assert_eq!(ebb(expr, &[]), Ok(text(want)), "{expr}");
    }
    // Just under the limit is fine.
    let answer = ebb("length(printf('%*d', 1000000, 1))", &[]);
    assert_eq!(answer, Ok(Value::Int(1_000_000)));
}

/// Deterministic pseudo-random floats: raw bit patterns across the whole
/// range, and short decimals (ties and near-ties for rounding).
fn floats() -> Vec<f64> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut floats = Vec::new();
    for _ in 0..300 {
        let f = f64::from_bits(next());
        if f.is_finite() {
            floats.push(f);
        }
        let digits = (next() % 1_000_000) as f64;
        let scale = 10f64.powi((next() % 12) as i32 - 6);
        floats.push(digits * scale);
        floats.push(-(digits + 0.5) / 1000.0);
    }
    floats
}

#[test]
fn printf_and_round_agree_on_many_floats() {
    let db = Sqlite::new();
    let formats = [
        "%f", "%.1f", "%.3f", "%.10f", "%e", "%.0e", "%.5e", "%.16e", "%g", "%.2g", "%.17g",
        "%!.17g", "%!.15g", "%!.20e", "%#.3g", "%,.2f",
    ];
    for f in floats() {
        let value = Value::Float(f);
        for format in formats {
            db.check("printf(?, ?)", &[text(format), value.clone()]);
        }
        for n in [0, 1, 2, 3, 7, 15] {
            db.check("round(?, ?)", &[value.clone(), Value::Int(n)]);
        }
        db.check("quote(?)", std::slice::from_ref(&value));
        db.check("printf('%s', ?)", std::slice::from_ref(&value));
        db.check("concat(?)", &[value]);
    }
}
