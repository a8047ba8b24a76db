//! Expiry entries in the store: loading the outbox at boot, and listing,
//! counting and redriving dead letters. Every function blocks: call it on a
//! blocking thread.

use std::collections::HashMap;

use super::outbox::Outbox;
use crate::names::TableName;
use crate::store::outbox::{dead_letter_key, dead_letter_prefix, outbox_key, outbox_seq};
use crate::store::{
    Family, FamilyWrite, FragmentId, KvStore, PendingEvent, StoreError, prefix_end,
};

/// Every event in the outbox, in key order, and the highest sequence seen.
pub(crate) fn load_outbox(store: &dyn KvStore) -> Result<(Vec<PendingEvent>, u64), StoreError> {
    let mut events = Vec::new();
    let mut highest = 0;
    store.scan_family(Family::ExpiryOutbox, &[], &mut |key, value| {
        highest = highest.max(outbox_seq(key).unwrap_or(0));
        events.push(PendingEvent::decode(key, value)?);
        Ok(())
    })?;
    Ok((events, highest))
}

/// The events of `fragment` in the outbox, in key order.
pub(crate) fn load_fragment_outbox(
    store: &dyn KvStore,
    fragment: FragmentId,
) -> Result<Vec<PendingEvent>, StoreError> {
    let mut events = Vec::new();
    let prefix = crate::store::outbox::outbox_prefix(fragment);
    store.scan_family(Family::ExpiryOutbox, &prefix, &mut |key, value| {
        events.push(PendingEvent::decode(key, value)?);
        Ok(())
    })?;
    Ok(events)
}

/// How many events of `table` the outbox holds (a scan of the outbox).
pub(crate) fn count_outbox(store: &dyn KvStore, table: &TableName) -> Result<u64, StoreError> {
    let mut count = 0;
    store.scan_family(Family::ExpiryOutbox, &[], &mut |key, value| {
        if PendingEvent::decode(key, value)?.table == *table {
            count += 1;
        }
        Ok(())
    })?;
    Ok(count)
}

/// Dead letters per table.
pub(crate) fn count_dead_letters(
    store: &dyn KvStore,
) -> Result<HashMap<TableName, u64>, StoreError> {
    let mut counts: HashMap<TableName, u64> = HashMap::new();
    store.scan_family(Family::DeadLetters, &[], &mut |key, value| {
        let event = PendingEvent::decode(key, value)?;
        *counts.entry(event.table).or_default() += 1;
        Ok(())
    })?;
    Ok(counts)
}

/// Most dead letters one page returns.
pub const MAX_DEAD_LETTER_PAGE: usize = 1000;
/// Most bytes (their [`PendingEvent::weight`]) of the dead letters one
/// page returns, past the first: a page of large values ends early, with
/// `next` set.
pub const MAX_DEAD_LETTER_PAGE_BYTES: usize = 16 * 1024 * 1024;

/// One page of dead letters.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterPage {
    /// The dead letters, ordered by id.
    pub events: Vec<PendingEvent>,
    /// Id (hex) to continue after, when more remain.
    pub next: Option<String>,
}

/// Up to `limit` dead letters of `table` with ids after `after`, and at
/// most [`MAX_DEAD_LETTER_PAGE_BYTES`] of them past the first.
pub(crate) fn list_dead_letters(
    store: &dyn KvStore,
    table: &TableName,
    after: Option<&[u8]>,
    limit: usize,
) -> Result<DeadLetterPage, StoreError> {
    let (events, more) = scan_dead_letters(
        store,
        table,
        after,
        limit,
        MAX_DEAD_LETTER_PAGE_BYTES,
        |_| true,
    )?;
    let next = more
        .then(|| events.last().map(|e| crate::hex::encode(e.id())))
        .flatten();
    Ok(DeadLetterPage { events, next })
}

