/* For tests/bench/daqiri_roce_vm.sh: DAQIRI 2026.7 connects its RC queue
 * pairs with retry_count 0 (its rdma_conn_param leaves the field unset), so
 * the first packet lost ends the connection. Loaded with LD_PRELOAD, this
 * gives its rdma_connect and rdma_accept the retry count perftest and our
 * backend use (7, the most there is) and changes nothing else: a call that
 * names a retry count keeps it. A shim rather than a patched DAQIRI, so the
 * reference stays as released. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <rdma/rdma_cma.h>

typedef int (*cm_call)(struct rdma_cm_id *, struct rdma_conn_param *);

static struct rdma_conn_param *with_retries(struct rdma_conn_param *param, struct rdma_conn_param *copy) {
  if (param == NULL || param->retry_count != 0) return param;
  *copy = *param;
  copy->retry_count = 7;
  return copy;
}

static int call(const char *name, struct rdma_cm_id *id, struct rdma_conn_param *param) {
  cm_call real = (cm_call)dlsym(RTLD_NEXT, name);
  struct rdma_conn_param copy;
  return real == NULL ? -1 : real(id, with_retries(param, &copy));
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param) { return call("rdma_connect", id, param); }

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *param) { return call("rdma_accept", id, param); }
