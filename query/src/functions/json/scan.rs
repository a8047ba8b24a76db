//! The JSON text scanner: checks RFC 8259 text as SQLite's parser does and
//! skips values without building them, borrowing the input.

/// SQLite's `JSON_MAX_DEPTH`: deeper nesting is malformed JSON.
pub(super) const MAX_DEPTH: usize = 1000;

/// The input is not RFC 8259 JSON text (SQLite's `malformed JSON`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Malformed;

/// What a JSON value is, as `json_type` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `null`.
    Null,
    /// `true`.
    True,
    /// `false`.
    False,
    /// A number without fraction or exponent.
    Integer,
    /// A number with a fraction or an exponent.
    Real,
    /// A string.
    Text,
    /// `[...]`.
    Array,
    /// `{...}`.
    Object,
}

impl Kind {
    /// The name `json_type` returns.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::True => "true",
            Kind::False => "false",
            Kind::Integer => "integer",
            Kind::Real => "real",
            Kind::Text => "text",
            Kind::Array => "array",
            Kind::Object => "object",
        }
    }
}

/// Bytes that may appear unescaped inside a string: not `"`, `\` or a
/// control character.
static PLAIN: [bool; 256] = {
    let mut table = [true; 256];
    let mut i = 0;
    while i < 0x20 {
        table[i] = false;
        i += 1;
    }
    table[b'"' as usize] = false;
    table[b'\\' as usize] = false;
    table
};

