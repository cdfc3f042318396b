package chain

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/arweave/ans104"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/names"
	"golang.org/x/mod/sumdb/note"
)

// Options are the chain's settings. The wallet and token files are read when the
// configuration loads, so that a bad file stops the process at start naming the flag.
type Options struct {
	Gateway         string        // --arweave-gateway
	GatewayHTTP     bool          // --arweave-gateway-allow-private-http
	WalletFile      string        // --arweave-wallet
	Token           string        // --chain-token
	TokenFile       string        // --chain-token-file
	MaxInFlight     int           // --chain-max-in-flight
	MaxUnconfirmed  int           // --chain-max-unconfirmed
	MaxQueued       int           // --chain-max-queued
	Confirmations   int           // --chain-confirmations
	ReorgDepth      int           // --chain-reorg-depth
	LogKeyFile      string        // --chain-log-key
	CheckpointEvery int           // --chain-checkpoint-every
	PollInterval    time.Duration // --chain-poll-interval
	MaxReward       uint64        // --chain-max-reward, winston
	Mode            string        // --chain-mode
	SignerKeyFile   string        // --chain-signer-key
	BundleInterval  time.Duration // --chain-bundle-interval
	BundleMaxItems  int           // --chain-bundle-max-items
	BundleMaxBytes  int           // --chain-bundle-max-bytes

	wallet     *arweave.Wallet
	signer     note.Signer
	itemSigner ans104.Signer
}

// Settings are the chain's options.
var Settings = config.NewSection("attestation chain", func(o *Options) []config.Option {
	return []config.Option{
		config.String(&o.Gateway, "arweave-gateway", "", "URL of the Arweave node or gateway the attestation chain anchors on: https, or plain http to a loopback address").Checked(o.checkGateway),
		config.Bool(&o.GatewayHTTP, "arweave-gateway-allow-private-http", "false", "allow --arweave-gateway to be plain http to a private network address, or a host name on your word that it is one (never to a public address)"),
		config.String(&o.WalletFile, "arweave-wallet", "", "JWK file of the RSA wallet (2048 to 4096 bits) that signs chain transactions (refused if other users can read it)").Checked(o.loadWallet),
		config.String(&o.Token, "chain-token", "", "bearer token of chain writes; empty disables them (prefer --chain-token-file)"),
		config.String(&o.TokenFile, "chain-token-file", "", "file holding the chain token (not shown in ps)").Checked(o.loadToken),
		config.Int(&o.MaxInFlight, "chain-max-in-flight", "256", "uploads (POST /tx) under way per chain; they start in seq order").Checked(config.AtLeast(&o.MaxInFlight, 1)),
		config.Int(&o.MaxUnconfirmed, "chain-max-unconfirmed", "0", "events per chain signed and not yet confirmed; signing waits while this many are (0: 10000 in l1 mode, 500000 in bundle mode, where a bundle waits minutes for its block)").Checked(config.AtLeast(&o.MaxUnconfirmed, 0)),
		config.Int(&o.MaxQueued, "chain-max-queued", strconv.Itoa(DefaultMaxQueued), "events per chain accepted and not yet signed; past it a new event answers 429 queue_full (an identical repeat is still 200), so that a chain whose gateway is down stops storing what it cannot sign (>= 1)").Checked(config.AtLeast(&o.MaxQueued, 1)),
		config.Int(&o.Confirmations, "chain-confirmations", "1", "blocks deep before an event counts as confirmed").Checked(config.AtLeast(&o.Confirmations, 1)),
		config.Int(&o.ReorgDepth, "chain-reorg-depth", "50", "bundle mode: blocks deep before a bundle's bytes are dropped; until then a reorg that drops its wrapper, confirmed or not, is repaired by posting it again (Arweave's anchors stay valid 50 blocks) (>= 1)").Checked(config.AtLeast(&o.ReorgDepth, 1)),
		config.Uint64(&o.MaxReward, "chain-max-reward", strconv.FormatUint(DefaultMaxReward, 10), "the highest reward, in winston, the chain signs a transaction for (10000000000 is 0.01 AR); an event quoted above it is not signed: a failed prepare, fee_too_high (>= 1)").Checked(o.checkMaxReward),
		config.Duration(&o.PollInterval, "chain-poll-interval", "5s", "how often a chain asks the gateway about its events not yet confirmed (an Arweave block takes about two minutes)").Checked(config.Positive(&o.PollInterval)),
		config.Int(&o.CheckpointEvery, "chain-checkpoint-every", "1000", "with --chain-log-key: anchor a signed checkpoint in each chain every this many confirmed events (0: never)").Checked(config.AtLeast(&o.CheckpointEvery, 0)),
		config.String(&o.Mode, "chain-mode", ModeL1, "l1: each event one Arweave transaction; bundle: each event an ANS-104 data item, packed into bundles of one transaction each").Checked(o.checkMode),
		config.String(&o.SignerKeyFile, "chain-signer-key", "", "bundle mode: file of the Ed25519 key that signs the data items (made by shardkeeper chain signer-key; readable by its owner only); without it the wallet signs them (a 4096-bit wallet)").Checked(o.loadSignerKey),
		config.Duration(&o.BundleInterval, "chain-bundle-interval", DefaultBundleInterval.String(), "bundle mode: the longest an event waits for its bundle; a bundle is also made once full").Checked(config.Positive(&o.BundleInterval)),
		config.Int(&o.BundleMaxItems, "chain-bundle-max-items", strconv.Itoa(DefaultBundleMaxItems), "bundle mode: the most events in one bundle (>= 1)").Checked(config.AtLeast(&o.BundleMaxItems, 1)),
		config.Int(&o.BundleMaxBytes, "chain-bundle-max-bytes", strconv.Itoa(DefaultBundleMaxBytes), "bundle mode: the most bytes of items in one bundle (a single larger item still makes a bundle of its own) (>= 1)").Checked(config.AtLeast(&o.BundleMaxBytes, 1)),
		config.String(&o.LogKeyFile, "chain-log-key", "", "file holding the signed-note private key (PRIVATE+KEY+<name>+…, made by shardkeeper chain log-key) that signs the chains' checkpoints; readable by its owner only").Checked(o.loadLogKey),
	}
})

