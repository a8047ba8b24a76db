//! `ebb export`: write a table's live records as NDJSON, one
//! `{"key", "value", "expires_at_ms"?}` line each, the format `ebb import`
//! reads back.

use std::io::Write;

use serde_json::{Map, Value, json};

use super::client::{Client, ClientError};

/// Rows asked for per SQL page.
const PAGE_SIZE: usize = 1000;

/// What an export wrote.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Lines written.
    pub records: u64,
}

/// The query an export runs: key, value and deadline of every live record
/// of `table` matching `filter` (a SQL condition), in key order.
pub fn export_sql(table: &str, filter: Option<&str>) -> String {
    let mut sql = format!("SELECT key, value, _expires_at FROM {table}");
    if let Some(filter) = filter {
        sql.push_str(&format!(" WHERE {filter}"));
    }
    sql
}

/// One export line from a result row `[key, value, _expires_at]`; `value`
/// comes as the SQL endpoint encodes bytes (a string when valid UTF-8, else
/// `{"base64": ...}`), which is exactly the export format.
fn line(row: &[Value]) -> Result<Value, ClientError> {
    let [key, value, expires] = row else {
        return Err(ClientError::Protocol(format!(
            "expected rows of 3 columns, got {}",
            Value::Array(row.to_vec())
        )));
    };
    let mut out = Map::new();
    out.insert("key".into(), key.clone());
    out.insert("value".into(), value.clone());
    if !expires.is_null() {
        out.insert("expires_at_ms".into(), expires.clone());
    }
    Ok(Value::Object(out))
}

/// Export `table` (rows matching `filter`) into `out`, following cursors
/// page by page. A failing page stops the export with its error; what was
/// written before stays written.
pub fn export(
    client: &Client,
    table: &str,
    filter: Option<&str>,
    out: &mut dyn Write,
) -> Result<ExportSummary, ClientError> {
    let mut summary = ExportSummary::default();
    let mut body = json!({ "sql": export_sql(table, filter), "page_size": PAGE_SIZE });
    let write_error = |e: std::io::Error| ClientError::Local(format!("cannot write output: {e}"));
    loop {
        let reply = client.send(
            "POST",
            "/v1/sql",
            Some((body.to_string().as_bytes(), "application/json")),
        )?;
        let page = reply.json()?;
        let rows = page["rows"]
            .as_array()
            .ok_or_else(|| ClientError::Protocol("SQL answer has no rows".into()))?;
        for row in rows {
            let row = row
                .as_array()
                .ok_or_else(|| ClientError::Protocol("SQL row is not an array".into()))?;
            serde_json::to_writer(&mut *out, &line(row)?).map_err(|e| write_error(e.into()))?;
            out.write_all(b"\n").map_err(write_error)?;
            summary.records += 1;
        }
        match page["cursor"].as_str() {
            Some(cursor) => body = json!({ "cursor": cursor }),
            None => break,
        }
    }
    out.flush().map_err(write_error)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_the_deadline_only_when_set() {
        let with = line(&[json!("k"), json!({"base64": "AP8="}), json!(17)]).unwrap();
        assert_eq!(
            with,
            json!({"key": "k", "value": {"base64": "AP8="}, "expires_at_ms": 17})
        );
        let without = line(&[json!("k"), json!("text"), Value::Null]).unwrap();
        assert_eq!(without, json!({"key": "k", "value": "text"}));
        assert!(line(&[json!("k")]).is_err());
    }

    #[test]
    fn the_filter_becomes_the_where_clause() {
        assert_eq!(
            export_sql("users", None),
            "SELECT key, value, _expires_at FROM users"
        );
        assert_eq!(
            export_sql("users", Some("key >= 'b'")),
            "SELECT key, value, _expires_at FROM users WHERE key >= 'b'"
        );
    }
}
