//! What `ebb.get` reads: a handler reads one record through the node's
//! [`RecordReader`], within its call's deadline and read budget (the import
//! itself is linked in `runtime.rs`). SQL functions get no reader, so for
//! them `ebb.get` answers an error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;

/// Most `ebb.get` calls one handler call may make.
pub const MAX_READS_PER_CALL: u32 = 1024;
/// Most value bytes one handler call may read through `ebb.get`.
pub const MAX_READ_BYTES_PER_CALL: usize = 16 << 20;
/// Largest encoded `GetRequest` (a table name and a 4096-byte key fit).
pub(super) const MAX_REQUEST_BYTES: usize = 8192;

/// Where `ebb.get` reads: the node's tables. Called on a plugin thread
/// (never a tokio worker), so it may block up to `timeout`.
pub trait RecordReader: Send + Sync + 'static {
    /// The visible record at `table`/`key` as committed now (`None`:
    /// absent, deleted or expired), or why it could not be read (a bad
    /// name, no answer within `timeout`, the node shutting down).
    fn get(
        &self,
        table: &str,
        key: &str,
        timeout: Duration,
    ) -> Result<Option<abi::ReadRecord>, String>;
}

/// The reads of one handler call: the reader, the call's deadline and
/// what is left of its budget.
pub(crate) struct Reads {
    reader: Arc<dyn RecordReader>,
    deadline_at: Instant,
    reads: u32,
    bytes: usize,
}

impl Reads {
    /// A fresh budget for a call that must end by `deadline_at`.
    pub(crate) fn new(reader: Arc<dyn RecordReader>, deadline_at: Instant) -> Self {
        Self {
            reader,
            deadline_at,
            reads: 0,
            bytes: 0,
        }
    }

    /// Answer one encoded `GetRequest`.
    pub(super) fn get(&mut self, request: &[u8]) -> abi::get_response::Result {
        use abi::get_response::Result as Answer;
        let request = match abi::GetRequest::decode(request) {
            Ok(request) => request,
            Err(error) => return Answer::Error(format!("ebb.get: malformed GetRequest: {error}")),
        };
        if self.reads >= MAX_READS_PER_CALL {
            return Answer::Error(format!(
                "ebb.get: this call used its {MAX_READS_PER_CALL} reads (the per-call read budget); read less per event or bind with a smaller max_batch"
            ));
        }
        if self.bytes >= MAX_READ_BYTES_PER_CALL {
            return Answer::Error(format!(
                "ebb.get: this call read {} bytes, its per-call read budget of {MAX_READ_BYTES_PER_CALL}; read less per event or bind with a smaller max_batch",
                self.bytes
            ));
        }
        let remaining = self.deadline_at.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Answer::Error("ebb.get: the call's deadline has passed".into());
        }
        self.reads += 1;
        match self.reader.get(&request.table, &request.key, remaining) {
            Ok(Some(record)) => {
                self.bytes = self.bytes.saturating_add(record.value.len());
                Answer::Record(record)
            }
            Ok(None) => Answer::Absent(true),
            Err(error) => Answer::Error(format!("ebb.get: {error}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;

    impl RecordReader for Fixed {
        fn get(
            &self,
            table: &str,
            key: &str,
            _: Duration,
        ) -> Result<Option<abi::ReadRecord>, String> {
            match (table, key) {
                ("t", "big") => Ok(Some(abi::ReadRecord {
                    value: vec![0u8; MAX_READ_BYTES_PER_CALL].into(),
                    ..abi::ReadRecord::default()
                })),
                ("t", "k") => Ok(Some(abi::ReadRecord {
                    value: b"v".to_vec().into(),
                    version: "1.0@n1".into(),
                    expires_at_ms: 0,
                })),
                ("bad name", _) => Err("invalid table name".into()),
                _ => Ok(None),
            }
        }
    }

    fn request(table: &str, key: &str) -> Vec<u8> {
        abi::GetRequest {
            table: table.into(),
            key: key.into(),
        }
        .encode_to_vec()
    }

    fn error(answer: abi::get_response::Result) -> String {
        match answer {
            abi::get_response::Result::Error(error) => error,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn reads_answer_records_absences_and_errors_within_the_budget() {
        let far = Instant::now() + Duration::from_secs(60);
        let mut reads = Reads::new(Arc::new(Fixed), far);
        use abi::get_response::Result as Answer;
        assert!(
            matches!(reads.get(&request("t", "k")), Answer::Record(r) if r.version == "1.0@n1")
        );
        assert_eq!(reads.get(&request("t", "none")), Answer::Absent(true));
        assert!(error(reads.get(&request("bad name", "k"))).contains("invalid table name"));
        assert!(error(reads.get(b"\xff\xff")).contains("malformed"));
        for _ in 3..MAX_READS_PER_CALL {
            reads.get(&request("t", "none"));
        }
        let spent = error(reads.get(&request("t", "k")));
        assert!(
            spent.contains("1024 reads") && spent.contains("max_batch"),
            "{spent}"
        );

        let mut reads = Reads::new(Arc::new(Fixed), far);
        assert!(matches!(reads.get(&request("t", "big")), Answer::Record(_)));
        let spent = error(reads.get(&request("t", "k")));
        assert!(spent.contains("read budget"), "{spent}");

        let mut late = Reads::new(Arc::new(Fixed), Instant::now());
        assert!(error(late.get(&request("t", "k"))).contains("deadline"));
    }
}
