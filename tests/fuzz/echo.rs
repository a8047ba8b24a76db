//! The `echo` plugin: a raw ABI v1 module (WAT, no SDK) whose every call
//! answers bytes the test chose, so generated and mutated plugin responses
//! reach the host's decoders through a real server.
//!
//! `ebb_call` looks for [`MAGIC`] in its request; the 4 bytes after it are
//! a length `k` (little-endian) and it answers the `k` bytes after those,
//! unchecked (a `k` past the request reads the instance's memory or past
//! it). Without the magic it answers `CallResponse { state: "" }`. The
//! magic reaches the request inside an argument (scalars, aggregate
//! updates), a state (merge, finish) or an expired record's value (expiry
//! handlers).

use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;
use proptest::prelude::*;
use proptest::sample::Index;

pub const MAGIC: &[u8; 8] = b"EBBFUZZ!";

fn escape(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

fn decl(name: &str, kind: abi::FunctionKind, arg_count: i32) -> abi::FunctionDecl {
    abi::FunctionDecl {
        name: name.into(),
        kind: kind as i32,
        arg_count,
        description: format!("fuzz {name}"),
    }
}

/// The module: scalar `f(x)`, aggregate `agg(x)`, expiry handler `on_expire`.
pub fn module() -> Vec<u8> {
    let manifest = abi::Manifest {
        abi_version: 1,
        name: "echo".into(),
        version: "1.0.0".into(),
        functions: vec![
            decl("f", abi::FunctionKind::Scalar, 1),
            decl("agg", abi::FunctionKind::Aggregate, 1),
            decl("on_expire", abi::FunctionKind::ExpiryHandler, 0),
        ],
    }
    .encode_to_vec();
    let default = abi::CallResponse {
        result: Some(abi::call_response::Result::State(Vec::new().into())),
    }
    .encode_to_vec();
    let magic = i64::from_le_bytes(*MAGIC);
    let wat = format!(
        r#"(module
  (memory (export "memory") 40)
  (global $heap (mut i32) (i32.const 65536))
  (data (i32.const 1024) "{manifest}")
  (data (i32.const 4096) "{default}")
  (func (export "ebb_abi_version") (result i32) (i32.const 1))
  (func (export "ebb_alloc") (param $len i32) (result i32) (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $len)))
    (local.get $p))
  (func (export "ebb_dealloc") (param i32 i32) (global.set $heap (i32.const 65536)))
  (func (export "ebb_manifest") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const {manifest_len})))
  (func $find (param $p i32) (param $n i32) (result i32) (local $i i32) (local $last i32)
    (if (i32.lt_u (local.get $n) (i32.const 12)) (then (return (i32.const -1))))
    (local.set $last (i32.sub (i32.add (local.get $p) (local.get $n)) (i32.const 12)))
    (local.set $i (local.get $p))
    (block $done
      (loop $scan
        (br_if $done (i32.gt_u (local.get $i) (local.get $last)))
        (if (i64.eq (i64.load (local.get $i)) (i64.const {magic}))
          (then (return (i32.add (local.get $i) (i32.const 8)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (i32.const -1))
  (func (export "ebb_call") (param $p i32) (param $n i32) (result i64) (local $at i32)
    (local.set $at (call $find (local.get $p) (local.get $n)))
    (if (i32.eq (local.get $at) (i32.const -1))
      (then (return (i64.or (i64.shl (i64.const 4096) (i64.const 32)) (i64.const {default_len})))))
    (i64.or
      (i64.shl (i64.extend_i32_u (i32.add (local.get $at) (i32.const 4))) (i64.const 32))
      (i64.extend_i32_u (i32.load (local.get $at)))))
)"#,
        manifest = escape(&manifest),
        manifest_len = manifest.len(),
        default = escape(&default),
        default_len = default.len(),
    );
    wat::parse_str(wat).expect("valid WAT")
}

/// `response` framed for the echo plugin, with `len` as its length.
pub fn framed(response: &[u8], len: u32) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(response);
    out
}

fn value() -> impl Strategy<Value = abi::Value> {
    use abi::value::Kind;
    prop_oneof![
        1 => Just(None),
        1 => any::<bool>().prop_map(|b| Some(Kind::Null(b))),
        1 => any::<bool>().prop_map(|b| Some(Kind::Boolean(b))),
        2 => any::<i64>().prop_map(|n| Some(Kind::Int(n))),
        1 => prop::sample::select(vec![i64::MIN, i64::MAX, 0, -1]).prop_map(|n| Some(Kind::Int(n))),
        2 => any::<f64>().prop_map(|f| Some(Kind::Float(f))),
        1 => prop::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, f64::MIN_POSITIVE])
            .prop_map(|f| Some(Kind::Float(f))),
        2 => ".{0,12}".prop_map(|s| Some(Kind::Text(s))),
        1 => (0usize..300_000).prop_map(|n| Some(Kind::Text("t".repeat(n)))),
        2 => prop::collection::vec(any::<u8>(), 0..16).prop_map(|b| Some(Kind::Bytes(b.into()))),
    ]
    .prop_map(|kind| abi::Value { kind })
}

fn table_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("archive".to_string()),
        2 => "[a-z_][a-z0-9_]{0,8}",
        1 => prop::sample::select(vec!["", "ebb_x", "T", "1a", "a-b", "é"]).prop_map(str::to_string),
        1 => Just("a".repeat(64)),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9:]{1,8}",
        1 => prop::sample::select(vec![0usize, 4096, 4097]).prop_map(|n| "k".repeat(n)),
        1 => ".{0,6}",
    ]
}

