// The NEAR relayer transaction manager: the caller states what to do — actions for a receiver,
// or a user's signed delegate action — and shardkeeper signs with the relayer's own access keys
// and submits to NEAR. Each intent is idempotent by its key: it lands at most once.

import { type SignedDelegateInput, signedDelegateBase64 } from './delegate.js';
import { clientError } from './errors.js';
import type { CallOptions, Transport } from './http.js';
import { seg } from './path.js';
import { decode, encode, shape } from './wire.js';

/**
 * An action in NEAR's own JSON form, as the relayer takes it. Amounts are yoctoNEAR as decimal
 * strings, `args` is base64, keys are "ed25519:<base58>".
 */
export type NearAction =
  | 'CreateAccount'
  | { Transfer: { deposit: string } }
  | { FunctionCall: { method_name: string; args: string; gas: number; deposit: string } }
  | {
      AddKey: {
        public_key: string;
        access_key: {
          nonce: 0;
          permission: 'FullAccess' | { FunctionCall: { allowance: string | null; receiver_id: string; method_names: string[] } };
        };
      };
    }
  | { DeleteKey: { public_key: string } };

/** The action kinds the relayer takes (NearAction's forms). */
export const NEAR_ACTION_KINDS = ['CreateAccount', 'Transfer', 'FunctionCall', 'AddKey', 'DeleteKey'] as const;

/** An intent's status: queued → submitted → succeeded, failed or rejected (the last three terminal). */
export type IntentStatus = 'queued' | 'submitted' | 'succeeded' | 'failed' | 'rejected';

/** Why NEAR refused a rejected intent's transaction: NEAR's error name as code. */
export interface IntentError {
  code: string;
  message: string;
}

/** An intent record. Times are Unix ms. */
export interface Intent {
  idempotencyKey: string;
  accountId: string;
  /** The access key the intent is assigned to. */
  publicKey: string;
  status: IntentStatus;
  /** The nonce of the latest signed transaction; null before the first. */
  nonce: number | null;
  /** The base58 hash of the latest signed transaction; null before the first; fixed once terminal. */
  txHash: string | null;
  /** Transactions signed for the intent: 1, or more when one was provably dead and replaced. */
  attempts: number;
  /** NEAR's execution status for succeeded and failed; null otherwise. */
  outcome: Record<string, unknown> | null;
  /** Set for rejected; null otherwise. */
  error: IntentError | null;
  createdAt: number;
  updatedAt: number;
}

/** A submit's answer: the record, and whether the submit created the intent (201) or repeated it (200). */
export interface Submitted extends Intent {
  created: boolean;
}

/** The body of a submit with actions. */
export interface SubmitRequest {
  /**
   * Names the intent (^[A-Za-z0-9._:@+=-]{1,256}$). Choose it, and keep it, before the first
   * attempt: a repeat with the same body reaches the same intent.
   */
  idempotencyKey: string;
  receiverId: string;
  /** 1 to 100 actions. */
  actions: NearAction[];
}

/** Options of a delegate submit. */
export interface SubmitDelegateOptions extends CallOptions {
  /** Default: "delegate:<base58 of the hash NEAR signs>", so the same delegate is the same intent. */
  idempotencyKey?: string;
}

/** Options of wait. */
export interface WaitOptions {
  /** How long to wait for a terminal status (default 60000); then the record as it is. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** The last error a relayer key met. */
export interface KeyError {
  code: string;
  message: string;
  at: number;
}

/** One access key of a relayer account. */
export interface RelayerKey {
  publicKey: string;
  /** The nonce its next transaction will use; null before it is known. */
  nextNonce: number | null;
  /** Accepted, unsigned intents. */
  queued: number;
  /** Signed, non-terminal intents. */
  inFlight: number;
  lastError: KeyError | null;
}

/** A rolling budget of the deposits of the intents accepted in any window. */
export interface DepositBudget {
  /** yoctoNEAR. */
  amount: string;
  /** A Go duration, e.g. "24h0m0s". */
  window: string;
}

/** What a relayer account's intents may do; null for a rule that is absent (anything allowed). */
export interface RelayerPolicy {
  receivers: string[] | null;
  actions: string[] | null;
  methods: string[] | null;
  maxDeposit: string | null;
  depositBudget: DepositBudget | null;
}

/** A relayer account's keys and policy. */
export interface RelayerStatus {
  accountId: string;
  keys: RelayerKey[];
  policy: RelayerPolicy;
  /** With a deposit budget: what the intents accepted in the current window attach (yocto). */
  budgetUsed?: string;
}

/** The body of a submit, either form. */
export interface SubmitBody {
  idempotencyKey?: string;
  receiverId?: string;
  actions?: NearAction[];
  signedDelegate?: string;
}

export const SUBMIT_REQUEST = shape<SubmitBody>()({
  idempotency_key: 'idempotencyKey',
  receiver_id: 'receiverId',
  actions: 'actions',
  signed_delegate: 'signedDelegate',
});
export const INTENT_ERROR = shape<IntentError>()({ code: 'code', message: 'message' });
export const INTENT = shape<Intent>()({
  idempotency_key: 'idempotencyKey',
  account_id: 'accountId',
  public_key: 'publicKey',
  status: 'status',
  nonce: 'nonce',
  tx_hash: 'txHash',
  attempts: 'attempts',
  outcome: 'outcome',
  error: { name: 'error', shape: INTENT_ERROR },
  created_at: 'createdAt',
  updated_at: 'updatedAt',
});
export const KEY_ERROR = shape<KeyError>()({ code: 'code', message: 'message', at: 'at' });
export const RELAYER_KEY = shape<RelayerKey>()({
  public_key: 'publicKey',
  next_nonce: 'nextNonce',
  queued: 'queued',
  in_flight: 'inFlight',
  last_error: { name: 'lastError', shape: KEY_ERROR },
});
export const DEPOSIT_BUDGET = shape<DepositBudget>()({ amount: 'amount', window: 'window' });
export const RELAYER_POLICY = shape<RelayerPolicy>()({
  receivers: 'receivers',
  actions: 'actions',
  methods: 'methods',
  max_deposit: 'maxDeposit',
  deposit_budget: { name: 'depositBudget', shape: DEPOSIT_BUDGET },
});
export const RELAYER_STATUS = shape<RelayerStatus>()({
  account_id: 'accountId',
  keys: { name: 'keys', shape: RELAYER_KEY, list: true },
  policy: { name: 'policy', shape: RELAYER_POLICY },
  budget_used: 'budgetUsed',
});

/** Whether an intent is succeeded, failed or rejected: it will not change any more. */
export function isTerminal(intent: Pick<Intent, 'status'>): boolean {
  return intent.status === 'succeeded' || intent.status === 'failed' || intent.status === 'rejected';
}

/** The longest the server holds a long poll (it cuts longer waits to this). */
const MAX_HOLD_MS = 30_000;

/** `sk.relayer(accountId)`: the intents of one relayer account (relayer token). */
export class Relayer {
  private readonly path: string;

