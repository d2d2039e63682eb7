import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import type { Logger } from '../platform/logger.ts';
import { startSubmissionServer, type SubmissionServer } from './submission-server.ts';
import { loadTlsCertificate } from './tls-certificate.ts';
import { explainListenError } from '../platform/listen-error.ts';

/**
 * The port of the STARTTLS listener on the embedded default (no DATABASE_URL, no
 * MAILROOM_SUBMISSION_PORT), so that a newcomer can try SMTP at once; on PostgreSQL it is off unless set.
 */
export const EMBEDDED_SUBMISSION_PORT = 2587;

/** Starts the submission listeners the settings ask for (none, one or both). */
export async function startSubmission(options: {
  db: Database;
  config: Config;
  log: Logger;
}): Promise<SubmissionServer[]> {
  const { db, config, log } = options;
  const byDefault = config.submissionPort === undefined && db.kind === 'pglite';
  const startTls = byDefault ? EMBEDDED_SUBMISSION_PORT : config.submissionPort;
  const implicit = config.submissionsPort;
  const wanted = [
    ...(typeof startTls === 'number' ? [{ port: startTls, implicitTls: false }] : []),
    ...(typeof implicit === 'number' ? [{ port: implicit, implicitTls: true }] : []),
  ];
  if (wanted.length === 0) return [];

  const tls = await loadTlsCertificate(config);
  if (tls.selfSignedPath) {
    log.warn(
      { certificate: tls.selfSignedPath },
      'SMTP submission uses a self-signed certificate; set MAILROOM_TLS_CERT_FILE and MAILROOM_TLS_KEY_FILE for a real one',
    );
  }
  const listeners: SubmissionServer[] = [];
  for (const { port, implicitTls } of wanted) {
    // The embedded default's own listener is for this machine only, whatever HOST is.
    const host = byDefault ? '127.0.0.1' : config.host;
    try {
      const listener = await startSubmissionServer({ db, config, host, port, implicitTls, tls, log });
      log.info({ host, port: listener.port, implicitTls }, 'SMTP submission listening');
      listeners.push(listener);
    } catch (error) {
      // Only the embedded default's own choice of port may be busy without stopping the service.
      if (byDefault && !implicitTls && (error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
        log.warn(
          { port },
          'SMTP submission not started: the port is in use; set MAILROOM_SUBMISSION_PORT to another port (or off)',
        );
        continue;
      }
      for (const started of listeners) await started.close();
      const setting = implicitTls ? 'MAILROOM_SUBMISSIONS_PORT' : 'MAILROOM_SUBMISSION_PORT';
      throw explainListenError(error, { what: 'SMTP submission', host, port, setting });
    }
  }
  return listeners;
}
