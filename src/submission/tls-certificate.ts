import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { generate } from 'selfsigned';
import type { Config } from '../platform/config.ts';

// The certificate of the submission listeners: the operator's (MAILROOM_TLS_CERT_FILE and
// MAILROOM_TLS_KEY_FILE), or else a self-signed one made on the first start and kept in the data
// directory, so that every later start (and every client that pinned it) sees the same one. A
// self-signed certificate encrypts but proves nothing: clients must be told to accept it.

export interface TlsCertificate {
  key: string;
  cert: string;
  /** Where the self-signed certificate is kept; undefined for the operator's own. */
  selfSignedPath: string | undefined;
}

export async function loadTlsCertificate(config: Config): Promise<TlsCertificate> {
  if (config.tlsCertFile !== undefined && config.tlsKeyFile !== undefined) {
    const [cert, key] = await Promise.all([readFile(config.tlsCertFile, 'utf8'), readFile(config.tlsKeyFile, 'utf8')]);
    return { cert, key, selfSignedPath: undefined };
  }
  const dir = path.resolve(config.dataDir, 'tls');
  // Key and certificate in one file, so that they are written (and replaced) together.
  const pemPath = path.join(dir, 'submission.pem');
  try {
    return { ...splitPem(await readFile(pemPath, 'utf8')), selfSignedPath: pemPath };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const notAfter = new Date();
  notAfter.setFullYear(notAfter.getFullYear() + 10);
  const name = config.heloName ?? hostname();
  const pems = await generate([{ name: 'commonName', value: name }], {
    keySize: 2048,
    algorithm: 'sha256',
    notAfterDate: notAfter,
    extensions: [
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: name },
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  });
  await mkdir(dir, { recursive: true });
  // Written beside, then renamed: a process starting at the same time reads a whole file or none.
  const temporary = `${pemPath}.${process.pid}.tmp`;
  await writeFile(temporary, `${pems.private.trim()}\n${pems.cert.trim()}\n`, { mode: 0o600 });
  await rename(temporary, pemPath);
  return { cert: pems.cert, key: pems.private, selfSignedPath: pemPath };
}

function splitPem(pem: string): { key: string; cert: string } {
  const key = /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]+?-----END [A-Z ]*PRIVATE KEY-----/.exec(pem)?.[0];
  const cert = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(pem)?.[0];
  if (!key || !cert) throw new Error('The kept submission certificate is damaged: delete it to make a new one');
  return { key, cert };
}
