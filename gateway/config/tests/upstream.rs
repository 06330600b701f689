//! Every example config published with DAQIRI loads unchanged and validates;
//! its template placeholders are warnings for `check` and errors for running.

use std::path::PathBuf;

use daqiri_config::{Document, InterfaceBackend, Severity};

fn upstream_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/upstream");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 11, "expected the 11 published DAQIRI examples in {dir:?}");
    files
}

#[test]
fn every_upstream_config_loads_and_validates() {
    for file in upstream_files() {
        let doc = Document::read(&file).unwrap_or_else(|r| panic!("{}: parse failed:\n{r}", file.display()));
        assert!(
            doc.unknown_keys.diagnostics.is_empty(),
            "{}: unexpected unknown keys:\n{}",
            file.display(),
            doc.unknown_keys
        );
        let checked = doc.validate_as_template();
        assert!(!checked.report.has_errors(), "{}: validation failed:\n{}", file.display(), checked.report);
        let valid = checked.valid.unwrap_or_else(|| panic!("{}: no checked config", file.display()));
        assert!(valid.warnings().iter().all(|w| w.severity == Severity::Warning));
        match doc.validate() {
            Ok(_) => assert!(doc.placeholders.is_empty(), "{}", file.display()),
            Err(report) => {
                assert!(!doc.placeholders.is_empty(), "{}: {report}", file.display());
                let paths: Vec<&str> = report.errors().map(|d| d.path.as_str()).collect();
                let placeholders: Vec<&str> = doc.placeholders.iter().map(|p| p.path.as_str()).collect();
                assert_eq!(
                    paths,
                    placeholders,
                    "{}: running refuses naming every placeholder, nothing else",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn tool_sections_are_kept_for_tools() {
    let file = upstream_files()
        .into_iter()
        .find(|f| f.ends_with("daqiri_bench_raw_sw_loopback_reorder_seq_1024.yaml"))
        .unwrap();
    let doc = Document::read(&file).unwrap();
    let bench_tx = &doc.sections["bench_tx"];
    assert_eq!(bench_tx["payload_size"].as_u64(), Some(1000));
    assert!(doc.sections.contains_key("bench_rx"));
}

#[test]
fn backends_resolve_as_daqiri_does() {
    let backend = |name: &str| {
        let file = upstream_files().into_iter().find(|f| f.ends_with(name)).unwrap();
        Document::read(&file).unwrap().validate_as_template().valid.unwrap().backend(0)
    };
    assert_eq!(backend("daqiri_bench_raw_sw_loopback.yaml"), InterfaceBackend::SoftwareLoopback);
    assert_eq!(backend("daqiri_bench_raw_tx_rx_hds.yaml"), InterfaceBackend::Dpdk);
    assert_eq!(backend("daqiri_bench_socket_udp_tx_rx.yaml"), InterfaceBackend::Socket);
    assert_eq!(backend("daqiri_bench_rdma_tx_rx.yaml"), InterfaceBackend::Roce);
}

#[test]
fn placeholders_and_raised_pools_are_warnings() {
    let file = upstream_files().into_iter().find(|f| f.ends_with("daqiri_bench_raw_tx_rx_hds.yaml")).unwrap();
    let checked = Document::read(&file).unwrap().validate_as_template();
    let text: Vec<String> = checked.report.diagnostics.iter().map(|w| w.to_string()).collect();
    assert!(
        text.iter().any(|w| w.contains("daqiri.cfg.interfaces[0].address") && w.contains("placeholder")),
        "{text:#?}"
    );
    let file =
        upstream_files().into_iter().find(|f| f.ends_with("daqiri_bench_raw_tx_rx_reorder_seq_1024_cpu.yaml")).unwrap();
    let valid = Document::read(&file).unwrap().validate_as_template().valid.unwrap();
    assert!(!valid.warnings().iter().any(|w| w.path.ends_with("num_bufs")), "16384 buffers need no raise");
}

#[test]
fn round_trip_through_yaml_keeps_the_config() {
    for file in upstream_files() {
        let doc = Document::read(&file).unwrap();
        let again = Document::parse(&Document::engine_yaml(&doc.config)).unwrap();
        assert_eq!(doc.config, again.config, "{}", file.display());
    }
}

#[test]
fn json_schema_describes_the_document() {
    let schema = serde_json::to_value(daqiri_config::json_schema()).unwrap();
    let text = schema.to_string();
    for key in ["memory_regions", "reorder_configs", "seq_packets_per_batch", "flow_isolation", "socket_config"] {
        assert!(text.contains(key), "schema lacks {key}");
    }
}

#[test]
fn a_placeholder_in_a_number_field_is_a_warning_for_check_and_an_error_for_running() {
    let yaml = "daqiri:\n  cfg:\n    version: 1\n    master_core: <CPU_CORE>\n    stream_type: socket\n    engine: socket\n    memory_regions:\n    - { name: m, kind: host, num_bufs: 8, buf_size: 64 }\n    interfaces:\n    - name: u\n      socket_config: { mode: server, local_ip: \"<192.0.2.1>\", local_port: 4096 }\n      rx:\n        queues:\n        - { name: q, id: 0, cpu_core: \"<CPU_CORE>\", batch_size: 4, memory_regions: [m] }\n";
    let doc = Document::parse(yaml).unwrap();
    let paths: Vec<&str> = doc.placeholders.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "daqiri.cfg.master_core",
            "daqiri.cfg.interfaces[0].socket_config.local_ip",
            "daqiri.cfg.interfaces[0].rx.queues[0].cpu_core"
        ]
    );
    let checked = doc.validate_as_template();
    assert!(!checked.report.has_errors(), "{}", checked.report);
    assert_eq!(checked.report.warnings().filter(|w| w.message.contains("placeholder")).count(), 3);
    let refused = doc.validate().unwrap_err();
    assert_eq!(refused.errors().count(), 3, "{refused}");
}
