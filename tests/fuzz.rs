//! Fuzzing against a real `ebb serve` process: generated and mutated SQL,
//! request bodies, query strings, paths, cursors and plugin responses must
//! never get a 5xx, a malformed error, a panic in the server's log or a
//! dead server. A few cases also have an exact expected answer.
//!
//! Bounded by default (a few hundred cases per test); `EBB_FUZZ_CASES=N`
//! changes the cases per round, `EBB_FUZZ_SECONDS=S` repeats rounds for S
//! seconds (`make fuzz-soak`), `EBB_FUZZ_SEED=n` replays a reported seed.
//! See docs/testing.md.

#[path = "fuzz/bodies.rs"]
mod bodies;
mod common;
#[path = "fuzz/cursors.rs"]
mod cursors;
#[path = "fuzz/echo.rs"]
mod echo;
#[path = "fuzz/sql_text.rs"]
mod sql_text;
#[path = "fuzz/target.rs"]
mod target;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;
use ebb_proto::query::v1 as pb;
use proptest::prelude::*;
use serde_json::{Value as Json, json};

use bodies::Expect;
use target::{Reply, Request, Target, fail, fuzz};

/// Sizes of the largest generated cases.
pub mod sizes {
    /// Longest operator chain generated (`1+1+...`, `||`, `AND`, ...):
    /// past the 64 KiB SQL limit, so every length the server can be sent
    /// is tried (the depth bound refuses long ones by name).
    /// `EBB_FUZZ_MAX_CHAIN` overrides it for one run.
    pub const MAX_CHAIN_TERMS: usize = 40_000;
    /// Deepest nesting generated (`((...))`, `NOT NOT ...`, `lower(lower(...))`).
    /// `EBB_FUZZ_MAX_NESTING` overrides it.
    pub const MAX_NESTING: usize = 40_000;
    /// Largest parameter concatenated (`? || ? || ? || ?`): the per-page
    /// and per-query byte budgets bound what such queries build.
    pub const MAX_CONCAT_PARAM_BYTES: usize = 1 << 20;
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Twenty records in table `t`: JSON, text, binary, empty, one with a TTL.
fn seed_table(target: &mut Target) {
    for i in 0..20 {
        let value: Vec<u8> = match i % 5 {
            0 => format!("{{\"n\": {i}, \"s\": \"v{i}\"}}").into_bytes(),
            1 => format!("{}", i * 1000).into_bytes(),
            2 => vec![0, 0xff, i as u8, 0x80],
            3 => Vec::new(),
            _ => format!("text {i}").into_bytes(),
        };
        let ttl = if i == 7 { "?ttl_ms=86400000" } else { "" };
        target.must(&Request::new("PUT", format!("/v1/tables/t/keys/k{i:02}{ttl}")).body(value));
    }
}

fn seed_table_and_echo(target: &mut Target) {
    seed_table(target);
    target.must(&Request::new("PUT", "/v1/plugins/echo").body(echo::module()));
    target.must(&Request::new("PUT", "/v1/tables/ex/expiry-handler").body(
        r#"{"plugin": "echo", "function": "on_expire", "max_batch": 16, "max_attempts": 1}"#,
    ));
}

/// A 200 answer of `/v1/sql` has columns and rows (an NDJSON stream is
/// not checked).
fn check_sql_answer(request: &Request, reply: &Reply) -> Result<(), TestCaseError> {
    if reply.status != 200 || reply.content_type.contains("ndjson") {
        return Ok(());
    }
    let shaped = reply
        .json()
        .is_some_and(|json| json["columns"].is_array() && json["rows"].is_array());
    if !shaped {
        return Err(fail(
            request,
            &Ok(reply_copy(reply)),
            "a 200 without columns and rows",
        ));
    }
    Ok(())
}

fn reply_copy(reply: &Reply) -> Reply {
    Reply {
        status: reply.status,
        content_type: reply.content_type.clone(),
        body: reply.body.clone(),
    }
}

fn sql_query() -> impl Strategy<Value = sql_text::Query> {
    let chain = env_usize("EBB_FUZZ_MAX_CHAIN", sizes::MAX_CHAIN_TERMS);
    let nesting = env_usize("EBB_FUZZ_MAX_NESTING", sizes::MAX_NESTING);
    prop_oneof![
        10 => sql_text::select(),
        8 => sql_text::mutated_select(),
        2 => sql_text::random_text(),
        2 => sql_text::chain(chain),
        2 => sql_text::nesting(nesting),
        1 => sql_text::long_list(),
        1 => sql_text::at_text_limit(),
        1 => sql_text::large_params(sizes::MAX_CONCAT_PARAM_BYTES),
    ]
}

#[test]
fn generated_and_mutated_sql_never_gets_a_5xx_or_kills_the_server() {
    let target = std::cell::RefCell::new(Target::start(&[], seed_table_and_echo));
    fuzz("sql", 3000, sql_query(), |query| {
        let request = Request::sql(&query.body());
        let reply = target.borrow_mut().exchange(&request)?;
        check_sql_answer(&request, &reply)
    });
    assert_eq!(target.into_inner().stop(), 0, "the server stops cleanly");
}

fn check_expect(request: &Request, reply: Reply, expect: &Expect) -> Result<(), TestCaseError> {
    match expect {
        Expect::Any => Ok(()),
        Expect::Refused(why) if (200..300).contains(&reply.status) => Err(fail(
            request,
            &Ok(reply),
            &format!("a 2xx for a request that must be refused: {why}"),
        )),
        Expect::Exactly(status, code)
            if reply.status != *status || reply.code().as_deref() != Some(code) =>
        {
            Err(fail(
                request,
                &Ok(reply),
                &format!("expected {status} {code}"),
            ))
        }
        _ => Ok(()),
    }
}

#[test]
fn mutated_bodies_query_strings_and_paths_never_get_a_5xx() {
    let target = std::cell::RefCell::new(Target::start(
        &[
            "--max-body-bytes",
            "65536",
            "--max-batch-items",
            "100",
            "--max-value-bytes",
            "65536",
            "--max-plugin-bytes",
            "262144",
        ],
        seed_table_and_echo,
    ));
    let cases = prop_oneof![
        6 => bodies::case(),
        1 => bodies::upload_case(echo::module()),
    ];
    fuzz("bodies", 3000, cases, |case| {
        let reply = target.borrow_mut().exchange(&case.request)?;
        if case.request.target.starts_with("/v1/sql") {
            check_sql_answer(&case.request, &reply)?;
        }
        check_expect(&case.request, reply, &case.expect)
    });
    assert_eq!(target.into_inner().stop(), 0, "the server stops cleanly");
}

/// What the cursor cases start from: the data dir's key and real cursors,
/// for the server run they were taken from.
struct Cursors {
    starts: u32,
    key: [u8; 32],
    real: Vec<(String, String)>,
}

impl Cursors {
    /// Stop the server to read its cursor key, start it again, then take
    /// the first page's cursor of each paged query.
    fn take(target: &mut Target) -> Cursors {
        let key = read_cursor_key(target);
        let mut real = Vec::new();
        for sql in cursors::PAGED {
            let reply = target.must(&Request::sql(&json!({"sql": sql, "page_size": 3})));
            let cursor = reply.json().unwrap()["cursor"]
                .as_str()
                .unwrap_or_else(|| panic!("{sql}: no cursor"))
                .to_string();
            real.push((sql.to_string(), cursor));
        }
        Cursors {
            starts: target.starts,
            key,
            real,
        }
    }
}

fn read_cursor_key(target: &mut Target) -> [u8; 32] {
    let mut key = None;
    target.stop_then(|data_dir| {
        use ebb_host::store::KvStore;
        let store = ebb_host::store::RocksStore::open(data_dir).expect("open the stopped data dir");
        let raw = store
            .read_meta("cursor_key")
            .expect("read meta")
            .expect("a cursor key");
        key = Some(raw.try_into().expect("32 bytes"));
    });
    key.unwrap()
}

/// Sign `cursor` as the server does, with `key` (the format field is kept).
fn sign(key: &[u8; 32], cursor: &pb::Cursor) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let bytes = cursor.encode_to_vec();
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).unwrap();
    mac.update(&bytes);
    let signed = pb::SignedCursor {
        cursor: bytes.into(),
        mac: mac.finalize().into_bytes().to_vec().into(),
    };
    URL_SAFE_NO_PAD.encode(signed.encode_to_vec())
}

