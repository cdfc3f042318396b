// The attestation chain: a sequential chain of events anchored on Arweave, whose confirmed
// events form a transparency log with signed checkpoints and proofs.

import { clientError } from './errors.js';
import type { CallOptions, Transport } from './http.js';
import { type Checkpoint, type LogKey, openCheckpoint, parseLogKey } from './note.js';
import { positive, seg } from './path.js';
import { type ConsistencyProof, type InclusionProof, verifyConsistency, verifyInclusion } from './proofs.js';
import { type Actor, ActorKind } from './routing.js';
import { decode, encode, shape } from './wire.js';

/** An event to append: one version of an entity. */
export interface AppendRequest {
  /** ^[A-Za-z0-9._:@-]{1,200}$ */
  entityId: string;
  /** ≥ 1. Each (entityId, ver) is accepted once. */
  ver: number;
  /** ^[a-z_]{1,32}$, a word of the caller's. */
  op: string;
  /** ^[a-z_]{1,32}$, a word of the caller's. */
  vis: string;
  /** Unix ms; by default the partition clock when the event is accepted. */
  ts?: number;
  /** The manifest's CIDv1 as the caller computed it; checked (`cid_mismatch`). */
  cid?: string;
  /** What the event attests: a JSON object. */
  manifest: Record<string, unknown>;
}

/** A version's status: queued → signed → confirmed, or failed before signing. */
export type VersionStatus = 'queued' | 'signed' | 'confirmed' | 'failed';

/** An event's status once signed. */
export type EventStatus = 'signed' | 'posted' | 'confirmed';

/** The answer of an append. */
export interface ChainAccepted {
  chain: string;
  entityId: string;
  ver: number;
  /** The CIDv1 of the manifest's canonical JSON. */
  cid: string;
  status: VersionStatus;
  createdAt: number;
}

/** An append's answer, and whether it accepted a new event (201) or was an identical repeat (200). */
export interface Appended extends ChainAccepted {
  created: boolean;
}

/** The chain's head: the last signed event, and counters. */
export interface ChainHead {
  chain: string;
  /** The last signed event's seq; 0 before the first. */
  seq: number;
  txId: string | null;
  cid: string | null;
  /** Every event up to this seq is confirmed (the tree's size). */
  confirmedSeq: number;
  /** Bundle mode: the last bundle's wrapper transaction, where a walk of the chain starts. */
  bundleTx?: string;
  queued: number;
  failed: number;
  updatedAt: number;
}

/** A signed event of the chain. */
export interface ChainEvent {
  seq: number;
  entityId: string;
  ver: number;
  cid: string;
  op: string;
  vis: string;
  ts: number;
  /** Its Arweave transaction. */
  txId: string;
  /** The previous event's transaction and manifest CID; null for seq 1. */
  prevTx: string | null;
  prevCid: string | null;
  status: EventStatus;
}

/** An entity's latest anchored version. */
export interface AnchoredEntity {
  entityId: string;
  ver: number;
  cid: string;
  txId: string;
  seq: number;
  ts: number;
}

/** One accepted version of an entity, whatever its status. */
export interface EntityVersion {
  entityId: string;
  ver: number;
  cid: string;
  status: VersionStatus;
  /** null while queued or failed. */
  txId: string | null;
  /** 0 until signed. */
  seq: number;
  ts: number;
  /** The last failure's message while failed; null otherwise. */
  error: string | null;
}

/** A proof as the server answers it: an InclusionProof or a ConsistencyProof. */
export interface ChainProof {
  seq?: number;
  size?: number;
  from?: number;
  to?: number;
  hashes: string[];
}

