//! `POST /v1/tables/{t}/batch`: many puts and deletes in one request, each
//! with its own outcome.

use std::borrow::Cow;

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;

use super::AppState;
use super::body::{path, query, read_limited};
use super::error::ApiError;
use super::kv::{WriteParams, durability, expiry, parse_version};
use ebb_host::Version;
use ebb_host::write::{BatchItem, BatchOp, BatchOutcome, Condition};

/// One item as sent, parsed straight from its JSON text: no `Value` tree
/// per item, and the op borrowed from the body when it has no escapes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Item<'a> {
    #[serde(default = "default_op", borrow)]
    op: Cow<'a, str>,
    key: String,
    value: Option<ItemValue>,
    ttl_ms: Option<u64>,
    expires_at_ms: Option<u64>,
    if_version: Option<String>,
    if_absent: Option<bool>,
}

fn default_op<'a>() -> Cow<'a, str> {
    Cow::Borrowed("put")
}

/// A value: UTF-8 text, or bytes as `{"base64": "..."}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ItemValue {
    Text(String),
    Base64 { base64: String },
}

fn parse_item(item: Item<'_>) -> Result<BatchItem, ApiError> {
    let condition = match (&item.if_version, item.if_absent) {
        (Some(_), Some(true)) => {
            return Err(ApiError::invalid_request(
                "give either if_version or if_absent, not both",
            ));
        }
        (Some(version), _) => Condition::Version(parse_version(version)?),
        (None, Some(true)) => Condition::Absent,
        (None, _) => Condition::Always,
    };
    Ok(parse_op(item)?.when(condition))
}

fn parse_op(item: Item<'_>) -> Result<BatchOp, ApiError> {
    match item.op.as_ref() {
        "put" => {
            let value = match item.value {
                Some(ItemValue::Text(text)) => Bytes::from(text),
                Some(ItemValue::Base64 { base64 }) => base64::engine::general_purpose::STANDARD
                    .decode(base64.as_bytes())
                    .map(Bytes::from)
                    .map_err(|e| ApiError::invalid_request(format!("bad base64 value: {e}")))?,
                None => {
                    return Err(ApiError::invalid_request(
                        "a put needs a value: a JSON string or {\"base64\": \"...\"}",
                    ));
                }
            };
            Ok(BatchOp::Put {
                key: item.key,
                value,
                expiry: expiry(item.ttl_ms, item.expires_at_ms)?,
            })
        }
        "delete" => {
            if item.value.is_some() || item.ttl_ms.is_some() || item.expires_at_ms.is_some() {
                return Err(ApiError::invalid_request(
                    "a delete takes only a key (no value, ttl_ms or expires_at_ms)",
                ));
            }
            Ok(BatchOp::Delete { key: item.key })
        }
        other => Err(ApiError::invalid_request(format!(
            "unknown op {other:?}; use \"put\" or \"delete\""
        ))),
    }
}

/// One item's JSON text parsed and checked. `line` is its NDJSON line
/// (1-based), whose text may not be JSON at all; an array's items are
/// known to be JSON.
fn item_from_json(text: &[u8], line: Option<usize>) -> Result<BatchItem, ApiError> {
    let item = serde_json::from_slice::<Item<'_>>(text).map_err(|e| match line {
        Some(n) if !e.is_data() => ApiError::invalid_request(format!("line {n} is not JSON: {e}")),
        _ => ApiError::invalid_request(format!("bad batch item: {e}")),
    })?;
    parse_item(item)
}

