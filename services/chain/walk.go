package chain

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/arweave/ans104"
)

// Where the verifier reads events from: one L1 transaction each, or the items of bundles.

// walked is an event as read and checked on its own: its data, its tags and its signer.
type walked struct {
	data  []byte
	tags  []arweave.Tag
	owner []byte
	// tx is the L1 transaction that holds the event (itself in the L1 mode, its bundle's
	// wrapper in bundle mode), and wallet that transaction's signer.
	tx     string
	wallet []byte
	item   bool // a data item, not a transaction
}

// eventSource reads event id, which the walk expects to be event seq (-1: the head, unknown).
// Its errors are the reasons the walk reports.
type eventSource interface {
	event(ctx context.Context, id string, seq int64) (walked, error)
}

// l1Events reads events that are transactions.
type l1Events struct{ g Reader }

func (s l1Events) event(ctx context.Context, id string, _ int64) (walked, error) {
	tx, err := readTx(ctx, s.g, id)
	if err != nil {
		return walked{}, err
	}
	return walked{data: tx.Data, tags: tx.Tags, owner: tx.Owner, tx: id, wallet: tx.Owner}, nil
}

// readTx reads transaction id with its data, and checks its signature, its id and its data
// against its root.
func readTx(ctx context.Context, g Reader, id string) (*arweave.Tx, error) {
	tx, err := readHeader(ctx, g, id)
	if err != nil {
		return nil, err
	}
	return withData(ctx, g, tx)
}

// readHeader reads transaction id's header and checks its signature and its id.
func readHeader(ctx context.Context, g Reader, id string) (*arweave.Tx, error) {
	tx, err := g.Tx(ctx, id)
	switch {
	case errors.Is(err, arweave.ErrNotFound):
		return nil, errors.New("the gateway does not know the transaction")
	case errors.Is(err, arweave.ErrPending):
		return nil, errors.New("the transaction is not mined yet")
	case err != nil:
		return nil, fmt.Errorf("cannot read the transaction: %v", err)
	}
	if err := tx.Verify(); err != nil {
		return nil, err
	}
	if tx.IDString() != id {
		return nil, fmt.Errorf("the gateway answered transaction %s", tx.IDString())
	}
	return tx, nil
}

// withData reads the data of tx (a checked header) and checks it against its root.
func withData(ctx context.Context, g Reader, tx *arweave.Tx) (*arweave.Tx, error) {
	data, err := g.Data(ctx, tx.IDString())
	if err != nil {
		return nil, fmt.Errorf("cannot read the data: %v", err)
	}
	tx.Data = data
	if err := tx.Verify(); err != nil { // now with the data: its size and root
		return nil, err
	}
	return tx, nil
}

func tagMap(tags []arweave.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[string(t.Name)] = string(t.Value)
	}
	return m
}

// bundleEvents reads events that are the items of bundles, walking the wrappers back from
// the head's.
type bundleEvents struct {
	g      Reader
	wallet []byte                      // the wrappers' signer
	items  map[string]*ans104.DataItem // the current bundle's, by id
	first  int64                       // the current bundle's first seq
	id     string                      // the current bundle's wrapper
	prev   string                      // the wrapper before the current one
	chain  string
}

// openBundles reads head; when it is a bundle's wrapper, it returns the walk of bundles and
// the id of the chain's last event, its last item. (nil, "", nil): head is not a wrapper.
func openBundles(ctx context.Context, g Reader, head string) (*bundleEvents, string, error) {
	tx, err := readHeader(ctx, g, head)
	if err != nil || tagMap(tx.Tags)["Bundle-Format"] == "" {
		return nil, "", nil // the L1 walk reads it again, and reports what is wrong
	}
	if tx, err = withData(ctx, g, tx); err != nil {
		return nil, "", fmt.Errorf("bundle %s: %v", head, err)
	}
	b := &bundleEvents{g: g}
	last, err := b.take(tx, head, -1)
	if err != nil {
		return nil, "", err
	}
	return b, last, nil
}

// load reads the wrapper id, which must end at event last, and its items; it returns the id
// of its last item.
func (b *bundleEvents) load(ctx context.Context, id string, last int64) (string, error) {
	tx, err := readTx(ctx, b.g, id)
	if err != nil {
		return "", fmt.Errorf("bundle %s: %v", id, err)
	}
	return b.take(tx, id, last)
}

// take checks wrapper tx (id, read with its data), which must end at event last (-1: the
// head, any), and makes its items the current bundle's; it returns the id of its last item.
func (b *bundleEvents) take(tx *arweave.Tx, id string, last int64) (string, error) {
	if b.wallet != nil && string(tx.Owner) != string(b.wallet) {
		return "", fmt.Errorf("bundle %s is signed by wallet %s, the chain's later bundles by %s", id, arweave.AddressOf(tx.Owner), arweave.AddressOf(b.wallet))
	}
	b.wallet = tx.Owner
	tags := tagMap(tx.Tags)
	first, err1 := strconv.ParseInt(tags["First-Seq"], 10, 64)
	end, err2 := strconv.ParseInt(tags["Last-Seq"], 10, 64)
	switch {
	case tags["Bundle-Format"] != ans104.BundleFormat || tags["Bundle-Version"] != ans104.BundleVersion:
		return "", fmt.Errorf("bundle %s is tagged Bundle-Format %q, Bundle-Version %q", id, tags["Bundle-Format"], tags["Bundle-Version"])
	case b.chain != "" && (tags["App-Name"] != "shardkeeper" || tags["Chain"] != b.chain):
		return "", fmt.Errorf("bundle %s is tagged App-Name %q, Chain %q: not a bundle of chain %q", id, tags["App-Name"], tags["Chain"], b.chain)
	case err1 != nil || err2 != nil || first < 1 || end < first:
		return "", fmt.Errorf("bundle %s names events %q to %q", id, tags["First-Seq"], tags["Last-Seq"])
	case last >= 0 && end != last:
		return "", fmt.Errorf("bundle %s ends at event %d where %d was due: a gap or a fork", id, end, last)
	case first == 1 && tags["Prev-Bundle"] != "":
		return "", fmt.Errorf("bundle %s starts the chain and names a previous bundle", id)
	}
	b.chain = tags["Chain"]
	items, err := ans104.ParseBundle(tx.Data)
	if err != nil {
		return "", fmt.Errorf("bundle %s: %v", id, err)
	}
	if int64(len(items)) != end-first+1 {
		return "", fmt.Errorf("bundle %s holds %d items for events %d to %d", id, len(items), first, end)
	}
	b.items, b.first, b.id, b.prev = map[string]*ans104.DataItem{}, first, id, tags["Prev-Bundle"]
	for _, it := range items {
		b.items[it.IDString()] = it
	}
	return items[len(items)-1].IDString(), nil
}

func (b *bundleEvents) event(ctx context.Context, id string, seq int64) (walked, error) {
	if seq >= 0 && seq < b.first && b.prev == "" {
		// The first bundle of a chain that was in the L1 mode before: the events before it
		// are transactions (its first item names the last of them).
		return l1Events{b.g}.event(ctx, id, seq)
	}
	if seq >= 0 && seq < b.first {
		if _, err := b.load(ctx, b.prev, seq); err != nil {
			return walked{}, err
		}
	}
	it, ok := b.items[id]
	if !ok {
		return walked{}, errors.New("the item is not in the bundle that holds its seq")
	}
	if err := it.Verify(); err != nil {
		return walked{}, err
	}
	return walked{data: it.Data(), tags: it.Tags(), owner: it.Owner(), tx: b.id, wallet: b.wallet, item: true}, nil
}
