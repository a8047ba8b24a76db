//! HTTP request generators: random and mutated JSON bodies for every route
//! that takes one, random query strings, path segments and methods.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value as Json, json};

use super::echo::{byte_mutation, mutate};
use super::target::Request;

/// What a request must get besides the universal oracle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Anything the universal oracle allows.
    Any,
    /// Never a 2xx: the request breaks a documented rule.
    Refused(&'static str),
    /// Exactly this status and error code.
    Exactly(u16, &'static str),
}

/// A case: the request and what it must get.
#[derive(Debug, Clone)]
pub struct Case {
    pub request: Request,
    pub expect: Expect,
}

/// Percent-encode every byte outside the unreserved set.
pub fn encode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A path segment: valid names, names that break the rules, raw bytes
/// (invalid UTF-8 included), bad escapes.
fn segment() -> impl Strategy<Value = (String, bool)> {
    // (encoded segment, is a valid table name)
    prop_oneof![
        6 => "[a-z_][a-z0-9_]{0,8}".prop_map(|s| (s, true)),
        1 => Just(("t".to_string(), true)),
        1 => Just(("a".repeat(63), true)),
        1 => Just(("a".repeat(64), false)),
        1 => prop::sample::select(vec!["ebb_x", "EBB_meta", "1abc", "a-b", "a.b", "%20", "%2F", "%00", "%ff", "%C3%A9", "%", "%zz", "..", "."])
            .prop_map(|s| (s.to_string(), false)),
        2 => prop::collection::vec(any::<u8>(), 1..12).prop_map(|b| (encode(&b), false)),
        1 => Just(("T".to_string(), true)),
    ]
}

fn key_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "k[0-9]{2}",
        2 => prop::collection::vec(any::<u8>(), 1..16).prop_map(|b| encode(&b)),
        1 => prop::sample::select(vec![4096usize, 4097]).prop_map(|n| "k".repeat(n)),
        1 => prop::sample::select(vec!["%ff%fe", "%", "%2", "a%2Fb", "%00"]).prop_map(str::to_string),
    ]
}

const PARAM_NAMES: &[&str] = &[
    "ttl_ms",
    "expires_at_ms",
    "durability",
    "discard_pending",
    "limit",
    "after",
    "bogus",
    "TTL_MS",
    "",
];

fn param_value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "1", "0", "-1", "1000", "18446744073709551615", "18446744073709551616", "253402300800000",
            "253402300799999", "1e3", "1.5", "", "true", "false", "memory", "wal", "sync", "SYNC", "none",
            "%ff", "%00", "00000000000000000000000000000000",
        ]).prop_map(str::to_string),
        1 => prop::collection::vec(any::<u8>(), 0..8).prop_map(|b| encode(&b)),
        1 => any::<u64>().prop_map(|n| n.to_string()),
    ]
}

/// A query string: `?k=v&...`, repeated keys, missing `=`, stray `&`.
/// Returns the text and whether it names a parameter no route takes.
fn query_string() -> impl Strategy<Value = (String, bool)> {
    prop_oneof![
        3 => Just((String::new(), false)),
        6 => prop::collection::vec((prop::sample::select(PARAM_NAMES), param_value(), prop::bool::weighted(0.9)), 1..4)
            .prop_map(|pairs| {
                let unknown = pairs.iter().any(|(k, _, _)| matches!(*k, "bogus" | "TTL_MS"));
                let text = pairs
                    .iter()
                    .map(|(k, v, eq)| if *eq { format!("{k}={v}") } else { k.to_string() })
                    .collect::<Vec<_>>()
                    .join("&");
                (format!("?{text}"), unknown)
            }),
        1 => prop::sample::select(vec!["?", "?&", "?=", "?==&&", "?%ff=1", "?a[b]=1", "?durability=wal&durability=sync"])
            .prop_map(|s| (s.to_string(), false)),
    ]
}

