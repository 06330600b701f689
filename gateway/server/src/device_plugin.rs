//! Interface addresses handed out by a Kubernetes device plugin.
//!
//! The operator renders a `DaqiriPort` whose device is an SR-IOV resource
//! (`nvidia.com/cx7_vf`) as `address: "k8s-resource:nvidia.com/cx7_vf"`
//! (`#N` picks the N-th device of that resource). Which VF the pod got is
//! only known on the node: the SR-IOV network device plugin sets
//! `PCIDEVICE_NVIDIA_COM_CX7_VF=0000:3b:02.1,...` in the container and
//! writes a device-info file per device
//! (`/var/run/k8s.cni.cncf.io/devinfo/dp/<resource>-<pci>-device.json`,
//! the resource's `/` as `-`). The gateway resolves the address to the PCIe
//! address before validating the config; for `engine: af_xdp`, which opens
//! a netdev, on to the VF's netdev name (`/sys/bus/pci/devices/<pci>/net/`).
//! A plugin that hands out netdevs rather than PCIe functions (a device id
//! that is no PCIe address but a netdev in `/sys/class/net`) serves
//! `engine: af_xdp` only.

use std::path::Path;

use daqiri_config::device_resource::{PREFIX, is_device_resource};
use daqiri_config::model::EngineKind;
use daqiri_config::{Document, Report, YamlPath};

/// Where the device plugin writes device-info files.
pub(crate) const DEVICE_INFO_DIR: &str = "/var/run/k8s.cni.cncf.io/devinfo/dp";

/// Where the kernel lists PCIe devices (`bus/pci/devices/<pci>/net/`) and
/// netdevs (`class/net/<name>`).
pub(crate) const SYSFS: &str = "/sys";

/// Whether `id` is written as a PCIe address (`[dddd:]bb:dd.f`, hex).
fn is_pci_address(id: &str) -> bool {
    let hex = |s: &str, len: usize| s.len() == len && s.chars().all(|c| c.is_ascii_hexdigit());
    let Some((slot, function)) = id.rsplit_once('.') else { return false };
    if !matches!(function.as_bytes(), [b'0'..=b'7']) {
        return false;
    }
    match slot.split(':').collect::<Vec<_>>().as_slice() {
        [domain, bus, device] => hex(domain, 4) && hex(bus, 2) && hex(device, 2),
        [bus, device] => hex(bus, 2) && hex(device, 2),
        _ => false,
    }
}

/// The netdev a device id names for `engine: af_xdp`: a PCIe function's
/// own netdev, or the id itself when the plugin hands out netdevs.
fn netdev_for(id: &str, sysfs: &Path) -> Result<String, String> {
    if is_pci_address(id) {
        netdev_of(id, sysfs)
    } else if sysfs.join("class/net").join(id).exists() {
        Ok(id.to_owned())
    } else {
        Err(format!("{id} is neither a PCIe address nor a netdev of this network namespace"))
    }
}

/// The PCIe function a device id names for `engine: dpdk`.
fn pci_for(id: &str) -> Result<String, String> {
    if is_pci_address(id) {
        Ok(id.to_owned())
    } else {
        Err(format!(
            "{id} is not a PCIe address: the device plugin hands out netdevs, which engine dpdk cannot drive (engine af_xdp can)"
        ))
    }
}

/// The netdev of PCIe function `pci` (under `sysfs`).
fn netdev_of(pci: &str, sysfs: &Path) -> Result<String, String> {
    let dir = sysfs.join("bus/pci/devices").join(pci).join("net");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| {
            format!(
                "{pci} has no netdev ({}: {e}); engine af_xdp needs the VF bound to its kernel driver, not vfio-pci",
                dir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    match names.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!("{pci} has no netdev in {}", dir.display())),
        many => Err(format!("{pci} has several netdevs ({}); give the netdev name as the address", many.join(", "))),
    }
}

/// The variable the device plugin sets for `resource`: `PCIDEVICE_` and the
/// name upper-cased, `.` and `/` as `_`.
pub(crate) fn env_var(resource: &str) -> String {
    let name: String =
        resource.chars().map(|c| if matches!(c, '.' | '/') { '_' } else { c.to_ascii_uppercase() }).collect();
    format!("PCIDEVICE_{name}")
}

