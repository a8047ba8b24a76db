//! Key-range pushdown: which conjuncts of WHERE restrict `key`, turned into
//! sorted, disjoint key ranges, and what remains to evaluate per record.

use std::ops::Bound;

use crate::expr::{BinaryOp, Column, Expr};
use crate::value::Value;

/// A range of keys (byte order of UTF-8 = `str` order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// Lower bound.
    pub start: Bound<String>,
    /// Upper bound.
    pub end: Bound<String>,
}

impl KeyRange {
    /// Every key.
    pub(crate) fn all() -> Self {
        KeyRange {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// Exactly `key`.
    pub(crate) fn point(key: &str) -> Self {
        KeyRange {
            start: Bound::Included(key.to_string()),
            end: Bound::Included(key.to_string()),
        }
    }

    /// Keys starting with `prefix`.
    pub(crate) fn prefix(prefix: &str) -> Self {
        KeyRange {
            start: Bound::Included(prefix.to_string()),
            end: prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded),
        }
    }

    /// Whether `key` lies in the range.
    #[cfg(test)]
    pub(crate) fn contains(&self, key: &str) -> bool {
        let above = match &self.start {
            Bound::Unbounded => true,
            Bound::Included(s) => key >= s.as_str(),
            Bound::Excluded(s) => key > s.as_str(),
        };
        let below = match &self.end {
            Bound::Unbounded => true,
            Bound::Included(e) => key <= e.as_str(),
            Bound::Excluded(e) => key < e.as_str(),
        };
        above && below
    }

    /// The single key of a point range.
    pub(crate) fn as_point(&self) -> Option<&str> {
        match (&self.start, &self.end) {
            (Bound::Included(a), Bound::Included(b)) if a == b => Some(a),
            _ => None,
        }
    }

    fn is_empty(&self) -> bool {
        match (&self.start, &self.end) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b))
            | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
            _ => false,
        }
    }

    fn intersect(&self, other: &KeyRange) -> KeyRange {
        let start = max_start(&self.start, &other.start);
        let end = min_end(&self.end, &other.end);
        KeyRange { start, end }
    }
}

fn max_start(a: &Bound<String>, b: &Bound<String>) -> Bound<String> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x.clone(),
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.max(y).clone()),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.max(y).clone()),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i > e {
                Bound::Included(i.clone())
            } else {
                Bound::Excluded(e.clone())
            }
        }
    }
}

fn min_end(a: &Bound<String>, b: &Bound<String>) -> Bound<String> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x.clone(),
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.min(y).clone()),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.min(y).clone()),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i < e {
                Bound::Included(i.clone())
            } else {
                Bound::Excluded(e.clone())
            }
        }
    }
}

/// The smallest string greater than every string starting with `prefix`, if any.
pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = last as u32 + 1;
        if (0xD800..0xE000).contains(&next) {
            next = 0xE000;
        }
        if let Some(c) = char::from_u32(next) {
            chars.push(c);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The keys a query can touch: sorted, disjoint ranges (empty: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRanges(pub Vec<KeyRange>);

impl KeyRanges {
    /// Every key.
    pub(crate) fn all() -> Self {
        KeyRanges(vec![KeyRange::all()])
    }

    /// Whether this is the unrestricted range.
    pub fn is_all(&self) -> bool {
        self.0 == vec![KeyRange::all()]
    }

    /// The keys, when every range is a single key.
    pub fn points(&self) -> Option<Vec<&str>> {
        self.0.iter().map(KeyRange::as_point).collect()
    }

    /// Whether `key` is in some range.
    #[cfg(test)]
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.0.iter().any(|r| r.contains(key))
    }

    fn normalize(mut ranges: Vec<KeyRange>) -> KeyRanges {
        ranges.retain(|r| !r.is_empty());
        ranges.sort_by(|a, b| start_cmp(&a.start, &b.start));
        let mut out: Vec<KeyRange> = Vec::new();
        for range in ranges {
            if let Some(last) = out.last_mut()
                && touches(&last.end, &range.start)
            {
                if end_cmp(&range.end, &last.end).is_gt() {
                    last.end = range.end;
                }
                continue;
            }
            out.push(range);
        }
        KeyRanges(out)
    }

    fn intersect(&self, other: &KeyRanges) -> KeyRanges {
        let mut out = Vec::new();
        for a in &self.0 {
            for b in &other.0 {
                out.push(a.intersect(b));
            }
        }
        KeyRanges::normalize(out)
    }

    fn union(&self, other: &KeyRanges) -> KeyRanges {
        KeyRanges::normalize(self.0.iter().chain(&other.0).cloned().collect())
    }
}

fn start_cmp(a: &Bound<String>, b: &Bound<String>) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Equal,
        (Bound::Unbounded, _) => Less,
        (_, Bound::Unbounded) => Greater,
        (Bound::Included(x), Bound::Excluded(y)) if x == y => Less,
        (Bound::Excluded(x), Bound::Included(y)) if x == y => Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x.cmp(y)
        }
    }
}

