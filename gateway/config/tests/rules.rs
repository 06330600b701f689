//! The bad-config suite: one test per rule of the configuration reference,
//! each asserting the YAML path and the text of the error.

use daqiri_config::{Diagnostic, Document, InterfaceBackend, Link, Severity, Strictness};

/// A valid raw config; each test breaks one thing in it.
const RAW: &str = r#"
daqiri:
  cfg:
    version: 1
    stream_type: raw
    master_core: 0
    memory_regions:
    - { name: rx_cpu, kind: huge, num_bufs: 51200, buf_size: 64 }
    - { name: rx_gpu, kind: device, num_bufs: 51200, buf_size: 1000 }
    - { name: out_gpu, kind: device, num_bufs: 16, buf_size: 1048576 }
    - { name: tx_cpu, kind: huge, num_bufs: 51200, buf_size: 1064 }
    interfaces:
    - name: tx_port
      address: 0000:3b:00.0
      tx:
        queues:
        - { name: tx0, id: 0, cpu_core: 1, batch_size: 1024, memory_regions: [tx_cpu] }
    - name: rx_port
      address: 0000:3b:00.1
      rx:
        flow_isolation: true
        queues:
        - { name: q0, id: 0, cpu_core: 2, batch_size: 1024, memory_regions: [rx_gpu] }
        - { name: q1, id: 1, cpu_core: 3, batch_size: 1024, memory_regions: [rx_cpu, rx_gpu] }
        flows:
        - name: f0
          id: 10
          action: { type: queue, id: 0 }
          match: { udp_src: 4096, udp_dst: 4096 }
        - name: f1
          id: 11
          action: { type: queue, id: 1 }
          match: { udp_dst: "5000-5010" }
        reorder_configs:
        - name: r0
          reorder_type: gpu
          memory_region: out_gpu
          payload_byte_offset: 0
          flow_ids: [10]
          method:
            seq_packets_per_batch:
              sequence_number: { bit_offset: 0, bit_width: 32 }
              packets_per_batch: 1024
"#;

const SOCKET: &str = r#"
daqiri:
  cfg:
    version: 1
    stream_type: socket
    memory_regions:
    - { name: rx, kind: host, num_bufs: 4096, buf_size: 2048 }
    interfaces:
    - name: udp_in
      address: 127.0.0.1
      socket_config: { mode: server, local_addr: "udp://127.0.0.1:5001" }
      rx:
        queues:
        - { name: q0, id: 0, cpu_core: 1, batch_size: 32, memory_regions: [rx] }
"#;

/// `base` with the first occurrence of `from` replaced by `to` (which must exist).
fn edit(base: &str, from: &str, to: &str) -> String {
    assert!(base.contains(from), "test edit does not apply: {from}");
    base.replacen(from, to, 1)
}

fn diagnostics(yaml: &str) -> Vec<Diagnostic> {
    let doc = Document::parse(yaml).unwrap_or_else(|r| panic!("parse failed:\n{r}"));
    match doc.validate() {
        Ok(valid) => valid.warnings().to_vec(),
        Err(report) => report.diagnostics,
    }
}

#[track_caller]
fn assert_finding(yaml: &str, severity: Severity, path: &str, text: &str) {
    let found = diagnostics(yaml);
    assert!(
        found.iter().any(|d| d.severity == severity && d.path == path && d.message.contains(text)),
        "expected {severity:?} at {path} containing {text:?}; got:\n{}",
        found.iter().map(|d| format!("  {d}\n")).collect::<String>()
    );
}

#[track_caller]
fn assert_error(yaml: &str, path: &str, text: &str) {
    assert_finding(yaml, Severity::Error, path, text);
}

#[track_caller]
fn assert_warning(yaml: &str, path: &str, text: &str) {
    assert_finding(yaml, Severity::Warning, path, text);
    assert!(Document::parse(yaml).unwrap().validate().is_ok(), "a warning must not make the config invalid");
}

const IF1: &str = "daqiri.cfg.interfaces[1]";

/// RAW with `keys` (indented lines) added to interface 1's reorder config.
fn with_plan_keys(keys: &str) -> String {
    edit(RAW, "          payload_byte_offset: 0\n", &format!("          payload_byte_offset: 0\n{keys}"))
}

#[test]
fn base_configs_are_valid() {
    for yaml in [RAW, SOCKET] {
        let doc = Document::parse(yaml).unwrap();
        let valid = doc.validate().unwrap_or_else(|r| panic!("{r}"));
        assert!(valid.warnings().is_empty(), "{:?}", valid.warnings());
    }
}

#[test]
fn all_problems_are_reported_at_once() {
    let yaml = edit(
        &edit(RAW, "action: { type: queue, id: 1 }", "action: { type: queue, id: 7 }"),
        "version: 1",
        "version: 2",
    );
    let errors = diagnostics(&yaml);
    assert!(errors.iter().any(|d| d.path == "daqiri.cfg.version"));
    assert!(errors.iter().any(|d| d.path == format!("{IF1}.rx.flows[1].action.id")));
}

#[test]
fn type_errors_name_their_path_and_the_valid_values() {
    let err = Document::parse(&edit(RAW, "kind: device, num_bufs: 51200", "kind: gpu, num_bufs: 51200")).unwrap_err();
    let d = err.errors().next().unwrap();
    assert_eq!(d.path, "daqiri.cfg.memory_regions[1].kind");
    assert!(d.message.contains("unknown variant `gpu`") && d.message.contains("host_pinned"), "{d}");
    let err = Document::parse(&edit(
        RAW,
        "batch_size: 1024, memory_regions: [tx_cpu]",
        "batch_size: many, memory_regions: [tx_cpu]",
    ))
    .unwrap_err();
    assert_eq!(err.errors().next().unwrap().path, "daqiri.cfg.interfaces[0].tx.queues[0].batch_size");
}

/// Strict, as upstream's parser: an unknown key anywhere is an error at its
/// path, naming the keys its map takes and the likely one. Lenient (for
/// files written for older parsers): a warning.
#[test]
fn unknown_keys_are_errors_naming_what_the_map_takes_unless_lenient() {
    // Lenient still refuses a queue's unknown key: ignoring it would change what lands where.
    for (from, to, path, hint, lenient_severity) in [
        (
            "version: 1",
            "version: 1\n    stream_tipe: raw",
            "daqiri.cfg.stream_tipe",
            "did you mean \"stream_type\"?",
            Severity::Warning,
        ),
        (
            "batch_size: 32, memory_regions: [rx] }",
            "batch_size: 32, memory_regions: [rx], timout_us: 5 }",
            "daqiri.cfg.interfaces[0].rx.queues[0].timout_us",
            "did you mean \"timeout_us\"?",
            Severity::Error,
        ),
    ] {
        let yaml = edit(SOCKET, from, to);
        assert_error(&yaml, path, hint);
        assert_error(&yaml, path, "this map takes: ");
        let lenient = Document::parse_with(&yaml, Strictness::Lenient).unwrap();
        let warnings = match lenient.validate() {
            Ok(valid) => valid.warnings().to_vec(),
            Err(report) => report.diagnostics,
        };
        let warned = warnings.iter().find(|d| d.path == path).unwrap_or_else(|| panic!("{path}: {warnings:?}"));
        assert_eq!(warned.severity, lenient_severity, "{warned}");
    }
    let rx = edit(RAW, "      rx:\n", "      rx:\n        flow_isolaton: true\n");
    assert_error(&rx, &format!("{IF1}.rx.flow_isolaton"), "did you mean \"flow_isolation\"?");
}

/// Every finding on `yaml` at `strictness`, whether parsing or validation made it.
fn findings_at(yaml: &str, strictness: Strictness) -> Vec<Diagnostic> {
    match Document::parse_with(yaml, strictness) {
        Err(report) => report.diagnostics,
        Ok(doc) => match doc.validate() {
            Ok(valid) => valid.warnings().to_vec(),
            Err(report) => report.diagnostics,
        },
    }
}