/// Resolves `k8s-resource:<name>[#index]` to a PCIe address.
pub(crate) fn resolve(
    address: &str,
    env: impl Fn(&str) -> Option<String>,
    device_info_dir: &Path,
) -> Result<String, String> {
    let spec = address.strip_prefix(PREFIX).ok_or_else(|| format!("\"{address}\" is not a {PREFIX} address"))?;
    let (resource, index) = match spec.split_once('#') {
        Some((resource, index)) => {
            let index =
                index.parse::<usize>().map_err(|_| format!("\"{index}\" after # is not a device index (0, 1, ...)"))?;
            (resource, index)
        }
        None => (spec, 0),
    };
    let var = env_var(resource);
    let value = env(&var).ok_or_else(|| {
        format!(
            "{var} is not set: the pod has no {resource} device (request the resource in the pod spec; the SR-IOV device plugin sets {var})"
        )
    })?;
    let devices: Vec<&str> = value.split(',').map(str::trim).filter(|d| !d.is_empty()).collect();
    let pci = devices
        .get(index)
        .ok_or_else(|| format!("{var}={value} has {} device(s); index {index} does not exist", devices.len()))?;
    check_device_info(resource, pci, device_info_dir)?;
    Ok((*pci).to_owned())
}

/// When the plugin wrote a device-info file for the device, it must agree.
fn check_device_info(resource: &str, pci: &str, dir: &Path) -> Result<(), String> {
    let file = dir.join(format!("{}-{pci}-device.json", resource.replace('/', "-")));
    let Ok(text) = std::fs::read_to_string(&file) else {
        return Ok(()); // older plugins write none; the variable is authoritative
    };
    let info: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", file.display()))?;
    match info["pci"]["pci-address"].as_str() {
        Some(found) if found == pci => Ok(()),
        Some(found) => Err(format!("{} names {found}, but the environment gave {pci}", file.display())),
        None => Err(format!("{} has no pci.pci-address", file.display())),
    }
}

