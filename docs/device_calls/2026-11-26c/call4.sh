#!/usr/bin/env bash
# Session 2026-11-26c, call 4 (short): what the real H200 answers to cuOccupancyMaxActiveClusters
# (tests/cluster/probe_clusters.cpp), on both GPUs, and the same through the passthrough.
O=$OUT
for g in 0 1; do LD_LIBRARY_PATH=/usr/local/nvidia/lib64 .device/probe/cluster_probe_clusters $g > $O/real_clusters_gpu$g.txt 2>&1; done
VGPU_REAL_LIBCUDA=/usr/local/nvidia/lib64/libcuda.so.1 LD_LIBRARY_PATH=.device/lib/passthrough:.device/lib .device/probe/cluster_probe_clusters 0 > $O/passthrough_clusters.txt 2>&1
paste $O/real_clusters_gpu0.txt $O/real_clusters_gpu1.txt $O/passthrough_clusters.txt | head -60
