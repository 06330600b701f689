//! The config parser and validator, as `check`, `run` and `PUT /api/v1/config`
//! use them: any text is answered with a config or a report, never a panic.
//! A valid config must survive the operator's round trip: serialised
//! (`Document::engine_yaml`), read back and validated, it is the same config.

use daqiri::preflight::{MemoryNeeds, raised_num_bufs};
use daqiri_config::Document;

fn main() {
    daqiri_gateway::fuzzing::log_panics();
    afl::fuzz!(|data: &[u8]| {
        let Ok(text) = std::str::from_utf8(data) else { return };
        let Ok(doc) = Document::parse(text) else { return };
        let template = doc.validate_as_template();
        let Ok(valid) = doc.validate() else { return };
        assert!(template.valid.is_some(), "a valid config is also a valid template");
        MemoryNeeds::of(&valid);
        raised_num_bufs(&valid);
        let yaml = Document::engine_yaml(valid.config());
        let again = Document::parse(&yaml)
            .and_then(|doc| doc.validate())
            .unwrap_or_else(|report| panic!("the serialised config does not read back:\n{report}\n{yaml}"));
        assert_eq!(Document::engine_yaml(again.config()), yaml, "serialising a config read back changes it");
    });
}
