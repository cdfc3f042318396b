package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// Gossip key rotation, as Consul's keyring: install the new key on every member, make it
// the key every member encrypts with (use), then remove the old one. A member decrypts with
// any installed key, so the cluster stays whole at every step.
//
// A change is applied here, then broadcast over gossip (encrypted with the key in use) to
// every member, again every keyringResend until each alive member shows it — members gossip
// the fingerprints of their keys in their metadata (NodeMeta.Keys) — or the caller gives up.
// Each member keeps its keyring in its data directory (MembershipConfig.KeyringFile), so a
// restart keeps the keys it had.

// Key operations.
const (
	KeyInstall = "install"
	KeyUse     = "use"
	KeyRemove  = "remove"
)

const (
	msgKeyring    byte = 'k' // then the operation's first byte and the key
	keyringResend      = 500 * time.Millisecond
)

// ErrNotEncrypted is returned by key changes on a cluster started without --gossip-key.
var ErrNotEncrypted = errors.New("gossip is not encrypted (start every node with --gossip-key to rotate keys)")

// KeyStatus is one member's keyring as it gossips it, and whether it shows a change asked for.
type KeyStatus struct {
	NodeID string   `json:"node_id"`
	State  string   `json:"state"`
	Keys   []string `json:"keys"` // fingerprints, the key in use first
	Done   bool     `json:"done,omitempty"`
}

// Fingerprint names a key without revealing it: the first 12 hex digits of its SHA-256.
func Fingerprint(key []byte) string {
	h := sha256.Sum256(key)
	return hex.EncodeToString(h[:6])
}

// keyringFile is the keyring as kept on disk: base64 keys, the one in use first.
type keyringFile struct {
	Keys []string `json:"keys"`
}

// loadKeyring builds the keyring at start: the keys of file when it exists — they are what
// this node was rotated to, so key, the configured one, is then ignored (as Consul does; a
// key removed by a rotation must not come back with an old flag) — else key alone. Nil when
// there is neither; ignored reports a configured key that is not in the file.
func loadKeyring(file string, key []byte) (kr *memberlist.Keyring, ignored bool, err error) {
	var keys [][]byte
	if file != "" {
		b, err := readKeyringFile(file)
		switch {
		case err == nil:
			var kf keyringFile
			if err := json.Unmarshal(b, &kf); err != nil {
				return nil, false, fmt.Errorf("gossip keyring %s: %w", file, err)
			}
			for _, s := range kf.Keys {
				k, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return nil, false, fmt.Errorf("gossip keyring %s: a key is not base64", file)
				}
				keys = append(keys, k)
			}
		case !errors.Is(err, os.ErrNotExist):
			return nil, false, fmt.Errorf("gossip keyring: %w", err)
		}
	}
	switch {
	case len(keys) > 0:
		ignored = len(key) > 0 && !slices.ContainsFunc(keys, func(k []byte) bool { return string(k) == string(key) })
	case len(key) > 0:
		keys = [][]byte{key}
	default:
		return nil, false, nil
	}
	if kr, err = memberlist.NewKeyring(keys[1:], keys[0]); err != nil {
		return nil, false, fmt.Errorf("gossip keyring: %w", err)
	}
	return kr, ignored, nil
}

// readKeyringFile reads the keyring file, refusing one that other users can access.
func readKeyringFile(file string) ([]byte, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("gossip keyring %s is accessible by other users (mode %04o): make it readable by its owner only (chmod 600)", file, st.Mode().Perm())
	}
	return os.ReadFile(file)
}