/// Up to `limit` dead letters of `table` in `fragment` with ids after
/// `after`, at most `max_bytes` of them past the first, in id order, and
/// whether more remain.
pub(crate) fn fragment_dead_letters(
    store: &dyn KvStore,
    table: &TableName,
    fragment: FragmentId,
    after: Option<&[u8]>,
    limit: usize,
    max_bytes: usize,
) -> Result<(Vec<PendingEvent>, bool), StoreError> {
    scan_dead_letters(store, table, after, limit, max_bytes, |event| {
        event.stored.fragment == fragment
    })
}

/// The first `limit` dead letters of `table` in id order with ids after
/// `after` that `keep` accepts, and whether more such remain; fewer when
/// the next would take their weight past `max_bytes` (never fewer than
/// one). The scan starts just past `after` (a seek, so a deep page costs
/// what its entries do) on stores with range reads, and stops at the
/// first one past the limits.
fn scan_dead_letters(
    store: &dyn KvStore,
    table: &TableName,
    after: Option<&[u8]>,
    limit: usize,
    max_bytes: usize,
    keep: impl Fn(&PendingEvent) -> bool,
) -> Result<(Vec<PendingEvent>, bool), StoreError> {
    let prefix = dead_letter_prefix(table);
    let mut events = Vec::new();
    let mut bytes = 0;
    let mut more = false;
    let mut visit = |key: &[u8], value: &[u8]| {
        let id = &key[prefix.len()..];
        if after.is_some_and(|after| id <= after) {
            return Ok(());
        }
        let event = PendingEvent::decode(key, value)?;
        if !keep(&event) {
            return Ok(());
        }
        let weight = event.weight();
        if events.len() == limit || (!events.is_empty() && bytes + weight > max_bytes) {
            more = true;
            // Stop the scan: nothing after this is needed.
            return Err(StoreError::Closed);
        }
        bytes += weight;
        events.push(event);
        Ok(())
    };
    let seek = after.zip(prefix_end(&prefix)).map(|(after, end)| {
        let mut from = dead_letter_key(table, after);
        from.push(0); // the first key after `after`'s
        (from, end)
    });
    let scanned = match &seek {
        Some((from, end)) => {
            match store.scan_range(Family::DeadLetters, from, end, &mut visit) {
                // A store without range reads (a test double): from the
                // first, skipping up to `after`.
                Err(StoreError::Unsupported { .. }) => {
                    store.scan_family(Family::DeadLetters, &prefix, &mut visit)
                }
                other => other,
            }
        }
        None => store.scan_family(Family::DeadLetters, &prefix, &mut visit),
    };
    scanned.or_else(|error| match error {
        StoreError::Closed if more => Ok(()),
        other => Err(other),
    })?;
    Ok((events, more))
}

/// Most dead letters one redrive moves (one write batch).
pub(crate) const MAX_REDRIVE: usize = 10_000;
/// Most bytes (their [`PendingEvent::weight`]) of the dead letters one
/// redrive moves, past the first; the rest wait for the next redrive.
pub(crate) const MAX_REDRIVE_BYTES: usize = 64 * 1024 * 1024;

/// Move dead letters of `table` back into the outbox, as fresh events
/// (attempt 0) under new sequence numbers: those in `ids`, or else the
/// first [`MAX_REDRIVE`] by id, within [`MAX_REDRIVE_BYTES`]. One atomic write, so a crash leaves each
/// event in exactly one place. Returns the events now in the outbox (to
/// hand to the dispatcher) and whether more dead letters remain unmoved.
pub(crate) fn redrive(
    store: &dyn KvStore,
    outbox: &Outbox,
    table: &TableName,
    ids: Option<&[Vec<u8>]>,
) -> Result<(Vec<PendingEvent>, bool), StoreError> {
    let (dead, more) = dead_letters_to_redrive(store, table, None, ids, MAX_REDRIVE)?;
    let (writes, revived) = revive(dead, || outbox.next_seq());
    if !writes.is_empty() {
        store.write_entries(&writes, true)?;
    }
    Ok((revived, more))
}