/// Split a body into parsed items: a JSON array, or NDJSON (one object per
/// line, blank lines ignored). A line that is not JSON, or an item that is
/// not a valid put or delete, is that item's error; an array that does not
/// parse fails the whole request.
fn split_items(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Vec<Result<BatchItem, ApiError>>, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let is_array = if content_type.starts_with("application/x-ndjson") {
        false
    } else {
        content_type.starts_with("application/json") || first == Some(&b'[')
    };
    if is_array {
        // Each item is kept as its text: one bad item fails alone.
        let items: Vec<&RawValue> = serde_json::from_slice(body).map_err(|e| {
            ApiError::invalid_request(format!("batch body is not a JSON array: {e}"))
        })?;
        return Ok(items
            .into_iter()
            .map(|raw| item_from_json(raw.get().as_bytes(), None))
            .collect());
    }
    Ok(body
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, line)| line.iter().any(|b| !b.is_ascii_whitespace()))
        .map(|(n, line)| item_from_json(line, Some(n + 1)))
        .collect())
}

/// A version written as its text, with no `String` in between.
struct VersionText<'a>(&'a Version);

impl Serialize for VersionText<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self.0)
    }
}

/// The answer of an item that was written.
#[derive(Serialize)]
struct WrittenItem<'a> {
    status: u16,
    version: VersionText<'a>,
}

/// Append one item's result to the answer being written.
fn write_result(answer: &mut Vec<u8>, outcome: Result<BatchOutcome, ApiError>) {
    let written = match outcome {
        Ok(BatchOutcome::Written(version)) => serde_json::to_writer(
            &mut *answer,
            &WrittenItem {
                status: 200,
                version: VersionText(&version),
            },
        ),
        Ok(BatchOutcome::NotFound) => {
            let error = ApiError::not_found("key not found (absent, deleted or expired)");
            let mut body = error.body();
            body["status"] = json!(404);
            serde_json::to_writer(&mut *answer, &body)
        }
        Err(error) => {
            let mut body = error.body();
            body["status"] = json!(error.status.as_u16());
            serde_json::to_writer(&mut *answer, &body)
        }
    };
    written.expect("writing JSON to a Vec cannot fail");
}