/// Numbers as upstream's strict parser reads them: YAML 1.2 integers,
/// unquoted; each refusal at the key's path. Lenient takes quoted numbers.
#[test]
fn numbers_are_yaml_1_2_integers_refused_by_path_when_quoted_or_ambiguous() {
    let queue = "daqiri.cfg.interfaces[0].rx.queues[0]";
    for (from, to, path, says) in [
        ("cpu_core: 1,", "cpu_core: \"1\",", format!("{queue}.cpu_core"), "a quoted number"),
        ("num_bufs: 4096", "num_bufs: '4096'", "daqiri.cfg.memory_regions[0].num_bufs".to_owned(), "a quoted number"),
        ("batch_size: 32", "batch_size: 032", format!("{queue}.batch_size"), "write 32 (decimal) or 0o32 (octal)"),
        ("batch_size: 32", "batch_size: 0b100000", format!("{queue}.batch_size"), "YAML 1.1"),
        ("num_bufs: 4096", "num_bufs: 4_096", "daqiri.cfg.memory_regions[0].num_bufs".to_owned(), "YAML 1.1"),
        ("batch_size: 32", "batch_size: 32.0", format!("{queue}.batch_size"), "floating point"),
        ("num_bufs: 4096", "num_bufs: 5000000000", "daqiri.cfg.memory_regions[0].num_bufs".to_owned(), "invalid value"),
    ] {
        let yaml = edit(SOCKET, from, to);
        let found = findings_at(&yaml, Strictness::Strict);
        let at: Vec<_> = found.iter().filter(|d| d.path == path).collect();
        assert!(
            at.len() == 1 && at[0].severity == Severity::Error && at[0].message.contains(says),
            "{to}: expected one error at {path} saying {says:?}; got {found:?}"
        );
    }
    for (from, to) in [("batch_size: 32", "batch_size: 0x20"), ("batch_size: 32", "batch_size: 0o40")] {
        let found = findings_at(&edit(SOCKET, from, to), Strictness::Strict);
        assert!(found.iter().all(|d| d.severity != Severity::Error), "{to} is YAML 1.2: {found:?}");
    }
    let quoted = findings_at(&edit(SOCKET, "cpu_core: 1,", "cpu_core: \"1\","), Strictness::Lenient);
    assert!(quoted.iter().all(|d| d.severity != Severity::Error), "lenient takes quotes: {quoted:?}");
}

/// Upstream never merged `rx.hardware_timestamp_format` (PR #262): strict,
/// it is an unknown key like any other, not a warning.
#[test]
fn the_never_merged_hardware_timestamp_format_is_refused() {
    let yaml = edit(RAW, "      rx:\n", "      rx:\n        hardware_timestamp_format: ptp\n");
    assert_error(&yaml, &format!("{IF1}.rx.hardware_timestamp_format"), "unknown key");
}

/// Lenient, DAQIRI's newer keys and misspellings where ignoring them would
/// change what lands where (a match, an action, a queue, a reorder plan)
/// still refuse the config, marked NOT_SUPPORTED, and `check` lists them as
/// errors; strict, they are errors like any unknown key.
#[test]
fn an_unknown_key_in_a_match_action_queue_or_plan_is_refused_not_ignored() {
    for (from, to, path) in [
        (
            "match: { udp_src: 4096, udp_dst: 4096 }",
            "match: { udp_src: 4096, udp_dst: 4096, vlan_id: 3 }",
            format!("{IF1}.rx.flows[0].match.vlan_id"),
        ),
        (
            "match: { udp_src: 4096, udp_dst: 4096 }",
            "match: { udp_src: 4096, udp_dst: 4096, ethernet: { dst: \"aa:bb:cc:dd:ee:ff\", type: 0x800 } }",
            format!("{IF1}.rx.flows[0].match.ethernet.type"),
        ),
        (
            "action: { type: queue, id: 0 }",
            "action: { type: queue, id: 0, mark: 3 }",
            format!("{IF1}.rx.flows[0].action.mark"),
        ),
        (
            "{ name: q0, id: 0, cpu_core: 2,",
            "{ name: q0, id: 0, cpu_core: 2, rss_key: 7,",
            format!("{IF1}.rx.queues[0].rss_key"),
        ),
        (
            "          payload_byte_offset: 0\n",
            "          payload_byte_offset: 0\n          missing_slots: drop\n",
            format!("{IF1}.rx.reorder_configs[0].missing_slots"),
        ),
        (
            "              packets_per_batch: 1024",
            "              packets_per_batch: 1024\n              cyclic_sequence: true",
            format!("{IF1}.rx.reorder_configs[0].method.seq_packets_per_batch.cyclic_sequence"),
        ),
    ] {
        let yaml = edit(RAW, from, to);
        assert_error(&yaml, &path, "unknown key");
        let doc = Document::parse_with(&yaml, Strictness::Lenient).unwrap();
        let report = doc.validate().expect_err("refused, not ignored");
        let refused = report.errors().find(|d| d.path == path).unwrap_or_else(|| panic!("{path} refused: {report}"));
        assert!(refused.not_supported && refused.message.contains("refused (NOT_SUPPORTED)"), "{refused}");
        assert!(report.only_not_supported(), "nothing else is wrong: {report}");
        let checked = doc.validate_as_template();
        assert!(
            checked.valid.is_none() && checked.report.errors().any(|d| d.path == path),
            "check lists {path} as an error"
        );
    }
}

#[test]
fn hardware_loopback_and_reorder_are_known_keys() {
    let doc = Document::parse(&edit(RAW, "version: 1", "version: 1\n    loopback: hw")).unwrap();
    assert_eq!(doc.config.loopback, daqiri_config::model::Loopback::Hardware);
    let yaml =
        with_plan_keys("          reorder_engine: hw\n          cyclic_sequence: true\n          packet_size: 8192\n");
    let valid = Document::parse(&yaml).unwrap().validate().expect("valid DAQIRI: this build refuses it at start");
    let plan = &valid.config().interfaces[1].rx.as_ref().unwrap().reorder_configs[0];
    assert_eq!(plan.reorder_engine, Some(daqiri_config::model::ReorderEngine::Hardware));
    assert_eq!((plan.cyclic_sequence(), plan.packet_size), (true, Some(8192)));
    let err = Document::parse(&edit(RAW, "version: 1", "version: 1\n    loopback: cable")).unwrap_err();
    let d = err.errors().next().unwrap();
    assert!(d.path == "daqiri.cfg.loopback" && d.message.contains("hw"), "{d}");
}

/// Upstream's `cpu_core: -1`, an unpinned worker, on socket queues; raw
/// queues and other negatives are refused at the key.
#[test]
fn cpu_core_minus_one_is_an_unpinned_socket_worker() {
    let socket = edit(SOCKET, "cpu_core: 1", "cpu_core: -1");
    let valid = Document::parse(&socket).unwrap().validate().unwrap_or_else(|r| panic!("{r}"));
    let queue = &valid.config().interfaces[0].rx.as_ref().unwrap().queues[0];
    assert_eq!(queue.cpu_core, Some(daqiri_config::model::QueueCore::Unpinned));
    assert!(Document::engine_yaml(valid.config()).contains("cpu_core: -1"), "written back as -1");
    let raw = edit(RAW, "cpu_core: 2", "cpu_core: -1");
    assert_error(&raw, &format!("{IF1}.rx.queues[0].cpu_core"), "-1 (an unpinned worker) is for socket queues");
    let error = Document::parse(&edit(SOCKET, "cpu_core: 1", "cpu_core: -2")).unwrap_err();
    assert!(error.errors().any(|d| d.message.contains("-1 for an unpinned thread")), "{error}");
}

