//! An incremental, strict (RFC 8259) JSON tokenizer for one call's object.
//!
//! It reads the bytes of the object as they stream in and keeps all of its state between
//! pieces (where it is in the grammar, inside a string or an escape, how many `\u` digits
//! are left, how much of a literal was read, the part of a number, the open arrays and
//! objects), so every byte is looked at once however the text is split. It decides where
//! strings and the object end, and rejects a byte at the first place where the text so
//! far can no longer begin a valid object. It builds no values: the call parser reads a
//! key, the tool's name or the arguments with serde_json once its text is complete
//! (which also checks what the grammar leaves open: `\u` escapes that are lone
//! surrogates, numbers too large for a float).
//!
//! The call parser is only told about the object's own members (depth 1): where a key
//! or a value begins and ends, and where the object closes. Every stop is next to an
//! ASCII byte of the syntax, before the first byte of a character it rejects, or at the
//! end of the input: always at a character boundary.

/// What the tokenizer stops for. The position of each is where it stops: the end of the
/// bytes it says it consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::text_tools) enum Event {
    /// A member's key begins: the last byte consumed is its opening quote.
    KeyStart,
    /// The key ends: the last byte consumed is its closing quote.
    KeyEnd,
    /// A member's value begins with the last byte consumed.
    ValueStart(Kind),
    /// The member's value ended with the last byte consumed.
    ValueEnd,
    /// The object closed with the last byte consumed.
    ObjectEnd,
    /// The next byte (not consumed) cannot continue the JSON text.
    Error(Fault),
}

/// What a value is, as its first byte tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::text_tools) enum Kind {
    /// `"…"`.
    String,
    /// `-`, a digit.
    Number,
    /// `true`, `false`.
    Boolean,
    /// `null`.
    Null,
    /// `[…]`.
    Array,
    /// `{…}`.
    Object,
}

impl Kind {
    /// The kind with its article, for messages.
    pub(in crate::text_tools) const fn described(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Number => "a number",
            Self::Boolean => "a boolean",
            Self::Null => "null",
            Self::Array => "an array",
            Self::Object => "an object",
        }
    }
}

/// Why a byte was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::text_tools) enum Fault {
    /// The byte is not what the grammar allows here; what it allows, for a message.
    Expected(&'static str),
    /// An array or object would open past the depth limit.
    TooDeep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    Object,
    Array,
}

/// The next thing the grammar allows between tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Whitespace, then the `{` that opens the call's object.
    Start,
    /// Right after `{`: a key or `}`.
    KeyOrClose,
    /// After `,` in an object.
    Key,
    /// After a key.
    Colon,
    /// Right after `[`: a value or `]`.
    ValueOrClose,
    /// After `:`, or after `,` in an array.
    Value,
    /// After a value: `,` or the close of the container it is in.
    CommaOrClose,
    /// The object closed: nothing more is JSON.
    Done,
}

/// The token being read, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    None,
    String {
        key: bool,
        escape: Escape,
    },
    /// The bytes of `true`, `false` or `null` still to come.
    Literal(&'static [u8]),
    Number(NumberPart),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// Right after a backslash.
    Backslash,
    /// Inside `\u`: hex digits still to come.
    Hex(u8),
}

/// Where a number is: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumberPart {
    Minus,
    Zero,
    Integer,
    Point,
    Fraction,
    Exponent,
    ExponentSign,
    ExponentDigits,
}

impl NumberPart {
    /// Whether the number may end here.
    const fn complete(self) -> bool {
        matches!(self, Self::Zero | Self::Integer | Self::Fraction | Self::ExponentDigits)
    }

    /// The part after `byte`, if the number can go on with it.
    const fn next(self, byte: u8) -> Option<Self> {
        let digit = byte.is_ascii_digit();
        Some(match (self, byte) {
            (Self::Minus, b'0') => Self::Zero,
            (Self::Minus | Self::Integer, _) if digit => Self::Integer,
            (Self::Zero | Self::Integer, b'.') => Self::Point,
            (Self::Point | Self::Fraction, _) if digit => Self::Fraction,
            (Self::Zero | Self::Integer | Self::Fraction, b'e' | b'E') => Self::Exponent,
            (Self::Exponent, b'+' | b'-') => Self::ExponentSign,
            (Self::Exponent | Self::ExponentSign | Self::ExponentDigits, _) if digit => Self::ExponentDigits,
            _ => return None,
        })
    }
}

