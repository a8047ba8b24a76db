//! `ebb plugin call` on an expiry or change handler: events read from
//! JSON, records for `ebb.get` from `--record`, and the handler's answer
//! printed as actions and retries.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use ebb_host::plugin::RecordReader;
use ebb_proto::plugin::v1 as abi;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The events of a call, one JSON object per argument:
/// `{"key": "s1", "value": "alice", "table": "sessions", ...}`. `key` is
/// required; `table` defaults to `t`, `value` to empty, `attempt` to 1,
/// `version` to `1.0@local`, `expires_at_ms` and `observed_at_ms` to 0,
/// `id` (hex) to the SHA-256 of table, key and version.
pub fn events(args: &[String]) -> Result<Vec<abi::ExpiryEvent>, String> {
    parse_each(
        args,
        r#"{"key": "s1", "value": "alice", "table": "sessions"}"#,
        event,
    )
}

/// The events of a change handler's call, one JSON object per argument:
/// `{"key": "o/1", "value": "x", "table": "orders", ...}`. `key` is
/// required; `table` defaults to `t`, `value` to empty, `deleted` to
/// false, `new_version` to `1.0@local`, `old_version` to none,
/// `expires_at_ms` to 0, `written_at_ms` to the new version's time,
/// `attempt` to 1, `id` (hex) to the SHA-256 of table, key and new version.
pub fn change_events(args: &[String]) -> Result<Vec<abi::ChangeEvent>, String> {
    parse_each(
        args,
        r#"{"key": "o/1", "value": "x", "table": "orders"}"#,
        change_event,
    )
}

/// Each argument parsed by `parse`, an error naming the argument; at
/// least one is required (`example` shows one).
fn parse_each<T>(
    args: &[String],
    example: &str,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    if args.is_empty() {
        return Err(format!(
            "give the handler's events, one JSON object each: '{example}'"
        ));
    }
    args.iter()
        .enumerate()
        .map(|(index, text)| parse(text).map_err(|e| format!("event {}: {e}", index + 1)))
        .collect()
}

fn change_event(text: &str) -> Result<abi::ChangeEvent, String> {
    let known = [
        "id",
        "table",
        "key",
        "value",
        "deleted",
        "old_version",
        "new_version",
        "expires_at_ms",
        "written_at_ms",
        "attempt",
    ];
    let fields = object(text, &known, "change events")?;
    let field = Fields(&fields);
    let key = field.key()?;
    let table = field.text("table", "t")?;
    let new_version = field.text("new_version", "1.0@local")?;
    let parsed: ebb_host::Version = new_version
        .parse()
        .map_err(|e| format!("new_version: {e}"))?;
    let old_version = field.text("old_version", "")?;
    if !old_version.is_empty() {
        old_version
            .parse::<ebb_host::Version>()
            .map_err(|e| format!("old_version: {e}"))?;
    }
    let deleted = match fields.get("deleted") {
        None => false,
        Some(Value::Bool(deleted)) => *deleted,
        Some(other) => return Err(format!("deleted must be true or false, not {other}")),
    };
    let value = match fields.get("value") {
        None => Vec::new(),
        Some(_) if deleted => return Err("a deleted record has no value".into()),
        Some(value) => bytes(value).map_err(|e| format!("value: {e}"))?,
    };
    Ok(abi::ChangeEvent {
        id: field.id(&table, &key, &new_version)?.into(),
        key,
        old_version,
        deleted,
        value: value.into(),
        expires_at_ms: field.number("expires_at_ms", 0)?,
        written_at_ms: field.number("written_at_ms", parsed.hlc_ms)?,
        attempt: u32::try_from(field.number("attempt", 1)?).map_err(|_| "attempt is too large")?,
        new_version,
        table,
    })
}

/// The fields of one JSON object, refusing any not in `known` (the fields
/// `what` take).
fn object(
    text: &str,
    known: &[&str],
    what: &str,
) -> Result<serde_json::Map<String, Value>, String> {
    let json: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {text}"))?;
    let Value::Object(fields) = json else {
        return Err(format!("not a JSON object: {text}"));
    };
    if let Some(unknown) = fields.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!(
            "unknown field {unknown:?}; {what} take {}",
            known.join(", ")
        ));
    }
    Ok(fields)
}

/// Typed reads of an event's fields, with defaults.
struct Fields<'a>(&'a serde_json::Map<String, Value>);