/// Upstream's preconditions of the NIC's reorder, each refused (or warned)
/// at its key; a software plan reads neither key.
#[test]
fn the_nics_reorder_needs_cyclic_sequence_and_packet_size_as_upstream_says() {
    let plan = format!("{IF1}.rx.reorder_configs[0]");
    for (keys, key, message) in [
        ("reorder_engine: hw\n          packet_size: 8192", "cyclic_sequence", "needs cyclic_sequence: true"),
        (
            "reorder_engine: hw\n          cyclic_sequence: false\n          packet_size: 8192",
            "cyclic_sequence",
            "needs cyclic_sequence: true",
        ),
        ("reorder_engine: hw\n          cyclic_sequence: true", "packet_size", "needs packet_size"),
        (
            "reorder_engine: hw\n          cyclic_sequence: true\n          packet_size: 0",
            "packet_size",
            "needs packet_size",
        ),
    ] {
        assert_error(&with_plan_keys(&format!("          {keys}\n")), &format!("{plan}.{key}"), message);
    }
    for (keys, key, message) in [
        (
            "reorder_engine: hw\n          cyclic_sequence: true\n          packet_size: 1500",
            "packet_size",
            "4000 bytes or more",
        ),
        ("packet_size: 8192", "packet_size", "read by reorder_engine: hw only"),
        ("cyclic_sequence: false", "cyclic_sequence", "wrap around their id space whatever it says"),
    ] {
        assert_warning(&with_plan_keys(&format!("          {keys}\n")), &format!("{plan}.{key}"), message);
    }
}

#[test]
fn ethernet_matches_take_mac_addresses_alone_or_beside_udp_keys() {
    let flow = "match: { udp_src: 4096, udp_dst: 4096 }";
    let both = edit(
        RAW,
        flow,
        "match: { udp_dst: 4096, ethernet: { src: \"02:00:00:00:00:0A\", dst: \"aa:bb:cc:dd:ee:ff\" } }",
    );
    let valid = Document::parse(&both).unwrap().validate().unwrap_or_else(|r| panic!("{r}"));
    let m = valid.config().interfaces[1].rx.as_ref().unwrap().flows[0].matches.clone().unwrap();
    let ethernet = m.ethernet.as_ref().unwrap();
    assert_eq!(
        (ethernet.src_mac(), ethernet.dst_mac()),
        (Some([2, 0, 0, 0, 0, 10]), Some([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]))
    );
    assert!(!m.is_ethernet_only());
    let alone = edit(RAW, flow, "match: { ethernet: { dst: \"aa:bb:cc:dd:ee:ff\" } }");
    let valid = Document::parse(&alone).unwrap().validate().unwrap_or_else(|r| panic!("{r}"));
    assert!(valid.config().interfaces[1].rx.as_ref().unwrap().flows[0].matches.as_ref().unwrap().is_ethernet_only());
    let path = format!("{IF1}.rx.flows[0].match.ethernet");
    assert_error(&edit(RAW, flow, "match: { ethernet: {} }"), &path, "give src, dst or both");
    assert_error(
        &edit(RAW, flow, "match: { ethernet: { src: \"aa:bb:cc:dd:ee\" } }"),
        &format!("{path}.src"),
        "not a MAC address",
    );
    // Beside a flex key the addresses qualify a flex flow (judged as one).
    assert_error(
        &edit(RAW, flow, "match: { ethernet: { src: \"aa:bb:cc:dd:ee:ff\" }, flex_item_id: 1, val: 2 }"),
        &format!("{IF1}.rx.flows[0].match.flex_item_id"),
        "flex item 1 is not defined",
    );
}

#[test]
fn version_must_be_1() {
    assert_error(&edit(RAW, "version: 1", "version: 2"), "daqiri.cfg.version", "only valid version is 1");
}

#[test]
fn meta_buffers_must_be_positive() {
    assert_error(
        &edit(RAW, "version: 1", "version: 1\n    rx_meta_buffers: 0"),
        "daqiri.cfg.rx_meta_buffers",
        "at least 1",
    );
}

#[test]
fn stream_type_is_required() {
    assert_error(&edit(RAW, "stream_type: raw", ""), "daqiri.cfg.stream_type", "valid: raw, socket");
}

#[test]
fn engine_must_fit_the_stream_type() {
    assert_error(
        &edit(RAW, "stream_type: raw", "stream_type: raw\n    engine: socket"),
        "daqiri.cfg.engine",
        "valid: dpdk (default), ibverbs",
    );
    assert_error(
        &edit(SOCKET, "stream_type: socket", "stream_type: socket\n    engine: dpdk"),
        "daqiri.cfg.engine",
        "cannot drive stream_type socket",
    );
}

#[test]
fn sw_loopback_needs_raw_streams() {
    assert_error(
        &edit(SOCKET, "version: 1", "version: 1\n    loopback: sw"),
        "daqiri.cfg.loopback",
        "applies to raw streams",
    );
}

#[test]
fn memory_region_names_are_unique() {
    assert_error(
        &edit(RAW, "name: out_gpu", "name: rx_cpu"),
        "daqiri.cfg.memory_regions[2].name",
        "duplicate memory region name rx_cpu",
    );
}

#[test]
fn memory_regions_need_buffers() {
    assert_error(&edit(RAW, "num_bufs: 16,", "num_bufs: 0,"), "daqiri.cfg.memory_regions[2].num_bufs", "at least 1");
    assert_error(
        &edit(RAW, "buf_size: 1048576", "buf_size: 0"),
        "daqiri.cfg.memory_regions[2].buf_size",
        "at least 1 byte",
    );
}

#[test]
fn unused_memory_region_is_a_warning() {
    let yaml = edit(
        SOCKET,
        "    interfaces:",
        "    - { name: spare, kind: host, num_bufs: 8, buf_size: 64 }\n    interfaces:",
    );
    assert_warning(&yaml, "daqiri.cfg.memory_regions[1].name", "not used");
}

/// Upstream's floor for DPDK regions, from the one rule the engine applies
/// (`check` reports it through the engine's preflight, tested there).
#[test]
fn small_dpdk_pools_are_raised_by_upstreams_rule() {
    // rx_cpu takes queue q1's ring (1024) and bursts of 1024: a floor of
    // max(1.5 x 1024, 1024 + 2 x 1024) = 3072, raised to 1024 + 4 x 1024.
    let raised_from = |num_bufs: u32| {
        let yaml = edit(
            RAW,
            "{ name: rx_cpu, kind: huge, num_bufs: 51200",
            &format!("{{ name: rx_cpu, kind: huge, num_bufs: {num_bufs}"),
        );
        let config = Document::parse(&yaml).unwrap().config;
        let raised = daqiri_config::pools::raised_regions(&config);
        raised.iter().filter(|r| r.region == 0).map(|r| (r.from, r.to)).collect::<Vec<_>>()
    };
    assert_eq!(raised_from(3071), [(3071, 5120)]);
    assert_eq!(raised_from(3072), []);
}

#[test]
fn interface_names_are_unique() {
    assert_error(
        &edit(RAW, "name: rx_port", "name: tx_port"),
        "daqiri.cfg.interfaces[1].name",
        "duplicate interface name tx_port",
    );
}

#[test]
fn placeholder_address_is_a_warning_for_check_and_an_error_for_running() {
    let doc = Document::parse(&edit(RAW, "address: 0000:3b:00.1", "address: <0000:00:00.0>")).unwrap();
    let checked = doc.validate_as_template();
    assert!(!checked.report.has_errors(), "{}", checked.report);
    assert!(
        checked
            .report
            .warnings()
            .any(|w| w.path == "daqiri.cfg.interfaces[1].address" && w.message.contains("placeholder")),
        "{}",
        checked.report
    );
    let refused = doc.validate().unwrap_err();
    assert_eq!(refused.errors().map(|e| e.path.as_str()).collect::<Vec<_>>(), ["daqiri.cfg.interfaces[1].address"]);
}

