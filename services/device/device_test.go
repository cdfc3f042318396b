package device_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/services/device"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// newHarness starts a runtime running the device kind with cfg; clock may be nil (the wall
// clock).
func newHarness(t testing.TB, cfg device.Config, clock func() time.Time) *actortest.Harness {
	t.Helper()
	return actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: clock}}, device.Kind(cfg))
}

// call sends one request to registry and decodes the reply into out. A domain outcome is
// returned as *actors.Error; any other failure stops the test.
func call(t testing.TB, h *actortest.Harness, registry, method string, in, out any) *actors.Error {
	t.Helper()
	// The runtime takes the request's deadline from its own (possibly fake) clock.
	err := h.CallJSON(device.KindName, registry, method, in, out)
	var outcome *actors.Error
	if errors.As(err, &outcome) {
		return outcome
	}
	if err != nil {
		t.Fatalf("%s %s: %v", method, registry, err)
	}
	return nil
}

// state is a registry's committed storage, parsed. The layout is the one documented in
// package device; the actor's keys sit under 'a'<kind><id> and its alarms under 'b'<kind><id>
// in the partition (docs/runtime.md).
type state struct {
	count   int
	devices map[string]storedDevice
	seen    map[string]int64 // device → last_seen of its seen/ entry
	nonces  map[string]storedNonce
	exp     map[string]storedNonce // nonce → the record its exp/ entry holds
	expAt   map[string]int64       // nonce → the time in its exp/ key
	pend    map[string]map[string]int64
	gcDue   int64 // 0: no gc alarm
	keys    int   // every key of the actor, alarms included
}

type storedDevice struct {
	RegisteredAt int64 `json:"registered_at"`
	LastSeen     int64 `json:"last_seen"`
	Pending      int   `json:"pending"`
}

type storedNonce struct {
	ExpiresAt int64
	Used      bool
	DeviceID  string
}

func parseNonce(t testing.TB, v []byte) storedNonce {
	t.Helper()
	if len(v) < 9 || v[8] > 1 {
		t.Fatalf("malformed nonce record %x", v)
	}
	return storedNonce{ExpiresAt: int64(binary.BigEndian.Uint64(v)), Used: v[8] == 1, DeviceID: string(v[9:])}
}

// read parses the registry's committed storage, read in one consistent scan.
func read(t testing.TB, h *actortest.Harness, registry string) state {
	t.Helper()
	s := state{devices: map[string]storedDevice{}, seen: map[string]int64{}, nonces: map[string]storedNonce{},
		exp: map[string]storedNonce{}, expAt: map[string]int64{}, pend: map[string]map[string]int64{}}
	st := h.State(device.KindName, registry)
	for name, a := range st.Alarms {
		if name != device.GCAlarm {
			t.Fatalf("unexpected alarm %q", name)
		}
		s.gcDue = a.Due
	}
	s.keys = st.Keys()
	for _, kv := range st.Data {
		key, v := kv.Key, kv.Value
		name, rest, _ := bytes.Cut(key, []byte("/"))
		switch string(name) {
		case "meta":
			if string(rest) != "count" || len(v) != 8 {
				t.Fatalf("unexpected meta key %q = %x", key, v)
			}
			s.count = int(binary.BigEndian.Uint64(v))
		case "dev":
			var d storedDevice
			if err := json.Unmarshal(v, &d); err != nil {
				t.Fatal(err)
			}
			s.devices[string(rest)] = d
		case "seen":
			if _, dup := s.seen[string(rest[8:])]; dup {
				t.Fatalf("two seen/ entries for %q", rest[8:])
			}
			s.seen[string(rest[8:])] = int64(binary.BigEndian.Uint64(rest))
		case "nonce":
			s.nonces[string(rest)] = parseNonce(t, v)
		case "exp":
			s.exp[string(rest[8:])] = parseNonce(t, v)
			s.expAt[string(rest[8:])] = int64(binary.BigEndian.Uint64(rest))
		case "pend":
			id, tail, ok := bytes.Cut(rest, []byte("/"))
			if !ok || len(tail) < 8 {
				t.Fatalf("malformed pend key %q", key)
			}
			if s.pend[string(id)] == nil {
				s.pend[string(id)] = map[string]int64{}
			}
			s.pend[string(id)][string(tail[8:])] = int64(binary.BigEndian.Uint64(tail))
		default:
			t.Fatalf("unexpected key %q", key)
		}
	}
	return s
}