// saveKeyring writes keys (the one in use first) to file, owner-only, durably: the new file
// is synced, renamed into place, and the directory synced.
func saveKeyring(file string, keys [][]byte) error {
	var kf keyringFile
	for _, k := range keys {
		kf.Keys = append(kf.Keys, base64.StdEncoding.EncodeToString(k))
	}
	b, _ := json.Marshal(kf)
	tmp := file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("save gossip keyring: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save gossip keyring: %w", err)
	}
	if d, err := os.Open(filepath.Dir(file)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// nextKeys is the keyring (the key in use first) after op with key, or why op is refused.
func nextKeys(op string, keys [][]byte, key []byte) ([][]byte, error) {
	switch len(key) {
	case 16, 24, 32:
	default:
		return nil, errors.New("a gossip key is 16, 24 or 32 bytes")
	}
	i := slices.IndexFunc(keys, func(k []byte) bool { return string(k) == string(key) })
	switch op {
	case KeyInstall:
		if i >= 0 {
			return keys, nil
		}
		return append(slices.Clone(keys), key), nil
	case KeyUse:
		if i < 0 {
			return nil, errors.New("the key is not installed: install it first")
		}
		return append([][]byte{key}, slices.Delete(slices.Clone(keys), i, i+1)...), nil
	case KeyRemove:
		if i == 0 {
			return nil, errors.New("the key is in use: use another key first")
		}
		if i < 0 {
			return keys, nil
		}
		return slices.Delete(slices.Clone(keys), i, i+1), nil
	}
	return nil, fmt.Errorf("unknown key operation %q (install, use or remove)", op)
}

// fingerprints lists the keyring's keys by fingerprint, the one in use first.
func fingerprints(kr *memberlist.Keyring) string {
	var fps []string
	for _, k := range kr.GetKeys() { // GetKeys puts the primary key first
		fps = append(fps, Fingerprint(k))
	}
	return strings.Join(fps, ",")
}

// applyKey applies a key operation to this member's keyring: the new keyring is saved first,
// then used, then its fingerprints gossiped. An operation that changes nothing (a repeat)
// does nothing.
func (m *Membership) applyKey(op string, key []byte) error {
	if m.keyring == nil {
		return ErrNotEncrypted
	}
	m.keyMu.Lock()
	defer m.keyMu.Unlock()
	keys := m.keyring.GetKeys() // the primary key first
	next, err := nextKeys(op, keys, key)
	if err != nil {
		return fmt.Errorf("gossip key %s: %w", op, err)
	}
	if slices.EqualFunc(next, keys, func(a, b []byte) bool { return string(a) == string(b) }) {
		return nil
	}
	if m.cfg.KeyringFile != "" {
		if err := saveKeyring(m.cfg.KeyringFile, next); err != nil {
			return err
		}
	}
	switch op {
	case KeyInstall:
		err = m.keyring.AddKey(key)
	case KeyUse:
		err = m.keyring.UseKey(key)
	case KeyRemove:
		err = m.keyring.RemoveKey(key)
	}
	if err != nil {
		// memberlist's errors name the operation, never the key.
		return fmt.Errorf("gossip key %s: %w", op, err)
	}
	fps := fingerprints(m.keyring)
	m.Update(func(meta *NodeMeta) { meta.Keys = fps })
	return nil
}

// ChangeKey applies op with key on every member: here at once, then on the others through
// gossip until every alive member shows it or ctx ends. It returns each member's keyring;
// complete is true when every alive member shows the change.
func (m *Membership) ChangeKey(ctx context.Context, op string, key []byte) (status []KeyStatus, complete bool, err error) {
	if op == KeyRemove && m.keyring != nil {
		// Refused before anything changes: a member still using the key would be cut off.
		for _, s := range m.KeyStatus("", nil) {
			if s.State != StateLeft && s.State != StateFailed && len(s.Keys) > 0 && s.Keys[0] == Fingerprint(key) {
				return nil, false, fmt.Errorf("member %s still uses the key: use another key first", s.NodeID)
			}
		}
	}
	if err := m.applyKey(op, key); err != nil {
		return nil, false, err
	}
	msg := append([]byte{msgKeyring, op[0]}, key...)
	t := time.NewTicker(keyringResend)
	defer t.Stop()
	for {
		m.queue.QueueBroadcast(&broadcast{name: "keyring", msg: msg})
		status, complete = m.keyStatus(op, key)
		if complete {
			return status, true, nil
		}
		select {
		case <-ctx.Done():
			return status, false, nil
		case <-t.C:
		}
	}
}

// KeyStatus returns every member's keyring as gossiped, marking Done those that show op with
// key applied (op may be empty).
func (m *Membership) KeyStatus(op string, key []byte) []KeyStatus {
	s, _ := m.keyStatus(op, key)
	return s
}

func (m *Membership) keyStatus(op string, key []byte) ([]KeyStatus, bool) {
	fp := Fingerprint(key)
	complete := true
	var out []KeyStatus
	for _, mem := range m.Members() {
		s := KeyStatus{NodeID: mem.ID, State: mem.State}
		if mem.Keys != "" {
			s.Keys = strings.Split(mem.Keys, ",")
		}
		switch op {
		case KeyInstall:
			s.Done = slices.Contains(s.Keys, fp)
		case KeyUse:
			s.Done = len(s.Keys) > 0 && s.Keys[0] == fp
		case KeyRemove:
			s.Done = !slices.Contains(s.Keys, fp)
		}
		if !s.Done && !mem.Gone() {
			complete = false
		}
		out = append(out, s)
	}
	return out, complete
}

// keyChanges applies, one at a time, the key operations other members gossip (queued by
// NotifyMsg; a full queue drops them, and the sender repeats until every member shows its
// change).
func (m *Membership) keyChanges() {
	for {
		select {
		case <-m.stop:
			return
		case buf := <-m.keyOps:
			if len(buf) < 2 {
				continue
			}
			op := map[byte]string{'i': KeyInstall, 'u': KeyUse, 'r': KeyRemove}[buf[0]]
			if err := m.applyKey(op, buf[1:]); err != nil {
				m.cfg.Logger.Warn("gossiped key change not applied", "op", op, "error", err)
			}
		}
	}
}
