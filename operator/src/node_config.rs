//! `daqiri-operator node-config`: runs beside each gateway and keeps its
//! config file equal to the node's ConfigMap (`<prefix>-<node>`, key
//! `config.yaml`). The gateway polls that file (`run --wait-for-config`), so
//! it keeps its config across restarts while the operator is away.
//!
//! A DaemonSet cannot mount a ConfigMap whose name depends on the node, and
//! one ConfigMap for all nodes would near the API's 1 MiB object limit on a
//! large cluster; hence this small watcher instead of a volume.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use crate::controller::config_maps::{KEY, name_for};

/// Where the agent reads and writes.
#[derive(Debug, Clone)]
pub struct NodeConfigAgent {
    /// Namespace of the ConfigMaps.
    pub namespace: String,
    /// The ConfigMap prefix (the operator's `--config-map`).
    pub prefix: String,
    /// This node.
    pub node: String,
    /// The file the gateway reads.
    pub out: PathBuf,
}

impl NodeConfigAgent {
    /// Follows the node's ConfigMap until the watch ends.
    pub async fn run(&self, client: kube::Client) -> anyhow::Result<()> {
        let name = name_for(&self.prefix, &self.node);
        tracing::info!(config_map = %name, out = %self.out.display(), "following the node's config");
        let api: Api<ConfigMap> = Api::namespaced(client, &self.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
        // During a (re)list, remember whether the ConfigMap was seen: absent means no config.
        let mut listed = false;
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Init) => listed = false,
                Ok(Event::InitApply(cm) | Event::Apply(cm)) => {
                    listed = true;
                    self.write(cm.data.as_ref().and_then(|d| d.get(KEY)).map(String::as_str))?;
                }
                Ok(Event::InitDone) if !listed => self.write(None)?,
                Ok(Event::InitDone) => {}
                Ok(Event::Delete(_)) => self.write(None)?,
                Err(e) => tracing::warn!("watch of {name} failed, retrying: {e}"),
            }
        }
        Ok(())
    }

    /// Writes `yaml` atomically (a temporary file renamed over the old one,
    /// so the gateway never reads half a file), or removes the file.
    fn write(&self, yaml: Option<&str>) -> anyhow::Result<()> {
        let current = std::fs::read_to_string(&self.out).ok();
        if current.as_deref() == yaml {
            return Ok(());
        }
        let Some(yaml) = yaml else {
            tracing::info!("the node has no config any more; removing {}", self.out.display());
            return match std::fs::remove_file(&self.out) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("cannot remove {}", self.out.display()))
                }
                _ => Ok(()),
            };
        };
        let dir = self.out.parent().unwrap_or(Path::new("."));
        let temp = dir.join(format!(".{}.tmp", self.out.file_name().and_then(|n| n.to_str()).unwrap_or("config")));
        std::fs::write(&temp, yaml).with_context(|| format!("cannot write {}", temp.display()))?;
        std::fs::rename(&temp, &self.out).with_context(|| format!("cannot replace {}", self.out.display()))?;
        tracing::info!(bytes = yaml.len(), "wrote {}", self.out.display());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(dir: &Path) -> NodeConfigAgent {
        NodeConfigAgent {
            namespace: "default".into(),
            prefix: "cfg".into(),
            node: "n1".into(),
            out: dir.join("config.yaml"),
        }
    }

    #[test]
    fn writes_replace_and_remove_the_file_and_leave_no_temporary() {
        let dir = std::env::temp_dir().join(format!("node-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let agent = agent(&dir);
        agent.write(Some("a: 1\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&agent.out).unwrap(), "a: 1\n");
        agent.write(Some("a: 2\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&agent.out).unwrap(), "a: 2\n");
        agent.write(None).unwrap();
        assert!(!agent.out.exists());
        agent.write(None).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no temporary file is left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