// check asserts the storage invariants of package device on s, read at now; ttls are in ms.
func (s state) check(t testing.TB, nonceTTL, deviceTTL, now int64) {
	t.Helper()
	if s.count != len(s.devices) {
		t.Fatalf("meta/count %d with %d device records", s.count, len(s.devices))
	}
	if len(s.seen) != len(s.devices) {
		t.Fatalf("%d seen/ entries for %d devices", len(s.seen), len(s.devices))
	}
	earliest := int64(-1)
	due := func(at int64) {
		if earliest < 0 || at < earliest {
			earliest = at
		}
	}
	for id, d := range s.devices {
		if seen, ok := s.seen[id]; !ok || seen != d.LastSeen {
			t.Fatalf("device %s last_seen %d, seen/ entry %d (present %v)", id, d.LastSeen, seen, ok)
		}
		if d.Pending != len(s.pend[id]) {
			t.Fatalf("device %s counts %d pending, has %d pend/ entries", id, d.Pending, len(s.pend[id]))
		}
		due(d.LastSeen + deviceTTL)
	}
	if len(s.exp) != len(s.nonces) {
		t.Fatalf("%d exp/ entries for %d nonces", len(s.exp), len(s.nonces))
	}
	unused := 0
	for n, r := range s.nonces {
		if s.exp[n] != r || s.expAt[n] != r.ExpiresAt {
			t.Fatalf("nonce %s: record %+v, exp/ entry %+v at %d", n, r, s.exp[n], s.expAt[n])
		}
		exp, pending := s.pend[r.DeviceID][n]
		if pending != !r.Used || (pending && exp != r.ExpiresAt) {
			t.Fatalf("nonce %s (%+v): pend/ entry %v at %d", n, r, pending, exp)
		}
		if !r.Used {
			unused++
			if _, ok := s.devices[r.DeviceID]; !ok {
				t.Fatalf("unused nonce %s of device %s, which is not stored", n, r.DeviceID)
			}
		}
		due(r.ExpiresAt + nonceTTL)
	}
	total := 0
	for _, p := range s.pend {
		total += len(p)
	}
	if total != unused {
		t.Fatalf("%d pend/ entries for %d unused nonces", total, unused)
	}
	switch alarm := min(s.gcDue, 1); {
	case earliest < 0 && s.keys != int(alarm):
		// Only the gc alarm may remain, until it fires and finds nothing to do.
		t.Fatalf("a registry with nothing to expire holds %d keys", s.keys)
	case earliest >= 0 && (s.gcDue == 0 || s.gcDue > max(earliest, now)):
		// A firing that leaves due entries behind re-arms for its own time, later than theirs.
		t.Fatalf("gc alarm due %d; the earliest collection is due %d, now is %d", s.gcDue, earliest, now)
	}
}

type keyPair struct {
	pub  string
	priv ed25519.PrivateKey
}

func newKeys(t testing.TB, n int) []keyPair {
	t.Helper()
	out := make([]keyPair, n)
	for i := range out {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = keyPair{pub: base64.StdEncoding.EncodeToString(pub), priv: priv}
	}
	return out
}

func (k keyPair) sign(nonce string) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, []byte(nonce)))
}

// model is what a registry must answer, kept by the test. Devices stay in it after they
// expire (an expired device must behave as absent whether or not it was collected).
type model struct {
	cfg     device.Config
	devices map[string]*modelDevice
	nonces  map[string]*modelNonce
	inst    int
}

type modelDevice struct {
	inst             int // distinguishes registrations of the same id
	key              int
	version          string
	registered, seen int64
}

