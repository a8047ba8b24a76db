//! `ebb import`: stream an NDJSON file into a table in batches, with progress.

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