#[test]
fn mutated_cursors_are_refused_with_invalid_cursor_and_forged_ones_never_get_a_5xx() {
    let target = std::cell::RefCell::new(Target::start(&[], seed_table));
    let world = std::cell::RefCell::new(Cursors::take(&mut target.borrow_mut()));
    fuzz("cursors", 3000, cursors::case(), |(pick, case)| {
        if world.borrow().starts != target.borrow().starts {
            *world.borrow_mut() = Cursors::take(&mut target.borrow_mut());
        }
        let world = world.borrow();
        let (sql, token) = &world.real[pick.index(world.real.len())];
        // (token, sql sent with it, the exact answer expected, if any)
        let (sent, with_sql, expect): (String, Option<String>, Option<(u16, &str)>) = match &case {
            cursors::CursorCase::Text(edits) => {
                let sent = cursors::apply_text(token, edits);
                let same = cursors::signed(&sent) == cursors::signed(token);
                (
                    sent,
                    None,
                    Some(if same {
                        (200, "")
                    } else {
                        (400, "invalid_cursor")
                    }),
                )
            }
            cursors::CursorCase::Bytes(mutations, encoding) => {
                let sent = cursors::apply_bytes(token, mutations, *encoding);
                let same = cursors::signed(&sent) == cursors::signed(token);
                (
                    sent,
                    None,
                    Some(if same {
                        (200, "")
                    } else {
                        (400, "invalid_cursor")
                    }),
                )
            }
            cursors::CursorCase::OtherQuery(other) => {
                let other = cursors::PAGED[other.index(cursors::PAGED.len())];
                let expect = if other == sql.as_str() {
                    (200, "")
                } else {
                    (400, "invalid_cursor")
                };
                (token.clone(), Some(other.to_string()), Some(expect))
            }
            cursors::CursorCase::OtherKey(key) => {
                let contents = cursors::contents(token);
                (sign(key, &contents), None, Some((400, "invalid_cursor")))
            }
            cursors::CursorCase::Resealed(edits) => {
                let contents = cursors::apply_edits(cursors::contents(token), edits);
                (sign(&world.key, &contents), None, None)
            }
            cursors::CursorCase::Forged(contents) => (sign(&world.key, contents), None, None),
        };
        let mut body = json!({ "cursor": sent });
        if let Some(sql) = with_sql {
            body["sql"] = json!(sql);
        }
        let request = Request::sql(&body);
        drop(world);
        let reply = target.borrow_mut().exchange(&request)?;
        check_sql_answer(&request, &reply)?;
        if let Some((status, code)) = expect {
            let ok = reply.status == status
                && (code.is_empty() || reply.code().as_deref() == Some(code));
            if !ok {
                return Err(fail(
                    &request,
                    &Ok(reply),
                    &format!("expected {status} {code}"),
                ));
            }
        }
        Ok(())
    });
    // A continuation that adds params or page_size is refused (they belong
    // to the cursor).
    {
        let world = world.borrow();
        let (_, token) = &world.real[0];
        for extra in [json!({"page_size": 5}), json!({"params": [1]})] {
            let mut body = json!({ "cursor": token });
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let reply = target.borrow_mut().send(&Request::sql(&body)).unwrap();
            assert_eq!(reply.status, 400, "{body}: {}", reply.text());
        }
    }
    assert_eq!(target.into_inner().stop(), 0, "the server stops cleanly");
}

