package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogBridge is an hclog.Logger (hashicorp/raft's logger; its StandardLogger is memberlist's)
// written to our slog.Logger, so that the libraries' lines come out in the same stream and
// format as ours, filtered by the same level, with their component named. hclog's arguments
// are key-value pairs, as slog's are.
//
// The level is the slog handler's: SetLevel is ignored. Safe for concurrent use.
type hclogBridge struct {
	l       *slog.Logger
	name    string
	implied []any
}

// newHclog returns an hclog.Logger writing to l with component=component.
func newHclog(l *slog.Logger, component string) hclog.Logger {
	return &hclogBridge{l: l.With("component", component)}
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

func (r *hclogBridge) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || !r.l.Enabled(context.Background(), slogLevel(level)) {
		return
	}
	r.l.Log(context.Background(), slogLevel(level), msg, hclogValues(args)...)
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
	return &hclogBridge{l: r.l.With(hclogValues(args)...), name: r.name, implied: append(r.implied[:len(r.implied):len(r.implied)], args...)}
}

func (r *hclogBridge) Name() string { return r.name }

func (r *hclogBridge) Named(name string) hclog.Logger {
	if r.name != "" {
		name = r.name + "." + name
	}
	return r.ResetNamed(name)
}

func (r *hclogBridge) ResetNamed(name string) hclog.Logger {
	return &hclogBridge{l: r.l.With("logger", name), name: name, implied: r.implied}
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
