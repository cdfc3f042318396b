package cluster

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/shardkeeper/shardkeeper/pki"
	"google.golang.org/grpc/credentials"
)

// PeerCredentials are actor remoting's gRPC credentials with TLS (pki.Peers): the server side
// accepts node certificates of the cluster CA; a dial accepts only the certificate of the
// member gossip lists at the remoting address dialed (any node's for an address no member
// has, which a router never dials).
type PeerCredentials struct {
	credentials.TransportCredentials // the server side, and what the client side shares
	peers                            *pki.Peers
	members                          atomic.Pointer[Membership]
}

// NewPeerCredentials returns the credentials of peers; SetMembers tells them who is where.
func NewPeerCredentials(peers *pki.Peers) *PeerCredentials {
	return &PeerCredentials{TransportCredentials: credentials.NewTLS(peers.ServerConfig()), peers: peers}
}

// SetMembers gives the membership whose remoting addresses dials are checked against.
func (c *PeerCredentials) SetMembers(m *Membership) { c.members.Store(m) }

// ClientHandshake runs TLS with the node gossip lists at authority (host:port).
func (c *PeerCredentials) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	want := ""
	if m := c.members.Load(); m != nil {
		for _, mem := range m.Members() {
			if mem.Remote == authority && !mem.Gone() {
				want = mem.ID
			}
		}
	}
	return credentials.NewTLS(c.peers.ClientConfig(want)).ClientHandshake(ctx, authority, conn)
}

// Clone returns c: its state is the membership pointer, shared on purpose.
func (c *PeerCredentials) Clone() credentials.TransportCredentials { return c }
