//! SQLite's `printf` formatter (`sqlite3_str_vappendf` with SQL arguments)
//! and its float-to-decimal conversion (`sqlite3FpDecode`), ported so that
//! `printf`, `format`, `quote` and `round` give SQLite's exact text.

use super::math::to_real;
use super::rowwise::{MAX_RESULT_BYTES, too_large};
use super::text::text_bytes;
use crate::value::Value;

/// The arguments after the format, consumed left to right; a missing
/// argument reads as 0, 0.0 or NULL text, as in SQLite.
struct Args<'a> {
    /// The values.
    values: &'a [&'a Value],
    /// How many were consumed.
    used: usize,
}

impl Args<'_> {
    /// The next argument, if any.
    fn next(&mut self) -> Option<&Value> {
        let value = self.values.get(self.used)?;
        self.used += 1;
        Some(value)
    }

    /// `getIntArg`.
    fn int(&mut self) -> i64 {
        self.next().map_or(0, Value::to_integer)
    }

    /// `getDoubleArg`.
    fn double(&mut self) -> f64 {
        self.next().map_or(0.0, to_real)
    }

    /// `getTextArg`: the text up to its first NUL (a C string), or `None`
    /// for NULL or a missing argument.
    fn text(&mut self) -> Option<Vec<u8>> {
        let bytes = text_bytes(self.next()?)?;
        let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
        Some(bytes[..end].to_vec())
    }
}

/// The output, bounded by [`MAX_RESULT_BYTES`].
struct Out(Vec<u8>);

impl Out {
    /// Fail unless `n` more bytes fit.
    fn room(&self, n: i64) -> Result<(), String> {
        let needed = (self.0.len() as i64).saturating_add(n.max(0));
        if needed > MAX_RESULT_BYTES as i64 {
            return Err(too_large(usize::try_from(needed).unwrap_or(usize::MAX)));
        }
        Ok(())
    }

    /// Append bytes.
    fn push(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.room(bytes.len() as i64)?;
        self.0.extend_from_slice(bytes);
        Ok(())
    }

    /// Append `n` copies of `byte` (nothing when `n <= 0`).
    fn repeat(&mut self, n: i64, byte: u8) -> Result<(), String> {
        if n > 0 {
            self.room(n)?;
            self.0.resize(self.0.len() + n as usize, byte);
        }
        Ok(())
    }
}

/// Whether `b` continues a UTF-8 character.
fn continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// `SQLITE_SKIP_UTF8`: the index after the character starting at `i`.
fn skip_utf8(z: &[u8], mut i: usize) -> usize {
    let lead = z[i];
    i += 1;
    if lead >= 0xc0 {
        while i < z.len() && continuation(z[i]) {
            i += 1;
        }
    }
    i
}

/// The conversion paradigms of SQLite's `fmtinfo` table that SQL reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `%d %i %u`.
    Decimal,
    /// `%x %X %o %p`.
    Radix,
    /// `%r`: 1st, 2nd, ...
    Ordinal,
    /// `%f`.
    Float,
    /// `%e %E`.
    Exp,
    /// `%g %G`.
    Generic,
    /// `%n`: nothing in SQL.
    Size,
    /// `%%`.
    Percent,
    /// `%c`.
    Char,
    /// `%s %z`.
    String,
    /// `%q`.
    EscapeQ,
    /// `%Q`.
    EscapeBigQ,
    /// `%w`.
    EscapeW,
    /// `%j`: JSON string content.
    JsonContent,
    /// `%J`: JSON string literal.
    JsonLiteral,
}

/// A conversion letter's entry: paradigm, base, signedness, digit set
/// (upper- or lower-case, or the exponent letter) and `#` prefix.
struct Info {
    /// The paradigm.
    kind: Kind,
    /// Radix for integers.
    base: u64,
    /// Whether the integer argument is signed.
    signed: bool,
    /// Upper-case digits and exponent letter.
    upper: bool,
    /// The alternate-form prefix (`0x`, `0X`, `0`).
    prefix: &'static [u8],
}

