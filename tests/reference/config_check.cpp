// Drives DAQIRI's own config parser for tests/reference/config_diff.py: for each
// file, one line "FILE<TAB>valid" or "FILE<TAB>invalid<TAB>STATUS"; DAQIRI's own
// log (why) goes to stderr. Built against the reference build's library by
// tests/reference/build.sh (config-check); nothing of DAQIRI's is copied here.
#include <daqiri/common.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG.yaml...\n", argv[0]);
    return 2;
  }
  int invalid = 0;
  for (int i = 1; i < argc; ++i) {
    daqiri::NetworkConfig config;
    const daqiri::Status status = daqiri::parse_network_config_from_yaml_file(argv[i], config);
    if (status == daqiri::Status::SUCCESS) {
      std::printf("%s\tvalid\n", argv[i]);
    } else {
      std::printf("%s\tinvalid\t%d\n", argv[i], static_cast<int>(status));
      ++invalid;
    }
    std::fflush(stdout);
  }
  return invalid == 0 ? 0 : 1;
}
