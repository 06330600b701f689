/* libdaqiri's C ABI from C: the header compiles as C11, and a config error
 * comes back as a status with a message naming the YAML path at fault. */
#include <daqiri/c_api.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The layout the library writes (gateway/capi/src/handle.rs asserts its side). */
_Static_assert(offsetof(daqiri_gw_burst, transport_hdr.num_pkts) == offsetof(daqiri_gw_burst, hdr.hdr.num_pkts),
               "transport_hdr starts with hdr.hdr's fields");
_Static_assert(offsetof(daqiri_gw_burst, transport_hdr.version) == 24, "transport fields after hdr.hdr");
_Static_assert(offsetof(daqiri_gw_burst, event) == 152, "event after transport_hdr");

static int failures = 0;

static void check(int ok, const char *what) {
  if (!ok) {
    ++failures;
    printf("FAIL %s (last error: %s)\n", what, daqiri_gw_last_error());
  }
}

int main(void) {
  daqiri_gw_burst *burst = NULL;
  check(daqiri_gw_get_rx_burst(&burst, -1, -1) == DAQIRI_GW_NOT_READY, "no engine: NOT_READY");
  check(burst == NULL, "no burst handed out");
  check(strcmp(daqiri_gw_status_name(DAQIRI_GW_NO_SPACE_AVAILABLE), "NO_SPACE_AVAILABLE") == 0, "status names");
  const char *bad =
      "daqiri:\n"
      "  cfg:\n"
      "    version: 1\n"
      "    stream_type: socket\n"
      "    memory_regions:\n"
      "    - { name: m, kind: host, num_bufs: 64, buf_size: 2048 }\n"
      "    interfaces:\n"
      "    - name: s\n"
      "      address: 127.0.0.1\n"
      "      socket_config: { mode: server, local_addr: \"udp://127.0.0.1:47803\" }\n"
      "      rx: { queues: [{ name: q, id: 0, batch_size: 1, memory_regions: [nowhere] }] }\n";
  check(daqiri_gw_init_from_yaml_string(bad) == DAQIRI_GW_INVALID_PARAMETER, "a bad config is refused");
  check(strstr(daqiri_gw_last_error(), "memory_regions") != NULL, "the message names the YAML path");
  check(daqiri_gw_abi_version() == 1, "ABI 1");
  printf("%s\n", failures == 0 ? "c_api_test: ok" : "c_api_test: FAILED");
  return failures == 0 ? 0 : 1;
}