type modelNonce struct {
	seq    int // issue order
	device string
	inst   int
	exp    int64
	used   bool
}

// pickNonce picks a nonce for device id: of w = {n, a, b, c}, a draw r in [0, n) below a
// takes an unused nonce of the device, below b one it used, below c any nonce issued, else one
// never issued (falling through when there is none). Nonces are listed in issue order, so that
// the seed replays the choices.
func (m *model) pickNonce(rng *mrand.Rand, id string, w [4]int) string {
	var unused, used, any []string
	for _, n := range m.issued() {
		switch mn := m.nonces[n]; {
		case mn.device == id && !mn.used:
			unused = append(unused, n)
		case mn.device == id:
			used = append(used, n)
		}
		any = append(any, n)
	}
	switch r := rng.IntN(w[0]); {
	case r < w[1] && len(unused) > 0:
		return unused[rng.IntN(len(unused))]
	case r < w[2] && len(used) > 0:
		return used[rng.IntN(len(used))]
	case r < w[3] && len(any) > 0:
		return any[rng.IntN(len(any))]
	}
	return base64.RawURLEncoding.EncodeToString(make([]byte, 32))
}

func (m *model) live(id string, now int64) *modelDevice {
	d := m.devices[id]
	if d == nil || now >= d.seen+m.cfg.DeviceTTL.Milliseconds() {
		return nil
	}
	return d
}

// pending lists the unexpired unused nonces of a live device.
func (m *model) pending(d *modelDevice, id string, now int64) []*modelNonce {
	var out []*modelNonce
	for _, n := range m.nonces {
		if n.device == id && n.inst == d.inst && !n.used && now < n.exp {
			out = append(out, n)
		}
	}
	return out
}

// prove is what a register of the live device id (the model's d) with another key and no
// admin token must answer, with the proof nonce, sig: the code, or "" for success, and an
// alternative code also right ("" for none) when the gc alarm may have removed the nonce. It
// records the consumption in the model.
func (m *model) prove(id string, d *modelDevice, nonce, sig string, keys []keyPair, now int64) (string, string) {
	if nonce == "" {
		return "device_exists", ""
	}
	n := m.nonces[nonce]
	if n == nil || n.device != id {
		return "unknown_nonce", ""
	}
	alt := ""
	if now >= n.exp+m.cfg.NonceTTL.Milliseconds() { // retired: the gc alarm may have removed it
		alt = "unknown_nonce"
	}
	if n.used {
		return "nonce_used", alt
	}
	if n.inst != d.inst { // an unused nonce went with its device's earlier registration
		delete(m.nonces, nonce)
		return "unknown_nonce", ""
	}
	n.used = true
	switch {
	case now >= n.exp:
		return "nonce_expired", alt
	case keys[d.key].sign(nonce) != sig:
		return "invalid_signature", alt
	}
	return "", alt
}

// raceEnabled reports whether the test binary was built with the race detector.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// issued lists the nonces in the model in issue order.
func (m *model) issued() []string {
	out := make([]string, 0, len(m.nonces))
	for n := range m.nonces {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b string) int { return m.nonces[a].seq - m.nonces[b].seq })
	return out
}

var modelSeed = flag.Uint64("device.seed", 0, "seed of TestRegistryAgainstModel; 0 takes one from the clock")

