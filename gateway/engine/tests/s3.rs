//! The S3 writer against a real S3 server (SeaweedFS, which tests/run.sh
//! starts through tests/s3/server.sh and names in DAQIRI_TEST_S3_ENDPOINT),
//! its objects read back by an independent client (curl, signing with AWS
//! SigV4 itself); and against stores that refuse or never answer, which
//! need no server. Each test is its own process (nextest), so setting the
//! credentials' environment in one touches no other.

#![cfg(feature = "s3")]

use std::time::{Duration, Instant};

use daqiri::writer::{S3Bucket, S3Config, S3Writer};
use daqiri::{Engine, Status};

mod common;
use common::split_loop::{config, payload, received_burst};

#[path = "../../../tests/s3/client.rs"]
mod s3_client;
use s3_client::{ACCESS_KEY, REGION, SECRET_KEY, endpoint};

/// Headers the split loop's packets start with (Ethernet, IPv4, UDP).
const HEADERS: usize = 42;

/// The process's AWS credentials, as the writer reads them.
fn use_credentials(access: &str, secret: &str) {
    // SAFETY: set before any thread of this test process reads the environment.
    unsafe {
        std::env::set_var("AWS_ACCESS_KEY_ID", access);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", secret);
    }
}

/// A request of the independent client to the suite's server.
fn curl(method: &str, path: &str) -> (u16, Vec<u8>) {
    s3_client::curl(&endpoint(), method, path)
}

/// A bucket of its own for the calling test.
fn bucket(name: &str) -> String {
    s3_client::create_bucket(&endpoint(), name)
}

fn writer(bucket: &str, endpoint: &str) -> S3Writer {
    let mut config = S3Config::new(bucket, REGION);
    config.endpoint = Some(endpoint.to_owned());
    config.path_style = true;
    config.retry_deadline = Duration::from_secs(3);
    S3Writer::new(config).unwrap()
}

#[test]
#[ignore = "needs DAQIRI_TEST_S3_ENDPOINT naming an S3 server; tests/run.sh starts one"]
fn each_packet_lands_as_an_object_of_its_own_byte_for_byte_from_the_offset() {
    use_credentials(ACCESS_KEY, SECRET_KEY);
    let bucket = bucket("objects");
    let engine = Engine::from_yaml(&config()).unwrap();
    let burst = received_burst(&engine, 12);
    // Past the headers and 5 bytes into each payload: the offset crosses
    // the split between the packets' two segments.
    let offset = HEADERS + 5;
    let upload = writer(&bucket, &endpoint()).write_raw_objects(&burst, "runs/run42/packet", offset).unwrap();
    drop(burst); // staged: the burst is not needed once submitted
    let status = upload.wait().unwrap();
    assert_eq!((status.completed_objects, status.failed_objects), (12, 0));
    let expected: Vec<Vec<u8>> = (0..12).map(|i| payload(i)[5..].to_vec()).collect();
    assert_eq!(status.bytes_uploaded, expected.iter().map(|e| e.len() as u64).sum::<u64>());
    for (i, want) in expected.iter().enumerate() {
        let (code, got) = curl("GET", &format!("{bucket}/runs/run42/packet_{i}"));
        assert_eq!(code, 200, "object {i}");
        assert!(got == *want, "object {i}: {} bytes read back, {} written, or they differ", got.len(), want.len());
    }
    assert_eq!(curl("GET", &format!("{bucket}/runs/run42/packet_12")).0, 404, "one object per packet");
}

#[test]
#[ignore = "needs DAQIRI_TEST_S3_ENDPOINT naming an S3 server; tests/run.sh starts one"]
fn a_wrong_secret_fails_every_object_with_the_stores_reason() {
    let bucket = bucket("refused");
    use_credentials(ACCESS_KEY, "not-the-secret");
    let engine = Engine::from_yaml(&config()).unwrap();
    let upload = writer(&bucket, &endpoint()).write_raw_objects(&received_burst(&engine, 4), "p", 0).unwrap();
    let error = upload.wait().unwrap_err();
    assert_eq!(error.status, Status::GenericFailure);
    assert!(error.message.contains("4 of 4 S3 objects failed"), "{error}");
    assert!(error.message.contains("SignatureDoesNotMatch"), "the store's reason is named: {error}");
    assert_eq!(upload.status().completed_objects, 0);
}