/// The entry for conversion letter `c`; `None` ends the formatting (an
/// unknown letter, or `%T`/`%S`, which SQL cannot use).
fn info(c: u8) -> Option<Info> {
    let entry = |kind, base, signed, upper, prefix| Info {
        kind,
        base,
        signed,
        upper,
        prefix,
    };
    Some(match c {
        b'd' | b'i' => entry(Kind::Decimal, 10, true, false, b""),
        b'u' => entry(Kind::Decimal, 10, false, false, b""),
        b'x' => entry(Kind::Radix, 16, false, false, b"0x"),
        b'X' => entry(Kind::Radix, 16, false, true, b"0X"),
        b'p' => entry(Kind::Radix, 16, false, true, b"0x"),
        b'o' => entry(Kind::Radix, 8, false, true, b"0"),
        b'r' => entry(Kind::Ordinal, 10, true, false, b""),
        b'f' => entry(Kind::Float, 0, true, false, b""),
        b'e' => entry(Kind::Exp, 0, true, false, b""),
        b'E' => entry(Kind::Exp, 0, true, true, b""),
        b'g' => entry(Kind::Generic, 0, true, false, b""),
        b'G' => entry(Kind::Generic, 0, true, true, b""),
        b'n' => entry(Kind::Size, 0, false, false, b""),
        b'%' => entry(Kind::Percent, 0, false, false, b""),
        b'c' => entry(Kind::Char, 0, false, false, b""),
        b's' | b'z' => entry(Kind::String, 0, false, false, b""),
        b'q' => entry(Kind::EscapeQ, 0, false, false, b""),
        b'Q' => entry(Kind::EscapeBigQ, 0, false, false, b""),
        b'w' => entry(Kind::EscapeW, 0, false, false, b""),
        b'j' => entry(Kind::JsonContent, 0, false, false, b""),
        b'J' => entry(Kind::JsonLiteral, 0, false, false, b""),
        _ => return None,
    })
}

/// A float as SQLite renders it as text (`CAST(x AS TEXT)`): `%!.17g`.
pub(super) fn float_text(f: f64) -> Vec<u8> {
    // Without a width nothing can reach the size limit; the fallback is
    // the crate's own rendering.
    format(b"%!.17g", &[&Value::Float(f)])
        .unwrap_or_else(|_| crate::value::format_float(f).into_bytes())
}

/// The flags, width and precision of one conversion.
#[derive(Debug, Default)]
struct Spec {
    /// `-`, or a negative `*` width.
    left: bool,
    /// `+` or space, or 0.
    sign: u8,
    /// `#`.
    alternate: bool,
    /// `!`.
    alt2: bool,
    /// `0`.
    zero: bool,
    /// `,`.
    thousands: bool,
    /// Field width, never negative.
    width: i64,
    /// Precision, -1 when not given.
    precision: i64,
}

/// SQLite's `printf(FORMAT, ...)` with SQL values as arguments: the bytes
/// of the result (not necessarily UTF-8, as SQLite's text need not be).
/// Text past the format's first NUL is ignored, as in C.
pub(super) fn format(format: &[u8], args: &[&Value]) -> Result<Vec<u8>, String> {
    let fmt = &format[..format.iter().position(|b| *b == 0).unwrap_or(format.len())];
    // Reading past the end yields NUL, as C's terminator does.
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    let mut args = Args {
        values: args,
        used: 0,
    };
    let mut out = Out(Vec::new());
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] != b'%' {
            let end = fmt[i..]
                .iter()
                .position(|b| *b == b'%')
                .map_or(fmt.len(), |p| i + p);
            out.push(&fmt[i..end])?;
            i = end;
            if i >= fmt.len() {
                break;
            }
        }
        i += 1;
        let mut c = at(i);
        if c == 0 {
            out.push(b"%")?;
            break;
        }
        let mut spec = Spec {
            precision: -1,
            ..Spec::default()
        };
        loop {
            let mut done = false;
            match c {
                b'-' => spec.left = true,
                b'+' => spec.sign = b'+',
                b' ' => spec.sign = b' ',
                b'#' => spec.alternate = true,
                b'!' => spec.alt2 = true,
                b'0' => spec.zero = true,
                b',' => spec.thousands = true,
                b'l' => {
                    i += 1;
                    c = at(i);
                    if c == b'l' {
                        i += 1;
                        c = at(i);
                    }
                    done = true;
                }
                b'1'..=b'9' => {
                    let mut wx = u32::from(c - b'0');
                    i += 1;
                    c = at(i);
                    while c.is_ascii_digit() {
                        wx = wx.wrapping_mul(10).wrapping_add(u32::from(c - b'0'));
                        i += 1;
                        c = at(i);
                    }
                    spec.width = i64::from(wx & 0x7fff_ffff);
                    if c != b'.' && c != b'l' {
                        done = true;
                    } else {
                        i -= 1;
                    }
                }
                b'*' => {
                    let mut width = i64::from(args.int() as i32);
                    if width < 0 {
                        spec.left = true;
                        width = if width >= -2_147_483_647 { -width } else { 0 };
                    }
                    spec.width = width;
                    let next = at(i + 1);
                    if next != b'.' && next != b'l' {
                        i += 1;
                        c = at(i);
                        done = true;
                    }
                }
                b'.' => {
                    i += 1;
                    c = at(i);
                    if c == b'*' {
                        let mut precision = i64::from(args.int() as i32);
                        if precision < 0 {
                            precision = if precision >= -2_147_483_647 {
                                -precision
                            } else {
                                -1
                            };
                        }
                        spec.precision = precision;
                        i += 1;
                        c = at(i);
                    } else {
                        let mut px: u32 = 0;
                        while c.is_ascii_digit() {
                            px = px.wrapping_mul(10).wrapping_add(u32::from(c - b'0'));
                            i += 1;
                            c = at(i);
                        }
                        spec.precision = i64::from(px & 0x7fff_ffff);
                    }
                    if c == b'l' {
                        i -= 1;
                    } else {
                        done = true;
                    }
                }
                _ => done = true,
            }
            if done {
                break;
            }
            i += 1;
            c = at(i);
            if c == 0 {
                break;
            }
        }
        let Some(info) = info(c) else {
            // SQLite stops at an unknown conversion and keeps what it has.
            break;
        };
        convert(&info, spec, &mut args, &mut out)?;
        i += 1;
    }
    Ok(out.0)
}