// TestRegistryAgainstModel runs a random sequence of registers, challenges, verifies, gets,
// deletes and clock jumps against one registry and checks every answer against a model and
// the storage invariants (count = stored devices, never negative; indexes in step; gc alarm
// armed) after every step. The gc alarm fires whenever the scheduler gets to it, so the
// answers must not depend on whether collection has run.
func TestRegistryAgainstModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -device.seed)", seed)
	rng := mrand.New(mrand.NewPCG(seed, 0))
	cfg := device.Config{NonceTTL: 10 * time.Second, MaxPending: 3, MaxDevices: 4, DeviceTTL: 40 * time.Second}
	clock := actortest.NewClock(time.Now().Add(time.Hour))
	h := newHarness(t, cfg, clock.Now)
	keys := newKeys(t, 2) // verify signs with the other key to fail: exactly two
	ids := []string{"d0", "d1", "d2", "d3", "d4", "d5"}
	m := &model{cfg: cfg, devices: map[string]*modelDevice{}, nonces: map[string]*modelNonce{}}
	const reg = "model"
	nttl, dttl := cfg.NonceTTL.Milliseconds(), cfg.DeviceTTL.Milliseconds()
	outcomes := map[string]int{}

	checkEvery := 1
	if raceEnabled() {
		checkEvery = 5 // a check scans the registry's storage, which the race detector slows
	}
	for step := range 3000 {
		now := clock.NowMS()
		id := ids[rng.IntN(len(ids))]
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("step %d (now %d): %s", step, now, fmt.Sprintf(format, args...))
		}
		// forget drops an expired device, as the actor does when it meets one.
		forget := func() {
			if d := m.devices[id]; d != nil && m.live(id, now) == nil {
				delete(m.devices, id)
			}
		}
		var op string
		switch r := rng.IntN(100); {
		case r < 20:
			op = "register"
			k := rng.IntN(len(keys))
			version := fmt.Sprintf("v%d", step)
			req := device.RegisterRequest{Registration: device.Registration{DeviceID: id, Version: version,
				Platform: "linux", BuildHash: "h", PublicKey: keys[k].pub}}
			// With the admin token, with a proof of the current key, or neither.
			switch r := rng.IntN(8); {
			case r < 2:
				req.Admin = true
				op += "+admin"
			case r < 6:
				op += "+proof"
				if d := m.devices[id]; d != nil && rng.IntN(4) != 0 {
					k = 1 - d.key // mostly a rotation, which checks the proof
					req.PublicKey = keys[k].pub
				}
				// Mostly an unused nonce of this device, else one it used, any nonce issued,
				// or one never issued.
				req.Nonce = m.pickNonce(rng, id, [4]int{10, 5, 8, 9})
				signer := keys[rng.IntN(len(keys))]
				if d := m.devices[id]; d != nil {
					signer = keys[(d.key+rng.IntN(3)/2)%len(keys)] // the current key two times in three
				}
				req.Signature = signer.sign(req.Nonce)
			}
			var out device.Registered
			e := call(t, h, reg, device.MethodRegister, req, &out)
			liveCount, oldest := 0, int64(-1)
			for other := range m.devices {
				if d := m.live(other, now); d != nil {
					liveCount++
					if oldest < 0 || d.seen < oldest {
						oldest = d.seen
					}
				}
			}
			switch d := m.live(id, now); {
			case d != nil && k != d.key && !req.Admin:
				op = "rotate"
				if req.Nonce != "" {
					op += "+proof"
				}
				want, alt := m.prove(id, d, req.Nonce, req.Signature, keys, now)
				if got := actortest.Code(e); got != want && (alt == "" || got != alt) {
					fail("rotate the key of %s (nonce %q): %+v %v; want %q", id, req.Nonce, out, e, want)
				}
				if e != nil {
					break
				}
				fallthrough
			case d != nil:
				if e != nil || out.Created || out.RegisteredAt != d.registered || out.LastSeen != now {
					fail("re-register %s: %+v %v; want registered_at %d", id, out, e, d.registered)
				}
				d.key, d.version, d.seen = k, version, now
			case liveCount >= cfg.MaxDevices:
				forget()
				want := time.Duration(oldest+dttl-now) * time.Millisecond
				if actortest.Code(e) != "registry_full" || e.RetryAfter != want {
					fail("register %s into a full registry: %+v %v; want registry_full after %v", id, out, e, want)
				}
			default:
				if e != nil || !out.Created || out.RegisteredAt != now || out.LastSeen != now {
					fail("register new %s: %+v %v", id, out, e)
				}
				m.inst++
				m.devices[id] = &modelDevice{inst: m.inst, key: k, version: version, registered: now, seen: now}
			}
			op += "/" + actortest.Code(e)
		case r < 50:
			op = "challenge"
			var out device.Challenge
			e := call(t, h, reg, device.MethodChallenge, device.ChallengeRequest{DeviceID: id}, &out)
			d := m.live(id, now)
			if d == nil {
				forget()
				if actortest.Code(e) != "unknown_device" {
					fail("challenge unknown %s: %+v %v", id, out, e)
				}
				op += "/" + actortest.Code(e)
				break
			}
			pending := m.pending(d, id, now)
			if len(pending) >= cfg.MaxPending {
				oldest := pending[0].exp
				for _, n := range pending {
					oldest = min(oldest, n.exp)
				}
				if want := time.Duration(oldest-now) * time.Millisecond; actortest.Code(e) != "too_many_pending" || e.RetryAfter != want {
					fail("challenge %s with %d pending: %+v %v; want too_many_pending after %v", id, len(pending), out, e, want)
				}
				op += "/" + actortest.Code(e)
				break
			}
			if e != nil || out.ExpiresAt != now+nttl || m.nonces[out.Nonce] != nil {
				fail("challenge %s: %+v %v", id, out, e)
			}
			m.nonces[out.Nonce] = &modelNonce{seq: step, device: id, inst: d.inst, exp: out.ExpiresAt}
		case r < 75:
			op = "verify"
			v := device.Verification{DeviceID: id}
			// Mostly an unused nonce of this device, else one it used, any nonce issued, or one
			// never issued.
			v.Nonce = m.pickNonce(rng, id, [4]int{20, 11, 15, 18})
			k := keys[rng.IntN(len(keys))]
			if d := m.devices[id]; d != nil {
				k = keys[d.key] // the right key two times in three, else the other one
				if rng.IntN(3) == 0 {
					k = keys[1-d.key]
				}
			}
			switch {
			case rng.IntN(10) == 0:
				v.Signature = "!!not base64!!"
			default:
				v.Signature = k.sign(v.Nonce)
			}
			var out device.Verified
			e := call(t, h, reg, device.MethodVerify, v, &out)
			got := actortest.Code(e)
			op += "/" + got
			n := m.nonces[v.Nonce]
			if n == nil || n.device != id {
				if got != "unknown_nonce" {
					fail("verify unknown nonce of %s: %v", id, e)
				}
				break
			}
			retired := now >= n.exp+nttl // the gc alarm may have removed it
			if n.used {
				if got != "nonce_used" && !(retired && got == "unknown_nonce") {
					fail("verify used nonce: %v", e)
				}
				break
			}
			d := m.live(id, now)
			if d == nil || d.inst != n.inst {
				forget()
				delete(m.nonces, v.Nonce)
				if got != "unknown_nonce" {
					fail("verify nonce of a gone device: %v", e)
				}
				break
			}
			n.used = true
			switch {
			case retired && got == "unknown_nonce":
				delete(m.nonces, v.Nonce)
			case now >= n.exp:
				if got != "nonce_expired" {
					fail("verify expired nonce: %v", e)
				}
			case keys[d.key].sign(v.Nonce) != v.Signature:
				if got != "invalid_signature" {
					fail("verify bad signature: %v", e)
				}
			default:
				if e != nil || !out.Verified || out.DeviceID != id || out.VerifiedAt != now {
					fail("verify: %+v %v", out, e)
				}
				d.seen = now
			}
		case r < 88:
			op = "get"
			var out device.Device
			e := call(t, h, reg, device.MethodGet, device.DeviceRef{DeviceID: id}, &out)
			d := m.live(id, now)
			if d == nil {
				forget()
				if actortest.Code(e) != "unknown_device" {
					fail("get unknown %s: %+v %v", id, out, e)
				}
				op += "/" + actortest.Code(e)
				break
			}
			want := device.Device{DeviceID: id, Version: d.version, Platform: "linux", BuildHash: "h",
				RegisteredAt: d.registered, LastSeen: d.seen, PendingChallenges: len(m.pending(d, id, now))}
			if e != nil || out != want {
				fail("get %s: %+v %v; want %+v", id, out, e, want)
			}
		case r < 93:
			op = "delete"
			e := call(t, h, reg, device.MethodDelete, device.DeviceRef{DeviceID: id}, nil)
			want := ""
			if m.live(id, now) == nil {
				want = "unknown_device"
			}
			if actortest.Code(e) != want {
				fail("delete %s: %v; want %q", id, e, want)
			}
			delete(m.devices, id)
			op += "/" + actortest.Code(e)
		default:
			op = "advance"
			switch rng.IntN(10) {
			case 0:
				clock.Advance(cfg.DeviceTTL) // everything expires
			case 1:
				clock.Advance(cfg.NonceTTL) // every nonce expires
			default:
				clock.Advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
			}
			h.Wake(device.KindName, reg)
		}
		outcomes[op]++
		if step%checkEvery != 0 {
			continue
		}

		s := read(t, h, reg)
		s.check(t, nttl, dttl, clock.NowMS())
		for did, d := range m.devices {
			if m.live(did, clock.NowMS()) == nil {
				continue
			}
			if sd, ok := s.devices[did]; !ok || sd.RegisteredAt != d.registered || sd.LastSeen != d.seen {
				t.Fatalf("step %d: live device %s is stored as %+v (present %v); model %+v", step, did, sd, ok, d)
			}
		}
	}
	t.Logf("outcomes: %v", outcomes)
	for _, op := range []string{"register/", "register/registry_full", "register+admin/", "register+proof/",
		"rotate/device_exists", "rotate+proof/", "rotate+proof/invalid_signature", "rotate+proof/unknown_nonce",
		"challenge", "challenge/too_many_pending",
		"challenge/unknown_device", "verify/", "verify/nonce_used", "verify/nonce_expired", "verify/invalid_signature",
		"verify/unknown_nonce", "get", "get/unknown_device", "delete/", "delete/unknown_device"} {
		if outcomes[op] == 0 {
			t.Errorf("the random sequence never produced %s", op)
		}
	}
}