/// What one byte did.
enum Step {
    /// Consumed, nothing to report.
    Next,
    /// Consumed, and this happened.
    Report(Event),
    /// A number ended before this byte, which is read again as what follows the number.
    Again,
    /// A number at depth 1 ended before this byte: the value ended, the byte is not consumed.
    EndedBefore,
    /// Rejected, not consumed.
    Reject(Fault),
}

/// The tokenizer of one call's object (see the module's doc).
#[derive(Debug)]
pub(in crate::text_tools) struct Tokenizer {
    /// The open arrays and objects, the call's object first.
    open: Vec<Container>,
    /// The most that may be open at once.
    max_open: usize,
    expect: Expect,
    token: Token,
}

impl Tokenizer {
    /// A tokenizer that rejects an array or object opening with `max_open` already open.
    pub(in crate::text_tools) const fn new(max_open: usize) -> Self {
        Self { open: Vec::new(), max_open, expect: Expect::Start, token: Token::None }
    }

    /// Reads `bytes` up to the next event or to their end: how many bytes were consumed
    /// and the event, if one stopped it. After an [`Event::Error`] or
    /// [`Event::ObjectEnd`] it must not be called again.
    pub(in crate::text_tools) fn advance(&mut self, bytes: &[u8]) -> (usize, Option<Event>) {
        let mut at = 0;
        while let Some(&byte) = bytes.get(at) {
            if let Token::String { escape: Escape::None, .. } = self.token {
                // The plain run of a string's text, which nothing but a quote, a
                // backslash or a control character can end.
                let run = bytes[at..].iter().take_while(|&&b| b != b'"' && b != b'\\' && b >= 0x20).count();
                if run > 0 {
                    at += run;
                    continue;
                }
            }
            match self.step(byte) {
                Step::Next => at += 1,
                Step::Report(event) => return (at + 1, Some(event)),
                Step::Again => {}
                Step::EndedBefore => return (at, Some(Event::ValueEnd)),
                Step::Reject(fault) => return (at, Some(Event::Error(fault))),
            }
        }
        (at, None)
    }

    fn step(&mut self, byte: u8) -> Step {
        match self.token {
            Token::None => self.between_tokens(byte),
            Token::String { key, escape } => self.in_string(key, escape, byte),
            Token::Literal(rest) => match rest.split_first() {
                Some((&expected, rest)) if expected == byte => {
                    self.token = Token::Literal(rest);
                    if rest.is_empty() {
                        self.value_ended()
                    } else {
                        Step::Next
                    }
                }
                _ => Step::Reject(Fault::Expected("the rest of true, false or null")),
            },
            Token::Number(part) => match part.next(byte) {
                Some(next) => {
                    self.token = Token::Number(next);
                    Step::Next
                }
                None if part.complete() => match self.value_ended() {
                    Step::Report(_) => Step::EndedBefore,
                    _ => Step::Again,
                },
                None => Step::Reject(Fault::Expected("a digit")),
            },
        }
    }

    fn between_tokens(&mut self, byte: u8) -> Step {
        let in_object = self.open.last() == Some(&Container::Object);
        match (self.expect, byte) {
            (Expect::Done, _) => Step::Reject(Fault::Expected("nothing after the object")),
            (_, b' ' | b'\t' | b'\n' | b'\r') => Step::Next,
            (Expect::Start, b'{') => self.open_container(Container::Object),
            (Expect::Start, _) => Step::Reject(Fault::Expected("'{' to begin the call")),
            (Expect::KeyOrClose | Expect::Key, b'"') => {
                self.token = Token::String { key: true, escape: Escape::None };
                self.at_top(Event::KeyStart)
            }
            (Expect::KeyOrClose, b'}') | (Expect::ValueOrClose, b']') => self.close_container(),
            (Expect::KeyOrClose, _) => Step::Reject(Fault::Expected("a key or '}'")),
            (Expect::Key, _) => Step::Reject(Fault::Expected("a key (a string in double quotes)")),
            (Expect::Colon, b':') => {
                self.expect = Expect::Value;
                Step::Next
            }
            (Expect::Colon, _) => Step::Reject(Fault::Expected("':' after a key")),
            (Expect::ValueOrClose | Expect::Value, _) => self.begin_value(byte),
            (Expect::CommaOrClose, b',') => {
                self.expect = if in_object { Expect::Key } else { Expect::Value };
                Step::Next
            }
            (Expect::CommaOrClose, b'}') if in_object => self.close_container(),
            (Expect::CommaOrClose, b']') if !in_object => self.close_container(),
            (Expect::CommaOrClose, _) if in_object => Step::Reject(Fault::Expected("',' or '}'")),
            (Expect::CommaOrClose, _) => Step::Reject(Fault::Expected("',' or ']'")),
        }
    }

