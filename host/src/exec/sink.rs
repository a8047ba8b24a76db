//! Where result rows go: one response page, bounded by its page size and
//! `max_result_bytes`, or a stream of every row.

use ebb_query::Value;
use tokio::sync::mpsc;

use super::error::{self, QueryError};

/// Where result rows go.
pub(crate) enum Sink {
    /// One response page (bounded by page size and result bytes).
    Page { rows: Vec<Vec<Value>>, bytes: usize },
    /// A stream of every row.
    Stream {
        rows: mpsc::Sender<Vec<Value>>,
        sent: u64,
    },
}

/// The bytes a row takes in a JSON response (about: text as is, bytes as
/// base64, anything else 8).
pub(crate) fn row_bytes(row: &[Value]) -> usize {
    row.iter()
        .map(|v| match v {
            Value::Text(t) => t.len() + 8,
            Value::Bytes(b) => b.len() * 4 / 3 + 16,
            _ => 8,
        })
        .sum()
}

impl Sink {
    /// An empty response page.
    pub(crate) fn page() -> Self {
        Sink::Page {
            rows: Vec::new(),
            bytes: 0,
        }
    }

    /// Whether rows go to one response page (pushing one never waits).
    pub(crate) fn is_page(&self) -> bool {
        matches!(self, Sink::Page { .. })
    }

    /// Make room for `rows` more rows in a response page.
    pub(crate) fn reserve(&mut self, rows: usize) {
        if let Sink::Page { rows: page, .. } = self {
            page.reserve(rows);
        }
    }

    /// Whether one more row fits in this response (streams always take
    /// more). A page that is full ends early, with a cursor; a row that
    /// alone is over `max_bytes` fails the query with `max_result_bytes`.
    pub(crate) fn has_room(
        &self,
        row: &[Value],
        page_size: usize,
        max_bytes: usize,
    ) -> Result<bool, QueryError> {
        match self {
            Sink::Stream { .. } => Ok(true),
            Sink::Page { rows, bytes } => {
                let size = row_bytes(row);
                if rows.is_empty() && size > max_bytes {
                    return Err(error::result_row(size, max_bytes));
                }
                Ok(rows.len() < page_size && bytes + size <= max_bytes)
            }
        }
    }

    /// Hand on `row` if that needs no waiting: a page always takes it, a
    /// stream when its channel has room. `Ok(Some(row))` gives the row back
    /// for [`Self::push`] to wait with; the query's own loops call this
    /// first, so a row that goes straight through builds no future (an
    /// `async` call per row copied its state, a few hundred bytes, twice).
    #[inline]
    pub(crate) fn push_now(&mut self, row: Vec<Value>) -> Result<Option<Vec<Value>>, QueryError> {
        match self {
            Sink::Page { rows, bytes } => {
                *bytes += row_bytes(&row);
                rows.push(row);
                Ok(None)
            }
            Sink::Stream { rows, sent } => match rows.try_send(row) {
                Ok(()) => {
                    *sent += 1;
                    Ok(None)
                }
                Err(mpsc::error::TrySendError::Full(row)) => Ok(Some(row)),
                Err(mpsc::error::TrySendError::Closed(_)) => Err(QueryError::Cancelled),
            },
        }
    }

    /// Hand on one row, waiting for room in a stream.
    pub(crate) async fn push(&mut self, row: Vec<Value>) -> Result<(), QueryError> {
        let Some(row) = self.push_now(row)? else {
            return Ok(());
        };
        match self {
            Sink::Page { .. } => unreachable!("a page takes every row at once"),
            Sink::Stream { rows, sent } => {
                rows.send(row).await.map_err(|_| QueryError::Cancelled)?;
                *sent += 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize) -> Vec<Value> {
        vec![Value::text("x".repeat(n).as_str())]
    }

    #[tokio::test]
    async fn a_page_ends_at_its_size_or_its_bytes_and_one_row_over_the_bytes_fails() {
        // Each row is 100 + 8 bytes.
        let mut sink = Sink::page();
        assert!(sink.has_room(&text(100), 3, 250).unwrap());
        sink.push(text(100)).await.unwrap();
        assert!(sink.has_room(&text(100), 3, 250).unwrap());
        sink.push(text(100)).await.unwrap();
        assert!(
            !sink.has_room(&text(100), 3, 250).unwrap(),
            "a third row passes 250 bytes: the page ends with a cursor"
        );
        assert!(
            !sink.has_room(&text(0), 2, 10_000).unwrap(),
            "two rows fill a page of 2"
        );
        match Sink::page().has_room(&text(300), 3, 250) {
            Err(QueryError::Budget { budget, limit, .. }) => {
                assert_eq!((budget, limit), ("max_result_bytes", 250));
            }
            other => panic!("one row over max_result_bytes must fail, got {other:?}"),
        }
        // Behind a row already in the page, a big row just ends the page.
        let mut sink = Sink::page();
        sink.push(text(1)).await.unwrap();
        assert!(!sink.has_room(&text(300), 3, 250).unwrap());
    }

    #[tokio::test]
    async fn a_stream_takes_every_row_and_fails_cancelled_once_its_receiver_is_gone() {
        let (tx, mut rx) = mpsc::channel(1);
        let mut sink = Sink::Stream { rows: tx, sent: 0 };
        assert!(sink.has_room(&text(1 << 20), 1, 1).unwrap());
        assert!(
            sink.push_now(text(1)).unwrap().is_none(),
            "the channel had room"
        );
        let back = sink.push_now(text(2)).unwrap();
        assert_eq!(back, Some(text(2)), "a full channel gives the row back");
        let waiting = tokio::spawn(async move {
            sink.push(text(2)).await.unwrap();
            sink
        });
        assert_eq!(rx.recv().await, Some(text(1)));
        assert_eq!(rx.recv().await, Some(text(2)), "push waited for room");
        let mut sink = waiting.await.unwrap();
        assert!(matches!(sink, Sink::Stream { sent: 2, .. }));
        drop(rx);
        assert!(matches!(
            sink.push(text(1)).await,
            Err(QueryError::Cancelled)
        ));
    }
}
