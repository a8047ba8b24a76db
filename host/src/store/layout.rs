//! Byte layout of keys in the `records` family: fragment, table, key.
//!
//! `fragment (u16 BE) | table length (u8) | table | key`. The fragment prefix
//! lets each fragment load its own range at boot; within a fragment, records
//! of one table are contiguous and sorted by key.

use super::{FragmentId, LoadedRecord, StoreError};
use crate::names::TableName;
use crate::record::RecordView;

/// The prefix shared by every record key of `fragment`.
pub(crate) fn fragment_prefix(fragment: FragmentId) -> [u8; 2] {
    (fragment as u16).to_be_bytes()
}

/// Encode the storage key of `(fragment, table, key)`.
pub(crate) fn encode_record_key(fragment: FragmentId, table: &TableName, key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(3 + table.as_str().len() + key.len());
    encode_record_key_into(&mut out, fragment, table, key);
    out
}

/// Append the storage key of `(fragment, table, key)` to `out`.
pub(crate) fn encode_record_key_into(
    out: &mut Vec<u8>,
    fragment: FragmentId,
    table: &TableName,
    key: &str,
) {
    let table = table.as_str().as_bytes();
    out.extend_from_slice(&fragment_prefix(fragment));
    out.push(table.len() as u8);
    out.extend_from_slice(table);
    out.extend_from_slice(key.as_bytes());
}

/// Decode a storage key produced by [`encode_record_key`]. `last_table` is
/// the table of the key decoded before: records of one table are
/// contiguous, so a scan checks and allocates each table name once. The
/// key borrows from `raw`.
fn decode_record_key<'a>(
    raw: &'a [u8],
    last_table: &mut Option<TableName>,
) -> Result<(FragmentId, TableName, &'a str), StoreError> {
    let corrupt = |reason: &str| StoreError::Corrupt {
        key: String::from_utf8_lossy(raw).into_owned(),
        reason: reason.to_string(),
    };
    if raw.len() < 3 {
        return Err(corrupt("record key shorter than its header"));
    }
    let fragment = u16::from_be_bytes([raw[0], raw[1]]) as FragmentId;
    let table_len = raw[2] as usize;
    let rest = &raw[3..];
    if rest.len() < table_len {
        return Err(corrupt("record key shorter than its table name"));
    }
    let raw_table = &rest[..table_len];
    let table = match last_table {
        Some(last) if last.as_str().as_bytes() == raw_table => last.clone(),
        _ => {
            let table = std::str::from_utf8(raw_table)
                .map_err(|_| corrupt("table name is not UTF-8"))
                .and_then(|name| TableName::system(name).map_err(|e| corrupt(&e.to_string())))?;
            *last_table = Some(table.clone());
            table
        }
    };
    let key = std::str::from_utf8(&rest[table_len..]).map_err(|_| corrupt("key is not UTF-8"))?;
    Ok((fragment, table, key))
}

/// Decode one `records` entry without copying: the key and the record's
/// fields borrow from the raw bytes, the table from `last_table` (see
/// [`decode_record_key`]).
pub(crate) fn decode_loaded<'a>(
    raw_key: &'a [u8],
    raw_value: &'a [u8],
    last_table: &'a mut Option<TableName>,
) -> Result<LoadedRecord<'a>, StoreError> {
    let (fragment, _, key) = decode_record_key(raw_key, last_table)?;
    let record = RecordView::decode(raw_value).map_err(|e| StoreError::Corrupt {
        key: String::from_utf8_lossy(raw_key).into_owned(),
        reason: e.to_string(),
    })?;
    let table = last_table
        .as_ref()
        .expect("decode_record_key sets the table");
    Ok(LoadedRecord {
        fragment,
        table,
        key,
        record,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_keys_round_trip_and_group_by_fragment_then_table() {
        let users = TableName::new("users").unwrap();
        let raw = encode_record_key(3, &users, "k\0ey:é");
        assert!(raw.starts_with(&fragment_prefix(3)));
        let mut last = None;
        let (fragment, table, key) = decode_record_key(&raw, &mut last).unwrap();
        assert_eq!((fragment, table.as_str(), key), (3, "users", "k\0ey:é"));
        // The next key of another table is not given the cached name.
        let (_, other, _) = decode_record_key(
            &encode_record_key(3, &TableName::new("user").unwrap(), "k"),
            &mut last,
        )
        .unwrap();
        assert_eq!(other.as_str(), "user");
        let (_, again, _) = decode_record_key(&raw, &mut last).unwrap();
        assert_eq!(again.as_str(), "users");
        let a = encode_record_key(3, &TableName::new("a").unwrap(), "zzz");
        let b = encode_record_key(3, &TableName::new("b").unwrap(), "a");
        assert!(a < b, "records of one table are contiguous");
        assert!(decode_record_key(&[0, 1, 9, b'a'], &mut None).is_err());
    }
}
