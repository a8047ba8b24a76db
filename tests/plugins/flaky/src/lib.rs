//! Test plugin `flaky`: expiry handlers that misbehave on request, for the
//! expiry tests (tests/expiry.rs, tests/expiry_limits.rs), and change
//! handlers that make delivery observable, for the change-handler tests.
//!
//! `copy` behaves by value prefix:
//!
//! - `poison…`: traps (panics), failing the whole call;
//! - `fail…`: asks for a retry of that event, and records the attempt as a
//!   put of `<table>_attempts/<key>:<attempt>`;
//! - `slow…`: spins for a while before handling the event normally;
//! - `spin…`: spins forever: only the handler deadline ends the call;
//! - `hog N…`: allocates (and touches) N MiB, then handles the event
//!   normally; past the plugin memory cap the allocation traps;
//! - `spam N…`: answers N puts `<table>_spam/<key>.<i>` for the event (and
//!   nothing else), to cross the per-event action limit;
//! - anything else: copied into `<table>_archive`, like the `archive` plugin.
//!
//! `stamp` copies every event into `<table>_archive` as
//! `<value> attempt=<attempt>`, so a test can read which delivery succeeded.
//!
//! `first` copies each event into `<table>_archive` only if that key is
//! absent there (`if_absent`), and deletes `<table>_lock/<key>` only if it
//! still holds the version the value names (`if_version`), so a test sees
//! conditions judged and skipped actions counted.
//!
//! `dedupe` reads (`ebb.get`): the prefix from the config record
//! `<table>_config/prefix`, and whether `<table>_seen/<hex id>` records the
//! event id already. A seen event is skipped (recorded as
//! `<table>_dupes/<key>`); a new one is recorded and written to
//! `<table>_out/<key>` as prefix + value, and when its value starts with
//! `twice` its first attempt asks for a retry, so the event comes again.
//!
//! `peek(table, key)`, a scalar function, tries `ebb.get` from SQL, where
//! the host refuses it.
//!
//! Replacing it with `archive` (same function name `copy`, no `stamp`)
//! "fixes" `copy`.
//!
//! Change handlers (the table `T` below is the binding config's
//! `{"table": "..."}`, parsed by hand since the plugin has no JSON crate):
//!
//! - `record` puts every event into `T` (default `seen`) at
//!   `<key>@<new_version>`, valued `deleted` for a delete and the written
//!   value otherwise, so a test can check that every acknowledged write's
//!   event was handled;
//! - `echo` puts every non-delete event back into its own table at its own
//!   key with `!` appended; writes by change handlers emit no events, so
//!   this must not loop;
//! - `count_writes` keeps a per-key write counter in `T` (default
//!   `counts`): `{"count": n, "last": "<new_version>"}`, read with
//!   `ebb.get` and written once per key and batch, conditioned on the
//!   version read (`if_version`, or `if_absent` for a new counter). A
//!   redelivered event is not counted again: see [`count_writes`].

use std::collections::{HashMap, HashSet};

use ebb_guest::{ChangeEvent, ChangeOutcome, ExpiryEvent, ExpiryOutcome};

/// Handle a batch as described in the module docs.
pub fn copy(events: &[ExpiryEvent]) -> ExpiryOutcome {
    let mut outcome = ExpiryOutcome::default();
    for (index, event) in events.iter().enumerate() {
        let value = event.value.as_slice();
        if value.starts_with(b"poison") {
            panic!("poison event {}", event.key);
        }
        if value.starts_with(b"fail") {
            let attempts = format!("{}_attempts", event.table);
            let key = format!("{}:{}", event.key, event.attempt);
            outcome.put(&attempts, &key, Vec::new(), 0);
            outcome.retry(index);
            continue;
        }
        if value.starts_with(b"slow") {
            spin(30_000_000);
        }
        if value.starts_with(b"spin") {
            loop {
                spin(1_000_000);
            }
        }
        if let Some(mib) = number_after(value, b"hog ") {
            hog(mib << 20);
        }
        if let Some(count) = number_after(value, b"spam ") {
            let table = format!("{}_spam", event.table);
            for i in 0..count {
                outcome.put(&table, &format!("{}.{i}", event.key), Vec::new(), 0);
            }
            continue;
        }
        outcome.put(
            &format!("{}_archive", event.table),
            &event.key,
            event.value.clone(),
            0,
        );
    }
    outcome
}

