//! `k8s-resource:` interface addresses: a Kubernetes device plugin's resource
//! (`k8s-resource:nvidia.com/cx7_vf`, `#1` for the pod's second device of it),
//! which the operator renders and the gateway pod resolves on its node (to a
//! PCIe address or a netdev) before it validates. Anywhere else (the
//! operator, `check` off the node) the address is checked unresolved.

/// The prefix of such an address.
pub const PREFIX: &str = "k8s-resource:";

/// Whether `address` names a device plugin's resource.
pub fn is_device_resource(address: &str) -> bool {
    address.trim().starts_with(PREFIX)
}
