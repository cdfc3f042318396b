package relayer

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/services"
)

// Options are the relayer's settings. The keys file and the token file are read when the
// configuration loads, so that a bad file stops the process at start with a message naming
// the flag (and never its content).
type Options struct {
	KeysFile    string        // --relayer-keys
	Token       string        // --relayer-token
	TokenFile   string        // --relayer-token-file
	RPC         []string      // --near-rpc
	RPCHTTP     bool          // --near-rpc-allow-private-http
	Retention   time.Duration // --relayer-retention
	MaxInFlight int           // --relayer-max-in-flight

	keys *Keys // loaded from KeysFile
}

// Keys returns the loaded keys (nil: no keys file).
func (o Options) Keys() *Keys { return o.keys }

// Settings are the relayer's options.
var Settings = config.NewSection("NEAR relayer", func(o *Options) []config.Option {
	return []config.Option{
		config.String(&o.KeysFile, "relayer-keys", "", `JSON file {"accounts":[{"account_id","keys":["ed25519:<base58 secret key>",…]}]} of the relayer's access keys; enables the relayer (refused if other users can read it)`).Checked(o.loadKeys),
		config.String(&o.Token, "relayer-token", "", "bearer token of the relayer paths; empty disables them (prefer --relayer-token-file)"),
		config.String(&o.TokenFile, "relayer-token-file", "", "file holding the relayer token (not shown in ps)").Checked(o.loadToken),
		config.List(&o.RPC, "near-rpc", "URL", "NEAR JSON-RPC URLs, tried in order: https, or plain http to a loopback address; with two or more, a transaction is signed again only when two agree it is dead").Checked(o.checkRPC),
		config.Bool(&o.RPCHTTP, "near-rpc-allow-private-http", "false", "allow --near-rpc URLs of plain http to a private network address, or a host name on your word that it is one (never to a public address)"),
		config.Duration(&o.Retention, "relayer-retention", "168h", "how long terminal intent records are kept").Checked(config.Positive(&o.Retention)),
		config.Int(&o.MaxInFlight, "relayer-max-in-flight", "32", "signed transactions per access key not yet seen in a block").Checked(config.AtLeast(&o.MaxInFlight, 1)),
	}
})

// Load reads the keys and token files and checks the RPC URLs, as loading the configuration
// does: for a configuration built in code (tests).
func (o *Options) Load() error {
	return errors.Join(o.loadKeys(), o.loadToken(), o.checkRPC())
}

func (o *Options) loadKeys() error {
	o.keys = nil
	if o.KeysFile == "" {
		return nil
	}
	k, err := LoadKeys(o.KeysFile)
	if err != nil {
		return err
	}
	o.keys = k
	return nil
}

func (o *Options) loadToken() error {
	if o.TokenFile == "" {
		return nil
	}
	if o.Token != "" {
		return errors.New("give --relayer-token or --relayer-token-file, not both")
	}
	t, err := config.ReadToken(o.TokenFile)
	o.Token = t
	return err
}

func (o *Options) checkRPC() error {
	if len(o.RPC) == 0 {
		if o.KeysFile != "" {
			return errors.New("--relayer-keys needs the NEAR RPC URLs to send to")
		}
		return nil
	}
	for _, u := range o.RPC {
		if err := config.CheckEndpoint(u, o.RPCHTTP); err != nil {
			return err
		}
	}
	_, err := near.NewClient(o.RPC)
	return err
}

// codes are the error codes of the relayer's actors and routes, with their HTTP statuses.
var codes = map[string]int{
	"relayer_disabled":     http.StatusForbidden,
	"unknown_relayer":      http.StatusNotFound,
	"unknown_intent":       http.StatusNotFound,
	"idempotency_conflict": http.StatusConflict,
	"queue_full":           http.StatusTooManyRequests,
	"unsupported_action":   http.StatusBadRequest,
	"invalid_delegate":     http.StatusBadRequest,
	"policy_denied":        http.StatusForbidden,
	"budget_exceeded":      http.StatusTooManyRequests,
}

// Service is the NEAR relayer transaction manager (the contract's "Relayer transaction
// manager").
func Service() services.Service {
	return services.Service{
		Name:     "relayer",
		Settings: Settings,
		Kinds: func(cfg config.Config, env services.Env) []actors.Kind {
			o := Settings.Get(cfg)
			if config.WeakToken(o.Token) {
				slog.Warn("the relayer token is weak: shorter than 32 bytes", "min_bytes", config.MinTokenBytes)
			}
			m := NewMetrics(env.Registerer)
			kc := Config{Keys: o.keys, Caller: env.Caller, MaxInFlight: o.MaxInFlight, Retention: o.Retention, Metrics: m}
			if len(o.RPC) > 0 {
				// The URLs were checked at load.
				if c, err := near.NewClient(o.RPC, near.WithObserver(m.ObserveRPC)); err == nil {
					kc.RPC = c
				}
			}
			return []actors.Kind{Kind(kc), IndexKind(), BudgetKind()}
		},
		Routes: routes,
		Codes:  codes,
		Figures: []services.Figure{
			{Label: "relayer intents queued", Metric: "shardkeeper_relayer_key_queued"},
			{Label: "relayer transactions in flight", Metric: "shardkeeper_relayer_key_in_flight"},
		},
	}
}
