// @shardkeeper/client: a typed client of shardkeeper's HTTP API (docs/api.md), for every
// runtime with fetch and Web Crypto — Node ≥ 20, Cloudflare Workers, Deno and browsers.

export { Shardkeeper, type ShardkeeperOptions } from './client.js';
export { type CallOptions, type FetchLike } from './http.js';
export {
  ShardkeeperError,
  isShardkeeperError,
  API_ERROR_CODES,
  CLIENT_ERROR_CODES,
  type ApiErrorCode,
  type ClientErrorCode,
  type ErrorCode,
} from './errors.js';
export { DEFAULT_RETRY, type RetryPolicy } from './retry.js';
export { API_VERSION } from './version.js';

export { Nonces, type Nonce, type Consumed, type ConsumeRequest, newRequestId } from './nonces.js';
export {
  Devices,
  type RegisterDeviceRequest,
  type RegisterOptions,
  type Registration,
  type DeviceRegistered,
  type Challenge,
  type VerifyRequest,
  type Verification,
  type Device,
} from './devices.js';
export { signNonce, generateDeviceKey, type PublicKeyInput, type BytesInput } from './keys.js';
export { Servers, type HeartbeatRequest, type Heartbeat, type ServerRegistered, type Server } from './servers.js';
export {
  Relayer,
  isTerminal,
  NEAR_ACTION_KINDS,
  type NearAction,
  type Intent,
  type IntentStatus,
  type IntentError,
  type Submitted,
  type SubmitRequest,
  type SubmitDelegateOptions,
  type WaitOptions,
  type RelayerStatus,
  type RelayerKey,
  type RelayerPolicy,
  type DepositBudget,
  type KeyError,
} from './relayer.js';
export {
  encodeSignedDelegate,
  encodeDelegateAction,
  delegateHash,
  signDelegate,
  signedDelegateBase64,
  type SignedDelegate,
  type SignedDelegateInput,
  type DelegateAction,
  type DelegateActionItem,
  type Amount,
} from './delegate.js';
export {
  Chain,
  CHECKPOINT_ENTITY,
  type AppendRequest,
  type Appended,
  type ChainAccepted,
  type ChainHead,
  type ChainEvent,
  type AnchoredEntity,
  type EntityVersion,
  type VersionStatus,
  type EventStatus,
  type ProveOptions,
} from './chain.js';
export {
  verifyInclusion,
  verifyConsistency,
  verifyInclusionProof,
  verifyConsistencyProof,
  attestationLeaf,
  leafHash,
  nodeHash,
  type InclusionProof,
  type ConsistencyProof,
  type AttestedEvent,
} from './proofs.js';
export { openCheckpoint, parseLogKey, parseCheckpoint, type Checkpoint, type LogKey } from './note.js';
export { partitionOf, type Routes, type Route } from './routing.js';
export { type ClusterStatus, type Member, type Partition } from './ops.js';