// TestRegistryCollectsEverything: a device with more nonces due at once than one gc firing
// deletes, verified devices (their used nonces stay as markers), deleted devices and devices
// left to expire. Once the clock has passed every collection time, with no registry message
// arriving, the gc alarm must bring the registry back to no keys at all, keeping the
// invariants at every point observed.
func TestRegistryCollectsEverything(t *testing.T) {
	cfg := device.Config{NonceTTL: time.Minute, MaxPending: 5000, MaxDevices: 100, DeviceTTL: time.Hour}
	clock := actortest.NewClock(time.Now().Add(time.Hour))
	h := newHarness(t, cfg, clock.Now)
	keys := newKeys(t, 1)
	const reg = "gc"
	nttl, dttl := cfg.NonceTTL.Milliseconds(), cfg.DeviceTTL.Milliseconds()
	register := func(id string) {
		t.Helper()
		if e := call(t, h, reg, device.MethodRegister, device.Registration{DeviceID: id, Version: "1",
			Platform: "p", BuildHash: "h", PublicKey: keys[0].pub}, nil); e != nil {
			t.Fatal(e)
		}
	}
	challenge := func(id string) string {
		t.Helper()
		var c device.Challenge
		if e := call(t, h, reg, device.MethodChallenge, device.ChallengeRequest{DeviceID: id}, &c); e != nil {
			t.Fatal(e)
		}
		return c.Nonce
	}

	register("bulk")
	const bulk = 2500 // more than one gc firing deletes
	body, _ := json.Marshal(device.ChallengeRequest{DeviceID: "bulk"})
	errs := make(chan error, bulk)
	for range bulk { // concurrently: they share commits
		go func() {
			_, err := h.Call(device.KindName, reg, device.MethodChallenge, body)
			errs <- err
		}()
	}
	for range bulk {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		id := fmt.Sprintf("d%d", i)
		register(id)
		n := challenge(id)
		challenge(id)
		switch i % 3 {
		case 0: // verified: a used marker stays until its retention ends
			if e := call(t, h, reg, device.MethodVerify, device.Verification{DeviceID: id, Nonce: n, Signature: keys[0].sign(n)}, nil); e != nil {
				t.Fatal(e)
			}
		case 1: // deleted: its unused nonces go with it
			if e := call(t, h, reg, device.MethodDelete, device.DeviceRef{DeviceID: id}, nil); e != nil {
				t.Fatal(e)
			}
		}
	}
	s := read(t, h, reg)
	s.check(t, nttl, dttl, clock.NowMS())
	if want := bulk + 2*20 - 7*2; len(s.nonces) != want {
		t.Fatalf("%d nonces stored; want %d", len(s.nonces), want)
	}

	// Past the nonces' retention only: they go, in several firings; the devices stay.
	clock.Advance(2*cfg.NonceTTL + time.Millisecond)
	h.Wake(device.KindName, reg)
	await.True(t, 30*time.Second, "every nonce is collected", func() bool {
		s := read(t, h, reg)
		s.check(t, nttl, dttl, clock.NowMS())
		return len(s.nonces) == 0
	})
	if s := read(t, h, reg); len(s.devices) != 14 {
		t.Fatalf("%d devices stored after the nonces went; want 14", len(s.devices))
	}
	// Past the devices' TTL: everything goes, the gc alarm included.
	clock.Advance(cfg.DeviceTTL)
	h.Wake(device.KindName, reg)
	await.True(t, 30*time.Second, "the registry holds no keys", func() bool {
		s := read(t, h, reg)
		s.check(t, nttl, dttl, clock.NowMS())
		return s.keys == 0
	})
	var d device.Device
	if e := call(t, h, reg, device.MethodGet, device.DeviceRef{DeviceID: "bulk"}, &d); actortest.Code(e) != "unknown_device" {
		t.Fatalf("get after collection: %+v %v", d, e)
	}
}

