// The server registry: servers announce themselves with heartbeats; clients list the live ones.

import type { CallOptions, Transport } from './http.js';
import { seg } from './path.js';
import { type Actor, ActorKind } from './routing.js';
import { decode, encode, shape } from './wire.js';

/** The body of a registration or heartbeat. Every heartbeat replaces all three fields. */
export interface HeartbeatRequest {
  /** Required, at most 256 bytes. */
  address: string;
  /** At most 64 bytes; a heartbeat without it clears it. */
  region?: string;
  /** A JSON object of at most 4 KiB; a heartbeat without it clears it. */
  meta?: Record<string, unknown>;
}

/** The answer of a registration or heartbeat. Times are Unix ms. */
export interface ServerRegistered {
  serverId: string;
  registeredAt: number;
  lastSeen: number;
}

/** A heartbeat's answer, and whether it registered the server (201) or was a heartbeat of a live one (200). */
export interface Heartbeat extends ServerRegistered {
  created: boolean;
}

/** One live server of a registry. */
export interface Server {
  serverId: string;
  address: string;
  /** "" when none was given. */
  region: string;
  /** {} when none was given. */
  meta: Record<string, unknown>;
  registeredAt: number;
  lastSeen: number;
}

export const HEARTBEAT_REQUEST = shape<HeartbeatRequest>()({ address: 'address', region: 'region', meta: 'meta' });
export const SERVER_REGISTERED = shape<ServerRegistered>()({
  server_id: 'serverId',
  registered_at: 'registeredAt',
  last_seen: 'lastSeen',
});
export const SERVER = shape<Server>()({
  server_id: 'serverId',
  address: 'address',
  region: 'region',
  meta: 'meta',
  registered_at: 'registeredAt',
  last_seen: 'lastSeen',
});
export const SERVER_LIST = shape<{ servers: Server[] }>()({ servers: { name: 'servers', shape: SERVER, list: true } });

/** `sk.servers(registry)`: one server registry. */
export class Servers {
  private readonly path: string;
  private readonly actor: Actor;

  constructor(
    private readonly t: Transport,
    readonly registry: string,
  ) {
    this.path = `/v1/servers/${seg(registry, 'a registry name')}`;
    this.actor = { kind: ActorKind.servers, id: registry };
  }

  /**
   * Registers a server or records its heartbeat (with the servers token when the node has
   * one). Repeatable: a retry after a lost answer may report created false for the entry its
   * first attempt created.
   */
  async heartbeat(serverId: string, req: HeartbeatRequest, opts?: CallOptions): Promise<Heartbeat> {
    const a = await this.t.call(
      {
        method: 'PUT',
        path: `${this.path}/${seg(serverId, 'a server id')}`,
        body: encode(HEARTBEAT_REQUEST, req),
        auth: 'servers',
        idempotent: true,
        actor: this.actor,
      },
      opts,
    );
    return { ...decode<ServerRegistered>(SERVER_REGISTERED, a.data), created: a.status === 201 };
  }

  /** The servers seen within the registry's server TTL, in serverId order. */
  async list(opts?: CallOptions): Promise<Server[]> {
    const a = await this.t.call({ method: 'GET', path: this.path, idempotent: true, actor: this.actor }, opts);
    return decode<{ servers: Server[] }>(SERVER_LIST, a.data).servers ?? [];
  }

  /** Removes a server (admin token); a retry after a lost answer may fail with `unknown_server`. */
  async delete(serverId: string, opts?: CallOptions): Promise<void> {
    await this.t.call(
      { method: 'DELETE', path: `${this.path}/${seg(serverId, 'a server id')}`, auth: 'admin', idempotent: true, actor: this.actor },
      opts,
    );
  }
}
