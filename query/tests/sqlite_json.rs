//! Differential checks of the JSON built-ins (`json_extract`, `json_type`,
//! `json_array_length`, `json_valid`) against SQLite, with fixed and
//! generated documents and paths.

mod support;

use ebb_query::Value;
use support::{Sqlite, ebb, same};

/// Valid RFC 8259 documents: every type, nesting, escapes, numbers,
/// whitespace, duplicate keys.
const DOCUMENTS: &[&str] = &[
    r#"{"a":1}"#,
    r#"{"a":1,"b":[1,2,{"c":"x"}],"d":{"e":null,"f":true,"g":false}}"#,
    r#" { "a" : [ 1 , 2.5 , -3 , "x y" ] , "b" : { } , "c" : [ ] } "#,
    "\t\n\r{\n\t\"a\"\r:\n[\t1\r,\n{ \"b\" :\t2 } ]\n}\r\n",
    r#"[1,"two",3.0,null,true,false,[],{},[[[]]]]"#,
    r#"{"a":1,"a":2}"#,
    r#"{"a b":1,"a.b":2,"a[0]":3,"":4,"\"":5,"a\"b":6,"é":7,"\u00e9":8,"ab":9}"#,
    r#"{"k\u0061":10,"ka":11}"#,
    r#""plain""#,
    r#""esc \" \\ \/ \b \f \n \r \t""#,
    r#""\u00e9\u20ac\ud83d\ude00 \u0041""#,
    r#"["\u00e9", "a\nb", "tab\there", "😀"]"#,
    r#"{"s":"\u00e9\"x","arr":["\u00e9", "a b"]}"#,
    "\"\\u0000x\"",
    "0",
    "-0",
    "-0.0",
    "1",
    "-1",
    "1.5",
    "-1.5e3",
    "1E5",
    "1e-5",
    "1.0E+2",
    "1e400",
    "-1e400",
    "1e-400",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "0.1",
    "2.2250738585072014e-308",
    "4.9406564584124654e-324",
    "1.7976931348623157e308",
    "3.141592653589793238462643383279",
    "true",
    "false",
    "null",
    "  null  ",
    r#"[0.30000000000000004, 1e22, 1e23, 5e-324, 123.456e-7]"#,
    r#"{"nested":{"deeper":{"deepest":[10,[20,[30]]]}}}"#,
    r#"[[1,2],[3,[4,5,[6]]]]"#,
    r#"{"x":{"y":[{"z":1},{"z":2}]}}"#,
    "[1]\0junk",
];

/// Malformed text, as RFC 8259 and SQLite both see it.
const MALFORMED: &[&str] = &[
    "",
    " ",
    "{",
    "[",
    "[1",
    "[1,2",
    r#"{"a":1"#,
    r#"{"a""#,
    r#"{"a":}"#,
    r#"{"a" 1}"#,
    r#"{"a":1 "b":2}"#,
    r#"[1 2]"#,
    r#""unterminated"#,
    r#"{"a":1}x"#,
    r#"{"a":1} {}"#,
    "[1]]",
    "]",
    "}",
    ",",
    "tru",
    "truex",
    "nul",
    "nulll",
    "01",
    "-01",
    "-",
    "1.5.3",
    "1e",
    "1e+",
    "--1",
    r#""bad \q escape""#,
    r#""\u12""#,
    r#""\u12g4""#,
    r#"[1,]x"#,
    "[\"a\0b\"]",
    "\0",
    "{]",
    "[}",
    r#"{1:2}"#,
    r#"{"a":1,}x"#,
];

/// Text SQLite takes as JSON5 and ebb refuses as malformed.
const JSON5: &[&str] = &[
    "[1,2,]",
    r#"{"a":1,}"#,
    "{a:1}",
    "['x']",
    "0x1F",
    "+1",
    ".5",
    "5.",
    "Infinity",
    "-Infinity",
    "NaN",
    "[1 /* comment */]",
    "// line\n1",
    "\"tab\there\"",
    "\"\\x41\"",
    "\"\\'\"",
    "\x0b1",
];

