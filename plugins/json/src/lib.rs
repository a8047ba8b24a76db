//! ebb plugin `json`: scalar functions reading a value out of a JSON document
//! by path.
//!
//! | function | result |
//! | --- | --- |
//! | `json.get(doc, path)` | the value as text: strings unquoted, numbers and booleans as JSON, objects and arrays as compact JSON; NULL when missing or JSON `null` |
//! | `json.get_int(doc, path)` | an integer; floats with an exact integer value convert; NULL otherwise |
//! | `json.get_float(doc, path)` | a float (integers convert); NULL otherwise |
//! | `json.has(doc, path)` | true when the path exists (even holding JSON `null`) |
//!
//! `doc` is text or bytes (a table's `value` column arrives as bytes). A
//! `doc` that is not JSON gives NULL (`has`: false). A NULL argument gives
//! NULL. A malformed `path` fails the call naming the offset (see
//! [`path::parse`] for the grammar: `$`, `.key`, `[N]`, `["key"]`).

pub mod path;
pub mod walk;

use std::borrow::Cow;

use ebb_guest::{FromValue, FromValueError, Value, ValueRef};
use serde_json::Value as Json;

/// A JSON document argument: text or bytes, parsed lazily.
pub struct Doc(Vec<u8>);

impl FromValue for Doc {
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Text(s) => Ok(Doc(s.into_bytes())),
            Value::Bytes(b) => Ok(Doc(b)),
            Value::Null => Err(FromValueError::Null),
            other => Err(FromValueError::Mismatch {
                expected: "a JSON document (text or bytes)",
                found: other.type_name(),
            }),
        }
    }
}

thread_local! {
    /// The last path parsed and its steps: a query passes the same path on
    /// every row.
    static LAST_PATH: std::cell::RefCell<(String, Vec<path::Step>)> =
        const { std::cell::RefCell::new((String::new(), Vec::new())) };
}

/// Parses `path` (once per distinct consecutive path), then `doc`, and runs
/// `read` on the value at the path. `Ok(None)` when the doc is not JSON or
/// the path is missing.
#[inline]
fn at_path<T>(doc: &[u8], path: &str, read: impl FnOnce(&Json) -> T) -> Result<Option<T>, String> {
    LAST_PATH.with(|last| {
        let mut last = last.borrow_mut();
        // The empty path never parses, so an empty cache never matches.
        if last.0 != path || path.is_empty() {
            let steps = path::parse(path).map_err(|e| e.to_string())?;
            *last = (path.to_owned(), steps);
        }
        Ok(walk::extract(doc, &last.1).as_ref().map(read))
    })
}

fn text_at(doc: &[u8], path: &str) -> Result<Option<String>, String> {
    Ok(at_path(doc, path, |v| match v {
        Json::Null => None,
        Json::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    })?
    .flatten())
}

#[inline]
fn int_at(doc: &[u8], path: &str) -> Result<Option<i64>, String> {
    Ok(at_path(doc, path, |v| {
        v.as_i64().or_else(|| {
            let x = v.as_f64()?;
            // 2^63 is exactly representable; anything below it with no
            // fraction converts exactly.
            (x.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&x))
                .then_some(x as i64)
        })
    })?
    .flatten())
}

#[inline]
fn float_at(doc: &[u8], path: &str) -> Result<Option<f64>, String> {
    Ok(at_path(doc, path, Json::as_f64)?.flatten())
}

fn has_at(doc: &[u8], path: &str) -> Result<bool, String> {
    Ok(at_path(doc, path, |_| ())?.is_some())
}

/// `json.get`: the value at `path` as text.
pub fn get(doc: Doc, path: String) -> Result<Option<String>, String> {
    text_at(&doc.0, &path)
}

/// `json.get_int`: the integer at `path`.
pub fn get_int(doc: Doc, path: String) -> Result<Option<i64>, String> {
    int_at(&doc.0, &path)
}

/// `json.get_float`: the number at `path` as a float.
pub fn get_float(doc: Doc, path: String) -> Result<Option<f64>, String> {
    float_at(&doc.0, &path)
}

/// `json.has`: whether `path` exists in `doc`.
pub fn has(doc: Doc, path: String) -> Result<bool, String> {
    has_at(&doc.0, &path)
}

