//! `ebb sql`: run queries and print them as a table, JSON, NDJSON or CSV.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

use serde_json::{Value, json};

use super::Format;
use super::client::{Client, ClientError};

/// What to run.
pub struct SqlOptions {
    /// Parameters, each JSON (`42`, `"text"`, `null`) or else taken as text.
    pub params: Vec<String>,
    /// Rows per page.
    pub page_size: Option<usize>,
    /// Follow cursors to the end.
    pub all: bool,
    /// `guarded` or `relaxed`.
    pub consistency: Option<String>,
    /// Continue from this cursor instead of running a query.
    pub cursor: Option<String>,
    /// In a cluster, how old the data may be (absent: linearizable).
    pub max_staleness: Option<std::time::Duration>,
}

impl SqlOptions {
    /// Add the options every request of a query carries to `body`.
    fn carry(&self, body: &mut Value) {
        if let Some(consistency) = &self.consistency {
            body["consistency"] = json!(consistency);
        }
        if let Some(bound) = self.max_staleness {
            body["max_staleness_ms"] = json!(bound.as_millis() as u64);
        }
    }
}

fn param(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

fn cell(value: &Value) -> String {
    match value {
        Value::Null => "NULL".into(),
        Value::String(s) => s.clone(),
        Value::Object(map) if map.contains_key("base64") => {
            format!("base64:{}", map["base64"].as_str().unwrap_or(""))
        }
        other => other.to_string(),
    }
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn print_table(columns: &[String], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count().min(60));
        }
    }
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| {
                let shown: String = if c.chars().count() > 60 {
                    c.chars().take(59).chain(std::iter::once('…')).collect()
                } else {
                    c.clone()
                };
                format!("{shown:<w$}")
            })
            .collect();
        println!("{}", parts.join(" | ").trim_end());
    };
    line(columns);
    println!(
        "{}",
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .join("-+-")
    );
    for row in rows {
        line(row);
    }
}

/// Run one query (or continuation) and print it.
pub fn run(
    client: &Client,
    format: Format,
    sql: Option<&str>,
    options: &SqlOptions,
) -> Result<ExitCode, ClientError> {
    let started = Instant::now();
    let mut body = json!({});
    if let Some(sql) = sql {
        body["sql"] = json!(sql);
    }
    if !options.params.is_empty() {
        body["params"] = Value::Array(options.params.iter().map(|p| param(p)).collect());
    }
    if let Some(cursor) = &options.cursor {
        body["cursor"] = json!(cursor);
    }
    if let Some(page_size) = options.page_size {
        body["page_size"] = json!(page_size);
    }
    options.carry(&mut body);
    if format == Format::Ndjson {
        // The server streams the whole result.
        let reply = client.send_with_accept(
            "POST",
            "/v1/sql",
            body.to_string().as_bytes(),
            "application/x-ndjson",
        )?;
        std::io::stdout().write_all(&reply.body).ok();
        let last = reply
            .body
            .split(|b| *b == b'\n')
            .rev()
            .find(|l| !l.is_empty())
            .unwrap_or_default();
        let failed = serde_json::from_slice::<Value>(last).is_ok_and(|v| v.get("error").is_some());
        return Ok(if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        });
    }
    let mut columns: Vec<String> = Vec::new();
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let mut scanned = 0;
    let mut cursor;
    let mut first: Option<Value> = None;
    loop {
        let reply = client.send(
            "POST",
            "/v1/sql",
            Some((body.to_string().as_bytes(), "application/json")),
        )?;
        let page = reply.json()?;
        if columns.is_empty() {
            columns = page["columns"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .map(|c| c["name"].as_str().unwrap_or("?").to_string())
                        .collect()
                })
                .unwrap_or_default();
        }
        rows.extend(
            page["rows"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| r.as_array().cloned().unwrap_or_default()),
        );
        scanned += page["stats"]["scanned"].as_u64().unwrap_or(0);
        cursor = page["cursor"].as_str().map(str::to_string);
        if first.is_none() {
            first = Some(page);
        }
        match (&cursor, options.all) {
            (Some(next), true) => {
                body = json!({ "cursor": next });
                options.carry(&mut body);
            }
            _ => break,
        }
    }
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    match format {
        Format::Json => {
            let mut out = first.unwrap_or_default();
            out["rows"] = Value::Array(rows.into_iter().map(Value::Array).collect());
            out["cursor"] = json!(cursor);
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
        Format::Csv => {
            println!(
                "{}",
                columns
                    .iter()
                    .map(|c| csv_field(c))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            for row in &rows {
                let fields: Vec<String> = row
                    .iter()
                    .map(|v| {
                        if v.is_null() {
                            String::new()
                        } else {
                            csv_field(&cell(v))
                        }
                    })
                    .collect();
                println!("{}", fields.join(","));
            }
        }
        Format::Human | Format::Ndjson => {
            let cells: Vec<Vec<String>> =
                rows.iter().map(|r| r.iter().map(cell).collect()).collect();
            print_table(&columns, &cells);
            let plural = if cells.len() == 1 { "" } else { "s" };
            println!(
                "({} row{plural}, {scanned} scanned, {elapsed:.1} ms)",
                cells.len()
            );
            if let Some(cursor) = &cursor {
                println!("more rows: rerun with --all, or continue with --cursor {cursor}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Read queries from stdin until EOF or `\q`: at a terminal, the line
/// editor of [`super::prompt`]; otherwise one query per line (a trailing
/// `;` is optional).
pub fn prompt(client: &Client, format: Format, options: &SqlOptions) -> ExitCode {
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    if interactive && std::io::stdout().is_terminal() {
        return super::prompt::interactive(client, format, options);
    }
    let mut failed = false;
    loop {
        if interactive {
            print!("ebb> ");
            let _ = std::io::stdout().flush();
        }
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let query = line.trim().trim_end_matches(';').trim();
        if query.is_empty() {
            continue;
        }
        if query == "\\q"
            || query.eq_ignore_ascii_case("exit")
            || query.eq_ignore_ascii_case("quit")
        {
            break;
        }
        if let Err(error) = run(client, format, Some(query), options) {
            eprintln!("error: {error}");
            failed = true;
        }
    }
    if failed && !interactive {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