// TestValidate covers the request checks shared by the HTTP edge and the actor.
func TestValidate(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(make([]byte, 32))
	ok := device.Registration{DeviceID: "d", Version: "1", Platform: "p", BuildHash: "h", PublicKey: key}
	with := func(f func(r *device.Registration)) device.Registration { r := ok; f(&r); return r }
	for _, c := range []struct {
		name string
		err  *actors.Error
		want string
	}{
		{"registration", ok.Validate(), ""},
		{"key raw url", with(func(r *device.Registration) { r.PublicKey = base64.RawURLEncoding.EncodeToString(make([]byte, 32)) }).Validate(), ""},
		{"no device_id", with(func(r *device.Registration) { r.DeviceID = "" }).Validate(), "invalid_request"},
		{"bad device_id", with(func(r *device.Registration) { r.DeviceID = "a/b" }).Validate(), "invalid_id"},
		{"no version", with(func(r *device.Registration) { r.Version = "" }).Validate(), "invalid_request"},
		{"no platform", with(func(r *device.Registration) { r.Platform = "" }).Validate(), "invalid_request"},
		{"no build_hash", with(func(r *device.Registration) { r.BuildHash = "" }).Validate(), "invalid_request"},
		{"no public_key", with(func(r *device.Registration) { r.PublicKey = "" }).Validate(), "invalid_request"},
		{"short key", with(func(r *device.Registration) { r.PublicKey = base64.StdEncoding.EncodeToString(make([]byte, 31)) }).Validate(), "invalid_request"},
		{"key not base64", with(func(r *device.Registration) { r.PublicKey = "***" }).Validate(), "invalid_request"},
		{"proof", with(func(r *device.Registration) { r.Nonce, r.Signature = "n", "s" }).Validate(), ""},
		{"proof of a malformed nonce", with(func(r *device.Registration) { r.Nonce, r.Signature = "n.n", "s" }).Validate(), ""},
		{"nonce without signature", with(func(r *device.Registration) { r.Nonce = "n" }).Validate(), "invalid_request"},
		{"signature without nonce", with(func(r *device.Registration) { r.Signature = "s" }).Validate(), "invalid_request"},
		{"challenge", device.ChallengeRequest{DeviceID: "d"}.Validate(), ""},
		{"challenge no id", device.ChallengeRequest{}.Validate(), "invalid_request"},
		{"ref bad id", device.DeviceRef{DeviceID: "d d"}.Validate(), "invalid_id"},
		{"verify", device.Verification{DeviceID: "d", Nonce: "n", Signature: "s"}.Validate(), ""},
		{"verify no nonce", device.Verification{DeviceID: "d", Signature: "s"}.Validate(), "invalid_request"},
		{"verify no signature", device.Verification{DeviceID: "d", Nonce: "n"}.Validate(), "invalid_request"},
		{"verify malformed nonce", device.Verification{DeviceID: "d", Nonce: "n.n", Signature: "s"}.Validate(), "unknown_nonce"},
		{"verify long nonce", device.Verification{DeviceID: "d", Nonce: string(bytes.Repeat([]byte("n"), 129)), Signature: "s"}.Validate(), "unknown_nonce"},
	} {
		if actortest.Code(c.err) != c.want {
			t.Errorf("%s: %v; want %q", c.name, c.err, c.want)
		}
	}
}