/// Write one conversion to `out`.
fn convert(info: &Info, mut spec: Spec, args: &mut Args, out: &mut Out) -> Result<(), String> {
    let body: Vec<u8> = match info.kind {
        Kind::Decimal | Kind::Radix | Kind::Ordinal => integer(info, &mut spec, args, out)?,
        Kind::Float | Kind::Exp | Kind::Generic => match float(info, &mut spec, args, out)? {
            Some(body) => body,
            None => return Ok(()),
        },
        Kind::Size => return Ok(()),
        Kind::Percent => b"%".to_vec(),
        Kind::Char => {
            let mut buf = match args.text() {
                Some(text) if !text.is_empty() => {
                    let mut length = 1;
                    if text[0] & 0xc0 == 0xc0 {
                        while length < 4 && length < text.len() && continuation(text[length]) {
                            length += 1;
                        }
                    }
                    text[..length].to_vec()
                }
                _ => vec![0],
            };
            if spec.precision > 1 {
                spec.width -= spec.precision - 1;
                if spec.width > 1 && !spec.left {
                    out.repeat(spec.width - 1, b' ')?;
                    spec.width = 0;
                }
                let copies = spec.precision - 1;
                out.room(copies.saturating_mul(buf.len() as i64))?;
                for _ in 0..copies {
                    out.0.extend_from_slice(&buf);
                }
            }
            spec.alt2 = true;
            std::mem::take(&mut buf)
        }
        Kind::String => {
            let text = args.text().unwrap_or_default();
            let length = if spec.precision >= 0 {
                if spec.alt2 {
                    let mut end = 0;
                    let mut left = spec.precision;
                    while left > 0 && end < text.len() {
                        end = skip_utf8(&text, end);
                        left -= 1;
                    }
                    end
                } else {
                    text.len().min(spec.precision as usize)
                }
            } else {
                text.len()
            };
            text[..length].to_vec()
        }
        Kind::JsonContent | Kind::JsonLiteral => {
            return json(info.kind == Kind::JsonLiteral, &spec, args, out);
        }
        Kind::EscapeQ | Kind::EscapeBigQ | Kind::EscapeW => escape(info.kind, &mut spec, args)?,
    };
    // `adjust_width_for_utf8`: with `!`, the width counts characters.
    if matches!(
        info.kind,
        Kind::Char | Kind::String | Kind::EscapeQ | Kind::EscapeBigQ | Kind::EscapeW
    ) && spec.alt2
        && spec.width > 0
    {
        spec.width += body.iter().filter(|b| continuation(**b)).count() as i64;
    }
    let pad = spec.width - body.len() as i64;
    if pad > 0 && !spec.left {
        out.repeat(pad, b' ')?;
    }
    out.push(&body)?;
    if pad > 0 && spec.left {
        out.repeat(pad, b' ')?;
    }
    Ok(())
}