/// A plugin case: where the echo plugin's answer is used.
#[derive(Debug, Clone)]
enum PluginCall {
    Scalar,
    ScalarInWhere,
    ScalarInGroupBy,
    ScalarInOrderBy,
    Aggregate { wrap: bool, grouped: bool },
    Expiry,
}

fn plugin_call() -> impl Strategy<Value = PluginCall> {
    prop_oneof![
        6 => Just(PluginCall::Scalar),
        1 => Just(PluginCall::ScalarInWhere),
        1 => Just(PluginCall::ScalarInGroupBy),
        1 => Just(PluginCall::ScalarInOrderBy),
        4 => (any::<bool>(), any::<bool>()).prop_map(|(wrap, grouped)| PluginCall::Aggregate { wrap, grouped }),
        2 => Just(PluginCall::Expiry),
    ]
}

fn base64_param(bytes: &[u8]) -> Json {
    json!({ "base64": STANDARD.encode(bytes) })
}

/// The JSON a value is answered as (docs/sql.md), when exact.
fn value_json(value: &abi::Value) -> Option<Json> {
    use abi::value::Kind;
    Some(match value.kind.as_ref()? {
        Kind::Null(_) => Json::Null,
        Kind::Boolean(b) => json!(b),
        Kind::Int(n) => json!(n),
        Kind::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Kind::Text(t) => json!(t),
        Kind::Bytes(b) => match std::str::from_utf8(b) {
            Ok(text) => json!(text),
            Err(_) => json!({ "base64": STANDARD.encode(b) }),
        },
    })
}

