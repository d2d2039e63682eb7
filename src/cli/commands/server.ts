// Running the service and bringing its database up to date: always in the CLI's own process.
import { migrate } from '../../platform/db/migrate.ts';
import { openDatabase } from '../../platform/db/open.ts';
import { runServer, type Role } from '../../server.ts';
import { startAdminSocket } from '../admin-socket.ts';
import { text, UsageError, type Command } from '../command.ts';

export const serverCommands: Record<string, Command> = {
  serve: {
    usage: 'serve [--role all|api|worker]',
    description: 'run the service: the HTTP API, the SMTP listeners and the workers of the role',
    options: {
      role: { type: 'string', default: 'all', help: 'all, api (listeners only) or worker (background work only)' },
    },
    local: true,
    async run({ config, values, execute }) {
      const role = text(values, 'role');
      if (!['all', 'api', 'worker'].includes(role)) throw new UsageError('--role is all, api or worker');
      // On the embedded database, the CLI's other commands are run here while the server holds it.
      await runServer(config, role as Role, (db) =>
        startAdminSocket(config.dataDir, (argv) => execute(argv, db, config)),
      );
    },
  },

  migrate: {
    usage: 'migrate [--contract]',
    description:
      'apply the pending expand migrations (serve does it at start too); --contract applies the contract ones',
    options: {
      contract: {
        type: 'boolean',
        default: false,
        help: 'also apply the contract migrations: run once no process of an older release uses the database',
      },
    },
    local: true,
    async run({ config, values }) {
      const db = await openDatabase(config);
      try {
        const { applied, pendingContract } = await migrate(db, { contract: values.contract === true });
        const done = applied.length
          ? `applied ${applied.length} migration(s): ${applied.join(', ')}`
          : 'database is up to date';
        return {
          json: { applied, pending_contract: pendingContract },
          text: pendingContract.length
            ? `${done}; contract migration(s) waiting for "mailroom migrate --contract": ${pendingContract.join(', ')}`
            : done,
        };
      } finally {
        await db.close();
      }
    },
  },
};