/// Paths over the documents: found, missing and malformed.
const PATHS: &[&str] = &[
    "$",
    "$.a",
    "$.b",
    "$.c",
    "$.d",
    "$.d.e",
    "$.d.f",
    "$.d.g",
    "$.a[0]",
    "$.a[1]",
    "$.a[3]",
    "$.a[#-1]",
    "$.a[#-4]",
    "$.a[#-5]",
    "$.a[#]",
    "$.a[#-0]",
    "$.b[2].c",
    "$.b[#-1].c",
    "$[0]",
    "$[1]",
    "$[8]",
    "$[8][0][0]",
    "$[#-1]",
    "$[#-9]",
    "$[#-10]",
    "$[99999999999999999999]",
    "$[#-99999999999999999999]",
    "$[01]",
    r#"$."a b""#,
    r#"$."a.b""#,
    r#"$."a[0]""#,
    r#"$.a b"#,
    r#"$."""#,
    r#"$."\"""#,
    r#"$."a\"b""#,
    "$.é",
    r#"$."\u00e9""#,
    r#"$.\u00e9"#,
    "$.ka",
    r#"$."k\u0061""#,
    "$.ab",
    r#"$."a\u0062""#,
    "$.s",
    "$.arr",
    "$.arr[0]",
    "$.nested.deeper.deepest[1][1][0]",
    "$.nested.deeper",
    "$.x.y[1].z",
    "$.x.y[#-2].z",
    "$.x.y[2].z",
    "$.missing",
    "$.missing.deeper",
    "$.missing[",
    "$[9].x",
    "$.a.b.c",
    // Malformed paths.
    "",
    "a",
    "$.",
    "$x",
    "$ ",
    "$.a.",
    "$.a[",
    "$[",
    "$[0",
    "$[-1]",
    "$[a]",
    "$[ 1]",
    "$[#+1]",
    "$[#-]",
    "$[#x]",
    "$[#-1",
    r#"$."unterminated"#,
    "$..a",
    "$.a]",
    "$.a[0]x",
    "$.a[1]]",
    "$.'a'",
    "$\0.a",
    "$.a\0junk",
];

#[test]
fn json_extract_agrees_on_every_document_and_path() {
    let db = Sqlite::new();
    for doc in DOCUMENTS.iter().chain(MALFORMED) {
        for path in PATHS {
            let params = [Value::text(*doc), Value::text(*path)];
            db.check("json_extract(?, ?)", &params);
            db.check("json_type(?, ?)", &params);
            db.check("json_array_length(?, ?)", &params);
        }
        let params = [Value::text(*doc)];
        db.check("json_valid(?)", &params);
        db.check("json_type(?)", &params);
        db.check("json_array_length(?)", &params);
        db.check("json_extract(?, '$')", &params);
    }
}

#[test]
fn malformed_json_fails_with_sqlites_message() {
    for doc in MALFORMED.iter().chain(JSON5) {
        let error = ebb("json_extract(?, '$')", &[Value::text(*doc)]).expect_err(doc);
        assert!(error.ends_with("malformed JSON"), "{doc:?}: {error}");
        assert_eq!(
            ebb("json_valid(?)", &[Value::text(*doc)]),
            Ok(Value::Int(0)),
            "{doc:?}"
        );
    }
    let error = ebb("json_extract('[1]', '$[a]')", &[]).expect_err("bad path");
    assert!(error.ends_with("bad JSON path: '$[a]'"), "{error}");
    let error = ebb("json_extract('[1]', ?)", &[Value::text("x'y")]).expect_err("bad path");
    assert!(error.ends_with("bad JSON path: 'x''y'"), "{error}");
}

#[test]
fn json5_is_refused_where_sqlite_accepts_it() {
    let db = Sqlite::new();
    for doc in JSON5 {
        let params = [Value::text(*doc)];
        assert!(db.eval("json_extract(?, '$')", &params).is_ok(), "{doc:?}");
        assert!(ebb("json_extract(?, '$')", &params).is_err(), "{doc:?}");
        // json_valid with one argument is RFC 8259 only, in SQLite too.
        db.check("json_valid(?)", &params);
        db.check("json_valid(?, 1)", &params);
    }
}

#[test]
fn json_valid_flags_follow_sqlite_for_text() {
    let db = Sqlite::new();
    for doc in DOCUMENTS.iter().chain(MALFORMED) {
        for flags in [1, 3, 4, 5, 8, 15] {
            db.check("json_valid(?, ?)", &[Value::text(*doc), Value::Int(flags)]);
        }
    }
    for flags in [Value::Int(0), Value::Int(16), Value::Int(-1), Value::Null] {
        db.check("json_valid('1', ?)", &[flags]);
    }
}

