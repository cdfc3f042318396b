package actors

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"time"
)

// Request is one message to an actor: an operation name and an opaque body the kind decodes.
// Both survive a trip through the cluster, so bodies are bytes, not Go values.
type Request struct {
	Method string
	Body   []byte
	// Value, when set, is the Go value a caller in this process encoded into Body. A handler
	// that would decode Body into a value of the same type may take it instead when decoding
	// would give the same value (JSON does, for plain data). It never leaves the process: a
	// forwarded request carries Body alone, so Body is always set and Value is only ever a
	// shortcut. Caller and handler share what it points to, so neither may change it.
	Value any
}

// Handler is one activation of an actor: the in-memory object for one (kind, id).
//
// The runtime calls Receive for one message at a time, never concurrently, so a Handler may
// keep cached state in its fields without locking. If a commit fails (or the activation
// restarts, see EffectHandler and Activator), the runtime discards the Handler and creates a
// new one on the next message, so cached state is never trusted past a failure: what a
// Handler caches must be derivable from its storage.
//
// Besides Receive, a Handler may implement AlarmHandler, EffectHandler, Activator and
// Deactivator.
type Handler interface {
	// Receive handles one message. Writes made through ctx are committed with the message
	// when Receive returns a nil error or an *Error (a domain outcome), and discarded for any
	// other error. The reply (or error) is
	// delivered only after every write it may depend on has committed (the output gate).
	Receive(ctx *Context, req Request) ([]byte, error)
}

// Activator is implemented by handlers that must reconcile their storage before new work,
// typically kinds with effects: the effects a previous activation started are gone with it
// (their results are dropped), and only storage tells what was in flight.
type Activator interface {
	// Activate runs as the first message of every activation, before any queued request,
	// alarm or effect result. It reads committed state only; its writes are committed like a
	// request's, and the effects it requests (re-sending what was in flight, or asking the
	// outside world about it) start after that commit. Any error (an *Error too) discards its
	// writes and effects, and the activation retires at once: the messages queued for it are
	// answered as not applied, and the next message tries a new activation.
	Activate(ctx *Context) error
}

// Deactivator is implemented by handlers that hold something outside storage for the life of
// their activation (a connection, metric series of their own).
type Deactivator interface {
	// Deactivate runs once when the activation ends — passivated, retired after a failure, or
	// its partition no longer led here — after its last message, with its effects cancelled.
	// It must not block or do I/O.
	Deactivate()
}

// AlarmHandler is implemented by handlers that set alarms.
type AlarmHandler interface {
	// Alarm runs a due alarm. A nil error deletes the alarm (unless the handler set it
	// again); an error discards the handler's writes and effects and retries the alarm with
	// backoff.
	Alarm(ctx *Context, a Alarm) error
}

// Alarm is a durable, named timer of one actor.
type Alarm struct {
	Name string
	// Scheduled is the time the alarm was set for; a late or retried firing still carries it.
	Scheduled time.Time
	// Due is when this firing is (or was) due: Scheduled, or later for a retry.
	Due time.Time
	// Attempt counts failed firings before this one (0 on the first firing).
	Attempt int
}

// Kind registers a type of actor.
type Kind struct {
	// Name identifies the kind in keys and routing; it matches ^[a-z][a-z0-9_-]{0,31}$ and
	// must never change once data exists.
	Name string
	// New creates the handler of a new activation. It must not do I/O: state is read
	// through the Context of the first message (Activate, if the handler implements it).
	New func(id string) Handler
	// MaxEffects, when positive, bounds the effect functions of one activation of this kind
	// running at once instead of Options.MaxEffectsPerActor: for a kind whose actors keep many
	// calls to the outside world going (the relayer's pipelined keys).
	MaxEffects int
}

var kindName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

func (k Kind) validate() error {
	if !kindName.MatchString(k.Name) {
		return fmt.Errorf("kind name %q does not match %s", k.Name, kindName)
	}
	if k.New == nil {
		return fmt.Errorf("kind %q has no constructor", k.Name)
	}
	return nil
}

// PartitionOf maps an actor identity to its partition among n. It is FNV-1a over the kind, a
// zero byte and the id; it must never change, since stored data is placed by it.
func PartitionOf(kind, id string, n int) uint32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(kind))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(id))
	return uint32(h.Sum64() % uint64(n))
}