/// `%d %i %u %x %X %o %p %r`: the digits with sign, zero padding,
/// thousands separators and `#` prefix; the width is applied by the caller.
fn integer(info: &Info, spec: &mut Spec, args: &mut Args, out: &Out) -> Result<Vec<u8>, String> {
    if info.kind != Kind::Decimal {
        spec.thousands = false;
    }
    let (mut value, prefix) = if info.signed {
        let v = args.int();
        if v < 0 {
            (v.unsigned_abs(), b'-')
        } else {
            (v as u64, spec.sign)
        }
    } else {
        (args.int() as u64, 0)
    };
    if value == 0 {
        spec.alternate = false;
    }
    let sign_width = i64::from(prefix != 0);
    if spec.zero && spec.precision < spec.width - sign_width {
        spec.precision = spec.width - sign_width;
    }
    let mut needed = spec.precision.max(0) + 10;
    if spec.thousands {
        needed += spec.precision.max(0) / 3;
    }
    out.room(needed)?;
    // Built backwards, as SQLite does.
    let mut rev: Vec<u8> = Vec::new();
    if info.kind == Kind::Ordinal {
        let mut x = (value % 10) as usize;
        if x >= 4 || (value / 10) % 10 == 1 {
            x = 0;
        }
        let suffix = &b"thstndrd"[x * 2..x * 2 + 2];
        rev.push(suffix[1]);
        rev.push(suffix[0]);
    }
    let digits: &[u8] = if info.upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    loop {
        rev.push(digits[(value % info.base) as usize]);
        value /= info.base;
        if value == 0 {
            break;
        }
    }
    let length = rev.len() as i64;
    if spec.precision > length {
        rev.resize(spec.precision as usize, b'0');
    }
    let mut body: Vec<u8> = rev.into_iter().rev().collect();
    if spec.thousands && !body.is_empty() {
        let first = (body.len() - 1) % 3 + 1;
        let mut grouped = Vec::with_capacity(body.len() + body.len() / 3);
        for (k, d) in body.iter().enumerate() {
            if k >= first && (k - first).is_multiple_of(3) {
                grouped.push(b',');
            }
            grouped.push(*d);
        }
        body = grouped;
    }
    let mut head = Vec::new();
    if spec.alternate {
        head.extend_from_slice(info.prefix);
    }
    if prefix != 0 {
        head.push(prefix);
    }
    head.extend_from_slice(&body);
    Ok(head)
}