#[test]
fn several_paths_give_a_json_array() {
    let db = Sqlite::new();
    for doc in DOCUMENTS.iter().chain(MALFORMED) {
        for pair in PATHS.windows(2) {
            let params = [
                Value::text(*doc),
                Value::text(pair[0]),
                Value::text(pair[1]),
            ];
            db.check("json_extract(?, ?, ?)", &params);
        }
        db.check(
            "json_extract(?, '$', '$[0]', '$.a', '$.b')",
            &[Value::text(*doc)],
        );
        db.check("json_extract(?, '$', NULL)", &[Value::text(*doc)]);
        db.check("json_extract(?, NULL, 'x')", &[Value::text(*doc)]);
        db.check("json_extract(?, 'x', NULL)", &[Value::text(*doc)]);
    }
}

#[test]
fn null_and_number_inputs_follow_sqlite() {
    let db = Sqlite::new();
    let inputs = [
        Value::Null,
        Value::Int(0),
        Value::Int(-42),
        Value::Int(i64::MIN),
        Value::Float(1.5),
        Value::Float(-0.25),
        Value::Float(1e20),
        Value::Float(1e-7),
        Value::Float(100.0),
    ];
    for input in &inputs {
        for path in ["$", "$[0]", "$.a", "bad"] {
            let params = [input.clone(), Value::text(path)];
            db.check("json_extract(?, ?)", &params);
            db.check("json_type(?, ?)", &params);
            db.check("json_array_length(?, ?)", &params);
        }
        db.check("json_valid(?)", std::slice::from_ref(input));
        db.check("json_type(?)", std::slice::from_ref(input));
        db.check("json_array_length(?)", std::slice::from_ref(input));
    }
    for path in [Value::Null, Value::Int(0), Value::Float(1.5)] {
        db.check("json_extract('[1,2]', ?)", std::slice::from_ref(&path));
        db.check("json_extract('[1,2]', ?, '$')", std::slice::from_ref(&path));
        db.check("json_type('[1,2]', ?)", std::slice::from_ref(&path));
        db.check("json_array_length('[1,2]', ?)", std::slice::from_ref(&path));
        db.check("json_type('[1,2', ?)", std::slice::from_ref(&path));
        db.check("json_array_length('[1,2', ?)", std::slice::from_ref(&path));
        db.check("json_extract('[1,2', ?)", std::slice::from_ref(&path));
    }
    db.check("json_extract(TRUE, '$')", &[]);
}

/// ebb reads BYTES as JSON text; SQLite reads a BLOB as JSONB first, so the
/// reference is SQLite on the same bytes cast to TEXT.
#[test]
fn bytes_are_read_as_json_text() {
    let db = Sqlite::new();
    let cases: [(&str, &str); 3] = [
        ("json_extract(?, ?)", "json_extract(CAST(? AS TEXT), ?)"),
        ("json_type(?, ?)", "json_type(CAST(? AS TEXT), ?)"),
        (
            "json_array_length(?, ?)",
            "json_array_length(CAST(? AS TEXT), ?)",
        ),
    ];
    for doc in DOCUMENTS.iter().chain(MALFORMED) {
        for path in PATHS {
            let params = [
                Value::Bytes(doc.as_bytes().to_vec().into()),
                Value::text(*path),
            ];
            for (ours, theirs) in cases {
                let expected = db.eval(theirs, &params);
                let got = ebb(ours, &params);
                match (&got, &expected) {
                    (Ok(a), Ok(b)) if same(a, b) => {}
                    (Err(_), Err(_)) => {}
                    _ => panic!("{ours} {params:?}\n  ebb:    {got:?}\n  SQLite: {expected:?}"),
                }
            }
        }
    }
}

