import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

// A certificate authority made for one test run with the openssl command (.ci/run installs it): its
// certificate is what the process under test is told to trust (MAILROOM_EXTRA_CA_FILE), and it issues
// server certificates for the host names a test serves on loopback.

const run = promisify(execFile);

export interface TestCa {
  /** The CA certificate file (PEM). */
  caFile: string;
  caPem: string;
  /** A key and a certificate valid for `names` (subjectAltName DNS entries), signed by the CA. */
  issue(names: string[]): Promise<{ key: string; cert: string }>;
  close(): Promise<void>;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export async function makeTestCa(): Promise<TestCa> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-ca-'));
  const at = (name: string) => path.join(dir, name);
  await run('openssl', [
    'req',
    '-x509',
    ...EC,
    '-keyout',
    at('ca.key'),
    '-out',
    at('ca.pem'),
    '-days',
    '2',
    '-subj',
    '/CN=Mailroom Test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  let serial = 0;
  return {
    caFile: at('ca.pem'),
    caPem: await readFile(at('ca.pem'), 'utf8'),
    async issue(names) {
      const id = `leaf${++serial}`;
      await writeFile(
        at(`${id}.ext`),
        `subjectAltName=${names.map((name) => `DNS:${name}`).join(',')}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`,
      );
      await run('openssl', [
        'req',
        ...EC,
        '-keyout',
        at(`${id}.key`),
        '-out',
        at(`${id}.csr`),
        '-subj',
        `/CN=${names[0]}`,
      ]);
      await run('openssl', [
        'x509',
        '-req',
        '-in',
        at(`${id}.csr`),
        '-CA',
        at('ca.pem'),
        '-CAkey',
        at('ca.key'),
        '-CAcreateserial',
        '-out',
        at(`${id}.pem`),
        '-days',
        '2',
        '-extfile',
        at(`${id}.ext`),
      ]);
      return { key: await readFile(at(`${id}.key`), 'utf8'), cert: await readFile(at(`${id}.pem`), 'utf8') };
    },
    close: () => rm(dir, { recursive: true, force: true }),
  };
}