export const APPEND_REQUEST = shape<AppendRequest>()({
  entity_id: 'entityId',
  ver: 'ver',
  op: 'op',
  vis: 'vis',
  ts: 'ts',
  cid: 'cid',
  manifest: 'manifest',
});
export const CHAIN_ACCEPTED = shape<ChainAccepted>()({
  chain: 'chain',
  entity_id: 'entityId',
  ver: 'ver',
  cid: 'cid',
  status: 'status',
  created_at: 'createdAt',
});
export const CHAIN_HEAD = shape<ChainHead>()({
  chain: 'chain',
  seq: 'seq',
  tx_id: 'txId',
  cid: 'cid',
  confirmed_seq: 'confirmedSeq',
  bundle_tx: 'bundleTx',
  queued: 'queued',
  failed: 'failed',
  updated_at: 'updatedAt',
});
export const CHAIN_EVENT = shape<ChainEvent>()({
  seq: 'seq',
  entity_id: 'entityId',
  ver: 'ver',
  cid: 'cid',
  op: 'op',
  vis: 'vis',
  ts: 'ts',
  tx_id: 'txId',
  prev_tx: 'prevTx',
  prev_cid: 'prevCid',
  status: 'status',
});
export const ANCHORED_ENTITY = shape<AnchoredEntity>()({
  entity_id: 'entityId',
  ver: 'ver',
  cid: 'cid',
  tx_id: 'txId',
  seq: 'seq',
  ts: 'ts',
});
export const ENTITY_VERSION = shape<EntityVersion>()({
  entity_id: 'entityId',
  ver: 'ver',
  cid: 'cid',
  status: 'status',
  tx_id: 'txId',
  seq: 'seq',
  ts: 'ts',
  error: 'error',
});
export const CHAIN_PROOF = shape<ChainProof>()({ seq: 'seq', size: 'size', from: 'from', to: 'to', hashes: 'hashes' });
export const RETRIED = shape<{ requeued: number }>()({ requeued: 'requeued' });

/** The entity of the events that anchor the chain's own checkpoints. */
export const CHECKPOINT_ENTITY = 'shardkeeper.checkpoint';

/** Options of the online proof checks. */
export interface ProveOptions extends CallOptions {
  /** The log's verifier key (`shardkeeper chain log-key` prints it), or parsed. */
  logKey: string | LogKey;
}

/** `sk.chain(name)`: one attestation chain. */
export class Chain {
  private readonly path: string;
  private readonly actor: Actor;

  constructor(
    private readonly t: Transport,
    readonly name: string,
  ) {
    this.path = `/v1/chains/${seg(name, 'a chain name')}`;
    this.actor = { kind: ActorKind.chain, id: name };
  }

  /**
   * Appends a version of an entity (chain token). Repeatable by (entityId, ver): a repeat
   * with the same content is created false; other content fails with `event_conflict`.
   */
  async append(req: AppendRequest, opts?: CallOptions): Promise<Appended> {
    const a = await this.t.call(
      { method: 'POST', path: `${this.path}/events`, body: encode(APPEND_REQUEST, req), auth: 'chain', idempotent: true, actor: this.actor },
      opts,
    );
    return { ...decode<ChainAccepted>(CHAIN_ACCEPTED, a.data), created: a.status === 201 };
  }

  /** The head (seq 0 for a chain never written). */
  async head(opts?: CallOptions): Promise<ChainHead> {
    return decode<ChainHead>(CHAIN_HEAD, await this.get('/head', opts));
  }

  /** Event seq (`unknown_event` when none is signed at that seq). */
  async event(seq: number, opts?: CallOptions): Promise<ChainEvent> {
    return decode<ChainEvent>(CHAIN_EVENT, await this.get(`/events/${positive(seq, 'seq')}`, opts));
  }

  /** The entity's latest anchored version (`unknown_entity` before one is signed). */
  async entity(entityId: string, opts?: CallOptions): Promise<AnchoredEntity> {
    return decode<AnchoredEntity>(ANCHORED_ENTITY, await this.get(`/entities/${seg(entityId, 'an entity id')}`, opts));
  }

  /** Version ver of the entity, whatever its status (`unknown_version`). */
  async version(entityId: string, ver: number, opts?: CallOptions): Promise<EntityVersion> {
    const path = `/entities/${seg(entityId, 'an entity id')}/versions/${positive(ver, 'ver')}`;
    return decode<EntityVersion>(ENTITY_VERSION, await this.get(path, opts));
  }

