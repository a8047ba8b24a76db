//! Aggregate functions: a state the host keeps as bytes, folded with init/update/merge/finish.

use std::marker::PhantomData;

use crate::rows::Rows;
use crate::value::{Value, ValueRef};

/// An aggregate SQL function.
///
/// The host keeps the state between calls as the bytes of [`Aggregate::encode`];
/// each call decodes it, so `decode(encode(s))` must give back an equivalent
/// state. Partial states from different partitions or pages are combined with
/// [`Aggregate::merge`], which MUST be associative (and should be commutative):
/// the split of the input is not under the plugin's control. Empty input is
/// `finish(init())`.
pub trait Aggregate: 'static {
    /// The in-memory state.
    type State;

    /// Declared argument count (-1 for variadic). Defaults to 1.
    const ARG_COUNT: i32 = 1;

    /// When true (the default) rows with a NULL argument are not passed to
    /// [`Aggregate::update`], as SQL aggregates ignore NULLs.
    const IGNORE_NULLS: bool = true;

    /// The state of an empty input.
    fn init() -> Self::State;

    /// Folds one row into the state; an `Err` fails the whole call.
    fn update(state: &mut Self::State, args: &[Value]) -> Result<(), String>;

    /// Combines two partial states; `left` holds the earlier rows.
    fn merge(left: Self::State, right: Self::State) -> Self::State;

    /// Turns the state into the result.
    fn finish(state: Self::State) -> Value;

    /// Serializes the state for the host.
    fn encode(state: &Self::State) -> Vec<u8>;

    /// Reads a state produced by [`Aggregate::encode`]; corrupt bytes are an `Err`.
    fn decode(bytes: &[u8]) -> Result<Self::State, String>;
}

/// An [`Aggregate`] behind bytes, as the dispatcher drives it.
pub(crate) trait ErasedAggregate: Send + Sync {
    fn arg_count(&self) -> i32;
    fn init(&self) -> Vec<u8>;
    fn update(&self, state: &[u8], rows: Vec<Vec<Value>>) -> Result<Vec<u8>, String>;
    /// Like `update`, with the rows produced by `rows`, which calls its
    /// argument once per row (so a caller can reuse one row buffer).
    fn update_each(&self, state: &[u8], rows: &mut RowFeed<'_>) -> Result<Vec<u8>, String>;
    /// Like `update`, on the state and rows of a decoded batch: the row loop
    /// is compiled for this aggregate, so a row costs no dynamic call.
    fn update_rows(&self, rows: &Rows<'_>) -> Result<Vec<u8>, String>;
    fn merge(&self, left: &[u8], right: &[u8]) -> Result<Vec<u8>, String>;
    fn finish(&self, state: &[u8]) -> Result<Value, String>;
}

/// Feeds rows to an aggregate update: calls its argument once per row.
pub(crate) type RowFeed<'a> =
    dyn FnMut(&mut dyn FnMut(&[Value]) -> Result<(), String>) -> Result<(), String> + 'a;

pub(crate) struct AggregateOf<A>(PhantomData<fn() -> A>);

impl<A> AggregateOf<A> {
    pub(crate) fn new() -> Self {
        AggregateOf(PhantomData)
    }
}

fn decode<A: Aggregate>(bytes: &[u8]) -> Result<A::State, String> {
    A::decode(bytes).map_err(|e| format!("corrupt state: {e}"))
}

impl<A: Aggregate> ErasedAggregate for AggregateOf<A> {
    fn arg_count(&self) -> i32 {
        A::ARG_COUNT
    }

    fn init(&self) -> Vec<u8> {
        A::encode(&A::init())
    }

    fn update(&self, state: &[u8], rows: Vec<Vec<Value>>) -> Result<Vec<u8>, String> {
        self.update_each(state, &mut |each| {
            rows.iter().try_for_each(|args| each(args))
        })
    }

    fn update_each(&self, state: &[u8], rows: &mut RowFeed<'_>) -> Result<Vec<u8>, String> {
        let mut state = decode::<A>(state)?;
        rows(&mut |args| {
            if A::IGNORE_NULLS && args.iter().any(Value::is_null) {
                return Ok(());
            }
            A::update(&mut state, args)
        })?;
        Ok(A::encode(&state))
    }

    fn update_rows(&self, rows: &Rows<'_>) -> Result<Vec<u8>, String> {
        let mut state = decode::<A>(rows.state)?;
        let mut owned: Vec<Value> = Vec::new();
        for (_, args, _) in rows.iter() {
            if A::IGNORE_NULLS && args.iter().any(|arg| matches!(arg, ValueRef::Null)) {
                continue;
            }
            owned.clear();
            owned.extend(args.iter().map(ValueRef::to_owned));
            A::update(&mut state, &owned)?;
        }
        Ok(A::encode(&state))
    }

    fn merge(&self, left: &[u8], right: &[u8]) -> Result<Vec<u8>, String> {
        let merged = A::merge(decode::<A>(left)?, decode::<A>(right)?);
        Ok(A::encode(&merged))
    }

    fn finish(&self, state: &[u8]) -> Result<Value, String> {
        Ok(A::finish(decode::<A>(state)?))
    }
}
