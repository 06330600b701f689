//! Numbers as upstream's strict parser reads them: YAML 1.2 integers only.
//! Where the model takes an integer, a quoted number (`"8"`), an integer
//! YAML 1.1 and 1.2 read differently (`017`: octal 15 or decimal 17) and the
//! YAML 1.1 forms 1.2 dropped (`0b101`, `1_000`) are refused by path;
//! `0o17` and `0x1f` are YAML 1.2's octal and hexadecimal and stay. The
//! parser serde_yaml uses reads `0b101` as 5 and a core given as `"017"`
//! would reach our own deserializer as text, so this looks at the scalars
//! as written: style and text, from YAML's own event parser.

use saphyr_parser::{Event, Parser, ScalarStyle};

use crate::diagnostic::{Report, YamlPath};

/// Where the walk stands: in a mapping (at its key, or at the value of the
/// last key read) or in a sequence (at its item `index`).
enum Frame {
    Mapping { key: Option<String>, at_value: bool },
    Sequence { index: usize },
}

/// An error for each number written in a way upstream's parser refuses, at
/// its path under `daqiri`.
pub(crate) fn check(text: &str) -> Report {
    let mut report = Report::default();
    let mut stack: Vec<Frame> = Vec::new();
    // The nesting check read the same text already: an error here cannot
    // be new, so the walk just stops.
    for (event, _) in Parser::new_from_str(text).map_while(Result::ok) {
        match event {
            Event::MappingStart(..) => {
                stack.push(Frame::Mapping { key: None, at_value: false });
            }
            Event::SequenceStart(..) => stack.push(Frame::Sequence { index: 0 }),
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                advance(&mut stack);
            }
            Event::Scalar(value, style, ..) => {
                if let Some(Frame::Mapping { key, at_value: at_value @ false }) = stack.last_mut() {
                    *key = Some(value.into_owned());
                    *at_value = true;
                    continue;
                }
                let path = path_of(&stack);
                if path.starts_with("daqiri.")
                    && let Some(problem) = problem(&value, style)
                    && crate::schema_at::takes_integer(&path)
                {
                    report.error(&YamlPath::from_text(path), problem);
                }
                advance(&mut stack);
            }
            Event::Alias(..) => advance(&mut stack),
            _ => {}
        }
    }
    report
}

/// Moves past the value just read.
fn advance(stack: &mut [Frame]) {
    match stack.last_mut() {
        Some(Frame::Mapping { at_value, .. }) => *at_value = false,
        Some(Frame::Sequence { index }) => *index += 1,
        None => {}
    }
}

/// The path of the value the walk stands at, as diagnostics print it.
fn path_of(stack: &[Frame]) -> String {
    let mut path = String::new();
    for frame in stack {
        match frame {
            Frame::Mapping { key, .. } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key.as_deref().unwrap_or("?"));
            }
            Frame::Sequence { index } => path.push_str(&format!("[{index}]")),
        }
    }
    path
}

/// What is wrong with `text`, written in `style`, as an integer.
fn problem(text: &str, style: ScalarStyle) -> Option<String> {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    let decimal = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    match style {
        ScalarStyle::Plain => {
            if decimal && digits.len() > 1 && digits.starts_with('0') {
                let trimmed = digits.trim_start_matches('0');
                let trimmed = if trimmed.is_empty() { "0" } else { trimmed };
                return Some(format!(
                    "{text} is ambiguous: YAML 1.1 reads a leading zero as octal, YAML 1.2 as decimal; write {trimmed} (decimal) or 0o{trimmed} (octal)"
                ));
            }
            let binary =
                digits.strip_prefix("0b").is_some_and(|b| !b.is_empty() && b.bytes().all(|b| b == b'0' || b == b'1'));
            let grouped = digits.contains('_') && digits.bytes().all(|b| b.is_ascii_digit() || b == b'_');
            (binary || grouped)
                .then(|| format!("{text} is a YAML 1.1 integer that YAML 1.2 reads as text; write it in decimal, 0o octal or 0x hexadecimal"))
        }
        ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted if decimal => Some(format!(
            "a quoted number: upstream's parser takes numbers unquoted; write {text} (--lenient accepts the quotes)"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(yaml: &str) -> Vec<(String, String)> {
        check(yaml).diagnostics.into_iter().map(|d| (d.path.to_string(), d.message)).collect()
    }

    const QUEUE: &str = "daqiri:\n  cfg:\n    interfaces:\n    - name: a\n      rx:\n        queues:\n        - name: q\n          cpu_core: ";

    #[test]
    fn yaml_1_2_integers_pass() {
        for core in ["8", "-1", "+3", "0", "0o17", "0x1f"] {
            assert_eq!(refused(&format!("{QUEUE}{core}\n")), vec![], "{core}");
        }
    }

    #[test]
    fn quoted_ambiguous_and_yaml_1_1_numbers_are_refused_at_their_path() {
        let path = "daqiri.cfg.interfaces[0].rx.queues[0].cpu_core";
        for (core, says) in [
            ("\"8\"", "a quoted number"),
            ("'8'", "a quoted number"),
            ("017", "write 17 (decimal) or 0o17 (octal)"),
            ("00", "write 0 (decimal)"),
            ("0b101", "YAML 1.1"),
            ("1_000", "YAML 1.1"),
        ] {
            let found = refused(&format!("{QUEUE}{core}\n"));
            assert_eq!(found.len(), 1, "{core}: {found:?}");
            assert_eq!(found[0].0, path, "{core}");
            assert!(found[0].1.contains(says), "{core}: {}", found[0].1);
        }
    }

    #[test]
    fn text_where_the_model_takes_text_is_left_alone() {
        let yaml = "daqiri:\n  cfg:\n    interfaces:\n    - name: \"017\"\n      address: '0000:3b:00.0'\n      rx:\n        flows:\n        - name: f\n          match:\n            udp_src: \"1000-1010\"\n";
        assert_eq!(refused(yaml), vec![]);
        assert_eq!(refused("other_tool:\n  port: \"017\"\n"), vec![], "only daqiri's own section");
    }

    #[test]
    fn paths_count_sequence_items_and_survive_aliases_and_nested_maps() {
        let yaml = "daqiri:\n  cfg:\n    memory_regions:\n    - &r {name: a, num_bufs: 8}\n    - *r\n    - name: c\n      num_bufs: \"9\"\n";
        let found = refused(yaml);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "daqiri.cfg.memory_regions[2].num_bufs");
    }
}
