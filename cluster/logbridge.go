package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// hclogBridge is an hclog.Logger (hashicorp/raft's logger; its StandardLogger is memberlist's)
// written to our slog.Logger, so that the libraries' lines come out in the same stream and
// format as ours, filtered by the same level, with their component named. hclog's arguments
// are key-value pairs, as slog's are.
//
// The level is the slog handler's: SetLevel is ignored. Two of the libraries' habits are
// tamed on the way (see Log): the warnings every fresh replica logs as it starts are logged
// at debug level (routineWarning), and an error repeated against the same peer is logged
// once per repeatInterval with a count.
// Safe for concurrent use.
type hclogBridge struct {
	l         *slog.Logger
	component string
	name      string
	implied   []any
	repeats   *repeatLimiter // shared by every logger derived with With and Named
}

// repeatInterval is how often an error repeated against the same peer is logged. A dead peer
// makes every partition's leader fail its heartbeats and appends several times a second; one
// line per interval still says that it goes on and how often.
const repeatInterval = 10 * time.Second

// newHclog returns an hclog.Logger writing to l with component=component.
func newHclog(l *slog.Logger, component string) hclog.Logger {
	return newHclogLimited(l, component, newRepeatLimiter(repeatInterval, time.Now))
}

func newHclogLimited(l *slog.Logger, component string, repeats *repeatLimiter) *hclogBridge {
	return &hclogBridge{l: l.With("component", component), component: component, repeats: repeats}
}

// slogLevel maps an hclog level to slog's; Trace is below Debug.
func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// electionStarted is hashicorp/raft's warning when a follower stops hearing from a leader.
// It carries the leader it last knew as last-leader-addr and last-leader-id, both empty when
// it has heard from none since it started or since its last election: every partition's
// first election is one.
const electionStarted = "heartbeat timeout reached, starting election"

// routineWarning reports whether a hashicorp/raft (v1.8) warning, judging by its arguments,
// describes the normal start of a replica rather than a fault. Each happens once per
// partition on every fresh node, so as warnings they would bury the real ones:
//   - electionStarted with no last leader: there was no leader to lose;
//   - "no known peers, aborting election": a replica without any configuration, on a node
//     waiting for the bootstrap or to be added by a leader;
//   - "failed to get previous log" with last-index 0: a replica with an empty log asked to
//     append after an entry it does not have yet; the leader then sends it older entries.
func routineWarning(msg string, args []any) bool {
	switch msg {
	case electionStarted:
		return !knewLeader(args)
	case "no known peers, aborting election":
		return true
	case "failed to get previous log":
		last, ok := argOf(args, []string{"last-index"})
		return ok && last == "0"
	}
	return false
}

// peerKeys are the arguments under which hashicorp/raft names the peer an error is about
// ("failed to heartbeat to", "failed to appendEntries to": peer; "failed to contact":
// server-id).
var peerKeys = []string{"peer", "server-id", "target"}

func (r *hclogBridge) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	if level == hclog.Warn && routineWarning(msg, args) {
		level = hclog.Debug
	}
	if !r.l.Enabled(context.Background(), slogLevel(level)) {
		return
	}
	if level >= hclog.Warn {
		if peer, ok := argOf(args, peerKeys); ok {
			emit, suppressed := r.repeats.admit(repeatKey{component: r.component, msg: msg, peer: peer})
			if !emit {
				return
			}
			if suppressed > 0 {
				args = append(args[:len(args):len(args)], "repeated", suppressed)
			}
		}
	}
	r.l.Log(context.Background(), slogLevel(level), msg, hclogValues(args)...)
}

// knewLeader reports whether an election warning names a last leader. Without either
// argument (another raft version) it assumes so, keeping the warning.
func knewLeader(args []any) bool {
	addr, hasAddr := argOf(args, []string{"last-leader-addr"})
	id, hasID := argOf(args, []string{"last-leader-id"})
	return (!hasAddr && !hasID) || addr != "" || id != ""
}

// argOf returns the value of the first of keys present in the key-value list args, as text.
func argOf(args []any, keys []string) (string, bool) {
	for _, k := range keys {
		for i := 0; i+1 < len(args); i += 2 {
			if name, ok := args[i].(string); ok && name == k {
				return fmt.Sprint(args[i+1]), true
			}
		}
	}
	return "", false
}

// hclogValues renders the values hclog formats itself: hclog.Fmt's format and arguments, and
// Stringers (hashicorp/raft logs its *Raft as "Node at ... [Follower]"), which slog's JSON
// handler would otherwise marshal field by field.
func hclogValues(args []any) []any {
	out := make([]any, len(args))
	copy(out, args)
	for i := 1; i < len(out); i += 2 {
		switch v := out[i].(type) {
		case hclog.Format:
			if len(v) > 0 {
				if format, ok := v[0].(string); ok {
					out[i] = fmt.Sprintf(format, v[1:]...)
				}
			}
		case error:
		case fmt.Stringer:
			out[i] = v.String()
		}
	}
	return out
}