/// `%f %e %E %g %G`. Returns the text for the common padding step (NaN,
/// infinities), or `None` after writing the padded number itself.
fn float(
    info: &Info,
    spec: &mut Spec,
    args: &mut Args,
    out: &mut Out,
) -> Result<Option<Vec<u8>>, String> {
    let value = args.double();
    let mut precision = spec.precision;
    if precision < 0 {
        precision = 6;
    }
    precision = precision.min(100_000_000);
    let mut kind = info.kind;
    let round = match kind {
        Kind::Float => -precision,
        Kind::Generic => {
            if precision == 0 {
                precision = 1;
            }
            precision
        }
        _ => precision + 1,
    } as i32;
    let mut s = decode(value, round, if spec.alt2 { 20 } else { 16 });
    match s.special {
        Special::NaN => {
            return Ok(Some(if spec.zero {
                b"null".to_vec()
            } else {
                b"NaN".to_vec()
            }));
        }
        Special::Infinite if spec.zero => {
            s.digits = vec![b'9'];
            s.point = 1000;
        }
        Special::Infinite => {
            let text: &[u8] = if s.negative {
                b"-Inf"
            } else if spec.sign != 0 {
                if spec.sign == b'+' { b"+Inf" } else { b" Inf" }
            } else {
                b"Inf"
            };
            return Ok(Some(text.to_vec()));
        }
        Special::None => {}
    }
    let prefix = if s.negative {
        if spec.alternate && spec.sign == 0 && kind == Kind::Float && s.point <= round {
            0
        } else {
            b'-'
        }
    } else {
        spec.sign
    };
    let exp = s.point - 1;
    let strip;
    if kind == Kind::Generic {
        precision -= 1;
        strip = !spec.alternate;
        if exp < -4 || i64::from(exp) > precision {
            kind = Kind::Exp;
        } else {
            precision -= i64::from(exp);
            kind = Kind::Float;
        }
    } else {
        strip = spec.alt2;
    }
    let mut e2: i64 = if kind == Kind::Exp {
        0
    } else {
        i64::from(s.point) - 1
    };
    let mut needed = e2.max(0) + precision + spec.width + 10;
    if spec.thousands && e2 > 0 {
        needed += (e2 + 2) / 3;
    }
    out.room(needed)?;
    let z = &s.digits;
    let n = z.len();
    let mut buf: Vec<u8> = Vec::new();
    let dot = precision > 0 || spec.alternate || spec.alt2;
    if prefix != 0 {
        buf.push(prefix);
    }
    let mut j = 0usize;
    if e2 < 0 {
        buf.push(b'0');
    } else if spec.thousands {
        while e2 >= 0 {
            buf.push(if j < n {
                j += 1;
                z[j - 1]
            } else {
                b'0'
            });
            if e2 % 3 == 0 && e2 > 1 {
                buf.push(b',');
            }
            e2 -= 1;
        }
    } else {
        j = usize::try_from(e2 + 1).unwrap_or(usize::MAX).min(n);
        buf.extend_from_slice(&z[..j]);
        e2 -= j as i64;
        if e2 >= 0 {
            buf.resize(buf.len() + (e2 + 1) as usize, b'0');
            e2 = -1;
        }
    }
    if dot {
        buf.push(b'.');
    }
    if e2 < -1 && precision > 0 {
        let zeros = (-1 - e2).min(precision);
        buf.resize(buf.len() + zeros as usize, b'0');
        precision -= zeros;
    }
    if precision > 0 {
        let count = (n - j).min(usize::try_from(precision).unwrap_or(usize::MAX));
        buf.extend_from_slice(&z[j..j + count]);
        precision -= count as i64;
        if precision > 0 && !strip {
            buf.resize(buf.len() + precision as usize, b'0');
        }
    }
    if strip && dot {
        while buf.last() == Some(&b'0') {
            buf.pop();
        }
        if buf.last() == Some(&b'.') {
            if spec.alt2 {
                buf.push(b'0');
            } else {
                buf.pop();
            }
        }
    }
    if kind == Kind::Exp {
        let mut exp = s.point - 1;
        buf.push(if info.upper { b'E' } else { b'e' });
        if exp < 0 {
            buf.push(b'-');
            exp = -exp;
        } else {
            buf.push(b'+');
        }
        if exp >= 100 {
            buf.push(b'0' + (exp / 100) as u8);
            exp %= 100;
        }
        buf.push(b'0' + (exp / 10) as u8);
        buf.push(b'0' + (exp % 10) as u8);
    }
    let pad = spec.width - buf.len() as i64;
    if pad > 0 {
        if spec.left {
            out.push(&buf)?;
            out.repeat(pad, b' ')?;
        } else if !spec.zero {
            out.repeat(pad, b' ')?;
            out.push(&buf)?;
        } else {
            let adj = usize::from(prefix != 0);
            out.push(&buf[..adj])?;
            out.repeat(pad, b'0')?;
            out.push(&buf[adj..])?;
        }
    } else {
        out.push(&buf)?;
    }
    Ok(None)
}

