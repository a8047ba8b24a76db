//! Test plugin `flaky`: expiry handlers that misbehave on request, for the
//! expiry tests (tests/expiry.rs, tests/expiry_limits.rs).
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

use ebb_guest::{ExpiryEvent, ExpiryOutcome};

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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
