package cluster

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// Signed gossip. The gossip key encrypts and authenticates memberlist packets, but every holder
// of the key can write any of them: a member's metadata (its server id, addresses, layout, ...)
// and the directory's records of who leads each Raft group. With TLS, both count only when the
// node they speak for signed them, so a holder of the gossip key without a node certificate of
// the cluster CA changes nothing.
//
// Each node makes a signing key at start (Ed25519, kept in memory only) and announces its
// public half on its gossip listener's probe stream, inside the TLS session that proves the
// node's id (tlsGossip.probe): the key a member proved is as good as its certificate, and a
// node that restarts announces a new one. It signs its metadata and the records of the groups it
// leads. Receivers check:
//
//   - metadata against the key of the member it names, proven at the member's gossip address;
//     each signature carries a sequence number that grows with every signature of that key, so
//     an older metadata replayed is refused;
//   - a record against the key of the node whose verified metadata holds the record's leader (a
//     server id), so only the leader a record names can have made it.
//
// Metadata unsigned, or signed with a key the member did not prove, waits for a probe made
// after it arrived (a node that restarted, or changed release, is proven again); metadata
// refused leaves the member as it was verified last (a member never verified stays unlisted).
// A record whose leader cannot be checked yet is held (see Directory); one refused is dropped.
// Refusals are logged, at most once a minute per member and reason, naming the member (and,
// for metadata, the fields that differ), never a key or a signature.
//
// A signed object travels as the JSON object it is with one more member, last: "sig":
// "<key id>.<sequence>.<signature>". The signature is over the object without that member,
// byte for byte (and the key id and sequence), so that objects stay checkable through
// releases that add fields, and a release that predates signatures reads the object as before
// (it ignores the member). The key id tells a signature of an earlier run of a node (a record
// it signed before it restarted, still relayed) from a forgery.
//
// Without TLS nothing is signed or checked: metadata and records are trusted to whoever holds
// the gossip key, or to anyone who reaches the gossip port when there is none.

// Purposes of signatures: a signature of one kind of object is never taken for another's.
const (
	purposeMeta   = "shardkeeper gossip metadata v1"
	purposeRecord = "shardkeeper gossip record v1"
)

// legacyKey stands for the key of a member whose probe announced none: it runs a release that
// predates signed gossip, and its metadata and records are trusted as gossip delivers them.
const legacyKey = "unsigned"

// announceEd25519 opens a probe stream's announcement of an Ed25519 public key.
const announceEd25519 byte = 1

// Reasons metadata or a record is refused.
var (
	errUnsigned      = errors.New("it is not signed, and its node signs what it gossips")
	errOtherKey      = errors.New("it is signed with another key than the one its node proved (an earlier run of that node, or forged)")
	errBadSignature  = errors.New("its signature does not verify with the key its node proved")
	errSignedByOther = errors.New("it is signed by another member than the one it names")
	errReplayed      = errors.New("it is older than metadata already accepted from its node (replayed)")
	errUnknownSigner = errors.New("the node it names is not a verified member")
)

// gossipSigner is this node's signing key. Safe for concurrent use.
type gossipSigner struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	kid  string
	seq  atomic.Uint64 // the last sequence number used
}

func newGossipSigner() (*gossipSigner, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("gossip signing key: %w", err)
	}
	return &gossipSigner{priv: priv, pub: pub, kid: keyID(pub)}, nil
}

// keyID names a public key: a hash of it, short enough for metadata's 512 bytes.
func keyID(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(h[:6])
}

// announcement is what this node's gossip listener tells a probe: its public key.
func (s *gossipSigner) announcement() []byte {
	return append([]byte{announceEd25519}, s.pub...)
}

// readAnnouncement reads a probed listener's announcement: nil, and no error, when the listener
// closed the stream without a word, as a release that predates signed gossip does.
func readAnnouncement(r io.Reader) (ed25519.PublicKey, error) {
	var buf [1 + ed25519.PublicKeySize]byte
	n, err := io.ReadFull(r, buf[:])
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read signing key: %w", err)
	case buf[0] != announceEd25519:
		return nil, fmt.Errorf("signing key of unknown kind %d", buf[0])
	}
	return ed25519.PublicKey(bytes.Clone(buf[1:])), nil
}