const RAW: &[&str] = &[
    "1e400",
    "-1e400",
    "18446744073709551616",
    "-9223372036854775809",
    "99999999999999999999999999999999",
    "-0",
    "0.0",
    "1.5",
    "NaN",
    "Infinity",
    "\"\\ud800\"",
    "\"\\u0000\"",
    "\"\u{0}\"",
    "null",
    "true",
    "[]",
    "{}",
    "\"\"",
    "[[[[[[[[]]]]]]]]",
    "{\"base64\":\"AA==\"}",
    "\"é\"",
];

/// One change to a JSON document.
#[derive(Debug, Clone)]
pub enum JsonEdit {
    Remove(Index),
    Replace(Index, Json),
    ReplaceRaw(Index, &'static str),
    AddField(Index, String, Json),
    Wrap(Index),
}

/// Random JSON, a few levels deep.
pub fn any_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,10}".prop_map(Json::String),
        (0usize..70_000).prop_map(|n| Json::String("s".repeat(n))),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

fn json_edit() -> impl Strategy<Value = JsonEdit> {
    prop_oneof![
        2 => any::<Index>().prop_map(JsonEdit::Remove),
        3 => (any::<Index>(), any_json()).prop_map(|(i, v)| JsonEdit::Replace(i, v)),
        3 => (any::<Index>(), prop::sample::select(RAW)).prop_map(|(i, r)| JsonEdit::ReplaceRaw(i, r)),
        2 => (any::<Index>(), prop_oneof!["[a-z_]{1,10}", ".{0,4}"], any_json()).prop_map(|(i, k, v)| JsonEdit::AddField(i, k, v)),
        1 => any::<Index>().prop_map(JsonEdit::Wrap),
    ]
}

/// Paths to every node of `value` (the root included).
fn nodes(value: &Json, at: Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    match value {
        Json::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let mut path = at.clone();
                path.push(i.to_string());
                nodes(item, path, out);
            }
        }
        Json::Object(map) => {
            for (k, item) in map {
                let mut path = at.clone();
                path.push(k.clone());
                nodes(item, path, out);
            }
        }
        _ => {}
    }
}

fn node_mut<'a>(value: &'a mut Json, path: &[String]) -> &'a mut Json {
    path.iter().fold(value, |v, step| match v {
        Json::Array(items) => &mut items[step.parse::<usize>().unwrap()],
        Json::Object(map) => map.get_mut(step).unwrap(),
        _ => unreachable!(),
    })
}

const RAW_MARK: &str = "\u{2}raw\u{2}";

/// Apply JSON edits to `value`; the text, with raw snippets spliced in.
pub fn edit_json(mut value: Json, edits: &[JsonEdit]) -> Vec<u8> {
    let mut raws: Vec<&str> = Vec::new();
    for edit in edits {
        let mut paths = Vec::new();
        nodes(&value, Vec::new(), &mut paths);
        let pick = |i: &Index| paths[i.index(paths.len())].clone();
        match edit {
            JsonEdit::Remove(i) => {
                let path = pick(i);
                if let Some((last, parent)) = path.split_last() {
                    match node_mut(&mut value, parent) {
                        Json::Array(items) => {
                            items.remove(last.parse::<usize>().unwrap());
                        }
                        Json::Object(map) => {
                            map.remove(last);
                        }
                        _ => {}
                    }
                }
            }
            JsonEdit::Replace(i, v) => *node_mut(&mut value, &pick(i)) = v.clone(),
            JsonEdit::ReplaceRaw(i, raw) => {
                *node_mut(&mut value, &pick(i)) = Json::String(RAW_MARK.into());
                raws.push(raw);
            }
            JsonEdit::AddField(i, k, v) => match node_mut(&mut value, &pick(i)) {
                Json::Object(map) => {
                    map.insert(k.clone(), v.clone());
                }
                Json::Array(items) => items.push(v.clone()),
                other => {
                    let mut map = serde_json::Map::new();
                    map.insert(k.clone(), v.clone());
                    *other = Json::Object(map);
                }
            },
            JsonEdit::Wrap(i) => {
                let node = node_mut(&mut value, &pick(i));
                *node = Json::Array(vec![node.take()]);
            }
        }
    }
    let mut text = value.to_string();
    let mark = serde_json::to_string(RAW_MARK).unwrap();
    for raw in raws {
        if let Some(at) = text.find(&mark) {
            text.replace_range(at..at + mark.len(), raw);
        }
    }
    text.into_bytes()
}

