// Where a benchmark's database time goes: with STATEMENTS=1, the statements that took the most time in
// a phase, from PostgreSQL's pg_stat_statements (calls, total and mean time, rows). The extension has to
// be preloaded on the server (shared_preload_libraries = 'pg_stat_statements', then a restart) and
// created in the benchmark's database, which is made from template1:
//
//   psql -d template1 -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements'
//
// Times are wall-clock inside PostgreSQL: on a busy 2-core machine they include waiting for a core, so
// compare statements with each other, not with the phase's length.
import type pg from 'pg';

export const STATEMENTS = process.env.STATEMENTS === '1';

/** Starts a phase: forgets what the statistics held. */
export async function resetStatements(db: pg.Client): Promise<void> {
  if (STATEMENTS) await db.query('SELECT pg_stat_statements_reset()');
}

/** Prints the `top` statements of the phase since the last reset, most total time first. */
export async function printStatements(db: pg.Client, phase: string, top = 12): Promise<void> {
  if (!STATEMENTS) return;
  const { rows } = await db.query<{ calls: string; total: number; mean: number; rows: string; query: string }>(
    `SELECT calls, total_exec_time AS total, mean_exec_time AS mean, rows,
            left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS query
       FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY total_exec_time DESC LIMIT $1`,
    [top],
  );
  console.log(`statements, ${phase}:    calls   total ms   mean ms     rows`);
  for (const row of rows) {
    console.log(
      `  ${row.calls.padStart(8)} ${row.total.toFixed(0).padStart(10)} ${row.mean.toFixed(3).padStart(9)} ${row.rows.padStart(8)}  ${row.query}`,
    );
  }
}
