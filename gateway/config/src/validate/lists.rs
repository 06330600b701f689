//! Messages about lists: duplicates, and the valid choices.

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;

use crate::diagnostic::{Report, YamlPath};

/// Reports every value that appears more than once, at the later occurrences.
pub(crate) fn duplicates<'a, T: Eq + Hash + Display + 'a>(
    values: impl IntoIterator<Item = &'a T>,
    list: &YamlPath,
    key: &str,
    what: &str,
    report: &mut Report,
) {
    let mut seen = HashMap::new();
    for (i, value) in values.into_iter().enumerate() {
        if let Some(first) = seen.insert(value, i) {
            seen.insert(value, first);
            let at = if key.is_empty() { list.index(i) } else { list.index(i).key(key) };
            report.error(&at, format!("duplicate {what} {value} (first used at {})", list.index(first)));
        }
    }
}

/// `"valid: a, b"` or `"none are defined"`, for messages that list alternatives.
pub(crate) fn valid_list<T: Display>(values: impl IntoIterator<Item = T>) -> String {
    let items: Vec<String> = values.into_iter().map(|v| v.to_string()).collect();
    if items.is_empty() { "none are defined".to_owned() } else { format!("valid: {}", items.join(", ")) }
}