/// A body: a valid one edited as JSON, then maybe edited as bytes
/// (truncation, invalid UTF-8), or deep nesting, or random bytes.
pub fn body(base: Json) -> impl Strategy<Value = Vec<u8>> {
    let edited = (
        prop::collection::vec(json_edit(), 0..4),
        prop::option::weighted(0.3, prop::collection::vec(byte_mutation(), 1..3)),
    )
        .prop_map(move |(edits, bytes)| {
            let text = edit_json(base.clone(), &edits);
            match bytes {
                Some(m) => mutate(text, &m),
                None => text,
            }
        });
    prop_oneof![
        8 => edited,
        1 => (1usize..200_000, prop::sample::select(vec!["[", "{\"a\":", "{\"sql\":"]))
            .prop_map(|(depth, open)| {
                let close = if open == "[" { "]" } else { "}" };
                format!("{}1{}", open.repeat(depth), close.repeat(depth)).into_bytes()
            }),
        1 => prop::collection::vec(any::<u8>(), 0..64),
        1 => Just(Vec::new()),
    ]
}

fn batch_base() -> Json {
    json!([
        {"op": "put", "key": "b1", "value": "text", "ttl_ms": 60000},
        {"op": "put", "key": "b2", "value": {"base64": "AP8="}, "expires_at_ms": 1900000000000u64},
        {"op": "delete", "key": "k01"},
        {"key": "b3", "value": "op defaults to put"}
    ])
}

/// An NDJSON batch body: lines of edited items, blank lines, garbage lines.
fn ndjson() -> impl Strategy<Value = Vec<u8>> {
    let items: Vec<Json> = batch_base().as_array().unwrap().clone();
    prop::collection::vec(
        prop_oneof![
            4 => (prop::sample::select(items), prop::collection::vec(json_edit(), 0..2)).prop_map(|(item, e)| edit_json(item, &e)),
            1 => Just(Vec::new()),
            1 => prop::collection::vec(any::<u8>(), 0..12),
        ],
        0..6,
    )
    .prop_map(|lines| lines.join(&b"\n"[..]))
}

/// A request with a body to a route that takes one.
fn body_case() -> impl Strategy<Value = Case> {
    prop_oneof![
        4 => (body(json!({"sql": "SELECT key, value FROM t WHERE key > ? LIMIT 5", "params": ["k01"], "page_size": 2, "consistency": "guarded"})),
              prop::bool::weighted(0.2))
            .prop_map(|(body, ndjson)| {
                let mut request = Request::new("POST", "/v1/sql").header("content-type", "application/json").body(body);
                if ndjson {
                    request = request.header("accept", "application/x-ndjson");
                }
                Case { request, expect: Expect::Any }
            }),
        3 => (segment(), prop_oneof![3 => body(batch_base()), 2 => ndjson()], query_string(), prop::bool::weighted(0.5))
            .prop_map(|((t, _), body, (q, unknown), json_type)| {
                let mut request = Request::new("POST", format!("/v1/tables/{t}/batch{q}")).body(body);
                if json_type {
                    request = request.header("content-type", "application/json");
                }
                Case { request, expect: if unknown { Expect::Refused("unknown query parameter") } else { Expect::Any } }
            }),
        2 => (segment(), body(json!({"plugin": "echo", "function": "on_expire", "max_batch": 16, "max_attempts": 3})))
            .prop_map(|((t, _), body)| Case {
                request: Request::new("PUT", format!("/v1/tables/{t}/expiry-handler")).body(body),
                expect: Expect::Any,
            }),
        1 => (segment(), body(json!({"ids": ["00", "ff"]})))
            .prop_map(|((t, _), body)| Case {
                request: Request::new("POST", format!("/v1/tables/{t}/expiry/dead-letters/redrive")).body(body),
                expect: Expect::Any,
            }),
        2 => (segment(), key_segment(), query_string(), prop_oneof![
                prop::collection::vec(any::<u8>(), 0..64),
                prop::sample::select(vec![65_536usize, 65_537]).prop_map(|n| vec![b'v'; n]),
            ])
            .prop_map(|((t, _), k, (q, unknown), body)| Case {
                request: Request::new("PUT", format!("/v1/tables/{t}/keys/{k}{q}")).body(body),
                expect: if unknown { Expect::Refused("unknown query parameter") } else { Expect::Any },
            }),
    ]
}

