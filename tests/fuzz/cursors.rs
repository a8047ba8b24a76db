//! Cursor generators: real cursors mutated as text and as bytes, cursors
//! of another query or another server, and cursors signed with the data
//! dir's own key around arbitrary contents (what a leaked key or a bug in
//! `seal` would let through).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;
use ebb_proto::query::v1 as pb;
use proptest::prelude::*;
use proptest::sample::Index;

use super::echo::{ByteMutation, byte_mutation, mutate};

/// Queries whose first page (page size 3) returns a cursor.
pub const PAGED: &[&str] = &[
    "SELECT key, value FROM t",
    "SELECT key FROM t WHERE key >= 'k05'",
    "SELECT key, length(value) AS n FROM t ORDER BY n DESC, key",
    "SELECT substr(key, 1, 2) AS p, count(*) FROM t GROUP BY key",
    "SELECT key FROM t WHERE key LIKE 'k%' ORDER BY key DESC",
    "SELECT key, count(*) FROM t GROUP BY key ORDER BY 2",
];

/// How a real cursor is changed.
#[derive(Debug, Clone)]
pub enum CursorCase {
    /// Text-level edits of the base64.
    Text(Vec<TextEdit>),
    /// Byte-level edits of the decoded `SignedCursor`, re-encoded.
    Bytes(Vec<ByteMutation>, Encoding),
    /// Sent with the SQL of another query.
    OtherQuery(Index),
    /// The same contents signed with another key (another server).
    OtherKey([u8; 32]),
    /// Contents changed, then signed with this data dir's key.
    Resealed(Vec<Edit>),
    /// Arbitrary contents signed with this data dir's key.
    Forged(Box<pb::Cursor>),
}

#[derive(Debug, Clone, Copy)]
pub enum Encoding {
    UrlNoPad,
    Standard,
}

#[derive(Debug, Clone)]
pub enum TextEdit {
    Replace(Index, char),
    Delete(Index),
    Insert(Index, char),
    Truncate(Index),
    Append(String),
    Concat,
    Wrap(&'static str),
}

/// A change to a cursor's contents.
#[derive(Debug, Clone)]
pub enum Edit {
    Sql(String),
    Params(Vec<abi::Value>),
    PageSize(u32),
    Relaxed(bool),
    Emitted(u64),
    Format(u32),
    ClearPartitions,
    Partition(Index, u32, Option<String>, u64, u64, bool),
    AddPartition(u32, Option<String>, bool),
}

const BASE64ISH: &[char] = &[
    'A', 'z', '0', '9', '-', '_', '+', '/', '=', ' ', '%', '.', '\n', 'é', '\u{0}',
];

fn text_edit() -> impl Strategy<Value = TextEdit> {
    let c = prop::sample::select(BASE64ISH);
    prop_oneof![
        4 => (any::<Index>(), c.clone()).prop_map(|(i, c)| TextEdit::Replace(i, c)),
        2 => any::<Index>().prop_map(TextEdit::Delete),
        2 => (any::<Index>(), c).prop_map(|(i, c)| TextEdit::Insert(i, c)),
        2 => any::<Index>().prop_map(TextEdit::Truncate),
        1 => "[A-Za-z0-9_=-]{1,12}".prop_map(TextEdit::Append),
        1 => Just(TextEdit::Concat),
        1 => prop::sample::select(vec![" ", "\t", "\"", "=="]).prop_map(TextEdit::Wrap),
    ]
}

fn value() -> impl Strategy<Value = abi::Value> {
    use abi::value::Kind;
    prop_oneof![
        Just(None),
        any::<i64>().prop_map(|n| Some(Kind::Int(n))),
        any::<f64>().prop_map(|f| Some(Kind::Float(f))),
        ".{0,8}".prop_map(|s| Some(Kind::Text(s))),
        prop::collection::vec(any::<u8>(), 0..8).prop_map(|b| Some(Kind::Bytes(b.into()))),
        any::<bool>().prop_map(|b| Some(Kind::Null(b))),
    ]
    .prop_map(|kind| abi::Value { kind })
}

fn resume() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        "k[0-9]{2}",
        Just(String::new()),
        Just("\u{10ffff}".repeat(3)),
        ".{0,6}",
    ])
}

fn sql() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(PAGED).prop_map(str::to_string),
        2 => super::sql_text::select().prop_map(|q| q.sql),
        1 => ".{0,20}",
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        2 => sql().prop_map(Edit::Sql),
        1 => prop::collection::vec(value(), 0..3).prop_map(Edit::Params),
        2 => prop_oneof![Just(0u32), Just(1), Just(10_000), Just(10_001), Just(u32::MAX), any::<u32>()].prop_map(Edit::PageSize),
        1 => any::<bool>().prop_map(Edit::Relaxed),
        2 => prop_oneof![Just(0u64), Just(u64::MAX), Just(1 << 40), any::<u64>(), 0u64..40].prop_map(Edit::Emitted),
        1 => prop_oneof![Just(0u32), Just(2), any::<u32>()].prop_map(Edit::Format),
        1 => Just(Edit::ClearPartitions),
        3 => (any::<Index>(), prop_oneof![0u32..5, Just(u32::MAX)], resume(), any::<u64>(), any::<u64>(), any::<bool>())
            .prop_map(|(i, f, r, rev, inc, done)| Edit::Partition(i, f, r, rev, inc, done)),
        1 => (prop_oneof![0u32..5, Just(u32::MAX)], resume(), any::<bool>())
            .prop_map(|(f, r, done)| Edit::AddPartition(f, r, done)),
    ]
}