/// The document argument borrowed when it is text or bytes (the usual
/// case); other types convert as [`Doc`] does. `None`: NULL.
#[inline]
fn doc_arg<'a>(value: ValueRef<'a>) -> Result<Option<Cow<'a, [u8]>>, String> {
    match value {
        ValueRef::Text(s) => Ok(Some(Cow::Borrowed(s.as_bytes()))),
        ValueRef::Bytes(b) => Ok(Some(Cow::Borrowed(b))),
        other => match Doc::from_value(other.to_owned()) {
            Ok(doc) => Ok(Some(Cow::Owned(doc.0))),
            Err(FromValueError::Null) => Ok(None),
            Err(e) => Err(format!("argument 1: {e}")),
        },
    }
}

/// The path argument borrowed when it is text; other types convert as a
/// `String` argument does. `None`: NULL.
#[inline]
fn path_arg<'a>(value: ValueRef<'a>) -> Result<Option<Cow<'a, str>>, String> {
    match value {
        ValueRef::Text(s) => Ok(Some(Cow::Borrowed(s))),
        other => match String::from_value(other.to_owned()) {
            Ok(path) => Ok(Some(Cow::Owned(path))),
            Err(FromValueError::Null) => Ok(None),
            Err(e) => Err(format!("argument 2: {e}")),
        },
    }
}

