// DAQIRI's NetworkConfig through libdaqiri: parse_network_config,
// daqiri_init(NetworkConfig&) and get_engine_type.
//   config_test <out> <config.yaml>...
// For each config: the tree libdaqiri parsed it into (out/N.parsed.yaml) and
// the tree of what NetworkConfig writes back, parsed again
// (out/N.written.yaml), for run.sh to compare; a config parse refuses is
// listed as "refused <path>: <why>". Then the refusals and an engine started
// from a config built in code. Prints "ok" or "FAIL ..." lines.
#include <daqiri/daqiri.h>

#include "check.h"

#include <cstdio>
#include <fstream>
#include <string>

namespace {

std::string tree_yaml(daqiri_gw_config *tree) {
  char *text = daqiri_gw_config_yaml(tree);
  std::string yaml = text != nullptr ? text : "";
  daqiri_gw_config_free_text(text);
  return yaml;
}

// What libdaqiri parsed a config into.
std::string parsed_yaml(const std::string &yaml_or_path) {
  daqiri_gw_config *tree = nullptr;
  if (daqiri_gw_config_parse(yaml_or_path.c_str(), &tree) != DAQIRI_GW_SUCCESS) { return "parse failed"; }
  std::string yaml = tree_yaml(tree);
  daqiri_gw_config_free(tree);
  return yaml;
}

// The YAML document a NetworkConfig writes (what daqiri_init(config) starts).
std::string written_document(daqiri::NetworkConfig config) {
  daqiri_gw_config *tree = daqiri_gw_config_new();
  daqiri::detail::ConfigIo io(tree, true);
  daqiri::detail::bind(io, config);
  CHECK(io.failure().empty());
  std::string yaml = "daqiri:\n  cfg:\n";
  std::string body = tree_yaml(tree);
  for (size_t start = 0; start < body.size();) {
    const size_t end = body.find('\n', start);
    yaml += "    " + body.substr(start, end - start) + "\n";
    start = end == std::string::npos ? body.size() : end + 1;
  }
  daqiri_gw_config_free(tree);
  return yaml;
}

void write_file(const std::string &path, const std::string &text) { std::ofstream(path) << text; }

void round_trips(const std::string &out, int index, const std::string &path) {
  daqiri::NetworkConfig config;
  const daqiri::Status status = daqiri::parse_network_config(path, config);
  if (status != daqiri::Status::SUCCESS) {
    std::printf("refused %s: %s: %s\n", path.c_str(), daqiri::status_to_string(status), daqiri::last_error());
    return;
  }
  CHECK(config.common_.engine_type != daqiri::EngineType::UNKNOWN);
  CHECK(daqiri::get_engine_type(config) == config.common_.engine_type);
  for (size_t i = 0; i < config.ifs_.size(); ++i) { CHECK(config.ifs_[i].port_id_ == i); }
  const std::string written = written_document(config);
  daqiri::NetworkConfig again;
  CHECK(daqiri::parse_network_config(written, again) == daqiri::Status::SUCCESS);
  CHECK(written_document(again) == written);  // a fixed point
  const std::string stem = out + "/" + std::to_string(index);
  write_file(stem + ".path", path);
  write_file(stem + ".parsed.yaml", parsed_yaml(path));
  write_file(stem + ".written.yaml", parsed_yaml(written));
}

const char *kSocketServer = R"(
daqiri:
  cfg:
    version: 1
    stream_type: socket
    memory_regions:
    - { name: rx, kind: host, num_bufs: 64, buf_size: 2048 }
    interfaces:
    - name: server
      socket_config: { mode: server, local_addr: "udp://127.0.0.1:47870" }
      rx:
        queues:
        - { name: q, id: 0, cpu_core: -1, batch_size: 4, timeout_us: 1000, memory_regions: [rx], busy_poll_us: 10 }
)";

void refusals() {
  daqiri::NetworkConfig config;
  config.common_.version = 7;
  CHECK(daqiri::parse_network_config(kSocketServer, config) == daqiri::Status::NOT_SUPPORTED);
  CHECK(std::string(daqiri::last_error()).find("interfaces.0.rx.queues.0.busy_poll_us") != std::string::npos);
  CHECK(config.common_.version == 7);  // left as it was
  CHECK(daqiri::parse_network_config("version: [", config) == daqiri::Status::INVALID_PARAMETER);
  CHECK(daqiri::parse_network_config("/no/such/config.yaml", config) == daqiri::Status::INVALID_PARAMETER);
  CHECK(daqiri::parse_network_config_from_yaml_file("/no/such/config.yaml", config) ==
        daqiri::Status::INVALID_PARAMETER);
}

// A UDP server built in code, started, its engine named; then a member
// with no key in this build, refused by the key's name.
void built_in_code() {
  daqiri::NetworkConfig config;
  config.common_.version = 1;
  config.common_.stream_type = daqiri::StreamType::SOCKET;
  daqiri::MemoryRegionConfig rx;
  rx.name_ = "rx";
  rx.kind_ = daqiri::MemoryKind::HOST;
  rx.num_bufs_ = 64;
  rx.buf_size_ = 2048;
  config.mrs_[rx.name_] = rx;
  daqiri::InterfaceConfig server;
  server.name_ = "server";
  server.socket_.mode_ = daqiri::SocketMode::SERVER;
  server.socket_.local_addr_ = "udp://127.0.0.1:47871";
  daqiri::RxQueueConfig queue;
  queue.common_.name_ = "q";
  queue.common_.cpu_core_ = "-1";
  queue.common_.batch_size_ = 4;
  queue.common_.mrs_ = {"rx"};
  queue.timeout_us_ = 1000;
  server.rx_.queues_.push_back(queue);
  config.ifs_.push_back(server);

  CHECK(daqiri::get_engine_type() == daqiri::EngineType::UNKNOWN);
  CHECK(daqiri::get_engine_type(config) == daqiri::EngineType::SOCKET);
  CHECK(daqiri::daqiri_init(config) == daqiri::Status::SUCCESS);
  CHECK(daqiri::get_engine_type() == daqiri::EngineType::SOCKET);
  CHECK(daqiri::get_port_id("server") == 0);
  daqiri::shutdown();
  CHECK(daqiri::get_engine_type() == daqiri::EngineType::UNKNOWN);

  config.ifs_[0].rx_.queues_[0].common_.split_boundary_ = 64;
  CHECK(daqiri::daqiri_init(config) != daqiri::Status::SUCCESS);
  CHECK(std::string(daqiri::last_error()).find("split_boundary") != std::string::npos);
  daqiri::shutdown();
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: config_test <out> <config.yaml>...\n");
    return 2;
  }
  for (int i = 2; i < argc; ++i) { round_trips(argv[1], i - 1, argv[i]); }
  refusals();
  built_in_code();
  std::printf(failures == 0 ? "config_test: ok\n" : "config_test: FAIL %d checks\n", failures);
  return failures == 0 ? 0 : 1;
}