/// `%q`, `%Q`, `%w`: the text with its quote character doubled (`#`:
/// with `unistr()` escapes for control characters), `%Q` in quotes or
/// `NULL`.
fn escape(kind: Kind, spec: &mut Spec, args: &mut Args) -> Result<Vec<u8>, String> {
    let text = args.text();
    let mut need_quote = 0;
    let escarg: Vec<u8> = match text {
        None if kind == Kind::EscapeBigQ => b"NULL".to_vec(),
        None => b"(NULL)".to_vec(),
        Some(text) => {
            if kind == Kind::EscapeBigQ {
                need_quote = 1;
            }
            text
        }
    };
    let q = if kind == Kind::EscapeW {
        spec.alternate = false;
        b'"'
    } else {
        b'\''
    };
    // The precision counts bytes (characters with `!`) taken from the input.
    let mut k = spec.precision;
    let mut end = 0;
    while k != 0 && end < escarg.len() {
        if spec.alt2 && escarg[end] & 0xc0 == 0xc0 {
            while end + 1 < escarg.len() && continuation(escarg[end + 1]) {
                end += 1;
            }
        }
        end += 1;
        k -= 1;
    }
    let taken = &escarg[..end];
    let quotes = taken.iter().filter(|b| **b == q).count();
    let mut needed = taken.len() + quotes + 2;
    if spec.alternate {
        let backslashes = taken.iter().filter(|b| **b == b'\\').count();
        let controls = taken.iter().filter(|b| **b <= 0x1f).count();
        if controls > 0 || kind == Kind::EscapeQ {
            needed += backslashes + 5 * controls;
            if kind == Kind::EscapeBigQ {
                needed += 8;
                need_quote = 2;
            }
        } else {
            spec.alternate = false;
        }
    }
    if needed > MAX_RESULT_BYTES {
        return Err(too_large(needed));
    }
    let mut body = Vec::with_capacity(needed);
    match need_quote {
        2 => body.extend_from_slice(b"unistr('"),
        1 => body.push(b'\''),
        _ => {}
    }
    for &ch in taken {
        if spec.alternate && ch == b'\\' {
            body.extend_from_slice(b"\\\\");
        } else if spec.alternate && ch <= 0x1f {
            body.extend_from_slice(b"\\u00");
            body.push(if ch >= 0x10 { b'1' } else { b'0' });
            body.push(b"0123456789abcdef"[usize::from(ch & 0xf)]);
        } else {
            body.push(ch);
            if ch == q {
                body.push(ch);
            }
        }
    }
    match need_quote {
        2 => body.extend_from_slice(b"')"),
        1 => body.push(b'\''),
        _ => {}
    }
    Ok(body)
}

/// `%j` (JSON string content) and `%J` (a JSON string literal, `null` for
/// NULL), padded to the width here as SQLite does.
fn json(literal: bool, spec: &Spec, args: &mut Args, out: &mut Out) -> Result<(), String> {
    let start = out.0.len();
    match args.text() {
        None => {
            if literal {
                out.push(b"null")?;
            }
        }
        Some(text) => {
            if literal {
                out.push(b"\"")?;
            }
            let mut px = if spec.precision < 0 {
                text.len()
            } else {
                usize::try_from(spec.precision).unwrap_or(usize::MAX)
            };
            if spec.precision >= 0 && spec.alt2 {
                let mut k = 0;
                while k < px && k < text.len() {
                    if continuation(text[k]) {
                        px += 1;
                    }
                    k += 1;
                }
                if k == px {
                    while px < text.len() && continuation(text[px]) {
                        px += 1;
                    }
                }
            }
            let px = px.min(text.len());
            let mut pending = 0;
            for (k, &ch) in text[..px].iter().enumerate() {
                if ch <= 0x1f || ch == b'"' || ch == b'\\' {
                    out.push(&text[pending..k])?;
                    pending = k + 1;
                    out.push(b"\\")?;
                    if ch > 0x1f {
                        out.push(&[ch])?;
                    } else if (1u32 << ch) & 0x3700 != 0 {
                        out.push(&[b"btn?fr"[usize::from(ch - 8)]])?;
                    } else {
                        out.push(b"u00")?;
                        let hex = b"0123456789abcdef";
                        out.push(&[hex[usize::from(ch >> 4)], hex[usize::from(ch & 0xf)]])?;
                    }
                }
            }
            out.push(&text[pending..px])?;
            if literal {
                out.push(b"\"")?;
            }
        }
    }
    if spec.width > 0 {
        let n = (out.0.len() - start) as i64;
        let mut len = n;
        if spec.alt2 && n > 0 {
            len -= out.0[start..].iter().filter(|b| continuation(**b)).count() as i64;
        }
        if spec.width > len {
            let pad = spec.width - len;
            out.repeat(pad, b' ')?;
            if !spec.left && n > 0 {
                out.0[start..].rotate_right(pad as usize);
            }
        }
    }
    Ok(())
}

/// What kind of float [`decode`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    /// A finite number.
    None,
    /// An infinity.
    Infinite,
    /// Not a number.
    NaN,
}

/// A float as decimal digits: `0.DIGITS * 10^point`, with its sign.
#[derive(Debug)]
struct Decoded {
    /// Significant digits (ASCII), no trailing zeros, never empty for a
    /// finite number.
    digits: Vec<u8>,
    /// Position of the decimal point.
    point: i32,
    /// Whether the value is negative (-0.0 is not).
    negative: bool,
    /// Infinity or NaN.
    special: Special,
}

