package actors

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// The write path's decisions, driven through every ordering that matters, as traces
// (testdata/writegate). The driver does what the activation does with each answer: it
// proposes the batch next returns, fails the activation when a commit fails, retires it when
// it is due to restart, and sends a reply that depends on nothing uncommitted to the
// leadership check.
//
//	message <name> [put=(k:v,…)] [del=(k,…)] [now=<t>] [epoch=<e>] [queued] [untaken]
//	                     a message finished with these writes (a key @name is an alarm
//	                     index entry); epoch is the partition's epoch when it arrives
//	                     (default: the activation's). Like the activation, it first takes up
//	                     the outcome of the batch in flight if the proposer knows it already
//	                     (then settles, queued: more messages wait), unless untaken: the
//	                     outcome arrived while the message ran
//	settle [queued] [max=<n>]
//	                     the end of a message: propose when due (queued: more messages wait),
//	                     retire when due to restart
//	callback <batch> [err=<text>|fenced]
//	                     the proposer learns the commit outcome (and releases on success)
//	commit <batch> [err=<text>|fenced] [queued]
//	                     the activation takes the outcome up, and settles after a success
//	verified [<name>…]   the leadership check answers the replies waiting on it (err=… fails them)
//	restart cause=<text> Activate or HandleEffect failed
//	retire reason=<text> the partition is no longer led here (its activations retire with
//	                     unavailable: what was in flight may have committed)
//	passivate            the idle timer fires
//	read <key>           what a message reads of the activation's uncommitted writes
//	state                pending, in flight, overlay
//	new                  a fresh activation: the next trace of the file
func TestWriteGate(t *testing.T) {
	datadriven.Walk(t, "testdata/writegate", func(t *testing.T, path string) {
		d := newGateDriver()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return d.run(t, td)
		})
	})
}

type gateDriver struct {
	g       writeGate
	out     []string
	batches map[string]*batch // by name, b1, b2, … in proposal order
	names   map[*batch]string
	leader  []string // replies waiting on the leadership check
	waiting map[string]func(error)
}

func newGateDriver() *gateDriver {
	return &gateDriver{g: newWriteGate(1), batches: map[string]*batch{}, names: map[*batch]string{}, waiting: map[string]func(error){}}
}

// reply is the reply of message name: it records its release.
func (d *gateDriver) reply(name string) func(error) {
	answered := false
	return func(err error) {
		if answered {
			d.out = append(d.out, name+": answered twice")
		}
		answered = true
		d.out = append(d.out, name+": "+describe(err))
	}
}

func describe(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNotApplied):
		return "not applied: " + err.Error()
	case errors.Is(err, ErrUnavailable):
		return "unavailable: " + err.Error()
	}
	return "error: " + err.Error()
}

func outcome(t *testing.T, td *datadriven.TestData) error {
	var e string
	if !td.MaybeScanArgs(t, "err", &e) {
		return nil
	}
	if e == "fenced" {
		return NotApplied("partition 0 changed leadership before the commit was proposed")
	}
	return errors.New(e)
}

func (d *gateDriver) batch(t *testing.T, td *datadriven.TestData) *batch {
	if len(td.CmdArgs) == 0 || d.batches[td.CmdArgs[0].Key] == nil {
		t.Fatalf("%s: name a proposed batch", td.Pos)
	}
	return d.batches[td.CmdArgs[0].Key]
}

func (d *gateDriver) fail(err error) {
	if d.g.retire() {
		d.out = append(d.out, "activation retires")
	}
	d.g.failAll(err)
}

// settle ends a message as the activation does: it proposes when due and retires when due
// to restart.
func (d *gateDriver) settle(queued bool, max int) {
	if b := d.g.next(queued, max); b != nil {
		name := fmt.Sprintf("b%d", len(d.batches)+1)
		d.batches[name], d.names[b] = b, name
		d.out = append(d.out, "propose "+name+": "+describeBatch(b))
	}
	if d.g.dueRestart() {
		d.fail(d.g.restart)
	}
}

// commit takes up b's outcome as the activation does: a failure fails the activation; a
// success may wake the alarm scheduler, and settles.
func (d *gateDriver) commit(b *batch, err error, queued bool, max int) {
	current, failure := d.g.committed(b, err)
	switch {
	case !current:
		d.out = append(d.out, d.names[b]+" is not in flight: ignored")
	case failure != nil:
		d.fail(failure)
	default:
		if b.setsAlarm {
			d.out = append(d.out, "the alarm scheduler looks again")
		}
		d.settle(queued, max)
	}
}