/// Copy each event into `<table>_archive` as `<value> attempt=<attempt>`.
pub fn stamp(events: &[ExpiryEvent]) -> ExpiryOutcome {
    let mut outcome = ExpiryOutcome::default();
    for event in events {
        let mut value = event.value.clone();
        value.extend_from_slice(format!(" attempt={}", event.attempt).as_bytes());
        outcome.put(&format!("{}_archive", event.table), &event.key, value, 0);
    }
    outcome
}

/// Conditional actions: see the module docs.
pub fn first(events: &[ExpiryEvent]) -> ExpiryOutcome {
    let mut outcome = ExpiryOutcome::default();
    for event in events {
        let archive = format!("{}_archive", event.table);
        outcome.put_if_absent(&archive, &event.key, event.value.clone(), 0);
        if let Ok(version) = std::str::from_utf8(&event.value) {
            let lock = format!("{}_lock", event.table);
            outcome.delete_if_version(&lock, &event.key, version);
        }
    }
    outcome
}

/// Reads before writing: see the module docs.
pub fn dedupe(events: &[ExpiryEvent]) -> Result<ExpiryOutcome, String> {
    let mut outcome = ExpiryOutcome::default();
    let Some(event) = events.first() else {
        return Ok(outcome);
    };
    let config = format!("{}_config", event.table);
    let prefix = ebb_guest::get(&config, "prefix")?
        .map(|record| record.value)
        .unwrap_or_default();
    for (index, event) in events.iter().enumerate() {
        let id: String = event.id.iter().map(|b| format!("{b:02x}")).collect();
        let seen = format!("{}_seen", event.table);
        if ebb_guest::get(&seen, &id)?.is_some() {
            let dupes = format!("{}_dupes", event.table);
            outcome.put(&dupes, &event.key, b"skipped".to_vec(), 0);
            continue;
        }
        outcome.put(&seen, &id, event.key.clone().into_bytes(), 0);
        let mut value = prefix.clone();
        value.extend_from_slice(&event.value);
        outcome.put(&format!("{}_out", event.table), &event.key, value, 0);
        if event.value.starts_with(b"twice") && event.attempt == 1 {
            outcome.retry(index);
        }
    }
    Ok(outcome)
}

/// `ebb.get` from SQL: always an error from the host.
pub fn peek(table: String, key: String) -> Result<Option<String>, String> {
    Ok(ebb_guest::get(&table, &key)?.map(|r| String::from_utf8_lossy(&r.value).into_owned()))
}

/// Put each event into the config's table (default `seen`) at
/// `<key>@<new_version>`: the written value, or `deleted` for a delete.
pub fn record(events: &[ChangeEvent]) -> ChangeOutcome {
    let table = configured_table("seen");
    let mut outcome = ChangeOutcome::default();
    for event in events {
        let value = if event.deleted {
            b"deleted".to_vec()
        } else {
            event.value.clone()
        };
        let key = format!("{}@{}", event.key, event.new_version);
        outcome.put(&table, &key, value, 0);
    }
    outcome
}

/// Put each non-delete event back into its own table and key with `!`
/// appended.
pub fn echo(events: &[ChangeEvent]) -> ChangeOutcome {
    let mut outcome = ChangeOutcome::default();
    for event in events.iter().filter(|event| !event.deleted) {
        let mut value = event.value.clone();
        value.push(b'!');
        outcome.put(&event.table, &event.key, value, 0);
    }
    outcome
}

/// A per-key write counter as `count_writes` stores it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Counter {
    /// Writes counted.
    count: u64,
    /// `new_version` of the last write counted; empty before the first.
    last: String,
}

