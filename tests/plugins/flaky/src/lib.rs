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
    fn stamp_appends_the_attempt() {
        let outcome = stamp(&[event("k", b"v")]);
        assert_eq!(
            outcome.actions,
            vec![ebb_guest::Action::Put {
                table: "t_archive".into(),
                key: "k".into(),
                value: b"v attempt=2".to_vec(),
                ttl_ms: 0,
            }]
        );
    }
}