// seal signs obj, a JSON object, for purpose, and returns it with the signature member.
func (s *gossipSigner) seal(purpose string, obj []byte) []byte {
	header := s.kid + "." + strconv.FormatUint(s.seq.Add(1), 10)
	sig := ed25519.Sign(s.priv, signedMessage(purpose, header, obj))
	out := make([]byte, 0, len(obj)+len(sigMember)+len(header)+base64.RawURLEncoding.EncodedLen(len(sig))+4)
	out = append(out, obj[:len(obj)-1]...)
	if len(obj) > 2 { // not {}
		out = append(out, ',')
	}
	out = append(append(append(out, sigMember...), header...), '.')
	out = base64.RawURLEncoding.AppendEncode(out, sig)
	return append(out, `"}`...)
}

// sigMember opens the signature member of a sealed object (after the comma, if any).
const sigMember = `"sig":"`

// signedMessage is what a signature is made over: its purpose, its header (key id and
// sequence) and the object.
func signedMessage(purpose, header string, obj []byte) []byte {
	msg := make([]byte, 0, len(purpose)+len(header)+len(obj)+2)
	msg = append(append(msg, purpose...), 0)
	msg = append(append(msg, header...), 0)
	return append(msg, obj...)
}

// unseal splits b into the object that was signed and its signature; sig is "" when b carries
// none. Only obj, the signed bytes, may be decoded: whatever else b holds is not vouched for.
func unseal(b []byte) (obj []byte, sig string) {
	if !bytes.HasSuffix(b, []byte(`"}`)) {
		return b, ""
	}
	i := bytes.LastIndex(b, []byte(sigMember))
	if i < 1 {
		return b, ""
	}
	s := b[i+len(sigMember) : len(b)-2]
	if len(s) == 0 || bytes.ContainsFunc(s, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_' || r == '.')
	}) {
		return b, ""
	}
	start := i
	if b[i-1] == ',' {
		start = i - 1
	}
	return append(b[:start:start], '}'), string(s)
}

// verify checks sig, as unseal returned it, over obj for purpose with key, named kid; it
// returns the signature's sequence number.
func verify(key ed25519.PublicKey, kid, purpose string, obj []byte, sig string) (uint64, error) {
	if sig == "" {
		return 0, errUnsigned
	}
	parts := strings.Split(sig, ".")
	if len(parts) != 3 {
		return 0, errBadSignature
	}
	if parts[0] != kid {
		return 0, errOtherKey
	}
	seq, err := strconv.ParseUint(parts[1], 10, 64)
	raw, err2 := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || err2 != nil || len(raw) != ed25519.SignatureSize || len(key) != ed25519.PublicKeySize ||
		!ed25519.Verify(key, signedMessage(purpose, parts[0]+"."+parts[1], obj), raw) {
		return 0, errBadSignature
	}
	return seq, nil
}

// proof is what a TLS probe proved of a member: the gossip listener at addr holds the
// certificate of the member's node id and announced key (nil: a release that predates signed
// gossip). seq is the sequence number of the latest metadata accepted under key.
type proof struct {
	addr string
	key  ed25519.PublicKey
	at   time.Time
	seq  uint64
}

// kid is the name of the key the member proved, legacyKey if it announced none.
func (p proof) kid() string {
	if p.key == nil {
		return legacyKey
	}
	return keyID(p.key)
}

// sigKey is the key id a signature names ("" if none).
func sigKey(sig string) string {
	kid, _, _ := strings.Cut(sig, ".")
	return kid
}

// signedByOther turns errOtherKey into errSignedByOther when the key that signed (named in
// sig) is the one another member than node proved, or this node's own: then it is forged, not
// an earlier run's. m.mu is held.
func (m *Membership) signedByOther(err error, sig, node string) error {
	if !errors.Is(err, errOtherKey) {
		return err
	}
	kid := sigKey(sig)
	if m.signer != nil && kid == m.signer.kid && node != m.local.ID {
		return errSignedByOther
	}
	for id, p := range m.proven {
		if id != node && p.key != nil && p.kid() == kid {
			return errSignedByOther
		}
	}
	return err
}