/// Uploads: mutated and random modules under valid and invalid names.
pub fn upload_case(module: Vec<u8>) -> impl Strategy<Value = Case> {
    let bytes = prop_oneof![
        3 => prop::collection::vec(byte_mutation(), 1..4).prop_map(move |m| mutate(module.clone(), &m)),
        1 => prop::collection::vec(any::<u8>(), 0..128),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| [b"\0asm\x01\0\0\0".to_vec(), b].concat()),
    ];
    (segment(), bytes).prop_map(|((name, _), bytes)| Case {
        expect: if plugin_name_refused(&name) {
            Expect::Refused("invalid plugin name")
        } else {
            Expect::Any
        },
        request: Request::new("PUT", format!("/v1/plugins/{name}")).body(bytes),
    })
}

/// Whether docs/plugins.md refuses `name` (as sent, percent-encoded): not
/// `[a-z_][a-z0-9_]{0,62}` (case-insensitive), or `ebb_` (reserved, as
/// for tables) once that fix is in. Escaped names are not judged.
fn plugin_name_refused(name: &str) -> bool {
    if name.contains('%') {
        return false;
    }
    let lower = name.to_ascii_lowercase();
    let shape = !lower.is_empty()
        && lower.len() <= 63
        && lower
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !lower.as_bytes()[0].is_ascii_digit();
    !shape || lower.starts_with("ebb_")
}

const METHODS: &[&str] = &["GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "FOO"];

/// Requests without a meaningful body: every route and some that do not
/// exist, any method, random segments and query strings.
fn bare_case() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![
            "/v1/tables/{t}/keys/{k}",
            "/v1/tables/{t}/keys/",
            "/v1/tables/{t}/expiry-handler",
            "/v1/tables/{t}/expiry/dead-letters",
            "/v1/tables/{t}/expiry/dead-letters/redrive",
            "/v1/tables/{t}/batch",
            "/v1/tables",
            "/v1/sql",
            "/v1/plugins",
            "/v1/plugins/{t}",
            "/health",
            "/metrics",
            "/v1/tables/{t}",
            "/v1/{t}",
            "/{t}",
            "//v1//tables",
            "/v1/tables/{t}/keys/{k}/{k}",
        ]),
        prop::sample::select(METHODS),
        segment(),
        key_segment(),
        query_string(),
    )
        .prop_map(|(template, method, (t, _), k, (q, unknown))| {
            let path = template.replace("{t}", &t).replace("{k}", &k);
            // Every /v1 route refuses query parameters it does not take.
            let expect = if unknown && template.starts_with("/v1/") {
                Expect::Refused("unknown query parameter")
            } else if template == "/v1/tables/{t}/keys/"
                && matches!(method, "GET" | "PUT" | "DELETE")
            {
                Expect::Exactly(400, "invalid_request")
            } else {
                Expect::Any
            };
            let mut request = Request::new(method, format!("{path}{q}"));
            if matches!(method, "PUT" | "POST" | "PATCH") {
                request = request.body(Vec::new());
            }
            Case { request, expect }
        })
}

pub fn case() -> impl Strategy<Value = Case> {
    prop_oneof![
        3 => body_case(),
        2 => bare_case(),
    ]
}