impl Counter {
    /// The stored form: `{"count": n, "last": "..."}`.
    fn encode(&self) -> Vec<u8> {
        format!(
            r#"{{"count": {}, "last": {}}}"#,
            self.count,
            json_string(&self.last)
        )
        .into_bytes()
    }

    /// From the stored form; `None` when `bytes` is not one.
    fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let count = after_field(text, "count")?;
        let digits = count.bytes().take_while(u8::is_ascii_digit).count();
        let last = parse_json_string(after_field(text, "last")?)?;
        Some(Counter {
            count: count[..digits].parse().ok()?,
            last,
        })
    }
}

/// One key's counter during a call: as read, and as counted so far.
struct KeyCount {
    /// Version of the counter record read at the start; `None`: absent.
    read_version: Option<String>,
    /// The counter after the batch's events so far.
    counter: Counter,
    /// Versions counted: the `last` read, then this call's.
    counted: HashSet<String>,
    /// Index in the batch of the last event of this key whose version is
    /// the `last` read: it and the key's events before it were counted.
    counted_through: Option<usize>,
    /// Whether this call counted anything.
    changed: bool,
}

/// Count each event into its key's counter in the config's table (default
/// `counts`); see the module docs for the stored form.
///
/// Events of a key arrive in order and the counter's `last` is the newest
/// write it counted, so an event is skipped as a redelivery when its
/// `new_version` equals `last` (as read, or as counted earlier in this
/// batch), was counted earlier in this batch, or comes before the event
/// equal to the `last` read in this batch (a batch delivered again whose
/// first delivery was applied). Versions are compared as equal strings
/// only.
///
/// One action per key and batch, the final counter, conditioned on the
/// version read at the start (`if_absent` for a new counter), so it never
/// overwrites a counter written since the read: the host skips it instead.
/// A failed read, or a record there that is not a counter, fails the batch
/// (delivered again).
pub fn count_writes(events: &[ChangeEvent]) -> Result<ChangeOutcome, String> {
    let table = configured_table("counts");
    let mut keys: Vec<&str> = Vec::new();
    let mut counts: HashMap<&str, KeyCount> = HashMap::new();
    for event in events {
        if !counts.contains_key(event.key.as_str()) {
            counts.insert(&event.key, read_count(&table, &event.key)?);
            keys.push(&event.key);
        }
    }
    for (index, event) in events.iter().enumerate() {
        let count = counts.get_mut(event.key.as_str()).expect("read above");
        if !count.counter.last.is_empty() && count.counter.last == event.new_version {
            count.counted_through = Some(index);
        }
    }
    for (index, event) in events.iter().enumerate() {
        let count = counts.get_mut(event.key.as_str()).expect("read above");
        if count
            .counted_through
            .is_some_and(|through| index <= through)
        {
            continue;
        }
        if count.counted.insert(event.new_version.clone()) {
            count.counter.count += 1;
            count.counter.last = event.new_version.clone();
            count.changed = true;
        }
    }
    let mut outcome = ChangeOutcome::default();
    for key in keys {
        let count = &counts[key];
        if !count.changed {
            continue;
        }
        let value = count.counter.encode();
        match &count.read_version {
            Some(version) => outcome.put_if_version(&table, key, value, 0, version),
            None => outcome.put_if_absent(&table, key, value, 0),
        }
    }
    Ok(outcome)
}

/// The counter of `key` in `table` as stored now.
fn read_count(table: &str, key: &str) -> Result<KeyCount, String> {
    let record = ebb_guest::get(table, key)
        .map_err(|e| format!("count_writes: reading {table}/{key}: {e}"))?;
    let (read_version, counter) = match record {
        None => (None, Counter::default()),
        Some(record) => {
            let counter = Counter::decode(&record.value).ok_or_else(|| {
                format!(
                    "count_writes: {table}/{key} holds {:?}, not a counter",
                    String::from_utf8_lossy(&record.value)
                )
            })?;
            (Some(record.version), counter)
        }
    };
    let counted = Some(counter.last.clone())
        .filter(|last| !last.is_empty())
        .into_iter()
        .collect();
    Ok(KeyCount {
        read_version,
        counter,
        counted,
        counted_through: None,
        changed: false,
    })
}