// checkMeta checks obj, metadata of the member p proves, and its signature; on success it
// records the signature's sequence number in p. A member that announced no key is trusted.
// errUnsigned and errOtherKey may be cured by proving the member again (it changed release, or
// restarted); errBadSignature and errReplayed may not.
func (p *proof) checkMeta(obj []byte, sig string) error {
	if p.key == nil && sig == "" {
		return nil
	}
	if p.key == nil {
		// Signed, by a member proven without a key: it has been upgraded since (a new probe
		// will tell), or the signature is forged.
		return errOtherKey
	}
	seq, err := verify(p.key, p.kid(), purposeMeta, obj, sig)
	if err != nil {
		return err
	}
	if seq < p.seq {
		return errReplayed
	}
	p.seq = seq
	return nil
}

// sealMeta is meta as this node gossips it: signed with its key when it has one.
func (m *Membership) sealMeta(meta NodeMeta) []byte {
	b, _ := json.Marshal(meta) // a struct of strings, numbers and booleans: no error
	if m.signer == nil {
		return b
	}
	return m.signer.seal(purposeMeta, b)
}

// ownKey is the name of the key this node signs with: "" without TLS, legacyKey when it signs
// nothing.
func (m *Membership) ownKey() string {
	switch {
	case m.tls == nil:
		return ""
	case m.signer == nil:
		return legacyKey
	}
	return m.signer.kid
}

// SealRecord signs obj, a directory record of a group this node leads, and returns what to
// gossip and the name of the key that signed it. Without TLS obj goes as it is.
func (m *Membership) SealRecord(obj []byte) (sealed []byte, key string) {
	if m.signer == nil {
		return obj, m.ownKey()
	}
	return m.signer.seal(purposeRecord, obj), m.signer.kid
}

// CheckRecord checks that sig over obj, a directory record naming leader (a server id), was
// made by the member whose verified metadata holds that server id, and returns the name of its
// key. errUnknownSigner means this node cannot tell yet (no verified member holds leader: its
// probe may be under way); any other error, that the record is not that member's. Without TLS
// every record passes.
func (m *Membership) CheckRecord(obj []byte, sig, leader string) (key string, err error) {
	if m.tls == nil {
		return "", nil
	}
	node := persistence.NodeOfServer(leader)
	m.mu.Lock()
	defer m.mu.Unlock()
	if node == m.local.ID {
		switch {
		case m.local.ServerID != leader:
			return "", errUnknownSigner // an earlier incarnation of this node
		case m.signer == nil:
			return legacyKey, nil
		}
		_, err := verify(m.signer.pub, m.signer.kid, purposeRecord, obj, sig)
		return m.signer.kid, m.signedByOther(err, sig, node)
	}
	s, listed := m.members[node]
	p, proven := m.proven[node]
	switch {
	case !listed || !proven || s.meta.ServerID != leader:
		return "", errUnknownSigner
	case p.key == nil && sig == "":
		return legacyKey, nil
	case p.key == nil:
		if err := m.signedByOther(errOtherKey, sig, node); !errors.Is(err, errOtherKey) {
			return "", err
		}
		return "", errUnknownSigner // upgraded since it was proven: its next probe tells
	}
	if _, err := verify(p.key, p.kid(), purposeRecord, obj, sig); err != nil {
		return "", m.signedByOther(err, sig, node)
	}
	return p.kid(), nil
}

// SignerKey is the name of the key the live, verified member holding server id signs with now
// (legacyKey for a release that predates signed gossip); "" when no such member is known here,
// and always "" without TLS. A record counts only while its leader's key is the one that
// signed it.
func (m *Membership) SignerKey(serverID string) string {
	if m.tls == nil {
		return ""
	}
	node := persistence.NodeOfServer(serverID)
	m.mu.Lock()
	defer m.mu.Unlock()
	if node == m.local.ID {
		if m.local.ServerID != serverID {
			return ""
		}
		return m.ownKey()
	}
	s, listed := m.members[node]
	p, proven := m.proven[node]
	if !listed || !proven || s.gone != "" || s.meta.ServerID != serverID {
		return ""
	}
	return p.kid()
}

// changedFields names (as gossip does) the fields of NodeMeta that differ between a and b.
func changedFields(a, b NodeMeta) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		if va.Field(i).Interface() != vb.Field(i).Interface() {
			name, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
	}
	return out
}