/// SQLite's `sqlite3FpDecode`: `round <= 0` keeps `-round` digits after the
/// decimal point, `round > 0` that many significant digits; at most
/// `max_round` significant digits either way.
fn decode(r: f64, mut round: i32, max_round: i32) -> Decoded {
    let mut d = Decoded {
        digits: Vec::new(),
        point: 0,
        negative: false,
        special: Special::None,
    };
    let mut r = r;
    if r < 0.0 {
        d.negative = true;
        r = -r;
    } else if r == 0.0 {
        d.digits = vec![b'0'];
        d.point = 1;
        return d;
    }
    let bits = r.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased == 0x7ff {
        d.special = if bits & ((1 << 52) - 1) == 0 {
            Special::Infinite
        } else {
            Special::NaN
        };
        return d;
    }
    let mut v = bits & 0x000f_ffff_ffff_ffff;
    let e = if biased == 0 {
        let zeros = v.leading_zeros() as i32;
        v <<= zeros;
        -1074 - zeros
    } else {
        v = (v << 11) | (1 << 63);
        biased - 1086
    };
    let want = if round <= 0 || round >= 18 {
        18
    } else {
        round + 1
    };
    let (v, exp) = fp2_convert10(v, e, want);
    let mut z: Vec<u8> = v.to_string().into_bytes();
    let mut n = z.len() as i32;
    d.point = n + exp;
    if round <= 0 {
        round = d.point - round;
        if round == 0 && z[0] >= b'5' {
            round = 1;
            z.insert(0, b'0');
            n += 1;
            d.point += 1;
        }
    }
    let digit = |z: &[u8], k: i32| z.get(k as usize).copied().unwrap_or(b'0');
    if round > 0 && (round < n || n > max_round) {
        if round > max_round {
            round = max_round;
        }
        if round == 17 {
            // Fewer digits when they read back as the same float.
            let value_of = |z: &[u8], len: i32| -> u64 {
                z[..len as usize].iter().fold(0u64, |acc, b| {
                    acc.wrapping_mul(10).wrapping_add(u64::from(b - b'0'))
                })
            };
            let reads_back =
                |v2: u64, p: i32| format!("{v2}e{p}").parse::<f64>().is_ok_and(|x| x == r);
            if digit(&z, 15) == b'9' && digit(&z, 14) == b'9' {
                let mut jj = 14;
                while jj > 0 && digit(&z, jj - 1) == b'9' {
                    jj -= 1;
                }
                let v2 = if jj == 0 {
                    1
                } else {
                    value_of(&z, jj).wrapping_add(1)
                };
                if reads_back(v2, exp + n - jj) {
                    round = jj + 1;
                }
            } else if d.point >= n
                || (digit(&z, 15) == b'0' && digit(&z, 14) == b'0' && digit(&z, 13) == b'0')
            {
                let mut jj = 13;
                while jj > 1 && digit(&z, jj - 1) == b'0' {
                    jj -= 1;
                }
                if reads_back(value_of(&z, jj), exp + n - jj) {
                    round = jj + 1;
                }
            }
        }
        n = round;
        let round_up = digit(&z, round) >= b'5';
        z.truncate(round as usize);
        if round_up {
            let mut k = round as usize;
            loop {
                if k == 0 {
                    z.insert(0, b'1');
                    n += 1;
                    d.point += 1;
                    break;
                }
                k -= 1;
                if z[k] == b'9' {
                    z[k] = b'0';
                } else {
                    z[k] += 1;
                    break;
                }
            }
        }
    }
    z.truncate(n.max(1) as usize);
    while z.len() > 1 && z.last() == Some(&b'0') {
        z.pop();
    }
    d.digits = z;
    d
}

/// `pwr10to2(p)`: floor(log2(10^p)), approximately.
fn pwr10to2(p: i32) -> i32 {
    (p * 108_853) >> 15
}

/// `pwr2to10(p)`: floor(log10(2^p)), approximately.
fn pwr2to10(p: i32) -> i32 {
    (p * 78_913) >> 18
}

