//! The S3 tests' independent client: curl, signing with AWS SigV4 itself,
//! against tests/s3/server.sh's server and identity. Shared by the engine's
//! and the gateway's S3 tests (`#[path]`), so both read objects the same way.

use std::process::Command;

/// tests/s3/server.sh's identity (tests only).
pub const ACCESS_KEY: &str = "daqiri-test-access";
pub const SECRET_KEY: &str = "daqiri-test-secret-0123456789";
pub const REGION: &str = "us-east-1";

/// The suite's S3 server (tests/run.sh starts one and names it here).
pub fn endpoint() -> String {
    std::env::var("DAQIRI_TEST_S3_ENDPOINT")
        .expect("DAQIRI_TEST_S3_ENDPOINT names the S3 server (tests/run.sh starts one with tests/s3/server.sh)")
}

/// One request of curl's (its own SigV4 signer) to `endpoint/path`: the
/// status and the body.
pub fn curl(endpoint: &str, method: &str, path: &str) -> (u16, Vec<u8>) {
    let out = Command::new("curl")
        .args(["-s", "-X", method, "-o", "-", "-w", "\n%{http_code}"])
        .args(["--aws-sigv4", &format!("aws:amz:{REGION}:s3"), "--user", &format!("{ACCESS_KEY}:{SECRET_KEY}")])
        .arg(format!("{endpoint}/{path}"))
        .output()
        .expect("curl is needed (tests/setup.sh installs it)");
    let mut body = out.stdout;
    let split = body.iter().rposition(|&b| b == b'\n').expect("curl printed the status");
    let code = String::from_utf8_lossy(&body[split + 1..]).trim().parse().expect("an HTTP status");
    body.truncate(split);
    (code, body)
}

/// A bucket of the calling test's own: `<name>-<pid>`.
pub fn create_bucket(endpoint: &str, name: &str) -> String {
    let bucket = format!("{name}-{}", std::process::id());
    let (code, body) = curl(endpoint, "PUT", &bucket);
    assert_eq!(code, 200, "creating bucket {bucket}: {}", String::from_utf8_lossy(&body));
    bucket
}