fn end_cmp(a: &Bound<String>, b: &Bound<String>) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Equal,
        (Bound::Unbounded, _) => Greater,
        (_, Bound::Unbounded) => Less,
        (Bound::Included(x), Bound::Excluded(y)) if x == y => Greater,
        (Bound::Excluded(x), Bound::Included(y)) if x == y => Less,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x.cmp(y)
        }
    }
}

/// Whether a range ending at `end` overlaps or abuts one starting at `start`.
fn touches(end: &Bound<String>, start: &Bound<String>) -> bool {
    match (end, start) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Included(e), Bound::Included(s)) => s <= e,
        (Bound::Included(e), Bound::Excluded(s)) | (Bound::Excluded(e), Bound::Included(s)) => {
            s <= e
        }
        (Bound::Excluded(e), Bound::Excluded(s)) => s < e,
    }
}

/// What pushdown found.
#[derive(Debug, Clone)]
pub(crate) struct Pushdown {
    /// Keys the query can touch.
    pub(crate) ranges: KeyRanges,
    /// Conjuncts fully expressed by `ranges`, as text (for EXPLAIN).
    pub(crate) pushed: Vec<String>,
    /// What must still be evaluated per record (`None`: nothing).
    pub(crate) residual: Option<Expr>,
}

fn text_literal(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Literal(Value::Text(t)) => Some(t),
        _ => None,
    }
}

fn is_key(expr: &Expr) -> bool {
    matches!(expr, Expr::Column(Column::Key))
}

/// The literal prefix of a LIKE pattern and whether the pattern is exactly
/// `prefix%` (so the range says everything).
fn like_prefix(pattern: &str) -> (String, bool) {
    // LIKE reads the pattern up to its first NUL, as SQLite does.
    let pattern = pattern.split('\0').next().unwrap_or_default();
    let cut = pattern.find(['%', '_']).unwrap_or(pattern.len());
    let prefix = pattern[..cut].to_string();
    let exact = &pattern[cut..] == "%";
    (prefix, exact)
}

/// The ranges a conjunct restricts `key` to, and whether they capture it exactly.
fn key_constraint(expr: &Expr) -> Option<(KeyRanges, bool)> {
    match expr {
        Expr::Binary { op, left, right } => {
            let (op, literal) = if is_key(left) {
                (*op, text_literal(right)?)
            } else if is_key(right) {
                let flipped = match op {
                    BinaryOp::Lt => BinaryOp::Gt,
                    BinaryOp::LtEq => BinaryOp::GtEq,
                    BinaryOp::Gt => BinaryOp::Lt,
                    BinaryOp::GtEq => BinaryOp::LtEq,
                    other => *other,
                };
                (flipped, text_literal(left)?)
            } else {
                return match op {
                    BinaryOp::Or => {
                        let (a, a_exact) = key_constraint(left)?;
                        let (b, b_exact) = key_constraint(right)?;
                        Some((a.union(&b), a_exact && b_exact))
                    }
                    BinaryOp::And => {
                        let (a, a_exact) = key_constraint(left)?;
                        let (b, b_exact) = key_constraint(right)?;
                        Some((a.intersect(&b), a_exact && b_exact))
                    }
                    _ => None,
                };
            };
            let v = literal.to_string();
            let range = match op {
                BinaryOp::Eq => KeyRange::point(&v),
                BinaryOp::Lt => KeyRange {
                    start: Bound::Unbounded,
                    end: Bound::Excluded(v),
                },
                BinaryOp::LtEq => KeyRange {
                    start: Bound::Unbounded,
                    end: Bound::Included(v),
                },
                BinaryOp::Gt => KeyRange {
                    start: Bound::Excluded(v),
                    end: Bound::Unbounded,
                },
                BinaryOp::GtEq => KeyRange {
                    start: Bound::Included(v),
                    end: Bound::Unbounded,
                },
                _ => return None,
            };
            Some((KeyRanges::normalize(vec![range]), true))
        }
        Expr::InList {
            expr,
            list,
            negated: false,
        } if is_key(expr) => {
            let points: Option<Vec<KeyRange>> = list
                .iter()
                .map(|e| text_literal(e).map(KeyRange::point))
                .collect();
            Some((KeyRanges::normalize(points?), true))
        }
        Expr::Between {
            expr,
            low,
            high,
            negated: false,
        } if is_key(expr) => {
            let range = KeyRange {
                start: Bound::Included(text_literal(low)?.to_string()),
                end: Bound::Included(text_literal(high)?.to_string()),
            };
            Some((KeyRanges::normalize(vec![range]), true))
        }
        Expr::Like {
            expr,
            pattern,
            negated: false,
        } if is_key(expr) => {
            let (prefix, exact) = like_prefix(text_literal(pattern)?);
            if prefix.is_empty() {
                return None;
            }
            Some((KeyRanges::normalize(vec![KeyRange::prefix(&prefix)]), exact))
        }
        Expr::Call { function, args }
            if function.name() == "starts_with" && !function.is_plugin() =>
        {
            if args.len() == 2 && is_key(&args[0]) {
                let prefix = text_literal(&args[1])?;
                Some((KeyRanges::normalize(vec![KeyRange::prefix(prefix)]), true))
            } else {
                None
            }
        }
        _ => None,
    }
}

