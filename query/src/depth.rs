//! Expression depth bounded from SQL tokens, before any syntax tree exists.
//!
//! sqlparser parses a chain of left-associative operators (`1 + 1 + ...`,
//! `a OR b OR ...`, `x IS NULL IS NULL ...`, `x::INT::INT ...`) in a loop, so
//! its recursion limit never sees the chain, yet it builds a left-deep tree
//! with one level per operator, and everything that walks the tree afterwards
//! (lowering, evaluation, `Display`, `Drop`, `Clone`) recurses once per level.
//! [`depth_bound`] runs over the tokens with an explicit stack, before any
//! tree exists, and never returns less than the depth of any expression the
//! parser could build from them.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

/// The tokens of one bracket level: the segment being read (since the last
/// comma) and the deepest segment already read.
#[derive(Default)]
struct Group {
    /// Depth of the deepest finished segment.
    deepest: usize,
    /// Tokens of the current segment that may make a node with children.
    operators: usize,
    /// The current segment's deepest bracketed group, plus one.
    inner: usize,
}

impl Group {
    fn segment(&self) -> usize {
        self.operators + self.inner
    }

    fn end_segment(&mut self) {
        self.deepest = self.deepest.max(self.segment());
        self.operators = 0;
        self.inner = 0;
    }

    fn depth(&self) -> usize {
        self.deepest.max(self.segment())
    }
}

/// A conservative bound on how many levels deep any expression parsed from
/// `tokens` nests: never less than the depth of a tree sqlparser builds.
///
/// Every token that can make a node with children counts one level: symbols
/// (`+`, `::`, `[`, `.`, ...) and keywords (`AND`, `NOT`, `IS`, `BETWEEN`,
/// `CAST`, `SELECT`, ...). Leaves count nothing: unquoted and quoted
/// identifiers that are not keywords, numbers, strings, blobs, placeholders,
/// `NULL`, `TRUE`, `FALSE`, the columns `key` and `value`, and whitespace and
/// comments. Commas and semicolons separate siblings (select items, function
/// arguments, IN list items). Segments are the runs between separators; a
/// segment's depth is the number of its counted tokens plus its deepest
/// bracketed group, and a group `( )`, `[ ]` or `{ }` is one level more than
/// its deepest segment. Totals, not running counts: in the left-deep tree of
/// `a + b + c`, each operator sits above everything before it.
///
/// Unbalanced brackets are left to the parser to report: a closer with no
/// opener is ignored and groups still open at the end are closed there.
pub(crate) fn depth_bound<'a>(tokens: impl IntoIterator<Item = &'a Token>) -> usize {
    let mut stack = vec![Group::default()];
    for token in tokens {
        match token {
            Token::LParen | Token::LBrace => stack.push(Group::default()),
            // `a[1][2]` is one flat access chain today; counting each `[` as
            // a level as well keeps the bound safe if it ever nests.
            Token::LBracket => {
                top(&mut stack).operators += 1;
                stack.push(Group::default());
            }
            Token::RParen | Token::RBracket | Token::RBrace => close(&mut stack),
            Token::Comma | Token::SemiColon => top(&mut stack).end_segment(),
            token if is_leaf(token) => {}
            _ => top(&mut stack).operators += 1,
        }
    }
    while stack.len() > 1 {
        close(&mut stack);
    }
    stack[0].depth()
}

fn top(stack: &mut [Group]) -> &mut Group {
    stack
        .last_mut()
        .expect("the outermost group is never closed")
}

/// Close the innermost group into its parent; a closer with no opener is ignored.
fn close(stack: &mut Vec<Group>) {
    if stack.len() > 1 {
        let group = stack.pop().expect("checked above");
        let parent = top(stack);
        parent.inner = parent.inner.max(group.depth() + 1);
    }
}

/// Whether `token` is always a leaf of the tree (or no node at all).
fn is_leaf(token: &Token) -> bool {
    match token {
        Token::Word(word) => {
            word.quote_style.is_some()
                || matches!(
                    word.keyword,
                    Keyword::NoKeyword
                        | Keyword::NULL
                        | Keyword::TRUE
                        | Keyword::FALSE
                        | Keyword::KEY
                        | Keyword::VALUE
                )
        }
        Token::Number(..)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::NationalStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::Placeholder(_)
        | Token::Whitespace(_)
        | Token::EOF => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use sqlparser::dialect::GenericDialect;
    use sqlparser::tokenizer::Tokenizer;

    use super::*;

    fn bound(sql: &str) -> usize {
        let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize().unwrap();
        depth_bound(&tokens)
    }

    #[test]
    fn a_chain_counts_every_operator_and_leaves_count_nothing() {
        assert_eq!(bound("1"), 0);
        assert_eq!(bound("key"), 0);
        assert_eq!(bound("1 + 2 + 3"), 2);
        assert_eq!(bound("key = 'a' OR key = 'b' OR value IS NULL"), 5);
        assert_eq!(bound("- - 1"), 2);
    }

    #[test]
    fn siblings_take_the_deepest_and_groups_add_a_level() {
        assert_eq!(bound("1 + 1, 1 + 1 + 1, 1"), 2);
        assert_eq!(bound("f(1 + 1, 1 + 1 + 1)"), 3);
        assert_eq!(bound("((1))"), 2);
        assert_eq!(bound("(1 + 1) + (1 + 1 + 1)"), 4);
        assert_eq!(bound("x IN (1, 2, 3)"), 2);
        assert_eq!(bound("a[1][2]"), 3);
    }

    #[test]
    fn totals_not_running_counts_bound_a_left_deep_chain() {
        // (1 + 1) * 1 - ... : every operator of the segment may sit above the
        // group, whatever their order.
        assert_eq!(bound("(1 + 1) + 1 + 1"), 4);
        assert_eq!(bound("1 + 1 + (1 + 1)"), 4);
    }

    #[test]
    fn unbalanced_brackets_are_left_to_the_parser() {
        assert_eq!(bound("1 + 1)) + 1"), 2);
        assert_eq!(bound("((1 + 1"), 3);
    }
}
