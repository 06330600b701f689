//! `pacing_mbps`: a UDP client queue paced in software keeps its rate, as
//! an independent receiver (a plain socket) measures it over 5 s, while the
//! application offers far more than the rate.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use daqiri::Engine;

mod common;
use daqiri_config::testing::{TestConfig, tx};

const MBPS: u64 = 40;
const PAYLOAD: usize = 1200;
const WINDOW: Duration = Duration::from_secs(5);

#[test]
fn a_paced_udp_queue_sends_within_two_percent_of_its_rate_over_five_seconds() {
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket2::SockRef::from(&receiver).set_recv_buffer_size(8 << 20).unwrap();
    receiver.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let yaml = TestConfig::udp_client(receiver.local_addr().unwrap())
        .region("mem", 1024, 2048)
        .tx_queue(tx(0, "mem").batch(32).pacing_mbps(MBPS))
        .yaml();
    let engine = Engine::from_yaml(&yaml).expect("pacing_mbps is honoured");
    let arrivals = std::thread::spawn(move || {
        let mut buffer = [0u8; 2048];
        let mut arrivals: Vec<(Instant, usize)> = Vec::new();
        while arrivals.first().is_none_or(|(first, _)| first.elapsed() < WINDOW + Duration::from_secs(1)) {
            if let Ok(n) = receiver.recv(&mut buffer) {
                arrivals.push((Instant::now(), n));
            }
        }
        arrivals
    });
    // Offer bursts as fast as buffers come back: ten times the rate and more.
    let until = Instant::now() + WINDOW + Duration::from_millis(600);
    while Instant::now() < until {
        let Ok(mut burst) = engine.get_tx_packet_burst(0, 0, 32) else {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        };
        for i in 0..32 {
            burst.packet_mut(i).write(&[0x5a; PAYLOAD]).unwrap();
        }
        if engine.send_tx_burst(burst).is_err() {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let tx = engine.stats().ports[0].tx_queues[0].stats;
    let arrivals = arrivals.join().unwrap();
    let first = arrivals[0].0;
    let bytes: usize = arrivals.iter().filter(|(at, _)| at.duration_since(first) < WINDOW).map(|(_, n)| n).sum();
    let mbps = bytes as f64 * 8.0 / WINDOW.as_secs_f64() / 1e6;
    let error = (mbps - MBPS as f64).abs() / MBPS as f64;
    eprintln!("paced UDP queue: {mbps:.3} Mb/s received over 5 s for pacing_mbps {MBPS}");
    assert!(error < 0.02, "{mbps:.2} Mb/s received over 5 s, {:.2}% off {MBPS} Mb/s", error * 100.0);
    assert_eq!(tx.total_drops(), 0, "pacing holds bursts back; it drops none: {tx:?}");
}

/// Bursts `send_tx_burst` took that a slow (paced) queue had not sent when
/// the engine shut down are counted as `unsent`: every packet accepted is
/// either sent or counted.
#[test]
fn what_a_shutdown_leaves_queued_is_counted_unsent() {
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    let yaml = TestConfig::udp_client(receiver.local_addr().unwrap())
        .region("mem", 1024, 2048)
        .tx_queue(tx(0, "mem").batch(32).pacing_mbps(1))
        .yaml();
    let engine = Engine::from_yaml(&yaml).unwrap();
    let mut accepted = 0;
    for _ in 0..8 {
        let mut burst = engine.get_tx_packet_burst(0, 0, 32).unwrap();
        for i in 0..32 {
            burst.packet_mut(i).write(&[0x5a; PAYLOAD]).unwrap();
        }
        engine.send_tx_burst(burst).unwrap();
        accepted += 32;
    }
    engine.shutdown();
    let tx = engine.stats().ports[0].tx_queues[0].stats;
    let unsent = tx.drops(daqiri::DropReason::Unsent);
    // 1 Mb/s sends a burst of 32 x 1200 B in about 0.3 s: most are still queued.
    assert!(unsent > 0, "{tx:?}");
    assert_eq!(tx.packets + unsent, accepted, "every accepted packet sent or counted unsent: {tx:?}");
    assert!(engine.stats().regions.iter().all(|r| r.in_use == 0), "every buffer back");
}