/// `sqlite3Fp2Convert10`: `m * 2^e` as `d * 10^p` with about `n` digits.
fn fp2_convert10(m: u64, e: i32, n: i32) -> (u64, i32) {
    let p = n - 1 - pwr2to10(e + 63);
    let h = ((u128::from(m) * u128::from(power_of_ten(p).0)) >> 64) as u64;
    let d = if n == 18 {
        let h = h >> (-(e + pwr10to2(p) + 2)).clamp(0, 63);
        h.wrapping_add((h << 1) & 2) >> 1
    } else {
        h >> (-(e + pwr10to2(p) + 1)).clamp(0, 63)
    };
    (d, -p)
}

/// `powerOfTen(p)`: the top 64 bits of 10^p, and the next 32.
fn power_of_ten(p: i32) -> (u64, u32) {
    const BASE: [u64; 27] = [
        0x8000000000000000,
        0xa000000000000000,
        0xc800000000000000,
        0xfa00000000000000,
        0x9c40000000000000,
        0xc350000000000000,
        0xf424000000000000,
        0x9896800000000000,
        0xbebc200000000000,
        0xee6b280000000000,
        0x9502f90000000000,
        0xba43b74000000000,
        0xe8d4a51000000000,
        0x9184e72a00000000,
        0xb5e620f480000000,
        0xe35fa931a0000000,
        0x8e1bc9bf04000000,
        0xb1a2bc2ec5000000,
        0xde0b6b3a76400000,
        0x8ac7230489e80000,
        0xad78ebc5ac620000,
        0xd8d726b7177a8000,
        0x878678326eac9000,
        0xa968163f0a57b400,
        0xd3c21bcecceda100,
        0x84595161401484a0,
        0xa56fa5b99019a5c8,
    ];
    const SCALE: [u64; 26] = [
        0x8049a4ac0c5811ae,
        0xcf42894a5dce35ea,
        0xa76c582338ed2621,
        0x873e4f75e2224e68,
        0xda7f5bf590966848,
        0xb080392cc4349dec,
        0x8e938662882af53e,
        0xe65829b3046b0afa,
        0xba121a4650e4ddeb,
        0x964e858c91ba2655,
        0xf2d56790ab41c2a2,
        0xc428d05aa4751e4c,
        0x9e74d1b791e07e48,
        0xcccccccccccccccc,
        0xcecb8f27f4200f3a,
        0xa70c3c40a64e6c51,
        0x86f0ac99b4e8dafd,
        0xda01ee641a708de9,
        0xb01ae745b101e9e4,
        0x8e41ade9fbebc27d,
        0xe5d3ef282a242e81,
        0xb9a74a0637ce2ee1,
        0x95f83d0a1fb69cd9,
        0xf24a01a73cf2dccf,
        0xc3b8358109e84f07,
        0x9e19db92b4e31ba9,
    ];
    const SCALE_LO: [u32; 26] = [
        0x205b896d, 0x52064cad, 0xaf2af2b8, 0x5a7744a7, 0xaf39a475, 0xbd8d794e, 0x547eb47b,
        0x0cb4a5a3, 0x92f34d62, 0x3a6a07f9, 0xfae27299, 0xaa97e14c, 0x775ea265, 0xcccccccc,
        0x00000000, 0x999090b6, 0x69a028bb, 0xe80e6f48, 0x5ec05dd0, 0x14588f14, 0x8f1668c9,
        0x6d953e2c, 0x4abdaf10, 0xbc633b39, 0x0a862f81, 0x6c07a2c2,
    ];
    let p = p.clamp(-348, 347);
    let (g, n) = if p < 0 {
        if p == -1 {
            return (SCALE[13], SCALE_LO[13]);
        }
        let (g, n) = (p / 27, p % 27);
        if n != 0 { (g - 1, n + 27) } else { (g, n) }
    } else if p < 27 {
        return (BASE[p as usize], 0);
    } else {
        (p / 27, p % 27)
    };
    let index = (g + 13) as usize;
    let (s, s_lo) = (SCALE[index], SCALE_LO[index]);
    if n == 0 {
        return (s, s_lo);
    }
    // sqlite3Multiply160: the upper 96 bits of (s:s_lo) * BASE[n].
    let b = u128::from(BASE[n as usize]);
    let product = u128::from(s) * b + ((u128::from(s_lo) * b) >> 32);
    let mut lo = ((product >> 32) & 0xffff_ffff) as u32;
    let mut x = (product >> 64) as u64;
    if x & (1 << 63) == 0 {
        x = (x << 1) | u64::from((lo >> 31) & 1);
        lo = (lo << 1) | 1;
    }
    (x, lo)
}
