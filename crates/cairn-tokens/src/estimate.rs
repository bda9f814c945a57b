//! A tokenizer-free estimate for models whose tokenizer cairn does not have.

use crate::counter::{ImageWeight, TokenCounter};

/// A fast estimate of token counts, for models whose tokenizer cairn does not have (Anthropic,
/// Gemini, remote open-weight models).
///
/// Instead of `chars / 4` (which LangChain uses, and which under-counts code, JSON, numbers and
/// CJK badly), the text is scanned once and split into runs the way BPE pre-tokenizers split it:
///
/// - a run of ASCII letters (with its leading space) costs `1 + (len - 1) / 10` (whole-number
///   division: words up to 10 letters are one token, longer ones two or more);
/// - a run of digits costs `ceil(len / 3)` (OpenAI encodings split numbers in groups of three);
/// - a run of ASCII punctuation costs `ceil(len / 3)` (`"},`, `::`, `();` are often one token);
/// - a run of whitespace costs nothing when it is one space (it joins the next word) and one
///   token otherwise (indentation, newlines);
/// - CJK ideographs, kana and hangul cost 0.8 token each;
/// - other non-ASCII letters (accented Latin, Cyrillic, Greek, …) cost 0.35 token per character,
///   and other symbols (emoji, …) one token per 2 UTF-8 bytes.
///
/// The rules were fitted to `o200k_base` on the synthetic corpus of [`crate::synthetic`]; the
/// measured error per kind of text is in the repository's `BENCHMARKS.md`: within +2.5% over a whole synthetic
/// agent history, and from −6% (JSON) to +14% (code) per kind of text, where `chars / 4` is off
/// by −64% (CJK) to +35% (prose). Other tokenizers differ (Anthropic's and Llama's typically count more tokens
/// for the same text than `o200k_base`), so [`EstimateCounter::with_scale`] lets a caller add a
/// safety margin; [`counter_for_model`](crate::counter_for_model) uses a scale of
/// [`NON_OPENAI_SCALE`] for non-OpenAI models.
#[derive(Debug, Clone)]
pub struct EstimateCounter {
    scale: f64,
    images: ImageWeight,
}

/// The safety margin [`counter_for_model`](crate::counter_for_model) applies to estimates for
/// models whose tokenizer is not an OpenAI one: `1.15`.
pub const NON_OPENAI_SCALE: f64 = 1.15;

impl Default for EstimateCounter {
    fn default() -> Self {
        EstimateCounter::new()
    }
}

impl EstimateCounter {
    /// An estimate calibrated to `o200k_base` (scale 1.0), with the default image weight.
    pub fn new() -> Self {
        EstimateCounter {
            scale: 1.0,
            images: ImageWeight::default(),
        }
    }

    /// Multiplies every text estimate by `scale` (rounded up), e.g. `1.15` for a 15% margin.
    /// Non-finite or non-positive values are ignored.
    pub fn with_scale(mut self, scale: f64) -> Self {
        if scale.is_finite() && scale > 0.0 {
            self.scale = scale;
        }
        self
    }

    /// Sets how images are weighted.
    pub fn with_image_weight(mut self, images: ImageWeight) -> Self {
        self.images = images;
        self
    }

    /// The scale applied to text estimates.
    pub fn scale(&self) -> f64 {
        self.scale
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Digit,
    Punct,
    Space,
    Newline,
    Cjk,
    OtherLetter,
    Symbol,
}

fn classify(c: char) -> Class {
    if c.is_ascii() {
        if c.is_ascii_alphabetic() {
            Class::Letter
        } else if c.is_ascii_digit() {
            Class::Digit
        } else if c == '\n' || c == '\r' {
            Class::Newline
        } else if c.is_ascii_whitespace() {
            Class::Space
        } else {
            Class::Punct
        }
    } else if is_cjk(c) {
        Class::Cjk
    } else if c.is_alphabetic() {
        Class::OtherLetter
    } else if c.is_whitespace() {
        Class::Space
    } else {
        Class::Symbol
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x2FDF      // CJK radicals, Kangxi
        | 0x3000..=0x303F    // CJK symbols and punctuation
        | 0x3040..=0x30FF    // hiragana, katakana
        | 0x3100..=0x31FF    // bopomofo, hangul compatibility jamo, …
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0xFF00..=0xFFEF    // half- and full-width forms
        | 0x20000..=0x2FA1F  // CJK extensions B–F, compatibility supplement
    )
}

/// The unscaled estimate, in tenths of a token.
fn estimate_tenths(text: &str) -> usize {
    let mut tenths = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let class = classify(c);
        let mut len = 1usize;
        let mut bytes = c.len_utf8();
        let mut has_newline = class == Class::Newline;
        let joins = |a: Class, b: Class| {
            a == b
                || matches!(
                    (a, b),
                    (Class::Space | Class::Newline, Class::Space | Class::Newline)
                )
        };
        while let Some(&next) = chars.peek() {
            let nc = classify(next);
            if !joins(class, nc) {
                break;
            }
            has_newline |= nc == Class::Newline;
            len += 1;
            bytes += next.len_utf8();
            chars.next();
        }
        tenths += match class {
            Class::Letter => (1 + (len - 1) / 10) * 10,
            Class::Digit => len.div_ceil(3) * 10,
            Class::Punct => len.div_ceil(3) * 10,
            Class::Space | Class::Newline => {
                if len == 1 && !has_newline {
                    0
                } else {
                    10
                }
            }
            Class::Cjk => len * 8,
            Class::OtherLetter => len * 7 / 2,
            Class::Symbol => bytes * 5,
        };
    }
    tenths
}

impl TokenCounter for EstimateCounter {
    fn name(&self) -> &str {
        "estimate"
    }

    fn count_text(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        let tenths = estimate_tenths(text) as f64 * self.scale;
        (tenths / 10.0).ceil() as usize
    }

    fn count_image(&self, url: &str, media_type: Option<&str>) -> usize {
        self.images.weigh(url, media_type)
    }
}