#[test]
fn raw_interfaces_need_an_address() {
    assert_error(&edit(RAW, "address: 0000:3b:00.1", "address: \"\""), "daqiri.cfg.interfaces[1].address", "PCIe BDF");
}

#[test]
fn queue_memory_region_must_exist() {
    assert_error(
        &edit(RAW, "memory_regions: [rx_gpu] }", "memory_regions: [rx_gpux] }"),
        &format!("{IF1}.rx.queues[0].memory_regions[0]"),
        "\"rx_gpux\" is not defined; valid: \"rx_cpu\"",
    );
}

#[test]
fn queue_ids_and_names_are_unique() {
    assert_error(
        &edit(RAW, "{ name: q1, id: 1", "{ name: q1, id: 0"),
        &format!("{IF1}.rx.queues[1].id"),
        "duplicate queue id 0",
    );
    assert_error(
        &edit(RAW, "{ name: q1, id: 1", "{ name: q0, id: 1"),
        &format!("{IF1}.rx.queues[1].name"),
        "duplicate queue name q0",
    );
}

#[test]
fn indirect_queues_need_core_and_batch() {
    assert_error(
        &edit(RAW, "{ name: q0, id: 0, cpu_core: 2, batch_size: 1024,", "{ name: q0, id: 0,"),
        &format!("{IF1}.rx.queues[0].cpu_core"),
        "need cpu_core",
    );
    assert_error(
        &edit(RAW, "{ name: q0, id: 0, cpu_core: 2, batch_size: 1024,", "{ name: q0, id: 0, cpu_core: 2,"),
        &format!("{IF1}.rx.queues[0].batch_size"),
        "need batch_size",
    );
    assert_error(
        &edit(
            RAW,
            "{ name: q0, id: 0, cpu_core: 2, batch_size: 1024,",
            "{ name: q0, id: 0, cpu_core: 2, batch_size: 0,",
        ),
        &format!("{IF1}.rx.queues[0].batch_size"),
        "at least 1",
    );
}

#[test]
fn direct_poll_mode_needs_raw_ibverbs_or_sockets() {
    let yaml = edit(RAW, "{ name: q1, id: 1, cpu_core: 3, batch_size: 1024,", "{ name: q1, id: 1, poll_mode: direct,");
    assert_error(&yaml, &format!("{IF1}.rx.queues[1].poll_mode"), "on the raw ibverbs engine");
    let ibverbs = edit(&yaml, "stream_type: raw", "stream_type: raw\n    engine: ibverbs");
    assert!(Document::parse(&ibverbs).unwrap().validate().is_ok());
}

#[test]
fn direct_poll_mode_forbids_worker_settings_and_reorder() {
    let yaml = edit(RAW, "stream_type: raw", "stream_type: raw\n    engine: ibverbs");
    let yaml = edit(
        &yaml,
        "{ name: q0, id: 0, cpu_core: 2, batch_size: 1024,",
        "{ name: q0, id: 0, poll_mode: direct, cpu_core: 2, timeout_us: 5,",
    );
    assert_error(&yaml, &format!("{IF1}.rx.queues[0].cpu_core"), "not allowed in direct poll mode");
    assert_error(&yaml, &format!("{IF1}.rx.queues[0].timeout_us"), "not allowed in direct poll mode");
    assert_error(&yaml, &format!("{IF1}.rx.queues[0].poll_mode"), "cannot feed a reorder config");
}

#[test]
fn tx_only_keys_are_rejected_on_rx_queues() {
    assert_error(
        &edit(RAW, "{ name: q0, id: 0,", "{ name: q0, id: 0, pacing_mbps: 100,"),
        &format!("{IF1}.rx.queues[0].pacing_mbps"),
        "TX queue setting",
    );
    assert_error(
        &edit(RAW, "{ name: q0, id: 0,", "{ name: q0, id: 0, offloads: [tx_eth_src],"),
        &format!("{IF1}.rx.queues[0].offloads"),
        "TX queue setting",
    );
}

#[test]
fn busy_poll_us_is_an_rx_setting_of_at_least_one_microsecond() {
    assert_error(
        &edit(RAW, "{ name: q0, id: 0,", "{ name: q0, id: 0, busy_poll_us: 0,"),
        &format!("{IF1}.rx.queues[0].busy_poll_us"),
        "leave busy_poll_us out",
    );
    assert_error(
        &edit(RAW, "{ name: tx0, id: 0,", "{ name: tx0, id: 0, busy_poll_us: 20,"),
        "daqiri.cfg.interfaces[0].tx.queues[0].busy_poll_us",
        "RX queue setting",
    );
}

#[test]
fn flow_must_reference_an_existing_queue() {
    assert_error(
        &edit(RAW, "action: { type: queue, id: 1 }", "action: { type: queue, id: 3 }"),
        &format!("{IF1}.rx.flows[1].action.id"),
        "queue 3 does not exist on this interface's rx.queues; valid: 0, 1",
    );
}

#[test]
fn flow_names_and_ids_are_unique() {
    assert_error(&edit(RAW, "id: 11", "id: 10"), &format!("{IF1}.rx.flows[1].id"), "duplicate flow id 10");
    assert_error(&edit(RAW, "name: f1", "name: f0"), &format!("{IF1}.rx.flows[1].name"), "duplicate flow name f0");
}

#[test]
fn id_and_ids_are_exclusive() {
    assert_error(
        &edit(RAW, "action: { type: queue, id: 1 }", "action: { type: queue, id: 1, ids: [0, 1] }"),
        &format!("{IF1}.rx.flows[1].action.ids"),
        "mutually exclusive",
    );
    assert_error(
        &edit(RAW, "action: { type: queue, id: 1 }", "action: { type: queue }"),
        &format!("{IF1}.rx.flows[1].action.id"),
        "need id (one queue) or ids",
    );
}

#[test]
fn rss_ids_must_be_unique_and_exist() {
    assert_error(
        &edit(RAW, "action: { type: queue, id: 1 }", "action: { type: queue, ids: [0, 0] }"),
        &format!("{IF1}.rx.flows[1].action.ids[1]"),
        "duplicate queue id 0",
    );
    assert_error(
        &edit(RAW, "action: { type: queue, id: 1 }", "action: { type: queue, ids: [0, 5] }"),
        &format!("{IF1}.rx.flows[1].action.ids[1]"),
        "queue 5 does not exist",
    );
    assert_error(
        &edit(RAW, "action: { type: queue, id: 1 }", "action: { type: queue, ids: [] }"),
        &format!("{IF1}.rx.flows[1].action.ids"),
        "at least one queue",
    );
}

#[test]
fn action_and_actions_are_exclusive_and_one_is_required() {
    assert_error(
        &edit(
            RAW,
            "action: { type: queue, id: 1 }",
            "action: { type: queue, id: 1 }\n          actions: [{ type: queue, id: 1 }]",
        ),
        &format!("{IF1}.rx.flows[1].action"),
        "not both",
    );
    assert_error(&edit(RAW, "action: { type: queue, id: 1 }", ""), &format!("{IF1}.rx.flows[1]"), "has no action");
}

#[test]
fn rx_action_lists_end_with_a_queue() {
    assert_error(
        &edit(RAW, "action: { type: queue, id: 1 }", "actions: [{ type: queue, id: 1 }, { type: vlan_pop }]"),
        &format!("{IF1}.rx.flows[1].actions[1]"),
        "must end with type: queue",
    );
}

