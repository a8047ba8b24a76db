//! The rows of a scalar batch or aggregate update, decoded once straight
//! from the request bytes: every argument borrowed from the request, no
//! intermediate protobuf messages.

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use ebb_proto::wire::{self, Malformed, Reader, WIRE_LEN};

use crate::value::ValueRef;

/// Arguments and rows of the previous batch, to size the next one's
/// buffers (a query sends batches of one size). Only a capacity hint.
static LAST_ARGS: AtomicUsize = AtomicUsize::new(0);
static LAST_ROWS: AtomicUsize = AtomicUsize::new(0);
/// Never presize for more arguments or rows than this.
const MAX_PRESIZED: usize = 1 << 16;

/// The rows of a batch, decoded once: every row's arguments back to back,
/// borrowed from the request.
pub(crate) struct Rows<'a> {
    /// The last `state` (field 1) of an update.
    pub(crate) state: &'a [u8],
    /// All arguments, row after row.
    args: Vec<ValueRef<'a>>,
    /// Per row: where its arguments end in `args`, and the position of its
    /// first value with no field set (which fails the row).
    ends: Vec<(usize, Option<usize>)>,
}

impl<'a> Rows<'a> {
    /// Decode repeated `Row` field `rows_field` of `body` (and, for an
    /// update, its `state`). Every row is decoded before any runs, as a full
    /// decode of the request would be.
    pub(crate) fn decode(body: &'a [u8], rows_field: u64) -> Result<Self, Malformed> {
        // Sized like the previous batch: a query sends batches of one size.
        let mut rows = Rows {
            state: &[],
            args: Vec::with_capacity(LAST_ARGS.load(Relaxed)),
            ends: Vec::with_capacity(LAST_ROWS.load(Relaxed)),
        };
        let mut reader = Reader::new(body);
        while !reader.is_empty() {
            match reader.key()? {
                (field, WIRE_LEN) if field == rows_field => {
                    let empty_at = row(reader.delimited()?, &mut rows.args)?;
                    rows.ends.push((rows.args.len(), empty_at));
                }
                (1, WIRE_LEN) => rows.state = reader.delimited()?,
                (field, _) if field == rows_field || field == 1 => {
                    return Err(Malformed("invalid wire type"));
                }
                (_, wire) => reader.skip(wire)?,
            }
        }
        LAST_ARGS.store(rows.args.len().min(MAX_PRESIZED), Relaxed);
        LAST_ROWS.store(rows.ends.len().min(MAX_PRESIZED), Relaxed);
        Ok(rows)
    }

    /// How many rows.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Each row: its index, its arguments and its first empty value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &[ValueRef<'a>], Option<usize>)> {
        let mut start = 0;
        self.ends
            .iter()
            .enumerate()
            .map(move |(index, &(end, empty_at))| {
                let args = &self.args[start..end];
                start = end;
                (index, args, empty_at)
            })
    }
}

/// Append one `Row` message's values to `args`; the position (within the
/// row) of the first value with no field set.
fn row<'a>(bytes: &'a [u8], args: &mut Vec<ValueRef<'a>>) -> Result<Option<usize>, Malformed> {
    let start = args.len();
    let mut empty_at = None;
    let mut reader = Reader::new(bytes);
    while !reader.is_empty() {
        match reader.key()? {
            (1, WIRE_LEN) => match wire::read_value(reader.delimited()?)? {
                Some(value) => args.push(ValueRef::from(value)),
                None => {
                    empty_at.get_or_insert(args.len() - start);
                    args.push(ValueRef::Null);
                }
            },
            (1, _) => return Err(Malformed("invalid wire type")),
            (_, wire) => reader.skip(wire)?,
        }
    }
    Ok(empty_at)
}
