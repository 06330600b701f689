# Sourced by the packed DAQIRI-against-libdaqiri benchmarks
# (daqiri_raw_libraries.sh, daqiri_dpdk_libraries.sh) on the GPU machine,
# from their packed folder: where CUDA's libraries are, hugepages for the
# DPDK engines, and DPDK's plugins where EAL looks for them.
#   daqiri_host_env MIN_FREE RESERVE   reserves RESERVE hugepages in all when
#                                      fewer than MIN_FREE are free; sets cuda_dirs
daqiri_host_env() {
    cuda_dirs=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
    local wheel dir
    for wheel in cublas cufft cuda_runtime; do
        dir=$(python3 -c "import nvidia.$wheel as m; print(m.__path__[0] + '/lib')" 2>/dev/null) && cuda_dirs+=:$dir
    done
    if (($(awk '/HugePages_Free/ {print $2}' /proc/meminfo) < $1)); then
        echo "$2" > /proc/sys/vm/nr_hugepages || true
    fi
    mountpoint -q /dev/hugepages || { mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages; } || true
    # EAL loads its plugins from the folder DPDK was built for: link the packed ones there.
    local pmds
    pmds=$(cat daqiri/pmds-path)
    [[ -e $pmds ]] || { mkdir -p "$(dirname "$pmds")" && ln -s "$PWD/daqiri/pmds" "$pmds"; }
}