#[test]
fn action_types_fit_the_direction() {
    assert_error(
        &edit(
            RAW,
            "action: { type: queue, id: 1 }",
            "actions: [{ type: vlan_push, vlan_id: 3 }, { type: queue, id: 1 }]",
        ),
        &format!("{IF1}.rx.flows[1].actions[0].type"),
        "vlan_push is not an RX flow action; valid: queue, vlan_pop, tunnel_decap",
    );
    let tx = edit(
        RAW,
        "memory_regions: [tx_cpu] }",
        "memory_regions: [tx_cpu] }\n        flows:\n        - { name: t, id: 1, actions: [{ type: queue, id: 0 }] }",
    );
    assert_error(
        &tx,
        "daqiri.cfg.interfaces[0].tx.flows[0].actions[0].type",
        "queue is not an TX flow action; valid: vlan_push, tunnel_encap",
    );
}

#[test]
fn vlan_push_fields_are_range_checked() {
    let tx = edit(
        RAW,
        "memory_regions: [tx_cpu] }",
        "memory_regions: [tx_cpu] }\n        flows:\n        - { name: t, id: 1, actions: [{ type: vlan_push, vlan_id: 5000, pcp: 9 }] }",
    );
    assert_error(&tx, "daqiri.cfg.interfaces[0].tx.flows[0].actions[0].vlan_id", "valid: 0..4095");
    assert_error(&tx, "daqiri.cfg.interfaces[0].tx.flows[0].actions[0].pcp", "valid: 0..7");
}

#[test]
fn stray_action_fields_are_rejected() {
    assert_error(
        &edit(
            RAW,
            "action: { type: queue, id: 1 }",
            "actions: [{ type: vlan_pop, vlan_id: 3 }, { type: queue, id: 1 }]",
        ),
        &format!("{IF1}.rx.flows[1].actions[0].vlan_id"),
        "does not belong to a vlan_pop action",
    );
}

#[test]
fn tunnel_encap_needs_outer_headers_and_ids() {
    let tx = edit(
        RAW,
        "memory_regions: [tx_cpu] }",
        "memory_regions: [tx_cpu] }\n        flows:\n        - { name: t, id: 1, actions: [{ type: tunnel_encap, tunnel: { type: vxlan, outer_eth_src: \"02:00:00:00:00:01\", outer_ipv4_src: 10.0.0.1, outer_ipv4_dst: 10.0.0.2, tni: 5 } }] }",
    );
    let at = "daqiri.cfg.interfaces[0].tx.flows[0].actions[0].tunnel";
    assert_error(&tx, &format!("{at}.outer_eth_dst"), "tunnel_encap needs outer_eth_dst");
    assert_error(&tx, &format!("{at}.vni"), "vxlan tunnels need vni");
    assert_error(&tx, &format!("{at}.tni"), "tni belongs to nvgre tunnels");
}

#[test]
fn tunnel_decap_is_an_rx_transform() {
    let yaml = edit(
        RAW,
        "action: { type: queue, id: 1 }",
        "actions: [{ type: tunnel_decap, tunnel: { type: vxlan, vni: 16777216 } }, { type: queue, id: 1 }]",
    );
    assert_error(&yaml, &format!("{IF1}.rx.flows[1].actions[0].tunnel.vni"), "does not fit 24 bits");
}

#[test]
fn match_classes_cannot_mix_in_one_flow() {
    assert_error(
        &edit(RAW, "match: { udp_dst: \"5000-5010\" }", "match: { udp_dst: 5000, flex_item_id: 1, val: 3 }"),
        &format!("{IF1}.rx.flows[1].match"),
        "cannot be combined",
    );
}

/// Upstream lets `match.ethernet` qualify a flex-item or eCPRI match (its
/// #261): valid, and refused at start only because this build translates
/// neither (NOT_SUPPORTED, which `check` lists as a warning).
#[test]
fn ethernet_addresses_qualify_flex_and_ecpri_matches() {
    let qualified = edit(
        RAW,
        "match: { udp_src: 4096, udp_dst: 4096 }",
        "match: { ecpri: { msg_type: 0, pc_id: 1 }, ethernet: { dst: \"02:00:00:00:00:01\" } }",
    );
    let qualified =
        edit(&qualified, "match: { udp_dst: \"5000-5010\" }", "match: { ecpri: { msg_type: 2, rtc_id: 3 } }");
    let found = findings_at(&qualified, Strictness::Strict);
    assert!(found.iter().all(|d| d.severity != Severity::Error), "{found:?}");
}

#[test]
fn one_flow_class_per_interface() {
    let yaml = edit(RAW, "match: { udp_dst: \"5000-5010\" }", "match: { ecpri: { msg_type: 0 } }");
    assert_error(
        &yaml,
        &format!("{IF1}.rx.flows[1].match"),
        "this is a eCPRI flow but daqiri.cfg.interfaces[1].rx.flows[0] is UDP/IP",
    );
}

#[test]
fn flex_match_needs_a_defined_item() {
    let yaml = edit(RAW, "match: { udp_src: 4096, udp_dst: 4096 }", "match: { flex_item_id: 4, val: 1, mask: 255 }");
    let yaml = edit(&yaml, "match: { udp_dst: \"5000-5010\" }", "match: { flex_item_id: 1, val: 2 }");
    let yaml = edit(
        &yaml,
        "flow_isolation: true",
        "flow_isolation: true\n        flex_items:\n        - { name: fx, id: 1, offset: 8, udp_dst_port: 4791 }",
    );
    assert_error(
        &yaml,
        &format!("{IF1}.rx.flows[0].match.flex_item_id"),
        "flex item 4 is not defined in rx.flex_items; valid: 1",
    );
}

#[test]
fn flex_item_offset_rule() {
    let yaml = edit(
        RAW,
        "flow_isolation: true",
        "flow_isolation: true\n        flex_items:\n        - { name: fx, id: 1, offset: 6, udp_dst_port: 4791 }",
    );
    assert_error(&yaml, &format!("{IF1}.rx.flex_items[0].offset"), "multiple of 4 below 28");
    let yaml = edit(
        RAW,
        "flow_isolation: true",
        "flow_isolation: true\n        flex_items:\n        - { name: fx, id: 1, offset: 28, udp_dst_port: 4791 }",
    );
    assert_error(&yaml, &format!("{IF1}.rx.flex_items[0].offset"), "multiple of 4 below 28");
}

#[test]
fn flex_flows_cannot_use_transforms() {
    let yaml = edit(
        RAW,
        "action: { type: queue, id: 0 }\n          match: { udp_src: 4096, udp_dst: 4096 }",
        "actions: [{ type: vlan_pop }, { type: queue, id: 0 }]\n          match: { flex_item_id: 1, val: 1 }",
    );
    let yaml = edit(&yaml, "match: { udp_dst: \"5000-5010\" }", "match: { flex_item_id: 1, val: 2 }");
    let yaml = edit(
        &yaml,
        "flow_isolation: true",
        "flow_isolation: true\n        flex_items:\n        - { name: fx, id: 1, offset: 8, udp_dst_port: 4791 }",
    );
    assert_error(&yaml, &format!("{IF1}.rx.flows[0].actions"), "cannot use VLAN or tunnel transforms");
}

#[test]
fn ecpri_id_needs_msg_type_and_no_rss() {
    let yaml = edit(RAW, "match: { udp_src: 4096, udp_dst: 4096 }", "match: { ecpri: { pc_id: 7 } }");
    let yaml = edit(
        &yaml,
        "action: { type: queue, id: 1 }\n          match: { udp_dst: \"5000-5010\" }",
        "action: { type: queue, ids: [0, 1] }\n          match: { ecpri: { msg_type: 2, rtc_id: 1 } }",
    );
    assert_error(&yaml, &format!("{IF1}.rx.flows[0].match.ecpri.msg_type"), "needs msg_type");
    assert_error(&yaml, &format!("{IF1}.rx.flows[1]"), "cannot use multi-queue RSS");
}