/// Runs `f` on the borrowed document and path; NULL when either is NULL
/// (checked in argument order, as typed functions do).
#[inline]
fn with_args<T>(
    args: &[ValueRef<'_>],
    f: impl FnOnce(&[u8], &str) -> Result<Option<T>, String>,
) -> Result<Option<T>, String> {
    let Some(doc) = doc_arg(args[0])? else {
        return Ok(None);
    };
    let Some(path) = path_arg(args[1])? else {
        return Ok(None);
    };
    f(&doc, &path)
}

/// `json.get` with borrowed arguments (what the plugin exports).
fn get_ref(args: &[ValueRef<'_>]) -> Result<Option<String>, String> {
    with_args(args, text_at)
}

/// `json.get_int` with borrowed arguments.
#[inline]
fn get_int_ref(args: &[ValueRef<'_>]) -> Result<Option<i64>, String> {
    with_args(args, int_at)
}

/// `json.get_float` with borrowed arguments.
#[inline]
fn get_float_ref(args: &[ValueRef<'_>]) -> Result<Option<f64>, String> {
    with_args(args, float_at)
}

/// `json.has` with borrowed arguments.
fn has_ref(args: &[ValueRef<'_>]) -> Result<Option<bool>, String> {
    with_args(args, |doc, path| has_at(doc, path).map(Some))
}

ebb_guest::export! {
    name: "json",
    version: env!("CARGO_PKG_VERSION"),
    functions: {
        scalar_ref(2) "get" => get_ref, "The value at a JSON path as text (strings unquoted, objects/arrays as JSON); NULL when missing";
        scalar_ref(2) "get_int" => get_int_ref, "The integer at a JSON path; NULL when missing or not an integer";
        scalar_ref(2) "get_float" => get_float_ref, "The number at a JSON path as a float; NULL when missing or not a number";
        scalar_ref(2) "has" => has_ref, "Whether a JSON path exists in the document";
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_guest::testing;

    const DOC: &str = r#"{"a":{"b":"text","n":42,"x":2.5,"big":1e300,"whole":3.0,"t":true,"z":null},
        "items":[{"name":"first"},{"name":"second","tags":["p","q"]}]}"#;

    fn call(function: &str, doc: Value, path: &str) -> Result<Value, String> {
        testing::scalar(plugin(), function, vec![doc, Value::Text(path.into())])
    }

    fn on_doc(function: &str, path: &str) -> Value {
        call(function, Value::Text(DOC.into()), path).unwrap()
    }

    fn text(s: &str) -> Value {
        Value::Text(s.into())
    }

    #[test]
    fn manifest_lists_four_scalars_of_two_args() {
        let manifest = plugin().manifest();
        assert_eq!(manifest.name, "json");
        assert_eq!(manifest.abi_version, 1);
        let names: Vec<_> = manifest.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["get", "get_int", "get_float", "has"]);
        assert!(manifest.functions.iter().all(|f| f.arg_count == 2));
    }

    #[test]
    fn get_returns_strings_unquoted_and_the_rest_as_json() {
        assert_eq!(on_doc("get", "$.a.b"), text("text"));
        assert_eq!(on_doc("get", "$.a.n"), text("42"));
        assert_eq!(on_doc("get", "$.a.t"), text("true"));
        assert_eq!(on_doc("get", "$.items[0].name"), text("first"));
        assert_eq!(on_doc("get", "$.items[1].tags"), text(r#"["p","q"]"#));
        assert_eq!(on_doc("get", "$.items[0]"), text(r#"{"name":"first"}"#));
    }

    #[test]
    fn get_is_null_for_missing_paths_json_null_and_bad_docs() {
        assert_eq!(on_doc("get", "$.a.missing"), Value::Null);
        assert_eq!(on_doc("get", "$.items[9]"), Value::Null);
        assert_eq!(on_doc("get", "$.a.z"), Value::Null);
        assert_eq!(call("get", text("{not json"), "$.a"), Ok(Value::Null));
        assert_eq!(
            call("get", Value::Bytes(vec![0xff, 0xfe]), "$.a"),
            Ok(Value::Null)
        );
        assert_eq!(call("get", Value::Null, "$.a"), Ok(Value::Null));
    }

    #[test]
    fn get_reads_documents_given_as_bytes() {
        let doc = Value::Bytes(br#"{"k":[1,"two"]}"#.to_vec());
        assert_eq!(call("get", doc.clone(), "$.k[1]"), Ok(text("two")));
        assert_eq!(call("get_int", doc, "$.k[0]"), Ok(Value::Int(1)));
    }

    #[test]
    fn get_int_converts_only_exact_integers() {
        assert_eq!(on_doc("get_int", "$.a.n"), Value::Int(42));
        assert_eq!(on_doc("get_int", "$.a.whole"), Value::Int(3));
        assert_eq!(on_doc("get_int", "$.a.x"), Value::Null);
        assert_eq!(on_doc("get_int", "$.a.big"), Value::Null);
        assert_eq!(on_doc("get_int", "$.a.b"), Value::Null);
        assert_eq!(on_doc("get_int", "$.a.t"), Value::Null);
        assert_eq!(on_doc("get_int", "$.nope"), Value::Null);
    }

    #[test]
    fn get_float_converts_any_number() {
        assert_eq!(on_doc("get_float", "$.a.x"), Value::Float(2.5));
        assert_eq!(on_doc("get_float", "$.a.n"), Value::Float(42.0));
        assert_eq!(on_doc("get_float", "$.a.b"), Value::Null);
        assert_eq!(on_doc("get_float", "$.a"), Value::Null);
    }

    #[test]
    fn has_is_true_for_present_paths_even_when_null() {
        assert_eq!(on_doc("has", "$.a.z"), Value::Bool(true));
        assert_eq!(on_doc("has", "$"), Value::Bool(true));
        assert_eq!(on_doc("has", "$.items[1].tags[1]"), Value::Bool(true));
        assert_eq!(on_doc("has", "$.items[1].tags[2]"), Value::Bool(false));
        assert_eq!(call("has", text("nope"), "$"), Ok(Value::Bool(false)));
    }

    #[test]
    fn bad_path_and_bad_types_fail_the_call_naming_the_function() {
        let error = call("get", text(DOC), "a.b").unwrap_err();
        assert!(
            error.starts_with("json.get: row 0: invalid JSON path `a.b`"),
            "{error}"
        );
        let error = call("has", Value::Int(1), "$").unwrap_err();
        assert_eq!(
            error,
            "json.has: row 0: argument 1: expected a JSON document (text or bytes), got int"
        );
        let error = testing::scalar(plugin(), "get", vec![text("{}")]).unwrap_err();
        assert_eq!(error, "json.get: row 0: takes 2 arguments, got 1");
    }

    #[test]
    fn a_batch_gets_one_value_per_row() {
        let rows = vec![
            vec![text(r#"{"v":1}"#), text("$.v")],
            vec![Value::Null, text("$.v")],
            vec![text(r#"{"v":"s"}"#), text("$.v")],
        ];
        assert_eq!(
            testing::scalar_batch(plugin(), "get_int", rows),
            Ok(vec![Value::Int(1), Value::Null, Value::Null])
        );
    }
}