#[test]
#[ignore = "needs DAQIRI_TEST_S3_ENDPOINT naming an S3 server; tests/run.sh starts one"]
fn a_profile_of_the_shared_credentials_file_signs_the_uploads_and_a_missing_one_is_named() {
    let bucket = bucket("profile");
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    let lab = format!(
        "[default]\naws_access_key_id = nobody\naws_secret_access_key = wrong\n[lab]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
    );
    std::fs::write(&credentials, lab).unwrap();
    // SAFETY: set before any thread of this test process reads the environment.
    unsafe {
        std::env::remove_var("AWS_ACCESS_KEY_ID");
        std::env::remove_var("AWS_SECRET_ACCESS_KEY");
        std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &credentials);
        std::env::set_var("AWS_CONFIG_FILE", dir.path().join("config"));
        std::env::set_var("AWS_PROFILE", "lab");
    }
    let engine = Engine::from_yaml(&config()).unwrap();
    let upload = writer(&bucket, &endpoint()).write_raw_objects(&received_burst(&engine, 2), "p", 0).unwrap();
    assert_eq!(upload.wait().unwrap().completed_objects, 2);
    assert_eq!(curl("GET", &format!("{bucket}/p_1")).0, 200);
    // SAFETY: as above; the writer's threads do not read the environment.
    unsafe { std::env::set_var("AWS_PROFILE", "nosuch") };
    let mut config = S3Config::new(&bucket, REGION);
    config.endpoint = Some(endpoint());
    let error = S3Bucket::connect(config).unwrap_err();
    assert!(error.message.contains("AWS_PROFILE=nosuch"), "{error}");
}

fn bucket_of(name: &str) -> S3Bucket {
    let mut config = S3Config::new(name, REGION);
    config.endpoint = Some(endpoint());
    config.path_style = true;
    config.max_inflight_uploads = 2;
    config.retry_deadline = Duration::from_secs(3);
    S3Bucket::connect(config).unwrap()
}

#[test]
#[ignore = "needs DAQIRI_TEST_S3_ENDPOINT naming an S3 server; tests/run.sh starts one"]
fn a_streamed_object_of_several_parts_reads_back_byte_for_byte_and_an_unfinished_one_never_appears() {
    use_credentials(ACCESS_KEY, SECRET_KEY);
    let name = bucket("stream");
    let store = bucket_of(&name);
    // 12 MiB and some in writes of odd sizes: three parts of 5 MiB, the last short.
    let bytes: Vec<u8> = (0..(12 << 20) + 12345).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let mut object = store.stream("deep/a.bin", 5 << 20).unwrap();
    for chunk in bytes.chunks(777_777) {
        object.write(chunk).unwrap();
    }
    assert_eq!(object.written(), bytes.len() as u64);
    assert_eq!(object.url(), format!("s3://{name}/deep/a.bin"));
    assert_eq!(curl("GET", &format!("{name}/deep/a.bin")).0, 404, "no object before it is finished");
    assert_eq!(object.finish().unwrap(), bytes.len() as u64);
    let (code, got) = curl("GET", &format!("{name}/deep/a.bin"));
    assert_eq!(code, 200);
    assert!(got == bytes, "{} bytes read back, {} written, or they differ", got.len(), bytes.len());
    assert_eq!(store.list("deep").unwrap(), ["deep/a.bin"]);
    let download = store.download("deep/a.bin").unwrap();
    assert_eq!(download.size, bytes.len() as u64);

    let mut dropped = store.stream("deep/b.bin", 5 << 20).unwrap();
    dropped.write(&bytes[..6 << 20]).unwrap();
    let (_, uploads) = curl("GET", &format!("{name}?uploads="));
    assert!(String::from_utf8_lossy(&uploads).contains("deep/b.bin"), "an upload is open");
    drop(dropped);
    assert_eq!(curl("GET", &format!("{name}/deep/b.bin")).0, 404);
    // Its abort runs on the bucket's threads.
    let deadline = Instant::now() + Duration::from_secs(10);
    while String::from_utf8_lossy(&curl("GET", &format!("{name}?uploads=")).1).contains("deep/b.bin") {
        assert!(Instant::now() < deadline, "the dropped object's upload was not aborted");
        std::thread::sleep(Duration::from_millis(100));
    }
    let error = store.stream("deep/c.bin", 1 << 20).unwrap_err();
    assert!(error.message.contains("below S3's smallest part"), "{error}");
    let error = store.download("deep/none").unwrap_err();
    assert_eq!(error.status, Status::InvalidParameter, "{error}");
}