#[test]
fn reorder_output_region_must_exist_and_fit_the_type() {
    assert_error(
        &edit(RAW, "memory_region: out_gpu", "memory_region: nowhere"),
        &format!("{IF1}.rx.reorder_configs[0].memory_region"),
        "\"nowhere\" is not defined",
    );
    assert_error(
        &edit(RAW, "memory_region: out_gpu", "memory_region: rx_cpu"),
        &format!("{IF1}.rx.reorder_configs[0].memory_region"),
        "gpu needs device or host_pinned memory",
    );
}

#[test]
fn cpu_reorder_needs_cpu_memory() {
    let yaml = edit(RAW, "reorder_type: gpu", "reorder_type: cpu");
    assert_error(
        &yaml,
        &format!("{IF1}.rx.reorder_configs[0].memory_region"),
        "cpu needs host, host_pinned or huge memory",
    );
    assert_error(
        &yaml,
        &format!("{IF1}.rx.reorder_configs[0].flow_ids[0]"),
        "lands in region \"rx_gpu\" of kind device",
    );
}

#[test]
fn reorder_flows_must_exist_and_not_overlap() {
    assert_error(
        &edit(RAW, "flow_ids: [10]", "flow_ids: [99]"),
        &format!("{IF1}.rx.reorder_configs[0].flow_ids[0]"),
        "flow 99 is not defined in rx.flows; valid: 10, 11",
    );
    let two = edit(
        RAW,
        "    - name: r0\n",
        "    - name: r1\n          reorder_type: gpu\n          memory_region: out_gpu\n          flow_ids: [10]\n          method: { seq_packets_per_batch: { sequence_number: { bit_offset: 0, bit_width: 8 }, packets_per_batch: 16 } }\n        - name: r0\n",
    );
    assert_error(&two, &format!("{IF1}.rx.reorder_configs[1].flow_ids[0]"), "already reordered by");
}

#[test]
fn reorder_flow_steers_to_one_single_region_queue() {
    assert_error(
        &edit(RAW, "flow_ids: [10]", "flow_ids: [11]"),
        &format!("{IF1}.rx.reorder_configs[0].flow_ids[0]"),
        "exactly one source region",
    );
    let rss = edit(RAW, "action: { type: queue, id: 0 }", "action: { type: queue, ids: [0, 1] }");
    assert_error(&rss, &format!("{IF1}.rx.reorder_configs[0].flow_ids[0]"), "steers to 2 queues");
}

/// Upstream's precondition: a reordered flow's queue is read by its worker.
#[test]
fn a_reordered_flow_is_not_on_a_directly_polled_queue() {
    let plan = "- { name: q0, id: 0, poll_mode: direct, batch_size: 32, memory_regions: [rx] }\n        flows:\n        - { name: f, id: 5, action: { type: queue, id: 0 }, match: { udp_src: 4000 } }\n        reorder_configs:\n        - { name: r, reorder_type: cpu, memory_region: out, flow_ids: [5], payload_byte_offset: 0, method: { seq_packets_per_batch: { sequence_number: { bit_offset: 0, bit_width: 16 }, packets_per_batch: 8 } } }";
    let yaml = edit(SOCKET, "- { name: q0, id: 0, cpu_core: 1, batch_size: 32, memory_regions: [rx] }", plan);
    let yaml = edit(
        &yaml,
        "    interfaces:",
        "    - { name: out, kind: host, num_bufs: 16, buf_size: 65536 }\n    interfaces:",
    );
    assert_error(&yaml, "daqiri.cfg.interfaces[0].rx.reorder_configs[0].flow_ids[0]", "polled directly");
    let worker = yaml.replace("poll_mode: direct, ", "cpu_core: 1, ");
    let found = findings_at(&worker, Strictness::Strict);
    assert!(found.iter().all(|d| d.severity != Severity::Error), "{found:?}");
}

#[test]
fn reorder_method_is_exactly_one() {
    let both = edit(
        RAW,
        "            seq_packets_per_batch:",
        "            seq_batch_number: { sequence_number: { bit_offset: 0, bit_width: 16 }, batch_number: { bit_offset: 16, bit_width: 8 } }\n            seq_packets_per_batch:",
    );
    assert_error(&both, &format!("{IF1}.rx.reorder_configs[0].method"), "exactly one method");
}

#[test]
fn reorder_bit_widths_and_divisibility() {
    let at = format!("{IF1}.rx.reorder_configs[0].method.seq_packets_per_batch");
    assert_error(
        &edit(RAW, "bit_width: 32 }", "bit_width: 33 }"),
        &format!("{at}.sequence_number.bit_width"),
        "valid: 1..32",
    );
    assert_error(
        &edit(RAW, "packets_per_batch: 1024", "packets_per_batch: 1000"),
        &format!("{at}.packets_per_batch"),
        "does not divide 2^32",
    );
    assert_error(
        &edit(RAW, "packets_per_batch: 1024", "packets_per_batch: 0"),
        &format!("{at}.packets_per_batch"),
        "at least 1",
    );
    let sbn = edit(
        RAW,
        "            seq_packets_per_batch:\n              sequence_number: { bit_offset: 0, bit_width: 32 }\n              packets_per_batch: 1024",
        "            seq_batch_number: { sequence_number: { bit_offset: 0, bit_width: 8 }, batch_number: { bit_offset: 8, bit_width: 12 } }",
    );
    assert_error(
        &sbn,
        &format!("{IF1}.rx.reorder_configs[0].method.seq_batch_number.batch_number.bit_width"),
        "not divisible",
    );
}

#[test]
fn cpu_reorder_converts_data_types_and_names_aliases() {
    // DAQIRI converts on the GPU only; our CPU plans convert too, and take DAQIRI's alias keys.
    let yaml = edit(
        &edit(RAW, "memory_regions: [rx_gpu] }", "memory_regions: [rx_cpu] }"),
        "reorder_type: gpu\n          memory_region: out_gpu",
        "reorder_type: cpu\n          memory_region: rx_cpu\n          data_types: { input: int4, output: fp16, input_endianness: network }",
    );
    let found = diagnostics(&yaml);
    assert!(found.iter().all(|d| !d.path.to_string().contains("reorder_configs")), "cpu data_types refused: {found:?}");
}

#[test]
fn reorder_packets_per_batch_fit_the_queue_batch() {
    let yaml = edit(RAW, "packets_per_batch: 1024", "packets_per_batch: 2048");
    assert_error(&yaml, &format!("{IF1}.rx.reorder_configs[0].flow_ids[0]"), "raise batch_size to at least 2048");
}

#[test]
fn reorder_needs_flows_tcp_has_none() {
    let yaml = SOCKET.replace("udp://", "tcp://")
        + "        reorder_configs:\n        - { name: r, reorder_type: cpu, memory_region: rx, flow_ids: [1], method: { seq_packets_per_batch: { sequence_number: { bit_offset: 0, bit_width: 8 }, packets_per_batch: 4 } } }\n";
    assert_error(&yaml, "daqiri.cfg.interfaces[0].rx.reorder_configs", "raw interfaces and UDP sockets");
}

#[test]
fn reorder_output_too_small_is_a_warning() {
    let yaml = edit(
        RAW,
        "{ name: rx_gpu, kind: device, num_bufs: 51200, buf_size: 1000 }",
        "{ name: rx_gpu, kind: device, num_bufs: 51200, buf_size: 8000 }",
    );
    assert_warning(&yaml, "daqiri.cfg.memory_regions[2].buf_size", "may not hold one batch");
}

