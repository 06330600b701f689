//! The appliance's images, as `tests/k8s/image.sh` builds them from the
//! Dockerfile (both variants: sockets only, and the kernel-bypass one), run
//! the way a kubelet runs them: unpacked by umoci into an OCI bundle whose
//! process, user and environment come from the image's own config, and
//! started by runc. `tests/run.sh` builds the images and names them in
//! `DAQIRI_TEST_IMAGES` (space-separated); this needs root.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn images() -> Vec<String> {
    let names = std::env::var("DAQIRI_TEST_IMAGES")
        .expect("DAQIRI_TEST_IMAGES names the images tests/k8s/image.sh built (tests/run.sh sets it)");
    names.split_whitespace().map(str::to_owned).collect()
}

fn ok(output: Output, what: &str) -> String {
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what} failed ({}):\n{text}", output.status);
    text
}

fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}); tests/setup.sh installs it"));
    ok(output, &format!("{program} {}", args.join(" ")))
}

/// An image unpacked into an OCI bundle: `rootfs/` and the `config.json`
/// umoci derives from the image's config.
struct Bundle {
    dir: tempfile::TempDir,
    config: Value,
    /// The image's layers as stored (compressed), in bytes.
    stored_bytes: u64,
}

impl Bundle {
    fn unpack(image: &str) -> Self {
        let dir = tempfile::Builder::new().prefix("daqiri-image-").tempdir_in(root().join("target")).unwrap();
        let layout = dir.path().join("oci");
        let layout_ref = format!("{}:image", layout.display());
        run("buildah", &["push", "--quiet", image, &format!("oci:{layout_ref}")]);
        let stored_bytes = walk_bytes(&layout.join("blobs"));
        run("umoci", &["unpack", "--image", &layout_ref, dir.path().join("bundle").to_str().unwrap()]);
        let config = serde_json::from_slice(&std::fs::read(dir.path().join("bundle/config.json")).unwrap()).unwrap();
        Self { dir, config, stored_bytes }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("bundle")
    }

    /// The image's command line: its entrypoint, then `cmd` in place of
    /// its default command when given (as `docker run IMAGE CMD...`).
    fn args(&self, cmd: Option<&[&str]>) -> Vec<String> {
        let default: Vec<String> =
            self.config["process"]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
        match cmd {
            None => default,
            Some(cmd) => std::iter::once(default[0].clone()).chain(cmd.iter().map(|c| (*c).to_owned())).collect(),
        }
    }

    /// Writes the bundle's config for one container: `args`, no terminal,
    /// in the host's network namespace when `host_network` (hostNetwork).
    fn configure(&self, args: &[String], host_network: bool) {
        let mut config = self.config.clone();
        config["process"]["args"] = args.iter().map(|a| Value::from(a.as_str())).collect();
        config["process"]["terminal"] = Value::Bool(false);
        if host_network && let Some(namespaces) = config["linux"]["namespaces"].as_array_mut() {
            namespaces.retain(|n| n["type"] != "network");
        }
        std::fs::write(self.path().join("config.json"), serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    }

    /// Runs the image with `cmd` (or its default command) to its end.
    fn output(&self, cmd: Option<&[&str]>) -> Output {
        self.exec(&self.args(cmd))
    }

    /// Runs `args` (a whole command line, entrypoint replaced) to its end.
    fn exec(&self, args: &[String]) -> Output {
        self.configure(args, false);
        let id = format!("daqiri-image-test-{}", std::process::id());
        Command::new("runc").args(["run", "--bundle", self.path().to_str().unwrap(), &id]).output().unwrap()
    }
}

/// The DPDK drivers EAL loads from the image's `/opt/dpdk` (none in an image
/// without DPDK), as paths inside the image.
fn dpdk_drivers(rootfs: &Path) -> Vec<String> {
    let lib = rootfs.join("opt/dpdk/lib/dpdk");
    let Ok(folders) = std::fs::read_dir(&lib) else { return Vec::new() };
    let mut drivers = Vec::new();
    for folder in folders.map(|f| f.unwrap().path()) {
        for driver in std::fs::read_dir(&folder).unwrap().map(|d| d.unwrap().path()) {
            drivers.push(format!("/{}", driver.strip_prefix(rootfs).unwrap().display()));
        }
    }
    assert!(!drivers.is_empty(), "{} holds no DPDK drivers", lib.display());
    drivers
}

/// Bytes of the files under `dir` (links not followed).
fn walk_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            let kind = e.file_type().unwrap();
            if kind.is_dir() {
                walk_bytes(&e.path())
            } else if kind.is_file() {
                e.metadata().unwrap().len()
            } else {
                0
            }
        })
        .sum()
}