fn forged() -> impl Strategy<Value = pb::Cursor> {
    (
        sql(),
        prop::collection::vec(value(), 0..3),
        any::<u32>(),
        any::<bool>(),
        prop::collection::vec(
            (
                prop_oneof![0u32..5, Just(u32::MAX)],
                resume(),
                any::<u64>(),
                any::<u64>(),
                any::<bool>(),
            ),
            0..6,
        ),
        any::<u64>(),
        prop::collection::vec(
            (
                prop_oneof![
                    Just("json".to_string()),
                    Just("nope".to_string()),
                    Just(String::new())
                ],
                prop_oneof![Just(1u32), any::<u32>()],
                prop_oneof![Just(String::new()), "[0-9a-f]{64}"],
            ),
            0..3,
        ),
    )
        .prop_map(
            |(sql, params, page_size, relaxed, partitions, emitted, plugins)| pb::Cursor {
                format: 2,
                sql,
                params,
                page_size,
                relaxed,
                partitions: partitions
                    .into_iter()
                    .map(|(fragment, resume_after, revision, incarnation, done)| {
                        pb::PartitionCursor {
                            fragment,
                            resume_after,
                            revision,
                            incarnation,
                            done,
                        }
                    })
                    .collect(),
                emitted,
                plugins: plugins
                    .into_iter()
                    .map(|(name, version, sha256)| pb::PluginUse {
                        name,
                        version,
                        sha256,
                    })
                    .collect(),
            },
        )
}

pub fn case() -> impl Strategy<Value = (Index, CursorCase)> {
    let case = prop_oneof![
        4 => prop::collection::vec(text_edit(), 1..4).prop_map(CursorCase::Text),
        4 => (prop::collection::vec(byte_mutation(), 1..4), prop_oneof![4 => Just(Encoding::UrlNoPad), 1 => Just(Encoding::Standard)])
            .prop_map(|(m, e)| CursorCase::Bytes(m, e)),
        1 => any::<Index>().prop_map(CursorCase::OtherQuery),
        1 => any::<[u8; 32]>().prop_map(CursorCase::OtherKey),
        4 => prop::collection::vec(edit(), 1..4).prop_map(CursorCase::Resealed),
        2 => forged().prop_map(|c| CursorCase::Forged(Box::new(c))),
    ];
    (any::<Index>(), case)
}

pub fn apply_text(token: &str, edits: &[TextEdit]) -> String {
    let mut chars: Vec<char> = token.chars().collect();
    for edit in edits {
        let n = chars.len();
        match edit {
            TextEdit::Replace(i, c) if n > 0 => chars[i.index(n)] = *c,
            TextEdit::Delete(i) if n > 0 => {
                chars.remove(i.index(n));
            }
            TextEdit::Insert(i, c) => chars.insert(i.index(n + 1), *c),
            TextEdit::Truncate(i) => chars.truncate(i.index(n + 1)),
            TextEdit::Append(s) => chars.extend(s.chars()),
            TextEdit::Concat => chars.extend(token.chars()),
            TextEdit::Wrap(w) => {
                let mut wrapped: Vec<char> = w.chars().collect();
                wrapped.extend(chars.iter());
                wrapped.extend(w.chars());
                chars = wrapped;
            }
            _ => {}
        }
    }
    chars.into_iter().collect()
}

pub fn apply_bytes(token: &str, mutations: &[ByteMutation], encoding: Encoding) -> String {
    let raw = URL_SAFE_NO_PAD
        .decode(token)
        .expect("a real cursor decodes");
    let bytes = mutate(raw, mutations);
    match encoding {
        Encoding::UrlNoPad => URL_SAFE_NO_PAD.encode(bytes),
        Encoding::Standard => STANDARD.encode(bytes),
    }
}

/// The signed contents of a token, if it decodes like the server decodes it.
pub fn signed(token: &str) -> Option<pb::SignedCursor> {
    let raw = URL_SAFE_NO_PAD.decode(token.trim()).ok()?;
    pb::SignedCursor::decode(raw.as_slice()).ok()
}

/// The contents of a real cursor.
pub fn contents(token: &str) -> pb::Cursor {
    let signed = signed(token).expect("a real cursor");
    pb::Cursor::decode(signed.cursor.as_ref()).expect("a real cursor's contents")
}

pub fn apply_edits(mut cursor: pb::Cursor, edits: &[Edit]) -> pb::Cursor {
    for edit in edits {
        match edit {
            Edit::Sql(sql) => cursor.sql = sql.clone(),
            Edit::Params(params) => cursor.params = params.clone(),
            Edit::PageSize(n) => cursor.page_size = *n,
            Edit::Relaxed(r) => cursor.relaxed = *r,
            Edit::Emitted(n) => cursor.emitted = *n,
            Edit::Format(f) => cursor.format = *f,
            Edit::ClearPartitions => cursor.partitions.clear(),
            Edit::Partition(i, fragment, resume, revision, incarnation, done) => {
                let n = cursor.partitions.len();
                if n > 0 {
                    let p = &mut cursor.partitions[i.index(n)];
                    p.fragment = *fragment;
                    p.resume_after = resume.clone();
                    p.revision = *revision;
                    p.incarnation = *incarnation;
                    p.done = *done;
                }
            }
            Edit::AddPartition(fragment, resume, done) => {
                cursor.partitions.push(pb::PartitionCursor {
                    fragment: *fragment,
                    resume_after: resume.clone(),
                    revision: 0,
                    incarnation: 0,
                    done: *done,
                })
            }
        }
    }
    cursor
}