#[test]
fn gpu_plan_queue_pool_too_small_to_hold_batches_is_a_warning() {
    // Software loopback: DAQIRI's raise of small raw pools does not apply.
    let yaml = edit(
        &edit(RAW, "version: 1", "version: 1\n    loopback: sw"),
        "{ name: rx_gpu, kind: device, num_bufs: 51200, buf_size: 1000 }",
        "{ name: rx_gpu, kind: device, num_bufs: 3000, buf_size: 1000 }",
    );
    assert_warning(&yaml, "daqiri.cfg.memory_regions[1].num_bufs", "= 3072; receive would run out");
    // Without it, the raised pool (24576) holds the batches.
    let yaml = edit(RAW, "num_bufs: 51200, buf_size: 1000 }", "num_bufs: 3000, buf_size: 1000 }");
    assert!(diagnostics(&yaml).iter().all(|d| !d.message.contains("GPU plans")));
}

#[test]
fn socket_server_needs_local_addr() {
    assert_error(
        &edit(
            SOCKET,
            "socket_config: { mode: server, local_addr: \"udp://127.0.0.1:5001\" }",
            "socket_config: { mode: server, remote_addr: \"udp://127.0.0.1:5001\" }",
        ),
        "daqiri.cfg.interfaces[0].socket_config.local_addr",
        "server mode needs local_addr",
    );
}

#[test]
fn socket_client_needs_remote_addr() {
    assert_error(
        &edit(SOCKET, "mode: server", "mode: client"),
        "daqiri.cfg.interfaces[0].socket_config.remote_addr",
        "udp client mode needs remote_addr",
    );
}

#[test]
fn socket_uris_are_parsed() {
    assert_error(
        &edit(SOCKET, "udp://127.0.0.1:5001", "http://127.0.0.1:5001"),
        "daqiri.cfg.interfaces[0].socket_config.local_addr",
        "unknown scheme \"http\"",
    );
    assert_error(
        &edit(SOCKET, "udp://127.0.0.1:5001", "udp://127.0.0.1"),
        "daqiri.cfg.interfaces[0].socket_config.local_addr",
        "need a port",
    );
}

#[test]
fn socket_schemes_must_agree() {
    let yaml = edit(
        SOCKET,
        "local_addr: \"udp://127.0.0.1:5001\"",
        "local_addr: \"udp://127.0.0.1:5001\", remote_addr: \"tcp://127.0.0.1:6000\"",
    );
    assert_error(&yaml, "daqiri.cfg.interfaces[0].socket_config.remote_addr", "does not match local_addr's udp");
}

#[test]
fn legacy_socket_fields_need_an_engine() {
    let legacy = edit(SOCKET, "local_addr: \"udp://127.0.0.1:5001\"", "local_ip: 127.0.0.1, local_port: 5001");
    assert_error(&legacy, "daqiri.cfg.interfaces[0].socket_config.local_ip", "need `engine`");
    assert!(
        Document::parse(&edit(&legacy, "stream_type: socket", "stream_type: socket\n    engine: socket"))
            .unwrap()
            .validate()
            .is_ok()
    );
    let both =
        edit(SOCKET, "local_addr: \"udp://127.0.0.1:5001\"", "local_addr: \"udp://127.0.0.1:5001\", local_port: 5001");
    assert_error(&both, "daqiri.cfg.interfaces[0].socket_config.local_addr", "not both");
}

#[test]
fn socket_interfaces_need_socket_config() {
    assert_error(
        &edit(SOCKET, "      socket_config: { mode: server, local_addr: \"udp://127.0.0.1:5001\" }\n", ""),
        "daqiri.cfg.interfaces[0].socket_config",
        "need socket_config",
    );
}

#[test]
fn raw_interfaces_reject_socket_config() {
    let yaml = edit(
        RAW,
        "address: 0000:3b:00.1",
        "address: 0000:3b:00.1\n      socket_config: { mode: server, local_addr: \"udp://1.2.3.4:5\" }",
    );
    assert_error(&yaml, &format!("{IF1}.socket_config"), "applies to stream_type: socket");
}

#[test]
fn tcp_streams_have_no_flows() {
    let yaml = edit(
        &edit(SOCKET, "udp://", "tcp://"),
        "memory_regions: [rx] }",
        "memory_regions: [rx] }\n        flows:\n        - { name: f, id: 1, action: { type: queue, id: 0 }, match: { udp_dst: 1 } }",
    );
    assert_error(&yaml, "daqiri.cfg.interfaces[0].rx.flows", "TCP streams carry no datagrams");
}

#[test]
fn roce_config_needs_roce_endpoints() {
    assert_error(
        &edit(SOCKET, "address: 127.0.0.1", "address: 127.0.0.1\n      roce_config: { transport_mode: RC }"),
        "daqiri.cfg.interfaces[0].roce_config",
        "only to interfaces with roce://",
    );
}