func (r *hclogBridge) Trace(msg string, args ...any) { r.Log(hclog.Trace, msg, args...) }
func (r *hclogBridge) Debug(msg string, args ...any) { r.Log(hclog.Debug, msg, args...) }
func (r *hclogBridge) Info(msg string, args ...any)  { r.Log(hclog.Info, msg, args...) }
func (r *hclogBridge) Warn(msg string, args ...any)  { r.Log(hclog.Warn, msg, args...) }
func (r *hclogBridge) Error(msg string, args ...any) { r.Log(hclog.Error, msg, args...) }

func (r *hclogBridge) enabled(level hclog.Level) bool {
	return r.l.Enabled(context.Background(), slogLevel(level))
}

func (r *hclogBridge) IsTrace() bool { return r.enabled(hclog.Trace) }
func (r *hclogBridge) IsDebug() bool { return r.enabled(hclog.Debug) }
func (r *hclogBridge) IsInfo() bool  { return r.enabled(hclog.Info) }
func (r *hclogBridge) IsWarn() bool  { return r.enabled(hclog.Warn) }
func (r *hclogBridge) IsError() bool { return r.enabled(hclog.Error) }

func (r *hclogBridge) ImpliedArgs() []any { return r.implied }

func (r *hclogBridge) With(args ...any) hclog.Logger {
	return &hclogBridge{l: r.l.With(hclogValues(args)...), component: r.component, name: r.name,
		implied: append(r.implied[:len(r.implied):len(r.implied)], args...), repeats: r.repeats}
}

func (r *hclogBridge) Name() string { return r.name }

func (r *hclogBridge) Named(name string) hclog.Logger {
	if r.name != "" {
		name = r.name + "." + name
	}
	return r.ResetNamed(name)
}

func (r *hclogBridge) ResetNamed(name string) hclog.Logger {
	return &hclogBridge{l: r.l.With("logger", name), component: r.component, name: name, implied: r.implied, repeats: r.repeats}
}

func (r *hclogBridge) SetLevel(hclog.Level) {}

// GetLevel is the most verbose level the handler takes.
func (r *hclogBridge) GetLevel() hclog.Level {
	for _, level := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if r.enabled(level) {
			return level
		}
	}
	return hclog.Error
}

func (r *hclogBridge) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(r.StandardWriter(opts), "", 0)
}

// StandardWriter logs each line written to it at Info, or at the level of its "[LEVEL]"
// prefix when opts.InferLevels is set.
func (r *hclogBridge) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	infer := opts != nil && (opts.InferLevels || opts.InferLevelsWithTimestamp)
	return &hclogWriter{r: r, infer: infer}
}

// levelPrefixes are the level markers of standard-library log lines ("[WARN] memberlist: ...").
var levelPrefixes = []struct {
	prefix string
	level  hclog.Level
}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info}, {"[WARN]", hclog.Warn}, {"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error}}

// hclogWriter logs each line written to it.
type hclogWriter struct {
	r     *hclogBridge
	infer bool
}

func (w *hclogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := hclog.Info
	if w.infer {
		for _, p := range levelPrefixes {
			if i := strings.Index(line, p.prefix); i >= 0 {
				level, line = p.level, strings.TrimSpace(line[i+len(p.prefix):])
				break
			}
		}
	}
	w.r.Log(level, line)
	return len(p), nil
}

// repeatLimiter decides which of a stream of repeated log records to keep: the first of each
// key, then at most one per interval, which reports how many were dropped since the last one
// kept. Nothing is logged when the repeats stop, so the last count may go unreported; the
// next occurrence, however late, reports it. Safe for concurrent use.
type repeatLimiter struct {
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	keys map[repeatKey]*repeatState
}

// repeatKey is what makes two records the same: component, message and the peer they are
// about. Other arguments (the error text, a backoff time, the partition) may differ, so one
// line stands for the peer's failures in every partition.
type repeatKey struct{ component, msg, peer string }

type repeatState struct {
	logged     time.Time // when a record of this key was last kept
	suppressed int       // dropped since then
}

// maxRepeatKeys bounds the limiter's memory: peers come and go with their incarnations.
const maxRepeatKeys = 1024

func newRepeatLimiter(interval time.Duration, now func() time.Time) *repeatLimiter {
	return &repeatLimiter{interval: interval, now: now, keys: make(map[repeatKey]*repeatState)}
}

// admit reports whether a record of key is to be logged now and, if so, how many records of
// that key it dropped since the last one logged.
func (l *repeatLimiter) admit(key repeatKey) (emit bool, suppressed int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= maxRepeatKeys {
			l.forgetIdle(now)
		}
		l.keys[key] = &repeatState{logged: now}
		return true, 0
	}
	if now.Sub(st.logged) < l.interval {
		st.suppressed++
		return false, 0
	}
	suppressed, st.logged, st.suppressed = st.suppressed, now, 0
	return true, suppressed
}

// forgetIdle drops the keys not logged for an interval (their pending count is lost), or all
// of them if that frees nothing.
func (l *repeatLimiter) forgetIdle(now time.Time) {
	for k, st := range l.keys {
		if now.Sub(st.logged) >= l.interval {
			delete(l.keys, k)
		}
	}
	if len(l.keys) >= maxRepeatKeys {
		clear(l.keys)
	}
}