  constructor(
    private readonly t: Transport,
    readonly accountId: string,
  ) {
    this.path = `/v1/relayers/${seg(accountId, 'a relayer account')}`;
  }

  /**
   * Submits an intent: the relayer signs a transaction to receiverId with one of the account's
   * keys and submits it to NEAR. Repeatable by its idempotency key, so every failure is retried
   * like a read's; a retry after a lost answer reports created false. The same key with another
   * body fails with `idempotency_conflict`; `policy_denied` (403) and `budget_exceeded` (429)
   * are the account's policy and are not retried.
   */
  submit(req: SubmitRequest, opts?: CallOptions): Promise<Submitted> {
    return this.post(encode(SUBMIT_REQUEST, req), opts);
  }

  /**
   * Submits a user's signed delegate action (NEP-366): its bytes, their base64, a plain
   * SignedDelegate or a near-api-js SignedDelegate object. The relayer wraps it in a
   * transaction to its sender. Fails with `invalid_delegate` when it does not decode, its
   * signature does not verify, or its max_block_height has passed.
   */
  submitDelegate(signedDelegate: SignedDelegateInput, opts: SubmitDelegateOptions = {}): Promise<Submitted> {
    const body = encode(SUBMIT_REQUEST, { idempotencyKey: opts.idempotencyKey, signedDelegate: signedDelegateBase64(signedDelegate) });
    return this.post(body, opts);
  }

  private async post(body: Record<string, unknown>, opts?: CallOptions): Promise<Submitted> {
    const a = await this.t.call({ method: 'POST', path: `${this.path}/intents`, body, auth: 'relayer', idempotent: true }, opts);
    return { ...decode<Intent>(INTENT, a.data), created: a.status === 201 };
  }

  /** Reads an intent (`unknown_intent` when never submitted or past its retention). */
  get(idempotencyKey: string, opts?: CallOptions): Promise<Intent> {
    return this.read(idempotencyKey, 0, opts);
  }

  /**
   * Waits until the intent is terminal, or timeoutMs passes, and resolves with the record as
   * it is then — check isTerminal. Each request is a long poll the server holds until the
   * intent is terminal (up to 30 s), so waiting costs one request per 30 s, not a poll loop.
   */
  async wait(idempotencyKey: string, opts: WaitOptions = {}): Promise<Intent> {
    const timeoutMs = opts.timeoutMs ?? 60_000;
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
      throw clientError('invalid_argument', `wait: timeoutMs must be a finite number of ms >= 0, got ${timeoutMs}`);
    }
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hold = Math.max(0, Math.min(MAX_HOLD_MS, deadline - Date.now()));
      const intent = await this.read(idempotencyKey, hold, opts.signal ? { signal: opts.signal } : {});
      if (isTerminal(intent) || Date.now() >= deadline) return intent;
    }
  }

  private async read(idempotencyKey: string, holdMs: number, opts?: CallOptions): Promise<Intent> {
    const wait = holdMs > 0 ? `?wait=${Math.ceil(holdMs)}ms` : '';
    const a = await this.t.call(
      {
        method: 'GET',
        path: `${this.path}/intents/${seg(idempotencyKey, 'an idempotency key')}${wait}`,
        auth: 'relayer',
        idempotent: true,
        holdMs,
      },
      opts,
    );
    return decode<Intent>(INTENT, a.data);
  }

  /** The account's keys (next nonce, queues, last error), its policy and budget use. */
  async status(opts?: CallOptions): Promise<RelayerStatus> {
    const a = await this.t.call({ method: 'GET', path: this.path, auth: 'relayer', idempotent: true }, opts);
    return decode<RelayerStatus>(RELAYER_STATUS, a.data);
  }
}