fn conjuncts(expr: Expr, out: &mut Vec<Expr>) {
    match expr {
        Expr::Binary {
            op: BinaryOp::And,
            left,
            right,
        } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        other => out.push(other),
    }
}

/// Split a join's residual WHERE into the conjuncts that read only the
/// scanned table (`before` the lookup) and the others (`after`), each kept
/// in its written order.
pub(crate) fn split_at_join(residual: Option<Expr>) -> (Option<Expr>, Option<Expr>) {
    let mut parts = Vec::new();
    if let Some(residual) = residual {
        conjuncts(residual, &mut parts);
    }
    let (after, before): (Vec<Expr>, Vec<Expr>) = parts.into_iter().partition(|part| {
        let mut joined = false;
        part.walk(&mut |e| joined |= matches!(e, Expr::Joined(_)));
        joined
    });
    (and_all(before), and_all(after))
}

/// The conjunction of `parts`, `None` when there are none.
fn and_all(parts: Vec<Expr>) -> Option<Expr> {
    parts.into_iter().reduce(|left, right| Expr::Binary {
        op: BinaryOp::And,
        left: Box::new(left),
        right: Box::new(right),
    })
}

/// Split `filter` into key ranges and a residual predicate.
pub(crate) fn push_down(filter: Option<Expr>) -> Pushdown {
    let Some(filter) = filter else {
        return Pushdown {
            ranges: KeyRanges::all(),
            pushed: Vec::new(),
            residual: None,
        };
    };
    let mut parts = Vec::new();
    conjuncts(filter, &mut parts);
    let mut ranges = KeyRanges::all();
    let mut pushed = Vec::new();
    let mut residual: Vec<Expr> = Vec::new();
    for part in parts {
        match key_constraint(&part) {
            Some((restriction, exact)) => {
                ranges = ranges.intersect(&restriction);
                if exact {
                    pushed.push(part.to_string());
                } else {
                    pushed.push(format!("{part} (prefix only)"));
                    residual.push(part);
                }
            }
            None => residual.push(part),
        }
    }
    let residual = and_all(residual);
    Pushdown {
        ranges,
        pushed,
        residual,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Box<Expr> {
        Box::new(Expr::Column(Column::Key))
    }

    fn lit(s: &str) -> Box<Expr> {
        Box::new(Expr::Literal(Value::text(s)))
    }

    fn cmp(op: BinaryOp, v: &str) -> Expr {
        Expr::Binary {
            op,
            left: key(),
            right: lit(v),
        }
    }

    #[test]
    fn ranges_intersect_and_points_are_found() {
        let filter = Expr::Binary {
            op: BinaryOp::And,
            left: Box::new(cmp(BinaryOp::GtEq, "b")),
            right: Box::new(cmp(BinaryOp::Lt, "d")),
        };
        let p = push_down(Some(filter));
        assert_eq!(p.ranges.0.len(), 1);
        assert!(p.ranges.contains("b") && p.ranges.contains("c~") && !p.ranges.contains("d"));
        assert!(p.residual.is_none());

        let p = push_down(Some(Expr::InList {
            expr: key(),
            list: vec![*lit("x"), *lit("a"), *lit("x")],
            negated: false,
        }));
        assert_eq!(p.ranges.points(), Some(vec!["a", "x"]));
    }

    #[test]
    fn like_prefixes_become_ranges_and_keep_what_the_range_cannot_say() {
        let exact = push_down(Some(Expr::Like {
            expr: key(),
            pattern: lit("user:%"),
            negated: false,
        }));
        assert!(exact.ranges.contains("user:1") && !exact.ranges.contains("user;"));
        assert!(exact.residual.is_none());
        let partial = push_down(Some(Expr::Like {
            expr: key(),
            pattern: lit("user:%x"),
            negated: false,
        }));
        assert!(partial.ranges.contains("user:1x"));
        assert!(
            partial.residual.is_some(),
            "the %x part is checked per record"
        );
        let none = push_down(Some(Expr::Like {
            expr: key(),
            pattern: lit("%x"),
            negated: false,
        }));
        assert!(none.ranges.is_all());
    }

    #[test]
    fn or_of_key_constraints_is_a_union_and_contradictions_are_empty() {
        let p = push_down(Some(Expr::Binary {
            op: BinaryOp::Or,
            left: Box::new(cmp(BinaryOp::Eq, "a")),
            right: Box::new(cmp(BinaryOp::Eq, "b")),
        }));
        assert_eq!(p.ranges.points(), Some(vec!["a", "b"]));
        let p = push_down(Some(Expr::Binary {
            op: BinaryOp::And,
            left: Box::new(cmp(BinaryOp::Eq, "a")),
            right: Box::new(cmp(BinaryOp::Eq, "b")),
        }));
        assert!(p.ranges.0.is_empty());
    }

    #[test]
    fn prefix_end_is_the_next_string_after_the_prefix() {
        assert_eq!(prefix_end("ab").as_deref(), Some("ac"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end(""), None);
    }
}
