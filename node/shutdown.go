package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/shardkeeper/shardkeeper/cluster"
)

// Stopping: a graceful shutdown drains the HTTP server, hands this node's replicas and
// leaderships on, and closes the parts in the reverse order of their start.

// Done delivers the error that stops the node on its own: the HTTP server's, or a cluster
// of another layout found after a late join.
func (n *Node) Done() <-chan error { return n.served }

// Shutdown leaves the cluster gracefully. With --leave-timeout above zero it marks this node
// retiring, so that the Raft groups it replicates move their replicas to other nodes (when
// there are enough of them). It drains (--shutdown-drain: /readyz fails and every response
// closes its connection), stops taking requests (in-flight ones finish until ctx ends), waits
// until no group counts on this node any more (at most --leave-timeout), hands over the
// leadership of every group still led here, leaves gossip, then stops the runtime, Raft and
// storage.
func (n *Node) Shutdown(ctx context.Context) error {
	var errs []error
	if n.membership != nil && n.cfg.LeaveTimeout > 0 {
		n.membership.Update(func(m *cluster.NodeMeta) { m.Retiring = true })
	}
	if n.http != nil && n.cfg.ShutdownDrain > 0 {
		n.draining.Store(true)
		n.logger.Info("draining before shutdown", "for", n.cfg.ShutdownDrain.String())
		t := time.NewTimer(n.cfg.ShutdownDrain)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if n.http != nil {
		if err := n.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	n.handOff(ctx)
	if n.host != nil {
		n.host.TransferLeadership()
	}
	if n.membership != nil {
		// A leave that times out (every member stopping at once) is not a failed shutdown:
		// the others learn of it by failure detection instead.
		if err := n.membership.Leave(2 * time.Second); err != nil {
			n.logger.Warn("leave gossip", "error", err)
		}
		n.membership = nil
	}
	errs = append(errs, n.close())
	return errors.Join(errs...)
}

// handOff waits, at most --leave-timeout, until no Raft group counts on this node
// (cluster.AwaitingHandOff): the groups' leaders add a replica on another node, promote it
// once caught up, then remove this one, so that no group is left short of a voter when this
// node exits, and none loses its quorum with it.
func (n *Node) handOff(ctx context.Context) {
	if n.cfg.LeaveTimeout <= 0 || n.membership == nil || n.directory == nil {
		return
	}
	start := time.Now()
	timeout := time.NewTimer(n.cfg.LeaveTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	logged := start
	for {
		pending := cluster.AwaitingHandOff(n.directory.Configurations(), n.membership.Alive(), n.cfg.Replicas, n.membership.Local())
		if len(pending) == 0 {
			if waited := time.Since(start); waited > time.Second {
				n.logger.Info("replicas handed over to other nodes", "waited", waited.Round(time.Millisecond).String())
			}
			return
		}
		if time.Since(logged) >= 5*time.Second {
			logged = time.Now()
			n.logger.Info("waiting for other nodes to take over this node's replicas", "raft_groups", pending,
				"waited", time.Since(start).Round(time.Second).String())
		}
		select {
		case <-tick.C:
		case <-timeout.C:
			n.logger.Warn("leaving before every Raft group it replicates can do without it: these groups run a voter short, or without a quorum, until enough nodes are back",
				"raft_groups", pending, "leave_timeout", n.cfg.LeaveTimeout.String())
			return
		case <-ctx.Done():
			n.logger.Warn("leaving with replicas not yet taken over", "raft_groups", pending, "error", ctx.Err())
			return
		}
	}
}

func (n *Node) close() error {
	var errs []error
	select {
	case <-n.stop:
	default:
		close(n.stop)
	}
	n.wg.Wait()
	if n.http == nil && n.ln != nil {
		n.ln.Close()
	}
	if n.debug != nil {
		n.debug.Close()
	}
	if n.admin != nil {
		n.admin.Close()
	} else if n.adminLn != nil {
		n.adminLn.Close()
	}
	if n.router != nil {
		n.router.Stop()
	}
	if n.reconciler != nil {
		n.reconciler.Stop()
	}
	if n.directory != nil {
		n.directory.Stop()
	}
	if n.membership != nil {
		errs = append(errs, n.membership.Shutdown())
	}
	if n.runtime != nil {
		n.runtime.Close()
	}
	if n.host != nil {
		errs = append(errs, n.host.Close())
	}
	if n.remote != nil {
		n.remote.Shutdown(false)
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

// drainAware closes every connection after its response while the node drains, so that no
// client is left holding an idle keep-alive connection when the listener shuts: a request
// written on one at that moment would be lost with an unknown outcome.
func (n *Node) drainAware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
