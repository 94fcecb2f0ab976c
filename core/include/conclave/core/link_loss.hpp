// SPDX-License-Identifier: Apache-2.0
// Why a connection to a peer went down, as the mesh tells the elector (docs/design.md, "The
// leader lease", assumption 3). Only a closure that proves the peer's process can no longer act
// on the link ends a follower's promise; a connection this node closed itself proves nothing.
#pragma once

#include <boost/describe/enum.hpp>
#include <cstdint>

namespace conclave {

BOOST_DEFINE_FIXED_ENUM_CLASS(
    LinkLoss, std::uint8_t,
    PeerClosed,     // proof: the peer's side closed the link after its handshake (a FIN, an RST,
                    // a TLS close): its process exited or closed the connection itself
    PeerRestarted,  // proof: a proven hello (MAC or certificate) of a newer incarnation of the
                    // peer (the process behind the old link is gone)
    Local  // no proof: this node closed it (a duplicate hello, a keepalive or user timeout, a
           // full send queue, a bad frame, a read error it decided on, a stop)
)

/// Whether `loss` proves that the peer's process can no longer act on the link.
constexpr bool proves_peer_gone(LinkLoss loss) {
    return loss == LinkLoss::PeerClosed || loss == LinkLoss::PeerRestarted;
}

}  // namespace conclave
