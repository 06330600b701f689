//! Size and nesting limits, enforced before the document is built: the YAML
//! library the config is read with (serde_yaml, over libyaml) takes time
//! that grows with the square of the nesting depth, so a 300 KB document of
//! `[[[[...` would hold a core for minutes. A DAQIRI config nests about
//! eight levels; a depth past [`MAX_DEPTH`] is refused at once, naming its
//! line.
//!
//! The depth is counted by a YAML parser (saphyr's event parser), not by a
//! scan of the text: quotes, comments and block scalars are what YAML says
//! they are, so no text can hide nesting from the count. The parser stops
//! at the first node past the limit, so the check costs a pass over the
//! text at most.

use saphyr_parser::{Event, Parser};

use crate::diagnostic::{Report, YamlPath};

/// Deepest nesting accepted: sequences and mappings, block or flow.
pub const MAX_DEPTH: usize = 64;
/// Largest document accepted.
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// Refuses a document over [`MAX_DOCUMENT_BYTES`], nested past
/// [`MAX_DEPTH`], or that is not YAML.
pub(crate) fn check(text: &str) -> Result<(), Report> {
    let refuse = |message: String| {
        let mut report = Report::default();
        report.error(&YamlPath::from_text("(document)"), message);
        Err(report)
    };
    if text.len() > MAX_DOCUMENT_BYTES {
        return refuse(format!("the document is {} bytes; at most {MAX_DOCUMENT_BYTES} are accepted", text.len()));
    }
    let too_deep = |line: usize| {
        refuse(format!(
            "the document nests more than {MAX_DEPTH} levels deep at line {line}; a DAQIRI config needs about 8"
        ))
    };
    let mut depth = 0usize;
    for event in Parser::new_from_str(text) {
        let (event, span) = match event {
            Ok(event) => event,
            // The scanner reads ahead, and has a flow-level limit of its own.
            Err(e) if e.info().contains("recursion limit") => return too_deep(e.marker().line()),
            Err(e) => {
                return refuse(format!(
                    "not YAML: {} at line {}, column {}",
                    e.info(),
                    e.marker().line(),
                    e.marker().col() + 1
                ));
            }
        };
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return too_deep(span.start.line());
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Reads a config file, refusing one past [`MAX_DOCUMENT_BYTES`] before
/// reading the rest (`/dev/zero` or a log file named by mistake never ends
/// up in memory).
pub fn read_text(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?.take(MAX_DOCUMENT_BYTES as u64 + 1).read_to_string(&mut text)?;
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_DOCUMENT_BYTES} bytes, the most a config may be"),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deepest(text: &str) -> Option<usize> {
        let report = check(text).err()?;
        let message = &report.diagnostics[0].message;
        assert!(message.contains("nests more than"), "{message}");
        message.split("at line ").nth(1)?.split(';').next()?.parse().ok()
    }

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
        deep += &format!("{}v\n", " ".repeat(MAX_DEPTH + 1));
        assert!(deepest(&deep).is_some());
        assert_eq!(deepest(&format!("{}x\n", "- ".repeat(MAX_DEPTH + 1))), Some(1));
    }

    #[test]
    fn brackets_in_quotes_comments_and_block_scalars_are_text() {
        let many = "[".repeat(200);
        for text in [
            format!("a: \"{many}\"\n"),
            format!("a: '{many}'\n"),
            format!("a: 1 # {many}\n"),
            format!("# {many}\n"),
            format!("a: \"x\\\" {many}\"\n"),
            format!("note: |\n  \"\n  {many}\nb: 1\n"),
        ] {
            assert_eq!(deepest(&text), None, "{text}");
        }
    }

    /// A quote inside a block scalar once made the scan think a quoted
    /// scalar opened, and the real nesting after it went uncounted.
    #[test]
    fn a_quote_in_a_block_scalar_hides_no_nesting_after_it() {
        let text = format!("note: |\n  say \"\nx: {}\n", "[".repeat(150_000));
        let started = std::time::Instant::now();
        assert_eq!(deepest(&text), Some(3));
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "refused in {:?}", started.elapsed());
        let text = format!("a: it's\nx: {}\n", "[".repeat(MAX_DEPTH + 1));
        assert_eq!(deepest(&text), Some(2), "YAML reads `it's` as plain text");
    }

    #[test]
    fn an_endless_file_is_refused_after_the_limit_not_read_whole() {
        let error = read_text(std::path::Path::new("/dev/zero")).unwrap_err();
        assert!(error.to_string().contains("larger than 16777216 bytes"), "{error}");
    }

    #[test]
    fn oversized_and_malformed_documents_are_refused_before_parsing() {
        let report = check(&" ".repeat(MAX_DOCUMENT_BYTES + 1)).unwrap_err();
        assert!(report.diagnostics[0].message.contains("at most 16777216"));
        let report = check("a: [1, 2\n").unwrap_err();
        assert!(report.diagnostics[0].message.starts_with("not YAML"), "{report:?}");
    }
}