/// Replaces every `k8s-resource:` interface address in `doc`; each failure
/// is an error at that interface's `address`.
pub(crate) fn resolve_document(
    doc: &mut Document,
    env: impl Fn(&str) -> Option<String>,
    dir: &Path,
    sysfs: &Path,
) -> Result<(), Report> {
    let mut report = Report::default();
    let wants_netdev = doc.config.engine == Some(EngineKind::AfXdp);
    for (i, iface) in doc.config.interfaces.iter_mut().enumerate() {
        if is_device_resource(&iface.address) {
            let resolved = resolve(&iface.address, &env, dir)
                .and_then(|id| if wants_netdev { netdev_for(&id, sysfs) } else { pci_for(&id) });
            match resolved {
                Ok(address) => iface.address = address,
                Err(message) => {
                    report.error(&YamlPath::cfg().key("interfaces").index(i).key("address"), message);
                }
            }
        }
    }
    if report.errors().next().is_some() { Err(report) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    fn nowhere() -> &'static Path {
        Path::new("/nonexistent/devinfo")
    }

    #[test]
    fn the_variable_name_follows_the_device_plugin() {
        assert_eq!(env_var("nvidia.com/cx7_vf"), "PCIDEVICE_NVIDIA_COM_CX7_VF");
        assert_eq!(env_var("intel.com/sriov_netdevice"), "PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE");
    }

    #[test]
    fn resolves_the_first_or_the_indexed_device() {
        let env = env(&[("PCIDEVICE_NVIDIA_COM_CX7_VF", "0000:3b:02.1, 0000:3b:02.2")]);
        assert_eq!(resolve("k8s-resource:nvidia.com/cx7_vf", &env, nowhere()).unwrap(), "0000:3b:02.1");
        assert_eq!(resolve("k8s-resource:nvidia.com/cx7_vf#1", &env, nowhere()).unwrap(), "0000:3b:02.2");
        let err = resolve("k8s-resource:nvidia.com/cx7_vf#2", &env, nowhere()).unwrap_err();
        assert!(err.contains("has 2 device(s); index 2 does not exist"), "{err}");
        let err = resolve("k8s-resource:nvidia.com/cx7_vf#x", &env, nowhere()).unwrap_err();
        assert!(err.contains("not a device index"), "{err}");
    }

    #[test]
    fn a_missing_variable_is_named() {
        let err = resolve("k8s-resource:nvidia.com/cx7_vf", env(&[]), nowhere()).unwrap_err();
        assert!(err.starts_with("PCIDEVICE_NVIDIA_COM_CX7_VF is not set"), "{err}");
        assert!(err.contains("request the resource"), "{err}");
    }

    #[test]
    fn device_info_files_must_agree_with_the_environment() {
        let dir = std::env::temp_dir().join(format!("daqiri-devinfo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let env = env(&[("PCIDEVICE_NVIDIA_COM_CX7_VF", "0000:3b:02.1")]);
        let file = dir.join("nvidia.com-cx7_vf-0000:3b:02.1-device.json");
        std::fs::write(&file, r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:02.1"}}"#).unwrap();
        assert_eq!(resolve("k8s-resource:nvidia.com/cx7_vf", &env, &dir).unwrap(), "0000:3b:02.1");
        std::fs::write(&file, r#"{"type":"pci","pci":{"pci-address":"0000:3b:02.7"}}"#).unwrap();
        let err = resolve("k8s-resource:nvidia.com/cx7_vf", &env, &dir).unwrap_err();
        assert!(err.contains("names 0000:3b:02.7, but the environment gave 0000:3b:02.1"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_document_is_resolved_or_reports_the_interface_address() {
        let yaml = "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    engine: dpdk\n    memory_regions:\n    - { name: m, kind: huge, num_bufs: 64, buf_size: 2048 }\n    interfaces:\n    - name: vf\n      address: \"k8s-resource:nvidia.com/cx7_vf\"\n      rx: { queues: [{ name: r, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [m] }] }\n";
        let mut doc = Document::parse(yaml).unwrap();
        let report = resolve_document(&mut doc.clone(), env(&[]), nowhere(), nowhere()).unwrap_err();
        let error = report.errors().next().unwrap();
        assert_eq!(error.path, "daqiri.cfg.interfaces[0].address");
        assert!(error.message.contains("PCIDEVICE_NVIDIA_COM_CX7_VF"));
        let vf = env(&[("PCIDEVICE_NVIDIA_COM_CX7_VF", "0000:3b:02.1")]);
        resolve_document(&mut doc, vf, nowhere(), nowhere()).unwrap();
        assert_eq!(doc.config.interfaces[0].address, "0000:3b:02.1");
    }

    const AF_XDP: &str = "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    engine: af_xdp\n    memory_regions:\n    - { name: m, kind: host, num_bufs: 64, buf_size: 2048 }\n    interfaces:\n    - name: vf\n      address: \"k8s-resource:nvidia.com/cx7_vf\"\n      rx: { queues: [{ name: r, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [m] }] }\n";

    /// A sysfs of one VF with its netdev, one bound to vfio-pci, and a veth.
    fn sysfs(tag: &str) -> std::path::PathBuf {
        let sysfs = std::env::temp_dir().join(format!("daqiri-sysfs-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(sysfs.join("bus/pci/devices/0000:3b:02.1/net/ens1f0v1")).unwrap();
        std::fs::create_dir_all(sysfs.join("bus/pci/devices/0000:3b:02.2")).unwrap();
        std::fs::create_dir_all(sysfs.join("class/net/dqvf-a0")).unwrap();
        sysfs
    }

    fn resolved(yaml: &str, device: &str, sysfs: &Path) -> Result<String, String> {
        let mut doc = Document::parse(yaml).unwrap();
        match resolve_document(&mut doc, env(&[("PCIDEVICE_NVIDIA_COM_CX7_VF", device)]), nowhere(), sysfs) {
            Ok(()) => Ok(doc.config.interfaces[0].address.clone()),
            Err(report) => Err(report.errors().next().unwrap().message.clone()),
        }
    }

    /// AF_XDP opens a netdev: the VF's PCIe address goes on to its netdev.
    #[test]
    fn an_af_xdp_interface_gets_the_vfs_netdev_or_says_why_not() {
        let sysfs = sysfs("vf");
        assert_eq!(resolved(AF_XDP, "0000:3b:02.1", &sysfs).unwrap(), "ens1f0v1");
        let error = resolved(AF_XDP, "0000:3b:02.2", &sysfs).unwrap_err();
        assert!(error.contains("0000:3b:02.2 has no netdev") && error.contains("vfio-pci"), "{error}");
        std::fs::remove_dir_all(&sysfs).unwrap();
    }

    /// A plugin that hands out netdevs (tests/k8s's veth plugin) serves
    /// AF_XDP as they are; DPDK, which drives PCIe functions, refuses them.
    #[test]
    fn a_netdev_a_plugin_hands_out_serves_af_xdp_and_not_dpdk() {
        let sysfs = sysfs("netdev");
        assert_eq!(resolved(AF_XDP, "dqvf-a0", &sysfs).unwrap(), "dqvf-a0");
        let error = resolved(AF_XDP, "dqvf-zz", &sysfs).unwrap_err();
        assert!(error.contains("dqvf-zz is neither a PCIe address nor a netdev"), "{error}");
        let dpdk = AF_XDP.replace("engine: af_xdp", "engine: dpdk").replace("kind: host", "kind: huge");
        let error = resolved(&dpdk, "dqvf-a0", &sysfs).unwrap_err();
        assert!(error.contains("dqvf-a0 is not a PCIe address") && error.contains("engine af_xdp can"), "{error}");
        assert_eq!(resolved(&dpdk, "3b:02.1", &sysfs).unwrap(), "3b:02.1");
        std::fs::remove_dir_all(&sysfs).unwrap();
    }

    #[test]
    fn pci_addresses_are_told_from_netdev_names() {
        for pci in ["0000:3b:02.1", "3b:02.7", "ABCD:ff:1f.0"] {
            assert!(is_pci_address(pci), "{pci}");
        }
        for other in ["dqvf-a0", "ens1f0v1", "0000:3b:02.8", "3b:02", "0000:3b:2.1", "00:3b:02.1", "3b.02.1"] {
            assert!(!is_pci_address(other), "{other}");
        }
    }
}