/// The dead letters of `table` a redrive moves: those of `fragment` (of
/// every fragment when `None`) with the given `ids`, or else the first
/// `limit` by id, at most [`MAX_REDRIVE_BYTES`] of them past the first;
/// and whether more remain (of those ids, or at all). Redriving an id
/// again once it moved does nothing, so a redrive by ids that says
/// `more` is repeated as it was.
pub(crate) fn dead_letters_to_redrive(
    store: &dyn KvStore,
    table: &TableName,
    fragment: Option<FragmentId>,
    ids: Option<&[Vec<u8>]>,
    limit: usize,
) -> Result<(Vec<PendingEvent>, bool), StoreError> {
    let ours = |event: &PendingEvent| fragment.is_none_or(|f| event.stored.fragment == f);
    let mut dead: Vec<PendingEvent> = Vec::new();
    if let Some(ids) = ids {
        let mut bytes = 0;
        for id in ids {
            let key = dead_letter_key(table, id);
            let mut found = None;
            store.scan_family(Family::DeadLetters, &key, &mut |k, v| {
                if k == key.as_slice() {
                    found = Some(PendingEvent::decode(k, v)?);
                }
                Ok(())
            })?;
            let Some(event) = found.filter(|event| ours(event)) else {
                continue;
            };
            if !dead.is_empty() && bytes + event.weight() > MAX_REDRIVE_BYTES {
                return Ok((dead, true));
            }
            bytes += event.weight();
            dead.push(event);
        }
        return Ok((dead, false));
    }
    scan_dead_letters(store, table, None, limit, MAX_REDRIVE_BYTES, ours)
}

/// The writes that move `dead` back into the outbox as fresh events
/// (attempt 0, each under a sequence number from `next_seq`): a dead
/// letter delete and an outbox put per event; and the events as they are
/// now pending.
pub(crate) fn revive(
    dead: Vec<PendingEvent>,
    mut next_seq: impl FnMut() -> u64,
) -> (Vec<FamilyWrite>, Vec<PendingEvent>) {
    let mut writes = Vec::with_capacity(dead.len() * 2);
    let mut revived = Vec::with_capacity(dead.len());
    for mut event in dead {
        writes.push(FamilyWrite::Delete(Family::DeadLetters, event.key.clone()));
        event.key = outbox_key(event.stored.fragment, next_seq());
        event.set_attempt(0);
        event.stored.dead_at_ms = 0;
        writes.push(FamilyWrite::Put(
            Family::ExpiryOutbox,
            event.key.clone(),
            event.encode(),
        ));
        revived.push(event);
    }
    (writes, revived)
}

/// The pending events of `table` in `fragment`'s outbox.
pub(crate) fn pending_of(
    store: &dyn KvStore,
    table: &TableName,
    fragment: FragmentId,
) -> Result<Vec<PendingEvent>, StoreError> {
    let mut events = load_fragment_outbox(store, fragment)?;
    events.retain(|event| event.table == *table);
    Ok(events)
}

/// Delete `events` from the outbox (fsynced).
pub(crate) fn delete_from_outbox(
    store: &dyn KvStore,
    events: &[PendingEvent],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let writes: Vec<FamilyWrite> = events
        .iter()
        .map(|e| FamilyWrite::Delete(Family::ExpiryOutbox, e.key.clone()))
        .collect();
    store.write_entries(&writes, true)
}

