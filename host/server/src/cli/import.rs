//! `ebb import`: stream an NDJSON file into a table in batches, with progress.
//!
//! Each line is a batch item of `POST /v1/tables/{t}/batch`, which includes
//! the lines `ebb export` writes (`{"key", "value", "expires_at_ms"?}`); a
//! line whose `expires_at_ms` has already passed is skipped and counted,
//! never written.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::client::{Client, ClientError, encode_segment};

/// Largest batch body the importer sends (the server's default limit is 32 MiB).
const MAX_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// What an import did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Items written (or deletes applied).
    pub written: u64,
    /// Items the server refused, with their line numbers and messages.
    pub failed: Vec<(u64, String)>,
    /// Lines skipped because their `expires_at_ms` had already passed.
    pub expired: u64,
}

/// Whether `line` is an item whose `expires_at_ms` is at or before `now_ms`
/// (such a record would be invisible at once). Lines that are not JSON
/// objects are left to the server to judge.
pub fn already_expired(line: &[u8], now_ms: u64) -> bool {
    #[derive(serde::Deserialize)]
    struct Deadline {
        expires_at_ms: Option<u64>,
    }
    serde_json::from_slice::<Deadline>(line)
        .ok()
        .and_then(|item| item.expires_at_ms)
        .is_some_and(|at| at <= now_ms)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn send(
    client: &Client,
    path: &str,
    batch: &mut Vec<u8>,
    lines: &mut Vec<u64>,
    summary: &mut ImportSummary,
) -> Result<(), ClientError> {
    if lines.is_empty() {
        return Ok(());
    }
    let reply = client.send("POST", path, Some((batch, "application/x-ndjson")))?;
    let json = reply.json()?;
    let results = json["results"]
        .as_array()
        .ok_or_else(|| ClientError::Protocol("batch answer has no results".into()))?;
    if results.len() != lines.len() {
        return Err(ClientError::Protocol(format!(
            "sent {} items, got {} results",
            lines.len(),
            results.len()
        )));
    }
    for (line, result) in lines.iter().zip(results) {
        match result["status"].as_u64() {
            Some(200) | Some(404) => summary.written += 1,
            _ => summary.failed.push((
                *line,
                result["error"]["message"]
                    .as_str()
                    .unwrap_or("unknown error")
                    .to_string(),
            )),
        }
    }
    batch.clear();
    lines.clear();
    Ok(())
}

/// Import `file` (`-` for stdin) into `table`, `batch_size` items a request.
pub fn import(
    client: &Client,
    file: &Path,
    table: &str,
    batch_size: usize,
    durability: &str,
) -> Result<ImportSummary, ClientError> {
    let (reader, total): (Box<dyn Read>, Option<u64>) = if file == Path::new("-") {
        (Box::new(std::io::stdin()), None)
    } else {
        let opened = File::open(file)
            .map_err(|e| ClientError::Protocol(format!("cannot open {}: {e}", file.display())))?;
        let len = opened.metadata().ok().map(|m| m.len());
        (Box::new(opened), len)
    };
    let progress = match total {
        Some(len) => ProgressBar::new(len).with_style(
            ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {msg} ETA {eta}")
                .expect("valid template"),
        ),
        None => ProgressBar::new_spinner(),
    };
    let path = format!(
        "/v1/tables/{}/batch?durability={durability}",
        encode_segment(table)
    );
    let started = Instant::now();
    let mut summary = ImportSummary::default();
    let mut batch = Vec::new();
    let mut lines = Vec::new();
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| ClientError::Protocol(format!("cannot read input: {e}")))?;
        if read == 0 {
            break;
        }
        number += 1;
        progress.inc(read as u64);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if already_expired(&line, now_ms()) {
            summary.expired += 1;
            continue;
        }
        if batch.len() + line.len() > MAX_BATCH_BYTES || lines.len() >= batch_size {
            send(client, &path, &mut batch, &mut lines, &mut summary)?;
            let done = summary.written + summary.failed.len() as u64;
            let rate = done as f64 / started.elapsed().as_secs_f64().max(0.001);
            progress.set_message(format!("{done} records, {rate:.0} records/s"));
        }
        batch.extend_from_slice(&line);
        if !line.ends_with(b"\n") {
            batch.push(b'\n');
        }
        lines.push(number);
    }
    send(client, &path, &mut batch, &mut lines, &mut summary)?;
    progress.finish_and_clear();
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_passed_deadline_skips_a_line() {
        let at = |ms: u64| format!(r#"{{"key":"k","value":"v","expires_at_ms":{ms}}}"#);
        assert!(already_expired(at(1000).as_bytes(), 1000));
        assert!(already_expired(at(999).as_bytes(), 1000));
        assert!(!already_expired(at(1001).as_bytes(), 1000));
        assert!(!already_expired(br#"{"key":"k","value":"v"}"#, 1000));
        assert!(!already_expired(br#"{"key":"k","ttl_ms":5}"#, 1000));
        assert!(!already_expired(b"not json", 1000));
    }
}