/// Where the run of plain string bytes starting at `i` ends: eight bytes
/// at a time while none is special, then byte by byte.
#[inline]
fn plain_run(text: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = text.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // A high bit marks the first byte that is `"`, `\` or below 0x20
        // (bits above the first may be spurious; only the lowest is used).
        let quote = w ^ (ONES * u64::from(b'"'));
        let backslash = w ^ (ONES * u64::from(b'\\'));
        let special = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (w.wrapping_sub(ONES * 0x20) & !w);
        let special = special & HIGHS;
        if special != 0 {
            return i + (special.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < text.len() && PLAIN[usize::from(text[i])] {
        i += 1;
    }
    i
}

/// A cursor over JSON text. A NUL byte ends the text, as in SQLite, which
/// reads its input as a C string. The kinds of the open containers are kept
/// in a bit set, so nesting costs no recursion and no allocation.
#[derive(Debug, Clone)]
pub(super) struct Scanner<'a> {
    /// The text.
    text: &'a [u8],
    /// The next byte to read.
    pub(super) pos: usize,
    /// How many containers are open.
    depth: usize,
    /// Bit `d` is set when the container open at depth `d` is an object.
    objects: [u64; MAX_DEPTH / 64 + 1],
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `text`.
    pub(super) fn new(text: &'a [u8]) -> Self {
        Scanner {
            text,
            pos: 0,
            depth: 0,
            objects: [0; MAX_DEPTH / 64 + 1],
        }
    }

    /// The next byte, 0 at the end.
    #[inline]
    pub(super) fn peek(&self) -> u8 {
        self.text.get(self.pos).copied().unwrap_or(0)
    }

    /// Skip JSON whitespace (space, tab, line feed, carriage return).
    #[inline]
    pub(super) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.pos) {
            self.pos += 1;
        }
    }

    /// Enter the container whose opening bracket is the next byte.
    pub(super) fn open(&mut self, object: bool) -> Result<(), Malformed> {
        if self.depth >= MAX_DEPTH {
            return Err(Malformed);
        }
        let (word, bit) = (self.depth / 64, self.depth % 64);
        if object {
            self.objects[word] |= 1 << bit;
        } else {
            self.objects[word] &= !(1 << bit);
        }
        self.depth += 1;
        self.pos += 1;
        Ok(())
    }

    /// Leave the innermost container, whose closing bracket is the next byte.
    pub(super) fn close(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        self.pos += 1;
    }

    /// Whether the innermost open container is an object.
    fn in_object(&self) -> bool {
        let d = self.depth.saturating_sub(1);
        self.objects[d / 64] >> (d % 64) & 1 == 1
    }

    /// Read a string starting at the next byte (`"`): its content between
    /// the quotes, and whether that holds escapes.
    pub(super) fn string(&mut self) -> Result<(&'a [u8], bool), Malformed> {
        let start = self.pos + 1;
        let mut i = start;
        let mut escaped = false;
        let text = self.text;
        loop {
            i = plain_run(text, i);
            match text.get(i) {
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    match text.get(i + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                        Some(b'u')
                            if text
                                .get(i + 2..i + 6)
                                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
                        {
                            i += 6
                        }
                        _ => return Err(Malformed),
                    }
                }
                _ => return Err(Malformed),
            }
        }
        self.pos = i + 1;
        Ok((&text[start..i], escaped))
    }

    /// Read an object member's label and its `:`, leaving the scanner at the
    /// member's value: the label's content and whether it holds escapes.
    pub(super) fn label(&mut self) -> Result<(&'a [u8], bool), Malformed> {
        if self.peek() != b'"' {
            return Err(Malformed);
        }
        let label = self.string()?;
        self.ws();
        if self.peek() != b':' {
            return Err(Malformed);
        }
        self.pos += 1;
        self.ws();
        Ok(label)
    }

    /// Read a number (RFC 8259 grammar): whether it is an integer.
    fn number(&mut self) -> Result<Kind, Malformed> {
        let text = self.text;
        let digits = |mut i: usize| {
            while text.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        let mut i = self.pos;
        if text.get(i) == Some(&b'-') {
            i += 1;
        }
        match text.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(i + 1),
            _ => return Err(Malformed),
        }
        let mut kind = Kind::Integer;
        if text.get(i) == Some(&b'.') {
            let end = digits(i + 1);
            if end == i + 1 {
                return Err(Malformed);
            }
            i = end;
            kind = Kind::Real;
        }
        if let Some(b'e' | b'E') = text.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = text.get(i) {
                i += 1;
            }
            let end = digits(i);
            if end == i {
                return Err(Malformed);
            }
            i = end;
            kind = Kind::Real;
        }
        self.pos = i;
        Ok(kind)
    }

    /// Read the literal `word` if it is next.
    fn literal(&mut self, word: &[u8], kind: Kind) -> Result<Kind, Malformed> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(kind)
        } else {
            Err(Malformed)
        }
    }

    /// Read a value that is not a container, at the next byte.
    fn scalar(&mut self) -> Result<Kind, Malformed> {
        match self.peek() {
            b'"' => self.string().map(|_| Kind::Text),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal(b"true", Kind::True),
            b'f' => self.literal(b"false", Kind::False),
            b'n' => self.literal(b"null", Kind::Null),
            _ => Err(Malformed),
        }
    }

    /// Check and skip one value (after whitespace), nested containers
    /// included: its kind.
    pub(super) fn skip_value(&mut self) -> Result<Kind, Malformed> {
        let base = self.depth;
        self.ws();
        let kind = match self.peek() {
            b'{' => Kind::Object,
            b'[' => Kind::Array,
            _ => return self.scalar(),
        };
        loop {
            self.ws();
            match self.peek() {
                c @ (b'{' | b'[') => {
                    let object = c == b'{';
                    self.open(object)?;
                    self.ws();
                    if self.peek() == if object { b'}' } else { b']' } {
                        self.close();
                    } else {
                        if object {
                            self.label()?;
                        }
                        continue;
                    }
                }
                _ => {
                    self.scalar()?;
                }
            }
            if !self.next_member(base)? {
                return Ok(kind);
            }
        }
    }

    /// After a value inside containers: close the containers that end here,
    /// down to depth `base`, and tell whether another value follows (after
    /// its `,` and, in an object, its label).
    pub(super) fn next_member(&mut self, base: usize) -> Result<bool, Malformed> {
        while self.depth > base {
            self.ws();
            let object = self.in_object();
            match self.peek() {
                b',' => {
                    self.pos += 1;
                    self.ws();
                    if object {
                        self.label()?;
                    }
                    return Ok(true);
                }
                b'}' if object => self.close(),
                b']' if !object => self.close(),
                _ => return Err(Malformed),
            }
        }
        Ok(false)
    }

    /// After a value: check the rest of the text, closing every open
    /// container, up to its end.
    pub(super) fn finish(&mut self) -> Result<(), Malformed> {
        while self.next_member(0)? {
            self.skip_value()?;
        }
        self.ws();
        if self.peek() == 0 {
            Ok(())
        } else {
            Err(Malformed)
        }
    }

    /// How many elements the array at the next byte holds (checking them).
    pub(super) fn count_elements(&mut self) -> Result<u64, Malformed> {
        let base = self.depth;
        self.open(false)?;
        self.ws();
        if self.peek() == b']' {
            self.close();
            return Ok(0);
        }
        let mut count = 0;
        loop {
            self.skip_value()?;
            count += 1;
            self.ws();
            match self.peek() {
                b',' => self.pos += 1,
                b']' => {
                    self.close();
                    debug_assert_eq!(self.depth, base);
                    return Ok(count);
                }
                _ => return Err(Malformed),
            }
        }
    }
}

/// Whether `text` is one RFC 8259 JSON value (with surrounding whitespace).
pub(super) fn valid(text: &[u8]) -> bool {
    let mut scanner = Scanner::new(text);
    scanner.skip_value().is_ok() && scanner.finish().is_ok()
}