    fn begin_value(&mut self, byte: u8) -> Step {
        let at_top = self.open.len() == 1;
        let (kind, step) = match byte {
            b'"' => {
                self.token = Token::String { key: false, escape: Escape::None };
                (Kind::String, Step::Next)
            }
            b'{' => (Kind::Object, self.open_container(Container::Object)),
            b'[' => (Kind::Array, self.open_container(Container::Array)),
            b't' => (Kind::Boolean, self.begin_literal(b"rue")),
            b'f' => (Kind::Boolean, self.begin_literal(b"alse")),
            b'n' => (Kind::Null, self.begin_literal(b"ull")),
            b'-' => (Kind::Number, self.begin_number(NumberPart::Minus)),
            b'0' => (Kind::Number, self.begin_number(NumberPart::Zero)),
            b'1'..=b'9' => (Kind::Number, self.begin_number(NumberPart::Integer)),
            _ => return Step::Reject(Fault::Expected("a value")),
        };
        match step {
            Step::Next if at_top => Step::Report(Event::ValueStart(kind)),
            step => step,
        }
    }

    fn begin_literal(&mut self, rest: &'static [u8]) -> Step {
        self.token = Token::Literal(rest);
        Step::Next
    }

    fn begin_number(&mut self, part: NumberPart) -> Step {
        self.token = Token::Number(part);
        Step::Next
    }

    fn in_string(&mut self, key: bool, escape: Escape, byte: u8) -> Step {
        let escape = match (escape, byte) {
            (Escape::None, b'"') => {
                self.token = Token::None;
                if !key {
                    return self.value_ended();
                }
                self.expect = Expect::Colon;
                return self.at_top(Event::KeyEnd);
            }
            (Escape::None, b'\\') => Escape::Backslash,
            (Escape::None, _) if byte < 0x20 => {
                return Step::Reject(Fault::Expected(
                    "a string's text or its closing quote (control characters are written escaped)",
                ))
            }
            (Escape::None, _) => Escape::None,
            (Escape::Backslash, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Escape::None,
            (Escape::Backslash, b'u') => Escape::Hex(4),
            (Escape::Backslash, _) => {
                return Step::Reject(Fault::Expected("an escape: \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u"))
            }
            (Escape::Hex(left), _) if byte.is_ascii_hexdigit() => {
                if left == 1 {
                    Escape::None
                } else {
                    Escape::Hex(left - 1)
                }
            }
            (Escape::Hex(_), _) => return Step::Reject(Fault::Expected("a hex digit of a \\u escape")),
        };
        self.token = Token::String { key, escape };
        Step::Next
    }

    fn open_container(&mut self, container: Container) -> Step {
        if self.open.len() >= self.max_open {
            return Step::Reject(Fault::TooDeep);
        }
        self.open.push(container);
        self.expect = match container {
            Container::Object => Expect::KeyOrClose,
            Container::Array => Expect::ValueOrClose,
        };
        Step::Next
    }

    fn close_container(&mut self) -> Step {
        self.open.pop();
        if self.open.is_empty() {
            self.expect = Expect::Done;
            Step::Report(Event::ObjectEnd)
        } else {
            self.value_ended()
        }
    }

    /// A value ended: a member's value when it is the object's own.
    fn value_ended(&mut self) -> Step {
        self.token = Token::None;
        self.expect = Expect::CommaOrClose;
        self.at_top(Event::ValueEnd)
    }

    /// `event` when the tokenizer is in the call's object itself (not in a value of it).
    fn at_top(&self, event: Event) -> Step {
        if self.open.len() == 1 {
            Step::Report(event)
        } else {
            Step::Next
        }
    }
}