#[test]
fn plugin_responses_of_any_shape_fail_as_plugin_error_never_a_5xx() {
    let target = std::cell::RefCell::new(Target::start(&[], seed_table_and_echo));
    let counter = std::cell::Cell::new(0u64);
    fuzz(
        "plugin responses",
        3000,
        (plugin_call(), echo::answer()),
        |(call, answer)| {
            let framed = echo::framed(&answer.bytes, answer.len);
            let query =
                |sql: &str| Request::sql(&json!({ "sql": sql, "params": [base64_param(&framed)] }));
            let request = match &call {
                PluginCall::Scalar => query("SELECT echo.f(?) FROM t WHERE key = 'k01'"),
                PluginCall::ScalarInWhere => query("SELECT key FROM t WHERE echo.f(?) = 1"),
                PluginCall::ScalarInGroupBy => query("SELECT count(*) FROM t GROUP BY echo.f(?)"),
                PluginCall::ScalarInOrderBy => {
                    query("SELECT key FROM t ORDER BY echo.f(?) LIMIT 3")
                }
                PluginCall::Aggregate { wrap, grouped } => {
                    let arg = if *wrap {
                        let state = abi::CallResponse {
                            result: Some(abi::call_response::Result::State(framed.clone().into())),
                        }
                        .encode_to_vec();
                        echo::framed(&state, state.len() as u32)
                    } else {
                        framed.clone()
                    };
                    let sql = if *grouped {
                        "SELECT _fragment, echo.agg(?) FROM t GROUP BY _fragment"
                    } else {
                        "SELECT echo.agg(?) FROM t WHERE key = 'k01'"
                    };
                    Request::sql(&json!({ "sql": sql, "params": [base64_param(&arg)] }))
                }
                PluginCall::Expiry => {
                    counter.set(counter.get() + 1);
                    Request::new(
                        "PUT",
                        format!("/v1/tables/ex/keys/e{}?ttl_ms=1", counter.get()),
                    )
                    .body(framed.clone())
                }
            };
            let reply = target.borrow_mut().exchange(&request)?;
            if matches!(call, PluginCall::Expiry) {
                if reply.status != 200 {
                    return Err(fail(&request, &Ok(reply), "an expiring put must succeed"));
                }
                return Ok(());
            }
            check_sql_answer(&request, &reply)?;
            // A parameter over the 1 MiB limit is refused before any call.
            if reply.status == 413 && framed.len() > 1 << 20 {
                return Ok(());
            }
            if !matches!(reply.status, 200 | 422)
                || (reply.status == 422 && reply.code().as_deref() != Some("plugin_error"))
            {
                return Err(fail(
                    &request,
                    &Ok(reply),
                    "expected 200 or 422 plugin_error",
                ));
            }
            // A well-formed answer of one value is that value, exactly.
            if let (
                PluginCall::Scalar,
                Some(abi::CallResponse {
                    result: Some(abi::call_response::Result::Scalar(result)),
                }),
            ) = (&call, &answer.valid)
                && result.values.len() == 1
            {
                let expected = value_json(&result.values[0]);
                let got = reply.json().map(|json| json["rows"][0][0].clone());
                let ok = match (&expected, &got) {
                    // serde_json's default float parsing may be 1 ulp off.
                    (Some(Json::Number(e)), Some(Json::Number(g))) if e.is_f64() => {
                        let (e, g) = (e.as_f64().unwrap(), g.as_f64().unwrap_or(f64::NAN));
                        (e - g).abs() <= e.abs() * 1e-15
                    }
                    (Some(value), got) => reply.status == 200 && got.as_ref() == Some(value),
                    (None, _) => reply.status == 422,
                };
                if !ok {
                    return Err(fail(
                        &request,
                        &Ok(reply),
                        &format!("expected the row [{expected:?}]"),
                    ));
                }
            }
            Ok(())
        },
    );
    let mut target = target.into_inner();
    std::thread::sleep(std::time::Duration::from_millis(500));
    if let Some(problem) = target.health_problem() {
        panic!("after the expiry handler ran: {problem}");
    }
    assert_eq!(target.stop(), 0, "the server stops cleanly");
}
