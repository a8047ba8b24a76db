//! The ORDER BY strategy: every matching row buffered, then sorted by its
//! ORDER BY values and key. With a LIMIT small enough, a full buffer is cut
//! to the rows that can still be in the result.

use std::cmp::Ordering;
use std::sync::Arc;

use ebb_query::Value;

use super::error::{self, QueryError};
use super::page::OutRow;
use super::physical::Strategy;
use super::scan::Scan;
use super::schedule::{Schedule, out_row_bytes};

/// Compare value lists in order, each descending where `descending` says.
pub(crate) fn cmp_values(a: &[Value], b: &[Value], descending: &[bool]) -> Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let order = x.total_cmp(y);
        let order = if descending.get(i).copied().unwrap_or(false) {
            order.reverse()
        } else {
            order
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// Order rows by their ORDER BY values, then by key.
fn sort_rows(rows: &mut [OutRow], descending: &[bool]) {
    rows.sort_by(|a, b| cmp_values(&a.sort, &b.sort, descending).then_with(|| a.key.cmp(&b.key)));
}

/// Every matching row of `scans`, in ORDER BY order (then key order), for
/// [`Strategy::Sort`].
pub(crate) async fn sorted_rows(
    schedule: &mut Schedule<'_>,
    strategy: Strategy,
    descending: Arc<[bool]>,
    scans: &mut [Scan],
) -> Result<Vec<OutRow>, QueryError> {
    let Strategy::Sort { max_rows, keep_top } = strategy else {
        unreachable!("the sort strategy");
    };
    let mut buffer: Vec<OutRow> = Vec::new();
    loop {
        let pending: Vec<usize> = (0..scans.len()).filter(|&i| !scans[i].done).collect();
        if pending.is_empty() {
            break;
        }
        for (_, page) in schedule.fetch(scans, &pending).await? {
            schedule.hold(page.rows.iter().map(out_row_bytes).sum())?;
            buffer.extend(page.rows);
        }
        if buffer.len() > max_rows {
            let Some(keep) = keep_top else {
                return Err(error::order_buffer(max_rows));
            };
            let before: usize = buffer.iter().map(out_row_bytes).sum();
            let order = descending.clone();
            buffer = schedule
                .off_worker(move || {
                    sort_rows(&mut buffer, &order);
                    buffer.truncate(keep);
                    Ok(buffer)
                })
                .await?;
            schedule.release(before - buffer.iter().map(out_row_bytes).sum::<usize>());
        }
    }
    schedule
        .off_worker(move || {
            sort_rows(&mut buffer, &descending);
            Ok(buffer)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, sort: Vec<Value>) -> OutRow {
        OutRow {
            key: Arc::from(key),
            values: Vec::new(),
            sort,
        }
    }

    #[test]
    fn rows_sort_by_their_order_by_values_then_by_key() {
        let mut rows = vec![
            row("b", vec![Value::Int(1), Value::text("x")]),
            row("a", vec![Value::Int(1), Value::text("x")]),
            row("c", vec![Value::Int(2), Value::text("a")]),
            row("d", vec![Value::Null, Value::text("z")]),
            row("e", vec![Value::Int(1), Value::text("y")]),
        ];
        sort_rows(&mut rows, &[true, false]);
        let keys: Vec<&str> = rows.iter().map(|r| &*r.key).collect();
        assert_eq!(
            keys,
            ["c", "a", "b", "e", "d"],
            "NULL sorts last descending"
        );
        assert_eq!(
            cmp_values(&[Value::Int(1)], &[Value::Int(2)], &[]),
            Ordering::Less
        );
    }
}