func (o *Options) loadWallet() error {
	o.wallet = nil
	if o.WalletFile == "" {
		return nil
	}
	b, err := config.ReadSecretFile(o.WalletFile, "arweave wallet", 64<<10)
	if err != nil {
		return err
	}
	w, err := arweave.ParseWallet(b)
	if err != nil {
		return err
	}
	if bits := w.Bits(); bits < 2048 || bits > 4096 {
		return fmt.Errorf("arweave wallet: a %d-bit key; Arweave wallets are 2048 to 4096 bits", bits)
	}
	if o.Gateway == "" {
		return errors.New("--arweave-wallet needs --arweave-gateway, the node to anchor on")
	}
	o.wallet = w
	return nil
}

func (o *Options) checkGateway() error {
	if o.Gateway == "" {
		return nil
	}
	return config.CheckEndpoint(o.Gateway, o.GatewayHTTP)
}

// checkMaxReward refuses 0, which would read as "no cap" while refusing every event.
func (o *Options) checkMaxReward() error {
	if o.MaxReward < 1 {
		return errors.New("must be at least 1 winston, got 0")
	}
	return nil
}

func (o *Options) loadLogKey() error {
	o.signer = nil
	if o.LogKeyFile == "" {
		return nil
	}
	b, err := config.ReadSecretFile(o.LogKeyFile, "chain log key", 4096)
	if err != nil {
		return err
	}
	s, err := note.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		return errors.New("chain log key: not a signed-note private key (make one with shardkeeper chain log-key)")
	}
	o.signer = s
	return nil
}

func (o *Options) checkMode() error {
	if o.Mode != ModeL1 && o.Mode != ModeBundle {
		return fmt.Errorf("must be %s or %s, got %q", ModeL1, ModeBundle, o.Mode)
	}
	return nil
}

// loadSignerKey reads --chain-signer-key; without one, the wallet signs the items
// (Config.withDefaults).
func (o *Options) loadSignerKey() error {
	o.itemSigner = nil
	if o.SignerKeyFile == "" {
		return nil
	}
	b, err := config.ReadSecretFile(o.SignerKeyFile, "chain signer key", 4096)
	if err != nil {
		return err
	}
	o.itemSigner, err = ParseSignerKey(b)
	return err
}

func (o *Options) loadToken() error {
	if o.TokenFile == "" {
		return nil
	}
	if o.Token != "" {
		return errors.New("give --chain-token or --chain-token-file, not both")
	}
	t, err := config.ReadToken(o.TokenFile)
	o.Token = t
	return err
}

// NamesKindName is the kind of the actor holding the chain names (package names): each chain has
// storage of its own, so names are bounded by --max-registries as registries are.
const NamesKindName = "chain-names"

// codes are the error codes of the chain's actors and routes, with their HTTP statuses.
var codes = map[string]int{
	"chain_disabled":  http.StatusForbidden,
	"registry_full":   http.StatusServiceUnavailable, // a new chain name past --max-registries
	"cid_mismatch":    http.StatusBadRequest,
	"event_conflict":  http.StatusConflict,
	"queue_full":      http.StatusTooManyRequests, // a new event past --chain-max-queued
	"unknown_event":   http.StatusNotFound,
	"unknown_entity":  http.StatusNotFound,
	"unknown_version": http.StatusNotFound,
	// Checkpoints need --chain-log-key.
	"chain_log_disabled": http.StatusNotFound,
}

// Service is the attestation chain (the contract's "Attestation chain").
func Service() services.Service {
	return services.Service{
		Name:     "chain",
		Settings: Settings,
		Kinds: func(cfg config.Config, env services.Env) []actors.Kind {
			o := Settings.Get(cfg)
			if config.WeakToken(o.Token) {
				slog.Warn("the chain token is weak: shorter than 32 bytes", "min_bytes", config.MinTokenBytes)
			}
			kc := Config{MaxInFlight: o.MaxInFlight, MaxUnconfirmed: o.MaxUnconfirmed, MaxQueued: o.MaxQueued, Confirmations: int64(o.Confirmations), ReorgDepth: int64(o.ReorgDepth),
				LogSigner: o.signer, CheckpointEvery: int64(o.CheckpointEvery), PollInterval: o.PollInterval, MaxReward: o.MaxReward,
				Mode: o.Mode, ItemSigner: o.itemSigner, BundleInterval: o.BundleInterval, BundleMaxItems: o.BundleMaxItems, BundleMaxBytes: o.BundleMaxBytes,
				Metrics: NewMetrics(env.Registerer)}
			if o.wallet != nil {
				kc.Gateway, kc.Wallet = arweave.NewClient(o.Gateway, nil), o.wallet
			}
			return []actors.Kind{Kind(kc), names.Kind(NamesKindName)}
		},
		Routes: routes,
		Codes:  codes,
	}
}

// Load reads the wallet and token files, as loading the configuration does: for a
// configuration built in code (tests).
func (o *Options) Load() error {
	return errors.Join(o.loadWallet(), o.loadToken(), o.loadLogKey(), o.loadSignerKey())
}
