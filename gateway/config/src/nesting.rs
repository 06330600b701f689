//! Size and nesting limits, checked on the text before the YAML parser sees
//! it: the parser's time grows with the square of the nesting depth, so a
//! 300 KB document of `[[[[...` would hold a core for minutes. A DAQIRI
//! config nests about eight levels; a depth past [`MAX_DEPTH`] is refused
//! at once, naming its line.
//!
//! This is a scan, not a parser (no YAML library exposes depth before
//! parsing). It may count a level too many (a bracket inside a block scalar
//! or an unusual quote), never one too few: a quote opens a quoted scalar
//! only where YAML starts a scalar, and a `#` starts a comment only after
//! whitespace, as in YAML.

use crate::diagnostic::{Report, YamlPath};

/// Deepest nesting accepted: flow brackets plus block indentation levels.
pub const MAX_DEPTH: usize = 64;
/// Largest document accepted.
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// Refuses a document over [`MAX_DOCUMENT_BYTES`] or nested past [`MAX_DEPTH`].
pub(crate) fn check(text: &str) -> Result<(), Report> {
    let refuse = |message: String| {
        let mut report = Report::default();
        report.error(&YamlPath::from_text("(document)"), message);
        Err(report)
    };
    if text.len() > MAX_DOCUMENT_BYTES {
        return refuse(format!("the document is {} bytes; at most {MAX_DOCUMENT_BYTES} are accepted", text.len()));
    }
    match deepest(text) {
        Some(line) => refuse(format!(
            "the document nests more than {MAX_DEPTH} levels deep at line {line}; a DAQIRI config needs about 8"
        )),
        None => Ok(()),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Quote {
    None,
    Single,
    Double,
}

/// The first line where the nesting passes [`MAX_DEPTH`], if any.
fn deepest(text: &str) -> Option<usize> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    let mut quote = Quote::None;
    for (number, line) in text.lines().enumerate() {
        let bytes = line.as_bytes();
        let mut i = 0;
        if quote == Quote::None && flow == 0 {
            let indent = bytes.iter().take_while(|&&b| b == b' ').count();
            let rest = &bytes[indent..];
            if rest.is_empty() || rest[0] == b'#' {
                continue;
            }
            while indents.last().is_some_and(|&top| top > indent) {
                indents.pop();
            }
            if indents.last() != Some(&indent) {
                indents.push(indent);
            }
            // `- - - x` nests a sequence per dash on one line.
            let mut dashes = 0;
            i = indent;
            while i < bytes.len() && matches!(bytes[i], b'-' | b'?') && bytes.get(i + 1).is_none_or(|&b| b == b' ') {
                dashes += 1;
                i += 2;
            }
            if indents.len() + dashes > MAX_DEPTH {
                return Some(number + 1);
            }
        }
        let block = indents.len();
        let mut previous = b' ';
        while i < bytes.len() {
            let b = bytes[i];
            match quote {
                Quote::Double if b == b'\\' => i += 1,
                Quote::Double if b == b'"' => quote = Quote::None,
                Quote::Single if b == b'\'' => quote = Quote::None,
                Quote::Single | Quote::Double => {}
                Quote::None => match b {
                    b'#' if previous == b' ' || previous == b'\t' => break,
                    b'"' | b'\'' if starts_scalar(bytes, i) => {
                        quote = if b == b'"' { Quote::Double } else { Quote::Single };
                    }
                    b'[' | b'{' => {
                        flow += 1;
                        if block + flow > MAX_DEPTH {
                            return Some(number + 1);
                        }
                    }
                    b']' | b'}' => flow = flow.saturating_sub(1),
                    _ => {}
                },
            }
            previous = b;
            i += 1;
        }
    }
    None
}

/// Whether a quote at `at` begins a scalar: first on its line, or after an
/// indicator that a scalar follows (`: `, `- `, `? `, `[`, `{`, `,`).
fn starts_scalar(line: &[u8], at: usize) -> bool {
    let before = line[..at].iter().rev().find(|&&b| b != b' ' && b != b'\t');
    match before {
        None => true,
        Some(b'[' | b'{' | b',') => true,
        Some(b':' | b'-' | b'?') => at > 0 && matches!(line[at - 1], b' ' | b'\t'),
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_nesting_past_the_limit_is_refused_at_its_line() {
        let deep = format!("a: 1\nx: {}{}\n", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(deepest(&deep), Some(2));
        let fine = format!("x: {}{}\n", "[".repeat(MAX_DEPTH - 2), "]".repeat(MAX_DEPTH - 2));
        assert_eq!(deepest(&fine), None);
    }

    #[test]
    fn block_nesting_counts_indentation_and_dashes() {
        let mut deep = String::new();
        for level in 0..=MAX_DEPTH {
            deep += &format!("{}k{level}:\n", " ".repeat(level));
        }
        assert_eq!(deepest(&deep), Some(MAX_DEPTH + 1));
        assert_eq!(deepest(&format!("{}x\n", "- ".repeat(MAX_DEPTH + 1))), Some(1));
    }

    #[test]
    fn brackets_in_quotes_and_comments_are_text() {
        let many = "[".repeat(200);
        for text in [
            format!("a: \"{many}\"\n"),
            format!("a: '{many}'\n"),
            format!("a: 1 # {many}\n"),
            format!("# {many}\n"),
            format!("a: \"x\\\" {many}\"\n"),
        ] {
            assert_eq!(deepest(&text), None, "{text}");
        }
    }

    #[test]
    fn a_quote_inside_a_plain_scalar_hides_nothing() {
        // YAML reads `it's` as plain text, so the brackets on the next line nest.
        let text = format!("a: it's\nx: {}\n", "[".repeat(MAX_DEPTH + 1));
        assert_eq!(deepest(&text), Some(2));
        let text = format!("a: b#c {}\n", "[".repeat(MAX_DEPTH + 1));
        assert_eq!(deepest(&text), Some(1), "`#` after a non-space starts no comment");
    }

    #[test]
    fn oversized_documents_are_refused_before_parsing() {
        let report = check(&" ".repeat(MAX_DOCUMENT_BYTES + 1)).unwrap_err();
        assert!(report.diagnostics[0].message.contains("at most 16777216"));
    }
}