impl Fields<'_> {
    fn text(&self, name: &str, default: &str) -> Result<String, String> {
        match self.0.get(name) {
            None => Ok(default.to_string()),
            Some(Value::String(text)) => Ok(text.clone()),
            Some(other) => Err(format!("{name} must be a string, not {other}")),
        }
    }

    fn number(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.0.get(name) {
            None => Ok(default),
            Some(value) => value
                .as_u64()
                .ok_or_else(|| format!("{name} must be a whole number, not {value}")),
        }
    }

    fn key(&self) -> Result<String, String> {
        match self.0.get("key") {
            Some(Value::String(key)) => Ok(key.clone()),
            _ => Err("key (a string) is required".into()),
        }
    }

    /// The `id` given (hex), or the SHA-256 of table, key and version.
    fn id(&self, table: &str, key: &str, version: &str) -> Result<Vec<u8>, String> {
        match self.0.get("id") {
            Some(Value::String(hex)) => decode_hex(hex).ok_or_else(|| "id must be hex".into()),
            Some(other) => Err(format!("id must be a hex string, not {other}")),
            None => Ok(Sha256::digest(format!("{table}\0{key}\0{version}")).to_vec()),
        }
    }
}

fn event(text: &str) -> Result<abi::ExpiryEvent, String> {
    let known = [
        "id",
        "table",
        "key",
        "value",
        "version",
        "expires_at_ms",
        "observed_at_ms",
        "attempt",
    ];
    let fields = object(text, &known, "events")?;
    let field = Fields(&fields);
    let key = field.key()?;
    let table = field.text("table", "t")?;
    let version = field.text("version", "1.0@local")?;
    let parsed: ebb_host::Version = version.parse().map_err(|e| format!("version: {e}"))?;
    let value = match fields.get("value") {
        None => Vec::new(),
        Some(value) => bytes(value).map_err(|e| format!("value: {e}"))?,
    };
    let id = field.id(&table, &key, &version)?;
    Ok(abi::ExpiryEvent {
        id: id.into(),
        table,
        key,
        value: value.into(),
        version_ms: parsed.hlc_ms,
        version_counter: parsed.counter,
        expires_at_ms: field.number("expires_at_ms", 0)?,
        observed_at_ms: field.number("observed_at_ms", 0)?,
        attempt: u32::try_from(field.number("attempt", 1)?).map_err(|_| "attempt is too large")?,
        version,
    })
}