#[test]
fn lone_surrogates_become_replacement_characters() {
    // SQLite writes a lone surrogate's CESU-8 bytes, which are not UTF-8.
    for (doc, text) in [
        (r#""a\ud800b""#, "a\u{fffd}b"),
        (r#""\udc00""#, "\u{fffd}"),
        (r#""\ud800\u0041""#, "\u{fffd}A"),
        (r#""\ud83d\ude00""#, "😀"),
        (r#""\u0000""#, "\0"),
    ] {
        assert_eq!(
            ebb("json_extract(?, '$')", &[Value::text(doc)]),
            Ok(Value::text(text)),
            "{doc}"
        );
    }
    // In containers the escapes stay as written.
    Sqlite::new().check("json_extract(?, '$')", &[Value::text(r#"["\ud800"]"#)]);
}

/// `n` nested arrays around `1`.
fn nested(n: usize) -> String {
    format!("{}1{}", "[".repeat(n), "]".repeat(n))
}

#[test]
fn nesting_is_limited_to_1000_levels() {
    let db = Sqlite::new();
    for n in [999, 1000, 1001] {
        let doc = nested(n);
        for path in ["$", "$[0]", "$[0][0][0]"] {
            db.check(
                "json_extract(?, ?)",
                &[Value::text(doc.as_str()), Value::text(path)],
            );
        }
        db.check("json_valid(?)", &[Value::text(doc.as_str())]);
        let objects = format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n));
        db.check("json_extract(?, '$.a')", &[Value::text(objects.as_str())]);
        db.check("json_valid(?)", &[Value::text(objects)]);
    }
    // A path 999 levels deep is followed; 1000 levels is too deep.
    let doc = nested(1000);
    for steps in [998, 999, 1000] {
        let path = format!("${}", "[0]".repeat(steps));
        db.check(
            "json_extract(?, ?)",
            &[Value::text(doc.as_str()), Value::text(path)],
        );
    }
    let error = ebb(
        "json_extract(?, ?)",
        &[
            Value::text(doc.as_str()),
            Value::text(format!("${}", "[0]".repeat(1000))),
        ],
    )
    .expect_err("too deep");
    assert!(error.ends_with("JSON path too deep"), "{error}");
}

#[test]
fn deep_nesting_needs_no_deep_stack() {
    let handle = std::thread::Builder::new()
        .stack_size(512 << 10)
        .spawn(|| {
            let doc = "[".repeat(100_000);
            let objects = r#"{"a":"#.repeat(100_000);
            (
                ebb("json_extract(?, '$[0]')", &[Value::text(doc.as_str())]),
                ebb("json_valid(?)", &[Value::text(doc.as_str())]),
                ebb("json_type(?, '$.a')", &[Value::text(objects)]),
                ebb("json_array_length(?)", &[Value::text(nested(100_000))]),
            )
        })
        .expect("spawn");
    let (extract, valid, kind, length) = handle.join().expect("no stack overflow");
    assert!(extract.is_err_and(|e| e.ends_with("malformed JSON")));
    assert_eq!(valid, Ok(Value::Int(0)));
    assert!(kind.is_err());
    assert!(length.is_err());
    let db = Sqlite::new();
    db.check("json_valid(?)", &[Value::text("[".repeat(100_000))]);
}

/// A small seeded generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Some whitespace, often none.
fn ws(rng: &mut Rng, out: &mut String) {
    if rng.below(4) == 0 {
        out.push_str(rng.pick(&[" ", "\n", "\t", "\r\n ", "  "]));
    }
}

const KEYS: &[&str] = &[
    "a", "b", "c", "key", "a b", "é", "x.y", "k[0]", "", "a\\\"q", "\\u0061",
];
const STRINGS: &[&str] = &[
    "",
    "x",
    "hello world",
    "esc\\n\\t\\\"\\\\\\/",
    "\\u00e9\\u20AC",
    "\\ud83d\\ude00",
    "ünïcödé 😀",
    "123",
    "null",
];
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "7",
    "-12",
    "3.25",
    "-0.5",
    "1e3",
    "2.5E-3",
    "1e+2",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "0.1",
    "1e400",
    "6.02214076e23",
    "1.00000000000000011",
];

/// A random JSON value at most `depth` levels deep, appended to `out`.
fn value(rng: &mut Rng, depth: u32, out: &mut String) {
    let choice = if depth == 0 {
        rng.below(5)
    } else {
        rng.below(8)
    };
    match choice {
        0 => out.push_str(rng.pick(&["null", "true", "false"])),
        1 | 2 => out.push_str(rng.pick(NUMBERS)),
        3 | 4 => {
            out.push('"');
            out.push_str(rng.pick(STRINGS));
            out.push('"');
        }
        5 | 6 => {
            out.push('[');
            let n = rng.below(5);
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                ws(rng, out);
                value(rng, depth - 1, out);
                ws(rng, out);
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            let n = rng.below(5);
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                ws(rng, out);
                out.push('"');
                out.push_str(rng.pick(KEYS));
                out.push('"');
                ws(rng, out);
                out.push(':');
                ws(rng, out);
                value(rng, depth - 1, out);
                ws(rng, out);
            }
            out.push('}');
        }
    }
}

/// A random path of up to 4 steps, mostly well formed.
fn random_path(rng: &mut Rng) -> String {
    let mut path = String::from("$");
    for _ in 0..rng.below(5) {
        match rng.below(10) {
            0..=3 => {
                let key = rng.pick(&["a", "b", "c", "key", "é", "\\u0061"]);
                path.push('.');
                path.push_str(key);
            }
            4 => {
                path.push_str(".\"");
                path.push_str(rng.pick(KEYS));
                path.push('"');
            }
            5..=7 => path.push_str(&format!("[{}]", rng.below(5))),
            8 => path.push_str(&format!("[#-{}]", rng.below(5))),
            _ => path.push_str(rng.pick(&["[#]", "[", ".", "x", "[#-a]", "[-1]"])),
        }
    }
    path
}

#[test]
fn generated_documents_and_paths_agree_with_sqlite() {
    let db = Sqlite::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for case in 0..3000 {
        let mut doc = String::new();
        ws(&mut rng, &mut doc);
        value(&mut rng, 4, &mut doc);
        ws(&mut rng, &mut doc);
        if case % 10 == 0 {
            // Break it: cut it short or add junk.
            let cut = rng.below(doc.len() as u64 + 1) as usize;
            if doc.is_char_boundary(cut) {
                doc.truncate(cut);
            }
            if case % 20 == 0 {
                doc.push_str(rng.pick(&[",", "]", "}", "x", "1", "\"", ":"]));
            }
        }
        let path = random_path(&mut rng);
        let params = [Value::text(doc.as_str()), Value::text(path.as_str())];
        if db.eval(
            "json_valid(?, 2) AND NOT json_valid(?, 1)",
            &[params[0].clone(), params[0].clone()],
        ) == Ok(Value::Int(1))
        {
            // JSON5 (a trailing comma, `0.`): SQLite reads it, ebb refuses it.
            assert!(ebb("json_extract(?, ?)", &params).is_err(), "{doc:?}");
            continue;
        }
        db.check("json_extract(?, ?)", &params);
        db.check("json_type(?, ?)", &params);
        db.check("json_array_length(?, ?)", &params);
        if case % 4 == 0 {
            db.check("json_valid(?)", &params[..1]);
            let other = random_path(&mut rng);
            db.check(
                "json_extract(?, ?, ?)",
                &[params[0].clone(), params[1].clone(), Value::text(other)],
            );
        }
    }
}

#[test]
fn generated_numbers_read_as_sqlite_reads_them() {
    let db = Sqlite::new();
    let mut rng = Rng(42);
    for _ in 0..3000 {
        let digits = |rng: &mut Rng, n: u64| -> String {
            (0..n)
                .map(|_| char::from(b'0' + rng.below(10) as u8))
                .collect()
        };
        let mut number = String::new();
        if rng.below(2) == 0 {
            number.push('-');
        }
        let n = 1 + rng.below(20);
        let whole = digits(&mut rng, n);
        let whole = whole.trim_start_matches('0');
        number.push_str(if whole.is_empty() { "0" } else { whole });
        if rng.below(2) == 0 {
            number.push('.');
            let n = 1 + rng.below(20);
            number.push_str(&digits(&mut rng, n));
        }
        if rng.below(3) == 0 {
            number.push(if rng.below(2) == 0 { 'e' } else { 'E' });
            number.push_str(rng.pick(&["", "+", "-"]));
            let n = 1 + rng.below(3);
            number.push_str(&digits(&mut rng, n));
        }
        db.check("json_extract(?, '$')", &[Value::text(number.as_str())]);
        db.check(
            "json_extract(?, '$[0]')",
            &[Value::text(format!("[{number}]"))],
        );
    }
}

/// `->` and `->>` (json, right side, SQLite's `->`, SQLite's `->>`): ebb
/// answers as SQLite, and SQLite answers what these cases say, so a case
/// that silently became an error on both sides is caught.
#[test]
fn arrows_answer_as_sqlite() {
    let db = Sqlite::new();
    let text = |s: &str| Value::text(s);
    let doc = r#"{"a":{"b":[1,"two",3.5,null,true]},"c d":"e","0":"zero","":"empty","x\"y":1}"#;
    let cases: Vec<(Value, Value, Value, Value)> = vec![
        (
            text(doc),
            text("$.a"),
            text(r#"{"b":[1,"two",3.5,null,true]}"#),
            text(r#"{"b":[1,"two",3.5,null,true]}"#),
        ),
        (
            text(doc),
            text("a"),
            text(r#"{"b":[1,"two",3.5,null,true]}"#),
            text(r#"{"b":[1,"two",3.5,null,true]}"#),
        ),
        (text(doc), text("$.a.b[1]"), text(r#""two""#), text("two")),
        (text(doc), text("$.a.b[2]"), text("3.5"), Value::Float(3.5)),
        (text(doc), text("$.a.b[3]"), text("null"), Value::Null),
        (text(doc), text("$.a.b[4]"), text("true"), Value::Int(1)),
        (text(doc), text("$.a.b[#-1]"), text("true"), Value::Int(1)),
        (text(doc), text("c d"), text(r#""e""#), text("e")),
        (text(doc), text("0"), text(r#""zero""#), text("zero")),
        (text(doc), Value::Int(0), Value::Null, Value::Null),
        (text(doc), text("x\"y"), Value::Null, Value::Null),
        (text(doc), text("["), Value::Null, Value::Null),
        (text("[1]"), Value::Int(i64::MIN), Value::Null, Value::Null),
        (text(doc), text("missing"), Value::Null, Value::Null),
        (
            text("[10,20,30]"),
            Value::Int(0),
            text("10"),
            Value::Int(10),
        ),
        (
            text("[10,20,30]"),
            Value::Int(2),
            text("30"),
            Value::Int(30),
        ),
        (
            text("[10,20,30]"),
            Value::Int(-1),
            text("30"),
            Value::Int(30),
        ),
        (
            text("[10,20,30]"),
            Value::Int(-3),
            text("10"),
            Value::Int(10),
        ),
        (text("[10,20,30]"), Value::Int(-4), Value::Null, Value::Null),
        (text("[10,20,30]"), Value::Int(3), Value::Null, Value::Null),
        (text("[10,20,30]"), text("[1]"), text("20"), Value::Int(20)),
        (
            text("[10,20,30]"),
            text("[#-1]"),
            text("30"),
            Value::Int(30),
        ),
        (text("[10,20,30]"), text("1"), Value::Null, Value::Null),
        (
            text("[10,20,30]"),
            Value::Float(1.0),
            Value::Null,
            Value::Null,
        ),
        (
            text(r#"{"1.0":"f"}"#),
            Value::Float(1.0),
            text(r#""f""#),
            text("f"),
        ),
        (
            text(r#"[ 1 , { "a" : [ 2 ] } ]"#),
            Value::Int(1),
            text(r#"{"a":[2]}"#),
            text(r#"{"a":[2]}"#),
        ),
        (
            text(r#"{"a":"\u00e9\n"}"#),
            text("a"),
            text(r#""\u00e9\n""#),
            text("é\n"),
        ),
        (text(r#"{"a":-0}"#), text("a"), text("-0"), Value::Int(0)),
        (
            text(r#"{"a":1e2}"#),
            text("a"),
            text("1e2"),
            Value::Float(100.0),
        ),
        (Value::Null, text("a"), Value::Null, Value::Null),
        (text(doc), Value::Null, Value::Null, Value::Null),
        (text("5"), text("$"), text("5"), Value::Int(5)),
        (Value::Int(5), text("$"), text("5"), Value::Int(5)),
    ];
    for (json, right, short, long) in cases {
        let params = [json, right];
        let got = db.eval("? -> ?", &params).expect("->");
        assert!(same(&short, &got), "{params:?} -> {got:?}");
        let got = db.eval("? ->> ?", &params).expect("->>");
        assert!(same(&long, &got), "{params:?} ->> {got:?}");
        db.check("? -> ?", &params);
        db.check("? ->> ?", &params);
    }
    for (json, right) in [
        (text(doc), text("")),
        (text(doc), text("$.")),
        (text("[1"), text("a")),
        (text(r#"{"a":1}"#), text("a\"b")),
    ] {
        let params = [json, right];
        assert!(db.eval("? -> ?", &params).is_err(), "{params:?}");
        assert!(db.eval("? ->> ?", &params).is_err(), "{params:?}");
        db.check("? -> ?", &params);
        db.check("? ->> ?", &params);
    }
}