// A signature that is not base64 fails the verify as invalid_signature saying so, also when
// the same request_id asks again; any later verify of the nonce is told its first attempt
// consumed it.
func TestVerifyMessages(t *testing.T) {
	h := newHarness(t, device.Config{NonceTTL: time.Minute, MaxPending: 5, MaxDevices: 5, DeviceTTL: time.Hour}, nil)
	keys := newKeys(t, 1)
	const reg = "messages"
	if e := call(t, h, reg, device.MethodRegister, device.Registration{DeviceID: "d", Version: "1",
		Platform: "p", BuildHash: "h", PublicKey: keys[0].pub}, nil); e != nil {
		t.Fatal(e)
	}
	challenge := func() string {
		var c device.Challenge
		if e := call(t, h, reg, device.MethodChallenge, device.ChallengeRequest{DeviceID: "d"}, &c); e != nil {
			t.Fatal(e)
		}
		return c.Nonce
	}
	n := challenge()
	bad := device.Verification{DeviceID: "d", Nonce: n, Signature: "%%% not base64 %%%", RequestID: "r1"}
	for _, attempt := range []string{"first", "repeated with its request_id"} {
		e := call(t, h, reg, device.MethodVerify, bad, nil)
		if actortest.Code(e) != "invalid_signature" || !strings.Contains(e.Message, "not base64") {
			t.Fatalf("%s verify with a signature that is not base64: %v", attempt, e)
		}
	}
	wrong := device.Verification{DeviceID: "d", Nonce: challenge(), Signature: base64.StdEncoding.EncodeToString(make([]byte, 64))}
	if e := call(t, h, reg, device.MethodVerify, wrong, nil); actortest.Code(e) != "invalid_signature" || strings.Contains(e.Message, "base64") {
		t.Fatalf("verify with a wrong signature: %v, want invalid_signature about the key", e)
	}
	good := device.Verification{DeviceID: "d", Nonce: n, Signature: keys[0].sign(n)}
	if e := call(t, h, reg, device.MethodVerify, good, nil); actortest.Code(e) != "nonce_used" || !strings.Contains(e.Message, "first verify attempt consumed") {
		t.Fatalf("verify after a failed attempt: %v, want nonce_used saying the first attempt consumed the nonce", e)
	}
}

// Error messages repeat at most the start of what the client sent.
func TestMessagesDoNotEchoHugeInput(t *testing.T) {
	huge := strings.Repeat("x", 60<<10)
	for _, e := range []*actors.Error{
		device.DeviceRef{DeviceID: huge + "!"}.Validate(),
		device.Registration{DeviceID: "d!" + huge}.Validate(),
	} {
		if e == nil || e.Code != "invalid_id" || len(e.Message) > 200 {
			t.Fatalf("outcome %.300v", e)
		}
	}
}
