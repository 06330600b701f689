//! Every config under `configs/` is valid and starts the engine here.

use std::path::PathBuf;

use daqiri::Engine;
use daqiri_config::Document;

#[test]
fn every_example_config_validates_and_starts() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "expected the example configs in {dir:?}");
    for file in files {
        let doc = Document::read(&file).unwrap_or_else(|r| panic!("{}:\n{r}", file.display()));
        let valid = doc.validate().unwrap_or_else(|r| panic!("{}:\n{r}", file.display()));
        assert!(valid.warnings().is_empty(), "{}: {:?}", file.display(), valid.warnings());
        let engine = Engine::new(valid).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        engine.shutdown();
    }
}