/// The binding config's `"table"`, or `default` without one.
fn configured_table(default: &str) -> String {
    ebb_guest::binding::config()
        .and_then(|config| parse_json_string(after_field(&config, "table")?))
        .unwrap_or_else(|| default.to_owned())
}

/// The text after `"field":` in the JSON object `text` (whitespace
/// skipped), for the flat objects this plugin reads.
fn after_field<'t>(text: &'t str, field: &str) -> Option<&'t str> {
    let rest = text.split_once(&format!("\"{field}\""))?.1;
    Some(rest.trim_start().strip_prefix(':')?.trim_start())
}

/// The JSON string at the start of `text`, unescaped.
fn parse_json_string(text: &str) -> Option<String> {
    let mut chars = text.strip_prefix('"')?.chars();
    let mut out = String::new();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
}

/// `text` as a JSON string literal.
fn json_string(text: &str) -> String {
    let mut out = String::from('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The decimal number after `prefix` at the start of `value` (up to the
/// first non-digit).
fn number_after(value: &[u8], prefix: &[u8]) -> Option<usize> {
    let rest = value.strip_prefix(prefix)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// Allocate `bytes`, write every page, and let the compiler see them used.
fn hog(bytes: usize) {
    let mut block = vec![0u8; bytes];
    for page in block.chunks_mut(64 << 10) {
        page[0] = 1;
    }
    std::hint::black_box(&mut block);
}

/// Burn CPU for roughly `rounds` loop iterations.
fn spin(rounds: u64) {
    let mut x = 0u64;
    for i in 0..rounds {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    std::hint::black_box(x);
}

ebb_guest::export! {
    name: "flaky",
    version: env!("CARGO_PKG_VERSION"),
    functions: {
        expiry "copy" => copy, "Archive, retry (fail*), trap (poison*), stall (slow*, spin*), allocate (hog N) or flood actions (spam N) by value prefix";
        expiry "stamp" => stamp, "Archive each event as '<value> attempt=<n>'";
        expiry "dedupe" => dedupe, "Read a config record and skip event ids already recorded (ebb.get)";
        scalar "peek" => peek, "ebb.get from SQL (refused by the host)";
        expiry "first" => first, "Archive only if absent; delete <table>_lock/<key> only at the version the value names";
        change "record" => record, "Put each event into the config's table (default seen) at <key>@<new_version>: the value, or 'deleted'";
        change "echo" => echo, "Put each written value back into its own table and key with '!' appended";
        change "count_writes" => count_writes, "Count each key's writes into the config's table (default counts) as {\"count\": n, \"last\": \"<version>\"}, skipping redeliveries";
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_guest::testing::{self, clear_records, put_record};
    use ebb_guest::{Action, Condition};

    fn event(key: &str, value: &[u8]) -> ExpiryEvent {
        ExpiryEvent {
            id: vec![0; 32],
            table: "t".into(),
            key: key.into(),
            value: value.to_vec(),
            version_ms: 1,
            version_counter: 0,
            expires_at_ms: 2,
            observed_at_ms: 3,
            attempt: 2,
            ..ExpiryEvent::default()
        }
    }

    fn put_key(action: &ebb_guest::Action) -> (&str, &str) {
        match action {
            ebb_guest::Action::Put { table, key, .. } => (table, key),
            other => panic!("not a put: {other:?}"),
        }
    }

    #[test]
    fn failing_events_are_retried_and_recorded_others_archived() {
        let outcome = copy(&[event("a", b"fail"), event("b", b"ok")]);
        assert_eq!(outcome.failed, vec![0]);
        assert_eq!(outcome.actions.len(), 2);
        assert_eq!(put_key(&outcome.actions[0]), ("t_attempts", "a:2"));
        assert_eq!(put_key(&outcome.actions[1]), ("t_archive", "b"));
    }

    #[test]
    #[should_panic(expected = "poison")]
    fn poison_traps() {
        copy(&[event("p", b"poison")]);
    }

    #[test]
    fn spam_answers_that_many_puts_and_nothing_else() {
        let outcome = copy(&[event("s", b"spam 17 please"), event("b", b"ok")]);
        assert_eq!(outcome.actions.len(), 18);
        assert_eq!(put_key(&outcome.actions[0]), ("t_spam", "s.0"));
        assert_eq!(put_key(&outcome.actions[16]), ("t_spam", "s.16"));
        assert_eq!(put_key(&outcome.actions[17]), ("t_archive", "b"));
        assert!(outcome.failed.is_empty());
    }

    #[test]
    fn a_small_hog_is_archived() {
        let outcome = copy(&[event("h", b"hog 1")]);
        assert_eq!(put_key(&outcome.actions[0]), ("t_archive", "h"));
    }

    #[test]
    fn numbers_after_a_prefix() {
        assert_eq!(number_after(b"spam 16", b"spam "), Some(16));
        assert_eq!(number_after(b"hog 128 MiB", b"hog "), Some(128));
        assert_eq!(number_after(b"hog x", b"hog "), None);
        assert_eq!(number_after(b"ok", b"hog "), None);
    }

    #[test]
    fn dedupe_reads_its_config_and_skips_seen_ids() {
        use ebb_guest::testing::{clear_records, put_record};
        let record = |value: &[u8]| ebb_guest::Record {
            value: value.to_vec(),
            ..ebb_guest::Record::default()
        };
        put_record("t_config", "prefix", record(b"p:"));
        put_record("t_seen", &"00".repeat(32), record(b"a"));
        let outcome = dedupe(&[event("a", b"x"), {
            let mut e = event("b", b"y");
            e.id = vec![1; 32];
            e
        }])
        .unwrap();
        let writes: Vec<(String, String, Vec<u8>)> = outcome
            .actions
            .iter()
            .map(|action| match action {
                ebb_guest::Action::Put {
                    table, key, value, ..
                } => (table.clone(), key.clone(), value.clone()),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            writes,
            vec![
                ("t_dupes".into(), "a".into(), b"skipped".to_vec()),
                ("t_seen".into(), "01".repeat(32), b"b".to_vec()),
                ("t_out".into(), "b".into(), b"p:y".to_vec()),
            ]
        );
        clear_records();
    }

    #[test]
    fn stamp_appends_the_attempt() {
        let outcome = stamp(&[event("k", b"v")]);
        assert_eq!(
            outcome.actions,
            vec![ebb_guest::Action::Put {
                table: "t_archive".into(),
                key: "k".into(),
                value: b"v attempt=2".to_vec(),
                ttl_ms: 0,
                condition: ebb_guest::Condition::Always,
            }]
        );
    }

    fn change(key: &str, new_version: &str, value: &[u8]) -> ChangeEvent {
        ChangeEvent {
            id: new_version.as_bytes().to_vec(),
            table: "t".into(),
            key: key.into(),
            new_version: new_version.into(),
            value: value.to_vec(),
            written_at_ms: 1,
            attempt: 1,
            ..ChangeEvent::default()
        }
    }

    fn deleted(key: &str, new_version: &str) -> ChangeEvent {
        ChangeEvent {
            deleted: true,
            ..change(key, new_version, b"")
        }
    }

    fn put(table: &str, key: &str, value: &[u8], condition: Condition) -> Action {
        Action::Put {
            table: table.into(),
            key: key.into(),
            value: value.to_vec(),
            ttl_ms: 0,
            condition,
        }
    }

    #[test]
    fn record_puts_every_event_at_key_and_version_in_the_configured_table() {
        let events = vec![change("a", "1.0@1", b"x"), deleted("a", "2.0@1")];
        let outcome = testing::change(plugin(), "record", events.clone()).unwrap();
        assert_eq!(
            outcome.actions,
            vec![
                put("seen", "a@1.0@1", b"x", Condition::Always),
                put("seen", "a@2.0@1", b"deleted", Condition::Always),
            ]
        );
        assert!(outcome.failed.is_empty());
        let configured =
            testing::change_with_config(plugin(), "record", events, r#"{"table": "log"}"#).unwrap();
        assert_eq!(
            configured.actions[0],
            put("log", "a@1.0@1", b"x", Condition::Always)
        );
    }

    #[test]
    fn echo_appends_a_bang_in_the_events_own_table_and_skips_deletes() {
        let events = vec![change("a", "1.0@1", b"hi"), deleted("b", "2.0@1")];
        let outcome = testing::change(plugin(), "echo", events).unwrap();
        assert_eq!(
            outcome.actions,
            vec![put("t", "a", b"hi!", Condition::Always)]
        );
    }

    fn counter(count: u64, last: &str) -> Vec<u8> {
        format!(r#"{{"count": {count}, "last": "{last}"}}"#).into_bytes()
    }

    #[test]
    fn count_writes_starts_absent_counters_with_one_put_if_absent_per_key() {
        clear_records();
        let events = vec![
            change("a", "1.0@1", b""),
            change("b", "1.1@1", b""),
            deleted("a", "2.0@1"),
        ];
        let outcome = testing::change(plugin(), "count_writes", events).unwrap();
        assert_eq!(
            outcome.actions,
            vec![
                put("counts", "a", &counter(2, "2.0@1"), Condition::Absent),
                put("counts", "b", &counter(1, "1.1@1"), Condition::Absent),
            ]
        );
    }

    #[test]
    fn count_writes_skips_redeliveries_and_conditions_on_the_version_read() {
        clear_records();
        let stored = |count, last| ebb_guest::Record {
            value: counter(count, last),
            version: "9.0@1".into(),
            expires_at_ms: None,
        };
        put_record("c", "a", stored(5, "5.0@1"));
        put_record("c", "b", stored(2, "2.0@1"));
        put_record("c", "z", stored(7, "7.0@1"));
        let events = vec![
            // `a`: the last counted write again, then a new one twice.
            change("a", "5.0@1", b""),
            change("a", "6.0@1", b""),
            change("a", "6.0@1", b""),
            // `b`: a batch delivered again whose first delivery counted up
            // to 2.0, with one write after it.
            change("b", "1.0@1", b""),
            change("b", "2.0@1", b""),
            change("b", "3.0@1", b""),
            // `z`: nothing new, so no action.
            change("z", "7.0@1", b""),
        ];
        let config = r#"{"table":"c"}"#;
        let outcome =
            testing::change_with_config(plugin(), "count_writes", events, config).unwrap();
        let at_read = || Condition::Version("9.0@1".into());
        assert_eq!(
            outcome.actions,
            vec![
                put("c", "a", &counter(6, "6.0@1"), at_read()),
                put("c", "b", &counter(3, "3.0@1"), at_read()),
            ]
        );
        clear_records();
    }

    #[test]
    fn count_writes_fails_the_batch_on_a_record_that_is_not_a_counter() {
        clear_records();
        let junk = ebb_guest::Record {
            value: b"junk".to_vec(),
            ..ebb_guest::Record::default()
        };
        put_record("counts", "a", junk);
        let error = testing::change(plugin(), "count_writes", vec![change("a", "1.0@1", b"")]);
        assert_eq!(
            error,
            Err(r#"flaky.count_writes: count_writes: counts/a holds "junk", not a counter"#.into())
        );
        clear_records();
    }

    #[test]
    fn a_counter_round_trips_through_its_stored_form() {
        let odd = Counter {
            count: 42,
            last: "1.2@w\"q\\\u{1}".into(),
        };
        assert_eq!(Counter::decode(&odd.encode()), Some(odd));
        assert_eq!(
            Counter::decode(br#"{ "count" : 3 , "last" : "3.0@1" }"#),
            Some(Counter {
                count: 3,
                last: "3.0@1".into()
            })
        );
        assert_eq!(Counter::decode(b"{}"), None);
    }
}