/// The uid a process runs as (the real one, from /proc).
fn uid_of(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
#[ignore = "needs root and the images tests/k8s/image.sh builds; tests/run.sh runs it"]
fn each_image_runs_its_binaries_as_its_user_with_every_library_inside() {
    for image in images() {
        let bundle = Bundle::unpack(&image);
        let process = &bundle.config["process"];
        assert_eq!(process["user"]["uid"], 65532, "{image}: the entrypoint's user: {process}");
        // The group consumer pods join to reach the consumer socket (0660).
        assert_eq!(process["user"]["gid"], 65532, "{image}: the entrypoint's group: {process}");
        assert_eq!(bundle.args(None)[0], "daqiri-gateway", "{image}: the entrypoint");
        let unpacked = walk_bytes(&bundle.path().join("rootfs"));
        eprintln!(
            "{image}: {:.1} MB stored (compressed layers), {:.1} MB unpacked",
            bundle.stored_bytes as f64 / 1e6,
            unpacked as f64 / 1e6
        );
        assert!(bundle.stored_bytes < 100_000_000, "{image}: {} bytes stored", bundle.stored_bytes);

        // Every library each binary loads is in the image, and so is every
        // library of each DPDK driver EAL loads at start (the bypass image's).
        let mut binaries =
            vec!["/usr/local/bin/daqiri-gateway".to_owned(), "/usr/local/bin/daqiri-operator".to_owned()];
        binaries.extend(dpdk_drivers(&bundle.path().join("rootfs")));
        for binary in &binaries {
            let ldd = ok(bundle.exec(&["ldd".to_owned(), binary.clone()]), &format!("{image}: ldd {binary}"));
            assert!(!ldd.contains("not found"), "{image}: {binary} misses a library:\n{ldd}");
        }
        let version = ok(bundle.output(Some(&["--version"])), &format!("{image}: daqiri-gateway --version"));
        assert!(version.starts_with("daqiri-gateway "), "{image}: {version}");
        let operator = ok(
            bundle.exec(&["daqiri-operator".to_owned(), "--version".to_owned()]),
            &format!("{image}: daqiri-operator --version"),
        );
        assert!(operator.starts_with("daqiri-operator "), "{image}: {operator}");

        // `check` of every example config, as shipped in the image.
        let mut examples: Vec<String> = std::fs::read_dir(root().join("configs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".yaml"))
            .map(|name| format!("/etc/daqiri/examples/{name}"))
            .collect();
        examples.sort();
        let mut check = vec!["check"];
        check.extend(examples.iter().map(String::as_str));
        let checked = ok(bundle.output(Some(&check)), &format!("{image}: check of configs/"));
        assert_eq!(checked.matches(": valid (").count(), examples.len(), "{image}:\n{checked}");
    }
}

#[test]
#[ignore = "needs root and the images tests/k8s/image.sh builds; tests/run.sh runs it"]
fn each_images_default_command_serves_as_its_non_root_user() {
    for image in images() {
        let bundle = Bundle::unpack(&image);
        // The default command, on the host's network (the chart's
        // hostNetwork), so its admin API answers here.
        bundle.configure(&bundle.args(None), true);
        let id = format!("daqiri-serve-{}", std::process::id());
        let mut child = Command::new("runc")
            .args(["run", "--bundle", bundle.path().to_str().unwrap(), &id])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let healthy = loop {
            if let Ok(mut stream) = std::net::TcpStream::connect("127.0.0.1:9464") {
                use std::io::{Read, Write};
                stream.write_all(b"GET /healthz HTTP/1.0\r\nHost: gateway\r\n\r\n").unwrap();
                let mut answer = String::new();
                let _ = stream.read_to_string(&mut answer);
                break answer;
            }
            assert!(Instant::now() < deadline, "{image}: no admin API on 127.0.0.1:9464 within 20 s");
            std::thread::sleep(Duration::from_millis(100));
        };
        let state: Value = serde_json::from_str(&run("runc", &["state", &id])).unwrap();
        let pid = state["pid"].as_u64().unwrap() as u32;
        let uid = uid_of(pid);
        let _ = Command::new("runc").args(["kill", &id, "TERM"]).status();
        let exited = child.wait().unwrap();
        let _ = Command::new("runc").args(["delete", "--force", &id]).status();
        assert!(healthy.starts_with("HTTP/1.1 200") || healthy.starts_with("HTTP/1.0 200"), "{image}: {healthy}");
        assert_eq!(uid, 65532, "{image}: the gateway runs as the image's user");
        assert!(exited.success(), "{image}: SIGTERM stops it cleanly ({exited})");
    }
}
