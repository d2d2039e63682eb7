import pg from 'pg';
import { hostLabel, type DatabaseTarget } from './hosts.ts';

// node-postgres connects to the one host of its configuration. With several hosts, Mailroom does what
// libpq does: it tries them in order until one accepts the connection and, for read-write or primary,
// takes writes. The host found is remembered, so the pool's connections all go there without trying the
// others first; a connection that fails there, or finds it read-only (a primary demoted), forgets it and
// the next connection looks again from the first host.

/** The SQLSTATE of a connection that could not be made to any host (libpq's sqlclient_unable_to_establish_sqlconnection). */
const UNABLE_TO_CONNECT = '08001';

class NoSuitableHost extends Error {
  readonly code = UNABLE_TO_CONNECT;
}

type Callback = ((error: Error) => void) | ((error: null, client: pg.Client) => void);

/**
 * A node-postgres Client class (for pg.Pool's `Client` option, and for a connection of its own) that
 * connects to the target's hosts as libpq would. Within one connection's timeout (the configuration's
 * connectionTimeoutMillis) all of it happens: the search and the connection.
 */
export function hostChoosingClient(target: DatabaseTarget): typeof pg.Client {
  const writable = target.targetSessionAttrs !== 'any';
  let chosen: number | undefined;
  let search: Promise<number> | undefined;

  // Whether a connected client's server is one this target accepts: libpq asks the same questions
  // (transaction_read_only for read-write, pg_is_in_recovery() for primary). The answer is waited for
  // within what is left of the connect timeout: a host that falls silent just after accepting must not
  // hold up the search (and every connection waiting for it) for ever.
  const accepts = async (client: pg.Client, timeoutMs: number): Promise<boolean> => {
    if (!writable) return true;
    const { rows } = await client.query<{ recovery: boolean; read_only: string }>({
      text: "SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS read_only",
      query_timeout: Math.max(1, timeoutMs),
    } as pg.QueryConfig);
    const row = rows[0]!;
    return target.targetSessionAttrs === 'primary' ? !row.recovery : row.read_only === 'off';
  };

  const configFor = (config: pg.ClientConfig, index: number, timeoutMs: number): pg.ClientConfig => ({
    ...config,
    connectionString: target.urlFor(index),
    connectionTimeoutMillis: Math.max(1, timeoutMs),
  });

  // Each host in order; the first that accepts is the answer.
  const find = async (config: pg.ClientConfig, deadline: number): Promise<number> => {
    const refusals: string[] = [];
    for (let index = 0; index < target.hosts.length; index++) {
      const label = hostLabel(target.hosts[index]!);
      const left = deadline - Date.now();
      if (left <= 0) {
        refusals.push(`${label}: not tried in time`);
        continue;
      }
      // An equal share of what is left for each host still to try: a host that does not answer at all
      // (gone without a word) does not use up the time of the ones after it.
      const share = left / (target.hosts.length - index);
      const hostDeadline = Date.now() + share;
      const probe = new pg.Client(configFor(config, index, share));
      probe.on('error', () => {});
      try {
        await probe.connect();
        if (await accepts(probe, hostDeadline - Date.now())) return index;
        refusals.push(`${label}: read-only (a standby)`);
      } catch (error) {
        refusals.push(`${label}: ${(error as Error).message}`);
      } finally {
        probe.end().catch(() => {});
      }
    }
    const kind = writable ? `${target.targetSessionAttrs} ` : '';
    throw new NoSuitableHost(`No database host accepted a ${kind}connection (${refusals.join('; ')})`);
  };

  return class HostChoosingClient extends pg.Client {
    readonly #config: pg.ClientConfig;

    constructor(config: pg.ClientConfig) {
      super({ ...config, connectionString: target.urlFor(chosen ?? 0) });
      this.#config = config;
    }

    override connect(): Promise<pg.Client>;
    override connect(callback: Callback): void;
    override connect(callback?: Callback): Promise<pg.Client> | void {
      const connected = this.#connectChosen();
      if (!callback) return connected;
      const done = callback as (error: Error | null, client?: pg.Client) => void;
      connected.then((client) => done(null, client), done);
    }

    async #connectChosen(): Promise<pg.Client> {
      const timeoutMs = this.#config.connectionTimeoutMillis || 30_000;
      const deadline = Date.now() + timeoutMs;
      let index = chosen;
      if (index === undefined) {
        // One search at a time: the connections opened meanwhile wait for its answer.
        search ??= find(this.#config, deadline).finally(() => (search = undefined));
        index = await search;
        chosen = index;
      }
      const { host, port } = target.hosts[index]!;
      const self = this as unknown as {
        host: string;
        port: number;
        connectionParameters: { host: string; port: number };
        _connectionTimeoutMillis: number;
        connection: { stream: { destroyed?: boolean } };
      };
      self.host = self.connectionParameters.host = host;
      self.port = self.connectionParameters.port = port;
      self._connectionTimeoutMillis = Math.max(1, deadline - Date.now());
      // The pool gave up on this connection during the search (its own timeout destroys the socket).
      if (self.connection.stream.destroyed) throw new NoSuitableHost('Connection terminated due to connection timeout');
      try {
        await super.connect();
        if (await accepts(this, deadline - Date.now())) return this;
      } catch (error) {
        if (chosen === index) chosen = undefined;
        throw error;
      }
      if (chosen === index) chosen = undefined;
      await this.end().catch(() => {});
      throw new NoSuitableHost(
        `The database host ${hostLabel(target.hosts[index]!)} is read-only now (no longer the primary)`,
      );
    }
  };
}