/// A dead letter of `table`'s `key` (failed three times with "boom"), for
/// tests.
#[cfg(test)]
pub(crate) fn test_dead_letter(table: &TableName, key: &str) -> PendingEvent {
    use crate::record::{Record, Version};
    let record = Record::live(
        Version {
            hlc_ms: 7,
            counter: 0,
            writer: std::sync::Arc::from("w"),
        },
        bytes::Bytes::from_static(b"v"),
        Some(10),
    );
    let mut event = PendingEvent::new(1, 5, table, key, &record, 11);
    event.set_attempt(3);
    event.stored.last_error = "boom".into();
    event.key = dead_letter_key(table, event.id());
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn a_fragment_s_dead_letters_page_by_id_from_just_past_the_last() {
        let store = MemoryStore::new();
        let table = TableName::new("t").unwrap();
        // A table whose name extends this one's, and one after it: never
        // in this table's pages.
        let longer = TableName::new("tt").unwrap();
        let other = TableName::new("u").unwrap();
        let mut events: Vec<PendingEvent> = (0..12)
            .map(|i| {
                let mut event = test_dead_letter(&table, &format!("k{i}"));
                event.stored.fragment = i % 2;
                event
            })
            .collect();
        events.extend([
            test_dead_letter(&longer, "x"),
            test_dead_letter(&other, "y"),
        ]);
        let puts: Vec<FamilyWrite> = events
            .iter()
            .map(|e| FamilyWrite::Put(Family::DeadLetters, e.key.clone(), e.encode()))
            .collect();
        store.write_entries(&puts, true).unwrap();
        for fragment in [0, 1] {
            let mut expected: Vec<Vec<u8>> = events[..12]
                .iter()
                .filter(|e| e.stored.fragment == fragment)
                .map(|e| e.id().to_vec())
                .collect();
            expected.sort();
            let mut paged = Vec::new();
            let mut after: Option<Vec<u8>> = None;
            loop {
                let (page, more) = fragment_dead_letters(
                    &store,
                    &table,
                    fragment,
                    after.as_deref(),
                    4,
                    usize::MAX,
                )
                .unwrap();
                assert!(page.len() <= 4);
                assert!(page.iter().all(|e| e.stored.fragment == fragment));
                paged.extend(page.iter().map(|e| e.id().to_vec()));
                if !more {
                    break;
                }
                after = paged.last().cloned();
            }
            assert_eq!(paged, expected, "fragment {fragment}");
        }
        // Past the last id: nothing, and nothing more.
        let last = [0xffu8; 32];
        assert_eq!(
            fragment_dead_letters(&store, &table, 0, Some(&last), 4, usize::MAX).unwrap(),
            (Vec::new(), false)
        );
        // A byte bound below one event's weight: one event a page (never
        // none), each page saying more remain until the last.
        let (one, more) = fragment_dead_letters(&store, &table, 0, None, 4, 1).unwrap();
        assert_eq!((one.len(), more), (1, true));
        let (two, more) =
            fragment_dead_letters(&store, &table, 0, None, 4, 2 * one[0].weight()).unwrap();
        assert_eq!((two.len(), more), (2, true));
    }

    #[test]
    fn dead_letters_page_by_id_and_redrive_into_the_outbox() {
        let store = MemoryStore::new();
        let table = TableName::new("t").unwrap();
        let other = TableName::new("u").unwrap();
        let mut events: Vec<PendingEvent> = (0..5)
            .map(|i| test_dead_letter(&table, &format!("k{i}")))
            .collect();
        events.push(test_dead_letter(&other, "x"));
        let puts: Vec<FamilyWrite> = events
            .iter()
            .map(|e| FamilyWrite::Put(Family::DeadLetters, e.key.clone(), e.encode()))
            .collect();
        store.write_entries(&puts, true).unwrap();
        assert_eq!(count_dead_letters(&store).unwrap()[&table], 5);

        let first = list_dead_letters(&store, &table, None, 3).unwrap();
        assert_eq!(first.events.len(), 3);
        let after = super::super::event::parse_hex_id(first.next.as_deref().unwrap()).unwrap();
        let second = list_dead_letters(&store, &table, Some(&after), 3).unwrap();
        assert_eq!((second.events.len(), second.next), (2, None));

        let outbox = Outbox::new();
        outbox.continue_after(100);
        let one = first.events[0].id().to_vec();
        let (revived, more) = redrive(&store, &outbox, &table, Some(&[one])).unwrap();
        assert!(!more);
        assert_eq!(revived.len(), 1);
        assert_eq!(revived[0].attempt(), 0);
        assert_eq!(outbox_seq(&revived[0].key), Some(101));
        let (rest, more) = redrive(&store, &outbox, &table, None).unwrap();
        assert!(!more, "all four fit one redrive");
        assert_eq!(rest.len(), 4);
        let (loaded, highest) = load_outbox(&store).unwrap();
        assert_eq!((loaded.len(), highest), (5, 105));
        let counts = count_dead_letters(&store).unwrap();
        assert_eq!((counts.get(&table), counts[&other]), (None, 1));
        delete_from_outbox(&store, &loaded).unwrap();
        assert!(load_outbox(&store).unwrap().0.is_empty());
    }

    #[test]
    fn a_fragment_s_redrive_takes_only_its_dead_letters_up_to_the_limit() {
        let store = MemoryStore::new();
        let table = TableName::new("t").unwrap();
        let events: Vec<PendingEvent> = (0..6)
            .map(|i| {
                let mut event = test_dead_letter(&table, &format!("k{i}"));
                event.stored.fragment = i % 2;
                event
            })
            .collect();
        let puts: Vec<FamilyWrite> = events
            .iter()
            .map(|e| FamilyWrite::Put(Family::DeadLetters, e.key.clone(), e.encode()))
            .collect();
        store.write_entries(&puts, true).unwrap();
        let of = |fragment, ids: Option<&[Vec<u8>]>, limit| {
            dead_letters_to_redrive(&store, &table, Some(fragment), ids, limit).unwrap()
        };
        let (odd, more) = of(1, None, 10);
        assert!(!more);
        assert_eq!(odd.len(), 3);
        assert!(odd.iter().all(|e| e.stored.fragment == 1));
        let (two, more) = of(0, None, 2);
        assert_eq!((two.len(), more), (2, true), "the limit met, more remain");
        let ids: Vec<Vec<u8>> = events.iter().map(|e| e.id().to_vec()).collect();
        let (by_id, _) = of(0, Some(&ids), 10);
        assert_eq!(by_id.len(), 3, "ids of other fragments are left to them");

        let mut seq = 40;
        let (writes, revived) = revive(odd, || {
            seq += 1;
            seq
        });
        assert_eq!(writes.len(), 6, "a delete and a put per event");
        assert_eq!(outbox_seq(&revived[2].key), Some(43));
        assert!(revived.iter().all(|e| e.attempt() == 0));
        store.write_entries(&writes, true).unwrap();
        assert_eq!(pending_of(&store, &table, 1).unwrap().len(), 3);
        assert!(pending_of(&store, &table, 0).unwrap().is_empty());
        let other = TableName::new("u").unwrap();
        assert!(pending_of(&store, &other, 1).unwrap().is_empty());
    }

    #[test]
    fn one_redrive_moves_at_most_max_redrive_and_says_more_remain() {
        let store = MemoryStore::new();
        let table = TableName::new("t").unwrap();
        let puts: Vec<FamilyWrite> = (0..MAX_REDRIVE + 5)
            .map(|i| {
                let e = test_dead_letter(&table, &format!("k{i}"));
                FamilyWrite::Put(Family::DeadLetters, e.key.clone(), e.encode())
            })
            .collect();
        store.write_entries(&puts, false).unwrap();
        let outbox = Outbox::new();
        let (first, more) = redrive(&store, &outbox, &table, None).unwrap();
        assert_eq!((first.len(), more), (MAX_REDRIVE, true));
        let (rest, more) = redrive(&store, &outbox, &table, None).unwrap();
        assert_eq!((rest.len(), more), (5, false));
        assert_eq!(load_outbox(&store).unwrap().0.len(), MAX_REDRIVE + 5);
    }
}
