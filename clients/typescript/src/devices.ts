// The device attestation registry: devices register an Ed25519 key and prove they hold it by
// signing single-use challenges.

import { clientError } from './errors.js';
import type { CallOptions, Transport } from './http.js';
import { type BytesInput, type PublicKeyInput, bytesBase64, publicKeyBase64 } from './keys.js';
import { newRequestId } from './nonces.js';
import { seg } from './path.js';
import { type Actor, ActorKind } from './routing.js';
import { decode, encode, shape } from './wire.js';

/** The body of a registration. */
export interface RegisterDeviceRequest {
  deviceId: string;
  version: string;
  platform: string;
  buildHash: string;
  /** The device's Ed25519 public key. */
  publicKey: PublicKeyInput;
  /**
   * With signature, the proof of the current key when a live device registers another one: a
   * challenge issued to this device…
   */
  nonce?: string;
  /** …and the current key's signature over it (see signNonce). The proof consumes the nonce. */
  signature?: BytesInput;
}

/** Options of a registration. */
export interface RegisterOptions extends CallOptions {
  /**
   * Send the admin token: it replaces the proof of the current key when a device changes its
   * key (one that lost its key, say). Off by default, so that a client holding the admin token
   * never changes a key without meaning to.
   */
  useAdminToken?: boolean;
}

/** The answer of a registration. Times are Unix ms. */
export interface DeviceRegistered {
  deviceId: string;
  registeredAt: number;
  lastSeen: number;
}

/** A registration's answer, and whether it created the device (201) or re-registered it (200). */
export interface Registration extends DeviceRegistered {
  created: boolean;
}

/** A challenge: the nonce to sign, and when it expires (Unix ms). */
export interface Challenge {
  nonce: string;
  expiresAt: number;
}

/** The body of a verify. */
export interface VerifyRequest {
  deviceId: string;
  /** The nonce exactly as the challenge returned it. */
  nonce: string;
  /** The Ed25519 signature of the nonce's UTF-8 bytes (see signNonce). */
  signature: BytesInput;
  /**
   * Makes the verify safe to repeat: a verify of a nonce this request id consumed is answered
   * the first outcome again. Generated when absent, the same on every attempt of the call.
   * ^[A-Za-z0-9_-]{1,128}$.
   */
  requestId?: string;
}

/** The answer of a successful verify. */
export interface Verification {
  verified: boolean;
  deviceId: string;
  verifiedAt: number;
}

/** A device as the registry holds it. */
export interface Device {
  deviceId: string;
  version: string;
  platform: string;
  buildHash: string;
  registeredAt: number;
  lastSeen: number;
  /** Its unexpired, unused challenges. */
  pendingChallenges: number;
}

export const REGISTER_REQUEST = shape<RegisterDeviceRequest>()({
  device_id: 'deviceId',
  version: 'version',
  platform: 'platform',
  build_hash: 'buildHash',
  public_key: 'publicKey',
  nonce: 'nonce',
  signature: 'signature',
});
export const DEVICE_REGISTERED = shape<DeviceRegistered>()({
  device_id: 'deviceId',
  registered_at: 'registeredAt',
  last_seen: 'lastSeen',
});
export const CHALLENGE_REQUEST = shape<{ deviceId: string }>()({ device_id: 'deviceId' });
export const CHALLENGE = shape<Challenge>()({ nonce: 'nonce', expires_at: 'expiresAt' });
export const VERIFY_REQUEST = shape<VerifyRequest>()({
  device_id: 'deviceId',
  nonce: 'nonce',
  signature: 'signature',
  request_id: 'requestId',
});
export const VERIFICATION = shape<Verification>()({ verified: 'verified', device_id: 'deviceId', verified_at: 'verifiedAt' });
export const DEVICE = shape<Device>()({
  device_id: 'deviceId',
  version: 'version',
  platform: 'platform',
  build_hash: 'buildHash',
  registered_at: 'registeredAt',
  last_seen: 'lastSeen',
  pending_challenges: 'pendingChallenges',
});

