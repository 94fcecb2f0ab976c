// SPDX-License-Identifier: Apache-2.0
#include "conclave/replication/config.hpp"
#include "conclave/core/quorum.hpp"

namespace conclave::replication {

std::optional<std::string> LogConfig::validate() const {
    if (cluster_size == 0 || cluster_size > kMaxClusterSize) {
        return "cluster_size must be in 1.." + std::to_string(kMaxClusterSize) + ", got " +
               std::to_string(cluster_size);
    }
    if (self.value >= cluster_size) {
        return "self (" + std::to_string(self.value) + ") must be below cluster_size (" +
               std::to_string(cluster_size) + ")";
    }
    if (quorum != 0 && (quorum > cluster_size || !is_majority(quorum, cluster_size))) {
        return "quorum must be 0 (majority) or a majority of cluster_size, got " +
               std::to_string(quorum);
    }
    if (heartbeat_period.count() <= 0) {
        return "heartbeat_period must be positive";
    }
    if (sync_retry_period.count() <= 0) {
        return "sync_retry_period must be positive";
    }
    if (propose_timeout_ticks == 0) {
        return "propose_timeout_ticks must be positive";
    }
    if (max_batch_entries == 0) {
        return "max_batch_entries must be positive";
    }
    if (max_batch_bytes == 0) {
        return "max_batch_bytes must be positive";
    }
    if (max_inflight_batches == 0 || max_inflight_batches > 1024) {
        return "max_inflight_batches must be in 1..1024";
    }
    if (max_key_bytes == 0 || max_key_bytes > (std::size_t{1} << 16)) {
        return "max_key_bytes must be in 1..65536";
    }
    if (max_value_bytes > (std::size_t{64} << 20)) {
        return "max_value_bytes must be at most 64 MiB";
    }
    if (quota_bytes != 0 && quota_bytes < 16 + max_key_bytes + max_value_bytes) {
        return "quota_bytes must be 0 (no limit) or hold at least one entry of the largest size (" +
               std::to_string(16 + max_key_bytes + max_value_bytes) + " bytes), got " +
               std::to_string(quota_bytes);
    }
    if (compact_threshold != 0 && compact_retain >= compact_threshold) {
        return "compact_retain must be below compact_threshold, got " +
               std::to_string(compact_retain) + " >= " + std::to_string(compact_threshold);
    }
    if (!node_ids.empty()) {
        if (node_ids.size() != cluster_size) {
            return "node_ids must be empty or name every node (" + std::to_string(cluster_size) +
                   "), got " + std::to_string(node_ids.size());
        }
        for (std::size_t i = 0; i < node_ids.size(); ++i) {
            if (node_ids[i].empty()) {
                return "node_ids[" + std::to_string(i) + "] is empty";
            }
            for (std::size_t j = 0; j < i; ++j) {
                if (node_ids[j] == node_ids[i]) {
                    return "node_ids names '" + node_ids[i] + "' twice";
                }
            }
        }
    }
    return std::nullopt;
}

}  // namespace conclave::replication