/// A value as JSON: text, or `{"base64": "..."}` for bytes.
fn bytes(value: &Value) -> Result<Vec<u8>, String> {
    match value {
        Value::String(text) => Ok(text.as_bytes().to_vec()),
        Value::Object(object) if object.len() == 1 => match object.get("base64") {
            Some(Value::String(encoded)) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| format!("bad base64: {e}")),
            _ => Err(r#"bytes are {"base64": "..."}"#.into()),
        },
        other => Err(format!(
            r#"a value is a string or {{"base64": "..."}}, not {other}"#
        )),
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What `ebb.get` answers in a local call: the `--record TABLE/KEY=VALUE`
/// records; every other key is absent.
#[derive(Debug, Default)]
pub struct Records(BTreeMap<(String, String), abi::ReadRecord>);

impl Records {
    /// From `--record` arguments.
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut records = BTreeMap::new();
        for arg in args {
            let (place, value) = arg
                .split_once('=')
                .ok_or_else(|| format!("--record {arg:?}: write TABLE/KEY=VALUE"))?;
            let (table, key) = place
                .split_once('/')
                .ok_or_else(|| format!("--record {arg:?}: write TABLE/KEY=VALUE"))?;
            records.insert(
                (table.to_string(), key.to_string()),
                abi::ReadRecord {
                    value: value.as_bytes().to_vec().into(),
                    version: "1.0@local".into(),
                    expires_at_ms: 0,
                },
            );
        }
        Ok(Self(records))
    }
}

impl RecordReader for Records {
    fn get(
        &self,
        table: &str,
        key: &str,
        _timeout: Duration,
    ) -> Result<Option<abi::ReadRecord>, String> {
        Ok(self.0.get(&(table.to_string(), key.to_string())).cloned())
    }
}

/// A handler's answer as JSON: `{"actions": [...], "failed": [...]}`, each
/// action `{"op", "table", "key", "value"?, "ttl_ms"?, "if_version"?,
/// "if_absent"?}`.
pub fn answer_json(result: &abi::ExpiryResult) -> Value {
    let actions: Vec<Value> = result
        .actions
        .iter()
        .map(|action| match &action.action {
            Some(abi::action::Action::Put(put)) => {
                let mut out = json!({
                    "op": "put",
                    "table": put.table,
                    "key": put.key,
                    "value": ebb_host::codec::bytes_json(&put.value),
                    "ttl_ms": put.ttl_ms,
                });
                if !put.if_version.is_empty() {
                    out["if_version"] = json!(put.if_version);
                }
                if put.if_absent {
                    out["if_absent"] = json!(true);
                }
                out
            }
            Some(abi::action::Action::Delete(delete)) => {
                let mut out = json!({"op": "delete", "table": delete.table, "key": delete.key});
                if !delete.if_version.is_empty() {
                    out["if_version"] = json!(delete.if_version);
                }
                out
            }
            None => json!({"op": null}),
        })
        .collect();
    json!({ "actions": actions, "failed": result.failed })
}

/// A handler's answer for people: one line per action and retry.
pub fn answer_lines(result: &abi::ExpiryResult) -> Vec<String> {
    let mut lines: Vec<String> = result
        .actions
        .iter()
        .map(|action| match &action.action {
            Some(abi::action::Action::Put(put)) => {
                let ttl = match put.ttl_ms {
                    0 => String::new(),
                    ms => format!(" ttl {ms} ms"),
                };
                format!(
                    "put {}/{} = {}{ttl}{}",
                    put.table,
                    put.key,
                    String::from_utf8_lossy(&put.value),
                    condition(&put.if_version, put.if_absent)
                )
            }
            Some(abi::action::Action::Delete(delete)) => format!(
                "delete {}/{}{}",
                delete.table,
                delete.key,
                condition(&delete.if_version, false)
            ),
            None => "empty action (the host refuses it)".into(),
        })
        .collect();
    lines.extend(
        result
            .failed
            .iter()
            .map(|index| format!("retry event {}", index + 1)),
    );
    if lines.is_empty() {
        lines.push("no actions, no retries".into());
    }
    lines
}

fn condition(if_version: &str, if_absent: bool) -> String {
    match (if_version.is_empty(), if_absent) {
        (false, _) => format!(" if version {if_version}"),
        (true, true) => " if absent".into(),
        (true, false) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_read_from_json_with_defaults_and_clear_errors() {
        let events = events(&[
            r#"{"key": "s1", "value": "alice", "table": "sessions"}"#.into(),
            r#"{"key": "b", "value": {"base64": "AP8="}, "attempt": 3, "id": "00ff"}"#.into(),
        ])
        .unwrap();
        assert_eq!(
            (
                events[0].table.as_str(),
                &events[0].value[..],
                events[0].attempt
            ),
            ("sessions", &b"alice"[..], 1)
        );
        assert_eq!(events[0].id.len(), 32);
        assert_eq!(
            (&events[1].value[..], events[1].attempt, &events[1].id[..]),
            (&[0u8, 255][..], 3, &[0u8, 255][..])
        );
        for (bad, says) in [
            ("{}", "key"),
            ("[1]", "not a JSON object"),
            (r#"{"key": "k", "vaule": "x"}"#, "unknown field \"vaule\""),
            (r#"{"key": "k", "version": "x"}"#, "not a version"),
            ("nope", "not JSON"),
        ] {
            let error = super::events(&[bad.into()]).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
        assert!(super::events(&[]).unwrap_err().contains("one JSON object"));
    }

    #[test]
    fn change_events_read_from_json_with_defaults_and_clear_errors() {
        let events = change_events(&[
            r#"{"key": "o/1", "value": "x", "table": "orders", "old_version": "5.0@n", "new_version": "7.1@n"}"#.into(),
            r#"{"key": "o/2", "deleted": true}"#.into(),
        ])
        .unwrap();
        let first = &events[0];
        assert_eq!(
            (
                first.table.as_str(),
                &first.value[..],
                first.old_version.as_str(),
                first.new_version.as_str(),
                first.written_at_ms,
                first.attempt
            ),
            ("orders", &b"x"[..], "5.0@n", "7.1@n", 7, 1)
        );
        assert_eq!(first.id.len(), 32);
        assert!(events[1].deleted && events[1].old_version.is_empty());
        for (bad, says) in [
            (
                r#"{"key": "k", "version": "1.0@n"}"#,
                "unknown field \"version\"",
            ),
            (r#"{"key": "k", "deleted": true, "value": "x"}"#, "no value"),
            (r#"{"key": "k", "deleted": "yes"}"#, "true or false"),
            (r#"{"key": "k", "old_version": "x"}"#, "old_version"),
        ] {
            let error = change_events(&[bad.into()]).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn records_answer_reads_and_answers_print() {
        let records = Records::parse(&["cfg/prefix=p:".into()]).unwrap();
        let timeout = Duration::from_secs(1);
        assert_eq!(
            &records
                .get("cfg", "prefix", timeout)
                .unwrap()
                .unwrap()
                .value[..],
            b"p:"
        );
        assert_eq!(records.get("cfg", "other", timeout).unwrap(), None);
        assert!(Records::parse(&["nokey".into()]).is_err());
        let result = abi::ExpiryResult {
            actions: vec![abi::Action {
                action: Some(abi::action::Action::Put(abi::Put {
                    table: "a".into(),
                    key: "k".into(),
                    value: b"v".to_vec().into(),
                    if_absent: true,
                    ..abi::Put::default()
                })),
            }],
            failed: vec![0],
        };
        assert_eq!(
            answer_lines(&result),
            vec!["put a/k = v if absent", "retry event 1"]
        );
        assert_eq!(answer_json(&result)["actions"][0]["if_absent"], true);
    }
}
