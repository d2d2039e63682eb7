import type { Config } from '../config.ts';
import type { Database } from './database.ts';
import { openPostgres } from './postgres.ts';
import { openPGliteDirectory } from './pglite.ts';

/** The database the configuration names: PostgreSQL when DATABASE_URL is set, else PGlite on disk. */
export function openDatabase(config: Config): Promise<Database> {
  if (config.databaseUrl)
    return Promise.resolve(
      openPostgres(config.databaseUrl, config.dbPoolSize, {
        connectTimeoutMs: config.dbConnectTimeoutMs,
        statementTimeoutMs: config.dbStatementTimeoutMs,
        lockTimeoutMs: config.dbLockTimeoutMs,
        idleInTransactionTimeoutMs: config.dbIdleTransactionTimeoutMs,
        pooler: config.dbPooler,
        listenUrl: config.dbListenUrl,
      }),
    );
  return openPGliteDirectory(config.dataDir);
}
