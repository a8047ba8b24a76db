//! Generators of plugin responses for the decoders' property tests: well
//! formed `CallResponse`s of every kind, byte mutations of them, and
//! random bytes. Cases per property: `EBB_FUZZ_LIB_CASES` (default 2000).

use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;

/// The property-test config of the decoder fuzz tests.
pub(crate) fn config() -> Config {
    let cases = std::env::var("EBB_FUZZ_LIB_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(2000);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

pub(crate) fn value() -> impl Strategy<Value = abi::Value> {
    use abi::value::Kind;
    prop_oneof![
        1 => Just(None),
        1 => any::<bool>().prop_map(|b| Some(Kind::Null(b))),
        1 => any::<bool>().prop_map(|b| Some(Kind::Boolean(b))),
        2 => any::<i64>().prop_map(|n| Some(Kind::Int(n))),
        2 => any::<f64>().prop_map(|f| Some(Kind::Float(f))),
        2 => ".{0,12}".prop_map(|s| Some(Kind::Text(s))),
        2 => prop::collection::vec(any::<u8>(), 0..16).prop_map(|b| Some(Kind::Bytes(b.into()))),
    ]
    .prop_map(|kind| abi::Value { kind })
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z_][a-z0-9_]{0,8}",
        1 => ".{0,8}",
        1 => prop::sample::select(vec![0usize, 63, 64, 4096, 4097]).prop_map(|n| "k".repeat(n)),
    ]
}

/// An action's `if_version`: none, a version, or text that is not one.
pub(crate) fn if_version() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just(String::new()),
        2 => (any::<u64>(), any::<u64>(), "[a-z0-9]{0,8}").prop_map(|(ms, c, w)| format!("{ms}.{c}@{w}")),
        1 => ".{0,12}",
    ]
}

pub(crate) fn action() -> impl Strategy<Value = abi::Action> {
    use abi::action::Action;
    prop_oneof![
        3 => (name(), name(), prop::collection::vec(any::<u8>(), 0..8), prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>(), 1u64..1000], if_version(), any::<bool>())
            .prop_map(|(table, key, value, ttl_ms, if_version, if_absent)| Some(Action::Put(abi::Put { table, key, value: value.into(), ttl_ms, if_version, if_absent }))),
        1 => (name(), name(), 1020usize..1030).prop_map(|(table, key, n)| {
            Some(Action::Put(abi::Put { table, key, value: vec![1u8; n].into(), ..abi::Put::default() }))
        }),
        2 => (name(), name(), if_version()).prop_map(|(table, key, if_version)| Some(Action::Delete(abi::Delete { table, key, if_version }))),
        1 => Just(None),
    ]
    .prop_map(|action| abi::Action { action })
}

/// A well-formed response of any kind.
pub(crate) fn response() -> impl Strategy<Value = abi::CallResponse> {
    use abi::call_response::Result as R;
    prop_oneof![
        1 => Just(None),
        4 => prop::collection::vec(value(), 0..5).prop_map(|values| Some(R::Scalar(abi::ScalarResult { values }))),
        2 => prop::collection::vec(any::<u8>(), 0..16).prop_map(|s| Some(R::State(s.into()))),
        2 => value().prop_map(|v| Some(R::Value(v))),
        3 => (prop::collection::vec(action(), 0..40), prop::collection::vec(prop_oneof![0u32..20, any::<u32>()], 0..4))
            .prop_map(|(actions, failed)| Some(R::Expiry(abi::ExpiryResult { actions, failed }))),
        1 => ".{0,12}".prop_map(|e| Some(R::Error(e))),
    ]
    .prop_map(|result| abi::CallResponse { result })
}

/// One change to encoded bytes.
#[derive(Debug, Clone)]
pub(crate) enum Mutation {
    FlipBit(Index, u8),
    SetByte(Index, u8),
    Truncate(Index),
    Insert(Index, Vec<u8>),
    Remove(Index, Index),
    Repeat(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::SetByte(i, b)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        2 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..10)).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(i, j)| Mutation::Remove(i, j)),
        1 => any::<Index>().prop_map(Mutation::Repeat),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for mutation in mutations {
        let n = bytes.len();
        match mutation {
            Mutation::FlipBit(i, bit) if n > 0 => bytes[i.index(n)] ^= 1 << bit,
            Mutation::SetByte(i, b) if n > 0 => bytes[i.index(n)] = *b,
            Mutation::Truncate(i) => bytes.truncate(i.index(n + 1)),
            Mutation::Insert(i, b) => {
                let at = i.index(n + 1);
                bytes.splice(at..at, b.iter().copied());
            }
            Mutation::Remove(i, j) if n > 0 => {
                let (a, b) = (i.index(n), j.index(n));
                bytes.drain(a.min(b)..a.max(b));
            }
            Mutation::Repeat(i) => {
                let tail = bytes[i.index(n + 1)..].to_vec();
                bytes.extend(tail);
            }
            _ => {}
        }
    }
    bytes
}

/// Response bytes: well formed, mutated, or random.
pub(crate) fn response_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => response().prop_map(|r| r.encode_to_vec()),
        4 => (response(), prop::collection::vec(mutation(), 1..4))
            .prop_map(|(r, m)| mutate(r.encode_to_vec(), &m)),
        2 => prop::collection::vec(any::<u8>(), 0..96),
    ]
}