func (d *gateDriver) run(t *testing.T, td *datadriven.TestData) string {
	d.out = nil
	switch td.Cmd {
	case "new":
		*d = *newGateDriver()
	case "message":
		name := td.CmdArgs[0].Key
		if b := d.g.inflight; b != nil && b.finished.Load() && !td.HasArg("untaken") {
			d.out = append(d.out, "takes up "+d.names[b])
			d.commit(b, b.err, td.HasArg("queued"), 64)
		}
		epoch, now := d.g.epoch, int64(0)
		td.MaybeScanArgs(t, "epoch", &epoch)
		td.MaybeScanArgs(t, "now", &now)
		if err := d.g.usable(epoch, "k", "a", 0); err != nil {
			d.out = append(d.out, name+" refused: "+describe(err))
			break
		}
		var writes []write
		var puts, dels []string
		td.MaybeScanArgs(t, "put", &puts)
		td.MaybeScanArgs(t, "del", &dels)
		for _, p := range puts {
			k, v, _ := strings.Cut(p, ":")
			writes = append(writes, write{key: gateKey(k), value: []byte(v)})
		}
		for _, k := range dels {
			writes = append(writes, write{key: gateKey(k), deleted: true})
		}
		reply := d.reply(name)
		switch d.g.stage(writes, now, reply) {
		case heldPending:
			d.out = append(d.out, name+" waits for the pending batch")
		case heldInflight:
			d.out = append(d.out, name+" waits for "+d.names[d.g.inflight])
		case needsLeader:
			d.out = append(d.out, name+" waits for the leadership check")
			d.leader = append(d.leader, name)
			d.waiting[name] = reply
		}
	case "settle":
		max := 64
		td.MaybeScanArgs(t, "max", &max)
		d.settle(td.HasArg("queued"), max)
	case "callback":
		b := d.batch(t, td)
		b.err = outcome(t, td)
		b.finished.Store(true)
		if b.err == nil {
			b.release(nil)
		}
	case "commit":
		d.commit(d.batch(t, td), outcome(t, td), td.HasArg("queued"), 64)
	case "verified":
		err := unconfirmed(0, outcome(t, td))
		for _, name := range d.leader {
			d.waiting[name](err)
		}
		d.leader, d.waiting = nil, map[string]func(error){}
	case "restart":
		var cause string
		td.ScanArgs(t, "cause", &cause)
		d.g.restartAfter("k", "a", errors.New(cause))
	case "retire":
		var reason string
		td.ScanArgs(t, "reason", &reason)
		d.fail(Unavailable("%s", reason)) // as the partition retires its activations
	case "passivate":
		if d.g.idle() {
			d.g.retire()
			d.out = append(d.out, "passivated")
		} else {
			d.out = append(d.out, "stays: writes await a commit")
		}
	case "read":
		k := td.CmdArgs[0].Key
		switch v, deleted, ok := d.g.read(gateKey(k)); {
		case !ok:
			d.out = append(d.out, k+": committed state")
		case deleted:
			d.out = append(d.out, k+": deleted, uncommitted")
		default:
			d.out = append(d.out, k+"="+string(v)+", uncommitted")
		}
	case "state":
		d.out = append(d.out, d.state())
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	if len(d.out) == 0 {
		return "ok\n"
	}
	return strings.Join(d.out, "\n") + "\n"
}

func describeBatch(b *batch) string {
	ops := make([]string, 0, len(b.ops))
	for _, op := range b.ops {
		if op.Delete {
			ops = append(ops, "del "+traceKey(op.Key))
		} else {
			ops = append(ops, traceKey(op.Key)+"="+string(op.Value))
		}
	}
	s := fmt.Sprintf("%s; %d messages, %d replies, time %d", strings.Join(ops, " "), b.messages, len(b.held), b.time)
	if b.setsAlarm {
		s += ", sets an alarm"
	}
	return s
}

func (d *gateDriver) state() string {
	name := func(b *batch) string {
		switch b {
		case nil:
			return "none"
		case d.g.pending:
			return "the pending batch"
		}
		if n, ok := d.names[b]; ok {
			return n
		}
		return describeBatch(b)
	}
	keys := slices.Sorted(maps.Keys(d.g.overlay))
	overlay := make([]string, 0, len(keys))
	for _, k := range keys {
		e := d.g.overlay[k]
		v := string(e.value)
		if e.deleted {
			v = "(deleted)"
		}
		overlay = append(overlay, fmt.Sprintf("%s=%s in %s", traceKey([]byte(k)), v, name(e.batch)))
	}
	pending := "none"
	if d.g.pending != nil {
		pending = describeBatch(d.g.pending)
	}
	if len(overlay) == 0 {
		overlay = []string{"empty"}
	}
	s := fmt.Sprintf("pending: %s\nin flight: %s\noverlay: %s", pending, name(d.g.inflight), strings.Join(overlay, ", "))
	switch {
	case d.g.retired:
		s += "\nretired"
	case d.g.restart != nil:
		s += "\nrestarting"
	}
	return s
}

// gateKey is the storage key a trace names: @name an alarm index entry, any other name a key
// of the actor's data.
func gateKey(name string) []byte {
	if n, ok := strings.CutPrefix(name, "@"); ok {
		return append([]byte{secIndex}, n...)
	}
	return append([]byte{secData}, name...)
}

// traceKey is the name of a storage key in a trace (gateKey's inverse).
func traceKey(k []byte) string {
	if k[0] == secIndex {
		return "@" + string(k[1:])
	}
	return string(k[1:])
}
