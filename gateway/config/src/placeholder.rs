//! Template placeholders: DAQIRI's examples ship values such as
//! `"<0000:00:00.0>"`, `"<00:00:00:00:00:00>"` or `"<CPU_CORE>"` that a user
//! replaces before running.
//!
//! Any `<...>` string under `daqiri:` is one, whatever the field. Parsing
//! finds them first, then stands a neutral value in for each one that does
//! not fit its field's type (a number, or nothing), so that the rest of the
//! document is still read and checked. `check` reports each placeholder as
//! a warning; running refuses the document, naming every one.

use serde_yaml::Value;

use crate::diagnostic::{Report, YamlPath};

/// One placeholder: where it is and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// Its YAML path, as diagnostics print it.
    pub path: String,
    /// The placeholder text, brackets included.
    pub text: String,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(Value),
    Index(usize),
}

/// Whether a string is a template placeholder.
pub fn is_placeholder(text: &str) -> bool {
    let text = text.trim();
    text.len() > 2 && text.starts_with('<') && text.ends_with('>')
}

/// Every placeholder in the `daqiri:` section of a document.
pub(crate) fn find(document: &Value) -> Vec<Placeholder> {
    let mut found = Vec::new();
    if let Some(daqiri) = document.get("daqiri") {
        walk(daqiri, &mut vec![Step::Key(Value::from("daqiri"))], &YamlPath::from_text("daqiri"), &mut found);
    }
    found
}

fn walk(value: &Value, steps: &mut Vec<Step>, path: &YamlPath, found: &mut Vec<Placeholder>) {
    match value {
        Value::String(text) if is_placeholder(text) => {
            found.push(Placeholder { path: path.to_string(), text: text.clone(), steps: steps.clone() })
        }
        Value::Mapping(map) => {
            for (key, child) in map {
                let name = key.as_str().map_or_else(|| format!("{key:?}"), str::to_owned);
                steps.push(Step::Key(key.clone()));
                walk(child, steps, &path.key(&name), found);
                steps.pop();
            }
        }
        Value::Sequence(items) => {
            for (index, child) in items.iter().enumerate() {
                steps.push(Step::Index(index));
                walk(child, steps, &path.index(index), found);
                steps.pop();
            }
        }
        Value::Tagged(tagged) => walk(&tagged.value, steps, path, found),
        _ => {}
    }
}

impl Placeholder {
    /// Stands `with` in for the placeholder (`None` removes its key).
    pub(crate) fn stand_in(&self, document: &mut Value, with: Option<Value>) {
        let Some((last, parents)) = self.steps.split_last() else { return };
        let mut node = document;
        for step in parents {
            let next = match step {
                Step::Key(key) => node.get_mut(key),
                Step::Index(index) => node.get_mut(index),
            };
            let Some(next) = next else { return };
            node = next;
        }
        match (last, with) {
            (Step::Key(key), Some(value)) => {
                if let Some(slot) = node.get_mut(key) {
                    *slot = value;
                }
            }
            (Step::Key(key), None) => {
                if let Some(map) = node.as_mapping_mut() {
                    map.remove(key);
                }
            }
            (Step::Index(index), with) => {
                if let Some(slot) = node.get_mut(index) {
                    *slot = with.unwrap_or(Value::Null);
                }
            }
        }
    }

    /// Whether a diagnostic at `path` is about this placeholder (or inside it).
    pub(crate) fn covers(&self, path: &str) -> bool {
        path.strip_prefix(self.path.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    }
}

/// The placeholders as diagnostics: warnings for `check`, errors for running.
pub(crate) fn report(placeholders: &[Placeholder], as_errors: bool) -> Report {
    let mut report = Report::default();
    for p in placeholders {
        let message = format!("\"{}\" is a template placeholder; replace it with a real value before running", p.text);
        let path = YamlPath::from_text(p.path.clone());
        if as_errors { report.error(&path, message) } else { report.warn(&path, message) }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_found_in_any_field_with_their_path() {
        let doc: Value = serde_yaml::from_str(
            "daqiri:\n  cfg:\n    master_core: <CPU_CORE>\n    interfaces:\n    - address: \"<0000:00:00.0>\"\n      name: ok\nbench_tx:\n  eth_dst_addr: <00:00:00:00:00:00>\n",
        )
        .unwrap();
        let found: Vec<(String, String)> = find(&doc).into_iter().map(|p| (p.path, p.text)).collect();
        assert_eq!(
            found,
            [
                ("daqiri.cfg.master_core".to_owned(), "<CPU_CORE>".to_owned()),
                ("daqiri.cfg.interfaces[0].address".to_owned(), "<0000:00:00.0>".to_owned()),
            ],
            "tool sections such as bench_tx are not ours"
        );
    }

    #[test]
    fn a_stand_in_replaces_or_removes_exactly_its_node() {
        let mut doc: Value = serde_yaml::from_str("daqiri:\n  cfg:\n    a: <A>\n    l: [1, <B>]\n").unwrap();
        let found = find(&doc);
        found[0].stand_in(&mut doc, None);
        found[1].stand_in(&mut doc, Some(Value::from(0)));
        assert_eq!(serde_yaml::to_string(&doc).unwrap(), "daqiri:\n  cfg:\n    l:\n    - 1\n    - 0\n");
        assert!(found[1].covers("daqiri.cfg.l[1]") && !found[1].covers("daqiri.cfg.l[10]"));
    }

    #[test]
    fn only_bracketed_strings_are_placeholders() {
        assert!(is_placeholder("<x>") && is_placeholder(" <192.0.2.1> "));
        assert!(!is_placeholder("<>") && !is_placeholder("a<b>") && !is_placeholder("<open"));
    }
}