/// `POST /v1/tables/{t}/batch`.
pub async fn batch(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: Result<Query<WriteParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let table = path(target)?;
    let durability = durability(query(params)?.durability.as_deref())?;
    let table = app.node.table(&table)?;
    let limits = &app.limits;
    let body = read_limited(
        &headers,
        body,
        limits.max_body_bytes,
        "the batch body",
        "--max-body-bytes",
    )
    .await?;
    let items = split_items(&headers, &body)?;
    if items.len() > limits.max_batch_items {
        return Err(ApiError::too_large(
            format!(
                "batch has {} items; the limit is {} (split it into several requests)",
                items.len(),
                limits.max_batch_items
            ),
            limits.max_batch_items,
        ));
    }
    // Valid items go to the table; each invalid one keeps its error in
    // its place.
    let mut ops = Vec::with_capacity(items.len());
    let slots: Vec<Option<ApiError>> = items
        .into_iter()
        .map(|item| match item {
            Ok(op) => {
                ops.push(op);
                None
            }
            Err(error) => Some(error),
        })
        .collect();
    let mut applied = table.batch_items(ops, durability).await.into_iter();
    let mut answer = Vec::with_capacity(16 + slots.len() * 64);
    answer.extend_from_slice(b"{\"results\":[");
    for (n, slot) in slots.into_iter().enumerate() {
        if n > 0 {
            answer.push(b',');
        }
        let outcome = match slot {
            Some(error) => Err(error),
            None => applied
                .next()
                .expect("one outcome per valid item")
                .map_err(ApiError::from),
        };
        write_result(&mut answer, outcome);
    }
    answer.extend_from_slice(b"]}");
    Ok(([(header::CONTENT_TYPE, "application/json")], answer).into_response())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn parsed(content_type: &str, body: &str) -> Vec<Result<BatchItem, ApiError>> {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, content_type.parse().unwrap());
        split_items(&headers, body.as_bytes()).unwrap()
    }

    fn fails_with(item: &Result<BatchItem, ApiError>, needle: &str) {
        let message = &item.as_ref().expect_err("an error").message;
        assert!(message.contains(needle), "{message}");
    }

    /// Each NDJSON line parses alone: a line that is not JSON says so with
    /// its number, JSON that is not an item says why, and an op written
    /// with escapes is read like a plain one.
    #[test]
    fn ndjson_lines_fail_alone_with_what_is_wrong() {
        let body = concat!(
            "{\"key\":\"a\",\"value\":\"1\"}\n",
            "\n",
            "not json\n",
            "{\"op\":\"d\\u0065lete\",\"key\":\"b\"}\n",
            "{\"key\":\"c\",\"value\":\"1\",\"extra\":1}\n",
            "5\n",
            "{\"op\":\"frobnicate\",\"key\":\"d\"}\n",
            "{\"op\":null,\"key\":\"e\",\"value\":\"1\"}\n",
            "{\"key\":\"f\",\"value\":{\"base64\":\"AP8=\"},\"ttl_ms\":5}",
        );
        let items = parsed("application/x-ndjson", body);
        assert_eq!(items.len(), 8, "the blank line is skipped");
        assert_eq!(
            items[0].as_ref().unwrap().op,
            BatchOp::Put {
                key: "a".into(),
                value: Bytes::from_static(b"1"),
                expiry: ebb_host::write::Expiry::Never,
            }
        );
        fails_with(&items[1], "line 3 is not JSON");
        assert_eq!(
            items[2].as_ref().unwrap().op,
            BatchOp::Delete { key: "b".into() }
        );
        fails_with(&items[3], "unknown field `extra`");
        fails_with(&items[4], "bad batch item");
        fails_with(&items[5], "\"frobnicate\"");
        fails_with(&items[6], "bad batch item"); // an op is a string
        let BatchOp::Put { value, .. } = &items[7].as_ref().unwrap().op else {
            panic!("a put");
        };
        assert_eq!(&value[..], b"\x00\xff");
    }

    /// An array's bad item fails alone; an array that is not JSON fails
    /// the request.
    #[test]
    fn array_items_fail_alone() {
        let items = parsed(
            "application/json",
            r#"[{"key":"a","value":"1"}, {"key":"b"}, 7, {"key":"c","value":"2","if_absent":true}]"#,
        );
        assert_eq!(items.len(), 4);
        assert!(items[0].is_ok());
        fails_with(&items[1], "needs a value");
        fails_with(&items[2], "bad batch item");
        assert_eq!(items[3].as_ref().unwrap().condition, Condition::Absent);
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
        let error = split_items(&headers, b"[{\"key\": ").unwrap_err();
        assert!(
            error.message.contains("not a JSON array"),
            "{}",
            error.message
        );
    }

    /// The answer written item by item is the JSON it was when built as
    /// `Value`s, writers that need escaping included.
    #[test]
    fn results_are_written_as_json() {
        let version = |writer: &str| Version {
            hlc_ms: 1_767_225_600_000,
            counter: 2,
            writer: Arc::from(writer),
        };
        let outcomes = [
            Ok(BatchOutcome::Written(version("n1"))),
            Ok(BatchOutcome::Written(version("a \"quoted\\ name\u{1}"))),
            Ok(BatchOutcome::NotFound),
            Err(ApiError::invalid_request("line 3 is not JSON")),
        ];
        let mut answer = Vec::new();
        let mut expected = Vec::new();
        for outcome in outcomes {
            expected.push(match &outcome {
                Ok(BatchOutcome::Written(version)) => {
                    json!({"status": 200, "version": version.to_string()})
                }
                Ok(BatchOutcome::NotFound) => json!({"status": 404, "error": {
                    "code": "not_found",
                    "message": "key not found (absent, deleted or expired)"}}),
                Err(_) => json!({"status": 400, "error": {
                    "code": "invalid_request", "message": "line 3 is not JSON"}}),
            });
            answer.clear();
            write_result(&mut answer, outcome);
            let written: serde_json::Value = serde_json::from_slice(&answer).unwrap();
            assert_eq!(&written, expected.last().unwrap());
        }
    }
}