/// `SOCKET` made a RoCE ingest port whose sender is 10.0.0.2's queue pair 17.
fn ingest(local_addr: &str) -> String {
    let roce = edit(SOCKET, r#"local_addr: "udp://127.0.0.1:5001""#, &format!(r#"local_addr: "{local_addr}""#));
    edit(
        &roce,
        "address: 127.0.0.1",
        "address: 127.0.0.1\n      roce_config: { transport_mode: UC, ingest: { peer_ip: 10.0.0.2, peer_qpn: 17 } }",
    )
}

#[test]
fn a_roce_ingest_port_receives_from_its_sender_only() {
    let valid = Document::parse(&ingest("roce://127.0.0.1")).unwrap().validate().expect("an ingest port");
    let ring = valid.config().interfaces[0].roce_config.as_ref().unwrap().ingest.clone().unwrap();
    assert_eq!((ring.peer_qpn, ring.peer_psn, ring.mtu), (17, 0, 1024), "defaults: PSN 0, MTU 1024");
    let at = "daqiri.cfg.interfaces[0]";
    assert_error(&ingest("roce://127.0.0.1:4791"), &format!("{at}.socket_config.local_addr"), "not to a port");
    let mtu = edit(&ingest("roce://127.0.0.1"), "peer_qpn: 17", "peer_qpn: 17, mtu: 1500");
    assert_error(&mtu, &format!("{at}.roce_config.ingest.mtu"), "valid: 256, 512, 1024, 2048, 4096");
    let client = edit(&ingest("roce://127.0.0.1"), "mode: server", "mode: client");
    assert_error(&client, &format!("{at}.socket_config.mode"), "waits for its sender");
    let tx = edit(
        &ingest("roce://127.0.0.1"),
        "      rx:\n",
        "      tx:\n        queues:\n        - { name: t, id: 0, cpu_core: 1, batch_size: 1, memory_regions: [rx] }\n      rx:\n",
    );
    assert_error(&tx, &format!("{at}.tx"), "only receives");
}

#[test]
fn raw_only_features_are_rejected_on_sockets() {
    let yaml = edit(SOCKET, "      rx:\n", "      rx:\n        hardware_timestamps: true\n");
    assert_error(&yaml, "daqiri.cfg.interfaces[0].rx.hardware_timestamps", "only for raw streams");
    let yaml = edit(
        SOCKET,
        "      rx:\n",
        "      rx:\n        flex_items: [{ name: x, id: 1, offset: 0, udp_dst_port: 1 }]\n",
    );
    assert_error(&yaml, "daqiri.cfg.interfaces[0].rx.flex_items", "only for raw streams");
}

#[test]
fn flow_isolation_without_flows_is_a_warning() {
    assert_warning(
        &edit(SOCKET, "      rx:\n", "      rx:\n        flow_isolation: true\n"),
        "daqiri.cfg.interfaces[0].rx.flow_isolation",
        "no packet reaches a queue",
    );
}

#[test]
fn worker_on_master_core_is_a_warning() {
    assert_warning(
        &edit(RAW, "{ name: tx0, id: 0, cpu_core: 1", "{ name: tx0, id: 0, cpu_core: 0"),
        "daqiri.cfg.interfaces[0].tx.queues[0].cpu_core",
        "also master_core",
    );
}

#[test]
fn socket_ipv4_len_must_fit_udp() {
    let yaml = edit(
        SOCKET,
        "memory_regions: [rx] }",
        "memory_regions: [rx] }\n        flows:\n        - { name: f, id: 1, action: { type: queue, id: 0 }, match: { ipv4_len: 10 } }",
    );
    assert_error(&yaml, "daqiri.cfg.interfaces[0].rx.flows[0].match.ipv4_len", "at least 28 bytes");
}

/// `match.ipv4_src` / `ipv4_dst` as upstream has them: dotted IPv4, UDP/IP
/// keys beside the ports (so `match.ethernet` qualifies them and TX flows
/// take them); anything else is an error at the key.
#[test]
fn ipv4_addresses_are_dotted_udp_ip_keys() {
    let with_match = |m: &str| {
        edit(
            SOCKET,
            "memory_regions: [rx] }",
            &format!(
                "memory_regions: [rx] }}\n        flows:\n        - {{ name: f, id: 1, action: {{ type: queue, id: 0 }}, match: {m} }}"
            ),
        )
    };
    let path = "daqiri.cfg.interfaces[0].rx.flows[0].match";
    for bad in ["{ ipv4_src: 10.0.0.300 }", "{ ipv4_src: \"fe80::1\" }", "{ ipv4_dst: 167772161 }"] {
        let found = findings_at(&with_match(bad), Strictness::Strict);
        let key = if bad.contains("src") { "ipv4_src" } else { "ipv4_dst" };
        assert!(
            found.iter().any(|d| d.severity == Severity::Error && d.path == format!("{path}.{key}")),
            "{bad}: {found:?}"
        );
    }
    let good =
        findings_at(&with_match("{ ipv4_src: 10.0.0.1, ipv4_dst: 127.0.0.1, udp_dst: 5001 }"), Strictness::Strict);
    assert!(good.iter().all(|d| d.severity != Severity::Error), "{good:?}");
    // Raw: qualified by Ethernet addresses.
    let raw = edit(
        RAW,
        "match: { udp_src: 4096, udp_dst: 4096 }",
        "match: { ipv4_src: 10.1.0.1, ethernet: { src: \"02:00:00:00:00:01\" } }",
    );
    let found = findings_at(&raw, Strictness::Strict);
    assert!(found.iter().all(|d| d.severity != Severity::Error), "{found:?}");
}

#[test]
fn engine_af_xdp_drives_raw_interfaces_by_netdev_name() {
    let af_xdp = edit(RAW, "    stream_type: raw\n", "    stream_type: raw\n    engine: af_xdp\n")
        .replace("address: 0000:3b:00.0", "address: veth0")
        .replace("address: 0000:3b:00.1", "address: ens1f0v3");
    let valid = Document::parse(&af_xdp).unwrap().validate().expect("af_xdp raw config");
    assert_eq!(valid.backend(1), InterfaceBackend::AfXdp);
    assert_eq!(valid.link(1), &Link::AfXdp { netdev: "ens1f0v3".into() });
    // The engine alone implies a raw stream.
    let implied = af_xdp.replace("    stream_type: raw\n", "");
    assert_eq!(Document::parse(&implied).unwrap().validate().unwrap().backend(0), InterfaceBackend::AfXdp);

    let pci = af_xdp.replace("address: veth0", "address: 0000:3b:00.0");
    assert_error(&pci, "daqiri.cfg.interfaces[0].address", "netdev name");
    let long = af_xdp.replace("address: veth0", "address: a-very-long-netdev-name");
    assert_error(&long, "daqiri.cfg.interfaces[0].address", "longer than the 15 bytes");
    // A device plugin's resource, as the operator renders it: the gateway
    // pod resolves it to its netdev before validating; unresolved it passes.
    let resource = af_xdp.replace("address: veth0", "address: \"k8s-resource:nvidia.com/cx7_vf#1\"");
    Document::parse(&resource).unwrap().validate().expect("a device plugin's resource, unresolved");
    let socket = edit(SOCKET, "    stream_type: socket\n", "    stream_type: socket\n    engine: af_xdp\n");
    assert_error(&socket, "daqiri.cfg.engine", "engine \"af_xdp\" cannot drive stream_type socket");
}

#[test]
fn sizes_have_upper_bounds_named_in_the_message() {
    assert_error(
        &edit(SOCKET, "batch_size: 32", "batch_size: 4294967295"),
        "daqiri.cfg.interfaces[0].rx.queues[0].batch_size",
        "4294967295 is too large; at most 65536",
    );
    assert_error(
        &edit(SOCKET, "num_bufs: 4096", "num_bufs: 4000000000"),
        "daqiri.cfg.memory_regions[0].num_bufs",
        "at most 67108864",
    );
    assert_error(
        &edit(SOCKET, "buf_size: 2048", "buf_size: 1099511627776"),
        "daqiri.cfg.memory_regions[0].buf_size",
        "at most 1073741824",
    );
    assert_error(
        &edit(SOCKET, "version: 1", "version: 1\n    rx_meta_buffers: 100000000"),
        "daqiri.cfg.rx_meta_buffers",
        "at most 65536",
    );
    assert_error(
        &edit(SOCKET, "batch_size: 32,", "batch_size: 32, timeout_us: 18446744073709551615,"),
        "daqiri.cfg.interfaces[0].rx.queues[0].timeout_us",
        "at most 60000000",
    );
    assert_error(
        &edit(SOCKET, "udp://127.0.0.1:5001\" }", "udp://127.0.0.1:5001\", max_payload_size: 4294967295 }"),
        "daqiri.cfg.interfaces[0].socket_config.max_payload_size",
        "at most 67108864",
    );
}

#[test]
fn a_source_buffer_beyond_its_bound_is_reported_not_overflowed_by_the_reorder_check() {
    // Found by the config fuzz target: the batch-size check multiplied first.
    let yaml = edit(
        RAW,
        "{ name: rx_gpu, kind: device, num_bufs: 51200, buf_size: 1000 }",
        "{ name: rx_gpu, kind: device, num_bufs: 51200, buf_size: 20488888888888888 }",
    );
    assert_error(&yaml, "daqiri.cfg.memory_regions[1].buf_size", "at most 1073741824");
}

#[test]
fn names_are_bounded_for_they_become_metric_labels() {
    let long = "q".repeat(300);
    assert_error(
        &edit(SOCKET, "name: q0,", &format!("name: {long},")),
        "daqiri.cfg.interfaces[0].rx.queues[0].name",
        "a name of 300 bytes; at most 256",
    );
}

#[test]
fn names_are_not_empty_for_they_identify_what_they_name() {
    assert_error(
        &edit(SOCKET, "name: q0,", "name: \"\","),
        "daqiri.cfg.interfaces[0].rx.queues[0].name",
        "an empty name",
    );
    assert_error(
        &edit(RAW, "- name: f0", "- name: \" \""),
        "daqiri.cfg.interfaces[1].rx.flows[0].name",
        "an empty name",
    );
}

#[test]
fn regions_together_are_bounded() {
    // 36 TiB: each region within its own bounds, the sum not.
    let huge = "- { name: rx, kind: host, num_bufs: 40000000, buf_size: 1000000000 }";
    assert_error(
        &edit(SOCKET, "- { name: rx, kind: host, num_bufs: 4096, buf_size: 2048 }", huge),
        "daqiri.cfg.memory_regions",
        "at most 1.0 TiB",
    );
}

#[test]
fn servers_need_a_port_other_than_0() {
    assert_error(
        &edit(SOCKET, "udp://127.0.0.1:5001", "udp://127.0.0.1:0"),
        "daqiri.cfg.interfaces[0].socket_config.local_addr",
        "port 0 binds a port the kernel picks",
    );
}
