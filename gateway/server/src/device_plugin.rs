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

use std::path::Path;

use daqiri_config::model::EngineKind;
use daqiri_config::{Document, Report, YamlPath};

/// The address prefix that asks for resolution.
pub(crate) const PREFIX: &str = "k8s-resource:";

/// Where the device plugin writes device-info files.
pub(crate) const DEVICE_INFO_DIR: &str = "/var/run/k8s.cni.cncf.io/devinfo/dp";

/// Where the kernel lists PCIe devices, each with its netdevs under `net/`.
pub(crate) const PCI_DEVICES_DIR: &str = "/sys/bus/pci/devices";

/// The netdev of PCIe function `pci` (listed under `pci_devices`).
fn netdev_of(pci: &str, pci_devices: &Path) -> Result<String, String> {
    let dir = pci_devices.join(pci).join("net");
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
    pci_devices: &Path,
) -> Result<(), Report> {
    let mut report = Report::default();
    let wants_netdev = doc.config.engine == Some(EngineKind::AfXdp);
    for (i, iface) in doc.config.interfaces.iter_mut().enumerate() {
        if iface.address.starts_with(PREFIX) {
            let resolved = resolve(&iface.address, &env, dir)
                .and_then(|pci| if wants_netdev { netdev_of(&pci, pci_devices) } else { Ok(pci) });
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

    /// AF_XDP opens a netdev: the VF's PCIe address goes on to its netdev.
    #[test]
    fn an_af_xdp_interface_gets_the_vfs_netdev_or_says_why_not() {
        let yaml = "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    engine: af_xdp\n    memory_regions:\n    - { name: m, kind: host, num_bufs: 64, buf_size: 2048 }\n    interfaces:\n    - name: vf\n      address: \"k8s-resource:nvidia.com/cx7_vf\"\n      rx: { queues: [{ name: r, id: 0, cpu_core: 0, batch_size: 8, memory_regions: [m] }] }\n";
        let sysfs = std::env::temp_dir().join(format!("daqiri-pci-{}", std::process::id()));
        std::fs::create_dir_all(sysfs.join("0000:3b:02.1/net/ens1f0v1")).unwrap();
        std::fs::create_dir_all(sysfs.join("0000:3b:02.2")).unwrap();
        let mut doc = Document::parse(yaml).unwrap();
        resolve_document(&mut doc, env(&[("PCIDEVICE_NVIDIA_COM_CX7_VF", "0000:3b:02.1")]), nowhere(), &sysfs).unwrap();
        assert_eq!(doc.config.interfaces[0].address, "ens1f0v1");
        let mut doc = Document::parse(yaml).unwrap();
        let vfio = env(&[("PCIDEVICE_NVIDIA_COM_CX7_VF", "0000:3b:02.2")]);
        let report = resolve_document(&mut doc, vfio, nowhere(), &sysfs).unwrap_err();
        let error = report.errors().next().unwrap();
        assert!(
            error.message.contains("0000:3b:02.2 has no netdev") && error.message.contains("vfio-pci"),
            "{}",
            error.message
        );
        std::fs::remove_dir_all(&sysfs).unwrap();
    }
}