fn action() -> impl Strategy<Value = abi::Action> {
    use abi::action::Action;
    prop_oneof![
        3 => (table_name(), key(), prop::collection::vec(any::<u8>(), 0..32), prop_oneof![
            3 => Just(0u64), 1 => any::<u64>(), 1 => Just(u64::MAX), 1 => 1u64..100_000,
        ], any::<bool>()).prop_map(|(table, key, value, ttl_ms, if_absent)| Some(Action::Put(abi::Put { table, key, value: value.into(), ttl_ms, if_absent, ..abi::Put::default() }))),
        1 => (0usize..2, table_name(), key()).prop_map(|(_, table, key)| {
            // A large value now and then (past --max-value-bytes).
            Some(Action::Put(abi::Put { table, key, value: vec![7u8; 70_000].into(), ..abi::Put::default() }))
        }),
        2 => (table_name(), key(), prop_oneof![3 => Just(String::new()), 1 => Just("1.0@n1".to_string()), 1 => Just("not a version".to_string())])
            .prop_map(|(table, key, if_version)| Some(Action::Delete(abi::Delete { table, key, if_version }))),
        1 => Just(None),
    ]
    .prop_map(|action| abi::Action { action })
}

/// A well-formed `CallResponse` of any kind.
pub fn response() -> impl Strategy<Value = abi::CallResponse> {
    use abi::call_response::Result as R;
    prop_oneof![
        1 => Just(None),
        5 => prop::collection::vec(value(), 0..4).prop_map(|values| Some(R::Scalar(abi::ScalarResult { values }))),
        2 => prop::collection::vec(any::<u8>(), 0..24).prop_map(|s| Some(R::State(s.into()))),
        2 => value().prop_map(|v| Some(R::Value(v))),
        2 => (prop::collection::vec(action(), 0..5), prop::collection::vec(prop_oneof![0u32..4, Just(u32::MAX)], 0..3))
            .prop_map(|(actions, failed)| Some(R::Expiry(abi::ExpiryResult { actions, failed }))),
        1 => ".{0,20}".prop_map(|e| Some(R::Error(e))),
    ]
    .prop_map(|result| abi::CallResponse { result })
}

/// A change to an encoded response.
#[derive(Debug, Clone)]
pub enum ByteMutation {
    FlipBit(Index, u8),
    SetByte(Index, u8),
    Truncate(Index),
    Insert(Index, Vec<u8>),
    Remove(Index, Index),
    DuplicateTail(Index),
}

pub fn byte_mutation() -> impl Strategy<Value = ByteMutation> {
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(i, b)| ByteMutation::FlipBit(i, b)),
        2 => (any::<Index>(), prop_oneof![any::<u8>(), Just(0xff), Just(0x80), Just(0)]).prop_map(|(i, b)| ByteMutation::SetByte(i, b)),
        1 => any::<Index>().prop_map(ByteMutation::Truncate),
        2 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..12)).prop_map(|(i, b)| ByteMutation::Insert(i, b)),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(i, j)| ByteMutation::Remove(i, j)),
        1 => any::<Index>().prop_map(ByteMutation::DuplicateTail),
    ]
}

pub fn mutate(mut bytes: Vec<u8>, mutations: &[ByteMutation]) -> Vec<u8> {
    for mutation in mutations {
        let n = bytes.len();
        match mutation {
            ByteMutation::FlipBit(i, bit) if n > 0 => bytes[i.index(n)] ^= 1 << bit,
            ByteMutation::SetByte(i, b) if n > 0 => bytes[i.index(n)] = *b,
            ByteMutation::Truncate(i) => bytes.truncate(i.index(n + 1)),
            ByteMutation::Insert(i, b) => {
                let at = i.index(n + 1);
                bytes.splice(at..at, b.iter().copied());
            }
            ByteMutation::Remove(i, j) if n > 0 => {
                let (a, b) = (i.index(n), j.index(n));
                bytes.drain(a.min(b)..a.max(b));
            }
            ByteMutation::DuplicateTail(i) => {
                let tail = bytes[i.index(n + 1)..].to_vec();
                bytes.extend(tail);
            }
            _ => {}
        }
    }
    bytes
}

/// Response bytes: a valid response, a mutated one, or random bytes; and
/// the length to frame them with (usually their own).
#[derive(Debug, Clone)]
pub struct Answer {
    pub valid: Option<abi::CallResponse>,
    pub bytes: Vec<u8>,
    pub len: u32,
}

pub fn answer() -> impl Strategy<Value = Answer> {
    let bytes = prop_oneof![
        4 => response().prop_map(|r| (Some(r.clone()), r.encode_to_vec())),
        4 => (response(), prop::collection::vec(byte_mutation(), 1..4))
            .prop_map(|(r, m)| (None, mutate(r.encode_to_vec(), &m))),
        2 => prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| (None, b)),
    ];
    (
        bytes,
        prop_oneof![
            12 => Just(None),
            1 => prop::sample::select(vec![0u32, 1, u32::MAX, 16 * 1024 * 1024, 16 * 1024 * 1024 + 1, 3_000_000])
                .prop_map(Some),
            1 => (0u32..64).prop_map(|extra| Some(extra + 1_000_000_000)),
        ],
    )
        .prop_map(|((valid, bytes), len)| {
            let own = bytes.len() as u32;
            Answer {
                valid: if len.is_none() { valid } else { None },
                len: len.unwrap_or(own),
                bytes,
            }
        })
}
