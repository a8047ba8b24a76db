//! Reading a record from a handler: [`get`] wraps the `ebb.get` host
//! import (natively, a per-thread map that tests fill with
//! [`crate::testing::put_record`]).

/// A record a handler read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// The value.
    pub value: Vec<u8>,
    /// Its version in text form (`hlc_ms.counter@writer`), usable as a
    /// [`crate::Condition::Version`].
    pub version: String,
    /// Its deadline in Unix ms, if it has one.
    pub expires_at_ms: Option<u64>,
}

impl From<ebb_proto::plugin::v1::ReadRecord> for Record {
    fn from(record: ebb_proto::plugin::v1::ReadRecord) -> Self {
        Record {
            value: record.value.to_vec(),
            version: record.version,
            expires_at_ms: (record.expires_at_ms != 0).then_some(record.expires_at_ms),
        }
    }
}

/// The visible record at `table`/`key` as committed when the call is made:
/// `Ok(None)` when absent, deleted or expired.
///
/// Only expiry and change handlers may read; from a SQL function this is
/// an `Err`. Reads count against the call's deadline, and one call may make
/// at most 1024 of them and read at most 16 MiB of values (an `Err` saying
/// which budget past that). A plugin that never calls `get` does not import
/// `ebb.get` and runs on hosts older than it.
pub fn get(table: &str, key: &str) -> Result<Option<Record>, String> {
    imp::get(table, key)
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use ebb_proto::Message;
    use ebb_proto::plugin::v1 as proto;

    use super::Record;

    #[link(wasm_import_module = "ebb")]
    unsafe extern "C" {
        #[link_name = "get"]
        fn ebb_get(ptr: i32, len: i32) -> i64;
    }

    pub fn get(table: &str, key: &str) -> Result<Option<Record>, String> {
        let request = proto::GetRequest {
            table: table.to_owned(),
            key: key.to_owned(),
        }
        .encode_to_vec();
        // SAFETY: `ebb.get` only reads `len` bytes at `ptr`, which `request`
        // keeps alive and unchanged for the call; it answers memory it got
        // from this module's `ebb_alloc`, which we take back below.
        let packed = unsafe { ebb_get(request.as_ptr() as usize as i32, request.len() as i32) };
        let ptr = ((packed as u64) >> 32) as usize;
        let len = (packed as u64 & 0xffff_ffff) as usize;
        let bytes = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: the host filled `len` bytes at `ptr`, allocated by
            // `ebb_alloc(len)` with the layout of a `Vec<u8>` of capacity
            // `len`; nothing else owns them.
            unsafe { Vec::from_raw_parts(ptr as *mut u8, len, len) }
        };
        let response = proto::GetResponse::decode(bytes.as_slice())
            .map_err(|e| format!("ebb.get: malformed answer from the host: {e}"))?;
        match response.result {
            Some(proto::get_response::Result::Record(record)) => Ok(Some(record.into())),
            Some(proto::get_response::Result::Absent(_)) => Ok(None),
            Some(proto::get_response::Result::Error(error)) => Err(error),
            None => Err("ebb.get: empty answer from the host".to_owned()),
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod imp {
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    use super::Record;

    thread_local! {
        /// What native reads see: `(table, key)` → record.
        pub(crate) static RECORDS: RefCell<BTreeMap<(String, String), Record>> =
            const { RefCell::new(BTreeMap::new()) };
    }

    pub fn get(table: &str, key: &str) -> Result<Option<Record>, String> {
        Ok(RECORDS.with(|records| {
            records
                .borrow()
                .get(&(table.to_owned(), key.to_owned()))
                .cloned()
        }))
    }
}