/// An address that takes connections and never answers.
fn black_hole() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    (listener, address)
}

#[test]
fn a_store_that_never_answers_fails_the_upload_by_its_deadline_without_hanging() {
    use_credentials(ACCESS_KEY, SECRET_KEY);
    let (_listener, address) = black_hole();
    let engine = Engine::from_yaml(&config()).unwrap();
    let started = Instant::now();
    let upload = writer("silent", &address).write_raw_objects(&received_burst(&engine, 3), "p", 0).unwrap();
    assert!(!upload.is_finished());
    let error = upload.wait().unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "the 3 s deadline held: {took:?}");
    assert_eq!((upload.status().failed_objects, upload.status().completed_objects), (3, 0), "{error}");
}

#[test]
fn staging_is_bounded_over_every_upload_in_flight() {
    use_credentials(ACCESS_KEY, SECRET_KEY);
    let (_listener, address) = black_hole();
    let engine = Engine::from_yaml(&config()).unwrap();
    let mut config = S3Config::new("bounded", REGION);
    config.endpoint = Some(address);
    config.retry_deadline = Duration::from_secs(2);
    // Room for the first burst's payloads (100..104 bytes each) and not a second's.
    config.max_staged_bytes = 600;
    let writer = S3Writer::new(config).unwrap();
    let first = writer.write_raw_objects(&received_burst(&engine, 5), "a", HEADERS).unwrap();
    let refused = writer.write_raw_objects(&received_burst(&engine, 5), "b", HEADERS).unwrap_err();
    assert_eq!(refused.status, Status::NoSpaceAvailable);
    assert!(refused.message.contains("510 staged by uploads in flight"), "{refused}");
    // The first upload's failure gives its staging back.
    first.wait().unwrap_err();
    writer.write_raw_objects(&received_burst(&engine, 5), "c", HEADERS).unwrap().wait().unwrap_err();
}

#[test]
fn bad_requests_are_refused_by_name_before_anything_is_staged() {
    let refused = |config: S3Config| S3Writer::new(config).unwrap_err().message;
    assert!(refused(S3Config::new("", REGION)).contains("bucket is empty"));
    assert!(refused(S3Config::new("b", "")).contains("region is empty"));
    let mut none_in_flight = S3Config::new("b", REGION);
    none_in_flight.max_inflight_uploads = 0;
    assert!(refused(none_in_flight).contains("max_inflight_uploads is 0"));
    let engine = Engine::from_yaml(&config()).unwrap();
    let burst = received_burst(&engine, 2);
    let writer = writer("b", "http://127.0.0.1:9");
    let error = writer.write_raw_objects(&burst, "", 0).unwrap_err();
    assert_eq!((error.status, error.message.as_str()), (Status::InvalidParameter, "S3 object prefix is empty"));
    let error = writer.write_raw_objects(&burst, "a//b", 0).unwrap_err();
    assert!(error.message.contains("a//b_0\" is no valid S3 object key"), "{error}");
}