  /**
   * The latest checkpoint: a signed note of the tree of the confirmed events, as text. Check it
   * with openCheckpoint (`chain_log_disabled` without a log key on the server, `unknown_event`
   * before an event is confirmed).
   */
  async checkpoint(opts?: CallOptions): Promise<string> {
    return (await this.t.call({ method: 'GET', path: `${this.path}/checkpoint`, idempotent: true, text: true, actor: this.actor }, opts)).data as string;
  }

  /** The proof that event seq is in the tree of the first size events. */
  async inclusionProof(seq: number, size: number, opts?: CallOptions): Promise<InclusionProof> {
    const p = decode<ChainProof>(CHAIN_PROOF, await this.get(`/proof/inclusion?seq=${positive(seq, 'seq')}&size=${positive(size, 'size')}`, opts));
    return { seq: p.seq ?? seq, size: p.size ?? size, hashes: p.hashes ?? [] };
  }

  /** The proof that the tree of the first from events is a prefix of that of the first to. */
  async consistencyProof(from: number, to: number, opts?: CallOptions): Promise<ConsistencyProof> {
    const p = decode<ChainProof>(CHAIN_PROOF, await this.get(`/proof/consistency?from=${positive(from, 'from')}&to=${positive(to, 'to')}`, opts));
    return { from: p.from ?? from, to: p.to ?? to, hashes: p.hashes ?? [] };
  }

  /** Puts the failed events back at the end of the queue (admin token), at most 10,000 a call; resolves with how many. */
  async retry(opts?: CallOptions): Promise<number> {
    const a = await this.t.call({ method: 'POST', path: `${this.path}/retry`, auth: 'admin', idempotent: true, actor: this.actor }, opts);
    return decode<{ requeued: number }>(RETRIED, a.data).requeued;
  }

  /**
   * Reads event seq, the latest checkpoint (or uses the one given) and the inclusion proof,
   * and checks them offline (verifyInclusion): the event is in the log the log key signed.
   * Trusts nothing the node says but what the checks prove.
   */
  async proveInclusion(seq: number, opts: ProveOptions & { checkpoint?: string }): Promise<{ checkpoint: Checkpoint; event: ChainEvent; proof: InclusionProof }> {
    const logKey = typeof opts.logKey === 'string' ? await parseLogKey(opts.logKey) : opts.logKey;
    const signed = opts.checkpoint ?? (await this.checkpoint(opts));
    const { size } = await openCheckpoint(signed, logKey);
    if (seq > size) throw clientError('invalid_argument', `shardkeeper: event ${seq} is not in the checkpoint's tree of ${size} events yet`);
    const [event, proof] = await Promise.all([this.event(seq, opts), this.inclusionProof(seq, size, opts)]);
    const checkpoint = await verifyInclusion({ checkpoint: signed, logKey, event, proof });
    return { checkpoint, event, proof };
  }

  /**
   * Checks that the log only grew since an older checkpoint kept earlier: reads the latest
   * checkpoint (or uses the one given as newer) and the consistency proof between them, and
   * checks them offline (verifyConsistency).
   */
  async proveConsistency(older: string, opts: ProveOptions & { newer?: string }): Promise<{ older: Checkpoint; newer: Checkpoint; proof: ConsistencyProof }> {
    const logKey = typeof opts.logKey === 'string' ? await parseLogKey(opts.logKey) : opts.logKey;
    const newer = opts.newer ?? (await this.checkpoint(opts));
    const [o, n] = [await openCheckpoint(older, logKey), await openCheckpoint(newer, logKey)];
    if (o.size > n.size) throw clientError('proof_invalid', `shardkeeper: the older checkpoint has ${o.size} events, the newer ${n.size}`);
    const proof = await this.consistencyProof(o.size, n.size, opts);
    return { ...(await verifyConsistency({ older, newer, logKey, proof })), proof };
  }

  private async get(rest: string, opts?: CallOptions): Promise<unknown> {
    return (await this.t.call({ method: 'GET', path: this.path + rest, idempotent: true, actor: this.actor }, opts)).data;
  }
}