/** `sk.devices(registry)`: one device attestation registry. */
export class Devices {
  private readonly path: string;
  private readonly actor: Actor;

  constructor(
    private readonly t: Transport,
    readonly registry: string,
  ) {
    this.path = `/v1/attest/${seg(registry, 'a registry name')}`;
    this.actor = { kind: ActorKind.devices, id: registry };
  }

  /**
   * Registers a device (created) or re-registers it. Repeatable. Another key for a live device
   * needs nonce and signature (a proof by the current key) or `useAdminToken`; without either it
   * fails with `device_exists`.
   */
  async register(req: RegisterDeviceRequest, opts: RegisterOptions = {}): Promise<Registration> {
    if (opts.useAdminToken && !this.t.hasToken('admin')) {
      // Without it the node would answer device_exists, which says nothing of the cause.
      throw clientError('invalid_argument', 'register with useAdminToken: the client has no adminToken');
    }
    const body = encode(REGISTER_REQUEST, {
      ...req,
      publicKey: await publicKeyBase64(req.publicKey),
      signature: req.signature === undefined ? undefined : bytesBase64(req.signature, 64, 'a signature'),
    });
    const a = await this.t.call(
      {
        method: 'POST',
        path: `${this.path}/register`,
        body,
        idempotent: true,
        actor: this.actor,
        ...(opts.useAdminToken ? { auth: 'admin' as const } : {}),
      },
      opts,
    );
    return { ...decode<DeviceRegistered>(DEVICE_REGISTERED, a.data), created: a.status === 201 };
  }

  /**
   * Issues a challenge for a registered device. Not repeatable: after a network failure that
   * may have reached the server the call fails (a lost challenge counts toward the device's
   * pending ones until it expires). `too_many_pending` (429) is retried after its Retry-After.
   */
  async challenge(deviceId: string, opts?: CallOptions): Promise<Challenge> {
    const a = await this.t.call(
      { method: 'POST', path: `${this.path}/challenge`, body: encode(CHALLENGE_REQUEST, { deviceId }), actor: this.actor },
      opts,
    );
    return decode<Challenge>(CHALLENGE, a.data);
  }

  /**
   * Checks a signed challenge. The first attempt that reaches the server consumes the nonce
   * whatever its outcome; the request id makes a retry after a lost answer get that outcome.
   * Fails with `invalid_signature` (401), `nonce_used` (409), `nonce_expired` (410) or
   * `unknown_nonce` (404).
   */
  async verify(req: VerifyRequest, opts?: CallOptions): Promise<Verification> {
    const body = encode(VERIFY_REQUEST, {
      ...req,
      signature: bytesBase64(req.signature, 64, 'a signature'),
      requestId: req.requestId || newRequestId(),
    });
    const a = await this.t.call({ method: 'POST', path: `${this.path}/verify`, body, idempotent: true, actor: this.actor }, opts);
    return decode<Verification>(VERIFICATION, a.data);
  }

  /** Reads a device (`unknown_device` when it is not live). */
  async get(deviceId: string, opts?: CallOptions): Promise<Device> {
    const a = await this.t.call(
      { method: 'GET', path: `${this.path}/devices/${seg(deviceId, 'a device id')}`, idempotent: true, actor: this.actor },
      opts,
    );
    return decode<Device>(DEVICE, a.data);
  }

  /**
   * Removes a device and its unused challenges (admin token). A call retried after a lost
   * answer may fail with `unknown_device` because its first attempt deleted it.
   */
  async delete(deviceId: string, opts?: CallOptions): Promise<void> {
    await this.t.call(
      { method: 'DELETE', path: `${this.path}/devices/${seg(deviceId, 'a device id')}`, auth: 'admin', idempotent: true, actor: this.actor },
      opts,
    );
  }
}
